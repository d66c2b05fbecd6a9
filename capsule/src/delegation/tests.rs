//! Delegation over real sockets: a fake supervisor on one end of a `UnixStream::pair()`
//! answers the control protocol, a real parent door serves the control surface and takes the
//! completion, and a child session posts it the way a sub-capsule does. What is checked is
//! what the doors answered, what the fake supervisor saw, and what the traces recorded.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, UnixStream};

use super::completion::acknowledgement;
use super::protocol::{self, Child, CompletionTarget, Op, Outcome};
use super::supervisor::Supervisor;
use crate::auth::{digest_hex, TokenDigest, TokenTable};
use crate::door::Door;
use crate::ids::{SessionId, TaskId};
use crate::peers::deliver::deliver;
use crate::policy;
use crate::provenance::Trust;
use crate::session::Session;
use crate::stream::EventLog;
use crate::tasks::{Admission, Outcome as TaskOutcome, Owner, Registry, TaskInput};
use crate::trace::tests::Shared;
use crate::trace::Trace;

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

const OPERATOR: &str = "mur_operator_token";

/// A folder of its own holding `worker.yaml`, `other.yaml` and the parent's `lead.yaml`,
/// removed when dropped.
struct Manifests {
    lead: PathBuf,
}

impl Drop for Manifests {
    fn drop(&mut self) {
        if let Some(dir) = self.lead.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn manifests(parent_extra: &str) -> Manifests {
    let dir = std::env::temp_dir().join(format!("murmur-deleg-{}", TaskId::mint()));
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["worker", "other"] {
        let text = MANIFEST.replace("NAME", name).replace("EXTRA", "");
        std::fs::write(dir.join(format!("{name}.yaml")), text).unwrap();
    }
    let text = MANIFEST.replace("NAME", "lead").replace(
        "EXTRA",
        &format!(
            "capabilities: {{ delegate: {{ allow: [worker.yaml, other.yaml] }} }}\n{parent_extra}"
        ),
    );
    let lead = dir.join("lead.yaml");
    std::fs::write(&lead, text).unwrap();
    Manifests { lead }
}

fn session_at(manifest: &std::path::Path, sink: &Shared) -> Session {
    session_served(manifest, sink, 1)
}

/// A session whose door is served at `port` (the door answers only for its own address).
fn session_served(manifest: &std::path::Path, sink: &Shared, port: u16) -> Session {
    let manifest = crate::manifest::load(manifest).unwrap();
    let id = SessionId::mint();
    let trace = Trace::to_sink(sink.clone(), id.clone(), 256).unwrap();
    let events = Arc::new(EventLog::default());
    let recorder = events.clone();
    let registry = Registry::new(5).observed(Arc::new(move |t| recorder.record(t)));
    Session::new(
        id,
        manifest,
        registry,
        events,
        trace,
        format!("http://localhost:{port}"),
        PathBuf::from("/tmp"),
        PathBuf::from("/tmp"),
        PathBuf::from("/bin/true"),
    )
}

/// What the fake supervisor saw, in order.
#[derive(Default, Clone)]
struct Seen(Arc<Mutex<Vec<Op>>>);

impl Seen {
    fn ops(&self) -> Vec<Op> {
        self.0.lock().unwrap().clone()
    }

    async fn saw(&self, f: impl Fn(&Op) -> bool) -> Op {
        for _ in 0..500 {
            if let Some(op) = self.ops().into_iter().find(|o| f(o)) {
                return op;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the supervisor never saw it: {:?}", self.ops());
    }
}

/// A fake supervisor: starts every delegation at once, answers `end` after `end_after`.
fn fake_supervisor(stream: UnixStream, end_after: Duration) -> Seen {
    let seen = Seen::default();
    let log = seen.clone();
    tokio::spawn(async move {
        let (read, write) = stream.into_split();
        let write = Arc::new(tokio::sync::Mutex::new(write));
        let mut lines = BufReader::new(read).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let req: protocol::Request = serde_json::from_str(&line).unwrap();
            log.0.lock().unwrap().push(req.op.clone());
            let write = write.clone();
            tokio::spawn(async move {
                let outcome = match req.op {
                    Op::Delegate { delegation_id, .. } => Outcome::Started(Child {
                        capsule: "worker".into(),
                        version: "0.1.0".into(),
                        child_session_id: "ses_child".into(),
                        child_workdir: format!("/r/children/worker-{}", &delegation_id[4..20])
                            .into(),
                        url: "http://localhost:2".into(),
                    }),
                    Op::End { .. } => {
                        tokio::time::sleep(end_after).await;
                        Outcome::Ended {}
                    }
                };
                let mut bytes = serde_json::to_vec(&protocol::Response {
                    id: req.id,
                    outcome,
                })
                .unwrap();
                bytes.push(b'\n');
                let _ = write.lock().await.write_all(&bytes).await;
            });
        }
    });
    seen
}

struct Parent {
    session: Arc<Session>,
    port: u16,
    task: TaskId,
    token: String,
    seen: Seen,
    sink: Shared,
    _manifests: Manifests,
}

/// A parent capsule (`lead`) serving its door, linked to a fake supervisor, with one running
/// task whose errands are open on the registry's own cancel signal (as the agent opens them).
async fn parent(extra: &str, end_after: Duration) -> Parent {
    let sink = Shared::default();
    let (ours, theirs) = UnixStream::pair().unwrap();
    let seen = fake_supervisor(theirs, end_after);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let files = manifests(extra);
    let session =
        Arc::new(session_served(&files.lead, &sink, port).delegating(Some(Supervisor::new(ours))));
    let table = session.manifest.network.authentication.as_ref().map(|_| {
        let digest = TokenDigest {
            credential: "operator".into(),
            sha256: digest_hex(OPERATOR),
            scopes: None,
        };
        TokenTable::new(&session.manifest.name, &[digest])
    });
    tokio::spawn(Arc::new(Door::new(session.clone(), table)).serve(listener));
    let input = TaskInput {
        text: "lead the work".into(),
        message_id: "m1".into(),
        trust: Trust::Trusted,
        ..TaskInput::default()
    };
    let Admission::Accepted(task, _) = session.registry.admit(None, Owner::Session, input) else {
        panic!("rejected");
    };
    let started = session.registry.next().await.unwrap();
    let span =
        crate::telemetry::Span::start("invoke_agent", crate::telemetry::Kind::Internal, None);
    let _ = session.errands.open(
        &task,
        Trust::Trusted,
        started.canceled.clone(),
        span.context().clone(),
    );
    let token = session.mint_task_token(&task);
    Parent {
        session,
        port,
        task,
        token,
        seen,
        sink,
        _manifests: files,
    }
}

/// One HTTP POST to `127.0.0.1:port`; answers status and JSON body.
async fn post(port: u16, path: &str, headers: &[(&str, &str)], body: Value) -> (u16, Value) {
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
        .header("content-type", "application/json");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Full::new(Bytes::from(body.to_string()))).unwrap();
    let resp = sender.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or_default())
}

impl Parent {
    /// `mur delegate-task` as the helper sends it, on a task of its own.
    fn delegate(&self, capsule: &str) -> tokio::task::JoinHandle<(u16, Value)> {
        self.delegate_with(json!({"capsule": capsule, "text": "count to four"}))
    }

