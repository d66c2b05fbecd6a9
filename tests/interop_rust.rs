//! Interop: the official A2A Rust CLI (`a2acli`, crate a2a-cli, pinned and built by
//! scripts/setup_test_deps.py) against a real `mur` capsule behind a bearer door, one command at
//! a time as a user types them: send (held, streamed, returning immediately), task get, list,
//! subscribe, cancel, card get --extended, with the token in A2ACLI_BEARER. What each command
//! printed is summarised into the scenario tests/support/clients.rs checks for every client.

#[path = "support/clients.rs"]
mod clients;
mod support;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};
use support::*;

const CLI_VERSION: &str = "0.4.5";
const UNKNOWN: &str = "tsk_0000000000007000800000000000000a";

/// The pinned a2acli, when setup built it.
fn a2acli() -> Option<PathBuf> {
    let bin = clients::dir().join("a2acli/bin/a2acli");
    let out = Command::new(&bin).arg("--version").output().ok()?;
    let version = String::from_utf8_lossy(&out.stdout);
    (out.status.success() && version.split_whitespace().eq(["a2acli", CLI_VERSION])).then_some(bin)
}

/// a2acli pointed at one door, reading no configuration but what a test gives it.
struct Cli<'a> {
    bin: PathBuf,
    home: &'a Home,
    port: u16,
}

impl Cli<'_> {
    /// `a2acli -a localhost:PORT -o json --compact ARGS`, with `token` in A2ACLI_BEARER. The
    /// CLI's own settings (A2ACLI_* and .env files, ~/.config/a2a-cli) are kept out.
    fn command(&self, token: Option<&str>, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.bin);
        for (key, _) in std::env::vars().filter(|(k, _)| k.starts_with("A2ACLI_")) {
            cmd.env_remove(key);
        }
        cmd.env("HOME", &self.home.root)
            .env("XDG_CONFIG_HOME", self.home.root.join("xdg"))
            .current_dir(&self.home.work)
            .args([
                "-a",
                &format!("localhost:{}", self.port),
                "-o",
                "json",
                "--compact",
            ])
            .args(args)
            .stdin(Stdio::null());
        if let Some(token) = token {
            cmd.env("A2ACLI_BEARER", token);
        }
        cmd
    }

    /// Runs a command that must succeed; answers each JSON line it printed.
    fn lines(&self, token: &str, args: &[&str]) -> Vec<Value> {
        let out = self
            .command(Some(token), args)
            .output()
            .expect("run a2acli");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "a2acli {args:?} failed ({}):\n{stderr}\n{stdout}",
            out.status
        );
        stdout
            .lines()
            .map(|l| {
                serde_json::from_str(l)
                    .unwrap_or_else(|e| panic!("a2acli {args:?} printed {l:?}, not JSON ({e})"))
            })
            .collect()
    }

    fn json(&self, token: &str, args: &[&str]) -> Value {
        let mut lines = self.lines(token, args);
        assert_eq!(lines.len(), 1, "a2acli {args:?} printed {lines:?}");
        lines.remove(0)
    }

    /// Runs a command that must fail; answers its exit code and the error object on stderr.
    fn refused(&self, token: Option<&str>, args: &[&str]) -> Value {
        let out = self.command(token, args).output().expect("run a2acli");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let error: Value = serde_json::from_str(stderr.trim()).unwrap_or_else(|e| {
            panic!(
                "a2acli {args:?} ({}) wrote no JSON error ({e}): {stderr}",
                out.status
            )
        });
        json!({"exit": out.status.code(), "error": error["error"]})
    }
}

/// The text parts' texts, `[]` when there are none.
fn texts(parts: &Value) -> Value {
    let all = parts.as_array().map(Vec::as_slice).unwrap_or_default();
    Value::Array(all.iter().filter_map(|p| p.get("text").cloned()).collect())
}

/// A task as ProtoJSON, summarised as every client's driver does.
fn task_summary(task: &Value) -> Value {
    let artifacts: Vec<Value> = task["artifacts"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|a| {
                    json!({"artifactId": a["artifactId"], "name": a["name"],
                           "texts": texts(&a["parts"])})
                })
                .collect()
        })
        .unwrap_or_default();
    json!({"id": task["id"], "contextId": task["contextId"], "state": task["status"]["state"],
           "statusText": texts(&task["status"]["message"]["parts"]), "artifacts": artifacts})
}

/// One StreamResponse line, summarised as every client's driver does.
fn event_summary(event: &Value) -> Value {
    if let Some(task) = event.get("task") {
        json!({"kind": "task", "taskId": task["id"], "state": task["status"]["state"]})
    } else if let Some(u) = event.get("statusUpdate") {
        json!({"kind": "statusUpdate", "taskId": u["taskId"], "state": u["status"]["state"]})
    } else if let Some(u) = event.get("artifactUpdate") {
        json!({"kind": "artifactUpdate", "taskId": u["taskId"],
               "artifactId": u["artifact"]["artifactId"], "texts": texts(&u["artifact"]["parts"])})
    } else {
        json!({"kind": "other", "event": event})
    }
}

/// `task subscribe ID` running beside the test: its lines arrive on a channel as printed.
struct Subscription {
    child: std::process::Child,
    lines: mpsc::Receiver<String>,
}

impl Subscription {
    fn start(cli: &Cli, token: &str, id: &str) -> Subscription {
        let mut child = cli
            .command(Some(token), &["task", "subscribe", id])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start a2acli task subscribe");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Subscription { child, lines }
    }

