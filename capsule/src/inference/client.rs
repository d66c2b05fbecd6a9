//! The one way a driver reaches its provider: a fresh HTTP/1.1 connection per call (dialled
//! through `policy::dial`, like every outbound connection of the capsule), over TLS
//! (rustls with the webpki roots, set up through hyper-rustls) for `https://`, plain only to a
//! loopback address. Dropping the [`Body`] a call answers drops the connection at once, so a
//! canceled task stops the provider's work (and its billing) rather than waiting it out.
//!
//! The API key lives only here: it goes into the request's headers and nowhere else, and
//! [`Endpoint::scrub`] removes it from anything a provider echoes back before that becomes a
//! message.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::task::JoinHandle;

use super::error::Failure;

/// How long a TCP connect (and then the TLS handshake) may take.
const CONNECT_WITHIN: Duration = Duration::from_secs(10);
/// How long the provider may go silent mid-stream before the call is given up.
const IDLE_WITHIN: Duration = Duration::from_secs(300);
/// How long one answer may stream, however steadily: a provider sending a byte every few
/// minutes would otherwise hold the call (and its task) for ever. A reply of the largest
/// `max_tokens` at a slow local model's few tokens a second fits well within it.
pub const CALL_WITHIN: Duration = Duration::from_secs(30 * 60);
/// The most of an answer one connection reads ahead.
const READ_BUFFER: usize = 64 << 10;
/// The most of an error body read.
const ERROR_BODY_LIMIT: usize = 64 << 10;

/// `gateway.endpoint` and `gateway.api_key`, checked.
#[derive(Clone)]
pub struct Endpoint {
    tls: bool,
    host: String,
    port: u16,
    /// The path prefix (`/v1` in `https://api.openai.com/v1`), without a trailing slash.
    base: String,
    api_key: Option<Arc<str>>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Endpoint({})", self.shown())
    }
}

/// Why `gateway.endpoint` cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointError(pub String);

impl Endpoint {
    /// Reads an `http://` or `https://` URL; plain http only to loopback.
    pub fn parse(url: &str, api_key: Option<&str>) -> Result<Endpoint, EndpointError> {
        let bad = |why: &str| EndpointError(format!("gateway.endpoint {url} {why}"));
        let (tls, rest) = match (url.strip_prefix("https://"), url.strip_prefix("http://")) {
            (Some(r), _) => (true, r),
            (None, Some(r)) => (false, r),
            _ => return Err(bad("is not an http:// or https:// URL")),
        };
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let (host, port) = split_authority(authority, if tls { 443 } else { 80 })
            .ok_or_else(|| bad("has a port that is not a number"))?;
        if host.is_empty() {
            return Err(bad("names no host"));
        }
        if !tls && !is_loopback(host) {
            return Err(bad(
                "is plain http to a host that is not loopback; use https://",
            ));
        }
        Ok(Endpoint {
            tls,
            host: host.to_owned(),
            port,
            base: path.trim_end_matches('/').to_owned(),
            api_key: api_key.filter(|k| !k.is_empty()).map(Arc::from),
        })
    }

    /// `host:port` (`[v6]:port`), for messages, `mur install` and the Host header.
    pub fn shown(&self) -> String {
        format!("{}:{}", self.url_host(), self.port)
    }

    /// The host as a URL writes it: a v6 literal in brackets.
    fn url_host(&self) -> String {
        match self.host.contains(':') {
            true => format!("[{}]", self.host),
            false => self.host.clone(),
        }
    }

    pub fn host_port(&self) -> (&str, u16) {
        (&self.host, self.port)
    }

    pub(super) fn api_key(&self) -> Option<&str> {
        self.api_key.as_deref()
    }

    /// The failure with the API key taken out of whatever text it carries.
    pub(super) fn scrub(&self, f: Failure) -> Failure {
        let Some(key) = self.api_key.as_deref() else {
            return f;
        };
        let clean = |s: String| s.replace(key, "[redacted]");
        match f {
            Failure::Status {
                status,
                detail,
                retry_after,
            } => Failure::Status {
                status,
                detail: clean(detail),
                retry_after,
            },
            Failure::Connect(s) => Failure::Connect(clean(s)),
            Failure::Tls(s) => Failure::Tls(clean(s)),
            Failure::Malformed(s) => Failure::Malformed(clean(s)),
            Failure::Streamed(s) => Failure::Streamed(clean(s)),
            Failure::Overloaded(s) => Failure::Overloaded(clean(s)),
            Failure::Truncated => Failure::Truncated,
            Failure::Overran(s) => Failure::Overran(s),
        }
    }

