//! The helpers a harness runs to reach its own capsule (DESIGN §8), authorized by
//! `MURMUR_TASK_TOKEN`. Each prints its answer on stdout, or exits non-zero with the reason.

use serde_json::{json, Value};

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

/// `mur request-input QUESTION`: waits in TASK_STATE_INPUT_REQUIRED and prints the reply.
pub async fn request_input(question: &str) -> CliResult<i32> {
    let url = env("MURMUR_DOOR_URL")?;
    let token = env("MURMUR_TASK_TOKEN")?;
    let (status, body) = client::control(
        &url,
        "/control/request-input",
        &token,
        json!({"question": question}),
    )
    .await?;
    if status == 200 {
        println!(
            "{}",
            body.get("reply").and_then(Value::as_str).unwrap_or("")
        );
        return Ok(0);
    }
    Err(CliError::new(
        Code::Helper,
        format!(
            "request-input was refused: {}",
            body.get("message")
                .and_then(Value::as_str)
                .unwrap_or("the capsule refused it")
        ),
        "the task may have been canceled; end the harness",
    ))
}
