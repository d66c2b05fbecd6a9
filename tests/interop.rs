//! Interop: the official A2A Python SDK (a2a-sdk, pinned in scripts/setup_test_deps.py) reads
//! the card of a real `mur` capsule under a strict ProtoJSON parser, then sends, gets, lists
//! and cancels through its own client, and maps the door's A2A errors to its own exceptions;
//! behind a bearer door it authenticates through its AuthInterceptor, streams, subscribes and
//! reads the extended card (the scenario tests/support/clients.rs checks for every client).
//! The SDK side is tests/interop/a2a_sdk_client.py; these tests launch the capsule, run the
//! script and check what it saw. Without the SDK they fail under CI=true and skip loudly
//! otherwise (docs/interop.md).

#[path = "support/clients.rs"]
mod clients;
mod support;

use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use support::*;

const SDK_VERSION: &str = "1.3.0";
const INSTALL: &str = "python3 -m pip install a2a-sdk==1.3.0";

/// The interpreter the SDK is installed for: `MURMUR_TEST_PYTHON`, or python3.
fn python() -> String {
    std::env::var("MURMUR_TEST_PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

/// Whether the pinned SDK imports under [`python`]; when not, fails under CI=true and skips
/// loudly otherwise, naming the command that installs it.
fn sdk_usable() -> bool {
    let probe = Command::new(python())
        .args([
            "-c",
            "import a2a.client, importlib.metadata as m; print(m.version('a2a-sdk'))",
        ])
        .output();
    let present = probe.is_ok_and(|out| {
        out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == SDK_VERSION
    });
    if !present {
        eprintln!(
            "a2a-sdk {SDK_VERSION} is not importable by {}: `{INSTALL}`",
            python()
        );
    }
    clients::usable("a2a-sdk", present)
}

/// Runs the SDK driver with `args`; answers the JSON object it printed.
fn drive(args: &[&str]) -> Value {
    let script = repo_root().join("tests/interop/a2a_sdk_client.py");
    let out = Command::new(python())
        .arg(&script)
        .args(args)
        .output()
        .expect("run the SDK client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the SDK client failed ({}):\n{stderr}\n{stdout}",
        out.status
    );
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("the SDK client printed no JSON ({e}):\n{stdout}\n{stderr}"))
}

#[test]
fn the_official_python_sdk_sends_gets_lists_and_cancels() {
    if !sdk_usable() {
        return;
    }
    let home = Home::new();
    let run = start_fixture(&home, "murmur.yaml", &Fixture::default(), &[]);
    let url = format!("http://localhost:{}", run.port);
    let seen = drive(&[&url]);

    assert_eq!(
        seen["strictCard"],
        json!({"name": "fixture", "interfaces": [[url, "JSONRPC", "1.0"]],
               "extensions": [DOOR_URI, CAPSULE_URI, STREAM_URI], "streaming": true})
    );

    let held = &seen["held"];
    let held_id = held["id"].as_str().unwrap_or_default();
    assert_eq!(
        held,
        &json!({"id": held_id, "contextId": "ctx-interop", "state": "TASK_STATE_COMPLETED",
                "statusText": ["task completed"],
                "artifacts": [{"artifactId": "response", "name": "response", "texts": ["Acknowledged."]}]})
    );
    let queued = seen["immediate"]["id"].as_str().unwrap_or_default();
    assert_eq!(seen["immediate"]["state"], "TASK_STATE_SUBMITTED");
    assert_eq!(seen["got"]["id"], queued);
    assert_eq!(seen["got"]["state"], "TASK_STATE_WORKING");
    assert_eq!(
        seen["listed"],
        json!({"ids": [queued, held_id], "totalSize": 2, "pageSize": 50, "nextPageToken": ""})
    );
    assert_eq!(seen["walk"], json!([[queued], [held_id], ""]));
    assert_eq!(seen["listedArtifacts"], json!([[], ["response"]]));
    assert_eq!(seen["canceled"]["id"], queued);
    assert_eq!(seen["canceled"]["state"], "TASK_STATE_CANCELED");
    assert_eq!(
        seen["cancelAgain"],
        json!({"error": "TaskNotCancelableError",
               "message": "Task cannot be canceled: it is already TASK_STATE_CANCELED",
               "data": {"taskId": queued, "state": "TASK_STATE_CANCELED"}})
    );
    assert_eq!(
        seen["unknown"],
        json!({"error": "TaskNotFoundError", "message": "Task not found",
               "data": {"taskId": "tsk_0000000000007000800000000000000a"}})
    );

    // The door agrees with what the SDK saw.
    let task = run.wait_task(queued, Duration::from_secs(10), |s| {
        s == "TASK_STATE_CANCELED"
    });
    assert_eq!(task["contextId"], "ctx-interop");
    quiet(&run, &home);
    let received = home
        .trace(&run.session)
        .iter()
        .filter(|e| e["event_type"] == "a2a_task_received")
        .count();
    assert_eq!(received, 2);
}

#[test]
fn the_official_python_sdk_authenticates_streams_subscribes_and_reads_the_extended_card() {
    if !sdk_usable() {
        return;
    }
    let home = Home::new();
    let (run, token) = clients::start_authenticated(&home);
    let url = format!("http://localhost:{}", run.port);
    let seen = drive(&[&url, "auth", &token]);

    clients::assert_scenario("a2a-sdk", &seen, &run, &home, &token);

    // The SDK raises its own client error for the door's 401, with the status and nothing of
    // the body; the AuthInterceptor adds nothing when the call's context holds no credential.
    let refusal = json!({"error": "A2AClientError", "data": null, "message": format!(
        "HTTP Error 401: Client error '401 Unauthorized' for url '{url}'\n\
         For more information check: https://developer.mozilla.org/en-US/docs/Web/HTTP/Status/401")});
    assert_eq!(seen["noToken"], refusal);
    assert_eq!(seen["badToken"], refusal);

    let live = clients::id_at(&seen, "/live/id", "a2a-sdk");
    assert_eq!(
        seen["cancelAgain"],
        json!({"error": "TaskNotCancelableError",
               "message": "Task cannot be canceled: it is already TASK_STATE_CANCELED",
               "data": {"taskId": live, "state": "TASK_STATE_CANCELED"}})
    );
    assert_eq!(
        seen["subscribeEnded"],
        json!({"error": "UnsupportedOperationError",
               "message": format!("task {live} has ended (TASK_STATE_CANCELED); there is nothing left to subscribe to"),
               "data": {"taskId": live, "state": "TASK_STATE_CANCELED"}})
    );
    assert_eq!(
        seen["unknown"],
        json!({"error": "TaskNotFoundError", "message": "Task not found",
               "data": {"taskId": "tsk_0000000000007000800000000000000a"}})
    );
}
