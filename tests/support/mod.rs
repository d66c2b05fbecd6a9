//! What every end-to-end test needs: a private `MURMUR_HOME` and work folder, the real `mur`
//! launched as a user would, a plain HTTP/1.1 client that can send exactly the bytes a test
//! wants (duplicate headers, no headers), and bounded waits. Every process a test starts is
//! ended when its handle drops.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub const DOOR_URI: &str = "https://docs.murmur.nexus/reference/agent-card/#murmur-door-v1";
pub const CAPSULE_URI: &str = "https://docs.murmur.nexus/reference/agent-card/#murmur-capsule-v1";
pub const STREAM_URI: &str =
    "https://docs.murmur.nexus/reference/streaming-protocol/#murmur-stream-v1";

pub fn mur_bin() -> &'static str {
    env!("CARGO_BIN_EXE_mur")
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The scriptable test harness (see its docstring for the @directives).
pub fn fixture() -> PathBuf {
    repo_root().join("scripts/harness/fixture.py")
}

/// The PATH every process a test starts gets: the test's own, behind the folder of the Python
/// interpreter `python3` resolves to. A version manager's `python3` is a shell script that runs
/// helpers before it execs Python: it slows every harness start, and can drop a SIGINT sent
/// meanwhile (docs/containment.md, "What a cancel does").
pub fn search_path() -> String {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let inherited = std::env::var("PATH").unwrap_or_default();
        let interpreter = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .map(|s| PathBuf::from(s.trim()));
        match interpreter.as_deref().and_then(Path::parent) {
            Some(dir) if !dir.as_os_str().is_empty() => format!("{}:{inherited}", dir.display()),
            _ => inherited,
        }
    })
    .clone()
}

/// An `a2a_send` trace record's keys, in the order the spec lists them.
pub const A2A_SEND_KEYS: [&str; 8] = [
    "event_type",
    "session_id",
    "timestamp",
    "peer_url",
    "message_id",
    "task_id",
    "context_id",
    "caller_task_id",
];

