//! `mur top` as a person uses it: the real `mur top` in a pseudo-terminal (tmux, a private
//! server per test), keys sent, the screen read back; on the shipped split formation with slow
//! workers. And `--once`, checked line by line: only the clocks it prints are read as shapes.

#[path = "support/clients.rs"]
mod clients;
#[path = "support/screen.rs"]
mod screen;
mod support;

use std::path::PathBuf;
use std::time::Duration;

use screen::Screen;
use serde_json::{json, Value};
use support::*;

const LONG: Duration = Duration::from_secs(30);
/// Linux's signal numbers for stopping and continuing a process.
const SIGSTOP: i32 = 19;
const SIGCONT: i32 = 18;

fn split() -> PathBuf {
    repo_root().join("manifests/split/formation.yaml")
}

/// The first row of the tasks pane.
fn task_row(screen: &str) -> &str {
    screen
        .lines()
        .find(|l| l.starts_with("tsk_…"))
        .unwrap_or("")
}

/// The line of the screen holding `needle`.
fn line_of<'a>(screen: &'a str, needle: &str) -> &'a str {
    screen.lines().find(|l| l.contains(needle)).unwrap_or("")
}

/// The first task ListTasks answers for a member (its newest); null while its record and
/// tokens are not written yet (they follow its announcement).
fn task_of(home: &Home, m: &Member) -> Value {
    let (code, out, _) = home.run(&["token", &m.session]);
    let Some(token) = out.lines().find_map(|l| l.strip_prefix("operator ")) else {
        assert!(code != 0, "mur token printed no operator token: {out}");
        return Value::Null;
    };
    let listed = bearer_rpc(m.port, token, "ListTasks", json!({}));
    listed["result"]["tasks"][0].clone()
}

fn working(home: &Home, m: &Member) -> bool {
    task_of(home, m)["status"]["state"] == "TASK_STATE_WORKING"
}

fn short(id: &str) -> String {
    format!("tsk_…{}", &id[id.len() - 8..])
}

#[test]
fn the_split_formation_is_watched_live_until_its_answer() {
    let home = Home::new();
    // Started after the launch, as a user does: what came before is read from the replay.
    let (mut run, members) =
        Launch::start_formation(&home, &split(), &["--task", "wait 8 x wait 8"]);
    let Some(screen) = Screen::start(&home, &[], (120, 40), &[]) else {
        return;
    };
    let shown = screen.until("the lead calling both workers, each working", |s| {
        s.contains("split 0.1.0 (entry lead)")
            && line_of(s, "lead → left").contains("1 in flight")
            && line_of(s, "lead → right").contains("1 in flight")
            && ["├─ lead", "├─ left", "└─ right"]
                .iter()
                .all(|m| line_of(s, m).contains("running"))
    });
    for (i, m) in members.iter().enumerate() {
        let branch = if i + 1 == members.len() {
            "└─"
        } else {
            "├─"
        };
        let row = line_of(&shown, &format!("{branch} {}", m.name));
        assert!(row.contains(&m.port.to_string()), "{row}");
        assert!(row.contains("running"), "{row}");
    }
    // The workers' tasks, one screen each: move down, read its task working.
    screen.keys(&["j"]);
    screen.until("left's task working", |s| {
        s.contains("tasks of left @") && task_row(s).contains("working")
    });
    screen.keys(&["j"]);
    screen.until("right's task working", |s| {
        s.contains("tasks of right @") && task_row(s).contains("working")
    });
    screen.keys(&["k", "k"]);
    // The answer arrives in the lead's output, and the ended formation stays readable.
    let done = screen.until("the lead's answer", |s| {
        s.contains("left: Acknowledged: wait 8 x") && s.contains("right: Acknowledged: wait 8")
    });
    assert!(task_row(&done).contains("completed"), "{done}");
    assert_eq!(run.wait_exit(LONG), Some(0));
    let ended = screen.until("the members ended", |s| {
        s.contains("0 running") || line_of(s, "├─ lead").contains("ended")
    });
    assert!(ended.contains("left: Acknowledged"), "{ended}");
    screen.keys(&["q"]);
    assert_nothing_left(&home, LONG);
}

