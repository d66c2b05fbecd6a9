//! The outbound side over real sockets: scripted doors (hyper servers on 127.0.0.1) answer as a
//! member would, and real capsule doors serve both ends of a call through the control surface.
//! Every member_call status, noAnswerBelow, the cancel cascade, the runtime headers and the
//! allow list's "nothing was sent" are read from what the doors saw and the trace recorded.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{HeaderMap, Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::member::{self, Called};
use super::send::{self, NotDelivered, Outbound};
use crate::auth::{digest_hex, TokenDigest, TokenTable};
use crate::door::Door;
use crate::errands::Ticket;
use crate::ids::{SessionId, TaskId};
use crate::policy;
use crate::provenance::Trust;
use crate::session::Session;
use crate::stream::EventLog;
use crate::tasks::{Admission, Outcome, Owner, Registry, TaskInput, Viewer};
use crate::trace::tests::Shared;
use crate::trace::{CallStatus, Trace};
use crate::wiring::{Callee, Wiring, MEMBER_SCOPES};

const TOKEN: &str = "mur_member_token_of_lead";

/// What a scripted door saw of one request.
#[derive(Clone, Debug)]
struct Seen {
    method: String,
    params: Value,
    headers: HeaderMap,
}

/// `(method, params, how many calls of that method came before) -> (HTTP status, body)`.
type Script = Arc<dyn Fn(&str, &Value, usize) -> (u16, Value) + Send + Sync>;

struct ScriptedDoor {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    accepting: tokio::task::JoinHandle<()>,
}

impl ScriptedDoor {
    fn url(&self) -> String {
        format!("http://localhost:{}", self.port)
    }

    fn methods(&self) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|s| s.method.clone())
            .collect()
    }

    fn count(&self, method: &str) -> usize {
        self.methods().iter().filter(|m| *m == method).count()
    }

    /// The door goes away: its listener closes, and connections to it are refused.
    fn stop(&self) {
        self.accepting.abort();
    }

    /// Waits (bounded) until the door has seen a `method`.
    async fn saw(&self, method: &str) {
        for _ in 0..500 {
            if self.count(method) > 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the door never saw {method}: {:?}", self.methods());
    }
}

async fn scripted(script: Script) -> ScriptedDoor {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let log = seen.clone();
    let accepting = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (script, log) = (script.clone(), log.clone());
            let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                let (script, log) = (script.clone(), log.clone());
                async move {
                    let headers = req.headers().clone();
                    let body = req.into_body().collect().await.unwrap().to_bytes();
                    let rpc: Value = serde_json::from_slice(&body).unwrap_or_default();
                    let method = rpc["method"].as_str().unwrap_or_default().to_owned();
                    let params = rpc["params"].clone();
                    let before = {
                        let mut log = log.lock().unwrap();
                        let n = log.iter().filter(|s| s.method == method).count();
                        log.push(Seen {
                            method: method.clone(),
                            params: params.clone(),
                            headers,
                        });
                        n
                    };
                    let (status, answer) = script(&method, &params, before);
                    let body = match status {
                        200 => json!({"jsonrpc": "2.0", "id": rpc["id"], "result": answer}),
                        _ => answer,
                    };
                    let mut resp = Response::new(Full::new(Bytes::from(body.to_string())));
                    *resp.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
                    Ok::<_, Infallible>(resp)
                }
            });
            tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), service));
        }
    });
    ScriptedDoor {
        port,
        seen,
        accepting,
    }
}

fn task(state: &str) -> Value {
    json!({"id": "tsk_member", "contextId": "ctx_member",
           "status": {"state": state, "timestamp": "2026-10-13T09:00:00.123Z"}})
}

fn with(mut t: Value, extra: Value) -> Value {
    if let (Value::Object(t), Value::Object(extra)) = (&mut t, extra) {
        t.extend(extra);
    }
    t
}

fn said(t: Value, text: &str) -> Value {
    let mut t = t;
    t["status"]["message"] = json!({"role": "ROLE_AGENT", "parts": [{"text": text}]});
    t
}

/// A member whose task is SUBMITTED on SendMessage, then reads `states` on successive GetTasks
/// (the last one repeating); CancelTask answers it CANCELED.
fn member_going(states: Vec<Value>) -> Script {
    Arc::new(move |method, _, n| match method {
        "SendMessage" => (200, json!({"task": task("TASK_STATE_SUBMITTED")})),
        "GetTask" => (200, states[n.min(states.len() - 1)].clone()),
        "CancelTask" => (200, task("TASK_STATE_CANCELED")),
        _ => (200, json!({})),
    })
}

