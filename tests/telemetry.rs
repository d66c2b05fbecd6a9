//! OpenTelemetry (docs/telemetry.md), through the real `mur` and a real OTLP/HTTP receiver built
//! on the official `opentelemetry-proto` definitions (tests/otel/receiver.py): the shipped split
//! formation's task is one trace across the lead and both workers with the conventions' names,
//! attributes and parent links; a caller's `traceparent` is continued and handed to the harness;
//! the gateway's `chat` spans carry the usage it metered; a collector that answers 500 or is not
//! there costs the formation nothing and the drops are counted; `mur trace show --otlp` writes
//! what a collector loads; a formation's `telemetry:` block points its members at one; and no
//! token, key, prompt or answer is in any span.

#[path = "support/clients.rs"]
mod clients;
#[path = "support/fake_provider.rs"]
mod fake_provider;
#[path = "support/otlp.rs"]
mod otlp;
mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use fake_provider::{anthropic, Fake, Reply};
use otlp::{Receiver, Span};
use serde_json::{json, Value};
use support::*;

const LONG: Duration = Duration::from_secs(60);
const TASK: &str = "count these words for me please, worker friends";

fn split() -> PathBuf {
    repo_root().join("manifests/split/formation.yaml")
}

/// `mur run` of the split formation's task with `env`, to its end: (exit code, stdout, stderr).
fn run_split(home: &Home, manifest: &Path, env: &[(&str, String)]) -> (i32, String, String) {
    let out = home
        .mur()
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .args(["run", "--manifest"])
        .arg(manifest)
        .args(["--task", TASK])
        .stdin(Stdio::null())
        .output()
        .expect("mur runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn member_sessions(stdout: &str) -> Vec<(String, String)> {
    stdout
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("member ")?;
            let (name, rest) = rest.split_once(": url localhost:")?;
            let (_, session) = rest.split_once(" session ")?;
            Some((name.to_owned(), session.to_owned()))
        })
        .collect()
}

fn named<'a>(spans: &'a [Span], name: &str, member: &str) -> Vec<&'a Span> {
    spans
        .iter()
        .filter(|s| s.name == name && s.resource.get("murmur.member") == Some(&json!(member)))
        .collect()
}

fn one<'a>(spans: &'a [Span], name: &str, member: &str) -> &'a Span {
    let found = named(spans, name, member);
    assert_eq!(found.len(), 1, "one {name} of {member}: {spans:#?}");
    found[0]
}

fn by_id<'a>(spans: &'a [Span], id: &str) -> &'a Span {
    spans
        .iter()
        .find(|s| s.span_id == id)
        .unwrap_or_else(|| panic!("no span {id}"))
}

/// Every string anywhere in a span's attributes, events, resource and status.
fn strings_of(s: &Span) -> Vec<String> {
    let mut out = vec![s.name.clone(), s.status.message.clone()];
    let mut walk = |v: &Value| collect(v, &mut out);
    walk(&Value::Object(s.attributes.clone()));
    walk(&Value::Object(s.resource.clone()));
    for e in &s.events {
        walk(&Value::Object(e.attributes.clone()));
    }
    out
}

fn collect(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(t) => out.push(t.clone()),
        Value::Array(a) => a.iter().for_each(|x| collect(x, out)),
        Value::Object(m) => m.values().for_each(|x| collect(x, out)),
        _ => {}
    }
}

/// Fails when any span holds any of `secrets`.
fn assert_nothing_secret(spans: &[Span], secrets: &[&str]) {
    for s in spans {
        for text in strings_of(s) {
            for secret in secrets {
                assert!(
                    !text.contains(secret),
                    "span {} holds {secret:?} in {text:?}",
                    s.name
                );
            }
        }
    }
}

/// Every token murmur mints starts `mur_` (door and member tokens, task tokens, completion
/// tokens, the gateway's placeholders), and a bearer credential is sent as `Bearer …`: no span
/// value may hold either, whichever token it would have been.
fn assert_no_token_shapes(spans: &[Span]) {
    for s in spans {
        for text in strings_of(s) {
            assert!(
                !text.contains("mur_") && !text.contains("Bearer"),
                "span {} holds a token-shaped value {text:?}",
                s.name
            );
        }
    }
}