#[test]
fn a_task_is_canceled_from_the_keyboard() {
    let home = Home::new();
    let (mut run, members) =
        Launch::start_formation(&home, &split(), &["--task", "wait 60 x wait 60"]);
    let left = members.iter().find(|m| m.name == "left").unwrap();
    assert!(wait_until(LONG, || working(&home, left)));
    let task = task_of(&home, left)["id"].as_str().unwrap().to_owned();
    let Some(screen) = Screen::start(&home, &[], (120, 40), &[]) else {
        return;
    };
    screen.until("left's task", |s| s.contains("├─ left"));
    // Down to left, into its tasks, cancel the selected one.
    screen.keys(&["j", "Tab"]);
    screen.until("left's task selected", |s| {
        s.contains("tasks of left @") && s.contains(&short(&task))
    });
    screen.keys(&["c"]);
    let after = screen.until("the cancel's answer", |s| {
        s.contains(&format!("canceled: {task}"))
    });
    assert!(!after.contains("cancel failed"), "{after}");
    assert!(wait_until(LONG, || home.trace(&left.session).iter().any(
        |e| { e["event_type"] == "task_canceled" && e["task_id"] == task.as_str() }
    )));
    screen.until("the task shown canceled", |s| {
        line_of(s, &short(&task)).contains("canceled")
    });
    // The lead's call then failed, and the formation ended with it.
    assert_eq!(run.wait_exit(LONG), Some(1));
    screen.keys(&["q"]);
    assert_nothing_left(&home, LONG);
}

#[test]
fn a_restart_is_shown_and_the_formation_is_stopped_from_the_keyboard() {
    let home = Home::new();
    let dir = repo_root().join("manifests/split");
    let manifest = home.write(
        "f/formation.yaml",
        &format!(
            "formation:\n  name: split\n  version: \"0.1.0\"\n  entry: lead\n  members:\n    lead:\n      manifest: {lead}\n      calls: [left, right]\n    left:\n      manifest: {worker}\n      restart: on_failure\n    right:\n      manifest: {worker}\n",
            lead = dir.join("lead.yaml").display(),
            worker = dir.join("worker.yaml").display(),
        ),
    );
    let (_run, members) = Launch::start_formation(&home, &manifest, &[]);
    let left = members.iter().find(|m| m.name == "left").unwrap();
    let Some(screen) = Screen::start(&home, &[], (120, 40), &[]) else {
        return;
    };
    screen.until("the formation", |s| {
        line_of(s, "└─ right").contains("running")
    });
    let pid = record_pid(&home, &left.session);
    signal(pid, 9);
    let shown = screen.until("left restarted", |s| {
        line_of(s, "├─ left").contains("1 (exit 137)")
            && line_of(s, "├─ left").contains("running")
            && s.contains("member left restarted (attempt 1")
    });
    assert_eq!(
        shown.matches("member left died (exit 137)").count(),
        1,
        "each record is told once: {shown}"
    );
    assert!(!line_of(&shown, "├─ left").contains(&format!(" {pid} ")));
    // `s` asks first; anything but y keeps it running.
    screen.keys(&["s"]);
    screen.until("the question", |s| {
        s.contains("Stop formation split, every member of it?")
    });
    screen.keys(&["n"]);
    screen.until("the refusal", |s| s.contains("stop: not asked"));
    assert!(processes_of(&home).len() >= 3);
    screen.keys(&["s", "y"]);
    let last = &members[members.len() - 1].session;
    let stopped = screen.until("the stop's account", |s| {
        s.contains(&format!("stopped: {last}")) && s.contains("0 running")
    });
    assert!(!stopped.contains("stop failed"), "{stopped}");
    screen.keys(&["q"]);
    assert_nothing_left(&home, LONG);
}

fn record_pid(home: &Home, session: &str) -> u32 {
    let text =
        std::fs::read_to_string(home.home.join("run").join(format!("{session}.json"))).unwrap();
    serde_json::from_str::<Value>(&text).unwrap()["pid"]
        .as_u64()
        .unwrap() as u32
}

