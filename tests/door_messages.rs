//! agent-card.md "Messages", "Parts", "Image parts", "Continuing a task", "Referenced tasks" and
//! "forgetSession", row by row, against the real `mur` on a public door. A refused message must
//! start no task, write no trace record, run no harness (its `@pidfile` never appears) and
//! deliver nothing to a waiting task; an accepted one reaches the harness exactly as the spec
//! says the agent reads it (the fixture's `@echo` answers with its whole prompt).

mod support;

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use support::*;

/// A bound on waits for what should come at once, past the harness grace (10 s): a harness
/// that missed its interrupt ends only after it.
const SETTLE: Duration = Duration::from_secs(30);

fn pid_text(pid: &Path) -> String {
    format!("@pidfile {}", pid.display())
}

/// A message whose harness, if it ever ran, writes `pid`; `patch` sets or (with null) removes
/// members of the message.
fn msg(pid: &Path, patch: Value) -> Value {
    let mut m =
        json!({"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": pid_text(pid)}]});
    if let (Some(m), Some(patch)) = (m.as_object_mut(), patch.as_object()) {
        for (k, v) in patch {
            if v.is_null() {
                m.remove(k);
            } else {
                m.insert(k.clone(), v.clone());
            }
        }
    }
    json!({ "message": m })
}

fn task_id(answer: &Value) -> String {
    answer["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no task in {answer}"))
        .to_owned()
}

fn state(run: &Launch, id: &str) -> Value {
    run.rpc("GetTask", json!({"id": id}))["result"]["status"]["state"].clone()
}