    /// `mur delegate-task` with the request body `body`.
    fn delegate_with(&self, body: Value) -> tokio::task::JoinHandle<(u16, Value)> {
        let (port, token) = (self.port, self.token.clone());
        tokio::spawn(async move {
            let auth = format!("Bearer {token}");
            post(
                port,
                "/control/delegate-task",
                &[("authorization", &auth)],
                body,
            )
            .await
        })
    }

    /// The `delegate` the supervisor saw: its delegation id and completion token.
    async fn delegated(&self) -> (String, Option<String>) {
        match self.seen.saw(|o| matches!(o, Op::Delegate { .. })).await {
            Op::Delegate {
                delegation_id,
                completion_token,
                parent_task,
                text,
                manifest,
                traceparent,
            } => {
                assert_eq!(parent_task, self.task.as_str());
                // The child's task continues the delegating span's trace.
                let parent = traceparent.expect("a delegation carries its traceparent");
                let parent = crate::telemetry::propagation::extract_pairs(&parent, None)
                    .expect("a valid traceparent");
                assert!(parent.is_sampled());
                assert_eq!(text, "count to four");
                assert!(manifest.ends_with("worker.yaml"), "{manifest:?}");
                assert!(crate::ids::is_well_formed(&delegation_id, "dlg_"));
                (delegation_id, completion_token)
            }
            Op::End { .. } => unreachable!(),
        }
    }

