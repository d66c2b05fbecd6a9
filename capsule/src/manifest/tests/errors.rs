//! Every capsule-manifest error code, with its exact printed form and key path.

use super::{parse, refused, with, MINIMAL};
use crate::manifest::{load, ErrorCode};
use std::path::Path;

#[test]
fn e001_unreadable_file() {
    let err = load(Path::new("/nonexistent-murmur/murmur.yaml")).unwrap_err();
    assert_eq!(err.code(), ErrorCode::Unreadable);
    assert_eq!(err.key_path(), "");
    assert_eq!(
        err.to_string(),
        "error[E-MAN-001]: /nonexistent-murmur/murmur.yaml: cannot be read: No such file or \
         directory (os error 2)\n  hint: check the path; relative paths are taken from the \
         current folder (formation members: from the formation's folder)"
    );
    let dir = load(&std::env::temp_dir()).unwrap_err();
    assert_eq!(dir.code(), ErrorCode::Unreadable);
    assert_eq!(dir.hint(), "name the murmur.yaml inside that folder");
}

#[test]
fn e002_yaml_syntax_with_line_and_column() {
    let err = refused(
        "name: my-worker\nversion: \"0.1.0\"\nlifecycle:\n  task_acceptance: queue\n after_task: sleep\n",
        ErrorCode::Syntax,
        "",
        "error[E-MAN-002]: worker/murmur.yaml: line 5 column 2: did not find expected key\n  \
         hint: fix the YAML at line 5: check the indentation, and quote values that contain \": \" \
         or start with one of { [ * & ! % @",
    );
    assert_eq!((err.line(), err.column()), (Some(5), Some(2)));
    let dup = refused(
        "name: a\nname: b\n",
        ErrorCode::Syntax,
        "",
        "error[E-MAN-002]: worker/murmur.yaml: line 1 column 1: duplicate entry with key \"name\"\n  \
         hint: write each key once in its mapping",
    );
    assert_eq!(dup.line(), Some(1));
}

#[test]
fn e002_anchors_and_aliases_are_refused_naming_the_line() {
    // The billion laughs: each line stands for ten of the one above.
    let mut laughs = String::from("name: a\nversion: \"1\"\nx0: &a0 [lol, lol, lol, lol, lol]\n");
    for i in 1..9 {
        let refs = vec![format!("*a{}", i - 1); 10].join(", ");
        laughs.push_str(&format!("x{i}: &a{i} [{refs}]\n"));
    }
    let err = refused(
        &laughs,
        ErrorCode::Syntax,
        "",
        "error[E-MAN-002]: worker/murmur.yaml: line 3: an anchor (&name): a manifest takes no \
         YAML anchors or aliases\n  hint: write the value out where it is needed: an alias can \
         make a few lines stand for more manifest than murmur reads",
    );
    assert_eq!(err.line(), Some(3));
    // An anchor always comes before its first alias: the anchor is what is named.
    refused(
        "name: a\nversion: \"1\"\nq: &q queue\nlifecycle:\n  task_acceptance: *q\n",
        ErrorCode::Syntax,
        "",
        "error[E-MAN-002]: worker/murmur.yaml: line 3: an anchor (&name): a manifest takes no \
         YAML anchors or aliases\n  hint: write the value out where it is needed: an alias can \
         make a few lines stand for more manifest than murmur reads",
    );
    // `&` and `*` inside a value are text, not YAML.
    let plain = "a: \"1 & *2\"\nb: x&y\nc: 3*4\nd: [a&b, 'c *d']\ne: |\n  *not an alias\n";
    assert!(crate::manifest::limits::check_aliases(plain, std::path::Path::new("m.yaml")).is_ok());
}

#[test]
fn e002_text_the_alias_check_cannot_read_is_refused_when_it_could_hold_one() {
    // serde_yaml reads a tab after `:`, the alias check's parser stops there: what follows
    // once reached serde_yaml unchecked, its alias expanded.
    let text = "name:\ta\nversion: \"1\"\nq: &q queue\nlifecycle:\n  task_acceptance: *q\n";
    assert!(serde_yaml::from_str::<serde_yaml::Value>(text).is_ok());
    let err = refused(
        text,
        ErrorCode::Syntax,
        "",
        "error[E-MAN-002]: worker/murmur.yaml: line 1 column 7: ':' must be followed by a valid \
         YAML whitespace: murmur cannot read past here to check the manifest for YAML anchors and \
         aliases\n  hint: fix the YAML at line 1 (a tab after `:` or `-` counts: write a space \
         there); a manifest murmur cannot check for aliases is refused, since an alias can make a \
         few lines stand for more manifest than murmur reads",
    );
    assert_eq!((err.line(), err.column()), (Some(1), Some(7)));
    // With no `&` and no `*` anywhere, there is nothing to expand: serde_yaml reads it.
    let tabbed = MINIMAL.replacen("name: ", "name:\t", 1);
    assert!(!tabbed.contains(['&', '*']));
    parse(&tabbed).expect("a tab after a colon, with no anchor possible, is read");
}

