//! Starting a plan and seeing it through (DESIGN §3, §7): every listener bound before anything
//! is spawned (so every URL is known and `calls` may have cycles), tokens and wiring written,
//! every member started and waited for, the lines announced, the entry's answer relayed; then
//! the launch is supervised until the entry ends, a member dies, or Ctrl-C / SIGTERM stops it,
//! and it ends with nothing left running.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::{json, Value};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc::UnboundedReceiver;

use capsule::clock::Millis;
use capsule::ids::SessionId;
use capsule::manifest::OnMemberFailure;
use capsule::process::Containment;
use capsule::runtime::{CapsuleConfig, LaunchTask, READY_LINE};

use super::failure;
use super::plan::Plan;
use super::restart::{Decision, Restarts};
use super::wire;
use crate::client;
use crate::delegation::{Parent, Service};
use crate::error::{CliError, CliResult, Code};
use crate::launch;
use crate::records::{self, RunningCapsule};
use crate::tokens::{self, Minted};

/// How many unclaimed exits [`Exits`] keeps.
const SEEN_KEPT: usize = 1024;
/// The roster file in a formation member's session folder.
pub const ROSTER: &str = "formation.json";
/// How long the members have to become ready, all together.
const READY_WITHIN: Duration = Duration::from_secs(15);
/// SIGTERM to SIGKILL for a capsule being stopped.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// How long a stopping member has to give its StopSession account.
const STOP_SESSION_WITHIN: Duration = Duration::from_secs(5);

/// What the command line adds to a plan.
pub struct Options {
    pub task: Option<LaunchTask>,
    pub workdir: PathBuf,
    pub json: bool,
    pub containment: Option<Containment>,
}

/// One started member.
struct Member {
    name: String,
    pid: i32,
    url: String,
    session_id: String,
    records: PathBuf,
    stdout: CapsuleStdout,
    operator: Option<String>,
    record: RunningCapsule,
    alive: bool,
    /// Its restarts so far, by its `restart` policy.
    restarts: Restarts,
    /// What starting it again takes, for a member that may restart: its listener (kept open,
    /// so its port and its callers' wiring stay good across restarts), its config (same
    /// session, same token digests) and its delegation parent.
    respawn: Option<Respawn>,
}

struct Respawn {
    listener: TcpListener,
    config: CapsuleConfig,
    parent: Parent,
}

