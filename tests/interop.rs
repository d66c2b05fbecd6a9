//! Interop: the official A2A Python SDK (a2a-sdk, pinned in scripts/setup_test_deps.py) reads
//! the card of a real `mur` capsule under a strict ProtoJSON parser, then sends, gets, lists
//! and cancels through its own client, and maps the door's A2A errors to its own exceptions.
//! The SDK side is tests/interop/a2a_sdk_client.py; this test launches the capsule, runs the
//! script and checks what it saw. A machine without the SDK fails this test, naming the command
//! that installs it: interop is part of the contract, not optional.

mod support;

use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use support::*;

const INSTALL: &str = "python3 -m pip install a2a-sdk==1.3.0";

/// The interpreter the SDK is installed for: `MURMUR_TEST_PYTHON`, or python3.
fn python() -> String {
    std::env::var("MURMUR_TEST_PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

fn require_sdk() {
    let probe = Command::new(python())
        .args([
            "-c",
            "import a2a.client, importlib.metadata as m; print(m.version('a2a-sdk'))",
        ])
        .output();
    match probe {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!(
            "the official A2A Python SDK is not installed for {}: install it with `{INSTALL}` \
             (or run `python3 scripts/setup_test_deps.py`)\n{}",
            python(),
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => panic!(
            "cannot run {} ({e}); install Python 3, then `{INSTALL}`",
            python()
        ),
    }
}

#[test]
fn the_official_python_sdk_sends_gets_lists_and_cancels() {
    require_sdk();
    let home = Home::new();
    let run = start_fixture(&home, "murmur.yaml", &Fixture::default(), &[]);
    let url = format!("http://localhost:{}", run.port);
    let script = repo_root().join("tests/interop/a2a_sdk_client.py");
    let out = Command::new(python())
        .arg(&script)
        .arg(&url)
        .output()
        .expect("run the SDK client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the SDK client failed ({}):\n{stderr}\n{stdout}",
        out.status
    );
    let seen: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("the SDK client printed no JSON ({e}):\n{stdout}\n{stderr}"));

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
