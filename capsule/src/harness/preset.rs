//! What the CLI presets are told beyond their command (DESIGN §8, docs/agent-clis.md): the
//! manifest's `harness` block mapped to Claude Code's and Codex's own permission flags, so that a
//! headless CLI neither stops on a prompt nobody can answer nor refuses murmur's helpers; and the
//! folder each keeps its sessions in, under the session's records unless the manifest says
//! `state: user`. Prepared once when the capsule starts; every attempt reuses it.

use std::ffi::OsString;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use super::route::{self, CodexProvider};
use crate::manifest::approvals::Mode as ApprovalMode;
use crate::manifest::{Builtin, Gateway, HarnessPolicy, Permissions, StateHome};

/// murmur's helper commands: runnable at every permission level.
pub const HELPERS: [&str; 5] = [
    "call-member",
    "delegate-task",
    "send-message",
    "request-input",
    "end-without-answer",
];

/// Claude Code's bounds on one Bash command: its default and the most a call may ask for.
const BASH_TIMEOUTS: [&str; 2] = ["BASH_DEFAULT_TIMEOUT_MS", "BASH_MAX_TIMEOUT_MS"];

/// The longest a helper waits by default (`call-member`, `send-message`), in milliseconds.
fn helper_wait_ms() -> String {
    (crate::peers::DEFAULT_WAIT_SECS * 1000).to_string()
}

/// The folder of the session's records that holds the CLI's state under `state: capsule`.
pub const STATE_DIR: &str = "harness-state";

/// What a preset adds to its command line and environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prepared {
    /// Flags that go right after the preset's command, before the model and resume arguments.
    pub args: Vec<String>,
    pub env: Vec<(String, OsString)>,
    /// Where the CLI itself must reach (its provider's API), as allow-list entries: the jail's
    /// egress proxy admits them beside the manifest's allow list.
    pub egress: Vec<String>,
    /// Variables of murmur's environment the CLI needs (its provider's settings), beside the
    /// allow list every harness gets (`harness::env`); `*` ends a prefix. Never its key: see
    /// `route`.
    pub pass: Vec<String>,
    /// How the CLI reaches its model through the capsule's gateway; `None`: its own way out.
    pub route: Option<Box<super::route::Route>>,
}

impl PartialEq for super::route::Route {
    fn eq(&self, other: &Self) -> bool {
        self.endpoint == other.endpoint && self.api == other.api && self.base == other.base
    }
}

impl Eq for super::route::Route {}

/// Maps `policy` to `preset`'s flags, and makes its state folder (seeded from the user's own
/// login, see [`seed`]) when the state is the capsule's. `mur` is the binary the helpers run as.
pub fn prepare(
    preset: Builtin,
    policy: &HarnessPolicy,
    mur: &Path,
    records_dir: &Path,
    gateway: Option<&Gateway>,
) -> std::io::Result<Prepared> {
    let state = match policy.state {
        StateHome::Capsule => Some(records_dir.join(STATE_DIR)),
        StateHome::User => None,
    };
    match preset {
        Builtin::ClaudeCode => claude_code(policy, mur, state, gateway),
        Builtin::Codex => codex(policy, mur, state, gateway),
        _ => Ok(Prepared::default()),
    }
}

/// The names `mur` may be run by under Claude Code: the full path the guide writes, and the bare
/// name its shell finds first on PATH (`mur`'s folder; Claude Code asks before any command that
/// changes PATH).
fn mur_names(mur: &Path) -> Vec<String> {
    let mut names = vec!["mur".to_owned()];
    let full = mur.to_string_lossy().into_owned();
    if full != "mur" {
        names.push(full);
    }
    names
}

