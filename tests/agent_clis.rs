//! The CLI presets against the real CLIs (issue: Claude Code and Codex formations that work):
//! `claude` (Claude Code) and `codex` (Codex), as scripts/setup_test_deps.py installs them from
//! npm, pinned, each pointed at a local fake model provider that speaks its provider's real wire
//! format — Anthropic Messages streaming for Claude Code (`ANTHROPIC_BASE_URL`), the OpenAI
//! Responses API streaming for Codex (a `model_providers` entry in the user's
//! `$CODEX_HOME/config.toml`, which murmur carries into the capsule's own Codex folder). Nothing
//! is logged in and nothing leaves the machine. The shipped manifests are used unchanged.
//!
//! The fake "model" follows the task's text: each line `RUN <command>` is one shell tool call, in
//! order, `{mur}` standing for the path the capsule's guide gives for `mur` — found in the
//! request the CLI sent, so a call can only be made when the guide reached the model. Once every
//! command ran it answers `DONE:` and each command's output; a task with no `RUN` line is
//! answered `ANSWER(<first line>)`.
//!
//! A CLI that could not be installed fails these tests under `CI=true` and skips them otherwise
//! (tests/support/clients.rs).

#[path = "support/clients.rs"]
mod clients;
#[path = "support/clis.rs"]
mod clis;
#[path = "support/fake_provider.rs"]
mod fake_provider;
#[path = "support/otlp.rs"]
mod otlp;
mod support;

use std::path::PathBuf;

use clis::*;
use fake_provider::Fake;
use serde_json::{json, Value};
use support::*;

/// Scenario 1: a task answered, then a second in the same context resumes the CLI's session —
/// the fake sees the first turn in the second request.
fn answer_and_resume(world: &World, manifest: &str, fake: &Fake) {
    let run = world.launch(&shipped(manifest));
    let first = completed(&run, &send(&run, "first question from the user", None));
    assert_eq!(answer_of(&first), "ANSWER(first question from the user)");
    let context = first["contextId"].as_str().unwrap().to_owned();
    let second = completed(&run, &send(&run, "second question", Some(&context)));
    assert_eq!(answer_of(&second), "ANSWER(second question)");
    let resumed: Vec<Value> = world
        .home
        .trace(&run.session)
        .into_iter()
        .filter(|e| e["event_type"] == "harness_start")
        .map(|e| e["session_mode"].clone())
        .collect();
    assert_eq!(resumed, [json!("new"), json!("resume")]);
    let last = fake
        .seen()
        .into_iter()
        .rev()
        .find(|s| s.body.to_string().contains("second question"));
    let last = last.expect("the fake saw the second task");
    let text = last.body.to_string();
    assert!(
        text.contains("first question from the user") && text.contains("ANSWER(first question"),
        "the resumed session carries the first turn: {text}"
    );
    // Every call reached the provider through the capsule's gateway, with the real key.
    let (header, real) = world.real_key(fake);
    let seen = fake.seen();
    assert!(!seen.is_empty());
    for s in &seen {
        assert_eq!(s.header(header), Some(real), "{} {}", s.method, s.path);
    }
    let metered = world
        .home
        .trace(&run.session)
        .into_iter()
        .filter(|e| e["event_type"] == "inference" && e["metered"] == true)
        .count();
    assert!(metered > 0, "no call was metered");
    // The CLI kept that session in the capsule's records.
    let state = world.home.records(&run.session).join("harness-state");
    let kept = std::fs::read_dir(&state).map(|d| d.count()).unwrap_or(0);
    assert!(kept > 0, "{} holds nothing", state.display());
    drop(run);
    assert_nothing_left(&world.home, LONG);
}

