//! `MURMUR_GUIDE`: the file that tells a harness which helpers it may run and which members it
//! may call. Presets hand it to their CLI as a system prompt, so stdin stays the message text.
//! Its text is spelled once, when the capsule starts; its file is written when the first
//! harness attempt needs it, so a member that never runs a task creates none (a formation's
//! launch creates files one after another, and on some file systems each costs more the more
//! were created and deleted nearby).

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

/// One capsule's guide: its text, and the file that holds it once an attempt has asked.
pub struct Guide {
    path: PathBuf,
    text: String,
    written: bool,
}

impl Guide {
    /// The guide of a capsule whose records are `records_dir`. `members`: the formation
    /// members this capsule may call (none for a capsule launched alone). `mur`: the helpers'
    /// binary, written by its full path in every helper line, because a CLI that runs its
    /// commands in a login shell (Codex's `bash -lc`) gets the PATH the login profile sets,
    /// which may not hold `mur`'s folder, and because the full path is what Codex's rules let
    /// out of its sandbox: a bare `mur` could be any program first on PATH.
    pub fn new(records_dir: &Path, capsule: &str, members: &[&str], mur: &Path) -> Guide {
        let members = match members.is_empty() {
            true => "none".to_owned(),
            false => members.join(", "),
        };
        let mur = mur.display().to_string();
        let guide = GUIDE.replace("{mur}", &mur);
        Guide {
            path: records_dir.join("guide.md"),
            text: format!(
                "{guide}\n`mur` is {mur}: run the commands above by that full path, as written \
                 (your shell's PATH may not hold it, and the path is what your permissions \
                 allow).\n\nCapsule: {capsule}\nMembers you may call: {members}.\n"
            ),
            written: false,
        }
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// Where the file is (once [`Guide::write`] has answered `Ok`).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the file (0600, like every record) the first time it is asked for.
    pub fn write(&mut self) -> Result<(), String> {
        if !self.written {
            crate::private::write(&self.path, self.text.as_bytes()).map_err(|e| {
                format!(
                    "cannot write the harness guide {}: {e}",
                    self.path.display()
                )
            })?;
            self.written = true;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_is_written_when_first_asked_for_and_holds_the_text() {
        let dir = std::env::temp_dir().join(format!("murmur-guide-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut guide = Guide::new(&dir, "lead", &["coder", "reviewer"], Path::new("/x/mur"));
        let path = dir.join("guide.md");
        assert!(!path.exists(), "nothing is written before an attempt asks");
        assert!(guide
            .text()
            .contains("Capsule: lead\nMembers you may call: coder, reviewer."));
        assert!(guide
            .text()
            .contains("`/x/mur call-member [--timeout SECS] NAME TEXT`"));
        guide.write().unwrap();
        assert_eq!(guide.path(), path);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), guide.text());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_guide_that_cannot_be_written_says_where() {
        let mut guide = Guide::new(
            Path::new("/nonexistent/records"),
            "w",
            &[],
            Path::new("mur"),
        );
        assert!(guide.text().contains("Members you may call: none."));
        let why = guide.write().unwrap_err();
        assert!(
            why.starts_with("cannot write the harness guide /nonexistent/records/guide.md: "),
            "{why}"
        );
    }
}
