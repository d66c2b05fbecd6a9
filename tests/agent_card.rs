//! agent-card.md's card sections against the real `mur` on a public door: the card a process
//! capsule serves, byte for byte; the door extension's methods under single, queue and none,
//! and that each listed method is answered (and each unlisted one is not); skills and
//! capabilities.streaming under none; the capsule extension's params; and when an answer names
//! an extension in its A2A-Extensions header.

mod support;

use serde_json::{json, Value};
use support::*;

const CARD: &str = "/.well-known/agent-card.json";

fn card(run: &Launch, headers: &[(&str, &str)]) -> Resp {
    let resp = http(run.port, "GET", CARD, headers, b"");
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.header("content-type"), Some("application/json"));
    resp
}

fn extension<'a>(card: &'a Value, uri: &str) -> &'a Value {
    card["capabilities"]["extensions"]
        .as_array()
        .and_then(|e| e.iter().find(|x| x["uri"] == uri))
        .unwrap_or_else(|| panic!("no extension {uri} in {card}"))
}

#[test]
fn a_public_process_capsule_serves_exactly_this_card() {
    let home = Home::new();
    let fixture = Fixture {
        name: "my-agent",
        acceptance: "single",
        queue_depth: None,
        // A harness's commands are its CLI's to allow: a process capsule grants no shell.
        extra: "capabilities:\n  network:\n    allow: [\"localhost:9\"]\nexports:\n  files: {}\n",
        ..Fixture::default()
    };
    let run = start_fixture(&home, "murmur.yaml", &fixture, &[]);
    let expected = r#"{
      "name": "my-agent",
      "description": "Murmur capsule my-agent 0.1.0",
      "version": "0.1.0",
      "supportedInterfaces": [
        { "url": "http://localhost:PORT", "protocolBinding": "JSONRPC", "protocolVersion": "1.0" }
      ],
      "capabilities": {
        "streaming": true,
        "pushNotifications": false,
        "extendedAgentCard": false,
        "extensions": [
          {
            "uri": "https://docs.murmur.nexus/reference/agent-card/#murmur-door-v1",
            "description": "Every JSON-RPC method this door answers, A2A methods and murmur's own alike, the murmur ones named murmur.<Method>; whether it accepts tasks from peer capsules; and the forgetSession field a message's metadata may carry under this URI.",
            "required": false,
            "params": {
              "methods": ["SendMessage", "SendStreamingMessage", "murmur.WatchSession", "GetTask", "ListTasks", "CancelTask", "SubscribeToTask", "murmur.StopSession"],
              "peerTasks": false
            }
          },
          {
            "uri": "https://docs.murmur.nexus/reference/agent-card/#murmur-capsule-v1",
            "description": "The session answering this address and what the capsule may do. Served only to authenticated callers once the door authenticates.",
            "required": false,
            "params": {
              "sessionId": "SESSION",
              "tools": [],
              "shell": false,
              "network": true,
              "planes": ["files"]
            }
          },
          {
            "uri": "https://docs.murmur.nexus/reference/streaming-protocol/#murmur-stream-v1",
            "description": "The murmur frames this capsule writes in addition to the A2A v1.0 events: sent on SendStreamingMessage and SubscribeToTask when the request's A2A-Extensions header names this URI, and always on murmur.WatchSession. Each is carried in a StreamResponse under metadata keyed by this URI.",
            "required": false,
            "params": {
              "frames": ["text", "thinking", "tool-call-started", "tool-call-progress", "artifact", "quota", "suggested-prompt", "gap", "lagged", "connection-ack", "capsule-closed"]
            }
          }
        ]
      },
      "securitySchemes": {},
      "securityRequirements": [],
      "defaultInputModes": ["text/plain", "application/json"],
      "defaultOutputModes": ["text/plain", "application/json"],
      "skills": [
        {
          "id": "task",
          "name": "Run a task",
          "description": "Runs one task given as a text message and reports its outcome.",
          "tags": ["task"]
        }
      ]
    }"#
    .replace("PORT", &run.port.to_string())
    .replace("SESSION", &run.session);
    // Key order is the spec's; serde_json keeps it (preserve_order), so compact it and compare
    // the bytes the door wrote.
    let expected: Value = serde_json::from_str(&expected).unwrap();
    let bytes = serde_json::to_vec(&expected).unwrap();
    let resp = card(&run, &[]);
    assert_eq!(resp.text(), String::from_utf8(bytes.clone()).unwrap());

    // The same bytes to every caller: no A2A-Version is read, Authorization is ignored, and
    // a query string does not change the path.
    for headers in [
        vec![("A2A-Version", "0.3")],
        vec![("A2A-Version", "1.0")],
        vec![("Authorization", "Bearer anything")],
    ] {
        assert_eq!(card(&run, &headers).body, bytes, "{headers:?}");
    }
    let query = http(
        run.port,
        "GET",
        "/.well-known/agent-card.json?x=1",
        &[],
        b"",
    );
    assert_eq!(query.body, bytes);
    let card = resp.json();
    for absent in [
        "provider",
        "documentationUrl",
        "iconUrl",
        "signatures",
        "url",
        "protocolVersion",
    ] {
        assert!(card.get(absent).is_none(), "{absent}");
    }
}

