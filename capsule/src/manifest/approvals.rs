//! Reading the approval keys of the `harness` block (docs/agent-clis.md "Approvals"): whether a
//! CLI's question about a tool beyond its permission level is refused (`approvals: deny`, the
//! default) or asked over A2A (`ask`), the rules that answer without a person (`approve`,
//! `deny`, in Claude Code's own pattern syntax), how long a question waits
//! (`approval_timeout_secs`) and who may answer it (`approvals_from`). The rules and their
//! matching live here, beside their syntax, so the harness and the tests read one definition.

use crate::manifest::error::{ErrorCode, ManifestError};
use crate::manifest::keypath::KeyPath;
use crate::manifest::reader::{Fields, Reader};

/// The keys this module reads, all in the `harness` block.
pub const KEYS: [&str; 5] = [
    "approvals",
    "approve",
    "deny",
    "approval_timeout_secs",
    "approvals_from",
];

/// `approval_timeout_secs` when not written: ten minutes.
pub const DEFAULT_TIMEOUT_SECS: u64 = 600;
/// A week: a question nobody answers in that long is better denied.
const MOST_TIMEOUT_SECS: u64 = 7 * 24 * 3600;

/// Characters that make one Bash line several commands, or run one inside another: an approve
/// rule never matches a command holding one (`Bash(git status:*)` must not approve
/// `git status; rm -rf ~`).
const SHELL_JOINERS: &[char] = &[';', '|', '&', '$', '`', '(', ')', '<', '>', '\n', '\r'];

/// `approvals`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// What the permission level does not allow is refused (the CLI is never asked to ask).
    #[default]
    Deny,
    /// It is asked: the task waits in TASK_STATE_INPUT_REQUIRED for an answer.
    Ask,
}

/// `approvals_from`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum From {
    /// The operator's token only.
    #[default]
    Operator,
    /// The task's caller as well.
    Caller,
}

/// One `approve` or `deny` entry: `Tool`, `Tool(exact input)` or `Tool(prefix:*)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// As written, for the trace and the CLI's denial message.
    pub text: String,
    /// Where it is written (`harness.approve[0]`).
    pub at: String,
    pub tool: String,
    pub input: Input,
}

/// What a rule asks of the tool's main input (`tasks::approval::main_input`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// `Tool`: any input.
    Any,
    /// `Tool(text)`: exactly this.
    Exact(String),
    /// `Tool(text:*)`: this, or this followed by a space (Bash) or anything (a path, a URL).
    Prefix(String),
}

/// The approval keys as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalPolicy {
    pub mode: Mode,
    pub approve: Vec<Rule>,
    pub deny: Vec<Rule>,
    pub timeout_secs: u64,
    pub from: From,
}

impl Default for ApprovalPolicy {
    fn default() -> Self {
        ApprovalPolicy {
            mode: Mode::Deny,
            approve: Vec::new(),
            deny: Vec::new(),
            timeout_secs: DEFAULT_TIMEOUT_SECS,
            from: From::Operator,
        }
    }
}

/// What the rules say of one call, before anyone is asked.
#[derive(Debug, PartialEq, Eq)]
pub enum Ruled<'p> {
    Approved(&'p Rule),
    Denied(&'p Rule),
    /// No rule matches: a person answers.
    Open,
}

impl ApprovalPolicy {
    /// Deny rules first (any one matching denies), then approve rules.
    pub fn rule(&self, tool: &str, main_input: Option<&str>) -> Ruled<'_> {
        if let Some(r) = self.deny.iter().find(|r| r.denies(tool, main_input)) {
            return Ruled::Denied(r);
        }
        match self.approve.iter().find(|r| r.approves(tool, main_input)) {
            Some(r) => Ruled::Approved(r),
            None => Ruled::Open,
        }
    }
}

impl Rule {
    /// An approve rule matches the whole input; a Bash command that chains or nests commands
    /// is never approved by a rule.
    fn approves(&self, tool: &str, input: Option<&str>) -> bool {
        if tool != self.tool {
            return false;
        }
        if tool == "Bash" && input.is_some_and(|c| c.contains(SHELL_JOINERS)) {
            return false;
        }
        self.matches(tool, input)
    }

    /// A deny rule matches the whole input, or for Bash any command of a chained line.
    fn denies(&self, tool: &str, input: Option<&str>) -> bool {
        if tool != self.tool {
            return false;
        }
        match (tool, input) {
            ("Bash", Some(line)) => line
                .split(SHELL_JOINERS)
                .map(str::trim)
                .chain(std::iter::once(line.trim()))
                .any(|part| self.matches(tool, Some(part))),
            _ => self.matches(tool, input),
        }
    }

