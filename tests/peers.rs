//! Capsules calling capsules, end to end through the real `mur`: `mur send-message` on the
//! hand-wired path (a worker, and a sender whose capabilities.network.allow names it), the
//! allow list refusing a destination with no connection made, a worker refusing peer tasks,
//! `mur end-without-answer`, and `mur call-member` where it can be reached without a formation.
//!
//! The call-member tests at the bottom launch a formation (`mur run` on a formation manifest).
//! Every member_call status, noAnswerBelow and the cancel cascade are also proven over real
//! sockets in the capsule crate (`capsule/src/peers/tests.rs`).

mod support;

use std::io::{Read, Write};
use std::time::Duration;

use serde_json::{json, Value};
use support::*;

const LONG: Duration = Duration::from_secs(30);

/// Launches a fixture capsule named `name`, with `extra` manifest lines.
fn launch(home: &Home, name: &'static str, extra: &str) -> Launch {
    let yaml = Fixture {
        name,
        ..Fixture::default()
    }
    .yaml()
        + extra;
    let manifest = home.write(&format!("{name}/murmur.yaml"), &yaml);
    Launch::start(home, &manifest, &[])
}

const ACCEPTS_PEERS: &str = "exports:\n  peer_tasks:\n    accept: true\n";

fn allowing(entries: &[String]) -> String {
    let list: Vec<String> = entries.iter().map(|e| format!("\"{e}\"")).collect();
    format!(
        "capabilities:\n  network:\n    allow: [{}]\n",
        list.join(", ")
    )
}

/// Runs `command` through the fixture's `@run` in a task of `run`; answers its
/// `{"code", "out", "err"}`.
fn run_in_harness(run: &Launch, command: &str) -> Value {
    let done = run.send(&format!("@run {command}"), false);
    let task = &done["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    serde_json::from_str(task["artifacts"][0]["parts"][0]["text"].as_str().unwrap()).unwrap()
}

fn events(home: &Home, run: &Launch, kind: &str) -> Vec<Value> {
    home.trace(&run.session)
        .into_iter()
        .filter(|e| e["event_type"] == kind)
        .collect()
}

#[test]
fn send_message_reaches_a_worker_the_allow_list_names() {
    let home = Home::new();
    let worker = launch(&home, "worker", ACCEPTS_PEERS);
    let sender = launch(
        &home,
        "sender",
        &allowing(&[format!("localhost:{}", worker.port)]),
    );
    let ran = run_in_harness(
        &sender,
        &format!(
            "mur send-message http://localhost:{} hello worker",
            worker.port
        ),
    );
    assert_eq!(ran["code"], 0, "{ran}");
    assert_eq!(ran["err"], "", "{ran}");
    // What it prints: the worker's task as it settled, one line of JSON.
    let out = ran["out"].as_str().unwrap();
    assert_eq!(out.lines().count(), 1, "{out}");
    let task: Value = serde_json::from_str(out).unwrap();
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "Acknowledged.");
    let peer_task = task["id"].as_str().unwrap();
    let peer_context = task["contextId"].as_str().unwrap();

    // The sender traces what it sent, as the messaging guide shows it.
    quiet(&sender, &home);
    let sent = events(&home, &sender, "a2a_send");
    assert_eq!(sent.len(), 1, "{sent:?}");
    let s = &sent[0];
    assert_eq!(s["peer_url"], format!("localhost:{}", worker.port));
    assert_eq!(s["task_id"], peer_task);
    assert_eq!(s["context_id"], peer_context);
    let message_id = s["message_id"].as_str().unwrap();
    assert!(
        message_id.starts_with("msg_") && message_id.len() == 36,
        "{message_id}"
    );
    let sending_task = &events(&home, &sender, "task_start")[0]["task_id"];
    assert_eq!(&s["caller_task_id"], sending_task);
    assert_eq!(keys_of(s), A2A_SEND_KEYS);
    let tool = events(&home, &sender, "tool_call");
    assert_eq!(tool[0]["tool"], "send-message");
    assert_eq!(
        tool[0]["destination"],
        format!("http://localhost:{}", worker.port)
    );

    // The worker took it as a peer's task, trusted as the sender's own task was.
    quiet(&worker, &home);
    let received = events(&home, &worker, "a2a_task_received");
    assert_eq!(received.len(), 1, "{received:?}");
    assert_eq!(received[0]["task_id"], peer_task);
    assert_eq!(received[0]["origin"], "peer");
    assert_eq!(received[0]["trust"], "trusted");
    assert_eq!(received[0]["message_id"], message_id);
}

