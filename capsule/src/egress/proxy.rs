//! The jail's egress proxy: one HTTP/1.1 proxy connection from inside an attempt's network
//! namespace. `CONNECT host:port` (HTTPS) and absolute-form requests (`GET http://host/…`,
//! plain HTTP) are admitted when the destination is on the attempt's grant, and relayed through
//! `policy::dial`; anything else is answered `403` with a body that names what may be reached,
//! and traced as `egress_denied`. Names are resolved here, outside, only for admitted hosts.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::ids::TaskId;
use crate::policy;
use crate::session::Session;
use crate::trace::TraceEvent;

/// The most a request head may take before it is refused.
const HEAD_LIMIT: usize = 16 << 10;
/// How long a request head may take to arrive: a connection that holds a half-sent head holds
/// one of its attempt's connections (`super::connection_cap`), and is answered `408` then.
pub const HEAD_WITHIN: Duration = Duration::from_secs(10);

/// A request head as far as the proxy needs it.
struct Head {
    method: String,
    target: String,
    /// The whole head as received (request line and headers, through the blank line).
    raw: Vec<u8>,
    /// Bytes read past the head (the start of a body).
    rest: Vec<u8>,
}

pub async fn serve(mut conn: TcpStream, session: &Session, task: &str, admitted: &[String]) {
    let Ok(head) = tokio::time::timeout(HEAD_WITHIN, read_head(&mut conn)).await else {
        let why = format!(
            "murmur's egress proxy: the request head did not arrive within {} s",
            HEAD_WITHIN.as_secs()
        );
        let _ = conn.write_all(&answer(408, &why)).await;
        return;
    };
    let Some(head) = head else {
        let _ = conn
            .write_all(&answer(
                400,
                "murmur's egress proxy could not read that request",
            ))
            .await;
        return;
    };
    let connect = head.method.eq_ignore_ascii_case("CONNECT");
    let url = match connect {
        true => format!("https://{}", head.target),
        false => head.target.clone(),
    };
    let allowed = match policy::check(admitted, &url) {
        Ok(a) => a,
        Err(_) => {
            let (host, port) = match policy::Target::parse(&url) {
                Ok(t) => (t.host().to_owned(), t.port()),
                Err(_) => (head.target.clone(), 0),
            };
            session.errands.note(
                &TaskId::from_wire(task),
                crate::telemetry::keys::EV_EGRESS_DENIED,
                vec![
                    crate::telemetry::KeyValue::new("server.address", host.clone()),
                    crate::telemetry::KeyValue::new("server.port", i64::from(port)),
                ],
            );
            session.trace.event(TraceEvent::EgressDenied {
                task_id: TaskId::from_wire(task),
                host: host.clone(),
                port,
            });
            let listing = match admitted.is_empty() {
                true => "nothing".to_owned(),
                false => admitted.join(", "),
            };
            let why = format!(
                "murmur: egress to {host}:{port} is refused: this capsule's harness may reach \
                 {listing} (capabilities.network.allow, the members it calls, and its CLI's \
                 provider); add the destination to capabilities.network.allow to grant it\n"
            );
            let _ = conn.write_all(&answer(403, &why)).await;
            return;
        }
    };
    let Ok(mut outside) = policy::dial(&allowed, super::DIAL_WITHIN).await else {
        let why = format!(
            "murmur: {} did not accept a connection",
            allowed.target().authority()
        );
        let _ = conn.write_all(&answer(502, &why)).await;
        return;
    };
    if connect {
        // Bytes a client sent past the CONNECT head (an eager TLS hello) belong to the tunnel.
        if conn
            .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            .await
            .is_err()
            || outside.write_all(&head.rest).await.is_err()
        {
            return;
        }
    } else {
        let mut forwarded = origin_form(&head, allowed.target().path());
        forwarded.extend_from_slice(&head.rest);
        if outside.write_all(&forwarded).await.is_err() {
            return;
        }
    }
    let _ = tokio::io::copy_bidirectional(&mut conn, &mut outside).await;
}

/// Reads up to the blank line that ends a request head (bounded).
async fn read_head(conn: &mut TcpStream) -> Option<Head> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    let end = loop {
        let n = conn.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        if buf.len() > HEAD_LIMIT {
            return None;
        }
    };
    let line_end = buf.iter().position(|b| *b == b'\r')?;
    let line = std::str::from_utf8(&buf[..line_end]).ok()?;
    let mut words = line.split(' ');
    let (method, target) = (words.next()?.to_owned(), words.next()?.to_owned());
    Some(Head {
        method,
        target,
        rest: buf[end..].to_vec(),
        raw: buf[..end].to_vec(),
    })
}

/// The request line rewritten to origin-form (`GET /path HTTP/1.1`), headers kept.
fn origin_form(head: &Head, path: &str) -> Vec<u8> {
    let line_end = head.raw.iter().position(|b| *b == b'\r').unwrap_or(0);
    let line = String::from_utf8_lossy(&head.raw[..line_end]);
    let version = line.rsplit(' ').next().unwrap_or("HTTP/1.1");
    let path = if path.is_empty() { "/" } else { path };
    let mut out = format!("{} {path} {version}", head.method).into_bytes();
    out.extend_from_slice(&head.raw[line_end..]);
    out
}

fn answer(status: u16, body: &str) -> Vec<u8> {
    let reason = match status {
        400 => "Bad Request",
        408 => "Request Timeout",
        403 => "Forbidden",
        _ => "Bad Gateway",
    };
    format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: \
         {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}
