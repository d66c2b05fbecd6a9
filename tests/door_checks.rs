//! agent-card.md "What the door answers", "JSON-RPC request", "A2A-Version", "Errors", "Push
//! notifications", "Tenants" and "Completion errors", row by row, against the real `mur` on a
//! public door. Every refusal is checked for its HTTP status, exact code, message and ErrorInfo,
//! and for having started no task, written no trace record and run no harness (each refused
//! message that could have started one carries an `@pidfile` the harness would have written).

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use support::*;

const V1: (&str, &str) = ("A2A-Version", "1.0");
const CT: (&str, &str) = ("Content-Type", "application/json");
/// A bound on waits for what should come at once, past the harness grace (10 s): a harness
/// that missed its interrupt ends only after it.
const SETTLE: Duration = Duration::from_secs(30);

/// Header lines sent exactly as listed.
type Headers<'a> = Vec<(&'a str, &'a str)>;
/// A raw HTTP row: (row, method, path, headers, body).
type RawRow<'a, B> = (&'a str, &'a str, &'a str, Headers<'a>, B);

/// SendMessage params whose harness, if it ever ran, writes `pid`.
fn pid_message(pid: &std::path::Path) -> Value {
    json!({"message": {"messageId": "m-1", "role": "ROLE_USER",
                       "parts": [{"text": format!("@pidfile {}", pid.display())}]}})
}

fn queue_capsule(home: &Home) -> Launch {
    start_fixture(home, "murmur.yaml", &Fixture::default(), &[])
}

/// Cancels a task a row left running, so the capsule is idle again.
fn cancel(run: &Launch, id: &str) {
    assert_result(&run.call("CancelTask", json!({"id": id})), "cleanup cancel");
    run.wait_task(id, SETTLE, |s| s == "TASK_STATE_CANCELED");
}

#[test]
fn step_5_anything_but_a_post_of_json_to_root_is_404() {
    let home = Home::new();
    let run = queue_capsule(&home);
    let probe = Probe::take(&run, &home);
    let pid = pidfile(&home);
    let good = request(json!(1), "SendMessage", pid_message(&pid));
    let rows: Vec<RawRow<&str>> = vec![
        ("GET /", "GET", "/", vec![V1], ""),
        ("GET /tasks", "GET", "/tasks", vec![V1], ""),
        ("PUT / with a request", "PUT", "/", vec![CT, V1], &good),
        ("DELETE /", "DELETE", "/", vec![CT, V1], &good),
        ("POST /rpc", "POST", "/rpc", vec![CT, V1], &good),
        (
            "POST to the card",
            "POST",
            "/.well-known/agent-card.json",
            vec![CT, V1],
            &good,
        ),
        ("POST / without content-type", "POST", "/", vec![V1], &good),
        (
            "POST / as text/plain",
            "POST",
            "/",
            vec![("Content-Type", "text/plain"), V1],
            &good,
        ),
        (
            "POST / as application/jsonl",
            "POST",
            "/",
            vec![("Content-Type", "application/jsonl"), V1],
            &good,
        ),
        ("POST / with no body", "POST", "/", vec![CT, V1], ""),
        (
            "the undeclared operator plane",
            "GET",
            "/resources/files/notes.txt",
            vec![V1],
            "",
        ),
        (
            "the undeclared operator plane, POST",
            "POST",
            "/resources/files",
            vec![CT, V1],
            &good,
        ),
    ];
    for (row, method, path, headers, body) in rows {
        let resp = http(run.port, method, path, &headers, body.as_bytes());
        assert_eq!(resp.status, 404, "{row}: {}", resp.text());
        if let Ok(v) = serde_json::from_slice::<Value>(&resp.body) {
            assert!(
                v.get("jsonrpc").is_none(),
                "{row}: a 404 is not a JSON-RPC envelope: {v}"
            );
        }
        assert!(resp.header("a2a-extensions").is_none(), "{row}");
        probe.unchanged(&run, &home, row);
    }
    assert!(!pid.exists(), "a refused request ran a harness");

    // The media type takes parameters: a charset does not make it another type.
    let resp = run.post(
        &request(json!(1), "ListTasks", json!({})),
        &[("Content-Type", "application/json; charset=utf-8"), V1],
    );
    assert_eq!(assert_result(&resp, "charset")["totalSize"], 0);
}