/// A JSON object's keys in the order they were written (empty for anything else).
pub fn keys_of(v: &Value) -> Vec<&str> {
    v.as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

/// A JSON-RPC call to an authenticated door with `token` as its bearer; answers the JSON.
pub fn bearer_rpc(port: u16, token: &str, method: &str, params: Value) -> Value {
    let auth = format!("Bearer {token}");
    http(
        port,
        "POST",
        "/",
        &[
            ("Content-Type", "application/json"),
            ("A2A-Version", "1.0"),
            ("Authorization", &auth),
        ],
        request(json!(1), method, params).as_bytes(),
    )
    .json()
}

/// Polls `f` every 10 ms until it holds or `limit` passes; answers whether it held.
pub fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if f() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A private MURMUR_HOME and work folder, removed on drop.
pub struct Home {
    pub root: PathBuf,
    pub home: PathBuf,
    pub work: PathBuf,
    /// The `mur` binary `Home::mur` runs: the one cargo built, unless a test points it at a
    /// copy of its own.
    pub bin: PathBuf,
    /// Run `mur` as this (uid, gid) instead of the test's own user (tests/jail.rs runs its
    /// escape suite as root and as an unprivileged user).
    pub user: Option<(u32, u32)>,
    /// Give `mur` this terminal (a pty's other end) as its controlling terminal, as a user's
    /// shell would.
    pub tty: Option<i32>,
    /// Cgroups `mur` joins before it runs (a delegated one, as systemd gives a user's
    /// session); removed when the home is dropped.
    pub cgroups: Vec<PathBuf>,
}

impl Home {
    pub fn new() -> Home {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let root = std::env::temp_dir().join(format!("murmur-e2e-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let home = root.join("home");
        let work = root.join("work");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&work).unwrap();
        Home {
            root: root.canonicalize().unwrap(),
            home: home.canonicalize().unwrap(),
            work: work.canonicalize().unwrap(),
            bin: PathBuf::from(mur_bin()),
            user: None,
            tty: None,
            cgroups: Vec::new(),
        }
    }

    /// Writes a file under the root and answers its path.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.root.join(name);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(&path, text).unwrap();
        path
    }

    /// The operator token `mur token SESSION` prints for a session.
    pub fn operator_token(&self, session: &str) -> String {
        let (code, out, err) = self.run(&["token", session]);
        assert_eq!(code, 0, "mur token {session}: {err}");
        out.lines()
            .find_map(|l| l.strip_prefix("operator "))
            .unwrap_or_else(|| panic!("mur token printed no operator token: {out}"))
            .to_owned()
    }

    /// `mur` with this home, in the work folder.
    pub fn mur(&self) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.env("MURMUR_HOME", &self.home)
            // A harness gets an allow list of murmur's environment; these carry the test
            // harnesses' own settings, and FIXTURE_STATE marks every process a test started.
            .env(
                "MURMUR_HARNESS_ENV",
                "FIXTURE_STATE FAKE_CLAUDE_LOG FAKE_CLAUDE_IGNORE_CONTROL FAKE_CODEX_IGNORE_SIGINT",
            )
            // Test harnesses write pidfiles and logs beside the test's folders; the jail's
            // files wall (tests/jail.rs unsets this) would keep them in the work folder.
            .env("MURMUR_HARNESS_WRITABLE", &self.root)
            .env("PATH", search_path())
            .env("FIXTURE_STATE", self.root.join("fixture-state"))
            .current_dir(&self.work);
        if let Some((uid, gid)) = self.user {
            use std::os::unix::process::CommandExt;
            // std drops the supplementary groups too when it changes the uid from root.
            cmd.uid(uid).gid(gid);
        }
        if let Some(tty) = self.tty {
            use std::os::unix::process::CommandExt;
            // SAFETY: only async-signal-safe calls between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::setsid() < 0 || libc::ioctl(tty, libc::TIOCSCTTY, 0) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        if !self.cgroups.is_empty() {
            use std::os::unix::ffi::OsStrExt;
            use std::os::unix::process::CommandExt;
            let procs: Vec<std::ffi::CString> = self
                .cgroups
                .iter()
                .map(|d| std::ffi::CString::new(d.join("cgroup.procs").as_os_str().as_bytes()))
                .collect::<Result<_, _>>()
                .unwrap();
            // SAFETY: open, write and close between fork and exec, on paths made before it;
            // after the uid change, so the move is the user's own (as a delegated cgroup's is).
            unsafe {
                cmd.pre_exec(move || {
                    for path in &procs {
                        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                        if fd < 0 || libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                            return Err(std::io::Error::last_os_error());
                        }
                        libc::close(fd);
                    }
                    Ok(())
                });
            }
        }
        cmd
    }

    /// Runs `mur ARGS` to its end, within 60 s (it is killed and the test fails past that):
    /// (exit code, stdout, stderr).
    pub fn run(&self, args: &[&str]) -> (i32, String, String) {
        let mut child = spawn_copied(|| {
            let mut cmd = self.mur();
            cmd.args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            cmd
        });
        let mut out = child.stdout.take().unwrap();
        let mut err = child.stderr.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut o = String::new();
            let _ = out.read_to_string(&mut o);
            o
        });
        let err_reader = std::thread::spawn(move || {
            let mut e = String::new();
            let _ = err.read_to_string(&mut e);
            e
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("`mur {}` did not end within 60 s", args.join(" "));
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        (
            status.code().unwrap_or(-1),
            reader.join().unwrap_or_default(),
            err_reader.join().unwrap_or_default(),
        )
    }

    /// The session folder of a launch in the work folder.
    pub fn records(&self, session: &str) -> PathBuf {
        let rel = self.work.strip_prefix("/").unwrap();
        self.home.join("records").join(rel).join(session)
    }

    pub fn trace(&self, session: &str) -> Vec<Value> {
        let text =
            std::fs::read_to_string(self.records(session).join("trace.jsonl")).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
        for dir in &self.cgroups {
            // Empty once every process of the test is gone (the capsule removes its own
            // cgroups inside it as it ends).
            wait_until(Duration::from_secs(10), || {
                std::fs::remove_dir(dir).is_ok() || !dir.exists()
            });
        }
    }
}

/// Manifest options for the fixture harness.
pub struct Fixture {
    pub name: &'static str,
    pub acceptance: &'static str,
    pub after_task: &'static str,
    pub queue_depth: Option<u32>,
    pub dialect: &'static str,
    pub interrupt: &'static str,
    pub extra: &'static str,
}

impl Default for Fixture {
    fn default() -> Self {
        Fixture {
            name: "fixture",
            acceptance: "queue",
            after_task: "sleep",
            queue_depth: Some(2),
            dialect: "text",
            interrupt: "sigint",
            extra: "",
        }
    }
}

