//! HTTP inference (docs/inference.md) through the real `mur`: capsules on
//! `inference.transport: http` run their agent loop against fake providers started here, which
//! speak Anthropic's and OpenAI's real streaming wire formats. Each failure cause of the guide's
//! "Final status.state" table, each provider error, cancel mid-call, images, context
//! continuation, tools through a formation, and that the API key is never written anywhere.

#[path = "support/fake_provider.rs"]
mod fake_provider;
mod support;

use std::path::Path;
use std::time::Duration;

use fake_provider::{anthropic, openai, Fake, Reply};
use serde_json::{json, Value};
use support::*;

const KEY: &str = "sk-test-NEVER-WRITE-ME-7f3a9c";
const KEY_VAR: &str = "FAKE_PROVIDER_KEY";
const LONG: Duration = Duration::from_secs(60);
const STREAM_URI: &str = "https://docs.murmur.nexus/reference/streaming-protocol/#murmur-stream-v1";
const TOOLS: [&str; 5] = [
    "call-member",
    "delegate-task",
    "send-message",
    "request-input",
    "end-without-answer",
];

/// A capsule manifest on an http driver at `endpoint`, its key from `${FAKE_PROVIDER_KEY}`.
fn capsule(driver: &str, endpoint: &str, inference: &str, lifecycle: &str) -> String {
    format!(
        "name: http-worker\nversion: \"0.1.0\"\nartifacts:\n  - name: murmur/driver-{driver}\n    version: \"0.19.0\"\n    runtime: driver\n    gateway:\n      endpoint: {endpoint}\n      api_key: ${{{KEY_VAR}}}\ninference:\n  transport: http\n  model: test-model\n  max_tokens: 256\n{inference}  driver:\n    artifact: murmur/driver-{driver}\nlifecycle:\n{lifecycle}"
    )
}

const ONE_TASK: &str = "  task_acceptance: single\n  after_task: exit\n";
const QUEUE: &str = "  task_acceptance: queue\n  after_task: sleep\n  queue_depth: 2\n";

fn base(fake: &Fake, driver: &str) -> String {
    match driver {
        "anthropic" => format!("http://127.0.0.1:{}", fake.port),
        _ => format!("http://127.0.0.1:{}/v1", fake.port),
    }
}

/// A queue worker on `driver` against the fake provider, its key in the environment.
fn queue_worker(home: &Home, fake: &Fake, driver: &str) -> Launch {
    let manifest = home.write(
        "w/murmur.yaml",
        &capsule(driver, &base(fake, driver), "", QUEUE),
    );
    Launch::start_env(home, &manifest, &[], &[(KEY_VAR, KEY.into())])
}

/// `mur run --task TEXT` to its end, with the key in the environment: (code, stdout, stderr).
fn run_task(home: &Home, manifest: &Path, text: &str) -> (i32, String, String) {
    let mut cmd = home.mur();
    cmd.env(KEY_VAR, KEY)
        .args([
            "run",
            "--manifest",
            manifest.to_str().unwrap(),
            "--task",
            text,
        ])
        .stdin(std::process::Stdio::null());
    let out = cmd.output().unwrap();
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        !o.contains(KEY) && !e.contains(KEY),
        "the key was printed: {o}{e}"
    );
    (out.status.code().unwrap_or(-1), o, e)
}

fn session_of(stdout: &str) -> String {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("session: "))
        .unwrap_or_else(|| panic!("no session announced: {stdout}"))
        .to_owned()
}

fn events<'a>(trace: &'a [Value], kind: &str) -> Vec<&'a Value> {
    trace.iter().filter(|e| e["event_type"] == kind).collect()
}

/// No file under the test's root (records, traces, running-capsule records) holds the key.
fn assert_no_key_written(home: &Home) {
    fn walk(dir: &Path, found: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, found);
            } else if std::fs::read(&p).is_ok_and(|b| String::from_utf8_lossy(&b).contains(KEY)) {
                found.push(p.display().to_string());
            }
        }
    }
    let mut found = Vec::new();
    walk(&home.root, &mut found);
    assert!(found.is_empty(), "the API key was written to {found:?}");
}

fn texts(reply: Vec<String>) -> Reply {
    Reply::Stream(reply)
}