#[test]
fn a_small_terminal_says_so_and_no_color_draws_no_colour() {
    let home = Home::new();
    let (mut run, _members) =
        Launch::start_formation(&home, &split(), &["--task", "wait 60 x wait 60"]);
    let Some(small) = Screen::start(&home, &[], (50, 10), &[]) else {
        return;
    };
    small.until("the size it needs", |s| {
        s.contains("terminal too small: mur top needs 60×16\n(this one is 50×10)")
    });
    drop(small);
    let Some(plain) = Screen::start(&home, &[], (120, 40), &[("NO_COLOR", "1")]) else {
        return;
    };
    plain.until("the formation", |s| {
        line_of(s, "├─ lead").contains("running")
    });
    let escapes = plain.read(true);
    let colours: Vec<&str> = ["\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[90m", "\x1b[38;"]
        .into_iter()
        .filter(|c| escapes.contains(c))
        .collect();
    assert!(colours.is_empty(), "NO_COLOR drew {colours:?}");
    // `?` shows the keys, any key closes it; `/` filters to one member.
    plain.keys(&["?"]);
    plain.until("the help", |s| s.contains("cancel the selected task"));
    plain.keys(&["Escape", "/", "r", "i", "g", "h", "t", "Enter"]);
    let filtered = plain.until("only right", |s| {
        s.contains("filter: right") && !s.contains("├─ left")
    });
    assert!(filtered.contains("└─ right"), "{filtered}");
    plain.keys(&["q"]);
    drop(plain);
    signal(run.pid(), 15);
    assert!(run.wait_exit(LONG).is_some());
    assert_nothing_left(&home, LONG);
}

/// Replaces each clock `mur top` prints (`0.4s`, `12s`, `3m05s`, `2h07m`) by `~`, keeping its
/// width, so the rest of a line can be compared exactly.
fn clocks(line: &str) -> String {
    line.split_inclusive(' ')
        .map(|word| {
            let w = word.trim_end();
            let is_clock = {
                let b = w.as_bytes();
                let digits = |s: &[u8]| !s.is_empty() && s.iter().all(u8::is_ascii_digit);
                match w.strip_suffix('s') {
                    Some(n) => match n.split_once(['.', 'm']) {
                        Some((a, b2)) => digits(a.as_bytes()) && digits(b2.as_bytes()),
                        None => digits(n.as_bytes()),
                    },
                    None => {
                        w.strip_suffix('m').is_some_and(|n| {
                            n.split_once('h').is_some_and(|(a, b2)| {
                                digits(a.as_bytes()) && digits(b2.as_bytes())
                            })
                        }) && !b.is_empty()
                    }
                }
            };
            if is_clock {
                format!("{}~{}", " ".repeat(w.len() - 1), &word[w.len()..])
            } else {
                word.to_owned()
            }
        })
        .collect()
}

/// Rows padded to their widest cell, two spaces apart, without trailing spaces: the layout
/// `--once` promises (docs/top.md).
fn table(rows: &[Vec<String>]) -> Vec<String> {
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap())
        .collect();
    rows.iter()
        .map(|r| {
            r.iter()
                .zip(&widths)
                .map(|(cell, w)| format!("{cell}{}", " ".repeat(w - cell.chars().count())))
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_owned()
        })
        .collect()
}

