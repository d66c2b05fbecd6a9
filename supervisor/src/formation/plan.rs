//! What a launch starts: its members, each a capsule manifest with its pin and its callees. A
//! capsule manifest is a formation of one (DESIGN §3), so one launch path serves both.

use std::path::{Path, PathBuf};

use capsule::manifest::{self, Document, Manifest, OnMemberFailure, Restart};

use capsule::ids::SessionId;

use crate::error::{CliError, CliResult};
use crate::records;

/// One capsule the launch starts.
pub struct PlannedMember {
    /// The roster name (a formation's member name; a lone capsule's manifest name).
    pub name: String,
    pub manifest: Manifest,
    /// The formation's pin, else the manifest's `network.internal_port`.
    pub port: Option<u16>,
    /// The members it may call, by roster name.
    pub calls: Vec<String>,
    /// Whether it comes back when it ends (a lone capsule never does).
    pub restart: Restart,
}

/// The formation a launch belongs to, when it is one.
pub struct FormationInfo {
    /// The formation's file.
    pub path: PathBuf,
    pub name: String,
    pub version: String,
    pub on_member_failure: OnMemberFailure,
    /// The formation's `spend:` block.
    pub spend: capsule::manifest::SpendPolicy,
    /// The formation's `telemetry:` block.
    pub telemetry: capsule::manifest::telemetry::Telemetry,
}

pub struct Plan {
    pub formation: Option<FormationInfo>,
    pub members: Vec<PlannedMember>,
    /// Index of the member that takes `--task` and whose door is the launch's front door.
    pub entry: usize,
}

impl Plan {
    /// The manifest at `path` (a capsule's or a formation's) as a plan whose every member this
    /// release can run; refused as `mur run` refuses it. `mur render` starts from the same.
    pub fn runnable(path: &Path) -> CliResult<Plan> {
        let document =
            manifest::load_document(path).map_err(|e| CliError::Formatted(e.to_string()))?;
        let plan = Plan::of(document);
        for m in &plan.members {
            crate::launch::check_runnable(&m.manifest).map_err(|e| match plan.is_formation() {
                true => e.within(&format!("member {}", m.name)),
                false => e,
            })?;
        }
        Ok(plan)
    }

    pub fn of(document: Document) -> Plan {
        match document {
            Document::Capsule(m) => Plan {
                formation: None,
                members: vec![PlannedMember {
                    name: m.name.clone(),
                    port: m.network.internal_port,
                    manifest: *m,
                    calls: Vec::new(),
                    restart: Restart::default(),
                }],
                entry: 0,
            },
            Document::Formation(f) => {
                let entry = f
                    .members
                    .iter()
                    .position(|m| m.name == f.entry)
                    .unwrap_or(0);
                let members = f
                    .members
                    .into_iter()
                    .map(|m| PlannedMember {
                        port: m.pinned_port(),
                        name: m.name,
                        manifest: m.capsule,
                        calls: m.calls,
                        restart: m.restart,
                    })
                    .collect();
                Plan {
                    formation: Some(FormationInfo {
                        path: f.path,
                        name: f.name,
                        version: f.version,
                        on_member_failure: f.on_member_failure,
                        spend: *f.spend,
                        telemetry: *f.telemetry,
                    }),
                    members,
                    entry,
                }
            }
        }
    }

    /// The files this launch runs from: the formation's, then each member's manifest (and the
    /// `.env` beside each, which fills its `${VAR}`s). No harness may change them.
    pub fn files(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = self.formation.iter().map(|f| f.path.clone()).collect();
        for m in &self.members {
            files.push(m.manifest.path.clone());
            files.push(m.manifest.dir.join(".env"));
        }
        files.sort();
        files.dedup();
        files
    }

    /// The members that call `callee`, in roster order.
    pub fn callers_of(&self, callee: &str) -> Vec<&str> {
        self.members
            .iter()
            .filter(|m| m.calls.iter().any(|c| c == callee))
            .map(|m| m.name.as_str())
            .collect()
    }

    /// The formation's spend scope, when its file sets a ceiling or a price: a counter named for
    /// the launch (its entry's session), under the home's `spend/formations/`.
    pub fn spend_scope(&self, entry: &SessionId) -> Option<capsule::runtime::FormationSpend> {
        let f = self.formation.as_ref()?;
        if !f.spend.has_ceiling() && f.spend.prices.is_empty() {
            return None;
        }
        Some(capsule::runtime::FormationSpend {
            name: f.name.clone(),
            policy: f.spend.clone(),
            counter: capsule::gateway::ledger::folder(&records::home())
                .join("formations")
                .join(format!("{entry}.total")),
        })
    }

    pub fn is_formation(&self) -> bool {
        self.formation.is_some()
    }
}