#[test]
fn the_split_formations_task_is_one_trace_across_the_lead_and_both_workers() {
    if !otlp::usable() {
        return;
    }
    let receiver = Receiver::start(200);
    let home = Home::new();
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint()),
        ("OTEL_EXPORTER_OTLP_HEADERS", "x-team=agents".to_owned()),
    ];
    let (code, stdout, stderr) = run_split(&home, &split(), &env);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains("left: Acknowledged: count these words for"),
        "{stdout}"
    );
    assert!(!stderr.contains("dropped"), "{stderr}");
    let sessions = member_sessions(&stdout);
    assert_eq!(sessions.len(), 3, "{stdout}");

    // Each capsule flushes its spans as it ends; the launch has ended, so all are in.
    let spans = receiver.wait_for("every member's invoke_agent", LONG, |spans| {
        ["lead", "left", "right"]
            .iter()
            .all(|m| !named(spans, &format!("invoke_agent {m}"), m).is_empty())
    });

    // One trace: the lead's attempt is its root, everything of the task is under it.
    let lead = one(&spans, "invoke_agent lead", "lead");
    assert!(lead.is_root(), "{lead:?}");
    assert_eq!(lead.kind, "SPAN_KIND_INTERNAL");
    let trace = lead.trace_id.clone();
    let of_task: Vec<&Span> = spans.iter().filter(|s| s.trace_id == trace).collect();
    let members: BTreeSet<&str> = of_task
        .iter()
        .filter_map(|s| s.resource.get("murmur.member").and_then(Value::as_str))
        .collect();
    assert_eq!(members, BTreeSet::from(["lead", "left", "right"]));
    // Only the supervisor's stops start traces of their own.
    for s in spans.iter().filter(|s| s.trace_id != trace) {
        assert_eq!(s.name, "murmur.StopSession", "{s:?}");
    }

    // The lead's attempt: the conventions' invoke_agent attributes.
    assert_eq!(lead.attr_str("gen_ai.operation.name"), Some("invoke_agent"));
    assert_eq!(lead.attr_str("gen_ai.agent.name"), Some("lead"));
    assert_eq!(lead.attr_str("murmur.task.outcome"), Some("completed"));
    assert_eq!(lead.attr_str("murmur.harness.session_mode"), Some("new"));
    assert_eq!(lead.attr_str("murmur.capsule"), Some("lead"));
    assert!(lead
        .attr_str("gen_ai.conversation.id")
        .is_some_and(|c| c.starts_with("ctx_")));
    assert_eq!(lead.resource["service.name"], "murmur");
    assert_eq!(lead.resource["murmur.formation"], "split");
    assert_eq!(lead.scope, "murmur");

    for worker in ["left", "right"] {
        // execute_tool call-member, under the lead's attempt.
        let call = one(&spans, &format!("call-member {worker}"), "lead");
        assert_eq!(call.kind, "SPAN_KIND_CLIENT");
        assert_eq!(call.trace_id, trace);
        let tool = by_id(&spans, &call.parent_span_id);
        assert_eq!(tool.name, "execute_tool call-member");
        assert_eq!(tool.attr_str("gen_ai.tool.name"), Some("call-member"));
        assert_eq!(tool.attr_str("gen_ai.operation.name"), Some("execute_tool"));
        assert_eq!(tool.parent_span_id, lead.span_id);
        assert_eq!(call.attr_str("murmur.call.member"), Some(worker));
        assert_eq!(call.attr_str("murmur.call.status"), Some("completed"));
        assert_eq!(call.attr_str("a2a.method.name"), Some("SendMessage"));

        // The worker's door span continues the call's traceparent.
        let server = one(&spans, "SendMessage", worker);
        assert_eq!(server.kind, "SPAN_KIND_SERVER");
        assert_eq!(server.trace_id, trace);
        assert_eq!(server.parent_span_id, call.span_id);
        assert_eq!(server.attr_str("a2a.method.name"), Some("SendMessage"));
        assert_eq!(server.attr_str("a2a.protocol.version"), Some("1.0"));
        assert_eq!(
            server.attr_str("a2a.task.state"),
            Some("TASK_STATE_SUBMITTED")
        );
        let task = server.attr_str("a2a.task.id").expect("the task answered");
        assert_eq!(call.attr_str("a2a.task.id"), Some(task));
        assert_eq!(
            server.attr_str("gen_ai.conversation.id"),
            call.attr_str("gen_ai.conversation.id")
        );

        // The worker's attempt runs under its door span.
        let attempt = one(&spans, &format!("invoke_agent {worker}"), worker);
        assert_eq!(attempt.parent_span_id, server.span_id);
        assert_eq!(attempt.attr_str("a2a.task.id"), Some(task));
        assert_eq!(attempt.attr_str("murmur.task.outcome"), Some("completed"));

        // The call's follow-ups (its stream, its GetTask) are the call's children too.
        for s in named(&spans, "GetTask", worker).into_iter().chain(named(
            &spans,
            "SubscribeToTask",
            worker,
        )) {
            assert_eq!(s.parent_span_id, call.span_id, "{s:?}");
            assert_eq!(s.attr_str("a2a.task.id"), Some(task));
        }
        assert!(
            named(&spans, "GetTask", worker)
                .iter()
                .any(|s| s.attr_str("a2a.task.state") == Some("TASK_STATE_COMPLETED")),
            "the call read its answer with GetTask"
        );
    }
    // Each export carried the configured header, as protobuf.
    for s in &spans {
        assert_eq!(s.header("x-team"), Some("agents"));
        assert_eq!(s.header("content-type"), Some("application/x-protobuf"));
    }

    // Nothing secret: no token, no task text, no answer.
    assert_no_token_shapes(&spans);
    assert_nothing_secret(
        &spans,
        &["count these words", "worker friends", "Acknowledged"],
    );

    // The trace's span records are the spans the collector got, ids and all.
    let exported: BTreeSet<&str> = spans.iter().map(|s| s.span_id.as_str()).collect();
    for (_, session) in &sessions {
        let recorded: Vec<Value> = home
            .trace(session)
            .into_iter()
            .filter(|e| e["event_type"] == "span")
            .collect();
        assert!(!recorded.is_empty(), "{session} recorded no span");
        for r in recorded {
            assert!(
                exported.contains(r["span_id"].as_str().unwrap()),
                "recorded but not exported: {r}"
            );
            assert_eq!(r["trace_id"], trace.as_str(), "{r}");
        }
    }
    assert_nothing_left(&home, LONG);
}

