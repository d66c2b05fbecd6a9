//! `$MURMUR_HOME` (default `~/.murmur`): the records folder of every session, the
//! running-capsule records under `run/`, and session addresses (`@N`, a 4+ character suffix,
//! a full id, a path to a trace.jsonl). Everything written here is private: folders 0700, files
//! 0600 (`capsule::private`).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{CliError, CliResult, Code};

/// `$MURMUR_HOME`, made absolute against the folder `mur` runs in: every path murmur hands
/// on (a capsule's records, the folder a jail hides) then means the same in every process,
/// whatever folder that process works in. Found once ([`settle_home`] says why it cannot be).
pub fn home() -> PathBuf {
    located().clone().unwrap_or_default()
}

/// The home, or why there is none.
fn located() -> &'static Result<PathBuf, String> {
    static HOME: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    HOME.get_or_init(locate)
}

/// `$MURMUR_HOME`; else `.murmur` in `$HOME`; else in the user's home as the password database
/// names it. Never a shared folder such as `/tmp`: records hold a user's tasks and answers.
fn locate() -> Result<PathBuf, String> {
    let set = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(h) = set("MURMUR_HOME") {
        return Ok(std::path::absolute(&h).unwrap_or(h));
    }
    let user = set("HOME").or_else(|| {
        nix::unistd::User::from_uid(nix::unistd::getuid())
            .ok()
            .flatten()
            .map(|u| u.dir)
            .filter(|d| d.is_absolute())
    });
    user.map(|h| h.join(".murmur")).ok_or_else(|| {
        "neither MURMUR_HOME nor HOME is set, and the password database names no home for this user"
            .to_owned()
    })
}

/// Every command that reads or writes records calls this first: a home that cannot be found is
/// a clear error, never a guess.
pub fn settle_home() -> CliResult<()> {
    match located() {
        Ok(_) => Ok(()),
        Err(why) => Err(CliError::new(
            Code::Records,
            format!("murmur has nowhere to keep its records: {why}"),
            "set MURMUR_HOME to a folder of your own, e.g. MURMUR_HOME=$PWD/.murmur",
        )),
    }
}

/// `records/<absolute workdir without leading slash>/`: every session launched in `workdir`.
pub fn sessions_dir(workdir: &Path) -> PathBuf {
    let rel = workdir.strip_prefix("/").unwrap_or(workdir);
    home().join("records").join(rel)
}

pub fn run_dir() -> PathBuf {
    home().join("run")
}

/// `run/<session_id>.tokens`: a running session's door tokens (0600), beside its record.
pub fn tokens_path(session_id: &str) -> PathBuf {
    run_dir().join(format!("{session_id}.tokens"))
}

/// One running capsule, as `run/<session_id>.json` records it (mode 0600). No token, ever.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct RunningCapsule {
    pub pid: u32,
    /// The `mur run` that launched it; `mur stop` signals this one so the launch ends cleanly.
    pub supervisor_pid: u32,
    pub url: String,
    pub name: String,
    pub version: String,
    pub session_id: String,
    pub records: PathBuf,
    pub formation: Option<String>,
    pub member: Option<String>,
    /// A sub-capsule's parent session and the delegation that started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegation_id: Option<String>,
    pub started_at: String,
    /// How many times its formation restarted it, and how it last ended.
    #[serde(default)]
    pub restarts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_exit: Option<i32>,
}

/// Writes a file readable by its owner only (0600, in a 0700 folder), whole or not at all:
/// through [`capsule::private::write`], which writes a fresh file of its own beside the name
/// (a random name, `O_EXCL | O_NOFOLLOW`: nothing planted there in advance, a hard link
/// included, is written through) and renames it over the name, so a reader never sees half a
/// record.
///
/// Not flushed to the disk (no fsync): every file written here (the running-capsule records,
/// token and wiring files under `run/`) lives only as long as the launch that wrote it, which a
/// crash of the machine ends too; readers only need the rename's all-or-nothing. An fsync per
/// file cost a formation of 500 members three disk writes each before it could start.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        capsule::private::create_dir_under(&home(), dir)?;
    }
    capsule::private::write(path, bytes)
}

/// `to`, a new record with the contents of `from`, an existing one that is never written
/// again: a hard link where the file system allows it, else a copy. A launch creates its
/// members' records one after another, and on some file systems (ext4 without a journal) each
/// new file costs more the more were created and deleted nearby, where a link creates none.
pub fn share(from: &Path, to: &Path) -> std::io::Result<()> {
    match fs::hard_link(from, to) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(e),
        Err(_) => {
            let mut source = fs::File::open(from)?;
            std::io::copy(&mut source, &mut capsule::private::open(to, false)?).map(|_| ())
        }
    }
}

