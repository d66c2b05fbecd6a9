//! Streams (DESIGN §9) through the real `mur`: SendStreamingMessage, SubscribeToTask and
//! murmur.WatchSession as text/event-stream, event ids, replay from Last-Event-ID with a gap
//! frame, the extension headers, and the refusals that answer one JSON body instead.

#[path = "support/sse.rs"]
mod sse;
mod support;

use std::time::Duration;

use serde_json::{json, Value};
use sse::*;
use support::*;

fn states(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| {
            let r = &e.data["result"];
            r.pointer("/task/status/state")
                .or(r.pointer("/statusUpdate/status/state"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .collect()
}

/// An artifactUpdate that writes its artifact whole: exactly taskId, contextId, artifact and
/// `lastChunk: true`, in that order, no `append` (ADK keeps no artifact that is not a last chunk).
fn assert_whole_artifact(update: &Value, name: &str) {
    let keys: Vec<&str> = update
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(
        keys,
        ["taskId", "contextId", "artifact", "lastChunk"],
        "{update}"
    );
    assert_eq!(update["lastChunk"], json!(true), "{update}");
    assert_eq!(update["artifact"]["artifactId"], json!(name), "{update}");
}

fn launch(home: &Home) -> Launch {
    let manifest = home.write("capsule/murmur.yaml", &Fixture::default().yaml());
    Launch::start(home, &manifest, &[])
}

#[test]
fn send_streaming_message_streams_the_task_until_the_server_ends() {
    let home = Home::new();
    let run = launch(&home);
    let body = request(
        json!("s-1"),
        "SendStreamingMessage",
        message("@sleep 0.2", false),
    );
    let mut sse = open(run.port, &body, &[]);
    assert_eq!(sse.status, 200);
    assert_eq!(sse.header("content-type"), Some("text/event-stream"));
    assert_eq!(sse.header("cache-control"), Some("no-cache"));
    assert_eq!(
        sse.header("a2a-extensions"),
        None,
        "nothing activated, nothing echoed"
    );
    let events = sse.rest();
    assert!(events
        .iter()
        .all(|e| e.data["id"] == "s-1" && e.data["jsonrpc"] == "2.0"));
    assert_eq!(
        states(&events),
        [
            "TASK_STATE_SUBMITTED",
            "TASK_STATE_WORKING",
            "TASK_STATE_COMPLETED"
        ]
    );
    assert!(events[0].id.is_none(), "the opening task is unnumbered");
    let ids: Vec<u64> = events.iter().filter_map(|e| e.id).collect();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "strictly increasing: {ids:?}"
    );
    let artifact = events
        .iter()
        .find(|e| e.data["result"].get("artifactUpdate").is_some())
        .unwrap();
    assert_whole_artifact(&artifact.data["result"]["artifactUpdate"], "response");
    let last = &events.last().unwrap().data["result"]["statusUpdate"];
    assert_eq!(
        last["status"]["message"]["parts"][0]["text"],
        "task completed"
    );
}

#[test]
fn a_busy_door_streams_one_rejected_task() {
    let home = Home::new();
    let f = Fixture::single();
    let manifest = home.write("capsule/murmur.yaml", &f.yaml());
    let run = Launch::start(&home, &manifest, &[]);
    run.send("@sleep 30", true);
    let body = request(json!(2), "SendStreamingMessage", message("more", false));
    let events = open(run.port, &body, &[]).rest();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        events[0].data["result"]["task"]["status"]["state"],
        "TASK_STATE_REJECTED"
    );
}

#[test]
fn subscribe_follows_a_live_task_and_refuses_ended_and_unknown_ones() {
    let home = Home::new();
    let run = launch(&home);
    let id = run.send("@sleep 0.5", true)["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let body = request(json!(3), "SubscribeToTask", json!({"id": id}));
    let mut sse = open(run.port, &body, &[("A2A-Extensions", STREAM_URI)]);
    assert_eq!(sse.header("a2a-extensions"), Some(STREAM_URI));
    let events = sse.rest();
    assert_eq!(events[0].data["result"]["task"]["id"], id.as_str());
    assert_eq!(
        states(&events).last().map(String::as_str),
        Some("TASK_STATE_COMPLETED")
    );

    let ended = run.post(&body, &[("A2A-Version", "1.0")]);
    assert_eq!(
        ended.header("content-type"),
        Some("application/json"),
        "a refusal is one JSON body"
    );
    let e = &ended.json()["error"];
    assert_eq!(e["code"], -32004);
    assert_eq!(
        e["data"][0]["metadata"],
        json!({"taskId": id, "state": "TASK_STATE_COMPLETED"})
    );
    let unknown = run.post(
        &request(json!(4), "SubscribeToTask", json!({"id": "tsk_unknown"})),
        &[("A2A-Version", "1.0")],
    );
    assert_eq!(unknown.json()["error"]["code"], -32001);
    let no_id = run.post(
        &request(json!(5), "SubscribeToTask", json!({})),
        &[("A2A-Version", "1.0")],
    );
    assert_eq!(
        no_id.json()["error"]["message"],
        "SubscribeToTask requires an id"
    );
}

#[test]
fn watch_session_acks_replays_and_follows_live_events() {
    let home = Home::new();
    let run = launch(&home);
    run.send("one", false);
    run.send("two", false);
    let body = request(json!(1), "murmur.WatchSession", json!({}));
    let mut watch = open(run.port, &body, &[]);
    assert_eq!(
        watch.header("a2a-extensions"),
        Some(format!("{DOOR_URI}, {STREAM_URI}").as_str())
    );
    let ack = watch.next().unwrap();
    assert!(ack.id.is_none());
    let meta = &ack.data["result"]["message"]["metadata"][STREAM_URI];
    assert_eq!(
        meta,
        &json!({"frame": "connection-ack", "role": "observer", "conversationMode": "stateless"})
    );
    // The replay: both tasks from the start of the buffer.
    let mut replayed = Vec::new();
    while replayed.len() < 8 {
        replayed.push(watch.next().unwrap());
    }
    assert_eq!(replayed[0].id, Some(1));
    let done = states(&replayed)
        .iter()
        .filter(|s| *s == "TASK_STATE_COMPLETED")
        .count();
    assert_eq!(done, 2);
    let updates: Vec<&Value> = replayed
        .iter()
        .filter_map(|e| e.data["result"].get("artifactUpdate"))
        .collect();
    assert_eq!(updates.len(), 2, "one response per task");
    for update in updates {
        assert_whole_artifact(update, "response");
    }
    // Live: a new task's events arrive, and the stream stays open after it ends.
    run.send("three", true);
    let live = watch.next().unwrap();
    assert_eq!(live.id, Some(9));
    assert_eq!(states(&[live]), ["TASK_STATE_SUBMITTED"]);

    // Reconnect from id 5: events 6.. only.
    let mut again = open(run.port, &body, &[("Last-Event-ID", "5")]);
    again.next().unwrap();
    assert_eq!(again.next().unwrap().id, Some(6));
}

#[test]
fn stream_refusals_are_one_json_body() {
    let home = Home::new();
    let run = launch(&home);
    let wrong_version = http(
        run.port,
        "POST",
        "/",
        &[("Content-Type", "application/json"), ("A2A-Version", "0.3")],
        request(json!(1), "murmur.WatchSession", json!({})).as_bytes(),
    );
    assert_eq!(
        wrong_version.header("content-type"),
        Some("application/json")
    );
    assert_eq!(wrong_version.json()["error"]["code"], -32009);
    let mut p = message("x", false);
    p["configuration"] = json!({"taskPushNotificationConfig": {"url": "http://example.invalid"}});
    let push = run.post(
        &request(json!(2), "SendStreamingMessage", p),
        &[("A2A-Version", "1.0")],
    );
    assert_eq!(push.json()["error"]["code"], -32003);
    let list = run.rpc("ListTasks", json!({}));
    assert_eq!(list["result"]["totalSize"], 0, "no refusal started a task");
}

#[test]
fn harness_turns_are_text_frames_when_the_stream_extension_is_asked_for() {
    let home = Home::new();
    let f = Fixture {
        dialect: "stream-json",
        ..Fixture::default()
    };
    let manifest = home.write("capsule/murmur.yaml", &f.yaml());
    let run = Launch::start(&home, &manifest, &[]);
    let body = request(json!(1), "SendStreamingMessage", message("@turns 2", false));
    let mut sse = open(run.port, &body, &[("A2A-Extensions", STREAM_URI)]);
    assert_eq!(sse.header("a2a-extensions"), Some(STREAM_URI));
    let events = sse.rest();
    let frames: Vec<&Value> = events
        .iter()
        .filter_map(|e| e.data["result"].get("message"))
        .collect();
    assert_eq!(frames.len(), 2, "{events:?}");
    for (n, f) in frames.iter().enumerate() {
        assert_eq!(f["parts"][0]["text"], format!("turn {}", n + 1));
        assert_eq!(f["metadata"][STREAM_URI]["frame"], "text");
        assert_eq!(f["role"], "ROLE_AGENT");
        assert!(f["taskId"].as_str().unwrap().starts_with("tsk_"));
    }
    // Without the header, the same task streams A2A events only.
    let plain = open(run.port, &body, &[]).rest();
    assert!(plain
        .iter()
        .all(|e| e.data["result"].get("message").is_none()));
    assert_eq!(
        states(&plain).last().map(String::as_str),
        Some("TASK_STATE_COMPLETED")
    );
}

#[test]
fn a_reconnect_older_than_the_replay_buffer_gets_a_gap_frame_first() {
    let home = Home::new();
    let f = Fixture::single();
    let manifest = home.write("capsule/murmur.yaml", &f.yaml());
    let run = Launch::start(&home, &manifest, &[]);
    run.start_task("@sleep 60"); // events 1 (submitted) and 2 (working)
                                 // Each rejection is one event and runs nothing: 1030 of them overflow the 1024-event buffer.
    for _ in 0..1030 {
        let state = run.send("busy?", true)["result"]["task"]["status"]["state"].clone();
        assert_eq!(state, "TASK_STATE_REJECTED");
    }
    let body = request(json!(1), "murmur.WatchSession", json!({}));
    let mut watch = open(run.port, &body, &[("Last-Event-ID", "1")]);
    let ack = watch.next().unwrap();
    assert_eq!(
        ack.data["result"]["message"]["metadata"][STREAM_URI]["frame"],
        "connection-ack"
    );
    let gap = watch.next().unwrap();
    assert!(gap.id.is_none(), "a frame is unnumbered");
    assert_eq!(
        gap.data["result"]["message"]["metadata"][STREAM_URI],
        json!({"frame": "gap", "after": 1})
    );
    assert_eq!(gap.data["result"]["message"]["parts"][0]["text"], "gap");
    // Then what the buffer holds: from the oldest it kept.
    assert_eq!(watch.next().unwrap().id, Some(1032 - 1024 + 1));
    // A reconnect the buffer can still serve has no gap.
    let mut recent = open(run.port, &body, &[("Last-Event-ID", "1030")]);
    recent.next().unwrap();
    assert_eq!(recent.next().unwrap().id, Some(1031));
}

#[test]
fn subscribe_stays_open_through_input_required_and_a_streamed_reply_continues_the_task() {
    let home = Home::new();
    let run = launch(&home);
    let mut p = message("@ask Which branch?", true);
    p["message"]["contextId"] = json!("ctx-s");
    let id = run.rpc("SendMessage", p)["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    run.wait_task(&id, Duration::from_secs(30), |s| {
        s == "TASK_STATE_INPUT_REQUIRED"
    });
    let mut sub = open(
        run.port,
        &request(json!("sub"), "SubscribeToTask", json!({"id": id})),
        &[],
    );
    let opening = sub.next().unwrap();
    assert_eq!(
        opening.data["result"]["task"]["status"]["state"],
        "TASK_STATE_INPUT_REQUIRED"
    );
    assert_eq!(
        opening.data["result"]["task"]["artifacts"][0]["artifactId"],
        "prompt"
    );
    // The reply, itself streamed: the task's resumed WORKING and its end.
    let mut reply = message("main", false);
    reply["message"]["taskId"] = json!(id);
    reply["message"]["contextId"] = json!("ctx-s");
    let streamed = open(
        run.port,
        &request(json!(2), "SendStreamingMessage", reply),
        &[],
    )
    .rest();
    assert_eq!(
        states(&streamed),
        ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]
    );
    let rest = sub.rest();
    assert_eq!(
        states(&rest),
        ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]
    );
    let answer = rest
        .iter()
        .find_map(|e| e.data["result"].pointer("/artifactUpdate/artifact/parts/0/text"));
    assert_eq!(answer, Some(&json!("reply: main")));
    for e in rest.iter().chain(&streamed) {
        if let Some(update) = e.data["result"].get("artifactUpdate") {
            assert_whole_artifact(update, "response");
        }
    }
}