#[test]
fn once_prints_the_running_formation_exactly() {
    let home = Home::new();
    let (mut run, members) =
        Launch::start_formation(&home, &split(), &["--task", "wait 60 x wait 60"]);
    let lead = &members[0];
    assert_eq!(lead.name, "lead");
    assert!(wait_until(LONG, || members[1..]
        .iter()
        .all(|m| working(&home, m))));
    assert!(wait_until(LONG, || {
        home.trace(&lead.session)
            .iter()
            .filter(|e| e["event_type"] == "a2a_send")
            .count()
            == 2
    }));
    let tasks: Vec<String> = members
        .iter()
        .map(|m| task_of(&home, m)["id"].as_str().unwrap().to_owned())
        .collect();
    let (code, out, err) = home.run(&["top", "--once"]);
    assert_eq!(code, 0, "{err}");
    // A stdout that is not a terminal gets the same snapshot.
    let (_, piped, _) = home.run(&["top"]);
    let (first, rest) = out.split_once('\n').unwrap();
    assert!(
        first.starts_with("mur top  2") && first.ends_with(" UTC"),
        "{first}"
    );
    assert_eq!(first.len(), "mur top  2026-12-01 19:28:10 UTC".len());
    let plain = |text: &str| text.lines().skip(1).map(clocks).collect::<Vec<_>>();
    assert_eq!(plain(&piped), plain(&out));

    let mut rows = vec![[
        "", "CAPSULE", "STATE", "PID", "PORT", "UP", "RESTARTS", "QUEUED", "RUNNING", "SPENT",
        "SESSION",
    ]
    .map(str::to_owned)
    .to_vec()];
    // Addresses count newest first: the roster's last member is @1.
    for (i, m) in members.iter().enumerate() {
        let branch = if i + 1 == members.len() {
            "└─"
        } else {
            "├─"
        };
        rows.push(vec![
            format!("@{}", members.len() - i),
            format!("{branch} {}", m.name),
            "running".into(),
            record_pid(&home, &m.session).to_string(),
            m.port.to_string(),
            "     ~".into(),
            "0".into(),
            "0".into(),
            "1".into(),
            "-".into(),
            m.session.clone(),
        ]);
    }
    let mut expected = table(&rows);
    let pad = expected[0].find("CAPSULE").unwrap();
    expected.insert(
        1,
        format!("{}formation split 0.1.0 (entry lead)", " ".repeat(pad)),
    );
    expected.push("── Calls ──".into());
    for (m, t) in members[1..].iter().zip(&tasks[1..]) {
        expected.push(format!(
            "lead → {}  1 in flight: {} → {}",
            m.name,
            short(&tasks[0]),
            short(t)
        ));
    }
    expected.extend([
        "── Delegations ──".into(),
        "(none)".into(),
        "── Tasks ──".into(),
    ]);
    let mut task_rows = vec![[
        "MEMBER", "TASK", "STATE", "TURNS", "TOKENS", "ELAPSED", "LAST",
    ]
    .map(str::to_owned)
    .to_vec()];
    for (m, t) in members.iter().zip(&tasks) {
        task_rows.push(vec![
            m.name.clone(),
            short(t),
            "working".into(),
            "0".into(),
            "-".into(),
            "     ~".into(),
            String::new(),
        ]);
    }
    expected.extend(table(&task_rows));
    expected.extend(["── Alerts ──".into(), "(none)".into()]);
    let got: Vec<String> = rest.lines().map(clocks).collect();
    assert_eq!(got, expected, "the snapshot was:\n{out}");

    // One session's address shows its launch only; with nothing running, it says so.
    let (_, one, _) = home.run(&["top", "--once", "@1"]);
    assert!(one.contains("formation split 0.1.0 (entry lead)"), "{one}");
    signal(run.pid(), 15);
    assert!(run.wait_exit(LONG).is_some());
    assert_nothing_left(&home, LONG);
    let (code, none, _) = home.run(&["top", "--once"]);
    assert_eq!(code, 0);
    assert!(none.ends_with("no capsule is running\n"), "{none}");
}