const MANIFEST: &str = "\
name: NAME
version: \"0.1.0\"
artifacts:
  - name: murmur/driver-anthropic
    runtime: driver
    gateway: { endpoint: https://api.anthropic.com, api_key: sk-test }
inference:
  model: claude-sonnet-5
lifecycle: { task_acceptance: queue, queue_depth: 4 }
EXTRA";

fn session_of(name: &str, extra: &str, wiring: Option<Wiring>, sink: &Shared) -> Arc<Session> {
    let text = MANIFEST.replace("NAME", name).replace("EXTRA", extra);
    let manifest =
        crate::manifest::load_str(&text, Path::new("peers/murmur.yaml"), &|_| None).unwrap();
    let id = SessionId::mint();
    let trace = Trace::to_sink(sink.clone(), id.clone(), 256).unwrap();
    // As the runtime wires it: every task change becomes a stream event.
    let events = Arc::new(EventLog::default());
    let recorder = events.clone();
    let registry = Registry::new(5).observed(Arc::new(move |t| recorder.record(t)));
    Arc::new(
        Session::new(
            id,
            manifest,
            registry,
            events,
            trace,
            "http://localhost:1".into(),
            PathBuf::from("/tmp"),
            PathBuf::from("/tmp"),
            PathBuf::from("/bin/true"),
        )
        .wired(wiring),
    )
}

fn wiring_to(members: &[(&str, String)]) -> Wiring {
    let callees: BTreeMap<String, Callee> = members
        .iter()
        .map(|(name, url)| {
            let callee = Callee {
                url: url.clone(),
                token: TOKEN.into(),
            };
            (name.to_string(), callee)
        })
        .collect();
    Wiring {
        formation: "review".into(),
        member: "lead".into(),
        callees,
    }
}

/// A caller (member `lead`) wired to `coder` at `url`, with one running task whose errands
/// are open; answers the session, the task and its cancel switch.
async fn caller_to(url: String, sink: &Shared) -> (Arc<Session>, TaskId, watch::Sender<bool>) {
    let session = session_of("lead", "", Some(wiring_to(&[("coder", url)])), sink);
    let (task, cancel) = running_task(&session);
    (session, task, cancel)
}

/// Admits a task, starts it, and opens its errands (as the agent loop does).
fn running_task(session: &Session) -> (TaskId, watch::Sender<bool>) {
    let input = TaskInput {
        text: "lead the work".into(),
        message_id: "m1".into(),
        trust: Trust::Trusted,
        ..TaskInput::default()
    };
    let Admission::Accepted(id, _) = session.registry.admit(None, Owner::Session, input) else {
        panic!("rejected");
    };
    let started = start_next(session);
    assert_eq!(started, id);
    // The errands watch a cancel switch of the test's own; the registry's is not needed here.
    let (cancel, canceled) = watch::channel(false);
    let span = crate::telemetry::Span::start("t", crate::telemetry::Kind::Internal, None);
    let _ = session
        .errands
        .open(&id, Trust::Trusted, canceled, span.context().clone());
    (id, cancel)
}

fn start_next(session: &Session) -> TaskId {
    // `next` resolves at once: the task was just queued and nothing runs.
    let next = session.registry.next();
    futures_now(next).map(|s| s.id).expect("the task starts")
}

/// Polls a future that is ready at once.
fn futures_now<F: std::future::Future>(f: F) -> F::Output {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => panic!("the future was not ready"),
    }
}

fn ticket(session: &Session, task: &TaskId) -> Ticket {
    session
        .errands
        .begin(task)
        .expect("the task's errands are open")
}

async fn call_coder(session: &Arc<Session>, task: &TaskId, within: Duration) -> Called {
    let callee = session.wiring.as_ref().unwrap().callees["coder"].clone();
    let t = ticket(session, task);
    member::call(session, task, "coder", &callee, "write it", within, t).await
}

/// The records of one kind, once everything queued is on file.
async fn records(session: &Session, sink: &Shared, kind: &str) -> Vec<Value> {
    session.trace.flush().await;
    sink.records()
        .into_iter()
        .filter(|r| r["event_type"] == kind)
        .collect()
}

