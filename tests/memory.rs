//! Nothing grows: a capsule under hostile load keeps its memory. A real `mur run` capsule whose
//! one slot is taken (so every new message is rejected as busy) takes 20 000 hostile requests of
//! mixed sizes over a few connections — rejected messages of 1 to 20 MB, bodies past the door's
//! limit, malformed JSON, unknown methods, GetTask of unknown ids, deep nesting — and its
//! resident memory, read from /proc, ends within 50 MB of where it started.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::*;

const REQUESTS: usize = 20_000;
const CONNECTIONS: usize = 4;
const MB: usize = 1 << 20;
/// How far the capsule's RSS may end above where it started.
const ALLOWED_GROWTH_KB: u64 = 50 * 1024;

/// The capsule process of a launch: the child of `mur run` that runs `mur __capsule`.
fn capsule_pid(run: &Launch) -> u32 {
    let mut found = None;
    let ok = wait_until(Duration::from_secs(10), || {
        found = children(run.pid()).into_iter().find(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|arg| arg == b"__capsule"))
        });
        found.is_some()
    });
    assert!(ok, "no capsule process below mur run {}", run.pid());
    found.unwrap_or_default()
}

/// A JSON-RPC SendMessage whose one text part is `size` bytes.
fn big_message(size: usize) -> Vec<u8> {
    let head = r#"{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{"messageId":"m-big","role":"ROLE_USER","parts":[{"text":""#;
    let tail = r#""}]}}}"#;
    let mut body = Vec::with_capacity(size + head.len() + tail.len());
    body.extend_from_slice(head.as_bytes());
    body.resize(head.len() + size, b'a');
    body.extend_from_slice(tail.as_bytes());
    body
}

/// The small hostile requests, by index: (extra headers, body).
fn small(i: usize) -> (Vec<(&'static str, String)>, Vec<u8>) {
    let body = match i % 10 {
        0 => b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":".to_vec(),
        1 => request(serde_json::json!(i), "NoSuchMethod", serde_json::json!({})).into_bytes(),
        2 => request(
            serde_json::json!(i),
            "GetTask",
            serde_json::json!({"id": format!("tsk_unknown_{i}")}),
        )
        .into_bytes(),
        3 => {
            let depth = 10_000;
            let mut b = "[".repeat(depth);
            b.push_str(&"]".repeat(depth));
            b.into_bytes()
        }
        4 => request(
            serde_json::json!(i),
            "SendMessage",
            message(&"x".repeat(4096), false),
        )
        .into_bytes(),
        5 => format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"SendMessage\",\"params\":[1,2,3]}}"
        )
        .into_bytes(),
        6 => {
            // Many keys: a wide object the parser must build and drop.
            let keys: Vec<String> = (0..200).map(|k| format!("\"k{k}\":{k}")).collect();
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"ListTasks\",\"params\":{{{}}}}}",
                keys.join(",")
            )
            .into_bytes()
        }
        7 => request(
            serde_json::json!(i),
            "ListTasks",
            serde_json::json!({"pageSize": 5}),
        )
        .into_bytes(),
        8 => b"\xff\xfe not json at all".to_vec(),
        _ => request(
            serde_json::json!(i),
            "SendMessage",
            message(&format!("small rejected message {i}"), true),
        )
        .into_bytes(),
    };
    // One asks for a version this door does not speak, one sends headers past what a
    // connection buffers.
    let version = if i % 10 == 8 { "0.3" } else { "1.0" };
    let mut headers = vec![("A2A-Version", version.to_owned())];
    if i % 10 == 7 {
        headers.push(("X-Padding", "p".repeat(200 << 10)));
    }
    (headers, body)
}

/// One keep-alive HTTP/1.1 connection that reads each answer whole (by its content-length)
/// and reconnects when the door closes it.
struct Conn {
    port: u16,
    reader: Option<BufReader<TcpStream>>,
}

