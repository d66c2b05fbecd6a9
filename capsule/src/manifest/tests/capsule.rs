//! Valid capsule manifests: the spec's and DESIGN's examples, defaults, presets, interpolation.

use super::{env, parse, tree, with, MINIMAL};
use crate::auth::scope::Scope;
use crate::manifest::{
    load, load_str, AfterTask, Builtin, ContextLimits, HarnessPolicy, InputDialect, Interrupt,
    OutputDialect, Permissions, PromptMode, StateHome, TaskAcceptance, Transport,
};
use std::path::{Path, PathBuf};

/// a2a-messaging-guide.md, step 1 (Anthropic tab), verbatim.
const SPEC_WORKER: &str = r#"name: my-worker
version: "0.1.0"

artifacts:
  - name: murmur/driver-anthropic
    version: "0.19.0"
    runtime: driver
    gateway:
      endpoint: https://api.anthropic.com
      api_key: ${ANTHROPIC_API_KEY}

network:
  internal_port: 52222

inference:
  transport: http
  model: claude-sonnet-5
  driver:
    artifact: murmur/driver-anthropic

lifecycle:
  task_acceptance: queue
  after_task: sleep
  queue_depth: 2

exports:
  peer_tasks:
    accept: true
"#;

/// a2a-messaging-guide.md, step 4 (OpenAI tab), verbatim.
const SPEC_ORCHESTRATOR: &str = r#"name: my-orchestrator
version: "0.1.0"

artifacts:
  - name: murmur/driver-openai
    version: "0.19.0"
    runtime: driver
    gateway:
      endpoint: https://api.openai.com/v1
      api_key: ${OPENAI_API_KEY}

capabilities:
  network:
    allow:
      - localhost:52222

inference:
  transport: http
  model: o3-mini-high
  driver:
    artifact: murmur/driver-openai
"#;