#[test]
fn a_collector_that_answers_500_or_is_not_there_costs_the_formation_nothing() {
    if !otlp::usable() {
        return;
    }
    let failing = Receiver::start(500);
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    for (endpoint, why) in [
        (failing.endpoint(), "the collector did not take a batch"),
        (
            format!("http://127.0.0.1:{closed}"),
            "the collector did not take a batch",
        ),
    ] {
        let home = Home::new();
        let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.clone())];
        let (code, stdout, stderr) = run_split(&home, &split(), &env);
        // The task completed with its answer, as without a collector.
        assert_eq!(code, 0, "{endpoint}: {stdout}{stderr}");
        assert!(
            stdout.contains("right: Acknowledged: me please, worker friends"),
            "{stdout}"
        );
        // The drop is said once per capsule on stderr, naming the collector.
        let said: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("murmur: telemetry: "))
            .collect();
        assert!(!said.is_empty(), "{stderr}");
        for line in &said {
            assert!(line.contains(why) && line.contains(&endpoint), "{line}");
        }
        assert!(said.len() <= 3, "said once per capsule: {said:#?}");
        // Counted in each member's trace: the first drop, then the session's total.
        for (member, session) in member_sessions(&stdout) {
            let drops: Vec<Value> = home
                .trace(&session)
                .into_iter()
                .filter(|e| e["event_type"] == "spans_dropped")
                .collect();
            assert!(!drops.is_empty(), "{member} counted no drop");
            let total = drops.last().unwrap();
            assert_eq!(total["reason"], "spans dropped in this session, in all");
            assert_eq!(total["endpoint"], format!("{endpoint}/v1/traces"));
            let recorded = home
                .trace(&session)
                .iter()
                .filter(|e| e["event_type"] == "span")
                .count() as u64;
            assert!(
                total["dropped"].as_u64().unwrap() >= recorded,
                "{member}: every span was dropped: {total}"
            );
        }
        assert_nothing_left(&home, LONG);
    }
    assert!(failing.requests() > 0, "the failing collector was asked");
}