#[test]
fn e003_typo_gets_did_you_mean() {
    let err = refused(
        &with("lifecycle:\n  task_acceptence: queue\n"),
        ErrorCode::UnknownKey,
        "lifecycle.task_acceptence",
        "error[E-MAN-003]: worker/murmur.yaml: lifecycle.task_acceptence is not a manifest key\n  \
         hint: did you mean lifecycle.task_acceptance? the keys of lifecycle are task_acceptance, \
         after_task, queue_depth",
    );
    assert_eq!((err.line(), err.column()), (Some(10), Some(3)));
}

#[test]
fn e003_unknown_keys_everywhere() {
    refused(
        &with("colour: blue\n"),
        ErrorCode::UnknownKey,
        "colour",
        "error[E-MAN-003]: worker/murmur.yaml: colour is not a manifest key\n  hint: the top-level \
         keys are name, version, artifacts, network, inference, lifecycle, exports, capabilities, \
         context, harness, spend",
    );
    let text = MINIMAL.replace("runtime: driver", "runtime: driver\n    endpont: x");
    let err = refused(
        &text,
        ErrorCode::UnknownKey,
        "artifacts[0].endpont",
        "error[E-MAN-003]: worker/murmur.yaml: artifacts[0].endpont is not a manifest key\n  hint: \
         the keys of artifacts[0] are name, version, runtime, gateway, process",
    );
    assert_eq!(err.line(), Some(6));
    refused(
        &with("capabilities: { network: { allows: [x] } }\n"),
        ErrorCode::UnknownKey,
        "capabilities.network.allows",
        "error[E-MAN-003]: worker/murmur.yaml: capabilities.network.allows is not a manifest key\n  \
         hint: did you mean capabilities.network.allow? the keys of capabilities.network are allow",
    );
}

#[test]
fn e004_missing_keys() {
    refused(
        "version: \"1\"\n",
        ErrorCode::MissingKey,
        "name",
        "error[E-MAN-004]: worker/murmur.yaml: name is missing\n  hint: add name: my-worker",
    );
    let err = refused(
        &MINIMAL.replace("  model: claude-sonnet-5\n", "  max_turns: 4\n"),
        ErrorCode::MissingKey,
        "inference.model",
        "error[E-MAN-004]: worker/murmur.yaml: inference.model is missing\n  hint: name the \
         provider's model, e.g. model: claude-sonnet-5",
    );
    assert_eq!(err.line(), Some(7));
    refused(
        "name: a\nversion: \"1\"\nartifacts: [{ name: murmur/driver-deepseek, runtime: driver }]\n",
        ErrorCode::MissingKey,
        "artifacts[0].gateway",
        "error[E-MAN-004]: worker/murmur.yaml: artifacts[0].gateway is missing\n  hint: add \
         gateway: { endpoint: https://api.deepseek.com, api_key: ${DEEPSEEK_API_KEY} }",
    );
    refused(
        &with("network: { authentication: { scheme: bearer, credentials: { w: {} } } }\n"),
        ErrorCode::MissingKey,
        "network.authentication.credentials.w.scopes",
        "error[E-MAN-004]: worker/murmur.yaml: network.authentication.credentials.w.scopes is \
         missing\n  hint: add scopes: [GetTask, ListTasks]",
    );
    refused(
        "name: a\nversion: \"1\"\n",
        ErrorCode::MissingKey,
        "artifacts",
        "error[E-MAN-004]: worker/murmur.yaml: artifacts is missing\n  hint: declare the driver \
         that runs tasks, e.g. artifacts: [{ name: murmur/driver-anthropic, runtime: driver, \
         gateway: { endpoint: https://api.anthropic.com, api_key: ${ANTHROPIC_API_KEY} } }]",
    );
}

const STREAM_DRIVER: &str = "name: h\nversion: \"1\"\nartifacts:\n  - name: local/h\n    \
     runtime: driver\n    process: { command: [h], PROCESS }\n\
     inference: { transport: process, driver: { artifact: local/h } }\n";

#[test]
fn e005_stream_json_input_and_the_control_request_interrupt() {
    let err = parse(&STREAM_DRIVER.replace("PROCESS", "input: json")).unwrap_err();
    assert_eq!(
        (err.code(), err.key_path()),
        (ErrorCode::BadValue, "artifacts[0].process.input")
    );
    assert!(err.to_string().contains("E-MAN-005"), "{err}");
    assert_eq!(err.hint(), "accepted values are text, stream-json");
    let err = parse(&STREAM_DRIVER.replace("PROCESS", "interrupt: control-request")).unwrap_err();
    assert_eq!(
        (err.code(), err.key_path()),
        (ErrorCode::BadValue, "artifacts[0].process.interrupt")
    );
    assert!(err.hint().contains("add input: stream-json"), "{err}");
    let err =
        parse(&STREAM_DRIVER.replace("PROCESS", "input: stream-json, prompt: arg")).unwrap_err();
    assert_eq!(
        (err.code(), err.key_path()),
        (ErrorCode::BadValue, "artifacts[0].process.prompt")
    );
}