/// DESIGN.md §6, verbatim (its `${…}` sits inside a flow mapping).
const DESIGN_EXAMPLE: &str = r#"name: my-worker
version: "0.1.0"
artifacts:
  - name: murmur/driver-anthropic          # built-in http drivers: murmur/driver-anthropic,
    version: "0.19.0"                      # murmur/driver-openai, murmur/driver-deepseek
    runtime: driver                        # (openai-compatible: any endpoint, e.g. a local server)
    gateway: { endpoint: https://api.anthropic.com, api_key: ${ANTHROPIC_API_KEY} }
  - name: local/driver-scripted            # a process driver, declared inline
    version: "0.1.0"
    runtime: driver
    process:
      command: ["python3", "harness.py"]   # relative paths resolve against the manifest's folder
      prompt: stdin                        # stdin (default) | arg (appended as the last argv)
      output: text                         # text (default) | stream-json (Claude Code's format)
      resume: ["--resume", "{session}"]    # optional: added when the context has a harness session
      interrupt: sigint                    # sigint (default) | none | { stdin: "<bytes>" }
network:
  internal_port: 52222
  authentication:
    scheme: bearer
    credentials:
      watcher: { scopes: [GetTask, ListTasks, murmur.WatchSession] }
inference:
  transport: process                       # http | process
  model: claude-sonnet-5
  driver: { artifact: local/driver-scripted }
  max_turns: 10
  max_tokens: 8192
lifecycle: { task_acceptance: queue, after_task: sleep, queue_depth: 2 }  # depth: tasks waiting
                                           # behind the running one; a task in INPUT_REQUIRED
                                           # still holds the running slot
exports: { peer_tasks: { accept: true } }
capabilities:
  network: { allow: [localhost:52222] }
  delegate: { allow: [../worker/murmur.yaml] }   # sub-capsules delegate-task may start
context: { images: { max_bytes: 5242880, max_per_turn: 4 } }
"#;

#[test]
fn spec_worker_parses() {
    let m = parse(SPEC_WORKER).unwrap();
    assert_eq!(
        (m.name.as_str(), m.version.as_str()),
        ("my-worker", "0.1.0")
    );
    assert!(m.path.is_absolute() && m.path.ends_with("worker/murmur.yaml"));
    assert_eq!(m.dir, m.path.parent().unwrap());
    let driver = m.driver_artifact().unwrap();
    assert_eq!(driver.builtin, Some(Builtin::Anthropic));
    let gateway = driver.gateway.as_ref().unwrap();
    assert_eq!(gateway.endpoint, "https://api.anthropic.com");
    assert_eq!(gateway.api_key.as_deref(), Some("sk-ant-test"));
    assert_eq!(m.network.internal_port, Some(52222));
    assert_eq!(m.network.authentication, None);
    assert_eq!(m.inference.transport, Transport::Http);
    assert_eq!(m.inference.model.as_deref(), Some("claude-sonnet-5"));
    assert_eq!(m.lifecycle.task_acceptance, TaskAcceptance::Queue);
    assert_eq!(m.lifecycle.after_task, AfterTask::Sleep);
    assert_eq!(m.lifecycle.queue_depth, 2);
    assert!(m.exports.peer_tasks_accept);
}

#[test]
fn spec_orchestrator_parses() {
    let m = parse(SPEC_ORCHESTRATOR).unwrap();
    assert_eq!(m.capabilities.network_allow, ["localhost:52222"]);
    assert_eq!(m.driver_artifact().unwrap().builtin, Some(Builtin::OpenAi));
    assert!(!m.exports.peer_tasks_accept);
}

#[test]
fn design_example_parses() {
    let m = parse(DESIGN_EXAMPLE).unwrap();
    assert_eq!(m.inference.transport, Transport::Process);
    let driver = m.driver_artifact().unwrap();
    assert_eq!(driver.name, "local/driver-scripted");
    let process = driver.process.as_ref().unwrap();
    assert_eq!(process.command, ["python3", "harness.py"]);
    assert_eq!(
        process.resume.as_deref(),
        Some(&["--resume".to_string(), "{session}".into()][..])
    );
    assert_eq!(process.interrupt, Interrupt::Sigint);
    let auth = m.network.authentication.as_ref().unwrap();
    let scopes = vec![Scope::GetTask, Scope::ListTasks, Scope::WatchSession];
    assert_eq!(auth.credentials, vec![("watcher".to_string(), scopes)]);
    let worker = m.dir.parent().unwrap().join("worker/murmur.yaml");
    assert_eq!(m.capabilities.delegate_allow, vec![worker]);
    assert_eq!(m.context, ContextLimits::default());
}

#[test]
fn defaults() {
    let m = parse(MINIMAL).unwrap();
    assert_eq!(m.inference.transport, Transport::Http);
    assert_eq!(
        m.inference.driver_artifact.as_deref(),
        Some("murmur/driver-anthropic")
    );
    assert_eq!((m.inference.max_turns, m.inference.max_tokens), (10, 8192));
    assert_eq!(m.lifecycle.task_acceptance, TaskAcceptance::Single);
    assert_eq!(m.lifecycle.after_task, AfterTask::Exit);
    assert_eq!(m.lifecycle.queue_depth, 0);
    assert!(!m.exports.peer_tasks_accept && !m.exports.files && !m.exports.peer_files);
    assert_eq!(m.network.internal_port, None);
    assert!(m.capabilities.network_allow.is_empty() && m.capabilities.shell_allow.is_empty());
    assert_eq!(m.context.images_max_bytes, 5_242_880);
    assert_eq!(m.context.images_max_per_turn, 4);

    let queue = parse(&with("lifecycle: { task_acceptance: queue }\n")).unwrap();
    assert_eq!(
        (queue.lifecycle.after_task, queue.lifecycle.queue_depth),
        (AfterTask::Sleep, 2)
    );
    let exit = parse(&with(
        "lifecycle: { task_acceptance: queue, after_task: exit }\n",
    ))
    .unwrap();
    assert_eq!(exit.lifecycle.after_task, AfterTask::Exit);
}

#[test]
fn task_acceptance_none_needs_no_driver() {
    let m = parse("name: files\nversion: \"1\"\nlifecycle: { task_acceptance: none }\nexports: { files: {} }\n").unwrap();
    assert_eq!(m.driver_artifact(), None);
    assert_eq!(m.lifecycle.after_task, AfterTask::Sleep);
    assert!(m.exports.files && !m.exports.peer_files);
}

#[test]
fn presets_are_accepted_without_a_process_block() {
    for (name, dialect) in [
        ("murmur/driver-claude-code", OutputDialect::StreamJson),
        ("murmur/driver-codex", OutputDialect::CodexJson),
    ] {
        let text = format!(
            "name: h\nversion: \"1\"\nartifacts:\n  - {{ name: {name}, version: \"0.1.0\", runtime: driver }}\ninference: {{ transport: process }}\n"
        );
        let m = parse(&text).unwrap();
        assert_eq!(m.inference.transport, Transport::Process);
        let process = m.driver_artifact().unwrap().process.clone().unwrap();
        assert_eq!(process.output, dialect);
        assert_eq!(Some(process), Builtin::parse(name).unwrap().preset());
        assert_eq!(
            m.harness,
            HarnessPolicy::default(),
            "no harness block: the defaults"
        );
        assert_eq!(
            (m.harness.permissions, m.harness.state),
            (Permissions::Read, StateHome::Capsule)
        );
    }
    let m = parse(
        "name: h\nversion: \"1\"\nartifacts: [{ name: murmur/driver-codex, runtime: driver }]\nharness: { permissions: edit, allow_commands: [\"cargo  test\", make], state: capsule }\n",
    )
    .unwrap();
    assert_eq!(
        m.harness,
        HarnessPolicy {
            permissions: Permissions::Edit,
            allow_commands: vec![vec!["cargo".into(), "test".into()], vec!["make".into()]],
            state: StateHome::Capsule,
            env: Vec::new(),
            require: Vec::new(),
            ..Default::default()
        }
    );
    // On a CLI preset, capabilities.shell.allow is what its CLI runs without asking: joined to
    // harness.allow_commands (its alias), each prefix once.
    let m = parse(
        "name: h\nversion: \"1\"\nartifacts: [{ name: murmur/driver-claude-code, runtime: driver }]\ncapabilities: { shell: { allow: [make, \"git  status\"] } }\nharness: { allow_commands: [make] }\n",
    )
    .unwrap();
    assert_eq!(
        m.harness.allow_commands,
        vec![vec!["make".to_owned()], vec!["git".into(), "status".into()]]
    );
    assert_eq!(m.capabilities.shell_allow, ["make", "git  status"]);
    // transport follows the driver when not written
    let m = parse(
        "name: h\nversion: \"1\"\nartifacts: [{ name: murmur/driver-codex, runtime: driver }]\n",
    )
    .unwrap();
    assert_eq!(m.inference.transport, Transport::Process);
    assert_eq!(m.inference.model, None);
}

#[test]
fn process_blocks_resolve_commands_and_read_every_key() {
    let text = r#"name: h
version: "1"
artifacts:
  - name: local/harness
    runtime: driver
    process:
      command: ["./bin/harness", "--flag"]
      prompt: arg
      output: stream-json
      interrupt: { stdin: "\u0003" }
inference: { transport: process, driver: { artifact: local/harness } }
"#;
    let m = parse(text).unwrap();
    let p = m.driver_artifact().unwrap().process.clone().unwrap();
    assert_eq!(PathBuf::from(&p.command[0]), m.dir.join("bin/harness"));
    assert_eq!(p.command[1], "--flag");
    assert_eq!(
        (p.prompt, p.output),
        (PromptMode::Arg, OutputDialect::StreamJson)
    );
    assert_eq!(p.interrupt, Interrupt::Stdin(vec![3]));
    assert_eq!(p.resume, None);
    let none = text.replace("{ stdin: \"\\u0003\" }", "none");
    assert_eq!(
        parse(&none).unwrap().artifacts[0]
            .process
            .as_ref()
            .unwrap()
            .interrupt,
        Interrupt::None
    );
}

#[test]
fn stream_json_input_defaults_to_the_in_band_interrupt() {
    let text = "name: h\nversion: \"1\"\nartifacts:\n  - name: local/h\n    runtime: driver\n    \
                process: { command: [h], input: stream-json, output: stream-json }\n\
                inference: { transport: process, driver: { artifact: local/h } }\n";
    let p = |t: &str| parse(t).unwrap().artifacts[0].process.clone().unwrap();
    let stream = p(text);
    assert_eq!(
        (stream.input, stream.interrupt),
        (InputDialect::StreamJson, Interrupt::ControlRequest)
    );
    let explicit = text.replace(
        "input: stream-json,",
        "input: stream-json, interrupt: sigint,",
    );
    assert_eq!(p(&explicit).interrupt, Interrupt::Sigint);
    let plain = p(&text.replace("input: stream-json,", ""));
    assert_eq!(
        (plain.input, plain.interrupt),
        (InputDialect::Text, Interrupt::Sigint)
    );
    let named = text.replace("input: stream-json,", "input: text,");
    assert_eq!(p(&named).input, InputDialect::Text);
}

#[test]
fn the_claude_code_preset_speaks_stream_json_both_ways() {
    let p = Builtin::ClaudeCode.preset().unwrap();
    assert_eq!(p.input, InputDialect::StreamJson);
    assert_eq!(p.interrupt, Interrupt::ControlRequest);
    let at = p
        .command
        .iter()
        .position(|a| a == "--input-format")
        .unwrap();
    assert_eq!(p.command[at + 1], "stream-json");
    let codex = Builtin::Codex.preset().unwrap();
    assert_eq!(
        (codex.input, codex.interrupt),
        (InputDialect::Text, Interrupt::Sigint)
    );
}

#[test]
fn credentials_keep_order_and_drop_duplicate_scopes() {
    let m = parse(&with(
        "network:\n  authentication:\n    scheme: bearer\n    credentials:\n      zeta: { scopes: [SendMessage, GetTask, SendMessage] }\n      alpha: { scopes: [resources/files, murmur.StopSession] }\n      empty: { scopes: [] }\n",
    ))
    .unwrap();
    let creds = m.network.authentication.unwrap().credentials;
    let names: Vec<&str> = creds.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["zeta", "alpha", "empty"]);
    assert_eq!(creds[0].1, [Scope::SendMessage, Scope::GetTask]);
    assert_eq!(creds[1].1, [Scope::ResourcesFiles, Scope::StopSession]);
    assert!(creds[2].1.is_empty());
}

