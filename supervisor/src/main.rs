//! `mur`: the murmur supervisor. A thin CLI over the `capsule` library: it launches capsules
//! (re-executing itself as `mur __capsule`), keeps their records, and talks to their doors.

mod approvals;
mod client;
mod commands;
mod delegation;
mod error;
mod follow;
mod formation;
mod launch;
mod listing;
mod records;
mod render;
mod stopping;
mod terminal;
mod tokens;
mod top;
mod trace;

use std::os::fd::FromRawFd;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

use error::CliResult;

#[derive(Parser)]
#[command(
    name = "mur",
    version,
    about = "Runs AI agents as capsules that serve A2A v1.0 doors"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Launch a capsule and stay in the foreground until it ends (Ctrl-C stops it)
    Run {
        /// The manifest to launch
        #[arg(long, default_value = "murmur.yaml")]
        manifest: PathBuf,
        /// The launch's own task: text, or a file holding it
        #[arg(long)]
        task: Option<String>,
        /// The context id of the launch's task
        #[arg(long)]
        context: Option<String>,
        /// Bring back a launch that was killed (or stopped): its sessions, URLs, tokens and
        /// tasks. SESSION, @N (as `mur ps` lists them) or a formation's name
        #[arg(long, value_name = "SESSION|@N|FORMATION", conflicts_with_all = ["manifest", "task", "context", "forget_session", "workdir"])]
        resume: Option<String>,
        /// Drop the harness session the context names before the task starts
        #[arg(long, requires = "context")]
        forget_session: bool,
        /// The folder the capsule works in (default: the current folder)
        #[arg(long)]
        workdir: Option<PathBuf>,
        /// Print one JSON object instead of the two announcement lines
        #[arg(long)]
        json: bool,
    },
    /// Print the machine's model spend for a day: per formation, member and model
    Spend {
        /// The UTC day, YYYY-MM-DD (default: today)
        #[arg(long)]
        day: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Remove ended sessions' records (traces, task stores) untouched for longer than an age
    Gc {
        /// The age: 30m, 12h, 7d (default 7d)
        #[arg(long, value_name = "AGE")]
        older_than: Option<String>,
    },
    /// List running capsules, and launches cut short that can be resumed
    Ps {
        #[arg(long)]
        json: bool,
    },
    /// Stop a session: cancel its tasks, print what it leaves running, end its processes
    Stop { address: String },
    /// Cancel one task of a running session
    Cancel { address: String, task_id: String },
    /// Approve what a task of a running session asks to run (harness.approvals: ask)
    Approve(commands::approve::Answer),
    /// Deny what a task of a running session asks to run; the agent is told, with the reason
    Deny(commands::approve::Answer),
    /// Print a running session's credentials and tokens, `operator` first
    Token {
        #[arg(conflicts_with = "kubernetes")]
        address: Option<String>,
        /// Explain how to read a rendered formation's tokens with kubectl instead
        #[arg(long)]
        kubernetes: bool,
        /// (with --kubernetes) The formation, to name its entry's Secret exactly
        #[arg(long, requires = "kubernetes")]
        manifest: Option<PathBuf>,
        /// (with --kubernetes) The namespace it was rendered into
        #[arg(long, requires = "kubernetes", default_value = "default")]
        namespace: String,
    },
    /// Write a formation as objects for another runtime: `--target kubernetes` (docs/kubernetes.md)
    Render {
        /// What to render for: kubernetes
        #[arg(long)]
        target: String,
        /// The formation manifest
        manifest: PathBuf,
        /// The namespace the objects go in
        #[arg(long, default_value = "default")]
        namespace: String,
        /// The image holding mur and the harnesses (default: murmur:VERSION, see the Dockerfile)
        #[arg(long)]
        image: Option<String>,
        /// Write formation.yaml and member-NAME.yaml into DIR instead of one YAML on stdout
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Reuse the tokens of Secrets rendered before (a file or folder of YAML) instead of minting
        #[arg(long, value_name = "PATH")]
        secrets_from: Option<PathBuf>,
        /// Keep each member's records (trace, task store) on a PersistentVolumeClaim of SIZE
        /// (a Kubernetes quantity: 1Gi, 500Mi, 10G)
        // Hyphen values reach the size check, which says what is wrong with `-1Gi`.
        #[arg(long, value_name = "SIZE", allow_hyphen_values = true)]
        persist: Option<String>,
    },
    /// Watch running formations live: capsules, tasks, calls, refusals; cancel and stop from
    /// the keyboard (`--once`, or a stdout that is not a terminal: one text snapshot)
    Top {
        /// One session (its whole formation for a member); every running session when absent
        address: Option<String>,
        /// Print one snapshot as text and exit
        #[arg(long)]
        once: bool,
    },
    /// Follow a running session's events (murmur.WatchSession), one line each
    Watch {
        address: Option<String>,
        /// Reach a door directly instead of by session address
        #[arg(long, conflicts_with = "address")]
        url: Option<String>,
    },
    /// Resolve the manifest's artifacts and report what is missing
    Install {
        #[arg(long, default_value = "murmur.yaml")]
        manifest: PathBuf,
    },
    /// Read a session's trace
    Trace {
        #[command(subcommand)]
        command: TraceCmd,
    },
    /// (harness helper) Ask the task's sender a question and print the reply
    RequestInput { question: Vec<String> },
    /// (harness helper) Give a formation member TEXT and print its answer
    CallMember {
        /// Wait at most this many seconds for the member's answer (default 1800)
        #[arg(long, value_name = "SECS")]
        timeout: Option<u64>,
        /// The member, as the formation names it
        member: String,
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        text: Vec<String>,
    },
    /// (harness helper) Start a sub-capsule from capabilities.delegate.allow with TEXT as its task, and print its response once it completes
    DelegateTask {
        /// Wait at most this many seconds for the sub-capsule's response, then end it (default 1800)
        #[arg(long, value_name = "SECS")]
        timeout: Option<u64>,
        /// The sub-capsule, by its manifest's name
        capsule: String,
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        text: Vec<String>,
    },
    /// (harness helper) Send TEXT to the A2A agent at URL and print its task (JSON) once it settles
    SendMessage {
        /// Wait at most this many seconds for the task to settle (default 1800)
        #[arg(long, value_name = "SECS")]
        timeout: Option<u64>,
        /// Send in this context: continue a conversation with the agent
        #[arg(long, value_name = "ID")]
        context: Option<String>,
        /// Reply to this task of the agent's, which waits for input
        #[arg(long, value_name = "ID")]
        task: Option<String>,
        /// The agent's door: http://localhost:PORT or localhost:PORT
        url: String,
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        text: Vec<String>,
    },
    /// (harness helper) End the task without an answer, with REASON as its status
    EndWithoutAnswer {
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        reason: Vec<String>,
    },
    /// Serve one capsule from MURMUR_CAPSULE_CONFIG on a listener it binds itself (a container's command; docs/kubernetes.md)
    #[command(name = "capsule")]
    ServeCapsule {
        /// The address the door listens on
        #[arg(long, default_value = "0.0.0.0:8080")]
        listen: String,
    },
    /// Internal: run as a capsule process on the inherited listener
    #[command(name = "__capsule", hide = true)]
    Capsule,
}

