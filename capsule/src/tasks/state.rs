//! Task states: the wire spelling (`TASK_STATE_*`) and murmur's word, in one table.

/// Where a task stands.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum TaskState {
    Submitted,
    Working,
    InputRequired,
    Completed,
    Failed,
    Rejected,
    Canceled,
}

/// `(state, wire name, murmur's word)`. `TASK_STATE_AUTH_REQUIRED` is never produced: the door
/// authenticates before a task exists.
const TABLE: [(TaskState, &str, &str); 7] = [
    (TaskState::Submitted, "TASK_STATE_SUBMITTED", "submitted"),
    (TaskState::Working, "TASK_STATE_WORKING", "working"),
    (
        TaskState::InputRequired,
        "TASK_STATE_INPUT_REQUIRED",
        "input-required",
    ),
    (TaskState::Completed, "TASK_STATE_COMPLETED", "completed"),
    (TaskState::Failed, "TASK_STATE_FAILED", "failed"),
    (TaskState::Rejected, "TASK_STATE_REJECTED", "rejected"),
    (TaskState::Canceled, "TASK_STATE_CANCELED", "canceled"),
];

/// What a ListTasks `status` filter names.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum StateFilter {
    Any,
    /// `TASK_STATE_AUTH_REQUIRED`: a valid name that matches no task.
    Nothing,
    Only(TaskState),
}

impl TaskState {
    fn row(self) -> &'static (TaskState, &'static str, &'static str) {
        // The table holds every variant.
        TABLE.iter().find(|r| r.0 == self).unwrap_or(&TABLE[0])
    }

    pub fn wire(self) -> &'static str {
        self.row().1
    }

    pub fn word(self) -> &'static str {
        self.row().2
    }

    pub fn from_wire(s: &str) -> Option<TaskState> {
        TABLE.iter().find(|r| r.1 == s).map(|r| r.0)
    }

    /// Ended for good: nothing changes its state again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Rejected | TaskState::Canceled
        )
    }

    /// A held SendMessage answers once its task reaches one of these.
    pub fn is_settled(self) -> bool {
        self.is_terminal() || self == TaskState::InputRequired
    }
}

impl StateFilter {
    pub fn parse(s: &str) -> Option<StateFilter> {
        match s {
            "TASK_STATE_UNSPECIFIED" => Some(StateFilter::Any),
            "TASK_STATE_AUTH_REQUIRED" => Some(StateFilter::Nothing),
            other => TaskState::from_wire(other).map(StateFilter::Only),
        }
    }

    pub fn matches(self, state: TaskState) -> bool {
        match self {
            StateFilter::Any => true,
            StateFilter::Nothing => false,
            StateFilter::Only(s) => s == state,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_state() {
        for (s, wire, _) in TABLE {
            assert_eq!(TaskState::from_wire(wire), Some(s));
            assert_eq!(s.wire(), wire);
        }
        assert_eq!(TaskState::InputRequired.word(), "input-required");
        assert_eq!(
            StateFilter::parse("TASK_STATE_AUTH_REQUIRED"),
            Some(StateFilter::Nothing)
        );
        assert_eq!(StateFilter::parse("completed"), None);
    }
}