#[test]
fn send_streaming_message_ends_at_input_required_and_the_streamed_reply_carries_the_rest() {
    let home = Home::new();
    let run = launch(&home);
    let mut p = message("@ask Which branch?", false);
    p["message"]["contextId"] = json!("ctx-ask");
    let mut asked = open(
        run.port,
        &request(json!("ask"), "SendStreamingMessage", p),
        &[],
    );
    let events = asked.until_the_server_ends();
    assert_eq!(
        states(&events),
        [
            "TASK_STATE_SUBMITTED",
            "TASK_STATE_WORKING",
            "TASK_STATE_INPUT_REQUIRED"
        ]
    );
    let id = events[0].data["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let prompt = events
        .iter()
        .find_map(|e| e.data["result"].get("artifactUpdate"))
        .expect("the prompt artifact");
    assert_whole_artifact(prompt, "prompt");
    assert_eq!(prompt["artifact"]["parts"][0]["text"], "Which branch?");
    // The question is the status's message too, as a status-reading client shows it.
    let last = &events.last().unwrap().data["result"]["statusUpdate"]["status"];
    assert_eq!(
        last["message"],
        json!({"messageId": format!("msg_{id}_prompt"), "contextId": "ctx-ask", "taskId": id,
               "role": "ROLE_AGENT",
               "parts": [{"text": "Which branch?", "mediaType": "text/plain"}]})
    );
    // The task still waits, and GetTask says the same.
    let task = run.rpc("GetTask", json!({"id": id}))["result"].clone();
    assert_eq!(task["status"]["message"], last["message"]);
    // The reply's own stream opens on the resumed task and ends with it.
    let mut reply = message("main", false);
    reply["message"]["taskId"] = json!(id);
    reply["message"]["contextId"] = json!("ctx-ask");
    let streamed = open(
        run.port,
        &request(json!("reply"), "SendStreamingMessage", reply),
        &[],
    )
    .until_the_server_ends();
    assert_eq!(
        states(&streamed),
        ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]
    );
    let answer = streamed
        .iter()
        .find_map(|e| e.data["result"].get("artifactUpdate"))
        .expect("the response artifact");
    assert_whole_artifact(answer, "response");
    assert_eq!(answer["artifact"]["parts"][0]["text"], "reply: main");
}