#[test]
fn a_door_continues_the_callers_traceparent_and_hands_the_harness_its_span() {
    if !otlp::usable() {
        return;
    }
    let receiver = Receiver::start(200);
    let home = Home::new();
    let manifest = home.write("capsule/murmur.yaml", &Fixture::default().yaml());
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint())];
    let run = Launch::start_env(&home, &manifest, &[], &env);
    let caller_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller_span = "00f067aa0ba902b7";
    let parent = format!("00-{caller_trace}-{caller_span}-01");
    let body = request(
        json!(1),
        "SendMessage",
        message("@run printf %s \"$TRACEPARENT\"", false),
    );
    let a2a = ("a2a-version", "1.0");
    let traced = [a2a, ("traceparent", &parent), ("tracestate", "vendor=x")];
    let resp = run.post(&body, &traced);
    let task = resp.json()["result"]["task"].clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    let id = task["id"].as_str().unwrap().to_owned();
    let said: Value =
        serde_json::from_str(task["artifacts"][0]["parts"][0]["text"].as_str().unwrap()).unwrap();

    // A poll with the same parent, and a message whose traceparent is garbage.
    let get = request(json!(2), "GetTask", json!({"id": id}));
    assert_eq!(
        run.post(&get, &[a2a, ("traceparent", &parent)]).json()["result"]["id"],
        id.as_str()
    );
    let garbage = request(json!(3), "SendMessage", message("@echo", false));
    let resp = run.post(&garbage, &[a2a, ("traceparent", "00-not-a-trace-01")]);
    let other = resp.json()["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // A refused message: exported with its error, and written nowhere. Counted once the
    // second message's own span is on file: the trace's writer is a thread of its own, and may
    // still be writing it when the answer arrives.
    let spans_on_file = || {
        home.trace(&run.session)
            .iter()
            .filter(|e| e["event_type"] == "span" && e["name"] == "SendMessage")
            .count()
    };
    assert!(wait_until(LONG, || spans_on_file() == 2));
    let before = home.trace_len(&run.session);
    let refused = request(
        json!(4),
        "SendMessage",
        json!({"message": {"role": "ROLE_USER"}}),
    );
    let resp = run.post(&refused, &[a2a, ("traceparent", &parent)]);
    assert_eq!(resp.json()["error"]["code"], -32602);

    let spans = receiver.wait_for("both tasks' attempts and the refusal", LONG, |spans| {
        spans
            .iter()
            .filter(|s| s.name == "invoke_agent fixture")
            .count()
            == 2
            && spans
                .iter()
                .any(|s| s.attr_str("error.type") == Some("-32602"))
    });
    let server = spans
        .iter()
        .find(|s| s.name == "SendMessage" && s.attr_str("a2a.task.id") == Some(id.as_str()))
        .unwrap();
    assert_eq!(server.trace_id, caller_trace);
    assert_eq!(server.parent_span_id, caller_span);
    assert_eq!(
        server.attr_str("a2a.task.state"),
        Some("TASK_STATE_COMPLETED")
    );
    let attempt = spans
        .iter()
        .find(|s| {
            s.name == "invoke_agent fixture" && s.attr_str("a2a.task.id") == Some(id.as_str())
        })
        .unwrap();
    assert_eq!(attempt.parent_span_id, server.span_id);
    // The harness was handed its attempt's span as TRACEPARENT (the caller's tracestate kept).
    assert_eq!(
        said["out"],
        format!("00-{caller_trace}-{}-01", attempt.span_id),
        "{said}"
    );
    let polls: Vec<&Span> = spans.iter().filter(|s| s.name == "GetTask").collect();
    assert_eq!(polls.len(), 1, "only the traced poll is a span: {polls:#?}");
    let poll = polls[0];
    assert_eq!(poll.parent_span_id, caller_span);
    assert_eq!(
        poll.attr_str("a2a.task.state"),
        Some("TASK_STATE_COMPLETED")
    );
    // A malformed traceparent is no parent: that task started a trace of its own.
    let fresh = spans
        .iter()
        .find(|s| s.name == "SendMessage" && s.attr_str("a2a.task.id") == Some(other.as_str()))
        .unwrap();
    assert!(
        fresh.is_root() && fresh.trace_id != caller_trace,
        "{fresh:?}"
    );
    let refusal = spans
        .iter()
        .find(|s| s.attr_str("error.type") == Some("-32602"))
        .unwrap();
    assert_eq!(refusal.status.code, "STATUS_CODE_ERROR");
    assert!(
        refusal.status.message.starts_with("Invalid params"),
        "{refusal:?}"
    );
    // Polls and refusals are exported, never written to the trace.
    assert_eq!(
        home.trace_len(&run.session),
        before,
        "the refusal wrote a record"
    );
    let recorded: Vec<String> = home
        .trace(&run.session)
        .into_iter()
        .filter(|e| e["event_type"] == "span")
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        recorded,
        [
            "invoke_agent fixture",
            "SendMessage",
            "invoke_agent fixture",
            "SendMessage"
        ]
    );
}

