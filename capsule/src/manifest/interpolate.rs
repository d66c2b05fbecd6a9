//! `${VAR}` interpolation and the `.env` file beside a manifest. Interpolation works on one parsed
//! string scalar at a time (never on the YAML text), so a value holding `:` or quotes cannot
//! break the document. Lookup order: process environment first, then `.env`.

use crate::manifest::error::{ErrorCode, ManifestError};
use crate::manifest::limits::{self, ReadError, Source};
use serde_yaml::{Mapping, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Why a string could not be interpolated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InterpolateError {
    /// `${NAME}` where NAME is set nowhere.
    Unset(String),
    /// `${` without a closing `}` or with a name that is not `[A-Za-z_][A-Za-z0-9_]*`.
    Malformed(String),
}

/// True when `text` holds a `${` to replace.
pub fn has_reference(text: &str) -> bool {
    text.contains("${")
}

/// Replaces every `${NAME}` in `text` with `env(NAME)`. A `$` not followed by `{` stays as is.
pub fn interpolate(
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, InterpolateError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(InterpolateError::Malformed(rest[start..].to_string()));
        };
        let name = &after[..end];
        if !is_var_name(name) {
            return Err(InterpolateError::Malformed(format!("${{{name}}}")));
        }
        match env(name) {
            Some(value) => out.push_str(&value),
            None => return Err(InterpolateError::Unset(name.to_string())),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Stand-ins for `{` and `}` of a `${NAME}` while the YAML is parsed (private-use characters).
const OPEN: char = '\u{E000}';
const CLOSE: char = '\u{E001}';

/// Rewrites each `${NAME}` in YAML text as `$<U+E000>NAME<U+E001>`, so a reference stays a plain
/// scalar even inside a flow mapping (`{ api_key: ${KEY} }` is not valid YAML as written). Only
/// the reference is touched, never a value, and columns do not move (one char for one char).
/// `None` when there is nothing to protect or the text already holds the stand-ins.
pub fn protect(text: &str) -> Option<String> {
    if !has_reference(text) || text.contains(OPEN) || text.contains(CLOSE) {
        return None;
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        match after.find('}').filter(|end| is_var_name(&after[..*end])) {
            Some(end) => {
                out.push_str(&rest[..start]);
                out.push('$');
                out.push(OPEN);
                out.push_str(&after[..end]);
                out.push(CLOSE);
                rest = &after[end + 1..];
            }
            None => {
                out.push_str(&rest[..start + 2]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Some(out)
}

/// Undoes `protect` in every string (keys included) of a parsed document.
pub fn restore(value: Value) -> Value {
    match value {
        Value::String(text) => Value::String(text.replace(OPEN, "{").replace(CLOSE, "}")),
        Value::Sequence(items) => Value::Sequence(items.into_iter().map(restore).collect()),
        Value::Mapping(map) => Value::Mapping(
            map.into_iter()
                .map(|(k, v)| (restore(k), restore(v)))
                .collect::<Mapping>(),
        ),
        Value::Tagged(mut tagged) => {
            tagged.value = restore(tagged.value);
            Value::Tagged(tagged)
        }
        other => other,
    }
}

/// True for a variable name: a letter or `_`, then letters, digits or `_`.
pub fn is_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The `.env` beside `manifest` (same folder, as the caller named it).
pub fn env_file_for(manifest: &Path) -> PathBuf {
    manifest
        .parent()
        .map_or_else(|| PathBuf::from(".env"), |dir| dir.join(".env"))
}

/// Reads the `.env` beside `manifest`; a missing file is an empty map.
pub fn read_env_file(manifest: &Path) -> Result<HashMap<String, String>, ManifestError> {
    let file = env_file_for(manifest);
    match limits::read(&file) {
        Ok(text) => parse_env_file(&text, &file),
        Err(ReadError::Io(err)) if err.kind() == std::io::ErrorKind::NotFound => Ok(HashMap::new()),
        Err(ReadError::TooLarge(size)) => Err(limits::too_large(&file, size, Source::EnvFile)),
        Err(ReadError::Io(err)) => Err(ManifestError::new(
            ErrorCode::Unreadable,
            &file,
            "",
            format!("cannot be read: {err}"),
            "make the .env beside the manifest readable, or remove it",
        )),
    }
}

/// Parses `.env` text: `KEY=VALUE` lines (an optional `export ` prefix), `#` comment lines,
/// blank lines. A value may be wrapped in `"…"` (with `\n`, `\"`, `\\` escapes) or `'…'`
/// (literal); an unquoted value is trimmed and ends at ` #`. Later lines win.
pub fn parse_env_file(text: &str, file: &Path) -> Result<HashMap<String, String>, ManifestError> {
    let mut values = HashMap::new();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").map_or(line, str::trim_start);
        let parsed = line.split_once('=').and_then(|(key, value)| {
            let key = key.trim();
            is_var_name(key).then(|| (key.to_string(), unquote(value.trim())))
        });
        match parsed {
            Some((key, Some(value))) => {
                values.insert(key, value);
            }
            _ => {
                let column = raw.len() - raw.trim_start().len() + 1;
                return Err(ManifestError::new(
                    ErrorCode::Syntax,
                    file,
                    "",
                    format!("line {} column {column}: expected KEY=VALUE", index + 1),
                    "write each line as NAME=value (quotes optional); start comments with #",
                )
                .at(Some((index + 1, column))));
            }
        }
    }
    Ok(values)
}

/// The value of a `.env` line; `None` for an unterminated quote.
fn unquote(value: &str) -> Option<String> {
    if let Some(inner) = value.strip_prefix('"') {
        let inner = inner.strip_suffix('"')?;
        let mut out = String::with_capacity(inner.len());
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(other) => out.push(other),
                None => out.push('\\'),
            }
        }
        return Some(out);
    }
    if let Some(inner) = value.strip_prefix('\'') {
        return inner.strip_suffix('\'').map(str::to_string);
    }
    let value = value.find(" #").map_or(value, |at| &value[..at]);
    Some(value.trim_end().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "A" => Some("x".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn replaces_every_reference() {
        assert_eq!(interpolate("a${A}b${A}${EMPTY}c", &env), Ok("axbxc".into()));
        assert_eq!(interpolate("cost $5", &env), Ok("cost $5".into()));
        assert_eq!(
            interpolate("${NOPE}", &env),
            Err(InterpolateError::Unset("NOPE".into()))
        );
        assert_eq!(
            interpolate("x${A", &env),
            Err(InterpolateError::Malformed("${A".into()))
        );
        assert_eq!(
            interpolate("${1A}", &env),
            Err(InterpolateError::Malformed("${1A}".into()))
        );
    }

    #[test]
    fn parses_env_files() {
        let text =
            "# keys\nexport A=1\nB = \"two words\" \nC='${lit}'\nD=plain # note\n\nE=\"a\\nb\"\n";
        let values = parse_env_file(text, Path::new(".env")).unwrap();
        assert_eq!(values["A"], "1");
        assert_eq!(values["B"], "two words");
        assert_eq!(values["C"], "${lit}");
        assert_eq!(values["D"], "plain");
        assert_eq!(values["E"], "a\nb");
    }

    #[test]
    fn refuses_lines_that_are_not_assignments() {
        let err = parse_env_file("A=1\n  oops\n", Path::new("w/.env")).unwrap_err();
        assert_eq!(err.code(), ErrorCode::Syntax);
        assert_eq!(
            err.to_string(),
            "error[E-MAN-002]: w/.env: line 2 column 3: expected KEY=VALUE\n  \
             hint: write each line as NAME=value (quotes optional); start comments with #"
        );
        assert_eq!((err.line(), err.column()), (Some(2), Some(3)));
        assert!(parse_env_file("A=\"open\n", Path::new(".env")).is_err());
    }

    #[test]
    fn protects_references_inside_flow_mappings() {
        let text = "g: { endpoint: https://x, api_key: ${KEY} }\nc: \"$5 ${A} ${bad-name}\"\n";
        let protected = protect(text).unwrap();
        let value: Value = serde_yaml::from_str(&protected).unwrap();
        let value = restore(value);
        assert_eq!(value["g"]["api_key"], Value::from("${KEY}"));
        assert_eq!(value["c"], Value::from("$5 ${A} ${bad-name}"));
        assert_eq!(protect("a: b"), None);
    }

    #[test]
    fn env_file_sits_beside_the_manifest() {
        assert_eq!(
            env_file_for(Path::new("worker/murmur.yaml")),
            PathBuf::from("worker/.env")
        );
        assert_eq!(
            env_file_for(Path::new("murmur.yaml")),
            PathBuf::from(".env")
        );
    }
}