impl Conn {
    fn new(port: u16) -> Conn {
        Conn { port, reader: None }
    }

    fn stream(&mut self) -> &mut BufReader<TcpStream> {
        self.reader.get_or_insert_with(|| {
            let s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
            s.set_nodelay(true).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            BufReader::new(s)
        })
    }

    /// POSTs one body; answers the status, or `None` when the connection failed.
    fn post(&mut self, headers: &[(&str, String)], body: &[u8]) -> Option<u16> {
        let mut head = format!(
            "POST / HTTP/1.1\r\nHost: localhost:{}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            self.port,
            body.len()
        );
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        let answer = self.exchange(head.as_bytes(), body);
        if !matches!(answer, Some((_, true))) {
            self.reader = None;
        }
        answer.map(|(status, _)| status)
    }

    /// (status, the connection stays open)
    fn exchange(&mut self, head: &[u8], body: &[u8]) -> Option<(u16, bool)> {
        let r = self.stream();
        if body.len() < 64 * 1024 {
            r.get_mut().write_all(&[head, body].concat()).ok()?;
        } else {
            r.get_mut().write_all(head).ok()?;
            r.get_mut().write_all(body).ok()?;
        }
        let mut line = String::new();
        r.read_line(&mut line).ok()?;
        let status = line.split(' ').nth(1)?.parse().ok()?;
        let (mut length, mut keep) = (0usize, true);
        loop {
            line.clear();
            r.read_line(&mut line).ok()?;
            let l = line.trim();
            if l.is_empty() {
                break;
            }
            let (k, v) = l.split_once(':')?;
            match k.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = v.trim().parse().ok()?,
                "connection" => keep = !v.trim().eq_ignore_ascii_case("close"),
                _ => {}
            }
        }
        let mut answer = vec![0; length];
        r.read_exact(&mut answer).ok()?;
        Some((status, keep))
    }
}

/// A body past any limit the door reads, on a connection of its own: the door may answer 413
/// and close before it takes the rest, so the body is written from another thread.
fn oversized(port: u16, size: usize) -> Option<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(60))).ok()?;
    let head = format!(
        "POST / HTTP/1.1\r\nHost: localhost:{port}\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\nConnection: close\r\nContent-Length: {size}\r\n\r\n"
    );
    s.write_all(head.as_bytes()).ok()?;
    let mut writer = s.try_clone().ok()?;
    let pump = std::thread::spawn(move || {
        let chunk = vec![b'['; 1 << 16];
        let mut sent = 0;
        while sent < size {
            let n = chunk.len().min(size - sent);
            if writer.write_all(&chunk[..n]).is_err() {
                break;
            }
            sent += n;
        }
    });
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    drop(s);
    let _ = pump.join();
    let line = String::from_utf8_lossy(&raw);
    line.split(' ').nth(1).and_then(|s| s.parse().ok())
}