#[test]
fn a_destination_off_the_allow_list_is_refused_and_never_connected_to() {
    let home = Home::new();
    // Something listening where the sender is asked to send; it must never see a connection.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let sender = launch(&home, "sender", &allowing(&["localhost:1".into()]));
    for (url, shown) in [
        // A query may carry a secret: no record keeps more than scheme, host and port.
        (
            format!("'http://localhost:{port}/a2a?key=s3cret'"),
            format!("localhost:{port}"),
        ),
        // localhost and 127.0.0.1 are different hosts.
        (format!("127.0.0.1:{port}"), format!("127.0.0.1:{port}")),
    ] {
        let ran = run_in_harness(&sender, &format!("mur send-message {url} hello"));
        assert_eq!(ran["code"], 1, "{ran}");
        assert_eq!(ran["out"], "", "{ran}");
        let err = ran["err"].as_str().unwrap();
        assert!(
            err.starts_with(&format!(
                "error[E-CLI-020]: send-message was refused: {shown} is not in \
                 capabilities.network.allow (it allows localhost:1); nothing was sent\n  hint: "
            )),
            "{err}"
        );
    }
    let accepted = listener.accept();
    assert!(
        matches!(&accepted, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "a connection was made: {accepted:?}"
    );
    quiet(&sender, &home);
    assert!(events(&home, &sender, "a2a_send").is_empty());
    let refused = events(&home, &sender, "network_refused");
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert_eq!(
        refused[0]["destination"],
        format!("http://localhost:{port}")
    );
    assert_eq!(
        refused[1]["destination"],
        format!("http://127.0.0.1:{port}")
    );
    let trace = std::fs::read_to_string(home.records(&sender.session).join("trace.jsonl")).unwrap();
    assert!(!trace.contains("s3cret"), "{trace}");
}

#[test]
fn a_worker_that_does_not_accept_peer_tasks_refuses_with_peer_not_accepted() {
    let home = Home::new();
    let worker = launch(&home, "worker", "");
    let sender = launch(
        &home,
        "sender",
        &allowing(&[format!("localhost:{}", worker.port)]),
    );
    let ran = run_in_harness(
        &sender,
        &format!("mur send-message localhost:{} hello", worker.port),
    );
    assert_eq!(ran["code"], 1, "{ran}");
    let err = ran["err"].as_str().unwrap();
    assert!(
        err.starts_with(&format!(
            "error[E-CLI-020]: send-message was refused: the peer at localhost:{} refused the \
             message: HTTP 403 peer_not_accepted: ",
            worker.port
        )),
        "{err}"
    );
    assert!(err.contains("exports.peer_tasks.accept: true"), "{err}");
    quiet(&worker, &home);
    assert!(events(&home, &worker, "a2a_task_received").is_empty());
    assert_eq!(worker.total_tasks(), 0);
    // The refusal is still on the sender's record: the worker answered, and took no task.
    quiet(&sender, &home);
    let sent = events(&home, &sender, "a2a_send");
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["task_id"], Value::Null);
}