impl Fixture {
    /// `task_acceptance: single`: one task at a time, none waiting.
    pub fn single() -> Self {
        Fixture {
            acceptance: "single",
            queue_depth: None,
            ..Fixture::default()
        }
    }

    pub fn yaml(&self) -> String {
        let depth = self
            .queue_depth
            .map(|d| format!("\n  queue_depth: {d}"))
            .unwrap_or_default();
        let (output, resume) = if self.dialect == "stream-json" {
            (
                "stream-json",
                "\n      resume: [\"--resume\", \"{session}\"]",
            )
        } else {
            ("text", "")
        };
        format!(
            r#"name: {name}
version: "0.1.0"
artifacts:
  - name: local/driver-fixture
    version: "0.1.0"
    runtime: driver
    process:
      command: ["python3", "{fixture}", "--dialect", "{dialect}"]
      output: {output}
      interrupt: {interrupt}{resume}
inference:
  transport: process
  driver:
    artifact: local/driver-fixture
lifecycle:
  task_acceptance: {acceptance}
  after_task: {after}{depth}
{extra}"#,
            name = self.name,
            fixture = fixture().display(),
            dialect = self.dialect,
            interrupt = self.interrupt,
            acceptance = self.acceptance,
            after = self.after_task,
            extra = self.extra,
        )
    }
}

/// Spawns `command()`, again while it answers ETXTBSY (bounded): a test that has just copied
/// `mur` may find another test's child, forked while the copy was open for writing, still
/// holding it until that child execs.
pub fn spawn_copied(command: impl Fn() -> Command) -> Child {
    let mut tries = 0;
    loop {
        match command().spawn() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 100 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            spawned => return spawned.expect("mur starts"),
        }
    }
}

/// A launched `mur run`, stopped (SIGTERM, then SIGKILL) when dropped.
pub struct Launch {
    pub child: Child,
    pub port: u16,
    pub session: String,
    /// stdout after the announcement (the launch task's answer).
    pub rest: Arc<Mutex<String>>,
    /// The fixture harness's `FIXTURE_STATE` (see [`Home::mur`]).
    pub fixture_state: PathBuf,
}

impl Launch {
    /// `mur run --manifest M ARGS`, waiting (bounded) for the two announcement lines.
    pub fn start(home: &Home, manifest: &Path, args: &[&str]) -> Launch {
        Launch::start_env(home, manifest, args, &[])
    }

    /// [`Launch::start`] with extra environment for `mur run` (and so its harnesses).
    pub fn start_env(
        home: &Home,
        manifest: &Path,
        args: &[&str],
        env: &[(&str, String)],
    ) -> Launch {
        let (launch, members) = Launch::announced(home, manifest, args, env);
        assert!(members.is_empty(), "a lone capsule announces no members");
        launch
    }

    /// `mur run --resume ADDRESS` (docs/store.md), with extra environment, announced.
    pub fn resume_env(home: &Home, address: &str, env: &[(&str, String)]) -> (Launch, Vec<Member>) {
        Launch::announced_args(
            home,
            &["run".as_ref(), "--resume".as_ref(), address.as_ref()],
            env,
        )
    }

    /// `mur run`, read up to its announcement: a formation's `member …` lines (answered), then
    /// the entry's two lines; the rest of stdout is kept in `rest`.
    fn announced(
        home: &Home,
        manifest: &Path,
        args: &[&str],
        env: &[(&str, String)],
    ) -> (Launch, Vec<Member>) {
        let mut all: Vec<&std::ffi::OsStr> =
            vec!["run".as_ref(), "--manifest".as_ref(), manifest.as_ref()];
        all.extend(args.iter().map(std::ffi::OsStr::new));
        Launch::announced_args(home, &all, env)
    }

