//! ListTasks page tokens: an opaque name for a position in the most-recently-changed order, and
//! nothing else — filters and visibility are applied afresh on every page. A token carries an
//! HMAC under a key this process drew at random, so the door knows the tokens it issued: one it
//! did not (crafted, or another session's) is refused -32602, as the spec wants, even when it
//! decodes to a position that exists.

use std::sync::OnceLock;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// How much of the HMAC a token carries, in bytes.
const TAG: usize = 16;

static KEY: OnceLock<[u8; 32]> = OnceLock::new();

fn key() -> &'static [u8; 32] {
    KEY.get_or_init(rand::random)
}

/// Signs with `key` from now on rather than a key of this process's own: the session's store
/// keeps it, so the tokens a door issued before its restart still read after it. Answers
/// false when a token was already signed under another key (it must be set before the door
/// serves).
pub fn use_key(key: [u8; 32]) -> bool {
    *KEY.get_or_init(|| key) == key
}

fn tag(position: &str) -> [u8; TAG] {
    // HMAC takes a key of any length: this cannot fail.
    let mut mac = match Hmac::<Sha256>::new_from_slice(key()) {
        Ok(m) => m,
        Err(_) => return [0; TAG],
    };
    mac.update(position.as_bytes());
    let mut out = [0u8; TAG];
    out.copy_from_slice(&mac.finalize().into_bytes()[..TAG]);
    out
}

/// Encodes the position just after the task at `seq` (its id rides along, for humans reading
/// logs), signed.
pub fn encode(seq: u64, task_id: &str) -> String {
    let position = format!("{seq}:{task_id}");
    let mut bytes = position.clone().into_bytes();
    bytes.push(b':');
    bytes.extend_from_slice(&tag(&position));
    STANDARD.encode(bytes)
}

/// The position a token names, when this door issued it and it is one it could have answered
/// (`seq <= newest`).
pub fn decode(token: &str, newest: u64) -> Option<u64> {
    let bytes = STANDARD.decode(token).ok()?;
    let split = bytes.len().checked_sub(TAG + 1)?;
    let (position, signed) = bytes.split_at(split);
    let given = signed.strip_prefix(b":")?;
    let position = std::str::from_utf8(position).ok()?;
    let expected = tag(position);
    if !bool::from(subtle::ConstantTimeEq::ct_eq(&expected[..], given)) {
        return None;
    }
    let (seq, id) = position.split_once(':')?;
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

    #[test]
    fn a_crafted_token_naming_a_real_position_is_not_one_the_door_issued() {
        // What the tokens used to be: a plausible position, no signature.
        assert_eq!(decode(&STANDARD.encode("3:tsk_01a1"), 20), None);
        let mut forged = b"3:tsk_01a1:".to_vec();
        forged.extend_from_slice(&[0u8; TAG]);
        assert_eq!(decode(&STANDARD.encode(forged), 20), None);
        // Another position under this one's signature.
        let real = STANDARD.decode(encode(12, "tsk_01a1")).unwrap();
        let mut moved = b"13".to_vec();
        moved.extend_from_slice(&real[2..]);
        assert_eq!(decode(&STANDARD.encode(moved), 20), None);
    }
}
