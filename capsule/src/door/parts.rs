//! Message parts: what each kind is, how it reads to the agent, and the image checks.

use std::borrow::Cow;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde_json::{Map, Value};

use crate::text::{fence_attr, fenced};

/// The four part kinds A2A v1.0 defines; a part sets exactly one.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Text,
    Raw,
    Url,
    Data,
}

const KINDS: [(Kind, &str); 4] = [
    (Kind::Text, "text"),
    (Kind::Raw, "raw"),
    (Kind::Url, "url"),
    (Kind::Data, "data"),
];

/// The part's one kind, or `None` when it sets none or several.
pub fn kind(part: &Map<String, Value>) -> Option<Kind> {
    let mut set = KINDS.iter().filter(|(_, k)| part.contains_key(*k));
    match (set.next(), set.next()) {
        (Some((k, _)), None) => Some(*k),
        _ => None,
    }
}

/// Bytes an image must hold at an offset.
type Magic = &'static [(usize, &'static [u8])];

/// `(media type, magic bytes at offset)` of every image type the door reads.
const IMAGE_TYPES: [(&str, Magic); 4] = [
    ("image/png", &[(0, b"\x89PNG\r\n\x1a\n")]),
    ("image/jpeg", &[(0, b"\xff\xd8\xff")]),
    ("image/gif", &[(0, b"GIF8")]),
    ("image/webp", &[(0, b"RIFF"), (8, b"WEBP")]),
];

pub fn is_image_type(media_type: Option<&str>) -> bool {
    media_type.is_some_and(|m| IMAGE_TYPES.iter().any(|(t, _)| *t == m))
}

/// True when `bytes` start as an image of `media_type` must.
pub fn has_magic(media_type: &str, bytes: &[u8]) -> bool {
    IMAGE_TYPES
        .iter()
        .find(|(t, _)| *t == media_type)
        .is_some_and(|(_, marks)| {
            marks
                .iter()
                .all(|(at, magic)| bytes.get(*at..*at + magic.len()) == Some(*magic))
        })
}

pub fn decode_base64(raw: &str) -> Option<Vec<u8>> {
    STANDARD.decode(raw.trim()).ok()
}

/// How a text or data part reads to the agent; `None` for raw parts (images come after the text).
/// A text part is borrowed, not copied: a message's text may be many megabytes.
pub fn render(part: &Map<String, Value>) -> Option<Cow<'_, str>> {
    match kind(part)? {
        Kind::Text => part.get("text").and_then(Value::as_str).map(Cow::Borrowed),
        Kind::Data => {
            let value = part.get("data").unwrap_or(&Value::Null);
            let body = serde_json::to_string_pretty(value).unwrap_or_else(|_| "null".into());
            let mut label = String::from("data");
            for (key, attr) in [("mediaType", "media-type"), ("filename", "filename")] {
                if let Some(v) = part.get(key).and_then(Value::as_str) {
                    label.push_str(&format!(" {attr}={}", fence_attr(v)));
                }
            }
            Some(Cow::Owned(fenced(&label, &body)))
        }
        Kind::Raw | Kind::Url => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn data_part_reads_as_the_spec_shows() {
        let part = obj(
            json!({"data": {"note": "a ``` b", "rows": [1, 2]}, "mediaType": "application/json"}),
        );
        assert_eq!(
            render(&part).unwrap(),
            "````data media-type=application/json\n{\n  \"note\": \"a ``` b\",\n  \"rows\": [\n    1,\n    2\n  ]\n}\n````"
        );
        let named = obj(json!({"data": null, "filename": "my file=1.json"}));
        assert_eq!(
            render(&named).unwrap(),
            "```data filename=my_file_1.json\nnull\n```"
        );
    }

    #[test]
    fn kinds_and_magic() {
        assert_eq!(kind(&obj(json!({"text": "a", "url": "b"}))), None);
        assert_eq!(kind(&obj(json!({"data": null}))), Some(Kind::Data));
        assert!(has_magic("image/png", b"\x89PNG\r\n\x1a\nrest"));
        assert!(has_magic("image/webp", b"RIFF\0\0\0\0WEBPVP8 "));
        assert!(!has_magic("image/gif", b"\x89PNG"));
    }
}
