//! What a manifest may cost and where its launch leaves traces, through the real `mur`: a huge
//! or deeply nested manifest and an absurd queue_depth are refused with their exact E-MAN error
//! (the size's and the pre-scan's, so the YAML parser never saw them; how fast is measured in
//! BENCHMARKS.md, not here) and nothing recorded; DESIGN's relative `command: ["python3", "harness.py"]` runs
//! from any folder; and every folder and file a launch writes under `$MURMUR_HOME` is private
//! (0700, 0600) while the capsule runs and after it ends.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use support::*;

const LONG: Duration = Duration::from_secs(30);

const TOO_LARGE_HINT: &str = "a manifest holds settings and is a few kilobytes; keep long text \
                              (prompts, data) in files the harness reads, and check that this is \
                              the file you meant";

/// `mur run --manifest M --task hi`: (exit code, stdout, stderr).
fn run_task(home: &Home, manifest: &Path) -> (i32, String, String) {
    let manifest = manifest.to_string_lossy();
    home.run(&["run", "--manifest", &manifest, "--task", "hi"])
}

/// Asserts `mur run` wrote nothing under `$MURMUR_HOME`: no records, no `run/`.
fn assert_nothing_recorded(home: &Home, row: &str) {
    let written: Vec<PathBuf> = std::fs::read_dir(&home.home)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(written.is_empty(), "{row}: wrote {written:?}");
}

#[test]
fn a_2_mib_manifest_is_refused_at_once_and_records_nothing() {
    let home = Home::new();
    let valid = Fixture::single().yaml();
    let size = 2 << 20;
    // Valid YAML, only too large: the padding is a comment.
    let text = format!("{valid}#{}\n", "x".repeat(size - valid.len() - 2));
    assert_eq!(text.len(), size);
    let manifest = home.write("big/murmur.yaml", &text);
    let (code, out, err) = run_task(&home, &manifest);
    assert_eq!(code, 1, "stdout {out}");
    assert_eq!(
        err,
        format!(
            "error[E-MAN-010]: {}: is 2097152 bytes, more than the 1048576 bytes (1 MiB) a \
             manifest may be\n  hint: {TOO_LARGE_HINT}\n",
            manifest.display()
        )
    );
    assert_eq!(out, "");
    assert_nothing_recorded(&home, "2 MiB manifest");
}

#[test]
fn nesting_100_000_levels_is_refused_at_once() {
    let home = Home::new();
    let manifest = home.write("deep/murmur.yaml", &"[".repeat(100_000));
    let (code, out, err) = run_task(&home, &manifest);
    assert_eq!(code, 1, "stdout {out}");
    assert_eq!(
        err,
        format!(
            "error[E-MAN-011]: {}: line 1 column 65: lists and mappings are nested more than 64 \
             levels deep\n  hint: a manifest nests at most 64 levels (its own keys need 6); \
             check for unclosed [ or {{, or flatten the structure\n",
            manifest.display()
        )
    );
    assert_nothing_recorded(&home, "100 000 nested [");
}

#[test]
fn queue_depth_past_1000_is_refused_naming_the_key() {
    let home = Home::new();
    let fixture = Fixture {
        queue_depth: Some(u32::MAX),
        ..Fixture::default()
    };
    let manifest = home.write("queue/murmur.yaml", &fixture.yaml());
    let (code, out, err) = run_task(&home, &manifest);
    assert_eq!(code, 1, "stdout {out}");
    assert_eq!(
        err,
        format!(
            "error[E-MAN-005]: {}: lifecycle.queue_depth must be a whole number from 0 to 1000, \
             not 4294967295\n  hint: write e.g. queue_depth: 2 (the tasks waiting behind the \
             running one, at most 1000)\n",
            manifest.display()
        )
    );
    assert_nothing_recorded(&home, "queue_depth 4294967295");
}

/// DESIGN §6's process block, as written there.
const DESIGN_RELATIVE: &str = r#"name: my-worker
version: "0.1.0"
artifacts:
  - name: local/driver-scripted            # a process driver, declared inline
    version: "0.1.0"
    runtime: driver
    process:
      command: ["python3", "harness.py"]   # relative paths resolve against the manifest's folder
      prompt: stdin
      output: text
inference:
  transport: process
  driver: { artifact: local/driver-scripted }
"#;

