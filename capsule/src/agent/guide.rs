//! `MURMUR_GUIDE`: the file that tells a harness which helpers it may run and which members it
//! may call. Presets hand it to their CLI as a system prompt, so stdin stays the message text.

use std::path::{Path, PathBuf};

const GUIDE: &str = "# Murmur capsule guide

You are running as a murmur capsule's harness. The task you were given is on stdin (or your last
argument). Besides your own tools, these commands talk to the capsule that runs you; each prints
its answer on stdout, and exits non-zero with the reason on stderr when it fails:

- `{mur} request-input QUESTION` — ask the person who sent the task a question and wait for the
  reply, which it prints. The task shows TASK_STATE_INPUT_REQUIRED meanwhile.
- `{mur} call-member [--timeout SECS] NAME TEXT` — give TEXT to the formation member NAME (one of
  the members listed below) and wait for its answer, which it prints. It fails, naming why
  (failed, canceled, rejected, timed_out, unreachable, no_answer), when the member gives none.
  It waits at most 1800 seconds unless --timeout says otherwise.
- `{mur} delegate-task CAPSULE TEXT` — start a sub-capsule (CAPSULE is the name of one of the
  manifests this capsule's capabilities.delegate.allow lists) with TEXT as its task, and wait
  for its response, which it prints. It fails, naming the sub-capsule's state and reason, when
  that task did not complete.
- `{mur} send-message [--timeout SECS] [--context ID] [--task ID] URL TEXT` — send TEXT to the A2A
  agent at URL (only destinations this capsule's capabilities.network.allow names can be
  reached) and wait until its task settles; it prints that task as JSON, whatever its state.
  --context continues a conversation with the agent; --task ID replies to a task of the agent's
  that waits for input.
- `{mur} end-without-answer REASON` — end your task without an answer: it fails with REASON,
  marked as having no answer. Exit right after; your output is then ignored.

Your final answer is what you print (or your result), and nothing else is needed.
";

/// Writes the guide into the session's records folder (0600, like every record) and answers its
/// path. `members`: the formation members this capsule may call (none for a capsule launched
/// alone). `mur`: the helpers' binary, written by its full path in every helper line, because a
/// CLI that runs its commands in a login shell (Codex's `bash -lc`) gets the PATH the login
/// profile sets, which may not hold `mur`'s folder, and because the full path is what Codex's
/// rules let out of its sandbox: a bare `mur` could be any program first on PATH.
pub fn write_guide(
    records_dir: &Path,
    capsule: &str,
    members: &[&str],
    mur: &Path,
) -> std::io::Result<PathBuf> {
    let path = records_dir.join("guide.md");
    let members = match members.is_empty() {
        true => "none".to_owned(),
        false => members.join(", "),
    };
    let mur = mur.display().to_string();
    let guide = GUIDE.replace("{mur}", &mur);
    crate::private::write(
        &path,
        format!(
            "{guide}\n`mur` is {mur}: run the commands above by that full path, as written \
             (your shell's PATH may not hold it, and the path is what your permissions \
             allow).\n\nCapsule: {capsule}\nMembers you may call: {members}.\n"
        )
        .as_bytes(),
    )?;
    Ok(path)
}