/// Claude Code headless (`-p`) denies every tool call that needs approval, so the level is its
/// permission mode plus `--allowedTools` patterns: murmur's helpers always, every Bash command
/// and editing tool under `full`. `bypassPermissions` is not used: Claude Code refuses it as root.
fn claude_code(
    policy: &HarnessPolicy,
    mur: &Path,
    state: Option<PathBuf>,
    gateway: Option<&Gateway>,
) -> std::io::Result<Prepared> {
    let mode = match policy.permissions {
        Permissions::Read => "default",
        Permissions::Edit | Permissions::Full => "acceptEdits",
    };
    let mut tools: Vec<String> = Vec::new();
    for name in mur_names(mur) {
        tools.extend(HELPERS.iter().map(|h| format!("Bash({name} {h}:*)")));
    }
    if policy.permissions == Permissions::Full {
        let all = [
            "Bash",
            "Edit",
            "Write",
            "NotebookEdit",
            "WebFetch",
            "WebSearch",
        ];
        tools.extend(all.iter().map(|t| (*t).to_owned()));
    }
    tools.extend(
        policy
            .allow_commands
            .iter()
            .map(|words| format!("Bash({}:*)", words.join(" "))),
    );
    // Claude Code ends a Bash command after 2 minutes by default; murmur's helpers wait up to
    // their own bound (a member's answer, a person's approval), so the CLI gives commands that
    // long; murmur's own environment may set either.
    let mut env: Vec<(String, OsString)> = BASH_TIMEOUTS
        .iter()
        .map(|var| {
            let value = std::env::var_os(var).unwrap_or_else(|| helper_wait_ms().into());
            (var.to_string(), value)
        })
        .collect();
    if let Some(dir) = state {
        let user = user_folder("CLAUDE_CONFIG_DIR", ".claude");
        seed(&dir, user.as_deref(), &[], &[".credentials.json"])?;
        env.push(("CLAUDE_CONFIG_DIR".to_owned(), dir.into_os_string()));
    }
    let mut args = vec![
        "--permission-mode".into(),
        mode.into(),
        "--allowedTools".into(),
        tools.join(","),
    ];
    // Under `approvals: ask` what the level does not allow becomes a `can_use_tool` request on
    // stdout, answered on stdin (harness::approvals); without it headless Claude Code refuses.
    if policy.approvals.mode == ApprovalMode::Ask {
        args.extend(["--permission-prompt-tool".into(), "stdio".into()]);
    }
    // Every call, with a key or with the account's own credential, goes through the gateway.
    Ok(Prepared {
        args,
        env,
        egress: Vec::new(),
        pass: vec!["ANTHROPIC_*".into(), "CLAUDE_CODE_*".into()],
        route: Some(Box::new(route::claude_code(gateway))),
    })
}

/// Codex runs model commands in its own sandbox: `read-only` forbids every write and every
/// socket (so a helper could not reach the capsule's door), `workspace-write` allows writes in
/// the work folder. murmur's helpers, and the manifest's `allow_commands`, run outside that
/// sandbox through an execpolicy rule in the state folder — still inside murmur's containment.
/// The rule names `mur` by its full path only: a rule for the bare name would let out whatever
/// program the agent could put first on PATH.
fn codex(
    policy: &HarnessPolicy,
    mur: &Path,
    state: Option<PathBuf>,
    gateway: Option<&Gateway>,
) -> std::io::Result<Prepared> {
    let sandbox = match policy.permissions {
        Permissions::Read => "read-only",
        Permissions::Edit => "workspace-write",
        Permissions::Full => "danger-full-access",
    };
    let mut env = Vec::new();
    let user = user_folder("CODEX_HOME", ".codex");
    let config = state
        .as_deref()
        .or(user.as_deref())
        .map(|d| d.join("config.toml"));
    if let Some(dir) = state {
        seed(&dir, user.as_deref(), &["config.toml"], &["auth.json"])?;
        let rules = dir.join("rules");
        crate::private::create_dir_all(&rules)?;
        crate::private::write(
            &rules.join("murmur.rules"),
            codex_rules(policy, mur).as_bytes(),
        )?;
        env.push(("CODEX_HOME".to_owned(), dir.into_os_string()));
    }
    let config = config
        .and_then(|c| std::fs::read_to_string(c).ok())
        .unwrap_or_default();
    let provider = codex_provider(&config);
    let route = route::codex(gateway, provider.as_ref()).map(Box::new);
    let mut pass = vec!["CODEX_*".into()];
    // An account login (no key anywhere) keeps Codex's own way to its own host.
    let egress = match &route {
        Some(_) => Vec::new(),
        None => {
            pass.extend(["OPENAI_API_KEY".into(), "OPENAI_BASE_URL".into()]);
            let endpoint = provider
                .as_ref()
                .and_then(|p| p.base_url.clone())
                .or_else(|| std::env::var("OPENAI_BASE_URL").ok())
                .unwrap_or_else(|| "https://api.openai.com".into());
            vec![crate::policy::shown(&endpoint)]
        }
    };
    if policy.permissions != Permissions::Full {
        codex_daemon_folder()?;
    }
    // `codex app-server` (approvals: ask) asks before each command its rules do not let out
    // (`approvalPolicy: untrusted`, sent with the thread). Its own sandbox is off there: the
    // command the operator approves runs as approved, inside murmur's jail, which bounds it as
    // it bounds every command. (Asking only after the sandbox refused, its granular policy,
    // depends on Codex recognising the refusal, which under load it sometimes did not: the
    // model got the refusal and nobody was asked.)
    let mut args = match policy.approvals.mode {
        ApprovalMode::Deny => vec!["--sandbox".to_owned(), sandbox.to_owned()],
        ApprovalMode::Ask => vec![
            "-c".to_owned(),
            "sandbox_mode=\"danger-full-access\"".to_owned(),
        ],
    };
    if policy.permissions == Permissions::Edit && policy.approvals.mode == ApprovalMode::Deny {
        // In murmur's jail /tmp is read-only and TMPDIR is the attempt's private tmp: Codex's
        // sandbox must not claim /tmp as a writable root (it would try to protect /tmp/.git).
        args.extend([
            "-c".into(),
            "sandbox_workspace_write.exclude_slash_tmp=true".into(),
        ]);
    }
    Ok(Prepared {
        args,
        env,
        egress,
        pass,
        route,
    })
}