fn answer_of(task: &Value) -> String {
    task["artifacts"][0]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// murmur.WatchSession's replay, read until the terminal status of `task` arrives: its frames,
/// and its working notes as `{"frame": "status"}`.
fn watched_frames(port: u16, task: &str) -> Vec<Value> {
    use std::io::{BufRead, BufReader, Write};
    let body = request(json!(1), "murmur.WatchSession", json!({}));
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let req = format!(
        "POST / HTTP/1.1\r\nHost: localhost:{port}\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut frames = Vec::new();
    for line in BufReader::new(s).lines() {
        let Ok(line) = line else { break };
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        let v: Value = serde_json::from_str(data).unwrap();
        let r = &v["result"];
        if let Some(meta) = r
            .pointer("/message/metadata")
            .and_then(|m| m.get(STREAM_URI))
        {
            if r["message"]["taskId"] == task {
                // A task's frame message keeps the order of every task message the spec shows.
                let keys: Vec<&str> = r["message"]
                    .as_object()
                    .unwrap()
                    .keys()
                    .map(String::as_str)
                    .collect();
                assert_eq!(
                    keys,
                    [
                        "messageId",
                        "contextId",
                        "taskId",
                        "role",
                        "parts",
                        "metadata"
                    ],
                    "{data}"
                );
                assert_eq!(r["message"]["role"], "ROLE_AGENT", "{data}");
                assert_eq!(
                    r["message"]["parts"][0]["mediaType"], "text/plain",
                    "{data}"
                );
                let mut f = meta.clone();
                f["text"] = r["message"]["parts"][0]["text"].clone();
                frames.push(f);
            }
        }
        // A working status with a message is the loop's progress note.
        if let Some(note) = r.pointer("/statusUpdate/status/message/parts/0/text") {
            if r["statusUpdate"]["taskId"] == task
                && r["statusUpdate"]["status"]["state"] == "TASK_STATE_WORKING"
            {
                frames.push(json!({"frame": "status", "text": note}));
            }
        }
        let state = r
            .pointer("/statusUpdate/status/state")
            .and_then(Value::as_str);
        if r.pointer("/statusUpdate/taskId").and_then(Value::as_str) == Some(task)
            && matches!(
                state,
                Some("TASK_STATE_COMPLETED" | "TASK_STATE_FAILED" | "TASK_STATE_CANCELED")
            )
        {
            break;
        }
    }
    frames
}

#[test]
fn anthropic_loop_streams_frames_asks_for_input_and_feeds_the_reply_back() {
    let home = Home::new();
    let fake = Fake::start();
    fake.script([
        texts(anthropic::tool(
            "toolu_1",
            "request-input",
            &["{\"quest", "ion\": \"Which branch?\"}"],
            (40, 12),
        )),
        texts(anthropic::text(
            "pondering",
            &["done ", "on main"],
            "end_turn",
            (70, 9),
        )),
    ]);
    let run = queue_worker(&home, &fake, "anthropic");
    let id = run.start_task("ship it");
    let waiting = run.wait_task(&id, LONG, |s| s == "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(
        waiting["artifacts"][0]["parts"][0]["text"], "Which branch?",
        "{waiting}"
    );
    let ctx = waiting["contextId"].as_str().unwrap().to_owned();
    let reply = json!({"message": {"messageId": "m-reply", "role": "ROLE_USER", "taskId": id,
        "contextId": ctx, "parts": [{"text": "main"}]}, "configuration": {"returnImmediately": true}});
    assert!(run.rpc("SendMessage", reply)["result"].is_object());
    let task = run.wait_task(&id, LONG, |s| s == "TASK_STATE_COMPLETED");
    // The answer is the response artifact, spelled as the guide's Step 6 shows it.
    assert_eq!(
        task["artifacts"],
        json!([{"artifactId": "response", "name": "response",
            "parts": [{"text": "done on main", "mediaType": "text/plain"}]}])
    );
    assert_eq!(
        task["status"]["message"]["parts"],
        json!([{"text": "task completed", "mediaType": "text/plain"}])
    );

    let seen = fake.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].path, "/v1/messages");
    assert_eq!(seen[0].header("x-api-key"), Some(KEY));
    assert_eq!(seen[0].header("anthropic-version"), Some("2023-06-01"));
    let first = &seen[0].body;
    assert_eq!(
        (
            first["model"].as_str(),
            first["max_tokens"].as_u64(),
            first["stream"].as_bool()
        ),
        (Some("test-model"), Some(256), Some(true))
    );
    let names: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, TOOLS);
    assert_eq!(
        first["tools"][3]["input_schema"]["required"],
        json!(["question"])
    );
    assert_eq!(
        first["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "ship it"}]}])
    );
    // The tool call, then its result, went back to the model.
    let msgs = seen[1].body["messages"].as_array().unwrap();
    assert_eq!(
        msgs[1]["content"][0],
        json!({"type": "tool_use", "id": "toolu_1", "name": "request-input",
        "input": {"question": "Which branch?"}})
    );
    let result = &msgs[2]["content"][0];
    assert_eq!(
        (
            result["type"].as_str(),
            result["tool_use_id"].as_str(),
            result["is_error"].as_bool()
        ),
        (Some("tool_result"), Some("toolu_1"), Some(false))
    );
    assert_eq!(
        serde_json::from_str::<Value>(result["content"].as_str().unwrap()).unwrap(),
        json!({"reply": "main"})
    );

    // Frames as the tokens arrived.
    let frames = watched_frames(run.port, &id);
    let kinds: Vec<(&str, &str)> = frames
        .iter()
        .map(|f| (f["frame"].as_str().unwrap(), f["text"].as_str().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("status", "inference turn 1"),
            ("tool-call-started", "request-input"),
            ("tool-call-progress", "{\"quest"),
            ("tool-call-progress", "ion\": \"Which branch?\"}"),
            ("status", "inference turn 2"),
            ("thinking", "pondering"),
            ("text", "done "),
            ("text", "on main"),
        ]
    );
    assert_eq!(frames[1]["toolCallId"], "toolu_1");
    assert_eq!(
        (frames[1]["turn"].as_u64(), frames[6]["turn"].as_u64()),
        (Some(1), Some(2))
    );

    // inference records with the provider's token counts.
    let trace = home.trace(&run.session);
    let inf = events(&trace, "inference");
    assert_eq!(inf.len(), 2, "{trace:?}");
    assert_eq!(
        (
            inf[0]["provider"].as_str(),
            inf[0]["turn"].as_u64(),
            inf[0]["input_tokens"].as_u64(),
            inf[0]["output_tokens"].as_u64()
        ),
        (Some("anthropic"), Some(1), Some(40), Some(12))
    );
    assert_eq!(
        (inf[0]["stop_reason"].as_str(), &inf[0]["tool_calls"]),
        (Some("tool_use"), &json!(["request-input"]))
    );
    assert_eq!(
        (
            inf[1]["input_tokens"].as_u64(),
            inf[1]["output_tokens"].as_u64(),
            inf[1]["stop_reason"].as_str()
        ),
        (Some(70), Some(9), Some("end_turn"))
    );
    assert!(inf[1]["latency_ms"].is_u64());
    assert_eq!(events(&trace, "tool_call")[0]["tool"], "request-input");
    let end = events(&trace, "task_end")[0];
    let run_session = run.session.clone();
    assert_eq!(
        (end["status"].as_str(), end["turns"].as_u64()),
        (Some("completed"), Some(2))
    );
    drop(run);
    // mur trace show sums the task's tokens, as the guide shows them.
    let (code, shown, err) = home.run(&["trace", "show", &run_session]);
    assert_eq!(code, 0, "{err}");
    // `task 1  tsk_019ed33d  turns: 3  in: 892  out: 241  ok  4.1s`, as the guide prints it.
    let id = end["task_id"].as_str().unwrap();
    let line = shown
        .lines()
        .find(|l| l.starts_with("task 1  "))
        .unwrap_or_else(|| panic!("{shown}"));
    let head = format!("task 1  {}  turns: 2  in: 110  out: 21  ok  ", &id[..12]);
    let took = line.strip_prefix(&head).unwrap_or_else(|| panic!("{line}"));
    assert!(
        took.strip_suffix('s')
            .is_some_and(|t| t.parse::<f64>().is_ok()),
        "{line}"
    );
    assert_no_key_written(&home);
}

