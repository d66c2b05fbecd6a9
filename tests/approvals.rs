//! Approvals over A2A (docs/agent-clis.md "Approvals") with the real `claude` CLI against the
//! fake Anthropic provider (tests/support/clis.rs): the shipped Claude Code worker at
//! `permissions: read, approvals: ask` is asked to `RUN touch …`, which its level does not
//! allow. Claude Code asks through its control protocol (`--permission-prompt-tool stdio`), the
//! task waits in TASK_STATE_INPUT_REQUIRED with the approval data part, and `mur approve` /
//! `mur deny`, a rule, the timeout or a cancel answers. Who may answer is checked with each
//! credential the door knows. Every refusal's exact code and message is checked.

#[path = "support/clients.rs"]
mod clients;
#[path = "support/clis.rs"]
mod clis;
#[path = "support/fake_provider.rs"]
mod fake_provider;
#[path = "support/screen.rs"]
mod screen;
mod support;

use clis::*;
use screen::Screen;
use serde_json::{json, Value};
use support::*;

/// The shipped `manifest` (a worker), asking, on a door with a declared credential `client`
/// besides the operator; `harness` adds to the approval keys.
fn asking(home: &Home, manifest: &str, harness: &str) -> std::path::PathBuf {
    let shipped = std::fs::read_to_string(shipped(manifest)).unwrap();
    let text = format!(
        "{shipped}\nharness:\n  approvals: ask\n{harness}\nnetwork:\n  authentication:\n    \
         scheme: bearer\n    credentials:\n      client: {{ scopes: [SendMessage, GetTask, ListTasks, \
         CancelTask] }}\n"
    );
    home.write("asking/murmur.yaml", &text)
}

/// A session's tokens by credential, as `mur token` prints them.
fn tokens(home: &Home, session: &str) -> Vec<(String, String)> {
    let (code, out, err) = home.run(&["token", session]);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(c, t)| (c.to_owned(), t.to_owned()))
        .collect()
}

fn token_of<'t>(tokens: &'t [(String, String)], credential: &str) -> &'t str {
    &tokens.iter().find(|(c, _)| c == credential).unwrap().1
}

/// A door and the tokens to call it with.
struct Door<'w> {
    world: &'w World,
    run: Launch,
    tokens: Vec<(String, String)>,
}

impl Door<'_> {
    fn call(&self, credential: &str, method: &str, params: Value) -> Value {
        bearer_rpc(
            self.run.port,
            token_of(&self.tokens, credential),
            method,
            params,
        )
    }

    /// Starts `text` as `credential`'s task; answers its id.
    fn start(&self, credential: &str, text: &str) -> String {
        let resp = self.call(credential, "SendMessage", message(text, true));
        resp["result"]["task"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("no task started: {resp}"))
            .to_owned()
    }

    fn task(&self, id: &str) -> Value {
        self.call("operator", "GetTask", json!({"id": id}))["result"].clone()
    }

    /// Waits (bounded) until the task's state ends with `state`.
    fn wait(&self, id: &str, state: &str) -> Value {
        let mut last = Value::Null;
        let reached = wait_until(LONG, || {
            last = self.task(id);
            last["status"]["state"]
                .as_str()
                .is_some_and(|s| s.ends_with(state))
        });
        assert!(reached, "task {id} never reached {state}; last seen {last}");
        last
    }

    fn mur(&self, args: &[&str]) -> (i32, String, String) {
        self.world.home.run(args)
    }

    fn trace(&self, event: &str) -> Vec<Value> {
        self.world
            .home
            .trace(&self.run.session)
            .into_iter()
            .filter(|e| e["event_type"] == event)
            .collect()
    }
}

fn launch<'w>(world: &'w World, harness: &str) -> Door<'w> {
    launch_of(world, "worker-claude-code.yaml", harness)
}

fn launch_of<'w>(world: &'w World, manifest: &str, harness: &str) -> Door<'w> {
    let run = world.launch(&asking(&world.home, manifest, harness));
    let tokens = tokens(&world.home, &run.session);
    Door { world, run, tokens }
}

/// A reply naming the task, as its caller would send it.
fn reply(task: &Value, parts: Value) -> Value {
    json!({"message": {"messageId": "msg-reply", "role": "ROLE_USER",
        "taskId": task["id"], "contextId": task["contextId"], "parts": parts},
        "configuration": {"returnImmediately": true}})
}

