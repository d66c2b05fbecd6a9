//! One capsule process from start to end: load the manifest, open the trace, take the
//! listener the supervisor bound, serve the door, run the worker, and shut down cleanly on
//! SIGTERM or after the last task under `after_task: exit`.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{signal, Signal, SignalKind};

mod config;

pub use config::{CapsuleConfig, FormationSpend, LaunchTask, CONFIG_ENV};

use crate::agent;
use crate::auth::TokenTable;
use crate::delegation::protocol::CompletionTarget;
use crate::door::Door;
use crate::harness::GRACE;
use crate::ids::SessionId;
use crate::manifest::{self, TaskAcceptance};
use crate::process::{self, Containment};
use crate::session::Session;
use crate::stream::EventLog;
use crate::tasks::{Admission, Owner, Registry, TaskInput, TaskState, Viewer};
use crate::trace::{Origin, Trace, TraceEvent};

/// The spend scopes of this capsule (`gateway::spend`).
fn spend_of(
    config: &CapsuleConfig,
    manifest: &manifest::Manifest,
    wiring: Option<&crate::wiring::Wiring>,
) -> Result<crate::gateway::Spend, String> {
    use crate::gateway::{ledger, DailyCeiling, Shared, Spend, Who};
    let formation = match &config.formation_spend {
        Some(f) => Some(Shared {
            name: f.name.clone(),
            policy: f.policy.clone(),
            counter: ledger::Counter::open(&f.counter)
                .map_err(|e| format!("cannot open the formation's spend counter: {e}"))?,
        }),
        None => None,
    };
    let daily_ceiling = DailyCeiling::from_env()?;
    let daily = config
        .spend_home
        .as_ref()
        .map(|home| ledger::Daily::new(ledger::folder(home)));
    let who = Who {
        formation: wiring
            .map(|w| w.formation.clone())
            .or_else(|| config.formation_spend.as_ref().map(|f| f.name.clone())),
        member: wiring.map(|w| w.member.clone()),
        capsule: manifest.name.clone(),
        session_id: config.session_id.clone(),
    };
    Ok(Spend::new(
        manifest.spend.clone(),
        formation,
        daily,
        daily_ceiling,
        who,
    ))
}

/// The model gateway of a process capsule whose driver routes its CLI through one, its
/// listener bound on loopback; the driver is pointed at it.
fn gateway_of(
    worker: &mut Option<agent::Worker>,
) -> Result<Option<(Arc<crate::gateway::Gateway>, std::net::TcpListener)>, String> {
    let Some(agent::Worker::Harness(driver, _)) = worker else {
        return Ok(None);
    };
    let Some(route) = driver.preset.route.clone() else {
        return Ok(None);
    };
    let endpoint = crate::inference::Endpoint::parse(&route.endpoint, None).map_err(|e| e.0)?;
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
        .map_err(|e| format!("cannot open the model gateway's port on 127.0.0.1: {e}"))?;
    let port = listener
        .local_addr()
        .map_err(|e| format!("the model gateway's port: {e}"))?
        .port();
    let gateway = Arc::new(crate::gateway::Gateway::new(
        crate::gateway::Upstream {
            endpoint,
            api: route.api,
            key: route.key.clone(),
        },
        port,
    ));
    driver.through_gateway(&gateway.url());
    Ok(Some((gateway, listener)))
}

/// The completion target with its token, read from its file.
fn completion_target(config: &CapsuleConfig) -> Result<Option<CompletionTarget>, String> {
    let Some(mut target) = config.completion.clone() else {
        return Ok(None);
    };
    if let Some(path) = &config.completion_token {
        let token = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the completion token {}: {e}", path.display()))?;
        target.token = Some(token.trim().to_owned());
    }
    Ok(Some(target))
}

/// The first line a capsule writes on stdout, once its door is serving: `mur run` announces
/// the launch on it (the launch task's answer follows).
pub const READY_LINE: &str = "murmur-capsule-ready";

/// Exit statuses of a capsule process, which `mur run` passes on.
pub mod exit {
    pub const OK: i32 = 0;
    pub const TASK_NOT_COMPLETED: i32 = 1;
    pub const CANNOT_START: i32 = 2;
}

