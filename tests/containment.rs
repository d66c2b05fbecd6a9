//! Containment (DESIGN §3): nothing a harness attempt starts outlives the attempt, however it
//! detaches, whatever murmur process is killed; a harness reaches no token but its own; a
//! cancel is never delayed by the harness's stdin; an answer survives a descendant that holds
//! stdout; and the residue a stop reports is what /proc shows. Each test runs in both modes:
//! namespaces (what this machine's kernel grants) and the fallback, forced with
//! `MURMUR_CONTAINMENT=fallback`.

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use support::*;

const LONG: Duration = Duration::from_secs(30);

/// Runs a test body once per containment mode, as two tests.
macro_rules! in_both_modes {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn namespaces() {
                super::$name("namespaces")
            }
            #[test]
            fn fallback() {
                super::$name("fallback")
            }
        }
    )*};
}

in_both_modes!(
    detached_processes_end_with_the_answer,
    detached_processes_end_with_a_cancel,
    nothing_survives_kill_9_of_mur_run,
    nothing_survives_kill_9_of_the_capsule,
    nothing_survives_kill_9_of_both,
    nothing_survives_kill_9_of_the_keeper,
    a_harness_cannot_print_mur_token,
    cancel_is_not_delayed_by_a_harness_that_never_reads_stdin,
    the_answer_survives_a_descendant_that_holds_stdout,
    stop_reports_the_residue_proc_shows,
    mur_install_names_the_containment,
    attempts_are_kept_by_mur_keeper,
    a_mur_keeper_of_another_build_is_never_run,
);

fn env(mode: &str) -> Vec<(&'static str, String)> {
    vec![("MURMUR_CONTAINMENT", mode.to_owned())]
}

fn launch(home: &Home, fixture: &Fixture, mode: &str) -> Launch {
    let manifest = home.write("murmur.yaml", &fixture.yaml());
    Launch::start_env(home, &manifest, &[], &env(mode))
}

/// The capsule process of a launch: the one child of `mur run` that is `mur __capsule`.
fn capsule_pid(run: &Launch) -> u32 {
    let mut found = None;
    assert!(wait_until(LONG, || {
        found = descendants(run.pid())
            .into_iter()
            .find(|p| cmdline(*p).contains("__capsule"));
        found.is_some()
    }));
    found.unwrap()
}

fn trace_has(home: &Home, session: &str, event: &str, task: &str) -> bool {
    home.trace(session)
        .iter()
        .any(|e| e["event_type"] == event && e["task_id"] == task)
}

/// Waits (bounded) until none of `pids`, and no other process of this test, runs.
fn assert_all_gone(home: &Home, pids: &[u32], what: &str) {
    let gone = || pids.iter().all(|p| !alive(*p)) && processes_of(home).is_empty();
    assert!(
        wait_until(LONG, gone),
        "{what}: still running: {:?}",
        pids.iter()
            .copied()
            .chain(processes_of(home))
            .filter(|p| alive(*p))
            .map(|p| format!("{p} {}", cmdline(p)))
            .collect::<Vec<_>>()
    );
}

fn detached_processes_end_with_the_answer(mode: &str) {
    let home = Home::new();
    let run = launch(&home, &Fixture::default(), mode);
    let child = home.root.join("gc.pid");
    let go = home.root.join("go");
    let id = run.start_task(&format!(
        "@grandchild {}\n@wait-for {}\n@env",
        child.display(),
        go.display()
    ));
    let grandchild = wait_pid(&child);
    assert!(alive(grandchild));
    std::fs::write(&go, "").unwrap();
    let task = run.wait_task(&id, LONG, |s| s == "TASK_STATE_COMPLETED");
    // The attempt ended before the task did: nothing it started may still run now.
    assert!(
        !alive(grandchild),
        "the detached grandchild outlived its task"
    );
    assert!(trace_has(&home, &run.session, "task_end", &id));
    let capsule = capsule_pid(&run);
    assert_eq!(
        descendants_at_work(capsule),
        Vec::<u32>::new(),
        "nothing below the capsule but a keeper ready for the next task"
    );
    // The harness's environment leads to no other session's records.
    let answer = task["artifacts"][0]["parts"][0]["text"].as_str().unwrap();
    let env: Value = serde_json::from_str(answer).unwrap();
    assert!(env.get("MURMUR_HOME").is_none(), "{env}");
    assert!(env.get("MURMUR_TASK_TOKEN").is_some(), "{env}");
    let start = home
        .trace(&run.session)
        .into_iter()
        .find(|e| e["event_type"] == "harness_start")
        .unwrap();
    assert_eq!(start["containment"], mode);
}

