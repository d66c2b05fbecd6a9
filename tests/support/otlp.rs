//! An OTLP/HTTP traces collector for the tests that export `mur`'s spans: tests/otel/receiver.py
//! (it decodes every export with the official `opentelemetry-proto` bindings, pinned in
//! scripts/setup_test_deps.py), started on a port of its own, its spans read back as [`Span`]s.
//! Point `mur` at it with `OTEL_EXPORTER_OTLP_ENDPOINT=<Receiver::endpoint>`.
//!
//! Without the bindings a test fails under `CI=true` and skips loudly otherwise: call
//! [`usable`] first (as the interop tests do); [`Receiver::start`] panics with setup's reason.
//! Include with `#[path = "support/clients.rs"] mod clients;` and
//! `#[path = "support/otlp.rs"] mod otlp;` after `mod support;`.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::clients;
use crate::support::repo_root;

/// The name setup records a failed install under (target/interop-clients/<CLIENT>.unavailable).
pub const CLIENT: &str = "opentelemetry-proto";
pub const VERSION: &str = "1.45.2";
/// How long the receiver may take to print `listening PORT`.
const STARTS_WITHIN: Duration = Duration::from_secs(30);

/// The interpreter the bindings are installed for: `MURMUR_TEST_PYTHON`, or python3 (as
/// tests/interop.rs).
fn python() -> String {
    std::env::var("MURMUR_TEST_PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

/// The interpreter's own path when the pinned bindings import under it (so the receiver is
/// started as Python itself, not through a version manager's shim), or why not. Probed once
/// per test binary.
fn interpreter() -> &'static Result<PathBuf, String> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    FOUND.get_or_init(|| {
        let probe = Command::new(python())
            .args([
                "-c",
                "import sys, importlib.metadata as m; \
                 from opentelemetry.proto.collector.trace.v1 import trace_service_pb2; \
                 print(sys.executable); print(m.version('opentelemetry-proto'))",
            ])
            .output()
            .map_err(|e| format!("{} cannot be run: {e}", python()))?;
        let out = String::from_utf8_lossy(&probe.stdout);
        let mut lines = out.lines();
        match (probe.status.success(), lines.next(), lines.next()) {
            (true, Some(exe), Some(VERSION)) => Ok(PathBuf::from(exe)),
            _ => Err(format!(
                "{CLIENT} {VERSION} is not importable by {}: {}{}",
                python(),
                out.trim(),
                // A failed import's last line names what is missing.
                String::from_utf8_lossy(&probe.stderr)
                    .lines()
                    .last()
                    .unwrap_or_default()
            )),
        }
    })
}

/// Whether the receiver can run; when not, panics under CI=true and otherwise says loudly why
/// the test is skipped and answers false (tests/support/clients.rs).
pub fn usable() -> bool {
    if let Err(why) = interpreter() {
        eprintln!("{why}: `python3 scripts/setup_test_deps.py` installs it");
    }
    clients::usable(CLIENT, interpreter().is_ok())
}

