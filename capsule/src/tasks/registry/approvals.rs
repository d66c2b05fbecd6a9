//! The registry's side of approvals (`super::super::approval`): a question opened on a working
//! task, and given up by its asker. Its answer arrives as a reply (`Registry::reply`), which
//! also checks who may give it.

use tokio::sync::oneshot;

use super::Registry;
use crate::ids::{ApprovalId, TaskId};
use crate::tasks::approval::{Question, Verdict};
use crate::tasks::state::TaskState;

impl Registry {
    /// The harness's CLI asks to run a tool: the task waits in TASK_STATE_INPUT_REQUIRED with
    /// the question's sentence as its prompt and status message, and its `approval` data part,
    /// until an answer comes ([`Registry::reply`]), the asker withdraws it, or a cancel drops
    /// the sender (read as [`Verdict::canceled`]). `None` when the task is no longer working.
    pub fn request_approval(
        &self,
        id: &TaskId,
        question: Question,
    ) -> Option<oneshot::Receiver<Verdict>> {
        let mut inner = self.lock();
        let task = inner.tasks.get_mut(id)?;
        if task.state != TaskState::Working {
            return None;
        }
        task.prompt = Some(question.sentence());
        task.approval = Some(Box::new(question));
        let (tx, rx) = oneshot::channel();
        inner.controls.get_mut(id)?.approval = Some(tx);
        inner.set_state(id, TaskState::InputRequired);
        drop(inner);
        self.changed();
        Some(rx)
    }

    /// The asker gives up approval `approval` (its timeout passed, the CLI withdrew it, the
    /// attempt ended): a task still waiting on it is WORKING again.
    pub fn withdraw_approval(&self, id: &TaskId, approval: &ApprovalId) {
        let mut inner = self.lock();
        let Some(task) = inner.tasks.get_mut(id) else {
            return;
        };
        if task.approval.as_ref().is_none_or(|q| &q.id != approval) {
            return;
        }
        task.approval = None;
        task.prompt = None;
        let waiting = task.state == TaskState::InputRequired;
        if let Some(c) = inner.controls.get_mut(id) {
            c.approval = None;
        }
        if waiting {
            inner.set_state(id, TaskState::Working);
        } else {
            inner.touch(id);
        }
        drop(inner);
        self.changed();
    }
}