fn detached_processes_end_with_a_cancel(mode: &str) {
    let home = Home::new();
    let run = launch(&home, &Fixture::default(), mode);
    let pidfile = home.root.join("h.pid");
    let child = home.root.join("gc.pid");
    let id = run.start_task(&format!(
        "@ignore-sigint\n@pidfile {}\n@grandchild {}\n@sleep 120",
        pidfile.display(),
        child.display()
    ));
    let harness = wait_pid(&pidfile);
    let grandchild = wait_pid(&child);
    let canceled = run.rpc("CancelTask", json!({"id": id}));
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED");
    // It ignores SIGINT: ended after the grace, with everything it started.
    assert!(wait_until(Duration::from_secs(40), || trace_has(
        &home,
        &run.session,
        "task_end",
        &id
    )));
    assert!(!alive(harness), "the harness outlived task_end");
    assert!(!alive(grandchild), "the grandchild outlived task_end");
    assert_eq!(descendants_at_work(capsule_pid(&run)), Vec::<u32>::new());
}

/// Starts a task whose harness leaves a detached grandchild, and answers every process of the
/// launch (mur run, the capsule, the keeper, the harness, the grandchild).
fn launch_with_a_detached_grandchild(home: &Home, mode: &str) -> (Launch, Vec<u32>) {
    let run = launch(home, &Fixture::default(), mode);
    let child = home.root.join("gc.pid");
    let pidfile = home.root.join("h.pid");
    run.start_task(&format!(
        "@pidfile {}\n@grandchild {}\n@sleep 120",
        pidfile.display(),
        child.display()
    ));
    let harness = wait_pid(&pidfile);
    let grandchild = wait_pid(&child);
    if mode == "namespaces" {
        // The next attempt's keeper, ready while this one runs: it must not survive either.
        wait_ready_keeper(capsule_pid(&run));
    }
    let mut all = vec![run.pid()];
    all.extend(descendants(run.pid()));
    assert!(
        all.contains(&harness) && all.contains(&grandchild),
        "{all:?}"
    );
    assert_eq!(processes_of(home).len(), all.len(), "{all:?}");
    (run, all)
}

fn nothing_survives_kill_9_of_mur_run(mode: &str) {
    let home = Home::new();
    let (mut run, all) = launch_with_a_detached_grandchild(&home, mode);
    signal(run.pid(), 9);
    let _ = run.child.wait();
    assert_all_gone(&home, &all, "after kill -9 of mur run");
}

fn nothing_survives_kill_9_of_the_capsule(mode: &str) {
    let home = Home::new();
    let (mut run, all) = launch_with_a_detached_grandchild(&home, mode);
    signal(capsule_pid(&run), 9);
    assert!(
        run.wait_exit(LONG).is_some(),
        "mur run ends with its capsule"
    );
    assert_all_gone(&home, &all, "after kill -9 of the capsule");
}

fn nothing_survives_kill_9_of_both(mode: &str) {
    let home = Home::new();
    let (mut run, all) = launch_with_a_detached_grandchild(&home, mode);
    let capsule = capsule_pid(&run);
    signal(run.pid(), 9);
    signal(capsule, 9);
    let _ = run.child.wait();
    assert_all_gone(&home, &all, "after kill -9 of mur run and the capsule");
}