    /// The next event, within 30 s; None once the stream ended.
    fn next(&self) -> Option<Value> {
        match self.lines.recv_timeout(Duration::from_secs(30)) {
            Ok(line) => Some(
                serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("task subscribe printed {line:?}, not JSON ({e})")),
            ),
            Err(mpsc::RecvTimeoutError::Disconnected) => None,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("task subscribe printed nothing in 30 s")
            }
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_official_rust_cli_authenticates_sends_streams_subscribes_lists_and_cancels() {
    let Some(bin) = a2acli() else {
        clients::usable("a2acli", false);
        return;
    };
    let home = Home::new();
    let (run, token) = clients::start_authenticated(&home);
    let cli = Cli {
        bin,
        home: &home,
        port: run.port,
    };
    let token = token.as_str();
    let mut seen = json!({});

    seen["noToken"] = cli.refused(None, &["task", "get", UNKNOWN]);
    seen["badToken"] = cli.refused(Some("mur_not-minted"), &["task", "get", UNKNOWN]);

    let held = cli.json(
        token,
        &[
            "send",
            "--context-id",
            "ctx-interop",
            "Acknowledge message from orchestrator capsule.",
        ],
    );
    seen["held"] = task_summary(&held["task"]);

    let streamed = cli.lines(
        token,
        &[
            "send",
            "--stream",
            "--context-id",
            "ctx-interop",
            "Stream this task.",
        ],
    );
    seen["streamed"] = streamed.iter().map(event_summary).collect();

    // `--async` alone only stops the CLI polling; `--return-immediately` is what asks the door
    // to answer before the task ends (docs/interop.md).
    let live = cli.json(
        token,
        &[
            "send",
            "--async",
            "--return-immediately",
            "--context-id",
            "ctx-interop",
            "@sleep 30",
        ],
    );
    seen["live"] = task_summary(&live["task"]);
    let id = clients::id_at(&seen, "/live/id", "a2acli").to_owned();
    let mut got = Value::Null;
    wait_until(Duration::from_secs(10), || {
        got = cli.json(token, &["task", "get", &id]);
        got["status"]["state"] == "TASK_STATE_WORKING"
    });
    seen["got"] = task_summary(&got);

    let page = cli.json(token, &["task", "list"]);
    let ids: Vec<Value> = page["tasks"]
        .as_array()
        .map(|ts| ts.iter().map(|t| t["id"].clone()).collect())
        .unwrap_or_default();
    seen["listed"] = json!({"ids": ids, "totalSize": page["totalSize"]});

    let subscription = Subscription::start(&cli, token, &id);
    let mut subscribed = vec![event_summary(&subscription.next().expect("a first event"))];
    seen["canceled"] = task_summary(&cli.json(token, &["task", "cancel", &id]));
    while let Some(event) = subscription.next() {
        subscribed.push(event_summary(&event));
    }
    seen["subscribed"] = json!(subscribed);

    seen["cancelAgain"] = cli.refused(Some(token), &["task", "cancel", &id]);
    seen["subscribeEnded"] = cli.refused(Some(token), &["task", "subscribe", &id]);
    seen["unknown"] = cli.refused(Some(token), &["task", "get", UNKNOWN]);

    // The public card, and the extended one, against the A2A JSON schema a2acli vendors: a card
    // that breaks it is refused (A2ACLI_ERR_CARD_INVALID), every violation listed.
    let public = cli.json(token, &["card", "get", "--validate"]);
    assert_eq!(public["name"], "interop");
    assert_eq!(public["capabilities"]["extendedAgentCard"], true);
    let card = cli.json(token, &["card", "get", "--extended", "--validate"]);
    let extensions = card["capabilities"]["extensions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let security: Vec<&String> = card["securitySchemes"]
        .as_object()
        .map(|s| s.keys().collect())
        .unwrap_or_default();
    seen["extended"] = json!({
        "extensions": extensions.iter().map(|e| e["uri"].clone()).collect::<Vec<_>>(),
        "sessionId": extensions.get(1).map(|e| e["params"]["sessionId"].clone()),
        "extendedAgentCard": card["capabilities"]["extendedAgentCard"],
        "securitySchemes": security,
    });

    clients::assert_scenario("a2acli", &seen, &run, &home, token);

    // a2acli parses every answer as a JSON-RPC envelope whatever its HTTP status, so the door's
    // 401 body (agent-card.md, Security: not an envelope) reaches it as a parse failure that
    // quotes the body's error code (docs/interop.md).
    let unparsed = |code: &str, column: usize| {
        json!({"exit": 1, "error": {"code": "INTERNAL_ERROR", "a2aCode": -32603, "message": format!(
            "failed to parse JSON-RPC response: invalid type: string \"{code}\", expected struct JsonRpcError at line 1 column {column}")}})
    };
    assert_eq!(seen["noToken"], unparsed("unauthenticated", 26));
    assert_eq!(seen["badToken"], unparsed("invalid_token", 24));

    let refusal = |code: &str, a2a: i64, message: &str| json!({"exit": 1, "error": {"code": code, "message": message, "a2aCode": a2a}});
    assert_eq!(
        seen["cancelAgain"],
        refusal(
            "TASK_NOT_CANCELABLE",
            -32002,
            "Task cannot be canceled: it is already TASK_STATE_CANCELED"
        )
    );
    assert_eq!(
        seen["subscribeEnded"],
        refusal(
            "UNSUPPORTED_OPERATION",
            -32004,
            &format!(
                "task {id} has ended (TASK_STATE_CANCELED); there is nothing left to subscribe to"
            )
        )
    );
    assert_eq!(
        seen["unknown"],
        refusal("TASK_NOT_FOUND", -32001, "Task not found")
    );
}