#[test]
fn hostile_load_leaves_the_capsules_memory_where_it_was() {
    let home = Home::new();
    let run = start_fixture(&home, "murmur.yaml", &Fixture::single(), &[]);
    // The one slot stays taken, so every new message below is rejected as busy.
    let working = run.start_working("@sleep 120");
    let capsule = capsule_pid(&run);
    let before = rss_kb(capsule).expect("the capsule's VmRSS");

    // Messages of 1, 5, 10 and 20 MB, built once and sent ten times each.
    let big: Arc<Vec<Vec<u8>>> = Arc::new(
        [1, 5, 10, 20]
            .iter()
            .map(|mb| big_message(mb * MB))
            .collect(),
    );
    let smalls: Arc<Vec<_>> = Arc::new((0..10).map(small).collect());
    let next = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let big_answered = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let peak = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut peak = 0;
            while !done.load(Ordering::SeqCst) {
                peak = peak.max(rss_kb(capsule).unwrap_or(0));
                std::thread::sleep(Duration::from_millis(20));
            }
            peak
        })
    };
    let began = Instant::now();
    let workers: Vec<_> = (0..CONNECTIONS)
        .map(|_| {
            let (big, smalls) = (big.clone(), smalls.clone());
            let (next, failed, port) = (next.clone(), failed.clone(), run.port);
            let big_answered = big_answered.clone();
            std::thread::spawn(move || {
                let mut conn = Conn::new(port);
                let version = [("A2A-Version", "1.0".to_owned())];
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= REQUESTS || began.elapsed() > Duration::from_secs(45) {
                        return;
                    }
                    let status = match i % 500 {
                        // 40 big rejected messages, 1, 5, 10 and 20 MB in turn.
                        0 => {
                            let status = conn.post(&version, &big[(i / 500) % 4]);
                            if status == Some(200) {
                                big_answered.fetch_add(1, Ordering::SeqCst);
                            }
                            status
                        }
                        // 20 bodies past the limit.
                        250 if i % 1000 == 250 => oversized(port, 40 * MB),
                        _ => {
                            let (headers, body) = &smalls[i % smalls.len()];
                            conn.post(headers, body)
                        }
                    };
                    if status.is_none() {
                        failed.fetch_add(1, Ordering::SeqCst);
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let took = began.elapsed();
    done.store(true, Ordering::SeqCst);
    let peak = peak.join().unwrap_or(0);
    let sent = next.load(Ordering::SeqCst).min(REQUESTS);
    // The door served it all, and the slot stayed taken: every message was read and rejected.
    assert_eq!(big_answered.load(Ordering::SeqCst), REQUESTS / 500);
    let task = run.rpc("GetTask", serde_json::json!({ "id": working }));
    assert_eq!(task["result"]["status"]["state"], "TASK_STATE_WORKING");
    std::thread::sleep(Duration::from_millis(500));
    let after = rss_kb(capsule).expect("the capsule's VmRSS after the load");
    eprintln!(
        "memory: {sent} requests in {took:?} ({} got no answer); VmRSS {before} kB before, {peak} kB at peak, {after} kB after",
        failed.load(Ordering::SeqCst)
    );
    assert_eq!(sent, REQUESTS, "the load did not finish within its time");
    // Every request, hostile or not, got an answer (a refusal is an answer).
    assert_eq!(
        failed.load(Ordering::SeqCst),
        0,
        "requests the door left unanswered"
    );
    assert!(
        after <= before + ALLOWED_GROWTH_KB,
        "the capsule grew from {before} kB to {after} kB under hostile load (peak {peak} kB)"
    );
}

/// A body declared past the door's limit is refused 413 on its headers alone: the door reads
/// none of it, so it holds none of it.
#[test]
fn a_body_declared_past_the_limit_is_refused_before_it_is_read() {
    let home = Home::new();
    let run = start_fixture(&home, "murmur.yaml", &Fixture::single(), &[]);
    let mut s = TcpStream::connect(("127.0.0.1", run.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let head = format!(
        "POST / HTTP/1.1\r\nHost: localhost:{}\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\nContent-Length: {}\r\n\r\n",
        run.port,
        1u64 << 40
    );
    s.write_all(head.as_bytes()).unwrap();
    // Not a byte of the body is sent: the answer comes on the headers alone.
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    while !raw.ends_with(b"}") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&raw).into_owned();
    assert!(text.starts_with("HTTP/1.1 413 "), "{text}");
    assert!(text.contains("\"error\":\"payload_too_large\""), "{text}");
}

/// Headers past what one connection buffers (64 KiB) are refused 431, and the door goes on.
#[test]
fn headers_past_what_a_connection_buffers_are_refused() {
    let home = Home::new();
    let run = start_fixture(&home, "murmur.yaml", &Fixture::single(), &[]);
    let (headers, body) = small(7);
    assert_eq!(headers[1].1.len(), 200 << 10);
    assert_eq!(Conn::new(run.port).post(&headers, &body), Some(431));
    assert_eq!(run.total_tasks(), 0);
}
