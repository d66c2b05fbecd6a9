//! The durable store (docs/store.md), tried as a user and a crash would: a member killed with
//! `kill -9` comes back answering its earlier tasks as it did, its page tokens still good and
//! its contexts' harness sessions resumed; `mur run --resume` after `kill -9` of `mur run` puts
//! the same doors back at the same URLs with the same tokens; a store that cannot be trusted is
//! refused, never replaced by an empty one; a crash in the middle of a thousand submissions
//! loses no task a client was answered about, nor what a stream showed; and an http capsule's contexts go on with the
//! conversation they had, its spend ledger lines kept beside them.

#[path = "support/fake_provider.rs"]
mod fake_provider;
#[path = "support/running.rs"]
mod running;
#[path = "support/sse.rs"]
mod sse;
mod support;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use fake_provider::{openai, Fake, Reply};
use running::*;
use serde_json::{json, Value};
use support::*;

/// What the status of a task that was live at the crash says.
const RESTARTED: &str = "task failed: the capsule restarted while the task was live (its process ended: killed, crashed or its launch ended); send the task again";

/// What the status of a task that was live when `mur run` was killed says.
const SUPERVISOR_GONE: &str = "task failed: murmur's supervisor (mur run) ended while the task was live, and the capsule ended with it (so did any sub-capsule it had started); `mur run --resume` brings the session back: send the task again";

const PEER: &str = "exports:\n  peer_tasks:\n    accept: true\n";

/// `lead → coder`; the coder speaks stream-json (its answers name the harness session they
/// ran in) and comes back when it crashes.
fn formation(home: &Home, coder_queue: u32) -> PathBuf {
    home.write(
        "f/worker/murmur.yaml",
        &Fixture {
            dialect: "stream-json",
            queue_depth: Some(coder_queue),
            extra: PEER,
            ..Fixture::default()
        }
        .yaml(),
    );
    home.write(
        "f/lead/murmur.yaml",
        &Fixture {
            name: "lead",
            extra: PEER,
            ..Fixture::default()
        }
        .yaml(),
    );
    home.write(
        "f/formation.yaml",
        "formation:\n  name: up\n  version: \"0.1.0\"\n  entry: lead\n  members:\n    lead: { manifest: lead/murmur.yaml, calls: [coder] }\n    coder:\n      manifest: worker/murmur.yaml\n      restart: on_failure\n      max_restarts: 3\n      restart_window: 600\n",
    )
}

/// `text` in `context` as `token`'s holder, waited for; answers the task.
fn ask(port: u16, token: &str, context: &str, text: &str, forget: bool) -> Value {
    let mut params = message(text, false);
    params["message"]["contextId"] = json!(context);
    if forget {
        let uri = "https://docs.murmur.nexus/reference/agent-card/#murmur-door-v1";
        params["message"]["metadata"] = json!({uri: {"forgetSession": true}});
    }
    let resp = bearer_rpc(port, token, "SendMessage", params);
    resp["result"]["task"].clone()
}