#[test]
fn e005_bad_values_say_what_is_accepted() {
    refused(
        &with("lifecycle: { task_acceptance: sometimes }\n"),
        ErrorCode::BadValue,
        "lifecycle.task_acceptance",
        "error[E-MAN-005]: worker/murmur.yaml: lifecycle.task_acceptance must be one of none, \
         single, queue, not \"sometimes\"\n  hint: accepted values are none, single, queue",
    );
    refused(
        &with("lifecycle: { task_acceptance: queu }\n"),
        ErrorCode::BadValue,
        "lifecycle.task_acceptance",
        "error[E-MAN-005]: worker/murmur.yaml: lifecycle.task_acceptance must be one of none, \
         single, queue, not \"queu\"\n  hint: did you mean queue? accepted values are none, \
         single, queue",
    );
    refused(
        &with("network: { internal_port: 70000 }\n"),
        ErrorCode::BadValue,
        "network.internal_port",
        "error[E-MAN-005]: worker/murmur.yaml: network.internal_port must be a port number from 1 \
         to 65535, not 70000\n  hint: write internal_port: 52222, or remove it to let the OS \
         assign a port",
    );
    refused(
        &with("lifecycle: { queue_depth: 3 }\n"),
        ErrorCode::BadValue,
        "lifecycle.queue_depth",
        "error[E-MAN-005]: worker/murmur.yaml: lifecycle.queue_depth is set, but \
         lifecycle.task_acceptance is single (the default)\n  hint: remove queue_depth, or set \
         task_acceptance: queue (queue_depth counts the tasks waiting behind the running one)",
    );
    refused(
        &MINIMAL.replace("\"0.1.0\"", "0.1"),
        ErrorCode::BadValue,
        "version",
        "error[E-MAN-005]: worker/murmur.yaml: version must be a string, not 0.1\n  hint: quote \
         it: version: \"0.1\"",
    );
    refused(
        &with("exports: { peer_tasks: { accept: yes } }\n"),
        ErrorCode::BadValue,
        "exports.peer_tasks.accept",
        "error[E-MAN-005]: worker/murmur.yaml: exports.peer_tasks.accept must be true or false, \
         not \"yes\"\n  hint: write accept: true or accept: false",
    );
}

#[test]
fn e005_network_allow_entries_must_be_destinations() {
    refused(
        &with("capabilities: { network: { allow: [localhost:52222, \"*.example.com\"] } }\n"),
        ErrorCode::BadValue,
        "capabilities.network.allow[1]",
        "error[E-MAN-005]: worker/murmur.yaml: capabilities.network.allow[1] is \"*.example.com\", \
         which is not a destination: wildcards are not supported: name each host\n  hint: write \
         host, host:port or http://host:port (hosts match exactly; localhost and 127.0.0.1 are \
         different hosts)",
    );
    refused(
        &with("capabilities: { network: { allow: [\"http://localhost:1/api\"] } }\n"),
        ErrorCode::BadValue,
        "capabilities.network.allow[0]",
        "error[E-MAN-005]: worker/murmur.yaml: capabilities.network.allow[0] is \
         \"http://localhost:1/api\", which is not a destination: an entry names a destination, \
         not a path: write scheme://host:port\n  hint: write host, host:port or \
         http://host:port (hosts match exactly; localhost and 127.0.0.1 are different hosts)",
    );
}

#[test]
fn e005_reserved_credentials_and_process_rules() {
    refused(
        &with("network: { authentication: { scheme: bearer, credentials: { operator: { scopes: [] } } } }\n"),
        ErrorCode::BadValue,
        "network.authentication.credentials.operator",
        "error[E-MAN-005]: worker/murmur.yaml: network.authentication.credentials.operator is \
         reserved: murmur mints the operator credential itself\n  hint: give the credential \
         another name; the operator token (mur token) already holds every scope",
    );
    let process = |block: &str| {
        format!("name: h\nversion: \"1\"\nartifacts:\n  - name: local/h\n    runtime: driver\n    process: {block}\n")
    };
    refused(
        &process("{ command: [] }"),
        ErrorCode::BadValue,
        "artifacts[0].process.command",
        "error[E-MAN-005]: worker/murmur.yaml: artifacts[0].process.command must be a non-empty \
         list, not a list\n  hint: name the program and its arguments, e.g. command: \
         [\"python3\", \"harness.py\"]",
    );
    refused(
        &process("{ command: [h], resume: [\"--resume\"] }"),
        ErrorCode::BadValue,
        "artifacts[0].process.resume",
        "error[E-MAN-005]: worker/murmur.yaml: artifacts[0].process.resume must be a list with a \
         {session} placeholder, not a list\n  hint: write e.g. resume: [\"--resume\", \
         \"{session}\"]; {session} becomes the harness session id",
    );
    refused(
        &process("{ command: [h], interrupt: sigterm }"),
        ErrorCode::BadValue,
        "artifacts[0].process.interrupt",
        "error[E-MAN-005]: worker/murmur.yaml: artifacts[0].process.interrupt must be sigint, none, \
         control-request or { stdin: \"<bytes>\" }, not \"sigterm\"\n  hint: write interrupt: \
         sigint, interrupt: none, interrupt: control-request (with input: stream-json), or \
         interrupt: { stdin: \"\\u0003\" }",
    );
    refused(
        "name: h\nversion: \"1\"\nartifacts: [{ name: murmur/driver-codex, runtime: driver, process: { command: [x] } }]\n",
        ErrorCode::BadValue,
        "artifacts[0].process",
        "error[E-MAN-005]: worker/murmur.yaml: artifacts[0].process is not accepted: \
         murmur/driver-codex is a preset that carries its own process definition\n  hint: remove \
         it; to run the CLI another way, declare your own artifact (e.g. local/driver-claude) \
         with a process block",
    );
    refused(
        &MINIMAL.replace("https://api.anthropic.com", "api.anthropic.com"),
        ErrorCode::BadValue,
        "artifacts[0].gateway.endpoint",
        "error[E-MAN-005]: worker/murmur.yaml: artifacts[0].gateway.endpoint must be an http:// or \
         https:// URL, not \"api.anthropic.com\"\n  hint: write endpoint: \
         https://api.anthropic.com (or http://localhost:PORT/v1)",
    );
}

