//! Interop: Google's Agent Development Kit (google-adk, pinned in scripts/setup_test_deps.py and
//! installed into its own venv) as an A2A client of a real `mur` capsule. ADK reaches a remote
//! agent through `RemoteA2aAgent`, run here as an ADK user with no model runs it: the root agent
//! of an `InMemoryRunner`, each user message sent with `run_async`. The ADK side is
//! tests/interop/adk_client.py; these tests launch a capsule of the fixture harness per test,
//! run one scenario of the driver, in ADK's streaming mode (its default: SendStreamingMessage)
//! and in its non-streaming mode (SendMessage), and check what ADK kept in its session and what
//! the door says happened. Without ADK they fail under CI=true and skip loudly otherwise
//! (docs/interop.md).

#[path = "support/clients.rs"]
mod clients;
mod support;

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use serde_json::{json, Value};
use support::*;

const ADK_VERSION: &str = "2.13.0";
/// The name setup records a failed install under (target/interop-clients/adk.unavailable).
const CLIENT: &str = "adk";
/// The RemoteA2aAgent's name, so the author of every event ADK makes of the door's answers.
const AGENT: &str = "murmur_door";
/// What the fixture harness answers plain text with.
const ANSWER: &str = "Acknowledged.";
/// The text of the message murmur puts on a completed task's terminal status. Streamed, ADK makes
/// that status its own event, so it is stored after the answer.
const COMPLETED: &str = "task completed";
/// The question the driver's `input_required` scenario has the harness ask (`@ask`), and the
/// reply it sends; the harness answers `reply: <reply>`.
const QUESTION: &str = "Which colour should the report use?";
const REPLY_ANSWER: &str = "reply: teal";
/// Seconds the driver lets one turn run before it stops it and reports `timedOut`: past the
/// `long` scenario's 17 s, so only a turn that hangs reaches it.
const TURN_LIMIT: &str = "40";

/// The ADK venv's interpreter (setup makes it).
fn python() -> PathBuf {
    clients::dir().join("adk-venv/bin/python")
}

/// Whether the pinned ADK imports RemoteA2aAgent under [`python`] (probed once per test binary:
/// importing ADK takes seconds); when not, fails under CI=true and skips loudly otherwise.
fn adk_usable() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    let present = *PRESENT.get_or_init(|| {
        let probe = Command::new(python())
            .args([
                "-c",
                "import google.adk.agents.remote_a2a_agent, importlib.metadata as m; \
                 print(m.version('google-adk'))",
            ])
            .output();
        let present = probe.is_ok_and(|out| {
            out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == ADK_VERSION
        });
        if !present {
            eprintln!(
                "google-adk {ADK_VERSION} is not importable by {}: `python3 scripts/setup_test_deps.py`",
                python().display()
            );
        }
        present
    });
    clients::usable(CLIENT, present)
}

/// The card URL ADK is given: the host the card's interface names (`localhost`), with no path,
/// so ADK fetches /.well-known/agent-card.json from the same origin it will then call.
fn card_url(run: &Launch) -> String {
    format!("http://localhost:{}", run.port)
}

/// The `--streaming` value of a mode.
fn mode(streaming: bool) -> &'static str {
    if streaming {
        "true"
    } else {
        "false"
    }
}

/// Runs the ADK driver on `card` with `scenario` and `extra` arguments; answers the JSON object
/// it printed, or fails with what it wrote.
fn drive(card: &str, scenario: &str, extra: &[&str]) -> Value {
    let out = Command::new(python())
        .arg(repo_root().join("tests/interop/adk_client.py"))
        .args([card, scenario, "--turn-timeout", TURN_LIMIT])
        .args(extra)
        .output()
        .expect("run the ADK driver");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the ADK driver failed ({}):\n{stderr}\n{stdout}",
        out.status
    );
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("the ADK driver printed no JSON ({e}):\n{stdout}\n{stderr}"))
}

