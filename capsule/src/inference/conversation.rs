//! The conversation each contextId holds on an http capsule: the messages of its completed
//! tasks, handed to the next task of the same context (the http equivalent of a resumed
//! harness session). Bounded: at most [`MAX_CONTEXTS`] contexts and [`MAX_TOTAL_BYTES`] in all
//! (the least recently used contexts are dropped), and [`MAX_BYTES`] a conversation (its oldest
//! exchanges are dropped).

use std::collections::HashMap;
use std::sync::Mutex;

use super::{Block, Msg, Role};

pub const MAX_CONTEXTS: usize = 256;
pub const MAX_BYTES: usize = 8 << 20;
/// What all contexts together may hold: without it, callers minting contextIds with images
/// could make the capsule hold 256 × 8 MiB.
pub const MAX_TOTAL_BYTES: usize = 64 << 20;

#[derive(Default)]
pub struct Conversations {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    by_context: HashMap<String, Kept>,
    clock: u64,
    /// The sum of every kept conversation's bytes.
    total: usize,
}

struct Kept {
    used: u64,
    bytes: usize,
    msgs: Vec<Msg>,
}

impl Inner {
    fn drop_least_recent(&mut self, except: &str) -> bool {
        let oldest = self
            .by_context
            .iter()
            .filter(|(k, _)| k.as_str() != except)
            .min_by_key(|(_, kept)| kept.used)
            .map(|(k, _)| k.clone());
        match oldest.and_then(|k| self.by_context.remove(&k)) {
            Some(gone) => {
                self.total -= gone.bytes;
                true
            }
            None => false,
        }
    }
}

impl Conversations {
    /// The context's conversation so far (empty for a new context).
    pub fn get(&self, context: &str) -> Vec<Msg> {
        let mut inner = self.lock();
        inner.clock += 1;
        let now = inner.clock;
        match inner.by_context.get_mut(context) {
            Some(kept) => {
                kept.used = now;
                kept.msgs.clone()
            }
            None => Vec::new(),
        }
    }

    /// Keeps `msgs` as the context's conversation, trimmed to the bound.
    pub fn keep(&self, context: &str, mut msgs: Vec<Msg>) {
        trim(&mut msgs);
        let bytes = msgs.iter().map(Msg::held_bytes).sum();
        let mut inner = self.lock();
        inner.clock += 1;
        let now = inner.clock;
        if !inner.by_context.contains_key(context) && inner.by_context.len() >= MAX_CONTEXTS {
            inner.drop_least_recent(context);
        }
        let used = Kept {
            used: now,
            bytes,
            msgs,
        };
        if let Some(before) = inner.by_context.insert(context.to_owned(), used) {
            inner.total -= before.bytes;
        }
        inner.total += bytes;
        while inner.total > MAX_TOTAL_BYTES && inner.drop_least_recent(context) {}
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

    #[test]
    fn all_contexts_together_stay_within_their_bound_the_least_recent_going_first() {
        let c = Conversations::default();
        let big = "x".repeat(MAX_BYTES - 16);
        let fit = MAX_TOTAL_BYTES / MAX_BYTES;
        for n in 0..fit + 2 {
            c.keep(&format!("ctx-{n}"), vec![user(&big)]);
        }
        assert!(c.lock().total <= MAX_TOTAL_BYTES);
        assert!(c.get("ctx-0").is_empty(), "the least recent went first");
        assert!(c.get("ctx-1").is_empty());
        assert_eq!(c.get(&format!("ctx-{}", fit + 1)), vec![user(&big)]);
        assert_eq!(c.lock().by_context.len(), fit);
    }
}