fn answer(task: &Value) -> &str {
    task["artifacts"][0]["parts"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no answer: {task}"))
}

/// `session=S resumed=yes|no prompts=N`, as the fixture answers in stream-json.
fn harness_session(task: &Value) -> (String, String, String) {
    harness_session_of(answer(task))
}

fn harness_session_of(answer: &str) -> (String, String, String) {
    let words: Vec<&str> = answer.split(' ').collect();
    let value = |i: usize| words[i].split_once('=').unwrap().1.to_owned();
    (value(0), value(1), value(2))
}

fn get(port: u16, token: &str, id: &str) -> Value {
    bearer_rpc(port, token, "GetTask", json!({"id": id}))
}

fn list(port: u16, token: &str, page_token: Option<&str>) -> Value {
    let mut params = json!({"pageSize": 1});
    if let Some(t) = page_token {
        params["pageToken"] = json!(t);
    }
    bearer_rpc(port, token, "ListTasks", params)
}

fn pid_of(home: &Home, session: &str) -> u32 {
    let record: Value = serde_json::from_str(
        &std::fs::read_to_string(home.home.join("run").join(format!("{session}.json"))).unwrap(),
    )
    .unwrap();
    record["pid"].as_u64().unwrap() as u32
}

#[test]
fn a_member_killed_with_kill_9_comes_back_answering_as_it_did() {
    let home = Home::new();
    let manifest = formation(&home, 2);
    let run = Running::start(&home, &manifest, &[], &[]);
    let (port, coder) = run.member("coder");
    let lead = token_of(&home, &coder, "member:lead");

    let first = ask(port, &lead, "ctx-a", "hello", false);
    let (session, resumed, prompts) = harness_session(&first);
    assert_eq!((resumed.as_str(), prompts.as_str()), ("no", "1"));
    let first_id = first["id"].as_str().unwrap().to_owned();
    let before = get(port, &lead, &first_id);
    assert_eq!(before["result"], first);

    // The store is out of the harness's sight: its folder is an empty cover.
    let store = home.records(&coder).join("store");
    assert!(store.join("store.sqlite").is_file());
    let seen = ask(
        port,
        &lead,
        "ctx-look",
        &format!("@run ls -A {}", store.display()),
        false,
    );
    let seen: Value = serde_json::from_str(answer(&seen)).unwrap();
    assert_eq!(
        (seen["code"].as_i64(), seen["out"].as_str()),
        (Some(0), Some(""))
    );
    // A hostile harness can neither plant a store of its own there nor read the tokens kept
    // for `mur run --resume` (run/ is out of its sight as a whole).
    let planted = ask(
        port,
        &lead,
        "ctx-look",
        &format!("@run echo forged > {}/store.sqlite", store.display()),
        false,
    );
    let planted: Value = serde_json::from_str(answer(&planted)).unwrap();
    assert_ne!(planted["code"].as_i64(), Some(0), "{planted}");
    let kept = home.home.join("run").join("launches");
    assert!(kept.is_dir());
    let seen = ask(
        port,
        &lead,
        "ctx-look",
        &format!("@run cat {}/*.tokens", kept.display()),
        false,
    );
    let seen: Value = serde_json::from_str(answer(&seen)).unwrap();
    assert_ne!(seen["code"].as_i64(), Some(0), "{seen}");
    assert_eq!(seen["out"], "", "{seen}");

    let held = hold(&home, port, &lead, "coder-harness");
    let page = list(port, &lead, None);
    let token = page["result"]["nextPageToken"].as_str().unwrap().to_owned();
    assert_eq!(page["result"]["tasks"][0]["id"], held.as_str());
    let second_page = list(port, &lead, Some(&token));

    let pid = pid_of(&home, &coder);
    signal(pid, 9);
    pid_other_than(&home, &coder, pid);

    // The same answer, byte for byte as JSON.
    assert_eq!(get(port, &lead, &first_id), before);
    // A page token issued before the crash still reads, and names the same place.
    assert_eq!(list(port, &lead, Some(&token)), second_page);
    // The task that was running when it died failed, saying why.
    let failed = get(port, &lead, &held);
    assert_eq!(failed["result"]["status"]["state"], "TASK_STATE_FAILED");
    assert_eq!(
        failed["result"]["status"]["message"]["parts"][0]["text"],
        RESTARTED
    );
    // The context's harness session goes on where it was.
    let again = ask(port, &lead, "ctx-a", "again", false);
    assert_eq!(
        harness_session(&again),
        (session.clone(), "yes".to_owned(), "2".to_owned())
    );
    // forgetSession still forgets it, and the forgetting is kept too.
    let fresh = ask(port, &lead, "ctx-a", "anew", true);
    let (new_session, resumed, _) = harness_session(&fresh);
    assert_ne!(new_session, session);
    assert_eq!(resumed, "no");
    // Another member's credential still sees none of these.
    let operator = home.operator_token(&coder);
    assert_eq!(get(port, &operator, &first_id), before);
    drop(run);
    assert_nothing_left(&home, LONG);
}

/// Streams `text` in `context` as `token`'s holder until its task completes: the task's id,
/// its answer, and the ids of the events that told it.
fn stream_until_completed(
    port: u16,
    token: &str,
    context: &str,
    text: &str,
) -> (String, String, Vec<u64>) {
    let mut params = message(text, false);
    params["message"]["contextId"] = json!(context);
    let body = request(json!(1), "SendStreamingMessage", params);
    let auth = format!("Bearer {token}");
    let mut stream = sse::open(port, &body, &[("Authorization", auth.as_str())]);
    assert_eq!(stream.status, 200);
    let (mut id, mut said, mut ids) = (String::new(), String::new(), Vec::new());
    while let Some(event) = stream.next() {
        ids.extend(event.id);
        let result = &event.data["result"];
        if let Some(task) = result.get("task") {
            id = task["id"].as_str().unwrap_or_default().to_owned();
        }
        if let Some(text) = result.pointer("/artifactUpdate/artifact/parts/0/text") {
            said = text.as_str().unwrap_or_default().to_owned();
        }
        if result.pointer("/statusUpdate/status/state") == Some(&json!("TASK_STATE_COMPLETED")) {
            // The client has seen its task completed: what it saw must be kept from now on.
            return (id, said, ids);
        }
    }
    panic!("the stream ended before its task completed: {id} {said:?}");
}

#[test]
fn what_a_stream_showed_is_kept_through_a_kill_9_and_event_ids_go_on() {
    let home = Home::new();
    let manifest = formation(&home, 2);
    let run = Running::start(&home, &manifest, &[], &[]);
    let (port, coder) = run.member("coder");
    let lead = token_of(&home, &coder, "member:lead");
    let (task, said, ids) = stream_until_completed(port, &lead, "ctx-s", "hello");
    let pid = pid_of(&home, &coder);
    signal(pid, 9);
    pid_other_than(&home, &coder, pid);
    assert!(!said.is_empty() && !ids.is_empty(), "{said:?} {ids:?}");

    // The task the stream showed completed is completed, with the answer it streamed.
    let got = get(port, &lead, &task);
    assert_eq!(
        got["result"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{got}"
    );
    assert_eq!(answer(&got["result"]), said);
    // A new stream's events are numbered after every one the client saw before the crash,
    // so a Last-Event-ID from before never names one of them.
    let (_, again, after) = stream_until_completed(port, &lead, "ctx-s", "again");
    let seen = ids.iter().max().copied().unwrap_or(0);
    assert!(after.iter().all(|id| *id > seen), "{ids:?} then {after:?}");
    let (session, resumed, _) = harness_session_of(&said);
    assert_eq!(
        harness_session_of(&again),
        (session, "yes".to_owned(), "2".to_owned())
    );
    assert_eq!(resumed, "no");
    drop(run);
    assert_nothing_left(&home, LONG);
}

/// `mur run --resume ARGS`, announced.
fn resume(home: &Home, address: &str) -> Running {
    Running::spawn_args(home, &["run", "--resume", address], &[]).announced()
}

#[test]
fn an_http_capsules_context_goes_on_with_its_conversation_after_a_restart_and_a_resume() {
    const KEY_VAR: &str = "FAKE_PROVIDER_KEY";
    let home = Home::new();
    let fake = Fake::start();
    fake.script(
        [("first answer", 10), ("second answer", 20), ("third", 30)]
            .map(|(text, tokens)| Reply::Stream(openai::text("", &[text], "stop", (tokens, 2)))),
    );
    home.write(
        "h/w/murmur.yaml",
        &format!(
            "name: talker\nversion: \"0.1.0\"\nartifacts:\n  - name: murmur/driver-openai\n    version: \"0.19.0\"\n    runtime: driver\n    gateway:\n      endpoint: http://127.0.0.1:{}/v1\n      api_key: ${{{KEY_VAR}}}\ninference:\n  transport: http\n  model: test-model\n  max_tokens: 256\n  driver:\n    artifact: murmur/driver-openai\nlifecycle:\n  task_acceptance: queue\n  after_task: sleep\n  queue_depth: 2\n{PEER}",
            fake.port
        ),
    );
    home.write(
        "h/lead/murmur.yaml",
        &Fixture {
            name: "lead",
            ..Fixture::default()
        }
        .yaml(),
    );
    let manifest = home.write(
        "h/formation.yaml",
        "formation:\n  name: talk\n  version: \"0.1.0\"\n  entry: lead\n  members:\n    lead: { manifest: lead/murmur.yaml, calls: [w] }\n    w:\n      manifest: w/murmur.yaml\n      restart: on_failure\n      max_restarts: 3\n      restart_window: 600\n",
    );
    let run = Running::start(&home, &manifest, &[], &[(KEY_VAR, "sk-test-key")]);
    let (port, session) = run.member("w");
    let token = home.operator_token(&session);
    assert_eq!(
        answer(&ask(port, &token, "ctx-1", "hello", false)),
        "first answer"
    );

    // Killed, and brought back by its restart policy: the context goes on.
    let pid = pid_of(&home, &session);
    signal(pid, 9);
    pid_other_than(&home, &session, pid);
    assert_eq!(
        answer(&ask(port, &token, "ctx-1", "and then?", false)),
        "second answer"
    );

    // mur run killed, and resumed: the context goes on still.
    let mut run = run;
    signal(run.child.id(), 9);
    let _ = run.child.wait();
    assert_nothing_left(&home, LONG);
    let back = Running::spawn_args(
        &home,
        &["run", "--resume", "talk"],
        &[(KEY_VAR, "sk-test-key")],
    )
    .announced();
    assert_eq!(back.member("w").0, port);
    assert_eq!(
        answer(&ask(port, &token, "ctx-1", "last one", false)),
        "third"
    );
    let seen = fake.seen();
    assert_eq!(seen.len(), 3);
    let said =
        |n: usize| -> Vec<Value> { seen[n].body["messages"].as_array().unwrap()[1..].to_vec() };
    assert_eq!(said(0), [json!({"role": "user", "content": "hello"})]);
    let first = [
        json!({"role": "user", "content": "hello"}),
        json!({"role": "assistant", "content": "first answer"}),
        json!({"role": "user", "content": "and then?"}),
    ];
    assert_eq!(said(1), first);
    let mut all = first.to_vec();
    all.extend([
        json!({"role": "assistant", "content": "second answer"}),
        json!({"role": "user", "content": "last one"}),
    ]);
    assert_eq!(said(2), all);
    drop(back);
    assert_nothing_left(&home, LONG);
    // The store kept the session's ledger lines, one a call, through both ends.
    let store = home.records(&session).join("store").join("store.sqlite");
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print('[' + ','.join(e for (e,) in c.execute('SELECT entry FROM ledger ORDER BY n')) + ']')",
        ])
        .arg(&store)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let lines: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let calls: Vec<(&str, &str, u64)> = lines
        .iter()
        .map(|l| {
            let s = |k: &str| l[k].as_str().unwrap_or_default();
            (
                s("session_id"),
                s("member"),
                l["tokens"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            (session.as_str(), "w", 12),
            (session.as_str(), "w", 22),
            (session.as_str(), "w", 32)
        ]
    );
}

#[test]
fn mur_run_resume_after_kill_9_serves_the_same_tasks_at_the_same_urls_with_the_same_tokens() {
    let home = Home::new();
    let manifest = formation(&home, 2);
    let mut run = Running::start(&home, &manifest, &[], &[]);
    let (port, coder) = run.member("coder");
    let (lead_port, lead) = run.member("lead");
    let member = token_of(&home, &coder, "member:lead");
    let operator = home.operator_token(&lead);
    let first = ask(port, &member, "ctx-b", "hello", false);
    let (session, _, _) = harness_session(&first);
    let before = get(port, &member, first["id"].as_str().unwrap());
    let members = run.members.clone();
    let held = hold(&home, port, &member, "coder-harness");

    // A launch that runs is not resumed beside itself.
    let (code, _, err) = home.run(&["run", "--resume", "up"]);
    assert_eq!(code, 1);
    assert_eq!(
        err,
        format!("error[E-RUN-061]: the launch of session {lead} is still running: it cannot be resumed beside itself\n  hint: use its doors as they are (`mur ps`), or stop it first (`mur stop {lead}`)\n")
    );
    let (_, ps, _) = home.run(&["ps"]);
    assert!(!ps.contains("resumable"), "{ps}");

    signal(run.child.id(), 9);
    let _ = run.child.wait();
    assert_nothing_left(&home, LONG);
    let (code, ps, _) = home.run(&["ps"]);
    assert_eq!(code, 0);
    assert!(ps.starts_with("no capsule is running\n"), "{ps}");
    assert!(
        ps.contains(&format!("@1   {lead}  up (2 members)")),
        "mur ps lists the launch cut short: {ps}"
    );

    let back = resume(&home, "@1");
    // The same sessions at the same ports.
    assert_eq!(back.members, members);
    // The same tokens open the same doors, and the earlier task answers as it did.
    assert_eq!(get(port, &member, first["id"].as_str().unwrap()), before);
    // The task live when mur run was killed failed as the capsule went down with it.
    let failed = get(port, &member, &held);
    assert_eq!(failed["result"]["status"]["state"], "TASK_STATE_FAILED");
    assert_eq!(
        failed["result"]["status"]["message"]["parts"][0]["text"],
        SUPERVISOR_GONE
    );
    let listed = bearer_rpc(lead_port, &operator, "ListTasks", json!({}));
    assert!(listed["result"]["tasks"].is_array(), "{listed}");
    let again = ask(port, &member, "ctx-b", "again", false);
    assert_eq!(
        harness_session(&again),
        (session, "yes".to_owned(), "2".to_owned())
    );
    drop(back);
    assert_nothing_left(&home, LONG);
    // Ended by its stop: its tokens went with it, and it is no longer listed as cut short.
    assert_run_keeps_only_launches(&home);
    let (_, ps, _) = home.run(&["ps"]);
    assert_eq!(ps, "no capsule is running\n");
    // Resumed by name all the same: the same sessions and ports, tokens minted afresh.
    let again = resume(&home, "up");
    assert_eq!(again.members, members);
    let fresh = token_of(&home, &coder, "member:lead");
    assert_ne!(fresh, member);
    assert_eq!(get(port, &fresh, first["id"].as_str().unwrap()), before);
    drop(again);
    assert_nothing_left(&home, LONG);
}

/// Copies the store folder of `records` (all its files).
fn copy_store(records: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(records.join("store")).unwrap().flatten() {
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

fn put_back(from: &Path, records: &Path) {
    let store = records.join("store");
    std::fs::remove_dir_all(&store).unwrap();
    copy_store_dir(from, &store);
}

fn copy_store_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

#[test]
fn a_store_that_cannot_be_trusted_is_refused_and_left_as_it_is() {
    let home = Home::new();
    let manifest = formation(&home, 2);
    let mut run = Running::start(&home, &manifest, &[], &[]);
    let (port, coder) = run.member("coder");
    let (_, lead) = run.member("lead");
    let member = token_of(&home, &coder, "member:lead");
    ask(port, &member, "ctx-c", "hello", false);
    signal(run.child.id(), 9);
    let _ = run.child.wait();
    assert_nothing_left(&home, LONG);
    // Its port taken since: refused before anything starts, naming the port and the member.
    {
        let taken = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
        let (code, out, err) = home.run(&["run", "--resume", "up"]);
        assert_eq!((code, out.as_str()), (1, ""));
        assert_eq!(
            err,
            format!(
                "error[E-RUN-010]: member coder: port {port}, where the session {lead} answered before, is already in use\n  hint: stop whatever listens on {port} (`ss -ltnp 'sport = :{port}'` shows it) and resume again: a resumed launch keeps its URLs, which its callers and clients hold\n"
            )
        );
        drop(taken);
        assert_nothing_left(&home, LONG);
    }
    // Its formation given a member since: refused, the file named, nothing started.
    let kept = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        format!("{kept}    extra: {{ manifest: worker/murmur.yaml }}\n"),
    )
    .unwrap();
    let (code, out, err) = home.run(&["run", "--resume", "up"]);
    assert_eq!((code, out.as_str()), (1, ""));
    assert_eq!(
        err,
        format!(
            "error[E-RUN-061]: {} now has a member extra that the launch of session {lead} did not have\n  hint: a resumed launch runs the members it had: put the manifest back as it was, or launch it afresh with `mur run`\n",
            std::path::absolute(&manifest).unwrap().display()
        )
    );
    std::fs::write(&manifest, kept).unwrap();
    assert_nothing_left(&home, LONG);
    let records = home.records(&coder);
    let good = home.root.join("good-store");
    copy_store(&records, &good);
    let file = records.join("store").join("store.sqlite");
    let expect_refusal = |what: &str, hint: &str| {
        let (code, _, err) = home.run(&["run", "--resume", "up"]);
        assert_eq!(code, 1, "{err}");
        let said = format!(
            "error[E-RUN-060]: the task store {} {what}\n  hint: {hint}\n",
            file.display()
        );
        assert!(err.contains(&said), "{said}\nnot in:\n{err}");
        assert!(
            err.contains(
                "error[E-RUN-012]: member coder exited with status 2 before its door was ready"
            ),
            "{err}"
        );
        assert_nothing_left(&home, LONG);
    };
    const ASIDE: &str = "move the file (and its -wal and -shm beside it) aside to start this session with no earlier tasks, or restore it from a backup";

    // Not a database at all.
    std::fs::remove_dir_all(records.join("store")).unwrap();
    std::fs::create_dir(records.join("store")).unwrap();
    std::fs::write(&file, vec![0x5a; 8192]).unwrap();
    expect_refusal("is corrupt (file is not a database)", ASIDE);
    assert_eq!(
        std::fs::read(&file).unwrap(),
        vec![0x5a; 8192],
        "left as it was"
    );

    // One a newer murmur wrote.
    put_back(&good, &records);
    let status = std::process::Command::new("python3")
        .args([
            "-c",
            "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('PRAGMA user_version=99'); c.commit(); c.close()",
        ])
        .arg(&file)
        .status()
        .unwrap();
    assert!(status.success());
    expect_refusal(
        "was written by a newer murmur (store version 99; this one reads 1)",
        "run the murmur that wrote it, or move the file aside to start this session with no earlier tasks",
    );

    // One this user cannot write: 0400, or for root (whom no mode stops) immutable.
    put_back(&good, &records);
    use std::os::unix::fs::PermissionsExt;
    let root = std::fs::metadata("/proc/self").unwrap().uid() == 0;
    let attr = |flag: &str| {
        let status = std::process::Command::new("chattr")
            .arg(flag)
            .arg(&file)
            .status()
            .unwrap();
        assert!(status.success(), "chattr {flag}");
    };
    match root {
        true => attr("+i"),
        false => std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o400)).unwrap(),
    }
    expect_refusal(
        "is read-only",
        "make it writable by this user (chmod u+w, or chattr -i where it is immutable), or move it aside to start afresh",
    );
    if root {
        attr("-i");
    }

    // Put back as it was, it opens, answering as before; found open to others, it is made
    // private again.
    put_back(&good, &records);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let back = resume(&home, "up");
    let listed = bearer_rpc(port, &member, "ListTasks", json!({}));
    assert_eq!(listed["result"]["tasks"].as_array().map(Vec::len), Some(1));
    // The store's files are private whatever they were found with.
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&records.join("store")), 0o700);
    for name in ["store.sqlite", "store.sqlite-wal"] {
        assert_eq!(mode(&records.join("store").join(name)), 0o600, "{name}");
    }
    drop(back);
    assert_nothing_left(&home, LONG);
}