#[derive(Subcommand)]
enum TraceCmd {
    /// Render a session's trace.jsonl in sections
    Show {
        address: Option<String>,
        #[arg(long)]
        workdir: Option<PathBuf>,
        /// Every member's trace of the addressed member's formation, interleaved by time
        #[arg(long)]
        formation: bool,
        /// Write the session's spans (its formation's and sub-capsules' too) to FILE as OTLP
        /// JSON, for a collector (docs/telemetry.md)
        #[arg(long, value_name = "FILE", conflicts_with = "formation")]
        otlp: Option<PathBuf>,
    },
}

/// `mur __capsule`: how `mur run` starts each capsule (`launch::spawn_capsule`).
pub const CAPSULE_SUBCOMMAND: &str = "__capsule";

fn main() {
    // The keeper of a harness attempt must stay single-threaded until it has entered its
    // namespaces, so it runs before anything else (and is not a clap command: its arguments
    // after `--` are the harness's own). A capsule takes no arguments, and starts by the
    // hundred in a formation: it skips building the whole command line's parser.
    let mut args = std::env::args_os().skip(1);
    match args.next() {
        Some(a) if a == capsule::process::keeper::SUBCOMMAND => {
            std::process::exit(capsule::process::keeper::main(args))
        }
        // A zygote stays single-threaded for as long as it lives: it forks capsules.
        Some(a) if a == CAPSULE_SUBCOMMAND && args.next().is_none() => {
            std::process::exit(match capsule::process::zygote::is_asked() {
                true => capsule::process::zygote::main(capsule_main),
                false => capsule_main(),
            })
        }
        _ => {}
    }
    let cli = Cli::parse();
    match &cli.command {
        Cmd::Capsule => std::process::exit(capsule_main()),
        Cmd::ServeCapsule { listen } => std::process::exit(commands::capsule::serve(listen)),
        _ => {}
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start: {e}");
            std::process::exit(1);
        }
    };
    match rt.block_on(dispatch(cli.command)) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            // An error may carry a door's words; they are shown, never obeyed.
            eprintln!("{}", terminal::shown(&e.to_string()));
            std::process::exit(1);
        }
    }
}