const MINUTE: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_completed_call_answers_and_carries_the_runtime_headers() {
    let response = json!({"artifacts": [{"artifactId": "response", "name": "response",
        "parts": [{"text": "done: four", "mediaType": "text/plain"}]}]});
    let door = scripted(member_going(vec![
        task("TASK_STATE_WORKING"),
        with(task("TASK_STATE_COMPLETED"), response),
    ]))
    .await;
    let sink = Shared::default();
    let (session, task_id, _cancel) = caller_to(door.url(), &sink).await;
    let called = call_coder(&session, &task_id, MINUTE).await;
    assert_eq!(called.status, CallStatus::Completed);
    assert_eq!(called.answer.as_deref(), Some("done: four"));
    // This door answers SubscribeToTask with no stream, so the wait falls back to polling.
    assert_eq!(
        door.methods(),
        ["SendMessage", "SubscribeToTask", "GetTask", "GetTask"]
    );
    for seen in door.seen.lock().unwrap().iter() {
        let h = |k: &str| {
            seen.headers
                .get(k)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        assert_eq!(h("a2a-version").as_deref(), Some("1.0"));
        assert_eq!(h("content-type").as_deref(), Some("application/json"));
        assert_eq!(h("x-murmur-task-origin").as_deref(), Some("peer"));
        assert_eq!(h("x-murmur-task-trust").as_deref(), Some("trusted"));
        assert_eq!(h("authorization"), Some(format!("Bearer {TOKEN}")));
    }
    let sent = door.seen.lock().unwrap()[0].params.clone();
    assert_eq!(sent["configuration"]["returnImmediately"], true);
    assert_eq!(sent["message"]["role"], "ROLE_USER");
    assert_eq!(sent["message"]["parts"], json!([{"text": "write it"}]));
    let message_id = sent["message"]["messageId"].as_str().unwrap().to_owned();
    assert!(
        crate::ids::is_well_formed(&message_id, "msg_"),
        "{message_id}"
    );

    let a2a = records(&session, &sink, "a2a_send").await;
    assert_eq!(a2a.len(), 1);
    assert_eq!(a2a[0]["peer_url"], format!("localhost:{}", door.port));
    assert_eq!(a2a[0]["message_id"], message_id.as_str());
    assert_eq!(a2a[0]["task_id"], "tsk_member");
    assert_eq!(a2a[0]["context_id"], "ctx_member");
    assert_eq!(a2a[0]["caller_task_id"], task_id.as_str());
    let calls = records(&session, &sink, "member_call").await;
    assert_eq!(calls.len(), 1);
    let c = &calls[0];
    assert_eq!(
        (&c["member"], &c["status"], &c["task_id"], &c["reason"]),
        (
            &json!("coder"),
            &json!("completed"),
            &json!("tsk_member"),
            &Value::Null
        )
    );
    assert_eq!(c["caller_task_id"], task_id.as_str());
    assert!(c["duration_ms"].is_u64());
    let text = serde_json::to_string(&sink.records()).unwrap();
    assert!(!text.contains(TOKEN), "a token reached the trace");
    let closed = session.errands.close(&task_id).await;
    assert!(
        closed.no_answer_below.is_empty(),
        "a completed call is not missing"
    );
}

/// One call against a member scripted to end its task as `last`; answers the call's status.
async fn status_when_member_ends(last: Value) -> (CallStatus, Called, Vec<Value>) {
    let door = scripted(member_going(vec![last])).await;
    let sink = Shared::default();
    let (session, task_id, _cancel) = caller_to(door.url(), &sink).await;
    let called = call_coder(&session, &task_id, MINUTE).await;
    let closed = session.errands.close(&task_id).await;
    (called.status, called, closed.no_answer_below)
}

#[tokio::test]
async fn a_member_task_that_ends_without_an_answer_gives_its_status() {
    let (status, called, below) = status_when_member_ends(said(
        task("TASK_STATE_FAILED"),
        "the harness exited with status 3",
    ))
    .await;
    assert_eq!(status, CallStatus::Failed);
    assert_eq!(
        called.reason.as_deref(),
        Some("its task tsk_member failed: the harness exited with status 3")
    );
    assert_eq!(below, vec![json!({"member": "coder", "status": "failed"})]);

    let (status, _, _) = status_when_member_ends(task("TASK_STATE_CANCELED")).await;
    assert_eq!(status, CallStatus::Canceled);
    let (status, _, _) = status_when_member_ends(said(
        task("TASK_STATE_REJECTED"),
        "task rejected: capsule is busy",
    ))
    .await;
    assert_eq!(status, CallStatus::Rejected);
    let (status, _, _) = status_when_member_ends(task("TASK_STATE_COMPLETED")).await;
    assert_eq!(status, CallStatus::NoAnswer, "completed with no response");
}

#[tokio::test]
async fn no_answer_below_names_the_member_then_what_it_reported() {
    let ended = with(
        said(task("TASK_STATE_FAILED"), "q gave no answer"),
        json!({"metadata": {"murmur": {"noAnswer": true,
            "noAnswerBelow": [{"member": "q", "status": "timed_out"},
                              {"member": "coder", "status": "failed"}]}}}),
    );
    let (status, called, below) = status_when_member_ends(ended).await;
    assert_eq!(status, CallStatus::NoAnswer);
    assert_eq!(
        called.reason.as_deref(),
        Some("its task tsk_member ended without an answer: q gave no answer")
    );
    assert_eq!(
        below,
        vec![
            json!({"member": "coder", "status": "no_answer"}),
            json!({"member": "q", "status": "timed_out"}),
        ],
        "each member once"
    );
}

#[tokio::test]
async fn a_member_asking_for_input_is_canceled_and_gave_no_answer() {
    let asks = with(
        task("TASK_STATE_INPUT_REQUIRED"),
        json!({"artifacts": [{"artifactId": "prompt", "name": "prompt",
            "parts": [{"text": "Which branch?"}]}]}),
    );
    let door = scripted(member_going(vec![asks])).await;
    let sink = Shared::default();
    let (session, task_id, _cancel) = caller_to(door.url(), &sink).await;
    let called = call_coder(&session, &task_id, MINUTE).await;
    assert_eq!(called.status, CallStatus::NoAnswer);
    assert!(called.reason.unwrap_or_default().contains("Which branch?"));
    assert_eq!(door.count("CancelTask"), 1, "it would have waited for ever");
}

#[tokio::test]
async fn a_refusal_at_the_door_is_rejected_and_sends_nothing_more() {
    let door = scripted(Arc::new(|_, _, _| {
        (
            403,
            json!({"error": "peer_not_accepted", "message": "this capsule does not accept peer tasks"}),
        )
    }))
    .await;
    let sink = Shared::default();
    let (session, task_id, _cancel) = caller_to(door.url(), &sink).await;
    let called = call_coder(&session, &task_id, MINUTE).await;
    assert_eq!(called.status, CallStatus::Rejected);
    assert_eq!(
        called.reason.as_deref(),
        Some("its door refused the message: HTTP 403 peer_not_accepted: this capsule does not accept peer tasks")
    );
    assert_eq!(door.methods(), ["SendMessage"]);
    let a2a = records(&session, &sink, "a2a_send").await;
    assert_eq!(a2a[0]["task_id"], Value::Null, "the peer took no task");
}

#[tokio::test]
async fn a_member_that_takes_too_long_is_timed_out_and_its_task_canceled() {
    let door = scripted(member_going(vec![task("TASK_STATE_WORKING")])).await;
    let sink = Shared::default();
    let (session, task_id, _cancel) = caller_to(door.url(), &sink).await;
    let called = call_coder(&session, &task_id, Duration::from_millis(300)).await;
    assert_eq!(called.status, CallStatus::TimedOut);
    assert_eq!(door.count("CancelTask"), 1);
    let canceled = door
        .seen
        .lock()
        .unwrap()
        .iter()
        .find(|s| s.method == "CancelTask")
        .cloned();
    assert_eq!(
        canceled.map(|s| s.params),
        Some(json!({"id": "tsk_member"}))
    );
    let calls = records(&session, &sink, "member_call").await;
    assert_eq!(calls[0]["status"], "timed_out");
}

#[tokio::test]
async fn a_member_nobody_listens_for_is_unreachable() {
    // A port that was just free: nothing listens on it.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let sink = Shared::default();
    let (session, task_id, _cancel) = caller_to(format!("http://localhost:{port}"), &sink).await;
    let called = call_coder(&session, &task_id, MINUTE).await;
    assert_eq!(called.status, CallStatus::Unreachable);
    assert!(called
        .reason
        .unwrap_or_default()
        .starts_with("cannot reach its door: "));
    assert!(
        records(&session, &sink, "a2a_send").await.is_empty(),
        "nothing reached a peer"
    );
    let calls = records(&session, &sink, "member_call").await;
    assert_eq!(calls[0]["status"], "unreachable");
    assert_eq!(calls[0]["task_id"], Value::Null);
}

#[tokio::test]
async fn a_member_that_goes_away_mid_task_is_unreachable() {
    let door = scripted(member_going(vec![task("TASK_STATE_WORKING")])).await;
    let sink = Shared::default();
    let (session, task_id, _cancel) = caller_to(door.url(), &sink).await;
    let calling = {
        let (session, task_id) = (session.clone(), task_id.clone());
        tokio::spawn(async move { call_coder(&session, &task_id, MINUTE).await })
    };
    door.saw("GetTask").await;
    door.stop();
    let called = calling.await.unwrap();
    assert_eq!(called.status, CallStatus::Unreachable, "{called:?}");
    assert!(called
        .reason
        .unwrap_or_default()
        .starts_with("its door could not say how its task tsk_member stands: "),);
}

#[tokio::test]
async fn a_member_door_that_refuses_to_say_how_its_task_stands_is_unreachable() {
    let door = scripted(Arc::new(|method, _, _| match method {
        "SendMessage" => (200, json!({"task": task("TASK_STATE_SUBMITTED")})),
        _ => (503, json!({"error": "unavailable", "message": "try later"})),
    }))
    .await;
    let sink = Shared::default();
    let (session, task_id, _cancel) = caller_to(door.url(), &sink).await;
    let called = call_coder(&session, &task_id, MINUTE).await;
    assert_eq!(called.status, CallStatus::Unreachable, "{called:?}");
}

#[tokio::test]
async fn canceling_the_calling_task_cancels_the_member_call_before_the_errands_close() {
    let door = scripted(member_going(vec![task("TASK_STATE_WORKING")])).await;
    let sink = Shared::default();
    let (session, task_id, cancel) = caller_to(door.url(), &sink).await;
    let calling = {
        let (session, task_id) = (session.clone(), task_id.clone());
        tokio::spawn(async move { call_coder(&session, &task_id, MINUTE).await })
    };
    // Wait until the member has the task and is being followed.
    door.saw("GetTask").await;
    let _ = cancel.send(true);
    let closed = session.errands.close(&task_id).await;
    // By the time the errands are closed (and so before the agent writes task_end) the member's
    // task was canceled and the call recorded.
    assert_eq!(door.count("CancelTask"), 1);
    let calls = records(&session, &sink, "member_call").await;
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["status"], "canceled");
    assert_eq!(
        calls[0]["reason"],
        "this task was canceled, so its task tsk_member was canceled"
    );
    assert_eq!(
        closed.no_answer_below,
        vec![json!({"member": "coder", "status": "canceled"})]
    );
    let called = calling.await.unwrap();
    assert_eq!(called.status, CallStatus::Canceled);
}

