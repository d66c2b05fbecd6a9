//! `mur approve ADDRESS [APPROVAL] [--reason TEXT]` and `mur deny …`: answer a question a task of
//! a running session waits on (docs/agent-clis.md "Approvals"), with the operator's token. With
//! no APPROVAL the one open question is answered; with several, each is listed to name one.

use crate::approvals::{self, Decision};
use crate::error::CliResult;
use crate::records;
use crate::terminal::field;

/// What `mur approve` and `mur deny` are told.
#[derive(clap::Args, Debug)]
pub struct Answer {
    /// The session (`@N`, the end of its id, or the whole id)
    pub address: String,
    /// The question's approval id (apr_…) or its task's id; needed when several are open
    pub approval: Option<String>,
    /// Why: the trace keeps it, and a denied agent reads it
    #[arg(long)]
    pub reason: Option<String>,
}

pub async fn run(answer: &Answer, decision: Decision) -> CliResult<i32> {
    let address = answer.address.as_str();
    let rec = records::resolve_running(Some(address))?;
    let open = approvals::open(&rec).await?;
    let question = approvals::pick(&open, answer.approval.as_deref(), address)?;
    approvals::answer(&rec, question, decision, answer.reason.as_deref()).await?;
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