/// `run/<session_id>.json`: a running session's record.
pub fn record_path(session_id: &str) -> PathBuf {
    run_dir().join(format!("{session_id}.json"))
}

impl RunningCapsule {
    pub fn path(&self) -> PathBuf {
        record_path(&self.session_id)
    }

    pub fn save(&self) -> std::io::Result<()> {
        let json = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        write_private(&self.path(), &json)
    }

    pub fn remove(&self) {
        let _ = fs::remove_file(self.path());
    }

    /// The capsule process exists and has not ended (a zombie has ended: only its exit status
    /// waits for a parent that may never collect it).
    pub fn is_alive(&self) -> bool {
        process_running(self.pid)
    }
}

/// True while `pid` exists and is not a zombie.
pub fn process_running(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rfind(')')
                .map(|i| !stat[i + 1..].trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// Running capsules, newest first, with records of vanished processes pruned — but only once
/// their launch has ended too: a member its formation is about to restart is not listed, and
/// keeps what its restart needs.
pub fn running() -> Vec<RunningCapsule> {
    let mut found: Vec<RunningCapsule> = Vec::new();
    let Ok(dir) = fs::read_dir(run_dir()) else {
        return found;
    };
    for entry in dir.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let Ok(text) = fs::read_to_string(&path) else {
            continue;
        };
        let Ok(rec) = serde_json::from_str::<RunningCapsule>(&text) else {
            continue;
        };
        if rec.is_alive() {
            found.push(rec);
        } else if rec.supervisor_pid != 0
            && rec.supervisor_pid != std::process::id()
            && process_running(rec.supervisor_pid)
        {
            // Its launch is still running: a formation member between a crash and its
            // restart keeps its record, tokens and wiring, which the restart reads again.
            continue;
        } else {
            // A launch that was killed outright left its record and tokens behind.
            let _ = fs::remove_file(tokens_path(&rec.session_id));
            for kind in ["wiring", "completion"] {
                let _ = fs::remove_file(run_dir().join(format!("{}.{kind}", rec.session_id)));
            }
            let _ = fs::remove_file(&path);
        }
    }
    // Session ids are UUIDv7: they sort by start time.
    found.sort_by(|a, b| b.session_id.cmp(&a.session_id));
    found
}

/// Picks one of `ids` (newest first) by a session address.
pub fn resolve<'a>(address: &str, ids: &'a [String], among: &str) -> CliResult<&'a String> {
    if let Some(n) = address.strip_prefix('@') {
        let n: usize = n.parse().ok().filter(|n| *n >= 1).ok_or_else(|| {
            CliError::new(
                Code::NoSuchSession,
                format!("{address} is not a session address"),
                "@N counts back from the newest session: @1 is the newest",
            )
        })?;
        return ids.get(n - 1).ok_or_else(|| {
            CliError::new(
                Code::NoSuchSession,
                format!("there is no {address}: {} {among}", ids.len()),
                "run `mur ps` to see the running capsules",
            )
        });
    }
    if let Some(exact) = ids.iter().find(|id| *id == address) {
        return Ok(exact);
    }
    if address.len() < 4 {
        return Err(CliError::new(
            Code::NoSuchSession,
            format!("'{address}' is too short to name a session"),
            "give the last 4 or more characters of a session id, a full id, or @N",
        ));
    }
    let matches: Vec<&String> = ids.iter().filter(|id| id.ends_with(address)).collect();
    match matches.as_slice() {
        [one] => Ok(one),
        [] => Err(CliError::new(
            Code::NoSuchSession,
            format!(
                "no session ends with '{address}' among {} {among}",
                ids.len()
            ),
            "run `mur ps` (running capsules) or look under $MURMUR_HOME/records",
        )),
        many => Err(CliError::new(
            Code::AmbiguousSession,
            format!(
                "'{address}' matches {} sessions: {}",
                many.len(),
                many.iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "give more characters of the session id",
        )),
    }
}

/// The running capsule an address names (`@1` when none is given).
pub fn resolve_running(address: Option<&str>) -> CliResult<RunningCapsule> {
    let all = running();
    let ids: Vec<String> = all.iter().map(|r| r.session_id.clone()).collect();
    let id = resolve(address.unwrap_or("@1"), &ids, "running capsules")?;
    all.into_iter()
        .find(|r| &r.session_id == id)
        .ok_or_else(|| {
            CliError::new(
                Code::NoSuchSession,
                "the session just ended",
                "run `mur ps`",
            )
        })
}