#[tokio::test]
async fn an_attempt_that_ends_with_a_call_in_flight_cancels_it_too() {
    let door = scripted(member_going(vec![task("TASK_STATE_WORKING")])).await;
    let sink = Shared::default();
    let (session, task_id, _cancel) = caller_to(door.url(), &sink).await;
    let calling = {
        let (session, task_id) = (session.clone(), task_id.clone());
        tokio::spawn(async move { call_coder(&session, &task_id, MINUTE).await })
    };
    door.saw("GetTask").await;
    // The harness went away without waiting for its call: the errands close all the same.
    let closed = session.errands.close(&task_id).await;
    assert_eq!(door.count("CancelTask"), 1);
    assert_eq!(
        closed.no_answer_below,
        vec![json!({"member": "coder", "status": "canceled"})]
    );
    let called = calling.await.unwrap();
    assert_eq!(
        called.reason.as_deref(),
        Some("this task's attempt ended, so its task tsk_member was canceled")
    );
}

#[tokio::test]
async fn a_destination_off_the_allow_list_is_never_connected_to() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let sink = Shared::default();
    let session = session_of(
        "sender",
        "capabilities: { network: { allow: [\"localhost:1\"] } }\n",
        None,
        &sink,
    );
    let (task_id, _cancel) = running_task(&session);
    for url in [
        format!("http://localhost:{port}"),
        format!("http://127.0.0.1:{port}"),
        format!("localhost:{port}"),
    ] {
        let out = Outbound {
            url: &url,
            text: "hello",
            context_id: None,
            task_id: None,
            within: MINUTE,
        };
        let sent = send::send(&session, &task_id, out, ticket(&session, &task_id)).await;
        let Err(NotDelivered::NotAllowed(why)) = sent else {
            panic!("{url} was not refused: {sent:?}");
        };
        assert!(
            why.contains("is not in capabilities.network.allow (it allows localhost:1)"),
            "{why}"
        );
    }
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "a connection was made"
    );
    let refused = records(&session, &sink, "network_refused").await;
    assert_eq!(refused.len(), 3);
    assert_eq!(refused[0]["caller_task_id"], task_id.as_str());
    assert!(records(&session, &sink, "a2a_send").await.is_empty());
}