    /// `mur ARGS` (a run of some kind), read up to its announcement.
    fn announced_args(
        home: &Home,
        args: &[&std::ffi::OsStr],
        env: &[(&str, String)],
    ) -> (Launch, Vec<Member>) {
        let mut child = spawn_copied(|| {
            let mut cmd = home.mur();
            cmd.envs(env.iter().map(|(k, v)| (*k, v.as_str())))
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit());
            cmd
        });
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let rest = Arc::new(Mutex::new(String::new()));
        let rest2 = rest.clone();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            for l in lines.by_ref() {
                let Ok(l) = l else { return };
                let last = l.starts_with("session: ");
                let _ = tx.send(l);
                if last {
                    break;
                }
            }
            for l in lines.map_while(Result::ok) {
                let mut r = rest2.lock().unwrap();
                r.push_str(&l);
                r.push('\n');
            }
        });
        let mut members = Vec::new();
        let mut launch = Launch {
            child,
            port: 0,
            session: String::new(),
            rest,
            fixture_state: home.root.join("fixture-state"),
        };
        loop {
            let line = rx
                .recv_timeout(Duration::from_secs(30))
                .expect("mur run announced no session");
            if let Some(m) = Member::parse(&line) {
                members.push(m);
            } else if let Some(port) = line.strip_prefix("murmur: url localhost:") {
                launch.port = port.parse().unwrap();
            } else if let Some(session) = line.strip_prefix("session: ") {
                launch.session = session.to_owned();
                return (launch, members);
            } else {
                panic!("unexpected announcement line {line:?}");
            }
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A JSON-RPC call with `A2A-Version: 1.0`; answers the whole response object.
    pub fn rpc(&self, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        self.post(&body.to_string(), &[("A2A-Version", "1.0")])
            .json()
    }

    /// POST / with content-type: application/json and the given extra headers.
    pub fn post(&self, body: &str, headers: &[(&str, &str)]) -> Resp {
        let mut all = vec![("Content-Type", "application/json")];
        all.extend_from_slice(headers);
        http(self.port, "POST", "/", &all, body.as_bytes())
    }

    pub fn send(&self, text: &str, return_immediately: bool) -> Value {
        self.rpc("SendMessage", message(text, return_immediately))
    }

    /// Starts a task with `returnImmediately` and answers its id.
    pub fn start_task(&self, text: &str) -> String {
        let resp = self.send(text, true);
        resp["result"]["task"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("no task started: {resp}"))
            .to_owned()
    }

    /// Waits until the task reaches a state satisfying `f`; answers the task.
    pub fn wait_task(&self, id: &str, limit: Duration, f: impl Fn(&str) -> bool) -> Value {
        let mut last = Value::Null;
        let ok = wait_until(limit, || {
            last = self.rpc("GetTask", json!({"id": id}))["result"].clone();
            last["status"]["state"].as_str().is_some_and(&f)
        });
        // What still runs below `mur run` tells a harness that hangs from a capsule that does.
        let running: Vec<String> = descendants(self.pid())
            .into_iter()
            .map(|p| format!("{p} {}", cmdline(p)))
            .collect();
        assert!(
            ok,
            "task {id} never reached the awaited state; last seen {last}; running: {running:?}"
        );
        last
    }

    /// Waits (bounded) for `mur run` to exit; answers its status code.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<i32> {
        let deadline = Instant::now() + limit;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn output(&self) -> String {
        self.rest.lock().unwrap().clone()
    }
}

impl Drop for Launch {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            unsafe { libc_kill(self.child.id() as i32, 15) };
            if self.wait_exit(Duration::from_secs(30)).is_none() {
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
    }
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

/// Sends a signal to a process.
pub fn signal(pid: u32, sig: i32) {
    unsafe { libc_kill(pid as i32, sig) };
}

/// A SendMessage params object with one text part.
pub fn message(text: &str, return_immediately: bool) -> Value {
    let mut p = json!({
        "message": {"messageId": format!("msg-{}", COUNTER.fetch_add(1, Ordering::SeqCst)),
                    "role": "ROLE_USER", "parts": [{"text": text}]}
    });
    if return_immediately {
        p["configuration"] = json!({"returnImmediately": true});
    }
    p
}

/// An HTTP response as received.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Every value of a header, by case-insensitive name.
    pub fn header_all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.header_all(name).first().copied()
    }
}

/// One HTTP/1.1 request on a fresh connection (`Connection: close`), headers sent exactly as
/// given (so tests can repeat or omit any), read to the end.
pub fn http(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    http_to(addr, method, path, headers, body)
}