#[test]
fn kill_9_in_the_middle_of_a_thousand_submissions_loses_no_task_a_client_was_answered_about() {
    let home = Home::new();
    let manifest = formation(&home, 1000);
    let run = Running::start(&home, &manifest, &[], &[]);
    let (port, coder) = run.member("coder");
    let member = token_of(&home, &coder, "member:lead");
    // One task holds the harness: the rest wait in the queue.
    hold(&home, port, &member, "coder-harness");
    // Four clients submit a thousand tasks between them; the one whose answer is the 400th
    // kills the capsule there and then, while the other three are sending.
    let pid = pid_of(&home, &coder);
    let answered: Arc<Mutex<Vec<Value>>> = Arc::default();
    let attempts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let senders: Vec<_> = (0..4)
        .map(|_| {
            let (answered, attempts, member) = (answered.clone(), attempts.clone(), member.clone());
            std::thread::spawn(move || {
                while attempts.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < 1000 {
                    let sent = std::panic::catch_unwind(|| {
                        bearer_rpc(port, &member, "SendMessage", message("queued", true))
                    });
                    let Some(r) = sent.ok().and_then(|r| r.get("result").cloned()) else {
                        // Cut by the kill: the request was in flight.
                        return;
                    };
                    let mut answered = answered.lock().unwrap();
                    answered.push(r["task"].clone());
                    if answered.len() == 400 {
                        signal(pid, 9);
                    }
                }
            })
        })
        .collect();
    for s in senders {
        s.join().unwrap();
    }
    let answered = answered.lock().unwrap().clone();
    assert!(answered.len() >= 400, "{} answered", answered.len());
    pid_other_than(&home, &coder, pid);
    let mut failed_by_the_crash = 0;
    for task in &answered {
        let id = task["id"].as_str().unwrap();
        let now = get(port, &member, id);
        let now = &now["result"];
        assert_eq!(now["id"], task["id"], "{id} is lost: {now}");
        assert_eq!(now["contextId"], task["contextId"]);
        assert_eq!(task["status"]["state"], "TASK_STATE_SUBMITTED");
        // Answered submitted: live when the capsule died, it failed saying so; or sent to
        // the capsule come back (a sender between two requests at the crash), it ran there.
        match now["status"]["state"].as_str() {
            Some("TASK_STATE_FAILED") => {
                assert_eq!(now["status"]["message"]["parts"][0]["text"], RESTARTED);
                failed_by_the_crash += 1;
            }
            Some("TASK_STATE_COMPLETED" | "TASK_STATE_WORKING" | "TASK_STATE_SUBMITTED") => {}
            _ => panic!("{id}: {now}"),
        }
    }
    assert!(failed_by_the_crash >= 400, "{failed_by_the_crash}");
    drop(run);
    assert_nothing_left(&home, LONG);
}

