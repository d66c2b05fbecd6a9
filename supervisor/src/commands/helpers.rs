//! The helpers a harness runs to reach its own capsule (DESIGN §8), authorized by
//! `MURMUR_TASK_TOKEN`: each posts to the capsule's control surface (`/control/<helper>`),
//! prints its answer on stdout and exits 0, or exits 1 with the reason on stderr
//! (`error[E-CLI-020]: …`). The capsule does the work — policy, calls, waiting, tracing — so a
//! helper is only its command line.

use serde_json::{json, Map, Value};

use crate::client;
use crate::error::{CliError, CliResult, Code};

fn env(name: &str) -> CliResult<String> {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .ok_or_else(|| {
            CliError::new(
                Code::Helper,
                format!("{name} is not set: this helper runs inside a task a capsule started"),
                "run it from a harness that a murmur capsule launched",
            )
        })
}

/// Posts `body` to this task's capsule at `/control/<helper>`.
async fn control(helper: &str, body: Value) -> CliResult<(u16, Value)> {
    let url = env("MURMUR_DOOR_URL")?;
    let token = env("MURMUR_TASK_TOKEN")?;
    client::control(&url, &format!("/control/{helper}"), &token, body).await
}

/// A refusal from the capsule, with a hint fitting its code.
fn refused(helper: &str, body: &Value) -> CliError {
    let code = body.get("error").and_then(Value::as_str).unwrap_or("");
    let message = body
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("the capsule refused it");
    // The capsule's own hint, where it knows more than the code says (a TLS failure).
    let told = body.get("hint").and_then(Value::as_str);
    let hint = match code {
        "not_allowed" => "the capsule may reach only what capabilities.network.allow names: add the destination to its manifest",
        "not_a_member" | "unknown_member" => "call one of the members $MURMUR_GUIDE lists",
        "unknown_capsule" => "delegate to one of the capsules the message names (the manifests in capabilities.delegate.allow)",
        "delegation_unavailable" => "this capsule cannot delegate here; do the work yourself or end with mur end-without-answer",
        "delegation_not_started" => "the sub-capsule could not start: check its manifest, or carry on without it",
        "peer_refused" => "read the peer's reason; a capsule sends as a peer, which the peer must accept (exports.peer_tasks.accept: true)",
        "peer_unreachable" => "check that the peer is running (mur ps) and the URL names its door",
        "timed_out" => "wait longer with --timeout SECS, or carry on without the answer",
        "task_ending" => "end-without-answer ran: exit now",
        "task_stopped" | "task_not_running" | "task_canceled" | "task_not_working" => {
            "the task was canceled or has ended; end the harness"
        }
        _ => "the task may have been canceled; end the harness",
    };
    CliError::new(
        Code::Helper,
        format!("{helper} was refused: {message}"),
        told.unwrap_or(hint),
    )
}

fn with_timeout(mut body: Map<String, Value>, timeout: Option<u64>) -> Value {
    if let Some(secs) = timeout {
        body.insert("timeout_secs".into(), Value::from(secs));
    }
    Value::Object(body)
}

/// `mur request-input QUESTION`: waits in TASK_STATE_INPUT_REQUIRED and prints the reply.
pub async fn request_input(question: &str) -> CliResult<i32> {
    let (status, body) = control("request-input", json!({"question": question})).await?;
    if status == 200 {
        println!(
            "{}",
            body.get("reply").and_then(Value::as_str).unwrap_or("")
        );
        return Ok(0);
    }
    Err(refused("request-input", &body))
}

/// What `mur send-message` sends.
pub struct SendArgs {
    pub url: String,
    pub text: String,
    pub context: Option<String>,
    pub task: Option<String>,
    pub timeout: Option<u64>,
}

/// `mur send-message URL TEXT`: prints the peer's task, as one line of JSON, once it settled
/// (whatever its state: completed, failed, canceled, rejected, input-required).
pub async fn send_message(args: SendArgs) -> CliResult<i32> {
    let mut body = Map::new();
    body.insert("url".into(), Value::from(args.url));
    body.insert("text".into(), Value::from(args.text));
    if let Some(c) = args.context {
        body.insert("context_id".into(), Value::from(c));
    }
    if let Some(t) = args.task {
        body.insert("task_id".into(), Value::from(t));
    }
    let (status, answer) = control("send-message", with_timeout(body, args.timeout)).await?;
    match (status, answer.get("task")) {
        (200, Some(task)) => {
            println!("{task}");
            Ok(0)
        }
        _ => Err(refused("send-message", &answer)),
    }
}

/// `mur call-member NAME TEXT`: prints the member's answer; fails with the call's status and
/// reason when it gave none.
pub async fn call_member(member: &str, text: &str, timeout: Option<u64>) -> CliResult<i32> {
    let mut body = Map::new();
    body.insert("member".into(), Value::from(member));
    body.insert("text".into(), Value::from(text));
    let (status, called) = control("call-member", with_timeout(body, timeout)).await?;
    if status != 200 {
        return Err(refused("call-member", &called));
    }
    let field = |k: &str| called.get(k).and_then(Value::as_str).unwrap_or("");
    if field("status") == "completed" {
        println!("{}", field("answer"));
        return Ok(0);
    }
    let hint = match field("status") {
        "timed_out" => "wait longer with --timeout SECS, or carry on without the member's answer",
        "unreachable" => "the member's capsule may have stopped; carry on without it, or end with mur end-without-answer",
        "rejected" => "the member refused the task (it may be busy): try again later, or carry on without it",
        _ => "carry on without the member's answer, or end the task with mur end-without-answer",
    };
    Err(CliError::new(
        Code::Helper,
        format!(
            "member {member} gave no answer ({}): {}",
            field("status"),
            field("reason")
        ),
        hint,
    ))
}

/// `mur delegate-task CAPSULE TEXT`: prints the sub-capsule's response once its task completed;
/// fails with the delegation's status and reason otherwise (`canceled` when this task was).
pub async fn delegate_task(capsule: &str, text: &str, timeout: Option<u64>) -> CliResult<i32> {
    let mut body = Map::new();
    body.insert("capsule".into(), capsule.into());
    body.insert("text".into(), text.into());
    let (status, delegated) = control("delegate-task", with_timeout(body, timeout)).await?;
    if status != 200 {
        return Err(refused("delegate-task", &delegated));
    }
    let field = |k: &str| delegated.get(k).and_then(Value::as_str).unwrap_or("");
    if field("status") == "completed" {
        println!("{}", field("response"));
        return Ok(0);
    }
    let hint = match field("status") {
        "canceled" | "ended" => "the task was canceled or has ended; end the harness",
        "timed_out" => "wait longer with --timeout SECS, or carry on without the sub-capsule's response",
        _ => "carry on without the sub-capsule's response, or end the task with mur end-without-answer",
    };
    Err(CliError::new(
        Code::Helper,
        format!(
            "sub-capsule {capsule} gave no response ({}): {}",
            field("status"),
            field("reason")
        ),
        hint,
    ))
}

/// `mur end-without-answer REASON`: the task will fail with REASON and noAnswer; prints that
/// the harness should exit now.
pub async fn end_without_answer(reason: &str) -> CliResult<i32> {
    let (status, body) = control("end-without-answer", json!({"reason": reason})).await?;
    if status == 200 {
        println!(
            "{}",
            body.get("message").and_then(Value::as_str).unwrap_or("")
        );
        return Ok(0);
    }
    Err(refused("end-without-answer", &body))
}
