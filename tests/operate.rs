//! Operating a formation from the command line, end to end through the real `mur`: `mur ps`
//! draws a formation as a tree whose `@N` are the addresses `mur stop` resolves, `mur stop` on
//! any member stops the whole formation (every member's account, nothing left running, every
//! record gone), `mur token` lists a member's `member:<caller>` credentials, and `mur trace show
//! --formation` interleaves every member's trace by time.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};
use support::*;

const LONG: Duration = Duration::from_secs(30);

/// Three members on one fixture manifest: lead calls coder and reviewer, coder calls reviewer.
const FORMATION: &str = r#"formation:
  name: review
  version: "0.1.0"
  entry: lead
  members:
    lead: { manifest: member.yaml, calls: [coder, reviewer] }
    coder: { manifest: member.yaml, calls: [reviewer] }
    reviewer: { manifest: member.yaml }
"#;

/// Launches [`FORMATION`]; answers the launch and its members in roster order.
fn launch_formation(home: &Home) -> (Launch, Vec<Member>) {
    let member = Fixture {
        extra: "exports:\n  peer_tasks:\n    accept: true\n",
        ..Fixture::default()
    };
    home.write("review/member.yaml", &member.yaml());
    let manifest = home.write("review/formation.yaml", FORMATION);
    let (run, members) = Launch::start_formation(home, &manifest, &[]);
    let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["lead", "coder", "reviewer"]);
    assert_eq!(
        (run.port, run.session.as_str()),
        (members[0].port, members[0].session.as_str()),
        "the entry's two lines name the lead"
    );
    (run, members)
}

fn record_path(home: &Home, session: &str) -> PathBuf {
    home.home.join("run").join(format!("{session}.json"))
}

/// `run/<session>.json`.
fn record(home: &Home, session: &str) -> Value {
    let text = std::fs::read_to_string(record_path(home, session)).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn pid_of(home: &Home, session: &str) -> u32 {
    record(home, session)["pid"].as_u64().unwrap() as u32
}

/// `run/<session>.tokens` as (credential, token) lines, in file order.
fn tokens(home: &Home, session: &str) -> Vec<(String, String)> {
    let path = home.home.join("run").join(format!("{session}.tokens"));
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(c, t)| (c.to_owned(), t.to_owned()))
        .collect()
}

fn operator(home: &Home, session: &str) -> String {
    let all = tokens(home, session);
    assert_eq!(all[0].0, "operator", "operator comes first");
    all[0].1.clone()
}

/// Sends `text` to a member and waits for its task to complete; answers the task id.
fn complete(home: &Home, m: &Member, text: &str) -> String {
    let answer = bearer_rpc(
        m.port,
        &operator(home, &m.session),
        "SendMessage",
        message(text, false),
    );
    let task = &answer["result"]["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_COMPLETED",
        "{}: {answer}",
        m.name
    );
    task["id"].as_str().unwrap().to_owned()
}

/// A `mur ps` row, in the columns every row has.
fn ps_row(n: usize, session: &str, capsule: &str, port: u16, pid: u32) -> String {
    format!(
        "{:<4} {:<36} {:<20} {:<24} {:>8}  running",
        format!("@{n}"),
        session,
        capsule,
        format!("localhost:{port}"),
        pid
    )
}