/// A harness that calls its gateway as a CLI would, `CALLS` times, and says the TRACEPARENT
/// it was handed.
const GATEWAY_HARNESS: &str = r#"
import json, os, urllib.request, urllib.error
base, key = os.environ["ANTHROPIC_BASE_URL"], os.environ["ANTHROPIC_API_KEY"]
def call():
    body = {"model": "claude-sonnet-5", "max_tokens": 64, "stream": True,
            "messages": [{"role": "user", "content": "the secret prompt"}]}
    req = urllib.request.Request(base + "/v1/messages", data=json.dumps(body).encode(),
        headers={"x-api-key": key, "content-type": "application/json", "anthropic-version": "2023-06-01"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            r.read()
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
statuses = [call() for _ in range(3)]
said = {"statuses": statuses, "traceparent": os.environ.get("TRACEPARENT"), "key": key}
open(os.environ["FIXTURE_STATE"] + "-telemetry.json", "w").write(json.dumps(said))
print("done")
"#;

const REAL_KEY: &str = "sk-ant-REAL-telemetry-never-in-a-span";

#[test]
fn chat_spans_carry_the_usage_the_gateway_metered_and_a_spend_ceiling_fails_one() {
    if !otlp::usable() {
        return;
    }
    let receiver = Receiver::start(200);
    let fake =
        Fake::start_with(|_| Reply::Stream(anthropic::text("", &["hi"], "end_turn", (1000, 500))));
    let home = Home::new();
    let script = home.write("gateway_harness.py", GATEWAY_HARNESS);
    let manifest = home.write(
        "caller.yaml",
        &format!(
            "name: caller\nversion: \"0.1.0\"\nartifacts:\n  - name: local/caller\n    version: \"0.1.0\"\n    runtime: driver\n    gateway:\n      endpoint: http://127.0.0.1:{port}\n      api_key: ${{REAL_ANTHROPIC_KEY}}\n      api: anthropic\n    process:\n      command: [\"python3\", \"{script}\"]\ninference:\n  transport: process\nlifecycle: {{ task_acceptance: queue, after_task: sleep, queue_depth: 2 }}\nspend: {{ max_tokens_per_task: 2000 }}\n",
            port = fake.port,
            script = script.display(),
        ),
    );
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint()),
        ("REAL_ANTHROPIC_KEY", REAL_KEY.to_owned()),
    ];
    let run = Launch::start_env(&home, &manifest, &[], &env);
    let id = run.start_task("call your model");
    let task = run.wait_task(&id, LONG, |s| {
        s == "TASK_STATE_FAILED" || s == "TASK_STATE_COMPLETED"
    });
    let spans = receiver.wait_for("three chat spans and the attempt", LONG, |spans| {
        spans
            .iter()
            .filter(|s| s.name == "chat claude-sonnet-5")
            .count()
            == 3
            && spans.iter().any(|s| s.name == "invoke_agent caller")
    });
    let attempt = spans
        .iter()
        .find(|s| s.name == "invoke_agent caller")
        .unwrap();
    assert_eq!(attempt.attr_str("a2a.task.id"), Some(id.as_str()), "{task}");
    let chats: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "chat claude-sonnet-5")
        .collect();
    for c in &chats {
        assert_eq!(c.kind, "SPAN_KIND_CLIENT");
        assert_eq!(c.parent_span_id, attempt.span_id);
        assert_eq!(c.trace_id, attempt.trace_id);
        assert_eq!(c.attr_str("gen_ai.operation.name"), Some("chat"));
        assert_eq!(c.attr_str("gen_ai.provider.name"), Some("anthropic"));
        assert_eq!(c.attr_str("gen_ai.request.model"), Some("claude-sonnet-5"));
    }
    // Two calls went out and were metered; the third passed the ceiling and was refused.
    let metered: Vec<&&Span> = chats
        .iter()
        .filter(|c| c.attr("gen_ai.usage.input_tokens").is_some())
        .collect();
    assert_eq!(metered.len(), 2, "{chats:#?}");
    for c in metered {
        assert_eq!(c.attr("gen_ai.usage.input_tokens"), Some(&json!(1000)));
        assert_eq!(c.attr("gen_ai.usage.output_tokens"), Some(&json!(500)));
        assert_eq!(
            c.attr("gen_ai.response.finish_reasons"),
            Some(&json!(["end_turn"]))
        );
        assert_eq!(c.attr("http.response.status_code"), Some(&json!(200)));
        assert!(c.attr("murmur.gen_ai.time_to_first_token_ms").is_some());
        assert!(c.status.code != "STATUS_CODE_ERROR", "{c:?}");
    }
    let refused = chats
        .iter()
        .find(|c| c.attr_str("error.type") == Some("spend_ceiling"))
        .expect("the refused call's span");
    assert_eq!(refused.status.code, "STATUS_CODE_ERROR");
    assert_eq!(refused.events[0].name, "murmur.spend.ceiling");
    assert_eq!(refused.events[0].attributes["murmur.spend.scope"], "task");
    // The harness was handed its attempt's span; it saw two answers, then the refusal.
    let path = PathBuf::from(format!("{}-telemetry.json", run.fixture_state.display()));
    let said: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(said["statuses"], json!([200, 200, 400]), "{said}");
    assert_eq!(
        said["traceparent"],
        format!("00-{}-{}-01", attempt.trace_id, attempt.span_id)
    );
    let placeholder = said["key"].as_str().unwrap();
    assert!(placeholder.starts_with("mur_gw_"), "{placeholder}");
    assert_nothing_secret(
        &spans,
        &[
            REAL_KEY,
            placeholder,
            "the secret prompt",
            "call your model",
        ],
    );
    assert_no_token_shapes(&spans);
}