/// The running capsules `mur run` launched together with `rec` — the members of its formation,
/// itself included — in the formation's roster order (the order `mur run` announced them). A
/// lone capsule is a launch of one.
pub fn launch_of(rec: &RunningCapsule, all: &[RunningCapsule]) -> Vec<RunningCapsule> {
    if rec.formation.is_none() {
        return vec![rec.clone()];
    }
    let mut members: Vec<RunningCapsule> = all
        .iter()
        .filter(|r| same_launch(r, rec))
        .cloned()
        .collect();
    if !members.iter().any(|r| r.session_id == rec.session_id) {
        members.push(rec.clone());
    }
    let order = roster(&rec.records)
        .ok()
        .flatten()
        .map(|r| r.sessions())
        .unwrap_or_default();
    members.sort_by_key(|r| roster_rank(&order, &r.session_id));
    members
}

/// Two records are one launch's when they name the same formation and the same `mur run`.
pub fn same_launch(a: &RunningCapsule, b: &RunningCapsule) -> bool {
    a.formation.is_some() && a.formation == b.formation && a.supervisor_pid == b.supervisor_pid
}

/// Where a session comes in a roster: its place, then (for a session the roster does not name)
/// after every named one, by session id, which is launch order (UUIDv7).
pub fn roster_rank(order: &[String], session_id: &str) -> (usize, String) {
    let at = order
        .iter()
        .position(|s| s == session_id)
        .unwrap_or(order.len());
    (at, session_id.to_owned())
}

/// A formation member's `formation.json` (written by `mur run`, one file linked into every
/// member's session folder): the formation, its entry, every member's session in roster order,
/// and whom each member calls.
#[derive(Deserialize, Debug, Clone)]
pub struct Roster {
    pub formation: String,
    pub version: String,
    pub entry: String,
    /// Member name → session id, in the order the formation lists its members.
    pub members: serde_json::Map<String, serde_json::Value>,
    /// Member name → the members it may call; a member that calls nobody is absent. Absent
    /// from rosters written before `mur top`; a list (the file's own member's) in the few
    /// written while each member had a file of its own, which names nobody here.
    #[serde(default, deserialize_with = "calls_by_member")]
    calls: BTreeMap<String, Vec<String>>,
    /// The formation's spend ceilings on all its members together, when its file sets any.
    #[serde(default)]
    pub spend: Option<RosterSpend>,
}

/// A formation's `spend.max_tokens` and `spend.max_usd`, as its roster carries them.
#[derive(Deserialize, Debug, Clone, Copy, Default, PartialEq)]
pub struct RosterSpend {
    pub max_tokens: Option<u64>,
    pub max_usd: Option<f64>,
}

fn calls_by_member<'de, D>(d: D) -> Result<BTreeMap<String, Vec<String>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Calls {
        ByMember(BTreeMap<String, Vec<String>>),
        Other(serde::de::IgnoredAny),
    }
    Ok(match Calls::deserialize(d)? {
        Calls::ByMember(calls) => calls,
        Calls::Other(_) => BTreeMap::new(),
    })
}

impl Roster {
    /// The members `member` may call.
    pub fn calls_of(&self, member: &str) -> Vec<String> {
        self.calls.get(member).cloned().unwrap_or_default()
    }

    /// (member, session id) in roster order.
    pub fn members(&self) -> Vec<(String, String)> {
        self.members
            .iter()
            .map(|(name, s)| (name.clone(), s.as_str().unwrap_or_default().to_owned()))
            .collect()
    }

    /// Every member's session id, in roster order.
    pub fn sessions(&self) -> Vec<String> {
        self.members().into_iter().map(|(_, s)| s).collect()
    }
}

/// The roster file in a formation member's session folder (the launch writes it).
pub const ROSTER: &str = "formation.json";

/// The roster in a session folder: `Ok(None)` when the session is not a formation member (it
/// has no `formation.json`), `Err` with the reason when the file is there but unreadable.
pub fn roster(session_dir: &Path) -> Result<Option<Roster>, String> {
    let path = session_dir.join(ROSTER);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| format!("{} is not a formation roster: {e}", path.display()))
}