#[test]
fn openai_context_continues_images_reach_the_model_and_forget_session_is_refused() {
    let home = Home::new();
    let fake = Fake::start();
    fake.script([
        texts(openai::text("", &["first ", "answer"], "stop", (10, 2))),
        texts(openai::text("because", &["second"], "stop", (20, 1))),
    ]);
    let run = queue_worker(&home, &fake, "openai");
    // A 1x1 PNG.
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";
    let first = json!({"message": {"messageId": "m1", "role": "ROLE_USER", "contextId": "ctx-1",
        "parts": [{"text": "look"}, {"raw": png, "mediaType": "image/png"}]}});
    let task = run.rpc("SendMessage", first)["result"]["task"].clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    assert_eq!(answer_of(&task), "first answer");
    let second = json!({"message": {"messageId": "m2", "role": "ROLE_USER", "contextId": "ctx-1",
        "parts": [{"text": "and then?"}]}});
    let task = run.rpc("SendMessage", second)["result"]["task"].clone();
    assert_eq!(answer_of(&task), "second", "{task}");

    let seen = fake.seen();
    assert_eq!(seen[0].path, "/v1/chat/completions");
    assert_eq!(
        seen[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let body = &seen[0].body;
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    // A server other than OpenAI's own reads the cap as max_tokens (Ollama and LM Studio read
    // nothing else); api.openai.com gets max_completion_tokens (the capsule's unit tests).
    assert_eq!(
        (
            body["max_tokens"].as_u64(),
            body.get("max_completion_tokens")
        ),
        (Some(256), None)
    );
    assert_eq!(body["tools"][0]["type"], "function");
    let names: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, TOOLS);
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(
        body["messages"][1],
        json!({"role": "user", "content": [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{png}")}}]})
    );
    // The second task of the context carries the first exchange.
    let msgs = &seen[1].body["messages"];
    assert_eq!(
        msgs[2],
        json!({"role": "assistant", "content": "first answer"})
    );
    assert_eq!(msgs[3], json!({"role": "user", "content": "and then?"}));
    // The reasoning came as a thinking frame; the usage as the inference record.
    let frames = watched_frames(run.port, task["id"].as_str().unwrap());
    let kinds: Vec<(&str, &str)> = frames
        .iter()
        .map(|f| (f["frame"].as_str().unwrap(), f["text"].as_str().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("status", "inference turn 1"),
            ("thinking", "because"),
            ("text", "second")
        ]
    );
    let trace = home.trace(&run.session);
    let inf = events(&trace, "inference");
    assert_eq!(
        (inf[1]["provider"].as_str(), inf[1]["input_tokens"].as_u64()),
        (Some("openai"), Some(20))
    );
    // "The task's task_start record lists each image under attachments."
    let starts = events(&trace, "task_start");
    assert_eq!(starts[0]["attachments"], json!(["image/png, 70 bytes"]));
    assert_eq!(starts[1]["attachments"], json!([]));
    // An http capsule's stream extension names the frames agent-card.md lists for it.
    let card = http(run.port, "GET", "/.well-known/agent-card.json", &[], b"").json();
    let stream = card["capabilities"]["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["uri"] == STREAM_URI)
        .unwrap_or_else(|| panic!("no stream extension: {card}"));
    assert_eq!(
        stream["params"]["frames"],
        json!([
            "text",
            "thinking",
            "tool-call-started",
            "tool-call-progress",
            "artifact",
            "gap",
            "lagged",
            "connection-ack",
            "capsule-closed"
        ])
    );

    // forgetSession reaches only a process capsule.
    let forget = json!({"message": {"messageId": "m3", "role": "ROLE_USER", "contextId": "ctx-1",
        "parts": [{"text": "again"}],
        "metadata": {"https://docs.murmur.nexus/reference/agent-card/#murmur-door-v1": {"forgetSession": true}}}});
    let before = run.total_tasks();
    let resp = run.call("SendMessage", forget);
    assert_rpc_error(
        &resp,
        json!(1),
        &invalid_params("forgetSession asks this capsule to forget the harness session this context names, and only a capsule on inference.transport: process has one"),
        "forgetSession on an http capsule",
    );
    assert_eq!(
        run.total_tasks(),
        before,
        "a refused message starts no task"
    );
    drop(run);
    assert_no_key_written(&home);
}

#[test]
fn an_http_lead_calls_a_process_worker_and_gets_its_answer_back() {
    let home = Home::new();
    let fake = Fake::start();
    fake.script([
        texts(openai::tool(
            "call_9",
            "call-member",
            &[
                "{\"member\": ",
                "\"worker\", \"te",
                "xt\": \"count to four\"}",
            ],
            (30, 8),
        )),
        texts(openai::text("", &["the worker said so"], "stop", (60, 5))),
    ]);
    home.write(
        "f/lead/murmur.yaml",
        &capsule("openai", &base(&fake, "openai"), "", ONE_TASK),
    );
    let worker = Fixture {
        name: "worker",
        ..Fixture::default()
    }
    .yaml()
        + "exports:\n  peer_tasks:\n    accept: true\n";
    home.write("f/worker/murmur.yaml", &worker);
    let formation = home.write("f/formation.yaml",
        "formation:\n  name: local\n  version: \"0.1.0\"\n  entry: lead\n  members:\n    lead:\n      manifest: lead/murmur.yaml\n      calls: [worker]\n    worker:\n      manifest: worker/murmur.yaml\n");
    let (code, out, err) = run_task(&home, &formation, "ask the worker");
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.ends_with("the worker said so\n"), "{out}");
    let seen = fake.seen();
    assert_eq!(seen.len(), 2);
    let msgs = seen[1].body["messages"].as_array().unwrap();
    assert_eq!(msgs[2]["tool_calls"][0]["function"]["name"], "call-member");
    assert_eq!(
        serde_json::from_str::<Value>(
            msgs[2]["tool_calls"][0]["function"]["arguments"]
                .as_str()
                .unwrap()
        )
        .unwrap(),
        json!({"member": "worker", "text": "count to four"})
    );
    assert_eq!(
        (msgs[3]["role"].as_str(), msgs[3]["tool_call_id"].as_str()),
        (Some("tool"), Some("call_9"))
    );
    let called: Value = serde_json::from_str(msgs[3]["content"].as_str().unwrap()).unwrap();
    assert_eq!(
        (
            called["member"].as_str(),
            called["status"].as_str(),
            called["answer"].as_str()
        ),
        (Some("worker"), Some("completed"), Some("Acknowledged."))
    );
    let trace = home.trace(&session_of(&out));
    assert_eq!(events(&trace, "member_call")[0]["status"], "completed");
    assert_no_key_written(&home);
}

/// The guide's hand-wired path with an http orchestrator: its model's send-message reaches the
/// worker its allow list names (a2a_send on the orchestrator's side, a2a_task_received on the
/// worker's), and a URL the list does not name is refused before anything is sent.
#[test]
fn an_http_orchestrator_sends_the_worker_a_message_through_its_allow_list() {
    let home = Home::new();
    let worker = home.write(
        "worker/murmur.yaml",
        &(Fixture {
            name: "my-worker",
            ..Fixture::default()
        }
        .yaml()
            + "exports:\n  peer_tasks:\n    accept: true\n"),
    );
    let worker = Launch::start(&home, &worker, &[]);
    let url = format!("http://localhost:{}", worker.port);
    let fake = Fake::start();
    let send = |id: &str, to: &str| {
        let args = json!({"url": to, "text": "Acknowledge message from orchestrator capsule."});
        texts(openai::tool(
            id,
            "send-message",
            &[&args.to_string()],
            (9, 9),
        ))
    };
    fake.script([
        send("call_a", "http://localhost:1"),
        send("call_b", &url),
        texts(openai::text("", &["sent"], "stop", (9, 1))),
    ]);
    let orchestrator = capsule("openai", &base(&fake, "openai"), "", ONE_TASK)
        + &format!(
            "capabilities:\n  network:\n    allow:\n      - localhost:{}\n",
            worker.port
        );
    let orchestrator = home.write("orchestrator/murmur.yaml", &orchestrator);
    let (code, out, err) = run_task(&home, &orchestrator, "tell the worker");
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.ends_with("sent\n"), "{out}");

    let seen = fake.seen();
    let refused = &seen[1].body["messages"][3];
    assert_eq!(refused["tool_call_id"], "call_a", "{refused}");
    let refused: Value = serde_json::from_str(refused["content"].as_str().unwrap()).unwrap();
    assert_eq!(refused["error"], "not_allowed", "{refused}");
    let sent = &seen[2].body["messages"][5];
    assert_eq!(sent["tool_call_id"], "call_b", "{sent}");
    let sent: Value = serde_json::from_str(sent["content"].as_str().unwrap()).unwrap();
    assert_eq!(
        sent["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{sent}"
    );
    assert_eq!(sent["task"]["artifacts"][0]["name"], "response", "{sent}");
    let peer_task = sent["task"]["id"].as_str().unwrap();

    let trace = home.trace(&session_of(&out));
    let sends = events(&trace, "a2a_send");
    assert_eq!(sends.len(), 1, "only the allowed send went out: {trace:?}");
    assert_eq!(keys_of(sends[0]), A2A_SEND_KEYS);
    assert_eq!(
        (sends[0]["peer_url"].as_str(), sends[0]["task_id"].as_str()),
        (
            Some(format!("localhost:{}", worker.port).as_str()),
            Some(peer_task)
        )
    );
    let received = events(&home.trace(&worker.session), "a2a_task_received")
        .iter()
        .any(|e| e["task_id"] == peer_task);
    assert!(received, "the worker never recorded the task");
    drop(worker);
    assert_no_key_written(&home);
}

/// Each cause of the guide's "Final status.state" table, and the cut reply that still completes.
#[test]
fn every_failure_cause_ends_the_task_naming_it() {
    let home = Home::new();
    let fake = Fake::start();
    let at = base(&fake, "anthropic");
    let cut = |text: &[&str]| texts(anthropic::text("", text, "max_tokens", (5, 256)));
    let refused_tool = || {
        texts(anthropic::tool(
            "t",
            "call-member",
            &["{\"member\": \"x\", \"text\": \"y\"}"],
            (5, 5),
        ))
    };
    type Row<'a> = (&'a str, &'a str, Vec<Reply>, Result<&'a str, &'a str>);
    let rows: Vec<Row> = vec![
        ("every turn used", "  max_turns: 2\n", vec![refused_tool(), refused_tool()],
            Err("the task used every turn inference.max_turns allows (2)")),
        ("two cut turns with nothing", "", vec![cut(&[]), cut(&[])],
            Err("two turns in a row stopped at inference.max_tokens (256) with no text and no tool call")),
        ("spend ceiling", "  max_total_tokens: 200\n", vec![refused_tool(), cut(&["a"])],
            Err("a spend ceiling stopped it: the task used 271 tokens, past inference.max_total_tokens (200)")),
        ("request-input timeout", "", vec![texts(anthropic::tool("t", "request-input", &["{\"question\": \"?\", \"timeout_secs\": 1}"], (5, 5)))],
            Err("a request-input wait timed out: no reply came within 1 s")),
        ("cut on the last turn completes", "  max_turns: 2\n", vec![refused_tool(), cut(&["partial"])], Ok("partial")),
        ("a cut reply with turns left is continued", "", vec![cut(&["Hello, "]), texts(anthropic::text("", &["world"], "end_turn", (5, 5)))],
            Ok("Hello, world")),
        ("a tool asked for on the last turn is not run", "  max_turns: 1\n",
            vec![texts(anthropic::tool("t", "request-input", &["{\"question\": \"?\", \"timeout_secs\": 1}"], (5, 5)))],
            Err("the task used every turn inference.max_turns allows (1)")),
        ("an empty cut closing a continued answer on the last turn completes", "  max_turns: 2\n",
            vec![cut(&["Hello"]), cut(&[])], Ok("Hello")),
    ];
    for (row, inference, script, expected) in rows {
        fake.script(script);
        let before = fake.seen().len();
        let manifest = home.write(
            "c/murmur.yaml",
            &capsule("anthropic", &at, inference, ONE_TASK),
        );
        let (code, out, err) = run_task(&home, &manifest, "go");
        let trace = home.trace(&session_of(&out));
        match expected {
            Ok(answer) => {
                assert_eq!(code, 0, "{row}: {err}");
                assert!(out.ends_with(&format!("{answer}\n")), "{row}: {out}");
            }
            Err(cause) => {
                assert_eq!(code, 1, "{row}: {out}");
                assert!(
                    err.contains(&format!("task failed: {cause}")),
                    "{row}: {err}"
                );
                let line = format!("task failed: {cause}");
                assert!(err.lines().any(|l| l == line), "{row}: {err}");
                assert_eq!(events(&trace, "task_failed")[0]["cause"], cause, "{row}");
                assert_eq!(events(&trace, "task_end")[0]["status"], "failed", "{row}");
            }
        }
        assert_eq!(fake.left(), 0, "{row}: every scripted reply was asked for");
        if row == "a cut reply with turns left is continued" {
            let msgs = &fake.seen()[before + 1].body["messages"];
            assert_eq!(
                msgs[1],
                json!({"role": "assistant", "content": [{"type": "text", "text": "Hello, "}]})
            );
            assert_eq!(
                msgs[2]["content"][0]["text"],
                "Your reply was cut off at the token limit. Continue exactly where it stopped."
            );
        }
        if row == "a tool asked for on the last turn is not run" {
            // request-input never ran: no tool_call record, no wait for a person.
            assert!(events(&trace, "tool_call").is_empty(), "{row}: {trace:?}");
        }
        if row == "every turn used" {
            // The refused tool's result went back to the model as an error.
            let result = &fake.seen()[before + 1].body["messages"][2]["content"][0];
            assert_eq!(result["is_error"], true, "{result}");
            assert!(
                result["content"].as_str().unwrap().contains("not_a_member"),
                "{result}"
            );
        }
    }
    assert_no_key_written(&home);
}

/// A cut answer whose continuation closes with no text still completes with the pieces, and
/// the context's next task sends back a history Anthropic accepts: no empty text block.
#[test]
fn a_continued_answer_closing_empty_keeps_a_history_without_empty_blocks() {
    let home = Home::new();
    let fake = Fake::start();
    fake.script([
        texts(anthropic::text(
            "",
            &["Hello, world"],
            "max_tokens",
            (5, 256),
        )),
        texts(anthropic::text("", &[], "end_turn", (5, 0))),
        texts(anthropic::text("", &["again"], "end_turn", (5, 1))),
    ]);
    let run = queue_worker(&home, &fake, "anthropic");
    let send = |id: &str, text: &str| {
        let m = json!({"message": {"messageId": id, "role": "ROLE_USER", "contextId": "ctx-c",
            "parts": [{"text": text}]}});
        run.rpc("SendMessage", m)["result"]["task"].clone()
    };
    let first = send("m1", "greet");
    assert_eq!(first["status"]["state"], "TASK_STATE_COMPLETED", "{first}");
    assert_eq!(answer_of(&first), "Hello, world");
    let second = send("m2", "once more");
    assert_eq!(answer_of(&second), "again", "{second}");
    let seen = fake.seen();
    let msgs = seen[2].body["messages"].as_array().unwrap();
    for m in msgs {
        for block in m["content"].as_array().unwrap() {
            assert!(block["type"] != "text" || block["text"] != "", "{m}");
        }
    }
    assert_eq!(
        msgs.last().unwrap(),
        &json!({"role": "user", "content": [{"type": "text", "text": "once more"}]})
    );
    drop(run);
    assert_no_key_written(&home);
}

/// Provider errors become task failures naming the provider and the status; 429 and 5xx are
/// retried (429 after its retry-after) within the bound.
#[test]
fn provider_errors_are_clear_failures_and_rate_limits_are_retried() {
    let home = Home::new();
    let fake = Fake::start();
    let status = |code: u16, headers: Vec<(&str, &str)>, message: &str| {
        Reply::Status(
            code,
            headers
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            json!({"error": {"type": "error", "message": message}}).to_string(),
        )
    };
    let ok = || texts(openai::text("", &["fine"], "stop", (1, 1)));
    let echoed = format!("Incorrect API key provided: {KEY}");
    let rows: Vec<(&str, Vec<Reply>, Result<&str, String>)> = vec![
        ("401", vec![status(401, vec![], &echoed)],
            Err("an inference call failed: OpenAI refused the API key (HTTP 401): Incorrect API key provided: [redacted]; check gateway.api_key".into())),
        ("403", vec![status(403, vec![], "no access")],
            Err("an inference call failed: OpenAI denied access (HTTP 403): no access; the key may lack access to this model".into())),
        ("404", vec![status(404, vec![], "The model `test-model` does not exist")],
            Err("an inference call failed: OpenAI found no such model or endpoint (HTTP 404): The model `test-model` does not exist; check inference.model and gateway.endpoint".into())),
        ("429 then success", vec![status(429, vec![("retry-after", "1")], "slow down"), ok()], Ok("fine")),
        ("5xx every time", vec![status(503, vec![], "overloaded"), status(500, vec![], "oops"), status(502, vec![], "bad"), status(503, vec![], "overloaded")],
            Err("an inference call failed: OpenAI failed with HTTP 503 (after 4 attempts): overloaded".into())),
        ("400", vec![status(400, vec![], "max_tokens is too large")],
            Err("an inference call failed: OpenAI rejected the request (HTTP 400): max_tokens is too large".into())),
        ("malformed body", vec![Reply::Raw("data: {not json\n\n".into())],
            Err("an inference call failed: OpenAI sent a reply that is not its wire format: a chunk is not JSON (key must be a string at line 1 column 2)".into())),
        ("truncated stream", vec![Reply::Stream(openai::text("", &["cut"], "stop", (1, 1))[..2].to_vec())],
            Err("an inference call failed: OpenAI's reply stream ended before the message did".into())),
        ("a stream cut after its finish, before usage and [DONE]", vec![Reply::Stream({
                let mut whole = openai::text("", &["cut"], "stop", (1, 1));
                whole.truncate(whole.len() - 2);
                whole
            })],
            Err("an inference call failed: OpenAI's reply stream ended before the message did".into())),
    ];
    let manifest = home.write(
        "c/murmur.yaml",
        &capsule("openai", &base(&fake, "openai"), "", ONE_TASK),
    );
    for (row, script, expected) in rows {
        let n = script.len();
        let before = fake.seen().len();
        fake.script(script);
        let began = std::time::Instant::now();
        let (code, out, err) = run_task(&home, &manifest, "go");
        if row == "429 then success" {
            // The provider's retry-after (1 s) was waited out: a lower bound, never a race.
            assert!(began.elapsed() >= Duration::from_secs(1), "{row}");
        }
        match expected {
            Ok(answer) => {
                assert_eq!(code, 0, "{row}: {err}");
                assert!(out.ends_with(&format!("{answer}\n")), "{row}: {out}");
            }
            Err(message) => {
                assert_eq!(code, 1, "{row}: {out}");
                assert!(
                    err.contains(&format!("task failed: {message}")),
                    "{row}: {err}"
                );
                let trace = home.trace(&session_of(&out));
                assert_eq!(
                    events(&trace, "task_failed")[0]["cause"],
                    message.as_str(),
                    "{row}"
                );
            }
        }
        assert_eq!(
            fake.seen().len() - before,
            n,
            "{row}: one request a scripted reply"
        );
    }
    // Anthropic's in-stream error event.
    let manifest = home.write(
        "a/murmur.yaml",
        &capsule("anthropic", &base(&fake, "anthropic"), "", ONE_TASK),
    );
    fake.script([Reply::Stream(anthropic::error(
        "invalid_request_error",
        "prompt is too long",
    ))]);
    let (code, _, err) = run_task(&home, &manifest, "go");
    assert_eq!(code, 1);
    assert!(
        err.lines().any(|l| l == "task failed: an inference call failed: Anthropic reported an error mid-stream: invalid_request_error: prompt is too long"),
        "{err}"
    );

    // An overload before any of the reply went out is tried again.
    let before = fake.seen().len();
    fake.script([
        Reply::Stream(anthropic::error("overloaded_error", "Overloaded")),
        texts(anthropic::text("", &["second try"], "end_turn", (5, 2))),
    ]);
    let (code, out, err) = run_task(&home, &manifest, "go");
    assert_eq!(code, 0, "{err}");
    assert!(out.ends_with("second try\n"), "{out}");
    assert_eq!(fake.seen().len() - before, 2, "retried once");

    // After text went out as frames, another attempt would stream it twice: the call fails,
    // naming what the provider said, not an HTTP status it never sent.
    let before = fake.seen().len();
    let mut pieces = anthropic::text("", &["half an "], "end_turn", (5, 2));
    pieces.truncate(4);
    pieces.extend(
        anthropic::error("overloaded_error", "Overloaded")
            .into_iter()
            .skip(1),
    );
    fake.script([
        Reply::Stream(pieces),
        texts(anthropic::text(
            "",
            &["never asked for"],
            "end_turn",
            (5, 2),
        )),
    ]);
    let (code, _, err) = run_task(&home, &manifest, "go");
    assert_eq!(code, 1);
    assert!(
        err.lines().any(|l| l == "task failed: an inference call failed: Anthropic reported an error mid-stream: overloaded_error: Overloaded"),
        "{err}"
    );
    assert_eq!(fake.seen().len() - before, 1, "not retried");
    assert_eq!(fake.left(), 1);
    assert_no_key_written(&home);
}

/// A server that speaks plain HTTP whatever it is sent: it answers 400 to the first bytes of
/// each connection (a TLS ClientHello, here) and closes it.
fn plain_http_server() -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut buf = [0u8; 16 << 10];
            let _ = conn.read(&mut buf);
            let _ = conn.write_all(
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    port
}

#[test]
fn unreachable_and_tls_failures_name_the_provider() {
    let home = Home::new();
    let plain = plain_http_server();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_port = closed.local_addr().unwrap().port();
    drop(closed);
    let rows = [
        ("refused", format!("http://127.0.0.1:{closed_port}/v1"),
            format!("task failed: an inference call failed: cannot connect to OpenAI: 127.0.0.1:{closed_port}: Connection refused (os error 111)")),
        ("tls to a plain server", format!("https://127.0.0.1:{plain}/v1"),
            format!("task failed: an inference call failed: the TLS handshake with OpenAI failed: 127.0.0.1:{plain}: ")),
        // (then what to check: that the port speaks TLS)
    ];
    for (row, endpoint, says) in rows {
        let manifest = home.write("c/murmur.yaml", &capsule("openai", &endpoint, "", ONE_TASK));
        let (code, _, err) = run_task(&home, &manifest, "go");
        assert_eq!(code, 1, "{row}");
        assert_eq!(
            err.matches("handshake").count(),
            err.contains("TLS") as usize,
            "{row}: {err}"
        );
        // The TLS row's sentence ends in the TLS library's own words.
        assert!(
            err.lines()
                .any(|l| l == says || (says.ends_with(": ") && l.starts_with(&says))),
            "{row}: {err}"
        );
    }
    assert_no_key_written(&home);
}

/// The tools read their arguments as the control surface reads a helper's request: a
/// `context_id` that is not a string is refused in the same words, not dropped (which would
/// have started a new conversation with the peer).
#[test]
fn a_tools_bad_argument_is_refused_as_the_control_surface_refuses_it() {
    let home = Home::new();
    let fake = Fake::start();
    fake.script([
        texts(anthropic::tool(
            "t1",
            "send-message",
            &["{\"url\": \"http://localhost:9\", \"text\": \"hi\", \"context_id\": 7}"],
            (5, 5),
        )),
        texts(anthropic::text("", &["gave up"], "end_turn", (5, 2))),
    ]);
    let manifest = home.write(
        "t/murmur.yaml",
        &capsule("anthropic", &base(&fake, "anthropic"), "", ONE_TASK),
    );
    let (code, out, err) = run_task(&home, &manifest, "go");
    assert_eq!(code, 0, "{err}");
    assert!(out.ends_with("gave up\n"), "{out}");
    let result = &fake.seen()[1].body["messages"][2]["content"][0];
    assert_eq!(
        result,
        &json!({"type": "tool_result", "tool_use_id": "t1",
            "content": "context_id must be a non-empty string", "is_error": true})
    );
}

/// docs/inference.md names `::1` among the loopback addresses plain http may go to: the
/// endpoint is read with its brackets, dialled, and named in the Host header as URLs write it.
#[test]
fn a_local_server_on_ipv6_loopback_is_reached() {
    let home = Home::new();
    let fake = Fake::start_at("[::1]:0");
    fake.script([texts(openai::text("", &["over v6"], "stop", (3, 2)))]);
    let endpoint = format!("http://[::1]:{}/v1", fake.port);
    let manifest = home.write(
        "v6/murmur.yaml",
        &capsule("openai", &endpoint, "", ONE_TASK),
    );
    let (code, out, err) = run_task(&home, &manifest, "go");
    assert_eq!(code, 0, "{err}");
    assert!(out.lines().any(|l| l == "over v6"), "{out}");
    let seen = fake.seen();
    assert_eq!(seen[0].path, "/v1/chat/completions");
    let host = format!("[::1]:{}", fake.port);
    assert_eq!(seen[0].header("host"), Some(host.as_str()));
}

#[test]
fn cancel_drops_the_call_in_flight_and_the_task_ends_canceled() {
    let home = Home::new();
    let fake = Fake::start();
    let mut pieces = anthropic::text("", &["never"], "end_turn", (1, 1));
    pieces.truncate(2);
    fake.script([Reply::Hold(pieces)]);
    let run = queue_worker(&home, &fake, "anthropic");
    let id = run.start_task("think forever");
    assert!(
        wait_until(LONG, || fake.seen().len() == 1),
        "the call never reached the provider"
    );
    let resp = run.rpc("CancelTask", json!({"id": id}));
    assert!(resp["result"].is_object(), "{resp}");
    assert!(
        wait_until(Duration::from_secs(10), || fake.closed() == 1),
        "the provider's connection stayed open"
    );
    let task = run.wait_task(&id, LONG, |s| s == "TASK_STATE_CANCELED");
    assert_eq!(task["status"]["state"], "TASK_STATE_CANCELED");

    let trace = home.trace(&run.session);
    let canceled = events(&trace, "task_canceled");
    assert_eq!(canceled[0]["interrupted"], "inference", "{trace:?}");
    assert_eq!(events(&trace, "task_end")[0]["status"], "canceled");

    // Canceled while a tool waits (request-input): the record names the tool, not a call.
    fake.script([texts(anthropic::tool(
        "toolu_w",
        "request-input",
        &["{\"question\": \"Which?\"}"],
        (3, 3),
    ))]);
    let id = run.start_task("ask me");
    run.wait_task(&id, LONG, |s| s == "TASK_STATE_INPUT_REQUIRED");
    let resp = run.rpc("CancelTask", json!({"id": id}));
    assert_eq!(
        resp["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{resp}"
    );
    assert!(
        wait_until(LONG, || events(&home.trace(&run.session), "task_end").len()
            == 2),
        "the second task never ended"
    );
    let trace = home.trace(&run.session);
    let canceled = events(&trace, "task_canceled");
    assert_eq!(
        (
            canceled[1]["task_id"].as_str(),
            canceled[1]["interrupted"].as_str()
        ),
        (Some(id.as_str()), Some("tool")),
        "{trace:?}"
    );
    // A provider that has not even answered the request: the cancel closes that connection too.
    fake.script([Reply::Silent]);
    let silent = run.start_task("no answer yet");
    assert!(
        wait_until(LONG, || fake.seen().len() == 3),
        "the second call never reached the provider"
    );
    let resp = run.rpc("CancelTask", json!({"id": silent}));
    assert!(resp["result"].is_object(), "{resp}");
    assert!(
        wait_until(Duration::from_secs(10), || fake.closed() == 2),
        "the connection of a call not yet answered stayed open"
    );
    run.wait_task(&silent, LONG, |s| s == "TASK_STATE_CANCELED");
    drop(run);
    assert_no_key_written(&home);
}

#[test]
fn install_resolves_http_drivers_and_says_what_is_missing() {
    let home = Home::new();
    let fake = Fake::start();
    let manifest = home.write(
        "c/murmur.yaml",
        &capsule("openai", &base(&fake, "openai"), "", ONE_TASK),
    );
    let mut cmd = home.mur();
    let out = cmd
        .env(KEY_VAR, KEY)
        .args(["install", "--manifest", manifest.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(&format!("ok       murmur/driver-openai 0.19.0: built-in http driver, endpoint 127.0.0.1:{} answers", fake.port)), "{stdout}");

    // An endpoint nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let manifest = home.write(
        "d/murmur.yaml",
        &capsule(
            "openai",
            &format!("http://127.0.0.1:{port}/v1"),
            "",
            ONE_TASK,
        ),
    );
    let out = home
        .mur()
        .env(KEY_VAR, KEY)
        .args(["install", "--manifest", manifest.to_str().unwrap()])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout.contains(&format!(
            "missing  murmur/driver-openai 0.19.0: nothing answers at 127.0.0.1:{port}"
        )),
        "{stdout}"
    );
    assert!(
        stderr.starts_with("error[E-RUN-030]: 1 of 1 artifacts of http-worker are missing"),
        "{stderr}"
    );

    // A host that resolves nowhere (.invalid never does): what failed, and what to check.
    let manifest = home.write(
        "e/murmur.yaml",
        &capsule("openai", "https://api.example.invalid/v1", "", ONE_TASK),
    );
    let out = home
        .mur()
        .env(KEY_VAR, KEY)
        .args(["install", "--manifest", manifest.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let line = stdout
        .lines()
        .find(|l| {
            l.starts_with(
                "missing  murmur/driver-openai 0.19.0: cannot resolve api.example.invalid (",
            )
        })
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        line.ends_with("); check gateway.endpoint, or this machine's DNS"),
        "{line}"
    );

    // The key's variable unset: the manifest names it.
    let out = home
        .mur()
        .env_remove(KEY_VAR)
        .args(["install", "--manifest", manifest.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0));
    let (path, dir) = (manifest.display(), manifest.parent().unwrap().display());
    assert_eq!(
        stderr,
        format!("error[E-MAN-006]: {path}: artifacts[0].gateway.api_key uses ${{{KEY_VAR}}}, which is not set\n  hint: export {KEY_VAR}=… in the environment, or put {KEY_VAR}=… in {dir}/.env beside the manifest\n")
    );
}

/// The guide's Step 1 worker manifest, as its text reads, with one provider's driver in it.
fn guide_worker(driver: &str, version: &str, endpoint: &str, var: &str, model: &str) -> String {
    format!(
        "name: my-worker\nversion: \"0.1.0\"\n\nartifacts:\n  - name: murmur/driver-{driver}\n    version: \"{version}\"\n    runtime: driver\n    gateway:\n      endpoint: {endpoint}\n      api_key: ${{{var}}}\n\nnetwork:\n  internal_port: 52222\n\ninference:\n  transport: http\n  model: {model}\n  driver:\n    artifact: murmur/driver-{driver}\n\nlifecycle:\n  task_acceptance: queue\n  after_task: sleep\n  queue_depth: 2\n\nexports:\n  peer_tasks:\n    accept: true\n"
    )
}

/// `manifests/worker-*.yaml` are the guide's worker manifests word for word, under a comment.
#[test]
fn the_shipped_workers_are_the_guides_manifests() {
    let rows = [
        (
            "anthropic",
            "0.19.0",
            "https://api.anthropic.com",
            "ANTHROPIC_API_KEY",
            "claude-sonnet-5",
        ),
        (
            "openai",
            "0.19.0",
            "https://api.openai.com/v1",
            "OPENAI_API_KEY",
            "o3-mini-high",
        ),
        (
            "deepseek",
            "0.17.0",
            "https://api.deepseek.com",
            "DEEPSEEK_API_KEY",
            "deepseek-r1",
        ),
    ];
    for (driver, version, endpoint, var, model) in rows {
        let shipped =
            std::fs::read_to_string(repo_root().join(format!("manifests/worker-{driver}.yaml")))
                .unwrap();
        let body: String = shipped
            .lines()
            .skip_while(|l| l.starts_with('#'))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(
            body,
            guide_worker(driver, version, endpoint, var, model),
            "manifests/worker-{driver}.yaml"
        );
    }
}

/// The guide's worker as `manifests/` ships it, on each provider, answers a task through its
/// provider's wire format (its endpoint pointed at the fake, its pinned port let go).
#[test]
fn the_shipped_workers_run_on_each_provider() {
    let home = Home::new();
    let rows = [
        (
            "anthropic",
            "ANTHROPIC_API_KEY",
            "/v1/messages",
            "claude-sonnet-5",
        ),
        (
            "openai",
            "OPENAI_API_KEY",
            "/v1/chat/completions",
            "o3-mini-high",
        ),
        (
            "deepseek",
            "DEEPSEEK_API_KEY",
            "/chat/completions",
            "deepseek-r1",
        ),
    ];
    for (provider, var, path, model) in rows {
        let fake = Fake::start();
        fake.script([texts(match provider {
            "anthropic" => anthropic::text("", &["hello from ", provider], "end_turn", (3, 3)),
            _ => openai::text("reasoning", &["hello from ", provider], "stop", (3, 3)),
        })]);
        let shipped =
            std::fs::read_to_string(repo_root().join(format!("manifests/worker-{provider}.yaml")))
                .unwrap();
        let endpoint = shipped
            .lines()
            .find_map(|l| l.trim().strip_prefix("endpoint: "))
            .unwrap();
        let local = endpoint.replacen(
            endpoint
                .split('/')
                .take(3)
                .collect::<Vec<_>>()
                .join("/")
                .as_str(),
            &format!("http://127.0.0.1:{}", fake.port),
            1,
        );
        let yaml = shipped
            .replace(endpoint, &local)
            .replace("  internal_port: 52222\n", "");
        let manifest = home.write(&format!("{provider}/murmur.yaml"), &yaml);
        let run = Launch::start_env(&home, &manifest, &[], &[(var, KEY.into())]);
        let task = run.send("hi", false)["result"]["task"].clone();
        assert_eq!(
            answer_of(&task),
            format!("hello from {provider}"),
            "{provider}: {task}"
        );
        let seen = fake.seen();
        assert_eq!(
            (seen[0].path.as_str(), seen[0].body["model"].as_str()),
            (path, Some(model)),
            "{provider}"
        );
        drop(run);
    }
    assert_no_key_written(&home);
}

/// `manifests/local-lead/`: an http lead on a local OpenAI-compatible endpoint calls the two
/// process workers (the shipped files, the endpoint's port pointed at the fake).
#[test]
fn the_local_lead_formation_calls_its_process_workers() {
    let home = Home::new();
    let fake = Fake::start();
    fake.script([
        texts(openai::tool(
            "c1",
            "call-member",
            &["{\"member\": \"left\", \"text\": \"count: a b c\"}"],
            (10, 5),
        )),
        texts(openai::tool(
            "c2",
            "call-member",
            &["{\"member\": \"right\", \"text\": \"count: d e\"}"],
            (20, 5),
        )),
        texts(openai::text("", &["both answered"], "stop", (30, 5))),
    ]);
    let root = repo_root().join("manifests");
    let copy = |from: &str, to: &str, f: &dyn Fn(String) -> String| {
        home.write(to, &f(std::fs::read_to_string(root.join(from)).unwrap()))
    };
    let port = fake.port;
    copy("local-lead/lead.yaml", "m/local-lead/lead.yaml", &|s| {
        s.replace("127.0.0.1:8080", &format!("127.0.0.1:{port}"))
    });
    copy("split/worker.yaml", "m/split/worker.yaml", &|s| {
        s.replace(
            "../../scripts/",
            &format!("{}/scripts/", repo_root().display()),
        )
    });
    let formation = copy(
        "local-lead/formation.yaml",
        "m/local-lead/formation.yaml",
        &|s| s,
    );
    let (code, out, err) = run_task(&home, &formation, "count these words");
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.ends_with("both answered\n"), "{out}");
    let seen = fake.seen();
    assert_eq!(seen.len(), 3);
    assert_eq!(
        seen[0].header("authorization"),
        None,
        "a local server takes no key"
    );
    for (i, member) in [(1, "left"), (2, "right")] {
        let msgs = seen[i].body["messages"].as_array().unwrap();
        let result: Value =
            serde_json::from_str(msgs.last().unwrap()["content"].as_str().unwrap()).unwrap();
        assert_eq!(
            (result["member"].as_str(), result["status"].as_str()),
            (Some(member), Some("completed")),
            "{result}"
        );
    }
}

/// end-without-answer from the model ends the task FAILED with its reason and noAnswer; the
/// loop makes no further call.
#[test]
fn end_without_answer_ends_the_task_with_the_models_reason() {
    let home = Home::new();
    let fake = Fake::start();
    fake.script([texts(anthropic::tool(
        "t1",
        "end-without-answer",
        &["{\"reason\": \"nothing to ", "do here\"}"],
        (5, 5),
    ))]);
    let run = queue_worker(&home, &fake, "anthropic");
    let task = run.send("anything?", false)["result"]["task"].clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{task}");
    assert_eq!(
        task["status"]["message"]["parts"][0]["text"],
        "nothing to do here"
    );
    assert_eq!(task["metadata"]["murmur"]["noAnswer"], true, "{task}");
    assert_eq!(fake.seen().len(), 1, "no call after end-without-answer");
    let trace = home.trace(&run.session);
    assert_eq!(events(&trace, "tool_call")[0]["tool"], "end-without-answer");
    assert_eq!(
        events(&trace, "task_failed")[0]["cause"],
        "nothing to do here"
    );
    drop(run);
    assert_no_key_written(&home);
}
