//! What the real-CLI tests share (tests/agent_clis.rs, tests/approvals.rs): where setup
//! installed `claude` and `codex`, the fake model behind each (it follows the task's `RUN`
//! lines, see tests/agent_clis.rs), a test's world (a home, both fakes, the environment that
//! points each CLI at its fake), and the checks every scenario makes.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::clients;
use crate::fake_provider::{anthropic, responses, Fake, Reply, Seen};
use crate::support::*;
use serde_json::{json, Value};

pub const LONG: Duration = Duration::from_secs(90);

/// Where setup installed the two CLIs, when it could.
pub fn clis() -> Option<PathBuf> {
    let bin = clients::dir().join("clis/node_modules/.bin");
    let present = bin.join("claude").is_file() && bin.join("codex").is_file();
    clients::usable("agent-clis", present).then_some(bin)
}

pub fn shipped(path: &str) -> PathBuf {
    repo_root().join("manifests").join(path)
}

/// The path the guide gives for `mur`, read from a request's text.
pub fn guide_mur(body: &str) -> Option<String> {
    let start = body.find("`mur` is ")? + "`mur` is ".len();
    let len = body[start..].find(':')?;
    Some(body[start..start + len].to_owned())
}

/// What the fake model decides from the task and the tool results it has seen.
pub enum Turn {
    Run(String),
    Answer(String),
}

pub fn decide(task: &str, results: &[String], body: &Value) -> Turn {
    let steps: Vec<&str> = task
        .lines()
        .filter_map(|l| l.trim().strip_prefix("RUN "))
        .collect();
    if let Some(step) = steps.get(results.len()) {
        let mur =
            guide_mur(&body.to_string()).unwrap_or_else(|| "NO-GUIDE-REACHED-THE-MODEL".into());
        return Turn::Run(step.replace("{mur}", &mur));
    }
    if steps.is_empty() {
        let first = task.lines().next().unwrap_or_default();
        return Turn::Answer(format!("ANSWER({first})"));
    }
    Turn::Answer(format!("DONE: {}", results.join(" | ")))
}

