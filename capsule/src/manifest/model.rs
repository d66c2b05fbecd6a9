//! The validated capsule manifest: plain data the rest of murmur reads. Nothing here parses or
//! checks anything — `validate` builds these values only from a manifest that passed every check,
//! so holders of a `Manifest` never re-validate. Defaults are documented on each field.

use crate::auth::scope::Scope;
use crate::manifest::builtin::Builtin;
pub use crate::manifest::process::{
    InputDialect, Interrupt, OutputDialect, ProcessDriver, PromptMode, CONTROL_REQUEST_BOUND,
};
use std::path::PathBuf;

/// A validated `murmur.yaml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// Absolute path of the file (lexically normalized, symlinks not resolved).
    pub path: PathBuf,
    /// Its folder: relative process commands and `capabilities.delegate.allow` resolve here.
    pub dir: PathBuf,
    /// `name`: letters, digits, `.`, `_`, `-`.
    pub name: String,
    /// `version`.
    pub version: String,
    /// `artifacts`, in declared order; names are unique.
    pub artifacts: Vec<Artifact>,
    /// `network`.
    pub network: Network,
    /// `inference`.
    pub inference: Inference,
    /// `lifecycle`.
    pub lifecycle: Lifecycle,
    /// `exports`.
    pub exports: Exports,
    /// `capabilities`.
    pub capabilities: Capabilities,
    /// `context`.
    pub context: ContextLimits,
    /// `harness`: what a CLI preset may do (the defaults when absent).
    pub harness: HarnessPolicy,
    /// `spend`: the ceilings on the session's and its tasks' model calls, and their prices.
    pub spend: super::SpendPolicy,
}

impl Manifest {
    /// The artifact `inference.driver.artifact` names (or the only artifact, when that key is
    /// absent). `None` only for a capsule with `task_acceptance: none` and no driver.
    pub fn driver_artifact(&self) -> Option<&Artifact> {
        let name = self.inference.driver_artifact.as_deref()?;
        self.artifacts.iter().find(|a| a.name == name)
    }

    /// Whether the capsule starts programs in containment: a harness per task attempt, or the
    /// shell commands of an http capsule's model (`capabilities.shell.allow`).
    pub fn runs_contained(&self) -> bool {
        self.lifecycle.task_acceptance != TaskAcceptance::None
            && (self.inference.transport == Transport::Process
                || !self.capabilities.shell_allow.is_empty())
    }
}

/// One entry of `artifacts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// `name`, e.g. `murmur/driver-anthropic` or `local/driver-scripted`.
    pub name: String,
    /// `version`, when declared.
    pub version: Option<String>,
    /// `runtime`: only `driver` is accepted for now.
    pub runtime: String,
    /// The built-in this artifact is, for `murmur/` names.
    pub builtin: Option<Builtin>,
    /// `gateway`: present exactly on http drivers (required on the built-in http drivers).
    pub gateway: Option<Gateway>,
    /// `process`: the declared block, or the preset's definition for `murmur/driver-claude-code`
    /// and `murmur/driver-codex` (see `Builtin::preset`).
    pub process: Option<ProcessDriver>,
}

impl Artifact {
    /// True for a process driver: a preset or an artifact with a `process` block.
    pub fn is_process_driver(&self) -> bool {
        self.process.is_some()
    }

    /// True for a built-in http driver (anthropic, openai-compatible, deepseek).
    pub fn is_http_driver(&self) -> bool {
        self.builtin.is_some_and(|b| b.is_http()) && self.gateway.is_some()
    }
}

/// `artifacts[].gateway`. Its `Debug` leaves the key out: a manifest printed for debugging
/// must not carry it.
#[derive(Clone, PartialEq, Eq)]
pub struct Gateway {
    /// `endpoint`: an `http://` or `https://` URL.
    pub endpoint: String,
    /// `api_key`, usually `${…}`; `None` for endpoints that need none (e.g. a local server).
    pub api_key: Option<String>,
    /// `api`: the wire format a process driver's CLI speaks (a preset knows its own; an http
    /// driver's is its built-in's).
    pub api: Option<ModelApi>,
}

