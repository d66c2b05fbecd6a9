//! Manifest errors: the `E-MAN-*` code table and the error value every manifest and formation
//! problem becomes. Kept in one place so the codes, their meanings and the printed form
//! (`error[E-MAN-NNN]: sentence` + `  hint: …`) cannot drift between callers and docs.

use std::fmt;
use std::path::{Path, PathBuf};

/// The code of a manifest error. `as_str()` is what users see and search for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// E-MAN-001: the manifest (or the `.env` beside it) cannot be read.
    Unreadable,
    /// E-MAN-002: the manifest is not valid YAML, or a `.env` line is not `KEY=VALUE`.
    Syntax,
    /// E-MAN-003: a key the manifest format does not have (a typo must not pass silently).
    UnknownKey,
    /// E-MAN-004: a required key is absent.
    MissingKey,
    /// E-MAN-005: a key has the wrong type or a value outside what it accepts.
    BadValue,
    /// E-MAN-006: a `${VAR}` names a variable set neither in the environment nor in `.env`.
    UnsetVariable,
    /// E-MAN-007: the driver: not declared, an unknown `murmur/` built-in, or unfit for
    /// `inference.transport`.
    Driver,
    /// E-MAN-008: a credential scope that is not a scope, or an A2A 0.3 name.
    Scope,
    /// E-MAN-009: a formation that cannot launch: unknown member in `calls`, no or unknown
    /// `entry`, two members on one port, a called member that does not accept peer tasks.
    Formation,
    /// E-MAN-010: the manifest is larger than `load::MAX_MANIFEST_BYTES` (1 MiB). Refused before
    /// it is read whole, so a huge file costs neither time nor memory.
    TooLarge,
    /// E-MAN-011: the manifest nests lists and mappings deeper than `depth::MAX_DEPTH` (64).
    /// Refused by a pre-scan before the YAML parser sees it.
    TooDeep,
}

impl ErrorCode {
    /// Every code, in numeric order.
    pub const ALL: [ErrorCode; 11] = [
        ErrorCode::Unreadable,
        ErrorCode::Syntax,
        ErrorCode::UnknownKey,
        ErrorCode::MissingKey,
        ErrorCode::BadValue,
        ErrorCode::UnsetVariable,
        ErrorCode::Driver,
        ErrorCode::Scope,
        ErrorCode::Formation,
        ErrorCode::TooLarge,
        ErrorCode::TooDeep,
    ];