/// [`drive`] in one streaming mode, optionally with a bearer token.
fn drive_mode(run: &Launch, scenario: &str, streaming: bool, token: Option<&str>) -> Value {
    let mut extra = vec!["--streaming", mode(streaming)];
    if let Some(token) = token {
        extra.extend(["--token", token]);
    }
    drive(&card_url(run), scenario, &extra)
}

/// Turn `n` of what ADK saw, which must have ended by itself, without an error.
fn turn(seen: &Value, n: usize) -> &Value {
    let turn = &seen["turns"][n];
    assert_eq!(turn["timedOut"], false, "ADK never ended turn {n}: {seen}");
    assert_eq!(turn["errors"], json!([]), "turn {n}: {seen}");
    turn
}

/// The only id ADK saw under `key` (contextIds, taskIds), or a failure naming what it saw.
fn only_id<'a>(seen: &'a Value, key: &str) -> &'a str {
    match seen[key].as_array().map(Vec::as_slice) {
        Some([Value::String(id)]) => id,
        _ => panic!("ADK should have seen exactly one of {key}: {seen}"),
    }
}

/// One ADK event as the driver summarises it: an event of the door's agent with these texts
/// (and, for an input-required task, ADK's mock call carrying the question), on the task.
fn event(texts: &[&str], calls: Value, task: &str, context: &str) -> Value {
    json!({"author": AGENT, "partial": false, "texts": texts, "thoughts": [], "functionCalls": calls,
           "taskId": task, "contextId": context, "error": null, "statusCode": null})
}

/// The events of one turn that ADK makes of the door's answer `text` on a task that completes.
/// Streamed: the opening task (no text), the `response` artifact (which must arrive with
/// `lastChunk: true`, or ADK keeps it `partial` and never stores it), then the terminal status's
/// message. Held: one event of the finished task's artifacts.
fn answered(text: &str, streaming: bool, task: &str, context: &str) -> Value {
    if streaming {
        json!([
            event(&[], json!([]), task, context),
            event(&[text], json!([]), task, context),
            event(&[COMPLETED], json!([]), task, context),
        ])
    } else {
        json!([event(&[text], json!([]), task, context)])
    }
}

/// What ADK stores of a completed answer: the answer, then (streamed) the terminal status's text.
fn stored(text: &str, streaming: bool) -> Value {
    if streaming {
        json!([text, COMPLETED])
    } else {
        json!([text])
    }
}

/// The door's own view of a task: its state, context and response artifact's text.
fn door_view(task: &Value) -> Value {
    json!({"state": task["status"]["state"], "contextId": task["contextId"],
           "response": task["artifacts"][0]["parts"][0]["text"]})
}

/// Checks the door's view of `task` (GetTask with `token`, or on the public door).
fn assert_door(run: &Launch, token: Option<&str>, task: &str, context: &str, text: &str) {
    let got = match token {
        Some(token) => clients::door_rpc(run, token, "GetTask", json!({"id": task})),
        None => assert_result(&run.call("GetTask", json!({"id": task})), "GetTask"),
    };
    assert_eq!(
        door_view(&got),
        json!({"state": "TASK_STATE_COMPLETED", "contextId": context, "response": text}),
        "the door's view of task {task}"
    );
}

/// One message, one answer: the answer ADK stores equals the harness's, and is the door's.
fn answer_is_stored(streaming: bool) {
    one_answer("answer", streaming);
}

/// The driver's `scenario` of one message: ADK's events, what it stored, and the door's task.
fn one_answer(scenario: &str, streaming: bool) {
    if !adk_usable() {
        return;
    }
    let home = Home::new();
    let run = start_fixture(&home, "murmur.yaml", &Fixture::default(), &[]);
    let seen = drive_mode(&run, scenario, streaming, None);

    let (task, context) = (only_id(&seen, "taskIds"), only_id(&seen, "contextIds"));
    let first = turn(&seen, 0);
    assert_eq!(first["events"], answered(ANSWER, streaming, task, context));
    assert_eq!(first["storedTexts"], stored(ANSWER, streaming));
    assert_door(&run, None, task, context, ANSWER);
}

#[test]
fn adk_stores_the_capsules_answer_streaming() {
    answer_is_stored(true);
}

