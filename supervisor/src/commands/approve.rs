//! `mur approve ADDRESS [APPROVAL] [--reason TEXT]` and `mur deny …`: answer a question a task of
//! a running session waits on (docs/agent-clis.md "Approvals"), with the operator's token. With
//! no APPROVAL the one open question is answered; with several, each is listed to name one.

use crate::approvals::{self, Decision};
use crate::error::CliResult;
use crate::records;
use crate::terminal::field;

pub async fn run(
    address: &str,
    approval: Option<&str>,
    decision: Decision,
    reason: Option<&str>,
) -> CliResult<i32> {
    let rec = records::resolve_running(Some(address))?;
    let open = approvals::open(&rec).await?;
    let question = approvals::pick(&open, approval, address)?;
    approvals::answer(&rec, question, decision, reason).await?;
    let done = match decision {
        Decision::Approve => "approved",
        Decision::Deny => "denied",
    };
    println!(
        "{done}: {} ({}) {}",
        field(&question.approval_id),
        field(&question.task_id),
        question.shown()
    );
    Ok(0)
}