fn response_text(task: &Value) -> String {
    let artifacts = task["artifacts"].as_array().cloned().unwrap_or_default();
    let response = artifacts
        .iter()
        .find(|a| a["artifactId"] == "response")
        .unwrap_or_else(|| panic!("no response artifact in {task}"));
    response["parts"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn refuse(run: &Launch, home: &Home, row: &str, params: Value, error: &Value) {
    let probe = Probe::take(run, home);
    let resp = run.call("SendMessage", params);
    assert_rpc_error(&resp, json!(1), error, row);
    probe.unchanged(run, home, row);
}

#[test]
fn messages_checks_in_order() {
    let home = Home::new();
    let run = start_fixture(&home, "murmur.yaml", &Fixture::default(), &[]);
    let pid = pidfile(&home);
    let p = pid_text(&pid);
    let ip = invalid_params;
    let not_message = ip("Invalid params: params.message must be an object (an A2A Message)");
    let message_id = ip("Invalid params: message.messageId must be a non-empty string");
    let role = ip(
        "Invalid params: message.role must be ROLE_USER; a message to this agent is from the user",
    );
    let parts = ip("Invalid params: message.parts must be a non-empty array of parts");
    let one_of = |i: usize| {
        ip(&format!(
            "Invalid params: message.parts[{i}] must set exactly one of text, raw, url and data"
        ))
    };
    let string = |i: usize, k: &str| {
        ip(&format!(
            "Invalid params: message.parts[{i}].{k} must be a string"
        ))
    };
    let refs = ip("Invalid params: message.referenceTaskIds must be an array of non-empty strings");
    let door_obj = ip(&format!(
        "Invalid params: message.metadata[\"{DOOR_URI}\"] must be an object"
    ));
    let forget_bool = ip(&format!(
        "Invalid params: message.metadata[\"{DOOR_URI}\"].forgetSession must be a boolean"
    ));
    let immediate = ip("configuration.returnImmediately must be a boolean");
    let content = |i: usize, what: &str, meta: Value| {
        a2a_error(
            -32005,
            &format!("message.parts[{i}] is {what}; this agent reads text parts, data parts and image raw parts only"),
            "CONTENT_TYPE_NOT_SUPPORTED",
            meta,
        )
    };
    let seventeen: Vec<String> = (0..17).map(|i| format!("tsk_{i:032x}")).collect();
    let with_config = |config: Value| {
        let mut m = msg(&pid, json!({}));
        m["configuration"] = config;
        m
    };
    let door = |v: Value| json!({ DOOR_URI: v });

    let rows: Vec<(&str, Value, Value)> = vec![
        // 1. params.message is an object.
        ("no message", json!({}), not_message.clone()),
        ("message a string", json!({"message": p}), not_message.clone()),
        ("message an array", json!({"message": [{"text": p}]}), not_message.clone()),
        ("message null", json!({"message": null}), not_message.clone()),
        (
            "a bare message as params",
            json!({"messageId": "m", "role": "ROLE_USER", "parts": [{"text": p}]}),
            not_message.clone(),
        ),
        // 2. messageId, role, then parts.
        ("no messageId", msg(&pid, json!({"messageId": null})), message_id.clone()),
        ("messageId empty", msg(&pid, json!({"messageId": ""})), message_id.clone()),
        ("messageId a number", msg(&pid, json!({"messageId": 5})), message_id.clone()),
        ("messageId before role", msg(&pid, json!({"messageId": "", "role": "user"})), message_id.clone()),
        (
            "snake_case is not ProtoJSON",
            msg(&pid, json!({"messageId": null, "message_id": "m-1"})),
            message_id.clone(),
        ),
        ("no role", msg(&pid, json!({"role": null})), role.clone()),
        ("role user (0.3)", msg(&pid, json!({"role": "user"})), role.clone()),
        ("role ROLE_AGENT", msg(&pid, json!({"role": "ROLE_AGENT"})), role.clone()),
        ("role ROLE_UNSPECIFIED", msg(&pid, json!({"role": "ROLE_UNSPECIFIED"})), role.clone()),
        ("role lowercase", msg(&pid, json!({"role": "role_user"})), role.clone()),
        ("role a number", msg(&pid, json!({"role": 1})), role.clone()),
        ("role before parts", msg(&pid, json!({"role": "agent", "parts": []})), role.clone()),
        ("no parts", msg(&pid, json!({"parts": null})), parts.clone()),
        ("parts empty", msg(&pid, json!({"parts": []})), parts.clone()),
        ("parts an object", msg(&pid, json!({"parts": {"text": p}})), parts.clone()),
        ("parts a string", msg(&pid, json!({"parts": p})), parts.clone()),
        // 3. Every part sets exactly one of text, raw, url and data.
        ("a part setting none", msg(&pid, json!({"parts": [{"text": p}, {}]})), one_of(1)),
        ("a 0.3 part", msg(&pid, json!({"parts": [{"kind": "text", "content": p}]})), one_of(0)),
        ("a 0.3 file part", msg(&pid, json!({"parts": [{"text": p}, {"file": {"uri": "x"}}]})), one_of(1)),
        ("a part setting text and data", msg(&pid, json!({"parts": [{"text": p, "data": 1}]})), one_of(0)),
        ("a part setting raw and url", msg(&pid, json!({"parts": [{"raw": "eA==", "url": "u"}]})), one_of(0)),
        ("a part that is a string", msg(&pid, json!({"parts": [p]})), one_of(0)),
        ("step 3 runs over every part first", msg(&pid, json!({"parts": [{"text": 5}, {"meta": 1}]})), one_of(1)),
        // 4. text, raw, url, mediaType and filename are strings where present.
        ("text a number", msg(&pid, json!({"parts": [{"text": p}, {"text": 5}]})), string(1, "text")),
        ("text null", msg(&pid, json!({"parts": [{"text": null}]})), string(0, "text")),
        ("raw a number", msg(&pid, json!({"parts": [{"raw": 5, "mediaType": "image/png"}]})), string(0, "raw")),
        ("url an object", msg(&pid, json!({"parts": [{"url": {"href": "x"}}]})), string(0, "url")),
        ("mediaType a number", msg(&pid, json!({"parts": [{"data": 1, "mediaType": 5}]})), string(0, "mediaType")),
        ("filename an array", msg(&pid, json!({"parts": [{"data": 1, "filename": ["a"]}]})), string(0, "filename")),
        (
            "mediaType before filename",
            msg(&pid, json!({"parts": [{"text": p, "mediaType": 1, "filename": 2}]})),
            string(0, "mediaType"),
        ),
        ("parts before taskId", msg(&pid, json!({"parts": [{"text": 5}], "taskId": 5})), string(0, "text")),
        // 5. taskId and contextId, then referenceTaskIds.
        ("taskId a number", msg(&pid, json!({"taskId": 5})), ip("Invalid params: message.taskId must be a string")),
        ("contextId a number", msg(&pid, json!({"contextId": 5})), ip("Invalid params: message.contextId must be a string")),
        (
            "taskId before contextId",
            msg(&pid, json!({"taskId": [], "contextId": 5})),
            ip("Invalid params: message.taskId must be a string"),
        ),
        ("referenceTaskIds a string", msg(&pid, json!({"referenceTaskIds": "tsk_a"})), refs.clone()),
        ("referenceTaskIds holding \"\"", msg(&pid, json!({"referenceTaskIds": ["tsk_a", ""]})), refs.clone()),
        ("referenceTaskIds holding a number", msg(&pid, json!({"referenceTaskIds": [5]})), refs.clone()),
        ("referenceTaskIds holding null", msg(&pid, json!({"referenceTaskIds": [null]})), refs.clone()),
        (
            "17 distinct referenced tasks",
            msg(&pid, json!({"referenceTaskIds": seventeen})),
            ip("Invalid params: message.referenceTaskIds names 17 distinct tasks; at most 16 are allowed"),
        ),
        (
            "contextId before referenceTaskIds",
            msg(&pid, json!({"contextId": 5, "referenceTaskIds": 5})),
            ip("Invalid params: message.contextId must be a string"),
        ),
        // 6. The door extension's key in metadata, then its forgetSession.
        ("the door key a string", msg(&pid, json!({"metadata": door(json!("x"))})), door_obj.clone()),
        ("the door key true", msg(&pid, json!({"metadata": door(json!(true))})), door_obj.clone()),
        ("the door key an array", msg(&pid, json!({"metadata": door(json!([]))})), door_obj.clone()),
        ("the door key null", msg(&pid, json!({"metadata": door(Value::Null)})), door_obj.clone()),
        (
            "forgetSession a string",
            msg(&pid, json!({"metadata": door(json!({"forgetSession": "yes"}))})),
            forget_bool.clone(),
        ),
        (
            "forgetSession a number",
            msg(&pid, json!({"metadata": door(json!({"forgetSession": 1}))})),
            forget_bool.clone(),
        ),
        (
            "forgetSession on a message continuing a task",
            msg(&pid, json!({"taskId": "tsk_abc", "metadata": door(json!({"forgetSession": true}))})),
            ip("Invalid params: forgetSession starts a new conversation, so it goes on a message that starts a task, not on one that continues task tsk_abc"),
        ),
        (
            "referenceTaskIds before metadata",
            msg(&pid, json!({"referenceTaskIds": [""], "metadata": door(json!(1))})),
            refs.clone(),
        ),
        // 7. configuration.returnImmediately.
        ("returnImmediately a string", with_config(json!({"returnImmediately": "yes"})), immediate.clone()),
        ("returnImmediately a number", with_config(json!({"returnImmediately": 1})), immediate.clone()),
        ("returnImmediately \"true\"", with_config(json!({"returnImmediately": "true"})), immediate.clone()),
        ("returnImmediately an object", with_config(json!({"returnImmediately": {}})), immediate.clone()),
        (
            "metadata before returnImmediately",
            {
                let mut m = msg(&pid, json!({"metadata": door(json!(2))}));
                m["configuration"] = json!({"returnImmediately": "yes"});
                m
            },
            door_obj.clone(),
        ),
        // 8. The first url part, or raw part that is not an image: -32005.
        (
            "a url part",
            msg(&pid, json!({"parts": [{"url": "http://localhost:9/a"}]})),
            content(0, "a url part", json!({"partIndex": "0"})),
        ),
        (
            "a url part with a media type",
            msg(&pid, json!({"parts": [{"text": p}, {"url": "http://localhost:9/a.pdf", "mediaType": "application/pdf"}]})),
            content(1, "a url part", json!({"partIndex": "1", "mediaType": "application/pdf"})),
        ),
        (
            "a raw pdf",
            msg(&pid, json!({"parts": [{"text": p}, {"raw": "JVBERi0=", "mediaType": "application/pdf", "filename": "a.pdf"}]})),
            content(1, "a raw part of media type application/pdf", json!({"partIndex": "1", "mediaType": "application/pdf"})),
        ),
        (
            "a raw part with no media type",
            msg(&pid, json!({"parts": [{"raw": "eA=="}]})),
            content(0, "a raw part with no media type", json!({"partIndex": "0"})),
        ),
        (
            "a raw svg is not one of the four image types",
            msg(&pid, json!({"parts": [{"raw": "PHN2Zz4=", "mediaType": "image/svg+xml"}]})),
            content(0, "a raw part of media type image/svg+xml", json!({"partIndex": "0", "mediaType": "image/svg+xml"})),
        ),
        (
            "the first refused part is named",
            msg(&pid, json!({"parts": [{"text": p}, {"raw": "eA==", "mediaType": "text/csv"}, {"url": "u"}]})),
            content(1, "a raw part of media type text/csv", json!({"partIndex": "1", "mediaType": "text/csv"})),
        ),
        (
            "refused before its taskId is looked up",
            msg(&pid, json!({"taskId": "tsk_0000000000007000800000000000000a", "parts": [{"url": "u"}]})),
            content(0, "a url part", json!({"partIndex": "0"})),
        ),
        (
            "returnImmediately before file parts",
            {
                let mut m = msg(&pid, json!({"parts": [{"url": "u"}]}));
                m["configuration"] = json!({"returnImmediately": 0});
                m
            },
            immediate.clone(),
        ),
        (
            "forgetSession before file parts",
            msg(&pid, json!({"parts": [{"url": "u"}], "metadata": door(json!({"forgetSession": "no"}))})),
            forget_bool.clone(),
        ),
    ];
    for (row, params, error) in &rows {
        refuse(&run, &home, row, params.clone(), error);
    }
    assert!(!pid.exists(), "a refused message ran a harness");

    // Accepted: unknown fields and extensions are ignored, metadata that is not an object is
    // ignored, taskId "" names no task, a context id is kept, 16 distinct references with
    // duplicates are within the limit, and returnImmediately null reads as absent.
    let sixteen: Vec<String> = (0..16)
        .chain(0..4)
        .map(|i| format!("tsk_{i:032x}"))
        .collect();
    let accepted: Vec<(&str, Value)> = vec![
        (
            "unknown fields",
            json!({"kind": "message", "extensions": "not a list", "foo": {"bar": 1}}),
        ),
        ("metadata a string", json!({"metadata": "x"})),
        (
            "metadata with other keys",
            json!({"metadata": {"other": {"forgetSession": "not read"}}}),
        ),
        ("taskId \"\"", json!({"taskId": ""})),
        (
            "16 distinct references",
            json!({"referenceTaskIds": sixteen}),
        ),
        (
            "a part's metadata",
            json!({"parts": [{"text": "hi", "metadata": {"k": 1}}]}),
        ),
    ];
    for (row, patch) in accepted {
        let mut params = msg(&pid, patch);
        params["configuration"] =
            json!({"returnImmediately": null, "acceptedOutputModes": ["text/plain"]});
        let resp = run.call("SendMessage", params);
        let task = assert_result(&resp, row);
        assert_eq!(
            task["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{row}: {task}"
        );
        assert!(
            resp.header("a2a-extensions").is_none(),
            "{row}: no door key, no extension"
        );
    }
    assert!(pid.exists());

    // A context id is kept as given; without one (or with "") a fresh ctx_ is minted.
    let kept = run.rpc("SendMessage", msg(&pid, json!({"contextId": "ctx-001"})));
    assert_eq!(kept["result"]["task"]["contextId"], "ctx-001");
    for patch in [json!({}), json!({"contextId": ""})] {
        let fresh = run.rpc("SendMessage", msg(&pid, patch.clone()));
        let ctx = fresh["result"]["task"]["contextId"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            ctx.starts_with("ctx_")
                && ctx.len() == 36
                && ctx[4..].bytes().all(|b| b.is_ascii_hexdigit()),
            "{patch}: context {ctx:?}"
        );
    }
}

#[test]
fn image_parts() {
    let home = Home::new();
    let fixture = Fixture {
        extra: "context:\n  images:\n    max_bytes: 64\n",
        ..Fixture::default()
    };
    let run = start_fixture(&home, "murmur.yaml", &fixture, &[]);
    let pid = pidfile(&home);
    let p = pid_text(&pid);
    let ip = |s: &str| invalid_params(&format!("Invalid params: {s}"));
    let jpeg = "/9j/4A=="; // ff d8 ff e0
    let gif = "R0lGODlh"; // GIF89a
    let webp = "UklGRgAAAABXRUJQ"; // RIFF....WEBP
    let process = |i: usize| {
        ip(&format!("message.parts[{i}] is an image, and this capsule runs on inference.transport: process, whose harness takes no images from the door"))
    };
    let image = |raw: &str, media: &str| json!({"raw": raw, "mediaType": media});
    let rows: Vec<(&str, Value, Value)> = vec![
        (
            "raw that is not base64",
            msg(&pid, json!({"parts": [{"text": p}, image("!!not base64!!", "image/png")]})),
            ip("message.parts[1] is not base64: an image part carries its bytes base64-encoded in raw"),
        ),
        (
            "bytes that are no image",
            msg(&pid, json!({"parts": [image("aGVsbG8=", "image/png")]})),
            ip("message.parts[0] is not an image of its media type image/png"),
        ),
        (
            "a png declared as jpeg",
            msg(&pid, json!({"parts": [image(PNG_B64, "image/jpeg")]})),
            ip("message.parts[0] is not an image of its media type image/jpeg"),
        ),
        (
            "larger than context.images.max_bytes",
            msg(&pid, json!({"parts": [{"text": p}, image(PNG_B64, "image/png")]})),
            ip("message.parts[1] is 70 bytes, larger than context.images.max_bytes (64)"),
        ),
        (
            "on a message that names a taskId",
            msg(&pid, json!({"taskId": "tsk_x", "parts": [image(jpeg, "image/jpeg")]})),
            ip("message.parts[0] is an image on a message that continues task tsk_x; images go on the message that starts a task"),
        ),
        ("a jpeg, to a process capsule", msg(&pid, json!({"parts": [{"text": p}, image(jpeg, "image/jpeg")]})), process(1)),
        ("a gif, to a process capsule", msg(&pid, json!({"parts": [image(gif, "image/gif")]})), process(0)),
        ("a webp, to a process capsule", msg(&pid, json!({"parts": [image(webp, "image/webp")]})), process(0)),
        (
            "a url part is refused before any image",
            msg(&pid, json!({"parts": [image("!!", "image/png"), {"url": "u"}]})),
            a2a_error(
                -32005,
                "message.parts[1] is a url part; this agent reads text parts, data parts and image raw parts only",
                "CONTENT_TYPE_NOT_SUPPORTED",
                json!({"partIndex": "1"}),
            ),
        ),
    ];
    for (row, params, error) in &rows {
        refuse(&run, &home, row, params.clone(), error);
    }

    // One image more than context.images.max_per_turn allows.
    let home2 = Home::new();
    let none = Fixture {
        extra: "context:\n  images:\n    max_per_turn: 0\n",
        ..Fixture::default()
    };
    let run2 = start_fixture(&home2, "murmur.yaml", &none, &[]);
    refuse(
        &run2,
        &home2,
        "one image more than max_per_turn",
        msg(&pid, json!({"parts": [{"text": p}, image(jpeg, "image/jpeg")]})),
        &ip("message.parts[1] is one image more than context.images.max_per_turn (0) allows in one message"),
    );
    assert!(!pid.exists(), "a refused image message ran a harness");
}

#[test]
fn parts_reach_the_agent_in_order() {
    let home = Home::new();
    let run = start_fixture(&home, "murmur.yaml", &Fixture::default(), &[]);
    let parts = json!([
        {"text": "@echo"},
        {"text": "summarise", "mediaType": "text/markdown", "filename": "ignored.md", "metadata": {"secret": "m1"}},
        {"data": {"note": "a ``` b", "rows": [1, 2]}, "mediaType": "application/json", "metadata": {"secret": "m2"}},
        {"data": null},
        {"data": "x", "mediaType": "text/csv", "filename": "my file=`1`.csv"},
        {"data": {"k": "````"}, "mediaType": "application/vnd a=b"},
        {"text": "done"}
    ]);
    let expected = [
        "@echo",
        "summarise",
        "````data media-type=application/json\n{\n  \"note\": \"a ``` b\",\n  \"rows\": [\n    1,\n    2\n  ]\n}\n````",
        "```data\nnull\n```",
        "```data media-type=text/csv filename=my_file__1_.csv\n\"x\"\n```",
        "`````data media-type=application/vnd_a_b\n{\n  \"k\": \"````\"\n}\n`````",
        "done",
    ]
    .join("\n");
    let params = json!({"message": {"messageId": "m-parts", "role": "ROLE_USER", "parts": parts}});
    let resp = run.call("SendMessage", params);
    let task = assert_result(&resp, "parts")["task"].clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    assert_eq!(
        task["artifacts"],
        json!([{"artifactId": "response", "name": "response",
                "parts": [{"text": expected, "mediaType": "text/plain"}]}]),
        "the agent reads the parts in order, joined by a newline, with no referenced-tasks block"
    );
    assert!(
        !response_text(&task).contains("secret"),
        "part metadata never reaches the agent"
    );
}

#[test]
fn continuing_a_task() {
    let home = Home::new();
    let fixture = Fixture {
        queue_depth: Some(1),
        ..Fixture::default()
    };
    let run = start_fixture(&home, "murmur.yaml", &fixture, &[]);
    let pid = pidfile(&home);
    let not_waiting = |id: &str, state: &str| {
        a2a_error(
            -32004,
            &format!("task {id} is {state}; a task takes a message only while it waits in TASK_STATE_INPUT_REQUIRED. Send a new message without taskId, in the same contextId, to start a new task"),
            "UNSUPPORTED_OPERATION",
            json!({"taskId": id, "state": state}),
        )
    };
    let reply = |task: &str, patch: Value| {
        let mut m = msg(&pid, patch);
        m["message"]["taskId"] = json!(task);
        m
    };

    // Tasks that are not waiting: working, then canceled, completed, failed.
    let working = run.start_working("@sleep 30");
    refuse(
        &run,
        &home,
        "a working task",
        reply(&working, json!({})),
        &not_waiting(&working, "TASK_STATE_WORKING"),
    );
    assert_result(&run.call("CancelTask", json!({"id": working})), "cancel");
    run.wait_task(&working, SETTLE, |s| s == "TASK_STATE_CANCELED");
    let done = task_id(&run.send("plain", false));
    let failed = task_id(&run.send("@exit 3", false));
    // Wait until the capsule is idle so each probe sees nothing move.
    assert!(wait_until(SETTLE, || run
        .rpc("ListTasks", json!({"status": "TASK_STATE_WORKING"}))
        ["result"]["totalSize"]
        == 0));
    for (id, st) in [
        (&working, "TASK_STATE_CANCELED"),
        (&done, "TASK_STATE_COMPLETED"),
        (&failed, "TASK_STATE_FAILED"),
    ] {
        refuse(&run, &home, st, reply(id, json!({})), &not_waiting(id, st));
    }
    let never = "tsk_0000000000007000800000000000000a";
    refuse(
        &run,
        &home,
        "a task this session never held",
        reply(never, json!({})),
        &a2a_error(
            -32001,
            "Task not found",
            "TASK_NOT_FOUND",
            json!({"taskId": never}),
        ),
    );

    // A task waiting for input holds the running slot; one more fills the queue.
    let ask = run.send("@ask Which branch?", false)["result"]["task"].clone();
    let ask_id = ask["id"].as_str().unwrap().to_owned();
    let ask_ctx = ask["contextId"].as_str().unwrap().to_owned();
    assert_eq!(
        ask["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "a held send settles on input: {ask}"
    );
    assert_eq!(
        ask["artifacts"],
        json!([{"artifactId": "prompt", "name": "prompt", "parts": [{"text": "Which branch?", "mediaType": "text/plain"}]}])
    );
    let queued = task_id(&run.send(&pid_text(&pid), true));
    assert_eq!(state(&run, &queued), "TASK_STATE_SUBMITTED");
    let rejected = run.send("no room", false)["result"]["task"].clone();
    assert_eq!(
        rejected["status"]["state"], "TASK_STATE_REJECTED",
        "a message naming no task never reaches a waiting one"
    );
    let rejected = rejected["id"].as_str().unwrap().to_owned();

    refuse(
        &run,
        &home,
        "a submitted task",
        reply(&queued, json!({})),
        &not_waiting(&queued, "TASK_STATE_SUBMITTED"),
    );
    refuse(
        &run,
        &home,
        "a rejected task",
        reply(&rejected, json!({})),
        &not_waiting(&rejected, "TASK_STATE_REJECTED"),
    );
    refuse(
        &run,
        &home,
        "a waiting task, in another context",
        reply(&ask_id, json!({"contextId": "ctx-other"})),
        &invalid_params(&format!("Invalid params: message.contextId names another context than task {ask_id}'s; a reply goes in the context of the task it continues")),
    );
    refuse(
        &run,
        &home,
        "a waiting task, with a url part",
        reply(&ask_id, json!({"parts": [{"url": "u"}]})),
        &a2a_error(
            -32005,
            "message.parts[0] is a url part; this agent reads text parts, data parts and image raw parts only",
            "CONTENT_TYPE_NOT_SUPPORTED",
            json!({"partIndex": "0"}),
        ),
    );
    refuse(
        &run,
        &home,
        "a waiting task, with forgetSession",
        reply(&ask_id, json!({"metadata": {DOOR_URI: {"forgetSession": true}}})),
        &invalid_params(&format!("Invalid params: forgetSession starts a new conversation, so it goes on a message that starts a task, not on one that continues task {ask_id}")),
    );
    let waiting = run.rpc("GetTask", json!({"id": ask_id}))["result"].clone();
    assert_eq!(
        waiting["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "a refusal delivered something: {waiting}"
    );
    assert_eq!(waiting["artifacts"][0]["artifactId"], "prompt");

    // The reply: the message's text, answered in TASK_STATE_WORKING with returnImmediately.
    let mut answer = msg(
        &pid,
        json!({"taskId": ask_id, "contextId": ask_ctx, "parts": [{"text": "main"}]}),
    );
    answer["configuration"] = json!({"returnImmediately": true});
    let resp = run.call("SendMessage", answer);
    let continued = assert_result(&resp, "reply")["task"].clone();
    assert_eq!(continued["id"], ask_id.as_str());
    assert_eq!(continued["contextId"], ask_ctx.as_str());
    assert_eq!(
        continued["status"]["state"], "TASK_STATE_WORKING",
        "{continued}"
    );
    assert!(
        continued.get("artifacts").is_none(),
        "a resumed task has no prompt: {continued}"
    );
    let finished = run.wait_task(&ask_id, SETTLE, |s| s == "TASK_STATE_COMPLETED");
    assert_eq!(response_text(&finished), "reply: main");

    // The queued task runs once the slot frees; the rejected one never does (it wrote no pid
    // of its own: only `queued` carries the pidfile).
    run.wait_task(&queued, SETTLE, |s| s == "TASK_STATE_COMPLETED");
    assert!(pid.exists());
    assert_eq!(state(&run, &rejected), "TASK_STATE_REJECTED");

    // A reply without returnImmediately is held until the task settles again; a reply without
    // contextId is in the task's context.
    let second = task_id(&run.send("@ask Sure?", false));
    let held = run.rpc(
        "SendMessage",
        msg(&pid, json!({"taskId": second, "parts": [{"text": "yes"}]})),
    );
    let held = held["result"]["task"].clone();
    assert_eq!(held["status"]["state"], "TASK_STATE_COMPLETED", "{held}");
    assert_eq!(response_text(&held), "reply: yes");
}

#[test]
fn a_reply_does_not_consult_capacity() {
    let home = Home::new();
    let fixture = Fixture::single();
    let run = start_fixture(&home, "murmur.yaml", &fixture, &[]);
    let ask = task_id(&run.send("@ask Proceed?", false));
    assert_eq!(state(&run, &ask), "TASK_STATE_INPUT_REQUIRED");
    let busy = run.send("another", false)["result"]["task"].clone();
    assert_eq!(busy["status"]["state"], "TASK_STATE_REJECTED");
    assert_eq!(
        busy["status"]["message"]["parts"][0]["text"],
        "task rejected: capsule is busy"
    );
    let reply = run.rpc(
        "SendMessage",
        json!({"message": {"messageId": "r", "role": "ROLE_USER", "taskId": ask, "parts": [{"text": "go"}]}}),
    );
    let task = reply["result"]["task"].clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{reply}");
    assert_eq!(response_text(&task), "reply: go");
}

#[test]
fn referenced_tasks() {
    let home = Home::new();
    let run = start_fixture(&home, "murmur.yaml", &Fixture::default(), &[]);
    let done = task_id(&run.send("plain", false));
    let failed = task_id(&run.send("@stderr the driver failed\n@exit 3", false));
    let working = run.start_working("@sleep 30");
    let submitted = task_id(&run.send("plain", true));
    let canceled = task_id(&run.send("@sleep 30", true));
    let rejected = task_id(&run.send("no room", true));
    assert_eq!(state(&run, &rejected), "TASK_STATE_REJECTED");
    assert_result(
        &run.call("CancelTask", json!({"id": canceled})),
        "cancel the queued one",
    );
    let never = "tsk_0000000000007000800000000000000a";

    let refs = json!([done, failed, working, submitted, canceled, rejected, never, done, failed]);
    let params = json!({"message": {"messageId": "m-refs", "role": "ROLE_USER", "contextId": "ctx-refs",
                                    "parts": [{"text": "@echo"}], "referenceTaskIds": refs}});
    let echo = task_id(&run.rpc(
        "SendMessage",
        json!({"message": params["message"], "configuration": {"returnImmediately": true}}),
    ));
    // Let the echo task run: end the working one.
    assert_result(
        &run.call("CancelTask", json!({"id": working})),
        "cancel the working one",
    );
    let task = run.wait_task(&echo, SETTLE, |s| s == "TASK_STATE_COMPLETED");
    let expected = format!(
        "@echo\n\nReferenced tasks:\n\
         - {done}: completed\n```response\nAcknowledged.\n```\n\
         - {failed}: failed: the harness exited with status 3: the driver failed\n\
         - {working}: working\n\
         - {submitted}: submitted\n\
         - {canceled}: canceled\n\
         - {rejected}: rejected: task rejected: capsule is busy\n\
         - {never}: not a task this capsule holds"
    );
    assert_eq!(
        response_text(&task),
        expected,
        "each task as it stood when the message arrived"
    );

    let start = home
        .trace(&run.session)
        .into_iter()
        .find(|e| e["event_type"] == "task_start" && e["task_id"] == echo.as_str())
        .expect("the echo task's task_start");
    assert_eq!(
        start["reference_task_ids"],
        json!([done, failed, working, submitted, canceled, rejected, never]),
        "each id once, in first-occurrence order"
    );
}

#[test]
fn forget_session() {
    let home = Home::new();
    let fixture = Fixture {
        dialect: "stream-json",
        ..Fixture::default()
    };
    let run = start_fixture(&home, "murmur.yaml", &fixture, &[]);
    let send = |ctx: &str, forget: Option<Value>, immediately: bool| {
        let mut m = json!({"messageId": "m", "role": "ROLE_USER", "contextId": ctx, "parts": [{"text": "carry on"}]});
        if let Some(f) = forget {
            m["extensions"] = json!([DOOR_URI]);
            m["metadata"] = json!({ DOOR_URI: f, "other": 1 });
        }
        let mut params = json!({ "message": m });
        if immediately {
            params["configuration"] = json!({"returnImmediately": true});
        }
        run.call("SendMessage", params)
    };
    let answer = |resp: &Resp| response_text(&assert_result(resp, "forget")["task"]);
    let session_of = |text: &str| {
        text.split_whitespace()
            .next()
            .unwrap_or("")
            .trim_start_matches("session=")
            .to_owned()
    };

    let first = answer(&send("ctx-f", None, false));
    let s1 = session_of(&first);
    assert!(first.ends_with("resumed=no prompts=1"), "{first}");
    assert_eq!(
        answer(&send("ctx-f", None, false)),
        format!("session={s1} resumed=yes prompts=2")
    );

    // forgetSession: false asks for nothing, but the message used the extension.
    let resp = send("ctx-f", Some(json!({"forgetSession": false})), false);
    assert_eq!(resp.header_all("a2a-extensions"), vec![DOOR_URI]);
    assert_eq!(answer(&resp), format!("session={s1} resumed=yes prompts=3"));

    // forgetSession: true drops the context's harness session before the task's first attempt.
    let before = home.trace_len(&run.session);
    let resp = send(
        "ctx-f",
        Some(json!({"forgetSession": true, "note": "ignored"})),
        false,
    );
    assert_eq!(resp.header_all("a2a-extensions"), vec![DOOR_URI]);
    let fresh = answer(&resp);
    let s2 = session_of(&fresh);
    assert_ne!(s1, s2);
    assert!(fresh.ends_with("resumed=no prompts=1"), "{fresh}");
    let trace = home.trace(&run.session);
    let new: Vec<&Value> = trace.iter().skip(before).collect();
    let forgotten: Vec<&&Value> = new
        .iter()
        .filter(|e| e["event_type"] == "harness_session_forgotten")
        .collect();
    assert_eq!(forgotten.len(), 1, "{new:?}");
    assert_eq!(forgotten[0]["context_id"], "ctx-f");
    assert_eq!(forgotten[0]["harness_session"], s1.as_str());
    assert_eq!(forgotten[0]["requested_by"], "a2a");
    let start = new
        .iter()
        .find(|e| e["event_type"] == "harness_start")
        .expect("harness_start");
    assert_eq!(start["session_mode"], "new");

    // It applies to that one task: the next message resumes the new session.
    assert_eq!(
        answer(&send("ctx-f", None, false)),
        format!("session={s2} resumed=yes prompts=2")
    );

    // A context that names no harness session has nothing to drop.
    let before = home.trace_len(&run.session);
    let resp = send("ctx-empty", Some(json!({"forgetSession": true})), true);
    let accepted = assert_result(&resp, "forget, returnImmediately")["task"].clone();
    assert_eq!(resp.header_all("a2a-extensions"), vec![DOOR_URI]);
    assert_eq!(accepted["contextId"], "ctx-empty");
    assert_eq!(accepted["status"]["state"], "TASK_STATE_SUBMITTED");
    let id = accepted["id"].as_str().unwrap();
    let done = run.wait_task(id, SETTLE, |s| s == "TASK_STATE_COMPLETED");
    assert!(response_text(&done).ends_with("resumed=no prompts=1"));
    let trace = home.trace(&run.session);
    assert!(
        !trace
            .iter()
            .skip(before)
            .any(|e| e["event_type"] == "harness_session_forgotten"),
        "nothing to drop, nothing recorded"
    );
}