#[test]
fn ps_draws_a_formation_as_a_tree_whose_addresses_are_the_ones_commands_resolve() {
    let home = Home::new();
    let lone = start_fixture(&home, "lone/murmur.yaml", &Fixture::default(), &[]);
    let (_run, members) = launch_formation(&home);

    // @N counts back from the newest session over every running capsule.
    let mut newest_first: Vec<&str> = members.iter().map(|m| m.session.as_str()).collect();
    newest_first.push(&lone.session);
    newest_first.sort_by(|a, b| b.cmp(a));
    let n = |s: &str| newest_first.iter().position(|x| *x == s).unwrap() + 1;
    assert_eq!(n(&lone.session), 4, "the lone capsule started first");

    let (code, out, err) = home.run(&["ps"]);
    assert_eq!(code, 0, "{err}");
    let mut expected = vec![
        "     SESSION                              CAPSULE              URL                           PID  STATUS".to_owned(),
        "     formation review 0.1.0 (entry lead)".to_owned(),
    ];
    for (i, m) in members.iter().enumerate() {
        let branch = if i + 1 == members.len() {
            "└─"
        } else {
            "├─"
        };
        expected.push(ps_row(
            n(&m.session),
            &m.session,
            &format!("{branch} {}", m.name),
            m.port,
            pid_of(&home, &m.session),
        ));
    }
    // A lone capsule's row is exactly what it always was.
    expected.push(ps_row(
        4,
        &lone.session,
        "fixture 0.1.0",
        lone.port,
        pid_of(&home, &lone.session),
    ));
    assert_eq!(out, expected.join("\n") + "\n");

    // The @N a row shows is the session a command reaches: each member's own tokens.
    for m in &members {
        let (code, out, err) = home.run(&["token", &format!("@{}", n(&m.session))]);
        assert_eq!(code, 0, "{err}");
        let want: String = tokens(&home, &m.session)
            .iter()
            .map(|(c, t)| format!("{c} {t}\n"))
            .collect();
        assert_eq!(out, want, "@{} is {}", n(&m.session), m.name);
    }

    let (code, out, _) = home.run(&["ps", "--json"]);
    assert_eq!(code, 0);
    let list: Vec<Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(list.len(), 4);
    for (i, entry) in list.iter().enumerate() {
        assert_eq!(entry["address"], format!("@{}", i + 1));
        assert_eq!(entry["session_id"], newest_first[i]);
        match members.iter().find(|m| m.session == newest_first[i]) {
            Some(m) => {
                assert_eq!(entry["formation"], "review", "{entry}");
                assert_eq!(entry["member"], m.name.as_str(), "{entry}");
            }
            None => {
                assert!(entry["formation"].is_null(), "{entry}");
                assert!(entry["member"].is_null(), "{entry}");
                assert!(entry.get("formation").is_some() && entry.get("member").is_some());
            }
        }
    }
}

#[test]
fn stop_on_one_member_stops_the_whole_formation_and_leaves_nothing_running() {
    let home = Home::new();
    let (mut run, members) = launch_formation(&home);
    let coder = &members[1];
    let pidfile = pidfile(&home);
    let started = bearer_rpc(
        coder.port,
        &operator(&home, &coder.session),
        "SendMessage",
        message(&format!("@pidfile {}\n@sleep 60", pidfile.display()), true),
    );
    let task = started["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no task: {started}"))
        .to_owned();
    let harness = wait_pid(&pidfile);
    let capsules: Vec<u32> = members.iter().map(|m| pid_of(&home, &m.session)).collect();
    let below = descendants(run.pid());
    for pid in &capsules {
        assert!(below.contains(pid), "member {pid} runs under mur run");
    }

    // Addressed by the reviewer's session suffix: not the entry, not the member with the task.
    let reviewer = &members[2].session;
    let (code, out, err) = home.run(&["stop", &reviewer[reviewer.len() - 8..]]);
    assert_eq!(code, 0, "{err}");
    let expected = format!(
        "member lead: session {}\ncanceled: nothing was running\n\
         member coder: session {}\ncanceled: {task}\n\
         member reviewer: session {}\ncanceled: nothing was running\n\
         stopped: {}\nstopped: {}\nstopped: {}\n",
        members[0].session,
        members[1].session,
        members[2].session,
        members[0].session,
        members[1].session,
        members[2].session,
    );
    assert_eq!(out, expected);

    // mur stop returned once the launch was over: nothing it started is left.
    for pid in below.iter().chain(&capsules).chain([&harness]) {
        assert!(!alive(*pid), "process {pid} outlived mur stop");
    }
    assert_eq!(run.wait_exit(LONG), Some(0), "a clean stop exits 0");
    for m in &members {
        assert!(
            !record_path(&home, &m.session).exists(),
            "{}'s running record is removed",
            m.name
        );
        let trace = home.trace(&m.session);
        assert_eq!(
            trace.last().unwrap()["event_type"],
            "session_end",
            "{} ended cleanly",
            m.name
        );
    }
    let ended = home
        .trace(&coder.session)
        .into_iter()
        .find(|e| e["event_type"] == "task_end")
        .unwrap();
    assert_eq!(ended["status"], "canceled");
    let (_, out, _) = home.run(&["ps"]);
    assert_eq!(out, "no capsule is running\n");
}

#[test]
fn token_lists_a_members_own_credentials_member_callers_included() {
    let home = Home::new();
    let (_run, members) = launch_formation(&home);
    let credentials = |m: &Member| -> Vec<String> {
        let (code, out, err) = home.run(&["token", &m.session]);
        assert_eq!(code, 0, "{err}");
        let want: String = tokens(&home, &m.session)
            .iter()
            .map(|(c, t)| format!("{c} {t}\n"))
            .collect();
        assert_eq!(out, want, "{}'s own tokens", m.name);
        out.lines()
            .map(|l| l.split(' ').next().unwrap().to_owned())
            .collect()
    };
    assert_eq!(credentials(&members[0]), ["operator"]);
    assert_eq!(credentials(&members[1]), ["operator", "member:lead"]);
    assert_eq!(
        credentials(&members[2]),
        ["operator", "member:lead", "member:coder"]
    );
    // Each listed token opens the member's door.
    for (credential, token) in tokens(&home, &members[2].session) {
        let answer = bearer_rpc(members[2].port, &token, "ListTasks", json!({}));
        assert!(answer.get("result").is_some(), "{credential}: {answer}");
    }

    // Inside a harness the refusal comes first, whatever the address.
    let out = home
        .mur()
        .env("MURMUR_TASK_TOKEN", "mur_task")
        .args(["token", &members[2].session])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "no token is printed");
    assert!(err.starts_with("error[E-CLI-021]"), "{err}");
}

