//! Launches that can be brought back (`mur run --resume`, docs/store.md): what `mur run` keeps
//! of each launch — the manifest it ran, its work folder, and each member's session, port,
//! records and tokens — in `run/launches/<entry session>.json` (0600; `run/` is out of every
//! harness's sight), and finding the one an address names. Each member's tasks are in its own
//! store; this file is what puts the same doors back at the same addresses with the same keys.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use std::net::TcpListener;

use capsule::clock::Millis;
use capsule::ids::SessionId;

use super::plan::Plan;
use crate::error::{CliError, CliResult, Code};
use crate::records::{self, RunningCapsule};
use crate::tokens::Minted;

/// One launch, as `mur run` recorded it when it started.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct LaunchFile {
    /// The entry member's session: the launch's name.
    pub entry: String,
    pub formation: Option<String>,
    /// The manifest `mur run` was given (a capsule's or a formation's).
    pub manifest: PathBuf,
    pub workdir: PathBuf,
    pub started_at: String,
    pub members: Vec<MemberFile>,
    /// Set when the launch ended by its clean stop; a launch that was killed (or whose machine
    /// went down) never gets to set it, which is what `mur ps` lists.
    #[serde(default)]
    pub stopped: bool,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct MemberFile {
    pub name: String,
    pub session: String,
    pub port: u16,
    pub records: PathBuf,
    /// `(credential, token)`: the same door keys, and the member credentials its callers hold.
    /// Kept in the `.tokens` file, never in the launch's JSON; empty once the launch was
    /// stopped (its tokens went with it).
    #[serde(skip)]
    pub tokens: Vec<(String, String)>,
}

/// `run/launches/`.
pub fn dir() -> PathBuf {
    records::run_dir().join("launches")
}

fn path_of(entry: &str) -> PathBuf {
    dir().join(format!("{entry}.json"))
}

fn tokens_of(entry: &str) -> PathBuf {
    dir().join(format!("{entry}.tokens"))
}

impl LaunchFile {
    /// Writes the launch, and its tokens beside it (`member credential token` lines).
    pub fn save(&self) -> std::io::Result<()> {
        let lines: String = self
            .members
            .iter()
            .flat_map(|m| {
                m.tokens
                    .iter()
                    .map(move |(c, t)| format!("{} {c} {t}\n", m.name))
            })
            .collect();
        records::write_private(&tokens_of(&self.entry), lines.as_bytes())?;
        self.save_launch()
    }

    fn save_launch(&self) -> std::io::Result<()> {
        let json = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        records::write_private(&path_of(&self.entry), &json)
    }

    /// Whether any of its members runs now (a record under `run/` whose process is alive).
    pub fn is_running(&self) -> bool {
        self.members.iter().any(|m| {
            std::fs::read_to_string(records::record_path(&m.session))
                .ok()
                .and_then(|t| serde_json::from_str::<RunningCapsule>(&t).ok())
                .is_some_and(|r| r.is_alive() || records::process_running(r.supervisor_pid))
        })
    }

    /// The tokens of member `i` for what was minted afresh: the kept token where the
    /// credential was kept, a fresh one for a credential the manifest has added since.
    pub fn keep_tokens(&self, name: &str, minted: &mut [Minted]) {
        let Some(m) = self.members.iter().find(|m| m.name == name) else {
            return;
        };
        for t in minted.iter_mut() {
            if let Some((_, kept)) = m.tokens.iter().find(|(c, _)| *c == t.credential) {
                t.token = kept.clone();
            }
        }
    }

    pub fn member(&self, name: &str) -> Option<&MemberFile> {
        self.members.iter().find(|m| m.name == name)
    }
}

