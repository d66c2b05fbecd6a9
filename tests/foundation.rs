//! The foundation, end to end through the real `mur`: launch and announcement, the offline
//! worker, blocking and returnImmediately answers, queue and single acceptance, after_task exit,
//! cancel of harnesses that honour and ignore SIGINT, harness session resume, pinned ports, bad
//! manifests, and `mur ps` / `stop` / `cancel` / `trace show` leaving nothing behind.

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use support::*;

const LONG: Duration = Duration::from_secs(30);

#[test]
fn offline_worker_answers_the_launch_task_and_exits() {
    let home = Home::new();
    let manifest = repo_root().join("manifests/worker.yaml");
    let mut run = Launch::start(&home, &manifest, &["--task", "Count these four words"]);
    assert!(
        run.session.starts_with("ses_") && run.session.len() == 36,
        "{}",
        run.session
    );
    assert_eq!(run.wait_exit(LONG), Some(0));
    let out = run.output();
    assert!(
        out.starts_with("Acknowledged: Count these four words\n(4 words on 1 lines"),
        "{out}"
    );
    let events: Vec<String> = home
        .trace(&run.session)
        .iter()
        .map(|e| e["event_type"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(
        events,
        [
            "session_start",
            "a2a_task_received",
            "task_start",
            "harness_start",
            "harness_exit",
            // The attempt's invoke_agent span (the launch's task starts its own trace).
            "span",
            "task_end",
            "session_end"
        ]
    );
    let span = &home.trace(&run.session)[5];
    assert_eq!(span["name"], "invoke_agent worker");
    assert_eq!(span["parent_span_id"], serde_json::Value::Null);
    assert_eq!(span["attributes"]["murmur.task.outcome"], "completed");
    for e in home.trace(&run.session) {
        assert_eq!(e["session_id"], run.session.as_str());
        let ts = e["timestamp"].as_str().unwrap();
        assert!(ts.len() == 24 && ts.ends_with('Z'), "{ts}");
    }
}

fn fixture_launch(home: &Home, f: Fixture, args: &[&str]) -> Launch {
    let manifest = home.write("capsule/murmur.yaml", &f.yaml());
    Launch::start(home, &manifest, args)
}

#[test]
fn send_message_blocks_until_the_task_settles_unless_return_immediately() {
    let home = Home::new();
    let run = fixture_launch(&home, Fixture::default(), &[]);
    let held = run.send("hello", false);
    let task = &held["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(
        task["status"]["message"]["parts"][0]["text"],
        "task completed"
    );
    assert_eq!(
        task["artifacts"],
        json!([{"artifactId": "response", "name": "response",
                "parts": [{"text": "Acknowledged.", "mediaType": "text/plain"}]}])
    );
    let quick = run.send("@sleep 0.3", true);
    let task = &quick["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_SUBMITTED");
    assert!(task.get("artifacts").is_none() && task["status"].get("message").is_none());
    let id = task["id"].as_str().unwrap();
    assert!(id.starts_with("tsk_") && task["contextId"].as_str().unwrap().starts_with("ctx_"));
    let done = run.wait_task(id, LONG, |s| s == "TASK_STATE_COMPLETED");
    assert_eq!(done["artifacts"][0]["parts"][0]["text"], "Acknowledged.");
}

#[test]
fn a_full_queue_rejects_with_capsule_is_busy() {
    let home = Home::new();
    let f = Fixture {
        queue_depth: Some(1),
        ..Fixture::default()
    };
    let run = fixture_launch(&home, f, &[]);
    let first = run.start_task("@sleep 30");
    run.wait_task(&first, LONG, |s| s == "TASK_STATE_WORKING");
    let queued = run.send("queued", true);
    assert_eq!(
        queued["result"]["task"]["status"]["state"],
        "TASK_STATE_SUBMITTED"
    );
    // Held or not, a rejection answers at once.
    let rejected = run.send("one too many", false);
    let task = &rejected["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_REJECTED");
    assert_eq!(
        task["status"]["message"]["parts"][0]["text"],
        "task rejected: capsule is busy"
    );
    assert_eq!(task["status"]["message"]["role"], "ROLE_AGENT");
    // The rejected task never ran: GetTask still shows it rejected.
    let again = run.rpc("GetTask", json!({"id": task["id"]}));
    assert_eq!(again["result"]["status"]["state"], "TASK_STATE_REJECTED");
}

#[test]
fn single_acceptance_takes_one_task_and_after_task_exit_ends_the_launch() {
    let home = Home::new();
    let f = Fixture {
        after_task: "exit",
        ..Fixture::single()
    };
    let mut run = fixture_launch(&home, f, &[]);
    let first = run.start_task("@sleep 1");
    let busy = run.send("second", true);
    assert_eq!(
        busy["result"]["task"]["status"]["state"],
        "TASK_STATE_REJECTED"
    );
    assert_eq!(
        busy["result"]["task"]["status"]["message"]["parts"][0]["text"],
        "task rejected: capsule is busy"
    );
    assert_eq!(
        run.wait_exit(LONG),
        Some(0),
        "after_task: exit ends the launch once the task ends"
    );
    let trace = home.trace(&run.session);
    let end = trace
        .iter()
        .find(|e| e["event_type"] == "task_end" && e["task_id"] == first.as_str())
        .unwrap();
    assert_eq!(end["status"], "completed");
    assert_eq!(trace.last().unwrap()["event_type"], "session_end");
}

fn trace_types(home: &Home, session: &str, task: &str) -> Vec<String> {
    home.trace(session)
        .iter()
        .filter(|e| e["task_id"] == task)
        .map(|e| e["event_type"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn cancel_interrupts_a_harness_that_honours_sigint() {
    let home = Home::new();
    let run = fixture_launch(&home, Fixture::default(), &[]);
    let pidfile = home.root.join("harness.pid");
    let text = format!("@pidfile {}\n@sleep 60", pidfile.display());
    let id = run.start_task(&text);
    let harness = wait_pid(&pidfile);
    let canceled = run.rpc("CancelTask", json!({"id": id}));
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED");
    assert!(
        canceled["result"].get("artifacts").is_none(),
        "nothing in flight: no residue artifact"
    );
    assert!(wait_until(LONG, || !alive(harness)), "the harness ended");
    // SIGINT ended it, not the kill after the grace: `killed: false` below.
    assert!(wait_until(LONG, || trace_types(&home, &run.session, &id)
        .contains(&"task_end".to_owned())));
    let types = trace_types(&home, &run.session, &id);
    for t in [
        "harness_interrupt",
        "harness_exit",
        "task_canceled",
        "task_end",
    ] {
        assert!(types.contains(&t.to_owned()), "{t} missing from {types:?}");
    }
    let exit = home
        .trace(&run.session)
        .into_iter()
        .find(|e| e["event_type"] == "harness_exit")
        .unwrap();
    assert_eq!(
        (exit["cause"].as_str(), exit["killed"].as_bool()),
        (Some("canceled"), Some(false))
    );
    let interrupt = home
        .trace(&run.session)
        .into_iter()
        .find(|e| e["event_type"] == "harness_interrupt")
        .unwrap();
    assert_eq!(interrupt["interrupt"], "sigint");
    let task = run.rpc("GetTask", json!({"id": id}))["result"].clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_CANCELED");
    assert!(
        task["status"].get("message").is_none(),
        "a graceful end says nothing more: {task}"
    );
    // The capsule keeps serving: the next task runs.
    let next = run.send("after the cancel", false);
    assert_eq!(
        next["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}

#[test]
fn cancel_kills_a_harness_that_ignores_sigint_after_the_grace() {
    let home = Home::new();
    let run = fixture_launch(&home, Fixture::default(), &[]);
    let pidfile = home.root.join("harness.pid");
    let child = home.root.join("grandchild.pid");
    let text = format!(
        "@ignore-sigint\n@pidfile {}\n@grandchild {}\n@sleep 120",
        pidfile.display(),
        child.display()
    );
    let id = run.start_task(&text);
    let harness = wait_pid(&pidfile);
    let grandchild = wait_pid(&child);
    let canceled = run.rpc("CancelTask", json!({"id": id}));
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED");
    assert!(
        alive(harness),
        "the harness ignores SIGINT, so it is still there during the grace"
    );
    let task = run.wait_task(&id, Duration::from_secs(40), |_| true);
    assert!(
        wait_until(Duration::from_secs(40), || !alive(harness)),
        "killed after the grace"
    );
    assert!(
        wait_until(LONG, || !alive(grandchild)),
        "and so is its grandchild in its own session"
    );
    let _ = task;
    // The ending is recorded once the attempt is over: after the kill, the sweep and the trace.
    let mut task = Value::Null;
    assert!(wait_until(LONG, || {
        task = run.rpc("GetTask", json!({"id": id}))["result"].clone();
        !task["status"]["message"].is_null()
    }));
    assert_eq!(task["status"]["state"], "TASK_STATE_CANCELED");
    assert_eq!(
        task["status"]["message"]["parts"][0]["text"],
        "task canceled; the harness was killed and its session may not resume cleanly"
    );
    let exit = home
        .trace(&run.session)
        .into_iter()
        .find(|e| e["event_type"] == "harness_exit")
        .unwrap();
    assert_eq!(
        (exit["cause"].as_str(), exit["killed"].as_bool()),
        (Some("canceled"), Some(true))
    );
}

#[test]
fn the_harness_session_is_resumed_on_the_same_context() {
    let home = Home::new();
    let f = Fixture {
        dialect: "stream-json",
        ..Fixture::default()
    };
    let run = fixture_launch(&home, f, &[]);
    let ask = |ctx: &str| {
        let mut p = message("hello", false);
        p["message"]["contextId"] = json!(ctx);
        run.rpc("SendMessage", p)["result"]["task"]["artifacts"][0]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let first = ask("ctx-a");
    assert!(first.ends_with("resumed=no prompts=1"), "{first}");
    let session = first.split_whitespace().next().unwrap().to_owned();
    let second = ask("ctx-a");
    assert_eq!(second, format!("{session} resumed=yes prompts=2"));
    let other = ask("ctx-b");
    assert!(
        other.ends_with("resumed=no prompts=1"),
        "another context starts fresh: {other}"
    );
    let modes: Vec<String> = home
        .trace(&run.session)
        .iter()
        .filter(|e| e["event_type"] == "harness_start")
        .map(|e| e["session_mode"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(modes, ["new", "resume", "new"]);
    // forgetSession drops the context's harness session for that one task.
    let mut p = message("hello", false);
    p["message"]["contextId"] = json!("ctx-a");
    p["message"]["metadata"] = json!({DOOR_URI: {"forgetSession": true}});
    let resp = run.post(
        &json!({"jsonrpc": "2.0", "id": 9, "method": "SendMessage", "params": p}).to_string(),
        &[("A2A-Version", "1.0")],
    );
    assert_eq!(resp.header("a2a-extensions"), Some(DOOR_URI));
    let fresh = resp.json()["result"]["task"]["artifacts"][0]["parts"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(fresh.ends_with("resumed=no prompts=1"), "{fresh}");
    let forgot = home
        .trace(&run.session)
        .into_iter()
        .find(|e| e["event_type"] == "harness_session_forgotten")
        .unwrap();
    assert_eq!(forgot["context_id"], "ctx-a");
    assert_eq!(forgot["requested_by"], "a2a");
    assert_eq!(
        format!("session={}", forgot["harness_session"].as_str().unwrap()),
        session
    );
}

#[test]
fn harness_failure_names_the_exit_status_and_last_stderr_line() {
    let home = Home::new();
    let run = fixture_launch(&home, Fixture::default(), &[]);
    let task =
        run.send("@stderr first\n@stderr it broke\n@exit 3", false)["result"]["task"].clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED");
    assert_eq!(
        task["status"]["message"]["parts"][0]["text"],
        "the harness exited with status 3: it broke"
    );
    assert!(task.get("artifacts").is_none());
    let failed = home
        .trace(&run.session)
        .into_iter()
        .find(|e| e["event_type"] == "task_failed")
        .unwrap();
    assert_eq!(
        failed["cause"],
        "the harness exited with status 3: it broke"
    );
}

#[test]
fn the_harness_gets_its_environment() {
    let home = Home::new();
    let run = fixture_launch(&home, Fixture::default(), &[]);
    let mut p = message("@env", false);
    p["message"]["contextId"] = json!("ctx-env");
    let task = run.rpc("SendMessage", p)["result"]["task"].clone();
    let env: serde_json::Value =
        serde_json::from_str(task["artifacts"][0]["parts"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(env["MURMUR_SESSION_ID"], run.session.as_str());
    assert_eq!(env["MURMUR_TASK_ID"], task["id"]);
    assert_eq!(env["MURMUR_CONTEXT_ID"], "ctx-env");
    assert!(env["MURMUR_MESSAGE_ID"]
        .as_str()
        .unwrap()
        .starts_with("msg-"));
    assert_eq!(
        env["MURMUR_DOOR_URL"],
        format!("http://localhost:{}", run.port)
    );
    assert_eq!(env["MURMUR_TASK_TOKEN"].as_str().unwrap().len(), 64);
    assert!(std::path::Path::new(env["MURMUR_GUIDE"].as_str().unwrap()).is_file());
    assert!(env.get("MURMUR_HARNESS_SESSION").is_none());
    for internal in ["MURMUR_CAPSULE_CONFIG", "MURMUR_LISTEN_FD"] {
        assert!(
            env.get(internal).is_none(),
            "{internal} is the capsule's own business"
        );
    }
    // Nothing but the harness's own pipes: the door's listening socket is not inherited.
    let fds = run.send("@fds", false)["result"]["task"]["artifacts"][0]["parts"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(fds.lines().count() >= 3, "{fds}");
    assert!(
        !fds.contains("socket:"),
        "the harness inherited a socket:\n{fds}"
    );
    // The token never reaches the trace.
    let trace = std::fs::read_to_string(home.records(&run.session).join("trace.jsonl")).unwrap();
    assert!(!trace.contains(env["MURMUR_TASK_TOKEN"].as_str().unwrap()));
}

#[test]
fn request_input_waits_in_input_required_and_resumes_with_the_reply() {
    let home = Home::new();
    let run = fixture_launch(&home, Fixture::default(), &[]);
    let mut p = message("@ask Which branch?", false);
    p["message"]["contextId"] = json!("ctx-ask");
    let paused = run.rpc("SendMessage", p)["result"]["task"].clone();
    assert_eq!(paused["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(
        paused["artifacts"],
        json!([{"artifactId": "prompt", "name": "prompt", "parts": [{"text": "Which branch?", "mediaType": "text/plain"}]}])
    );
    let mut reply = message("main", false);
    reply["message"]["taskId"] = paused["id"].clone();
    reply["message"]["contextId"] = json!("ctx-ask");
    let done = run.rpc("SendMessage", reply)["result"]["task"].clone();
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(done["artifacts"][0]["parts"][0]["text"], "reply: main");
}

#[test]
fn a_pinned_port_that_is_taken_fails_with_e_run_010() {
    let home = Home::new();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let extra: &'static str =
        Box::leak(format!("network:\n  internal_port: {port}\n").into_boxed_str());
    let manifest = home.write(
        "capsule/murmur.yaml",
        &Fixture {
            extra,
            ..Fixture::default()
        }
        .yaml(),
    );
    let (code, out, err) = home.run(&["run", "--manifest", manifest.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert_eq!(out, "");
    let mut lines = err.lines();
    assert_eq!(
        lines.next(),
        Some(format!("error[E-RUN-010]: port {port} is already in use").as_str())
    );
    assert!(lines.next().unwrap().starts_with("  hint: "), "{err}");
    drop(taken);
    // Free again, the same pin is served on exactly that port.
    let run = Launch::start(&home, &manifest, &[]);
    assert_eq!(run.port, port);
}

#[test]
fn bad_manifests_are_refused_with_a_key_path_and_start_nothing() {
    let home = Home::new();
    let typo = Fixture::default()
        .yaml()
        .replace("task_acceptance:", "task_acceptence:");
    let cases: Vec<(String, &str, &str)> = vec![
        (typo, "E-MAN-003", "lifecycle.task_acceptence"),
        ("name: x\nversion: [\n".to_owned(), "E-MAN-002", "line"),
        (
            Fixture::default()
                .yaml()
                .replace("queue_depth: 2", "queue_depth: lots"),
            "E-MAN-005",
            "lifecycle.queue_depth",
        ),
        (
            Fixture::default().yaml() + "network:\n  internal_port: ${MURMUR_TEST_UNSET_PORT}\n",
            "E-MAN-006",
            "MURMUR_TEST_UNSET_PORT",
        ),
    ];
    for (yaml, code, names) in cases {
        let path = home.write("bad/murmur.yaml", &yaml);
        let (status, out, err) = home.run(&["run", "--manifest", path.to_str().unwrap()]);
        assert_eq!(status, 1, "{err}");
        assert_eq!(out, "", "nothing announced");
        assert!(
            err.starts_with(&format!("error[{code}]: ")),
            "{code}: {err}"
        );
        assert!(err.contains("bad/murmur.yaml"), "names the file: {err}");
        assert!(err.contains(names), "names {names}: {err}");
        assert!(err.contains("\n  hint: "), "{err}");
    }
    assert!(
        !home.home.join("run").exists()
            || std::fs::read_dir(home.home.join("run"))
                .unwrap()
                .next()
                .is_none()
    );
}

#[test]
fn ps_stop_and_cancel_from_the_command_line_leave_nothing_running() {
    let home = Home::new();
    let run = fixture_launch(&home, Fixture::default(), &[]);
    let (code, out, _) = home.run(&["ps"]);
    assert_eq!(code, 0);
    assert!(
        out.contains(&run.session) && out.contains("@1") && out.contains("running"),
        "{out}"
    );
    let record = home.home.join("run").join(format!("{}.json", run.session));
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&record).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);

    // mur cancel: a finished task is nothing to cancel; a running one is canceled.
    let done = run.send("quick", false)["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let suffix = &run.session[run.session.len() - 6..];
    let (code, out, _) = home.run(&["cancel", suffix, &done]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        format!("nothing to cancel: task {done} is already TASK_STATE_COMPLETED\n")
    );
    let pidfile = home.root.join("h.pid");
    let long = run.start_task(&format!("@pidfile {}\n@sleep 60", pidfile.display()));
    wait_pid(&pidfile);
    let (code, out, _) = home.run(&["cancel", "@1", &long]);
    assert_eq!((code, out), (0, format!("canceled: {long}\n")));
    let (code, _, err) = home.run(&["cancel", "@1", "tsk_nope"]);
    assert_eq!(code, 1);
    assert!(
        err.starts_with("error[E-CLI-011]") && err.contains("-32001"),
        "{err}"
    );

    // mur stop: StopSession's account, then the whole launch ends.
    let child = home.root.join("gc.pid");
    let live = run.start_task(&format!("@grandchild {}\n@sleep 60", child.display()));
    let grandchild = wait_pid(&child);
    let supervisor = run.pid();
    let below = descendants(supervisor);
    assert!(!below.is_empty());
    let (code, out, err) = home.run(&["stop", "@1"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, format!("canceled: {live}\nstopped: {}\n", run.session));
    assert!(wait_until(LONG, || !alive(supervisor)));
    for pid in below.iter().chain([&grandchild]) {
        assert!(!alive(*pid), "process {pid} outlived mur stop");
    }
    assert!(!record.exists(), "the running record is removed");
    let (_, out, _) = home.run(&["ps"]);
    assert_eq!(out, "no capsule is running\n");
    let (code, out, _) = home.run(&["trace", "show"]);
    assert_eq!(code, 0);
    assert!(
        out.contains(&format!("session:    {}", run.session)) && out.contains("── Harness"),
        "{out}"
    );
}

#[test]
fn ctrl_c_stops_the_launch_cleanly() {
    let home = Home::new();
    let run = fixture_launch(&home, Fixture::default(), &[]);
    let child = home.root.join("gc.pid");
    run.send(&format!("@grandchild {}\n@sleep 60", child.display()), true);
    let grandchild = wait_pid(&child);
    let below = descendants(run.pid());
    let mut run = run;
    signal(run.pid(), 2);
    assert_eq!(run.wait_exit(LONG), Some(0), "a clean stop exits 0");
    for pid in below.iter().chain([&grandchild]) {
        assert!(!alive(*pid), "process {pid} outlived the launch");
    }
    let trace = home.trace(&run.session);
    assert_eq!(trace.last().unwrap()["event_type"], "session_end");
}

#[test]
fn run_takes_the_task_from_a_file_and_prints_json_when_asked() {
    let home = Home::new();
    let task = home.write("task.md", "First line of the file\nsecond line\n");
    let manifest = repo_root().join("manifests/worker.yaml");
    let (code, out, err) = home.run(&[
        "run",
        "--manifest",
        manifest.to_str().unwrap(),
        "--task",
        task.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let mut lines = out.lines();
    let announced: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    for key in ["url", "pid", "session_id", "name", "version", "workdir"] {
        assert!(
            announced.get(key).is_some(),
            "{key} missing from {announced}"
        );
    }
    assert_eq!(announced["name"], "worker");
    assert_eq!(announced["workdir"], home.work.to_str().unwrap());
    assert!(announced["url"]
        .as_str()
        .unwrap()
        .starts_with("http://localhost:"));
    assert_eq!(lines.next(), Some("Acknowledged: First line of the file"));
    assert!(lines.next().unwrap().starts_with("(7 words on 2 lines"));
}

#[test]
fn a_harness_that_cannot_start_fails_its_task_and_the_launch() {
    let home = Home::new();
    let once = Fixture {
        after_task: "exit",
        ..Fixture::single()
    };
    let yaml = once.yaml().replace(
        "command: [\"python3\",",
        "command: [\"murmur-no-such-harness\",",
    );
    let manifest = home.write("capsule/murmur.yaml", &yaml);
    let (code, out, err) = home.run(&[
        "run",
        "--manifest",
        manifest.to_str().unwrap(),
        "--task",
        "hi",
    ]);
    assert_eq!(code, 1, "the launch's task did not complete");
    assert_eq!(out.lines().count(), 2, "only the announcement: {out}");
    assert!(
        err.contains("task failed: the harness murmur-no-such-harness could not start"),
        "{err}"
    );
}

#[test]
fn trace_show_takes_every_kind_of_session_address() {
    let home = Home::new();
    let manifest = repo_root().join("manifests/worker.yaml");
    let mut sessions = Vec::new();
    for n in 0..2 {
        let (code, out, _) = home.run(&[
            "run",
            "--manifest",
            manifest.to_str().unwrap(),
            "--task",
            &format!("task {n}"),
        ]);
        assert_eq!(code, 0);
        sessions.push(
            out.lines()
                .nth(1)
                .unwrap()
                .strip_prefix("session: ")
                .unwrap()
                .to_owned(),
        );
    }
    let header = |s: &str| format!("session:    {s}");
    let trace_path = home.records(&sessions[0]).join("trace.jsonl");
    let cases = [
        (vec!["trace", "show"], &sessions[1]),
        (vec!["trace", "show", "@1"], &sessions[1]),
        (vec!["trace", "show", "@2"], &sessions[0]),
        (
            vec!["trace", "show", &sessions[0][sessions[0].len() - 8..]],
            &sessions[0],
        ),
        (vec!["trace", "show", sessions[1].as_str()], &sessions[1]),
        (
            vec!["trace", "show", trace_path.to_str().unwrap()],
            &sessions[0],
        ),
    ];
    for (args, want) in cases {
        let (code, out, err) = home.run(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(out.contains(&header(want)), "{args:?}: {out}");
        assert!(
            out.contains("── Tasks") && out.contains("task 1  tsk_") && out.contains("ok"),
            "{out}"
        );
    }
    let (code, _, err) = home.run(&["trace", "show", "@3"]);
    assert_eq!(code, 1);
    assert!(err.starts_with("error[E-CLI-001]: "), "{err}");
    let elsewhere = home.root.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let (code, out, _) = home.run(&["trace", "show", "--workdir", home.work.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(out.contains(&header(&sessions[1])));
    let (code, _, err) = home.run(&["trace", "show", "--workdir", elsewhere.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("no session was recorded"), "{err}");
}

#[test]
fn watch_prints_one_line_per_event() {
    let home = Home::new();
    let run = fixture_launch(&home, Fixture::default(), &[]);
    let mut watch = home
        .mur()
        .args(["watch", "@1"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = watch.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    assert_eq!(rx.recv_timeout(LONG).unwrap(), "[connection-ack]");
    let id = run.send("hello", false)["result"]["task"]["id"]
        .as_str()
        .unwrap()[..12]
        .to_owned();
    let mut lines = Vec::new();
    while lines.len() < 4 {
        lines.push(rx.recv_timeout(LONG).unwrap());
    }
    assert_eq!(
        lines,
        [
            format!("{id}  submitted"),
            format!("{id}  working"),
            format!("{id}  response: Acknowledged."),
            format!("{id}  completed: task completed"),
        ]
    );
    let _ = watch.kill();
    let _ = watch.wait();
}

#[test]
fn install_reports_what_each_artifact_resolves_to() {
    let home = Home::new();
    let worker = repo_root().join("manifests/worker.yaml");
    let (code, out, err) = home.run(&["install", "--manifest", worker.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("ok       local/driver-worker 0.1.0: /"),
        "{out}"
    );
    let missing = home.write(
        "m/murmur.yaml",
        &Fixture::default().yaml().replace(
            "command: [\"python3\",",
            "command: [\"murmur-no-such-cli\",",
        ),
    );
    let (code, out, err) = home.run(&["install", "--manifest", missing.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        out.starts_with("missing  local/driver-fixture 0.1.0: murmur-no-such-cli is not on PATH"),
        "{out}"
    );
    assert!(
        err.starts_with("error[E-RUN-030]: 1 of 1 artifacts of fixture are missing"),
        "{err}"
    );
}

#[test]
fn a_capsule_that_starts_no_task_needs_no_driver() {
    let home = Home::new();
    let manifest = home.write(
        "observer/murmur.yaml",
        "name: observer\nversion: \"0.1.0\"\nlifecycle:\n  task_acceptance: none\n",
    );
    let run = Launch::start(&home, &manifest, &[]);
    let card = http(run.port, "GET", "/.well-known/agent-card.json", &[], b"").json();
    assert_eq!(
        card["capabilities"]["extensions"][0]["params"]["methods"],
        json!([
            "murmur.WatchSession",
            "GetTask",
            "ListTasks",
            "CancelTask",
            "murmur.StopSession"
        ])
    );
    assert_eq!(run.send("hi", false)["error"]["code"], -32601);
    assert_eq!(run.rpc("ListTasks", json!({}))["result"]["totalSize"], 0);
}

#[test]
fn the_claude_code_worker_drives_claude_as_its_preset_says() {
    let home = Home::new();
    // A stand-in `claude` on PATH: it logs its argv and speaks stream-json both ways through
    // scripts/harness/fake_claude.py.
    let log = home.root.join("argv.log");
    let fake = home.write(
        "bin/claude",
        &format!(
            "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\" | head -n 1; done > {log}.$$\necho >> {log}.$$\ncat {log}.$$ >> {log}\nexec python3 {} \"$@\"\n",
            repo_root().join("scripts/harness/fake_claude.py").display(),
            log = log.display()
        ),
    );
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", fake.parent().unwrap().display(), search_path());
    let manifest = repo_root().join("manifests/worker-claude-code.yaml");
    let run = Launch::start_env(&home, &manifest, &[], &[("PATH", path)]);
    let ask = || {
        let mut p = message("hello", false);
        p["message"]["contextId"] = json!("ctx-claude");
        run.rpc("SendMessage", p)["result"]["task"]["artifacts"][0]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let first = ask();
    let session = first
        .split_whitespace()
        .next()
        .unwrap()
        .strip_prefix("session=")
        .unwrap()
        .to_owned();
    assert!(ask().contains("resumed=yes prompts=2"));
    let calls = std::fs::read_to_string(&log).unwrap();
    let calls: Vec<Vec<&str>> = calls
        .split("\n\n")
        .filter(|c| !c.trim().is_empty())
        .map(|c| c.lines().collect())
        .collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        calls[0][..7],
        [
            "-p",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
            "--append-system-prompt"
        ]
    );
    assert_eq!(
        calls[0][7], "# Murmur capsule guide",
        "the guide rides as the system prompt"
    );
    // The manifest's harness level (read, the default) as Claude Code's own flags: murmur's
    // helpers allowed by the full path the guide writes and by name.
    let mur = mur_bin();
    let helpers = [
        "call-member",
        "delegate-task",
        "send-message",
        "request-input",
        "end-without-answer",
    ];
    let allowed: Vec<String> = ["mur", mur]
        .iter()
        .flat_map(|name| helpers.iter().map(move |h| format!("Bash({name} {h}:*)")))
        .collect();
    let allowed = allowed.join(",");
    let level = [
        "--permission-mode",
        "default",
        "--allowedTools",
        allowed.as_str(),
    ];
    assert_eq!(calls[0][8..12], level);
    assert_eq!(calls[0][12..], ["--model", "claude-sonnet-5"]);
    assert_eq!(calls[1][8..12], level);
    assert_eq!(
        calls[1][12..],
        ["--model", "claude-sonnet-5", "--resume", session.as_str()]
    );
}

#[test]
fn cancel_can_interrupt_through_stdin_bytes() {
    let home = Home::new();
    let yaml = format!(
        r#"name: inband
version: "0.1.0"
artifacts:
  - name: local/driver-inband
    runtime: driver
    process:
      command: ["python3", "{}", "--stdin-interrupt", "--prompt-arg"]
      prompt: arg
      interrupt: {{ stdin: "stop\n" }}
inference:
  transport: process
  driver: {{ artifact: local/driver-inband }}
lifecycle: {{ task_acceptance: queue, after_task: sleep }}
"#,
        fixture().display()
    );
    let manifest = home.write("inband/murmur.yaml", &yaml);
    let run = Launch::start(&home, &manifest, &[]);
    // The prompt arrives as the last argument; stdin stays open for the interrupt.
    let echo = run.send("@echo\nas an argument", false);
    assert_eq!(
        echo["result"]["task"]["artifacts"][0]["parts"][0]["text"],
        "@echo\nas an argument"
    );
    let pidfile = home.root.join("h.pid");
    let id = run.start_task(&format!("@pidfile {}\n@sleep 60", pidfile.display()));
    let harness = wait_pid(&pidfile);
    run.rpc("CancelTask", json!({"id": id}));
    assert!(
        wait_until(Duration::from_secs(5), || !alive(harness)),
        "the stdin bytes ended it"
    );
    assert!(wait_until(LONG, || home.trace(&run.session).iter().any(
        |e| e["event_type"] == "harness_exit" && e["task_id"] == id.as_str()
    )));
    let trace = home.trace(&run.session);
    let interrupt = trace
        .iter()
        .find(|e| e["event_type"] == "harness_interrupt")
        .unwrap();
    assert_eq!(interrupt["interrupt"], "stdin");
    let exit = trace
        .iter()
        .find(|e| e["event_type"] == "harness_exit" && e["task_id"] == id.as_str())
        .unwrap();
    assert_eq!(
        (exit["exit_code"].as_i64(), exit["killed"].as_bool()),
        (Some(130), Some(false))
    );
}

#[test]
fn a_driver_without_a_graceful_interrupt_has_its_harness_killed_at_once() {
    let home = Home::new();
    let run = fixture_launch(
        &home,
        Fixture {
            interrupt: "none",
            ..Fixture::default()
        },
        &[],
    );
    let pidfile = home.root.join("h.pid");
    let id = run.start_task(&format!("@pidfile {}\n@sleep 60", pidfile.display()));
    let harness = wait_pid(&pidfile);
    run.rpc("CancelTask", json!({"id": id}));
    assert!(
        wait_until(Duration::from_secs(5), || !alive(harness)),
        "no grace to wait out"
    );
    let task = run.wait_task(&id, LONG, |_| true);
    let said = wait_until(LONG, || {
        run.rpc("GetTask", json!({"id": id}))["result"]["status"]["message"]["parts"][0]["text"]
            == "task canceled; the harness was killed and its session may not resume cleanly"
    });
    assert!(said, "{task}");
    let trace = home.trace(&run.session);
    let interrupt = trace
        .iter()
        .find(|e| e["event_type"] == "harness_interrupt")
        .unwrap();
    assert_eq!(interrupt["interrupt"], "none");
}

#[test]
fn command_line_refusals_say_what_is_wrong() {
    let home = Home::new();
    let manifest = repo_root().join("manifests/worker.yaml");
    let (code, out, err) = home.run(&[
        "run",
        "--manifest",
        manifest.to_str().unwrap(),
        "--workdir",
        "/nonexistent/murmur",
        "--task",
        "x",
    ]);
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(
        err.starts_with(
            "error[E-RUN-020]: --workdir /nonexistent/murmur is not a folder\n  hint: "
        ),
        "{err}"
    );
    let (code, _, err) = home.run(&["request-input", "Which branch?"]);
    assert_eq!(code, 1);
    assert!(
        err.starts_with("error[E-CLI-020]: MURMUR_DOOR_URL is not set"),
        "{err}"
    );
    let (code, _, err) = home.run(&["stop", "@1"]);
    assert_eq!(code, 1);
    assert!(
        err.starts_with("error[E-CLI-001]: there is no @1: 0 running capsules"),
        "{err}"
    );
    let (code, _, err) = home.run(&["token"]);
    assert_eq!(code, 1);
    assert!(err.starts_with("error[E-CLI-001]"), "{err}");
}

#[test]
fn the_control_surface_takes_only_a_running_tasks_token() {
    let home = Home::new();
    let run = fixture_launch(&home, Fixture::default(), &[]);
    let post = |auth: Option<&str>, path: &str, body: &str| {
        let mut headers = vec![("Content-Type", "application/json")];
        if let Some(a) = auth {
            headers.push(("Authorization", a));
        }
        http(run.port, "POST", path, &headers, body.as_bytes())
    };
    let none = post(None, "/control/request-input", r#"{"question":"?"}"#);
    assert_eq!(
        (none.status, none.json()["error"].as_str()),
        (401, Some("invalid_token"))
    );
    let stranger = post(
        Some("Bearer 00"),
        "/control/request-input",
        r#"{"question":"?"}"#,
    );
    assert_eq!(stranger.status, 401);
    // A task's token is good only while it runs: an ended task's token is refused.
    let env = run.send("@env", false)["result"]["task"]["artifacts"][0]["parts"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    let env: serde_json::Value = serde_json::from_str(&env).unwrap();
    let token = format!("Bearer {}", env["MURMUR_TASK_TOKEN"].as_str().unwrap());
    let ended = post(
        Some(&token),
        "/control/request-input",
        r#"{"question":"?"}"#,
    );
    assert_eq!(ended.status, 401, "{}", ended.text());
    // A running task's token: the helper must be one that exists, with a question.
    let file = home.root.join("token");
    let live = run.start_task(&format!("@tokenfile {}\n@sleep 60", file.display()));
    assert!(wait_until(LONG, || file.exists()));
    let token = format!("Bearer {}", std::fs::read_to_string(&file).unwrap());
    let unknown = post(Some(&token), "/control/no-such-helper", "{}");
    assert_eq!(
        (unknown.status, unknown.json()["error"].as_str()),
        (404, Some("not_found"))
    );
    for body in ["not json", r#"{"question":""}"#, r#"{"question":7}"#] {
        let bad = post(Some(&token), "/control/request-input", body);
        assert_eq!(
            (bad.status, bad.json()["error"].as_str()),
            (400, Some("bad_request")),
            "{body}"
        );
    }
    assert_eq!(
        run.rpc("GetTask", json!({"id": live}))["result"]["status"]["state"],
        "TASK_STATE_WORKING"
    );
    run.rpc("CancelTask", json!({"id": live}));
    assert_eq!(
        run.rpc("ListTasks", json!({}))["result"]["totalSize"],
        2,
        "nothing else started"
    );
}

#[test]
fn a_task_canceled_while_it_waits_for_input_fails_its_request_input() {
    let home = Home::new();
    let run = fixture_launch(&home, Fixture::default(), &[]);
    let id = run.start_task("@ask Proceed?");
    run.wait_task(&id, LONG, |s| s == "TASK_STATE_INPUT_REQUIRED");
    let canceled = run.rpc("CancelTask", json!({"id": id}));
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED");
    assert!(
        canceled["result"].get("artifacts").is_none(),
        "the prompt is gone with the wait"
    );
    assert!(wait_until(LONG, || home.trace(&run.session).iter().any(
        |e| e["event_type"] == "task_end" && e["task_id"] == id.as_str()
    )));
    let task = run.rpc("GetTask", json!({"id": id}))["result"].clone();
    assert_eq!(
        task["status"]["state"], "TASK_STATE_CANCELED",
        "the cancel stands: {task}"
    );
    // The capsule goes on: the slot is free again.
    assert_eq!(
        run.send("next", false)["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}
