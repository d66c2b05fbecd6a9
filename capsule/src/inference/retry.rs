//! Retrying a call the provider turned away for now (429, 5xx): exponential backoff with full
//! jitter, capped, or the provider's own `retry-after` when it gives one (itself capped). The
//! bound is [`MAX_ATTEMPTS`] attempts, and so at most (MAX_ATTEMPTS - 1) × [`CAP`] of waiting.

use std::time::Duration;

use rand::Rng;

/// Attempts per call, the first included.
pub const MAX_ATTEMPTS: u32 = 4;
/// The first backoff's upper bound; each next one doubles.
const BASE: Duration = Duration::from_millis(500);
/// No single wait is longer, `retry-after` included.
pub const CAP: Duration = Duration::from_secs(8);

/// The attempts made so far for one call.
pub struct Backoff {
    attempts: u32,
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new()
    }
}

impl Backoff {
    pub fn new() -> Backoff {
        Backoff { attempts: 1 }
    }

    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// How long to wait before the next attempt, or `None` when the bound is reached.
    pub fn next(&mut self, retry_after: Option<Duration>) -> Option<Duration> {
        if self.attempts >= MAX_ATTEMPTS {
            return None;
        }
        let ceiling = BASE.saturating_mul(1 << (self.attempts - 1)).min(CAP);
        self.attempts += 1;
        Some(match retry_after {
            Some(asked) => asked.min(CAP),
            None => {
                let ms = rand::thread_rng().gen_range(0..=ceiling.as_millis() as u64);
                Duration::from_millis(ms)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_stay_under_the_doubling_ceiling_and_stop_at_the_bound() {
        let mut b = Backoff::new();
        let mut waits = Vec::new();
        while let Some(w) = b.next(None) {
            waits.push(w);
        }
        assert_eq!(waits.len() as u32, MAX_ATTEMPTS - 1);
        for (i, w) in waits.iter().enumerate() {
            assert!(*w <= BASE * (1 << i), "wait {i} was {w:?}");
        }
        assert_eq!(b.attempts(), MAX_ATTEMPTS);
    }

    #[test]
    fn retry_after_is_honoured_up_to_the_cap() {
        let mut b = Backoff::new();
        assert_eq!(
            b.next(Some(Duration::from_secs(2))),
            Some(Duration::from_secs(2))
        );
        assert_eq!(b.next(Some(Duration::from_secs(600))), Some(CAP));
    }
}
