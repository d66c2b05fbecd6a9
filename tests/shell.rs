//! The http agent's shell (docs/shell.md; spec agent-card.md "runningCommands", "Residue items",
//! "murmur.StopSession"; a2a-messaging-guide.md "What the cancel names") through the real `mur`,
//! with a model played by a fake Anthropic provider that speaks the real Messages stream: a
//! task whose text is a JSON object makes the model call `bash` with it as the arguments; a
//! tool result makes it answer with that result, word for word; any other text it answers
//! `seen: TEXT`. So each answer the door gives is exactly what the tool told the model.
//!
//! Covered: the card's capsule extension, allowed and refused commands (no process started),
//! output reaching the model and the task's streams, a command moved to the background, its
//! `runningCommands` and the result task that follows it, CancelTask and murmur.StopSession
//! residue word for word, `mur cancel` / `mur stop` printing `running:`, the session's end
//! ending every command with all it started (also after `kill -9`, and under
//! `after_task: exit`), `mur trace show`'s Shell section, and a hostile command trying to climb
//! the jail's walls.

#[path = "support/fake_provider.rs"]
mod fake_provider;
mod support;

use std::path::Path;
use std::time::Duration;

use fake_provider::{anthropic, Fake, Reply, Seen};
use serde_json::{json, Value};
use support::*;

const LONG: Duration = Duration::from_secs(60);
const STREAM_URI: &str = "https://docs.murmur.nexus/reference/streaming-protocol/#murmur-stream-v1";

/// What the model does with the last message it was sent (see the file's doc).
fn brain(seen: &Seen) -> Reply {
    let last = seen.body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or(Value::Null);
    let blocks = last["content"].as_array().cloned().unwrap_or_default();
    if let Some(result) = blocks.iter().find(|b| b["type"] == "tool_result") {
        let content = result["content"].as_str().unwrap_or_default();
        return Reply::Stream(anthropic::text("", &[content], "end_turn", (10, 10)));
    }
    let text = blocks
        .iter()
        .find_map(|b| b["text"].as_str())
        .unwrap_or_default();
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(_)) => Reply::Stream(anthropic::tool("call-1", "bash", &[text], (10, 10))),
        _ => Reply::Stream(anthropic::text(
            "",
            &[&format!("seen: {text}")],
            "end_turn",
            (10, 10),
        )),
    }
}

/// An http capsule against `fake`, granting `shell` (a YAML list), with `lifecycle`.
fn manifest(home: &Home, fake: &Fake, shell: &str, lifecycle: &str) -> std::path::PathBuf {
    home.write(
        "w/murmur.yaml",
        &format!(
            "name: shell-worker\nversion: \"0.1.0\"\nartifacts:\n  - name: murmur/driver-anthropic\n    version: \"0.19.0\"\n    runtime: driver\n    gateway:\n      endpoint: http://127.0.0.1:{}\n      api_key: test-key\ninference:\n  transport: http\n  model: test-model\n  max_tokens: 256\n  driver:\n    artifact: murmur/driver-anthropic\ncapabilities:\n  shell:\n    allow: {shell}\nlifecycle:\n{lifecycle}",
            fake.port
        ),
    )
}

const QUEUE: &str = "  task_acceptance: queue\n  after_task: sleep\n  queue_depth: 4\n";

fn launch(home: &Home, manifest: &Path) -> Launch {
    launch_env(home, manifest, &[])
}

/// In namespace mode (the jail is what holds a command), with `env` exported to `mur run`.
fn launch_env(home: &Home, manifest: &Path, env: &[(&str, String)]) -> Launch {
    let mut env = env.to_vec();
    env.push(("MURMUR_CONTAINMENT", "namespaces".to_owned()));
    Launch::start_env(home, manifest, &[], &env)
}

/// Sends `args` as the task (the model runs bash with them), waits for its end; the task.
fn run_bash(run: &Launch, args: Value) -> Value {
    let id = run.start_task(&args.to_string());
    run.wait_task(&id, LONG, |s| {
        matches!(
            s,
            "TASK_STATE_COMPLETED" | "TASK_STATE_FAILED" | "TASK_STATE_CANCELED"
        )
    })
}

