//! Delegation end to end (DESIGN §7 delegate-task): a harness runs `mur delegate-task CAPSULE
//! TEXT`; the supervisor starts the sub-capsule under the parent's `children/`, the child posts
//! its completion to the parent's door, and the helper prints the child's answer. A cancel at
//! the top ends every level before the canceled task's `task_end`, and lists the residue;
//! `kill -9` of the top capsule leaves no child. Checked in /proc.

#[path = "support/running.rs"]
mod running;
mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};
use support::*;

const LONG: Duration = Duration::from_secs(40);

/// A fixture capsule named `name` that may delegate to the manifests `allow` names.
fn capsule(name: &'static str, allow: &[&str], extra: &str) -> String {
    let delegate = match allow {
        [] => String::new(),
        list => format!(
            "capabilities:\n  delegate:\n    allow: [{}]\n",
            list.join(", ")
        ),
    };
    let yaml = Fixture {
        name,
        ..Fixture::default()
    }
    .yaml();
    format!("{yaml}{delegate}{extra}")
}

/// top → mid → leaf, each allowed only the next.
fn three_levels(home: &Home) -> PathBuf {
    home.write("d/leaf.yaml", &capsule("leaf", &[], ""));
    home.write("d/mid.yaml", &capsule("mid", &["leaf.yaml"], ""));
    home.write("d/top.yaml", &capsule("top", &["mid.yaml"], ""))
}

/// The running records (`mur ps --json`) of this home.
fn running(home: &Home) -> Vec<Value> {
    let (_, out, _) = home.run(&["ps", "--json"]);
    serde_json::from_str::<Value>(&out)
        .ok()
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
}

