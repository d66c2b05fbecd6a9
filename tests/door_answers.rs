//! agent-card.md "Answers", "GetTask", "Task metadata", "ListTasks" and "murmur.StopSession",
//! and a2a-messaging-guide.md steps 5 and 6, "Cancelling a running task" and "Ending the
//! session", against the real `mur` on a public door: the exact shape of every task the door
//! answers, when a held SendMessage is answered, CancelTask and StopSession on tasks in each
//! state, and every ListTasks parameter, its order and its pages.

mod support;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{json, Value};
use support::*;

/// A bound on waits for what should come at once, past the harness grace (10 s): a harness
/// that missed its interrupt ends only after it.
const SETTLE: Duration = Duration::from_secs(30);

fn task_of(answer: &Value) -> Value {
    let task = answer["result"]["task"].clone();
    assert!(task.is_object(), "no task in {answer}");
    task
}

fn id_of(task: &Value) -> String {
    task["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id in {task}"))
        .to_owned()
}

fn get(run: &Launch, id: &str) -> Value {
    let r = run.rpc("GetTask", json!({"id": id}));
    assert!(r["result"].is_object(), "GetTask {id}: {r}");
    r["result"].clone()
}

/// The status message of a terminal task that said something (`kind` "status"), or of a task
/// waiting in TASK_STATE_INPUT_REQUIRED: its question (`kind` "prompt").
fn said(task: &Value, kind: &str, text: &str) -> Value {
    let id = id_of(task);
    json!({"messageId": format!("msg_{id}_{kind}"), "contextId": task["contextId"], "taskId": id,
           "role": "ROLE_AGENT", "parts": [{"text": text, "mediaType": "text/plain"}]})
}

/// Asserts `task` is exactly `{id, contextId, status: {state, [message], timestamp}, [artifacts]}`
/// with nothing else (no metadata: these tasks have nothing to say about answers they lack).
fn assert_task(
    task: &Value,
    state: &str,
    message: Option<&str>,
    artifacts: Option<Value>,
    row: &str,
) {
    assert_timestamp(&task["status"]["timestamp"], row);
    let mut status = json!({"state": state});
    if let Some(text) = message {
        let kind = match state {
            "TASK_STATE_INPUT_REQUIRED" => "prompt",
            _ => "status",
        };
        status["message"] = said(task, kind, text);
    }
    status["timestamp"] = task["status"]["timestamp"].clone();
    let mut expected = json!({"id": task["id"], "contextId": task["contextId"], "status": status});
    if let Some(a) = artifacts {
        expected["artifacts"] = a;
    }
    assert_eq!(task, &expected, "{row}");
    let keys: Vec<&String> = task
        .as_object()
        .map(|o| o.keys().collect())
        .unwrap_or_default();
    assert_eq!(keys[..3], ["id", "contextId", "status"], "{row}: key order");
}

fn artifact(name: &str, text: &str) -> Value {
    json!([{"artifactId": name, "name": name, "parts": [{"text": text, "mediaType": "text/plain"}]}])
}

fn queue(home: &Home, depth: u32) -> Launch {
    let fixture = Fixture {
        queue_depth: Some(depth),
        ..Fixture::default()
    };
    start_fixture(home, "murmur.yaml", &fixture, &[])
}

fn cancel(run: &Launch, id: &str) -> Value {
    assert_result(&run.call("CancelTask", json!({"id": id})), "CancelTask")
}

