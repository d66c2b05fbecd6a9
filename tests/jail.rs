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

#[path = "support/fake_provider.rs"]
mod fake_provider;
mod support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
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
    let start = session_start(home, &run);
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

/// The session's `session_start` record, waited for (the trace is written off the door's
/// path, so the announcement can come first).
fn session_start(home: &Home, run: &Launch) -> Value {
    let mut start = None;
    wait_until(Duration::from_secs(10), || {
        start = home
            .trace(&run.session)
            .into_iter()
            .find(|e| e["event_type"] == "session_start");
        start.is_some()
    });
    start.expect("the trace has a session_start record")
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

// The escape rows run as root and as an unprivileged user.

/// Who runs `mur` for an escape row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Who {
    Root,
    User,
}

/// The rows' own user, made once per test binary (`useradd`); answers its (uid, gid).
fn unprivileged_user() -> (u32, u32) {
    static USER: std::sync::OnceLock<(u32, u32)> = std::sync::OnceLock::new();
    *USER.get_or_init(|| {
        const NAME: &str = "murmur-jail";
        let id = |flag: &str| {
            std::process::Command::new("id")
                .args([flag, NAME])
                .output()
                .ok()
                .filter(|o| o.status.success())
                .and_then(|o| String::from_utf8(o.stdout).ok())
                .and_then(|s| s.trim().parse::<u32>().ok())
        };
        if id("-u").is_none() {
            // useradd lives in /usr/sbin, which a non-login root shell's PATH may lack.
            let useradd = ["/usr/sbin/useradd", "/sbin/useradd"]
                .into_iter()
                .find(|p| std::path::Path::new(p).is_file())
                .unwrap_or("useradd");
            let made = std::process::Command::new(useradd)
                .args(["--system", "--no-create-home", "--shell", "/bin/sh", NAME])
                .status()
                .expect("useradd runs (the escape suite runs as root)");
            // Another test binary may have made it meanwhile.
            assert!(
                made.success() || id("-u").is_some(),
                "useradd {NAME} failed"
            );
        }
        (id("-u").unwrap(), id("-g").unwrap())
    })
}

/// A home for one row: as `who`, with `HOME` a folder of the test's own, and for a user its
/// own copy of `mur` and the fixture (the checkout may lie where that user cannot read) and the
/// whole test folder its own.
fn row_home(who: Who) -> Home {
    let mut home = Home::new();
    let user_home = home.root.join("userhome");
    std::fs::create_dir_all(&user_home).unwrap();
    if who == Who::User {
        let bin = home.root.join("bin/mur");
        std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
        std::fs::copy(&home.bin, &bin).unwrap();
        std::fs::copy(fixture(), home.root.join("bin/fixture.py")).unwrap();
        home.bin = bin;
        home.user = Some(unprivileged_user());
        home.cgroups = delegated_cgroups(home.user.unwrap());
    }
    home
}

/// A `pids` and a `memory` cgroup of the user's own below the test's (cgroup v1, as this kind
/// of machine has; where a hierarchy is missing or not writable there is none), as systemd
/// delegates one to a user's session: what an ordinary user needs for murmur to bound its
/// attempts with cgroups rather than rlimits.
fn delegated_cgroups((uid, gid): (u32, u32)) -> Vec<PathBuf> {
    static N: AtomicUsize = AtomicUsize::new(0);
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut made = Vec::new();
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next(), parts.next(), parts.next());
        let (Some(controller @ ("pids" | "memory")), Some(path)) = (controllers, path) else {
            continue;
        };
        let dir = PathBuf::from(format!(
            "/sys/fs/cgroup/{controller}{}/murmur-jail-{}-{}",
            path.trim_end_matches('/'),
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        if std::fs::create_dir(&dir).is_err() {
            continue;
        }
        let chowned = std::process::Command::new("chown")
            .args(["-R", &format!("{uid}:{gid}")])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        assert!(chowned, "chown of {}", dir.display());
        made.push(dir);
    }
    made
}

/// Hands the row's folders to its user (after the row has written what it plants).
fn hand_over(home: &Home) {
    if let Some((uid, gid)) = home.user {
        let ok = std::process::Command::new("chown")
            .args(["-R", &format!("{uid}:{gid}")])
            .arg(&home.root)
            .status()
            .unwrap()
            .success();
        assert!(ok, "chown of {}", home.root.display());
    }
}

/// The fixture capsule, jailed, run as the row's user from `manifest` (written in the row's
/// home by the caller, or the default one), with `HOME` the row's own.
fn jailed_as(
    home: &Home,
    manifest: Option<PathBuf>,
    extra: &str,
    env: &[(&str, String)],
) -> Launch {
    jailed_edited(home, manifest, extra, env, &|yaml| yaml)
}

