//! A stream read as a client reads it: one POST on a plain socket, its SSE events one by one,
//! and whether the server ended the stream. Shared by the stream tests and the store's.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value;

/// An open SSE response read event by event.
pub struct Sse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    reader: BufReader<TcpStream>,
    /// How the stream ended, once it did: the server closed it (`true`), or a read failed or
    /// timed out (`false`), which is no end a test may take for the server's.
    pub closed_by_server: Option<bool>,
}

/// One SSE event: its `id:` (when numbered) and its `data:` JSON.
#[derive(Debug)]
pub struct Event {
    pub id: Option<u64>,
    pub data: Value,
}

pub fn open(port: u16, body: &str, headers: &[(&str, &str)]) -> Sse {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut req = format!(
        "POST / HTTP/1.1\r\nHost: localhost:{port}\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).unwrap();
    let mut reader = BufReader::new(s);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let status = line.split(' ').nth(1).unwrap().parse().unwrap();
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        if line.trim().is_empty() {
            break;
        }
        let (k, v) = line.split_once(':').unwrap();
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
    }
    Sse {
        status,
        headers,
        reader,
        closed_by_server: None,
    }
}

impl Sse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The next event; `None` when the stream ended. Chunk-size lines and comments are skipped.
    pub fn next(&mut self) -> Option<Event> {
        let mut id = None;
        let mut line = String::new();
        loop {
            line.clear();
            match self.reader.read_line(&mut line) {
                Ok(0) => {
                    self.closed_by_server = Some(true);
                    return None;
                }
                Ok(_) => {}
                Err(_) => {
                    self.closed_by_server = Some(false);
                    return None;
                }
            }
            let l = line.trim_end();
            if let Some(n) = l.strip_prefix("id: ") {
                id = n.parse().ok();
            } else if let Some(d) = l.strip_prefix("data: ") {
                return Some(Event {
                    id,
                    data: serde_json::from_str(d).unwrap(),
                });
            } else if l == "0" {
                self.closed_by_server = Some(true);
                return None;
            }
        }
    }

    /// Every event until the stream ends.
    pub fn rest(&mut self) -> Vec<Event> {
        std::iter::from_fn(|| self.next()).collect()
    }

    /// Every event until the server ends the stream; a stream still open after the read
    /// timeout fails the test.
    pub fn until_the_server_ends(&mut self) -> Vec<Event> {
        let events = self.rest();
        assert_eq!(
            self.closed_by_server,
            Some(true),
            "the server did not end the stream: {events:?}"
        );
        events
    }
}