#[test]
fn end_without_answer_fails_the_task_with_no_answer_however_the_harness_exits() {
    let home = Home::new();
    let run = launch(&home, "capsule", "");
    // The fixture runs the helper, then exits 0 with an answer: the answer is ignored.
    let done = run.send("@run mur end-without-answer q gave no answer", false);
    let task = &done["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{done}");
    assert_eq!(
        task["status"]["message"]["parts"][0]["text"],
        "q gave no answer"
    );
    assert_eq!(task["metadata"], json!({"murmur": {"noAnswer": true}}));
    assert!(task.get("artifacts").is_none(), "no response: {task}");
    let id = task["id"].as_str().unwrap();
    let got = run.rpc("GetTask", json!({"id": id}))["result"].clone();
    assert_eq!(&got, task);

    quiet(&run, &home);
    let tool = events(&home, &run, "tool_call");
    assert_eq!(tool[0]["tool"], "end-without-answer");
    assert_eq!(tool[0]["reason"], "q gave no answer");
    assert_eq!(
        events(&home, &run, "task_failed")[0]["cause"],
        "q gave no answer"
    );
    assert_eq!(events(&home, &run, "task_end")[0]["status"], "failed");
    assert_eq!(events(&home, &run, "harness_exit")[0]["cause"], "exited");

    // What the helper printed (the task's answer is dropped, so the harness keeps it in a file).
    let printed = home.root.join("printed");
    let done = run.send(
        &format!(
            "@run mur end-without-answer nothing to say > {p}; echo code=$? >> {p}; \
             mur request-input still there? >> {p} 2>&1; echo code=$? >> {p}",
            p = printed.display()
        ),
        false,
    );
    assert_eq!(
        done["result"]["task"]["status"]["state"],
        "TASK_STATE_FAILED"
    );
    assert_eq!(
        std::fs::read_to_string(&printed).unwrap(),
        "the task ends without an answer (TASK_STATE_FAILED); exit now\ncode=0\n\
         error[E-CLI-020]: request-input was refused: the task is ending without an answer \
         (end-without-answer ran): exit now\n  hint: end-without-answer ran: exit now\ncode=1\n",
        "and nothing more is waited for"
    );
}

#[test]
fn a_harness_that_stays_after_end_without_answer_is_stopped_after_the_grace() {
    let home = Home::new();
    let run = launch(&home, "capsule", "");
    let id = run.start_task("@run mur end-without-answer giving up\n@sleep 60");
    let task = run.wait_task(&id, LONG, |s| s == "TASK_STATE_FAILED");
    assert_eq!(task["status"]["message"]["parts"][0]["text"], "giving up");
    assert_eq!(task["metadata"], json!({"murmur": {"noAnswer": true}}));
    quiet(&run, &home);
    let interrupt = events(&home, &run, "harness_interrupt");
    assert_eq!(interrupt.len(), 1, "{interrupt:?}");
    assert_eq!(interrupt[0]["interrupt"], "sigint");
    let exit = &events(&home, &run, "harness_exit")[0];
    assert_eq!(exit["cause"], "ended_without_answer", "{exit}");
    assert!(
        exit["duration_ms"].as_u64().unwrap() >= 10_000,
        "it had the grace: {exit}"
    );
}

#[test]
fn call_member_outside_a_formation_is_refused_naming_why() {
    let home = Home::new();
    let run = launch(&home, "capsule", "");
    let ran = run_in_harness(&run, "mur call-member coder write the tests");
    assert_eq!(ran["code"], 1, "{ran}");
    assert_eq!(ran["out"], "");
    assert_eq!(
        ran["err"],
        "error[E-CLI-020]: call-member was refused: this capsule was launched alone, not as a \
         formation member, so it has no members to call\n  hint: call one of the members \
         $MURMUR_GUIDE lists\n"
    );
    quiet(&run, &home);
    assert!(
        events(&home, &run, "member_call").is_empty(),
        "no call was made"
    );
    // The guide a harness reads says so too.
    let guide = std::fs::read_to_string(home.records(&run.session).join("guide.md")).unwrap();
    // Every helper line names `mur` by its full path (a login shell may not find it by name).
    assert!(
        guide.contains(&format!(
            "`{} call-member [--timeout SECS] NAME TEXT`",
            mur_bin()
        )),
        "{guide}"
    );
    assert!(guide.ends_with("Members you may call: none.\n"), "{guide}");
}

