//! Formation manifests on disk: a valid formation, and every E-MAN-009 case plus propagation of a
//! member's own error.

use super::tree;
use crate::manifest::{load_document, Document, ErrorCode, Formation, ManifestError};
use std::path::PathBuf;

const WORKER: &str = "\
name: my-worker
version: \"0.1.0\"
artifacts: [{ name: murmur/driver-codex, runtime: driver }]
lifecycle: { task_acceptance: queue }
exports: { peer_tasks: { accept: true } }
";

const PINNED: &str = "\
name: pinned
version: \"0.1.0\"
artifacts: [{ name: murmur/driver-codex, runtime: driver }]
network: { internal_port: 52222 }
lifecycle: { task_acceptance: queue }
exports: { peer_tasks: { accept: ${ACCEPT_PEERS} } }
";

const SHY: &str = "\
name: shy
version: \"0.1.0\"
artifacts: [{ name: murmur/driver-codex, runtime: driver }]
lifecycle: { task_acceptance: queue }
";

const LEAD: &str = "\
name: lead
version: \"0.1.0\"
artifacts: [{ name: murmur/driver-claude-code, runtime: driver }]
";

const FORMATION: &str = "\
formation:
  name: review
  version: \"0.1.0\"
  entry: lead
  members:
    lead:
      manifest: lead/murmur.yaml
      calls: [coder, reviewer, coder]
    coder:
      manifest: worker/murmur.yaml
      port: 52222
    reviewer:
      manifest: ./worker/../worker/murmur.yaml
";

/// Writes the formation (with `formation` as its text) and its member manifests; returns the
/// folder.
fn setup(name: &str, formation: &str) -> PathBuf {
    tree(
        name,
        &[
            ("formation.yaml", formation),
            ("lead/murmur.yaml", LEAD),
            ("worker/murmur.yaml", WORKER),
            ("pinned/murmur.yaml", PINNED),
            ("pinned/.env", "ACCEPT_PEERS=true\n"),
            ("shy/murmur.yaml", SHY),
            ("oneshot/murmur.yaml", LEAD),
            (
                "closed/murmur.yaml",
                "name: closed\nversion: \"1\"\nlifecycle: { task_acceptance: none }\nexports: { peer_tasks: { accept: true } }\n",
            ),
            (
                "broken/murmur.yaml",
                "name: broken\nversion: \"1\"\nlifecycle: { task_acceptence: none }\n",
            ),
        ],
    )
}

fn load(name: &str, formation: &str) -> (PathBuf, Result<Formation, ManifestError>) {
    let root = setup(name, formation);
    let result = load_document(&root.join("formation.yaml")).map(|doc| match doc {
        Document::Formation(f) => f,
        Document::Capsule(m) => panic!("expected a formation, got {m:#?}"),
    });
    (root, result)
}

