//! Reading a parsed `serde_yaml::Value` by hand, with key paths: mappings with a closed key set
//! (unknown keys refused with a did-you-mean), typed scalars with `${VAR}` interpolation, and
//! error construction that names the file, the key path and, where the source text shows it, the
//! line and column. Validation of capsules and formations is written on top of this.

use crate::manifest::error::{ErrorCode, ManifestError};
use crate::manifest::interpolate::{self, InterpolateError};
use crate::manifest::keypath::{last_key, KeyPath, Seg};
use crate::manifest::locate;
use crate::manifest::suggest::nearest;
use serde_yaml::Value;
use std::path::Path;

/// The keys of one mapping, after the unknown-key check. Null values read as absent.
pub struct Fields<'v> {
    path: KeyPath,
    entries: Vec<(String, &'v Value)>,
}

impl<'v> Fields<'v> {
    /// The value of `key`, unless absent or null.
    pub fn get(&self, key: &str) -> Option<&'v Value> {
        self.entries
            .iter()
            .find(|(k, v)| k == key && !v.is_null())
            .map(|(_, v)| *v)
    }

    /// True when `key` is written, even with an empty value.
    pub fn contains(&self, key: &str) -> bool {
        self.entries.iter().any(|(k, _)| k == key)
    }

    /// The path of `key` inside this mapping.
    pub fn path(&self, key: &str) -> KeyPath {
        self.path.key(key)
    }
}

/// Reads one file's values: knows the file (for messages), its text (for positions) and the
/// variables `${…}` may name.
pub struct Reader<'a> {
    /// The file as the caller named it.
    pub file: &'a Path,
    /// Its text.
    pub source: &'a str,
    /// Variable lookup (process environment, then `.env`).
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// `manifest` or `formation`, for "is not a … key".
    pub kind: &'static str,
}

