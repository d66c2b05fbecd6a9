//! What the supervisor hands a capsule process: its config (JSON in `MURMUR_CAPSULE_CONFIG`),
//! its formation's spend scope and the launch's own task. `mur run`, `mur capsule`, a
//! delegation and a rendered pod all write these; `runtime` reads them.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::auth::TokenDigest;
use crate::process::Containment;

/// What the supervisor hands a capsule process (as JSON in `MURMUR_CAPSULE_CONFIG`).
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct CapsuleConfig {
    pub manifest: PathBuf,
    pub session_id: String,
    pub records_dir: PathBuf,
    pub workdir: PathBuf,
    pub url: String,
    pub mur_exe: PathBuf,
    pub launch: Option<LaunchTask>,
    /// The digests of the tokens minted for this door (network.authentication); empty when
    /// the door is public.
    #[serde(default)]
    pub tokens: Vec<TokenDigest>,
    /// How harness attempts are contained, as `mur run` found the kernel; the capsule asks the
    /// kernel itself when it is absent.
    #[serde(default)]
    pub containment: Option<Containment>,
    /// The folder of running-capsule records and token files, which harnesses must not see.
    #[serde(default)]
    pub run_dir: Option<PathBuf>,
    /// A formation member's wiring (`crate::wiring`); `None` for a capsule launched alone.
    #[serde(default)]
    pub wiring: Option<crate::wiring::Source>,
    /// Whether the supervisor's control socket is on `delegation::protocol::CONTROL_FD`.
    #[serde(default)]
    pub control: bool,
    /// A sub-capsule's parent: where its launch task's completion goes. `None` otherwise. Its
    /// `token` is never here (this config travels in the environment): it is read from
    /// `completion_token`, a 0600 file beside the sub-capsule's own token file.
    #[serde(default)]
    pub completion: Option<crate::delegation::protocol::CompletionTarget>,
    #[serde(default)]
    pub completion_token: Option<PathBuf>,
    /// Where this capsule's harnesses reach its door when `url` — the address it advertises —
    /// is not the way back from inside (a Kubernetes Service's name). `None`: `url`. `mur
    /// capsule` sets it to its own listener's loopback address.
    #[serde(default)]
    pub harness_url: Option<String>,
    /// This run's manifests beyond the capsule's own (a formation's file, its members'): a
    /// harness may not change them, wherever they lie (DESIGN §8).
    #[serde(default)]
    pub protect: Vec<PathBuf>,
    /// Whether the capsule keeps no store (docs/store.md): a sub-capsule lives for its one
    /// delegated task and ends with its parent, never to be brought back, so nothing would
    /// reopen a store of its; and one under its parent's records would lie in the sight of its
    /// parent's harness.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub storeless: bool,
    /// The murmur home whose `spend/` holds the machine's daily ledger; `None`: no ledger and
    /// no daily ceiling (a capsule in a pod).
    #[serde(default)]
    pub spend_home: Option<PathBuf>,
    /// The formation's spend scope, shared by its members and their sub-capsules.
    #[serde(default)]
    pub formation_spend: Option<FormationSpend>,
}

/// A formation's `spend:` block and the counter its members add to.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct FormationSpend {
    pub name: String,
    pub policy: crate::manifest::SpendPolicy,
    pub counter: PathBuf,
}

/// The launch's own task (`mur run --task`).
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct LaunchTask {
    pub text: String,
    pub context_id: Option<String>,
    pub forget_session: bool,
    /// The W3C parent of the launch task's span: `TRACEPARENT` where `mur run` ran, or the
    /// delegating span of a sub-capsule's task. `None`: the task starts its own trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
}

pub const CONFIG_ENV: &str = "MURMUR_CAPSULE_CONFIG";