/// [`http`] to any address (a container's, say); `Host` is `localhost:PORT` unless given.
pub fn http_to(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Resp {
    let port = addr.port();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    // A test that names its own Host (an attacker's) sends that one alone.
    let host = match headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        true => String::new(),
        false => format!("Host: localhost:{port}\r\n"),
    };
    let mut req = format!("{method} {path} HTTP/1.1\r\n{host}Connection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || method == "POST" {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    parse_response(&raw)
}

fn parse_response(raw: &[u8]) -> Resp {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("no header end");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    if chunked {
        body = dechunk(&body);
    }
    Resp {
        status,
        headers,
        body,
    }
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = b.windows(2).position(|w| w == b"\r\n") {
        let size =
            usize::from_str_radix(String::from_utf8_lossy(&b[..eol]).trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        let start = eol + 2;
        out.extend_from_slice(&b[start..(start + size).min(b.len())]);
        b = &b[(start + size + 2).min(b.len())..];
    }
    out
}

/// Live descendants of `pid`, from /proc.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut pairs = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Some(pp) = ppid(p) {
            pairs.push((p, pp));
        }
    }
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            pairs
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(c, _)| *c),
        );
        i += 1;
    }
    found.remove(0);
    found
}

/// A keeper kept ready for a capsule's next task (`mur __contain --order-fd`), or its
/// namespace's init, with nothing started under it yet: no task's process.
pub fn ready_keeper(pid: u32) -> bool {
    let waiting = |p: u32| {
        let line = cmdline(p);
        line.contains("__contain") && line.contains("--order-fd")
    };
    waiting(pid) && descendants(pid).into_iter().all(waiting)
}

/// Live descendants of `pid` but a ready keeper and its init ([`ready_keeper`]): what still
/// runs of the tasks.
pub fn descendants_at_work(pid: u32) -> Vec<u32> {
    descendants(pid)
        .into_iter()
        .filter(|p| !ready_keeper(*p))
        .collect()
}

/// The parent of `pid`, from /proc.
pub fn ppid(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The pid a harness wrote with `@pidfile` or `@grandchild`.
pub fn read_pid(path: &Path) -> u32 {
    let text = std::fs::read_to_string(path).unwrap();
    text.trim()
        .parse()
        .unwrap_or_else(|_| panic!("{} holds no pid: {text:?}", path.display()))
}

/// Waits (bounded) for a harness to write `path`, then answers the pid it wrote as this test
/// sees it. A harness in its own PID namespace knows only its pid in there; the host pid is the
/// live process whose innermost `NSpid` is that pid and whose `FIXTURE_STATE` lies in the
/// folder `path` is in (so concurrent tests never take each other's processes).
pub fn wait_pid(path: &Path) -> u32 {
    assert!(
        wait_until(Duration::from_secs(30), || path.exists()),
        "no harness wrote {}",
        path.display()
    );
    let inner = read_pid(path);
    let mut found = None;
    assert!(
        wait_until(Duration::from_secs(10), || {
            found = host_pid(inner, path);
            found.is_some()
        }),
        "no live process of this test has pid {inner} in its namespace ({})",
        path.display()
    );
    found.unwrap_or_default()
}

fn host_pid(inner: u32, written: &Path) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid = e.file_name().to_string_lossy().parse::<u32>().ok()?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let nspid = status.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
        if nspid.split_whitespace().last()?.parse::<u32>().ok()? != inner {
            return None;
        }
        let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
        let state = environ
            .split(|b| *b == 0)
            .find_map(|kv| kv.strip_prefix(b"FIXTURE_STATE="))?;
        let home = Path::new(std::str::from_utf8(state).ok()?).parent()?;
        (written.starts_with(home) && alive(pid)).then_some(pid)
    })
}

/// Every live process a test started, at any depth, however it detached: they all carry the
/// test's own `FIXTURE_STATE` in their environment (`mur` passes its environment on).
pub fn processes_of(home: &Home) -> Vec<u32> {
    let mine = format!(
        "FIXTURE_STATE={}",
        home.root.join("fixture-state").display()
    );
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .map(|env| env.split(|b| *b == 0).any(|kv| kv == mine.as_bytes()))
                .unwrap_or(false)
                && alive(*pid)
        })
        .collect()
}

/// Waits (bounded) until no process the test started is alive, read from /proc; fails naming
/// every one left.
pub fn assert_nothing_left(home: &Home, limit: Duration) {
    let gone = wait_until(limit, || processes_of(home).is_empty());
    let left: Vec<String> = processes_of(home)
        .into_iter()
        .map(|p| {
            let status = std::fs::read_to_string(format!("/proc/{p}/status")).unwrap_or_default();
            let keep = [
                "State:", "PPid:", "Threads:", "SigBlk:", "SigIgn:", "SigCgt:",
            ];
            let status: Vec<&str> = status
                .lines()
                .filter(|l| keep.iter().any(|k| l.starts_with(k)))
                .collect();
            let wchan = std::fs::read_to_string(format!("/proc/{p}/wchan")).unwrap_or_default();
            format!("{p} {} {status:?} wchan {wchan}", cmdline(p))
        })
        .collect();
    assert!(gone, "left running: {left:?}");
}

