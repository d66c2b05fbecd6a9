//! What a session leaves running past a task's end (agent-card.md "Residue items"): detached
//! shell commands and delegated sub-capsules. Whoever starts such a thing enters it here and
//! takes it out when it ends, so murmur.StopSession and CancelTask report what actually runs.
//! A process capsule's harness attempts are contained (`crate::process`) and end with their
//! attempt, so they never leave anything to enter here.

use std::sync::Mutex;

use serde_json::{json, Value};

use crate::ids::TaskId;

/// One thing left running, as the spec spells it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResidueItem {
    DetachedShell {
        work_id: String,
        binary: String,
        command: String,
        started_at_ms: i64,
    },
    Delegation {
        delegation_id: String,
        capsule: String,
        version: String,
        child_session_id: String,
        child_workdir: String,
    },
}

impl ResidueItem {
    /// The item's JSON, `kind` first, as the messaging guide lays it out.
    pub fn to_json(&self) -> Value {
        match self {
            ResidueItem::DetachedShell {
                work_id,
                binary,
                command,
                started_at_ms,
            } => json!({
                "kind": "detached_shell", "work_id": work_id, "binary": binary,
                "command": command, "started_at_ms": started_at_ms,
            }),
            ResidueItem::Delegation {
                delegation_id,
                capsule,
                version,
                child_session_id,
                child_workdir,
            } => json!({
                "kind": "delegation", "delegation_id": delegation_id, "capsule": capsule,
                "version": version, "child_session_id": child_session_id,
                "child_workdir": child_workdir,
            }),
        }
    }
}

/// The session's live residue, each item with the task that started it.
#[derive(Default)]
pub struct Residue {
    items: Mutex<Vec<(TaskId, ResidueItem)>>,
}

impl Residue {
    fn items(&self) -> std::sync::MutexGuard<'_, Vec<(TaskId, ResidueItem)>> {
        self.items.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Something `task` started now runs on its own.
    pub fn enter(&self, task: &TaskId, item: ResidueItem) {
        self.items().push((task.clone(), item));
    }

    /// It ended.
    pub fn remove(&self, item: &ResidueItem) {
        self.items().retain(|(_, i)| i != item);
    }

    /// Everything the session leaves running, oldest first.
    pub fn all(&self) -> Vec<Value> {
        self.items().iter().map(|(_, i)| i.to_json()).collect()
    }

    /// What the session still runs once `task` is canceled, oldest first: every detached
    /// shell command, whichever task moved it to the background (the session's shell outlives
    /// its tasks), and what `task` itself delegated. Another live task's delegations are its own
    /// and go with it.
    pub fn after_cancel(&self, task: &TaskId) -> Vec<Value> {
        self.items()
            .iter()
            .filter(|(t, i)| t == task || matches!(i, ResidueItem::DetachedShell { .. }))
            .map(|(_, i)| i.to_json())
            .collect()
    }

    /// What `task` leaves running.
    pub fn of_task(&self, task: &TaskId) -> Vec<Value> {
        self.items()
            .iter()
            .filter(|(t, _)| t == task)
            .map(|(_, i)| i.to_json())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(n: u32) -> ResidueItem {
        ResidueItem::DetachedShell {
            work_id: format!("wrk_{n}"),
            binary: "bash".into(),
            command: "sleep 30".into(),
            started_at_ms: 1757068800123,
        }
    }

    #[test]
    fn reports_what_is_entered_until_it_is_removed() {
        let r = Residue::default();
        assert!(r.all().is_empty());
        let (a, b) = (TaskId::mint(), TaskId::mint());
        r.enter(&a, shell(1));
        r.enter(&b, shell(2));
        assert_eq!(r.all().len(), 2);
        assert_eq!(r.of_task(&a), vec![shell(1).to_json()]);
        assert_eq!(
            r.after_cancel(&a),
            vec![shell(1).to_json(), shell(2).to_json()],
            "another task's background command still runs after a's cancel"
        );
        let delegated = |n: u32| ResidueItem::Delegation {
            delegation_id: format!("dlg_{n}"),
            capsule: "local/child".into(),
            version: "0.1.0".into(),
            child_session_id: format!("ses_{n}"),
            child_workdir: "/tmp/w".into(),
        };
        r.enter(&a, delegated(3));
        r.enter(&b, delegated(4));
        assert_eq!(
            r.after_cancel(&a),
            [shell(1), shell(2), delegated(3)].map(|i| i.to_json()),
            "b's delegation goes with b"
        );
        r.remove(&delegated(3));
        r.remove(&delegated(4));
        r.remove(&shell(1));
        assert!(r.of_task(&a).is_empty());
        assert_eq!(r.all(), vec![shell(2).to_json()]);
    }

    #[test]
    fn items_are_spelled_as_the_spec_lays_them_out() {
        let keys = |v: Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(
            keys(shell(1).to_json()),
            ["kind", "work_id", "binary", "command", "started_at_ms"]
        );
        let d = ResidueItem::Delegation {
            delegation_id: "dlg_7b31de".into(),
            capsule: "my-worker".into(),
            version: "0.1.0".into(),
            child_session_id: "ses_1".into(),
            child_workdir: "/w".into(),
        };
        assert_eq!(d.to_json()["kind"], "delegation");
        assert_eq!(
            keys(d.to_json()),
            [
                "kind",
                "delegation_id",
                "capsule",
                "version",
                "child_session_id",
                "child_workdir"
            ]
        );
    }
}