#[test]
fn an_egress_refusal_is_shown_as_it_happens_and_the_trace_opens() {
    let home = Home::new();
    let manifest = home.write("murmur.yaml", &Fixture::default().yaml());
    let state = home.root.join("fixture-state");
    std::fs::create_dir_all(&state).unwrap();
    let env = [
        ("MURMUR_CONTAINMENT", "namespaces".to_owned()),
        ("MURMUR_HARNESS_WRITABLE", state.display().to_string()),
    ];
    let run = Launch::start_env(&home, &manifest, &[], &env);
    let Some(screen) = Screen::start(&home, &[], (120, 40), &[]) else {
        return;
    };
    screen.until("the capsule", |s| {
        s.contains("1 running") && s.contains("@1")
    });
    let done = run.send("@run curl -s -m 5 http://unlisted.example/", false);
    let task = done["result"]["task"]["id"].as_str().unwrap().to_owned();
    let shown = screen.until("the refusal", |s| {
        s.contains("egress refused unlisted.example:80")
    });
    let alert = line_of(&shown, "egress refused");
    assert!(alert.contains(&short(&task)), "{alert}");
    // Marked red (tmux writes red as 38;5;1).
    let marked = screen.read(true);
    let line = marked
        .lines()
        .find(|l| l.contains("egress refused"))
        .unwrap_or("");
    assert!(
        line.contains("\x1b[31m") || line.contains("\x1b[38;5;1m"),
        "not red: {line:?}"
    );
    // What a harness answers is shown, never obeyed: an escape sequence in it neither colours
    // the screen nor retitles the window.
    let hostile = "@echo \u{1b}]2;owned\u{7}\u{1b}[31mred";
    let echoed = run.send(hostile, false);
    assert_eq!(
        echoed["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    screen.keys(&["Tab"]);
    let shown = screen.until("the answer, escapes visible", |s| {
        s.contains("^[]2;owned^G^[[31mred")
    });
    assert!(!shown.contains("owned\n"), "{shown}");
    let title = screen
        .tmux(&["display", "-p", "-t", "top", "#{pane_title}"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&title.stdout).contains("owned"));
    screen.keys(&["Tab"]);
    // `t` opens the session's trace as `mur trace show` renders it; q closes it.
    screen.keys(&["t"]);
    screen.until("the trace", |s| {
        s.contains(&format!("trace of {}", run.session)) && s.contains("── Session")
    });
    screen.keys(&["q"]);
    screen.until("the board again", |s| !s.contains("── Session"));
    screen.keys(&["q"]);
    drop(run);
    assert_nothing_left(&home, LONG);
}

#[test]
fn a_sub_capsule_is_drawn_under_its_parent_with_its_delegation_in_flight() {
    let home = Home::new();
    home.write(
        "d/child.yaml",
        &Fixture {
            name: "child",
            ..Fixture::default()
        }
        .yaml(),
    );
    let parent = home.write(
        "d/parent.yaml",
        &format!(
            "{}capabilities:\n  delegate:\n    allow: [child.yaml]\n",
            Fixture {
                name: "parent",
                ..Fixture::default()
            }
            .yaml()
        ),
    );
    let run = Launch::start(&home, &parent, &[]);
    let task = run.start_task("@delegate child @sleep 60");
    let delegated = || {
        home.trace(&run.session)
            .into_iter()
            .find(|e| e["event_type"] == "delegation_start")
    };
    assert!(wait_until(LONG, || delegated().is_some()));
    let start = delegated().unwrap();
    let child = start["child_session_id"].as_str().unwrap().to_owned();
    let mut once = String::new();
    assert!(
        wait_until(LONG, || {
            once = home.run(&["top", "--once"]).1;
            once.contains("↳ child 0.1.0")
        }),
        "{once}"
    );
    let lines: Vec<&str> = once.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains("parent 0.1.0"))
        .unwrap();
    assert!(
        lines[at + 1].contains("↳ child 0.1.0") && lines[at + 1].contains(&child),
        "{once}"
    );
    let expected = format!(
        "parent {} → child ({})",
        short(&task),
        start["delegation_id"].as_str().unwrap()
    );
    assert!(
        once.contains(&format!("── Delegations ──\n{expected}\n")),
        "{once}"
    );
    // The parent's address shows it with its sub-capsule; the sub-capsule's, itself alone.
    let (_, both, _) = home.run(&["top", "--once", &run.session]);
    assert!(
        both.contains("↳ child 0.1.0") && both.contains("parent 0.1.0"),
        "{both}"
    );
    let (_, alone, _) = home.run(&["top", "--once", &child]);
    assert!(
        alone.contains("↳ child 0.1.0") && !alone.contains("parent 0.1.0"),
        "{alone}"
    );
    drop(run);
    assert_nothing_left(&home, LONG);
}

#[test]
fn sigterm_ends_the_view_and_gives_the_terminal_back() {
    let home = Home::new();
    let said = home.root.join("exit-status");
    // A shell runs mur top and writes down how it ended, then stays, so the pane can be read.
    let script = format!(
        "\"$0\" top; echo \"exit=$?\" > {}; sleep 60",
        said.display()
    );
    let mur = home.bin.display().to_string();
    let Some(screen) = Screen::start_command(&home, &["sh", "-c", &script, &mur], (100, 30)) else {
        return;
    };
    screen.until("the board", |s| s.contains("0 running"));
    let shell = screen
        .tmux(&["display", "-p", "-t", "top", "#{pane_pid}"])
        .output()
        .unwrap();
    let shell: u32 = String::from_utf8_lossy(&shell.stdout)
        .trim()
        .parse()
        .unwrap();
    let top = children(shell);
    assert_eq!(top.len(), 1, "{top:?}");
    signal(top[0], 15);
    assert!(wait_until(LONG, || said.exists()));
    assert_eq!(std::fs::read_to_string(&said).unwrap(), "exit=0\n");
    // Out of the alternate screen: the board is gone from the terminal.
    let after = screen.until("the board gone", |s| !s.contains("0 running"));
    assert!(!after.contains("mur top"), "{after}");
}

#[test]
fn once_shows_a_door_that_does_not_answer_as_unreachable() {
    let home = Home::new();
    let (mut run, members) = Launch::start_formation(&home, &split(), &[]);
    let left = members.iter().find(|m| m.name == "left").unwrap();
    assert!(wait_until(LONG, || home
        .home
        .join("run")
        .join(format!("{}.json", left.session))
        .exists()));
    let pid = record_pid(&home, &left.session);
    // Stopped, its door accepts connections and answers nothing.
    signal(pid, SIGSTOP);
    let (code, out, err) = home.run(&["top", "--once"]);
    signal(pid, SIGCONT);
    assert_eq!(code, 0, "{err}");
    assert!(line_of(&out, "├─ left").contains("unreachable"), "{out}");
    assert!(line_of(&out, "├─ lead").contains("running"), "{out}");
    assert!(line_of(&out, "└─ right").contains("running"), "{out}");
    signal(run.pid(), 15);
    assert!(run.wait_exit(LONG).is_some());
    assert_nothing_left(&home, LONG);
}

/// `mur watch` and `mur trace show` show what others wrote as `mur top` does: an escape
/// sequence in a harness's answer or in a trace field reaches the terminal as text.
#[test]
fn watch_and_trace_show_print_escapes_as_text() {
    let home = Home::new();
    let run = start_fixture(&home, "murmur.yaml", &Fixture::default(), &[]);
    let (mut watch, lines) = watch_lines(&home, &run.session);
    assert!(wait_until(LONG, || lines
        .lock()
        .unwrap()
        .iter()
        .any(|l| l == "[connection-ack]")));
    run.send("@echo \u{1b}]2;owned\u{7}\u{1b}[31mred", false);
    let seen = wait_until(LONG, || {
        lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("^[]2;owned^G^[[31mred"))
    });
    let _ = watch.kill();
    let _ = watch.wait();
    let all = lines.lock().unwrap().join("\n");
    assert!(seen, "{all}");
    assert!(!all.contains('\u{1b}') && !all.contains('\u{7}'), "{all:?}");
    // A trace field a harness controls (a failure's cause), read back by `mur trace show`.
    let trace = home.write(
        "hostile/trace.jsonl",
        "{\"event_type\":\"a2a_task_received\",\"task_id\":\"tsk_0123456789ab\"}\n{\"event_type\":\"task_failed\",\"task_id\":\"tsk_0123456789ab\",\"cause\":\"\\u001b]2;owned\\u0007\\u202egnp.exe\"}\n",
    );
    let (code, shown, err) = home.run(&["trace", "show", trace.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(shown.contains("^[]2;owned^G\u{fffd}gnp.exe"), "{shown}");
    assert!(
        !shown.contains('\u{1b}') && !shown.contains('\u{202e}'),
        "{shown:?}"
    );
}
