//! `MURMUR_GUIDE`: the file that tells a harness which helpers it may run and which members it
//! may call. Presets hand it to their CLI as a system prompt, so stdin stays the message text.

use std::path::{Path, PathBuf};

const GUIDE: &str = "# Murmur capsule guide

You are running as a murmur capsule's harness. The task you were given is on stdin (or your last
argument). Besides your own tools, these commands talk to the capsule that runs you; each prints
its answer on stdout, and exits non-zero with the reason on stderr when it fails:

- `mur request-input QUESTION` — ask the person who sent the task a question and wait for the
  reply, which it prints. The task shows TASK_STATE_INPUT_REQUIRED meanwhile.

Your final answer is what you print (or your result), and nothing else is needed.
";

/// Writes the guide into the session's records folder (0600, like every record) and answers its
/// path.
pub fn write_guide(records_dir: &Path, capsule: &str) -> std::io::Result<PathBuf> {
    let path = records_dir.join("guide.md");
    crate::private::write(
        &path,
        format!("{GUIDE}\nCapsule: {capsule}\nMembers you may call: none.\n").as_bytes(),
    )?;
    Ok(path)
}