/// Text of an Anthropic content value (a string or a list of blocks).
pub fn block_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The fake Anthropic model: the newest user text that is not a reminder is the task, and the
/// tool results after it are its commands' outputs.
pub fn claude_brain(seen: &Seen) -> Reply {
    if seen.path.contains("count_tokens") {
        return Reply::Status(200, vec![], json!({"input_tokens": 12}).to_string());
    }
    if !seen.path.starts_with("/v1/messages") {
        return Reply::Status(404, vec![], "{}".into());
    }
    let (mut task, mut results) = (String::new(), Vec::new());
    for m in seen.body["messages"].as_array().into_iter().flatten() {
        if m["role"] != "user" {
            continue;
        }
        let blocks = match &m["content"] {
            Value::String(s) => vec![json!({"type": "text", "text": s})],
            Value::Array(b) => b.clone(),
            _ => vec![],
        };
        for b in blocks {
            match b["type"].as_str() {
                Some("tool_result") => results.push(block_text(&b["content"])),
                Some("text") => {
                    let text = b["text"].as_str().unwrap_or_default();
                    if !text.trim_start().starts_with('<') {
                        task = text.to_owned();
                        results.clear();
                    }
                }
                _ => {}
            }
        }
    }
    let events = match decide(&task, &results, &seen.body) {
        Turn::Run(command) => {
            let input = json!({"command": command, "description": "run it"}).to_string();
            // Each call its own id: Claude Code keys its history by them.
            let id = format!("toolu_fake_{}", results.len());
            anthropic::tool(&id, "Bash", &[&input], (20, 5))
        }
        Turn::Answer(text) => anthropic::text("", &[&text], "end_turn", (20, 5)),
    };
    if seen.body["stream"] == true {
        Reply::Stream(events)
    } else {
        let text = match decide(&task, &results, &seen.body) {
            Turn::Answer(t) | Turn::Run(t) => t,
        };
        let message = json!({"id": "msg_fake", "type": "message", "role": "assistant",
            "model": "fake", "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 20, "output_tokens": 5}});
        Reply::Status(200, vec![], message.to_string())
    }
}

/// The fake Responses model: the newest user message that is not Codex's own context block is
/// the task; `function_call_output` items after it are its commands' outputs.
pub fn codex_brain(seen: &Seen) -> Reply {
    if !seen.path.ends_with("/responses") {
        return Reply::Status(404, vec![], "{}".into());
    }
    let (mut task, mut results) = (String::new(), Vec::new());
    for item in seen.body["input"].as_array().into_iter().flatten() {
        match item["type"].as_str() {
            Some("function_call_output") => {
                let out = &item["output"];
                results.push(
                    out.as_str()
                        .map(str::to_owned)
                        .unwrap_or_else(|| out.to_string()),
                );
            }
            Some("message") if item["role"] == "user" => {
                let text = block_text(&item["content"]);
                if !text.trim_start().starts_with('<') {
                    task = text;
                    results.clear();
                }
            }
            _ => {}
        }
    }
    Reply::Stream(match decide(&task, &results, &seen.body) {
        Turn::Run(command) => {
            let args = json!({"cmd": command}).to_string();
            let id = format!("call_fake_{}", results.len());
            responses::function_call(&id, "exec_command", &args, (20, 5))
        }
        Turn::Answer(text) => responses::text(&[&text], (20, 5)),
    })
}

/// A test's world: a home, both fakes, and the environment that points each CLI at its fake.
pub struct World {
    pub home: Home,
    pub claude: Fake,
    pub codex: Fake,
    pub env: Vec<(&'static str, String)>,
    /// The user's own Codex folder (its config names the fake provider).
    pub user_codex: PathBuf,
    /// The user's HOME: must hold no CLI state afterwards.
    pub user_home: PathBuf,
}

impl World {
    pub fn new(bin: &Path) -> World {
        let home = Home::new();
        let claude = Fake::start_with(claude_brain);
        let codex = Fake::start_with(codex_brain);
        let user_home = home.root.join("user");
        let user_codex = user_home.join(".codex");
        std::fs::create_dir_all(&user_codex).unwrap();
        std::fs::write(
            user_codex.join("config.toml"),
            format!(
                "model = \"gpt-5\"\nmodel_provider = \"fake\"\n\n[model_providers.fake]\nname = \
                 \"fake\"\nbase_url = \"http://127.0.0.1:{}/v1\"\nwire_api = \"responses\"\n\
                 env_key = \"FAKE_OPENAI_KEY\"\nstream_max_retries = 0\nrequest_max_retries = 0\n",
                codex.port
            ),
        )
        .unwrap();
        let env = vec![
            ("PATH", format!("{}:{}", bin.display(), search_path())),
            ("HOME", user_home.display().to_string()),
            ("CODEX_HOME", user_codex.display().to_string()),
            ("FAKE_OPENAI_KEY", "sk-fake-openai".into()),
            (
                "ANTHROPIC_BASE_URL",
                format!("http://127.0.0.1:{}", claude.port),
            ),
            ("ANTHROPIC_API_KEY", "sk-ant-fake".into()),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
            // The CLIs run as users' would: nothing of the test's folders writable (HOME
            // included), only what the jail opens.
            ("MURMUR_HARNESS_WRITABLE", String::new()),
            // Inside the jail, never its fallback: a kernel without namespaces fails the run.
            ("MURMUR_CONTAINMENT", "namespaces".into()),
        ];
        World {
            home,
            claude,
            codex,
            env,
            user_codex,
            user_home,
        }
    }

    /// The header the real key reaches `fake` in, and the key: what murmur's environment holds
    /// and no harness may.
    pub fn real_key(&self, fake: &Fake) -> (&'static str, &'static str) {
        match fake.port == self.claude.port {
            true => ("x-api-key", "sk-ant-fake"),
            false => ("authorization", "Bearer sk-fake-openai"),
        }
    }

    /// Fails naming every process of the attempt whose environment holds a real key, and every
    /// file of the home or the work folder that does; checks the CLI holds a placeholder.
    pub fn assert_no_real_key_in_reach(&self) {
        let mut placeholders = 0;
        let ours = std::fs::read_link("/proc/self/ns/pid").unwrap();
        // The attempt's processes: those in a PID namespace of their own.
        let jailed = processes_of(&self.home)
            .into_iter()
            .filter(|p| std::fs::read_link(format!("/proc/{p}/ns/pid")).is_ok_and(|ns| ns != ours));
        for pid in jailed {
            let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            for real in ["sk-ant-fake", "sk-fake-openai"] {
                assert!(
                    !env.windows(real.len()).any(|w| w == real.as_bytes()),
                    "{real} is in the environment of {pid} ({})",
                    cmdline(pid)
                );
            }
            placeholders += env
                .split(|b| *b == 0)
                .filter(|kv| {
                    [
                        &b"ANTHROPIC_API_KEY=mur_gw_"[..],
                        b"FAKE_OPENAI_KEY=mur_gw_",
                    ]
                    .iter()
                    .any(|p| kv.starts_with(p))
                })
                .count();
        }
        assert!(
            placeholders > 0,
            "no process of the attempt holds a placeholder"
        );
        for dir in [&self.home.home, &self.home.work] {
            let out = std::process::Command::new("grep")
                .args(["-rl", "-e", "sk-ant-fake", "-e", "sk-fake-openai"])
                .arg(dir)
                .output()
                .unwrap();
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                "",
                "a real key was written under {}",
                dir.display()
            );
        }
    }

    pub fn launch(&self, manifest: &Path) -> Launch {
        let run = Launch::start_env(&self.home, manifest, &[], &self.env);
        assert_jailed(&self.home, &run.session);
        run
    }

    /// The CLIs kept their state in the capsules' records: the user's folders hold none.
    pub fn assert_user_state_untouched(&self) {
        let mut left: Vec<String> = std::fs::read_dir(&self.user_codex)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            ["config.toml"],
            "the user's Codex folder gained state"
        );
        for dot in [".claude", ".claude.json"] {
            assert!(
                !self.user_home.join(dot).exists(),
                "Claude Code wrote {dot} into the user's home"
            );
        }
    }
}

/// The session's `session_start` says it ran in namespace mode with every wall up (the five of
/// docs/containment.md at least; a wall added later must be up too).
pub fn assert_jailed(home: &Home, session: &str) {
    // A member's session can be announced before its trace is written: wait for the record.
    let start = || {
        home.trace(session)
            .into_iter()
            .find(|e| e["event_type"] == "session_start")
    };
    assert!(
        wait_until(LONG, || start().is_some()),
        "{session} has no session_start"
    );
    let start = start().unwrap_or_default();
    assert_eq!(start["containment"], "namespaces", "{start}");
    let walls = start["walls"]
        .as_object()
        .unwrap_or_else(|| panic!("no walls: {start}"));
    for wall in ["pid", "mount", "network", "files", "environment"] {
        assert!(walls.contains_key(wall), "no {wall} wall: {start}");
    }
    assert!(walls.values().all(|v| v == "up"), "{start}");
}

/// The `expected` sessions that ran in the home's work folder (waited for, bounded: a member's
/// folder can follow its announcement), each checked by [`assert_jailed`].
pub fn assert_every_session_jailed(home: &Home, expected: usize, who: &str) {
    let dir = home.records("");
    let sessions = || -> Vec<String> {
        std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("ses_"))
            .collect()
    };
    wait_until(LONG, || sessions().len() >= expected);
    let found = sessions();
    assert_eq!(found.len(), expected, "{who}: {found:?}");
    for session in &found {
        assert_jailed(home, session);
    }
}