/// Codex refuses to build its sandbox (bubblewrap) without `/tmp/codex-daemon-<euid>`, the
/// rendezvous folder of the user's Codex app-server sockets, which the sandbox hides: it makes
/// that folder (0700) itself, at a fixed path in `/tmp` (not `TMPDIR`), and answers "error building
/// bubblewrap command: Read-only file system" where `/tmp` is read-only — as it is in murmur's
/// jail. So it is made here, before the jail, as Codex itself would make it on an ordinary run;
/// the jail then covers it with an empty folder of the attempt's own (`process::files`), so the
/// user's own Codex sockets stay out of the harness's sight.
fn codex_daemon_folder() -> std::io::Result<()> {
    let dir = PathBuf::from(format!(
        "/tmp/codex-daemon-{}",
        nix::unistd::geteuid().as_raw()
    ));
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(std::io::Error::new(
            e.kind(),
            format!("making Codex's sandbox folder {}: {e}", dir.display()),
        )),
        _ => Ok(()),
    }
}

/// The provider a Codex `config.toml` selects (`model_provider`, whose entry is under
/// `[model_providers.<name>]`); `None` for Codex's own default provider.
fn codex_provider(config: &str) -> Option<CodexProvider> {
    let value: toml::Value = toml::from_str(config).ok()?;
    let name = value.get("model_provider")?.as_str()?;
    let entry = value.get("model_providers")?.get(name)?;
    let text = |k: &str| entry.get(k).and_then(|v| v.as_str()).map(str::to_owned);
    Some(CodexProvider {
        name: name.to_owned(),
        base_url: text("base_url"),
        env_key: text("env_key"),
    })
}

/// Codex execpolicy rules (Starlark): each `prefix_rule` lets commands starting with its words
/// run without approval, outside Codex's sandbox.
fn codex_rules(policy: &HarnessPolicy, mur: &Path) -> String {
    let quoted = |w: &str| serde_json::Value::from(w).to_string();
    let helpers: Vec<String> = HELPERS.iter().map(|h| quoted(h)).collect();
    let mut out = String::from("# Written by murmur for this capsule: its helpers, and the manifest's harness.allow_commands.\n");
    out.push_str(&format!(
        "prefix_rule(pattern = [{}, [{}]], decision = \"allow\")\n",
        quoted(&mur.to_string_lossy()),
        helpers.join(", ")
    ));
    for words in &policy.allow_commands {
        let words: Vec<String> = words.iter().map(|w| quoted(w)).collect();
        out.push_str(&format!(
            "prefix_rule(pattern = [{}], decision = \"allow\")\n",
            words.join(", ")
        ));
    }
    out
}

/// The user's own folder of a CLI: `$VAR`, else `~/<dot>`.
fn user_folder(var: &str, dot: &str) -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(var).filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| Path::new(&h).join(dot))
}

