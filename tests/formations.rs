//! Formations (DESIGN §3, §7): one YAML launches many capsules. The whole formation is
//! validated before anything starts; every listener is bound first (so `calls` may have
//! cycles); each member's door is authenticated, its callers holding `member:<caller>`
//! credentials that see only their own tasks; a member that dies is reported and the formation
//! stops or goes on as `on_member_failure` says; and no minted token appears anywhere but the
//! token files.

#[path = "support/running.rs"]
mod running;
mod support;

use running::*;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use support::*;

/// A fixture member that takes peer tasks.
fn member(fixture: Fixture) -> String {
    Fixture {
        extra: "exports:\n  peer_tasks:\n    accept: true\n",
        ..fixture
    }
    .yaml()
}

/// `lead → coder → reviewer → lead`: a cycle, which only works because every listener is bound
/// before any member starts.
/// The lead ends after its first task under `lead_after: "exit"`, which ends the formation.
fn cycle(home: &Home, on_failure: &str, lead_after: &'static str) -> PathBuf {
    home.write("f/worker/murmur.yaml", &member(Fixture::default()));
    home.write(
        "f/lead/murmur.yaml",
        &member(Fixture {
            name: "lead",
            after_task: lead_after,
            ..Fixture::default()
        }),
    );
    home.write(
        "f/formation.yaml",
        &format!(
            "formation:\n  name: review\n  version: \"0.1.0\"\n  entry: lead\n{on_failure}  members:\n    \
             lead: {{ manifest: lead/murmur.yaml, calls: [coder, reviewer] }}\n    \
             coder: {{ manifest: worker/murmur.yaml, calls: [reviewer] }}\n    \
             reviewer: {{ manifest: worker/murmur.yaml, calls: [lead] }}\n"
        ),
    )
}

/// `f/lead/murmur.yaml` and `f/worker/murmur.yaml`, both queue members.
fn write_lead_and_worker(home: &Home) {
    home.write("f/worker/murmur.yaml", &member(Fixture::default()));
    home.write(
        "f/lead/murmur.yaml",
        &member(Fixture {
            name: "lead",
            ..Fixture::default()
        }),
    );
}

