//! Interop: the official A2A JavaScript SDK (@a2a-js/sdk, pinned in tests/interop/js/, installed
//! by scripts/setup_test_deps.py) against a real `mur` capsule behind a bearer door. The SDK side
//! is tests/interop/a2a_js_client.mjs: it authenticates through the SDK's AuthenticationHandler,
//! then sends, streams, gets, lists, subscribes, cancels and reads the extended card; this test
//! launches the capsule, runs it under node and checks what it saw (tests/support/clients.rs).

#[path = "support/clients.rs"]
mod clients;
mod support;

use std::process::Command;

use serde_json::{json, Value};
use support::*;

const SDK_VERSION: &str = "1.3.0";

/// node_modules holding the pinned SDK, when node runs and setup installed it.
fn sdk() -> Option<std::path::PathBuf> {
    let modules = clients::dir().join("js/node_modules");
    let manifest = std::fs::read_to_string(modules.join("@a2a-js/sdk/package.json")).ok()?;
    let version: Value = serde_json::from_str(&manifest).ok()?;
    let node = Command::new("node").arg("--version").output().ok()?;
    (version["version"] == SDK_VERSION && node.status.success()).then_some(modules)
}

/// One JS SDK error as the driver summarises it: class, JSON-RPC code, message, ErrorInfo reason
/// and the error's `data` exactly as the door sent it.
fn js_error(class: &str, code: i64, message: &str, reason: &str, metadata: Value) -> Value {
    json!({"error": class, "code": code, "message": message, "reason": reason, "data": [
        {"@type": ERROR_INFO, "reason": reason, "domain": "a2a-protocol.org", "metadata": metadata}
    ]})
}

/// The JS SDK's error for an HTTP refusal: it quotes the status and the door's body.
fn http_refusal(body: &str) -> Value {
    json!({"error": "Error", "code": null, "reason": null, "data": null,
           "message": format!("HTTP error for GetTask! Status: 401 Unauthorized. Response: {body}")})
}

#[test]
fn the_official_js_sdk_authenticates_sends_streams_subscribes_lists_and_cancels() {
    let Some(modules) = sdk() else {
        clients::usable("a2a-js-sdk", false);
        return;
    };
    let home = Home::new();
    let (run, token) = clients::start_authenticated(&home);
    let url = format!("http://localhost:{}", run.port);
    let out = Command::new("node")
        .arg(repo_root().join("tests/interop/a2a_js_client.mjs"))
        .arg(&modules)
        .arg(&url)
        .arg(&token)
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the JS client failed ({}):\n{stderr}\n{stdout}",
        out.status
    );
    let seen: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("the JS client printed no JSON ({e}):\n{stdout}\n{stderr}"));

    clients::assert_scenario("@a2a-js/sdk", &seen, &run, &home, &token);

    // The door's 401 reaches the SDK with its exact body (agent-card.md, Security).
    assert_eq!(
        seen["noToken"],
        http_refusal(
            r#"{"error":"unauthenticated","message":"this door takes a bearer token: send Authorization: Bearer <token> (mur token prints them)"}"#
        )
    );
    assert_eq!(
        seen["badToken"],
        http_refusal(
            r#"{"error":"invalid_token","message":"the token is not one this session minted; tokens are valid for the session that minted them"}"#
        )
    );

    // listTasks({}) sends "status": "UNRECOGNIZED"; the door keeps the spec (docs/interop.md).
    assert_eq!(
        seen["listBare"],
        json!({"error": "JsonRpcRequestMalformedError", "code": -32602, "reason": "INVALID_PARAMS",
               "data": null,
               "message": "Invalid params: status must be a task state name such as TASK_STATE_WORKING"})
    );

    let live = clients::id_at(&seen, "/live/id", "@a2a-js/sdk");
    assert_eq!(
        seen["cancelAgain"],
        js_error(
            "JsonRpcTaskNotCancelableError",
            -32002,
            "Task cannot be canceled: it is already TASK_STATE_CANCELED",
            "TASK_NOT_CANCELABLE",
            json!({"taskId": live, "state": "TASK_STATE_CANCELED"})
        )
    );
    assert_eq!(
        seen["subscribeEnded"],
        js_error(
            "JsonRpcUnsupportedOperationError",
            -32004,
            &format!("task {live} has ended (TASK_STATE_CANCELED); there is nothing left to subscribe to"),
            "UNSUPPORTED_OPERATION",
            json!({"taskId": live, "state": "TASK_STATE_CANCELED"})
        )
    );
    assert_eq!(
        seen["unknown"],
        js_error(
            "JsonRpcTaskNotFoundError",
            -32001,
            "Task not found",
            "TASK_NOT_FOUND",
            json!({"taskId": "tsk_0000000000007000800000000000000a"})
        )
    );
}