#[test]
fn helpers_refuse_outside_a_task() {
    let home = Home::new();
    for args in [
        vec!["send-message", "localhost:1", "hello"],
        vec!["call-member", "coder", "hello"],
        vec!["end-without-answer", "no"],
    ] {
        let (code, out, err) = home.run(&args);
        assert_eq!((code, out.as_str()), (1, ""), "{args:?}");
        assert!(
            err.starts_with("error[E-CLI-020]: MURMUR_DOOR_URL is not set"),
            "{args:?}: {err}"
        );
    }
    let (code, _, err) = home.run(&["send-message", "localhost:1"]);
    assert_eq!(code, 2, "a missing TEXT is a usage error: {err}");
}

// --- Formations: these need `mur run` on a formation manifest (the launcher). ---

/// A launched formation `lead → coder`: the entry member (`lead`) as a [`Launch`], and each
/// member's port, session and operator token (formation doors are authenticated).
struct Formation {
    lead: Launch,
    members: Vec<Member>,
}

struct Member {
    name: String,
    port: u16,
    session: String,
    operator: String,
}

impl Formation {
    fn member(&self, name: &str) -> &Member {
        self.members
            .iter()
            .find(|m| m.name == name)
            .unwrap_or_else(|| panic!("no member {name}"))
    }

    /// A JSON-RPC call to a member's door with its operator token; answers the response.
    fn rpc(&self, name: &str, method: &str, params: Value) -> Value {
        let m = self.member(name);
        bearer_rpc(m.port, &m.operator, method, params)
    }

    /// Runs `command` through `@run` in a task of the lead; answers the task as it settled.
    fn lead_runs(&self, command: &str) -> Value {
        let done = self.rpc(
            "lead",
            "SendMessage",
            message(&format!("@run {command}"), false),
        );
        done["result"]["task"].clone()
    }

    fn trace(&self, home: &Home, name: &str, kind: &str) -> Vec<Value> {
        home.trace(&self.member(name).session)
            .into_iter()
            .filter(|e| e["event_type"] == kind)
            .collect()
    }
}

/// The fixture's `{"code", "out", "err"}` answer of a completed `@run` task.
fn ran(task: &Value) -> Value {
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    serde_json::from_str(task["artifacts"][0]["parts"][0]["text"].as_str().unwrap()).unwrap()
}

/// Writes the formation and launches it. `mur run` prints, per DESIGN §3, one line per member
/// (`member NAME: url localhost:PORT session ses_…`), then the entry member's two lines.
fn start_formation(home: &Home) -> Formation {
    use std::io::{BufRead, BufReader};
    let member = |name: &'static str, extra: &str| {
        let yaml = Fixture {
            name,
            ..Fixture::default()
        }
        .yaml()
            + extra;
        home.write(&format!("{name}/murmur.yaml"), &yaml);
    };
    member("lead", "");
    member("coder", ACCEPTS_PEERS);
    let formation = home.write(
        "formation.yaml",
        "formation:\n  name: review\n  version: \"0.1.0\"\n  entry: lead\n  members:\n    \
         lead:\n      manifest: lead/murmur.yaml\n      calls: [coder]\n    coder:\n      \
         manifest: coder/murmur.yaml\n",
    );
    let mut child = home
        .mur()
        .arg("run")
        .arg("--manifest")
        .arg(&formation)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let rest = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let kept = rest.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line.clone()).is_err() {
                kept.lock().unwrap().push_str(&(line + "\n"));
            }
        }
    });
    let mut members = Vec::new();
    let (mut port, mut session) = (None, None);
    while session.is_none() {
        let line = rx
            .recv_timeout(LONG)
            .expect("the formation was not announced");
        if let Some(rest) = line.strip_prefix("member ") {
            let (name, rest) = rest.split_once(": url localhost:").unwrap();
            let (p, s) = rest.split_once(" session ").unwrap();
            members.push((name.to_owned(), p.parse::<u16>().unwrap(), s.to_owned()));
        } else if let Some(p) = line.strip_prefix("murmur: url localhost:") {
            port = Some(p.parse::<u16>().unwrap());
        } else if let Some(s) = line.strip_prefix("session: ") {
            session = Some(s.to_owned());
        }
    }
    drop(rx);
    let lead = Launch {
        child,
        port: port.unwrap(),
        session: session.unwrap(),
        rest,
        fixture_state: home.root.join("fixture-state"),
    };
    let members = members
        .into_iter()
        .map(|(name, port, session)| {
            let operator = home.operator_token(&session);
            Member {
                name,
                port,
                session,
                operator,
            }
        })
        .collect();
    Formation { lead, members }
}