    /// POSTs `body` as JSON to `base + path`; answers the streaming body of a 2xx answer, or
    /// the failure (an error status with the provider's own message).
    pub(super) async fn post(
        &self,
        path: &str,
        headers: &[(&'static str, String)],
        body: &Value,
    ) -> Result<Body, Failure> {
        let (mut sender, connection) = self.connect().await?;
        // Guarded from here: a call dropped (a cancel) or failed before its answer closes the
        // connection at once, as one dropped mid-stream does.
        let connection = Connection(connection);
        let authority = match (self.tls, self.port) {
            (true, 443) | (false, 80) => self.url_host(),
            _ => self.shown(),
        };
        let mut req = hyper::Request::post(format!("{}{path}", self.base))
            .header(hyper::header::HOST, authority)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header(hyper::header::ACCEPT, "text/event-stream");
        for (name, value) in headers {
            req = req.header(*name, value);
        }
        let req = req
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| Failure::Malformed(format!("cannot build the request: {e}")))?;
        let answer = sender.send_request(req).await.map_err(|e| {
            Failure::Connect(format!("the connection failed before an answer: {e}"))
        })?;
        let status = answer.status().as_u16();
        if !(200..300).contains(&status) {
            let retry_after = answer
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            let detail = error_detail(answer.into_body()).await;
            return Err(Failure::Status {
                status,
                detail,
                retry_after,
            });
        }
        Ok(Body {
            incoming: answer.into_body(),
            _connection: connection,
            deadline: tokio::time::Instant::now() + CALL_WITHIN,
        })
    }

    /// Sends `req` (its path already the full path, its headers the caller's) to the endpoint
    /// as it is, with the Host header set: the model gateway's way through. Answers the
    /// provider's answer, whatever its status, and the guard of its connection.
    pub async fn forward(
        &self,
        mut req: hyper::Request<Full<Bytes>>,
    ) -> Result<(hyper::Response<Incoming>, Connection), Failure> {
        let (mut sender, connection) = self.connect().await?;
        let connection = Connection(connection);
        let authority = match (self.tls, self.port) {
            (true, 443) | (false, 80) => self.url_host(),
            _ => self.shown(),
        };
        let host = hyper::header::HeaderValue::from_str(&authority)
            .map_err(|e| Failure::Malformed(format!("the endpoint's host cannot be sent: {e}")))?;
        req.headers_mut().insert(hyper::header::HOST, host);
        let answer = sender.send_request(req).await.map_err(|e| {
            Failure::Connect(format!("the connection failed before an answer: {e}"))
        })?;
        Ok((answer, connection))
    }

    /// The path every request's path is prefixed with (`/v1`, or empty).
    pub fn base_path(&self) -> &str {
        &self.base
    }

    async fn connect(
        &self,
    ) -> Result<
        (
            hyper::client::conn::http1::SendRequest<Full<Bytes>>,
            JoinHandle<()>,
        ),
        Failure,
    > {
        let at = self.shown();
        let scheme = if self.tls { "https" } else { "http" };
        // The one dial path (`policy`), for the endpoint the manifest's driver declares.
        let allowed = crate::policy::gateway(&format!("{scheme}://{at}"))
            .map_err(|r| Failure::Connect(r.reason))?;
        let tcp = crate::policy::dial(&allowed, CONNECT_WITHIN)
            .await
            .map_err(|e| Failure::Connect(format!("{at}: {e}")))?;
        let _ = tcp.set_nodelay(true);
        if !self.tls {
            return handshake(TokioIo::new(tcp)).await;
        }
        let tls = tokio::time::timeout(CONNECT_WITHIN, crate::tls::connect(&self.host, tcp))
            .await
            .map_err(|_| {
                Failure::Tls(format!(
                    "{at}: no handshake within {} s",
                    CONNECT_WITHIN.as_secs()
                ))
            })?
            .map_err(|e| Failure::Tls(format!("{at}: {}; {}", e.why, e.hint)))?;
        handshake(TokioIo::new(tls)).await
    }
}

async fn handshake<T>(
    io: TokioIo<T>,
) -> Result<
    (
        hyper::client::conn::http1::SendRequest<Full<Bytes>>,
        JoinHandle<()>,
    ),
    Failure,
>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    // A bounded read buffer: the gateway holds at most this much of each answer in flight.
    let (sender, conn) = hyper::client::conn::http1::Builder::new()
        .max_buf_size(READ_BUFFER)
        .handshake(io)
        .await
        .map_err(|e| Failure::Connect(format!("the HTTP handshake failed: {e}")))?;
    let driving = tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok((sender, driving))
}