#[test]
fn answers_by_return_immediately() {
    let home = Home::new();
    let run = queue(&home, 2);
    let completed = |t: &Value, row: &str| {
        assert_task(
            t,
            "TASK_STATE_COMPLETED",
            Some("task completed"),
            Some(artifact("response", "Acknowledged.")),
            row,
        )
    };
    // Held until the task settles: no configuration, an empty one, false, null.
    for (row, config) in [
        ("no configuration", None),
        ("an empty configuration", Some(json!({}))),
        (
            "returnImmediately false",
            Some(json!({"returnImmediately": false})),
        ),
        (
            "returnImmediately null",
            Some(json!({"returnImmediately": null})),
        ),
        (
            "other members ignored",
            Some(json!({"acceptedOutputModes": ["text/plain"], "historyLength": 3})),
        ),
    ] {
        let mut params = message("Acknowledge message from orchestrator capsule.", false);
        if let Some(c) = config {
            params["configuration"] = c;
        }
        let resp = run.call("SendMessage", params);
        let result = assert_result(&resp, row);
        assert_eq!(
            result.as_object().map(|o| o.len()),
            Some(1),
            "{row}: {{\"task\": …}} only"
        );
        completed(&result["task"], row);
        assert_eq!(
            get(&run, &id_of(&result["task"])),
            result["task"],
            "{row}: as GetTask reports it"
        );
        assert!(resp.header("a2a-extensions").is_none(), "{row}");
    }

    // returnImmediately: answered once accepted, in TASK_STATE_SUBMITTED.
    let mut params = message("quick", true);
    params["message"]["contextId"] = json!("ctx-001");
    let task = task_of(&run.rpc("SendMessage", params));
    assert_task(
        &task,
        "TASK_STATE_SUBMITTED",
        None,
        None,
        "returnImmediately",
    );
    assert_eq!(task["contextId"], "ctx-001");
    let id = id_of(&task);
    assert!(id.starts_with("tsk_") && id.len() == 36, "{id}");
    // Step 6: poll GetTask until it ends.
    let done = run.wait_task(&id, SETTLE, |s| s == "TASK_STATE_COMPLETED");
    completed(&done, "polled");
    // Artifact ids are the same on every read.
    assert_eq!(get(&run, &id), done);
}

#[test]
fn answers_for_failed_rejected_and_input_required_tasks() {
    let home = Home::new();
    let fixture = Fixture::single();
    let run = start_fixture(&home, "murmur.yaml", &fixture, &[]);

    let failed = task_of(&run.send("@stderr the driver failed\n@exit 3", false));
    assert_task(
        &failed,
        "TASK_STATE_FAILED",
        Some("the harness exited with status 3: the driver failed"),
        None,
        "failed",
    );
    let silent = task_of(&run.send("@silent", false));
    assert_task(
        &silent,
        "TASK_STATE_FAILED",
        Some("the harness exited with status 0 without an answer"),
        None,
        "no answer",
    );

    // A held send settles on TASK_STATE_INPUT_REQUIRED with its prompt artifact, and a status
    // message that asks the same.
    let ask = task_of(&run.send("@ask Which branch?", false));
    assert_task(
        &ask,
        "TASK_STATE_INPUT_REQUIRED",
        Some("Which branch?"),
        Some(artifact("prompt", "Which branch?")),
        "input required",
    );
    assert_eq!(get(&run, &id_of(&ask)), ask);

    // The door has no room: answered at once, held or not, in TASK_STATE_REJECTED.
    let pid = pidfile(&home);
    for (row, immediately) in [("held", false), ("returnImmediately", true)] {
        let rejected = task_of(&run.send(&format!("@pidfile {}", pid.display()), immediately));
        assert_task(
            &rejected,
            "TASK_STATE_REJECTED",
            Some("task rejected: capsule is busy"),
            None,
            row,
        );
        assert_eq!(get(&run, &id_of(&rejected)), rejected, "{row}");
    }
    cancel(&run, &id_of(&ask));
    quiet(&run, &home);
    assert!(!pid.exists(), "a rejected task ran");
}

/// Waits (bounded) until ListTasks with `params` lists a task; answers the first one's id.
fn first_listed(run: &Launch, params: Value) -> String {
    let mut id = String::new();
    let listed = wait_until(SETTLE, || {
        let page = run.rpc("ListTasks", params.clone());
        id = page["result"]["tasks"][0]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        !id.is_empty()
    });
    assert!(listed, "ListTasks {params} listed no task");
    id
}

