//! The process-driver presets end to end (DESIGN §6, §8): `murmur/driver-claude-code` against
//! `scripts/harness/fake_claude.py`, a stand-in that speaks Claude Code's stream-json protocol
//! both ways and, like the real CLI, does not stop a turn on SIGINT. A cancel must stop the turn
//! in band (a `control_request` line), without a kill; the context's next task resumes the
//! session; a harness that ignores the control line gets SIGINT after the short bound and is
//! killed after the grace. `murmur/driver-codex` against `scripts/harness/fake_codex.py`
//! (`codex exec --json`): SIGINT ends the turn without a kill, the context's next task resumes
//! the thread, and one that ignores SIGINT is killed after the grace. These fakes hold the
//! failure paths the real CLIs cannot be made to take (a harness that ignores its interrupt);
//! tests/agent_clis.rs runs the presets against the real `claude` and `codex`.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};
use support::*;

const LONG: Duration = Duration::from_secs(30);

const MANIFEST: &str = r#"name: cc
version: "0.1.0"
artifacts:
  - name: murmur/driver-claude-code
    version: "0.1.0"
    runtime: driver
inference:
  transport: process
  driver: { artifact: murmur/driver-claude-code }
lifecycle: { task_acceptance: queue, after_task: sleep, queue_depth: 1 }
"#;

/// A folder holding `claude`, a link to the fake, and a PATH with that folder first.
fn fake_on_path(home: &Home) -> String {
    let bin = home.root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let fake = repo_root().join("scripts/harness/fake_claude.py");
    std::os::unix::fs::symlink(fake, bin.join("claude")).unwrap();
    format!("{}:{}", bin.display(), search_path())
}

struct Fake {
    home: Home,
    run: Launch,
    log: PathBuf,
}

fn launch(extra: &[(&str, String)]) -> Fake {
    let home = Home::new();
    let log = home.root.join("stdin.log");
    let manifest = home.write("murmur.yaml", MANIFEST);
    let mut env = vec![
        ("PATH", fake_on_path(&home)),
        ("FAKE_CLAUDE_LOG", log.display().to_string()),
    ];
    env.extend(extra.iter().cloned());
    let run = Launch::start_env(&home, &manifest, &[], &env);
    Fake { home, run, log }
}

impl Fake {
    /// Starts a task (in `context`, when given) and answers its id.
    fn start(&self, text: &str, context: Option<&str>) -> String {
        let mut params = message(text, true);
        if let Some(c) = context {
            params["message"]["contextId"] = json!(c);
        }
        let resp = self.run.rpc("SendMessage", params);
        resp["result"]["task"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("no task started: {resp}"))
            .to_owned()
    }

    fn answer_of(task: &Value) -> String {
        let parts = task["artifacts"][0]["parts"].as_array().cloned();
        parts
            .unwrap_or_default()
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("")
    }

    fn events(&self, kind: &str, task: &str) -> Vec<Value> {
        self.home
            .trace(&self.run.session)
            .into_iter()
            .filter(|e| e["event_type"] == kind && e["task_id"] == task)
            .collect()
    }