#[test]
fn steps_6_and_7_parse_errors_and_invalid_requests() {
    let home = Home::new();
    let run = queue_capsule(&home);
    let probe = Probe::take(&run, &home);
    let pid = pidfile(&home);
    let parse = std_error(-32700, "Invalid JSON payload");
    let invalid = std_error(-32600, "Request payload validation error");
    let pm = pid_message(&pid);
    let rows: Vec<(&str, Vec<u8>, Value, &Value)> = vec![
        ("not JSON", b"not json".to_vec(), Value::Null, &parse),
        ("an open brace", b"{".to_vec(), Value::Null, &parse),
        (
            "a trailing comma, id unreadable",
            br#"{"jsonrpc":"2.0","id":5,"method":"ListTasks",}"#.to_vec(),
            Value::Null,
            &parse,
        ),
        (
            "bytes that are not UTF-8",
            vec![0xff, 0xfe, 0x7b],
            Value::Null,
            &parse,
        ),
        ("an empty array", b"[]".to_vec(), Value::Null, &invalid),
        (
            "a batch",
            br#"[{"jsonrpc":"2.0","id":1,"method":"ListTasks"}]"#.to_vec(),
            Value::Null,
            &invalid,
        ),
        (
            "a string",
            br#""ListTasks""#.to_vec(),
            Value::Null,
            &invalid,
        ),
        ("a number", b"42".to_vec(), Value::Null, &invalid),
        ("null", b"null".to_vec(), Value::Null, &invalid),
        ("an empty object", b"{}".to_vec(), Value::Null, &invalid),
        (
            "no jsonrpc",
            br#"{"id":1,"method":"ListTasks"}"#.to_vec(),
            json!(1),
            &invalid,
        ),
        (
            "jsonrpc 1.0",
            br#"{"jsonrpc":"1.0","id":1,"method":"ListTasks"}"#.to_vec(),
            json!(1),
            &invalid,
        ),
        (
            "jsonrpc a number",
            br#"{"jsonrpc":2.0,"id":"a","method":"ListTasks"}"#.to_vec(),
            json!("a"),
            &invalid,
        ),
        (
            "no method",
            br#"{"jsonrpc":"2.0","id":7}"#.to_vec(),
            json!(7),
            &invalid,
        ),
        (
            "method a number",
            br#"{"jsonrpc":"2.0","id":7,"method":5}"#.to_vec(),
            json!(7),
            &invalid,
        ),
        (
            "method null",
            br#"{"jsonrpc":"2.0","id":"x","method":null}"#.to_vec(),
            json!("x"),
            &invalid,
        ),
        (
            "a notification",
            br#"{"jsonrpc":"2.0","method":"ListTasks"}"#.to_vec(),
            Value::Null,
            &invalid,
        ),
        (
            "id null",
            br#"{"jsonrpc":"2.0","id":null,"method":"ListTasks"}"#.to_vec(),
            Value::Null,
            &invalid,
        ),
        (
            "id a fraction",
            br#"{"jsonrpc":"2.0","id":1.5,"method":"ListTasks"}"#.to_vec(),
            Value::Null,
            &invalid,
        ),
        (
            "id a boolean",
            br#"{"jsonrpc":"2.0","id":true,"method":"ListTasks"}"#.to_vec(),
            Value::Null,
            &invalid,
        ),
        (
            "id an object",
            br#"{"jsonrpc":"2.0","id":{"a":1},"method":"ListTasks"}"#.to_vec(),
            Value::Null,
            &invalid,
        ),
        (
            "id an array, no method",
            br#"{"jsonrpc":"2.0","id":[1]}"#.to_vec(),
            Value::Null,
            &invalid,
        ),
        (
            "a SendMessage that is not JSON-RPC 2.0",
            json!({"jsonrpc": "1.0", "id": 3, "method": "SendMessage", "params": pm})
                .to_string()
                .into_bytes(),
            json!(3),
            &invalid,
        ),
        (
            "a SendMessage notification",
            json!({"jsonrpc": "2.0", "method": "SendMessage", "params": pm})
                .to_string()
                .into_bytes(),
            Value::Null,
            &invalid,
        ),
    ];
    for (row, body, id, error) in &rows {
        // Steps 6 and 7 come before the version (step 8): the header changes nothing.
        for headers in [vec![CT, V1], vec![CT]] {
            let resp = http(run.port, "POST", "/", &headers, body);
            assert_rpc_error(&resp, id.clone(), error, row);
            probe.unchanged(&run, &home, row);
        }
    }
    assert!(!pid.exists(), "a refused request ran a harness");

    // JSON-RPC request table, accepted column: ids echoed as sent, params optional, extra
    // members ignored.
    let served: Vec<(&str, String, Value)> = vec![
        (
            "a string id",
            r#"{"jsonrpc":"2.0","id":"abc","method":"ListTasks","params":{}}"#.into(),
            json!("abc"),
        ),
        (
            "an empty string id",
            r#"{"jsonrpc":"2.0","id":"","method":"ListTasks"}"#.into(),
            json!(""),
        ),
        (
            "an integer id",
            r#"{"jsonrpc":"2.0","id":42,"method":"ListTasks","params":{}}"#.into(),
            json!(42),
        ),
        (
            "a negative id",
            r#"{"jsonrpc":"2.0","id":-3,"method":"ListTasks"}"#.into(),
            json!(-3),
        ),
        (
            "params omitted",
            r#"{"jsonrpc":"2.0","id":0,"method":"ListTasks"}"#.into(),
            json!(0),
        ),
        (
            "members beyond the four",
            r#"{"jsonrpc":"2.0","id":9,"method":"ListTasks","params":{},"extra":true,"result":1}"#
                .into(),
            json!(9),
        ),
    ];
    for (row, body, id) in served {
        let resp = run.post(&body, &[V1]);
        assert_eq!(resp.json()["id"], id, "{row}: id echoed as sent");
        assert_eq!(assert_result(&resp, row)["totalSize"], 0, "{row}");
    }
}