#[test]
fn trace_show_otlp_writes_the_formations_spans_for_a_collector_to_load() {
    if !otlp::usable() {
        return;
    }
    // A run without a collector.
    let home = Home::new();
    let (code, stdout, stderr) = run_split(&home, &split(), &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let sessions = member_sessions(&stdout);
    let lead = &sessions[0].1;
    let out = home.root.join("spans.json");
    let (code, said, err) = home.run(&["trace", "show", lead, "--otlp", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let recorded: Vec<Value> = sessions
        .iter()
        .flat_map(|(_, s)| home.trace(s))
        .filter(|e| e["event_type"] == "span")
        .collect();
    assert_eq!(
        said,
        format!(
            "wrote {} spans of 3 session(s) to {}\n",
            recorded.len(),
            out.display()
        )
    );
    // The file is what a collector's OTLP/HTTP receiver takes: the official definitions read it.
    let receiver = Receiver::start(200);
    let resp = http_to(
        std::net::SocketAddr::from(([127, 0, 0, 1], receiver.port())),
        "POST",
        "/v1/traces",
        &[("content-type", "application/json")],
        &std::fs::read(&out).unwrap(),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let loaded = receiver.spans();
    assert_eq!(loaded.len(), recorded.len());
    for r in &recorded {
        let s = by_id(&loaded, r["span_id"].as_str().unwrap());
        assert_eq!(s.name, r["name"].as_str().unwrap());
        assert_eq!(s.trace_id, r["trace_id"].as_str().unwrap());
        assert_eq!(s.parent_span_id, r["parent_span_id"].as_str().unwrap_or(""));
        assert_eq!(s.start_ns, r["start_ns"].as_u64().unwrap());
    }
    let traces: BTreeSet<&str> = loaded.iter().map(|s| s.trace_id.as_str()).collect();
    assert_eq!(traces.len(), 1, "one trace: {loaded:#?}");
    let members: BTreeSet<&str> = loaded
        .iter()
        .filter_map(|s| s.resource.get("murmur.member").and_then(Value::as_str))
        .collect();
    assert_eq!(members, BTreeSet::from(["lead", "left", "right"]));
}

#[test]
fn a_formations_telemetry_block_points_every_member_at_its_collector() {
    if !otlp::usable() {
        return;
    }
    let receiver = Receiver::start(200);
    let home = Home::new();
    let dir = repo_root().join("manifests/split");
    let formation = home.write(
        "formation.yaml",
        &format!(
            "formation:\n  name: split\n  version: \"0.1.0\"\n  entry: lead\n  members:\n    lead: {{ manifest: {d}/lead.yaml, calls: [left, right] }}\n    left: {{ manifest: {d}/worker.yaml }}\n    right: {{ manifest: {d}/worker.yaml }}\ntelemetry:\n  endpoint: {e}\n  headers: {{ x-team: agents }}\n  service_name: split-formation\n  resource_attributes: {{ deployment.environment: test }}\n",
            d = dir.display(),
            e = receiver.endpoint()
        ),
    );
    let (code, stdout, stderr) = run_split(&home, &formation, &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let spans = receiver.wait_for("the members' attempts", LONG, |spans| {
        spans
            .iter()
            .filter(|s| s.name.starts_with("invoke_agent"))
            .count()
            == 3
    });
    for s in &spans {
        assert_eq!(s.resource["service.name"], "split-formation", "{s:?}");
        assert_eq!(s.resource["deployment.environment"], "test");
        assert_eq!(s.header("x-team"), Some("agents"));
    }
    // The environment wins over the block: OTEL_SDK_DISABLED turns it off.
    let before = receiver.requests();
    let off = [("OTEL_SDK_DISABLED", "true".to_owned())];
    let (code, stdout, stderr) = run_split(&home, &formation, &off);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(
        receiver.requests(),
        before,
        "nothing is exported when disabled"
    );
}

#[test]
fn a_wrong_endpoint_stops_the_launch_saying_which_setting() {
    let home = Home::new();
    let bad = [("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318".to_owned())];
    let (code, stdout, stderr) = run_split(&home, &split(), &bad);
    assert_eq!(code, 1, "{stdout}");
    assert_eq!(
        stderr,
        "error[E-CLI-030]: OTEL_EXPORTER_OTLP_ENDPOINT is \"localhost:4318\", which is no http:// URL; set it to the collector's OTLP/HTTP address, e.g. http://localhost:4318\n  hint: fix the variable (or the formation's telemetry block), or unset it\n"
    );
    assert!(member_sessions(&stdout).is_empty(), "nothing started");
    let dir = repo_root().join("manifests/split");
    let formation = home.write(
        "tls.yaml",
        &format!(
            "formation:\n  name: split\n  version: \"0.1.0\"\n  entry: lead\n  members:\n    lead: {{ manifest: {d}/lead.yaml, calls: [left, right] }}\n    left: {{ manifest: {d}/worker.yaml }}\n    right: {{ manifest: {d}/worker.yaml }}\ntelemetry:\n  endpoint: https://otlp.example.com\n",
            d = dir.display(),
        ),
    );
    let (code, _, stderr) = run_split(&home, &formation, &[]);
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        format!(
            "error[E-MAN-005]: {}: telemetry.endpoint must be an http:// URL, not \"https://otlp.example.com\"\n  hint: write the collector's OTLP/HTTP address, e.g. endpoint: http://localhost:4318 (murmur sends plain HTTP to a collector beside it, which forwards over TLS)\n",
            formation.display()
        )
    );
}

#[test]
fn a_members_restart_is_a_failed_span_with_its_event() {
    if !otlp::usable() {
        return;
    }
    let receiver = Receiver::start(200);
    let home = Home::new();
    let worker = home.write("worker/murmur.yaml", &Fixture::default().yaml());
    let formation = home.write(
        "f/formation.yaml",
        &format!(
            "formation:\n  name: up\n  version: \"0.1.0\"\n  entry: lead\n  members:\n    lead: {{ manifest: {w} }}\n    coder:\n      manifest: {w}\n      restart: on_failure\n",
            w = worker.display()
        ),
    );
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint())];
    let (mut run, members) = Launch::start_formation_env(&home, &formation, &[], &env);
    let coder = &members.iter().find(|m| m.name == "coder").unwrap().session;
    let record = home.home.join("run").join(format!("{coder}.json"));
    let pid_of = || -> u32 {
        let text = std::fs::read_to_string(&record).unwrap_or_default();
        serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|r| r["pid"].as_u64())
            .unwrap_or(0) as u32
    };
    let first = pid_of();
    signal(first, 9);
    assert!(
        wait_until(LONG, || {
            let pid = pid_of();
            pid != 0 && pid != first && alive(pid)
        }),
        "the coder was not started again"
    );
    let spans = receiver.wait_for("the restart's span", LONG, |spans| {
        spans.iter().any(|s| s.name == "restart coder")
    });
    let restart = spans.iter().find(|s| s.name == "restart coder").unwrap();
    assert_eq!(restart.attr_str("error.type"), Some("capsule_died"));
    assert_eq!(restart.status.code, "STATUS_CODE_ERROR");
    assert_eq!(
        restart.status.message,
        "member coder exited with status 137; restart 1"
    );
    assert_eq!(restart.attr_str("murmur.member"), Some("coder"));
    assert_eq!(restart.events[0].name, "murmur.member.restarted");
    assert_eq!(restart.events[0].attributes["murmur.restart.attempt"], 1);
    assert_eq!(restart.events[0].attributes["murmur.exit_code"], 137);
    // The member's trace holds the same span, before its member_restarted record.
    let trace = home.trace(coder);
    let at = |t: &str, name: Option<&str>| {
        trace
            .iter()
            .position(|e| e["event_type"] == t && name.is_none_or(|n| e["name"] == n))
            .unwrap_or_else(|| panic!("no {t}"))
    };
    assert!(at("span", Some("restart coder")) < at("member_restarted", None));
    signal(run.pid(), 15);
    assert_eq!(run.wait_exit(LONG), Some(0));
    assert_nothing_left(&home, LONG);
}

#[test]
fn a_sub_capsules_task_and_its_completion_continue_the_delegating_span() {
    if !otlp::usable() {
        return;
    }
    let receiver = Receiver::start(200);
    let home = Home::new();
    let child = Fixture {
        name: "child",
        ..Fixture::default()
    };
    home.write("d/child.yaml", &child.yaml());
    let top = Fixture {
        name: "top",
        ..Fixture::default()
    };
    let manifest = home.write(
        "d/top.yaml",
        &format!(
            "{}capabilities:\n  delegate:\n    allow: [child.yaml]\n",
            top.yaml()
        ),
    );
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint())];
    let run = Launch::start_env(&home, &manifest, &[], &env);
    let done = run.send("@delegate child @echo", false);
    assert_eq!(
        done["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{done}"
    );
    let spans = receiver.wait_for("the child's attempt and the completion", LONG, |spans| {
        spans.iter().any(|s| s.name == "invoke_agent child")
            && spans.iter().filter(|s| s.name == "SendMessage").count() >= 2
    });
    let top_attempt = spans.iter().find(|s| s.name == "invoke_agent top").unwrap();
    let delegate = spans
        .iter()
        .find(|s| s.name == "delegate-task child")
        .unwrap();
    assert_eq!(delegate.kind, "SPAN_KIND_CLIENT");
    assert_eq!(delegate.attr_str("murmur.call.status"), Some("completed"));
    assert!(delegate
        .attr_str("murmur.delegation.id")
        .is_some_and(|d| d.starts_with("dlg_")));
    let tool = by_id(&spans, &delegate.parent_span_id);
    assert_eq!(tool.name, "execute_tool delegate-task");
    assert_eq!(tool.parent_span_id, top_attempt.span_id);
    // The child's launch task runs under the delegating span, in the same trace.
    let child_attempt = spans
        .iter()
        .find(|s| s.name == "invoke_agent child")
        .unwrap();
    assert_eq!(child_attempt.trace_id, top_attempt.trace_id);
    assert_eq!(child_attempt.parent_span_id, delegate.span_id);
    assert_eq!(child_attempt.resource["murmur.capsule"], "child");
    // Its completion reached the parent's door as a SendMessage under the same span.
    let completion = spans
        .iter()
        .find(|s| {
            s.name == "SendMessage"
                && s.resource["murmur.capsule"] == "top"
                && s.parent_span_id == delegate.span_id
        })
        .expect("the completion's door span");
    assert_eq!(completion.trace_id, top_attempt.trace_id);
    // trace show --otlp of the parent brings the child's spans too.
    let out = home.root.join("delegated.json");
    let (code, said, err) = home.run(&[
        "trace",
        "show",
        &run.session,
        "--otlp",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(said.contains("of 2 session(s)"), "{said}");
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let names: BTreeSet<&str> = json["resourceSpans"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|rs| rs["scopeSpans"][0]["spans"].as_array().unwrap())
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert!(names.contains("invoke_agent child"), "{names:?}");
    assert!(names.contains("delegate-task child"), "{names:?}");
}

#[test]
fn a_canceled_task_fails_its_attempts_span_with_the_cancel_as_its_event() {
    let home = Home::new();
    let manifest = home.write("capsule/murmur.yaml", &Fixture::default().yaml());
    // No collector: the span records in the trace are what is checked.
    let run = Launch::start(&home, &manifest, &[]);
    let pidfile = home.root.join("harness.pid");
    let id = run.start_task(&format!("@pidfile {}\n@sleep 60", pidfile.display()));
    wait_pid(&pidfile);
    let canceled = run.rpc("CancelTask", json!({"id": id}));
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED");
    let attempt = || {
        home.trace(&run.session)
            .into_iter()
            .find(|e| e["event_type"] == "span" && e["name"] == "invoke_agent fixture")
    };
    assert!(
        wait_until(LONG, || attempt().is_some()),
        "the attempt's span ended"
    );
    let span = attempt().unwrap();
    assert_eq!(span["status"], "error", "{span}");
    assert_eq!(span["attributes"]["error.type"], "canceled");
    assert_eq!(span["attributes"]["murmur.task.outcome"], "canceled");
    assert_eq!(span["attributes"]["a2a.task.id"], id.as_str());
    let events: Vec<&str> = span["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(events, ["murmur.task.canceled"]);
}
