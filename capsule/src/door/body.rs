//! Reading a request body, and the bounds on what bodies may hold: one body at most the door's
//! limit, every body being read at once at most the body budget, each read within a deadline.
//! A hostile client can open many connections, and each could otherwise make the door buffer
//! a body of the limit's size: the budget is what keeps their sum bounded.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::CONTENT_LENGTH;
use hyper::HeaderMap;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::error::HttpRefusal;

/// The bodies being read at once hold at most this much, or the door's limit when that is
/// larger (so one body of the limit's size can always be read).
pub const BUDGET: usize = 64 << 20;
/// How long a client may take to send a body once its headers are in. Generous on loopback,
/// where even the largest body takes well under a second; it keeps a client that trickles a
/// body from holding its share of the budget for ever.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// The budget is counted in KiB, so the largest limit fits a semaphore's `u32` permits.
const UNIT: usize = 1 << 10;

/// A body read whole, and its share of the budget: released when dropped, once the body and
/// what was parsed from it are done with.
pub struct Read {
    pub bytes: Bytes,
    pub share: OwnedSemaphorePermit,
}

pub struct BodyReader {
    limit: usize,
    budget: Arc<Semaphore>,
    /// The budget's size in units, the most one body may ask for.
    units: u32,
}

fn units(bytes: usize) -> u32 {
    u32::try_from(bytes.div_ceil(UNIT)).unwrap_or(u32::MAX)
}

impl BodyReader {
    pub fn new(limit: usize) -> BodyReader {
        let units = units(BUDGET.max(limit));
        BodyReader {
            limit,
            budget: Arc::new(Semaphore::new(units as usize)),
            units,
        }
    }

    /// Reads the body whole. A declared length past the limit is refused before a byte is
    /// read; a body without one takes the limit's share of the budget, as it may be that long.
    pub async fn read(&self, headers: &HeaderMap, body: Incoming) -> Result<Read, HttpRefusal> {
        // hyper has refused a malformed content-length before the door sees the request.
        let declared = headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let expected = match declared {
            Some(n) if n > self.limit as u64 => return Err(HttpRefusal::too_large(self.limit)),
            Some(n) => n as usize,
            None => self.limit,
        };
        let share = self
            .budget
            .clone()
            .acquire_many_owned(units(expected).clamp(1, self.units))
            .await
            // The semaphore is never closed.
            .map_err(|_| HttpRefusal::too_large(self.limit))?;
        let bytes = tokio::time::timeout(DEADLINE, self.collect(body, declared))
            .await
            .map_err(|_| HttpRefusal::body_timeout(DEADLINE))??;
        Ok(Read { bytes, share })
    }

    /// The body's frames into one buffer, sized once from the declared length (so a large
    /// body is neither copied from a list of chunks nor grown by doubling).
    async fn collect(
        &self,
        mut body: Incoming,
        declared: Option<u64>,
    ) -> Result<Bytes, HttpRefusal> {
        let declared = declared.map_or(0, |n| n as usize);
        let mut buf = Vec::with_capacity(declared.min(self.limit));
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else {
                return Err(HttpRefusal::body_unreadable());
            };
            if let Ok(data) = frame.into_data() {
                if buf.len() + data.len() > self.limit {
                    return Err(HttpRefusal::too_large(self.limit));
                }
                buf.extend_from_slice(&data);
            }
        }
        Ok(Bytes::from(buf))
    }
}
