//! `mur trace show [ADDRESS] [--workdir D] [--formation | --otlp FILE]`: which trace the address names
//! (addresses count among the recorded sessions of the folder), then its text from
//! [`crate::trace`].

use std::path::{Path, PathBuf};

use crate::error::{CliError, CliResult, Code};
use crate::records;
use crate::terminal;
use crate::trace;

fn trace_path(address: Option<&str>, workdir: &Path) -> CliResult<PathBuf> {
    if let Some(a) = address {
        let p = Path::new(a);
        if a.ends_with(".jsonl") || a.contains('/') {
            return if p.is_file() {
                Ok(p.to_path_buf())
            } else {
                Err(CliError::new(
                    Code::NoSuchSession,
                    format!("{a} is not a trace file"),
                    "give the path of a session's trace.jsonl",
                ))
            };
        }
    }
    let sessions = records::recorded(workdir);
    let ids: Vec<String> = sessions.iter().map(|(id, _)| id.clone()).collect();
    if ids.is_empty() {
        return Err(CliError::new(
            Code::NoSuchSession,
            format!("no session was recorded in {}", workdir.display()),
            "run `mur trace show` in the folder `mur run` ran in, or pass --workdir",
        ));
    }
    let id = records::resolve(address.unwrap_or("@1"), &ids, "recorded sessions")?;
    let dir = sessions
        .iter()
        .find(|(s, _)| s == id)
        .map(|(_, d)| d.clone())
        .unwrap_or_default();
    Ok(dir.join("trace.jsonl"))
}

fn cwd_of(workdir: Option<&Path>) -> PathBuf {
    let cwd = match workdir {
        Some(w) => w.to_path_buf(),
        None => std::env::current_dir().unwrap_or_default(),
    };
    cwd.canonicalize().unwrap_or(cwd)
}

/// `--otlp FILE`: the session's spans as OTLP JSON.
pub fn otlp(address: Option<&str>, workdir: Option<&Path>, out: &Path) -> CliResult<i32> {
    let path = trace_path(address, &cwd_of(workdir))?;
    let (spans, sessions) = trace::otlp::write(&path, out)?;
    super::emit(&format!(
        "wrote {spans} spans of {sessions} session(s) to {}\n",
        terminal::field(&out.display().to_string())
    ));
    Ok(0)
}

pub fn run(address: Option<&str>, workdir: Option<&Path>, formation: bool) -> CliResult<i32> {
    let path = trace_path(address, &cwd_of(workdir))?;
    if formation {
        super::emit(&terminal::shown(&trace::formation::view(&path)?));
        return Ok(0);
    }
    let text = std::fs::read_to_string(&path).map_err(|e| {
        CliError::new(
            Code::NoSuchSession,
            format!("cannot read {}: {e}", path.display()),
            "check the path",
        )
    })?;
    super::emit(&terminal::shown(&trace::render(&trace::parse(&text))));
    Ok(0)
}