const HARNESS_PY: &str = r#"import os, sys
print("harness.py answered " + sys.stdin.read().strip() + " in " + os.getcwd())
"#;

#[test]
fn designs_relative_command_runs_from_another_folder() {
    let home = Home::new();
    // Beside the manifest, in a folder that is not the one mur runs in.
    home.write("work/other/dir/harness.py", HARNESS_PY);
    let manifest = home.write("work/other/dir/murmur.yaml", DESIGN_RELATIVE);
    let (code, out, err) =
        home.run(&["run", "--manifest", "other/dir/murmur.yaml", "--task", "hi"]);
    assert_eq!(code, 0, "stdout {out}\nstderr {err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    let session = lines[1].strip_prefix("session: ").unwrap_or_default();
    // The harness ran in the work folder, from the manifest's folder's harness.py.
    assert_eq!(
        lines[2],
        format!("harness.py answered hi in {}", home.work.display())
    );
    let copy = std::fs::read_to_string(home.records(session).join("manifest.yaml")).unwrap();
    assert_eq!(copy, std::fs::read_to_string(manifest).unwrap());
}

const AUTH: &str = "network:
  authentication:
    scheme: bearer
    credentials:
      watcher: { scopes: [GetTask, ListTasks] }
";

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Every folder at and below `dir` (0700) and every file below it (0600): the paths that are
/// not, with their modes. Answers also how many files were seen.
fn not_private(dir: &Path) -> (Vec<String>, usize) {
    let mut wrong = Vec::new();
    let mut files = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        // A file may go between listing and reading (the .tmp of a record being replaced).
        let Ok(meta) = std::fs::symlink_metadata(&at) else {
            continue;
        };
        let (expected, kind) = if meta.is_dir() {
            (0o700, "folder")
        } else {
            files += 1;
            (0o600, "file")
        };
        let found = meta.permissions().mode() & 0o777;
        if found != expected {
            wrong.push(format!("{kind} {} is {found:o}", at.display()));
        }
        if meta.is_dir() {
            stack.extend(std::fs::read_dir(&at).unwrap().flatten().map(|e| e.path()));
        }
    }
    (wrong, files)
}

/// Asserts the session's records (every folder from `records/` down, every file in them) and
/// `run/` are private; answers how many files (records, run) were seen.
fn assert_private(home: &Home, session: &str, row: &str) -> (usize, usize) {
    let records = home.home.join("records");
    let folder = home.records(session);
    let mut levels = vec![];
    let mut level = folder.parent().unwrap().to_path_buf();
    while level.starts_with(&records) {
        levels.push(level.clone());
        level.pop();
    }
    for level in levels {
        assert_eq!(mode(&level), 0o700, "{row}: {}", level.display());
    }
    let (mut wrong, record_files) = not_private(&folder);
    let (run_wrong, run_files) = not_private(&home.home.join("run"));
    wrong.extend(run_wrong);
    assert!(wrong.is_empty(), "{row}: not private: {wrong:#?}");
    (record_files, run_files)
}

#[test]
fn records_are_private_while_the_capsule_runs_and_after() {
    let home = Home::new();
    // Folders an earlier murmur made world-readable are made private when reused.
    let work_records = home.records("x");
    let work_records = work_records.parent().unwrap();
    for old in [home.home.join("run"), work_records.to_path_buf()] {
        std::fs::create_dir_all(&old).unwrap();
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let fixture = Fixture {
        extra: AUTH,
        ..Fixture::single()
    };
    let mut run = start_fixture(
        &home,
        "private/murmur.yaml",
        &fixture,
        &["--task", "@sleep 60"],
    );
    let started = wait_until(LONG, || {
        home.trace(&run.session)
            .iter()
            .any(|e| e["event_type"] == "harness_start")
    });
    assert!(started, "the launch task's harness never started");
    let (record_files, run_files) = assert_private(&home, &run.session, "while running");
    // trace.jsonl, manifest.yaml, guide.md; the running-capsule record and its tokens.
    assert!(record_files >= 3, "{record_files} files in the records");
    assert!(run_files >= 2, "{run_files} files in run/");
    assert!(home
        .home
        .join("run")
        .join(format!("{}.tokens", run.session))
        .exists());

    signal(run.pid(), 15);
    assert!(run.wait_exit(LONG).is_some(), "mur run did not end");
    assert_private(&home, &run.session, "after the launch");
}
