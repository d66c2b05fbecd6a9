//! Which containment a harness attempt runs in (DESIGN §3), decided once per process by asking
//! the kernel: namespaces when it grants an unprivileged user namespace with its own PID and
//! mount namespaces, the fallback (subreaper, parent-death signals, /proc sweeps) when it
//! refuses. `MURMUR_CONTAINMENT` overrides the choice: `auto` (the default), `namespaces`
//! (required: a capsule refuses to start without it) or `fallback`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::keeper_args::KeeperArgs;

/// The environment variable that overrides the choice.
pub const ENV: &str = "MURMUR_CONTAINMENT";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Own user, PID, mount and network namespaces under a murmur init: the kernel ends the
    /// attempt's whole tree when the init ends, token files are not visible, and the network
    /// is loopback only, its ways out held by the capsule (the jail, DESIGN §8).
    Namespaces,
    /// The keeper is a child subreaper with a parent-death signal, and sweeps /proc at the
    /// attempt's end.
    Fallback,
}

impl Mode {
    pub fn word(self) -> &'static str {
        match self {
            Mode::Namespaces => "namespaces",
            Mode::Fallback => "fallback",
        }
    }
}

/// The mode in force, and why.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Containment {
    pub mode: Mode,
    pub reason: String,
    /// Folders a harness must not see (the running-capsule records with their token files).
    pub hidden: Vec<PathBuf>,
}

/// Which of the jail's walls (DESIGN §8) stand around a harness attempt: each `"up"`, or
/// `"missing: <why>"`. Written into `session_start` and `harness_start`, and printed by
/// `mur install`, so nobody has to guess what holds a harness.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Walls {
    pub pid: String,
    pub mount: String,
    pub network: String,
    pub files: String,
    pub environment: String,
}

impl Walls {
    /// The state of `wall`: `"up"`, or `"missing: <why>"`.
    pub fn of(&self, wall: crate::manifest::Wall) -> &str {
        use crate::manifest::Wall;
        match wall {
            Wall::Pid => &self.pid,
            Wall::Mount => &self.mount,
            Wall::Network => &self.network,
            Wall::Files => &self.files,
            Wall::Environment => &self.environment,
        }
    }

    /// The first of `required` that is not up, with its state.
    pub fn first_missing(
        &self,
        required: &[crate::manifest::Wall],
    ) -> Option<(crate::manifest::Wall, &str)> {
        required
            .iter()
            .map(|w| (*w, self.of(*w)))
            .find(|(_, state)| *state != "up")
    }

    /// Each wall with its state, in the order they are listed.
    pub fn rows(&self) -> [(&'static str, &str); 5] {
        [
            ("pid", &self.pid),
            ("mount", &self.mount),
            ("network", &self.network),
            ("files", &self.files),
            ("environment", &self.environment),
        ]
    }
}

/// What `MURMUR_CONTAINMENT` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wanted {
    Auto,
    Namespaces,
    Fallback,
}

impl Wanted {
    /// Reads `MURMUR_CONTAINMENT`; an unknown value is an error naming the accepted ones.
    pub fn from_env() -> Result<Wanted, String> {
        match std::env::var(ENV).ok().as_deref().map(str::trim) {
            None | Some("") | Some("auto") => Ok(Wanted::Auto),
            Some("namespaces") => Ok(Wanted::Namespaces),
            Some("fallback") => Ok(Wanted::Fallback),
            Some(other) => Err(format!(
                "{ENV}={other:?} is not a containment mode: use auto, namespaces or fallback"
            )),
        }
    }
}

/// How long the kernel gets to answer the probe.
const PROBE_WITHIN: Duration = Duration::from_secs(5);

impl Containment {
    /// The walls this containment puts up.
    pub fn walls(&self) -> Walls {
        let up = || "up".to_owned();
        match self.mode {
            Mode::Namespaces => Walls {
                pid: up(),
                mount: up(),
                network: up(),
                files: up(),
                environment: up(),
            },
            Mode::Fallback => {
                let why = format!("missing: fallback mode, {}", self.reason);
                Walls {
                    pid: why.clone(),
                    mount: why.clone(),
                    network: why.clone(),
                    files: why,
                    environment: up(),
                }
            }
        }
    }

    /// Decides the mode: runs `mur __contain --probe` (which sets up the namespaces exactly as
    /// an attempt would, then exits) unless the fallback is asked for. `Err` only when
    /// namespaces are required and the kernel refuses them, or the override is malformed.
    pub fn detect(mur: &Path, hidden: Vec<PathBuf>) -> Result<Containment, String> {
        let wanted = Wanted::from_env()?;
        if wanted == Wanted::Fallback {
            return Ok(Containment {
                mode: Mode::Fallback,
                reason: format!("{ENV}=fallback asks for it"),
                hidden,
            });
        }
        match probe(mur, &hidden) {
            Ok(()) => Ok(Containment {
                mode: Mode::Namespaces,
                reason: "the kernel grants unprivileged user, PID, mount and network namespaces"
                    .into(),
                hidden,
            }),
            Err(why) if wanted == Wanted::Namespaces => Err(format!(
                "{ENV}=namespaces, but the kernel refuses them: {why}"
            )),
            Err(why) => Ok(Containment {
                mode: Mode::Fallback,
                reason: format!("the kernel refuses namespaces: {why}"),
                hidden,
            }),
        }
    }
}

fn probe(mur: &Path, hidden: &[PathBuf]) -> Result<(), String> {
    let args = KeeperArgs {
        namespaces: true,
        net: true,
        forward: Vec::new(),
        jail_fd: None,
        limits: None,
        cgroup: None,
        files: None,
        probe: true,
        order_fd: None,
        hide: hidden.to_vec(),
        status_fd: None,
        parent: None,
        program: Default::default(),
        args: Vec::new(),
    };
    let mut child = {
        let _alone = super::spawning();
        Command::new(super::SELF_EXE)
            .args(args.to_args())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                format!(
                    "cannot run {} ({}) to probe: {e}",
                    super::SELF_EXE,
                    mur.display()
                )
            })?
    };
    let deadline = Instant::now() + PROBE_WITHIN;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("the probe did not answer in time".into());
            }
        }
    };
    if status.success() {
        return Ok(());
    }
    let mut why = String::new();
    if let Some(mut err) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut err, &mut why);
    }
    let why = why.trim();
    Err(if why.is_empty() {
        format!("the probe exited with {status}")
    } else {
        why.to_owned()
    })
}