async fn dispatch(cmd: Cmd) -> CliResult<i32> {
    records::settle_home()?;
    match cmd {
        Cmd::Run {
            manifest,
            task,
            context,
            resume,
            forget_session,
            workdir,
            json,
        } => {
            commands::run::run(commands::run::RunArgs {
                manifest,
                resume,
                task,
                context,
                forget_session,
                workdir,
                json,
            })
            .await
        }
        Cmd::Ps { json } => commands::ps::run(json).await,
        Cmd::Gc { older_than } => commands::gc::run(older_than.as_deref()),
        Cmd::Spend { day, json } => commands::spend::run(day.as_deref(), json),
        Cmd::Stop { address } => commands::stop::run(&address).await,
        Cmd::Cancel { address, task_id } => commands::cancel::run(&address, &task_id).await,
        Cmd::Approve(a) => commands::approve::run(&a, approvals::Decision::Approve).await,
        Cmd::Deny(a) => commands::approve::run(&a, approvals::Decision::Deny).await,
        Cmd::Token {
            kubernetes: true,
            manifest,
            namespace,
            ..
        } => commands::token::kubernetes(manifest.as_deref(), &namespace),
        Cmd::Token { address, .. } => commands::token::run(address.as_deref()),
        Cmd::Render {
            target,
            manifest,
            namespace,
            image,
            out,
            secrets_from,
            persist,
        } => commands::render::run(commands::render::RenderArgs {
            target,
            manifest,
            namespace,
            image: image.unwrap_or_else(commands::render::default_image),
            out,
            secrets_from,
            persist,
        }),
        Cmd::Top { address, once } => commands::top::run(address.as_deref(), once).await,
        Cmd::Watch { address, url } => {
            commands::watch::run(address.as_deref(), url.as_deref()).await
        }
        Cmd::Install { manifest } => commands::install::run(&manifest),
        Cmd::Trace {
            command:
                TraceCmd::Show {
                    address,
                    workdir,
                    formation,
                    otlp,
                },
        } => match otlp {
            Some(out) => commands::trace::otlp(address.as_deref(), workdir.as_deref(), &out),
            None => commands::trace::run(address.as_deref(), workdir.as_deref(), formation),
        },
        Cmd::RequestInput { question } => {
            commands::helpers::request_input(&question.join(" ")).await
        }
        Cmd::CallMember {
            timeout,
            member,
            text,
        } => commands::helpers::call_member(&member, &text.join(" "), timeout).await,
        Cmd::DelegateTask {
            timeout,
            capsule,
            text,
        } => commands::helpers::delegate_task(&capsule, &text.join(" "), timeout).await,
        Cmd::SendMessage {
            timeout,
            context,
            task,
            url,
            text,
        } => {
            commands::helpers::send_message(commands::helpers::SendArgs {
                url,
                text: text.join(" "),
                context,
                task,
                timeout,
            })
            .await
        }
        Cmd::EndWithoutAnswer { reason } => {
            commands::helpers::end_without_answer(&reason.join(" ")).await
        }
        Cmd::Capsule => Ok(capsule_main()),
        Cmd::ServeCapsule { listen } => Ok(commands::capsule::serve(&listen)),
    }
}