    fn stdin_lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

#[test]
fn claude_code_cancel_stops_the_turn_in_band_and_the_context_resumes() {
    let f = launch(&[]);
    // A first task completes: the answer is the result line, and the harness exits once its
    // stdin closes after that line (a stream-json harness otherwise waits for more input).
    let first = f.start("hello", None);
    let done = f
        .run
        .wait_task(&first, LONG, |s| s == "TASK_STATE_COMPLETED");
    let answer = Fake::answer_of(&done);
    assert!(answer.contains("resumed=no prompts=1"), "{done}");
    let session = answer
        .split_whitespace()
        .find_map(|w| w.strip_prefix("session="))
        .unwrap()
        .to_owned();
    let context = done["contextId"].as_str().unwrap().to_owned();
    assert_eq!(
        f.stdin_lines()[0],
        r#"{"type":"user","message":{"role":"user","content":"hello"}}"#,
        "the task goes in as one user-message line"
    );

    // A busy turn in the same context, canceled.
    let pidfile = f.home.root.join("busy.pid");
    let busy = f.start(
        &format!("@pidfile {}\n@sleep 60", pidfile.display()),
        Some(&context),
    );
    let harness = wait_pid(&pidfile);
    let canceled = f.run.rpc("CancelTask", json!({"id": busy}));
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED");
    assert!(
        wait_until(Duration::from_secs(5), || !alive(harness)),
        "the harness ended"
    );
    // The in-band interrupt ended the turn: one control_request, no SIGINT fallback, no kill
    // (checked below from the trace, not from a clock).
    assert!(wait_until(LONG, || !f
        .events("harness_exit", &busy)
        .is_empty()));
    let exit = &f.events("harness_exit", &busy)[0];
    assert_eq!(
        (exit["cause"].as_str(), exit["killed"].as_bool()),
        (Some("canceled"), Some(false)),
        "{exit}"
    );
    let sent = f.events("harness_interrupt", &busy);
    assert_eq!(sent.len(), 1, "no fallback: {sent:?}");
    assert_eq!(sent[0]["interrupt"], "control_request");
    assert_eq!(sent[0]["grace_ms"], 1000);
    assert!(sent[0].get("fallback_for").is_none());
    let request_id = sent[0]["request_id"].as_str().unwrap();
    let line = format!(
        r#"{{"type":"control_request","request_id":"{request_id}","request":{{"subtype":"interrupt"}}}}"#
    );
    let lines = f.stdin_lines();
    assert!(lines.contains(&line), "{lines:?}");
    assert!(!lines.iter().any(|l| l == "SIGINT"), "{lines:?}");
    let task = f.run.rpc("GetTask", json!({"id": busy}));
    assert_eq!(task["result"]["status"]["state"], "TASK_STATE_CANCELED");

    // The next task in the context resumes the session: the fake has seen three prompts in it.
    let next = f.start("again", Some(&context));
    let done = f
        .run
        .wait_task(&next, LONG, |s| s == "TASK_STATE_COMPLETED");
    let answer = Fake::answer_of(&done);
    assert!(
        answer.contains(&format!("session={session} resumed=yes prompts=3")),
        "{done}"
    );
    let start = &f.events("harness_start", &next)[0];
    assert_eq!(start["session_mode"], "resume", "{start}");
}

#[test]
fn claude_code_that_ignores_the_control_line_gets_sigint_then_the_kill() {
    let f = launch(&[("FAKE_CLAUDE_IGNORE_CONTROL", "1".to_owned())]);
    let pidfile = f.home.root.join("busy.pid");
    let busy = f.start(&format!("@pidfile {}\n@sleep 60", pidfile.display()), None);
    let harness = wait_pid(&pidfile);
    let canceled = f.run.rpc("CancelTask", json!({"id": busy}));
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED");
    assert!(wait_until(LONG, || !alive(harness)), "the harness ended");
    // The fake ignores both interrupts, so only the kill after the grace ends it: the trace
    // below shows both interrupts and the kill.
    assert!(wait_until(LONG, || !f
        .events("harness_exit", &busy)
        .is_empty()));
    let exit = &f.events("harness_exit", &busy)[0];
    assert_eq!(
        (exit["cause"].as_str(), exit["killed"].as_bool()),
        (Some("canceled"), Some(true)),
        "{exit}"
    );
    let sent = f.events("harness_interrupt", &busy);
    let kinds: Vec<_> = sent
        .iter()
        .map(|e| {
            (
                e["interrupt"].clone(),
                e["grace_ms"].clone(),
                e["fallback_for"].clone(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            (json!("control_request"), json!(1000), Value::Null),
            (json!("sigint"), json!(10000), json!("control_request")),
        ]
    );
    let lines = f.stdin_lines();
    assert!(
        lines
            .iter()
            .any(|l| l.contains(r#""type":"control_request""#)),
        "{lines:?}"
    );
    assert!(
        lines.iter().any(|l| l == "SIGINT"),
        "the fallback SIGINT reached the harness: {lines:?}"
    );
}

// --- Codex: `codex exec --json`, interrupted by SIGINT, resumed with `exec resume <id>`. ---

const CODEX: &str = r#"name: cx
version: "0.1.0"
artifacts:
  - name: murmur/driver-codex
    version: "0.1.0"
    runtime: driver
inference:
  transport: process
  driver: { artifact: murmur/driver-codex }
lifecycle: { task_acceptance: queue, after_task: sleep, queue_depth: 1 }
"#;

/// `mur run` of a Codex worker with `scripts/harness/fake_codex.py` on PATH as `codex`.
fn codex(extra: &[(&str, String)]) -> (Home, Launch) {
    let home = Home::new();
    let bin = home.root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let fake = repo_root().join("scripts/harness/fake_codex.py");
    std::os::unix::fs::symlink(fake, bin.join("codex")).unwrap();
    let path = format!("{}:{}", bin.display(), search_path());
    let manifest = home.write("murmur.yaml", CODEX);
    let mut env = vec![("PATH", path)];
    env.extend(extra.iter().cloned());
    let run = Launch::start_env(&home, &manifest, &[], &env);
    (home, run)
}

fn exit_of(home: &Home, run: &Launch, task: &str) -> Value {
    let mut found = None;
    assert!(wait_until(LONG, || {
        found = home
            .trace(&run.session)
            .into_iter()
            .find(|e| e["event_type"] == "harness_exit" && e["task_id"] == task);
        found.is_some()
    }));
    found.unwrap()
}

#[test]
fn codex_cancel_ends_the_turn_on_sigint_and_the_thread_resumes() {
    let (home, run) = codex(&[]);
    let first = run.send("hello", false)["result"]["task"].clone();
    assert_eq!(first["status"]["state"], "TASK_STATE_COMPLETED", "{first}");
    let answer = Fake::answer_of(&first);
    assert!(answer.contains("resumed=no prompts=1"), "{answer}");
    let thread = answer.split_whitespace().next().unwrap().to_owned();
    let context = first["contextId"].as_str().unwrap().to_owned();

    let pidfile = home.root.join("codex.pid");
    let mut params = message(&format!("@pidfile {}\n@sleep 60", pidfile.display()), true);
    params["message"]["contextId"] = json!(context);
    let busy = run.rpc("SendMessage", params)["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let harness = wait_pid(&pidfile);
    let canceled = run.rpc("CancelTask", json!({"id": busy}));
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED");
    assert!(wait_until(LONG, || !alive(harness)));
    // SIGINT ended the turn, not the kill after the grace: `killed: false` below.
    let exit = exit_of(&home, &run, &busy);
    assert_eq!(
        (exit["cause"].as_str(), exit["killed"].as_bool()),
        (Some("canceled"), Some(false)),
        "{exit}"
    );

    // The context's next task continues the same thread (`exec resume <id>`).
    let mut params = message("again", false);
    params["message"]["contextId"] = json!(context);
    let next = run.rpc("SendMessage", params)["result"]["task"].clone();
    let answer = Fake::answer_of(&next);
    assert!(
        answer.starts_with(&thread) && answer.contains("resumed=yes"),
        "{answer}"
    );
}

#[test]
fn a_codex_that_ignores_sigint_is_killed_after_the_grace() {
    let (home, run) = codex(&[("FAKE_CODEX_IGNORE_SIGINT", "1".into())]);
    let pidfile = home.root.join("codex.pid");
    let busy = run.start_task(&format!("@pidfile {}\n@sleep 60", pidfile.display()));
    let harness = wait_pid(&pidfile);
    let canceled = run.rpc("CancelTask", json!({"id": busy}));
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED");
    let exit = exit_of(&home, &run, &busy);
    assert_eq!(exit["killed"], true, "{exit}");
    assert!(!alive(harness));
    let interrupt = home
        .trace(&run.session)
        .into_iter()
        .find(|e| e["event_type"] == "harness_interrupt" && e["task_id"] == busy.as_str())
        .unwrap();
    assert_eq!(interrupt["interrupt"], "sigint");
}