    fn matches(&self, tool: &str, input: Option<&str>) -> bool {
        match (&self.input, input.map(str::trim)) {
            (Input::Any, _) => true,
            (Input::Exact(want), Some(got)) => want == got,
            (Input::Prefix(p), Some(got)) if tool == "Bash" => {
                got == p
                    || got
                        .strip_prefix(p.as_str())
                        .is_some_and(|rest| rest.starts_with(char::is_whitespace))
            }
            (Input::Prefix(p), Some(got)) => got.starts_with(p.as_str()),
            (_, None) => false,
        }
    }
}

/// The approval keys of a `harness` block already read into `f`.
pub fn read(r: &Reader, f: &Fields) -> Result<ApprovalPolicy, ManifestError> {
    let mut p = ApprovalPolicy::default();
    if let Some(v) = f.get("approvals") {
        p.mode = match r.choice(v, &f.path("approvals"), &["deny", "ask"])? {
            0 => Mode::Deny,
            _ => Mode::Ask,
        };
    }
    for (key, rules) in [("approve", &mut p.approve), ("deny", &mut p.deny)] {
        if let Some(v) = f.get(key) {
            let list = f.path(key);
            let example = "[\"Bash(git status:*)\", \"Read\"]";
            for (i, text) in r.string_list(v, &list, example)?.into_iter().enumerate() {
                rules.push(rule(r, &list.index(i), text)?);
            }
        }
    }
    if let Some(v) = f.get("approval_timeout_secs") {
        p.timeout_secs = r.number(
            v,
            &f.path("approval_timeout_secs"),
            (1, MOST_TIMEOUT_SECS),
            "write how long a question waits for an answer before it is denied, in seconds, \
             e.g. approval_timeout_secs: 300",
        )?;
    }
    if let Some(v) = f.get("approvals_from") {
        p.from = match r.choice(v, &f.path("approvals_from"), &["operator", "caller"])? {
            0 => From::Operator,
            _ => From::Caller,
        };
    }
    if p.mode == Mode::Deny {
        let asking_only = ["approve", "approval_timeout_secs", "approvals_from"];
        if let Some(key) = asking_only.into_iter().find(|k| f.contains(k)) {
            let at = f.path(key);
            return Err(r.error(
                ErrorCode::BadValue,
                &at,
                format!("{at} is read only when the CLI asks, and harness.approvals is deny"),
                "write approvals: ask, or remove it (under deny, what the permission level \
                 does not allow is refused without asking)",
            ));
        }
    }
    Ok(p)
}

/// A capsule whose CLI asks must have an authenticated door: on a public one anyone who reaches
/// the port could answer for the operator. Formation doors are always authenticated.
pub fn check_door(r: &Reader, m: &crate::manifest::Manifest) -> Result<(), ManifestError> {
    if m.harness.approvals.mode != Mode::Ask || m.network.authentication.is_some() {
        return Ok(());
    }
    let at = KeyPath::default().key("harness").key("approvals");
    Err(r.error(
        ErrorCode::BadValue,
        &at,
        format!("{at} is ask, and this capsule's door is public (no network.authentication): anyone who reaches its port could answer for the operator"),
        PUBLIC_DOOR_HINT,
    ))
}

/// What to do about [`check_door`]'s refusal.
pub const PUBLIC_DOOR_HINT: &str = "declare network.authentication: { scheme: bearer } so only \
     the operator's token answers, or run the capsule as a formation member (every formation \
     door is authenticated)";

