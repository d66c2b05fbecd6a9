//! The task registry: every task of the session, its state machine, the run queue, who sees
//! which task, and the ListTasks order. One mutex guards it; no caller holds it across an await.

pub mod approval;
pub mod page_token;
mod registry;
mod residue;
mod state;
mod task;

pub use registry::{
    Admission, CancelRefusal, Journal, ListPage, ListQuery, Notes, Observer, Outcome, Registry,
    Reply, ReplyRefusal, Retention, Started, RETAINED,
};
pub use residue::{Residue, ResidueItem};
pub use state::{StateFilter, TaskState};
pub use task::{Owner, Status, Task, TaskInput, Viewer};
