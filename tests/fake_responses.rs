//! The test fake model provider (tests/support/fake_provider.rs) checked against the real
//! thing's parser: its Responses API streams — the wire format of the Codex CLI — are read by
//! the official `openai` Python SDK (pinned in scripts/setup_test_deps.py), through its
//! accumulating `responses.stream()` helper and its raw event stream, each raw event also
//! validated strictly against the SDK's own event types. The SDK side is
//! tests/interop/openai_responses_check.py. Without the SDK the test fails under CI=true and
//! skips loudly otherwise, as the interop tests do (tests/support/clients.rs).
//!
//! Also here: how the fake's server copes with what real CLIs do that murmur's own driver
//! does not (keep-alive, probing GETs, chunked and compressed bodies), and its responder mode.

#[path = "support/clients.rs"]
mod clients;
#[path = "support/fake_provider.rs"]
mod fake_provider;
mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use fake_provider::{responses, Fake, Reply, Seen};
use serde_json::{json, Value};
use support::*;

/// The `openai` version scripts/setup_test_deps.py pins.
const SDK_VERSION: &str = "3.57.0";

/// The interpreter the SDK is installed for: `MURMUR_TEST_PYTHON`, or python3.
fn python() -> String {
    std::env::var("MURMUR_TEST_PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

/// Whether the pinned SDK imports under [`python`]; when not, fails under CI=true and skips
/// loudly otherwise, naming the command that installs it.
fn sdk_usable() -> bool {
    let probe = Command::new(python())
        .args(["-c", "import openai; print(openai.__version__)"])
        .output();
    let found = probe
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned());
    let present = found.as_deref() == Some(SDK_VERSION);
    if !present {
        eprintln!(
            "openai {SDK_VERSION} is not importable by {} (found {found:?}): \
             `python3 scripts/setup_test_deps.py` installs it",
            python()
        );
    }
    clients::usable("openai", present)
}

/// The fake's answer to each input the SDK script sends.
fn brain(seen: &Seen) -> Reply {
    match seen.body["input"].as_str() {
        Some("say hello") => Reply::Stream(responses::text(&["Hel", "lo, ", "world"], (12, 5))),
        Some("run a tool") => Reply::Stream(responses::function_call(
            "call_7",
            "exec_command",
            r#"{"cmd":"echo hi"}"#,
            (20, 9),
        )),
        Some("fail please") => Reply::Stream(responses::failed(
            "server_error",
            "the fake failed on purpose",
        )),
        _ => Reply::Status(
            400,
            vec![],
            json!({"error": {"message": format!("unexpected request {}", seen.body)}}).to_string(),
        ),
    }
}

/// "type SdkClass" for each event of a raw stream, as the script reports them.
fn typed(events: &[(&str, &str)]) -> Value {
    events.iter().map(|(t, c)| format!("{t} {c}")).collect()
}

#[test]
fn the_openai_sdk_reads_the_fake_responses_streams() {
    if !sdk_usable() {
        return;
    }
    let fake = Fake::start_with(brain);
    let script = repo_root().join("tests/interop/openai_responses_check.py");
    let out = Command::new(python())
        .arg(&script)
        .arg(fake.port.to_string())
        .output()
        .expect("run the SDK check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the SDK check failed: {stderr}\nstdout: {stdout}"
    );
    let got: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("the SDK check printed no JSON ({e}): {stdout}"));

    assert_eq!(got["version"], SDK_VERSION);
    assert_eq!(
        got["invalid"],
        json!([]),
        "every raw event validates strictly"
    );

    let opening = [
        ("response.created", "ResponseCreatedEvent"),
        ("response.in_progress", "ResponseInProgressEvent"),
    ];
    let mut text_raw = opening.to_vec();
    text_raw.extend([
        ("response.output_item.added", "ResponseOutputItemAddedEvent"),
        (
            "response.content_part.added",
            "ResponseContentPartAddedEvent",
        ),
        ("response.output_text.delta", "ResponseTextDeltaEvent"),
        ("response.output_text.delta", "ResponseTextDeltaEvent"),
        ("response.output_text.delta", "ResponseTextDeltaEvent"),
        ("response.output_text.done", "ResponseTextDoneEvent"),
        ("response.content_part.done", "ResponseContentPartDoneEvent"),
        ("response.output_item.done", "ResponseOutputItemDoneEvent"),
        ("response.completed", "ResponseCompletedEvent"),
    ]);
    let types = |raw: &[(&str, &str)]| -> Value { raw.iter().map(|(t, _)| *t).collect() };
    assert_eq!(
        got["text"],
        json!({
            "events": types(&text_raw),
            "deltas": ["Hel", "lo, ", "world"],
            "id": responses::RESPONSE_ID,
            "status": "completed",
            "output_text": "Hello, world",
            "usage": {"input_tokens": 12, "cached_tokens": 0, "cache_write_tokens": 0, "output_tokens": 5,
                      "reasoning_tokens": 0, "total_tokens": 17},
            "raw": typed(&text_raw),
        }),
        "the text reply"
    );

    let mut call_raw = opening.to_vec();
    call_raw.extend([
        ("response.output_item.added", "ResponseOutputItemAddedEvent"),
        (
            "response.function_call_arguments.delta",
            "ResponseFunctionCallArgumentsDeltaEvent",
        ),
        (
            "response.function_call_arguments.delta",
            "ResponseFunctionCallArgumentsDeltaEvent",
        ),
        (
            "response.function_call_arguments.delta",
            "ResponseFunctionCallArgumentsDeltaEvent",
        ),
        (
            "response.function_call_arguments.done",
            "ResponseFunctionCallArgumentsDoneEvent",
        ),
        ("response.output_item.done", "ResponseOutputItemDoneEvent"),
        ("response.completed", "ResponseCompletedEvent"),
    ]);
    assert_eq!(
        got["function_call"],
        json!({
            "events": types(&call_raw),
            "deltas": ["{\"cmd", "\":\"ech", "o hi\"}"],
            "calls": [{"id": "fc_call_7", "call_id": "call_7", "name": "exec_command",
                       "arguments": "{\"cmd\":\"echo hi\"}", "status": "completed"}],
            "status": "completed",
            "usage": {"input_tokens": 20, "cached_tokens": 0, "cache_write_tokens": 0, "output_tokens": 9,
                      "reasoning_tokens": 0, "total_tokens": 29},
            "raw": typed(&call_raw),
        }),
        "the function call reply"
    );

    let mut failed_raw = opening.to_vec();
    failed_raw.push(("response.failed", "ResponseFailedEvent"));
    assert_eq!(
        got["failed"],
        json!({
            "events": typed(&failed_raw),
            "status": "failed",
            "error": {"code": "server_error", "message": "the fake failed on purpose"},
        }),
        "the failed reply"
    );

    // What the SDK sent: five streamed calls to the Responses endpoint, with the key.
    let seen = fake.seen();
    let inputs: Vec<&str> = seen
        .iter()
        .map(|s| s.body["input"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        inputs,
        [
            "say hello",
            "say hello",
            "run a tool",
            "run a tool",
            "fail please"
        ]
    );
    for s in &seen {
        assert_eq!(
            (s.method.as_str(), s.path.as_str()),
            ("POST", "/v1/responses")
        );
        assert_eq!(s.header("authorization"), Some("Bearer x"));
        assert_eq!(s.body["stream"], true);
        assert_eq!(s.body["model"], "gpt-test");
    }
}

/// Every event's `sequence_number` counts from 0 and its `type` repeats the SSE event name,
/// whatever the SDK makes of them.
#[test]
fn responses_events_are_numbered_and_named() {
    let streams = [
        responses::text(&["a", "b"], (1, 2)),
        responses::function_call("c", "f", "{}", (1, 2)),
        responses::failed("server_error", "x"),
    ];
    for stream in streams {
        for (n, piece) in stream.iter().enumerate() {
            let (name, data) = piece
                .strip_prefix("event: ")
                .and_then(|p| p.strip_suffix("\n\n"))
                .and_then(|p| p.split_once("\ndata: "))
                .unwrap_or_else(|| panic!("not one SSE event: {piece:?}"));
            let data: Value = serde_json::from_str(data).unwrap();
            assert_eq!(data["type"], name, "{piece}");
            assert_eq!(data["sequence_number"], n, "{piece}");
        }
    }
}

/// Sends raw bytes, reads to the close; answers the reply's head (lowercased) and body.
fn exchange(port: u16, request: &[u8]) -> (String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).unwrap();
    let mut raw = Vec::new();
    // A reply that ends only when the fake closes: a keep-alive request must still get one.
    s.read_to_end(&mut raw).unwrap();
    let raw = String::from_utf8(raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    (head.to_ascii_lowercase(), body.to_owned())
}

#[test]
fn the_fake_copes_with_what_real_clients_send() {
    let fake = Fake::start();
    fake.script([Reply::Stream(responses::text(&["scripted"], (1, 1)))]);

    // A probe takes no scripted reply, and a keep-alive request is answered and closed.
    let (head, body) = exchange(
        fake.port,
        b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n",
    );
    assert!(head.starts_with("http/1.1 404"), "{head}");
    assert!(head.contains("\r\nconnection: close"), "{head}");
    assert_eq!(body, "{}");
    let (head, body) = exchange(fake.port, b"HEAD /v1/models HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(head.starts_with("http/1.1 404"), "{head}");
    assert_eq!(body, "", "a HEAD reply has no body");
    assert_eq!(fake.left(), 1);

    // A compressed body is refused, out loud, without taking the scripted reply.
    let (head, body) = exchange(
        fake.port,
        b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Encoding: zstd\r\nContent-Length: 2\r\n\r\n{}",
    );
    assert!(head.starts_with("http/1.1 415"), "{head}");
    assert!(body.contains("zstd"), "{body}");
    assert_eq!(fake.left(), 1);

    // A chunked body is read whole.
    let (head, body) = exchange(
        fake.port,
        b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
          6\r\n{\"inpu\r\nb\r\nt\":\"hi\"}   \r\n0\r\n\r\n",
    );
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("\r\nconnection: close"), "{head}");
    assert!(body.contains("\"delta\":\"scripted\""), "{body}");

    let seen = fake.seen();
    let methods: Vec<(&str, &str)> = seen
        .iter()
        .map(|s| (s.method.as_str(), s.path.as_str()))
        .collect();
    assert_eq!(
        methods,
        [
            ("GET", "/v1/models"),
            ("HEAD", "/v1/models"),
            ("POST", "/v1/responses"),
            ("POST", "/v1/responses"),
        ]
    );
    assert_eq!(seen[0].body, Value::Null);
    assert_eq!(seen[3].body, json!({"input": "hi"}));
}

#[test]
fn a_responder_answers_what_the_script_does_not() {
    let fake = Fake::start_with(|seen: &Seen| {
        let text = format!("{} {}", seen.method, seen.path);
        Reply::Stream(responses::text(&[&text], (1, 1)))
    });
    fake.script([Reply::Stream(responses::text(&["scripted"], (1, 1)))]);
    let post = |body: &str| http(fake.port, "POST", "/v1/responses", &[], body.as_bytes()).text();
    assert!(
        post("{}").contains("\"delta\":\"scripted\""),
        "the script first"
    );
    assert!(post("{}").contains("\"delta\":\"POST /v1/responses\""));
    let got = http(fake.port, "GET", "/v1/models", &[], b"");
    assert_eq!(got.status, 200, "a GET goes to the responder too");
    assert!(got.text().contains("\"delta\":\"GET /v1/models\""));

    // A responder that panics answers 500, and the fake goes on serving.
    let fake = Fake::start_with(|seen: &Seen| {
        assert!(seen.body.is_object(), "the test's own responder fails");
        Reply::Raw("{}".into())
    });
    assert_eq!(http(fake.port, "GET", "/", &[], b"").status, 500);
    assert_eq!(http(fake.port, "POST", "/", &[], b"{}").status, 200);
}