fn answer(task: &Value) -> Value {
    let text = task["artifacts"][0]["parts"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no answer: {task}"));
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// The task that tells the model the result of a command `task` left in the background: the
/// session's own, completed, in the same context (waited for, bounded).
fn result_task(run: &Launch, task: &Value) -> Value {
    let context = task["contextId"].as_str().unwrap();
    let mut result = Value::Null;
    assert!(wait_until(LONG, || {
        let page = run.rpc(
            "ListTasks",
            json!({"contextId": context, "includeArtifacts": true}),
        );
        result = page["result"]["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] != task["id"] && t["status"]["state"] == "TASK_STATE_COMPLETED")
            .cloned()
            .unwrap_or(Value::Null);
        !result.is_null()
    }));
    result
}

fn events<'a>(trace: &'a [Value], kind: &str) -> Vec<&'a Value> {
    trace.iter().filter(|e| e["event_type"] == kind).collect()
}

fn bash_path() -> String {
    ["/usr/bin/bash", "/bin/bash"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("bash")
        .to_owned()
}

/// The path `mur` finds `program` at, as the command's PATH reads (the test's own PATH).
fn which(program: &str) -> String {
    std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{program} on PATH"))
        .to_string_lossy()
        .into_owned()
}

/// Waits (bounded) for the trace to hold a record of `kind`; answers the first.
fn wait_record(home: &Home, session: &str, kind: &str) -> Value {
    let mut found = Value::Null;
    assert!(
        wait_until(LONG, || {
            found = home
                .trace(session)
                .into_iter()
                .find(|e| e["event_type"] == kind)
                .unwrap_or(Value::Null);
            !found.is_null()
        }),
        "no {kind} record"
    );
    found
}

/// The pids of this test's processes (`home`'s, however they detached) running `needle` as a
/// word of their command line: another test's `sleep 3011` is not this one's `sleep 30`.
fn running(home: &Home, needle: &str) -> Vec<u32> {
    processes_of(home)
        .into_iter()
        .filter(|p| {
            let line = cmdline(*p);
            let line = line.trim_end();
            line.ends_with(needle) || line.contains(&format!("{needle} "))
        })
        .collect()
}

#[test]
fn the_card_of_an_http_capsule_with_a_shell_is_the_spec_s_card() {
    let home = Home::new();
    let fake = Fake::start_with(brain);
    let path = home.write(
        "w/murmur.yaml",
        &format!(
            "name: my-agent\nversion: \"0.1.0\"\nartifacts:\n  - name: murmur/driver-anthropic\n    version: \"0.19.0\"\n    runtime: driver\n    gateway:\n      endpoint: http://127.0.0.1:{}\n      api_key: test-key\ninference:\n  transport: http\n  model: test-model\n  driver:\n    artifact: murmur/driver-anthropic\ncapabilities:\n  shell:\n    allow: [bash]\n  network:\n    allow: [\"localhost:9\"]\nexports:\n  files: {{}}\nlifecycle:\n  task_acceptance: single\n  after_task: sleep\n",
            fake.port
        ),
    );
    let run = launch(&home, &path);
    let expected = json!({
      "name": "my-agent",
      "description": "Murmur capsule my-agent 0.1.0",
      "version": "0.1.0",
      "supportedInterfaces": [
        { "url": format!("http://localhost:{}", run.port), "protocolBinding": "JSONRPC", "protocolVersion": "1.0" }
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
              "sessionId": run.session,
              "tools": ["bash"],
              "shell": true,
              "network": true,
              "planes": ["files"]
            }
          },
          {
            "uri": "https://docs.murmur.nexus/reference/streaming-protocol/#murmur-stream-v1",
            "description": "The murmur frames this capsule writes in addition to the A2A v1.0 events: sent on SendStreamingMessage and SubscribeToTask when the request's A2A-Extensions header names this URI, and always on murmur.WatchSession. Each is carried in a StreamResponse under metadata keyed by this URI.",
            "required": false,
            "params": {
              "frames": ["text", "thinking", "tool-call-started", "tool-call-progress", "artifact", "gap", "lagged", "connection-ack", "capsule-closed"]
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
    });
    let resp = http(run.port, "GET", "/.well-known/agent-card.json", &[], b"");
    assert_eq!(resp.text(), serde_json::to_string(&expected).unwrap());
}

#[test]
fn the_model_is_offered_bash_only_when_the_list_names_a_command() {
    let home = Home::new();
    let fake = Fake::start_with(brain);
    let path = manifest(&home, &fake, "[printf, \"git status\"]", QUEUE);
    let run = launch(&home, &path);
    let task = run_bash(&run, json!({"command": "printf 'hello %s' world"}));
    let first = &fake.seen()[0].body;
    let tools: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        [
            "call-member",
            "delegate-task",
            "send-message",
            "request-input",
            "end-without-answer",
            "bash"
        ]
    );
    let bash = &first["tools"][5];
    assert!(
        bash["description"]
            .as_str()
            .unwrap()
            .contains("the programs you may run: printf, git status."),
        "{bash}"
    );
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    drop(run);

    // No list, no tool: the model is offered the five operations, and the card none.
    let home = Home::new();
    let fake = Fake::start_with(brain);
    let path = home.write(
        "w/murmur.yaml",
        &std::fs::read_to_string(manifest(&home, &fake, "[x]", QUEUE))
            .unwrap()
            .replace("capabilities:\n  shell:\n    allow: [x]\n", ""),
    );
    let run = launch(&home, &path);
    let card = http(run.port, "GET", "/.well-known/agent-card.json", &[], b"").json();
    let params = &card["capabilities"]["extensions"][1]["params"];
    assert_eq!(
        (&params["tools"], &params["shell"], &params["network"]),
        (&json!([]), &json!(false), &json!(false))
    );
    let task = run_bash(&run, json!({"command": "printf x"}));
    let tools = fake.seen()[0].body["tools"].as_array().unwrap().len();
    assert_eq!(tools, 5);
    assert_eq!(
        answer(&task),
        "there is no tool bash; the tools are call-member, delegate-task, send-message, request-input and end-without-answer"
    );
}

#[test]
fn an_allowed_command_runs_and_its_output_reaches_the_model_and_the_streams() {
    let home = Home::new();
    let fake = Fake::start_with(brain);
    let path = manifest(&home, &fake, "[printf, \"git status\"]", QUEUE);
    let run = launch(&home, &path);
    let task = run_bash(
        &run,
        json!({"command": "printf 'hello %s\\n' world 'two words'"}),
    );
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    let got = answer(&task);
    let work_id = got["work_id"].as_str().unwrap().to_owned();
    assert!(work_id.starts_with("wrk_") && work_id.len() == 36, "{got}");
    assert_eq!(
        got,
        json!({"work_id": work_id, "exit_code": 0, "output": "hello world\nhello two words\n"})
    );
    // What the model was told is exactly that result, as a tool_result of its call.
    let told = &fake.seen()[1].body["messages"];
    let result = told.as_array().unwrap().last().unwrap()["content"][0].clone();
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["tool_use_id"], "call-1");
    assert_eq!(result["is_error"], false);
    assert_eq!(
        serde_json::from_str::<Value>(result["content"].as_str().unwrap()).unwrap(),
        got
    );
    // No task metadata: nothing runs on.
    assert!(task.get("metadata").is_none(), "{task}");

    // A failing command's status is the model's to read.
    let failed = answer(&run_bash(&run, json!({"command": "git status"})));
    assert_ne!(failed["exit_code"], 0, "{failed}");

    // The trace: start and end of each, with the binary, the command, status and bytes.
    let trace = home.trace(&run.session);
    let start = events(&trace, "shell_start")[0];
    assert_eq!(start["work_id"], work_id.as_str());
    assert_eq!(start["binary"], which("printf"));
    assert_eq!(start["command"], "printf 'hello %s\\n' world 'two words'");
    assert_eq!(start["background"], false);
    let end = events(&trace, "shell_end")[0];
    assert_eq!(
        (
            &end["exit_code"],
            &end["signal"],
            &end["killed"],
            &end["output_bytes"]
        ),
        (&json!(0), &Value::Null, &json!(false), &json!(28))
    );
    let keys: Vec<&str> = end
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "event_type",
            "session_id",
            "timestamp",
            "task_id",
            "work_id",
            "exit_code",
            "signal",
            "killed",
            "duration_ms",
            "output_bytes"
        ]
    );
    let (code, out, _) = home.run(&["trace", "show", &run.session]);
    assert_eq!(code, 0);
    let short = &task["id"].as_str().unwrap()[..12];
    assert!(out.contains("── Shell "), "{out}");
    assert!(
        out.contains(&format!(
            "{short}  {work_id}  start  {}  printf 'hello %s\\n' world 'two words'\n",
            which("printf")
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!("{short}  {work_id}  exit  status 0  28 bytes  ")),
        "{out}"
    );
}