/// After a launch was killed: the next `mur ps` finds nothing running and prunes `run/` of
/// every record, token and wiring file the launch left.
/// What a launch that ended by its stop leaves in `run/`: the launch kept for `mur run
/// --resume` (docs/store.md), and no token of it — its records, token and wiring files and its
/// kept tokens went with it.
pub fn assert_run_keeps_only_launches(home: &Home) {
    let run = home.home.join("run");
    let left: Vec<_> = std::fs::read_dir(&run)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n != "launches")
        .collect();
    assert!(
        left.is_empty(),
        "records, tokens and wiring are removed: {left:?}"
    );
    let tokens: Vec<_> = std::fs::read_dir(run.join("launches"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x != "json"))
        .collect();
    assert!(
        tokens.is_empty(),
        "no token outlives a stopped launch: {tokens:?}"
    );
}

/// The launch itself stays resumable: `run/launches/` keeps it, and `mur ps` lists it as cut
/// short (docs/store.md).
pub fn assert_ps_prunes_run(home: &Home) {
    let (code, out, _) = home.run(&["ps"]);
    assert_eq!(code, 0);
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("no capsule is running"), "{out}");
    assert_eq!(
        lines.next(),
        Some("cut short, can be resumed (`mur run --resume @N`, or its session):"),
        "{out}"
    );
    assert!(lines.all(|l| l.starts_with('@')), "{out}");
    let left: Vec<_> = std::fs::read_dir(home.home.join("run"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n != "launches")
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// `mur watch SESSION`, running, and the lines it has printed so far (read by a thread).
pub fn watch_lines(home: &Home, session: &str) -> (Child, Arc<Mutex<Vec<String>>>) {
    let mut watch = home
        .mur()
        .args(["watch", session])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = lines.clone();
    let out = watch.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(out)).map_while(Result::ok) {
            sink.lock().unwrap().push(line);
        }
    });
    (watch, lines)
}

/// A process's command line, its arguments joined by spaces.
pub fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .unwrap_or_default()
}