// --- Both ends real: capsule doors, the control surface, tokens and peer consent. ---

/// A real door on 127.0.0.1:0 for `session`, with `tokens` (credential, token, scopes).
async fn serve(session: Arc<Session>, tokens: &[(&str, &str, Option<&[&str]>)]) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let table = session.manifest.network.authentication.as_ref().map(|_| {
        let digests: Vec<TokenDigest> = tokens
            .iter()
            .map(|(credential, token, scopes)| TokenDigest {
                credential: credential.to_string(),
                sha256: digest_hex(token),
                scopes: scopes.map(|s| s.iter().map(|x| x.to_string()).collect()),
            })
            .collect();
        TokenTable::new(&session.manifest.name, &digests)
    });
    let door = Arc::new(Door::new(session, table));
    tokio::spawn(door.serve(listener));
    port
}

/// A stand-in for the agent loop on `session`: each task completes with an answer naming its
/// text, after `pause`.
fn work_answering(session: Arc<Session>, pause: Duration) {
    tokio::spawn(async move {
        while let Some(task) = session.registry.next().await {
            let mut canceled = task.canceled.clone();
            let answered = tokio::time::timeout(pause, canceled.wait_for(|c| *c)).await;
            let outcome = match answered {
                Ok(_) => Outcome::CanceledEnded(None),
                Err(_) => Outcome::Completed(format!("answered: {}", task.input.text)),
            };
            session.registry.finish(&task.id, outcome);
            session.registry.release(&task.id);
        }
    });
}