impl Reader<'_> {
    /// An error at `path`, positioned at the deepest part of the path the text shows.
    pub fn error(
        &self,
        code: ErrorCode,
        path: &KeyPath,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) -> ManifestError {
        ManifestError::new(code, self.file, path.to_string(), message, hint)
            .at(locate::locate(self.source, path.segs()))
    }

    /// E-MAN-004: `path` is missing.
    pub fn missing(&self, path: &KeyPath, hint: impl Into<String>) -> ManifestError {
        self.error(
            ErrorCode::MissingKey,
            path,
            format!("{path} is missing"),
            hint,
        )
    }

    /// E-MAN-005: `path` must be `expected`, not `value`.
    pub fn bad(
        &self,
        path: &KeyPath,
        expected: &str,
        value: &Value,
        hint: impl Into<String>,
    ) -> ManifestError {
        let subject = if path.is_root() {
            format!("the {}", self.kind)
        } else {
            path.to_string()
        };
        let message = format!("{subject} must be {expected}, not {}", shown(value));
        self.error(ErrorCode::BadValue, path, message, hint)
    }

    /// The mapping at `path` (absent or null reads as empty), refusing keys not in `keys`.
    pub fn mapping<'v>(
        &self,
        value: Option<&'v Value>,
        path: &KeyPath,
        keys: &[&str],
    ) -> Result<Fields<'v>, ManifestError> {
        let entries = self.entries(value, path)?;
        for (key, _) in &entries {
            if !keys.contains(&key.as_str()) {
                return Err(self.unknown_key(&path.key(key), keys));
            }
        }
        Ok(Fields {
            path: path.clone(),
            entries,
        })
    }

    /// The entries of a mapping whose keys are names (credentials, members), in order.
    pub fn entries<'v>(
        &self,
        value: Option<&'v Value>,
        path: &KeyPath,
    ) -> Result<Vec<(String, &'v Value)>, ManifestError> {
        let map = match value {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::Mapping(map)) => map,
            Some(other) => {
                let what = if path.is_root() { "the file" } else { "it" };
                return Err(self.bad(
                    path,
                    "a mapping of keys",
                    other,
                    format!("write {what} as `key: value` lines"),
                ));
            }
        };
        Ok(map.iter().map(|(k, v)| (key_text(k), v)).collect())
    }

    /// E-MAN-003 for `path`, suggesting the nearest of `keys`.
    pub fn unknown_key(&self, path: &KeyPath, keys: &[&str]) -> ManifestError {
        let parent = path.parent();
        let written = match path.segs().last() {
            Some(Seg::Key(key)) => key.as_str(),
            _ => "",
        };
        let listing = if parent.is_root() {
            format!("the top-level keys are {}", keys.join(", "))
        } else {
            format!("the keys of {parent} are {}", keys.join(", "))
        };
        let hint = match nearest(written, keys) {
            Some(near) => format!("did you mean {}? {listing}", parent.key(near)),
            None => listing,
        };
        let message = format!("{path} is not a {} key", self.kind);
        self.error(ErrorCode::UnknownKey, path, message, hint)
    }

    /// A string scalar with `${VAR}` replaced. Numbers and booleans are refused (quote them).
    pub fn string(&self, value: &Value, path: &KeyPath) -> Result<String, ManifestError> {
        match value {
            Value::String(text) => self.interpolate(text, path),
            Value::Number(_) | Value::Bool(_) => {
                let key = last_key(path);
                Err(self.bad(
                    path,
                    "a string",
                    value,
                    format!("quote it: {key}: \"{}\"", shown(value)),
                ))
            }
            other => Err(self.bad(path, "a string", other, "write a single value")),
        }
    }

    /// A non-empty string.
    pub fn text(&self, value: &Value, path: &KeyPath, hint: &str) -> Result<String, ManifestError> {
        let text = self.string(value, path)?;
        if text.trim().is_empty() {
            return Err(self.bad(path, "a non-empty string", value, hint));
        }
        Ok(text)
    }

    /// A whole number in `min..=max`; a string is accepted only when it came from `${VAR}`.
    pub fn number(
        &self,
        value: &Value,
        path: &KeyPath,
        (min, max): (u64, u64),
        hint: &str,
    ) -> Result<u64, ManifestError> {
        let expected = if max == u64::MAX {
            format!("a whole number of at least {min}")
        } else {
            format!("a whole number from {min} to {max}")
        };
        self.number_as(value, path, (min, max), &expected, hint)
    }

    /// A port number, 1 to 65535.
    pub fn port(&self, value: &Value, path: &KeyPath, hint: &str) -> Result<u16, ManifestError> {
        let expected = "a port number from 1 to 65535";
        let port = self.number_as(value, path, (1, u64::from(u16::MAX)), expected, hint)?;
        u16::try_from(port).map_err(|_| self.bad(path, expected, value, hint))
    }

    fn number_as(
        &self,
        value: &Value,
        path: &KeyPath,
        (min, max): (u64, u64),
        expected: &str,
        hint: &str,
    ) -> Result<u64, ManifestError> {
        let (number, shown_value) = match value {
            Value::Number(n) => (n.as_u64(), value.clone()),
            Value::String(text) if interpolate::has_reference(text) => {
                let text = self.interpolate(text, path)?;
                (text.trim().parse().ok(), Value::String(text))
            }
            other => (None, other.clone()),
        };
        match number {
            Some(n) if (min..=max).contains(&n) => Ok(n),
            _ => Err(self.bad(path, expected, &shown_value, hint)),
        }
    }

    /// `true` or `false`; a string is accepted only when it came from `${VAR}`.
    pub fn boolean(&self, value: &Value, path: &KeyPath) -> Result<bool, ManifestError> {
        let hint = format!(
            "write {}: true or {}: false",
            last_key(path),
            last_key(path)
        );
        match value {
            Value::Bool(b) => Ok(*b),
            Value::String(text) if interpolate::has_reference(text) => {
                match self.interpolate(text, path)?.trim() {
                    "true" => Ok(true),
                    "false" => Ok(false),
                    other => Err(self.bad(path, "true or false", &Value::from(other), hint)),
                }
            }
            other => Err(self.bad(path, "true or false", other, hint)),
        }
    }

    /// One of `accepted` (its index).
    pub fn choice(
        &self,
        value: &Value,
        path: &KeyPath,
        accepted: &[&str],
    ) -> Result<usize, ManifestError> {
        let listing = format!("accepted values are {}", accepted.join(", "));
        let expected = format!("one of {}", accepted.join(", "));
        let Value::String(raw) = value else {
            return Err(self.bad(path, &expected, value, listing));
        };
        let text = self.interpolate(raw, path)?;
        if let Some(index) = accepted.iter().position(|a| *a == text) {
            return Ok(index);
        }
        let hint = match nearest(&text, accepted) {
            Some(near) => format!("did you mean {near}? {listing}"),
            None => listing,
        };
        Err(self.bad(path, &expected, &Value::String(text), hint))
    }

    /// A list of non-empty strings (possibly empty).
    pub fn string_list(
        &self,
        value: &Value,
        path: &KeyPath,
        example: &str,
    ) -> Result<Vec<String>, ManifestError> {
        let Value::Sequence(items) = value else {
            let hint = format!("write a list, e.g. {}: {example}", last_key(path));
            return Err(self.bad(path, "a list of strings", value, hint));
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            out.push(self.text(item, &path.index(i), "remove the empty entry")?);
        }
        Ok(out)
    }

    /// `text` with `${VAR}` replaced; E-MAN-006 for an unset variable.
    pub fn interpolate(&self, text: &str, path: &KeyPath) -> Result<String, ManifestError> {
        interpolate::interpolate(text, self.env).map_err(|err| match err {
            InterpolateError::Unset(name) => {
                let env_file = interpolate::env_file_for(self.file);
                self.error(
                    ErrorCode::UnsetVariable,
                    path,
                    format!("{path} uses ${{{name}}}, which is not set"),
                    format!(
                        "export {name}=… in the environment, or put {name}=… in {} beside the \
                         {}",
                        env_file.display(),
                        self.kind
                    ),
                )
            }
            InterpolateError::Malformed(found) => self.error(
                ErrorCode::BadValue,
                path,
                format!("{path} has `{found}`, which is not a ${{NAME}} reference"),
                "write ${NAME} with NAME made of letters, digits and _, closed by }",
            ),
        })
    }
}

/// A mapping key as text (non-string keys rendered as YAML).
fn key_text(key: &Value) -> String {
    match key {
        Value::String(text) => text.clone(),
        other => serde_yaml::to_string(other)
            .map(|s| s.trim_end().to_string())
            .unwrap_or_else(|_| "?".to_string()),
    }
}

/// A short rendering of a value for "not …" in messages.
pub fn shown(value: &Value) -> String {
    match value {
        Value::Null => "empty".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(text) => format!("\"{text}\""),
        Value::Sequence(_) => "a list".to_string(),
        Value::Mapping(_) => "a mapping".to_string(),
        Value::Tagged(tagged) => format!("a value tagged {}", tagged.tag),
    }
}

/// True for a name murmur may use in folder names, realms and `member:<name>` credentials.
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}
