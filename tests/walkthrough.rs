//! The messaging guide's walkthrough (spec: a2a-messaging-guide.md) with the shipped manifests
//! `manifests/guide/`: a worker pinned to a port, an orchestrator whose allow list names it and
//! nothing else; send, poll, cancel, StopSession, and both traces telling their side. The
//! manifests are copied as shipped, with only the port (52222, which a parallel test run cannot
//! share) and the harness folder rewritten.

mod support;

use std::net::TcpListener;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};
use support::*;

const LONG: Duration = Duration::from_secs(30);

/// A port nothing listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A shipped guide manifest, pinned to `port` instead of 52222, its harness found from anywhere.
fn shipped(home: &Home, name: &str, port: u16) -> PathBuf {
    let text = std::fs::read_to_string(repo_root().join("manifests/guide").join(name)).unwrap();
    let scripts = repo_root().join("scripts/harness/");
    let text = text
        .replace("52222", &port.to_string())
        .replace("../../scripts/harness/", scripts.to_str().unwrap());
    home.write(&format!("guide/{name}"), &text)
}

/// `mur run` of the orchestrator with `task`, sending to `worker` (its harness's WORKER_URL).
fn orchestrate(home: &Home, manifest: &PathBuf, worker: u16, task: &str) -> (i32, String, String) {
    let out = home
        .mur()
        .env("WORKER_URL", format!("http://localhost:{worker}"))
        .args(["run", "--manifest"])
        .arg(manifest)
        .args(["--task", task])
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn answer_of(stdout: &str) -> Value {
    serde_json::from_str(stdout.lines().nth(2).unwrap_or("")).unwrap_or_default()
}

#[test]
fn the_guides_walkthrough_runs_with_the_shipped_manifests() {
    let home = Home::new();
    let port = free_port();
    // Steps 1–3: the worker, pinned.
    let worker = Launch::start(&home, &shipped(&home, "worker.yaml", port), &[]);
    assert_eq!(worker.port, port, "the URL is the pinned port");
    let orchestrator = shipped(&home, "orchestrator.yaml", port);

    // Step 5, from the orchestrator: its runtime sends, allowed by its allow list.
    let text = "Acknowledge message from orchestrator capsule.";
    let (code, out, err) = orchestrate(&home, &orchestrator, port, text);
    assert_eq!(code, 0, "{err}");
    let task = answer_of(&out);
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{out}");
    let id = task["id"].as_str().unwrap().to_owned();
    let answer = task["artifacts"][0]["parts"][0]["text"].as_str().unwrap();
    assert!(
        answer.starts_with(&format!("Acknowledged: {text}\n")),
        "{answer}"
    );

    // Step 6: poll. The worker remembers the finished task.
    let polled = worker.rpc("GetTask", json!({"id": id}));
    assert_eq!(polled["result"]["status"]["state"], "TASK_STATE_COMPLETED");

    // A task that takes a while, sent as the guide's curl does; then canceled.
    let long = worker.send("wait 30\nsomething slow", true)["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    worker.wait_task(&long, LONG, |s| s == "TASK_STATE_WORKING");
    let canceled = worker.rpc("CancelTask", json!({"id": long}));
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED");

    // Ending the session: nothing left to cancel, nothing left running.
    quiet(&worker, &home);
    let stopped = worker.rpc("murmur.StopSession", json!({}));
    assert_eq!(
        stopped["result"],
        json!({"session_id": worker.session, "canceled": [], "residue": []})
    );

    // Both traces: a2a_send on the orchestrator, a2a_task_received (from a peer) on the worker.
    let orchestrator_session = out
        .lines()
        .nth(1)
        .unwrap()
        .strip_prefix("session: ")
        .unwrap();
    let sent: Vec<Value> = home
        .trace(orchestrator_session)
        .into_iter()
        .filter(|e| e["event_type"] == "a2a_send")
        .collect();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["peer_url"], format!("localhost:{port}"));
    assert_eq!(sent[0]["task_id"], id.as_str());
    let received = home
        .trace(&worker.session)
        .into_iter()
        .find(|e| e["event_type"] == "a2a_task_received" && e["task_id"] == id.as_str())
        .expect("the worker traced the task it received");
    assert_eq!(received["origin"], "peer");
}

#[test]
fn a_worker_off_the_orchestrators_allow_list_is_never_connected_to() {
    let home = Home::new();
    let allowed = free_port();
    let orchestrator = shipped(&home, "orchestrator.yaml", allowed);
    // Something listens where the orchestrator is sent, and counts who connects.
    let elsewhere = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = elsewhere.local_addr().unwrap().port();
    elsewhere.set_nonblocking(true).unwrap();
    let (code, out, err) = orchestrate(&home, &orchestrator, port, "hello");
    assert_eq!(code, 1, "the task failed: {out}");
    assert!(
        err.starts_with("task failed: the harness exited with status 1"),
        "{err}"
    );
    assert!(
        elsewhere.accept().is_err(),
        "no TCP connection reached the listener"
    );
    let session = out
        .lines()
        .nth(1)
        .unwrap()
        .strip_prefix("session: ")
        .unwrap();
    let refused = home
        .trace(session)
        .into_iter()
        .find(|e| e["event_type"] == "network_refused")
        .expect("the refusal is traced");
    assert_eq!(refused["destination"], format!("http://localhost:{port}"));
    assert!(refused["reason"].as_str().unwrap().starts_with(&format!(
        "localhost:{port} is not in capabilities.network.allow"
    )));
}