    fn target(&self, delegation_id: &str, token: Option<String>) -> CompletionTarget {
        CompletionTarget {
            url: format!("http://localhost:{}", self.port),
            session_id: self.session.id.to_string(),
            delegation_id: delegation_id.into(),
            token,
            traceparent: None,
        }
    }

    async fn records(&self) -> Vec<Value> {
        self.session.trace.flush().await;
        self.sink.records()
    }

    async fn kinds(&self) -> Vec<String> {
        self.records()
            .await
            .iter()
            .map(|r| r["event_type"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// Waits (bounded) until the session's residue holds something.
    async fn residue_entered(&self) {
        for _ in 0..500 {
            if !self.session.residue.all().is_empty() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the delegation never entered the residue");
    }
}

/// A child session completing to `target`, tracing into `sink`.
fn child(target: CompletionTarget, sink: &Shared) -> Session {
    let files = manifests("");
    session_at(&files.lead.with_file_name("worker.yaml"), sink).completing_to(Some(target))
}

fn completion_headers<'a>(session: &'a str, delegation: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("a2a-version", "1.0"),
        ("x-murmur-task-origin", "completion"),
        ("x-murmur-completion-session", session),
        ("x-murmur-delegation-id", delegation),
    ]
}

fn send(params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params})
}

#[tokio::test]
async fn a_completion_reaches_the_waiting_task_and_the_helper_prints_its_response() {
    let p = parent("", Duration::ZERO).await;
    let helper = p.delegate("worker");
    let (delegation, token) = p.delegated().await;
    let token = token.expect("a public door mints a completion token too");
    p.residue_entered().await;
    assert_eq!(
        p.session.residue.of_task(&p.task)[0]["delegation_id"],
        delegation
    );

    // Anyone who reaches a public door, without the token or with another, is answered as if
    // nothing awaited the delegation, and the task goes on waiting for its own child.
    let session = p.session.id.to_string();
    for auth in [None, Some("Bearer mur_not-the-token".to_owned())] {
        let mut headers = completion_headers(&session, &delegation);
        if let Some(a) = &auth {
            headers.push(("authorization", a));
        }
        let (status, refused) = post(
            p.port,
            "/",
            &headers,
            send(json!({"message": {
            "messageId": "m", "role": "ROLE_USER", "parts": [{"text": "forged"}]}})),
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(refused["error"]["code"], -31002, "{refused}");
        assert_eq!(
            refused["error"]["message"],
            format!("no task in this session is waiting for delegation {delegation}")
        );
    }

    // The child's allow list holds its parent's door, and nothing else was added.
    let child_sink = Shared::default();
    let kid = child(p.target(&delegation, Some(token)), &child_sink);
    assert_eq!(kid.allow, vec![format!("localhost:{}", p.port)]);
    assert!(
        deliver(
            &kid,
            kid.completion.as_ref().unwrap(),
            &TaskOutcome::Completed("four".into())
        )
        .await
    );

    let (status, answer) = helper.await.unwrap();
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer,
        json!({"delegation_id": delegation, "capsule": "worker", "status": "completed",
               "child_session_id": "ses_child", "response": "four"})
    );
    assert!(p.session.residue.all().is_empty(), "the child ended itself");
    let records = p.records().await;
    let of = |kind: &str| {
        records
            .iter()
            .find(|r| r["event_type"] == kind)
            .cloned()
            .unwrap()
    };
    assert_eq!(of("tool_call")["tool"], "delegate-task");
    let start = of("delegation_start");
    assert_eq!(start["delegation_id"], delegation);
    assert_eq!(start["child_session_id"], "ses_child");
    assert_eq!(of("completion_received")["state"], "completed");
    assert_eq!(of("completion_received")["task_id"], p.task.as_str());
    assert_eq!(of("delegation_end")["state"], "completed");
    assert!(
        !p.seen.ops().iter().any(|o| matches!(o, Op::End { .. })),
        "a completed child ends itself"
    );

    // A second completion for it is no longer awaited: the child records the refusal.
    assert!(
        !deliver(
            &kid,
            kid.completion.as_ref().unwrap(),
            &TaskOutcome::Completed("again".into())
        )
        .await
    );
    kid.trace.flush().await;
    let refused: Vec<Value> = child_sink
        .records()
        .into_iter()
        .filter(|r| r["event_type"] == "delivery_error")
        .collect();
    assert_eq!(refused.len(), 1);
    assert_eq!(
        refused[0]["reason"],
        format!("no task in this session is waiting for delegation {delegation}")
    );
    assert_eq!(refused[0]["parent_url"], format!("localhost:{}", p.port));
}

#[tokio::test]
async fn a_failed_child_fails_the_helper_with_its_state_and_reason() {
    let p = parent("", Duration::ZERO).await;
    let helper = p.delegate("worker");
    let (delegation, token) = p.delegated().await;
    p.residue_entered().await;
    let kid = child(p.target(&delegation, token), &Shared::default());
    assert!(
        deliver(
            &kid,
            kid.completion.as_ref().unwrap(),
            &TaskOutcome::Failed("the harness exited with status 3".into())
        )
        .await
    );
    let (status, answer) = helper.await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(answer["status"], "failed");
    assert_eq!(answer["reason"], "the harness exited with status 3");
    assert!(answer.get("response").is_none());
}

#[tokio::test]
async fn the_helper_names_the_capsules_it_may_delegate_to() {
    let p = parent("", Duration::ZERO).await;
    let auth = format!("Bearer {}", p.token);
    let (status, refused) = post(
        p.port,
        "/control/delegate-task",
        &[("authorization", &auth)],
        json!({"capsule": "reviewer", "text": "x"}),
    )
    .await;
    assert_eq!(status, 404);
    assert_eq!(refused["error"], "unknown_capsule");
    assert_eq!(
        refused["message"],
        "reviewer is not a capsule lead may delegate to; it may delegate to worker, other"
    );
    assert!(
        p.seen.ops().is_empty(),
        "nothing was asked of the supervisor"
    );

    // Without a control socket there is no delegating at all.
    let sink = Shared::default();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let files = manifests("");
    let lone = Arc::new(session_served(&files.lead, &sink, port));
    tokio::spawn(Arc::new(Door::new(lone.clone(), None)).serve(listener));
    let task = TaskId::mint();
    let token = lone.mint_task_token(&task);
    let (status, refused) = post(
        port,
        "/control/delegate-task",
        &[("authorization", &format!("Bearer {token}"))],
        json!({"capsule": "worker", "text": "x"}),
    )
    .await;
    assert_eq!(status, 409);
    assert_eq!(refused["error"], "delegation_unavailable");
}

#[tokio::test]
async fn on_an_authenticated_door_the_completion_token_opens_only_its_completion() {
    let p = parent(
        "network: { authentication: { scheme: bearer } }\n",
        Duration::ZERO,
    )
    .await;
    let helper = p.delegate("worker");
    let (delegation, token) = p.delegated().await;
    let token = token.expect("an authenticated door mints a completion token");
    p.residue_entered().await;
    let session = p.session.id.to_string();
    let bearer = format!("Bearer {token}");
    let completion = json!({"message": {"messageId": "m", "role": "ROLE_USER",
        "parts": [{"data": {"delegation_id": delegation, "child_session_id": "ses_child",
                            "state": "completed", "response": "four", "reason": null},
                   "mediaType": "application/json"}]}});

    // Anything else with it is an invalid token: another method, another delegation, no origin.
    let get =
        json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": p.task.as_str()}});
    let (status, body) = post(
        p.port,
        "/",
        &[("a2a-version", "1.0"), ("authorization", &bearer)],
        get,
    )
    .await;
    assert_eq!((status, &body["error"]), (401, &json!("invalid_token")));
    let mut other = completion_headers(&session, "dlg_0000");
    other.push(("authorization", &bearer));
    let (status, body) = post(p.port, "/", &other, send(completion.clone())).await;
    assert_eq!((status, &body["error"]), (401, &json!("invalid_token")));

    // A completion no task awaits, with a door token: -31002 before its params is read.
    let operator = format!("Bearer {OPERATOR}");
    let mut unknown = completion_headers(&session, "dlg_0000");
    unknown.push(("authorization", &operator));
    let (status, body) = post(p.port, "/", &unknown, send(json!({}))).await;
    assert_eq!(status, 200);
    assert_eq!(body["error"]["code"], -31002);
    assert_eq!(
        body["error"]["data"][0]["metadata"]["delegationId"],
        "dlg_0000"
    );

    // A door token, even the operator's, cannot post the awaited delegation's answer: only
    // the completion token can.
    let mut forged = completion_headers(&session, &delegation);
    forged.push(("authorization", &operator));
    let (status, body) = post(p.port, "/", &forged, send(completion.clone())).await;
    assert_eq!(status, 200);
    assert_eq!(body["error"]["code"], -31002, "{body}");
    assert_eq!(
        body["error"]["message"],
        format!("no task in this session is waiting for delegation {delegation}")
    );

    // Its own completion: acknowledged exactly as the spec shows, in the task's context.
    let mut own = completion_headers(&session, &delegation);
    own.push(("authorization", &bearer));
    let (status, body) = post(p.port, "/", &own, send(completion.clone())).await;
    assert_eq!(status, 200);
    let context = p
        .session
        .registry
        .read(p.task.as_str(), &crate::tasks::Viewer::Everyone, |t| {
            t.context_id.clone()
        })
        .unwrap();
    assert_eq!(
        body,
        json!({"jsonrpc": "2.0", "id": 1, "result": {"message": {
            "messageId": format!("msg_{delegation}_received"), "contextId": context,
            "role": "ROLE_AGENT",
            "parts": [{"data": {"delegation_id": delegation, "received": true},
                       "mediaType": "application/json"}]}}})
    );
    assert_eq!(body["result"], acknowledgement(&delegation, &context));
    let (_, answer) = helper.await.unwrap();
    assert_eq!(answer["response"], "four");

    // The delegation is over: its token opens nothing any more.
    let (status, _) = post(p.port, "/", &own, send(completion)).await;
    assert_eq!(status, 401);
}

#[tokio::test]
async fn canceling_the_task_ends_its_child_before_task_end_and_answers_the_residue() {
    let p = parent("", Duration::from_millis(300)).await;
    let helper = p.delegate("worker");
    let (delegation, _) = p.delegated().await;
    p.residue_entered().await;

    let cancel = json!({"jsonrpc": "2.0", "id": 1, "method": "CancelTask",
                        "params": {"id": p.task.as_str()}});
    let (status, body) = post(p.port, "/", &[("a2a-version", "1.0")], cancel).await;
    assert_eq!(status, 200, "{body}");
    let residue = &body["result"]["artifacts"][0];
    assert_eq!(residue["artifactId"], "residue");
    let item = &residue["parts"][0]["data"];
    assert_eq!(item["kind"], "delegation");
    assert_eq!(item["delegation_id"], delegation);
    assert_eq!(item["capsule"], "worker");
    assert_eq!(item["child_session_id"], "ses_child");

    // The agent closes the task's errands, then writes its end: the End went out, and was
    // answered, before.
    p.session.errands.close(&p.task).await;
    p.session.trace.event(crate::trace::TraceEvent::task_end(
        p.task.clone(),
        crate::trace::EndStatus::Canceled,
        None,
    ));
    assert!(matches!(
        p.seen.ops().last(),
        Some(Op::End { delegation_id }) if *delegation_id == delegation
    ));
    let kinds = p.kinds().await;
    let at = |k: &str| kinds.iter().position(|x| x == k).unwrap();
    assert!(at("delegation_end") < at("task_end"), "{kinds:?}");
    let end = p
        .records()
        .await
        .into_iter()
        .find(|r| r["event_type"] == "delegation_end")
        .unwrap();
    assert_eq!(end["state"], "ended");
    assert!(p.session.residue.all().is_empty());

    let (status, answer) = helper.await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(answer["status"], "canceled");
    assert_eq!(
        answer["reason"],
        "the task was canceled; sub-capsule worker was ended"
    );

    // The child's own completion, sent as it went down, is no longer awaited.
    let kid_sink = Shared::default();
    let kid = child(p.target(&delegation, None), &kid_sink);
    assert!(
        !deliver(
            &kid,
            kid.completion.as_ref().unwrap(),
            &TaskOutcome::CanceledEnded(None)
        )
        .await
    );
}

#[tokio::test]
async fn stop_session_lists_the_delegation_and_a_late_completion_is_refused_while_it_ends() {
    let p = parent("", Duration::from_millis(500)).await;
    let helper = p.delegate("worker");
    let (delegation, _) = p.delegated().await;
    p.residue_entered().await;
    let stop = json!({"jsonrpc": "2.0", "id": 1, "method": "murmur.StopSession"});
    let (status, body) = post(p.port, "/", &[("a2a-version", "1.0")], stop).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["canceled"], json!([p.task.as_str()]));
    assert_eq!(body["result"]["residue"][0]["kind"], "delegation");
    assert_eq!(body["result"]["residue"][0]["delegation_id"], delegation);