/// A process's arguments, from /proc.
pub fn argv(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// Milliseconds from `from` to `to`, two trace records' timestamps.
pub fn millis_between(from: &Value, to: &Value) -> i128 {
    let at = |e: &Value| {
        let ts = e["timestamp"].as_str().unwrap_or_default();
        capsule::clock::parse_rfc3339_nanos(ts).unwrap_or_else(|| panic!("timestamp of {e}"))
    };
    (at(to) - at(from)) / 1_000_000
}

/// Runs `cmd` (a `mur run --task`) to its end, bounded: (status, stdout, stderr).
pub fn run_to_end(mut cmd: std::process::Command) -> (std::process::ExitStatus, String, String) {
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out = std::thread::spawn(move || std::io::read_to_string(&mut out).unwrap_or_default());
    let err = std::thread::spawn(move || std::io::read_to_string(&mut err).unwrap_or_default());
    let deadline = Instant::now() + LONG;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("mur run did not end within {LONG:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (status, out.join().unwrap(), err.join().unwrap())
}

pub fn send(run: &Launch, text: &str, context: Option<&str>) -> String {
    let mut params = message(text, true);
    if let Some(c) = context {
        params["message"]["contextId"] = json!(c);
    }
    let resp = run.rpc("SendMessage", params);
    resp["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no task started: {resp}"))
        .to_owned()
}

pub fn answer_of(task: &Value) -> String {
    task["artifacts"][0]["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["text"].as_str())
        .collect()
}

pub fn completed(run: &Launch, id: &str) -> Value {
    let task = run.wait_task(id, LONG, |s| {
        s.ends_with("COMPLETED") || s.ends_with("FAILED")
    });
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    task
}

/// Every request a fake saw whose text holds `needle`.
pub fn requests_holding(fake: &Fake, needle: &str) -> usize {
    fake.seen()
        .iter()
        .filter(|s| s.body.to_string().contains(needle))
        .count()
}