/// [`jailed_as`], the fixture's manifest changed by `edit` first.
fn jailed_edited(
    home: &Home,
    manifest: Option<PathBuf>,
    extra: &str,
    env: &[(&str, String)],
    edit: &dyn Fn(String) -> String,
) -> Launch {
    let manifest = manifest.unwrap_or_else(|| home.root.join("murmur.yaml"));
    let mut yaml = edit(format!("{}{extra}", Fixture::default().yaml()));
    if home.user.is_some() {
        yaml = yaml.replace(
            &fixture().display().to_string(),
            &home.root.join("bin/fixture.py").display().to_string(),
        );
    }
    std::fs::write(&manifest, yaml).unwrap();
    let state = home.root.join("fixture-state");
    std::fs::create_dir_all(&state).unwrap();
    hand_over(home);
    let mut env = env.to_vec();
    env.push(("MURMUR_CONTAINMENT", "namespaces".into()));
    env.push(("MURMUR_HARNESS_WRITABLE", state.display().to_string()));
    env.push(("HOME", home.root.join("userhome").display().to_string()));
    if home.user.is_some() {
        // The test's own PATH may lead through folders only root can enter.
        env.push(("PATH", "/usr/local/bin:/usr/bin:/bin".into()));
    }
    let run = Launch::start_env(home, &manifest, &[], &env);
    let start = session_start(home, &run);
    assert_eq!(start["containment"], "namespaces", "{start}");
    assert_eq!(
        start["walls"],
        serde_json::json!({"pid": "up", "mount": "up", "network": "up", "files": "up",
            "environment": "up"}),
        "{start}"
    );
    run
}

/// Runs a Python program in the harness; answers the JSON object it printed.
fn harness_python(run: &Launch, program: &str) -> Value {
    use base64::Engine;
    // One line: the fixture takes one directive a line.
    let encoded = base64::engine::general_purpose::STANDARD.encode(program);
    let (said, _) = harness_runs(run, &format!("echo {encoded} | base64 -d | python3 -"));
    assert_eq!(said["code"], 0, "the harness's program failed: {said}");
    serde_json::from_str(said["out"].as_str().unwrap_or_default())
        .unwrap_or_else(|e| panic!("not JSON ({e}): {said}"))
}

/// Python helpers the rows' harness programs start with: raw system calls through ctypes, each
/// answering its result or the errno's name.
const PY_SYSCALLS: &str = r#"
import ctypes, errno, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *args)
    return r if r >= 0 else errno.errorcode[ctypes.get_errno()]
def tried(f):
    try:
        return f()
    except OSError as e:
        return errno.errorcode[e.errno]
"#;

macro_rules! as_root_and_as_a_user {
    ($row:ident) => {
        mod $row {
            #[test]
            fn as_root() {
                super::$row(super::Who::Root)
            }
            #[test]
            fn as_a_user() {
                super::$row(super::Who::User)
            }
        }
    };
}