#[test]
fn adk_stores_the_capsules_answer_not_streaming() {
    answer_is_stored(false);
}

/// Two messages in one ADK session: ADK sends the second in the context the door gave the
/// first, so both tasks share one A2A context, as the door agrees.
fn two_turns_share_a_context(streaming: bool) {
    if !adk_usable() {
        return;
    }
    let home = Home::new();
    let run = start_fixture(&home, "murmur.yaml", &Fixture::default(), &[]);
    let seen = drive_mode(&run, "two_turns", streaming, None);

    let context = only_id(&seen, "contextIds");
    let tasks: Vec<&str> = seen["taskIds"]
        .as_array()
        .map(|ids| ids.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert_eq!(tasks.len(), 2, "one task per turn: {seen}");
    for (n, task) in tasks.iter().enumerate() {
        let t = turn(&seen, n);
        assert_eq!(
            t["events"],
            answered(ANSWER, streaming, task, context),
            "turn {n}"
        );
        assert_eq!(t["storedTexts"], stored(ANSWER, streaming), "turn {n}");
        assert_door(&run, None, task, context, ANSWER);
    }
}

#[test]
fn adk_keeps_one_context_over_two_turns_streaming() {
    two_turns_share_a_context(true);
}

#[test]
fn adk_keeps_one_context_over_two_turns_not_streaming() {
    two_turns_share_a_context(false);
}

/// A task that asks for input: ADK shows the harness's question (as its mock input call), the
/// turn ends there, and the user's plain reply resumes the same task, whose answer ADK stores.
fn input_required_round_trip(streaming: bool) {
    if !adk_usable() {
        return;
    }
    let home = Home::new();
    let run = start_fixture(&home, "murmur.yaml", &Fixture::default(), &[]);
    let seen = drive_mode(&run, "input_required", streaming, None);

    let (task, context) = (only_id(&seen, "taskIds"), only_id(&seen, "contextIds"));
    let asked = turn(&seen, 0);
    assert_eq!(asked["question"], QUESTION, "{seen}");
    let call = json!([{"name": "mock_function_call_for_required_user_input",
                       "args": {"input_required": QUESTION}}]);
    // Streamed, the door sends the question as its `prompt` artifact and then as the
    // input-required status's message, which ADK turns into its mock call; held, the task
    // comes back at input-required with the question as its status message.
    let (events, kept) = if streaming {
        let opening = event(&[], json!([]), task, context);
        let prompt = event(&[QUESTION], json!([]), task, context);
        (
            json!([opening, prompt, event(&[], call, task, context)]),
            json!([QUESTION]),
        )
    } else {
        (json!([event(&[], call, task, context)]), json!([]))
    };
    assert_eq!(asked["events"], events);
    assert_eq!(asked["storedTexts"], kept);

    let replied = turn(&seen, 1);
    assert_eq!(replied["question"], Value::Null);
    assert_eq!(replied["storedTexts"], stored(REPLY_ANSWER, streaming));
    assert_eq!(
        replied["stored"],
        if streaming { COMPLETED } else { REPLY_ANSWER }
    );
    assert_door(&run, None, task, context, REPLY_ANSWER);
}

#[test]
fn adk_answers_an_input_required_task_streaming() {
    input_required_round_trip(true);
}

#[test]
fn adk_answers_an_input_required_task_not_streaming() {
    input_required_round_trip(false);
}

/// A task longer than the door's 15 s stream heartbeat (capsule/src/stream/sse.rs): streamed,
/// ADK reads past the heartbeat comment; held, it waits the whole task on one request.
fn long_task_answers(streaming: bool) {
    one_answer("long", streaming);
}

#[test]
fn adk_waits_out_a_task_past_the_heartbeat_streaming() {
    long_task_answers(true);
}

#[test]
fn adk_waits_out_a_task_past_the_heartbeat_not_streaming() {
    long_task_answers(false);
}

/// ADK's error event for a call the door refused with 401: the status only, none of the body.
fn refused(url: &str) -> Value {
    let error = format!(
        "A2A request failed: HTTP Error 401: Client error '401 Unauthorized' for url '{url}'\n\
         For more information check: https://developer.mozilla.org/en-US/docs/Web/HTTP/Status/401"
    );
    json!({"author": AGENT, "partial": false, "texts": [], "thoughts": [], "functionCalls": [],
           "taskId": null, "contextId": null, "error": error, "statusCode": "None"})
}

/// Behind a bearer door, through ADK's own auth (an HTTP bearer `auth_scheme` with its
/// `auth_credential`): the operator token is answered in both modes; a token the session never
/// minted, and none, are refused with the door's 401 and start nothing.
#[test]
fn adk_authenticates_with_a_bearer_token() {
    if !adk_usable() {
        return;
    }
    let home = Home::new();
    let (run, token) = clients::start_authenticated(&home);
    let url = card_url(&run);
    for streaming in [true, false] {
        let seen = drive_mode(&run, "answer", streaming, Some(&token));
        let (task, context) = (only_id(&seen, "taskIds"), only_id(&seen, "contextIds"));
        assert_eq!(turn(&seen, 0)["storedTexts"], stored(ANSWER, streaming));
        assert_door(&run, Some(&token), task, context, ANSWER);
    }
    for (token, why) in [
        (Some("mur_not-minted"), "a forged token"),
        (None, "no token"),
    ] {
        let seen = drive_mode(&run, "answer", true, token);
        let first = &seen["turns"][0];
        assert_eq!(first["events"], json!([refused(&url)]), "{why}: {seen}");
        assert_eq!(first["storedTexts"], json!([]), "{why}");
    }
    quiet(&run, &home);
    let received = home
        .trace(&run.session)
        .iter()
        .filter(|e| e["event_type"] == "a2a_task_received")
        .count();
    assert_eq!(
        received, 2,
        "only the two authenticated messages reached the door"
    );
}

/// The single error event ADK yields when it cannot use the door at all.
fn failed(error: &str) -> Value {
    json!([{"author": AGENT, "partial": false, "texts": [], "thoughts": [], "functionCalls": [],
            "taskId": null, "contextId": null, "error": error, "statusCode": null}])
}

/// Where ADK 2.13 refuses or breaks before the door is asked anything (docs/interop.md): a card
/// fetched from 127.0.0.1 whose interface says localhost (its same-origin rule), a card URL
/// with a trailing slash (fetched as the URL itself, the JSON-RPC endpoint), and a non-streaming
/// client factory given no httpx client (sent without A2A-Version, so -32009).
#[test]
fn adk_departures_are_pinned() {
    if !adk_usable() {
        return;
    }
    let home = Home::new();
    let run = start_fixture(&home, "murmur.yaml", &Fixture::default(), &[]);
    let (port, url) = (run.port, card_url(&run));
    let init =
        "Failed to initialize remote A2A agent: Failed to initialize remote A2A agent murmur_door";

    let seen = drive(&format!("http://127.0.0.1:{port}"), "answer", &[]);
    let origin = format!(
        "{init}: Agent card RPC URL must have the same origin as the location the card was \
         fetched from (http://127.0.0.1:{port}): {url}"
    );
    assert_eq!(seen["turns"][0]["events"], failed(&origin));

    let seen = drive(&format!("{url}/"), "answer", &[]);
    let slash = format!(
        "{init}: Failed to resolve AgentCard from URL {url}/: Failed to fetch agent card from \
         {url} (HTTP 404): Client error '404 Not Found' for url '{url}'\n\
         For more information check: https://developer.mozilla.org/en-US/docs/Web/HTTP/Status/404"
    );
    assert_eq!(seen["turns"][0]["events"], failed(&slash));

    let seen = drive(&url, "answer", &["--streaming", "false", "--bare-factory"]);
    let version = "A2A request failed: A2A version '' is not supported; this agent speaks 1.0";
    let events = &seen["turns"][0]["events"];
    assert_eq!(events[0]["error"], version, "{seen}");

    quiet(&run, &home);
    assert_eq!(run.total_tasks(), 0, "none of these reached a task");
}