/// Runs the capsule on `listener` until it ends; answers the process exit status.
/// The longest a capsule's exit waits for its last spans to reach the collector.
const TELEMETRY_FLUSH: Duration = Duration::from_secs(3);

pub fn main(config: CapsuleConfig, listener: std::net::TcpListener) -> i32 {
    crate::allocator::give_large_frees_back();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: the capsule could not start its runtime: {e}");
            return exit::CANNOT_START;
        }
    };
    rt.block_on(async {
        let code = run(config, listener).await;
        // A keeper kept ready for a next task that will not come.
        crate::process::ready::close().await;
        code
    })
}

fn slots(m: &manifest::Manifest) -> usize {
    match m.lifecycle.task_acceptance {
        TaskAcceptance::None => 0,
        TaskAcceptance::Single => 1,
        TaskAcceptance::Queue => m.lifecycle.queue_depth.saturating_add(1),
    }
}

async fn run(config: CapsuleConfig, listener: std::net::TcpListener) -> i32 {
    // Listening for SIGTERM (the supervisor's death, among others) comes first: until then a
    // SIGTERM ends this process outright; from then on it is heard, however long the start.
    let ends = Ends::listen();
    if process::parent_is_gone() {
        eprintln!("error: the capsule's supervisor ended before it started");
        return exit::CANNOT_START;
    }
    let mut manifest = match manifest::load(&config.manifest) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("{e}");
            return exit::CANNOT_START;
        }
    };
    let completion = match completion_target(&config) {
        Ok(c) => c,
        Err(why) => {
            eprintln!("error: {why}");
            return exit::CANNOT_START;
        }
    };
    let wiring = match config.wiring.as_ref().map(|w| w.load()).transpose() {
        Ok(w) => w,
        Err(why) => {
            eprintln!("error: {why}");
            return exit::CANNOT_START;
        }
    };
    // Every formation door is authenticated (DESIGN §7), whatever its manifest declares.
    if wiring.is_some() && manifest.network.authentication.is_none() {
        manifest.network.authentication = Some(Default::default());
    }
    // However it was started, a capsule whose CLI asks answers only on an authenticated door.
    if manifest.harness.approvals.mode == crate::manifest::approvals::Mode::Ask
        && manifest.network.authentication.is_none()
    {
        eprintln!(
            "error: harness.approvals is ask, and this capsule's door is public (no \
             network.authentication): anyone who reaches its port could answer for the operator\n  \
             hint: {}",
            crate::manifest::approvals::PUBLIC_DOOR_HINT
        );
        return exit::CANNOT_START;
    }
    // A door that starts no task has no worker, and needs no driver.
    let runs_tasks = manifest.lifecycle.task_acceptance != TaskAcceptance::None;
    let mut worker = match runs_tasks {
        true => match worker_of(&manifest, &config) {
            Ok(w) => Some(w),
            Err(why) => {
                eprintln!("error: {why}");
                return exit::CANNOT_START;
            }
        },
        false => None,
    };
    let (containment, walls) = match &worker {
        Some(agent::Worker::Harness(_, c))
        | Some(agent::Worker::Http(agent::HttpAgent {
            shell: Some(crate::shell::Shell { containment: c }),
            ..
        })) => (Some(c.mode), Some(Box::new(c.walls()))),
        _ => (None, None),
    };
    let gateway = match gateway_of(&mut worker) {
        Ok(g) => g,
        Err(why) => {
            eprintln!("error: {why}");
            return exit::CANNOT_START;
        }
    };
    let spend = match spend_of(&config, &manifest, wiring.as_ref()) {
        Ok(s) => s,
        Err(why) => {
            eprintln!("error: {why}");
            return exit::CANNOT_START;
        }
    };
    let session_id = SessionId::from_wire(&config.session_id);
    let trace = match Trace::open(&config.records_dir, session_id.clone()) {
        Ok(t) => t,
        Err(e) => {
            eprintln!(
                "error: cannot write the trace in {}: {e}",
                config.records_dir.display()
            );
            return exit::CANNOT_START;
        }
    };
    let listener = match listener
        .set_nonblocking(true)
        .and_then(|_| tokio::net::TcpListener::from_std(listener))
    {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: the inherited listener is unusable: {e}");
            return exit::CANNOT_START;
        }
    };
    // Taken (and made close-on-exec) before any harness can start.
    let supervisor = match config.control {
        true => match crate::delegation::supervisor::Supervisor::inherited() {
            Ok(s) => Some(s),
            Err(e) => {
                eprintln!("error: the supervisor's control socket is unusable: {e}");
                return exit::CANNOT_START;
            }
        },
        false => None,
    };
    let events = Arc::new(EventLog::default());
    let (store, restored) = match open_store(&config, &events) {
        Ok(opened) => opened,
        Err(refusal) => {
            eprintln!("{refusal}");
            return exit::CANNOT_START;
        }
    };
    let recorder = events.clone();
    let mut registry =
        Registry::new(slots(&manifest)).observed(Arc::new(move |t| recorder.record(t)));
    let mut harness_sessions = crate::held::harness_sessions::HarnessSessions::default();
    let mut conversations = crate::inference::conversation::Conversations::default();
    let mut spend = spend;
    if let Some(store) = &store {
        // Before the door serves: tokens, event ids and positions go on from where they were.
        crate::tasks::page_token::use_key(restored.page_key);
        events.continue_after(restored.events);
        registry = registry.journaled(store.journal());
        registry.restore(restored.tasks, restored.newest, crate::store::RESTARTED);
        let kept = store.clone();
        harness_sessions = harness_sessions.restored(
            restored.harness_sessions,
            Arc::new(move |c, s| kept.harness_session(c, s)),
        );
        let kept = store.clone();
        conversations = conversations.restored(
            restored.conversations,
            Arc::new(move |c, used, msgs| kept.conversation(c, used, msgs)),
        );
        let kept = store.clone();
        let before = crate::gateway::ledger::Totals {
            tokens: restored.spent.tokens,
            usd: restored.spent.usd,
        };
        spend = spend.restored(
            before,
            Arc::new(move |t, entry| {
                let spent = crate::store::Spent {
                    tokens: t.tokens,
                    usd: t.usd,
                };
                // An entry holds strings and numbers only: its encoding cannot fail.
                kept.spent(spent, serde_json::to_string(entry).unwrap_or_default())
            }),
        );
    }
    let session = Arc::new(
        Session::new(
            session_id,
            manifest,
            registry,
            events,
            trace,
            config.url.clone(),
            config.workdir.clone(),
            config.records_dir.clone(),
            config.mur_exe.clone(),
        )
        .wired(wiring)
        .reached_inside_at(config.harness_url.clone())
        .delegating(supervisor)
        .completing_to(completion)
        .protecting(config.protect.clone())
        .spending(spend, gateway.as_ref().map(|(g, _)| g.clone()))
        .storing(store, harness_sessions, conversations),
    );
    // Spans go to a collector when the standard variables name one; a variable that is wrong
    // stops the capsule here, saying which, rather than losing every span quietly.
    let who = crate::telemetry::Identity {
        session_id: session.id.as_str(),
        capsule: &session.manifest.name,
        formation: session
            .wiring
            .as_ref()
            .map(|w| (w.formation.as_str(), w.member.as_str())),
    };
    let traced = session.clone();
    if let Err(why) = crate::telemetry::start(&who, Arc::new(move |e| traced.trace.event(e))) {
        eprintln!("error: {why}");
        return exit::CANNOT_START;
    }
    session.trace.event(TraceEvent::SessionStart {
        capsule: session.manifest.name.clone(),
        version: session.manifest.version.clone(),
        pid: std::process::id(),
        url: session.url.clone(),
        workdir: session.workdir.clone(),
        manifest: session.manifest.path.clone(),
        containment,
        walls,
    });
    let launch = config
        .launch
        .as_ref()
        .and_then(|l| admit_launch(&session, l));
    let tokens = session
        .manifest
        .network
        .authentication
        .as_ref()
        .map(|_| TokenTable::new(&session.manifest.name, &config.tokens));
    let door = Arc::new(Door::new(session.clone(), tokens));
    let serving = tokio::spawn(door.serve(listener));
    let gatewaying = match gateway {
        Some((g, l)) => match l
            .set_nonblocking(true)
            .and_then(|()| tokio::net::TcpListener::from_std(l))
        {
            Ok(l) => {
                let traced = session.clone();
                let served = crate::gateway::Served {
                    spend: session.spend.clone(),
                    record: Arc::new(move |e| traced.trace.event(e)),
                    going_down: session.shutdown.subscribe(),
                };
                Some(tokio::spawn(g.serve(served, l)))
            }
            Err(e) => {
                eprintln!("error: the model gateway's listener is unusable: {e}");
                return exit::CANNOT_START;
            }
        },
        None => None,
    };
    let trimming = tokio::spawn(give_back_memory());
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{READY_LINE}").and_then(|_| out.flush());
    }
    let worker = worker.map(|w| tokio::spawn(agent::work(session.clone(), w, launch.clone())));

    ends.wait(&session).await;
    // Live tasks are canceled (their harnesses interrupted) before the door closes; when the
    // supervisor is gone (killed: the SIGTERM is its parent-death signal) they failed instead,
    // saying why: nobody asked for their cancel, and `mur run --resume` brings the session back.
    match !session.registry.is_idle() && supervisor_gone().await {
        true => session.fail_all(crate::store::SUPERVISOR_GONE).await,
        false => session.cancel_all().await,
    };
    session.go_down();
    let _ = serving.await;
    if let Some(g) = gatewaying {
        g.abort();
    }
    trimming.abort();
    if let Some(worker) = worker {
        let _ = tokio::time::timeout(GRACE + Duration::from_secs(5), worker).await;
    }
    // What the model left running in the background ends with the session.
    crate::shell::end_all(&session.commands).await;

    let status = launch
        .as_ref()
        .and_then(|id| session.registry.state_of(id.as_str(), &Viewer::Everyone));
    // What the spans' collector has not taken yet goes before the exit, within a bound.
    crate::telemetry::flush(TELEMETRY_FLUSH).await;
    session.trace.event(TraceEvent::SessionEnd {
        launch_task_state: status,
    });
    // The process exits next: everything queued, session_end last, goes to the file first.
    session.trace.close().await;
    if let Some(store) = &session.store {
        store.close();
    }
    match status {
        None | Some(TaskState::Completed) => exit::OK,
        Some(_) => exit::TASK_NOT_COMPLETED,
    }
}