/// POST `path` on the door at `port` with `token` as its bearer and `headers` beside it;
/// answers status and body.
async fn post_as(
    port: u16,
    path: &str,
    token: &str,
    headers: &[(&str, &str)],
    body: Value,
) -> (u16, Value) {
    let url = format!("http://localhost:{port}");
    let allowed = policy::check(&[format!("localhost:{port}")], &url).unwrap();
    let stream = policy::dial(&allowed, Duration::from_secs(5))
        .await
        .unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut req = Request::post(path)
        .header("host", format!("localhost:{port}"))
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {token}"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Full::new(Bytes::from(body.to_string()))).unwrap();
    let resp = sender.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or_default())
}

/// POST `/control/<helper>` on the door at `port` with a task token; answers status and body.
async fn control(port: u16, helper: &str, token: &str, body: Value) -> (u16, Value) {
    post_as(port, &format!("/control/{helper}"), token, &[], body).await
}

const PEER_WORKER: &str =
    "exports: { peer_tasks: { accept: true } }\nnetwork: { authentication: { scheme: bearer } }\n";

#[tokio::test]
async fn call_member_through_the_control_surface_reaches_a_real_member_door() {
    let member_sink = Shared::default();
    let coder = session_of("coder", PEER_WORKER, None, &member_sink);
    let scopes: Vec<&str> = MEMBER_SCOPES.to_vec();
    let coder_port = serve(
        coder.clone(),
        &[
            ("operator", "mur_operator", None),
            ("member:lead", TOKEN, Some(&scopes)),
        ],
    )
    .await;
    work_answering(coder.clone(), Duration::from_millis(50));

    let sink = Shared::default();
    let (lead, task_id, _cancel) = caller_to(format!("http://localhost:{coder_port}"), &sink).await;
    let lead_port = serve(lead.clone(), &[]).await;
    let token = lead.mint_task_token(&task_id);

    let (status, called) = control(
        lead_port,
        "call-member",
        &token,
        json!({"member": "coder", "text": "count to four"}),
    )
    .await;
    assert_eq!(status, 200, "{called}");
    assert_eq!(called["status"], "completed", "{called}");
    assert_eq!(called["answer"], "answered: count to four");
    let member_task = called["task_id"].as_str().unwrap().to_owned();

    // The member's door took it as a peer's task, from member:lead, trusted as lead's task was.
    coder.trace.flush().await;
    let received: Vec<Value> = member_sink
        .records()
        .into_iter()
        .filter(|r| r["event_type"] == "a2a_task_received")
        .collect();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0]["task_id"], member_task.as_str());
    assert_eq!(received[0]["origin"], "peer");
    assert_eq!(received[0]["trust"], "trusted");
    let owner = coder
        .registry
        .read(&member_task, &Viewer::Everyone, |t| t.owner.clone());
    assert_eq!(owner, Some(Owner::Credential("member:lead".into())));

    // Refusals before any call: a name the wiring does not hold, a missing text.
    let (status, refused) = control(
        lead_port,
        "call-member",
        &token,
        json!({"member": "reviewer", "text": "x"}),
    )
    .await;
    assert_eq!(status, 404);
    assert_eq!(refused["error"], "unknown_member");
    assert_eq!(
        refused["message"],
        "reviewer is not a member lead may call in formation review; it may call coder"
    );
    let (status, refused) =
        control(lead_port, "call-member", &token, json!({"member": "coder"})).await;
    assert_eq!((status, &refused["error"]), (400, &json!("bad_request")));
    let (status, refused) = control(
        lead_port,
        "call-member",
        &token,
        json!({"member": "coder", "text": "x", "timeout_secs": 0}),
    )
    .await;
    assert_eq!((status, &refused["error"]), (400, &json!("bad_request")));
    let (status, _) = control(lead_port, "call-member", "not-a-token", json!({})).await;
    assert_eq!(status, 401);
}

