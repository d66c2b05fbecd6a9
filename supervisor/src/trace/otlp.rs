//! `mur trace show [ADDRESS] --otlp FILE`: a finished session's spans (the `span` records of its
//! `trace.jsonl`) written as one OTLP/JSON `ExportTraceServiceRequest`, which a collector's
//! OTLP/HTTP receiver takes as it is. A formation member brings its whole formation, and every
//! session brings its sub-capsules (`children/`): one task's trace is whole in one file.

use std::path::{Path, PathBuf};

use capsule::telemetry::{otlp_json, Identity, SpanRecord};
use serde_json::Value;

use crate::error::{CliError, CliResult, Code};
use crate::records;

/// One session's spans and who wrote them.
struct Spans {
    session_id: String,
    capsule: String,
    member: Option<(String, String)>,
    records: Vec<SpanRecord>,
}

/// Writes the spans of `trace`'s session (and its formation's and sub-capsules') to `out`;
/// answers how many spans of how many sessions.
pub fn write(trace: &Path, out: &Path) -> CliResult<(usize, usize)> {
    let dir = trace.parent().unwrap_or(Path::new("."));
    let mut sessions = Vec::new();
    match records::roster(dir).ok().flatten() {
        Some(roster) => {
            let siblings = dir.parent().unwrap_or(Path::new("."));
            for (member, session) in roster.members() {
                let member = Some((roster.formation.clone(), member));
                gather(&siblings.join(&session), member, &mut sessions);
            }
        }
        None => gather(dir, None, &mut sessions),
    }
    let count = sessions.iter().map(|s| s.records.len()).sum();
    let identities: Vec<(Identity<'_>, Vec<SpanRecord>)> = sessions
        .iter()
        .map(|s| {
            let who = Identity {
                session_id: &s.session_id,
                capsule: &s.capsule,
                formation: s.member.as_ref().map(|(f, m)| (f.as_str(), m.as_str())),
            };
            (who, s.records.clone())
        })
        .collect();
    let json = otlp_json::request(&identities)
        .map_err(|why| CliError::new(Code::BadArgument, why, "report this bug"))?;
    std::fs::write(out, json).map_err(|e| {
        CliError::new(
            Code::BadArgument,
            format!("cannot write {}: {e}", out.display()),
            "give a path in a folder you can write",
        )
    })?;
    Ok((count, sessions.len()))
}

/// The spans of the session in `dir`, then of each of its sub-capsules, depth first.
fn gather(dir: &Path, member: Option<(String, String)>, into: &mut Vec<Spans>) {
    let Ok(text) = std::fs::read_to_string(dir.join("trace.jsonl")) else {
        return;
    };
    let lines: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let start = lines.iter().find(|l| l["event_type"] == "session_start");
    let text_of = |key: &str| {
        start
            .and_then(|s| s[key].as_str())
            .unwrap_or_default()
            .to_owned()
    };
    let session_id = match text_of("session_id") {
        s if s.is_empty() => dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        s => s,
    };
    into.push(Spans {
        session_id,
        capsule: text_of("capsule"),
        member,
        records: otlp_json::spans_of(&lines),
    });
    for child in children(dir) {
        gather(&child, None, into);
    }
}

fn children(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir.join("children"))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("trace.jsonl").is_file())
        .collect();
    found.sort();
    found
}