/// The provider APIs the model gateway forwards (`gateway.api`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelApi {
    /// Anthropic's Messages API (`/v1/messages`).
    Anthropic,
    /// OpenAI's Responses API (`/responses`), Codex's.
    OpenaiResponses,
    /// OpenAI's Chat Completions (`/chat/completions`), and every compatible server.
    OpenaiChat,
}

impl ModelApi {
    /// The manifest's spelling, in one table.
    pub const NAMES: [(&'static str, ModelApi); 3] = [
        ("anthropic", ModelApi::Anthropic),
        ("openai-responses", ModelApi::OpenaiResponses),
        ("openai-chat", ModelApi::OpenaiChat),
    ];
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("endpoint", &self.endpoint)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("api", &self.api)
            .finish()
    }
}

/// `network`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Network {
    /// `internal_port`: a pinned port (1-65535); `None` lets the OS assign one.
    pub internal_port: Option<u16>,
    /// `authentication`: `None` means a public door.
    pub authentication: Option<Authentication>,
    /// `hosts`: more names the door answers for (a proxy's, a DNS name of the machine), each
    /// `name` at the door's port or `name:port`; loopback and the advertised address always.
    pub hosts: Vec<String>,
}

/// `network.authentication` (scheme `bearer`, the only one).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Authentication {
    /// `credentials`, in declared order: name and its scopes (declared order, duplicates
    /// dropped). `operator` and names starting `member:` are reserved and never appear here.
    pub credentials: Vec<(String, Vec<Scope>)>,
}

/// `inference`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inference {
    /// `transport`: when absent, the driver's kind (process driver → process, else http).
    pub transport: Transport,
    /// `model`: required under http, optional under process.
    pub model: Option<String>,
    /// `driver.artifact`: when absent and exactly one artifact is declared, that artifact.
    pub driver_artifact: Option<String>,
    /// `max_turns`: default 10, at least 1.
    pub max_turns: u32,
    /// `max_tokens`: default 8192, at least 1.
    pub max_tokens: u32,
    /// `max_total_tokens`: the spend ceiling of an http capsule's task — input and output
    /// tokens the provider reported, summed over the task's calls. `None` (absent): no ceiling.
    pub max_total_tokens: Option<u64>,
}

/// `inference.transport`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// `http`: a built-in http driver calls a model provider.
    Http,
    /// `process`: a harness CLI is driven as a child process.
    Process,
}

impl Transport {
    /// The manifest spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            Transport::Http => "http",
            Transport::Process => "process",
        }
    }
}

/// `lifecycle`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifecycle {
    /// `task_acceptance`: default `single`.
    pub task_acceptance: TaskAcceptance,
    /// `after_task`: default `exit` under single, `sleep` under queue and none.
    pub after_task: AfterTask,
    /// `queue_depth`: tasks waiting behind the running one. Only under queue (default 2);
    /// 0 under single and none, where declaring it is an error.
    pub queue_depth: usize,
}

/// `lifecycle.task_acceptance`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskAcceptance {
    /// `none`: the door starts no tasks.
    None,
    /// `single` (default): one task at a time, no queue.
    Single,
    /// `queue`: one running plus `queue_depth` waiting.
    Queue,
}

impl TaskAcceptance {
    /// The manifest spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            TaskAcceptance::None => "none",
            TaskAcceptance::Single => "single",
            TaskAcceptance::Queue => "queue",
        }
    }
}

/// `lifecycle.after_task`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterTask {
    /// `sleep`: stay up and keep answering.
    Sleep,
    /// `exit`: end the capsule once the task (and the queue) has settled.
    Exit,
}

/// `exports`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Exports {
    /// `peer_tasks.accept`: false when absent.
    pub peer_tasks_accept: bool,
    /// `files` is declared (its content is not read yet).
    pub files: bool,
    /// `peer_files` is declared (its content is not read yet).
    pub peer_files: bool,
}