#[test]
fn the_output_streams_as_tool_call_progress_frames_of_the_call() {
    let home = Home::new();
    let fake = Fake::start_with(brain);
    let path = manifest(&home, &fake, "[bash]", QUEUE);
    let run = launch(&home, &path);
    let task = run_bash(
        &run,
        json!({"command": "for i in 1 2 3; do echo line$i; sleep 0.05; done"}),
    );
    let work_id = answer(&task)["work_id"].as_str().unwrap().to_owned();
    let frames = watched_frames(run.port, task["id"].as_str().unwrap());
    let output: Vec<&Value> = frames
        .iter()
        .filter(|f| f["frame"] == "tool-call-progress" && f.get("workId").is_some())
        .collect();
    assert!(!output.is_empty(), "{frames:?}");
    let text: String = output.iter().map(|f| f["text"].as_str().unwrap()).collect();
    assert_eq!(text, "line1\nline2\nline3\n");
    for f in &output {
        let keys: Vec<&str> = f.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["frame", "turn", "toolCallId", "workId", "text"],
            "{f}"
        );
        assert_eq!(
            (&f["turn"], &f["toolCallId"], &f["workId"]),
            (&json!(1), &json!("call-1"), &json!(work_id))
        );
    }
    // The call's own frames come first: its start, then its arguments.
    let started = frames
        .iter()
        .position(|f| f["frame"] == "tool-call-started")
        .unwrap();
    let first_output = frames
        .iter()
        .position(|f| f.get("workId").is_some())
        .unwrap();
    assert!(started < first_output);
    assert_eq!(frames[started]["tool"], "bash");
}

