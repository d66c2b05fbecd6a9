//! Reading an operation's arguments from a JSON object: the control surface's request bodies
//! and the http loop's tool arguments are read by these same functions, so a value one refuses
//! the other refuses too, in the same words.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::peers::{DEFAULT_WAIT_SECS, MAX_WAIT_SECS};

/// A non-empty string member.
pub fn text(body: &Map<String, Value>, key: &str) -> Option<String> {
    body.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .map(str::to_owned)
}

/// An optional string member: absent or null is `None`; anything but a non-empty string is
/// refused, with the sentence saying so.
pub fn optional_text(body: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
        Some(_) => Err(format!("{key} must be a non-empty string")),
    }
}

/// `timeout_secs`, when given: a whole number of seconds from 1 to a day.
pub fn timeout(body: &Map<String, Value>) -> Result<Option<Duration>, String> {
    match body.get("timeout_secs") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .filter(|s| (1..=MAX_WAIT_SECS).contains(s))
            .map(|s| Some(Duration::from_secs(s)))
            .ok_or_else(|| {
                format!("timeout_secs must be a whole number of seconds from 1 to {MAX_WAIT_SECS}")
            }),
    }
}

/// How long a call waits for its peer's task: `timeout_secs`, or the default when absent.
pub fn wait_within(body: &Map<String, Value>) -> Result<Duration, String> {
    Ok(timeout(body)?.unwrap_or(Duration::from_secs(DEFAULT_WAIT_SECS)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn arguments_are_read_and_refused_alike_everywhere() {
        assert_eq!(
            text(&body(json!({"a": " x "})), "a").as_deref(),
            Some(" x ")
        );
        assert_eq!(text(&body(json!({"a": "  "})), "a"), None);
        assert_eq!(text(&body(json!({"a": 5})), "a"), None);
        assert_eq!(optional_text(&body(json!({})), "a"), Ok(None));
        assert_eq!(optional_text(&body(json!({"a": null})), "a"), Ok(None));
        assert_eq!(
            optional_text(&body(json!({"a": 7})), "a"),
            Err("a must be a non-empty string".into())
        );
        assert_eq!(
            wait_within(&body(json!({}))),
            Ok(Duration::from_secs(DEFAULT_WAIT_SECS))
        );
        assert_eq!(
            timeout(&body(json!({"timeout_secs": 3}))),
            Ok(Some(Duration::from_secs(3)))
        );
        let refused = Err(format!(
            "timeout_secs must be a whole number of seconds from 1 to {MAX_WAIT_SECS}"
        ));
        assert_eq!(timeout(&body(json!({"timeout_secs": 0}))), refused);
        assert_eq!(timeout(&body(json!({"timeout_secs": "3"}))), refused);
    }
}