/// The durable store with the real CLI (docs/store.md): `mur run` killed with `kill -9` after a
/// context's first answer, then `mur run --resume`: the context's next task resumes the CLI's
/// own session, which the CLI kept in the capsule's records, at the same door.
fn resume_after_kill_9(world: &World, manifest: &str, fake: &Fake) {
    let mut run = world.launch(&shipped(manifest));
    let first = completed(&run, &send(&run, "first question from the user", None));
    let context = first["contextId"].as_str().unwrap().to_owned();
    signal(run.pid(), 9);
    let _ = run.child.wait();
    assert_nothing_left(&world.home, LONG);
    let (back, _) = Launch::resume_env(&world.home, &run.session, &world.env);
    assert_eq!((back.port, &back.session), (run.port, &run.session));
    // The earlier task answers as it did.
    let again = back.rpc("GetTask", json!({"id": first["id"]}));
    assert_eq!(again["result"], first);
    let second = completed(&back, &send(&back, "second question", Some(&context)));
    assert_eq!(answer_of(&second), "ANSWER(second question)");
    let modes: Vec<Value> = world
        .home
        .trace(&run.session)
        .into_iter()
        .filter(|e| e["event_type"] == "harness_start")
        .map(|e| e["session_mode"].clone())
        .collect();
    assert_eq!(modes, [json!("new"), json!("resume")]);
    let last = fake
        .seen()
        .into_iter()
        .rev()
        .find(|s| s.body.to_string().contains("second question"))
        .expect("the fake saw the second task");
    let text = last.body.to_string();
    assert!(
        text.contains("first question from the user") && text.contains("ANSWER(first question"),
        "the resumed session carries the turn from before the kill: {text}"
    );
    drop(back);
    assert_nothing_left(&world.home, LONG);
}

#[test]
fn claude_code_resumes_its_session_after_kill_9_of_mur_run() {
    let Some(bin) = clis() else { return };
    let world = World::new(&bin);
    resume_after_kill_9(&world, "worker-claude-code.yaml", &world.claude);
}

#[test]
fn codex_resumes_its_thread_after_kill_9_of_mur_run() {
    let Some(bin) = clis() else { return };
    let world = World::new(&bin);
    resume_after_kill_9(&world, "worker-codex.yaml", &world.codex);
}

#[test]
fn claude_code_answers_and_resumes_its_session() {
    let Some(bin) = clis() else { return };
    let world = World::new(&bin);
    answer_and_resume(&world, "worker-claude-code.yaml", &world.claude);
    // The guide went in as the system prompt, the task as the user's words.
    assert!(requests_holding(&world.claude, "Murmur capsule guide") > 0);
    world.assert_user_state_untouched();
}

#[test]
fn codex_answers_and_resumes_its_thread() {
    let Some(bin) = clis() else { return };
    let world = World::new(&bin);
    answer_and_resume(&world, "worker-codex.yaml", &world.codex);
    // The guide reached Codex's model, as developer instructions.
    let with_guide = world.codex.seen().into_iter().find(|s| {
        s.body["input"].as_array().into_iter().flatten().any(|i| {
            i["role"] == "developer" && block_text(&i["content"]).contains("Murmur capsule guide")
        })
    });
    assert!(
        with_guide.is_some(),
        "no developer message carried the guide"
    );
    world.assert_user_state_untouched();
}

/// Scenario 2: the shipped split-agents formation — a Claude Code lead calls the Codex coder and
/// the Claude Code reviewer with `mur call-member` through its shell tool, and its answer holds
/// both members' answers.
#[test]
fn the_split_agents_formation_runs_on_the_real_clis() {
    let Some(bin) = clis() else { return };
    let world = World::new(&bin);
    let task = "split this\nRUN {mur} call-member coder \"write the code\"\nRUN {mur} call-member reviewer \"review the code\"";
    let mut cmd = world.home.mur();
    cmd.envs(world.env.iter().map(|(k, v)| (*k, v.as_str())))
        .args(["run", "--manifest"])
        .arg(shipped("split-agents/formation.yaml"))
        .args(["--task", task]);
    let (status, out, err) = run_to_end(cmd);
    assert!(status.success(), "mur run failed: {out}\n{err}");
    let answer = out.lines().last().unwrap_or_default();
    assert_eq!(
        answer, "DONE: ANSWER(write the code) | ANSWER(review the code)",
        "{out}"
    );
    // Each member was reached by the lead's own shell tool, through the helper.
    assert_eq!(requests_holding(&world.codex, "write the code"), 1);
    assert_every_session_jailed(&world.home, 3, "lead, coder, reviewer");
    world.assert_user_state_untouched();
    assert_nothing_left(&world.home, LONG);
}

