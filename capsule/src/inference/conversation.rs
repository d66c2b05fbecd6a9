//! The conversation each contextId holds on an http capsule: the messages of its completed
//! tasks, handed to the next task of the same context (the http equivalent of a resumed
//! harness session). Bounded: at most [`MAX_CONTEXTS`] contexts and [`MAX_TOTAL_BYTES`] in all
//! (the least recently used contexts are dropped), and [`MAX_BYTES`] a conversation (its oldest
//! exchanges are dropped). The session's store is told of each one kept or dropped, so a
//! restarted capsule's contexts go on where they were (docs/store.md).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::{Block, Msg, Role};

pub const MAX_CONTEXTS: usize = 256;
pub const MAX_BYTES: usize = 8 << 20;
/// What all contexts together may hold: without it, callers minting contextIds with images
/// could make the capsule hold 256 × 8 MiB.
pub const MAX_TOTAL_BYTES: usize = 64 << 20;

/// Told of every conversation kept (its messages, shared) or dropped (`None`), with the moment
/// it was last used, under the lock that orders them: the store keeps the last it was told of
/// each, and gives them back in the order they were used. It encodes them on its own thread (a
/// conversation can be megabytes), so the call is a map insert.
pub type ConversationJournal = Arc<dyn Fn(&str, u64, Option<Arc<Vec<Msg>>>) + Send + Sync>;

#[derive(Default)]
pub struct Conversations {
    inner: Mutex<Inner>,
    journal: Option<ConversationJournal>,
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
    /// Shared with the store's journal, which encodes it on its own thread.
    msgs: Arc<Vec<Msg>>,
}

impl Inner {
    /// Drops the least recently used conversation but `except`; answers the one dropped.
    fn drop_least_recent(&mut self, except: &str) -> Option<String> {
        let oldest = self
            .by_context
            .iter()
            .filter(|(k, _)| k.as_str() != except)
            .min_by_key(|(_, kept)| kept.used)
            .map(|(k, _)| k.clone())?;
        let gone = self.by_context.remove(&oldest)?;
        self.total -= gone.bytes;
        Some(oldest)
    }

    /// Keeps `msgs` (trimmed) as the context's conversation, used at `used`; answers the
    /// contexts dropped to stay within the bounds.
    fn insert(&mut self, context: &str, msgs: Arc<Vec<Msg>>, used: u64) -> Vec<String> {
        let bytes = msgs.iter().map(Msg::held_bytes).sum();
        let mut dropped = Vec::new();
        if !self.by_context.contains_key(context) && self.by_context.len() >= MAX_CONTEXTS {
            dropped.extend(self.drop_least_recent(context));
        }
        let kept = Kept { used, bytes, msgs };
        if let Some(before) = self.by_context.insert(context.to_owned(), kept) {
            self.total -= before.bytes;
        }
        self.total += bytes;
        while self.total > MAX_TOTAL_BYTES {
            match self.drop_least_recent(context) {
                Some(gone) => dropped.push(gone),
                None => break,
            }
        }
        dropped
    }
}

impl Conversations {
    /// Takes back the conversations a store kept (context, when last used, messages; oldest
    /// first), then tells `journal` of every change from now on.
    pub fn restored(
        mut self,
        kept: Vec<(String, u64, Vec<Msg>)>,
        journal: ConversationJournal,
    ) -> Self {
        let mut dropped = Vec::new();
        {
            let inner = self.inner.get_mut().unwrap_or_else(|p| p.into_inner());
            for (context, used, mut msgs) in kept {
                trim(&mut msgs);
                inner.clock = inner.clock.max(used);
                dropped.extend(inner.insert(&context, Arc::new(msgs), used));
            }
        }
        let now = self.lock().clock;
        for gone in dropped {
            journal(&gone, now, None);
        }
        self.journal = Some(journal);
        self
    }

    /// The context's conversation so far (empty for a new context).
    pub fn get(&self, context: &str) -> Vec<Msg> {
        let mut inner = self.lock();
        inner.clock += 1;
        let now = inner.clock;
        match inner.by_context.get_mut(context) {
            Some(kept) => {
                kept.used = now;
                kept.msgs.as_ref().clone()
            }
            None => Vec::new(),
        }
    }

    /// Keeps `msgs` as the context's conversation, trimmed to the bound.
    pub fn keep(&self, context: &str, mut msgs: Vec<Msg>) {
        trim(&mut msgs);
        let msgs = Arc::new(msgs);
        let mut inner = self.lock();
        inner.clock += 1;
        let now = inner.clock;
        let dropped = inner.insert(context, msgs.clone(), now);
        // Under the lock: two tasks of one context keeping it at once reach the store in the
        // order of their uses, and the later stands.
        if let Some(journal) = &self.journal {
            journal(context, now, Some(msgs));
            for gone in dropped {
                journal(&gone, now, None);
            }
        }
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

    type Told = Arc<Mutex<Vec<(String, u64, Option<usize>)>>>;

    fn telling() -> (Told, ConversationJournal) {
        let told: Told = Arc::default();
        let t = told.clone();
        let journal: ConversationJournal = Arc::new(move |k, used, msgs| {
            t.lock()
                .unwrap()
                .push((k.to_owned(), used, msgs.map(|m| m.len())))
        });
        (told, journal)
    }

    #[test]
    fn the_store_is_told_of_each_conversation_kept_and_dropped() {
        let (told, journal) = telling();
        let c = Conversations::default().restored(Vec::new(), journal);
        for n in 0..MAX_CONTEXTS {
            c.keep(&format!("ctx-{n}"), vec![user("hi")]);
        }
        told.lock().unwrap().clear();
        c.keep("one more", vec![user("a"), user("b")]);
        let clock = MAX_CONTEXTS as u64 + 1;
        assert_eq!(
            *told.lock().unwrap(),
            [
                ("one more".to_owned(), clock, Some(2)),
                ("ctx-0".to_owned(), clock, None)
            ]
        );
    }

    #[test]
    fn restored_conversations_come_back_their_clock_going_on_from_the_newest() {
        let (told, journal) = telling();
        let kept = vec![
            ("old".to_owned(), 7, vec![user("first")]),
            ("new".to_owned(), 40, vec![user("second")]),
        ];
        let c = Conversations::default().restored(kept, journal);
        assert_eq!(c.get("old"), vec![user("first")]);
        assert_eq!(c.get("new"), vec![user("second")]);
        c.keep("new", vec![user("second"), user("third")]);
        // Two gets since: the next use is after the newest kept one, so the order the store
        // gives back at the next restart is still the order of use.
        assert_eq!(*told.lock().unwrap(), [("new".to_owned(), 43, Some(2))]);
    }

    #[test]
    fn the_store_is_told_in_the_order_of_use_when_tasks_keep_one_context_at_once() {
        let (told, journal) = telling();
        let c = Arc::new(Conversations::default().restored(Vec::new(), journal));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let c = c.clone();
                std::thread::spawn(move || {
                    for _ in 0..500 {
                        c.keep("ctx", vec![user("x")]);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let uses: Vec<u64> = told.lock().unwrap().iter().map(|t| t.1).collect();
        assert_eq!(uses.len(), 2000);
        assert!(
            uses.windows(2).all(|w| w[0] < w[1]),
            "the store would keep an older one"
        );
    }
}