#[test]
fn the_door_extension_by_task_acceptance() {
    let all = json!([
        "SendMessage",
        "SendStreamingMessage",
        "murmur.WatchSession",
        "GetTask",
        "ListTasks",
        "CancelTask",
        "SubscribeToTask",
        "murmur.StopSession"
    ]);
    let none = json!([
        "murmur.WatchSession",
        "GetTask",
        "ListTasks",
        "CancelTask",
        "murmur.StopSession"
    ]);
    let skill = json!([{"id": "task", "name": "Run a task",
                        "description": "Runs one task given as a text message and reports its outcome.",
                        "tags": ["task"]}]);
    for (acceptance, depth, methods, streaming, skills) in [
        ("single", None, &all, true, skill.clone()),
        ("queue", Some(2), &all, true, skill.clone()),
        ("none", None, &none, false, json!([])),
    ] {
        let home = Home::new();
        let fixture = Fixture {
            acceptance,
            queue_depth: depth,
            ..Fixture::default()
        };
        let run = start_fixture(&home, "murmur.yaml", &fixture, &[]);
        let card = card(&run, &[]).json();
        let door = extension(&card, DOOR_URI);
        assert_eq!(&door["params"]["methods"], methods, "{acceptance}");
        assert_eq!(door["params"]["peerTasks"], false, "{acceptance}");
        assert_eq!(door["required"], false);
        assert_eq!(card["capabilities"]["streaming"], streaming, "{acceptance}");
        assert_eq!(card["capabilities"]["pushNotifications"], false);
        assert_eq!(card["skills"], skills, "{acceptance}");
        let uris: Vec<&Value> = card["capabilities"]["extensions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| &e["uri"])
            .collect();
        assert_eq!(
            uris,
            [DOOR_URI, CAPSULE_URI, STREAM_URI],
            "{acceptance}: door, capsule, then stream"
        );

        // A method is listed exactly when POST / answers it with something other than -32601.
        // Each listed method is called with a request it refuses at or after its own checks,
        // so no stream opens and nothing starts.
        let listed: Vec<&str> = methods
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let probes: Vec<(&str, Value)> = vec![
            ("SendMessage", json!({"message": {}})),
            ("SendStreamingMessage", json!({"message": {}})),
            ("murmur.WatchSession", json!({"tenant": "acme"})),
            ("GetTask", json!({})),
            ("ListTasks", json!({"pageSize": 0})),
            ("CancelTask", json!({})),
            ("SubscribeToTask", json!({"tenant": "acme"})),
            ("murmur.StopSession", json!({"tenant": "acme"})),
            ("GetExtendedAgentCard", json!({})),
            ("CreateTaskPushNotificationConfig", json!({})),
        ];
        for (method, params) in probes {
            let code = run.call(method, params).json()["error"]["code"].clone();
            let resp = code.as_i64();
            if listed.contains(&method) {
                assert!(
                    resp.is_some() && resp != Some(-32601),
                    "{acceptance}: listed {method} answered {code}"
                );
            } else {
                assert!(resp.is_some(), "{acceptance}: {method}");
            }
        }
        if acceptance == "none" {
            assert_eq!(
                run.call("SendMessage", json!({"message": {}})).json()["error"]["code"],
                -32601
            );
        }
        assert!(
            !listed.contains(&"GetExtendedAgentCard"),
            "a public door lists no extended card"
        );
    }
}

#[test]
fn the_capsule_extension_and_peer_tasks() {
    let home = Home::new();
    let fixture = Fixture {
        extra: "exports:\n  peer_tasks:\n    accept: true\n  files: {}\n  peer_files: {}\n",
        ..Fixture::default()
    };
    let run = start_fixture(&home, "murmur.yaml", &fixture, &[]);
    let card = card(&run, &[]).json();
    assert_eq!(extension(&card, DOOR_URI)["params"]["peerTasks"], true);
    assert_eq!(
        extension(&card, CAPSULE_URI)["params"],
        json!({"sessionId": run.session, "tools": [], "shell": false, "network": false,
               "planes": ["files", "peer_files"]})
    );
    assert_eq!(
        card["supportedInterfaces"],
        json!([{"url": format!("http://localhost:{}", run.port),
                                                    "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}])
    );
    assert_eq!(card["name"], "fixture");
    assert_eq!(card["description"], "Murmur capsule fixture 0.1.0");
}

#[test]
fn a2a_extensions_names_what_a_served_answer_used() {
    let home = Home::new();
    let fixture = Fixture::single();
    let run = start_fixture(&home, "murmur.yaml", &fixture, &[]);
    let with_door = |meta: Value, parts: Value| {
        json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": parts,
                           "extensions": [DOOR_URI], "metadata": meta}})
    };
    let text = json!([{"text": "hello"}]);

    // Served answers that used the door extension name it, once.
    let rows: Vec<(&str, &str, Value)> = vec![
        ("murmur.StopSession", "murmur.StopSession", json!({})),
        (
            "SendMessage, door key {}",
            "SendMessage",
            with_door(json!({DOOR_URI: {}}), text.clone()),
        ),
        (
            "SendMessage, forgetSession false",
            "SendMessage",
            with_door(json!({DOOR_URI: {"forgetSession": false}}), text.clone()),
        ),
    ];
    for (row, method, params) in rows {
        let resp = run.call(method, params);
        assert_result(&resp, row);
        assert_eq!(resp.header_all("a2a-extensions"), vec![DOOR_URI], "{row}");
    }
    // Served answers that used no extension name none.
    let rows: Vec<(&str, &str, Value)> = vec![
        ("SendMessage", "SendMessage", message("hello", false)),
        (
            "SendMessage, other metadata",
            "SendMessage",
            with_door(json!({"other": {}}), text.clone()),
        ),
        (
            "SendMessage, extensions listed but no door key",
            "SendMessage",
            with_door(json!({}), text.clone()),
        ),
        ("ListTasks", "ListTasks", json!({})),
    ];
    for (row, method, params) in rows {
        let resp = run.call(method, params);
        assert_result(&resp, row);
        assert!(resp.header("a2a-extensions").is_none(), "{row}");
    }
    let id = run.send("hi", false)["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    for (method, params) in [
        ("GetTask", json!({"id": id})),
        ("CancelTask", json!({"id": id})),
    ] {
        let resp = run.call(method, params);
        assert!(resp.header("a2a-extensions").is_none(), "{method}");
    }

    // A task the door has no room for is a served answer too.
    let working = run.start_working("@sleep 30");
    let resp = run.call(
        "SendMessage",
        with_door(json!({DOOR_URI: {}}), text.clone()),
    );
    assert_eq!(
        assert_result(&resp, "rejected")["task"]["status"]["state"],
        "TASK_STATE_REJECTED"
    );
    assert_eq!(resp.header_all("a2a-extensions"), vec![DOOR_URI]);

    // A refusal names none, whatever it was asked.
    let refusals: Vec<(&str, Resp)> = vec![
        (
            "-32009",
            http(
                run.port,
                "POST",
                "/",
                &[("Content-Type", "application/json")],
                request(json!(1), "murmur.StopSession", json!({})).as_bytes(),
            ),
        ),
        ("-32601", run.call("murmur.Nope", json!({}))),
        (
            "-32602 tenant",
            run.call("murmur.StopSession", json!({"tenant": "acme"})),
        ),
        (
            "-32602 door key",
            run.call(
                "SendMessage",
                with_door(json!({DOOR_URI: "x"}), text.clone()),
            ),
        ),
        (
            "-32005",
            run.call(
                "SendMessage",
                with_door(json!({DOOR_URI: {}}), json!([{"url": "u"}])),
            ),
        ),
        (
            "-32004",
            run.call(
                "SendMessage",
                with_door(json!({DOOR_URI: {}}), text.clone())
                    .as_object()
                    .map(|o| {
                        let mut o = Value::Object(o.clone());
                        o["message"]["taskId"] = json!(working);
                        o
                    })
                    .unwrap(),
            ),
        ),
        (
            "403",
            http(
                run.port,
                "POST",
                "/",
                &[
                    ("Content-Type", "application/json"),
                    ("A2A-Version", "1.0"),
                    ("x-murmur-task-origin", "peer"),
                ],
                request(json!(1), "murmur.StopSession", json!({})).as_bytes(),
            ),
        ),
    ];
    for (row, resp) in refusals {
        assert!(
            resp.header("a2a-extensions").is_none(),
            "{row}: {}",
            resp.text()
        );
        if resp.status == 200 {
            assert!(resp.json()["error"].is_object(), "{row}");
        }
    }
    assert_eq!(
        run.rpc("GetTask", json!({"id": working}))["result"]["status"]["state"],
        "TASK_STATE_WORKING"
    );
}