#[test]
fn e006_unset_variable() {
    let err = refused(
        &MINIMAL.replace("${ANTHROPIC_API_KEY}", "${MURMUR_UNSET_KEY}"),
        ErrorCode::UnsetVariable,
        "artifacts[0].gateway.api_key",
        "error[E-MAN-006]: worker/murmur.yaml: artifacts[0].gateway.api_key uses \
         ${MURMUR_UNSET_KEY}, which is not set\n  hint: export MURMUR_UNSET_KEY=… in the \
         environment, or put MURMUR_UNSET_KEY=… in worker/.env beside the manifest",
    );
    assert_eq!(err.line(), Some(6));
}

#[test]
fn e007_driver_problems() {
    refused(
        &with("  driver: { artifact: local/missing }\n"),
        ErrorCode::Driver,
        "inference.driver.artifact",
        "error[E-MAN-007]: worker/murmur.yaml: inference.driver.artifact names local/missing, \
         which is not declared under artifacts\n  hint: declare local/missing under artifacts",
    );
    refused(
        &MINIMAL.replace("murmur/driver-anthropic", "murmur/driver-antropic"),
        ErrorCode::Driver,
        "artifacts[0].name",
        "error[E-MAN-007]: worker/murmur.yaml: artifacts[0].name murmur/driver-antropic is not a \
         built-in murmur artifact\n  hint: did you mean murmur/driver-anthropic? the built-in \
         artifacts are murmur/driver-anthropic, murmur/driver-openai, murmur/driver-deepseek, \
         murmur/driver-claude-code, murmur/driver-codex",
    );
    refused(
        &with("  transport: process\n"),
        ErrorCode::Driver,
        "inference.transport",
        "error[E-MAN-007]: worker/murmur.yaml: inference.transport is process, but the driver \
         murmur/driver-anthropic is an http driver\n  hint: set inference.transport: http, or \
         drive a process driver: murmur/driver-claude-code, murmur/driver-codex or an artifact \
         with a process block",
    );
    refused(
        "name: h\nversion: \"1\"\nartifacts: [{ name: local/h, runtime: driver }]\ninference: { transport: process }\n",
        ErrorCode::Driver,
        "inference.transport",
        "error[E-MAN-007]: worker/murmur.yaml: inference.transport is process, but the driver \
         local/h has no process block\n  hint: add process: { command: [...] } to the artifact \
         local/h, or drive murmur/driver-claude-code or murmur/driver-codex",
    );
    refused(
        "name: h\nversion: \"1\"\nartifacts: [{ name: murmur/driver-claude-code, runtime: driver }]\ninference: { transport: http, model: m }\n",
        ErrorCode::Driver,
        "inference.transport",
        "error[E-MAN-007]: worker/murmur.yaml: inference.transport is http, but the driver \
         murmur/driver-claude-code is a process driver\n  hint: set inference.transport: process",
    );
}

#[test]
fn e008_scopes() {
    let scopes = |list: &str| {
        with(&format!(
            "network:\n  authentication:\n    scheme: bearer\n    credentials:\n      watcher: {{ scopes: [{list}] }}\n"
        ))
    };
    refused(
        &scopes("GetTask, message/send"),
        ErrorCode::Scope,
        "network.authentication.credentials.watcher.scopes[1]",
        "error[E-MAN-008]: worker/murmur.yaml: network.authentication.credentials.watcher.scopes[1] \
         is message/send, an A2A 0.3 name\n  hint: write SendMessage: the door speaks A2A v1.0",
    );
    refused(
        &scopes("stream/watch"),
        ErrorCode::Scope,
        "network.authentication.credentials.watcher.scopes[0]",
        "error[E-MAN-008]: worker/murmur.yaml: network.authentication.credentials.watcher.scopes[0] \
         is stream/watch, an A2A 0.3 name\n  hint: write murmur.WatchSession: the door speaks A2A \
         v1.0",
    );
    let listing =
        "the scopes are SendMessage, SendStreamingMessage, murmur.WatchSession, GetTask, \
                   ListTasks, CancelTask, SubscribeToTask, murmur.StopSession, resources/files";
    refused(
        &scopes("SendMesage"),
        ErrorCode::Scope,
        "network.authentication.credentials.watcher.scopes[0]",
        &format!(
            "error[E-MAN-008]: worker/murmur.yaml: network.authentication.credentials.watcher.\
             scopes[0] is SendMesage, which is not a scope\n  hint: did you mean SendMessage? \
             {listing}"
        ),
    );
    refused(
        &scopes("WatchSession"),
        ErrorCode::Scope,
        "network.authentication.credentials.watcher.scopes[0]",
        &format!(
            "error[E-MAN-008]: worker/murmur.yaml: network.authentication.credentials.watcher.\
             scopes[0] is WatchSession, which is not a scope\n  hint: did you mean \
             murmur.WatchSession? {listing}"
        ),
    );
}