fn nothing_survives_kill_9_of_the_keeper(mode: &str) {
    let home = Home::new();
    let (run, all) = launch_with_a_detached_grandchild(&home, mode);
    let capsule = capsule_pid(&run);
    let keeper = descendants(capsule)
        .into_iter()
        .find(|p| {
            cmdline(*p).contains("__contain") && ppid(*p) == Some(capsule) && !ready_keeper(*p)
        })
        .expect("the keeper is the capsule's child");
    signal(keeper, 9);
    let attempt: Vec<u32> = all
        .iter()
        .copied()
        .filter(|p| ![run.pid(), capsule].contains(p))
        .collect();
    assert!(wait_until(LONG, || attempt.iter().all(|p| !alive(*p))));
    // Dead, then reaped: the capsule's sweep collects what its keeper left.
    assert!(
        wait_until(LONG, || descendants_at_work(capsule).is_empty()),
        "left below the capsule: {:?}",
        descendants_at_work(capsule)
    );
    // The capsule goes on: its next task runs.
    let next = run.send("after the keeper was killed", false);
    assert_eq!(
        next["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}

/// The binary the keeper of `run`'s running attempt executes, once it runs one: what its
/// `/proc/PID/exe` names (a task must be running; a keeper kept ready is not its keeper).
fn keeper_exe(run: &Launch) -> std::path::PathBuf {
    let capsule = capsule_pid(run);
    let mut keeper = None;
    assert!(wait_until(LONG, || {
        keeper = descendants(capsule).into_iter().find(|p| {
            cmdline(*p).contains("__contain") && ppid(*p) == Some(capsule) && !ready_keeper(*p)
        });
        keeper.is_some()
    }));
    let keeper = keeper.unwrap();
    std::fs::read_link(format!("/proc/{keeper}/exe"))
        .unwrap_or_else(|e| panic!("the keeper {keeper}'s binary: {e}"))
}

/// `mur` and, when given, a `mur-keeper` in a folder of the test's own, as an install would
/// lay them out; `home` runs that `mur`. Answers the folder.
fn install(home: &mut Home, keeper: Option<&[u8]>) -> std::path::PathBuf {
    let dir = home.root.join("install");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(mur_bin(), dir.join("mur")).unwrap();
    if let Some(bytes) = keeper {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join("mur-keeper");
        std::fs::write(&path, bytes).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    home.bin = dir.join("mur");
    dir
}

/// Every attempt, ready or not, is kept by `mur-keeper` from beside `mur` (a tenth of its size,
/// so a task starts sooner), and the task runs as with `mur` itself.
fn attempts_are_kept_by_mur_keeper(mode: &str) {
    let mut home = Home::new();
    let keeper = std::fs::read(env!("CARGO_BIN_EXE_mur-keeper")).unwrap();
    let dir = install(&mut home, Some(&keeper));
    let run = launch(&home, &Fixture::default(), mode);
    let first = run.send("one", false);
    assert_eq!(
        first["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{first}"
    );
    run.start_task("@sleep 60");
    assert_eq!(keeper_exe(&run), dir.join("mur-keeper"));
    if mode == "namespaces" {
        let ready = wait_ready_keeper(capsule_pid(&run));
        let exe = std::fs::read_link(format!("/proc/{}/exe", ready[0])).unwrap();
        assert_eq!(exe, dir.join("mur-keeper"), "the keeper kept ready");
    }
}

/// A `mur-keeper` that is not of `mur`'s build is never run, whether left from another build
/// (the same program with another stamp) or any other file of that name: `mur` keeps the
/// attempts itself, and they run as ever.
fn a_mur_keeper_of_another_build_is_never_run(mode: &str) {
    // Another build's: each `murmur-build-` and 16 hex digits (the stamp) with other digits.
    let mut stale = std::fs::read(env!("CARGO_BIN_EXE_mur-keeper")).unwrap();
    let (prefix, mut restamped) = (b"murmur-build-".len(), 0);
    for at in 0..stale.len().saturating_sub(prefix + 16) {
        let digits = at + prefix..at + prefix + 16;
        if &stale[at..at + prefix] == b"murmur-build-"
            && stale[digits.clone()].iter().all(u8::is_ascii_hexdigit)
        {
            for b in &mut stale[digits] {
                *b = if *b == b'0' { b'1' } else { b'0' };
            }
            restamped += 1;
        }
    }
    assert!(restamped > 0, "mur-keeper holds its build's stamp");
    for (what, bytes) in [
        ("another build's mur-keeper", stale),
        ("a script named mur-keeper", b"#!/bin/sh\nexit 1\n".to_vec()),
    ] {
        let mut home = Home::new();
        let dir = install(&mut home, Some(&bytes));
        let run = launch(&home, &Fixture::default(), mode);
        let done = run.send("one", false);
        assert_eq!(
            done["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{what}: {done}"
        );
        run.start_task("@sleep 60");
        assert_eq!(keeper_exe(&run), dir.join("mur"), "{what}");
    }
}

/// Runs `command` through the fixture's `@run` in a task of `run`; answers its JSON.
fn run_in_harness(run: &Launch, command: &str) -> Value {
    let done = run.send(&format!("@run {command}"), false);
    let task = &done["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    serde_json::from_str(task["artifacts"][0]["parts"][0]["text"].as_str().unwrap()).unwrap()
}

fn a_harness_cannot_print_mur_token(mode: &str) {
    let home = Home::new();
    // Another session of the same user, with minted tokens in $MURMUR_HOME/run.
    let authenticated = Fixture {
        name: "guarded",
        extra: "network:\n  authentication:\n    scheme: bearer\n",
        ..Fixture::default()
    };
    let guarded = {
        let m = home.write("guarded/murmur.yaml", &authenticated.yaml());
        Launch::start_env(&home, &m, &[], &env(mode))
    };
    let operator = home.operator_token(&guarded.session);
    let run = launch(&home, &Fixture::default(), mode);

    let said = run_in_harness(&run, &format!("mur token {}", guarded.session));
    assert_eq!(said["code"], 1, "{said}");
    let err = said["err"].as_str().unwrap();
    assert!(
        err.starts_with("error[E-CLI-021]: mur token does not run inside a harness"),
        "{err}"
    );
    // Without its task token in the environment it is still inside a harness.
    let said = run_in_harness(
        &run,
        &format!("env -u MURMUR_TASK_TOKEN mur token {}", guarded.session),
    );
    assert_eq!(said["code"], 1, "{said}");
    assert!(
        said["err"].as_str().unwrap().contains("E-CLI-021"),
        "{said}"
    );
    assert!(!said.to_string().contains(&operator));

    let run_dir = home.home.join("run");
    let tokens = run_dir.join(format!("{}.tokens", guarded.session));
    assert!(tokens.exists());
    let said = run_in_harness(
        &run,
        &format!("ls -A {}; cat {}", run_dir.display(), tokens.display()),
    );
    if mode == "namespaces" {
        // The folder is there, empty and read-only: no token file can be read or planted.
        assert_eq!(said["out"], "", "{said}");
        assert_ne!(said["code"], 0, "{said}");
        let said = run_in_harness(&run, &format!("touch {}/x", run_dir.display()));
        assert_ne!(said["code"], 0, "{said}");
        assert!(!said.to_string().contains(&operator));
    } else {
        // The fallback is no wall against the user's own files (docs/containment.md says so).
        assert_eq!(said["code"], 0, "{said}");
    }
}

fn cancel_is_not_delayed_by_a_harness_that_never_reads_stdin(mode: &str) {
    let home = Home::new();
    let pidfile = home.root.join("h.pid");
    let script = home.write(
        "sleeper.sh",
        &format!(
            "#!/bin/sh\n# Never reads stdin.\necho $$ > {p}.tmp && mv {p}.tmp {p}\nexec sleep 60\n",
            p = pidfile.display()
        ),
    );
    let manifest = home.write(
        "murmur.yaml",
        &format!(
            r#"name: sleeper
version: "0.1.0"
artifacts:
  - name: local/sleeper
    version: "0.1.0"
    runtime: driver
    process:
      command: ["sh", "{}"]
inference:
  transport: process
  driver: {{ artifact: local/sleeper }}
lifecycle: {{ task_acceptance: queue, after_task: sleep, queue_depth: 1 }}
"#,
            script.display()
        ),
    );
    let run = Launch::start_env(&home, &manifest, &[], &env(mode));
    let prompt = "x".repeat(1 << 20);
    let id = run.start_task(&prompt);
    let harness = wait_pid(&pidfile);
    let queued = run.start_task("next");
    let canceled = run.rpc("CancelTask", json!({"id": id}));
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED");
    assert!(wait_until(LONG, || !alive(harness)), "the harness ended");
    // SIGINT went out at once, not after the prompt it never reads was written (that write
    // never ends): had it waited, the kill after the grace would have ended the harness, and
    // its harness_exit below would say `killed: true`.
    assert!(wait_until(LONG, || trace_has(
        &home,
        &run.session,
        "harness_exit",
        &id
    )));
    let exit = home
        .trace(&run.session)
        .into_iter()
        .find(|e| e["event_type"] == "harness_exit" && e["task_id"] == id.as_str())
        .unwrap();
    assert_eq!(
        (exit["cause"].as_str(), exit["killed"].as_bool()),
        (Some("canceled"), Some(false))
    );
    // The queued task gets the running slot.
    assert!(wait_until(LONG, || trace_has(
        &home,
        &run.session,
        "harness_start",
        &queued
    )));
}

fn the_answer_survives_a_descendant_that_holds_stdout(mode: &str) {
    let home = Home::new();
    let manifest = home.write(
        "murmur.yaml",
        r#"name: detacher
version: "0.1.0"
artifacts:
  - name: local/detacher
    version: "0.1.0"
    runtime: driver
    process:
      command: ["sh", "-c", "setsid sleep 1006 & echo 'the answer'"]
inference:
  transport: process
  driver: { artifact: local/detacher }
lifecycle: { task_acceptance: single, after_task: sleep }
"#,
    );
    let run = Launch::start_env(&home, &manifest, &[], &env(mode));
    let done = run.send("anything", false);
    let task = &done["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "the answer");
    let left: Vec<u32> = processes_of(&home)
        .into_iter()
        .filter(|p| cmdline(*p).contains("sleep 1006"))
        .collect();
    assert_eq!(
        left,
        Vec::<u32>::new(),
        "the detached sleep outlived the task"
    );
}

fn stop_reports_the_residue_proc_shows(mode: &str) {
    let home = Home::new();
    let run = launch(&home, &Fixture::default(), mode);
    let child = home.root.join("gc.pid");
    let id = run.start_task(&format!("@grandchild {}\n@sleep 120", child.display()));
    let grandchild = wait_pid(&child);
    let capsule = capsule_pid(&run);
    assert!(!descendants(capsule).is_empty());
    let stopped = run.rpc("murmur.StopSession", json!({}));
    assert_eq!(stopped["result"]["canceled"], json!([id]));
    assert_eq!(stopped["result"]["residue"], json!([]), "{stopped}");
    // The account was true: once the canceled attempt has ended, nothing of it runs.
    assert!(wait_until(LONG, || trace_has(
        &home,
        &run.session,
        "task_end",
        &id
    )));
    assert!(!alive(grandchild));
    assert_eq!(descendants_at_work(capsule), Vec::<u32>::new());
    let again = run.rpc("murmur.StopSession", json!({}));
    assert_eq!(again["result"]["canceled"], json!([]));
    assert_eq!(again["result"]["residue"], json!([]));
}

fn mur_install_names_the_containment(mode: &str) {
    let home = Home::new();
    let manifest = home.write("murmur.yaml", &Fixture::default().yaml());
    let out = home
        .mur()
        .env("MURMUR_CONTAINMENT", mode)
        .args(["install", "--manifest"])
        .arg(&manifest)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let lines: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("containment: "))
        .collect();
    let expected: Vec<String> = match mode {
        "namespaces" => vec![
            "containment: namespaces (the kernel grants unprivileged user, PID, mount and network namespaces)".into(),
            "  wall pid: up".into(),
            "  wall mount: up".into(),
            "  wall network: up".into(),
            "  wall files: up".into(),
            "  wall environment: up".into(),
            KEEPER.into(),
        ],
        _ => {
            let why = "missing: fallback mode, MURMUR_CONTAINMENT=fallback asks for it";
            vec![
                "containment: fallback (MURMUR_CONTAINMENT=fallback asks for it)".into(),
                format!("  wall pid: {why}"),
                format!("  wall mount: {why}"),
                format!("  wall network: {why}"),
                format!("  wall files: {why}"),
                "  wall environment: up".into(),
                KEEPER.into(),
            ]
        }
    };
    assert_eq!(lines, expected);
}

/// What `mur install` says of the keeper beside the built `mur`.
const KEEPER: &str = "keeper: mur-keeper, beside mur (this build)";

/// `mur install` says which binary keeps the attempts: a lone `mur`, or one beside another
/// build's `mur-keeper`, keeps them itself, and says how to get the faster start.
#[test]
fn mur_install_names_the_keeper() {
    for (keeper, line) in [
        (None, "keeper: mur itself (no mur-keeper beside it: tasks start slower; cargo build builds both)"),
        (
            Some(b"#!/bin/sh\n".as_slice()),
            "keeper: mur itself (the mur-keeper beside it is not this build's: tasks start slower; install mur and mur-keeper from one build)",
        ),
    ] {
        let mut home = Home::new();
        install(&mut home, keeper);
        let manifest = home.write("murmur.yaml", &Fixture::default().yaml());
        let out = home
            .mur()
            .args(["install", "--manifest"])
            .arg(&manifest)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}");
        assert_eq!(text.lines().last(), Some(line), "{text}");
    }
}

/// The keeper kept ready below `capsule` for its next task (issue 21), once it is there:
/// its pid, and its init's.
fn wait_ready_keeper(capsule: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let ready = wait_until(LONG, || {
        found = descendants(capsule)
            .into_iter()
            .filter(|p| ready_keeper(*p))
            .collect();
        found.len() == 2
    });
    assert!(ready, "no keeper made ready below the capsule: {found:?}");
    found
}

#[test]
fn a_ready_keeper_is_used_once() {
    let home = Home::new();
    let run = launch(&home, &Fixture::default(), "namespaces");
    let capsule = capsule_pid(&run);
    let mut seen = Vec::new();
    for round in 0..3 {
        // Before the first task none is ready; after each, the next one waits. It is no task:
        // the next task is taken, not refused as the capsule being busy.
        let ready = (round > 0).then(|| wait_ready_keeper(capsule));
        let said = run_in_harness(
            &run,
            "readlink /proc/self/ns/pid /proc/self/ns/net; echo $$; echo $MURMUR_TASK_ID",
        );
        let lines: Vec<String> = said["out"]
            .as_str()
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        assert_eq!(lines.len(), 4, "{said}");
        let task = lines[3].clone();
        // The task ran under the keeper that was waiting, with its own task's environment.
        let start = home
            .trace(&run.session)
            .into_iter()
            .find(|e| e["event_type"] == "harness_start" && e["task_id"] == task.as_str())
            .unwrap();
        if let Some(ready) = ready {
            assert!(
                ready.contains(&(start["pid"].as_u64().unwrap() as u32)),
                "{start}"
            );
        }
        seen.push((lines[0].clone(), lines[1].clone(), lines[2].clone()));
    }
    // Each attempt ran in a PID namespace of its own, new: its shell is among the namespace's
    // first processes, the same number every time (a namespace used again would have handed
    // out higher ones). Namespace inode numbers cannot say it: the kernel gives a freed one
    // to the next namespace made.
    let shells: Vec<&str> = seen.iter().map(|s| s.2.as_str()).collect();
    assert!(
        shells
            .iter()
            .all(|p| *p == shells[0] && p.parse::<u32>().is_ok_and(|n| n < 16)),
        "{seen:?}"
    );
    let pid_namespaces = seen.iter().filter(|s| s.0.starts_with("pid:[")).count();
    let net_namespaces = seen.iter().filter(|s| s.1.starts_with("net:[")).count();
    assert_eq!((pid_namespaces, net_namespaces), (3, 3), "{seen:?}");
}

#[test]
fn nothing_survives_kill_9_of_a_capsule_with_a_keeper_ready() {
    let home = Home::new();
    let mut run = launch(&home, &Fixture::default(), "namespaces");
    let done = run.send("one task, and a keeper is made ready for the next", false);
    assert_eq!(
        done["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    let capsule = capsule_pid(&run);
    let ready = wait_ready_keeper(capsule);
    // The proof below can see it: it carries the test's environment.
    let mine = processes_of(&home);
    assert!(ready.iter().all(|p| mine.contains(p)), "{ready:?} {mine:?}");
    signal(capsule, 9);
    assert!(
        run.wait_exit(LONG).is_some(),
        "mur run ends with its capsule"
    );
    assert_all_gone(
        &home,
        &ready,
        "after kill -9 of a capsule with a keeper ready",
    );
}

#[test]
fn an_unknown_containment_mode_is_refused_before_anything_starts() {
    let home = Home::new();
    let manifest = home.write("murmur.yaml", &Fixture::default().yaml());
    let out = home
        .mur()
        .env("MURMUR_CONTAINMENT", "chroot")
        .args(["run", "--manifest"])
        .arg(&manifest)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err,
        "error[E-RUN-050]: MURMUR_CONTAINMENT=\"chroot\" is not a containment mode: use auto, namespaces or fallback\n  hint: unset MURMUR_CONTAINMENT (or set it to auto) to use the fallback; `mur install` says which mode is in force\n"
    );
    assert!(
        !home.home.join("records").exists(),
        "no session was recorded"
    );
}

#[test]
fn the_process_finder_sees_this_tests_processes_and_no_others() {
    // The proofs above rest on it: it must find a launch's processes, and only its own.
    let home = Home::new();
    let other = Home::new();
    let run = launch(&home, &Fixture::default(), "namespaces");
    let capsule = capsule_pid(&run);
    let mine = processes_of(&home);
    assert!(
        mine.contains(&run.pid()) && mine.contains(&capsule),
        "{mine:?}"
    );
    assert_eq!(processes_of(&other), Vec::<u32>::new());
}
