//! Where a task came from (its origin) and how far its text is trusted (its trust class), and
//! the two runtime headers that carry them between capsules (agent-card.md "Runtime headers").
//!
//! The trust class is derived, never chosen by whoever writes the text: a task the user put on
//! the door (the launch's own task, a client's message) is `trusted`; a task another capsule's
//! runtime sent carries the class of the task it was sent for, which that runtime stamps on
//! `x-murmur-task-trust`; a peer message without a readable class is `untrusted`. Nothing here
//! branches on trust: it is recorded (`a2a_task_received`) and passed on with every outbound
//! message, so the class follows work from capsule to capsule.

use hyper::HeaderMap;
use serde::Serialize;

/// Stamped by a capsule's runtime on what it sends: `peer` (a message) or `completion`.
pub const ORIGIN_HEADER: &str = "x-murmur-task-origin";
/// Stamped beside the origin: the trust class of the task the message was sent for.
pub const TRUST_HEADER: &str = "x-murmur-task-trust";
/// The origin a capsule's outbound messages carry.
pub const PEER: &str = "peer";
/// The origin a sub-capsule's completion carries.
pub const COMPLETION: &str = "completion";
/// On a completion: the session it is for.
pub const COMPLETION_SESSION_HEADER: &str = "x-murmur-completion-session";
/// On a completion: the delegation it answers.
pub const DELEGATION_HEADER: &str = "x-murmur-delegation-id";

/// Where an accepted task came from.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// A SendMessage or SendStreamingMessage from a client (no runtime origin header).
    Client,
    /// A message another capsule's runtime sent (`x-murmur-task-origin: peer`).
    Peer,
    /// `mur run --task`.
    Launch,
    /// The result of a shell command that went on in the background past its task's end
    /// (`crate::shell`): the session's own task, told to the model in the command's context.
    Command,
}

/// How far a task's text is trusted.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum Trust {
    Trusted,
    /// The default: what cannot show it is trusted is not.
    #[default]
    Untrusted,
}

impl Trust {
    /// The header value, as the trace spells it too.
    pub fn as_str(self) -> &'static str {
        match self {
            Trust::Trusted => "trusted",
            Trust::Untrusted => "untrusted",
        }
    }
}

/// True when a request carries `x-murmur-task-origin: peer` on any of its lines (any case): the
/// door's step 3 refuses such a request on a capsule that does not accept peer tasks.
pub fn is_peer(headers: &HeaderMap) -> bool {
    headers
        .get_all(ORIGIN_HEADER)
        .iter()
        .any(|v| v.as_bytes().eq_ignore_ascii_case(PEER.as_bytes()))
}

/// The origin and trust class of a task a request starts. A request whose credential is a
/// formation member's (`member` true) is a peer's whatever its headers say: leaving the header
/// out must not make a member's call count as the user's own.
pub fn of_request(headers: &HeaderMap, member: bool) -> (Origin, Trust) {
    if !is_peer(headers) && !member {
        return (Origin::Client, Trust::Trusted);
    }
    // One line reading exactly `trusted`; anything else, or several lines, is untrusted.
    let mut lines = headers.get_all(TRUST_HEADER).iter();
    let trust = match (lines.next(), lines.next()) {
        (Some(v), None) if v.as_bytes().trim_ascii().eq_ignore_ascii_case(b"trusted") => {
            Trust::Trusted
        }
        _ => Trust::Untrusted,
    };
    (Origin::Peer, trust)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn a_client_is_trusted_and_a_peer_carries_its_senders_class() {
        assert_eq!(
            of_request(&headers(&[]), false),
            (Origin::Client, Trust::Trusted)
        );
        assert_eq!(
            of_request(&headers(&[]), true),
            (Origin::Peer, Trust::Untrusted),
            "a member's credential makes a peer, headers or none"
        );
        assert_eq!(
            of_request(&headers(&[(TRUST_HEADER, "trusted")]), true),
            (Origin::Peer, Trust::Trusted),
            "a member's runtime states its task's class as any peer does"
        );
        assert_eq!(
            of_request(&headers(&[(TRUST_HEADER, "untrusted")]), false),
            (Origin::Client, Trust::Trusted),
            "a trust class without the peer origin is a client's own message"
        );
        let peer = (ORIGIN_HEADER, "PEER");
        assert_eq!(
            of_request(&headers(&[peer, (TRUST_HEADER, "trusted")]), false),
            (Origin::Peer, Trust::Trusted)
        );
        for other in [
            vec![peer],
            vec![peer, (TRUST_HEADER, "untrusted")],
            vec![peer, (TRUST_HEADER, "yes")],
            vec![peer, (TRUST_HEADER, "trusted"), (TRUST_HEADER, "trusted")],
        ] {
            assert_eq!(
                of_request(&headers(&other), false),
                (Origin::Peer, Trust::Untrusted),
                "{other:?}"
            );
        }
        assert_eq!(
            of_request(&headers(&[(ORIGIN_HEADER, "completion")]), false).0,
            Origin::Client
        );
    }
}
