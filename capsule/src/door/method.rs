//! The JSON-RPC method names: the proto's A2AService in its order, then murmur's own. Spelled
//! here and nowhere else.

use crate::auth::scope::Scope;
use crate::manifest::TaskAcceptance;

#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum Method {
    SendMessage,
    SendStreamingMessage,
    GetTask,
    ListTasks,
    CancelTask,
    SubscribeToTask,
    CreateTaskPushNotificationConfig,
    GetTaskPushNotificationConfig,
    ListTaskPushNotificationConfigs,
    GetExtendedAgentCard,
    DeleteTaskPushNotificationConfig,
    WatchSession,
    StopSession,
}

const NAMES: [(Method, &str); 13] = [
    (Method::SendMessage, "SendMessage"),
    (Method::SendStreamingMessage, "SendStreamingMessage"),
    (Method::GetTask, "GetTask"),
    (Method::ListTasks, "ListTasks"),
    (Method::CancelTask, "CancelTask"),
    (Method::SubscribeToTask, "SubscribeToTask"),
    (
        Method::CreateTaskPushNotificationConfig,
        "CreateTaskPushNotificationConfig",
    ),
    (
        Method::GetTaskPushNotificationConfig,
        "GetTaskPushNotificationConfig",
    ),
    (
        Method::ListTaskPushNotificationConfigs,
        "ListTaskPushNotificationConfigs",
    ),
    (Method::GetExtendedAgentCard, "GetExtendedAgentCard"),
    (
        Method::DeleteTaskPushNotificationConfig,
        "DeleteTaskPushNotificationConfig",
    ),
    (Method::WatchSession, "murmur.WatchSession"),
    (Method::StopSession, "murmur.StopSession"),
];

/// The door extension's `params.methods` order.
const LISTED_ORDER: [Method; 9] = [
    Method::SendMessage,
    Method::SendStreamingMessage,
    Method::WatchSession,
    Method::GetTask,
    Method::ListTasks,
    Method::CancelTask,
    Method::SubscribeToTask,
    Method::StopSession,
    Method::GetExtendedAgentCard,
];

impl Method {
    /// Matches exactly: case and surrounding whitespace are significant.
    pub fn parse(name: &str) -> Option<Method> {
        NAMES.iter().find(|(_, n)| *n == name).map(|(m, _)| *m)
    }

    pub fn name(self) -> &'static str {
        NAMES
            .iter()
            .find(|(m, _)| *m == self)
            .map(|(_, n)| *n)
            .unwrap_or("")
    }

    /// The scope a token needs for this method; `None` where every valid token is enough.
    pub fn scope(self) -> Option<Scope> {
        match self {
            Method::SendMessage => Some(Scope::SendMessage),
            Method::SendStreamingMessage => Some(Scope::SendStreamingMessage),
            Method::GetTask => Some(Scope::GetTask),
            Method::ListTasks => Some(Scope::ListTasks),
            Method::CancelTask => Some(Scope::CancelTask),
            Method::SubscribeToTask => Some(Scope::SubscribeToTask),
            Method::WatchSession => Some(Scope::WatchSession),
            Method::StopSession => Some(Scope::StopSession),
            _ => None,
        }
    }

    pub fn is_push_config(self) -> bool {
        matches!(
            self,
            Method::CreateTaskPushNotificationConfig
                | Method::GetTaskPushNotificationConfig
                | Method::ListTaskPushNotificationConfigs
                | Method::DeleteTaskPushNotificationConfig
        )
    }

    /// Methods that exist only on a door that starts tasks.
    fn starts_tasks(self) -> bool {
        matches!(
            self,
            Method::SendMessage | Method::SendStreamingMessage | Method::SubscribeToTask
        )
    }
}

/// What POST / serves on this door, in the door extension's order.
pub fn served(acceptance: TaskAcceptance, authenticated: bool) -> Vec<Method> {
    LISTED_ORDER
        .into_iter()
        .filter(|m| acceptance != TaskAcceptance::None || !m.starts_tasks())
        .filter(|m| authenticated || *m != Method::GetExtendedAgentCard)
        .collect()
}
