//! How a process driver drives its harness CLI (`artifacts[].process`): plain data, below both
//! the manifest's model and the built-in presets that fill it in.

/// `artifacts[].process`: how to drive a harness CLI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessDriver {
    /// `command`, non-empty. Relative paths have been resolved against the manifest's folder
    /// (`paths::resolve_command`): a first element that contains `/`, and any later element
    /// naming a file beside the manifest. A bare program name is looked up on PATH at spawn.
    /// Presets' commands are never rewritten.
    pub command: Vec<String>,
    /// `prompt`: default `stdin`.
    pub prompt: PromptMode,
    /// `input`: default `text`.
    pub input: InputDialect,
    /// `output`: default `text`.
    pub output: OutputDialect,
    /// `resume`: arguments added when the context has a harness session; at least one element
    /// contains `{session}`.
    pub resume: Option<Vec<String>>,
    /// `interrupt`: default `sigint`.
    pub interrupt: Interrupt,
    /// Arguments added when `inference.model` is set, `{model}` standing for it. Presets only:
    /// an inline process block names its model in its own command.
    pub model_args: Option<Vec<String>>,
}

impl ProcessDriver {
    /// Whether an attempt can resume the context's harness session: by its `resume` arguments,
    /// or in its own protocol (Codex app-server's `thread/resume`).
    pub fn resumes(&self) -> bool {
        self.resume.is_some() || self.input == InputDialect::CodexAppServer
    }
}

/// Where the task's text goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptMode {
    /// `stdin` (default).
    Stdin,
    /// `arg`: appended as the last argument.
    Arg,
}

/// How the harness's stdout is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputDialect {
    /// `text` (default): stdout is the answer.
    Text,
    /// `stream-json`: Claude Code's stream-json.
    StreamJson,
    /// `codex-json`: `codex exec --json` events (used by the `murmur/driver-codex` preset).
    CodexJson,
    /// `codex app-server`'s JSON-RPC lines (the Codex preset under `harness.approvals: ask`;
    /// not a manifest value): responses, notifications and the server's approval requests.
    CodexAppServer,
}

/// What the harness's stdin carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InputDialect {
    /// `text` (default): the task's text as it is, then stdin closes (or stays open for
    /// `interrupt: { stdin: … }`).
    #[default]
    Text,
    /// `stream-json`: Claude Code's `--input-format stream-json`. The task's text goes in as one
    /// user-message line and stdin stays open, so that an interrupt can go in band as a
    /// `control_request` line; it closes when the harness's `result` line ends the turn (the
    /// harness exits on end of input). Requires `prompt: stdin`.
    StreamJson,
    /// `codex app-server`'s JSON-RPC (the Codex preset under `harness.approvals: ask`; not a
    /// manifest value): murmur writes the handshake and the thread, then the turn once the
    /// thread is known, answers the server's approval requests, and closes stdin at
    /// `turn/completed` (the server exits on end of input).
    CodexAppServer,
}

/// How a running harness is asked to stop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Interrupt {
    /// `sigint` (default): SIGINT to the harness's process group.
    Sigint,
    /// `none`: no graceful interrupt; the harness is killed at once.
    None,
    /// `{ stdin: "<bytes>" }`: these bytes are written to the harness's stdin.
    Stdin(Vec<u8>),
    /// `control-request` (the default under `input: stream-json`, and only valid there): an
    /// in-band `control_request` line with subtype `interrupt` and a fresh request id; SIGINT
    /// follows if the harness has not ended within [`CONTROL_REQUEST_BOUND`].
    ControlRequest,
}

/// How long a harness has to end after an in-band `control_request` interrupt before SIGINT is
/// sent as the fallback (the grace then starts over from the SIGINT).
pub const CONTROL_REQUEST_BOUND: std::time::Duration = std::time::Duration::from_secs(1);