#[test]
fn call_member_answers_and_is_recorded_on_both_sides() {
    let home = Home::new();
    let f = start_formation(&home);
    assert_eq!(f.lead.port, f.member("lead").port);
    let out = ran(&f.lead_runs("mur call-member coder count to four"));
    assert_eq!(out["code"], 0, "{out}");
    assert_eq!(out["out"], "Acknowledged.\n");
    let call = &f.trace(&home, "lead", "member_call")[0];
    assert_eq!(call["member"], "coder");
    assert_eq!(call["status"], "completed");
    assert_eq!(call["reason"], Value::Null);
    let received = &f.trace(&home, "coder", "a2a_task_received")[0];
    assert_eq!(received["origin"], "peer");
    assert_eq!(received["task_id"], call["task_id"]);
    let sent = &f.trace(&home, "lead", "a2a_send")[0];
    assert_eq!(
        sent["peer_url"],
        format!("localhost:{}", f.member("coder").port)
    );
}

#[test]
fn a_member_without_an_answer_is_named_in_no_answer_below() {
    let home = Home::new();
    let f = start_formation(&home);
    // The coder fails; the lead then ends without an answer of its own.
    let task =
        f.lead_runs("mur call-member coder '@exit 3'; mur end-without-answer coder gave no answer");
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{task}");
    assert_eq!(
        task["status"]["message"]["parts"][0]["text"],
        "coder gave no answer"
    );
    assert_eq!(
        task["metadata"],
        json!({"murmur": {"noAnswer": true,
                          "noAnswerBelow": [{"member": "coder", "status": "failed"}]}})
    );
    assert_eq!(f.trace(&home, "lead", "member_call")[0]["status"], "failed");

    // A timed-out call: the member's task is canceled, and the lead's answer says what it
    // lacks.
    let task = f.lead_runs("mur call-member --timeout 1 coder '@sleep 30'");
    let out = ran(&task);
    assert_eq!(out["code"], 1, "{out}");
    assert!(
        out["err"].as_str().unwrap().starts_with(
            "error[E-CLI-020]: member coder gave no answer (timed_out): no answer within 1 s"
        ),
        "{out}"
    );
    assert_eq!(
        task["metadata"],
        json!({"murmur": {"noAnswerBelow": [{"member": "coder", "status": "timed_out"}]}})
    );
    let coder_task = f.trace(&home, "lead", "member_call")[1]["task_id"].clone();
    let state = f.rpc("coder", "GetTask", json!({"id": coder_task}));
    assert_eq!(state["result"]["status"]["state"], "TASK_STATE_CANCELED");
}