/// Makes the capsule's state folder (0700) and carries the user's login into it: `copies` are
/// copied (settings the CLI may rewrite, so the user's file is never touched), `links` are
/// symlinked (credentials: no secret is written into the records, and a refreshed login is seen).
fn seed(dir: &Path, user: Option<&Path>, copies: &[&str], links: &[&str]) -> std::io::Result<()> {
    crate::private::create_dir_all(dir)?;
    let Some(user) = user.filter(|u| *u != dir) else {
        return Ok(());
    };
    for name in copies {
        let from = user.join(name);
        if let Ok(bytes) = std::fs::read(&from) {
            crate::private::write(&dir.join(name), &bytes)?;
        }
    }
    for name in links {
        let from = user.join(name);
        let to = dir.join(name);
        if from.is_file() && std::fs::symlink_metadata(&to).is_err() {
            std::os::unix::fs::symlink(&from, &to)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(permissions: Permissions, allow: &[&str]) -> HarnessPolicy {
        HarnessPolicy {
            permissions,
            allow_commands: allow
                .iter()
                .map(|c| c.split(' ').map(str::to_owned).collect())
                .collect(),
            state: StateHome::User,
            env: Vec::new(),
            require: Vec::new(),
            ..Default::default()
        }
    }

    #[test]
    fn claude_code_levels() {
        let mur = Path::new("/opt/m/mur");
        let read =
            claude_code(&policy(Permissions::Read, &["cargo test"]), mur, None, None).unwrap();
        let helpers = "Bash(mur call-member:*),Bash(mur delegate-task:*),Bash(mur send-message:*),\
            Bash(mur request-input:*),Bash(mur end-without-answer:*),\
            Bash(/opt/m/mur call-member:*),Bash(/opt/m/mur delegate-task:*),\
            Bash(/opt/m/mur send-message:*),Bash(/opt/m/mur request-input:*),\
            Bash(/opt/m/mur end-without-answer:*)";
        assert_eq!(
            read.args,
            [
                "--permission-mode",
                "default",
                "--allowedTools",
                &format!("{helpers},Bash(cargo test:*)")
            ]
        );
        let full = claude_code(&policy(Permissions::Full, &[]), mur, None, None).unwrap();
        assert_eq!(
            full.args[1..],
            [
                "acceptEdits",
                "--allowedTools",
                &format!("{helpers},Bash,Edit,Write,NotebookEdit,WebFetch,WebSearch")
            ]
        );
        assert!(
            !full.env.iter().any(|(k, _)| k == "CLAUDE_CONFIG_DIR"),
            "state: user sets no folder"
        );
        if std::env::var_os("BASH_DEFAULT_TIMEOUT_MS").is_none() {
            assert!(full
                .env
                .contains(&("BASH_DEFAULT_TIMEOUT_MS".to_owned(), "1800000".into())));
        }
        assert!(!read.args.iter().any(|a| a == "--permission-prompt-tool"));
        let mut asking = policy(Permissions::Read, &[]);
        asking.approvals.mode = ApprovalMode::Ask;
        let asking = claude_code(&asking, mur, None, None).unwrap();
        assert_eq!(asking.args[4..], ["--permission-prompt-tool", "stdio"]);
    }

    #[test]
    fn codex_edits_leave_slash_tmp_to_the_jail() {
        let mur = Path::new("/opt/m/mur");
        let edit = codex(&policy(Permissions::Edit, &[]), mur, None, None).unwrap();
        assert_eq!(
            edit.args,
            [
                "--sandbox",
                "workspace-write",
                "-c",
                "sandbox_workspace_write.exclude_slash_tmp=true"
            ]
        );
    }

    #[test]
    fn codex_levels_and_rules() {
        let mur = Path::new("/opt/m/mur");
        for (level, sandbox) in [
            (Permissions::Read, "read-only"),
            (Permissions::Edit, "workspace-write"),
            (Permissions::Full, "danger-full-access"),
        ] {
            let p = codex(&policy(level, &[]), mur, None, None).unwrap();
            assert_eq!(p.args[..2], ["--sandbox", sandbox]);
        }
        assert_eq!(
            codex_rules(&policy(Permissions::Read, &["cargo test"]), mur),
            "# Written by murmur for this capsule: its helpers, and the manifest's harness.allow_commands.\n\
             prefix_rule(pattern = [\"/opt/m/mur\", [\"call-member\", \"delegate-task\", \"send-message\", \"request-input\", \"end-without-answer\"]], decision = \"allow\")\n\
             prefix_rule(pattern = [\"cargo\", \"test\"], decision = \"allow\")\n"
        );
    }

    #[test]
    fn codex_reaches_the_provider_its_config_selects() {
        let config = "model = \"m\"\nmodel_provider = \"local\"\n[model_providers.local]\nbase_url = \"http://127.0.0.1:8765/v1\"\nenv_key = \"LOCAL_KEY\"\n";
        let p = codex_provider(config).unwrap();
        assert_eq!(p.base_url.as_deref(), Some("http://127.0.0.1:8765/v1"));
        assert_eq!(p.env_key.as_deref(), Some("LOCAL_KEY"));
        assert!(codex_provider("model = \"m\"\n").is_none());
        assert!(codex_provider("not toml [").is_none());
    }

    #[test]
    fn the_capsule_state_is_seeded_from_the_users_login_without_copying_a_secret() {
        let root = std::env::temp_dir().join(format!("murmur-preset-{}", std::process::id()));
        let user = root.join("user");
        std::fs::create_dir_all(&user).unwrap();
        std::fs::write(user.join("config.toml"), "model = \"m\"\n").unwrap();
        std::fs::write(user.join("auth.json"), "{\"secret\":1}").unwrap();
        let dir = root.join("records").join(STATE_DIR);
        seed(&dir, Some(&user), &["config.toml"], &["auth.json"]).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("config.toml")).unwrap(),
            "model = \"m\"\n"
        );
        assert_eq!(
            std::fs::read_link(dir.join("auth.json")).unwrap(),
            user.join("auth.json")
        );
        // A second start of the same folder keeps what is there.
        seed(&dir, Some(&user), &["config.toml"], &["auth.json"]).unwrap();
        std::fs::remove_dir_all(&root).unwrap();
    }
}