/// Whether the SIGTERM came from the supervisor's death. A stop by the supervisor comes after
/// its StopSession (no task is live by then), so this is asked only with tasks live, and waits
/// a little: the parent-death signal can come as the supervisor's first thread ends, while its
/// process is still there to be the parent.
async fn supervisor_gone() -> bool {
    for _ in 0..50 {
        if process::parent_is_gone() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// The session's store, opened with what it kept; `None` for a sub-capsule, and under
/// `MURMUR_STORE=off`.
fn open_store(
    config: &CapsuleConfig,
    events: &Arc<EventLog>,
) -> Result<(Option<Arc<crate::store::Store>>, crate::store::Restored), crate::store::StoreError> {
    if config.storeless || !crate::store::wanted() {
        return Ok((None, Default::default()));
    }
    let (store, restored) = crate::store::Store::open(&config.records_dir, events.clone())?;
    Ok((Some(Arc::new(store)), restored))
}

/// What runs the capsule's tasks: the process driver in its containment, or the http driver
/// `gateway` names.
fn worker_of(m: &manifest::Manifest, config: &CapsuleConfig) -> Result<agent::Worker, String> {
    if m.inference.transport == manifest::Transport::Http {
        let mut agent = http_agent(m)?;
        // The shell's commands run in the jail a harness attempt would.
        if !m.capabilities.shell_allow.is_empty() {
            agent.shell = Some(crate::shell::Shell {
                containment: contain(config)?,
            });
        }
        return Ok(agent::Worker::Http(agent));
    }
    let driver = crate::harness::driver_for(m, &config.mur_exe, &config.records_dir)?;
    let containment = contain(config)?;
    // A capsule started without `mur run`'s check (a sub-capsule, a pod) holds to it too.
    if let Some((wall, state)) = containment.walls().first_missing(&m.harness.require) {
        return Err(format!(
            "{} requires the {} wall (harness.require), which is {state}",
            m.path.display(),
            wall.as_str()
        ));
    }
    Ok(agent::Worker::Harness(driver, containment))
}

/// The http driver of a manifest on `inference.transport: http`.
pub fn http_agent(m: &manifest::Manifest) -> Result<agent::HttpAgent, String> {
    let artifact = m.driver_artifact();
    let provider = artifact
        .and_then(|a| a.builtin)
        .and_then(crate::inference::Provider::of);
    let (Some(provider), Some(gateway)) = (provider, artifact.and_then(|a| a.gateway.as_ref()))
    else {
        return Err(format!(
            "{} names no built-in http driver with a gateway",
            m.path.display()
        ));
    };
    let endpoint = crate::inference::Endpoint::parse(&gateway.endpoint, gateway.api_key.as_deref())
        .map_err(|e| e.0)?;
    Ok(agent::HttpAgent {
        driver: crate::inference::Driver { provider, endpoint },
        model: m.inference.model.clone().unwrap_or_default(),
        shell: None,
    })
}

/// Decides how harness attempts are contained. The capsule is a subreaper either way, so that
/// nothing a dead keeper left can get past its sweep, and opens the keeper binary its attempts
/// will run (`process::keeper_exe`).
fn contain(config: &CapsuleConfig) -> Result<Containment, String> {
    process::become_subreaper();
    process::keeper_exe::open_beside(&config.mur_exe);
    match &config.containment {
        Some(c) => Ok(c.clone()),
        None => Containment::detect(&config.mur_exe, config.run_dir.iter().cloned().collect()),
    }
}

fn admit_launch(session: &Session, launch: &LaunchTask) -> Option<crate::ids::TaskId> {
    let input = TaskInput {
        text: launch.text.clone(),
        message_id: crate::ids::MessageId::mint().to_string(),
        reference_task_ids: vec![],
        forget_session: launch.forget_session,
        // The user wrote it.
        trust: crate::provenance::Trust::Trusted,
        images: Vec::new(),
        parent: launch.traceparent.as_deref().and_then(|t| {
            crate::telemetry::propagation::extract_pairs(t, launch.tracestate.as_deref())
        }),
    };
    match session.admit(
        launch.context_id.clone(),
        Owner::Session,
        input,
        Origin::Launch,
    ) {
        Admission::Accepted(id, _) => Some(id),
        // Nothing will run it, and nothing else would say so: the launch ends here, saying why.
        Admission::Rejected(id, task) => {
            let why = task["status"]["message"]["parts"][0]["text"]
                .as_str()
                .unwrap_or("task rejected");
            eprintln!("the launch's task was not taken: {why}");
            session.go_down();
            Some(id)
        }
    }
}

/// Every [`crate::allocator::TRIM_EVERY`], hands malloc's free pages back (off the door's threads).
async fn give_back_memory() {
    let mut every = tokio::time::interval(crate::allocator::TRIM_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let _ = tokio::task::spawn_blocking(crate::allocator::give_back_free_pages).await;
    }
}

/// SIGTERM and SIGINT, listened for from the capsule's start (`None` if the runtime could
/// not listen for them).
struct Ends(Option<(Signal, Signal)>);

impl Ends {
    fn listen() -> Ends {
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(term), Ok(int)) => Ends(Some((term, int))),
            _ => Ends(None),
        }
    }

    /// Returns on SIGTERM or SIGINT, or when the worker ends the session (`after_task: exit`).
    async fn wait(self, session: &Session) {
        let mut ended = session.shutdown.subscribe();
        let Some((mut term, mut int)) = self.0 else {
            let _ = ended.wait_for(|d| *d).await;
            return;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
            _ = ended.wait_for(|d| *d) => {}
        }
    }
}