#[test]
fn a_formation_whose_calls_form_a_cycle_launches_answers_and_leaves_nothing() {
    let home = Home::new();
    let manifest = cycle(&home, "", "exit");
    let mut run = Running::start(&home, &manifest, &["--task", "hello formation"], &[]);
    assert_eq!(run.wait_exit(LONG), Some(0), "{}", run.err.lock().unwrap());
    let lines = run.lines();
    assert_eq!(lines.len(), 6, "{lines:?}");
    let names: Vec<&str> = run.members.iter().map(|m| m.0.as_str()).collect();
    assert_eq!(names, ["lead", "coder", "reviewer"]);
    let (lead_port, lead_session) = run.member("lead");
    for (i, (name, port, session)) in run.members.iter().enumerate() {
        assert_eq!(
            lines[i],
            format!("member {name}: url localhost:{port} session {session}")
        );
        assert!(session.starts_with("ses_") && session.len() == 36);
    }
    assert_eq!(lines[3], format!("murmur: url localhost:{lead_port}"));
    assert_eq!(lines[4], format!("session: {lead_session}"));
    assert_eq!(lines[5], "Acknowledged.", "the entry's answer");
    // Each member ran in its own session, with its own records, and is gone.
    for (name, _, session) in &run.members {
        let trace = home.trace(session);
        assert!(
            trace.iter().any(|e| e["event_type"] == "session_end"),
            "{name} ended its session"
        );
        let roster: Value = serde_json::from_str(
            &std::fs::read_to_string(home.records(session).join("formation.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(roster["members"][name.as_str()], session.as_str());
        assert_eq!(
            roster["calls"],
            json!({"lead": ["coder", "reviewer"], "coder": ["reviewer"], "reviewer": ["lead"]})
        );
    }
    assert_eq!(processes_of(&home), Vec::<u32>::new());
    assert_run_keeps_only_launches(&home);
}

#[test]
fn json_names_every_member() {
    let home = Home::new();
    let manifest = cycle(&home, "", "exit");
    let (code, out, err) = home.run(&[
        "run",
        "--manifest",
        manifest.to_str().unwrap(),
        "--task",
        "hi",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(
        v["formation"],
        json!({"name": "review", "version": "0.1.0", "entry": "lead"})
    );
    assert_eq!(v["name"], "lead");
    let members = v["members"].as_array().unwrap();
    let names: Vec<&str> = members
        .iter()
        .map(|m| m["member"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["lead", "coder", "reviewer"]);
    assert_eq!(
        members[1]["name"], "fixture",
        "coder runs the worker manifest"
    );
    assert_eq!(v["url"], members[0]["url"]);
    assert_eq!(out.lines().nth(1), Some("Acknowledged."));
}

/// Every refusal of a formation, each before anything is bound, spawned or recorded.
#[test]
fn every_formation_mistake_is_refused_before_anything_starts() {
    let home = Home::new();
    home.write("f/worker/murmur.yaml", &member(Fixture::default()));
    home.write("f/private/murmur.yaml", &Fixture::default().yaml());
    home.write("f/broken/murmur.yaml", "name: broken\nversion: [\n");
    home.write(
        "f/http/murmur.yaml",
        "name: remote\nversion: \"0.1.0\"\nartifacts:\n  - name: murmur/driver-anthropic\n    runtime: driver\n    gateway: { endpoint: http://api.anthropic.com, api_key: sk-test }\ninference:\n  transport: http\n  model: claude-sonnet-5\n  driver: { artifact: murmur/driver-anthropic }\n",
    );
    let formation = |members: &str, entry: &str| {
        format!("formation:\n  name: review\n  version: \"0.1.0\"\n{entry}  members:\n{members}")
    };
    let worker = "    a: { manifest: worker/murmur.yaml, calls: [b] }\n    b: { manifest: worker/murmur.yaml }\n";
    let rows: Vec<(&str, String, &str, &str)> = vec![
        (
            "unknown member in calls",
            formation("    a: { manifest: worker/murmur.yaml, calls: [ghost] }\n", "  entry: a\n"),
            "error[E-MAN-009]: ",
            "formation.members.a.calls[0] names ghost, which is not a member of this formation",
        ),
        (
            "missing entry",
            formation(worker, ""),
            "error[E-MAN-009]: ",
            "formation.entry is missing",
        ),
        (
            "unknown entry",
            formation(worker, "  entry: c\n"),
            "error[E-MAN-009]: ",
            "formation.entry names c, which is not a member",
        ),
        (
            "two members pinned to one port",
            formation(
                "    a: { manifest: worker/murmur.yaml, port: 52999 }\n    b: { manifest: worker/murmur.yaml, port: 52999 }\n",
                "  entry: a\n",
            ),
            "error[E-MAN-009]: ",
            "members a and b are both pinned to port 52999",
        ),
        (
            "a callee that takes no peer tasks",
            formation(
                "    a: { manifest: worker/murmur.yaml, calls: [b] }\n    b: { manifest: private/murmur.yaml }\n",
                "  entry: a\n",
            ),
            "error[E-MAN-009]: ",
            "/f/private/murmur.yaml does not set exports.peer_tasks.accept: true",
        ),
        (
            "a missing member manifest",
            formation("    a: { manifest: nowhere/murmur.yaml }\n", "  entry: a\n"),
            "error[E-MAN-001]: member a: ",
            "nowhere/murmur.yaml",
        ),
        (
            "an invalid member manifest",
            formation("    a: { manifest: broken/murmur.yaml }\n", "  entry: a\n"),
            "error[E-MAN-002]: member a: ",
            "broken/murmur.yaml",
        ),
        (
            "a member name that is not a plain name",
            formation("    \"a b\": { manifest: worker/murmur.yaml }\n", "  entry: a b\n"),
            "error[E-MAN-",
            "formation.members",
        ),
        (
            "a member whose http driver cannot be reached safely",
            formation(
                "    a: { manifest: worker/murmur.yaml }\n    b: { manifest: http/murmur.yaml }\n",
                "  entry: a\n",
            ),
            "error[E-RUN-030]: member b: ",
            "gateway.endpoint http://api.anthropic.com is plain http to a host that is not loopback; use https://",
        ),
    ];
    for (row, yaml, starts, says) in rows {
        let path = home.write("f/formation.yaml", &yaml);
        let (code, out, err) =
            home.run(&["run", "--manifest", path.to_str().unwrap(), "--task", "x"]);
        assert_eq!((code, out.as_str()), (1, ""), "{row}: {err}");
        assert!(err.starts_with(starts), "{row}: {err}");
        assert!(err.contains(says), "{row}: {err}");
        assert!(
            err.contains("\n  hint: "),
            "{row}: a hint says how to fix it: {err}"
        );
        assert!(
            !home.home.join("records").exists(),
            "{row}: nothing was recorded"
        );
        assert!(
            std::fs::read_dir(home.home.join("run")).map_or(true, |d| d.count() == 0),
            "{row}: no record, token or wiring"
        );
        assert_eq!(
            processes_of(&home),
            Vec::<u32>::new(),
            "{row}: nothing started"
        );
    }
}

#[test]
fn a_taken_pinned_port_names_the_member_and_starts_nothing() {
    let home = Home::new();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    home.write("f/worker/murmur.yaml", &member(Fixture::default()));
    let path = home.write(
        "f/formation.yaml",
        &format!("formation:\n  name: review\n  version: \"0.1.0\"\n  entry: a\n  members:\n    a: {{ manifest: worker/murmur.yaml, calls: [b] }}\n    b: {{ manifest: worker/murmur.yaml, port: {port} }}\n"),
    );
    let (code, _, err) = home.run(&["run", "--manifest", path.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        err.starts_with(&format!(
            "error[E-RUN-010]: member b: port {port} is already in use\n  hint: "
        )),
        "{err}"
    );
    assert_eq!(processes_of(&home), Vec::<u32>::new());
    assert!(std::fs::read_dir(home.home.join("run")).map_or(true, |d| d.count() == 0));
}

#[test]
fn member_credentials_see_only_their_own_tasks() {
    let home = Home::new();
    let manifest = cycle(&home, "", "sleep");
    let run = Running::start(&home, &manifest, &[], &[]);
    let (coder_port, coder) = run.member("coder");
    let credentials: Vec<String> = tokens(&home, &coder).into_iter().map(|(c, _)| c).collect();
    assert_eq!(
        credentials,
        ["operator", "member:lead"],
        "only lead calls coder"
    );
    let (_, reviewer) = run.member("reviewer");
    let credentials: Vec<String> = tokens(&home, &reviewer)
        .into_iter()
        .map(|(c, _)| c)
        .collect();
    assert_eq!(credentials, ["operator", "member:lead", "member:coder"]);
    let lead = token_of(&home, &coder, "member:lead");
    let operator = token_of(&home, &coder, "operator");
    // Every formation door is authenticated.
    assert_eq!(anonymous_status(coder_port), 401);
    let mine = bearer_rpc(
        coder_port,
        &lead,
        "SendMessage",
        message("from lead", false),
    );
    let mine = mine["result"]["task"]["id"].as_str().unwrap().to_owned();
    // Sent without `x-murmur-task-origin: peer`, it is still a peer's task: the credential
    // says who sent it, not the headers (issue 18, finding 5).
    let received = home
        .trace(&coder)
        .into_iter()
        .find(|e| e["event_type"] == "a2a_task_received" && e["task_id"] == mine.as_str())
        .unwrap();
    assert_eq!(
        (&received["origin"], &received["trust"]),
        (&json!("peer"), &json!("untrusted")),
        "{received}"
    );
    let theirs = bearer_rpc(
        coder_port,
        &operator,
        "SendMessage",
        message("from the operator", false),
    );
    let theirs = theirs["result"]["task"]["id"].as_str().unwrap().to_owned();
    let seen = bearer_rpc(coder_port, &lead, "ListTasks", json!({}));
    let ids: Vec<&str> = seen["result"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [mine.as_str()]);
    let hidden = bearer_rpc(coder_port, &lead, "GetTask", json!({"id": theirs}));
    assert_eq!(hidden["error"]["code"], -32001, "{hidden}");
    let all = bearer_rpc(coder_port, &operator, "ListTasks", json!({}));
    assert_eq!(all["result"]["totalSize"], 2);
    // The card says what a member may reach: its callees, though it declares no allow list.
    let card = bearer_rpc(coder_port, &operator, "GetExtendedAgentCard", json!({}));
    let capsule = card["result"]["capabilities"]["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["uri"] == "https://docs.murmur.nexus/reference/agent-card/#murmur-capsule-v1")
        .unwrap()
        .clone();
    assert_eq!(capsule["params"]["network"], true, "{capsule}");
    // A member credential reaches no session-wide method.
    let stop = http(
        coder_port,
        "POST",
        "/",
        &[
            ("Content-Type", "application/json"),
            ("A2A-Version", "1.0"),
            ("Authorization", &format!("Bearer {lead}")),
        ],
        br#"{"jsonrpc":"2.0","id":1,"method":"murmur.StopSession","params":{}}"#,
    );
    assert_eq!(stop.status, 403, "{}", stop.text());
}

fn kill_a_working_member(on_failure: &str) -> (Home, Running, String) {
    let home = Home::new();
    let manifest = cycle(&home, on_failure, "sleep");
    let run = Running::start(&home, &manifest, &[], &[]);
    let (coder_port, coder) = run.member("coder");
    let lead = token_of(&home, &coder, "member:lead");
    let pidfile = home.root.join("h.pid");
    let sent = bearer_rpc(
        coder_port,
        &lead,
        "SendMessage",
        message(&format!("@pidfile {}\n@sleep 60", pidfile.display()), true),
    );
    let task = sent["result"]["task"]["id"].as_str().unwrap().to_owned();
    wait_pid(&pidfile);
    let rec: Value = serde_json::from_str(
        &std::fs::read_to_string(home.home.join("run").join(format!("{coder}.json"))).unwrap(),
    )
    .unwrap();
    signal(rec["pid"].as_u64().unwrap() as u32, 9);
    (home, run, task)
}

fn assert_reported(home: &Home, run: &Running, task: &str, then: &str) {
    let (_, coder) = run.member("coder");
    // Wait for the whole line: stderr is read in pieces, and a check that only waited for its
    // start could read the line half written.
    assert!(wait_until(LONG, || run.err.lock().unwrap().contains(then)));
    let err = run.err.lock().unwrap().clone();
    assert!(err.contains("mur: member coder (pid "), "{err}");
    assert!(
        err.contains(&format!(
            "exited unexpectedly with status 137; 1 of its tasks failed; {then}"
        )),
        "{err}"
    );
    let trace = home.trace(&coder);
    let of_task: Vec<&str> = trace
        .iter()
        .filter(|e| e["task_id"] == task)
        .map(|e| e["event_type"].as_str().unwrap())
        .collect();
    assert!(
        of_task.ends_with(&["task_failed", "task_end"]),
        "{of_task:?}"
    );
    let end = trace
        .iter()
        .find(|e| e["event_type"] == "task_end" && e["task_id"] == task)
        .unwrap();
    assert_eq!(end["status"], "failed");
    let died = trace.last().unwrap();
    assert_eq!(died["event_type"], "capsule_died");
    assert_eq!(
        (died["member"].as_str(), died["exit_status"].as_i64()),
        (Some("coder"), Some(137))
    );
}

#[test]
fn kill_9_of_a_member_stops_the_formation_by_default() {
    let (home, mut run, task) = kill_a_working_member("");
    assert_eq!(run.wait_exit(LONG), Some(1));
    assert_reported(
        &home,
        &run,
        &task,
        "stopping the formation (on_member_failure: stop)",
    );
    assert_nothing_left(&home, LONG);
    assert_run_keeps_only_launches(&home);
}

#[test]
fn kill_9_of_a_member_leaves_the_rest_running_when_asked() {
    let (home, mut run, task) = kill_a_working_member("  on_member_failure: continue\n");
    assert_reported(
        &home,
        &run,
        &task,
        "the formation goes on (on_member_failure: continue)",
    );
    let (lead_port, lead) = run.member("lead");
    let operator = token_of(&home, &lead, "operator");
    // The lead goes on; its calls to the dead member are unreachable.
    let done = bearer_rpc(
        lead_port,
        &operator,
        "SendMessage",
        message("@run mur call-member coder hello", false),
    );
    let task = &done["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    let called: Value =
        serde_json::from_str(task["artifacts"][0]["parts"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(called["code"], 1, "{called}");
    assert!(
        called["err"]
            .as_str()
            .unwrap()
            .contains("member coder gave no answer (unreachable)"),
        "{called}"
    );
    let (code, out, _) = home.run(&["ps", "--json"]);
    assert_eq!(code, 0);
    let listed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        listed.as_array().unwrap().len(),
        2,
        "the dead member's record is gone: {listed}"
    );
    signal(run.child.id(), 2);
    assert_eq!(run.wait_exit(LONG), Some(0));
    assert_nothing_left(&home, LONG);
}

#[test]
fn no_minted_token_appears_anywhere_but_the_token_files() {
    let home = Home::new();
    let manifest = cycle(&home, "", "sleep");
    let mut run = Running::start(&home, &manifest, &[], &[]);
    let mut minted = Vec::new();
    for (_, _, session) in &run.members {
        minted.extend(tokens(&home, session).into_iter().map(|(_, t)| t));
    }
    assert_eq!(
        minted.len(),
        3 + 4,
        "an operator per member and one token per call edge"
    );
    // Work flows through every door while the tokens are live.
    let (lead_port, lead) = run.member("lead");
    let operator = token_of(&home, &lead, "operator");
    bearer_rpc(lead_port, &operator, "SendMessage", message("@env", false));
    let files = |dir: &Path| -> Vec<PathBuf> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    out.push(p);
                }
            }
        }
        out
    };
    let is_token_file = |p: &Path| {
        matches!(
            p.extension().and_then(|e| e.to_str()),
            Some("tokens" | "wiring")
        )
    };
    let check = |what: &str, text: &str| {
        for t in &minted {
            assert!(!text.contains(t.as_str()), "a token appears in {what}");
        }
    };
    for f in files(&home.home).iter().filter(|p| !is_token_file(p)) {
        check(
            &f.display().to_string(),
            &String::from_utf8_lossy(&std::fs::read(f).unwrap()),
        );
    }
    signal(run.child.id(), 2);
    assert_eq!(run.wait_exit(LONG), Some(0));
    for f in files(&home.home) {
        assert!(!is_token_file(&f), "{} outlived the launch", f.display());
        check(
            &f.display().to_string(),
            &String::from_utf8_lossy(&std::fs::read(&f).unwrap()),
        );
    }
    check("mur run's stdout", &run.lines().join("\n"));
    check("mur run's stderr", &run.err.lock().unwrap());
}

#[test]
fn a_member_reaches_only_its_callees_and_connects_to_nothing_else() {
    let home = Home::new();
    let manifest = cycle(&home, "", "sleep");
    let run = Running::start(&home, &manifest, &[], &[]);
    let (coder_port, coder) = run.member("coder");
    let (lead_port, lead) = run.member("lead");
    let operator = token_of(&home, &coder, "operator");
    let elsewhere = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    elsewhere.set_nonblocking(true).unwrap();
    let counted = elsewhere.local_addr().unwrap().port();
    // coder calls [reviewer] only: lead is no callee, and neither door is on its allow list.
    let attempt = |command: String| -> Value {
        let done = bearer_rpc(
            coder_port,
            &operator,
            "SendMessage",
            message(&format!("@run {command}"), false),
        );
        let task = &done["result"]["task"];
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
        serde_json::from_str(task["artifacts"][0]["parts"][0]["text"].as_str().unwrap()).unwrap()
    };
    let called = attempt("mur call-member lead hello".into());
    assert_eq!(called["code"], 1, "{called}");
    let err = called["err"].as_str().unwrap();
    assert!(err.starts_with("error[E-CLI-020]: "), "{err}");
    assert!(err.contains("it may call reviewer"), "{err}");
    for url in [
        format!("http://localhost:{counted}"),
        format!("http://localhost:{lead_port}"),
    ] {
        let sent = attempt(format!("mur send-message {url} hello"));
        assert_eq!(sent["code"], 1, "{sent}");
        assert!(
            sent["err"]
                .as_str()
                .unwrap()
                .contains("is not in capabilities.network.allow"),
            "{sent}"
        );
    }
    assert!(elsewhere.accept().is_err(), "no TCP connection was made");
    let lead_trace = home.trace(&lead);
    assert!(
        !lead_trace
            .iter()
            .any(|e| e["event_type"] == "a2a_task_received"),
        "nothing reached lead's door: {lead_trace:?}"
    );
    // The callee it does have answers.
    let reached = attempt("mur call-member reviewer hello".into());
    assert_eq!(
        (reached["code"].as_i64(), reached["out"].as_str()),
        (Some(0), Some("Acknowledged.\n")),
        "{reached}"
    );
}

#[test]
fn kill_9_of_mur_run_leaves_no_member_and_mur_ps_prunes_every_file() {
    let home = Home::new();
    let manifest = cycle(&home, "", "sleep");
    let mut run = Running::start(&home, &manifest, &[], &[]);
    let files = std::fs::read_dir(home.home.join("run"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name() != "launches")
        .count();
    assert_eq!(
        files,
        3 * 3,
        "a record, a token file and a wiring file per member (and the launches kept to resume)"
    );
    signal(run.child.id(), 9);
    let _ = run.child.wait();
    assert_nothing_left(&home, LONG);
    assert_ps_prunes_run(&home);
}

#[test]
fn a_member_that_ends_cleanly_is_no_crash_and_the_formation_goes_on() {
    let home = Home::new();
    home.write("f/worker/murmur.yaml", &member(Fixture::default()));
    home.write(
        "f/side/murmur.yaml",
        &Fixture {
            name: "side",
            acceptance: "single",
            after_task: "exit",
            queue_depth: None,
            ..Fixture::default()
        }
        .yaml(),
    );
    let manifest = home.write(
        "f/formation.yaml",
        "formation:\n  name: ends\n  version: \"0.1.0\"\n  entry: lead\n  members:\n    lead: { manifest: worker/murmur.yaml }\n    side: { manifest: side/murmur.yaml }\n",
    );
    let mut run = Running::start(&home, &manifest, &[], &[]);
    let (side_port, side) = run.member("side");
    let operator = token_of(&home, &side, "operator");
    let done = bearer_rpc(
        side_port,
        &operator,
        "SendMessage",
        message("one task", false),
    );
    assert_eq!(
        done["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{done}"
    );
    // It ends by design after that task: said as such, and the formation goes on.
    assert!(wait_until(LONG, || run
        .err
        .lock()
        .unwrap()
        .contains("ended (status 0)\n")));
    let err = run.err.lock().unwrap().clone();
    assert!(err.contains("mur: member side (pid "), "{err}");
    assert!(!err.contains("unexpectedly"), "{err}");
    assert_eq!(
        run.wait_exit(Duration::from_millis(500)),
        None,
        "the formation stopped"
    );
    let (lead_port, lead) = run.member("lead");
    let listed = bearer_rpc(
        lead_port,
        &token_of(&home, &lead, "operator"),
        "ListTasks",
        json!({}),
    );
    assert_eq!(listed["result"]["totalSize"], 0, "{listed}");
}

#[test]
fn a_launch_task_for_a_door_that_takes_none_is_refused_before_anything_starts() {
    let home = Home::new();
    let closed = home.write(
        "closed/murmur.yaml",
        &Fixture {
            name: "closed",
            acceptance: "none",
            queue_depth: None,
            ..Fixture::default()
        }
        .yaml(),
    );
    let (code, out, err) = home.run(&[
        "run",
        "--manifest",
        closed.to_str().unwrap(),
        "--task",
        "hi",
    ]);
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert_eq!(
        err,
        format!("error[E-RUN-021]: {} sets lifecycle.task_acceptance: none: it takes no task, so --task has nowhere to go\n  hint: set lifecycle.task_acceptance: single or queue, or launch it without --task\n", closed.display())
    );
    // Nothing was started, nothing recorded as running.
    assert!(std::fs::read_dir(home.home.join("run")).map_or(true, |d| d.count() == 0));

    // As a formation's entry, the same, naming the member.
    let formation = home.write(
        "closed/formation.yaml",
        "formation:\n  name: shut\n  version: \"0.1.0\"\n  entry: door\n  members:\n    door: { manifest: murmur.yaml }\n",
    );
    let (code, _, err) = home.run(&[
        "run",
        "--manifest",
        formation.to_str().unwrap(),
        "--task",
        "hi",
    ]);
    assert_eq!(code, 1);
    assert_eq!(
        err,
        format!("error[E-RUN-021]: the entry member door ({}) sets lifecycle.task_acceptance: none: it takes no task, so --task has nowhere to go\n  hint: set lifecycle.task_acceptance: single or queue, or launch it without --task\n", closed.display())
    );
}

#[test]
fn a_member_that_crashes_comes_back_on_its_port_until_its_cap() {
    let home = Home::new();
    write_lead_and_worker(&home);
    let manifest = home.write(
        "f/formation.yaml",
        "formation:\n  name: up\n  version: \"0.1.0\"\n  entry: lead\n  members:\n    lead: { manifest: lead/murmur.yaml, calls: [coder] }\n    coder:\n      manifest: worker/murmur.yaml\n      restart: on_failure\n      max_restarts: 3\n      restart_window: 600\n",
    );
    let mut run = Running::start(&home, &manifest, &[], &[]);
    let (port, coder) = run.member("coder");
    let lead = token_of(&home, &coder, "member:lead");
    let record = |home: &Home| -> Value {
        serde_json::from_str(
            &std::fs::read_to_string(home.home.join("run").join(format!("{coder}.json"))).unwrap(),
        )
        .unwrap()
    };
    let mut pid = record(&home)["pid"].as_u64().unwrap() as u32;
    let lead_session = run.member("lead").1;
    let lead_pid: u32 = serde_json::from_str::<Value>(
        &std::fs::read_to_string(home.home.join("run").join(format!("{lead_session}.json")))
            .unwrap(),
    )
    .unwrap()["pid"]
        .as_u64()
        .unwrap() as u32;
    // The formation's capsules alive now, sorted (their keepers and harnesses are `__contain`).
    let capsules = || {
        let mut found: Vec<u32> = processes_of(&home)
            .into_iter()
            .filter(|p| cmdline(*p).contains("__capsule"))
            .collect();
        found.sort_unstable();
        found
    };
    let lead_and = |coder: u32| {
        let mut both = vec![lead_pid, coder];
        both.sort_unstable();
        both
    };
    assert_eq!(capsules(), lead_and(pid), "before the first crash");
    // A task it holds when it first crashes is failed with a cause, never lost silently.
    let held = hold(&home, port, &lead, "coder-harness");
    for attempt in 1..=3u32 {
        signal(pid, 9);
        pid = pid_other_than(&home, &coder, pid);
        // The same port, the same credential: its callers' wiring is still good.
        let sent = bearer_rpc(port, &lead, "SendMessage", message("are you back?", false));
        assert_eq!(
            sent["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "after restart {attempt}: {sent}"
        );
        // Never two of it at once: the coder that answered is the only one; the one killed is
        // gone, and no other was started beside it.
        assert_eq!(capsules(), lead_and(pid), "after restart {attempt}");
        let r = record(&home);
        assert_eq!(
            (r["restarts"].as_u64(), r["last_exit"].as_i64()),
            (Some(attempt as u64), Some(137))
        );
        let (code, ps, _) = home.run(&["ps"]);
        assert_eq!(code, 0);
        assert!(
            ps.contains(&format!("(restarts {attempt}, last exit 137)")),
            "{ps}"
        );
    }
    let err = run.err.lock().unwrap().clone();
    for (attempt, failed, wait) in [(1, 1, "0.5"), (2, 0, "1.0"), (3, 0, "2.0")] {
        assert!(
            err.contains(&format!("exited with status 137; {failed} of its tasks failed; restarting it in {wait} s (restart {attempt} of 3 within 600 s)")),
            "{err}"
        );
    }
    let failed = home
        .trace(&coder)
        .into_iter()
        .find(|e| e["event_type"] == "task_failed" && e["task_id"] == held.as_str())
        .unwrap_or_else(|| panic!("{held} was not failed"));
    assert_eq!(failed["cause"], "the capsule died before the task ended");
    let restarted: Vec<Value> = home
        .trace(&coder)
        .into_iter()
        .filter(|e| e["event_type"] == "member_restarted")
        .collect();
    let attempts: Vec<u64> = restarted
        .iter()
        .map(|e| e["attempt"].as_u64().unwrap())
        .collect();
    assert_eq!(attempts, [1, 2, 3]);
    assert_eq!(
        keys_of(&restarted[0]),
        [
            "event_type",
            "session_id",
            "timestamp",
            "formation",
            "member",
            "attempt",
            "backoff_ms",
            "exit_status"
        ]
    );
    // The fourth crash is past its cap: the formation does what on_member_failure says (stop).
    signal(pid, 9);
    assert_eq!(run.wait_exit(LONG), Some(1));
    let err = run.err.lock().unwrap().clone();
    assert!(
        err.contains("exited with status 137 after 3 restarts within 600 s, its cap (max_restarts); 0 of its tasks failed; stopping the formation (on_member_failure: stop)"),
        "{err}"
    );
    assert_nothing_left(&home, LONG);
}

/// A launch creates what its records need and no more: for each member its session folder,
/// trace, tokens and running record, and a wiring file only when it calls someone; one copy of
/// each manifest file and one roster, linked into every member's folder; and no harness guide
/// until a task needs one. On ext4 without a journal each new file costs more the more were
/// created and deleted nearby, which made files the most of a 500-member launch's time
/// (BENCHMARKS.md, "500 members").
#[test]
fn a_launch_creates_a_file_per_record_and_links_what_members_share() {
    use std::collections::BTreeMap;
    use std::os::unix::fs::MetadataExt;
    let home = Home::new();
    write_lead_and_worker(&home);
    let workers: Vec<String> = (1..=5).map(|i| format!("w{i}")).collect();
    let mut members = format!(
        "    lead: {{ manifest: lead/murmur.yaml, calls: [{}] }}\n",
        workers.join(", ")
    );
    for w in &workers {
        members.push_str(&format!("    {w}: {{ manifest: worker/murmur.yaml }}\n"));
    }
    let manifest = home.write(
        "f/formation.yaml",
        &format!(
            "formation:\n  name: wide\n  version: \"0.1.0\"\n  entry: lead\n  members:\n{members}"
        ),
    );
    let run = Running::start(&home, &manifest, &[], &[]);
    assert_eq!(run.members.len(), 6);

    // Every regular file under MURMUR_HOME, by inode: (names, links).
    let mut inodes: BTreeMap<(u64, u64), (Vec<String>, u64)> = BTreeMap::new();
    let mut folders = vec![home.home.clone()];
    while let Some(dir) = folders.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().map(Result::unwrap) {
            let meta = std::fs::symlink_metadata(entry.path()).unwrap();
            if meta.is_dir() {
                folders.push(entry.path());
            } else {
                let name = entry
                    .path()
                    .strip_prefix(&home.home)
                    .unwrap()
                    .display()
                    .to_string();
                let at = inodes.entry((meta.dev(), meta.ino())).or_default();
                at.0.push(name);
                at.1 = meta.nlink();
            }
        }
    }
    // What the launch keeps for `mur run --resume`: its members, and its tokens beside them.
    let kept = |suffix: &str| {
        inodes
            .iter()
            .filter(|(_, (names, _))| {
                names
                    .iter()
                    .all(|n| n.starts_with("run/launches/") && n.ends_with(suffix))
            })
            .count()
    };
    assert_eq!((kept(".json"), kept(".tokens")), (1, 1), "{inodes:?}");
    inodes.retain(|_, (names, _)| !names.iter().all(|n| n.starts_with("run/launches/")));
    let named = |suffix: &str| {
        inodes
            .values()
            .filter(|(names, _)| names.iter().all(|n| n.ends_with(suffix)))
            .collect::<Vec<_>>()
    };
    for suffix in ["/trace.jsonl", ".tokens"] {
        let files = named(suffix);
        assert_eq!(files.len(), 6, "one {suffix} a member: {inodes:?}");
        assert!(files
            .iter()
            .all(|(names, links)| names.len() == 1 && *links == 1));
    }
    let records = inodes
        .values()
        .filter(|(names, _)| {
            names.iter().all(|n| {
                n.starts_with("run/") && !n.starts_with("run/launches/") && n.ends_with(".json")
            })
        })
        .count();
    assert_eq!(records, 6, "one running record a member: {inodes:?}");
    // Each member's task store: its folder now (the jail covers it from the first attempt),
    // its file with its first task (docs/store.md).
    for (_, _, session) in &run.members {
        assert!(home.records(session).join("store").is_dir());
    }
    assert!(
        named("/store/store.sqlite").is_empty(),
        "no task yet: {inodes:?}"
    );
    let wiring = named(".wiring");
    let (lead_port, lead_session) = run.member("lead");
    assert_eq!(
        wiring.len(),
        1,
        "only the member that calls has a wiring file: {inodes:?}"
    );
    assert_eq!(wiring[0].0, [format!("run/{lead_session}.wiring")]);
    let rosters = named("/formation.json");
    assert_eq!(rosters.len(), 1, "one roster: {inodes:?}");
    assert_eq!(
        (rosters[0].0.len(), rosters[0].1),
        (6, 6),
        "in every folder"
    );
    let manifests = named("/manifest.yaml");
    let mut shared: Vec<_> = manifests
        .iter()
        .map(|(names, links)| (names.len(), *links))
        .collect();
    shared.sort();
    assert_eq!(
        shared,
        [(1, 1), (5, 5)],
        "one copy per manifest file: {inodes:?}"
    );
    assert!(
        named("/guide.md").is_empty(),
        "no guide before a task: {inodes:?}"
    );
    assert_eq!(inodes.len(), 6 * 3 + 1 + 1 + 2, "{inodes:?}");

    // Each member still reads what it is: a worker is a member that calls nobody, the lead
    // calls each worker, and its guide appears when a task needs it.
    let guide = completed_then_guide(&home, lead_port, &lead_session, "operator");
    assert!(
        guide.contains(&format!("Members you may call: {}.", workers.join(", "))),
        "{guide}"
    );
    let (w1_port, w1_session) = run.member("w1");
    // A member that calls nobody is still a formation door: authenticated.
    assert_eq!(anonymous_status(w1_port), 401);
    let guide = completed_then_guide(&home, w1_port, &w1_session, "member:lead");
    assert!(guide.contains("Members you may call: none."), "{guide}");
}

/// The HTTP status of a ListTasks with no token.
fn anonymous_status(port: u16) -> u16 {
    http(
        port,
        "POST",
        "/",
        &[("Content-Type", "application/json"), ("A2A-Version", "1.0")],
        br#"{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}"#,
    )
    .status
}

/// Sends a task to a member's door with `credential`'s token, checks it completed, and
/// answers the guide its harness was given.
fn completed_then_guide(home: &Home, port: u16, session: &str, credential: &str) -> String {
    let sent = bearer_rpc(
        port,
        &token_of(home, session, credential),
        "SendMessage",
        message("hi", false),
    );
    assert_eq!(
        sent["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{sent}"
    );
    std::fs::read_to_string(home.records(session).join("guide.md")).unwrap()
}

/// `n` workers from one manifest, w0 the entry calling none.
fn wide(home: &Home, n: usize) -> PathBuf {
    home.write("f/worker/murmur.yaml", &member(Fixture::default()));
    let members: String = (0..n)
        .map(|i| format!("    w{i}: {{ manifest: worker/murmur.yaml }}\n"))
        .collect();
    home.write(
        "f/formation.yaml",
        &format!(
            "formation:\n  name: wide\n  version: \"0.1.0\"\n  entry: w0\n  members:\n{members}"
        ),
    )
}

/// A formation's capsules are forked by a zygote (`capsule::process::zygote`), and are then
/// what a spawn makes them: children of `mur run`, each leading its own process group, shown
/// as `mur __capsule`, each serving its own door; the zygote is gone once the launch is
/// announced.
#[test]
fn a_formations_capsules_are_children_of_mur_run_each_in_its_own_group() {
    let home = Home::new();
    let manifest = wide(&home, 12);
    let run = Running::start(&home, &manifest, &[], &[]);
    let supervisor = run.child.id();
    let stat = |pid: u32| {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let fields: Vec<String> = text[text.rfind(')').map_or(0, |i| i + 2)..]
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        fields
    };
    let mut children = Vec::new();
    let settled = wait_until(LONG, || {
        children = descendants(supervisor)
            .into_iter()
            .filter(|p| *p != supervisor && ppid(*p) == Some(supervisor))
            .collect();
        children.len() == 12
    });
    assert!(
        settled,
        "12 capsules and nothing else below mur run: {children:?}"
    );
    for pid in &children {
        let fields = stat(*pid);
        assert_eq!(
            fields[2],
            pid.to_string(),
            "capsule {pid} leads its own group"
        );
        assert!(cmdline(*pid).ends_with("__capsule "), "{}", cmdline(*pid));
        assert!(
            started_with(*pid, "MURMUR_ZYGOTE_FD"),
            "capsule {pid} was spawned, not forked by the zygote"
        );
    }
    let records: Vec<u32> = run
        .members
        .iter()
        .map(|(_, _, session)| {
            let text =
                std::fs::read_to_string(home.home.join(format!("run/{session}.json"))).unwrap();
            serde_json::from_str::<Value>(&text).unwrap()["pid"]
                .as_u64()
                .unwrap() as u32
        })
        .collect();
    let (mut recorded, mut found) = (records.clone(), children.clone());
    recorded.sort();
    found.sort();
    assert_eq!(recorded, found, "each member's record names its capsule");
    for (name, port, session) in &run.members {
        let answer = bearer_rpc(
            *port,
            &token_of(&home, session, "operator"),
            "SendMessage",
            message(&format!("hello {name}"), false),
        );
        assert_eq!(
            answer["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{answer}"
        );
    }
}

/// Killed while its members are still being started, `mur run` leaves nothing behind: not
/// the zygote, not a capsule it forked, whatever moment the kill came.
#[test]
fn kill_9_of_mur_run_while_members_start_leaves_nothing() {
    let home = Home::new();
    let manifest = wide(&home, 60);
    let mut child = home
        .mur()
        .args(["run", "--manifest"])
        .arg(&manifest)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let run_dir = home.home.join("run");
    let started = wait_until(LONG, || {
        std::fs::read_dir(&run_dir).is_ok_and(|d| {
            d.flatten()
                .any(|e| e.path().extension().is_some_and(|x| x == "json"))
        })
    });
    assert!(started, "no member was started");
    signal(child.id(), 9);
    let _ = child.wait();
    assert_nothing_left(&home, LONG);
}

/// Whether process `pid` holds `name` in the environment it started with. A capsule the zygote
/// forked started with the zygote's, which names the zygote's socket; a spawned one did not.
fn started_with(pid: u32, name: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
        env.split(|b| *b == 0)
            .any(|kv| kv.starts_with(format!("{name}=").as_bytes()))
    })
}

/// The children of `pid`, as each of its threads lists them.
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(threads) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    threads
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// A zygote killed while it forks a launch's members (by a user's `kill -9` of a process they
/// took for a stray, say): the members it had not forked are spawned instead, every member's
/// door answers, and nothing is left when the launch ends.
#[test]
fn a_launch_whose_zygote_is_killed_spawns_the_members_it_had_not_forked() {
    const MEMBERS: usize = 40;
    let home = Home::new();
    let manifest = wide(&home, MEMBERS);
    // The kill must land before the zygote has forked all 40 (some 40 ms of supervisor work);
    // it is aimed at the zygote's first moment, and a launch it missed is tried again.
    for _ in 0..3 {
        let run = Running::spawn(&home, &manifest, &[], &[]);
        let supervisor = run.child.id();
        let mut zygote = None;
        let seen = wait_until(LONG, || {
            // Exec'd (its command line is its own) and holding the zygote's variable.
            zygote = children_of(supervisor).into_iter().find(|p| {
                cmdline(*p).ends_with("__capsule ") && started_with(*p, "MURMUR_ZYGOTE_FD")
            });
            zygote.is_some()
        });
        assert!(seen, "no zygote started");
        let zygote = zygote.unwrap();
        signal(zygote, 9);
        let run = run.announced();
        assert_eq!(run.members.len(), MEMBERS);
        let pids: Vec<u32> = run
            .members
            .iter()
            .map(|(_, _, session)| {
                let text =
                    std::fs::read_to_string(home.home.join(format!("run/{session}.json"))).unwrap();
                serde_json::from_str::<Value>(&text).unwrap()["pid"]
                    .as_u64()
                    .unwrap() as u32
            })
            .collect();
        assert!(!pids.contains(&zygote), "the zygote is no member");
        let spawned = pids
            .iter()
            .filter(|p| !started_with(**p, "MURMUR_ZYGOTE_FD"))
            .count();
        eprintln!("zygote killed: {spawned} of {MEMBERS} members spawned");
        // Said once, when the zygote failed: never when it had forked every member.
        let said = run.err.lock().unwrap().clone();
        let failed = "mur: the zygote forking this launch's capsules failed (";
        let expected = usize::from(spawned > 0);
        assert_eq!(said.matches(failed).count(), expected, "{said}");
        assert_eq!(
            said.matches("); the rest are started one by one\n").count(),
            expected,
            "{said}"
        );
        for (name, port, session) in &run.members {
            let answer = bearer_rpc(
                *port,
                &token_of(&home, session, "operator"),
                "SendMessage",
                message(&format!("hello {name}"), false),
            );
            assert_eq!(
                answer["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
                "{name}: {answer}"
            );
        }
        drop(run);
        assert_nothing_left(&home, LONG);
        if spawned > 0 {
            return;
        }
    }
    panic!("in 3 launches the zygote had forked every member before the kill reached it");
}
