//! Starting a plan (DESIGN §3, §7): every listener bound before anything is spawned (so every
//! URL is known and `calls` may have cycles), tokens and wiring written, every member started
//! and waited for, the lines announced, the entry's answer relayed; then `supervise` sees the
//! launch through, and it ends here with nothing left running.

use std::collections::HashMap;
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::{json, Value};

use capsule::clock::Millis;
use capsule::ids::SessionId;
use capsule::process::Containment;
use capsule::runtime::{CapsuleConfig, LaunchTask, READY_LINE};
use capsule::wiring::Source;

use super::plan::Plan;
use super::restart::Restarts;
use super::resume::{self, LaunchFile};
use super::supervise::{supervise, Exits, Member, Respawn, Stops};
use super::wire;
use crate::delegation::{Parent, Service};
use crate::error::{CliError, CliResult, Code};
use crate::launch;
use crate::records::{self, RunningCapsule};
use crate::tokens::{self, Minted};

/// How long the members have to become ready, all together.
const READY_WITHIN: Duration = Duration::from_secs(15);

/// What the command line adds to a plan.
pub struct Options {
    pub task: Option<LaunchTask>,
    /// A launch brought back (`mur run --resume`): its sessions, ports and tokens.
    pub resume: Option<LaunchFile>,
    pub workdir: PathBuf,
    pub json: bool,
    pub containment: Option<Containment>,
}

/// Launches `plan` and supervises it to its end; answers `mur run`'s exit status.
pub async fn run(plan: Plan, opts: Options) -> CliResult<i32> {
    // Taken before anything starts: a Ctrl-C or SIGTERM from here on stops the launch cleanly
    // instead of ending this process with its members' records behind it.
    let stops = Stops::take();
    let (sessions, dirs) = match &opts.resume {
        Some(kept) => resume::kept_records(&plan, kept)?,
        None => {
            let sessions: Vec<SessionId> = plan.members.iter().map(|_| SessionId::mint()).collect();
            let dirs = make_records(&plan, &opts.workdir, &sessions)?;
            write_rosters(&plan, &sessions, &dirs)?;
            (sessions, dirs)
        }
    };
    let listeners = bind_all(&plan, opts.resume.as_ref())?;
    let urls: Vec<String> = listeners
        .iter()
        .map(|l| {
            format!(
                "http://localhost:{}",
                l.local_addr().map(|a| a.port()).unwrap_or(0)
            )
        })
        .collect();
    launch::become_subreaper();
    let mut minted = wire::mint(&plan);
    if let Some(kept) = &opts.resume {
        for (m, minted) in plan.members.iter().zip(minted.iter_mut()) {
            kept.keep_tokens(&m.name, minted);
        }
    }
    let kept = resume::keep_launch(
        &plan,
        &opts.workdir,
        opts.resume.as_ref(),
        &sessions,
        &dirs,
        &listeners,
        &minted,
    )?;
    let cleanup = Cleanup {
        sessions: sessions.iter().map(|s| s.to_string()).collect(),
        spend_counter: plan.spend_scope(&sessions[plan.entry]).map(|f| f.counter),
        // A launch that never started is nothing to resume; a resume that failed is kept as
        // it was, to be tried again.
        unstarted: opts.resume.is_none().then(|| kept.entry.clone()),
    };
    sweep_spend_counters();
    if opts.resume.is_some() {
        resume::reseed_spend(&plan, &sessions, &dirs);
    }
    let configs = match write_credentials(&plan, &opts, &sessions, &dirs, &urls, &minted) {
        Ok(c) => c,
        Err(e) => {
            cleanup.failed();
            return Err(e);
        }
    };
    let exits = launch::start_reaper();
    let service = Service::new(
        opts.containment.clone(),
        plan.spend_scope(&sessions[plan.entry]),
    );
    let spawned = spawn_all(
        &plan, &listeners, configs, &sessions, &dirs, &urls, &minted, &service,
    );
    let mut members = match spawned {
        Ok(m) => m,
        Err(e) => {
            launch::sweep();
            cleanup.failed();
            return Err(e);
        }
    };
    drop(listeners);
    let mut exits = Exits::new(exits, service.clone());
    if let Err(e) = wait_ready(&plan, &members, &mut exits).await {
        for m in &members {
            launch::terminate_group(m.pid, Signal::SIGKILL);
        }
        launch::sweep();
        cleanup.failed();
        return Err(e);
    }
    announce(&plan, &opts, &members);
    for (i, m) in members.iter().enumerate() {
        let _ = m.stdout.relay.send(i == plan.entry);
    }
    let code = supervise(&plan, &mut members, &mut exits, stops, &service).await;
    // Sub-capsules go cleanly too (their parents are gone, or going); their exits must still
    // be collected meanwhile.
    let children = service.stop_all();
    tokio::pin!(children);
    loop {
        tokio::select! {
            _ = &mut children => break,
            _ = exits.next_of(&[]) => {}
        }
    }
    launch::sweep();
    cleanup.run();
    resume::mark_stopped(&kept.entry);
    Ok(code)
}