#[test]
fn e009_formation_where_a_capsule_is_expected() {
    let err = parse("formation: { name: f }\n").unwrap_err();
    assert_eq!(err.code(), ErrorCode::Formation);
    assert_eq!(
        err.to_string(),
        "error[E-MAN-009]: worker/murmur.yaml: is a formation manifest (it has a top-level \
         formation: key), not a capsule manifest\n  hint: name a capsule manifest here: \
         formations cannot be members of formations or sub-capsules"
    );
}

#[test]
fn e005_a_file_that_is_not_a_mapping() {
    refused(
        "- a\n- b\n",
        ErrorCode::BadValue,
        "",
        "error[E-MAN-005]: worker/murmur.yaml: the manifest must be a mapping of keys, not a list\n  \
         hint: write the file as `key: value` lines",
    );
}

#[test]
fn e002_a_broken_env_file_is_named() {
    let text = super::MINIMAL;
    let root = super::tree(
        "bad-dotenv",
        &[
            ("w/murmur.yaml", text),
            ("w/.env", "A=1\nnot an assignment\n"),
        ],
    );
    let err = load(&root.join("w/murmur.yaml")).unwrap_err();
    assert_eq!(err.code(), ErrorCode::Syntax);
    assert_eq!(err.file(), root.join("w/.env"));
    assert_eq!((err.line(), err.column()), (Some(2), Some(1)));
    // A manifest that names no variable never reads the .env.
    std::fs::write(
        root.join("w/murmur.yaml"),
        text.replace("${ANTHROPIC_API_KEY}", "literal"),
    )
    .unwrap();
    assert!(load(&root.join("w/murmur.yaml")).is_ok());
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn e005_queue_depth_has_a_maximum() {
    let queue = |depth: &str| {
        with(&format!(
            "lifecycle: {{ task_acceptance: queue, queue_depth: {depth} }}\n"
        ))
    };
    let err = refused(
        &queue("4294967295"),
        ErrorCode::BadValue,
        "lifecycle.queue_depth",
        "error[E-MAN-005]: worker/murmur.yaml: lifecycle.queue_depth must be a whole number from 0 \
         to 1000, not 4294967295\n  hint: write e.g. queue_depth: 2 (the tasks waiting behind the \
         running one, at most 1000)",
    );
    assert_eq!(err.line(), Some(9));
    refused(
        &queue("1001"),
        ErrorCode::BadValue,
        "lifecycle.queue_depth",
        "error[E-MAN-005]: worker/murmur.yaml: lifecycle.queue_depth must be a whole number from 0 \
         to 1000, not 1001\n  hint: write e.g. queue_depth: 2 (the tasks waiting behind the \
         running one, at most 1000)",
    );
    let most = parse(&queue("1000")).unwrap();
    assert_eq!(most.lifecycle.queue_depth, 1000);
}

#[test]
fn e010_a_manifest_over_1_mib() {
    // Padding in a comment: the text is valid YAML, only its size is wrong.
    let big = format!("{MINIMAL}# {}\n", "x".repeat(1 << 20));
    let size = big.len();
    let err = refused(
        &big,
        ErrorCode::TooLarge,
        "",
        &format!(
            "error[E-MAN-010]: worker/murmur.yaml: is {size} bytes, more than the 1048576 bytes \
             (1 MiB) a manifest may be\n  hint: a manifest holds settings and is a few kilobytes; \
             keep long text (prompts, data) in files the harness reads, and check that this is \
             the file you meant"
        ),
    );
    assert_eq!(err.line(), None);
    let exactly = format!("{MINIMAL}#{}\n", "x".repeat((1 << 20) - MINIMAL.len() - 2));
    assert_eq!(exactly.len(), 1 << 20);
    assert!(parse(&exactly).is_ok(), "1 MiB itself is accepted");
}

#[test]
fn e010_files_are_refused_before_they_are_read_whole() {
    let root = super::tree("too-large", &[("w/.env", "A=1\n")]);
    let manifest = root.join("w/murmur.yaml");
    // A sparse 2 GiB file: refused on its size (the sentence gives it), not read; /dev/zero
    // below, which never ends, shows that no read goes past the limit.
    let file = std::fs::File::create(&manifest).unwrap();
    file.set_len(2 << 30).unwrap();
    let err = load(&manifest).unwrap_err();
    assert_eq!(err.code(), ErrorCode::TooLarge);
    assert_eq!(
        err.sentence(),
        format!(
            "{}: is 2147483648 bytes, more than the 1048576 bytes (1 MiB) a manifest may be",
            manifest.display()
        )
    );
    // A device that never ends is cut at the limit.
    let err = load(Path::new("/dev/zero")).unwrap_err();
    assert_eq!(
        err.to_string().lines().next(),
        Some(
            "error[E-MAN-010]: /dev/zero: is more than the 1048576 bytes (1 MiB) a manifest may be"
        )
    );
    // The .env beside a manifest is bounded the same way.
    std::fs::write(&manifest, super::MINIMAL).unwrap();
    std::fs::File::create(root.join("w/.env"))
        .unwrap()
        .set_len((1 << 20) + 1)
        .unwrap();
    let err = load(&manifest).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "error[E-MAN-010]: {}: is 1048577 bytes, more than the 1048576 bytes (1 MiB) a .env \
             file may be\n  hint: a .env holds KEY=VALUE settings; keep large values in files and \
             name their paths",
            root.join("w/.env").display()
        )
    );
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn e011_nesting_past_64_levels() {
    let hint = "a manifest nests at most 64 levels (its own keys need 6); check for unclosed [ or \
                {, or flatten the structure";
    // 100,000 levels would overflow the stack of a parser that descended them: refused at 65.
    let flow = format!("{}\n", "[".repeat(100_000));
    let err = refused(
        &flow,
        ErrorCode::TooDeep,
        "",
        &format!(
            "error[E-MAN-011]: worker/murmur.yaml: line 1 column 65: lists and mappings are \
             nested more than 64 levels deep\n  hint: {hint}"
        ),
    );
    assert_eq!((err.line(), err.column()), (Some(1), Some(65)));
    // Block nesting counts too: 65 mappings, each indented under the last.
    let block: String = (0..65)
        .map(|i| format!("{}k{i}:\n", "  ".repeat(i)))
        .collect();
    refused(
        &format!(
            "{MINIMAL}extra:\n{}",
            block
                .lines()
                .map(|l| format!("  {l}\n"))
                .collect::<String>()
        ),
        ErrorCode::TooDeep,
        "",
        &format!(
            "error[E-MAN-011]: worker/murmur.yaml: line 73 column 129: lists and mappings are \
             nested more than 64 levels deep\n  hint: {hint}"
        ),
    );
    // 64 levels is within the limit: the manifest then fails for what it says, not its depth.
    let deepest = format!("{MINIMAL}extra: {}{}\n", "[".repeat(63), "]".repeat(63));
    assert_eq!(parse(&deepest).unwrap_err().code(), ErrorCode::UnknownKey);
}

