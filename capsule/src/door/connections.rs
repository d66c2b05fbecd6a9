//! The door's connection cap, and who gives way when it is reached. A flood of connections that
//! send nothing, or trickle a body, must not keep a real caller out: at the cap, the oldest
//! connection that is waiting for a request is closed to make room (then the oldest still
//! reading one), and only when every connection is being answered — a method running, a stream
//! open — is a newcomer refused 503. A caller's stream (murmur.WatchSession, SubscribeToTask)
//! is never closed to make room.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::task::AbortHandle;

/// No request in progress: before its first headers, or idle between requests.
const WAITING: u8 = 0;
/// Headers in, its body still arriving.
const READING: u8 = 1;
/// A method running, or its answer (a stream) still going out.
const ANSWERING: u8 = 2;

/// Where one connection's request is; set by the door as it goes.
#[derive(Clone, Default)]
pub struct Phase(Arc<AtomicU8>);

impl Phase {
    pub fn reading(&self) {
        self.0.store(READING, Ordering::Relaxed);
    }
    pub fn answering(&self) {
        self.0.store(ANSWERING, Ordering::Relaxed);
    }
    pub fn waiting(&self) {
        self.0.store(WAITING, Ordering::Relaxed);
    }
    fn get(&self) -> u8 {
        self.0.load(Ordering::Relaxed)
    }
}

struct Open {
    id: u64,
    phase: Phase,
    /// The task serving it, once spawned.
    serving: Option<AbortHandle>,
}

#[derive(Default)]
struct Slots {
    next: u64,
    open: VecDeque<Open>,
}

/// Every connection the door holds, oldest first.
pub struct Connections {
    cap: usize,
    slots: Mutex<Slots>,
}

/// A connection let in: its id (to say when it is served, and ends) and its phase.
pub struct Admitted {
    pub id: u64,
    pub phase: Phase,
}

impl Connections {
    pub fn new(cap: usize) -> Connections {
        Connections {
            cap: cap.max(1),
            slots: Mutex::default(),
        }
    }

    fn slots(&self) -> MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Lets a new connection in, closing the oldest waiting (else reading) one when the cap is
    /// reached; `None` when every connection is being answered.
    pub fn admit(&self) -> Option<Admitted> {
        let mut slots = self.slots();
        if slots.open.len() >= self.cap {
            let victim = [WAITING, READING]
                .iter()
                .find_map(|p| slots.open.iter().position(|o| o.phase.get() == *p))?;
            if let Some(o) = slots.open.remove(victim) {
                if let Some(serving) = o.serving {
                    serving.abort();
                }
            }
        }
        slots.next += 1;
        let id = slots.next;
        let phase = Phase::default();
        slots.open.push_back(Open {
            id,
            phase: phase.clone(),
            serving: None,
        });
        Some(Admitted { id, phase })
    }

    /// The task serving connection `id` (so it can be closed to make room).
    pub fn serving(&self, id: u64, task: AbortHandle) {
        let mut slots = self.slots();
        match slots.open.iter_mut().find(|o| o.id == id) {
            Some(o) => o.serving = Some(task),
            // Closed to make room before its task was noted.
            None => task.abort(),
        }
    }

    /// Connection `id` ended.
    pub fn ended(&self, id: u64) {
        self.slots().open.retain(|o| o.id != id);
    }

    pub fn cap(&self) -> usize {
        self.cap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_the_cap_the_oldest_waiting_connection_gives_way_and_answers_never_do() {
        let c = Connections::new(3);
        let a = c.admit().unwrap();
        let b = c.admit().unwrap();
        let d = c.admit().unwrap();
        a.phase.answering();
        b.phase.reading();
        // d waits: it is the one closed, though younger than b.
        let e = c.admit().unwrap();
        let ids: Vec<u64> = c.slots().open.iter().map(|o| o.id).collect();
        assert_eq!(ids, [a.id, b.id, e.id]);
        let _ = d;
        e.phase.answering();
        // Then the oldest reading one.
        let f = c.admit().unwrap();
        let ids: Vec<u64> = c.slots().open.iter().map(|o| o.id).collect();
        assert_eq!(ids, [a.id, e.id, f.id]);
        f.phase.answering();
        // Everyone is being answered: the newcomer is refused.
        assert!(c.admit().is_none());
        c.ended(a.id);
        assert!(c.admit().is_some());
    }
}
