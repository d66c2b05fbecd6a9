//! Identifiers: `ses_`, `tsk_`, `ctx_`, `msg_`, `wrk_`, `dlg_`, `apr_` followed by 32 lowercase hex digits
//! laid out as a UUIDv7, so ids sort by creation time (DESIGN §4).

use std::fmt;

/// A prefixed, time-ordered identifier.
macro_rules! id_type {
    ($name:ident, $prefix:literal) => {
        /// Shared text: a task's id is held by the registry's map, its order and the task
        /// itself, and cloned into every record about it; clones share one allocation.
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
        pub struct $name(std::sync::Arc<str>);

        impl $name {
            pub const PREFIX: &'static str = $prefix;

            /// A fresh id.
            pub fn mint() -> Self {
                $name(format!("{}{}", $prefix, uuid::Uuid::now_v7().simple()).into())
            }

            /// Takes an id as a client spelled it; the door looks ids up, it never trusts their shape.
            pub fn from_wire(s: &str) -> Self {
                $name(s.into())
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        /// An id goes on the wire (and in the trace) as its plain string.
        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }
    };
}

id_type!(SessionId, "ses_");
id_type!(TaskId, "tsk_");
id_type!(ContextId, "ctx_");
id_type!(MessageId, "msg_");
id_type!(DelegationId, "dlg_");
id_type!(WorkId, "wrk_");
id_type!(ApprovalId, "apr_");

/// True when `s` is a well-formed id with the given prefix: 32 lowercase hex digits after it.
pub fn is_well_formed(s: &str, prefix: &str) -> bool {
    s.strip_prefix(prefix).is_some_and(|hex| {
        hex.len() == 32
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_ids_are_prefixed_uuid7_hex_and_time_ordered() {
        let a = TaskId::mint();
        let b = TaskId::mint();
        assert!(is_well_formed(a.as_str(), "tsk_"), "{a}");
        assert_eq!(&a.as_str()[4 + 12..4 + 13], "7", "UUIDv7 version nibble");
        assert!(a < b);
        assert!(is_well_formed(SessionId::mint().as_str(), "ses_"));
        assert!(!is_well_formed("ses_XYZ", "ses_"));
    }
}