#[test]
fn interpolated_numbers_and_booleans_are_read() {
    let m = parse(&with("network: { internal_port: ${PORT} }\nexports: { peer_tasks: { accept: \"${ACCEPT}\" }, peer_files: }\n")).unwrap();
    assert_eq!(m.network.internal_port, Some(52222));
    assert!(m.exports.peer_tasks_accept && m.exports.peer_files);
}

#[test]
fn limits_and_lists_are_read() {
    let m = parse(&with(
        "inference: { model: m, max_turns: 3, max_tokens: 100 }\ncontext: { images: { max_bytes: 10, max_per_turn: 0 } }\ncapabilities: { shell: { allow: [bash, git] } }\n",
    ).replace("inference:\n  model: claude-sonnet-5\n", ""))
    .unwrap();
    assert_eq!((m.inference.max_turns, m.inference.max_tokens), (3, 100));
    assert_eq!(
        (m.context.images_max_bytes, m.context.images_max_per_turn),
        (10, 0)
    );
    assert_eq!(m.capabilities.shell_allow, ["bash", "git"]);
}

#[test]
fn load_reads_the_env_file_beside_the_manifest() {
    let text = "name: w\nversion: \"1\"\nartifacts:\n  - name: murmur/driver-openai\n    runtime: driver\n    gateway: { endpoint: http://localhost:8080/v1, api_key: ${MURMUR_TEST_ONLY_KEY} }\ninference: { model: local }\n";
    let root = tree(
        "dotenv",
        &[
            ("w/murmur.yaml", text),
            ("w/.env", "# local\nMURMUR_TEST_ONLY_KEY=\"from-dotenv\"\n"),
        ],
    );
    let m = load(&root.join("w/murmur.yaml")).unwrap();
    let gateway = m.driver_artifact().unwrap().gateway.clone().unwrap();
    assert_eq!(gateway.api_key.as_deref(), Some("from-dotenv"));
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn relative_paths_resolve_against_the_given_path() {
    let m = load_str(MINIMAL, Path::new("/srv/a/./b/../murmur.yaml"), &env).unwrap();
    assert_eq!(m.path, PathBuf::from("/srv/a/murmur.yaml"));
    assert_eq!(m.dir, PathBuf::from("/srv/a"));
}

#[test]
fn command_files_beside_the_manifest_resolve_from_any_folder() {
    let design = r#"name: w
version: "1"
artifacts:
  - name: local/driver-scripted
    runtime: driver
    process:
      command: ["python3", "harness.py", "--model", "notes.txt", "-q"]
"#;
    let root = tree(
        "relative-command",
        &[("w/murmur.yaml", design), ("w/harness.py", "print('hi')\n")],
    );
    let dir = root.join("w");
    let m = load(&dir.join("murmur.yaml")).unwrap();
    let command = &m
        .driver_artifact()
        .unwrap()
        .process
        .as_ref()
        .unwrap()
        .command;
    // harness.py exists beside the manifest; notes.txt does not, and options never move.
    let harness = dir.join("harness.py").to_string_lossy().into_owned();
    assert_eq!(
        command,
        &["python3", &harness, "--model", "notes.txt", "-q"]
    );
    assert!(Path::new(&command[1]).is_absolute());

    // A preset's command is the preset's, whatever files sit beside the manifest.
    let preset = "name: w\nversion: \"1\"\nartifacts:\n  - name: murmur/driver-codex\n    \
                  runtime: driver\n";
    std::fs::write(dir.join("murmur.yaml"), preset).unwrap();
    for name in ["codex", "exec", "resume"] {
        std::fs::write(dir.join(name), "").unwrap();
    }
    let m = load(&dir.join("murmur.yaml")).unwrap();
    let process = m.driver_artifact().unwrap().process.clone().unwrap();
    assert_eq!(process, Builtin::Codex.preset().unwrap());
    let _ = std::fs::remove_dir_all(root);
}