fn text_of(task: &Value) -> String {
    task["artifacts"][0]["parts"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

#[test]
fn a_delegated_task_answers_through_its_completion() {
    let home = Home::new();
    home.write("d/child.yaml", &capsule("child", &[], ""));
    let top = home.write("d/top.yaml", &capsule("top", &["child.yaml"], ""));
    let run = Launch::start(&home, &top, &[]);
    let done = run.send("@delegate child @echo", false);
    let task = &done["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    assert_eq!(
        text_of(task),
        "@echo",
        "the child's answer, as the helper printed it"
    );
    let id = task["id"].as_str().unwrap();
    // The child ran under the parent's records and is gone.
    let children = home.records(&run.session).join("children");
    let folders: Vec<PathBuf> = std::fs::read_dir(&children)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(folders.len(), 1, "{folders:?}");
    let name = folders[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        name.starts_with("child-") && name.len() == "child-".len() + 16,
        "{name}"
    );
    assert!(folders[0].join("trace.jsonl").exists());
    // It kept no store (nothing brings a sub-capsule back); the top's store is out of its
    // harness's sight, and a child's would be in it, under the top's records.
    assert!(!folders[0].join("store").exists(), "{folders:?}");
    assert!(home
        .records(&run.session)
        .join("store")
        .join("store.sqlite")
        .is_file());
    let trace = home.trace(&run.session);
    let kinds: Vec<&str> = trace
        .iter()
        .filter(|e| e["task_id"] == id || e["caller_task_id"] == id)
        .map(|e| e["event_type"].as_str().unwrap())
        .collect();
    for kind in ["delegation_start", "completion_received", "delegation_end"] {
        assert!(kinds.contains(&kind), "{kind} missing from {kinds:?}");
    }
    assert!(
        wait_until(LONG, || running(&home).len() == 1),
        "the child ended after its completion: {:?}",
        running(&home)
    );
}

#[test]
fn a_capsule_not_in_the_allow_list_is_refused_naming_what_is() {
    let home = Home::new();
    home.write("d/child.yaml", &capsule("child", &[], ""));
    let top = home.write("d/top.yaml", &capsule("top", &["child.yaml"], ""));
    let run = Launch::start(&home, &top, &[]);
    let done = run.send("@run mur delegate-task stranger hello", false);
    let said: Value = serde_json::from_str(&text_of(&done["result"]["task"])).unwrap();
    assert_eq!(said["code"], 1, "{said}");
    let err = said["err"].as_str().unwrap();
    assert!(err.contains("stranger"), "{err}");
    assert!(err.contains("child"), "names what is allowed: {err}");
    assert!(!home.records(&run.session).join("children").exists());
}

/// Starts top → mid → leaf with the leaf working; answers the top's task and the pids below.
fn three_levels_working(home: &Home) -> (Launch, String) {
    let run = Launch::start(home, &three_levels(home), &[]);
    let task = run.start_task("@delegate mid @delegate leaf @sleep 120");
    assert!(
        wait_until(LONG, || running(home).iter().any(|r| r["name"] == "leaf")),
        "the leaf never started: {:?}",
        running(home)
    );
    assert!(wait_until(LONG, || processes_of(home).iter().any(
        |p| cmdline(*p).contains("fixture.py") && cmdline(*p).contains("--dialect")
    )));
    (run, task)
}

#[test]
fn a_cancel_at_the_top_ends_every_level_and_lists_the_residue() {
    let home = Home::new();
    let (run, task) = three_levels_working(&home);
    let capsule = running(&home)
        .iter()
        .find(|r| r["name"] == "top")
        .map(|r| r["pid"].as_u64().unwrap() as u32)
        .unwrap();
    // `mur ps` shows each sub-capsule under the capsule that delegated to it.
    let (_, ps, _) = home.run(&["ps"]);
    // The CAPSULE column: 20 characters after the address and the session.
    let names: Vec<String> = ps
        .lines()
        .skip(1)
        .map(|l| {
            l.chars()
                .skip(42)
                .take(20)
                .collect::<String>()
                .trim_end()
                .to_owned()
        })
        .collect();
    assert_eq!(
        names,
        ["top 0.1.0", "↳ mid 0.1.0", "  ↳ leaf 0.1.0"],
        "{ps}"
    );
    // `mur cancel` names the sub-capsule the cancel ends.
    let (code, out, err) = home.run(&["cancel", &run.session, &task]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], format!("canceled: {task}"), "{out}");
    assert!(
        lines[1].starts_with("ended: mid 0.1.0 (dlg_") && lines[1].contains(", session ses_"),
        "{out}"
    );
    let canceled = run.rpc("GetTask", json!({"id": task}));
    let result = &canceled["result"];
    assert_eq!(
        result["status"]["state"], "TASK_STATE_CANCELED",
        "{canceled}"
    );
    let residue = &result["artifacts"][0];
    assert_eq!(residue["artifactId"], "residue", "{canceled}");
    let item = &residue["parts"][0]["data"];
    assert_eq!(item["kind"], "delegation");
    assert_eq!(item["capsule"], "mid");
    assert!(item["delegation_id"].as_str().unwrap().starts_with("dlg_"));
    let workdir = item["child_workdir"].as_str().unwrap();
    assert!(Path::new(workdir).is_absolute() && workdir.contains("/children/mid-"));
    // Before the top's task_end, every level below it is gone.
    assert!(wait_until(LONG, || home.trace(&run.session).iter().any(
        |e| e["event_type"] == "task_end" && e["task_id"] == task.as_str()
    )));
    let record = home
        .trace(&run.session)
        .into_iter()
        .find(|e| e["event_type"] == "task_canceled" && e["task_id"] == task.as_str())
        .unwrap();
    assert_eq!(record["in_flight"][0]["kind"], "delegation", "{record}");
    assert_eq!(record["in_flight"][0]["capsule"], "mid");
    let below: Vec<u32> = support::descendants_at_work(capsule)
        .into_iter()
        .filter(|p| alive(*p))
        .collect();
    assert_eq!(
        below,
        Vec::<u32>::new(),
        "nothing runs below the top capsule but a keeper ready for its next task"
    );
    assert!(
        wait_until(LONG, || running(&home).len() == 1),
        "only the top capsule runs: {:?}",
        running(&home)
    );
    let stopped = run.rpc("murmur.StopSession", json!({}));
    assert_eq!(stopped["result"]["residue"], json!([]));
    // trace show follows the delegation down both levels.
    let (code, shown, _) = home.run(&["trace", "show", &run.session]);
    assert_eq!(code, 0);
    assert!(shown.contains("delegated to mid 0.1.0 (dlg_"), "{shown}");
    assert!(shown.contains("  delegated to leaf 0.1.0 (dlg_"), "{shown}");
    assert!(shown.contains("/children/mid-"), "{shown}");
}

#[test]
fn kill_9_of_the_top_capsule_leaves_no_child() {
    let home = Home::new();
    let (mut run, _) = three_levels_working(&home);
    let top = running(&home)
        .iter()
        .find(|r| r["name"] == "top")
        .map(|r| r["pid"].as_u64().unwrap() as u32)
        .unwrap();
    signal(top, 9);
    assert!(
        run.wait_exit(LONG).is_some(),
        "mur run ends with its capsule"
    );
    assert_nothing_left(&home, LONG);
}

#[test]
fn a_formation_member_delegates() {
    let home = Home::new();
    home.write("d/child.yaml", &capsule("child", &[], ""));
    let peer = "exports:\n  peer_tasks:\n    accept: true\n";
    let lead = Fixture {
        name: "lead",
        after_task: "exit",
        ..Fixture::default()
    }
    .yaml();
    home.write(
        "d/lead.yaml",
        &format!("{lead}capabilities:\n  delegate:\n    allow: [child.yaml]\n{peer}"),
    );
    home.write("d/worker.yaml", &capsule("worker", &[], peer));
    let formation = home.write(
        "d/formation.yaml",
        "formation:\n  name: f\n  version: \"0.1.0\"\n  entry: lead\n  members:\n    \
         lead: { manifest: lead.yaml, calls: [worker] }\n    worker: { manifest: worker.yaml }\n",
    );
    let (code, out, err) = home.run(&[
        "run",
        "--manifest",
        formation.to_str().unwrap(),
        "--task",
        "@delegate child from a member",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().last(), Some("Acknowledged."), "{out}");
    assert_nothing_left(&home, LONG);
}

#[test]
fn a_child_that_dies_before_it_reports_fails_the_delegation() {
    let home = Home::new();
    home.write("d/child.yaml", &capsule("child", &[], ""));
    let top = home.write("d/top.yaml", &capsule("top", &["child.yaml"], ""));
    let run = Launch::start(&home, &top, &[]);
    let task = run.start_task("@delegate child @sleep 120");
    let mut child = None;
    assert!(wait_until(LONG, || {
        child = running(&home)
            .iter()
            .find(|r| r["name"] == "child")
            .and_then(|r| r["pid"].as_u64());
        child.is_some()
    }));
    signal(child.unwrap() as u32, 9);
    let ended = run.wait_task(&task, LONG, |s| s == "TASK_STATE_FAILED");
    assert_eq!(ended["status"]["state"], "TASK_STATE_FAILED", "{ended}");
    let received = home
        .trace(&run.session)
        .into_iter()
        .find(|e| e["event_type"] == "completion_received")
        .expect("the supervisor reported the death as the completion");
    assert_eq!(received["state"], "failed");
    assert!(wait_until(LONG, || running(&home).len() == 1));
}

#[test]
fn ctrl_c_ends_every_level_cleanly() {
    let home = Home::new();
    let (mut run, task) = three_levels_working(&home);
    signal(run.pid(), 2);
    assert_eq!(run.wait_exit(LONG), Some(0), "a clean stop exits 0");
    assert_nothing_left(&home, LONG);
    // The top's task was canceled, its delegation ended before its task_end.
    let trace = home.trace(&run.session);
    let of_task: Vec<&str> = trace
        .iter()
        .filter(|e| e["task_id"] == task.as_str())
        .map(|e| e["event_type"].as_str().unwrap())
        .collect();
    let end = of_task.iter().position(|k| *k == "task_end").unwrap();
    let ended = of_task.iter().position(|k| *k == "delegation_end").unwrap();
    assert!(ended < end, "{of_task:?}");
    assert_run_keeps_only_launches(&home);
}

#[test]
fn kill_9_of_mur_run_leaves_no_level_running() {
    let home = Home::new();
    let (mut run, task) = three_levels_working(&home);
    signal(run.pid(), 9);
    let _ = run.child.wait();
    assert_nothing_left(&home, LONG);
    // What the launch left in run/ is pruned by the next mur ps, tokens and wiring included.
    assert_ps_prunes_run(&home);
    // Brought back (docs/store.md), the top's task that was delegating failed with its cause;
    // the levels below were its sub-capsules, ended with it, and are not started again.
    let back =
        running::Running::spawn_args(&home, &["run", "--resume", &run.session], &[]).announced();
    let got = http(
        run.port,
        "POST",
        "/",
        &[("Content-Type", "application/json"), ("A2A-Version", "1.0")],
        request(json!(1), "GetTask", json!({"id": task})).as_bytes(),
    )
    .json();
    assert_eq!(
        got["result"]["status"]["state"], "TASK_STATE_FAILED",
        "{got}"
    );
    // Said by the capsule as it went down with mur run; or, should the harness's helper have
    // heard first that its delegation ended, by the attempt's failure naming it.
    let cause = got["result"]["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        cause == "task failed: murmur's supervisor (mur run) ended while the task was live, and the capsule ended with it (so did any sub-capsule it had started); `mur run --resume` brings the session back: send the task again"
            || cause.contains("delegat"),
        "{cause}"
    );
    assert!(running(&home).iter().all(|r| r["name"] == "top"));
    drop(back);
    assert_nothing_left(&home, LONG);
}

#[test]
fn mur_stop_on_a_sub_capsule_stops_it_and_its_own_and_leaves_the_rest() {
    let home = Home::new();
    let (run, task) = three_levels_working(&home);
    let mid = running(&home)
        .into_iter()
        .find(|r| r["name"] == "mid")
        .unwrap();
    let (code, out, err) = home.run(&["stop", mid["session_id"].as_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.ends_with(&format!(
            "stopped: {}\n",
            mid["session_id"].as_str().unwrap()
        )),
        "{out}"
    );
    // The top capsule goes on; its delegation ended with the child, so its task fails.
    let ended = run.wait_task(&task, LONG, |s| s == "TASK_STATE_FAILED");
    assert_eq!(ended["status"]["state"], "TASK_STATE_FAILED", "{ended}");
    assert!(
        wait_until(LONG, || running(&home).len() == 1),
        "mid and leaf are gone, top runs: {:?}",
        running(&home)
    );
    assert!(!alive(mid["pid"].as_u64().unwrap() as u32));
    let next = run.send("still serving", false);
    assert_eq!(
        next["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}

#[test]
fn a_completion_token_lives_in_a_private_file_never_in_the_environment() {
    use std::os::unix::fs::PermissionsExt;
    let home = Home::new();
    home.write("d/child.yaml", &capsule("child", &[], ""));
    let top = home.write(
        "d/top.yaml",
        &capsule(
            "top",
            &["child.yaml"],
            "network:\n  authentication:\n    scheme: bearer\n",
        ),
    );
    let run = Launch::start(&home, &top, &[]);
    let operator = home.operator_token(&run.session);
    let sent = bearer_rpc(
        run.port,
        &operator,
        "SendMessage",
        message("@delegate child @sleep 120", true),
    );
    let task = sent["result"]["task"]["id"].as_str().unwrap().to_owned();
    let mut child = Value::Null;
    assert!(wait_until(LONG, || {
        child = running(&home)
            .into_iter()
            .find(|r| r["name"] == "child")
            .unwrap_or_default();
        !child.is_null()
    }));
    let session = child["session_id"].as_str().unwrap();
    let file = home.home.join("run").join(format!("{session}.completion"));
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let token = std::fs::read_to_string(&file).unwrap();
    assert!(token.len() >= 32, "a minted token: {token:?}");
    let environ = std::fs::read(format!("/proc/{}/environ", child["pid"])).unwrap();
    assert!(
        !String::from_utf8_lossy(&environ).contains(token.trim()),
        "the token is not in the sub-capsule's environment"
    );
    // Canceling the delegating task ends the child, and its token file goes with it.
    let canceled = bearer_rpc(run.port, &operator, "CancelTask", json!({"id": task}));
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED");
    assert!(
        wait_until(LONG, || !file.exists()),
        "the token file is removed"
    );
}

#[test]
fn a_child_silent_past_its_deadline_is_ended_and_the_helper_says_so() {
    let home = Home::new();
    home.write("d/child.yaml", &capsule("child", &[], ""));
    let top = home.write("d/top.yaml", &capsule("top", &["child.yaml"], ""));
    let run = Launch::start(&home, &top, &[]);
    // The child's harness would sleep 30 s; the delegation waits 1.
    let done = run.send("@run mur delegate-task --timeout 1 child @sleep 30", false);
    let task = &done["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    let ran: Value = serde_json::from_str(&text_of(task)).unwrap();
    assert_eq!(ran["code"], 1, "{ran}");
    let err = ran["err"].as_str().unwrap();
    assert!(
        err.ends_with("sub-capsule child gave no response (timed_out): sub-capsule child gave no answer within 1 s; it was ended\n  hint: wait longer with --timeout SECS, or carry on without the sub-capsule's response\n"),
        "{err}"
    );
    let end = home
        .trace(&run.session)
        .into_iter()
        .find(|e| e["event_type"] == "delegation_end")
        .unwrap();
    assert_eq!(end["state"], "timed_out", "{end}");
    // The child, and its sleeping harness, are gone: only `mur run` and the top capsule are left
    // (and the top capsule's keeper, ready for its next task).
    let at_work = || -> Vec<u32> {
        processes_of(&home)
            .into_iter()
            .filter(|p| !ready_keeper(*p))
            .collect()
    };
    assert!(
        wait_until(LONG, || running(&home).len() == 1 && at_work().len() == 2),
        "left: {:?}",
        at_work()
            .into_iter()
            .map(|p| format!("{p} {}", cmdline(p)))
            .collect::<Vec<_>>()
    );
}