/// Marks a launch as ended by its stop: its tokens go with it (no token outlives a launch that
/// ended as asked), it is no longer listed as cut short, and it can still be resumed by its
/// address, with tokens minted afresh.
pub fn mark_stopped(entry: &str) {
    let _ = std::fs::remove_file(tokens_of(entry));
    let Some(mut file) = read(&path_of(entry)) else {
        return;
    };
    file.stopped = true;
    let _ = file.save_launch();
}

fn read(path: &Path) -> Option<LaunchFile> {
    let mut file: LaunchFile = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    let tokens = std::fs::read_to_string(tokens_of(&file.entry)).unwrap_or_default();
    for line in tokens.lines() {
        let mut words = line.splitn(3, ' ');
        let (Some(member), Some(credential), Some(token)) =
            (words.next(), words.next(), words.next())
        else {
            continue;
        };
        if let Some(m) = file.members.iter_mut().find(|m| m.name == member) {
            m.tokens
                .push((credential.to_owned(), token.trim().to_owned()));
        }
    }
    Some(file)
}

/// Every kept launch, newest first.
pub fn all() -> Vec<LaunchFile> {
    let mut found: Vec<LaunchFile> = std::fs::read_dir(dir())
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
                .filter_map(|e| read(&e.path()))
                .collect()
        })
        .unwrap_or_default();
    // Session ids are UUIDv7: they sort by start time.
    found.sort_by(|a, b| b.entry.cmp(&a.entry));
    found
}

/// The launches `mur ps` lists as resumable: cut short (no clean stop), not running, their
/// records still there.
pub fn cut_short() -> Vec<LaunchFile> {
    all()
        .into_iter()
        .filter(|l| !l.stopped && !l.is_running() && l.members.iter().all(|m| m.records.is_dir()))
        .collect()
}

/// Removes a launch's files (`mur gc`).
pub fn remove(entry: &str) {
    let _ = std::fs::remove_file(path_of(entry));
    let _ = std::fs::remove_file(tokens_of(entry));
}

/// The launch `address` names: `@N` (the Nth newest launch cut short), a formation's name (its
/// newest launch), or a session (an entry's or any member's: its id, or 4+ final characters).
/// A launch still running is refused: it has its doors already.
pub fn resolve(address: &str) -> CliResult<LaunchFile> {
    let all = all();
    let found = if address.starts_with('@') {
        let short = cut_short();
        let ids: Vec<String> = short.iter().map(|l| l.entry.clone()).collect();
        let id = records::resolve(address, &ids, "launches that can be resumed")?.clone();
        short.into_iter().find(|l| l.entry == id)
    } else if let Some(l) = all.iter().find(|l| {
        l.formation.as_deref() == Some(address)
            || (l.formation.is_none() && l.members.first().is_some_and(|m| m.name == address))
    }) {
        Some(l.clone())
    } else {
        let sessions: Vec<String> = all
            .iter()
            .flat_map(|l| l.members.iter().map(|m| m.session.clone()))
            .collect();
        let id = records::resolve(address, &sessions, "kept launches' sessions")?.clone();
        all.iter()
            .find(|l| l.members.iter().any(|m| m.session == id))
            .cloned()
    };
    let launch = found.ok_or_else(|| {
        CliError::new(
            Code::NoSuchSession,
            format!("no kept launch is named {address}"),
            "`mur ps` lists the launches that can be resumed",
        )
    })?;
    if launch.is_running() {
        return Err(CliError::new(
            Code::NotResumable,
            format!(
                "the launch of session {} is still running: it cannot be resumed beside itself",
                launch.entry
            ),
            format!(
                "use its doors as they are (`mur ps`), or stop it first (`mur stop {}`)",
                launch.entry
            ),
        ));
    }
    if let Some(gone) = launch.members.iter().find(|m| !m.records.is_dir()) {
        return Err(CliError::new(
            Code::NotResumable,
            format!(
                "the records of member {} (session {}) are gone from {}",
                gone.name,
                gone.session,
                gone.records.display()
            ),
            "a session whose records were removed (`mur gc`) cannot be resumed; launch it afresh with `mur run`",
        ));
    }
    Ok(launch)
}

