//! Credentials and wiring for a launch (DESIGN §7 step 2–3): every member's door tokens — the
//! operator's, its manifest's declared credentials, and `member:<caller>` for each member that
//! calls it — and for each member the wiring file naming its callees' URLs and the tokens it
//! holds on their doors. Formation doors are always authenticated; a lone capsule mints tokens
//! only when its manifest declares `network.authentication`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use capsule::wiring::{member_credential, Callee, Wiring, MEMBER_SCOPES};

use super::plan::Plan;
use crate::records;
use crate::tokens::{self, Minted};

/// Each member's minted tokens, in plan order.
pub fn mint(plan: &Plan) -> Vec<Vec<Minted>> {
    plan.members
        .iter()
        .map(|m| {
            let mut minted = tokens::mint(&m.manifest, plan.is_formation());
            for caller in plan.callers_of(&m.name) {
                minted.push(tokens::fresh_credential(
                    member_credential(caller),
                    MEMBER_SCOPES.iter().map(|s| s.to_string()).collect(),
                ));
            }
            minted
        })
        .collect()
}

/// The wiring of member `i`: each callee's URL and the `member:<i>` token on its door. `None`
/// for a lone capsule.
pub fn wiring(plan: &Plan, i: usize, urls: &[String], minted: &[Vec<Minted>]) -> Option<Wiring> {
    let formation = plan.formation.as_ref()?;
    let me = &plan.members[i];
    let credential = member_credential(&me.name);
    let mut callees = BTreeMap::new();
    for callee in &me.calls {
        let Some(j) = plan.members.iter().position(|m| &m.name == callee) else {
            continue;
        };
        let Some(token) = minted[j].iter().find(|t| t.credential == credential) else {
            continue;
        };
        callees.insert(
            callee.clone(),
            Callee {
                url: urls[j].clone(),
                token: token.token.clone(),
            },
        );
    }
    Some(Wiring {
        formation: formation.name.clone(),
        member: me.name.clone(),
        callees,
    })
}

/// `run/<session>.wiring`: beside the token file, and as private (it holds tokens).
pub fn wiring_path(session_id: &str) -> PathBuf {
    records::run_dir().join(format!("{session_id}.wiring"))
}

pub fn save_wiring(session_id: &str, wiring: &Wiring) -> std::io::Result<PathBuf> {
    let path = wiring_path(session_id);
    let json = serde_json::to_vec(wiring).map_err(std::io::Error::other)?;
    records::write_private(&path, &json)?;
    Ok(path)
}

pub fn remove_wiring(session_id: &str) {
    let _ = std::fs::remove_file(wiring_path(session_id));
}