/// The recorded sessions of `workdir`, newest first, as (session id, folder).
pub fn recorded(workdir: &Path) -> Vec<(String, PathBuf)> {
    let mut found = Vec::new();
    if let Ok(dir) = fs::read_dir(sessions_dir(workdir)) {
        for entry in dir.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("ses_") && entry.path().join("trace.jsonl").exists() {
                found.push((name, entry.path()));
            }
        }
    }
    found.sort_by(|a, b| b.0.cmp(&a.0));
    found
}

/// The launched manifest into the records, 0600 like every record (`fs::copy` would carry the
/// source's mode). At most the 1 MiB a manifest may be: a file grown since it was validated is
/// refused by the capsule's own load, and must not fill the records meanwhile.
pub fn copy_manifest(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::io::Read;
    let limit = capsule::manifest::limits::MAX_BYTES;
    let mut source = std::fs::File::open(from)?.take(limit);
    std::io::copy(&mut source, &mut capsule::private::open(to, false)?).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> Vec<String> {
        vec![
            "ses_0000aaaa34af".into(),
            "ses_0000bbbb3e4b".into(),
            "ses_0000cccc3e4b".into(),
        ]
    }

    #[test]
    fn addresses() {
        let ids = ids();
        assert_eq!(resolve("@1", &ids, "x").unwrap(), &ids[0]);
        assert_eq!(resolve("@2", &ids, "x").unwrap(), &ids[1]);
        assert_eq!(resolve("34af", &ids, "x").unwrap(), &ids[0]);
        assert_eq!(resolve("ses_0000bbbb3e4b", &ids, "x").unwrap(), &ids[1]);
        assert!(resolve("@4", &ids, "x").is_err());
        assert!(resolve("af", &ids, "x").is_err());
        let amb = resolve("3e4b", &ids, "x").unwrap_err().to_string();
        assert!(
            amb.contains("E-CLI-002")
                && amb.contains("ses_0000bbbb3e4b")
                && amb.contains("ses_0000cccc3e4b"),
            "{amb}"
        );
    }

    #[test]
    fn a_roster_names_whom_each_member_calls_and_reads_older_forms() {
        let shared = r#"{"formation":"f","version":"1","entry":"lead",
            "members":{"lead":"ses_a","w":"ses_b"},"calls":{"lead":["w"]}}"#;
        let roster: Roster = serde_json::from_str(shared).unwrap();
        assert_eq!(roster.calls_of("lead"), ["w"]);
        assert!(roster.calls_of("w").is_empty());
        assert_eq!(roster.sessions(), ["ses_a", "ses_b"]);
        // Written while each member had a file of its own: its own list, which names nobody.
        let own = shared.replace(r#"{"lead":["w"]}"#, r#"["w"]"#);
        let roster: Roster = serde_json::from_str(&own).unwrap();
        assert!(roster.calls_of("lead").is_empty());
        // Written before `mur top`: no calls at all.
        let none = shared.replace(r#","calls":{"lead":["w"]}"#, "");
        let roster: Roster = serde_json::from_str(&none).unwrap();
        assert!(roster.calls_of("lead").is_empty());
    }

    #[test]
    fn a_hard_link_planted_at_the_old_tmp_name_is_not_written_through() {
        let dir = std::env::temp_dir().join(format!("murmur-tmp-link-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let victim = dir.join("victim");
        fs::write(&victim, "theirs").unwrap();
        let record = dir.join("ses_x.json");
        // `write_private` once wrote `<name>.tmp` with a plain open: truncated through a link.
        fs::hard_link(&victim, dir.join("ses_x.json.tmp")).unwrap();
        write_private(&record, b"mine").unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "theirs");
        assert_eq!(
            fs::read_to_string(dir.join("ses_x.json.tmp")).unwrap(),
            "theirs"
        );
        assert_eq!(fs::read_to_string(&record).unwrap(), "mine");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_shared_record_is_linked_and_never_written_over() {
        let dir = std::env::temp_dir().join(format!("murmur-share-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let (from, to) = (dir.join("a.json"), dir.join("b.json"));
        fs::write(&from, "roster").unwrap();
        share(&from, &to).unwrap();
        assert_eq!(fs::read_to_string(&to).unwrap(), "roster");
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            fs::metadata(&from).unwrap().ino(),
            fs::metadata(&to).unwrap().ino()
        );
        let taken = dir.join("c.json");
        fs::write(&taken, "mine").unwrap();
        let refused = share(&from, &taken).unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read_to_string(&taken).unwrap(), "mine");
        fs::remove_dir_all(&dir).unwrap();
    }
}
