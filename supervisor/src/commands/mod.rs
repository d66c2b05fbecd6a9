//! One file per `mur` command.

pub mod cancel;
pub mod capsule;
pub mod helpers;
pub mod install;
pub mod ps;
pub mod render;
pub mod run;
pub mod stop;
pub mod token;
pub mod trace;
pub mod watch;

use serde_json::Value;

use crate::error::{CliError, Code};

/// A door's JSON-RPC error as a CLI error.
pub fn refused(url: &str, e: &Value) -> CliError {
    CliError::new(
        Code::Refused,
        format!(
            "the door at {url} answered {}: {}",
            e.get("code").and_then(Value::as_i64).unwrap_or(0),
            e.get("message").and_then(Value::as_str).unwrap_or("")
        ),
        "see the error codes under Errors in the agent card reference",
    )
}

/// `running:` / `ended:` lines for residue items (detached shells run on; delegations ended).
pub fn residue_lines(items: &[Value]) -> Vec<String> {
    items
        .iter()
        .map(|item| {
            let s = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
            match s("kind").as_str() {
                "detached_shell" => format!(
                    "running: {} ({}: {})",
                    s("command"),
                    s("work_id"),
                    s("binary")
                ),
                "delegation" => format!(
                    "ended: {} {} ({}, session {})",
                    s("capsule"),
                    s("version"),
                    s("delegation_id"),
                    s("child_session_id")
                ),
                other => format!("residue: {other} {item}"),
            }
        })
        .collect()
}

/// Writes a command's whole output. A reader that went away (`mur trace show | head`) ends the
/// output quietly: `print!` would panic on the broken pipe.
pub fn emit(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
}