/// murmur.WatchSession's replay, read until the terminal status of `task`: its frames (each
/// with its text added).
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
                let mut f = meta.clone();
                f["text"] = r["message"]["parts"][0]["text"].clone();
                frames.push(f);
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
fn a_command_off_the_list_is_refused_to_the_model_and_nothing_starts() {
    let home = Home::new();
    let fake = Fake::start_with(brain);
    let path = manifest(&home, &fake, "[printf, \"git status\"]", QUEUE);
    let run = launch(&home, &path);
    let rows = [
        (
            json!({"command": "rm -rf /"}),
            json!({"error": "command_not_allowed", "message": "rm is not a command this capsule may run; capabilities.shell.allow lists: printf, git status"}),
        ),
        (
            json!({"command": "git push"}),
            json!({"error": "command_not_allowed", "message": "git is not a command this capsule may run; capabilities.shell.allow lists: printf, git status"}),
        ),
        (
            json!({"command": "/usr/bin/printf x"}),
            json!({"error": "command_not_allowed", "message": "/usr/bin/printf is not a command this capsule may run; capabilities.shell.allow lists: printf, git status"}),
        ),
        (
            json!({"command": "printf x | sh"}),
            json!({"error": "command_not_allowed", "message": "the command holds '|', which takes a shell, and bash is not on capabilities.shell.allow (printf, git status): write one command and its arguments"}),
        ),
        (
            json!({"command": "printf \"$(id)\""}),
            json!({"error": "command_not_allowed", "message": "the command holds '$', which takes a shell, and bash is not on capabilities.shell.allow (printf, git status): write one command and its arguments"}),
        ),
        (
            json!({"command": "printf 'x"}),
            json!({"error": "bad_command", "message": "the command does not parse: a quote is not closed, or it ends in a lone \\"}),
        ),
        (
            json!({"command": ""}),
            json!({"error": "bad_command", "message": "bash takes a non-empty command"}),
        ),
        (
            json!({"command": "printf x", "wait_secs": 0}),
            json!({"error": "bad_command", "message": "wait_secs is a whole number of seconds from 1 to 600"}),
        ),
    ];
    for (args, refusal) in rows {
        let task = run_bash(&run, args.clone());
        assert_eq!(answer(&task), refusal, "{args}");
    }
    let told = fake.seen()[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["content"][0]
        .clone();
    assert_eq!(told["is_error"], true);
    let trace = home.trace(&run.session);
    assert!(
        events(&trace, "shell_start").is_empty(),
        "a refused command started"
    );
    let refused: Vec<(&str, &str)> = events(&trace, "shell_refused")
        .iter()
        .map(|e| {
            (
                e["reason"].as_str().unwrap(),
                e["command"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        refused,
        [
            ("command_not_allowed", "rm -rf /"),
            ("command_not_allowed", "git push"),
            ("command_not_allowed", "/usr/bin/printf x"),
            ("command_not_allowed", "printf x | sh"),
            ("command_not_allowed", "printf \"$(id)\""),
            ("bad_command", "printf 'x"),
            ("bad_command", ""),
        ]
    );
    let (_, out, _) = home.run(&["trace", "show", &run.session]);
    assert!(
        out.contains("  refused  command_not_allowed  rm -rf /\n"),
        "{out}"
    );
}

#[test]
fn a_command_past_its_wait_moves_to_the_background_and_its_result_follows_as_a_task() {
    let home = Home::new();
    let fake = Fake::start_with(brain);
    let path = manifest(&home, &fake, "[bash]", QUEUE);
    let run = launch(&home, &path);
    let command = "echo started; sleep 3; echo done-sleeping";
    let task = run_bash(&run, json!({"command": command, "wait_secs": 1}));
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    let got = answer(&task);
    let work_id = got["work_id"].as_str().unwrap().to_owned();
    assert_eq!(
        got,
        json!({"work_id": work_id, "running": true,
               "message": format!("still running after 1 s: it goes on in the background as {work_id}; its result comes as a new message in this conversation once it ends"),
               "output": "started\n"})
    );
    // The completed task keeps its response and names what it left running.
    let running = &task["metadata"]["murmur"]["runningCommands"];
    let ms = running[0]["runningMs"].as_u64().unwrap();
    assert!((1000..10_000).contains(&ms), "{running}");
    assert_eq!(
        running,
        &json!([{"workId": work_id, "binary": bash_path(), "command": command, "runningMs": ms}])
    );
    assert_eq!(keys_of(&task["metadata"]["murmur"]), ["runningCommands"]);
    assert_eq!(task["artifacts"][0]["artifactId"], "response");

    // Its result comes as the session's own task in the same context, which the model reads.
    let result = result_task(&run, &task);
    let said = answer(&result);
    let said = said.as_str().unwrap();
    let head = format!(
        "seen: The background command {work_id} ({command}) ended with exit status 0 after "
    );
    assert!(said.starts_with(&head), "{said}");
    assert!(
        said.ends_with(" s. Its output:\nstarted\ndone-sleeping\n"),
        "{said}"
    );
    let trace = home.trace(&run.session);
    let received = events(&trace, "a2a_task_received");
    assert_eq!(received[1]["origin"], "command");
    assert_eq!(received[1]["trust"], "untrusted");
    let moved = events(&trace, "shell_background")[0];
    assert_eq!(
        (&moved["work_id"], &moved["why"]),
        (&json!(work_id), &json!("waited"))
    );
}

/// Writes a line into the FIFO `go` once a reader holds it open (bounded): a command that is
/// gone never opens it, and the test fails here rather than hang.
fn told_to_answer(go: &Path) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let open = || {
        std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(go)
            .ok()
    };
    let mut writer = None;
    assert!(
        wait_until(LONG, || {
            writer = open();
            writer.is_some()
        }),
        "nothing reads {}: the command is gone",
        go.display()
    );
    if let Some(mut w) = writer {
        w.write_all(b"go\n").unwrap();
    }
}

#[test]
fn a_cancel_moves_a_foreground_command_to_the_background_and_names_it_word_for_word() {
    let home = Home::new();
    let fake = Fake::start_with(brain);
    let path = manifest(&home, &fake, "[bash]", QUEUE);
    let run = launch(&home, &path);
    // The command answers twice when told to (a line on `go`), each time by a line in `went`:
    // proof that it outlived what came before, which no wait for an absence can give. A round
    // answers only a line it read: its open of `go` may still find the last round's writer
    // there, and then reads the end of the file, not a line.
    let (go, went) = (home.root.join("go"), home.root.join("went"));
    nix::unistd::mkfifo(&go, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let marker = format!(
        "for round in 1 2; do until read line < {go}; do :; done; echo $round >> {went}; done; exec sleep 30 # {}",
        home.root.display(),
        go = go.display(),
        went = went.display()
    );
    let answers = |rounds: usize| {
        told_to_answer(&go);
        wait_until(LONG, || {
            std::fs::read_to_string(&went).is_ok_and(|t| t.lines().count() == rounds)
        })
    };
    let id = run.start_task(&json!({"command": marker, "wait_secs": 600}).to_string());
    let start = wait_record(&home, &run.session, "shell_start");
    let work_id = start["work_id"].as_str().unwrap().to_owned();
    assert!(wait_until(LONG, || !running(&home, "sleep 30").is_empty()));

    let resp = run.rpc("CancelTask", json!({"id": id}));
    let task = &resp["result"];
    let started_at = task["artifacts"][0]["parts"][0]["data"]["started_at_ms"].clone();
    assert!(
        started_at.as_i64().is_some_and(|ms| ms > 1_700_000_000_000),
        "{task}"
    );
    let item = json!({"kind": "detached_shell", "work_id": work_id, "binary": bash_path(),
                      "command": marker, "started_at_ms": started_at});
    assert_eq!(
        task,
        &json!({"id": id, "contextId": task["contextId"],
                "status": {"state": "TASK_STATE_CANCELED", "timestamp": task["status"]["timestamp"]},
                "artifacts": [{"artifactId": "residue", "name": "residue",
                               "parts": [{"data": item, "mediaType": "application/json"}]}]})
    );
    assert_eq!(
        serde_json::to_string(&task["artifacts"][0]["parts"][0]["data"]).unwrap(),
        serde_json::to_string(&item).unwrap(),
        "key order"
    );
    // The cancel ended nothing: the command runs on, and answers after it.
    assert!(answers(1), "the cancel ended the command");
    // The task is canceled at once; its loop's ending, which names what it leaves running,
    // comes once the loop has stopped (after its task_end record): waited for, bounded.
    let mut ended = Value::Null;
    assert!(
        wait_until(LONG, || {
            ended = run.rpc("GetTask", json!({"id": id}))["result"].clone();
            ended["status"]["state"] == "TASK_STATE_CANCELED"
                && !ended["metadata"]["murmur"]["runningCommands"].is_null()
        }),
        "the canceled task never named what it leaves running: {ended}"
    );
    assert_eq!(
        ended["metadata"]["murmur"]["runningCommands"][0]["workId"],
        work_id.as_str()
    );
    let trace = home.trace(&run.session);
    let canceled = events(&trace, "task_canceled")[0];
    assert_eq!(canceled["interrupted"], "tool");
    assert_eq!(canceled["in_flight"], json!([item]));
    let moved = events(&trace, "shell_background")[0];
    assert_eq!(moved["why"], "canceled");

    // murmur.StopSession cancels nothing more, names the command, and ends no process.
    let stop = run.post(
        &request(json!(1), "murmur.StopSession", json!({})),
        &[("A2A-Version", "1.0")],
    );
    assert_eq!(
        stop.text(),
        serde_json::to_string(&json!({"jsonrpc": "2.0", "id": 1, "result": {
            "session_id": run.session, "canceled": [], "residue": [item]}}))
        .unwrap()
    );
    assert!(answers(2), "StopSession ended the command");

    // `mur cancel` prints a second one as running:, and `mur stop` names both, then ends them.
    let id2 = run.start_task(&json!({"command": "sleep 31", "wait_secs": 600}).to_string());
    assert!(wait_until(LONG, || !running(&home, "sleep 31").is_empty()));
    let (code, out, err) = home.run(&["cancel", &run.session, &id2]);
    assert_eq!(code, 0, "{err}");
    let second = events(&home.trace(&run.session), "shell_start")[1]["work_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        out.contains(&format!("running: sleep 31 ({second}: {})\n", bash_path())),
        "{out}"
    );
    // The residue names what the session still runs, the first task's command included.
    assert!(
        out.contains(&format!("running: {marker} ({work_id}: {})\n", bash_path())),
        "the second cancel left out the first task's command: {out}"
    );
    let residue = run.rpc("GetTask", json!({"id": id2}))["result"]["artifacts"][0].clone();
    let data: Vec<&Value> = residue["parts"]
        .as_array()
        .map(|parts| parts.iter().map(|p| &p["data"]).collect())
        .unwrap_or_default();
    assert_eq!(residue["artifactId"], "residue", "{residue}");
    assert_eq!(data.len(), 2, "{residue}");
    assert_eq!(data[0], &item, "oldest first");
    assert_eq!(data[1]["work_id"], second.as_str(), "{residue}");
    let (code, out, err) = home.run(&["stop", &run.session]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("running: {marker} ({work_id}: {})\n", bash_path())),
        "{out}"
    );
    assert!(
        out.contains(&format!("running: sleep 31 ({second}: {})\n", bash_path())),
        "{out}"
    );
    assert!(wait_until(LONG, || running(&home, "sleep 30").is_empty()
        && running(&home, "sleep 31").is_empty()));
    assert_nothing_left(&home, LONG);
    let trace = home.trace(&run.session);
    let ends: Vec<&Value> = events(&trace, "shell_end");
    assert_eq!(ends.len(), 2);
    assert!(ends.iter().all(|e| e["killed"] == true), "{ends:?}");
    // No result task for a command the session's end killed.
    assert_eq!(events(&trace, "a2a_task_received").len(), 2);
}

/// A background command that leaves a detached grandchild: the session's end ends both.
fn hold_detached(run: &Launch, home: &Home, tag: &str) {
    let command = format!("setsid sleep 301{tag} & disown; exec sleep 302{tag}");
    let task = run_bash(run, json!({"command": command, "background": true}));
    let got = answer(&task);
    assert_eq!(got["running"], true, "{got}");
    assert!(wait_until(LONG, || {
        !running(home, &format!("sleep 301{tag}")).is_empty()
            && !running(home, &format!("sleep 302{tag}")).is_empty()
    }));
    assert!(!processes_of(home).is_empty());
}

#[test]
fn the_session_s_end_ends_every_command_and_what_it_detached() {
    // mur stop.
    let home = Home::new();
    let fake = Fake::start_with(brain);
    let path = manifest(&home, &fake, "[bash]", QUEUE);
    let run = launch(&home, &path);
    hold_detached(&run, &home, "1");
    let (code, _, err) = home.run(&["stop", &run.session]);
    assert_eq!(code, 0, "{err}");
    assert_nothing_left(&home, LONG);
    drop(run);

    // kill -9 of the capsule process.
    let home = Home::new();
    let fake = Fake::start_with(brain);
    let path = manifest(&home, &fake, "[bash]", QUEUE);
    let run = launch(&home, &path);
    hold_detached(&run, &home, "2");
    // The capsule is `mur run`'s one child.
    let capsule = children(run.pid());
    assert_eq!(capsule.len(), 1, "{capsule:?}");
    signal(capsule[0], 9);
    assert_nothing_left(&home, LONG);
    drop(run);

    // Ctrl-C to `mur run`.
    let home = Home::new();
    let fake = Fake::start_with(brain);
    let path = manifest(&home, &fake, "[bash]", QUEUE);
    let run = launch(&home, &path);
    hold_detached(&run, &home, "4");
    signal(run.pid(), 2);
    assert_nothing_left(&home, LONG);
    drop(run);

    // kill -9 of `mur run` itself.
    let home = Home::new();
    let fake = Fake::start_with(brain);
    let path = manifest(&home, &fake, "[bash]", QUEUE);
    let run = launch(&home, &path);
    hold_detached(&run, &home, "5");
    signal(run.pid(), 9);
    assert_nothing_left(&home, LONG);
    drop(run);

    // after_task: exit — the task ends, the session with it.
    let home = Home::new();
    let fake = Fake::start_with(brain);
    let path = manifest(
        &home,
        &fake,
        "[bash]",
        "  task_acceptance: single\n  after_task: exit\n",
    );
    let mut child = home
        .mur()
        .env("MURMUR_CONTAINMENT", "namespaces")
        .args(["run", "--manifest", path.to_str().unwrap(), "--task"])
        .arg(
            json!({"command": "setsid sleep 3013 & disown; exec sleep 3023", "background": true})
                .to_string(),
        )
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{out}");
    assert_nothing_left(&home, LONG);
    let session = out
        .lines()
        .find_map(|l| l.strip_prefix("session: "))
        .unwrap_or_else(|| panic!("no session: {out}"));
    let trace = home.trace(session);
    let end = events(&trace, "shell_end")[0];
    assert_eq!(end["killed"], true, "{end}");
}

#[test]
fn a_hostile_command_stays_in_the_jail() {
    let home = Home::new();
    let fake = Fake::start_with(brain);
    let path = manifest(&home, &fake, "[bash]", QUEUE);
    // Of the test's folders, nothing is opened to the command (the other tests open the whole
    // test folder for their harnesses' files).
    let run = launch_env(
        &home,
        &path,
        &[
            ("MURMUR_HARNESS_WRITABLE", String::new()),
            ("FAKE_SECRET_FOR_SHELL", "s3cret".to_owned()),
        ],
    );
    let secret_dir = home.home.join("run");
    let outside = home.root.join("outside-the-work-folder");
    let script = format!(
        "(echo x > /dev/tcp/127.0.0.1/{provider}) 2>/dev/null && echo net:provider || echo net:refused; \
         (echo x > /dev/tcp/127.0.0.1/{door}) 2>/dev/null && echo door:reached || echo door:refused; \
         ls {run_dir} >/dev/null 2>&1 && [ -n \"$(ls -A {run_dir} 2>/dev/null)\" ] && echo run:seen || echo run:hidden; \
         (echo x > {outside}) 2>/dev/null && echo write:outside || echo write:refused; \
         echo x > ./inside && echo write:inside; \
         env | grep -c FAKE_SECRET_FOR_SHELL || true",
        provider = fake.port,
        door = run.port,
        run_dir = secret_dir.display(),
        outside = outside.display(),
    );
    let _ = std::fs::create_dir_all(home.root.join("w"));
    let task = run_bash(&run, json!({"command": script}));
    let got = answer(&task);
    assert_eq!(
        got["output"], "net:refused\ndoor:refused\nrun:hidden\nwrite:refused\nwrite:inside\n0\n",
        "{got}"
    );
    assert!(!outside.exists());
    let start = events(&home.trace(&run.session), "session_start")[0].clone();
    assert_eq!(start["containment"], "namespaces", "{start}");
    assert_eq!(start["walls"]["network"], "up");
}

#[test]
fn a_long_noisy_command_like_a_test_suite_runs_to_its_end_and_its_result_is_bounded() {
    let home = Home::new();
    let fake = Fake::start_with(brain);
    let path = manifest(&home, &fake, "[bash]", QUEUE);
    let run = launch(&home, &path);
    // 4,000 lines (88,893 bytes) of a test run, a pause, then the summary.
    let command = "for i in $(seq 1 4000); do echo \"test case_$i ... ok\"; done; sleep 2; \
                   echo 'test result: ok. 4000 passed'";
    let task = run_bash(&run, json!({"command": command, "wait_secs": 1}));
    let first = answer(&task);
    assert_eq!(first["running"], true, "{first}");
    let so_far = first["output"].as_str().unwrap();
    assert!(
        so_far.starts_with("test case_1 ... ok\ntest case_2 ... ok\n"),
        "{so_far}"
    );
    assert!(so_far.len() <= 32 * 1024 + 64, "{}", so_far.len());

    let result = result_task(&run, &task);
    let said = answer(&result);
    let said = said.as_str().unwrap();
    let total: usize = (1..=4000)
        .map(|i| format!("test case_{i} ... ok\n").len())
        .sum::<usize>()
        + "test result: ok. 4000 passed\n".len();
    let cut = total - 8 * 1024 - 24 * 1024;
    let output = said.split_once(" s. Its output:\n").unwrap().1;
    assert!(
        output.starts_with("test case_1 ... ok\n"),
        "{}",
        &output[..100]
    );
    assert!(
        output.contains(&format!("\n[… {cut} bytes cut …]\n")),
        "{}",
        output.len()
    );
    assert!(output.ends_with("test case_4000 ... ok\ntest result: ok. 4000 passed\n"));
    let end = events(&home.trace(&run.session), "shell_end")[0].clone();
    assert_eq!(end["output_bytes"], total as u64);
    assert_eq!(end["exit_code"], 0);
}

#[test]
fn an_allowed_program_the_path_lacks_and_a_bad_background_are_refused_saying_so() {
    let home = Home::new();
    let fake = Fake::start_with(brain);
    let path = manifest(&home, &fake, "[printf, no-such-tool-here]", QUEUE);
    let run = launch(&home, &path);
    for (args, refusal) in [
        (
            json!({"command": "no-such-tool-here --version"}),
            json!({"error": "command_not_found", "message": "no-such-tool-here is on capabilities.shell.allow but is not on this capsule's PATH"}),
        ),
        (
            json!({"command": "printf x", "background": "yes"}),
            json!({"error": "bad_command", "message": "background is true or false"}),
        ),
    ] {
        assert_eq!(answer(&run_bash(&run, args.clone())), refusal, "{args}");
    }
    let trace = home.trace(&run.session);
    assert!(
        events(&trace, "shell_start").is_empty(),
        "a refused command started"
    );
    assert_eq!(
        events(&trace, "shell_refused")[0]["reason"],
        "command_not_found"
    );
}
