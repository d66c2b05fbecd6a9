//! What a launch starts: its members, each a capsule manifest with its pin and its callees. A
//! capsule manifest is a formation of one (DESIGN §3), so one launch path serves both.

use capsule::manifest::{Document, Manifest, OnMemberFailure, Restart};

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
    pub name: String,
    pub version: String,
    pub on_member_failure: OnMemberFailure,
}

pub struct Plan {
    pub formation: Option<FormationInfo>,
    pub members: Vec<PlannedMember>,
    /// Index of the member that takes `--task` and whose door is the launch's front door.
    pub entry: usize,
}

impl Plan {
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
                        name: f.name,
                        version: f.version,
                        on_member_failure: f.on_member_failure,
                    }),
                    members,
                    entry,
                }
            }
        }
    }

    /// The members that call `callee`, in roster order.
    pub fn callers_of(&self, callee: &str) -> Vec<&str> {
        self.members
            .iter()
            .filter(|m| m.calls.iter().any(|c| c == callee))
            .map(|m| m.name.as_str())
            .collect()
    }

    pub fn is_formation(&self) -> bool {
        self.formation.is_some()
    }
}