#[tokio::test]
async fn a_wrong_member_token_is_rejected_by_the_member_door() {
    let coder = session_of("coder", PEER_WORKER, None, &Shared::default());
    let coder_port = serve(coder.clone(), &[("operator", "mur_operator", None)]).await;
    let sink = Shared::default();
    let (lead, task_id, _cancel) = caller_to(format!("http://localhost:{coder_port}"), &sink).await;
    let called = call_coder(&lead, &task_id, MINUTE).await;
    assert_eq!(called.status, CallStatus::Rejected);
    assert!(
        called
            .reason
            .unwrap_or_default()
            .contains("HTTP 401 invalid_token"),
        "the member's door did not mint this token"
    );
}

#[tokio::test]
async fn send_message_to_a_door_without_peer_tasks_reports_peer_not_accepted() {
    let worker = session_of("worker", "", None, &Shared::default());
    let port = serve(worker.clone(), &[]).await;
    let sink = Shared::default();
    let sender = session_of(
        "sender",
        &format!("capabilities: {{ network: {{ allow: [\"localhost:{port}\"] }} }}\n"),
        None,
        &sink,
    );
    let (task_id, _cancel) = running_task(&sender);
    let url = format!("http://localhost:{port}");
    let out = Outbound {
        url: &url,
        text: "hello",
        context_id: None,
        task_id: None,
        within: MINUTE,
    };
    let sent = send::send(&sender, &task_id, out, ticket(&sender, &task_id)).await;
    let Err(NotDelivered::Refused(why)) = sent else {
        panic!("not refused: {sent:?}");
    };
    assert!(
        why.starts_with(&format!(
            "the peer at localhost:{port} refused the message: HTTP 403 peer_not_accepted: "
        )),
        "{why}"
    );
    assert_eq!(
        worker
            .registry
            .list(
                &crate::tasks::ListQuery {
                    context_id: None,
                    state: crate::tasks::StateFilter::Any,
                    page_size: 10,
                    after_seq: None,
                    since_nanos: None,
                    include_artifacts: false,
                },
                &Viewer::Everyone
            )
            .total_size,
        0,
        "the worker started nothing"
    );
}

