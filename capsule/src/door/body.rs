//! Reading a request body, and the bounds on what bodies may hold: one body at most the door's
//! limit, every body being read at once at most the body budget, each read within a deadline
//! and never idle long. A hostile client can open many connections, and each could otherwise
//! make the door buffer a body of the limit's size: the budget keeps their sum bounded.
//!
//! The budget is charged for the bytes that actually arrived, not the ones a header promises,
//! and a body's first [`FREE`] bytes are not charged at all (the connection cap bounds those):
//! so clients that trickle large bodies can hold only what they really sent, and an ordinary
//! request — a GetTask, a ListTasks, a short message — never waits behind them. A body the
//! budget has no room for is refused 503 at once rather than left waiting.

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

/// The longest a body may go without a byte arriving: the minimum rate, which ends a client
/// that holds its connection open by sending almost nothing.
pub const IDLE: Duration = Duration::from_secs(10);
/// What any one body may hold before the budget is charged.
pub const FREE: usize = 64 << 10;
/// How much of the budget a large body takes at a time.
const STEP: usize = 256 << 10;

/// The most a request refused from its headers alone may still send for its connection to be
/// kept; it sends it within [`DEADLINE`], never idle past [`IDLE`], or the connection is
/// closed.
const DISCARDED: usize = FREE;

/// The budget is counted in KiB, so the largest limit fits a semaphore's `u32` permits.
const UNIT: usize = 1 << 10;

/// A body read whole, and its share of the budget: released when dropped, once the body and
/// what was parsed from it are done with.
pub struct Read {
    pub bytes: Bytes,
    pub share: Option<OwnedSemaphorePermit>,
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
    /// read; past [`FREE`], the budget is charged as bytes arrive.
    pub async fn read(&self, headers: &HeaderMap, body: Incoming) -> Result<Read, HttpRefusal> {
        // hyper has refused a malformed content-length before the door sees the request.
        let declared = headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        if declared.is_some_and(|n| n > self.limit as u64) {
            return Err(HttpRefusal::too_large(self.limit));
        }
        tokio::time::timeout(DEADLINE, self.collect(body, declared))
            .await
            .map_err(|_| HttpRefusal::body_timeout(DEADLINE))?
    }

    /// The body's frames into one buffer, sized once from the declared length (so a large
    /// body is neither copied from a list of chunks nor grown by doubling), charging the budget
    /// for what arrived beyond [`FREE`].
    async fn collect(
        &self,
        mut body: Incoming,
        declared: Option<u64>,
    ) -> Result<Read, HttpRefusal> {
        let declared = declared.map_or(0, |n| n as usize);
        let mut buf = Vec::with_capacity(declared.min(self.limit).min(FREE));
        let mut share: Option<OwnedSemaphorePermit> = None;
        let mut charged = FREE;
        loop {
            let frame = match tokio::time::timeout(IDLE, body.frame()).await {
                Err(_) => return Err(HttpRefusal::body_idle(IDLE)),
                Ok(None) => break,
                Ok(Some(Err(_))) => return Err(HttpRefusal::body_unreadable()),
                Ok(Some(Ok(frame))) => frame,
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            let held = buf.len() + data.len();
            if held > self.limit {
                return Err(HttpRefusal::too_large(self.limit));
            }
            if held > charged {
                let step = (held - charged)
                    .max(STEP)
                    .min(self.limit.saturating_sub(charged));
                let more = self
                    .budget
                    .clone()
                    .try_acquire_many_owned(units(step).clamp(1, self.units))
                    .map_err(|_| HttpRefusal::budget_spent(BUDGET.max(self.limit)))?;
                charged += step;
                match &mut share {
                    Some(s) => s.merge(more),
                    None => share = Some(more),
                }
                buf.reserve(declared.saturating_sub(buf.len()).min(self.limit));
            }
            buf.extend_from_slice(&data);
        }
        Ok(Read {
            bytes: Bytes::from(buf),
            share,
        })
    }
}

/// Reads and drops, in the background, the body of a request answered from its headers alone
/// (a 401 is decided before the body is read, spec step 2). Answers whether the connection is
/// kept: a body left unread makes hyper close it, and a close with bytes still arriving resets
/// it, which can lose the answer on its way to the client and fails the next request a client
/// sends on a connection it was never told is closing. A body declared past [`DISCARDED`] is
/// not waited for: its answer says `connection: close`.
pub fn discard(headers: &HeaderMap, mut body: Incoming) -> bool {
    use hyper::body::Body;
    if body.is_end_stream() {
        return true;
    }
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > DISCARDED as u64) {
        return false;
    }
    // Past the bound, the deadline, an idle body or an error, dropping the body closes the
    // connection.
    let drained = async move {
        let mut seen = 0usize;
        while let Ok(Some(Ok(frame))) = tokio::time::timeout(IDLE, body.frame()).await {
            seen += frame.data_ref().map_or(0, Bytes::len);
            if seen > DISCARDED {
                break;
            }
        }
    };
    tokio::spawn(async move {
        let _ = tokio::time::timeout(DEADLINE, drained).await;
    });
    true
}
