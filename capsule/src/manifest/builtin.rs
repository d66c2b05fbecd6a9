//! The built-in `murmur/` artifacts: the three http drivers and the two process-driver presets,
//! with the preset command lines. The one place these names and presets live; any other
//! `murmur/` name in a manifest is an error.

use crate::manifest::process::{InputDialect, Interrupt, OutputDialect, ProcessDriver, PromptMode};

/// A built-in artifact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Builtin {
    /// `murmur/driver-anthropic`: http, Anthropic Messages API.
    Anthropic,
    /// `murmur/driver-openai`: http, any OpenAI-compatible endpoint (e.g. a local server).
    OpenAi,
    /// `murmur/driver-deepseek`: http, DeepSeek (OpenAI-compatible).
    DeepSeek,
    /// `murmur/driver-claude-code`: process preset for the Claude Code CLI.
    ClaudeCode,
    /// `murmur/driver-codex`: process preset for the Codex CLI.
    Codex,
}

impl Builtin {
    /// Every built-in, http drivers first.
    pub const ALL: [Builtin; 5] = [
        Builtin::Anthropic,
        Builtin::OpenAi,
        Builtin::DeepSeek,
        Builtin::ClaudeCode,
        Builtin::Codex,
    ];

    /// The artifact name a manifest declares.
    pub fn name(&self) -> &'static str {
        match self {
            Builtin::Anthropic => "murmur/driver-anthropic",
            Builtin::OpenAi => "murmur/driver-openai",
            Builtin::DeepSeek => "murmur/driver-deepseek",
            Builtin::ClaudeCode => "murmur/driver-claude-code",
            Builtin::Codex => "murmur/driver-codex",
        }
    }

    /// The built-in named exactly `name`.
    pub fn parse(name: &str) -> Option<Builtin> {
        Builtin::ALL.into_iter().find(|b| b.name() == name)
    }

    /// True for the http drivers (they take a `gateway`).
    pub fn is_http(&self) -> bool {
        matches!(
            self,
            Builtin::Anthropic | Builtin::OpenAi | Builtin::DeepSeek
        )
    }

    /// The process definition a preset carries; `None` for the http drivers.
    ///
    /// Claude Code: `claude -p --input-format stream-json --output-format stream-json
    /// --verbose`, the task as one user-message line on stdin, `--resume {session}`, and the
    /// in-band `control_request` interrupt (headless Claude Code does not stop a turn on
    /// SIGINT; SIGINT is only the fallback). It takes the guide (`MURMUR_GUIDE`) as
    /// `--append-system-prompt`, so the user line stays the message text; the harness expands
    /// `{guide_text}`. Codex: `codex exec --json`, the guide as its developer instructions
    /// (`-c developer_instructions=…`), prompt on stdin, `resume {session}` (giving
    /// `codex exec --json … resume <id>`), SIGINT, which `codex exec` honours. Each preset's
    /// permission flags and state folder come from the manifest's `harness` block
    /// (`crate::harness::preset`).
    pub fn preset(&self) -> Option<ProcessDriver> {
        let strings = |items: &[&str]| items.iter().map(|s| (*s).to_string()).collect();
        match self {
            Builtin::ClaudeCode => Some(ProcessDriver {
                command: strings(&[
                    "claude",
                    "-p",
                    "--input-format",
                    "stream-json",
                    "--output-format",
                    "stream-json",
                    "--verbose",
                    "--append-system-prompt",
                    "{guide_text}",
                ]),
                prompt: PromptMode::Stdin,
                input: InputDialect::StreamJson,
                output: OutputDialect::StreamJson,
                resume: Some(strings(&["--resume", "{session}"])),
                interrupt: Interrupt::ControlRequest,
                model_args: Some(strings(&["--model", "{model}"])),
            }),
            Builtin::Codex => Some(ProcessDriver {
                command: strings(&[
                    "codex",
                    "exec",
                    "--json",
                    "--skip-git-repo-check",
                    "-c",
                    "developer_instructions={guide_toml}",
                ]),
                prompt: PromptMode::Stdin,
                input: InputDialect::Text,
                output: OutputDialect::CodexJson,
                resume: Some(strings(&["resume", "{session}"])),
                interrupt: Interrupt::Sigint,
                model_args: Some(strings(&["--model", "{model}"])),
            }),
            _ => None,
        }
    }

    /// Codex driven through `codex app-server` (JSON-RPC on stdio), which asks before what its
    /// sandbox refused where `codex exec` never asks: the Codex preset's process under
    /// `harness.approvals: ask` (`crate::harness::codex_rpc`). The guide goes in as the
    /// developer instructions, as for `exec`; the model, the work folder and the thread to
    /// resume go in the protocol's own `thread/start` / `thread/resume`. SIGINT ends it.
    pub fn codex_app_server() -> ProcessDriver {
        ProcessDriver {
            command: [
                "codex",
                "app-server",
                "-c",
                "developer_instructions={guide_toml}",
            ]
            .map(str::to_owned)
            .to_vec(),
            prompt: PromptMode::Stdin,
            input: InputDialect::CodexAppServer,
            output: OutputDialect::CodexAppServer,
            resume: None,
            interrupt: Interrupt::Sigint,
            model_args: None,
        }
    }

    /// The CLI a preset drives, and the version of it this release was tested with (the table in
    /// docs/agent-clis.md); `None` for the http drivers.
    pub fn tested_cli(&self) -> Option<(&'static str, &'static str)> {
        match self {
            Builtin::ClaudeCode => Some(("claude", "2.1.332")),
            Builtin::Codex => Some(("codex", "0.171.0")),
            _ => None,
        }
    }

    /// The built-in names, comma-separated, for hints.
    pub fn names() -> String {
        Builtin::ALL.map(|b| b.name()).join(", ")
    }
}