/// True while a process exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rfind(')')
                .map(|i| !s[i + 1..].trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

// ---------------------------------------------------------------------------------------------
// Conformance helpers: launching fixtures, exact error assertions, and proof that a refusal
// started, wrote and reached nothing.

pub const ERROR_INFO: &str = "type.googleapis.com/google.rpc.ErrorInfo";

/// Writes `fixture`'s manifest under `home` (as `file`) and launches it with `args`.
pub fn start_fixture(home: &Home, file: &str, fixture: &Fixture, args: &[&str]) -> Launch {
    let manifest = home.write(file, &fixture.yaml());
    Launch::start(home, &manifest, args)
}

/// A fresh path under the home's root for a harness `@pidfile`; nothing is there yet.
pub fn pidfile(home: &Home) -> PathBuf {
    home.root
        .join(format!("pid-{}", COUNTER.fetch_add(1, Ordering::SeqCst)))
}

/// One JSON-RPC request as a body: `{"jsonrpc":"2.0","id":ID,"method":M,"params":P}`.
pub fn request(id: Value, method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

/// POST / to a port with content-type application/json, `A2A-Version: 1.0` and a JSON-RPC
/// body, from any thread (held requests run beside the test's own calls).
pub fn call_at(port: u16, method: &str, params: Value) -> Resp {
    http(
        port,
        "POST",
        "/",
        &[("Content-Type", "application/json"), ("A2A-Version", "1.0")],
        request(json!(1), method, params).as_bytes(),
    )
}

impl Launch {
    /// A JSON-RPC call with `A2A-Version: 1.0`, answering the whole HTTP response.
    pub fn call(&self, method: &str, params: Value) -> Resp {
        call_at(self.port, method, params)
    }

    /// ListTasks' totalSize over every task of the session.
    pub fn total_tasks(&self) -> u64 {
        let r = self.rpc("ListTasks", json!({}));
        r["result"]["totalSize"]
            .as_u64()
            .unwrap_or_else(|| panic!("ListTasks answered no totalSize: {r}"))
    }

    /// Sends `text` with returnImmediately and waits (bounded) until its task is WORKING.
    pub fn start_working(&self, text: &str) -> String {
        let r = self.send(text, true);
        let id = r["result"]["task"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("no task in {r}"))
            .to_owned();
        self.wait_task(&id, Duration::from_secs(10), |s| s == "TASK_STATE_WORKING");
        self.wait_harness_ready(&id);
        id
    }

    /// Waits until the fixture harness running task `id` has taken SIGINT into its own hands
    /// (the file `announce_ready` in scripts/harness/fixture.py creates). A cancel sent before
    /// then may land in Python's start-up, which drops it, and the harness is killed after the
    /// grace instead of ending on the interrupt.
    pub fn wait_harness_ready(&self, id: &str) {
        let ready = self.fixture_state.join("ready").join(id);
        assert!(
            wait_until(Duration::from_secs(30), || ready.exists()),
            "the fixture harness of task {id} never started"
        );
    }
}

impl Home {
    /// How many lines the session's trace.jsonl holds now.
    pub fn trace_len(&self, session: &str) -> usize {
        std::fs::read_to_string(self.records(session).join("trace.jsonl"))
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }
}

/// What a refusal must leave as it was: how many tasks ListTasks counts and how long the trace
/// is. Take it on a capsule with no live task, so nothing else moves either.
pub struct Probe {
    total: u64,
    trace: usize,
}

impl Probe {
    pub fn take(run: &Launch, home: &Home) -> Probe {
        quiet(run, home);
        Probe {
            total: run.total_tasks(),
            trace: home.trace_len(&run.session),
        }
    }

    /// Asserts no task was started and no trace record written since `take`.
    pub fn unchanged(&self, run: &Launch, home: &Home, row: &str) {
        assert_eq!(run.total_tasks(), self.total, "{row}: a task was started");
        assert_eq!(
            home.trace_len(&run.session),
            self.trace,
            "{row}: a trace record was written"
        );
    }
}

/// A standard JSON-RPC error object: code and message, and no `data`.
pub fn std_error(code: i64, message: &str) -> Value {
    json!({"code": code, "message": message})
}

/// An A2A error object: one ErrorInfo in the a2a-protocol.org domain.
pub fn a2a_error(code: i64, message: &str, reason: &str, metadata: Value) -> Value {
    json!({"code": code, "message": message, "data": [
        {"@type": ERROR_INFO, "reason": reason, "domain": "a2a-protocol.org", "metadata": metadata}
    ]})
}

/// One of murmur's completion errors: one ErrorInfo in the murmur.nexus domain.
pub fn murmur_error(code: i64, message: &str, reason: &str, metadata: Value) -> Value {
    json!({"code": code, "message": message, "data": [
        {"@type": ERROR_INFO, "reason": reason, "domain": "murmur.nexus", "metadata": metadata}
    ]})
}

/// -32602 with its sentence.
pub fn invalid_params(message: &str) -> Value {
    std_error(-32602, message)
}

/// Asserts a JSON-RPC error answer: HTTP 200, application/json, no A2A-Extensions header (a
/// refusal names no extension), `id` echoed, and exactly `error` (so no stray `data`).
pub fn assert_rpc_error(resp: &Resp, id: Value, error: &Value, row: &str) {
    assert_eq!(resp.status, 200, "{row}: status; body {}", resp.text());
    assert_eq!(
        resp.header("content-type"),
        Some("application/json"),
        "{row}: content-type"
    );
    assert!(
        resp.header("a2a-extensions").is_none(),
        "{row}: a refusal names no extension"
    );
    let body = resp.json();
    assert_eq!(
        body,
        json!({"jsonrpc": "2.0", "id": id, "error": error}),
        "{row}: wrong answer"
    );
}

/// Asserts a served JSON-RPC answer (HTTP 200, a `result`) and answers the result.
pub fn assert_result(resp: &Resp, row: &str) -> Value {
    assert_eq!(resp.status, 200, "{row}: status; body {}", resp.text());
    let body = resp.json();
    assert!(body.get("error").is_none(), "{row}: refused: {body}");
    assert_eq!(body["jsonrpc"], "2.0", "{row}: {body}");
    body["result"].clone()
}

/// Asserts `ts` is RFC 3339 UTC with milliseconds and a Z: `2026-10-13T09:00:00.123Z`.
pub fn assert_timestamp(ts: &Value, row: &str) {
    let s = ts
        .as_str()
        .unwrap_or_else(|| panic!("{row}: timestamp {ts} is not a string"));
    let b = s.as_bytes();
    let ok = b.len() == 24
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && b[19] == b'.'
        && b[23] == b'Z'
        && s.chars().filter(char::is_ascii_digit).count() == 17;
    assert!(
        ok,
        "{row}: timestamp {s} is not RFC 3339 UTC with milliseconds"
    );
}

/// A 1×1 PNG, as base64.
pub const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAHnOcQAAAAABJRU5ErkJggg==";

/// Waits (bounded) until the session's trace is still: every task the door took has its
/// `a2a_task_received`, every live task's harness has started, every task waiting for input has
/// its `tool_call`, and every task that started has written its task_end. The trace is written by
/// its own thread, so an answer can return before the records its request queued are in the
/// file; a probe taken before this would race them. Bounded past the harness grace (10 s) and
/// the keeper's 3 s: a harness that missed its interrupt ends only after both.
pub fn quiet(run: &Launch, home: &Home) {
    let mut last = String::new();
    let still = wait_until(Duration::from_secs(30), || {
        let trace = home.trace(&run.session);
        let has = |kind: &str, id: &Value| {
            trace
                .iter()
                .any(|e| e["event_type"] == kind && &e["task_id"] == id)
        };
        let listed = |state: Option<&str>| -> Vec<Value> {
            let mut params = json!({"pageSize": 100});
            if let Some(state) = state {
                params["status"] = json!(state);
            }
            run.rpc("ListTasks", params)["result"]["tasks"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(|t| t["id"].clone())
                .collect()
        };
        let mut live = listed(Some("TASK_STATE_WORKING"));
        let waiting = listed(Some("TASK_STATE_INPUT_REQUIRED"));
        live.extend(waiting.iter().cloned());
        let rejected = listed(Some("TASK_STATE_REJECTED"));
        let taken: Vec<Value> = listed(None)
            .into_iter()
            .filter(|id| !rejected.contains(id))
            .collect();
        let started = trace
            .iter()
            .filter(|e| e["event_type"] == "task_start")
            .map(|e| e["task_id"].clone());
        let ok = taken.iter().all(|id| has("a2a_task_received", id))
            && live.iter().all(|id| has("harness_start", id))
            && waiting.iter().all(|id| has("tool_call", id))
            && started
                .filter(|id| !live.contains(id))
                .all(|id| has("task_end", &id));
        last = format!("live {live:?}, trace {} lines", trace.len());
        ok
    });
    assert!(still, "the trace never went still: {last}");
}

/// The live children of `pid` (one level down), from /proc.
pub fn children(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|p| ppid(*p) == Some(pid))
        .collect()
}

/// A process's resident memory (VmRSS) in kB, from /proc/<pid>/status.
pub fn rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

// ---------------------------------------------------------------------------------------------
// Formations: `mur run` announces one `member NAME: url localhost:PORT session ses_…` line per
// member, then the entry's two lines.

/// One member of a launched formation, as `mur run` announced it.
#[derive(Debug, Clone)]
pub struct Member {
    pub name: String,
    pub port: u16,
    pub session: String,
}

impl Member {
    /// Parses `member NAME: url localhost:PORT session SESSION`.
    fn parse(line: &str) -> Option<Member> {
        let rest = line.strip_prefix("member ")?;
        let (name, rest) = rest.split_once(": url localhost:")?;
        let (port, session) = rest.split_once(" session ")?;
        Some(Member {
            name: name.to_owned(),
            port: port.parse().ok()?,
            session: session.to_owned(),
        })
    }
}

impl Launch {
    /// `mur run --manifest FORMATION ARGS`, waiting (bounded) for every member's line and the
    /// entry's two; answers the launch (its port and session are the entry's) and the members
    /// in the order they were announced.
    pub fn start_formation(home: &Home, manifest: &Path, args: &[&str]) -> (Launch, Vec<Member>) {
        Launch::announced(home, manifest, args, &[])
    }

    /// [`Launch::start_formation`] with extra environment for `mur run` (and its harnesses).
    pub fn start_formation_env(
        home: &Home,
        manifest: &Path,
        args: &[&str],
        env: &[(&str, String)],
    ) -> (Launch, Vec<Member>) {
        Launch::announced(home, manifest, args, env)
    }
}