#[test]
fn e005_the_spend_ceiling_is_a_positive_token_count() {
    let ceiling = |v: &str| {
        MINIMAL.replace(
            "  model: claude-sonnet-5\n",
            &format!("  model: claude-sonnet-5\n  max_total_tokens: {v}\n"),
        )
    };
    assert_eq!(
        parse(&ceiling("200000"))
            .unwrap()
            .inference
            .max_total_tokens,
        Some(200_000)
    );
    assert_eq!(parse(MINIMAL).unwrap().inference.max_total_tokens, None);
    // (as written, as the error shows it)
    for (bad, shown) in [("0", "0"), ("-5", "-5"), ("lots", "\"lots\"")] {
        refused(
            &ceiling(bad),
            ErrorCode::BadValue,
            "inference.max_total_tokens",
            &format!(
                "error[E-MAN-005]: worker/murmur.yaml: inference.max_total_tokens must be a whole \
                 number of at least 1, not {shown}\n  hint: write e.g. max_total_tokens: 200000"
            ),
        );
    }
}

/// A manifest on a CLI preset, with `extra` after its artifacts.
fn preset(driver: &str, extra: &str) -> String {
    format!("name: h\nversion: \"1\"\nartifacts: [{{ name: {driver}, runtime: driver }}]\n{extra}")
}

#[test]
fn e005_a_shell_is_granted_to_an_http_model_or_a_cli_preset_only_and_by_commands_not_lines() {
    refused(
        "name: h\nversion: \"1\"\nartifacts: [{ name: local/own, version: \"0.1.0\", runtime: \
         driver, process: { command: [cat] } }]\ncapabilities: { shell: { allow: [bash] } }\n",
        ErrorCode::BadValue,
        "capabilities.shell.allow",
        "error[E-MAN-005]: worker/murmur.yaml: capabilities.shell.allow is not accepted: on a \
         capsule that runs a harness it lists what the murmur/driver-claude-code or \
         murmur/driver-codex CLI may run without asking, and this capsule's driver is neither\n  \
         hint: remove capabilities.shell; a process driver of your own passes its CLI's \
         permission flags in process.command",
    );
    refused(
        &preset(
            "murmur/driver-claude-code",
            "capabilities: { shell: { allow: [\"git status && rm -rf ~\"] } }\n",
        ),
        ErrorCode::BadValue,
        "capabilities.shell.allow[0]",
        "error[E-MAN-005]: worker/murmur.yaml: capabilities.shell.allow[0] is \"git status && rm \
         -rf ~\", which holds '&': an entry is a command's first words, not a shell line\n  hint: \
         write the program and the arguments it starts with, e.g. \"cargo test\" (it then allows \
         `cargo test --release` too)",
    );
    let http = "name: h\nversion: \"1\"\nartifacts: [{ name: murmur/driver-anthropic, runtime: \
                driver, gateway: { endpoint: \"http://127.0.0.1:9\", api_key: k } }]\ninference: \
                { transport: http, model: m }\n";
    refused(
        &format!("{http}capabilities: {{ shell: {{ allow: [cargo, \"make | sh\"] }} }}\n"),
        ErrorCode::BadValue,
        "capabilities.shell.allow[1]",
        "error[E-MAN-005]: worker/murmur.yaml: capabilities.shell.allow[1] is \"make | sh\", which \
         holds '|': an entry is a command's first words, not a shell line\n  hint: write the \
         program and the arguments it starts with, e.g. \"cargo test\" (it then allows `cargo \
         test --release` too)",
    );
}