/// Loads a formation that must fail with E-MAN-009-style `code`, checking the printed form
/// (`{file}` in `printed` stands for the formation file's path).
fn refused(name: &str, formation: &str, code: ErrorCode, key_path: &str, printed: &str) {
    let (root, result) = load(name, formation);
    let err = match result {
        Ok(f) => panic!("expected {code}, got {f:#?}"),
        Err(err) => err,
    };
    let file = root.join("formation.yaml");
    assert_eq!(
        err.to_string(),
        printed.replace("{file}", &file.display().to_string())
    );
    assert_eq!(err.code(), code);
    assert_eq!(err.key_path(), key_path);
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn a_formation_loads_with_its_members() {
    let (root, result) = load("ok", FORMATION);
    let f = result.unwrap();
    assert_eq!(
        (f.name.as_str(), f.version.as_str(), f.entry.as_str()),
        ("review", "0.1.0", "lead")
    );
    assert_eq!(f.path, root.join("formation.yaml"));
    assert_eq!(f.dir, root);
    let names: Vec<&str> = f.members.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["lead", "coder", "reviewer"]);
    let lead = f.entry_member().unwrap();
    assert_eq!(lead.calls, ["coder", "reviewer"]);
    assert_eq!(lead.manifest, root.join("lead/murmur.yaml"));
    assert_eq!(lead.pinned_port(), None);
    let coder = f.member("coder").unwrap();
    assert_eq!(
        (coder.port, coder.pinned_port()),
        (Some(52222), Some(52222))
    );
    let reviewer = f.member("reviewer").unwrap();
    assert_eq!(reviewer.manifest, root.join("worker/murmur.yaml"));
    assert_eq!(reviewer.capsule.name, "my-worker");
    assert!(reviewer.capsule.exports.peer_tasks_accept);
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn member_manifests_read_their_own_env_file() {
    let text = FORMATION.replace(
        "manifest: worker/murmur.yaml\n      port: 52222",
        "manifest: pinned/murmur.yaml",
    );
    let (root, result) = load("member-env", &text);
    let f = result.unwrap();
    let coder = f.member("coder").unwrap();
    assert_eq!((coder.port, coder.pinned_port()), (None, Some(52222)));
    assert!(coder.capsule.exports.peer_tasks_accept);
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn a_capsule_file_is_a_capsule_document() {
    let root = setup("capsule-doc", FORMATION);
    let doc = load_document(&root.join("worker/murmur.yaml")).unwrap();
    assert!(matches!(doc, Document::Capsule(m) if m.name == "my-worker"));
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn unknown_member_in_calls() {
    refused(
        "calls",
        &FORMATION.replace("[coder, reviewer, coder]", "[coder, reviwer]"),
        ErrorCode::Formation,
        "formation.members.lead.calls[1]",
        "error[E-MAN-009]: {file}: formation.members.lead.calls[1] names reviwer, which is not a \
         member of this formation\n  hint: did you mean reviewer? the members are lead, coder, \
         reviewer; declare reviwer under formation.members, or remove it from calls",
    );
}

#[test]
fn a_member_calling_itself() {
    refused(
        "self",
        &FORMATION.replace("[coder, reviewer, coder]", "[lead]"),
        ErrorCode::Formation,
        "formation.members.lead.calls[0]",
        "error[E-MAN-009]: {file}: formation.members.lead.calls[0]: member lead calls itself\n  \
         hint: remove lead from its own calls",
    );
}

#[test]
fn missing_entry() {
    refused(
        "no-entry",
        &FORMATION.replace("  entry: lead\n", ""),
        ErrorCode::Formation,
        "formation.entry",
        "error[E-MAN-009]: {file}: formation.entry is missing\n  hint: set entry to the member \
         that takes mur run --task; the members are lead, coder, reviewer",
    );
    refused(
        "bad-entry",
        &FORMATION.replace("entry: lead", "entry: leader"),
        ErrorCode::Formation,
        "formation.entry",
        "error[E-MAN-009]: {file}: formation.entry names leader, which is not a member\n  hint: \
         the members are lead, coder, reviewer",
    );
}

#[test]
fn two_members_on_one_port() {
    refused(
        "ports",
        &FORMATION.replace(
            "manifest: ./worker/../worker/murmur.yaml",
            "manifest: worker/murmur.yaml\n      port: 52222",
        ),
        ErrorCode::Formation,
        "formation.members.reviewer.port",
        "error[E-MAN-009]: {file}: members coder and reviewer are both pinned to port 52222\n  \
         hint: give reviewer its own port: (e.g. port: 52223), or remove the pin to let the OS \
         assign one",
    );
    refused(
        "ports-manifest",
        &FORMATION.replace(
            "manifest: ./worker/../worker/murmur.yaml",
            "manifest: pinned/murmur.yaml",
        ),
        ErrorCode::Formation,
        "formation.members.reviewer",
        "error[E-MAN-009]: {file}: members coder and reviewer are both pinned to port 52222 (its \
         manifest sets network.internal_port: 52222)\n  hint: give reviewer its own port: (e.g. \
         port: 52223), or remove the pin to let the OS assign one",
    );
}

#[test]
fn a_called_member_must_take_tasks_and_outlive_its_first_answer() {
    for (dir, key, why, fix) in [
        (
            "oneshot",
            "lifecycle.after_task: exit (the default under task_acceptance: single)",
            "it would end after its first answer, and its callers find its door gone",
            "set lifecycle.after_task: sleep",
        ),
        (
            "closed",
            "lifecycle.task_acceptance: none",
            "it takes no task",
            "set lifecycle.task_acceptance: queue",
        ),
    ] {
        let (root, result) = load(
            &format!("called-{dir}"),
            &FORMATION.replace(
                "manifest: ./worker/../worker/murmur.yaml",
                &format!("manifest: {dir}/murmur.yaml"),
            ),
        );
        let err = result.unwrap_err();
        let file = root
            .join(format!("{dir}/murmur.yaml"))
            .display()
            .to_string();
        assert_eq!(err.code(), ErrorCode::Formation);
        assert_eq!(err.key_path(), "formation.members.reviewer");
        assert_eq!(
            err.to_string(),
            format!(
                "error[E-MAN-009]: {}: member reviewer is called by lead, but its manifest {file} \
                 sets {key}: {why}\n  hint: {fix} in {file}, or remove reviewer from the calls of \
                 lead",
                root.join("formation.yaml").display()
            )
        );
        let _ = std::fs::remove_dir_all(root);
    }
}

#[test]
fn called_member_must_accept_peer_tasks() {
    let (root, result) = load(
        "consent",
        &FORMATION.replace(
            "manifest: ./worker/../worker/murmur.yaml",
            "manifest: shy/murmur.yaml",
        ),
    );
    let err = result.unwrap_err();
    let shy = root.join("shy/murmur.yaml").display().to_string();
    assert_eq!(err.code(), ErrorCode::Formation);
    assert_eq!(err.key_path(), "formation.members.reviewer");
    assert_eq!(
        err.to_string(),
        format!(
            "error[E-MAN-009]: {}: member reviewer is called by lead, but its manifest {shy} does \
             not set exports.peer_tasks.accept: true\n  hint: add `exports: {{ peer_tasks: {{ \
             accept: true }} }}` to {shy}, or remove reviewer from the calls of lead",
            root.join("formation.yaml").display()
        )
    );
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn a_member_manifest_error_propagates() {
    let (root, result) = load(
        "broken",
        &FORMATION.replace(
            "manifest: ./worker/../worker/murmur.yaml",
            "manifest: broken/murmur.yaml",
        ),
    );
    let err = result.unwrap_err();
    assert_eq!(err.code(), ErrorCode::UnknownKey);
    assert_eq!(err.file(), root.join("broken/murmur.yaml"));
    assert_eq!(err.key_path(), "lifecycle.task_acceptence");
    let (root2, missing) = load(
        "missing-member",
        &FORMATION.replace(
            "manifest: ./worker/../worker/murmur.yaml",
            "manifest: nowhere/murmur.yaml",
        ),
    );
    let err = missing.unwrap_err();
    assert_eq!(err.code(), ErrorCode::Unreadable);
    assert_eq!(err.file(), root2.join("nowhere/murmur.yaml"));
    let _ = std::fs::remove_dir_all(root);
    let _ = std::fs::remove_dir_all(root2);
}

#[test]
fn a_telemetry_block_reads_as_its_settings_and_refuses_what_would_not_read() {
    let block = "telemetry:\n  endpoint: http://localhost:4318\n  headers: { x-team: agents, authorization: Basic abc }\n  service_name: review\n  resource_attributes: { deployment.environment: dev }\n  capture_message_content: true\n";
    let (root, result) = load("telemetry", &format!("{FORMATION}{block}"));
    let f = result.unwrap();
    assert_eq!(
        *f.telemetry,
        crate::manifest::telemetry::Telemetry {
            endpoint: Some("http://localhost:4318".into()),
            headers: Some("x-team=agents,authorization=Basic abc".into()),
            service_name: Some("review".into()),
            resource_attributes: Some("deployment.environment=dev".into()),
            capture_message_content: Some(true),
        }
    );
    let _ = std::fs::remove_dir_all(root);
    refused(
        "telemetry-comma",
        &format!("{FORMATION}telemetry:\n  headers: {{ x-team: \"a,b\" }}\n"),
        ErrorCode::BadValue,
        "telemetry.headers.x-team",
        "error[E-MAN-005]: {file}: telemetry.headers.x-team must be a name and a value without \
         commas (and a name without `=`), not \"a,b\"\n  hint: OpenTelemetry joins these as \
         name=value,name=value: leave the commas out",
    );
    refused(
        "telemetry-key",
        &format!("{FORMATION}telemetry:\n  endpont: http://localhost:4318\n"),
        ErrorCode::UnknownKey,
        "telemetry.endpont",
        "error[E-MAN-003]: {file}: telemetry.endpont is not a formation key\n  hint: did you mean \
         telemetry.endpoint? the keys of telemetry are endpoint, headers, service_name, resource_attributes, \
         capture_message_content",
    );
}

#[test]
fn formation_keys_are_checked() {
    refused(
        "keys",
        &FORMATION.replace("  entry: lead\n", "  entry: lead\n  entrypoint: lead\n"),
        ErrorCode::UnknownKey,
        "formation.entrypoint",
        "error[E-MAN-003]: {file}: formation.entrypoint is not a formation key\n  hint: the keys \
         of formation are name, version, entry, members, on_member_failure",
    );
    let (root, result) = load(
        "on-failure",
        &FORMATION.replace(
            "  entry: lead\n",
            "  entry: lead\n  on_member_failure: restart\n",
        ),
    );
    let err = result.unwrap_err();
    assert_eq!(err.key_path(), "formation.on_member_failure");
    assert!(
        err.to_string()
            .contains("accepted values are stop, continue"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(root);
    refused(
        "top-keys",
        &format!("{FORMATION}name: extra\n"),
        ErrorCode::UnknownKey,
        "name",
        "error[E-MAN-003]: {file}: name is not a formation key\n  hint: the top-level keys are \
         formation, spend, telemetry",
    );
    refused(
        "empty",
        "formation: { name: f, version: \"1\", entry: a, members: {} }\n",
        ErrorCode::Formation,
        "formation.members",
        "error[E-MAN-009]: {file}: formation.members is empty\n  hint: declare at least one \
         member, e.g. members: { lead: { manifest: lead/murmur.yaml } }",
    );
    refused(
        "member-manifest",
        "formation: { name: f, version: \"1\", entry: a, members: { a: { calls: [] } } }\n",
        ErrorCode::MissingKey,
        "formation.members.a.manifest",
        "error[E-MAN-004]: {file}: formation.members.a.manifest is missing\n  hint: add manifest: \
         <path to its murmur.yaml, relative to this file>",
    );
}
