//! The conversation each contextId holds on an http capsule: the messages of its completed
//! tasks, handed to the next task of the same context (the http equivalent of a resumed
//! harness session). Bounded: at most [`MAX_CONTEXTS`] contexts (the least recently used is
//! dropped) and [`MAX_BYTES`] a conversation (its oldest exchanges are dropped).

use std::collections::HashMap;
use std::sync::Mutex;

use super::{Block, Msg, Role};

pub const MAX_CONTEXTS: usize = 256;
pub const MAX_BYTES: usize = 8 << 20;

#[derive(Default)]
pub struct Conversations {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    by_context: HashMap<String, (u64, Vec<Msg>)>,
    clock: u64,
}

impl Conversations {
    /// The context's conversation so far (empty for a new context).
    pub fn get(&self, context: &str) -> Vec<Msg> {
        let mut inner = self.lock();
        inner.clock += 1;
        let now = inner.clock;
        match inner.by_context.get_mut(context) {
            Some((used, msgs)) => {
                *used = now;
                msgs.clone()
            }
            None => Vec::new(),
        }
    }

    /// Keeps `msgs` as the context's conversation, trimmed to the bound.
    pub fn keep(&self, context: &str, mut msgs: Vec<Msg>) {
        trim(&mut msgs);
        let mut inner = self.lock();
        inner.clock += 1;
        let now = inner.clock;
        if !inner.by_context.contains_key(context) && inner.by_context.len() >= MAX_CONTEXTS {
            let oldest = inner
                .by_context
                .iter()
                .min_by_key(|(_, (used, _))| *used)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                inner.by_context.remove(&k);
            }
        }
        inner.by_context.insert(context.to_owned(), (now, msgs));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Drops the oldest messages until the conversation fits, and until it starts with a user's
/// own message (never a tool result, whose call would be gone).
fn trim(msgs: &mut Vec<Msg>) {
    let mut total: usize = msgs.iter().map(Msg::held_bytes).sum();
    let mut drop = 0;
    while drop < msgs.len() {
        let starts_well = msgs[drop].role == Role::User
            && !msgs[drop]
                .blocks
                .iter()
                .any(|b| matches!(b, Block::ToolResult { .. }));
        if total <= MAX_BYTES && starts_well {
            break;
        }
        total -= msgs[drop].held_bytes();
        drop += 1;
    }
    msgs.drain(..drop);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> Msg {
        Msg {
            role: Role::User,
            blocks: vec![Block::Text(text.into())],
        }
    }

    #[test]
    fn an_oversized_conversation_loses_its_oldest_exchanges_and_starts_with_the_user() {
        let big = "x".repeat(MAX_BYTES / 2);
        let msgs = vec![
            user(&big),
            Msg {
                role: Role::Assistant,
                blocks: vec![Block::Text(big.clone())],
            },
            user("second"),
            Msg {
                role: Role::Assistant,
                blocks: vec![Block::Text("ok".into())],
            },
        ];
        let c = Conversations::default();
        c.keep("ctx", msgs);
        let kept = c.get("ctx");
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[0], user("second"));
    }
}
