//! Whether a member that ended comes back, and when (docs/formations.md "Restarts"): its
//! `restart` policy, then its cap — at most `max_restarts` restarts within `restart_window` —
//! and an exponential backoff between attempts (0.5 s, 1 s, 2 s, … at most 30 s). A pure state
//! machine: the launch feeds it each exit and does what it answers, so its rules are tested
//! without processes.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use capsule::manifest::{Restart, RestartPolicy};

/// The first backoff, doubled at each restart within the window.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// The longest backoff.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// What to do about a member's exit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Start it again after `backoff`; this is restart number `attempt` within the window.
    Restart { attempt: u32, backoff: Duration },
    /// Its policy does not restart it for this exit: its end stands (a clean end, or a crash
    /// for `on_member_failure`).
    Final,
    /// It would restart, but has used its cap: its end stands, and is a failure.
    CapReached { restarts: u32 },
}

/// One member's restarts so far.
#[derive(Debug, Clone)]
pub struct Restarts {
    rule: Restart,
    /// When each restart within the window was decided, oldest first.
    recent: VecDeque<Instant>,
    /// Every restart so far (`mur ps` shows it).
    pub total: u32,
    /// The status of its last exit.
    pub last_exit: Option<i32>,
}

impl Restarts {
    pub fn new(rule: Restart) -> Restarts {
        Restarts {
            rule,
            recent: VecDeque::new(),
            total: 0,
            last_exit: None,
        }
    }

    /// Whether the member may come back at all (the launch keeps its listener only then).
    pub fn may_restart(&self) -> bool {
        self.rule.policy != RestartPolicy::Never
    }

    /// The member exited with `status` at `now`.
    pub fn on_exit(&mut self, status: i32, now: Instant) -> Decision {
        self.last_exit = Some(status);
        let wants = match self.rule.policy {
            RestartPolicy::Never => false,
            RestartPolicy::OnFailure => status != 0,
            RestartPolicy::Always => true,
        };
        if !wants {
            return Decision::Final;
        }
        while self
            .recent
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= self.rule.window)
        {
            self.recent.pop_front();
        }
        if self.recent.len() as u32 >= self.rule.max {
            return Decision::CapReached {
                restarts: self.recent.len() as u32,
            };
        }
        self.recent.push_back(now);
        self.total += 1;
        let attempt = self.recent.len() as u32;
        let backoff = FIRST_BACKOFF
            .saturating_mul(1u32 << (attempt - 1).min(16))
            .min(MAX_BACKOFF);
        Decision::Restart { attempt, backoff }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(policy: RestartPolicy, max: u32, window: u64) -> Restart {
        Restart {
            policy,
            max,
            window: Duration::from_secs(window),
        }
    }

    #[test]
    fn each_policy_restarts_what_it_says() {
        let now = Instant::now();
        let mut never = Restarts::new(rule(RestartPolicy::Never, 3, 60));
        assert_eq!(never.on_exit(137, now), Decision::Final);
        let mut failure = Restarts::new(rule(RestartPolicy::OnFailure, 3, 60));
        assert_eq!(failure.on_exit(0, now), Decision::Final);
        assert!(matches!(
            failure.on_exit(1, now),
            Decision::Restart { attempt: 1, .. }
        ));
        let mut always = Restarts::new(rule(RestartPolicy::Always, 3, 60));
        assert!(matches!(
            always.on_exit(0, now),
            Decision::Restart { attempt: 1, .. }
        ));
    }

    #[test]
    fn backoff_doubles_and_the_cap_ends_a_crash_loop() {
        let now = Instant::now();
        let mut r = Restarts::new(rule(RestartPolicy::OnFailure, 3, 60));
        let backoffs: Vec<Duration> = (0..3)
            .map(|i| match r.on_exit(137, now + Duration::from_secs(i)) {
                Decision::Restart { backoff, .. } => backoff,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            backoffs,
            [
                Duration::from_millis(500),
                Duration::from_secs(1),
                Duration::from_secs(2)
            ]
        );
        assert_eq!(
            r.on_exit(137, now + Duration::from_secs(4)),
            Decision::CapReached { restarts: 3 }
        );
        assert_eq!(r.total, 3);
        assert_eq!(r.last_exit, Some(137));
    }

    /// Property-style: over many exit sequences, restarts within any window never pass the
    /// cap, the total counts exactly the restarts answered, and a backoff never exceeds 30 s.
    #[test]
    fn no_sequence_of_exits_passes_the_cap_within_a_window() {
        let start = Instant::now();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..500 {
            let max = (next() % 5 + 1) as u32;
            let window = next() % 120 + 1;
            let mut r = Restarts::new(rule(RestartPolicy::Always, max, window));
            let mut at = start;
            let mut restarted: Vec<Instant> = Vec::new();
            for _ in 0..40 {
                at += Duration::from_millis(next() % 20_000);
                match r.on_exit((next() % 3) as i32, at) {
                    Decision::Restart { backoff, .. } => {
                        assert!(backoff <= MAX_BACKOFF);
                        restarted.push(at);
                    }
                    Decision::CapReached { .. } => {}
                    Decision::Final => panic!("always restarts or reaches its cap"),
                }
                let within = restarted
                    .iter()
                    .filter(|t| at.saturating_duration_since(**t) < Duration::from_secs(window))
                    .count() as u32;
                assert!(
                    within <= max,
                    "{within} restarts within {window} s, cap {max}"
                );
            }
            assert_eq!(r.total as usize, restarted.len());
        }
    }
}