#[test]
fn e005_the_harness_block_and_what_it_applies_to() {
    refused(
        &preset("murmur/driver-codex", "harness: { permissions: write }\n"),
        ErrorCode::BadValue,
        "harness.permissions",
        "error[E-MAN-005]: worker/murmur.yaml: harness.permissions must be one of read, edit, \
         full, not \"write\"\n  hint: accepted values are read, edit, full",
    );
    refused(
        &preset(
            "murmur/driver-claude-code",
            "harness: { allow_commands: [\"cargo test; rm -rf ~\"] }\n",
        ),
        ErrorCode::BadValue,
        "harness.allow_commands[0]",
        "error[E-MAN-005]: worker/murmur.yaml: harness.allow_commands[0] is \"cargo test; rm -rf \
         ~\", which holds ';': an entry is a command's first words, not a shell line\n  hint: \
         write the program and the arguments it starts with, e.g. \"cargo test\" (it then allows \
         `cargo test --release` too)",
    );
    refused(
        &preset(
            "murmur/driver-claude-code",
            "harness: { allow_commands: [\"  \"] }\n",
        ),
        ErrorCode::BadValue,
        "harness.allow_commands[0]",
        "error[E-MAN-005]: worker/murmur.yaml: harness.allow_commands[0] must be a non-empty \
         string, not \"  \"\n  hint: remove the empty entry",
    );
    refused(
        &preset("murmur/driver-codex", "harness: { state: user }\n"),
        ErrorCode::BadValue,
        "harness.state",
        "error[E-MAN-005]: worker/murmur.yaml: harness.state is user with permissions: read, \
         which murmur/driver-codex cannot serve: Codex's sandbox would keep murmur's helpers \
         from reaching the capsule, and murmur writes no rule into your own Codex folder\n  \
         hint: write state: capsule (the default), or permissions: full",
    );
    refused(
        &preset("murmur/driver-codex", "harness: { env: [\"1BAD\"] }\n"),
        ErrorCode::BadValue,
        "harness.env[0]",
        "error[E-MAN-005]: worker/murmur.yaml: harness.env[0] is \"1BAD\", which is not a \
         variable name\n  hint: name a variable, e.g. NPM_TOKEN: letters, digits and _, not \
         starting with a digit (its value comes from murmur's own environment)",
    );
    refused(
        &with("harness: { env: [NPM_TOKEN] }\n"),
        ErrorCode::BadValue,
        "harness",
        "error[E-MAN-005]: worker/murmur.yaml: harness is not accepted: this capsule runs no \
         harness (inference.transport is http)\n  hint: remove harness; it describes the agent \
         CLI of a capsule on inference.transport: process",
    );
    let own = "name: h\nversion: \"1\"\nartifacts: [{ name: local/h, runtime: driver, process: { command: [h] } }]\n";
    refused(
        &format!("{own}harness: {{ permissions: edit }}\n"),
        ErrorCode::BadValue,
        "harness.permissions",
        "error[E-MAN-005]: worker/murmur.yaml: harness.permissions is not accepted: it is read by \
         the murmur/driver-claude-code and murmur/driver-codex presets, and this capsule's \
         driver is neither\n  hint: remove it; a process driver of your own passes its CLI's \
         permission flags in process.command (harness.env serves every driver)",
    );
    // harness.env alone serves any process driver.
    let m = super::parse(&format!("{own}harness: {{ env: [NPM_TOKEN] }}\n")).unwrap();
    assert_eq!(m.harness.env, ["NPM_TOKEN"]);
    refused(
        &preset("murmur/driver-codex", "harness: { sandbox: none }\n"),
        ErrorCode::UnknownKey,
        "harness.sandbox",
        "error[E-MAN-003]: worker/murmur.yaml: harness.sandbox is not a manifest key\n  hint: \
         the keys of harness are permissions, allow_commands, state, env, require, read, protect, \
         limits, approvals, approve, deny, approval_timeout_secs, approvals_from",
    );
    refused(
        &format!("{own}harness: {{ require: [network, walls] }}\n"),
        ErrorCode::BadValue,
        "harness.require[1]",
        "error[E-MAN-005]: worker/murmur.yaml: harness.require[1] must be one of pid, mount, \
         network, files, environment, not \"walls\"\n  hint: accepted values are pid, mount, \
         network, files, environment",
    );
    let m = super::parse(&format!(
        "{own}harness: {{ require: [files, network, files] }}\n"
    ))
    .unwrap();
    assert_eq!(
        m.harness.require,
        [crate::manifest::Wall::Files, crate::manifest::Wall::Network]
    );
}