/// Scenario 2, led by Codex: the shipped coder (Codex) calls the shipped reviewer (Claude Code)
/// from its `bash -lc` shell, where the login profile resets PATH — `mur` is reached by the path
/// its guide gives, and runs outside Codex's own sandbox.
#[test]
fn a_codex_lead_reaches_its_member_from_a_login_shell() {
    let Some(bin) = clis() else { return };
    let world = World::new(&bin);
    let formation = world.home.write(
        "codex-led.yaml",
        &format!(
            "formation:\n  name: codex-led\n  version: \"0.1.0\"\n  entry: lead\n  members:\n    \
             lead:\n      manifest: {}\n      calls: [reviewer]\n    reviewer:\n      manifest: \
             {}\n",
            shipped("split-agents/coder.yaml").display(),
            shipped("split-agents/reviewer.yaml").display()
        ),
    );
    let (run, _members) = Launch::start_formation_env(&world.home, &formation, &[], &world.env);
    assert_every_session_jailed(&world.home, 2, "lead, reviewer");
    let token = world.home.operator_token(&run.session);
    let resp = bearer_rpc(
        run.port,
        &token,
        "SendMessage",
        message(
            "lead this\nRUN {mur} call-member reviewer \"check it\"",
            true,
        ),
    );
    let id = resp["result"]["task"]["id"].as_str().unwrap().to_owned();
    let settled = || {
        let t = bearer_rpc(run.port, &token, "GetTask", json!({"id": id}))["result"].clone();
        let state = t["status"]["state"].as_str().unwrap_or_default().to_owned();
        (state.ends_with("COMPLETED") || state.ends_with("FAILED")).then_some(t)
    };
    assert!(
        wait_until(LONG, || settled().is_some()),
        "the lead's task never settled"
    );
    let task = settled().unwrap();
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    let answer = answer_of(&task);
    assert!(answer.starts_with("DONE: "), "{answer}");
    assert!(answer.contains("ANSWER(check it)"), "{answer}");
    drop(run);
    assert_nothing_left(&world.home, LONG);
}