/// `host[:port]` or `[v6][:port]` → (host without brackets, port); `None` when a port is
/// there but not a number.
fn split_authority(authority: &str, default: u16) -> Option<(&str, u16)> {
    let (host, port) = match authority.strip_prefix('[') {
        Some(bracketed) => {
            let (host, after) = bracketed.split_once(']')?;
            (host, (!after.is_empty()).then(|| after.strip_prefix(':')))
        }
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(Some(port))),
            None => (authority, None),
        },
    };
    match port {
        None => Some((host, default)),
        Some(port) => Some((host, port?.parse().ok()?)),
    }
}

fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The provider's own error message from an error body (both providers nest it as
/// `error.message`), or the body's start when it is not JSON.
async fn error_detail(body: Incoming) -> String {
    let bytes = match tokio::time::timeout(
        Duration::from_secs(10),
        Limited::new(body, ERROR_BODY_LIMIT).collect(),
    )
    .await
    {
        Ok(Ok(b)) => b.to_bytes(),
        _ => return String::new(),
    };
    let parsed: Option<Value> = serde_json::from_slice(&bytes).ok();
    let message = parsed.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("message"))
            .or_else(|| v.get("error"))
            .and_then(Value::as_str)
    });
    let text = match message {
        Some(m) => m.to_owned(),
        None => String::from_utf8_lossy(&bytes).trim().to_owned(),
    };
    text.chars().take(300).collect()
}

/// Aborts the task driving the connection when dropped: the socket closes with it.
pub struct Connection(JoinHandle<()>);

impl Drop for Connection {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A 2xx answer's body, read chunk by chunk.
pub struct Body {
    incoming: Incoming,
    _connection: Connection,
    /// When the answer must have ended ([`CALL_WITHIN`] after its headers).
    deadline: tokio::time::Instant,
}

impl Body {
    /// The next chunk; `None` at the end. An error mid-body, or a provider silent past the
    /// idle bound, is a truncated stream; one still streaming at the deadline has overrun.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, Failure> {
        loop {
            let idle = tokio::time::Instant::now() + IDLE_WITHIN;
            let frame =
                match tokio::time::timeout_at(idle.min(self.deadline), self.incoming.frame()).await
                {
                    Ok(frame) => frame,
                    Err(_) if tokio::time::Instant::now() >= self.deadline => {
                        return Err(Failure::Overran(CALL_WITHIN.as_secs()))
                    }
                    Err(_) => return Err(Failure::Truncated),
                };
            match frame {
                None => return Ok(None),
                Some(Err(_)) => return Err(Failure::Truncated),
                Some(Ok(f)) => {
                    if let Ok(data) = f.into_data() {
                        return Ok(Some(data));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(url: &str) -> Result<(bool, String, u16, String), String> {
        Endpoint::parse(url, None)
            .map(|e| (e.tls, e.host, e.port, e.base))
            .map_err(|e| e.0)
    }

    #[test]
    fn endpoints_are_read_with_their_default_ports_and_v6_literals() {
        let table = [
            (
                "https://api.openai.com/v1",
                (true, "api.openai.com", 443, "/v1"),
            ),
            (
                "https://api.anthropic.com",
                (true, "api.anthropic.com", 443, ""),
            ),
            (
                "http://127.0.0.1:8080/v1/",
                (false, "127.0.0.1", 8080, "/v1"),
            ),
            ("http://localhost/v1", (false, "localhost", 80, "/v1")),
            ("http://[::1]/v1", (false, "::1", 80, "/v1")),
            ("http://[::1]:11434/v1", (false, "::1", 11434, "/v1")),
            (
                "https://[2001:db8::1]:8443",
                (true, "2001:db8::1", 8443, ""),
            ),
        ];
        for (url, (tls, host, port, base)) in table {
            assert_eq!(
                parsed(url),
                Ok((tls, host.to_owned(), port, base.to_owned())),
                "{url}"
            );
        }
    }

    #[test]
    fn bad_endpoints_are_refused_saying_why() {
        let table = [
            ("ftp://x", "is not an http:// or https:// URL"),
            (
                "https://api.openai.com:x/v1",
                "has a port that is not a number",
            ),
            ("http://[::1]x/v1", "has a port that is not a number"),
            ("http://[::1/v1", "has a port that is not a number"),
            ("https://:443", "names no host"),
            (
                "http://api.anthropic.com",
                "is plain http to a host that is not loopback; use https://",
            ),
        ];
        for (url, why) in table {
            assert_eq!(
                parsed(url),
                Err(format!("gateway.endpoint {url} {why}")),
                "{url}"
            );
        }
    }
}