/// The capsule process: its config from the environment, its listener on the inherited fd.
fn capsule_main() -> i32 {
    let fd = match launch::take_inherited() {
        Ok(fd) => fd,
        Err(why) => {
            eprintln!("error: __capsule is started by `mur run`, not by hand ({why})");
            return capsule::runtime::exit::CANNOT_START;
        }
    };
    let Ok(config) = commands::capsule::config() else {
        eprintln!("error: __capsule is started by `mur run`, not by hand");
        return capsule::runtime::exit::CANNOT_START;
    };
    // SAFETY: `mur run` handed the bound listener over, `take_inherited` placed it on this fd,
    // and nothing else owns it.
    let listener = unsafe { std::net::TcpListener::from_raw_fd(fd) };
    // Inherited without close-on-exec; harnesses must not inherit the door's socket.
    // SAFETY: plain fcntl on a descriptor this process owns.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFD);
        libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
    }
    std::env::remove_var(capsule::runtime::CONFIG_ENV);
    capsule::runtime::main(config, listener)
}

/// The supervisor's house has one-way doors (DESIGN §2): commands → formation / delegation /
/// render / top → what they share (stopping, trace text, the listing, file following) →
/// client → records / tokens / process start. Read from the sources, so a new file is held to
/// it too.
#[cfg(test)]
#[path = "../../tests/layering/graph.rs"]
mod import_graph;

#[cfg(test)]
mod layering {
    use std::path::Path;

    use crate::import_graph::{assert_no_cycles, fixture, sources, Graph};

    /// The supervisor's floors, top first: a module may import its own floor and those below,
    /// never one above. Every module of `src/` is on one floor.
    const FLOORS: [&[&str]; 5] = [
        &["commands"],
        &["top", "formation", "delegation", "render"],
        &["stopping", "trace", "listing", "follow", "approvals"],
        &["client"],
        // `terminal` imports nothing: the client shows a door's refusal through it too.
        &["records", "tokens", "launch", "error", "terminal"],
    ];

    /// The floor of `file`'s top module; `None` for the binaries' roots.
    fn floor_of(file: &str) -> Option<usize> {
        let top = file.split('/').next()?.trim_end_matches(".rs");
        if ["main", "keeper"].contains(&top) {
            return None;
        }
        let floor = FLOORS.iter().position(|f| f.contains(&top));
        assert!(
            floor.is_some(),
            "src/{top} is on no floor of the layering test"
        );
        floor
    }

    fn graph() -> Graph {
        Graph::of(&sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src")))
    }

    #[test]
    fn nothing_imports_what_is_above_it() {
        let graph = graph();
        assert!(graph.edges.len() >= 30, "only {} files", graph.edges.len());
        for (file, targets) in &graph.edges {
            let Some(floor) = floor_of(file) else {
                continue;
            };
            for target in targets {
                let Some(to) = floor_of(target) else {
                    continue;
                };
                assert!(
                    to >= floor,
                    "{file} imports {target}, which is above it: move what it needs down"
                );
            }
        }
    }

    #[test]
    fn no_file_imports_in_a_circle() {
        assert_no_cycles(&graph());
    }

    /// Two modules of one floor may not lean on each other either (delegation and formation
    /// once did, through files that did not import each other directly).
    #[test]
    fn no_module_imports_in_a_circle() {
        assert_no_cycles(&graph().modules());
    }

    #[test]
    fn the_graph_sees_grouped_imports_and_a_circle_on_one_floor() {
        let g = Graph::of(&fixture());
        assert!(
            g.edges["door/mod.rs"].contains("tasks/mod.rs"),
            "{:?}",
            g.edges
        );
        // A parent naming its own child is the module tree, not an import.
        assert!(!g.edges["door/mod.rs"].contains("door/check.rs"));
        assert!(g.edges["door/check.rs"].contains("door/mod.rs"));
        assert!(
            !g.edges["tasks/mod.rs"].contains("door/mod.rs"),
            "test code is no import"
        );
        assert_eq!(
            g.cycles(),
            [["door/check.rs", "door/span.rs"]],
            "{:?}",
            g.edges
        );
    }
}