/// Scenario 3: cancel while the shell tool runs a 30 s command: the harness ends within 2 s of
/// its interrupt (read from the trace's timestamps), with no kill, and nothing of the task is
/// left in /proc. Answers the interrupts the trace names. The command reads a file of the work
/// folder for 30 s: one both CLIs run at the shipped workers' `read` level (Claude Code refuses
/// a bare `sleep` as a tool call). It counts as running only once `tail` itself is there: the
/// task's text is also in the arguments of processes that run no command (Codex's sandbox
/// helper, which exits at once when its sandbox cannot be built).
fn cancel_a_long_command(world: &World, manifest: &str) -> Vec<String> {
    let run = world.launch(&shipped(manifest));
    std::fs::write(world.home.work.join("log.txt"), "started\n").unwrap();
    let id = send(&run, "RUN timeout 30 tail -f log.txt", None);
    let tailing = || {
        processes_of(&world.home)
            .into_iter()
            .filter(|p| argv(*p) == ["tail", "-f", "log.txt"])
            .count()
    };
    assert!(
        wait_until(LONG, || tailing() > 0),
        "the shell tool never ran the command"
    );
    // Mid-task, the CLI and everything it started hold only the attempt's placeholder.
    world.assert_no_real_key_in_reach();
    let resp = run.rpc("CancelTask", json!({"id": id}));
    assert_eq!(
        resp["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{resp}"
    );
    let of_task = |kind: &str| -> Vec<Value> {
        world
            .home
            .trace(&run.session)
            .into_iter()
            .filter(|e| e["event_type"] == kind && e["task_id"] == id.as_str())
            .collect()
    };
    assert!(wait_until(LONG, || !of_task("harness_exit").is_empty()));
    let exit = of_task("harness_exit").remove(0);
    assert_eq!(
        (exit["cause"].as_str(), exit["killed"].as_bool()),
        (Some("canceled"), Some(false)),
        "{exit}"
    );
    let interrupts = of_task("harness_interrupt");
    let first = interrupts
        .first()
        .expect("no harness_interrupt for the task");
    let took = millis_between(first, &exit);
    assert!(
        (0..=2000).contains(&took),
        "the harness ended {took} ms after its interrupt: {first} {exit}"
    );
    assert_eq!(tailing(), 0, "the command outlived its task");
    drop(run);
    assert_nothing_left(&world.home, LONG);
    interrupts
        .iter()
        .map(|e| e["interrupt"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn claude_code_cancel_ends_a_running_command_in_band() {
    let Some(bin) = clis() else { return };
    let world = World::new(&bin);
    // In band: the control request ended the turn, with no SIGINT fallback.
    let interrupts = cancel_a_long_command(&world, "worker-claude-code.yaml");
    assert_eq!(interrupts, ["control_request"]);
}

#[test]
fn codex_cancel_ends_a_running_command_by_sigint() {
    let Some(bin) = clis() else { return };
    let world = World::new(&bin);
    let interrupts = cancel_a_long_command(&world, "worker-codex.yaml");
    assert_eq!(interrupts, ["sigint"]);
}

/// Scenario 5: each CLI's shell meets murmur's outer wall. The shipped worker, with `curl` let
/// out of the CLI's own rules (`harness.allow_commands`), fetches an unlisted host: curl goes
/// through `$HTTPS_PROXY`, the jail's egress proxy refuses the CONNECT, and the trace names the
/// host, its port and the task.
fn refused_an_unlisted_host(world: &World, manifest: &str) {
    let text = std::fs::read_to_string(shipped(manifest)).unwrap();
    let manifest = world.home.write(
        "curl-worker.yaml",
        &format!("{text}\nharness:\n  allow_commands: [curl]\n"),
    );
    let run = world.launch(&manifest);
    let id = send(&run, "RUN curl -sS -m 10 https://unlisted.example/", None);
    let done = completed(&run, &id);
    let answer = answer_of(&done);
    assert!(
        answer.contains("curl: (56) CONNECT tunnel failed, response 403"),
        "{answer}"
    );
    let denied: Vec<Value> = world
        .home
        .trace(&run.session)
        .into_iter()
        .filter(|e| e["event_type"] == "egress_denied" && e["host"] == "unlisted.example")
        .collect();
    // Only this host: Codex's own calls home (github.com, chatgpt.com) are refused beside it.
    assert_eq!(denied.len(), 1, "{denied:?}");
    assert_eq!(
        (denied[0]["task_id"].as_str(), denied[0]["port"].as_u64()),
        (Some(id.as_str()), Some(443))
    );
    // The provider itself is no destination of the jail's: only the gateway reaches it.
    let provider = match manifest.to_string_lossy().contains("codex") || text.contains("codex") {
        true => world.codex.port,
        false => world.claude.port,
    };
    let id = send(
        &run,
        &format!("RUN curl -sS -m 10 --noproxy '' https://127.0.0.1:{provider}/v1/models"),
        None,
    );
    let answer = answer_of(&completed(&run, &id));
    assert!(
        answer.contains("CONNECT tunnel failed, response 403"),
        "{answer}"
    );
    drop(run);
    assert_nothing_left(&world.home, LONG);
}

#[test]
fn claude_code_is_refused_an_unlisted_host() {
    let Some(bin) = clis() else { return };
    let world = World::new(&bin);
    refused_an_unlisted_host(&world, "worker-claude-code.yaml");
}

#[test]
fn codex_is_refused_an_unlisted_host() {
    let Some(bin) = clis() else { return };
    let world = World::new(&bin);
    refused_an_unlisted_host(&world, "worker-codex.yaml");
}

/// `capabilities.shell.allow` on a harness capsule, the spec's key for what its agent may run:
/// the card says `shell: true`, and at `read` (the shipped worker's level) the CLI runs a listed
/// command without asking, while an unlisted one that writes is still refused.
fn runs_what_capabilities_shell_allows(world: &World, manifest: &str) {
    let text = std::fs::read_to_string(shipped(manifest)).unwrap();
    let manifest = world.home.write(
        "shell-worker.yaml",
        &format!("{text}\ncapabilities:\n  shell:\n    allow: [touch]\n"),
    );
    let run = world.launch(&manifest);
    let card = http(run.port, "GET", "/.well-known/agent-card.json", &[], b"").json();
    let capsule = card["capabilities"]["extensions"]
        .as_array()
        .and_then(|all| all.iter().find(|e| e["uri"] == CAPSULE_URI))
        .cloned()
        .unwrap_or_default();
    assert_eq!(capsule["params"]["shell"], json!(true), "{card}");
    let made = world.home.work.join("made.txt");
    completed(
        &run,
        &send(&run, &format!("RUN touch {}", made.display()), None),
    );
    assert!(made.exists(), "the listed touch did not run at read");
    let unlisted = world.home.work.join("unlisted");
    completed(
        &run,
        &send(&run, &format!("RUN mkdir {}", unlisted.display()), None),
    );
    assert!(!unlisted.exists(), "an unlisted mkdir ran at read");
    drop(run);
    assert_nothing_left(&world.home, LONG);
}

#[test]
fn claude_code_runs_what_capabilities_shell_allows_at_read() {
    let Some(bin) = clis() else { return };
    let world = World::new(&bin);
    runs_what_capabilities_shell_allows(&world, "worker-claude-code.yaml");
}

#[test]
fn codex_runs_what_capabilities_shell_allows_at_read() {
    let Some(bin) = clis() else { return };
    let world = World::new(&bin);
    runs_what_capabilities_shell_allows(&world, "worker-codex.yaml");
}

/// Scenario 4: a Codex member edits a file in its work folder when its manifest grants edits
/// (the shipped coder: `permissions: edit`), and is refused when it does not (the shipped
/// worker: the default, `read`).
#[test]
fn codex_edits_only_when_the_manifest_grants_it() {
    let Some(bin) = clis() else { return };
    let world = World::new(&bin);
    let note = world.home.work.join("note.txt");
    let task = format!("RUN echo edited > {}", note.display());

    let refused = world.launch(&shipped("worker-codex.yaml"));
    let done = completed(&refused, &send(&refused, &task, None));
    assert!(!note.exists(), "a read-only Codex wrote {}", note.display());
    // The shell ran inside Codex's sandbox and was refused the write: not a sandbox that could
    // not be built ("error building bubblewrap command: Read-only file system").
    let refusal = format!(
        "/bin/bash: line 1: {}: Read-only file system",
        note.display()
    );
    assert!(answer_of(&done).contains(&refusal), "{}", answer_of(&done));
    drop(refused);

    let granted = world.launch(&shipped("split-agents/coder.yaml"));
    let done = completed(&granted, &send(&granted, &task, None));
    assert_eq!(
        std::fs::read_to_string(&note).ok().as_deref(),
        Some("edited\n"),
        "{}",
        answer_of(&done)
    );
    drop(granted);
    assert_nothing_left(&world.home, LONG);
}

/// Codex's app-server folder (`/tmp/codex-daemon-<uid>`, where the user's own Codex keeps its
/// daemon's sockets) is, in the jail, an empty 0700 folder of the attempt's own: a Codex at
/// `full` (no sandbox of its own to hide it) finds nothing of what the host's folder holds.
#[test]
fn codex_sees_its_own_empty_daemon_folder_not_the_users() {
    let Some(bin) = clis() else { return };
    let world = World::new(&bin);
    let text = std::fs::read_to_string(shipped("worker-codex.yaml")).unwrap();
    let manifest = world.home.write(
        "full-worker.yaml",
        &format!("{text}\nharness:\n  permissions: full\n"),
    );
    // The launch makes the host's folder (the preset does); a socket of the user's is there.
    let run = world.launch(&manifest);
    let uid = nix::unistd::geteuid().as_raw();
    let host = PathBuf::from(format!("/tmp/codex-daemon-{uid}"));
    let planted = host.join(format!("murmur-test-{}.sock", std::process::id()));
    let _listener = std::os::unix::net::UnixListener::bind(&planted).unwrap();
    let id = send(
        &run,
        &format!(
            "RUN echo entries=$(ls -A {d} | wc -l) mode=$(stat -c %a {d})",
            d = host.display()
        ),
        None,
    );
    let answer = answer_of(&completed(&run, &id));
    std::fs::remove_file(&planted).unwrap();
    assert!(answer.contains("entries=0 mode=700"), "{answer}");
    drop(run);
    assert_nothing_left(&world.home, LONG);
}

/// `mur install` names each preset's CLI, its version, where it was found, and whether this
/// release was tested with it — and warns on an untested major version.
#[test]
fn mur_install_names_each_cli_and_its_tested_version() {
    let Some(bin) = clis() else { return };
    let world = World::new(&bin);
    let install = |path: String| {
        let out = world
            .home
            .mur()
            .env("PATH", path)
            .args(["install", "--manifest"])
            .arg(shipped("split-agents/formation.yaml"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let lines = |out: &str| -> Vec<String> {
        out.lines()
            .take_while(|l| !l.starts_with("containment:"))
            .map(str::to_owned)
            .collect()
    };
    let (claude, codex) = (bin.join("claude"), bin.join("codex"));
    assert_eq!(
        lines(&install(format!("{}:{}", bin.display(), search_path()))),
        [
            "member lead: lead 0.1.0".to_owned(),
            format!("  ok       murmur/driver-claude-code 0.1.0: claude 2.1.332 at {} (tested with this release)", claude.display()),
            "member coder: coder 0.1.0".to_owned(),
            format!("  ok       murmur/driver-codex 0.1.0: codex 0.171.0 at {} (tested with this release)", codex.display()),
            "member reviewer: reviewer 0.1.0".to_owned(),
            format!("  ok       murmur/driver-claude-code 0.1.0: claude 2.1.332 at {} (tested with this release)", claude.display()),
        ]
    );
    // Other versions of the CLIs: a newer minor is named, a new major is warned about.
    let other = world.home.root.join("other-clis");
    std::fs::create_dir_all(&other).unwrap();
    for (name, says) in [
        ("claude", "3.0.1 (Claude Code)"),
        ("codex", "codex-cli 0.172.4"),
    ] {
        let script = other.join(name);
        std::fs::write(&script, format!("#!/bin/sh\necho '{says}'\n")).unwrap();
        let executable = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        std::fs::set_permissions(&script, executable).unwrap();
    }
    let out = install(format!("{}:{}", other.display(), search_path()));
    assert_eq!(
        lines(&out)[1..4],
        [
            format!("  ok       murmur/driver-claude-code 0.1.0: claude 3.0.1 at {} (warning: untested major version; this release was tested with claude 2.1.332, and its flags may differ (docs/agent-clis.md))", other.join("claude").display()),
            "member coder: coder 0.1.0".to_owned(),
            format!("  ok       murmur/driver-codex 0.1.0: codex 0.172.4 at {} (this release was tested with 0.171.0)", other.join("codex").display()),
        ]
    );
}

/// docs/agent-clis.md's offline run, as written there: `scripts/demo/fake_models.py` stands in
/// for both providers, and the shipped split-agents formation answers with both members' words.
#[test]
fn the_documented_offline_run_of_split_agents_works() {
    let Some(bin) = clis() else { return };
    let home = Home::new();
    let mut fake = std::process::Command::new("python3")
        .arg(repo_root().join("scripts/demo/fake_models.py"))
        .arg("0")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    let mut out = std::io::BufReader::new(fake.stdout.take().unwrap());
    std::io::BufRead::read_line(&mut out, &mut first).unwrap();
    let base = first
        .split_whitespace()
        .find(|w| w.starts_with("http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("the fake named no address: {first:?}"))
        .to_owned();
    let codex_home = home.root.join("demo-codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    std::fs::write(
        codex_home.join("config.toml"),
        format!(
            "model = \"gpt-5\"\nmodel_provider = \"demo\"\n[model_providers.demo]\nname = \
             \"demo\"\nbase_url = \"{base}/v1\"\nwire_api = \"responses\"\nenv_key = \
             \"DEMO_KEY\"\n"
        ),
    )
    .unwrap();
    let task = "Split this.\nRUN {mur} call-member coder \"write a function that adds two numbers\"\nRUN {mur} call-member reviewer \"review that function\"";
    let mut cmd = home.mur();
    cmd.env("PATH", format!("{}:{}", bin.display(), search_path()))
        .env("HOME", home.root.join("user"))
        .env("CODEX_HOME", &codex_home)
        .env("DEMO_KEY", "unused")
        .env("ANTHROPIC_BASE_URL", &base)
        .env("ANTHROPIC_API_KEY", "unused")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("MURMUR_CONTAINMENT", "namespaces")
        .args(["run", "--manifest"])
        .arg(shipped("split-agents/formation.yaml"))
        .args(["--task", task]);
    let (status, stdout, stderr) = run_to_end(cmd);
    let _ = fake.kill();
    let _ = fake.wait();
    assert!(status.success(), "{stdout}\n{stderr}");
    assert_eq!(
        stdout.lines().last(),
        Some("DONE: ANSWER(write a function that adds two numbers) | ANSWER(review that function)"),
        "{stdout}"
    );
    assert_every_session_jailed(&home, 3, "lead, coder, reviewer");
    assert_nothing_left(&home, LONG);
}

/// The real Claude Code's model calls, as the capsule's gateway sees them, are `chat` spans
/// under its attempt's `invoke_agent`, with the usage the provider reported
/// (docs/telemetry.md); neither the key nor the task's words are in any of them.
#[test]
fn claude_codes_model_calls_are_chat_spans_with_their_usage() {
    let Some(bin) = clis() else { return };
    if !otlp::usable() {
        return;
    }
    let receiver = otlp::Receiver::start(200);
    let mut world = World::new(&bin);
    world
        .env
        .push(("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint()));
    let run = world.launch(&shipped("worker-claude-code.yaml"));
    let done = completed(&run, &send(&run, "first question from the user", None));
    assert_eq!(answer_of(&done), "ANSWER(first question from the user)");
    let spans = receiver.wait_for(
        "the attempt and its chat spans",
        std::time::Duration::from_secs(60),
        |s| {
            s.iter().any(|s| s.name.starts_with("invoke_agent "))
                && s.iter().any(|s| s.name.starts_with("chat "))
        },
    );
    let attempt = spans
        .iter()
        .find(|s| s.name.starts_with("invoke_agent "))
        .unwrap();
    assert_eq!(
        attempt.attr_str("murmur.preset"),
        Some("murmur/driver-claude-code")
    );
    let chats: Vec<&otlp::Span> = spans
        .iter()
        .filter(|s| s.name.starts_with("chat "))
        .collect();
    for c in &chats {
        assert_eq!(c.parent_span_id, attempt.span_id, "{c:?}");
        assert_eq!(c.trace_id, attempt.trace_id);
        assert_eq!(c.attr_str("gen_ai.provider.name"), Some("anthropic"));
        assert_eq!(
            c.attr("gen_ai.usage.input_tokens"),
            Some(&json!(20)),
            "{c:?}"
        );
        assert_eq!(c.attr("gen_ai.usage.output_tokens"), Some(&json!(5)));
    }
    let (_, key) = world.real_key(&world.claude);
    for s in &spans {
        let text = serde_json::to_string(&s.attributes).unwrap();
        assert!(
            !text.contains(key) && !text.contains("first question"),
            "{s:?}"
        );
    }
}