fn an_ungranted_loopback_listener_gets_no_connection(who: Who) {
    let home = row_home(who);
    let listener = Counting::start();
    let run = jailed_as(&home, None, "", &[]);
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
as_root_and_as_a_user!(an_ungranted_loopback_listener_gets_no_connection);

fn a_granted_loopback_destination_is_reached(who: Who) {
    let home = row_home(who);
    let listener = Counting::start();
    let port = listener.port;
    let run = jailed_as(
        &home,
        None,
        &format!("capabilities:\n  network:\n    allow: [\"127.0.0.1:{port}\"]\n"),
        &[],
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
as_root_and_as_a_user!(a_granted_loopback_destination_is_reached);

fn an_unlisted_name_is_refused_and_nothing_routes_off_loopback(who: Who) {
    let home = row_home(who);
    let run = jailed_as(&home, None, "", &[]);
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
as_root_and_as_a_user!(an_unlisted_name_is_refused_and_nothing_routes_off_loopback);

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

fn a_planted_secret_in_murs_environment_reaches_no_harness(who: Who) {
    let home = row_home(who);
    let secret = "planted-secret-4242";
    let run = jailed_as(
        &home,
        None,
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
as_root_and_as_a_user!(a_planted_secret_in_murs_environment_reaches_no_harness);

#[test]
fn replacing_the_mur_binary_runs_nothing_of_the_harnesss() {
    let mut home = Home::new();
    // A mur and its mur-keeper in the work folder (a project's own build, say), which the
    // harness may write.
    let bin = home.work.join("bin/mur");
    let keeper = bin.with_file_name("mur-keeper");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::copy(mur_bin(), &bin).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_mur-keeper"), &keeper).unwrap();
    home.bin = bin.clone();
    let run = jailed(&home, "");
    let marker = home.root.join("planted-ran");
    let planted = home.write(
        "planted.sh",
        &format!("#!/bin/sh\ntouch {}\nexit 1\n", marker.display()),
    );
    for target in [&bin, &keeper] {
        let (said, _) = harness_runs(
            &run,
            &format!(
                "cp {} {bin}.new && chmod +x {bin}.new && mv {bin}.new {bin}",
                planted.display(),
                bin = target.display()
            ),
        );
        // Each is read-only to the harness (its mount refuses the rename), and had one been
        // replaced, the next keeper would still be the binary the capsule opened at start.
        assert!(
            said["err"]
                .as_str()
                .is_some_and(|e| e.ends_with("Device or resource busy\n")),
            "the harness could replace {}: {said}",
            target.display()
        );
    }
    assert_eq!(
        std::fs::read(&bin).unwrap(),
        std::fs::read(mur_bin()).unwrap()
    );
    assert_eq!(
        std::fs::read(&keeper).unwrap(),
        std::fs::read(env!("CARGO_BIN_EXE_mur-keeper")).unwrap()
    );
    // The next attempt's keeper is murmur's own binary still: the task runs, nothing planted.
    let (again, _) = harness_runs(&run, "echo still-contained");
    assert_eq!(again["out"], "still-contained\n", "{again}");
    assert!(!marker.exists(), "the planted program ran");
}

/// A `mur` alone in the work folder, with no `mur-keeper` beside it: a keeper the harness put
/// there would be what the user's next `mur` runs, so murmur holds the place with an empty
/// file, read-only to the harness like `mur` itself, which no capsule runs (it has no build
/// stamp).
#[test]
fn a_mur_keeper_cannot_be_planted_beside_a_lone_mur() {
    let mut home = Home::new();
    let bin = home.work.join("bin/mur");
    let keeper = bin.with_file_name("mur-keeper");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::copy(mur_bin(), &bin).unwrap();
    home.bin = bin.clone();
    let run = jailed(&home, "");
    let (said, _) = harness_runs(
        &run,
        &format!(
            "cp {bin} {keeper}.new && mv {keeper}.new {keeper}; echo mv=$?; \
             cat {bin} > {keeper}; echo write=$?",
            bin = bin.display(),
            keeper = keeper.display()
        ),
    );
    // dash's status for a redirection it could not open is 2.
    assert_eq!(said["out"], "mv=1\nwrite=2\n", "{said}");
    let err = said["err"].as_str().unwrap_or_default();
    assert!(
        err.contains("Device or resource busy") && err.ends_with("Read-only file system\n"),
        "{said}"
    );
    assert_eq!(
        std::fs::read(&keeper).unwrap(),
        Vec::<u8>::new(),
        "the place holder was written: {said}"
    );
    let (again, _) = harness_runs(&run, "echo still-contained");
    assert_eq!(again["out"], "still-contained\n", "{again}");
}

fn the_harness_writes_only_its_work_folder_and_private_tmp(who: Who) {
    let home = row_home(who);
    hand_over(&home);
    // Another session of this folder, whose records the harness must not see.
    let other = {
        let m = home.write("other/murmur.yaml", &Fixture::default().yaml());
        Launch::start(&home, &m, &[])
    };
    let run = jailed_as(&home, None, "", &[]);
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
as_root_and_as_a_user!(the_harness_writes_only_its_work_folder_and_private_tmp);

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

fn an_agent_socket_of_the_users_is_out_of_reach(who: Who) {
    let home = row_home(who);
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
    let run = jailed_as(&home, None, "", &[]);
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
as_root_and_as_a_user!(an_agent_socket_of_the_users_is_out_of_reach);

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

/// `mur run` typed in a terminal: the harness cannot open it (no controlling terminal: the
/// keeper's own session), and cannot push keystrokes with TIOCSTI even into a terminal it made
/// its own (the system call filter).
fn the_terminal_takes_no_keystrokes(who: Who) {
    let mut home = row_home(who);
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty writes two descriptors into the given integers.
    let opened = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(opened, 0, "openpty");
    home.tty = Some(slave);
    let run = jailed_as(&home, None, "", &[]);
    // SAFETY: the test's own copies; mur run holds the terminal now.
    unsafe { libc::close(slave) };
    let said = harness_python(
        &run,
        &format!(
            "{PY_SYSCALLS}
import fcntl, termios
def push(fd):
    return tried(lambda: fcntl.ioctl(fd, termios.TIOCSTI, b'x') and 'pushed' or 'pushed')
def own():
    r, w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        m, s = os.openpty()
        fcntl.ioctl(s, termios.TIOCSCTTY, 0)
        os.write(w, push(s).encode()); os._exit(0)
    os.close(w); os.wait()
    return os.read(r, 100).decode()
print(json.dumps({{'tty': tried(lambda: push(os.open('/dev/tty', os.O_RDWR))), 'own': own()}}))"
        ),
    );
    assert_eq!(
        said,
        serde_json::json!({"tty": "ENXIO", "own": "EPERM"}),
        "{said}"
    );
    // SAFETY: the test's own descriptor.
    unsafe { libc::close(master) };
}
as_root_and_as_a_user!(the_terminal_takes_no_keystrokes);

/// io_uring would open a stream unix socket past the socket rule, and the kernel keyrings hold
/// what the user's shell put there: neither facility is there.
fn io_uring_and_the_keyrings_are_not_there(who: Who) {
    let home = row_home(who);
    let description = format!("murmur-jail-{}", std::process::id());
    let payload = "keyring-secret-payload";
    // A key in the session keyring `mur run` inherits, as `keyctl add user … @s` makes.
    let key = {
        let (kind, desc, data) = (
            std::ffi::CString::new("user").unwrap(),
            std::ffi::CString::new(description.clone()).unwrap(),
            payload.as_bytes(),
        );
        // SAFETY: add_key reads the three buffers, which outlive the call.
        unsafe {
            libc::syscall(
                libc::SYS_add_key,
                kind.as_ptr(),
                desc.as_ptr(),
                data.as_ptr(),
                data.len(),
                -3i32, // KEY_SPEC_SESSION_KEYRING
            )
        }
    };
    assert!(key > 0, "add_key: {}", std::io::Error::last_os_error());
    let run = jailed_as(&home, None, "", &[]);
    let said = harness_python(
        &run,
        &format!(
            "{PY_SYSCALLS}
buf = ctypes.create_string_buffer(4096)
params = ctypes.create_string_buffer(120)
read = call({keyctl}, 11, {key}, buf, 4096)  # KEYCTL_READ
print(json.dumps({{
  'io_uring_setup': call({setup}, 8, params),
  'io_uring_enter': call({enter}, 0, 0, 0, 0, 0, 0),
  'io_uring_register': call({register}, 0, 0, 0, 0),
  'keyctl': read, 'payload': buf.value.decode(errors='replace') if isinstance(read, int) else '',
  'request_key': call({request}, b'user', {desc:?}.encode(), None, 0),
  'add_key': call({add}, b'user', b'planted', b'x', 1, -3),
}}))",
            keyctl = libc::SYS_keyctl,
            setup = libc::SYS_io_uring_setup,
            enter = libc::SYS_io_uring_enter,
            register = libc::SYS_io_uring_register,
            request = libc::SYS_request_key,
            add = libc::SYS_add_key,
            desc = description,
        ),
    );
    // SAFETY: keyctl(KEYCTL_REVOKE) on the test's own key.
    unsafe { libc::syscall(libc::SYS_keyctl, 3, key) };
    assert_eq!(
        said,
        serde_json::json!({"io_uring_setup": "ENOSYS", "io_uring_enter": "ENOSYS",
            "io_uring_register": "ENOSYS", "keyctl": "ENOSYS", "payload": "",
            "request_key": "ENOSYS", "add_key": "ENOSYS"}),
        "{said}"
    );
}
as_root_and_as_a_user!(io_uring_and_the_keyrings_are_not_there);

/// A SysV shared memory segment of the host's, and the host's name: an attempt has IPC and UTS
/// namespaces of its own.
fn host_shared_memory_and_hostname_are_out_of_reach(who: Who) {
    let home = row_home(who);
    // SAFETY: a segment of the test's own, removed below.
    let id = unsafe { libc::shmget(libc::IPC_PRIVATE, 4096, libc::IPC_CREAT | 0o666) };
    assert!(id >= 0, "shmget: {}", std::io::Error::last_os_error());
    let secret = b"host-shm-secret\0";
    // SAFETY: the segment is 4096 bytes, mapped here for the copy and unmapped after.
    unsafe {
        let at = libc::shmat(id, std::ptr::null(), 0);
        assert_ne!(at as isize, -1, "shmat");
        std::ptr::copy_nonoverlapping(secret.as_ptr(), at as *mut u8, secret.len());
        libc::shmdt(at);
    }
    let host_ns = |ns: &str| std::fs::read_link(format!("/proc/self/ns/{ns}")).unwrap();
    let run = jailed_as(&home, None, "", &[]);
    let said = harness_python(
        &run,
        &format!(
            "{PY_SYSCALLS}
libc.shmat.restype = ctypes.c_void_p
at = libc.shmat({id}, None, 0)
text = ctypes.string_at(at, 15).decode() if at not in (None, 2**64 - 1) else errno.errorcode[ctypes.get_errno()]
print(json.dumps({{'shm': text, 'listed': open('/proc/sysvipc/shm').read().count(chr(10)) - 1,
  'ipc': os.readlink('/proc/self/ns/ipc'), 'uts': os.readlink('/proc/self/ns/uts'),
  'sethostname': tried(lambda: libc.sethostname(b'pwned', 5) == 0 and 'changed' or
      errno.errorcode[ctypes.get_errno()])}}))"
        ),
    );
    // SAFETY: IPC_RMID on the test's own segment.
    unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) };
    assert_eq!(said["shm"], "EINVAL", "{said}");
    assert_eq!(said["listed"], 0, "{said}");
    assert_eq!(said["sethostname"], "EPERM", "{said}");
    assert_ne!(said["ipc"], host_ns("ipc").display().to_string(), "{said}");
    assert_ne!(said["uts"], host_ns("uts").display().to_string(), "{said}");
}
as_root_and_as_a_user!(host_shared_memory_and_hostname_are_out_of_reach);

/// Root's host settings: `/proc/sys`, `/proc/sysrq-trigger`, `/sys` and `/dev/kmsg` cannot be
/// written, and `/dev` holds no disk. (A user could not write them anyway; the row shows it.)
/// Nothing is changed on the way: a write puts back the value it read.
fn host_settings_and_devices_cannot_be_written(who: Who) {
    let home = row_home(who);
    let run = jailed_as(&home, None, "", &[]);
    let said = harness_python(
        &run,
        &format!(
            "{PY_SYSCALLS}
def rewrite(path):
    def go():
        value = open(path).read()
        with open(path, 'w') as f:
            f.write(value)
        return 'written'
    return tried(go)
def opens(path, flags):
    return tried(lambda: os.close(os.open(path, flags)) or 'opened')
print(json.dumps({{
  'core_uses_pid': rewrite('/proc/sys/kernel/core_uses_pid'),
  'core_pattern': rewrite('/proc/sys/kernel/core_pattern'),
  'sysrq': opens('/proc/sysrq-trigger', os.O_WRONLY),
  'sys': opens('/sys/kernel/mm/transparent_hugepage/enabled', os.O_WRONLY),
  'kmsg': opens('/dev/kmsg', os.O_WRONLY),
  'kcore': tried(lambda: len(open('/proc/kcore', 'rb').read(16))),
  'dev': sorted(os.listdir('/dev')),
}}))"
        ),
    );
    let refused = match who {
        Who::Root => "EROFS",
        Who::User => "EACCES",
    };
    assert_eq!(said["core_uses_pid"], refused, "{said}");
    assert_eq!(said["core_pattern"], refused, "{said}");
    // A kernel built without them has neither /proc/sysrq-trigger nor /proc/kcore.
    let or_absent = |path: &str, expected: Value| match std::path::Path::new(path).exists() {
        true => expected,
        false => Value::from("ENOENT"),
    };
    assert_eq!(
        said["sysrq"],
        or_absent("/proc/sysrq-trigger", refused.into()),
        "{said}"
    );
    assert!(
        ["EROFS", "EACCES", "ENOENT"].contains(&said["sys"].as_str().unwrap_or_default()),
        "{said}"
    );
    assert_eq!(said["kmsg"], "ENOENT", "{said}");
    // Masked for root (an empty /dev/null), unreadable for a user.
    let kcore = match who {
        Who::Root => serde_json::json!(0),
        Who::User => serde_json::json!("EACCES"),
    };
    assert_eq!(said["kcore"], or_absent("/proc/kcore", kcore), "{said}");
    assert_eq!(
        said["dev"],
        serde_json::json!([
            "fd", "full", "null", "ptmx", "pts", "random", "shm", "stderr", "stdin", "stdout",
            "tty", "urandom", "zero"
        ]),
        "{said}"
    );
}
as_root_and_as_a_user!(host_settings_and_devices_cannot_be_written);

/// The README's quickstart at a checkout's root: the work folder holds `mur` itself, the
/// manifest, a git repository and an `.envrc`. What decides the user's next command is
/// read-only to the harness; the rest of the folder is its to write.
fn nothing_planted_runs_later(who: Who) {
    let mut home = row_home(who);
    let work = home.work.clone();
    let bin = work.join("target/release/mur");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::copy(&home.bin, &bin).unwrap();
    home.bin = bin;
    for (path, text) in [
        (".git/config", "[core]\n"),
        (".git/hooks/pre-commit.sample", "#!/bin/sh\n"),
        (".envrc", "export A=1\n"),
    ] {
        std::fs::create_dir_all(work.join(path).parent().unwrap()).unwrap();
        std::fs::write(work.join(path), text).unwrap();
    }
    let run = jailed_as(&home, Some(work.join("murmur.yaml")), "", &[]);
    // In place, each answers EROFS; `mur`, which runs, answers ETXTBSY to a write even on a
    // writable folder, so it is replaced by a rename instead, which its mount refuses (EBUSY).
    let (said, _) = harness_runs(
        &run,
        "for f in murmur.yaml .git/config .git/hooks/pre-commit .envrc; do \
         (echo planted >> $f) 2>&1 | sed 's/.*: //'; done; cp /bin/true mur.new; \
         mv -f mur.new target/release/mur 2>&1 | sed 's/.*: //'; echo mine > notes.txt; \
         cat notes.txt",
    );
    assert_eq!(
        said["out"],
        "Read-only file system\n".repeat(4) + "Device or resource busy\nmine\n",
        "{said}"
    );
    let manifest = std::fs::read_to_string(work.join("murmur.yaml")).unwrap();
    assert!(!manifest.contains("planted"));
    assert!(!work.join(".git/hooks/pre-commit").exists());
    let (code, _, err) = home.run(&["ps"]);
    assert_eq!(code, 0, "the user's next `mur` is still mur: {err}");
}
as_root_and_as_a_user!(nothing_planted_runs_later);

/// Another murmur home's token files and records, and the user's secrets, are out of sight.
fn other_homes_and_the_users_secrets_are_out_of_sight(who: Who) {
    let home = row_home(who);
    let user_home = home.root.join("userhome");
    for (path, text) in [
        (
            ".murmur/run/ses_other.tokens",
            "operator other-home-token\n",
        ),
        (
            ".murmur/records/x/ses_other/trace.jsonl",
            "other-home-trace\n",
        ),
        (".ssh/id_ed25519", "ssh-secret-key\n"),
        (".aws/credentials", "aws-secret\n"),
        (".netrc", "machine x password netrc-secret\n"),
        (".git-credentials", "https://u:git-secret@x\n"),
        (".config/gcloud/credentials.db", "gcloud-secret\n"),
    ] {
        let file = user_home.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    let run = jailed_as(&home, None, "", &[]);
    let (said, _) = harness_runs(
        &run,
        "cd \"$HOME\"; cat .murmur/run/* .murmur/records/*/*/* .ssh/* .aws/* .git-credentials \
         .config/gcloud/* .netrc 2>/dev/null; ls -A .ssh .murmur/run",
    );
    let out = said["out"].as_str().unwrap();
    for secret in [
        "other-home-token",
        "other-home-trace",
        "ssh-secret-key",
        "aws-secret",
        "git-secret",
        "gcloud-secret",
        "netrc-secret",
    ] {
        assert!(!out.contains(secret), "{secret} was read: {said}");
    }
    assert_eq!(out, ".murmur/run:\n\n.ssh:\n", "{said}");
}
as_root_and_as_a_user!(other_homes_and_the_users_secrets_are_out_of_sight);

/// `harness.read` grants a secret back; `harness.protect` makes more of the work folder
/// read-only.
#[test]
fn a_manifest_grants_a_secret_and_protects_more() {
    let home = row_home(Who::Root);
    let user_home = home.root.join("userhome");
    std::fs::write(
        user_home.join(".netrc"),
        "machine x password netrc-granted\n",
    )
    .unwrap();
    std::fs::create_dir_all(user_home.join(".ssh")).unwrap();
    std::fs::write(user_home.join(".ssh/id_rsa"), "still-hidden\n").unwrap();
    std::fs::write(home.work.join("Makefile"), "all:\n").unwrap();
    let run = jailed_as(
        &home,
        None,
        "harness:\n  read: [~/.netrc]\n  protect: [Makefile]\n",
        &[],
    );
    let (said, _) = harness_runs(
        &run,
        "cat \"$HOME/.netrc\" \"$HOME/.ssh/id_rsa\" 2>/dev/null; (echo x >> Makefile) 2>&1 | \
         sed 's/.*: //'",
    );
    assert_eq!(
        said["out"], "machine x password netrc-granted\nRead-only file system\n",
        "{said}"
    );
}

/// A `CONNECT` target holding an escape sequence, a newline and a forged trace line is refused
/// and traced, and `mur trace show` and `mur watch` print it on the refusal's own line with
/// every control made visible: the harness forges no line of the operator's terminal.
fn an_egress_host_forges_no_line_of_the_operators(who: Who) {
    let home = row_home(who);
    let run = jailed_as(&home, None, "", &[]);
    let (mut watch, lines) = watch_lines(&home, &run.session);
    // The watch is connected once the door's connection-ack is printed.
    assert!(wait_until(Duration::from_secs(30), || lines
        .lock()
        .unwrap()
        .iter()
        .any(|l| l == "[connection-ack]")));
    let said = harness_python(
        &run,
        "import json, os, socket
port = int(os.environ['HTTP_PROXY'].rsplit(':', 1)[1])
s = socket.create_connection(('127.0.0.1', port))
s.sendall(b'CONNECT \\x1b]0;PWNED\\x07x\\ntsk_forged completed:0 HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')
print(json.dumps({'reply': s.recv(200).decode(errors='replace').split('\\r\\n')[0]}))",
    );
    assert!(
        said["reply"].as_str().is_some_and(|r| r.contains("403")),
        "{said}"
    );
    let denied = wait_for_denied(&home, &run);
    assert!(
        denied["host"]
            .as_str()
            .is_some_and(|h| h.contains('\u{1b}') || h.contains("tsk_forged")),
        "the host is traced as sent: {denied}"
    );
    let forged = |out: &str| {
        out.contains('\u{1b}')
            || out.contains('\u{7}')
            || out
                .lines()
                .any(|l| l.trim_start().starts_with("tsk_forged"))
    };
    let (code, out, err) = home.run(&["trace", "show", &run.session]);
    assert_eq!(code, 0, "{err}");
    assert!(
        !forged(&out),
        "trace show obeyed the harness's text:\n{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.contains("egress refused") && l.contains("^[]0;PWNED^G")),
        "the refusal is shown on its line:\n{out}"
    );
    let mut shown = String::new();
    wait_until(Duration::from_secs(10), || {
        shown = lines.lock().unwrap().join("\n");
        shown.contains("PWNED")
    });
    let _ = watch.kill();
    let _ = watch.wait();
    assert!(
        !forged(&shown),
        "mur watch obeyed the harness's text:\n{shown}"
    );
    assert!(shown.contains("^[]0;PWNED^G"), "{shown}");
}
as_root_and_as_a_user!(an_egress_host_forges_no_line_of_the_operators);

/// The first `egress_denied` record of the session, waited for.
fn wait_for_denied(home: &Home, run: &Launch) -> Value {
    let mut found = None;
    wait_until(Duration::from_secs(10), || {
        found = egress_denied(home, run).into_iter().next();
        found.is_some()
    });
    found.expect("an egress_denied record")
}

/// With `$MURMUR_HOME` the default `~/.murmur`, the hides of other homes leave the session's
/// own records alone: the harness writes its private tmp there and answers.
#[test]
fn the_default_home_is_this_sessions_own() {
    let home = row_home(Who::Root);
    let user_home = home.root.join("userhome");
    std::fs::write(home.root.join("murmur.yaml"), Fixture::default().yaml()).unwrap();
    let default_home = user_home.join(".murmur");
    let run = Launch::start_env(
        &home,
        &home.root.join("murmur.yaml"),
        &[],
        &[
            ("MURMUR_CONTAINMENT", "namespaces".into()),
            ("HOME", user_home.display().to_string()),
            ("MURMUR_HOME", default_home.display().to_string()),
        ],
    );
    let (said, _) = harness_runs(
        &run,
        "echo kept > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && ls \"$HOME/.murmur/run\" | wc -l",
    );
    assert_eq!(said["out"], "kept\n0\n", "{said}");
}

// ---- bounds ----

/// `mur run --manifest M` in namespace mode as the row's user (a formation or a lone capsule):
/// for an unprivileged one, the fixture path in every manifest under the home is its own copy,
/// and its folders are its own. Answers the launch and its members.
fn launch_as(
    home: &Home,
    manifest: &std::path::Path,
    env: &[(&str, String)],
) -> (Launch, Vec<Member>) {
    if home.user.is_some() {
        rewrite_fixture_paths(home, &home.root);
    }
    let state = home.root.join("fixture-state");
    std::fs::create_dir_all(&state).unwrap();
    hand_over(home);
    let mut env = env.to_vec();
    env.push(("MURMUR_CONTAINMENT", "namespaces".to_owned()));
    env.push(("MURMUR_HARNESS_WRITABLE", state.display().to_string()));
    env.push(("HOME", home.root.join("userhome").display().to_string()));
    if home.user.is_some() {
        env.push(("PATH", "/usr/local/bin:/usr/bin:/bin".into()));
    }
    Launch::start_formation_env(home, manifest, &[], &env)
}

/// Points every manifest below `dir` at the user's own copy of the fixture.
fn rewrite_fixture_paths(home: &Home, dir: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rewrite_fixture_paths(home, &path);
        } else if path.extension().is_some_and(|e| e == "yaml") {
            let text = std::fs::read_to_string(&path).unwrap();
            let own = home.root.join("bin/fixture.py");
            std::fs::write(
                &path,
                text.replace(&fixture().display().to_string(), &own.display().to_string()),
            )
            .unwrap();
        }
    }
}

/// A lead with 40 callees: 83 listeners cross from its keeper (the proxy, and an IPv4 and an
/// IPv6 one for its door and each callee), far more than one message carried; its harness
/// reaches its door, its first and its last callee through them.
fn forty_callees_all_reachable(who: Who) {
    let home = row_home(who);
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
    let (_run, members) = launch_as(&home, &manifest, &[]);
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

as_root_and_as_a_user!(forty_callees_all_reachable);

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
fn a_proxy_flood_leaves_the_door_answering(who: Who) {
    let home = row_home(who);
    let manifest = home.write("murmur.yaml", &Fixture::default().yaml());
    let (run, _) = launch_as(&home, &manifest, &[]);
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

as_root_and_as_a_user!(a_proxy_flood_leaves_the_door_answering);

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
fn a_bomb_is_stopped_by_its_limit(who: Who, limits: &str, bomb: &str, status: &str) {
    let home = row_home(who);
    let manifest = home.write(
        "murmur.yaml",
        &format!(
            "{}harness:\n  limits: {limits}\n",
            Fixture::default().yaml()
        ),
    );
    let (run, _) = launch_as(&home, &manifest, &[]);
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

fn a_fork_bomb_is_stopped_by_its_pids_limit(who: Who) {
    a_bomb_is_stopped_by_its_limit(
        who,
        "{ pids: 64 }",
        "timeout 5 bash -c ':(){ :|:& };:' >/dev/null 2>&1; echo bombed",
        "the harness reached its pids limit (harness.limits.pids: 64)",
    );
}
as_root_and_as_a_user!(a_fork_bomb_is_stopped_by_its_pids_limit);

/// Every attempt, not only the first two, runs in a cgroup of its own: the pool hands a cgroup
/// an attempt before left back to the next keeper, which takes it again as it is (it once
/// failed to make it anew, and from the third attempt on ran with no cgroup at all).
fn every_attempt_runs_in_a_cgroup_of_its_own(who: Who) {
    let home = row_home(who);
    let manifest = home.write("murmur.yaml", &Fixture::default().yaml());
    let (run, _) = launch_as(&home, &manifest, &[]);
    for n in 1..=5 {
        let task = run.start_task("@run grep -E ':(pids|memory):' /proc/self/cgroup");
        let done = run.wait_task(&task, Duration::from_secs(60), |s| {
            s == "TASK_STATE_COMPLETED" || s == "TASK_STATE_FAILED"
        });
        let said = done["artifacts"][0]["parts"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let cgroups: Value = serde_json::from_str(&said).unwrap_or_default();
        let lines: Vec<&str> = cgroups["out"]
            .as_str()
            .unwrap_or_default()
            .lines()
            .collect();
        assert!(!lines.is_empty(), "attempt {n}: {done}");
        for line in lines {
            let leaf = line.rsplit('/').next().unwrap_or_default();
            assert!(
                leaf.starts_with("murmur-"),
                "attempt {n} is not in a cgroup of its own: {line}"
            );
        }
    }
    drop(run);
    assert_nothing_left(&home, Duration::from_secs(60));
}
as_root_and_as_a_user!(every_attempt_runs_in_a_cgroup_of_its_own);

fn a_memory_bomb_is_stopped_by_its_memory_limit(who: Who) {
    a_bomb_is_stopped_by_its_limit(
        who,
        "{ memory: \"128MiB\" }",
        "python3 -c 'b = [bytearray(1 << 20) for _ in range(1024)]'; echo bombed",
        "the harness reached its memory limit (harness.limits.memory: \"128MiB\")",
    );
}
as_root_and_as_a_user!(a_memory_bomb_is_stopped_by_its_memory_limit);

/// The provider's key stays with the capsule's model gateway (docs/keys-and-spend.md): the
/// harness, whose run-wide allow list even names the key's variables, finds it in no variable,
/// no `/proc/*/environ` it can read and no file of its home or work folder, while its call
/// through the gateway reaches the provider with the real key.
fn the_providers_key_is_out_of_the_harnesss_reach(who: Who) {
    const KEY: &str = "sk-ant-jail-never-in-reach-93c1";
    let home = row_home(who);
    let fake = fake_provider::Fake::start_with(|_| {
        fake_provider::Reply::Stream(fake_provider::anthropic::text(
            "",
            &["hi"],
            "end_turn",
            (3, 2),
        ))
    });
    let gateway = format!(
        "    gateway: {{ endpoint: \"http://127.0.0.1:{}\", api_key: \"${{JAIL_PROVIDER_KEY}}\", api: anthropic }}\n    process:",
        fake.port
    );
    let run = jailed_edited(
        &home,
        None,
        "",
        &[
            ("JAIL_PROVIDER_KEY", KEY.to_owned()),
            ("ANTHROPIC_API_KEY", KEY.to_owned()),
            (
                "MURMUR_HARNESS_ENV",
                "JAIL_PROVIDER_KEY ANTHROPIC_API_KEY".to_owned(),
            ),
        ],
        &|yaml| yaml.replacen("    process:", &gateway, 1),
    );
    let reversed: String = KEY.chars().rev().collect();
    let said = harness_python(
        &run,
        &format!(
            r#"
import json, os, urllib.request
real = "{reversed}"[::-1].encode()
reach = [k for k, v in os.environ.items() if real in v.encode()]
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            if real in open(f"/proc/{{pid}}/environ", "rb").read():
                reach.append(f"/proc/{{pid}}/environ")
        except OSError:
            pass
for top in [os.getcwd(), os.environ.get("HOME", "/nonexistent")]:
    for root, dirs, files in os.walk(top):
        for f in files:
            try:
                if real in open(os.path.join(root, f), "rb").read():
                    reach.append(os.path.join(root, f))
            except OSError:
                pass
req = urllib.request.Request(os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages",
    data=json.dumps({{"model": "m", "max_tokens": 8, "stream": True,
                      "messages": [{{"role": "user", "content": "hi"}}]}}).encode(),
    headers={{"x-api-key": os.environ["ANTHROPIC_API_KEY"], "content-type": "application/json"}})
with urllib.request.urlopen(req, timeout=30) as r:
    status = r.status
print(json.dumps({{"reach": reach, "status": status,
                  "placeholder": os.environ["ANTHROPIC_API_KEY"].startswith("mur_gw_")}}))
"#
        ),
    );
    assert_eq!(
        said,
        serde_json::json!({"reach": [], "status": 200, "placeholder": true})
    );
    let seen = fake.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].header("x-api-key"), Some(KEY));
    drop(run);
    assert_nothing_left(&home, Duration::from_secs(60));
}
as_root_and_as_a_user!(the_providers_key_is_out_of_the_harnesss_reach);

/// The harness, root here, tries to lift its own pids limit and to leave its cgroup for the
/// capsule's: /sys/fs/cgroup is read-only in its mount namespace, so it can do neither.
fn the_harness_cannot_lift_its_limits(who: Who) {
    let home = row_home(who);
    let manifest = home.write(
        "murmur.yaml",
        &format!(
            "{}harness:\n  limits: {{ pids: 64 }}\n",
            Fixture::default().yaml()
        ),
    );
    let (run, _) = launch_as(&home, &manifest, &[]);
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

as_root_and_as_a_user!(the_harness_cannot_lift_its_limits);

/// The private tmp holds what `harness.limits.tmp` says and no more: a write past it fails
/// with ENOSPC, and the next attempt's tmp starts empty.
fn the_private_tmp_is_bounded(who: Who) {
    let home = row_home(who);
    let manifest = home.write(
        "murmur.yaml",
        &format!(
            "{}harness:\n  limits: {{ tmp: \"1MiB\" }}\n",
            Fixture::default().yaml()
        ),
    );
    let (run, _) = launch_as(&home, &manifest, &[]);
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

as_root_and_as_a_user!(the_private_tmp_is_bounded);

/// PIDs come round again: a cgroup an ended capsule left under a PID a live process now has is
/// still that ended capsule's, swept at the next capsule's first attempt, and never taken with
/// the limits it had (it once was: a fork bomb then ran under another capsule's `pids.max`).
#[test]
fn a_cgroup_left_under_a_pid_that_came_round_again_is_swept() {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let Some(path) = own.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, controllers, path) = (parts.next(), parts.next()?, parts.next()?);
        controllers.split(',').any(|c| c == "pids").then_some(path)
    }) else {
        panic!("this machine has no pids cgroup to test with: {own}");
    };
    // Left by "a capsule" with this test's PID that started at tick 1: not this process.
    let leftover = std::path::Path::new("/sys/fs/cgroup/pids")
        .join(path.trim_start_matches('/'))
        .join(format!("murmur-{}-1-0", std::process::id()));
    std::fs::create_dir_all(&leftover).unwrap();
    let home = Home::new();
    let run = jailed(&home, "harness:\n  limits: { pids: 64 }\n");
    let (said, _) = harness_runs(&run, "echo fine");
    assert_eq!(said["out"], "fine\n", "{said}");
    assert!(
        wait_until(Duration::from_secs(10), || !leftover.exists()),
        "{} was not swept",
        leftover.display()
    );
}
