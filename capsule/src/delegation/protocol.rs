//! The control socket between a capsule and its supervisor: one stream socket per capsule,
//! inherited as descriptor [`CONTROL_FD`] (no path on disk, so nothing else can connect), one
//! JSON object per line each way. Requests carry an `id` the answer repeats, so several may be
//! in flight.
//!
//! - `delegate`: start a sub-capsule from `manifest` (which the capsule found in its
//!   `capabilities.delegate.allow`), give it `text` as its task, and answer once it runs.
//! - `end`: stop the sub-capsule of `delegation_id` (it cancels its own task, and so its own
//!   sub-capsules) and answer once it is gone.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The descriptor a capsule finds its control socket on.
pub const CONTROL_FD: i32 = 4;

/// One request, capsule → supervisor.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub id: u64,
    #[serde(flatten)]
    pub op: Op,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    Delegate {
        /// `dlg_` + 32 hex, minted by the delegating capsule.
        delegation_id: String,
        /// The task of the delegating capsule that delegates.
        parent_task: String,
        /// Absolute path of the sub-capsule's manifest (one of `capabilities.delegate.allow`).
        manifest: PathBuf,
        /// The sub-capsule's task.
        text: String,
        /// The token the child presents to the parent's door with its completion (the parent
        /// keeps only its digest); `None` when the parent's door is public.
        completion_token: Option<String>,
        /// The delegating span, as a W3C `traceparent`: the child's task continues it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        traceparent: Option<String>,
    },
    End {
        delegation_id: String,
    },
}

/// One answer, supervisor → capsule.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub id: u64,
    #[serde(flatten)]
    pub outcome: Outcome,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// `delegate`: the child runs, with its task.
    Started(Child),
    /// `end`: the child is gone.
    Ended {},
    /// Either: why not (a sentence that names what was wrong).
    Error(String),
}

/// A started sub-capsule, as the residue's `delegation` item names it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Child {
    pub capsule: String,
    pub version: String,
    pub child_session_id: String,
    /// Its work folder, absolute (`…/children/<capsule>-<16 hex>`).
    pub child_workdir: PathBuf,
    pub url: String,
}

/// What a sub-capsule is told about where its completion goes (in its `CapsuleConfig`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct CompletionTarget {
    /// The parent's door, `http://localhost:PORT`.
    pub url: String,
    /// The parent's session (`x-murmur-completion-session`).
    pub session_id: String,
    /// `x-murmur-delegation-id`.
    pub delegation_id: String,
    /// Presented as `Authorization: Bearer` on an authenticated parent door.
    pub token: Option<String>,
    /// The delegating span (`traceparent`), which the completion continues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn requests_and_answers_are_one_flat_json_object_each() {
        let r = Request {
            id: 7,
            op: Op::End {
                delegation_id: "dlg_1".into(),
            },
        };
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"id": 7, "op": "end", "delegation_id": "dlg_1"})
        );
        let a = Response {
            id: 7,
            outcome: Outcome::Error("no".into()),
        };
        assert_eq!(
            serde_json::to_value(&a).unwrap(),
            json!({"id": 7, "error": "no"})
        );
        let back: Response = serde_json::from_value(json!({"id": 7, "ended": {}})).unwrap();
        assert_eq!(back.outcome, Outcome::Ended {});
        let d: Request = serde_json::from_value(json!({"id": 1, "op": "delegate",
            "delegation_id": "dlg_1", "parent_task": "tsk_1", "manifest": "/w/m.yaml",
            "text": "hi", "completion_token": null}))
        .unwrap();
        assert!(matches!(d.op, Op::Delegate { .. }));
    }
}