#[tokio::test]
async fn send_message_answers_the_peers_settled_task_and_a_cancel_cascades_to_it() {
    let worker_sink = Shared::default();
    let worker = session_of(
        "worker",
        "exports: { peer_tasks: { accept: true } }\n",
        None,
        &worker_sink,
    );
    let port = serve(worker.clone(), &[]).await;
    work_answering(worker.clone(), Duration::from_millis(30));
    let sink = Shared::default();
    let sender = session_of(
        "sender",
        &format!("capabilities: {{ network: {{ allow: [\"http://localhost:{port}\"] }} }}\n"),
        None,
        &sink,
    );
    let (task_id, _cancel) = running_task(&sender);
    let url = format!("localhost:{port}");
    let out = Outbound {
        url: &url,
        text: "hello",
        context_id: Some("ctx-001"),
        task_id: None,
        within: MINUTE,
    };
    let settled = send::send(&sender, &task_id, out, ticket(&sender, &task_id))
        .await
        .unwrap();
    assert_eq!(settled["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(settled["contextId"], "ctx-001");
    assert_eq!(
        settled["artifacts"][0]["parts"][0]["text"],
        "answered: hello"
    );
    let a2a = records(&sender, &sink, "a2a_send").await;
    assert_eq!(a2a[0]["task_id"], settled["id"]);
    assert_eq!(a2a[0]["context_id"], "ctx-001");
    assert_eq!(a2a[0]["peer_url"], format!("localhost:{port}"));
    worker.trace.flush().await;
    let received = worker_sink.records();
    let received: Vec<&Value> = received
        .iter()
        .filter(|r| r["event_type"] == "a2a_task_received")
        .collect();
    assert_eq!(received[0]["origin"], "peer");
    assert_eq!(received[0]["message_id"], a2a[0]["message_id"]);

    // A slow peer task, and the sending task canceled meanwhile: the peer's task is canceled.
    let slow = session_of(
        "slow",
        "exports: { peer_tasks: { accept: true } }\n",
        None,
        &Shared::default(),
    );
    let slow_port = serve(slow.clone(), &[]).await;
    work_answering(slow.clone(), Duration::from_secs(60));
    let sender = session_of(
        "sender2",
        &format!("capabilities: {{ network: {{ allow: [\"localhost:{slow_port}\"] }} }}\n"),
        None,
        &Shared::default(),
    );
    let (task_id, cancel) = running_task(&sender);
    let url = format!("http://localhost:{slow_port}");
    let t = ticket(&sender, &task_id);
    let sending = {
        let sender = sender.clone();
        let task_id = task_id.clone();
        tokio::spawn(async move {
            let out = Outbound {
                url: &url,
                text: "take your time",
                context_id: None,
                task_id: None,
                within: MINUTE,
            };
            send::send(&sender, &task_id, out, t).await
        })
    };
    let mut peer_task = None;
    for _ in 0..300 {
        let page = slow.registry.list(
            &crate::tasks::ListQuery {
                context_id: None,
                state: crate::tasks::StateFilter::Only(crate::tasks::TaskState::Working),
                page_size: 10,
                after_seq: None,
                since_nanos: None,
                include_artifacts: false,
            },
            &Viewer::Everyone,
        );
        if let Some(t) = page.tasks.first() {
            peer_task = t["id"].as_str().map(str::to_owned);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let peer_task = peer_task.expect("the peer's task never ran");
    let _ = cancel.send(true);
    let sent = sending.await.unwrap();
    assert!(matches!(sent, Err(NotDelivered::Stopped(_))), "{sent:?}");
    let state = slow.registry.state_of(&peer_task, &Viewer::Everyone);
    assert_eq!(state, Some(crate::tasks::TaskState::Canceled));
}

/// A JSON-RPC request to the door at `port`, as `token`'s holder sends it with no runtime
/// header at all; answers status and body.
async fn rpc_as(port: u16, token: &str, body: Value) -> (u16, Value) {
    post_as(port, "/", token, &[("a2a-version", "1.0")], body).await
}

#[tokio::test]
async fn a_member_credential_is_a_peer_whatever_its_headers_say() {
    // A door that takes no peer tasks refuses a member's message even when it leaves out
    // `x-murmur-task-origin: peer`: the credential says who sent it.
    let closed = session_of(
        "closed",
        "network: { authentication: { scheme: bearer } }\n",
        None,
        &Shared::default(),
    );
    let port = serve(
        closed.clone(),
        &[
            ("operator", "mur_operator", None),
            ("member:lead", "mur_member", Some(&["SendMessage"][..])),
        ],
    )
    .await;
    let send = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}});
    let (status, body) = rpc_as(port, "mur_member", send.clone()).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"], "peer_not_accepted");
    // The operator is the user's own client, and is served.
    let mut send = send;
    send["params"]["configuration"] = json!({"returnImmediately": true});
    let (status, body) = rpc_as(port, "mur_operator", send).await;
    assert_eq!(status, 200, "{body}");
    assert!(body["result"]["task"]["id"].is_string(), "{body}");
}

/// A capsule told to go down before its door has begun serving (a SIGTERM as it starts) still
/// closes that door: the door hears it as it starts.
#[tokio::test]
async fn a_door_that_starts_after_its_session_went_down_closes_at_once() {
    let sink = Shared::default();
    let session = session_of("late", "", None, &sink);
    session.go_down();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let door = Arc::new(Door::new(session, None));
    let served = tokio::time::timeout(Duration::from_secs(10), door.serve(listener)).await;
    assert!(
        served.is_ok(),
        "the door kept serving a session that went down"
    );
}