/// One span as the receiver wrote it (one JSON line of its --out file).
#[derive(Debug, Clone, Deserialize)]
pub struct Span {
    /// 32 hex digits.
    pub trace_id: String,
    /// 16 hex digits.
    pub span_id: String,
    /// 16 hex digits, or "" for a root span.
    pub parent_span_id: String,
    pub name: String,
    /// The SpanKind's name: `SPAN_KIND_SERVER`, `SPAN_KIND_CLIENT`, `SPAN_KIND_INTERNAL`, ...
    pub kind: String,
    pub start_ns: u64,
    pub end_ns: u64,
    pub status: SpanStatus,
    /// Plain values: string, integer, float, bool, list (bytes as hex, a key-value list as an
    /// object).
    pub attributes: Map<String, Value>,
    pub events: Vec<SpanEvent>,
    /// The resource's attributes, as `attributes`.
    pub resource: Map<String, Value>,
    /// The instrumentation scope's name.
    pub scope: String,
    /// The headers of the POST that carried the span, names lower-cased (repeated ones joined
    /// with ", ").
    pub headers: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct SpanStatus {
    /// The StatusCode's name: `STATUS_CODE_UNSET`, `STATUS_CODE_OK` or `STATUS_CODE_ERROR`.
    pub code: String,
    pub message: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct SpanEvent {
    pub name: String,
    pub time_ns: u64,
    pub attributes: Map<String, Value>,
}

impl Span {
    pub fn attr(&self, key: &str) -> Option<&Value> {
        self.attributes.get(key)
    }

    pub fn attr_str(&self, key: &str) -> Option<&str> {
        self.attr(key).and_then(Value::as_str)
    }

    /// A request header of the export that carried the span (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    pub fn is_root(&self) -> bool {
        self.parent_span_id.is_empty()
    }
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A running receiver; killed, waited for and its folder removed on drop.
pub struct Receiver {
    child: Mutex<Child>,
    dir: PathBuf,
    out: PathBuf,
    port: u16,
}

impl Receiver {
    /// A receiver answering every export `status` (200: parsed and recorded; 500: refused,
    /// only counted).
    pub fn start(status: u16) -> Receiver {
        Receiver::start_with(status, Duration::ZERO)
    }

    /// [`Receiver::start`] with every answer held `delay` first (a slow collector).
    pub fn start_with(status: u16, delay: Duration) -> Receiver {
        let python = match interpreter() {
            Ok(python) => python,
            Err(why) => {
                let recorded =
                    std::fs::read_to_string(clients::dir().join(format!("{CLIENT}.unavailable")))
                        .map(|w| format!("; setup recorded: {}", w.trim()))
                        .unwrap_or_default();
                panic!(
                    "the OTLP receiver cannot run: {why}{recorded}\n\
                     (run `python3 scripts/setup_test_deps.py`; call otlp::usable() first to skip)"
                );
            }
        };
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("murmur-otlp-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("spans.jsonl");
        let stderr = std::fs::File::create(dir.join("stderr")).unwrap();
        let mut child = Command::new(python)
            .arg(repo_root().join("tests/otel/receiver.py"))
            .arg("--out")
            .arg(&out)
            .args(["--status", &status.to_string()])
            .args(["--delay-secs", &delay.as_secs_f64().to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("start tests/otel/receiver.py: {e}"));
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = tx.send(lines.next());
            for _ in lines {}
        });
        let first = rx.recv_timeout(STARTS_WITHIN);
        let port = match &first {
            Ok(Some(Ok(line))) => line
                .strip_prefix("listening ")
                .and_then(|p| p.trim().parse::<u16>().ok()),
            _ => None,
        };
        let receiver = Receiver {
            child: Mutex::new(child),
            dir,
            out,
            port: port.unwrap_or(0),
        };
        if port.is_none() {
            let err = std::fs::read_to_string(receiver.dir.join("stderr")).unwrap_or_default();
            panic!(
                "the OTLP receiver did not print `listening PORT` within {STARTS_WITHIN:?} \
                 (first line {first:?}); its stderr:\n{err}"
            );
        }
        receiver
    }

    /// `http://127.0.0.1:PORT`, the value for OTEL_EXPORTER_OTLP_ENDPOINT.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The receiver process's id.
    pub fn pid(&self) -> u32 {
        self.child.lock().unwrap().id()
    }

    /// Every span received so far, in the order received.
    pub fn spans(&self) -> Vec<Span> {
        let text = std::fs::read_to_string(&self.out).unwrap_or_default();
        // Only whole lines: the receiver may be writing the next one.
        let whole = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
        whole
            .lines()
            .map(|l| {
                serde_json::from_str(l).unwrap_or_else(|e| {
                    panic!("the receiver wrote a line that is no span ({e}): {l}")
                })
            })
            .collect()
    }

    /// Polls [`Receiver::spans`] every 50 ms until `done` holds, and answers them; past
    /// `timeout` (or when the receiver has died) panics naming `what` and every span seen.
    pub fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        done: impl Fn(&[Span]) -> bool,
    ) -> Vec<Span> {
        let deadline = Instant::now() + timeout;
        loop {
            let spans = self.spans();
            if done(&spans) {
                return spans;
            }
            let ended = self.child.lock().unwrap().try_wait().ok().flatten();
            if ended.is_some() || Instant::now() > deadline {
                let err = std::fs::read_to_string(self.dir.join("stderr")).unwrap_or_default();
                let why = match ended {
                    Some(status) => format!("the receiver ended ({status})"),
                    None => format!("not within {timeout:?}"),
                };
                panic!(
                    "waited for {what}: {why}; {} request(s), {} span(s): {spans:#?}\n\
                     receiver stderr:\n{err}",
                    self.requests(),
                    spans.len()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// How many POSTs the receiver has taken (refused ones too), counted as each arrives.
    pub fn requests(&self) -> u64 {
        let path = format!("{}.requests", self.out.display());
        std::fs::read_to_string(path)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let child = self.child.get_mut().unwrap_or_else(|e| e.into_inner());
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
