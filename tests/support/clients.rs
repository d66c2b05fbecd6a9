//! The official A2A clients the interop tests drive (tests/interop*.rs): where
//! scripts/setup_test_deps.py installed them, what to do when it could not, and the one scenario
//! every client runs against an authenticated door, checked here in one place so that "every
//! official client is proven" means the same thing for each.
//!
//! A client that is not installed fails its test under `CI=true` (CI installs every client, so
//! a missing one is a broken setup) and otherwise skips it, writing `SKIPPED: <client> ...` with
//! the reason setup recorded straight to stderr, past the test harness's capture, so a skip is
//! never silent. Include with `#[path = "support/clients.rs"] mod clients;` after `mod support;`.
#![allow(dead_code)]

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::*;

/// Where setup installs the JS SDK and a2acli: `MURMUR_INTEROP_CLIENTS`, or target/interop-clients.
pub fn dir() -> PathBuf {
    std::env::var_os("MURMUR_INTEROP_CLIENTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target/interop-clients"))
}

/// Answers whether `client` can be driven. When `present` is false it panics under `CI=true`,
/// and otherwise says loudly why the test is skipped and answers false.
pub fn usable(client: &str, present: bool) -> bool {
    if present {
        return true;
    }
    let why = std::fs::read_to_string(dir().join(format!("{client}.unavailable")))
        .map(|w| w.trim().to_owned())
        .unwrap_or_else(|_| "it is not installed".to_owned());
    let how =
        "run `python3 scripts/setup_test_deps.py` (scripts/test.sh does), see docs/interop.md";
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{client} could not be installed, and CI=true needs every client: {why}\n{how}");
    }
    let line = format!("\nSKIPPED: {client} could not be installed: {why}\n  ({how})\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
    false
}

/// The authenticated door every client's scenario runs against.
pub const AUTH: &str = "network:
  authentication:
    scheme: bearer
";

/// Launches the fixture behind a bearer door; answers the launch and its operator token.
pub fn start_authenticated(home: &Home) -> (Launch, String) {
    let f = Fixture {
        name: "interop",
        extra: AUTH,
        ..Fixture::default()
    };
    let run = start_fixture(home, "murmur.yaml", &f, &[]);
    let token = home.operator_token("@1");
    (run, token)
}

/// A JSON-RPC call with the operator's bearer token: the door's own view, to compare with a
/// client's.
pub fn door_rpc(run: &Launch, token: &str, method: &str, params: Value) -> Value {
    let auth = format!("Bearer {token}");
    let resp = run.post(
        &request(json!(1), method, params),
        &[("A2A-Version", "1.0"), ("Authorization", &auth)],
    );
    assert_result(&resp, method)
}

/// The id a client reported at `path` (a JSON pointer), or a failure naming what it saw.
pub fn id_at<'a>(seen: &'a Value, path: &str, client: &str) -> &'a str {
    seen.pointer(path)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{client} reported no id at {path}: {seen}"))
}

/// Checks what a client saw of the common scenario, key by key (each client's driver prints
/// this shape): a held send, a streamed send's events in order, a task started with
/// returnImmediately and read back WORKING, the listing, a subscription that sees the task's
/// opening state and then its cancel, the cancel itself, and the extended card. Then checks the
/// door agrees: the live task is canceled and the trace took exactly the three tasks.
pub fn assert_scenario(client: &str, seen: &Value, run: &Launch, home: &Home, token: &str) {
    let held = id_at(seen, "/held/id", client);
    assert_eq!(
        seen["held"],
        json!({"id": held, "contextId": "ctx-interop", "state": "TASK_STATE_COMPLETED",
               "statusText": ["task completed"],
               "artifacts": [{"artifactId": "response", "name": "response", "texts": ["Acknowledged."]}]}),
        "{client}: the held SendMessage"
    );

    let streamed = id_at(seen, "/streamed/0/taskId", client);
    assert_ne!(streamed, held, "{client}: the stream started its own task");
    assert_eq!(
        seen["streamed"],
        json!([
            {"kind": "task", "taskId": streamed, "state": "TASK_STATE_SUBMITTED"},
            {"kind": "statusUpdate", "taskId": streamed, "state": "TASK_STATE_WORKING"},
            {"kind": "artifactUpdate", "taskId": streamed, "artifactId": "response", "texts": ["Acknowledged."]},
            {"kind": "statusUpdate", "taskId": streamed, "state": "TASK_STATE_COMPLETED"},
        ]),
        "{client}: SendStreamingMessage's events, in order, ending at the terminal status"
    );

    let live = id_at(seen, "/live/id", client);
    assert_eq!(
        seen["live"]["state"], "TASK_STATE_SUBMITTED",
        "{client}: {seen}"
    );
    assert_eq!(seen["live"]["contextId"], "ctx-interop", "{client}");
    assert_eq!(seen["got"]["id"], live, "{client}: GetTask");
    assert_eq!(
        seen["got"]["state"], "TASK_STATE_WORKING",
        "{client}: GetTask"
    );

    assert_eq!(
        seen["listed"],
        json!({"ids": [live, streamed, held], "totalSize": 3}),
        "{client}: ListTasks, the latest change first"
    );

    assert_eq!(
        seen["subscribed"],
        json!([
            {"kind": "task", "taskId": live, "state": "TASK_STATE_WORKING"},
            {"kind": "statusUpdate", "taskId": live, "state": "TASK_STATE_CANCELED"},
        ]),
        "{client}: SubscribeToTask opens with the task as it is and ends at its terminal status"
    );
    assert_eq!(seen["canceled"]["id"], live, "{client}: CancelTask");
    assert_eq!(seen["canceled"]["state"], "TASK_STATE_CANCELED", "{client}");

    assert_eq!(
        seen["extended"],
        json!({"extensions": [DOOR_URI, CAPSULE_URI, STREAM_URI], "sessionId": run.session,
               "extendedAgentCard": true, "securitySchemes": ["bearer"]}),
        "{client}: GetExtendedAgentCard"
    );

    // The door agrees with what the client saw.
    let task = door_rpc(run, token, "GetTask", json!({"id": live}));
    assert_eq!(task["status"]["state"], "TASK_STATE_CANCELED");
    assert_eq!(task["contextId"], "ctx-interop");
    let mut received = 0;
    // Bounded past the grace: a harness canceled in its start-up may miss the SIGINT.
    let settled = wait_until(Duration::from_secs(30), || {
        let trace = home.trace(&run.session);
        let count = |kind: &str| trace.iter().filter(|e| e["event_type"] == kind).count();
        received = count("a2a_task_received");
        received == 3 && count("task_end") == 3
    });
    assert!(
        settled,
        "{client}: the trace should hold 3 received and 3 ended tasks; it has {received} received"
    );
}
