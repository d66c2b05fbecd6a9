//! Door scopes: the names a credential lists under
//! `network.authentication.credentials.<name>.scopes`. This file is the one place their spelling
//! lives (and the A2A 0.3 names they replaced), so the manifest, the door and the token table
//! cannot drift apart.

use std::fmt;

/// One scope: a door method a token may reach, or the operator file plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    /// `SendMessage`
    SendMessage,
    /// `SendStreamingMessage`
    SendStreamingMessage,
    /// `murmur.WatchSession`
    WatchSession,
    /// `GetTask`
    GetTask,
    /// `ListTasks`
    ListTasks,
    /// `CancelTask`
    CancelTask,
    /// `SubscribeToTask`
    SubscribeToTask,
    /// `murmur.StopSession`
    StopSession,
    /// `resources/files`: the operator plane
    ResourcesFiles,
}

impl Scope {
    /// Every scope, in the order the spec's scope table lists them (the operator holds all).
    pub const ALL: [Scope; 9] = [
        Scope::SendMessage,
        Scope::SendStreamingMessage,
        Scope::WatchSession,
        Scope::GetTask,
        Scope::ListTasks,
        Scope::CancelTask,
        Scope::SubscribeToTask,
        Scope::StopSession,
        Scope::ResourcesFiles,
    ];

    /// The scope's name as a manifest writes it and the door names it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Scope::SendMessage => "SendMessage",
            Scope::SendStreamingMessage => "SendStreamingMessage",
            Scope::WatchSession => "murmur.WatchSession",
            Scope::GetTask => "GetTask",
            Scope::ListTasks => "ListTasks",
            Scope::CancelTask => "CancelTask",
            Scope::SubscribeToTask => "SubscribeToTask",
            Scope::StopSession => "murmur.StopSession",
            Scope::ResourcesFiles => "resources/files",
        }
    }

    /// The scope spelled exactly `name`, if any (case-sensitive, as the door matches methods).
    pub fn parse(name: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// The v1.0 scope that replaced an A2A 0.3 (or murmur pre-1.0) name such as `message/send`.
    /// A manifest listing an old name is refused; this names the replacement for the hint.
    pub fn legacy(name: &str) -> Option<Scope> {
        match name {
            "message/send" => Some(Scope::SendMessage),
            "message/stream" => Some(Scope::SendStreamingMessage),
            "tasks/get" => Some(Scope::GetTask),
            "tasks/cancel" => Some(Scope::CancelTask),
            "tasks/resubscribe" => Some(Scope::SubscribeToTask),
            "stream/watch" => Some(Scope::WatchSession),
            "session/stop" => Some(Scope::StopSession),
            _ => None,
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::Scope;

    #[test]
    fn every_scope_round_trips() {
        for scope in Scope::ALL {
            assert_eq!(Scope::parse(scope.as_str()), Some(scope));
        }
        assert_eq!(Scope::parse("WatchSession"), None);
        assert_eq!(Scope::parse("sendmessage"), None);
    }

    #[test]
    fn legacy_names_map_to_v1() {
        assert_eq!(Scope::legacy("message/send"), Some(Scope::SendMessage));
        assert_eq!(
            Scope::legacy("message/stream"),
            Some(Scope::SendStreamingMessage)
        );
        assert_eq!(Scope::legacy("tasks/get"), Some(Scope::GetTask));
        assert_eq!(Scope::legacy("tasks/cancel"), Some(Scope::CancelTask));
        assert_eq!(Scope::legacy("stream/watch"), Some(Scope::WatchSession));
        assert_eq!(Scope::legacy("session/stop"), Some(Scope::StopSession));
        assert_eq!(Scope::legacy("SendMessage"), None);
        assert_eq!(Scope::WatchSession.to_string(), "murmur.WatchSession");
    }
}