    /// The printed code, e.g. `E-MAN-003`.
    pub fn as_str(&self) -> &'static str {
        match self {
            ErrorCode::Unreadable => "E-MAN-001",
            ErrorCode::Syntax => "E-MAN-002",
            ErrorCode::UnknownKey => "E-MAN-003",
            ErrorCode::MissingKey => "E-MAN-004",
            ErrorCode::BadValue => "E-MAN-005",
            ErrorCode::UnsetVariable => "E-MAN-006",
            ErrorCode::Driver => "E-MAN-007",
            ErrorCode::Scope => "E-MAN-008",
            ErrorCode::Formation => "E-MAN-009",
            ErrorCode::TooLarge => "E-MAN-010",
            ErrorCode::TooDeep => "E-MAN-011",
        }
    }

    /// One line saying what the code means (the docs table uses the same words).
    pub fn meaning(&self) -> &'static str {
        match self {
            ErrorCode::Unreadable => "the manifest or the .env beside it cannot be read",
            ErrorCode::Syntax => "the manifest is not valid YAML, or a .env line is not KEY=VALUE",
            ErrorCode::UnknownKey => "a key that is not a manifest key",
            ErrorCode::MissingKey => "a required key is absent",
            ErrorCode::BadValue => "a value of the wrong type or outside the accepted values",
            ErrorCode::UnsetVariable => "a ${VAR} names a variable that is not set",
            ErrorCode::Driver => {
                "the driver artifact is not declared, is an unknown built-in, or does not fit \
                 inference.transport"
            }
            ErrorCode::Scope => "a credential scope is unknown or an A2A 0.3 name",
            ErrorCode::Formation => "the formation's members, calls, entry or ports do not fit",
            ErrorCode::TooLarge => "the manifest is larger than 1 MiB",
            ErrorCode::TooDeep => "the manifest nests lists and mappings more than 64 levels deep",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A manifest or formation error: prints as `error[E-MAN-NNN]: <file>: <message>` then
/// `  hint: <hint>`. Boxed inside so `Result<_, ManifestError>` stays one pointer wide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestError(Box<Inner>);

#[derive(Debug, Clone, PartialEq, Eq)]
struct Inner {
    code: ErrorCode,
    file: PathBuf,
    key_path: String,
    message: String,
    hint: String,
    position: Option<(usize, usize)>,
    /// The formation member whose manifest this is about.
    member: Option<String>,
}

impl ManifestError {
    /// An error about `file` at `key_path` (dotted, `""` for the whole file). `message` is the
    /// sentence after `<file>: `.
    pub fn new(
        code: ErrorCode,
        file: &Path,
        key_path: impl Into<String>,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) -> ManifestError {
        ManifestError(Box::new(Inner {
            code,
            file: file.to_path_buf(),
            key_path: key_path.into(),
            message: message.into(),
            hint: hint.into(),
            position: None,
            member: None,
        }))
    }

    /// The same error, about the manifest of formation member `name`.
    pub fn of_member(mut self, name: &str) -> ManifestError {
        self.0.member = Some(name.to_owned());
        self
    }

    /// The formation member whose manifest the error is about.
    pub fn member(&self) -> Option<&str> {
        self.0.member.as_deref()
    }

    /// The same error with the 1-based line and column it points at.
    pub fn at(mut self, position: Option<(usize, usize)>) -> ManifestError {
        self.0.position = position;
        self
    }

    /// The error's code.
    pub fn code(&self) -> ErrorCode {
        self.0.code
    }

    /// The file the error is about, as the caller named it.
    pub fn file(&self) -> &Path {
        &self.0.file
    }

    /// The dotted key path (`artifacts[1].process.command`); empty when the whole file is meant.
    pub fn key_path(&self) -> &str {
        &self.0.key_path
    }

    /// The sentence after the file name.
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// How to fix it.
    pub fn hint(&self) -> &str {
        &self.0.hint
    }

    /// The full first-line sentence: `<file>: <message>`, after `member NAME: ` when the file
    /// is a formation member's manifest.
    pub fn sentence(&self) -> String {
        let member = match &self.0.member {
            Some(name) => format!("member {name}: "),
            None => String::new(),
        };
        format!("{member}{}: {}", self.0.file.display(), self.0.message)
    }

    /// 1-based line of the offending spot, when known (always for YAML syntax errors).
    pub fn line(&self) -> Option<usize> {
        self.0.position.map(|(line, _)| line)
    }

    /// 1-based column of the offending spot, when known (always for YAML syntax errors).
    pub fn column(&self) -> Option<usize> {
        self.0.position.map(|(_, column)| column)
    }
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "error[{}]: {}\n  hint: {}",
            self.0.code.as_str(),
            self.sentence(),
            self.0.hint
        )
    }
}

impl std::error::Error for ManifestError {}

#[cfg(test)]
mod tests {
    use super::{ErrorCode, ManifestError};
    use std::path::Path;

    #[test]
    fn codes_are_numbered_in_order() {
        for (i, code) in ErrorCode::ALL.iter().enumerate() {
            assert_eq!(code.as_str(), format!("E-MAN-{:03}", i + 1));
            assert!(!code.meaning().is_empty());
        }
    }

    #[test]
    fn display_is_two_lines() {
        let err = ManifestError::new(
            ErrorCode::UnknownKey,
            Path::new("worker/murmur.yaml"),
            "lifecycle.x",
            "lifecycle.x is not a manifest key",
            "remove it",
        );
        assert_eq!(
            err.to_string(),
            "error[E-MAN-003]: worker/murmur.yaml: lifecycle.x is not a manifest key\n  hint: remove it"
        );
        assert_eq!(err.line(), None);
    }
}