/// `Tool`, `Tool(input)` or `Tool(prefix:*)`.
fn rule(r: &Reader, at: &KeyPath, text: String) -> Result<Rule, ManifestError> {
    let bad = |why: &str| {
        r.error(
            ErrorCode::BadValue,
            at,
            format!("{at} is {text:?}, which {why}"),
            "write a tool name, e.g. \"WebFetch\", or a tool and its input in parentheses: \
             \"Bash(git status:*)\" (a command and what may follow it), \"Bash(npm test)\" \
             (exactly that), \"Read(/srv/data/:*)\" (a path prefix)",
        )
    };
    let (tool, input) = match text.split_once('(') {
        None => (text.trim(), None),
        Some((tool, rest)) => match rest.strip_suffix(')') {
            Some(inner) => (tool.trim(), Some(inner.trim())),
            None => return Err(bad("opens a parenthesis it does not close at its end")),
        },
    };
    let named = !tool.is_empty()
        && tool
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !named {
        return Err(bad("does not start with a tool name"));
    }
    let input = match input {
        None => Input::Any,
        Some("") | Some(":*") => return Err(bad("has nothing in its parentheses")),
        Some(inner) => match inner.strip_suffix(":*") {
            Some(prefix) => Input::Prefix(prefix.trim_end().to_owned()),
            None => Input::Exact(inner.to_owned()),
        },
    };
    Ok(Rule {
        at: at.to_string(),
        tool: tool.to_owned(),
        input,
        text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(approve: &[&str], deny: &[&str]) -> ApprovalPolicy {
        let r = Reader {
            file: std::path::Path::new("m.yaml"),
            source: "",
            env: &|_| None,
            kind: "manifest",
        };
        let list = |l: &[&str], key: &str| {
            l.iter()
                .enumerate()
                .map(|(i, t)| rule(&r, &KeyPath::default().key(key).index(i), (*t).into()).unwrap())
                .collect()
        };
        ApprovalPolicy {
            mode: Mode::Ask,
            approve: list(approve, "approve"),
            deny: list(deny, "deny"),
            ..Default::default()
        }
    }

    fn ruled(p: &ApprovalPolicy, tool: &str, input: &str) -> &'static str {
        match p.rule(tool, Some(input)) {
            Ruled::Approved(_) => "approved",
            Ruled::Denied(_) => "denied",
            Ruled::Open => "open",
        }
    }

    #[test]
    fn a_prefix_rule_approves_whole_words_and_no_chained_command() {
        let p = policy(&["Bash(git status:*)", "Bash(npm test)"], &[]);
        assert_eq!(ruled(&p, "Bash", "git status"), "approved");
        assert_eq!(ruled(&p, "Bash", "git status --short"), "approved");
        assert_eq!(ruled(&p, "Bash", "git statusx"), "open");
        assert_eq!(ruled(&p, "Bash", "git status; rm -rf ~"), "open");
        assert_eq!(ruled(&p, "Bash", "git status && curl x"), "open");
        assert_eq!(ruled(&p, "Bash", "git status $(rm x)"), "open");
        assert_eq!(ruled(&p, "Bash", "git status\nrm x"), "open");
        assert_eq!(ruled(&p, "Bash", "npm test"), "approved");
        assert_eq!(ruled(&p, "Bash", "npm test --all"), "open");
        assert_eq!(ruled(&p, "Read", "git status"), "open");
    }

    #[test]
    fn deny_rules_come_first_and_match_any_command_of_a_line() {
        let p = policy(&["Bash", "Read"], &["Bash(rm:*)", "Read(/etc/:*)"]);
        assert_eq!(ruled(&p, "Bash", "ls"), "approved");
        assert_eq!(ruled(&p, "Bash", "rm -rf build"), "denied");
        assert_eq!(ruled(&p, "Bash", "ls && rm -rf build"), "denied");
        assert_eq!(ruled(&p, "Bash", "echo $(rm x)"), "denied");
        assert_eq!(ruled(&p, "Bash", "rmdir x"), "approved");
        assert_eq!(ruled(&p, "Read", "/etc/shadow"), "denied");
        assert_eq!(ruled(&p, "Read", "/srv/x"), "approved");
        assert_eq!(p.rule("WebFetch", None), Ruled::Open);
    }

    #[test]
    fn a_tool_rule_matches_any_input_and_an_input_rule_needs_one() {
        let p = policy(&["WebSearch", "WebFetch(https://docs.rs/:*)"], &[]);
        assert!(matches!(p.rule("WebSearch", None), Ruled::Approved(_)));
        assert_eq!(p.rule("WebFetch", None), Ruled::Open);
        assert_eq!(ruled(&p, "WebFetch", "https://docs.rs/tokio"), "approved");
        assert_eq!(ruled(&p, "WebFetch", "https://evil.example/"), "open");
    }

    #[test]
    fn malformed_rules_are_refused_with_what_to_write() {
        let r = Reader {
            file: std::path::Path::new("m.yaml"),
            source: "",
            env: &|_| None,
            kind: "manifest",
        };
        for bad in [
            "Bash(git status",
            "(ls)",
            "Bash()",
            "Bash(:*)",
            "Ba sh",
            "Bash(x) y",
        ] {
            let e = rule(&r, &KeyPath::default().key("approve").index(0), bad.into())
                .unwrap_err()
                .to_string();
            assert!(e.contains("E-MAN-005"), "{bad}: {e}");
            assert!(e.contains("Bash(git status:*)"), "{bad}: {e}");
        }
    }
}
