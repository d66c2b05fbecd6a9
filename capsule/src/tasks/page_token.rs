//! ListTasks page tokens: an opaque name for a position in the most-recently-changed order, and
//! nothing else — filters and visibility are applied afresh on every page.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

/// Encodes the position just after the task at `seq` (its id rides along, for humans reading logs).
pub fn encode(seq: u64, task_id: &str) -> String {
    STANDARD.encode(format!("{seq}:{task_id}"))
}

/// The position a token names, when it is one this door could have answered (`seq <= newest`).
pub fn decode(token: &str, newest: u64) -> Option<u64> {
    let bytes = STANDARD.decode(token).ok()?;
    let text = std::str::from_utf8(&bytes).ok()?;
    let (seq, id) = text.split_once(':')?;
    let seq: u64 = seq.parse().ok()?;
    (id.starts_with("tsk_") && seq >= 1 && seq <= newest).then_some(seq)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_strangers() {
        let t = encode(12, "tsk_01a1");
        assert_eq!(decode(&t, 20), Some(12));
        assert_eq!(decode(&t, 11), None, "a position this door never reached");
        assert_eq!(decode("not-a-token", 20), None);
        assert_eq!(decode(&STANDARD.encode("x:tsk_1"), 20), None);
    }
}