/// (time, member, event type) of each event line of `mur trace show --formation`.
fn event_lines(out: &str) -> Vec<(String, String, String)> {
    out.lines()
        .skip_while(|l| !l.starts_with("── Events, "))
        .filter(|l| !l.starts_with("──"))
        .map(|l| {
            let mut words = l.split_whitespace().map(str::to_owned);
            let mut next = || words.next().unwrap_or_default();
            (next(), next(), next())
        })
        .collect()
}

#[test]
fn trace_show_reads_one_member_or_the_whole_formation_interleaved_by_time() {
    let home = Home::new();
    let (_run, members) = launch_formation(&home);
    // One task each, one after the other and out of roster order, so time order and member
    // order differ.
    let order = [&members[2], &members[0], &members[1]];
    let tasks: Vec<String> = order.iter().map(|m| complete(&home, m, "hello")).collect();

    // One member's trace, by its session address.
    let coder = &members[1].session;
    let (code, out, err) = home.run(&["trace", "show", &coder[coder.len() - 6..]]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("session:    {coder}\n"))
            && out.contains(&format!("task 1  {}", &tasks[2][..12])),
        "{out}"
    );

    let (code, out, err) = home.run(&["trace", "show", &members[0].session, "--formation"]);
    assert_eq!(code, 0, "{err}");
    let head = format!(
        "── Formation ─────────────────────────────────────\n\
         formation:  review 0.1.0\n\
         entry:      lead\n\
         member:     lead      {}\n\
         member:     coder     {}\n\
         member:     reviewer  {}\n",
        members[0].session, members[1].session, members[2].session
    );
    assert!(out.starts_with(&head), "{out}");

    // Every record of every member, merged by timestamp; ties keep roster order, then file order.
    let mut all: Vec<(String, String, String)> = Vec::new();
    for m in &members {
        for e in home.trace(&m.session) {
            let ts = e["timestamp"].as_str().unwrap().to_owned();
            all.push((ts, m.name.clone(), e["event_type"].as_str().unwrap().into()));
        }
    }
    all.sort_by(|a, b| a.0.cmp(&b.0));
    let day = &all[0].0[..10];
    assert!(
        out.contains(&format!("── Events, {day} UTC ──")),
        "the rule names the day: {out}"
    );
    let want: Vec<(String, String, String)> = all
        .into_iter()
        .map(|(ts, m, t)| (ts[11..23].to_owned(), m, t))
        .collect();
    assert_eq!(event_lines(&out), want, "{out}");

    // The tasks read in the order they ran, across members.
    let line_of = |task: &str, kind: &str| {
        out.lines()
            .position(|l| l.contains(task) && l.contains(&format!(" {kind} ")))
            .unwrap_or_else(|| panic!("no {kind} of {task}: {out}"))
    };
    for pair in tasks.windows(2) {
        assert!(line_of(&pair[0], "task_end") < line_of(&pair[1], "a2a_task_received"));
    }
    for (m, task) in order.iter().zip(&tasks) {
        let l = out.lines().nth(line_of(task, "task_start")).unwrap();
        assert!(l.contains(&format!("  {:<8}  task_start ", m.name)), "{l}");
    }
}

#[test]
fn formation_view_of_a_lone_session_is_an_error_that_says_what_to_do() {
    let home = Home::new();
    let lone = start_fixture(&home, "lone/murmur.yaml", &Fixture::default(), &[]);
    let (code, out, err) = home.run(&["trace", "show", &lone.session, "--formation"]);
    assert_eq!(code, 1);
    assert_eq!(out, "");
    assert!(
        err.starts_with(&format!(
            "error[E-CLI-003]: session {} is not a formation member",
            lone.session
        )) && err.contains("\n  hint: --formation needs the session of a formation member"),
        "{err}"
    );
    // Without --formation the same address shows its trace.
    let (code, out, _) = home.run(&["trace", "show", &lone.session]);
    assert_eq!(code, 0);
    assert!(out.contains(&format!("session:    {}", lone.session)));
}