#[test]
fn claude_code_asks_and_the_operator_answers_with_mur_approve_and_mur_deny() {
    let Some(bin) = clis() else { return };
    let world = World::new(&bin);
    let door = launch(&world, "  approve: [\"Bash(touch ruled.txt)\"]\n");
    let work = world.home.work.clone();

    // A rule approves without asking.
    let ruled = door.start("operator", "RUN touch ruled.txt");
    let done = door.wait(&ruled, "COMPLETED");
    assert!(work.join("ruled.txt").exists(), "{done}");
    let answered = door.trace("approval_answered");
    assert_eq!(answered.len(), 1, "{answered:?}");
    assert_eq!(answered[0]["decision"], "approve");
    assert_eq!(answered[0]["by"], "rule");
    assert_eq!(
        answered[0]["rule"],
        "harness.approve[0] \"Bash(touch ruled.txt)\""
    );

    // Unruled: the task waits, showing the question three ways.
    let asked = door.start("client", "RUN touch approved.txt");
    let waiting = door.wait(&asked, "INPUT_REQUIRED");
    let sentence = "Claude Code asks to run Bash: touch approved.txt";
    let parts = &waiting["status"]["message"]["parts"];
    assert_eq!(parts[0]["text"], sentence, "{waiting}");
    let data = &parts[1]["data"];
    assert_eq!(keys_of(data), ["kind", "approval_id", "tool", "input"]);
    assert_eq!(data["kind"], "approval");
    assert_eq!(data["tool"], "Bash");
    assert_eq!(data["input"]["command"], "touch approved.txt");
    let approval = data["approval_id"].as_str().unwrap().to_owned();
    assert!(
        capsule::ids::is_well_formed(&approval, "apr_"),
        "{approval}"
    );
    assert_eq!(waiting["artifacts"][0]["artifactId"], "prompt");
    assert_eq!(waiting["artifacts"][0]["parts"][0]["text"], sentence);
    assert!(!work.join("approved.txt").exists());

    // The task's own caller may not answer (approvals_from: operator): not found, as for a task
    // it does not see, and the question stays open.
    let by_caller = door.call(
        "client",
        "SendMessage",
        reply(&waiting, json!([{"text": "approve"}])),
    );
    assert_eq!(by_caller["error"]["code"], -32001, "{by_caller}");
    let nobody = "tsk_0000000000007000800000000000000a";
    let unknown = door.call(
        "client",
        "SendMessage",
        reply(
            &json!({"id": nobody, "contextId": waiting["contextId"]}),
            json!([{"text": "approve"}]),
        ),
    );
    assert_eq!(by_caller["error"]["message"], "Task not found");
    assert_eq!(
        by_caller["error"].to_string(),
        unknown["error"].to_string().replace(nobody, &asked),
        "the same as for a task it does not see"
    );
    // The operator's reply that is no answer: -32602, the question still open.
    let unclear = door.call(
        "operator",
        "SendMessage",
        reply(&waiting, json!([{"text": "sure"}])),
    );
    assert_eq!(unclear["error"]["code"], -32602, "{unclear}");
    assert_eq!(
        unclear["error"]["message"],
        format!(
            "Invalid params: task {asked} waits for approval {approval}; the reply is neither \
             approve nor deny. Answer approve or deny as text (a reason may follow), or as a data \
             part {{\"approval_id\": \"{approval}\", \"decision\": \"approve\" | \"deny\", \
             \"reason\": \"…\"}}"
        )
    );
    let wrong_id = door.call(
        "operator",
        "SendMessage",
        reply(
            &waiting,
            json!([{"data": {"approval_id": "apr_other", "decision": "approve"}}]),
        ),
    );
    assert_eq!(wrong_id["error"]["code"], -32602, "{wrong_id}");
    assert!(wrong_id["error"]["message"]
        .as_str()
        .unwrap()
        .contains(&format!(
            "the data part names approval \"apr_other\", and the question open is {approval}"
        )));
    assert_eq!(
        door.task(&asked)["status"]["state"],
        "TASK_STATE_INPUT_REQUIRED"
    );

    // `mur approve` answers the one open question; the CLI runs the command.
    let (code, out, err) = door.mur(&["approve", &door.run.session]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.trim(),
        format!("approved: {approval} ({asked}) Bash: touch approved.txt")
    );
    let done = door.wait(&asked, "COMPLETED");
    assert!(work.join("approved.txt").exists(), "{done}");

    // `mur deny --reason`: no file, and the model read why.
    let denied = door.start("operator", "RUN touch denied.txt");
    door.wait(&denied, "INPUT_REQUIRED");
    let (code, out, err) = door.mur(&[
        "deny",
        &door.run.session,
        &denied,
        "--reason",
        "not on main",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("denied: apr_"), "{out}");
    let done = door.wait(&denied, "COMPLETED");
    assert!(!work.join("denied.txt").exists());
    let answer = answer_of(&done);
    assert!(
        answer.contains("murmur: the operator denied this: not on main"),
        "the model saw the denial: {answer}"
    );

    // No question open: `mur approve` says so.
    let (code, _, err) = door.mur(&["approve", &door.run.session]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("E-CLI-030"), "{err}");
    assert!(
        err.contains(&format!(
            "no task of {} waits for an approval",
            door.run.session
        )),
        "{err}"
    );

    // A cancel while waiting answers deny, by cancel, and ends the attempt.
    let canceled = door.start("operator", "RUN touch canceled.txt");
    door.wait(&canceled, "INPUT_REQUIRED");
    let resp = door.call("operator", "CancelTask", json!({"id": canceled}));
    assert_eq!(
        resp["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{resp}"
    );
    let by: Vec<(String, String)> = {
        let mut seen = Vec::new();
        wait_until(LONG, || {
            seen = door
                .trace("approval_answered")
                .iter()
                .map(|e| {
                    (
                        e["decision"].as_str().unwrap_or("").to_owned(),
                        e["by"].as_str().unwrap_or("").to_owned(),
                    )
                })
                .collect();
            seen.len() == 4
        });
        seen
    };
    assert_eq!(
        by,
        [
            ("approve".into(), "rule".into()),
            ("approve".into(), "operator".into()),
            ("deny".into(), "operator".into()),
            ("deny".into(), "cancel".into()),
        ]
    );
    let asked_records = door.trace("approval_asked");
    assert_eq!(asked_records.len(), 4, "{asked_records:?}");
    assert_eq!(
        keys_of(&asked_records[1])[3..],
        ["task_id", "approval_id", "request_id", "tool", "input"]
    );
    assert_eq!(asked_records[1]["approval_id"], approval);
    assert!(!work.join("canceled.txt").exists());

    // `mur trace show` has a section of its own for them.
    let (code, shown, err) = door.mur(&["trace", "show", &door.run.session]);
    assert_eq!(code, 0, "{err}");
    assert!(shown.contains("── Approvals "), "{shown}");
    assert!(
        shown.contains(&format!(
            "{approval} Bash: touch approved.txt: approve by operator"
        )),
        "{shown}"
    );
    drop(door);
    assert_nothing_left(&world.home, LONG);
}

#[test]
fn a_question_nobody_answers_is_denied_when_its_timeout_passes() {
    let Some(bin) = clis() else { return };
    let world = World::new(&bin);
    let door = launch(&world, "  approval_timeout_secs: 1\n");
    let id = door.start("operator", "RUN touch late.txt");
    let done = door.wait(&id, "COMPLETED");
    assert!(!world.home.work.join("late.txt").exists());
    let answer = answer_of(&done);
    assert!(
        answer
            .contains("murmur: denied: no answer came within 1 s (harness.approval_timeout_secs)"),
        "{answer}"
    );
    let answered = door.trace("approval_answered");
    assert_eq!(answered.len(), 1, "{answered:?}");
    assert_eq!(
        (&answered[0]["decision"], &answered[0]["by"]),
        (&json!("deny"), &json!("timeout"))
    );
    drop(door);
    assert_nothing_left(&world.home, LONG);
}

#[test]
fn a_public_door_cannot_ask() {
    let home = Home::new();
    let shipped = std::fs::read_to_string(shipped("worker-claude-code.yaml")).unwrap();
    let manifest = home.write(
        "public/murmur.yaml",
        &format!("{shipped}\nharness:\n  approvals: ask\n"),
    );
    let (code, _, err) = home.run(&[
        "run",
        "--manifest",
        manifest.to_str().unwrap(),
        "--task",
        "x",
    ]);
    assert_ne!(code, 0);
    assert!(
        err.contains(
            "harness.approvals is ask, and this capsule's door is public (no \
             network.authentication): anyone who reaches its port could answer for the operator"
        ),
        "{err}"
    );
    assert!(err.contains("E-MAN-005"), "{err}");
}

/// A lead on Claude Code calls a worker on Claude Code that asks: the question does not reach
/// the lead's model (its call-member waits, its deadline paused), shows in `mur top`, a member
/// credential cannot answer it, `a` approves it there, and the lead's answer carries the
/// worker's result.
#[test]
fn a_members_question_is_approved_in_mur_top_and_the_lead_gets_its_result() {
    let Some(bin) = clis() else { return };
    let world = World::new(&bin);
    let home = &world.home;
    let shipped = std::fs::read_to_string(shipped("worker-claude-code.yaml")).unwrap();
    // The lead's task is the launch's: it exits after it, and the formation with it.
    let lead = shipped
        .replace("name: worker", "name: lead")
        .replace("after_task: sleep", "after_task: exit");
    home.write("team/lead.yaml", &lead);
    home.write(
        "team/worker.yaml",
        &format!(
            "{shipped}\nharness:\n  approvals: ask\nexports:\n  peer_tasks:\n    accept: true\n"
        ),
    );
    let formation = home.write(
        "team/formation.yaml",
        "formation:\n  name: team\n  version: \"0.1.0\"\n  entry: lead\n  members:\n    \
         lead:\n      manifest: lead.yaml\n      calls: [worker]\n    worker:\n      \
         manifest: worker.yaml\n",
    );
    // The lead's call waits longer than its own deadline would allow while the question is open.
    let task = "RUN {mur} call-member worker --timeout 5 \"RUN touch approved.txt\"";
    let (mut run, members) =
        Launch::start_formation_env(home, &formation, &["--task", task], &world.env);
    let worker = members.iter().find(|m| m.name == "worker").unwrap();
    let Some(top) = Screen::start(home, &[&worker.session], (140, 45), &[]) else {
        return;
    };
    let shown = top.until("the worker's question", |s| {
        s.contains("questions: a approve, d deny") && s.contains("Bash: touch approved.txt")
    });
    assert!(!home.work.join("approved.txt").exists(), "{shown}");

    // The lead holds member:lead on the worker's door: it sees its task, and cannot answer.
    let tokens = tokens(home, &worker.session);
    let lead_token = token_of(&tokens, "member:lead");
    let listed = bearer_rpc(worker.port, lead_token, "ListTasks", json!({}));
    let waiting = listed["result"]["tasks"][0].clone();
    assert_eq!(
        waiting["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{listed}"
    );
    for answer in [
        json!([{"text": "approve"}]),
        json!([{"data": {"approval_id": waiting["status"]["message"]["parts"][1]["data"]["approval_id"], "decision": "approve"}}]),
    ] {
        let refused = bearer_rpc(
            worker.port,
            lead_token,
            "SendMessage",
            reply(&waiting, answer),
        );
        assert_eq!(refused["error"]["code"], -32001, "{refused}");
        assert_eq!(refused["error"]["message"], "Task not found");
    }
    // The lead's CLI (waiting in its Bash tool for the call) gives a command the helpers' own
    // 30 minutes, not Claude Code's 2.
    let bounded = processes_of(home)
        .into_iter()
        .filter(|p| cmdline(*p).contains("claude"))
        .any(|p| {
            let env = std::fs::read(format!("/proc/{p}/environ")).unwrap_or_default();
            env.split(|b| *b == 0)
                .any(|kv| kv == b"BASH_DEFAULT_TIMEOUT_MS=1800000")
        });
    assert!(
        bounded,
        "no claude process holds BASH_DEFAULT_TIMEOUT_MS=1800000"
    );
    // The question stays open past the lead's 5 s deadline: the call still completes, since
    // its deadline is paused while the question waits.
    std::thread::sleep(std::time::Duration::from_secs(6));
    top.keys(&["a"]);
    let said = top.until("the approval", |s| s.contains("approved: apr_"));
    assert!(said.contains("Bash: touch approved.txt"), "{said}");
    assert_eq!(run.wait_exit(LONG), Some(0), "{}", run.output());
    assert!(home.work.join("approved.txt").exists());
    let answer = run.output();
    let last = answer.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("DONE: ") && last.matches("DONE:").count() == 2,
        "the lead's answer carries the worker's: {answer}"
    );
    let lead = members.iter().find(|m| m.name == "lead").unwrap();
    let called: Vec<Value> = home
        .trace(&lead.session)
        .into_iter()
        .filter(|e| e["event_type"] == "member_call")
        .collect();
    assert_eq!(called.len(), 1, "{called:?}");
    assert_eq!(called[0]["status"], "completed", "{called:?}");
    assert!(
        called[0]["duration_ms"].as_u64().unwrap() > 5000,
        "{called:?}"
    );
    top.keys(&["q"]);
    assert_nothing_left(home, LONG);
}

/// A harness cannot answer for the operator with the one credential it holds: its task token
/// opens the helpers' control surface, never the A2A door where answers are sent.
#[test]
fn a_harness_task_token_is_refused_at_the_a2a_door() {
    let home = Home::new();
    let f = Fixture {
        name: "guarded",
        extra: "network:\n  authentication:\n    scheme: bearer\n",
        ..Fixture::default()
    };
    let manifest = home.write("guarded/murmur.yaml", &f.yaml());
    let run = Launch::start(&home, &manifest, &[]);
    let operator = home.operator_token(&run.session);
    let file = home.root.join("token");
    let resp = bearer_rpc(
        run.port,
        &operator,
        "SendMessage",
        message(&format!("@tokenfile {}\n@sleep 60", file.display()), true),
    );
    let task = resp["result"]["task"].clone();
    assert!(wait_until(LONG, || file.exists()), "{resp}");
    let token = std::fs::read_to_string(&file).unwrap();
    let answer = reply(&task, json!([{"text": "approve"}]));
    for method in ["SendMessage", "GetTask", "ListTasks"] {
        let params = match method {
            "SendMessage" => answer.clone(),
            "GetTask" => json!({"id": task["id"]}),
            _ => json!({}),
        };
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let auth = format!("Bearer {}", token.trim());
        let refused = run.post(
            &body.to_string(),
            &[("A2A-Version", "1.0"), ("Authorization", &auth)],
        );
        assert_eq!(refused.status, 401, "{method}: {}", refused.text());
    }
    drop(run);
    assert_nothing_left(&home, LONG);
}

/// Codex through its app-server: at `read` its sandbox refuses the write, Codex asks to run it
/// again without the sandbox, and the operator answers; murmur's jail still holds the command.
#[test]
fn codex_asks_through_its_app_server_and_the_operator_answers() {
    let Some(bin) = clis() else { return };
    let world = World::new(&bin);
    let door = launch_of(&world, "worker-codex.yaml", "");
    let work = world.home.work.clone();

    let asked = door.start("operator", "RUN touch approved.txt");
    let waiting = door.wait(&asked, "INPUT_REQUIRED");
    let parts = &waiting["status"]["message"]["parts"];
    assert_eq!(
        parts[0]["text"], "Codex asks to run Bash: touch approved.txt",
        "{waiting}"
    );
    let data = &parts[1]["data"];
    assert_eq!(
        (&data["kind"], &data["tool"]),
        (&json!("approval"), &json!("Bash"))
    );
    assert_eq!(data["input"]["command"], "touch approved.txt");
    assert!(!work.join("approved.txt").exists());
    let (code, out, err) = door.mur(&["approve", &door.run.session]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("approved: apr_"), "{out}");
    let done = door.wait(&asked, "COMPLETED");
    assert!(work.join("approved.txt").exists(), "{done}");
    assert!(answer_of(&done).starts_with("DONE:"), "{done}");

    // Denied: nothing written, and the turn goes on to an answer.
    let denied = door.start("operator", "RUN touch denied.txt");
    door.wait(&denied, "INPUT_REQUIRED");
    let (code, _, err) = door.mur(&["deny", &door.run.session, "--reason", "no"]);
    assert_eq!(code, 0, "{err}");
    let done = door.wait(&denied, "COMPLETED");
    assert!(!work.join("denied.txt").exists(), "{done}");

    // The context's thread is resumed on its next task, through the app-server too.
    let context = done["contextId"].as_str().unwrap().to_owned();
    let mut params = message("third question", true);
    params["message"]["contextId"] = json!(context);
    let third = door.call("operator", "SendMessage", params)["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let done = door.wait(&third, "COMPLETED");
    assert_eq!(answer_of(&done), "ANSWER(third question)");
    let modes: Vec<Value> = door
        .trace("harness_start")
        .iter()
        .map(|e| e["session_mode"].clone())
        .collect();
    assert_eq!(modes, [json!("new"), json!("new"), json!("resume")]);

    // murmur's helpers run without asking: Codex's rule lets them out of its sandbox.
    let helper = door.start(
        "operator",
        "RUN {mur} end-without-answer \"nothing to do here\"",
    );
    let ended = door.wait(&helper, "FAILED");
    assert_eq!(ended["metadata"]["murmur"]["noAnswer"], true, "{ended}");

    // A cancel while a question is open denies it and ends the attempt, nothing left running.
    let canceled = door.start("operator", "RUN touch canceled.txt");
    door.wait(&canceled, "INPUT_REQUIRED");
    let resp = door.call("operator", "CancelTask", json!({"id": canceled}));
    assert_eq!(
        resp["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{resp}"
    );
    let mut by = Vec::new();
    wait_until(LONG, || {
        by = door
            .trace("approval_answered")
            .iter()
            .map(|e| e["by"].clone())
            .collect();
        by.len() == 3
    });
    assert_eq!(by, [json!("operator"), json!("operator"), json!("cancel")]);
    assert!(wait_until(LONG, || door.trace("harness_exit").len() == 5));
    assert!(!work.join("canceled.txt").exists());
    drop(door);
    assert_nothing_left(&world.home, LONG);
}

/// A sub-capsule of a delegation asks: its question shows under its own address, `mur approve`
/// answers it there, and the delegating task gets the sub-capsule's answer.
#[test]
fn a_delegated_sub_capsules_question_is_answered_at_its_own_address() {
    let Some(bin) = clis() else { return };
    let world = World::new(&bin);
    let home = &world.home;
    let shipped = std::fs::read_to_string(shipped("worker-claude-code.yaml")).unwrap();
    home.write(
        "d/worker.yaml",
        &format!(
            "{shipped}\nharness:\n  approvals: ask\nnetwork:\n  authentication:\n    scheme: bearer\n"
        ),
    );
    let top = Fixture {
        name: "top",
        extra: "capabilities:\n  delegate:\n    allow: [worker.yaml]\n",
        ..Fixture::default()
    };
    let top = home.write("d/top.yaml", &top.yaml());
    // The fixture harness at the top keeps its state beside the test's home.
    let state = home.root.join("fixture-state");
    std::fs::create_dir_all(&state).unwrap();
    let mut env = world.env.clone();
    for (k, v) in env.iter_mut() {
        if *k == "MURMUR_HARNESS_WRITABLE" {
            *v = state.display().to_string();
        }
    }
    let run = Launch::start_env(home, &top, &[], &env);
    let task = run.start_task("@delegate worker RUN touch delegated.txt");
    // The sub-capsule is the session whose record names the top as its parent.
    let mut child = String::new();
    let asked = wait_until(LONG, || {
        let (_, out, _) = home.run(&["ps", "--json"]);
        let records: Vec<Value> = serde_json::from_str(&out).unwrap_or_default();
        child = records
            .iter()
            .find(|r| r["parent"] == json!(run.session))
            .and_then(|r| r["session_id"].as_str())
            .unwrap_or_default()
            .to_owned();
        !child.is_empty()
            && home
                .run(&["top", &child, "--once"])
                .1
                .contains("Bash: touch delegated.txt")
    });
    assert!(
        asked,
        "the sub-capsule's question never showed: top task {}",
        run.rpc("GetTask", json!({"id": task}))
    );
    // A sub-capsule works in its own folder under the parent's records.
    let children = home.records(&run.session).join("children");
    let made = || {
        std::fs::read_dir(&children)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| e.path().join("delegated.txt").exists())
    };
    assert!(!made(), "the command ran before it was approved");
    let (code, out, err) = home.run(&["approve", &child]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Bash: touch delegated.txt"), "{out}");
    let done = run.wait_task(&task, LONG, |s| {
        s.ends_with("COMPLETED") || s.ends_with("FAILED")
    });
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    assert!(made(), "no delegated.txt under {}", children.display());
    assert_eq!(
        answer_of(&done),
        "DONE: (Bash completed with no output)",
        "the sub-capsule's answer"
    );
    drop(run);
    assert_nothing_left(home, LONG);
}