#[test]
fn canceling_the_lead_cancels_its_member_call_before_its_task_ends() {
    let home = Home::new();
    let f = start_formation(&home);
    let started = f.rpc(
        "lead",
        "SendMessage",
        message("@run mur call-member coder '@sleep 60'", true),
    );
    let lead_task = started["result"]["task"]["id"].as_str().unwrap().to_owned();
    let mut coder_task = Value::Null;
    assert!(wait_until(LONG, || {
        let page = f.rpc(
            "coder",
            "ListTasks",
            json!({"status": "TASK_STATE_WORKING"}),
        );
        coder_task = page["result"]["tasks"][0]["id"].clone();
        coder_task.is_string()
    }));
    let canceled = f.rpc("lead", "CancelTask", json!({"id": lead_task}));
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED");
    assert!(wait_until(LONG, || !f
        .trace(&home, "lead", "task_end")
        .is_empty()));
    let lead_trace = home.trace(&f.member("lead").session);
    let at = |kind: &str| lead_trace.iter().position(|e| e["event_type"] == kind);
    let (call, end) = (at("member_call").unwrap(), at("task_end").unwrap());
    assert!(call < end, "member_call after task_end: {lead_trace:?}");
    assert_eq!(lead_trace[call]["status"], "canceled");
    let state = f.rpc("coder", "GetTask", json!({"id": coder_task}));
    assert_eq!(state["result"]["status"]["state"], "TASK_STATE_CANCELED");
    // The trace's task_end is on file before the registry takes the task's ending (so that
    // whoever sees the end finds the record): the metadata may come a moment after it.
    let mut ended = Value::Null;
    wait_until(LONG, || {
        ended = f.rpc("lead", "GetTask", json!({"id": lead_task}));
        !ended["result"]["metadata"].is_null()
    });
    assert_eq!(
        ended["result"]["metadata"],
        json!({"murmur": {"noAnswerBelow": [{"member": "coder", "status": "canceled"}]}})
    );
}

