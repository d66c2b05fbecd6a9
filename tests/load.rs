//! A door under hostile load keeps answering its real callers (docs/choices.md "Door"): past
//! its connection cap a new connection is answered 503 at once instead of hanging; clients that
//! trickle bodies hold only what they sent, so an ordinary request is not kept waiting behind
//! them; and a body that stops arriving is ended at the minimum rate. Each test checks that the
//! door answered, and what, never how fast (figures are in BENCHMARKS.md).

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{json, Value};
use support::*;

/// A raw connection to the door, its headers sent.
fn open(port: u16, head: &str) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    s
}

/// The whole answer on `s`, once the door closes it.
fn answer(mut s: TcpStream) -> String {
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    String::from_utf8_lossy(&raw).into_owned()
}

fn list_tasks(port: u16) -> Value {
    let resp = http(
        port,
        "POST",
        "/",
        &[("Content-Type", "application/json"), ("A2A-Version", "1.0")],
        request(json!(1), "ListTasks", json!({})).as_bytes(),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    resp.json()
}

#[test]
fn at_its_connection_cap_idle_connections_give_way_and_only_answers_in_progress_refuse() {
    let home = Home::new();
    let path = home.write("murmur.yaml", &Fixture::default().yaml());
    let run = Launch::start_env(
        &home,
        &path,
        &[],
        &[("MURMUR_DOOR_CONNECTIONS", "8".to_owned())],
    );
    // Eight connections held open, sending nothing: the whole cap.
    let idle: Vec<TcpStream> = (0..8)
        .map(|_| open(run.port, "POST / HTTP/1.1\r\n"))
        .collect();
    // A real caller still gets in, again and again: an idle one gives way when there is no
    // room (the first time; each answer closes its connection and leaves its room).
    for _ in 0..4 {
        assert_eq!(list_tasks(run.port)["result"]["totalSize"], 0);
    }
    let closed = idle
        .into_iter()
        .filter(|s| {
            let mut s = s.try_clone().unwrap();
            // A connection closed to make room reads its end (or a reset, when it was closed
            // with its bytes unread) at once; the others time out.
            s.set_read_timeout(Some(Duration::from_millis(300)))
                .unwrap();
            match s.read(&mut [0u8; 64]) {
                Ok(n) => n == 0,
                Err(e) => !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ),
            }
        })
        .count();
    assert!(closed >= 1, "no idle connection was closed to make room");

    // Eight streams are being answered: none gives way, and a ninth connection is refused at
    // once, answered whole.
    let watch = request(json!(1), "murmur.WatchSession", json!({}));
    let streams: Vec<TcpStream> = (0..8)
        .map(|_| {
            let mut s = open(
                run.port,
                &format!(
                    "POST / HTTP/1.1\r\nHost: localhost:{}\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\nContent-Length: {}\r\n\r\n{watch}",
                    run.port,
                    watch.len()
                ),
            );
            let mut first = [0u8; 12];
            s.read_exact(&mut first).unwrap();
            assert_eq!(&first, b"HTTP/1.1 200");
            s
        })
        .collect();
    let refused = answer(open(
        run.port,
        &format!(
            "GET /.well-known/agent-card.json HTTP/1.1\r\nHost: localhost:{}\r\n\r\n",
            run.port
        ),
    ));
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    let body = refused.split("\r\n\r\n").nth(1).unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(body).unwrap(),
        json!({"error": "busy", "message": "this door holds 8 connections, each of them being answered, as many as it takes at once; connect again shortly"})
    );
    assert!(
        refused.contains("content-type: application/json\r\n"),
        "{refused}"
    );
    drop(streams);
    assert!(wait_until(Duration::from_secs(10), || {
        http(run.port, "GET", "/.well-known/agent-card.json", &[], b"").status == 200
    }));
}

#[test]
fn trickled_bodies_hold_only_what_they_sent_and_keep_no_caller_waiting() {
    let home = Home::new();
    let run = start_fixture(&home, "murmur.yaml", &Fixture::default(), &[]);
    // 32 connections each promising a 2 MiB body (the whole 64 MiB budget, as promised), each
    // sending a byte now and then.
    let head = format!(
        "POST / HTTP/1.1\r\nHost: localhost:{}\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\nContent-Length: {}\r\n\r\n",
        run.port,
        2 << 20
    );
    let mut slow: Vec<TcpStream> = (0..32).map(|_| open(run.port, &head)).collect();
    for s in &mut slow {
        s.write_all(b"{").unwrap();
    }
    // An ordinary caller is answered meanwhile, again and again — long before the slow bodies'
    // 60 s deadline would have freed the budget they were promised.
    for _ in 0..5 {
        let body = request(json!(1), "ListTasks", json!({}));
        let s = open(
            run.port,
            &format!(
                "POST / HTTP/1.1\r\nHost: localhost:{}\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
                run.port,
                body.len()
            ),
        );
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let said = answer(s);
        assert!(
            said.starts_with("HTTP/1.1 200"),
            "no answer while bodies trickle: {said:?}"
        );
        for s in &mut slow {
            let _ = s.write_all(b" ");
        }
    }
    let sent = run.send("@echo hello", false);
    assert_eq!(
        sent["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{sent}"
    );
}

#[test]
fn a_body_that_stops_arriving_is_ended_at_the_minimum_rate() {
    let home = Home::new();
    let run = start_fixture(&home, "murmur.yaml", &Fixture::default(), &[]);
    let head = format!(
        "POST / HTTP/1.1\r\nHost: localhost:{}\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\nContent-Length: 1000\r\n\r\n{{\"jsonrpc\"",
        run.port
    );
    let said = answer(open(run.port, &head));
    assert!(said.starts_with("HTTP/1.1 408"), "{said}");
    let body = said.split("\r\n\r\n").nth(1).unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(body).unwrap(),
        json!({"error": "request_timeout", "message": "no byte of the request body arrived for 10 s; send the body as you send its headers"})
    );
}
