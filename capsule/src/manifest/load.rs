//! Turning a file into a validated document: reading it (E-MAN-001; over 1 MiB E-MAN-010),
//! checking its nesting (E-MAN-011) and parsing YAML (E-MAN-002 with line and column), building the variable lookup (process environment, then the `.env` beside
//! the file), and dispatching to the capsule or formation validator.

use crate::manifest::error::{ErrorCode, ManifestError};
use crate::manifest::formation::{self, Formation};
use crate::manifest::interpolate;
use crate::manifest::limits::{self, ReadError, Source};
use crate::manifest::model::Manifest;
use crate::manifest::paths::absolute;
use crate::manifest::reader::Reader;
use crate::manifest::validate;
use serde_yaml::Value;
use std::path::Path;

/// A manifest file: a capsule, or a formation (a file with a top-level `formation:` key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Document {
    /// A capsule manifest.
    Capsule(Box<Manifest>),
    /// A formation manifest, its members loaded.
    Formation(Formation),
}

/// Reads, interpolates (process environment first, then the `.env` beside the file), parses and
/// validates the capsule manifest at `path`.
pub fn load(path: &Path) -> Result<Manifest, ManifestError> {
    let text = read_text(path)?;
    let env = env_lookup(path, &text)?;
    load_str(&text, path, &env)
}

/// The testable core of `load`: `text` is the manifest, `path` names it in messages and anchors
/// relative paths (it need not exist), `env` is the only variable source (`.env` is not read).
pub fn load_str(
    text: &str,
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Manifest, ManifestError> {
    let root = parse_yaml(text, path)?;
    let reader = Reader {
        file: path,
        source: text,
        env,
        kind: "manifest",
    };
    validate::manifest(&reader, &root, absolute(path))
}

/// Loads `path` as whichever document it is. A formation's member manifests are loaded with
/// `load`, each with its own `.env`.
pub fn load_document(path: &Path) -> Result<Document, ManifestError> {
    let text = read_text(path)?;
    let env = env_lookup(path, &text)?;
    let root = parse_yaml(&text, path)?;
    let is_formation = root.get("formation").is_some();
    let reader = Reader {
        file: path,
        source: &text,
        env: &env,
        kind: if is_formation {
            "formation"
        } else {
            "manifest"
        },
    };
    if is_formation {
        formation::read(&reader, &root, absolute(path), &load).map(Document::Formation)
    } else {
        let m = validate::manifest(&reader, &root, absolute(path))?;
        super::approvals::check_door(&reader, &m)?;
        Ok(Document::Capsule(Box::new(m)))
    }
}

/// The file's text; E-MAN-001 when it cannot be read, E-MAN-010 when it is over 1 MiB (found
/// without reading it whole).
fn read_text(path: &Path) -> Result<String, ManifestError> {
    limits::read(path).map_err(|err| {
        let err = match err {
            ReadError::TooLarge(size) => return limits::too_large(path, size, Source::Manifest),
            ReadError::Io(err) => err,
        };
        let hint = if path.is_dir() {
            "name the murmur.yaml inside that folder".to_string()
        } else if err.kind() == std::io::ErrorKind::NotFound {
            "check the path; relative paths are taken from the current folder (formation \
             members: from the formation's folder)"
                .to_string()
        } else {
            "make the file readable (and UTF-8 text)".to_string()
        };
        let message = if path.is_dir() {
            "cannot be read: it is a folder".to_string()
        } else {
            format!("cannot be read: {err}")
        };
        ManifestError::new(ErrorCode::Unreadable, path, "", message, hint)
    })
}

/// `text` as YAML; E-MAN-002 with the line and column serde_yaml reports. `${NAME}` references
/// are kept intact even where YAML would choke on their braces (see `interpolate::protect`).
/// Text over 1 MiB (E-MAN-010), nested past 64 levels (E-MAN-011) or holding an anchor or an
/// alias (E-MAN-002) never reaches the parser.
pub fn parse_yaml(text: &str, path: &Path) -> Result<Value, ManifestError> {
    let size = u64::try_from(text.len()).unwrap_or(u64::MAX);
    if size > limits::MAX_BYTES {
        return Err(limits::too_large(path, Some(size), Source::Manifest));
    }
    let protected = interpolate::protect(text);
    limits::check_depth(protected.as_deref().unwrap_or(text), path)?;
    limits::check_aliases(protected.as_deref().unwrap_or(text), path)?;
    let parsed = serde_yaml::from_str::<Value>(protected.as_deref().unwrap_or(text));
    let value = parsed.map_err(|err| {
        let full = err.to_string();
        let reason = full
            .find(" at line ")
            .map_or(full.as_str(), |at| &full[..at]);
        let position = err.location().map(|l| (l.line(), l.column()));
        let (message, hint) = match position {
            Some((line, column)) if reason.starts_with("duplicate entry") => (
                format!("line {line} column {column}: {reason}"),
                "write each key once in its mapping".to_string(),
            ),
            Some((line, column)) => (
                format!("line {line} column {column}: {reason}"),
                format!(
                    "fix the YAML at line {line}: check the indentation, and quote values that \
                     contain \": \" or start with one of {{ [ * & ! % @"
                ),
            ),
            None => (
                format!("is not valid YAML: {reason}"),
                "a manifest is one YAML document of `key: value` lines".to_string(),
            ),
        };
        ManifestError::new(ErrorCode::Syntax, path, "", message, hint).at(position)
    })?;
    Ok(match protected {
        Some(_) => interpolate::restore(value),
        None => value,
    })
}

/// Variable lookup for the manifest at `path`: process environment, then its `.env` (read only
/// when `text` holds a `${`, so a stray `.env` cannot break a manifest that names no variable).
fn env_lookup(path: &Path, text: &str) -> Result<impl Fn(&str) -> Option<String>, ManifestError> {
    let file_values = if interpolate::has_reference(text) {
        interpolate::read_env_file(path)?
    } else {
        Default::default()
    };
    Ok(move |name: &str| {
        std::env::var(name)
            .ok()
            .or_else(|| file_values.get(name).cloned())
    })
}
