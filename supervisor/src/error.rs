//! The CLI's errors: `error[E-XXX-NNN]: sentence` plus `  hint: …`, exit 1. Launch errors are
//! E-RUN-*, session-address and client errors E-CLI-*; manifest errors (E-MAN-*) come formatted
//! from the capsule crate. Every code is in the table below.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    /// A pinned port is taken.
    PortInUse,
    /// The listener could not be bound for another reason.
    BindFailed,
    /// The capsule process could not be started or never answered its card.
    CapsuleDidNotStart,
    /// `--workdir` is not a folder.
    BadWorkdir,
    /// `--task FILE` could not be read.
    BadTask,
    /// The manifest asks for something this release does not run yet.
    NotAvailable,
    /// `$MURMUR_HOME` could not be written.
    Records,
    /// A session address matches nothing.
    NoSuchSession,
    /// A session address matches several sessions.
    AmbiguousSession,
    /// A command that reads a formation was given a session that is not a formation member.
    NotAFormationMember,
    /// A door could not be reached or answered something unreadable.
    Unreachable,
    /// A door answered a JSON-RPC error.
    Refused,
    /// A harness helper was run outside a task, or its capsule refused it.
    Helper,
    /// A command that hands out credentials was run inside a harness.
    InsideHarness,
    /// The kernel refuses the containment `MURMUR_CONTAINMENT` requires.
    Containment,
    /// `mur render --target` names a target this release cannot render.
    BadTarget,
    /// The formation asks for something its render target cannot enforce (or cannot name).
    RenderRefused,
    /// `--secrets-from` could not be read or lacks a token the formation needs.
    BadSecrets,
    /// The rendered objects could not be written.
    RenderOutput,
    /// A command's argument or a variable it reads does not read.
    BadArgument,
    /// `mur run --resume` names a launch that cannot be resumed: still running, its records
    /// gone, or its manifest naming a member it did not have.
    NotResumable,
}

const TABLE: [(Code, &str); 21] = [
    (Code::PortInUse, "E-RUN-010"),
    (Code::BindFailed, "E-RUN-011"),
    (Code::CapsuleDidNotStart, "E-RUN-012"),
    (Code::BadWorkdir, "E-RUN-020"),
    (Code::BadTask, "E-RUN-021"),
    (Code::NotAvailable, "E-RUN-030"),
    (Code::Records, "E-RUN-040"),
    (Code::NoSuchSession, "E-CLI-001"),
    (Code::AmbiguousSession, "E-CLI-002"),
    (Code::NotAFormationMember, "E-CLI-003"),
    (Code::Unreachable, "E-CLI-010"),
    (Code::Refused, "E-CLI-011"),
    (Code::Helper, "E-CLI-020"),
    (Code::InsideHarness, "E-CLI-021"),
    (Code::Containment, "E-RUN-050"),
    (Code::BadTarget, "E-RND-001"),
    (Code::RenderRefused, "E-RND-002"),
    (Code::BadSecrets, "E-RND-003"),
    (Code::RenderOutput, "E-RND-004"),
    (Code::BadArgument, "E-CLI-030"),
    (Code::NotResumable, "E-RUN-061"),
];

impl Code {
    pub fn as_str(self) -> &'static str {
        TABLE
            .iter()
            .find(|(c, _)| *c == self)
            .map(|(_, s)| *s)
            .unwrap_or("E-CLI-000")
    }
}

/// A CLI failure, printed once by `main`.
#[derive(Debug)]
pub enum CliError {
    Coded {
        code: Code,
        message: String,
        hint: String,
    },
    /// Already formatted (manifest errors).
    Formatted(String),
}

impl CliError {
    pub fn new(code: Code, message: impl Into<String>, hint: impl Into<String>) -> Self {
        CliError::Coded {
            code,
            message: message.into(),
            hint: hint.into(),
        }
    }

    /// What went wrong, without its code and hint (one line of a live view).
    pub fn message(&self) -> &str {
        match self {
            CliError::Coded { message, .. } => message,
            CliError::Formatted(text) => text,
        }
    }

    /// The same error, said of `what` (`member coder: port 52222 is already in use`).
    pub fn within(self, what: &str) -> Self {
        match self {
            CliError::Coded {
                code,
                message,
                hint,
            } => CliError::Coded {
                code,
                message: format!("{what}: {message}"),
                hint,
            },
            CliError::Formatted(text) => CliError::Formatted(text),
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Coded {
                code,
                message,
                hint,
            } => write!(f, "error[{}]: {message}\n  hint: {hint}", code.as_str()),
            CliError::Formatted(s) => f.write_str(s),
        }
    }
}

pub type CliResult<T> = Result<T, CliError>;
