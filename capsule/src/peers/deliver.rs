//! The child's side of a completion: when a sub-capsule's launch task ends, in whatever state,
//! it posts its [`Completion`] to its parent's door — through the allow list, which holds the
//! parent's door for a sub-capsule (`Session::completing_to`) — and then the sub-capsule ends.
//! A refusal is recorded as `delivery_error` with the refusal's message; nothing retries it
//! (the parent either awaits the delegation or has stopped waiting for good).

use super::client::{Failure, PeerDoor};
use crate::delegation::completion::Completion;
use crate::delegation::protocol::CompletionTarget;
use crate::ids::DelegationId;
use crate::policy;
use crate::session::Session;
use crate::tasks::Outcome;
use crate::trace::TraceEvent;

/// Posts the completion of the launch task's `outcome` to `target`. Answers whether the parent
/// took it.
pub async fn deliver(session: &Session, target: &CompletionTarget, outcome: &Outcome) -> bool {
    let completion = Completion::of(&target.delegation_id, session.id.as_str(), outcome);
    let refused = |reason: String| {
        session.trace.event(TraceEvent::DeliveryError {
            delegation_id: DelegationId::from_wire(&target.delegation_id),
            parent_url: policy::shown(&target.url)
                .trim_start_matches("http://")
                .to_owned(),
            reason,
        });
        false
    };
    let allowed = match policy::check(&session.allow, &target.url) {
        Ok(a) => a,
        Err(refusal) => return refused(refusal.reason),
    };
    let mut door = PeerDoor::new(allowed, target.token.clone());
    let parent = target
        .traceparent
        .as_deref()
        .and_then(|t| crate::telemetry::propagation::extract_pairs(t, None));
    if let Some(parent) = &parent {
        door = door.traced(parent);
    }
    match door
        .complete(
            completion.params(),
            &target.session_id,
            &target.delegation_id,
        )
        .await
    {
        Ok(_) => true,
        Err(Failure::Rpc { message, .. }) | Err(Failure::Refused { message, .. }) => {
            refused(message)
        }
        Err(Failure::Unreachable(why)) | Err(Failure::Unreadable(why)) => refused(why),
        Err(Failure::Tls(e)) => refused(format!("{e}; {}", e.hint)),
    }
}
