//! `mur gc [--older-than 7d]`: removes the records of ended sessions — trace, store, harness
//! state — untouched for longer than the age given, and the kept launches nothing can resume
//! any more (docs/store.md, "Retention"). A session that runs, or whose launch runs, is never
//! touched, however old.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::error::{CliError, CliResult, Code};
use crate::formation::resume;
use crate::records;

/// The age `--older-than` takes when it is not given.
pub const DEFAULT_AGE: &str = "7d";

/// How deep the records tree is walked for session folders (`records/<work folder>/ses_…`).
const DEPTH: usize = 64;

/// `N` followed by `s`, `m`, `h` or `d`.
pub fn parse_age(text: &str) -> CliResult<Duration> {
    let refused = || {
        CliError::new(
            Code::BadArgument,
            format!("--older-than {text:?} is not an age"),
            "give a whole number and a unit: 30m, 12h, 7d (s, m, h or d)",
        )
    };
    let split = text.len().checked_sub(1).ok_or_else(refused)?;
    let (n, unit) = text.split_at(split);
    let n: u64 = n.parse().map_err(|_| refused())?;
    let secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(refused()),
    };
    Ok(Duration::from_secs(n.saturating_mul(secs)))
}

/// The session folders under `dir` (named `ses_…`), depth first.
fn sessions_under(dir: &Path, depth: usize, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let Ok(kind) = e.file_type() else { continue };
        if !kind.is_dir() {
            continue;
        }
        let path = e.path();
        if e.file_name().to_string_lossy().starts_with("ses_") {
            found.push(path);
        } else if depth > 0 {
            sessions_under(&path, depth - 1, found);
        }
    }
}

/// When a session folder last changed: the newest of the folder, its trace and its store.
fn last_change(session: &Path) -> Option<SystemTime> {
    let store = session.join(capsule::store::DIR);
    [
        session.to_path_buf(),
        session.join("trace.jsonl"),
        store.join(capsule::store::FILE),
        store.join(format!("{}-wal", capsule::store::FILE)),
    ]
    .iter()
    .filter_map(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
    .max()
}

fn size_of(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => size_of(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map(|m| m.len()).unwrap_or(0),
            _ => 0,
        })
        .sum()
}

pub fn run(older_than: Option<&str>) -> CliResult<i32> {
    records::settle_home()?;
    let age = parse_age(older_than.unwrap_or(DEFAULT_AGE))?;
    let said_age = older_than.unwrap_or(DEFAULT_AGE);
    let mut live: HashSet<String> = records::running()
        .into_iter()
        .map(|r| r.session_id)
        .collect();
    let launches = resume::all();
    for l in launches.iter().filter(|l| l.is_running()) {
        live.extend(l.members.iter().map(|m| m.session.clone()));
    }
    let mut sessions = Vec::new();
    sessions_under(&records::home().join("records"), DEPTH, &mut sessions);
    let now = SystemTime::now();
    let (mut removed, mut bytes) = (0usize, 0u64);
    for dir in sessions {
        let id = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if live.contains(&id) {
            continue;
        }
        let old = last_change(&dir)
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|d| d >= age);
        if !old {
            continue;
        }
        let size = size_of(&dir);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => {
                removed += 1;
                bytes += size;
            }
            Err(e) => eprintln!("warning: cannot remove {}: {e}", dir.display()),
        }
    }
    // A launch none of whose sessions has records left can never be resumed.
    for l in &launches {
        if !l.is_running() && l.members.iter().all(|m| !m.records.is_dir()) {
            resume::remove(&l.entry);
        }
    }
    let text = match removed {
        0 => format!("nothing to remove: no ended session is older than {said_age}\n"),
        n => format!(
            "removed the records of {n} ended session{} ({:.1} MiB) older than {said_age}\n",
            if n == 1 { "" } else { "s" },
            bytes as f64 / (1024.0 * 1024.0)
        ),
    };
    super::emit(&text);
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_in_four_units_and_nothing_else() {
        assert_eq!(parse_age("7d").unwrap(), Duration::from_secs(7 * 86_400));
        assert_eq!(parse_age("30m").unwrap(), Duration::from_secs(1800));
        assert_eq!(parse_age("0s").unwrap(), Duration::ZERO);
        for bad in ["", "d", "7", "7w", "-1d", "1.5h", "7 d"] {
            let e = parse_age(bad).unwrap_err();
            assert_eq!(
                e.message(),
                format!("--older-than {bad:?} is not an age"),
                "{bad}"
            );
        }
    }
}