/// `capabilities`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Capabilities {
    /// `network.allow`: destinations (`host:port`, URLs) as written.
    pub network_allow: Vec<String>,
    /// `shell.allow`: commands as written.
    pub shell_allow: Vec<String>,
    /// `delegate.allow`: manifests, absolute (resolved against the manifest's folder).
    pub delegate_allow: Vec<PathBuf>,
}

/// `context`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextLimits {
    /// `images.max_bytes`: default 5242880.
    pub images_max_bytes: u64,
    /// `images.max_per_turn`: default 4.
    pub images_max_per_turn: usize,
}

impl Default for ContextLimits {
    fn default() -> ContextLimits {
        ContextLimits {
            images_max_bytes: 5_242_880,
            images_max_per_turn: 4,
        }
    }
}

/// `harness`: what an agent CLI driven by a preset may do inside its capsule. Each preset maps
/// it to its CLI's own flags (`crate::harness::preset`); murmur's helpers are runnable at every
/// level.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HarnessPolicy {
    /// `permissions`: default `read`.
    pub permissions: Permissions,
    /// `allow_commands`: command prefixes (program, then the arguments it starts with) the agent
    /// may run whatever its level.
    pub allow_commands: Vec<Vec<String>>,
    /// `state`: default `capsule`.
    pub state: StateHome,
    /// `env`: names of variables of murmur's environment the harness also receives, beside
    /// the allow list every harness gets (DESIGN §8). Any process driver reads it.
    pub env: Vec<String>,
    /// `require`: walls of the jail a harness of this capsule may not run without; a launch
    /// where one is missing is refused (E-RUN-050).
    pub require: Vec<Wall>,
    /// `read`: paths of the jail's deny-read list (the user's secrets, docs/containment.md) the
    /// harness may read after all; absolute or `~/…`, as written.
    pub read: Vec<std::path::PathBuf>,
    /// `protect`: more paths the harness may not change (beside this run's manifests, `mur` and
    /// what decides the user's next command); relative to the work folder or absolute.
    pub protect: Vec<std::path::PathBuf>,
    /// `limits`: pids, memory and tmp of each attempt (`manifest::harness_limits`).
    pub limits: crate::manifest::harness_limits::HarnessLimits,
    /// `approvals`, `approve`, `deny`, `approval_timeout_secs`, `approvals_from`
    /// (`manifest::approvals`).
    pub approvals: crate::manifest::approvals::ApprovalPolicy,
}

/// One wall of the jail (DESIGN §8), as `harness.require` and the trace's `walls` name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wall {
    Pid,
    Mount,
    Network,
    Files,
    Environment,
}

impl Wall {
    /// Every wall, in the order they are reported.
    pub const ALL: [Wall; 5] = [
        Wall::Pid,
        Wall::Mount,
        Wall::Network,
        Wall::Files,
        Wall::Environment,
    ];

    /// The manifest's and the trace's spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            Wall::Pid => "pid",
            Wall::Mount => "mount",
            Wall::Network => "network",
            Wall::Files => "files",
            Wall::Environment => "environment",
        }
    }
}

/// `harness.permissions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Permissions {
    /// `read` (default): read files and run murmur's helpers; nothing else runs.
    #[default]
    Read,
    /// `edit`: also edit files in the work folder.
    Edit,
    /// `full`: run any command; the capsule's containment is the only wall.
    Full,
}

impl Permissions {
    /// The manifest spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            Permissions::Read => "read",
            Permissions::Edit => "edit",
            Permissions::Full => "full",
        }
    }
}

/// `harness.state`: where the CLI keeps its sessions, caches and settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StateHome {
    /// `capsule` (default): a folder of the session's records, so two capsules never share a
    /// session store and the user's own CLI folder is left as it was.
    #[default]
    Capsule,
    /// `user`: the CLI's own folder (`~/.claude`, `~/.codex`).
    User,
}