/// Launches `plan` and supervises it to its end; answers `mur run`'s exit status.
pub async fn run(plan: Plan, opts: Options) -> CliResult<i32> {
    // Taken before anything starts: a Ctrl-C or SIGTERM from here on stops the launch cleanly
    // instead of ending this process with its members' records behind it.
    let stops = Stops::take();
    let sessions: Vec<SessionId> = plan.members.iter().map(|_| SessionId::mint()).collect();
    let dirs = make_records(&plan, &opts.workdir, &sessions)?;
    write_rosters(&plan, &sessions, &dirs)?;
    let listeners = bind_all(&plan)?;
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
    let minted = wire::mint(&plan);
    let cleanup = Cleanup {
        sessions: sessions.iter().map(|s| s.to_string()).collect(),
    };
    let configs = match write_credentials(&plan, &opts, &sessions, &dirs, &urls, &minted) {
        Ok(c) => c,
        Err(e) => {
            cleanup.run();
            return Err(e);
        }
    };
    let exits = launch::start_reaper();
    let service = Service::new(opts.containment.clone());
    let spawned = spawn_all(
        &plan, &listeners, configs, &sessions, &dirs, &urls, &minted, &service,
    );
    let mut members = match spawned {
        Ok(m) => m,
        Err(e) => {
            launch::sweep();
            cleanup.run();
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
        cleanup.run();
        return Err(e);
    }
    let started_at = Millis::now().rfc3339();
    for m in &mut members {
        m.record.started_at = started_at.clone();
        if let Err(e) = m.record.save() {
            eprintln!(
                "warning: cannot write the running-capsule record of {}: {e}",
                m.name
            );
        }
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
    for m in &members {
        m.record.remove();
    }
    cleanup.run();
    Ok(code)
}

/// The session files a launch leaves in `run/` until it ends: tokens and wiring.
struct Cleanup {
    sessions: Vec<String>,
}

impl Cleanup {
    fn run(&self) {
        for s in &self.sessions {
            tokens::remove(s);
            wire::remove_wiring(s);
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

/// Each member's session folder, with the manifest it was launched from.
fn make_records(plan: &Plan, workdir: &Path, sessions: &[SessionId]) -> CliResult<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    for (m, session) in plan.members.iter().zip(sessions) {
        let dir = records::sessions_dir(workdir).join(session.as_str());
        capsule::private::create_dir_under(&records::home(), &dir)
            .and_then(|_| copy_manifest(&m.manifest.path, &dir.join("manifest.yaml")))
            .map_err(|e| records_error(&dir, e))?;
        dirs.push(dir);
    }
    Ok(dirs)
}

/// `formation.json` in each member's session folder: the formation, the member, and every
/// member's session, so that `mur trace show --formation` can find a launch's traces after it
/// ended.
fn write_rosters(plan: &Plan, sessions: &[SessionId], dirs: &[PathBuf]) -> CliResult<()> {
    let Some(f) = &plan.formation else {
        return Ok(());
    };
    let roster: serde_json::Map<String, Value> = plan
        .members
        .iter()
        .zip(sessions)
        .map(|(m, s)| (m.name.clone(), Value::from(s.as_str())))
        .collect();
    for (m, dir) in plan.members.iter().zip(dirs) {
        let record = json!({
            "formation": f.name, "version": f.version, "member": m.name,
            "entry": plan.members[plan.entry].name, "members": roster,
        });
        capsule::private::write(&dir.join(ROSTER), record.to_string().as_bytes())
            .map_err(|e| records_error(dir, e))?;
    }
    Ok(())
}

/// The launched manifest into the records, 0600 like every record (`fs::copy` would carry the
/// source's mode). At most the 1 MiB a manifest may be: a file grown since it was validated is
/// refused by the capsule's own load, and must not fill the records meanwhile.
pub(crate) fn copy_manifest(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::io::Read;
    let limit = capsule::manifest::limits::MAX_BYTES;
    let mut source = std::fs::File::open(from)?.take(limit);
    std::io::copy(&mut source, &mut capsule::private::open(to, false)?).map(|_| ())
}

/// Every member's listener, before anything starts. A taken pin names its member.
fn bind_all(plan: &Plan) -> CliResult<Vec<TcpListener>> {
    plan.members
        .iter()
        .map(|m| {
            launch::bind(m.port).map_err(|e| match plan.is_formation() {
                true => e.within(&format!("member {}", m.name)),
                false => e,
            })
        })
        .collect()
}

/// Token files, wiring files, and each member's capsule config.
fn write_credentials(
    plan: &Plan,
    opts: &Options,
    sessions: &[SessionId],
    dirs: &[PathBuf],
    urls: &[String],
    minted: &[Vec<Minted>],
) -> CliResult<Vec<CapsuleConfig>> {
    let credentials_error = |e: std::io::Error| {
        CliError::new(
            Code::Records,
            format!("cannot write the session's tokens: {e}"),
            "check that $MURMUR_HOME is writable",
        )
    };
    let mut configs = Vec::new();
    for (i, m) in plan.members.iter().enumerate() {
        let session = sessions[i].as_str();
        tokens::save(session, &minted[i]).map_err(credentials_error)?;
        let wiring = match wire::wiring(plan, i, urls, minted) {
            Some(w) => Some(wire::save_wiring(session, &w).map_err(credentials_error)?),
            None => None,
        };
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
    for (i, mut config) in configs.into_iter().enumerate() {
        let m = &plan.members[i];
        let (ours, theirs) = launch::control_pair()?;
        config.control = true;
        let spawned = launch::spawn_capsule(&listeners[i], &theirs, &config);
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
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                for started in &members {
                    launch::terminate_group(started.pid, Signal::SIGKILL);
                }
                return Err(e);
            }
        };
        let pid = child.id() as i32;
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
            started_at: String::new(),
            restarts: 0,
            last_exit: None,
        };
        members.push(Member {
            name: m.name.clone(),
            pid,
            url: urls[i].clone(),
            session_id: sessions[i].to_string(),
            records: dirs[i].clone(),
            stdout: read_stdout(&mut child),
            operator: operator_token(&minted[i]),
            record,
            alive: true,
            restarts,
            respawn,
        });
    }
    Ok(members)
}

pub(crate) fn operator_token(minted: &[Minted]) -> Option<String> {
    minted
        .iter()
        .find(|t| t.scopes.is_none())
        .map(|t| t.token.clone())
}

/// A member's stdout, read by a thread: its first line says it is ready; the rest (the launch
/// task's answer, on the entry) is relayed once the launch is announced, or drained.
pub(crate) struct CapsuleStdout {
    pub(crate) first_line: mpsc::Receiver<String>,
    /// `true`: relay to this process's stdout; `false`: drain.
    pub(crate) relay: mpsc::Sender<bool>,
}

pub(crate) fn read_stdout(child: &mut Child) -> CapsuleStdout {
    let (line_tx, first_line) = mpsc::channel();
    let (relay, go) = mpsc::channel::<bool>();
    if let Some(from) = child.stdout.take() {
        std::thread::spawn(move || {
            let mut reader = BufReader::new(from);
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let _ = line_tx.send(line.trim_end().to_owned());
            match go.recv() {
                Ok(true) => {
                    let _ = std::io::copy(&mut reader, &mut std::io::stdout());
                }
                _ => {
                    let _ = std::io::copy(&mut reader, &mut std::io::sink());
                }
            }
        });
    }
    CapsuleStdout { first_line, relay }
}

/// Exit statuses of this process's children, as the reaper collects them.
struct Exits {
    rx: UnboundedReceiver<(i32, i32)>,
    seen: Vec<(i32, i32)>,
    /// Sub-capsules' exits are theirs.
    children: Arc<Service>,
}

impl Exits {
    fn new(rx: UnboundedReceiver<(i32, i32)>, children: Arc<Service>) -> Exits {
        Exits {
            rx,
            seen: Vec::new(),
            children,
        }
    }

    /// Keeps an exit for a member, hands a sub-capsule's to the delegation service; answers
    /// whether it was kept.
    fn route(&mut self, pid: i32, code: i32) -> bool {
        if self.children.owns(pid) {
            self.children.exited(pid, code);
            return false;
        }
        true
    }

    fn drain(&mut self) {
        while let Ok((pid, code)) = self.rx.try_recv() {
            if self.route(pid, code) {
                // Orphans reaped here (this process is a subreaper) are exits too: keep only
                // the newest, so a launch that runs for weeks does not collect them all.
                if self.seen.len() >= SEEN_KEPT {
                    self.seen.remove(0);
                }
                self.seen.push((pid, code));
            }
        }
    }

    fn of(&mut self, pid: i32) -> Option<i32> {
        self.drain();
        self.seen.iter().find(|(p, _)| *p == pid).map(|(_, c)| *c)
    }

    /// The next exit of one of `pids` (others are a sweep's business).
    async fn next_of(&mut self, pids: &[i32]) -> Option<(i32, i32)> {
        if let Some(i) = self.seen.iter().position(|(p, _)| pids.contains(p)) {
            return Some(self.seen.remove(i));
        }
        loop {
            let (pid, code) = self.rx.recv().await?;
            if self.route(pid, code) && pids.contains(&pid) {
                return Some((pid, code));
            }
        }
    }
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

/// Ctrl-C and SIGTERM, as streams (`None` if the runtime could not listen for them).
struct Stops(Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>);

impl Stops {
    fn take() -> Stops {
        match (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) {
            (Ok(int), Ok(term)) => Stops(Some((int, term))),
            _ => Stops(None),
        }
    }
}

/// Waits for the launch to end: the entry ending on its own, a member dying (as its `restart`
/// policy, then `on_member_failure`, say), or Ctrl-C / SIGTERM. Answers the exit status of
/// `mur run`. A member due to restart waits out its backoff here, while everything else is
/// still watched.
async fn supervise(
    plan: &Plan,
    members: &mut [Member],
    exits: &mut Exits,
    stops: Stops,
    service: &Arc<Service>,
) -> i32 {
    let Stops(Some((mut int, mut term))) = stops else {
        stop_all(members, exits, None).await;
        return 1;
    };
    // Members waiting out their backoff: (index, when it starts again).
    let mut due: Vec<(usize, tokio::time::Instant)> = Vec::new();
    loop {
        let pids: Vec<i32> = members.iter().filter(|m| m.alive).map(|m| m.pid).collect();
        let next_due = due.iter().map(|(_, at)| *at).min();
        let ended = tokio::select! {
            ended = exits.next_of(&pids) => Some(ended),
            _ = async {
                match next_due {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => None,
            _ = int.recv() => Some(None),
            _ = term.recv() => Some(None),
        };
        let ended = match ended {
            // A backoff is over: that member starts again.
            None => {
                let now = tokio::time::Instant::now();
                let (ready, waiting): (Vec<_>, Vec<_>) =
                    due.drain(..).partition(|(_, at)| *at <= now);
                due = waiting;
                for (i, _) in ready {
                    respawn(&mut members[i], service);
                }
                continue;
            }
            Some(ended) => ended,
        };
        let Some((pid, code)) = ended else {
            stop_all(members, exits, Some(&mut int)).await;
            return 0;
        };
        let Some(i) = members.iter().position(|m| m.pid == pid) else {
            continue;
        };
        members[i].alive = false;
        if i == plan.entry {
            members[i].record.remove();
            // The launch's own end: the rest of the formation goes with it.
            stop_all(members, exits, Some(&mut int)).await;
            return code;
        }
        let Some(formation) = &plan.formation else {
            members[i].record.remove();
            return code;
        };
        let decision = members[i].restarts.on_exit(code, std::time::Instant::now());
        let m = &members[i];
        let (children, session) = (exits.children.clone(), m.session_id.clone());
        // Its sub-capsules go with it; their exits arrive while this loop goes on.
        tokio::spawn(async move { children.stop_children_of(&session).await });
        if let Decision::Restart { attempt, backoff } = decision {
            let failed =
                failure::record(&m.records, &m.session_id, &formation.name, &m.name, code).await;
            failure::restarted(
                &m.records,
                &m.session_id,
                capsule::trace::TraceEvent::MemberRestarted {
                    formation: formation.name.clone(),
                    member: m.name.clone(),
                    attempt,
                    backoff_ms: backoff.as_millis() as u64,
                    exit_status: code,
                },
            )
            .await;
            let rule = plan.members[i].restart;
            eprintln!(
                "mur: member {} (pid {pid}) exited with status {code}; {failed} of its tasks failed; restarting it in {:.1} s (restart {attempt} of {} within {} s)",
                m.name,
                backoff.as_secs_f64(),
                rule.max,
                rule.window.as_secs()
            );
            due.push((i, tokio::time::Instant::now() + backoff));
            continue;
        }
        members[i].record.remove();
        let m = &members[i];
        if code == 0 && decision == Decision::Final {
            // A member that ends cleanly (its lifecycle's after_task: exit) is no crash. No
            // member others call can (the formation's validation refuses it), so nothing waits.
            eprintln!("mur: member {} (pid {pid}) ended (status 0)", m.name);
            continue;
        }
        let failed =
            failure::record(&m.records, &m.session_id, &formation.name, &m.name, code).await;
        let then = match formation.on_member_failure {
            OnMemberFailure::Stop => "stopping the formation (on_member_failure: stop)",
            OnMemberFailure::Continue => "the formation goes on (on_member_failure: continue)",
        };
        let how = match decision {
            Decision::CapReached { restarts } => format!(
                "exited with status {code} after {restarts} restarts within {} s, its cap (max_restarts)",
                plan.members[i].restart.window.as_secs()
            ),
            _ => format!("exited unexpectedly with status {code}"),
        };
        eprintln!(
            "mur: member {} (pid {pid}) {how}; {failed} of its tasks failed; {then}",
            m.name
        );
        if formation.on_member_failure == OnMemberFailure::Stop {
            stop_all(members, exits, Some(&mut int)).await;
            return 1;
        }
    }
}

/// Starts member `m` again on its own listener (its port, and so its callers' wiring, stay
/// good: connections made meanwhile wait in the listener's backlog), with the same session and
/// tokens. A member that cannot be started again stays down, said on stderr.
fn respawn(m: &mut Member, service: &Arc<Service>) {
    let Some(again) = &m.respawn else {
        return;
    };
    let started = launch::control_pair().and_then(|(ours, theirs)| {
        let child = launch::spawn_capsule(&again.listener, &theirs, &again.config);
        drop(theirs);
        if child.is_ok() {
            service.serve(again.parent.clone(), ours);
        }
        child
    });
    let mut child = match started {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mur: member {} could not be started again: {e}", m.name);
            return;
        }
    };
    m.pid = child.id() as i32;
    m.alive = true;
    m.stdout = read_stdout(&mut child);
    // Only the entry's answer is relayed; a member's output is drained.
    let _ = m.stdout.relay.send(false);
    m.record.pid = m.pid as u32;
    m.record.restarts = m.restarts.total;
    m.record.last_exit = m.restarts.last_exit;
    m.record.started_at = Millis::now().rfc3339();
    if let Err(e) = m.record.save() {
        eprintln!(
            "warning: cannot write the running-capsule record of {}: {e}",
            m.name
        );
    }
}

/// Stops every live member cleanly: each session's account first (murmur.StopSession, while
/// the capsules can still give it), then SIGTERM, the grace, SIGKILL. A Ctrl-C during the grace
/// kills at once.
async fn stop_all(
    members: &mut [Member],
    exits: &mut Exits,
    int: Option<&mut tokio::signal::unix::Signal>,
) {
    let live: Vec<&Member> = members.iter().filter(|m| m.alive).collect();
    let mut accounts = tokio::task::JoinSet::new();
    for m in &live {
        let (url, token) = (m.url.clone(), m.operator.clone());
        accounts.spawn(async move {
            let door = client::DoorRef { url: &url, token };
            let _ = tokio::time::timeout(
                STOP_SESSION_WITHIN,
                client::rpc(&door, "murmur.StopSession", json!({})),
            )
            .await;
        });
    }
    while accounts.join_next().await.is_some() {}
    let pids: Vec<i32> = live.iter().map(|m| m.pid).collect();
    for &pid in &pids {
        launch::terminate_group(pid, Signal::SIGTERM);
    }
    let all_ended = async {
        let mut left = pids.clone();
        while !left.is_empty() {
            match exits.next_of(&left).await {
                Some((pid, _)) => left.retain(|p| *p != pid),
                None => return,
            }
        }
    };
    let killed = match int {
        Some(int) => tokio::select! {
            r = tokio::time::timeout(STOP_GRACE, all_ended) => r.is_err(),
            _ = int.recv() => true,
        },
        None => tokio::time::timeout(STOP_GRACE, all_ended).await.is_err(),
    };
    if killed {
        for &pid in &pids {
            launch::terminate_group(pid, Signal::SIGKILL);
        }
    }
    for m in members.iter_mut() {
        m.alive = false;
    }
}