/// A test CA, and a TLS front for a door: it terminates TLS with a certificate for
/// `localhost` the CA signed, and relays each connection to the door's plain port.
struct TlsFront {
    port: u16,
    ca_pem: String,
    handshakes: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl TlsFront {
    fn start(door_port: u16) -> TlsFront {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "murmur test CA");
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let leaf_key = KeyPair::generate().unwrap();
        let leaf = CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .signed_by(&leaf_key, &ca, &ca_key)
            .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone()],
                rustls::pki_types::PrivateKeyDer::try_from(leaf_key.serialize_der()).unwrap(),
            )
            .unwrap();
        let config = Arc::new(config);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let handshakes = Arc::new(AtomicUsize::new(0));
        let counted = handshakes.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(tcp) = conn else { continue };
                let (config, counted) = (config.clone(), counted.clone());
                std::thread::spawn(move || {
                    let Ok(server) = rustls::ServerConnection::new(config) else {
                        return;
                    };
                    let mut tls = rustls::StreamOwned::new(server, tcp);
                    // The request, read whole (one JSON-RPC POST), then relayed.
                    let mut request = Vec::new();
                    let mut buf = [0u8; 16 << 10];
                    loop {
                        match tls.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => request.extend_from_slice(&buf[..n]),
                        }
                        if complete(&request) {
                            break;
                        }
                    }
                    counted.fetch_add(1, Ordering::SeqCst);
                    let Ok(mut door) = std::net::TcpStream::connect(("127.0.0.1", door_port))
                    else {
                        return;
                    };
                    // One request a connection: the door closes it after its answer.
                    if let Some(eol) = request.windows(2).position(|w| w == b"\r\n") {
                        request.splice(eol + 2..eol + 2, b"Connection: close\r\n".iter().copied());
                    }
                    let _ = door.write_all(&request);
                    let mut answer = Vec::new();
                    let _ = door.read_to_end(&mut answer);
                    let _ = tls.write_all(&answer);
                    let _ = tls.flush();
                    tls.conn.send_close_notify();
                    let _ = tls.flush();
                });
            }
        });
        TlsFront {
            port,
            ca_pem: ca.pem(),
            handshakes,
        }
    }

    fn served(&self) -> usize {
        self.handshakes.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Whether `raw` holds a whole HTTP request with its `content-length` body.
fn complete(raw: &[u8]) -> bool {
    let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    raw.len() >= end + 4 + length
}

#[test]
fn an_https_peer_is_spoken_to_over_tls_and_its_certificate_is_checked() {
    let home = Home::new();
    // The worker behind a TLS front at localhost:FRONT, a name its door is told to answer for.
    let reserve = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let worker_port = reserve.local_addr().unwrap().port();
    drop(reserve);
    let front = TlsFront::start(worker_port);
    let worker = {
        let yaml = Fixture {
            name: "worker",
            ..Fixture::default()
        }
        .yaml()
            + ACCEPTS_PEERS
            + &format!(
                "network:\n  internal_port: {worker_port}\n  hosts: [\"localhost:{}\"]\n",
                front.port
            );
        let manifest = home.write("worker/murmur.yaml", &yaml);
        Launch::start(&home, &manifest, &[])
    };
    let url = format!("https://localhost:{}", front.port);
    let ca = home.write("ca.pem", &front.ca_pem);
    let sender_yaml = Fixture {
        name: "sender",
        ..Fixture::default()
    }
    .yaml()
        + &allowing(std::slice::from_ref(&url));
    let manifest = home.write("sender/murmur.yaml", &sender_yaml);

    // Trusting the test CA: the message goes over TLS, and the worker answers it.
    let sender = Launch::start_env(
        &home,
        &manifest,
        &[],
        &[("MURMUR_CA_FILE", ca.display().to_string())],
    );
    let ran = run_in_harness(&sender, &format!("mur send-message {url} hello over tls"));
    assert_eq!(ran["code"], 0, "{ran}");
    let task: Value = serde_json::from_str(ran["out"].as_str().unwrap()).unwrap();
    assert_eq!(
        task["artifacts"][0]["parts"][0]["text"], "Acknowledged.",
        "{task}"
    );
    assert!(front.served() >= 1, "nothing went through TLS");
    let received = events(&home, &worker, "a2a_task_received");
    assert_eq!(received.len(), 1);
    assert_eq!(received[0]["origin"], "peer");
    drop(sender);

    // Without it, the certificate is not believed: a clear failure naming the peer, and
    // nothing reaches the worker.
    let before = front.served();
    let sender = Launch::start(&home, &manifest, &[]);
    let ran = run_in_harness(&sender, &format!("mur send-message {url} hello again"));
    assert_ne!(ran["code"], 0, "{ran}");
    let err = ran["err"].as_str().unwrap();
    let peer = format!("localhost:{}", front.port);
    assert!(
        err.contains(&format!(
            "error[E-CLI-020]: send-message was refused: cannot reach {peer}: the TLS handshake \
             failed: invalid peer certificate: UnknownIssuer\n"
        )),
        "{err}"
    );
    assert_eq!(err.matches(&peer).count(), 1, "the peer said once: {err}");
    // The hint fits a certificate: the name it must hold and the CAs believed.
    assert!(
        err.contains(
            "hint: its certificate must name localhost and chain to a CA murmur trusts: the \
             webpki roots (for a private CA, set MURMUR_CA_FILE to a PEM file of its certificate)"
        ),
        "{err}"
    );
    assert!(
        !err.contains("mur ps"),
        "a certificate failure is no dead peer: {err}"
    );
    assert_eq!(
        front.served(),
        before,
        "a request got through an untrusted certificate"
    );
    drop(sender);

    // A CA file that cannot be read is said as such, with its path, and is no handshake failure.
    let missing = home.root.join("no-such-ca.pem");
    let sender = Launch::start_env(
        &home,
        &manifest,
        &[],
        &[("MURMUR_CA_FILE", missing.display().to_string())],
    );
    let ran = run_in_harness(
        &sender,
        &format!("mur send-message {url} hello a third time"),
    );
    assert_ne!(ran["code"], 0, "{ran}");
    let err = ran["err"].as_str().unwrap();
    assert!(
        err.contains(&format!(
            "error[E-CLI-020]: send-message was refused: cannot reach {peer}: MURMUR_CA_FILE={}: No \
             such file or directory (os error 2)\n  hint: point MURMUR_CA_FILE at a readable PEM \
             file of CA certificates, or unset it",
            missing.display()
        )),
        "{err}"
    );
    assert!(!err.contains("handshake"), "{err}");
    assert_eq!(front.served(), before, "nothing was sent");
    assert_eq!(events(&home, &worker, "a2a_task_received").len(), 1);
}