#[test]
fn e005_the_approval_keys() {
    let claude = |extra: &str| preset("murmur/driver-claude-code", extra);
    refused(
        &claude("harness: { approvals: always }\n"),
        ErrorCode::BadValue,
        "harness.approvals",
        "error[E-MAN-005]: worker/murmur.yaml: harness.approvals must be one of deny, ask, not \
         \"always\"\n  hint: accepted values are deny, ask",
    );
    refused(
        &claude("harness: { approve: [\"Bash(git status:*)\"] }\n"),
        ErrorCode::BadValue,
        "harness.approve",
        "error[E-MAN-005]: worker/murmur.yaml: harness.approve is read only when the CLI asks, \
         and harness.approvals is deny\n  hint: write approvals: ask, or remove it (under deny, \
         what the permission level does not allow is refused without asking)",
    );
    refused(
        &claude("harness: { approvals: ask, deny: [\"Bash(rm -rf\"] }\n"),
        ErrorCode::BadValue,
        "harness.deny[0]",
        "error[E-MAN-005]: worker/murmur.yaml: harness.deny[0] is \"Bash(rm -rf\", which opens \
         a parenthesis it does not close at its end\n  hint: write a tool name, e.g. \
         \"WebFetch\", or a tool and its input in parentheses: \"Bash(git status:*)\" (a \
         command and what may follow it), \"Bash(npm test)\" (exactly that), \
         \"Read(/srv/data/:*)\" (a path prefix)",
    );
    refused(
        &claude("harness: { approvals: ask, approval_timeout_secs: 0 }\n"),
        ErrorCode::BadValue,
        "harness.approval_timeout_secs",
        "error[E-MAN-005]: worker/murmur.yaml: harness.approval_timeout_secs must be a whole \
         number from 1 to 604800, not 0\n  hint: write how long a question waits for an answer \
         before it is denied, in seconds, e.g. approval_timeout_secs: 300",
    );
    refused(
        &claude("harness: { approvals: ask, approvals_from: lead }\n"),
        ErrorCode::BadValue,
        "harness.approvals_from",
        "error[E-MAN-005]: worker/murmur.yaml: harness.approvals_from must be one of operator, \
         caller, not \"lead\"\n  hint: accepted values are operator, caller",
    );
    let codex = super::parse(&preset(
        "murmur/driver-codex",
        "harness: { approvals: ask }\n",
    ));
    assert_eq!(
        codex.unwrap().harness.approvals.mode,
        crate::manifest::approvals::Mode::Ask,
        "Codex asks through its app-server"
    );
    let own = "name: h\nversion: \"1\"\nartifacts: [{ name: local/h, runtime: driver, process: { command: [h] } }]\n";
    refused(
        &format!("{own}harness: {{ approvals: ask }}\n"),
        ErrorCode::BadValue,
        "harness.approvals",
        "error[E-MAN-005]: worker/murmur.yaml: harness.approvals is not accepted: it is read by \
         the murmur/driver-claude-code and murmur/driver-codex presets, and this capsule's \
         driver is neither\n  hint: remove it; a process driver of your own passes its CLI's \
         permission flags in process.command (harness.env serves every driver)",
    );
    let m = super::parse(&claude(
        "harness: { approvals: ask, approve: [\"Bash(git status:*)\", Read], deny: [\"Bash(rm:*)\"], \
         approval_timeout_secs: 30, approvals_from: caller }\n",
    ))
    .unwrap();
    let a = &m.harness.approvals;
    assert_eq!(a.mode, crate::manifest::approvals::Mode::Ask);
    assert_eq!(a.timeout_secs, 30);
    assert_eq!(a.from, crate::manifest::approvals::From::Caller);
    assert_eq!(
        a.approve
            .iter()
            .map(|r| (r.at.as_str(), r.text.as_str()))
            .collect::<Vec<_>>(),
        [
            ("harness.approve[0]", "Bash(git status:*)"),
            ("harness.approve[1]", "Read")
        ]
    );
    assert_eq!(a.deny[0].at, "harness.deny[0]");
    let plain = super::parse(&claude("")).unwrap();
    assert_eq!(plain.harness.approvals, Default::default());
    assert_eq!(plain.harness.approvals.timeout_secs, 600);
}

/// A lone capsule whose CLI asks needs an authenticated door: anyone reaching a public one
/// could answer for the operator.
#[test]
fn e005_an_asking_capsule_on_a_public_door() {
    let text = preset("murmur/driver-claude-code", "harness: { approvals: ask }\n");
    let root = super::tree("asking-public", &[("worker/murmur.yaml", &text)]);
    let err = match crate::manifest::load_document(&root.join("worker/murmur.yaml")) {
        Ok(_) => panic!("a public asking door was accepted"),
        Err(e) => e,
    };
    assert_eq!(err.code(), ErrorCode::BadValue);
    assert_eq!(err.key_path(), "harness.approvals");
    assert!(
        err.to_string().ends_with(
            "harness.approvals is ask, and this capsule's door is public (no \
             network.authentication): anyone who reaches its port could answer for the operator\n  \
             hint: declare network.authentication: { scheme: bearer } so only the operator's token \
             answers, or run the capsule as a formation member (every formation door is \
             authenticated)"
        ),
        "{err}"
    );
    let authenticated = format!("{text}network: {{ authentication: {{ scheme: bearer }} }}\n");
    let root = super::tree(
        "asking-authenticated",
        &[("worker/murmur.yaml", &authenticated)],
    );
    assert!(crate::manifest::load_document(&root.join("worker/murmur.yaml")).is_ok());
}