#[test]
fn step_8_a2a_version_table() {
    let home = Home::new();
    let run = queue_capsule(&home);
    let probe = Probe::take(&run, &home);
    let list = request(json!(1), "ListTasks", json!({}));

    // Served: 1.0 or 1.0.<digits>, the name in any case, surrounding whitespace ignored.
    for (row, name, value) in [
        ("1.0", "A2A-Version", "1.0"),
        ("1.0.1", "A2A-Version", "1.0.1"),
        ("1.0.12", "A2A-Version", "1.0.12"),
        ("surrounding whitespace", "A2A-Version", "  1.0  "),
        ("lowercase name", "a2a-version", "1.0"),
        ("uppercase name", "A2A-VERSION", "1.0"),
    ] {
        let resp = run.post(&list, &[(name, value)]);
        assert_eq!(assert_result(&resp, row)["totalSize"], 0, "{row}");
    }

    let refused = |requested: &str| {
        a2a_error(
            -32009,
            &format!("A2A version '{requested}' is not supported; this agent speaks 1.0"),
            "VERSION_NOT_SUPPORTED",
            json!({"requestedVersion": requested, "supportedVersions": "1.0"}),
        )
    };
    let rows: Vec<(&str, &str, Headers, &str)> = vec![
        ("absent", "/", vec![], ""),
        ("empty", "/", vec![("A2A-Version", "")], ""),
        ("0.3", "/", vec![("A2A-Version", "0.3")], "0.3"),
        ("1", "/", vec![("A2A-Version", "1")], "1"),
        ("1.1", "/", vec![("A2A-Version", "1.1")], "1.1"),
        ("2.0", "/", vec![("A2A-Version", "2.0")], "2.0"),
        ("1.0x", "/", vec![("A2A-Version", "1.0x")], "1.0x"),
        ("1.0.", "/", vec![("A2A-Version", "1.0.")], "1.0."),
        ("1.0.1a", "/", vec![("A2A-Version", "1.0.1a")], "1.0.1a"),
        ("v1.0", "/", vec![("A2A-Version", "v1.0")], "v1.0"),
        // Not ASCII: still named as sent, not as "".
        ("1.0é", "/", vec![("A2A-Version", "1.0é")], "1.0é"),
        (
            "two lines of 1.0",
            "/",
            vec![("A2A-Version", "1.0"), ("A2A-Version", "1.0")],
            "1.0,1.0",
        ),
        (
            "two lines, 1.0 and 0.3",
            "/",
            vec![("A2A-Version", "1.0"), ("a2a-version", "0.3")],
            "1.0,0.3",
        ),
        ("a query parameter", "/?A2A-Version=1.0", vec![], ""),
    ];
    for (row, path, headers, requested) in &rows {
        let mut all = vec![CT];
        all.extend(headers.iter().copied());
        let resp = http(run.port, "POST", path, &all, list.as_bytes());
        assert_rpc_error(&resp, json!(1), &refused(requested), row);
        probe.unchanged(&run, &home, row);
    }

    // Every method is negotiated, served or not; streams answer one JSON body.
    let pid = pidfile(&home);
    let methods: Vec<(&str, Value)> = vec![
        ("SendMessage", pid_message(&pid)),
        ("SendStreamingMessage", pid_message(&pid)),
        ("murmur.WatchSession", json!({})),
        ("GetTask", json!({"id": "tsk_x"})),
        ("ListTasks", json!({})),
        ("CancelTask", json!({"id": "tsk_x"})),
        ("SubscribeToTask", json!({"id": "tsk_x"})),
        ("murmur.StopSession", json!({})),
        ("GetExtendedAgentCard", json!({})),
        ("CreateTaskPushNotificationConfig", json!({})),
        ("GetTaskPushNotificationConfig", json!({})),
        ("ListTaskPushNotificationConfigs", json!({})),
        ("DeleteTaskPushNotificationConfig", json!({})),
        ("NoSuchMethod", json!({})),
        ("message/send", json!({})),
    ];
    for (method, params) in &methods {
        for (requested, headers) in [("", vec![CT]), ("0.3", vec![CT, ("A2A-Version", "0.3")])] {
            let body = request(json!("v"), method, params.clone());
            let resp = http(run.port, "POST", "/", &headers, body.as_bytes());
            assert_rpc_error(&resp, json!("v"), &refused(requested), method);
            probe.unchanged(&run, &home, method);
        }
    }
    // A completion is negotiated too (step 8 comes before step 9).
    let resp = http(
        run.port,
        "POST",
        "/",
        &[CT, ("x-murmur-task-origin", "completion")],
        request(json!(2), "SendMessage", json!({})).as_bytes(),
    );
    assert_rpc_error(&resp, json!(2), &refused(""), "a completion");
    assert!(!pid.exists(), "a refused request ran a harness");

    // Nothing is stopped: a live task survives StopSession and CancelTask without the header.
    let live = run.start_working("@sleep 30");
    for (method, params) in [
        ("murmur.StopSession", json!({})),
        ("CancelTask", json!({"id": live})),
    ] {
        let resp = http(
            run.port,
            "POST",
            "/",
            &[CT],
            request(json!(1), method, params).as_bytes(),
        );
        assert_rpc_error(&resp, json!(1), &refused(""), method);
        let task = run.rpc("GetTask", json!({"id": live}));
        assert_eq!(
            task["result"]["status"]["state"], "TASK_STATE_WORKING",
            "{method} stopped it"
        );
    }
    cancel(&run, &live);
}