#[test]
fn a_held_request_ends_when_the_door_closes_or_the_client_leaves() {
    let home = Home::new();
    let mut run = queue(&home, 2);
    let port = run.port;

    // murmur.StopSession answers the held request with the task as it then stands.
    let held = std::thread::spawn(move || {
        let mut p = message("@sleep 30", false);
        p["message"]["contextId"] = json!("ctx-held");
        call_at(port, "SendMessage", p)
    });
    let id = first_listed(
        &run,
        json!({"contextId": "ctx-held", "status": "TASK_STATE_WORKING"}),
    );
    run.wait_harness_ready(&id);
    let stop = assert_result(&run.call("murmur.StopSession", json!({})), "StopSession");
    assert_eq!(stop["canceled"], json!([id]));
    let answer = held.join().expect("held request");
    let task = task_of(&answer.json());
    assert_task(
        &task,
        "TASK_STATE_CANCELED",
        None,
        None,
        "held, then StopSession",
    );

    // A client that leaves changes nothing: the task runs on and is found by its context.
    let body = request(
        json!(1),
        "SendMessage",
        json!({"message": {"messageId": "m", "role": "ROLE_USER",
        "contextId": "ctx-gone", "parts": [{"text": "@sleep 0.3"}]}}),
    );
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let head = format!(
        "POST / HTTP/1.1\r\nHost: localhost:{port}\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body.as_bytes()).unwrap();
    let gone = first_listed(&run, json!({"contextId": "ctx-gone"}));
    drop(s);
    let done = run.wait_task(&gone, Duration::from_secs(30), |s| {
        s != "TASK_STATE_SUBMITTED" && s != "TASK_STATE_WORKING"
    });
    assert_eq!(
        done["status"]["state"], "TASK_STATE_COMPLETED",
        "the client left and the task ended: {done}"
    );

    // mur stop (SIGTERM to `mur run`) answers the held request too, then the launch ends.
    let held =
        std::thread::spawn(move || call_at(port, "SendMessage", message("@sleep 30", false)));
    let id = first_listed(&run, json!({"status": "TASK_STATE_WORKING"}));
    run.wait_harness_ready(&id);
    signal(run.pid(), 15);
    let task = task_of(&held.join().expect("held request").json());
    assert_task(
        &task,
        "TASK_STATE_CANCELED",
        None,
        None,
        "held, then mur stops",
    );
    assert_eq!(run.wait_exit(Duration::from_secs(20)), Some(0));
}

/// GetTask's answer byte for byte, nested key order included (a parsed comparison ignores
/// order below the top level): a completed task, and a failed one with its status message.
#[test]
fn get_task_answers_the_spec_bytes_in_the_spec_order() {
    let home = Home::new();
    let run = queue(&home, 2);
    for (text, state, says, artifact) in [
        ("plain", "TASK_STATE_COMPLETED", "task completed", true),
        (
            "@stderr it broke\n@exit 3",
            "TASK_STATE_FAILED",
            "the harness exited with status 3: it broke",
            false,
        ),
    ] {
        let sent = task_of(&run.send(text, false));
        let (id, ctx) = (id_of(&sent), sent["contextId"].as_str().unwrap().to_owned());
        let resp = run.post(
            &request(json!(7), "GetTask", json!({"id": id})),
            &[("A2A-Version", "1.0")],
        );
        let body = String::from_utf8(resp.body.clone()).unwrap();
        let stamp = resp.json()["result"]["status"]["timestamp"]
            .as_str()
            .unwrap()
            .to_owned();
        let artifacts = match artifact {
            true => {
                r#","artifacts":[{"artifactId":"response","name":"response","parts":[{"text":"Acknowledged.","mediaType":"text/plain"}]}]"#
            }
            false => "",
        };
        let expected = format!(
            r#"{{"jsonrpc":"2.0","id":7,"result":{{"id":"{id}","contextId":"{ctx}","status":{{"state":"{state}","message":{{"messageId":"msg_{id}_status","contextId":"{ctx}","taskId":"{id}","role":"ROLE_AGENT","parts":[{{"text":"{says}","mediaType":"text/plain"}}]}},"timestamp":"{stamp}"}}{artifacts}}}}}"#
        );
        assert_eq!(body, expected, "{text}");
    }
}

#[test]
fn get_task() {
    let home = Home::new();
    let run = queue(&home, 2);
    let probe = Probe::take(&run, &home);
    let needs_id = invalid_params("GetTask requires an id");
    for params in [
        json!({}),
        json!({"id": ""}),
        json!({"id": 5}),
        json!({"id": null}),
        json!({"taskId": "tsk_x"}),
    ] {
        assert_rpc_error(
            &run.call("GetTask", params.clone()),
            json!(1),
            &needs_id,
            &format!("GetTask {params}"),
        );
    }
    let resp = run.post(
        r#"{"jsonrpc":"2.0","id":1,"method":"GetTask"}"#,
        &[("A2A-Version", "1.0")],
    );
    assert_rpc_error(&resp, json!(1), &needs_id, "GetTask without params");
    for id in ["tsk_0000000000007000800000000000000a", "not-an-id", "TSK_X"] {
        let error = a2a_error(
            -32001,
            "Task not found",
            "TASK_NOT_FOUND",
            json!({"taskId": id}),
        );
        assert_rpc_error(
            &run.call("GetTask", json!({"id": id})),
            json!(1),
            &error,
            id,
        );
    }
    probe.unchanged(&run, &home, "GetTask refusals");

    // Each state, exactly; historyLength is accepted and ignored.
    let done = task_of(&run.send("plain", false));
    let working = run.start_working("@sleep 30");
    let queued = id_of(&task_of(&run.send("plain", true)));
    for history in [json!(0), json!(5), json!("x")] {
        let t = assert_result(
            &run.call(
                "GetTask",
                json!({"id": id_of(&done), "historyLength": history}),
            ),
            "historyLength",
        );
        assert_eq!(t, done);
    }
    assert_task(
        &get(&run, &working),
        "TASK_STATE_WORKING",
        None,
        None,
        "working",
    );
    assert_task(
        &get(&run, &queued),
        "TASK_STATE_SUBMITTED",
        None,
        None,
        "submitted",
    );
    let canceled = cancel(&run, &working);
    assert_task(
        &canceled,
        "TASK_STATE_CANCELED",
        None,
        None,
        "CancelTask's answer",
    );
    run.wait_task(&queued, SETTLE, |s| s == "TASK_STATE_COMPLETED");
    // The canceled task's ending is recorded (and moves it in ListTasks) but it says nothing.
    quiet(&run, &home);
    assert_task(
        &get(&run, &working),
        "TASK_STATE_CANCELED",
        None,
        None,
        "canceled, after its harness ended",
    );
}

#[test]
fn cancel_task() {
    let home = Home::new();
    let run = queue(&home, 2);
    let probe = Probe::take(&run, &home);
    let needs_id = invalid_params("CancelTask requires an id");
    for params in [
        json!({}),
        json!({"id": ""}),
        json!({"id": 7}),
        json!({"id": ["tsk_x"]}),
    ] {
        assert_rpc_error(
            &run.call("CancelTask", params.clone()),
            json!(1),
            &needs_id,
            &format!("CancelTask {params}"),
        );
    }
    let never = "tsk_0000000000007000800000000000000a";
    let error = a2a_error(
        -32001,
        "Task not found",
        "TASK_NOT_FOUND",
        json!({"taskId": never}),
    );
    assert_rpc_error(
        &run.call("CancelTask", json!({"id": never})),
        json!(1),
        &error,
        "never held",
    );
    probe.unchanged(&run, &home, "CancelTask refusals");

    // A working task: canceled at once, its harness interrupted; nothing was in flight.
    let working = run.start_working("@sleep 30");
    let pid = pidfile(&home);
    let queued = id_of(&task_of(
        &run.send(&format!("@pidfile {}", pid.display()), true),
    ));
    let answer = cancel(&run, &queued);
    assert_task(
        &answer,
        "TASK_STATE_CANCELED",
        None,
        None,
        "a submitted task",
    );
    let answer = cancel(&run, &working);
    assert_task(&answer, "TASK_STATE_CANCELED", None, None, "a working task");
    assert!(
        answer.get("artifacts").is_none(),
        "nothing in flight: no artifacts key"
    );
    quiet(&run, &home);
    let trace = home.trace(&run.session);
    let of = |id: &str, kind: &str| -> Vec<Value> {
        trace
            .iter()
            .filter(|e| e["task_id"] == id && e["event_type"] == kind)
            .cloned()
            .collect()
    };
    assert_eq!(of(&working, "harness_interrupt")[0]["interrupt"], "sigint");
    assert_eq!(of(&working, "harness_exit")[0]["cause"], "canceled");
    assert_eq!(of(&working, "task_canceled").len(), 1);
    assert_eq!(of(&working, "task_end")[0]["exit_status"], "canceled");
    assert_eq!(of(&queued, "task_end")[0]["exit_status"], "canceled");
    assert!(
        of(&queued, "task_start").is_empty(),
        "a task canceled in the queue never starts"
    );

    // The session and its queue keep going.
    let after = task_of(&run.send("plain", false));
    assert_eq!(after["status"]["state"], "TASK_STATE_COMPLETED");
    assert!(!pid.exists(), "the canceled queued task ran");

    // A task waiting for input.
    let ask = id_of(&task_of(&run.send("@ask Which branch?", false)));
    assert_task(
        &cancel(&run, &ask),
        "TASK_STATE_CANCELED",
        None,
        None,
        "an input-required task",
    );

    // Ended tasks are left unchanged and answered -32002, naming the state they ended in.
    let failed = id_of(&task_of(&run.send("@exit 2", false)));
    let full: Vec<String> = (0..3)
        .map(|_| id_of(&task_of(&run.send("@sleep 30", true))))
        .collect();
    let rejected = task_of(&run.send("no room", true));
    assert_eq!(rejected["status"]["state"], "TASK_STATE_REJECTED");
    for id in &full {
        cancel(&run, id);
    }
    let ended = [
        (id_of(&after), "TASK_STATE_COMPLETED"),
        (failed, "TASK_STATE_FAILED"),
        (id_of(&rejected), "TASK_STATE_REJECTED"),
        (ask.clone(), "TASK_STATE_CANCELED"),
        (working.clone(), "TASK_STATE_CANCELED"),
    ];
    let probe = Probe::take(&run, &home);
    let order = run.rpc("ListTasks", json!({}))["result"].clone();
    for (id, state) in &ended {
        let before = get(&run, id);
        let error = a2a_error(
            -32002,
            &format!("Task cannot be canceled: it is already {state}"),
            "TASK_NOT_CANCELABLE",
            json!({"taskId": id, "state": state}),
        );
        assert_rpc_error(
            &run.call("CancelTask", json!({"id": id})),
            json!(1),
            &error,
            state,
        );
        assert_eq!(get(&run, id), before, "{state}: the task changed");
    }
    assert_eq!(
        run.rpc("ListTasks", json!({}))["result"],
        order,
        "a refused cancel moved a task"
    );
    probe.unchanged(&run, &home, "CancelTask on ended tasks");
}

#[test]
fn stop_session() {
    let home = Home::new();
    let run = queue(&home, 2);
    let stop = |row: &str| {
        let resp = run.call("murmur.StopSession", json!({"ignored": true}));
        assert_eq!(
            resp.header("content-type"),
            Some("application/json"),
            "{row}"
        );
        assert_eq!(resp.header_all("a2a-extensions"), vec![DOOR_URI], "{row}");
        let result = assert_result(&resp, row);
        let keys: Vec<&String> = result
            .as_object()
            .map(|o| o.keys().collect())
            .unwrap_or_default();
        assert_eq!(keys.len(), 3, "{row}: {result}");
        assert_eq!(result["session_id"], run.session.as_str(), "{row}");
        assert_eq!(
            result["residue"],
            json!([]),
            "{row}: a process capsule leaves nothing running"
        );
        result["canceled"].clone()
    };
    assert_eq!(stop("nothing live"), json!([]));

    let pids = [pidfile(&home), pidfile(&home)];
    let ask = id_of(&task_of(&run.send("@ask Which branch?", false)));
    let queued: Vec<String> = pids
        .iter()
        .map(|p| {
            id_of(&task_of(
                &run.send(&format!("@pidfile {}", p.display()), true),
            ))
        })
        .collect();
    let mut expected = vec![ask.clone(), queued[0].clone(), queued[1].clone()];
    expected.sort();
    assert_eq!(
        stop("input-required and submitted"),
        json!(expected),
        "sorted"
    );
    for id in &expected {
        assert_eq!(
            get(&run, id)["status"]["state"],
            "TASK_STATE_CANCELED",
            "{id}"
        );
    }
    assert_eq!(stop("a second call"), json!([]));

    let working = run.start_working("@sleep 30");
    assert_eq!(stop("working"), json!([working]));

    // It ends nothing: the capsule keeps running and answering.
    let after = task_of(&run.send("plain", false));
    assert_eq!(after["status"]["state"], "TASK_STATE_COMPLETED");
    quiet(&run, &home);
    assert!(
        pids.iter().all(|p| !p.exists()),
        "a canceled queued task ran"
    );
    let trace = home.trace(&run.session);
    for id in &queued {
        let canceled = trace
            .iter()
            .find(|e| e["event_type"] == "task_canceled" && e["task_id"] == id.as_str());
        assert_eq!(
            canceled.map(|e| e["interrupted"].clone()),
            Some(json!("queue")),
            "{id}"
        );
    }
}

#[test]
fn the_launch_task_is_listed_from_the_start() {
    let home = Home::new();
    let manifest = home.write("murmur.yaml", &Fixture::default().yaml());
    let run = Launch::start(
        &home,
        &manifest,
        &["--task", "@sleep 30", "--context", "ctx-launch"],
    );
    let page = assert_result(&run.call("ListTasks", json!({})), "first ListTasks");
    assert_eq!(page["totalSize"], 1, "{page}");
    let task = page["tasks"][0].clone();
    assert_eq!(task["contextId"], "ctx-launch");
    let id = id_of(&task);
    run.wait_task(&id, SETTLE, |s| s == "TASK_STATE_WORKING");
    assert_task(
        &cancel(&run, &id),
        "TASK_STATE_CANCELED",
        None,
        None,
        "CancelTask reaches the launch's task",
    );
}

#[test]
fn list_tasks_parameters() {
    let home = Home::new();
    let run = queue(&home, 2);
    let send_in = |ctx: &str, text: &str| {
        let mut p = message(text, false);
        p["message"]["contextId"] = json!(ctx);
        id_of(&task_of(&run.rpc("SendMessage", p)))
    };
    let a1 = send_in("ctx-a", "one");
    let b1 = send_in("ctx-b", "@exit 4");
    let a2 = send_in("ctx-a", "two");
    let probe = Probe::take(&run, &home);

    let ip = invalid_params;
    let context = ip("Invalid params: contextId must be a string");
    let status = ip("Invalid params: status must be a task state name such as TASK_STATE_WORKING");
    let size = ip("Invalid params: pageSize must be an integer from 1");
    let token = ip("Invalid params: pageToken must be \"\" or a nextPageToken this door answered");
    let after =
        ip("statusTimestampAfter must be an RFC 3339 timestamp, such as 2026-10-13T09:00:00Z");
    let artifacts = ip("Invalid params: includeArtifacts must be a boolean");
    let rows: Vec<(Value, &Value)> = vec![
        (json!({"contextId": 5}), &context),
        (json!({"contextId": null}), &context),
        (json!({"contextId": ["ctx-a"]}), &context),
        (json!({"status": "completed"}), &status),
        (json!({"status": "TASK_STATE_DONE"}), &status),
        (json!({"status": ""}), &status),
        (json!({"status": 3}), &status),
        (json!({"status": null}), &status),
        (json!({"pageSize": 0}), &size),
        (json!({"pageSize": -1}), &size),
        (json!({"pageSize": 1.5}), &size),
        (json!({"pageSize": "2"}), &size),
        (json!({"pageSize": null}), &size),
        (json!({"pageSize": true}), &size),
        (json!({"pageToken": "garbage"}), &token),
        (json!({"pageToken": "OTk5OTk5OnRza18wMWEx"}), &token),
        // A plausible position (1:tsk_01a1) the door did not sign: crafted, not issued.
        (json!({"pageToken": "MTp0c2tfMDFhMQ=="}), &token),
        (json!({"pageToken": 5}), &token),
        (json!({"pageToken": null}), &token),
        (json!({"statusTimestampAfter": "yesterday"}), &after),
        (json!({"statusTimestampAfter": "2026-10-13"}), &after),
        (
            json!({"statusTimestampAfter": "2026-10-13T09:00:00"}),
            &after,
        ),
        (json!({"statusTimestampAfter": 1760000000}), &after),
        (json!({"statusTimestampAfter": {}}), &after),
        (json!({"includeArtifacts": "yes"}), &artifacts),
        (json!({"includeArtifacts": 1}), &artifacts),
        (json!({"includeArtifacts": null}), &artifacts),
        // The first parameter refused answers, in the spec's order.
        (json!({"pageSize": 0, "contextId": 5}), &context),
        (json!({"pageSize": 0, "status": "x"}), &status),
        (json!({"pageToken": 5, "pageSize": 0}), &size),
        (json!({"statusTimestampAfter": "x", "pageToken": 5}), &token),
        (
            json!({"includeArtifacts": 1, "statusTimestampAfter": "x"}),
            &after,
        ),
    ];
    for (params, error) in &rows {
        assert_rpc_error(
            &run.call("ListTasks", params.clone()),
            json!(1),
            error,
            &params.to_string(),
        );
    }
    probe.unchanged(&run, &home, "ListTasks refusals");

    let list = |params: Value| {
        let page = assert_result(&run.call("ListTasks", params.clone()), &params.to_string());
        let keys: Vec<&String> = page
            .as_object()
            .map(|o| o.keys().collect())
            .unwrap_or_default();
        assert_eq!(
            keys,
            ["tasks", "nextPageToken", "pageSize", "totalSize"],
            "{params}: {page}"
        );
        page
    };
    let ids = |page: &Value| -> Vec<String> {
        page["tasks"]
            .as_array()
            .map(|t| t.iter().map(id_of).collect())
            .unwrap_or_default()
    };
    let all = vec![a2.clone(), b1.clone(), a1.clone()];
    let page = list(json!({}));
    assert_eq!(ids(&page), all, "most recently changed first");
    assert_eq!(
        (
            page["pageSize"].clone(),
            page["totalSize"].clone(),
            page["nextPageToken"].clone()
        ),
        (json!(50), json!(3), json!(""))
    );
    // Each task is exactly what GetTask answers for it, without artifacts.
    for t in page["tasks"].as_array().unwrap() {
        let mut g = get(&run, &id_of(t));
        g.as_object_mut().unwrap().remove("artifacts");
        assert_eq!(t, &g);
    }
    let accepted: Vec<(Value, Vec<String>)> = vec![
        (json!({"contextId": ""}), all.clone()),
        (json!({"contextId": "ctx-a"}), vec![a2.clone(), a1.clone()]),
        (json!({"contextId": "ctx-none"}), vec![]),
        (json!({"status": "TASK_STATE_UNSPECIFIED"}), all.clone()),
        (json!({"status": "TASK_STATE_FAILED"}), vec![b1.clone()]),
        (
            json!({"status": "TASK_STATE_COMPLETED", "contextId": "ctx-a"}),
            vec![a2.clone(), a1.clone()],
        ),
        (json!({"status": "TASK_STATE_AUTH_REQUIRED"}), vec![]),
        (json!({"pageToken": ""}), all.clone()),
        (json!({"statusTimestampAfter": null}), all.clone()),
        (
            json!({"statusTimestampAfter": "1970-01-01T00:00:00Z"}),
            all.clone(),
        ),
        (
            json!({"statusTimestampAfter": "2999-01-01T00:00:00+09:00"}),
            vec![],
        ),
        (
            json!({"historyLength": "anything", "tenant": "", "unknown": {"a": 1}}),
            all.clone(),
        ),
        // Only the ProtoJSON spelling is read: these are unknown members, ignored.
        (
            json!({"context_id": 5, "page_size": 0, "include_artifacts": "x"}),
            all.clone(),
        ),
    ];
    for (params, expected) in accepted {
        let page = list(params.clone());
        assert_eq!(ids(&page), expected, "{params}");
        assert_eq!(page["totalSize"], expected.len(), "{params}");
    }
    assert_eq!(
        list(json!({"pageSize": 1000}))["pageSize"],
        100,
        "above 100 reads as 100"
    );

    // includeArtifacts: the task's artifacts, or [].
    let with = list(json!({"includeArtifacts": true}));
    for t in with["tasks"].as_array().unwrap() {
        assert_eq!(
            t,
            &get(&run, &id_of(t))
                .as_object()
                .map(|o| {
                    let mut o = o.clone();
                    o.entry("artifacts").or_insert(json!([]));
                    Value::Object(o)
                })
                .unwrap()
        );
    }
    assert_eq!(
        with["tasks"][1]["artifacts"],
        json!([]),
        "the failed task has none"
    );
    assert_eq!(with["tasks"][0]["artifacts"][0]["artifactId"], "response");
    assert!(list(json!({"includeArtifacts": false}))["tasks"][0]
        .get("artifacts")
        .is_none());
}

#[test]
fn list_tasks_order_and_pages() {
    let home = Home::new();
    let run = queue(&home, 2);
    let ids = |page: &Value| -> Vec<String> {
        page["tasks"]
            .as_array()
            .map(|t| t.iter().map(id_of).collect())
            .unwrap_or_default()
    };
    let done: Vec<String> = (0..4)
        .map(|i| id_of(&task_of(&run.send(&format!("task {i}"), false))))
        .collect();
    let working = run.start_working("@sleep 30");
    let newest_first: Vec<String> = std::iter::once(working.clone())
        .chain(done.iter().rev().cloned())
        .collect();

    // Walk two at a time: every task once; totalSize across every page.
    let mut token = String::new();
    let mut walked = Vec::new();
    let mut pages = 0;
    loop {
        let page = assert_result(
            &run.call("ListTasks", json!({"pageSize": 2, "pageToken": token})),
            "walk",
        );
        assert_eq!(page["pageSize"], 2);
        assert_eq!(page["totalSize"], 5);
        walked.extend(ids(&page));
        pages += 1;
        token = page["nextPageToken"].as_str().unwrap().to_owned();
        if token.is_empty() {
            break;
        }
        // A task that changes mid-walk moves ahead of the cursor and is not seen again.
        if pages == 1 {
            cancel(&run, &working);
        }
    }
    assert_eq!(walked, newest_first);
    assert_eq!(pages, 3);
    let fresh = assert_result(&run.call("ListTasks", json!({})), "fresh");
    assert_eq!(
        ids(&fresh)[0],
        working,
        "a fresh listing shows the changed task first"
    );

    // Filters apply afresh to every page.
    let first = assert_result(&run.call("ListTasks", json!({"pageSize": 1})), "first");
    let next = first["nextPageToken"].as_str().unwrap();
    let filtered = assert_result(
        &run.call(
            "ListTasks",
            json!({"pageSize": 10, "pageToken": next, "status": "TASK_STATE_CANCELED"}),
        ),
        "filtered",
    );
    assert_eq!(filtered["tasks"], json!([]), "{filtered}");
    assert_eq!(filtered["totalSize"], 1);
}

#[test]
fn list_tasks_status_timestamp_after() {
    let home = Home::new();
    let run = queue(&home, 2);
    let tasks: Vec<Value> = (0..3)
        .map(|i| task_of(&run.send(&format!("task {i}"), false)))
        .collect();
    quiet(&run, &home);
    let listed = |after: &str| -> Vec<String> {
        let page = assert_result(
            &run.call("ListTasks", json!({"statusTimestampAfter": after})),
            after,
        );
        page["tasks"]
            .as_array()
            .map(|t| t.iter().map(id_of).collect())
            .unwrap_or_default()
    };
    let stamp = |t: &Value| {
        get(&run, &id_of(t))["status"]["timestamp"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let cutoff = stamp(&tasks[1]);
    let expected: Vec<String> = tasks
        .iter()
        .rev()
        .filter(|t| stamp(t) >= cutoff)
        .map(id_of)
        .collect();
    assert!(
        expected.contains(&id_of(&tasks[1])),
        "a cutoff copied from a status includes that task"
    );
    assert_eq!(listed(&cutoff), expected);
    // The same instant in other offsets.
    let (date, rest) = cutoff.split_at(11);
    let hour: u32 = rest[..2].parse().unwrap();
    let tail = &rest[2..rest.len() - 1];
    assert_eq!(
        listed(&format!(
            "{date}{rest_no_z}+00:00",
            rest_no_z = &rest[..rest.len() - 1]
        )),
        expected
    );
    let shifted = if hour < 23 {
        format!("{date}{:02}{tail}+01:00", hour + 1)
    } else {
        format!("{date}{:02}{tail}-01:00", hour - 1)
    };
    assert_eq!(listed(&shifted), expected, "{shifted}");
    // One millisecond later excludes the task the cutoff came from.
    let ms: u32 = cutoff[20..23].parse().unwrap();
    if ms < 999 {
        let later = format!("{}{:03}Z", &cutoff[..20], ms + 1);
        assert!(!listed(&later).contains(&id_of(&tasks[1])), "{later}");
    }
}

#[test]
fn a_cancel_keeps_the_context_conversation() {
    let home = Home::new();
    let fixture = Fixture {
        dialect: "stream-json",
        ..Fixture::default()
    };
    let run = start_fixture(&home, "murmur.yaml", &fixture, &[]);
    let send = |text: &str, immediately: bool| {
        let mut p = message(text, immediately);
        p["message"]["contextId"] = json!("ctx-keep");
        task_of(&run.rpc("SendMessage", p))
    };
    let answer = |t: &Value| {
        t["artifacts"][0]["parts"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let first = answer(&send("hello", false));
    let session = first
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned();
    assert!(first.ends_with("resumed=no prompts=1"), "{first}");

    let busy = id_of(&send("@sleep 30", true));
    run.wait_task(&busy, SETTLE, |s| s == "TASK_STATE_WORKING");
    // Wait for the resumed harness to be running before interrupting it.
    quiet(&run, &home);
    assert_task(
        &cancel(&run, &busy),
        "TASK_STATE_CANCELED",
        None,
        None,
        "canceled mid-turn",
    );
    quiet(&run, &home);
    let trace = home.trace(&run.session);
    let exit = trace
        .iter()
        .find(|e| e["event_type"] == "harness_exit" && e["task_id"] == busy.as_str());
    assert_eq!(exit.map(|e| e["cause"].clone()), Some(json!("canceled")));

    // The interrupted turn never reached the harness session; the next message resumes it.
    let next = answer(&send("again", false));
    assert_eq!(next, format!("{session} resumed=yes prompts=2"));
}