/// The session files a launch leaves in `run/` until it ends: records, tokens and wiring.
struct Cleanup {
    sessions: Vec<String>,
    /// The kept launch to forget when the launch fails before it is up.
    unstarted: Option<String>,
    /// The formation's spend counter: its figures are in the ledger; the launch's own total
    /// goes with the launch.
    spend_counter: Option<PathBuf>,
}

impl Cleanup {
    /// The launch failed before it was up.
    fn failed(&self) {
        self.run();
        if let Some(entry) = &self.unstarted {
            resume::remove(entry);
        }
    }

    fn run(&self) {
        for s in &self.sessions {
            let _ = std::fs::remove_file(records::record_path(s));
            tokens::remove(s);
            wire::remove_wiring(s);
        }
        if let Some(counter) = &self.spend_counter {
            let _ = std::fs::remove_file(counter);
        }
    }
}

/// Removes the spend counters of formation launches that no longer run (a `kill -9` of their
/// `mur run` left them): each is named for its entry's session, whose running record is gone.
fn sweep_spend_counters() {
    let dir = capsule::gateway::ledger::folder(&records::home()).join("formations");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(session) = name.to_str().and_then(|n| n.strip_suffix(".total")) else {
            continue;
        };
        if !records::record_path(session).exists() {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

fn records_error(dir: &Path, e: std::io::Error) -> CliError {
    CliError::new(
        Code::Records,
        format!("cannot write the session records in {}: {e}", dir.display()),
        "check that $MURMUR_HOME is writable",
    )
}

/// Each member's session folder, with the manifest it was launched from. Members launched
/// from one manifest file share one copy, linked into each folder ([`records::share`]).
fn make_records(plan: &Plan, workdir: &Path, sessions: &[SessionId]) -> CliResult<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    let mut copies: HashMap<&Path, PathBuf> = HashMap::new();
    for (m, session) in plan.members.iter().zip(sessions) {
        let dir = records::sessions_dir(workdir).join(session.as_str());
        let to = dir.join("manifest.yaml");
        capsule::private::create_dir_under(&records::home(), &dir)
            .and_then(|_| match copies.get(m.manifest.path.as_path()) {
                Some(first) => records::share(first, &to),
                None => records::copy_manifest(&m.manifest.path, &to),
            })
            .map_err(|e| records_error(&dir, e))?;
        copies.entry(m.manifest.path.as_path()).or_insert(to);
        dirs.push(dir);
    }
    Ok(dirs)
}

/// `formation.json` in each member's session folder: the formation, its entry, every member's
/// session (so that `mur trace show --formation` can find a launch's traces after it ended)
/// and whom each member calls (which `mur top` draws). It is the same for every member: written
/// once, into the first member's folder, and linked into the others' ([`records::share`]).
fn write_rosters(plan: &Plan, sessions: &[SessionId], dirs: &[PathBuf]) -> CliResult<()> {
    let Some(f) = &plan.formation else {
        return Ok(());
    };
    let members: serde_json::Map<String, Value> = plan
        .members
        .iter()
        .zip(sessions)
        .map(|(m, s)| (m.name.clone(), Value::from(s.as_str())))
        .collect();
    let calls: serde_json::Map<String, Value> = plan
        .members
        .iter()
        .filter(|m| !m.calls.is_empty())
        .map(|m| (m.name.clone(), Value::from(m.calls.clone())))
        .collect();
    let mut roster = json!({
        "formation": f.name,
        "version": f.version,
        "entry": plan.members[plan.entry].name,
        "members": members,
        "calls": calls,
    });
    // What `mur top` holds the formation's total against.
    if f.spend.max_tokens.is_some() || f.spend.max_usd.is_some() {
        roster["spend"] = json!({
            "max_tokens": f.spend.max_tokens,
            "max_usd": f.spend.max_usd.map(|u| u.dollars()),
        });
    }
    let Some((first, rest)) = dirs.split_first() else {
        return Ok(());
    };
    let written = first.join(records::ROSTER);
    capsule::private::write(&written, roster.to_string().as_bytes())
        .map_err(|e| records_error(first, e))?;
    for dir in rest {
        records::share(&written, &dir.join(records::ROSTER)).map_err(|e| records_error(dir, e))?;
    }
    Ok(())
}

/// Every member's listener, before anything starts. A taken pin names its member; a resumed
/// launch takes each member's port of before, which its callers and clients hold.
fn bind_all(plan: &Plan, kept: Option<&LaunchFile>) -> CliResult<Vec<TcpListener>> {
    plan.members
        .iter()
        .map(|m| {
            let before = kept.and_then(|k| k.member(&m.name)).map(|k| k.port);
            let bound = launch::bind(before.or(m.port)).map_err(|e| match before {
                Some(port) => CliError::new(
                    Code::PortInUse,
                    format!("port {port}, where the session {} answered before, is already in use", kept.map(|k| k.entry.as_str()).unwrap_or_default()),
                    format!("stop whatever listens on {port} (`ss -ltnp 'sport = :{port}'` shows it) and resume again: a resumed launch keeps its URLs, which its callers and clients hold"),
                ),
                None => e,
            });
            bound.map_err(|e| match plan.is_formation() {
                true => e.within(&format!("member {}", m.name)),
                false => e,
            })
        })
        .collect()
}

fn credentials_error(what: &str, e: std::io::Error) -> CliError {
    CliError::new(
        Code::Records,
        format!("cannot write the session's {what}: {e}"),
        "check that $MURMUR_HOME is writable",
    )
}

/// Wiring files, and each member's capsule config.
fn write_credentials(
    plan: &Plan,
    opts: &Options,
    sessions: &[SessionId],
    dirs: &[PathBuf],
    urls: &[String],
    minted: &[Vec<Minted>],
) -> CliResult<Vec<CapsuleConfig>> {
    let mut configs = Vec::new();
    let protect = plan.files();
    let formation_spend = plan.spend_scope(&sessions[plan.entry]);
    for (i, m) in plan.members.iter().enumerate() {
        let session = sessions[i].as_str();
        let wiring = wire::wiring(plan, i, urls, minted)
            .map(|w| Source::of(w, |w| wire::save_wiring(session, w)))
            .transpose()
            .map_err(|e| credentials_error("wiring", e))?;
        configs.push(CapsuleConfig {
            manifest: m.manifest.path.clone(),
            session_id: session.to_owned(),
            records_dir: dirs[i].clone(),
            workdir: opts.workdir.clone(),
            url: urls[i].clone(),
            mur_exe: std::env::current_exe().unwrap_or_default(),
            launch: (i == plan.entry).then(|| opts.task.clone()).flatten(),
            tokens: tokens::digests(&minted[i]),
            containment: opts.containment.clone(),
            run_dir: Some(records::run_dir()),
            wiring,
            control: false,
            completion: None,
            completion_token: None,
            harness_url: None,
            protect: protect.clone(),
            storeless: false,
            spend_home: Some(records::home()),
            formation_spend: formation_spend.clone(),
        });
    }
    Ok(configs)
}

#[allow(clippy::too_many_arguments)]
fn spawn_all(
    plan: &Plan,
    listeners: &[TcpListener],
    configs: Vec<CapsuleConfig>,
    sessions: &[SessionId],
    dirs: &[PathBuf],
    urls: &[String],
    minted: &[Vec<Minted>],
    service: &Arc<Service>,
) -> CliResult<Vec<Member>> {
    let mut members: Vec<Member> = Vec::new();
    let zygote = launch::zygote_for(configs.len());
    for (i, mut config) in configs.into_iter().enumerate() {
        let m = &plan.members[i];
        let (ours, theirs) = launch::control_pair()?;
        config.control = true;
        let spawned = launch::spawn_capsule(&listeners[i], &theirs, &config, zygote.as_ref());
        drop(theirs);
        let parent = Parent {
            session_id: sessions[i].to_string(),
            url: urls[i].clone(),
            manifest: m.manifest.clone(),
            records: dirs[i].clone(),
        };
        let restarts = Restarts::new(m.restart);
        let respawn = match (restarts.may_restart(), listeners[i].try_clone()) {
            (true, Ok(listener)) => Some(Respawn {
                listener,
                config: config.clone(),
                parent: parent.clone(),
            }),
            _ => None,
        };
        if spawned.is_ok() {
            service.serve(parent, ours);
        }
        let child = match spawned {
            Ok(c) => c,
            Err(e) => {
                for started in &members {
                    launch::terminate_group(started.pid, Signal::SIGKILL);
                }
                return Err(e);
            }
        };
        let pid = child.pid;
        // Its token file and record are written while it starts (the supervisor's files and
        // the capsules' starts share the machine's cores): `mur ps` may meanwhile show its
        // door as not yet answering, until `mur run` announces the launch.
        let record = RunningCapsule {
            pid: pid as u32,
            supervisor_pid: std::process::id(),
            url: urls[i].clone(),
            name: m.manifest.name.clone(),
            version: m.manifest.version.clone(),
            session_id: sessions[i].to_string(),
            records: dirs[i].clone(),
            formation: plan.formation.as_ref().map(|f| f.name.clone()),
            member: plan.is_formation().then(|| m.name.clone()),
            parent: None,
            delegation_id: None,
            started_at: Millis::now().rfc3339(),
            restarts: 0,
            last_exit: None,
        };
        let saved = tokens::save(sessions[i].as_str(), &minted[i]);
        if let Err(e) = record.save() {
            eprintln!(
                "warning: cannot write the running-capsule record of {}: {e}",
                m.name
            );
        }
        members.push(Member {
            name: m.name.clone(),
            pid,
            url: urls[i].clone(),
            session_id: sessions[i].to_string(),
            records: dirs[i].clone(),
            stdout: launch::read_stdout(child.stdout),
            operator: tokens::operator_of(&minted[i]),
            record,
            alive: true,
            restarts,
            respawn,
        });
        if let Err(e) = saved {
            for started in &members {
                launch::terminate_group(started.pid, Signal::SIGKILL);
            }
            return Err(credentials_error("tokens", e));
        }
    }
    Ok(members)
}

/// Waits (bounded) for every member's ready line. Listeners were bound before anything
/// started, so once a member serves its URL is good, however fast its task ends.
async fn wait_ready(plan: &Plan, members: &[Member], exits: &mut Exits) -> CliResult<()> {
    let deadline = tokio::time::Instant::now() + READY_WITHIN;
    let mut ready = vec![false; members.len()];
    let who = |m: &Member| match plan.is_formation() {
        true => format!("member {}", m.name),
        false => "the capsule".to_owned(),
    };
    while ready.iter().any(|r| !r) {
        for (i, m) in members.iter().enumerate() {
            if ready[i] {
                continue;
            }
            match m.stdout.first_line.try_recv() {
                Ok(line) if line == READY_LINE => ready[i] = true,
                Ok(line) => {
                    return Err(CliError::new(
                        Code::CapsuleDidNotStart,
                        format!("{} said {line:?} instead of getting ready", who(m)),
                        "report this bug",
                    ))
                }
                Err(mpsc::TryRecvError::Disconnected) => {
                    let code = exit_code_soon(exits, m.pid).await;
                    return Err(CliError::new(
                        Code::CapsuleDidNotStart,
                        format!(
                            "{} exited with status {code} before its door was ready",
                            who(m)
                        ),
                        "read the capsule's error above",
                    ));
                }
                Err(mpsc::TryRecvError::Empty) => {}
            }
        }
        if tokio::time::Instant::now() > deadline {
            let late: Vec<String> = members
                .iter()
                .zip(&ready)
                .filter(|(_, r)| !**r)
                .map(|(m, _)| who(m))
                .collect();
            return Err(CliError::new(
                Code::CapsuleDidNotStart,
                format!(
                    "{} not ready within {}s",
                    late.join(", "),
                    READY_WITHIN.as_secs()
                ),
                "check the machine's load and the capsule's output",
            ));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

async fn exit_code_soon(exits: &mut Exits, pid: i32) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    loop {
        if let Some(code) = exits.of(pid) {
            return code.to_string();
        }
        if tokio::time::Instant::now() > deadline {
            return "unknown".to_owned();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// DESIGN §3's lines: one per member for a formation, then the entry's two; or one JSON object.
fn announce(plan: &Plan, opts: &Options, members: &[Member]) {
    let entry = &members[plan.entry];
    let manifest = &plan.members[plan.entry].manifest;
    let port = |m: &Member| m.url.rsplit(':').next().unwrap_or("").to_owned();
    let mut out = std::io::stdout().lock();
    if opts.json {
        let mut v = json!({
            "url": entry.url, "pid": entry.pid, "session_id": entry.session_id,
            "name": manifest.name, "version": manifest.version, "workdir": opts.workdir,
        });
        if let Some(f) = &plan.formation {
            v["formation"] = json!({"name": f.name, "version": f.version, "entry": entry.name});
            v["members"] = Value::Array(
                members
                    .iter()
                    .zip(&plan.members)
                    .map(|(m, p)| {
                        json!({
                            "member": m.name, "url": m.url, "pid": m.pid,
                            "session_id": m.session_id, "name": p.manifest.name,
                            "version": p.manifest.version,
                        })
                    })
                    .collect(),
            );
        }
        let _ = writeln!(out, "{v}");
    } else {
        if plan.is_formation() {
            for m in members {
                let _ = writeln!(
                    out,
                    "member {}: url localhost:{} session {}",
                    m.name,
                    port(m),
                    m.session_id
                );
            }
        }
        let _ = writeln!(out, "murmur: url localhost:{}", port(entry));
        let _ = writeln!(out, "session: {}", entry.session_id);
    }
    let _ = out.flush();
}