#[test]
fn step_10_methods_the_door_does_not_list() {
    let home = Home::new();
    let run = queue_capsule(&home);
    let probe = Probe::take(&run, &home);
    let not_found = std_error(-32601, "Method not found");
    let pid = pidfile(&home);

    // Names match exactly, and the door serves no alias for the A2A 0.3 or old murmur names.
    let names = [
        "NoSuchMethod",
        "",
        "sendmessage",
        "SENDMESSAGE",
        " SendMessage",
        "SendMessage ",
        "GetTask\n",
        "murmur.stopsession",
        "StopSession",
        "WatchSession",
        "murmur.GetTask",
        "murmur.SendMessage",
        "message/send",
        "message/stream",
        "tasks/get",
        "tasks/cancel",
        "tasks/resubscribe",
        "agent/getAuthenticatedExtendedCard",
        "stream/watch",
        "session/stop",
    ];
    for name in names {
        // The method is read before params (step 12) and tenant (step 13).
        for params in [pid_message(&pid), json!("x"), json!({"tenant": "acme"})] {
            let resp = run.post(&request(json!(4), name, params), &[V1]);
            assert_rpc_error(&resp, json!(4), &not_found, &format!("method {name:?}"));
        }
        probe.unchanged(&run, &home, name);
    }

    // The four push config methods: -32003 to every caller, before any params check.
    let push = a2a_error(
        -32003,
        "push notifications are not supported by this agent",
        "PUSH_NOTIFICATION_NOT_SUPPORTED",
        json!({}),
    );
    for name in [
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
    ] {
        for params in [
            json!({}),
            json!({"taskId": "tsk_x", "url": "http://localhost:9/hook"}),
            json!("not an object"),
            json!({"tenant": "acme"}),
        ] {
            let resp = run.post(&request(json!(5), name, params), &[V1]);
            assert_rpc_error(&resp, json!(5), &push, name);
        }
        let resp = run.post(
            &format!(r#"{{"jsonrpc":"2.0","id":5,"method":"{name}"}}"#),
            &[V1],
        );
        assert_rpc_error(&resp, json!(5), &push, name);
        probe.unchanged(&run, &home, name);
    }

    // A public door has no extended card.
    let no_card = a2a_error(
        -32004,
        "GetExtendedAgentCard is not supported: this door is public and has no extended card",
        "UNSUPPORTED_OPERATION",
        json!({}),
    );
    for params in [json!({}), json!([1]), json!({"tenant": "acme"})] {
        let resp = run.post(&request(json!(6), "GetExtendedAgentCard", params), &[V1]);
        assert_rpc_error(&resp, json!(6), &no_card, "GetExtendedAgentCard");
    }
    probe.unchanged(&run, &home, "GetExtendedAgentCard");
    assert!(!pid.exists(), "a refused request ran a harness");
}

#[test]
fn step_10_a_door_that_starts_no_task() {
    let home = Home::new();
    let fixture = Fixture {
        acceptance: "none",
        queue_depth: None,
        ..Fixture::default()
    };
    let run = start_fixture(&home, "murmur.yaml", &fixture, &[]);
    let probe = Probe::take(&run, &home);
    let pid = pidfile(&home);

    let resp = run.call("SendMessage", pid_message(&pid));
    assert_rpc_error(
        &resp,
        json!(1),
        &std_error(-32601, "Method not found"),
        "SendMessage under none",
    );
    for (method, params) in [
        ("SendStreamingMessage", pid_message(&pid)),
        ("SubscribeToTask", json!({"id": "tsk_x"})),
        ("SubscribeToTask", json!({})),
    ] {
        let message = format!(
            "{method} is not supported: this door starts no task (lifecycle.task_acceptance: none)"
        );
        let error = a2a_error(-32004, &message, "UNSUPPORTED_OPERATION", json!({}));
        assert_rpc_error(&run.call(method, params), json!(1), &error, method);
    }
    let push = run.call("CreateTaskPushNotificationConfig", json!({}));
    assert_eq!(push.json()["error"]["code"], -32003);
    assert_eq!(
        run.call("GetExtendedAgentCard", json!({})).json()["error"]["code"],
        -32004
    );
    probe.unchanged(&run, &home, "none door refusals");

    // What a door that starts no task still serves.
    let list = assert_result(&run.call("ListTasks", json!({})), "ListTasks");
    assert_eq!(list["totalSize"], 0);
    let error = a2a_error(
        -32001,
        "Task not found",
        "TASK_NOT_FOUND",
        json!({"taskId": "tsk_x"}),
    );
    assert_rpc_error(
        &run.call("GetTask", json!({"id": "tsk_x"})),
        json!(1),
        &error,
        "GetTask",
    );
    assert_rpc_error(
        &run.call("CancelTask", json!({"id": "tsk_x"})),
        json!(1),
        &error,
        "CancelTask",
    );
    let stop = assert_result(&run.call("murmur.StopSession", json!({})), "StopSession");
    assert_eq!(stop["canceled"], json!([]));
    probe.unchanged(&run, &home, "none door served methods");
    assert!(!pid.exists());
}

#[test]
fn step_12_params_that_is_not_an_object() {
    let home = Home::new();
    let run = queue_capsule(&home);
    let probe = Probe::take(&run, &home);
    let error = invalid_params("Invalid params: params must be an object");
    for method in [
        "SendMessage",
        "GetTask",
        "ListTasks",
        "CancelTask",
        "murmur.StopSession",
    ] {
        for params in [
            json!([]),
            json!([{"id": "tsk_x"}]),
            json!("x"),
            json!(5),
            json!(true),
            Value::Null,
        ] {
            let resp = run.post(&request(json!("p"), method, params.clone()), &[V1]);
            assert_rpc_error(
                &resp,
                json!("p"),
                &error,
                &format!("{method} params {params}"),
            );
        }
        probe.unchanged(&run, &home, method);
    }
    // Present and an object, or omitted: served.
    for body in [
        r#"{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"ListTasks"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"murmur.StopSession"}"#,
    ] {
        assert_result(&run.post(body, &[V1]), body);
    }

    // A refusal here stops nothing.
    let live = run.start_working("@sleep 30");
    let resp = run.post(&request(json!(1), "murmur.StopSession", json!([])), &[V1]);
    assert_rpc_error(&resp, json!(1), &error, "StopSession with params []");
    let resp = run.post(&request(json!(1), "CancelTask", json!([live])), &[V1]);
    assert_rpc_error(&resp, json!(1), &error, "CancelTask with params [id]");
    assert_eq!(
        run.rpc("GetTask", json!({"id": live}))["result"]["status"]["state"],
        "TASK_STATE_WORKING"
    );
    cancel(&run, &live);
}

#[test]
fn step_13_tenants() {
    let home = Home::new();
    let run = queue_capsule(&home);
    let probe = Probe::take(&run, &home);
    let pid = pidfile(&home);
    let tenant_error = |shown: &str| {
        invalid_params(&format!(
            "Invalid params: tenant {shown} names a tenant; this agent serves no tenants, so omit tenant"
        ))
    };
    let methods: Vec<(&str, Value)> = vec![
        ("SendMessage", pid_message(&pid)),
        ("SendMessage", json!({"message": "not even a message"})),
        ("GetTask", json!({"id": "tsk_x"})),
        ("GetTask", json!({})),
        ("ListTasks", json!({"pageSize": 0})),
        ("CancelTask", json!({"id": "tsk_x"})),
        ("murmur.StopSession", json!({})),
    ];
    // The value is shown as JSON.
    let tenants = [
        (json!("acme"), r#""acme""#),
        (json!(7), "7"),
        (json!(null), "null"),
        (json!(false), "false"),
        (json!(" "), r#"" ""#),
        (json!({"id": "a"}), r#"{"id":"a"}"#),
    ];
    for (method, params) in &methods {
        for (tenant, shown) in &tenants {
            let mut p = params.clone();
            p["tenant"] = tenant.clone();
            let resp = run.post(&request(json!(8), method, p), &[V1]);
            assert_rpc_error(
                &resp,
                json!(8),
                &tenant_error(shown),
                &format!("{method} tenant {shown}"),
            );
        }
        probe.unchanged(&run, &home, method);
    }
    assert!(!pid.exists(), "a message naming a tenant ran a harness");

    // "" is the unset value: served as if absent.
    let mut send = message("plain", false);
    send["tenant"] = json!("");
    let task = assert_result(&run.call("SendMessage", send), "SendMessage tenant \"\"");
    assert_eq!(task["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    let id = task["task"]["id"].as_str().unwrap().to_owned();
    let got = assert_result(
        &run.call("GetTask", json!({"id": id, "tenant": ""})),
        "GetTask tenant \"\"",
    );
    assert_eq!(got["id"], id.as_str());
    assert_eq!(
        assert_result(&run.call("ListTasks", json!({"tenant": ""})), "ListTasks")["totalSize"],
        1
    );
    let done = run.call("CancelTask", json!({"id": id, "tenant": ""}));
    assert_eq!(
        done.json()["error"]["code"],
        -32002,
        "CancelTask with tenant \"\" is served"
    );
    assert_result(
        &run.call("murmur.StopSession", json!({"tenant": ""})),
        "StopSession tenant \"\"",
    );

    // Nothing starts, stops or is cancelled.
    let live = run.start_working("@sleep 30");
    let probe = Probe::take(&run, &home);
    for (method, params) in [
        ("murmur.StopSession", json!({"tenant": "acme"})),
        ("CancelTask", json!({"id": live, "tenant": "acme"})),
    ] {
        assert_rpc_error(
            &run.call(method, params),
            json!(1),
            &tenant_error(r#""acme""#),
            method,
        );
        let state = run.rpc("GetTask", json!({"id": live}))["result"]["status"]["state"].clone();
        assert_eq!(
            state, "TASK_STATE_WORKING",
            "{method} with a tenant stopped the task"
        );
    }
    probe.unchanged(&run, &home, "tenant on a live session");
    cancel(&run, &live);
}

#[test]
fn step_3_peer_consent() {
    let home = Home::new();
    let run = queue_capsule(&home);
    let probe = Probe::take(&run, &home);
    let pid = pidfile(&home);
    let peer = ("x-murmur-task-origin", "peer");
    let send = request(json!(1), "SendMessage", pid_message(&pid));
    let rows: Vec<RawRow<Vec<u8>>> = vec![
        (
            "SendMessage",
            "POST",
            "/",
            vec![CT, V1, peer],
            send.clone().into_bytes(),
        ),
        (
            "GetTask",
            "POST",
            "/",
            vec![CT, V1, peer],
            request(json!(1), "GetTask", json!({"id": "t"})).into_bytes(),
        ),
        (
            "StopSession",
            "POST",
            "/",
            vec![CT, V1, peer],
            request(json!(1), "murmur.StopSession", json!({})).into_bytes(),
        ),
        (
            "no A2A-Version",
            "POST",
            "/",
            vec![CT, peer],
            send.clone().into_bytes(),
        ),
        (
            "a body that is not JSON",
            "POST",
            "/",
            vec![CT, V1, peer],
            b"{".to_vec(),
        ),
        (
            "an unknown method",
            "POST",
            "/",
            vec![CT, V1, peer],
            request(json!(1), "Nope", json!({})).into_bytes(),
        ),
        (
            "a path that is not /",
            "POST",
            "/elsewhere",
            vec![CT, V1, peer],
            send.clone().into_bytes(),
        ),
        ("GET /", "GET", "/", vec![peer], vec![]),
        (
            "the operator plane",
            "GET",
            "/resources/files/a",
            vec![peer],
            vec![],
        ),
    ];
    let mut bodies = Vec::new();
    for (row, method, path, headers, body) in &rows {
        let resp = http(run.port, method, path, headers, body);
        assert_eq!(resp.status, 403, "{row}: {}", resp.text());
        assert!(resp.header("www-authenticate").is_none(), "{row}");
        assert!(resp.header("a2a-extensions").is_none(), "{row}");
        let v = resp.json();
        assert_eq!(v["error"], "peer_not_accepted", "{row}: {v}");
        assert!(v["message"].is_string(), "{row}: {v}");
        assert_eq!(
            v.as_object().map(|o| o.len()),
            Some(2),
            "{row}: the body is error and message: {v}"
        );
        bodies.push(resp.body);
        probe.unchanged(&run, &home, row);
    }
    assert!(
        bodies.windows(2).all(|w| w[0] == w[1]),
        "the refusal is byte-identical for every request"
    );
    assert!(!pid.exists(), "a refused peer message ran a harness");

    // Step 1 comes first: the card is served to a peer too.
    let card = http(
        run.port,
        "GET",
        "/.well-known/agent-card.json",
        &[peer],
        b"",
    );
    assert_eq!(card.status, 200);
    assert_eq!(
        card.json()["capabilities"]["extensions"][0]["params"]["peerTasks"],
        false
    );

    // A capsule that accepts peer tasks serves them.
    let home2 = Home::new();
    let accepting = Fixture {
        extra: "exports:\n  peer_tasks:\n    accept: true\n",
        ..Fixture::default()
    };
    let run2 = start_fixture(&home2, "murmur.yaml", &accepting, &[]);
    let resp = run2.post(
        &request(json!(1), "SendMessage", message("from a peer", false)),
        &[V1, peer],
    );
    assert_eq!(
        assert_result(&resp, "peer SendMessage")["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    let resp = run2.post(
        &request(json!(1), "GetTask", json!({"id": "tsk_x"})),
        &[V1, peer],
    );
    assert_eq!(resp.json()["error"]["code"], -32001);
}

#[test]
fn step_2_a_public_door_ignores_authorization() {
    let home = Home::new();
    let run = queue_capsule(&home);
    let rows: Vec<(&str, Vec<(&str, &str)>)> = vec![
        (
            "a bearer token this session never minted",
            vec![("Authorization", "Bearer not-a-token")],
        ),
        (
            "another scheme",
            vec![("Authorization", "Basic dXNlcjpwYXNz")],
        ),
        ("an empty header", vec![("Authorization", "")]),
        (
            "two headers",
            vec![("Authorization", "Bearer a"), ("Authorization", "Bearer b")],
        ),
    ];
    for (row, extra) in rows {
        let mut headers = vec![V1];
        headers.extend(extra);
        let resp = run.post(
            &request(json!(1), "SendMessage", message("hello", false)),
            &headers,
        );
        assert_eq!(
            assert_result(&resp, row)["task"]["status"]["state"],
            "TASK_STATE_COMPLETED",
            "{row}"
        );
        assert!(resp.header("www-authenticate").is_none(), "{row}");
    }
    assert_eq!(run.total_tasks(), 4);
}

#[test]
fn step_9_completion_errors() {
    let home = Home::new();
    let run = queue_capsule(&home);
    let probe = Probe::take(&run, &home);
    let origin = ("x-murmur-task-origin", "completion");
    let own = run.session.clone();
    let misaddressed = |named: &str| {
        murmur_error(
            -31001,
            "this completion is addressed to another session",
            "COMPLETION_MISADDRESSED",
            json!({"addressedSession": named}),
        )
    };
    let other = "ses_0000000000007000800000000000000a";
    let completion = json!({"message": {"messageId": "m", "role": "ROLE_USER",
                                        "parts": [{"data": {"delegation_id": "dlg_x"}}]}});
    let rows: Vec<(&str, Headers, String, Value)> = vec![
        (
            "names no session",
            vec![origin],
            request(json!(1), "SendMessage", completion.clone()),
            misaddressed(""),
        ),
        (
            "names another session",
            vec![origin, ("x-murmur-completion-session", other)],
            request(json!(1), "SendMessage", completion.clone()),
            misaddressed(other),
        ),
        (
            "misaddressed, before its method is read",
            vec![origin, ("x-murmur-completion-session", other)],
            request(json!(1), "NoSuchMethod", json!("x")),
            misaddressed(other),
        ),
        (
            "misaddressed, before its params are read",
            vec![
                origin,
                ("x-murmur-completion-session", other),
                ("x-murmur-delegation-id", "dlg_1"),
            ],
            request(json!(1), "SendMessage", json!({"tenant": "acme"})),
            misaddressed(other),
        ),
        (
            "a completion with another method",
            vec![
                origin,
                ("x-murmur-completion-session", &own),
                ("x-murmur-delegation-id", "dlg_1"),
            ],
            request(json!(1), "GetTask", json!({"id": "tsk_x"})),
            std_error(-32601, "Method not found"),
        ),
        (
            "names no delegation",
            vec![origin, ("x-murmur-completion-session", &own)],
            request(json!(1), "SendMessage", completion.clone()),
            murmur_error(
                -31002,
                "this completion names no delegation in x-murmur-delegation-id",
                "COMPLETION_NOT_AWAITED",
                json!({}),
            ),
        ),
        (
            "names a delegation no task awaits",
            vec![
                origin,
                ("x-murmur-completion-session", &own),
                ("x-murmur-delegation-id", "dlg_7b31de"),
            ],
            request(json!(1), "SendMessage", completion.clone()),
            murmur_error(
                -31002,
                "no task in this session is waiting for delegation dlg_7b31de",
                "COMPLETION_NOT_AWAITED",
                json!({"delegationId": "dlg_7b31de"}),
            ),
        ),
        (
            "not awaited, before its params are read",
            vec![
                origin,
                ("x-murmur-completion-session", &own),
                ("x-murmur-delegation-id", "dlg_7b31de"),
            ],
            request(json!(1), "SendMessage", json!("not params")),
            murmur_error(
                -31002,
                "no task in this session is waiting for delegation dlg_7b31de",
                "COMPLETION_NOT_AWAITED",
                json!({"delegationId": "dlg_7b31de"}),
            ),
        ),
    ];
    for (row, extra, body, error) in &rows {
        let mut headers = vec![V1];
        headers.extend(extra.iter().copied());
        let resp = run.post(body, &headers);
        assert_rpc_error(&resp, json!(1), error, row);
        probe.unchanged(&run, &home, row);
    }
    // Steps 6 to 8 still come first.
    let resp = run.post("{", &[V1, origin]);
    assert_rpc_error(
        &resp,
        Value::Null,
        &std_error(-32700, "Invalid JSON payload"),
        "completion, bad JSON",
    );
}

#[test]
fn push_notifications_in_a_message() {
    let home = Home::new();
    let run = queue_capsule(&home);
    let probe = Probe::take(&run, &home);
    let pid = pidfile(&home);
    let push = a2a_error(
        -32003,
        "push notifications are not supported by this agent",
        "PUSH_NOTIFICATION_NOT_SUPPORTED",
        json!({}),
    );
    let with = |config: Value, message_patch: Option<(&str, Value)>| {
        let mut p = pid_message(&pid);
        p["configuration"] = config;
        if let Some((k, v)) = message_patch {
            p["message"][k] = v;
        }
        p
    };
    let hook = json!({"url": "http://localhost:9/hook", "token": "t"});
    let url_parts = json!([{"text": format!("@pidfile {}", pid.display())},
                           {"url": "http://localhost:9/a.pdf", "mediaType": "application/pdf"}]);
    let rows: Vec<(&str, Value, Value)> = vec![
        ("a push config", with(json!({"taskPushNotificationConfig": hook}), None), push.clone()),
        ("an empty push config", with(json!({"taskPushNotificationConfig": {}}), None), push.clone()),
        (
            "a push config beside returnImmediately",
            with(json!({"taskPushNotificationConfig": hook, "returnImmediately": true}), None),
            push.clone(),
        ),
        (
            "the message is read first",
            with(json!({"taskPushNotificationConfig": hook}), Some(("role", json!("user")))),
            invalid_params(
                "Invalid params: message.role must be ROLE_USER; a message to this agent is from the user",
            ),
        ),
        (
            "returnImmediately is read first",
            with(json!({"taskPushNotificationConfig": hook, "returnImmediately": "yes"}), None),
            invalid_params("configuration.returnImmediately must be a boolean"),
        ),
        (
            "a url part is refused first",
            with(json!({"taskPushNotificationConfig": hook}), Some(("parts", url_parts))),
            a2a_error(
                -32005,
                "message.parts[1] is a url part; this agent reads text parts, data parts and image raw parts only",
                "CONTENT_TYPE_NOT_SUPPORTED",
                json!({"partIndex": "1", "mediaType": "application/pdf"}),
            ),
        ),
    ];
    for (row, params, error) in &rows {
        assert_rpc_error(
            &run.call("SendMessage", params.clone()),
            json!(1),
            error,
            row,
        );
        probe.unchanged(&run, &home, row);
    }
    assert!(!pid.exists(), "a message asking for push ran a harness");

    // null is the unset value: the message is served.
    let resp = run.call(
        "SendMessage",
        with(json!({"taskPushNotificationConfig": null}), None),
    );
    assert_eq!(
        assert_result(&resp, "push config null")["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    assert!(pid.exists(), "the served message ran its harness");
}

/// A body past the door's limit is refused 413 before it is parsed. The limit is 4 MiB at the
/// least (more when context.images allows bigger messages).
#[test]
fn a_body_larger_than_any_message_is_refused_413() {
    use std::io::{Read, Write};
    let home = Home::new();
    let run = start_fixture(&home, "murmur.yaml", &Fixture::default(), &[]);
    let mut s = std::net::TcpStream::connect(("127.0.0.1", run.port)).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let size = (28usize << 20) + 1;
    let head = format!(
        "POST / HTTP/1.1\r\nHost: localhost:{}\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\nContent-Length: {size}\r\n\r\n",
        run.port
    );
    s.write_all(head.as_bytes()).unwrap();
    let mut writer = s.try_clone().unwrap();
    // The door stops reading at its limit; the rest of the body may never be taken.
    let pump = std::thread::spawn(move || {
        let chunk = vec![b' '; 1 << 16];
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
    let mut buf = [0u8; 4096];
    while !raw.windows(4).any(|w| w == b"\r\n\r\n") || !raw.ends_with(b"}") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&raw).into_owned();
    assert!(text.starts_with("HTTP/1.1 413 "), "{text}");
    assert!(text.contains("\"error\":\"payload_too_large\""), "{text}");
    drop(s);
    let _ = pump.join();
    assert_eq!(run.rpc("ListTasks", json!({}))["result"]["totalSize"], 0);
}