#[test]
fn mur_gc_removes_ended_sessions_records_and_never_a_running_one() {
    let home = Home::new();
    let manifest = formation(&home, 2);
    let run = Running::start(&home, &manifest, &[], &[]);
    let (port, coder) = run.member("coder");
    let (_, lead) = run.member("lead");
    let member = token_of(&home, &coder, "member:lead");
    ask(port, &member, "ctx-d", "hello", false);
    // Running: untouched however old it is allowed to be.
    let (code, out, _) = home.run(&["gc", "--older-than", "0s"]);
    assert_eq!(
        (code, out.as_str()),
        (0, "nothing to remove: no ended session is older than 0s\n")
    );
    assert!(home.records(&coder).join("store").is_dir());
    drop(run);
    assert_nothing_left(&home, LONG);
    let (code, out, _) = home.run(&["gc"]);
    assert_eq!(
        (code, out.as_str()),
        (0, "nothing to remove: no ended session is older than 7d\n")
    );
    let (code, out, err) = home.run(&["gc", "--older-than", "0s"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("removed the records of 2 ended sessions ("),
        "{out}"
    );
    assert!(!home.records(&coder).exists() && !home.records(&lead).exists());
    let launches: Vec<_> = std::fs::read_dir(home.home.join("run").join("launches"))
        .unwrap()
        .flatten()
        .collect();
    assert!(launches.is_empty(), "nothing left to resume: {launches:?}");
    let (code, _, err) = home.run(&["run", "--resume", &lead]);
    assert_eq!(code, 1);
    assert!(err.starts_with("error[E-CLI-001]: "), "{err}");
    let (code, _, err) = home.run(&["gc", "--older-than", "7w"]);
    assert_eq!(
        (code, err.as_str()),
        (1, "error[E-CLI-030]: --older-than \"7w\" is not an age\n  hint: give a whole number and a unit: 30m, 12h, 7d (s, m, h or d)\n")
    );
}