    // While the supervisor ends the child, the child's completion is refused -31002.
    p.seen.saw(|o| matches!(o, Op::End { .. })).await;
    let session = p.session.id.to_string();
    let (_, refused) = post(
        p.port,
        "/",
        &completion_headers(&session, &delegation),
        send(json!({})),
    )
    .await;
    assert_eq!(refused["error"]["code"], -31002, "{refused}");
    let (_, answer) = helper.await.unwrap();
    assert_eq!(answer["status"], "canceled");
}

#[tokio::test]
async fn a_child_silent_past_the_deadline_is_ended_and_the_helper_says_timed_out() {
    let p = parent("", Duration::ZERO).await;
    let helper = p.delegate_with(json!({"capsule": "worker", "text": "count to four",
                                        "timeout_secs": 1}));
    let (delegation, _) = p.delegated().await;
    p.residue_entered().await;
    // No completion ever comes: after the second, the child is ended and the helper answered.
    let (status, answer) = helper.await.unwrap();
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer,
        json!({"delegation_id": delegation, "capsule": "worker", "status": "timed_out",
               "child_session_id": "ses_child",
               "reason": "sub-capsule worker gave no answer within 1 s; it was ended"})
    );
    assert!(matches!(
        p.seen.ops().last(),
        Some(Op::End { delegation_id }) if *delegation_id == delegation
    ));
    assert!(p.session.residue.all().is_empty());
    let end = p
        .records()
        .await
        .into_iter()
        .find(|r| r["event_type"] == "delegation_end")
        .unwrap();
    assert_eq!(end["state"], "timed_out");
    // A deadline that is no number of seconds is refused before anything starts.
    let (status, refused) = p
        .delegate_with(json!({"capsule": "worker", "text": "x", "timeout_secs": 0}))
        .await
        .unwrap();
    assert_eq!(status, 400, "{refused}");
}

#[tokio::test]
async fn a_sub_capsule_that_takes_no_task_is_refused_before_it_starts() {
    let p = parent("", Duration::ZERO).await;
    let other = p.session.manifest.path.with_file_name("other.yaml");
    let closed = MANIFEST
        .replace("NAME", "other")
        .replace(
            "lifecycle: { task_acceptance: queue, queue_depth: 4 }",
            "lifecycle: { task_acceptance: none }",
        )
        .replace("EXTRA", "");
    std::fs::write(&other, closed).unwrap();
    let (status, refused) = p
        .delegate_with(json!({"capsule": "other", "text": "x"}))
        .await
        .unwrap();
    assert_eq!(status, 409, "{refused}");
    assert_eq!(refused["error"], "capsule_takes_no_task");
    assert_eq!(
        refused["message"],
        format!("other sets lifecycle.task_acceptance: none in {}: it takes no task, so it could never answer one; set task_acceptance: single there", other.display())
    );
    assert!(
        !p.seen
            .ops()
            .iter()
            .any(|o| matches!(o, Op::Delegate { .. })),
        "a child was started"
    );
}