/// A resumed launch's sessions and records folders, member by member, as it kept them; the
/// manifest must still name the members it had.
pub fn kept_records(plan: &Plan, kept: &LaunchFile) -> CliResult<(Vec<SessionId>, Vec<PathBuf>)> {
    let mut sessions = Vec::new();
    let mut dirs = Vec::new();
    for m in &plan.members {
        let Some(k) = kept.member(&m.name) else {
            return Err(CliError::new(
                Code::NotResumable,
                format!(
                    "{} now has a member {} that the launch of session {} did not have",
                    kept.manifest.display(),
                    m.name,
                    kept.entry
                ),
                "a resumed launch runs the members it had: put the manifest back as it was, or launch it afresh with `mur run`",
            ));
        };
        sessions.push(SessionId::from_wire(&k.session));
        dirs.push(k.records.clone());
    }
    Ok((sessions, dirs))
}

/// Writes what `mur run --resume` needs to bring this launch back: a fresh launch's, or a
/// resumed one's again (`kept`), its start time kept.
#[allow(clippy::too_many_arguments)]
pub fn keep_launch(
    plan: &Plan,
    workdir: &Path,
    kept: Option<&LaunchFile>,
    sessions: &[SessionId],
    dirs: &[PathBuf],
    listeners: &[TcpListener],
    minted: &[Vec<Minted>],
) -> CliResult<LaunchFile> {
    let members = plan
        .members
        .iter()
        .enumerate()
        .map(|(i, m)| MemberFile {
            name: m.name.clone(),
            session: sessions[i].to_string(),
            port: listeners[i].local_addr().map(|a| a.port()).unwrap_or(0),
            records: dirs[i].clone(),
            tokens: minted[i]
                .iter()
                .map(|t| (t.credential.clone(), t.token.clone()))
                .collect(),
        })
        .collect();
    let file = LaunchFile {
        entry: sessions[plan.entry].to_string(),
        formation: plan.formation.as_ref().map(|f| f.name.clone()),
        manifest: {
            let given = match &plan.formation {
                Some(f) => f.path.clone(),
                None => plan.members[plan.entry].manifest.path.clone(),
            };
            std::path::absolute(&given).unwrap_or(given)
        },
        workdir: workdir.to_path_buf(),
        started_at: kept
            .map(|k| k.started_at.clone())
            .unwrap_or_else(|| Millis::now().rfc3339()),
        members,
        stopped: false,
    };
    file.save().map_err(|e| {
        CliError::new(
            Code::Records,
            format!("cannot write the session's launch file: {e}"),
            "check that $MURMUR_HOME is writable",
        )
    })?;
    Ok(file)
}

/// A resumed formation's shared spend counter starts from what its members' stores say they
/// spent, so a `kill -9` never lifts the formation's ceiling.
pub fn reseed_spend(plan: &Plan, sessions: &[SessionId], dirs: &[PathBuf]) {
    let Some(f) = plan.spend_scope(&sessions[plan.entry]) else {
        return;
    };
    let mut total = capsule::gateway::ledger::Totals::default();
    for dir in dirs {
        if let Some(spent) = capsule::store::spent_in(dir) {
            total.add(capsule::gateway::ledger::Totals {
                tokens: spent.tokens,
                usd: spent.usd,
            });
        }
    }
    let _ = std::fs::remove_file(&f.counter);
    if let Some(dir) = f.counter.parent() {
        let _ = capsule::private::create_dir_under(&records::home(), dir);
    }
    match capsule::gateway::ledger::Counter::open(&f.counter) {
        Ok(counter) => {
            if let Err(e) = counter.add(total) {
                eprintln!("warning: the formation's spend so far could not be counted again: {e}");
            }
        }
        Err(e) => eprintln!("warning: the formation's spend counter could not be made: {e}"),
    }
}
