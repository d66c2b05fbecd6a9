//! The harness session each context holds (DESIGN §8: resumed on the context's next task,
//! dropped by `forgetSession`). Bounded: a capsule that runs for weeks meets an unbounded number
//! of contexts, so past [`KEPT`] the context whose session was set longest ago is forgotten (its
//! next task starts a new harness session, as after `forgetSession`).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

/// Told of every session kept (`Some`) or dropped (`None`), by conversation, in order: the
/// session's store keeps them for a restarted capsule.
pub type SessionJournal = Arc<dyn Fn(&str, Option<&str>) + Send + Sync>;

/// How many contexts keep a harness session.
pub const KEPT: usize = 10_000;

/// The longest harness session id kept.
const ID_MAX: usize = 128;

/// Whether `id` is shaped as the CLIs write their session ids (Claude Code's and Codex's are
/// UUIDs): letters, digits, `-`, `_`, `.`, `:`, at most 128 of them, and not starting with `-`,
/// so that on a command line it can only be a value, never a flag.
pub fn is_session_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= ID_MAX
        && !id.starts_with('-')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
}

#[derive(Default)]
struct Inner {
    by_context: HashMap<String, String>,
    /// Contexts in the order their session was last set, oldest first.
    order: VecDeque<String>,
}

pub struct HarnessSessions {
    inner: Mutex<Inner>,
    kept: usize,
    journal: Option<SessionJournal>,
}

impl Default for HarnessSessions {
    fn default() -> Self {
        HarnessSessions::keeping(KEPT)
    }
}

impl HarnessSessions {
    pub fn keeping(kept: usize) -> Self {
        HarnessSessions {
            inner: Mutex::new(Inner::default()),
            kept,
            journal: None,
        }
    }

    /// Takes back the sessions a store kept (oldest first), then tells `journal` of every
    /// change from now on.
    pub fn restored(mut self, kept: Vec<(String, String)>, journal: SessionJournal) -> Self {
        {
            let inner = self.inner.get_mut().unwrap_or_else(|e| e.into_inner());
            for (context, session) in kept {
                if !is_session_id(&session) {
                    continue;
                }
                inner.order.retain(|c| *c != context);
                inner.order.push_back(context.clone());
                inner.by_context.insert(context, session);
            }
        }
        self.journal = Some(journal);
        self
    }

    fn tell(&self, context: &str, session: Option<&str>) {
        if let Some(journal) = &self.journal {
            journal(context, session);
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn get(&self, context: &str) -> Option<String> {
        self.lock().by_context.get(context).cloned()
    }

    /// Sets (or with `None` drops) the context's session; answers the one it replaced. An id
    /// not shaped like one ([`is_session_id`]) drops it too: it would go on the next attempt's
    /// command line (`--resume {session}`), where `--something` reads as a flag.
    pub fn set(&self, context: &str, session: Option<String>) -> Option<String> {
        let mut inner = self.lock();
        inner.order.retain(|c| c != context);
        let Some(session) = session.filter(|s| is_session_id(s)) else {
            let old = inner.by_context.remove(context);
            if old.is_some() {
                self.tell(context, None);
            }
            return old;
        };
        inner.order.push_back(context.to_owned());
        self.tell(context, Some(&session));
        let old = inner.by_context.insert(context.to_owned(), session);
        while inner.order.len() > self.kept {
            if let Some(oldest) = inner.order.pop_front() {
                inner.by_context.remove(&oldest);
                self.tell(&oldest, None);
            }
        }
        old
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_that_could_read_as_a_flag_or_more_is_not_kept() {
        let s = HarnessSessions::default();
        s.set("ctx_a", Some("0199a3f1-c2d4-7e8a-b5c6-d7e8f9a0b1c2".into()));
        assert!(s.get("ctx_a").is_some());
        for bad in [
            "--dangerously-skip-permissions",
            "-x",
            "a b",
            "a;b",
            "$(id)",
            "",
            &"x".repeat(129),
            "a\nb",
        ] {
            s.set("ctx_a", Some("ok-id".into()));
            s.set("ctx_a", Some(bad.to_owned()));
            assert_eq!(s.get("ctx_a"), None, "{bad:?}");
        }
    }

    #[test]
    fn keeps_sets_and_drops() {
        let s = HarnessSessions::default();
        assert_eq!(s.set("ctx_a", Some("h1".into())), None);
        assert_eq!(s.get("ctx_a").as_deref(), Some("h1"));
        assert_eq!(s.set("ctx_a", Some("h2".into())).as_deref(), Some("h1"));
        assert_eq!(s.set("ctx_a", None).as_deref(), Some("h2"));
        assert_eq!(s.get("ctx_a"), None);
    }

    #[test]
    fn forgets_the_context_set_longest_ago_past_the_bound() {
        let s = HarnessSessions::keeping(2);
        s.set("a", Some("1".into()));
        s.set("b", Some("2".into()));
        s.set("a", Some("3".into()));
        s.set("c", Some("4".into()));
        assert_eq!(s.get("b"), None, "b was set longest ago");
        assert_eq!(s.get("a").as_deref(), Some("3"));
        assert_eq!(s.get("c").as_deref(), Some("4"));
    }
}
