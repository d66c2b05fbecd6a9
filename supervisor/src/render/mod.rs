//! `mur render --target kubernetes` (DESIGN §11): a formation as Kubernetes objects with the
//! same wiring `mur run` gives it. The formation is read, validated and planned by the code
//! `mur run` uses — so a formation `mur run` refuses is refused here with the same error — and
//! its tokens and wiring are minted by that code too. Each member becomes a Deployment running
//! `mur capsule` from the same `CapsuleConfig` a local launch hands it, a Service, a Secret
//! and a ConfigMap; NetworkPolicies enforce its `calls` edges.
//!
//! Delegation (`capabilities.delegate`) is refused: a sub-capsule needs a supervisor beside
//! its parent, which a cluster does not have yet (docs/kubernetes.md).

mod names;
mod network;
mod objects;
mod secrets;
pub mod yaml;

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::commands::run::runnable_plan;
use crate::error::{CliError, CliResult, Code};
use crate::formation::Plan;

pub use names::{check_namespace, ENTRY_LABEL, FORMATION_LABEL};
pub use secrets::OPERATOR_KEY;

/// What `mur render` can write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Kubernetes,
}

impl Target {
    const ALL: [(Target, &'static str); 1] = [(Target::Kubernetes, "kubernetes")];

    pub fn parse(written: &str) -> CliResult<Target> {
        Self::ALL
            .iter()
            .find(|(_, name)| *name == written)
            .map(|(t, _)| *t)
            .ok_or_else(|| {
                CliError::new(
                    Code::BadTarget,
                    format!("--target {written:?} is not a render target"),
                    "use --target kubernetes",
                )
            })
    }
}

/// What the command line adds to the formation.
pub struct Options {
    pub namespace: String,
    pub image: String,
    pub secrets_from: Option<PathBuf>,
}

/// One rendered object, and the member it belongs to (`None`: the formation's own).
pub struct Object {
    pub member: Option<String>,
    pub value: Value,
}

/// A formation's plan, refused as `mur run` would refuse it, and for what a cluster cannot do.
pub fn plan(path: &Path) -> CliResult<(Plan, String)> {
    let plan = runnable_plan(path)?;
    if !plan.is_formation() {
        let capsule = plan
            .members
            .first()
            .map(|m| m.manifest.path.display().to_string());
        return Err(CliError::new(
            Code::RenderRefused,
            format!(
                "{} is a capsule manifest: mur render takes a formation (a top-level formation: key)",
                capsule.unwrap_or_else(|| path.display().to_string())
            ),
            "wrap the capsule in a formation of one member (see manifests/split/formation.yaml)",
        ));
    }
    for m in &plan.members {
        if !m.manifest.capabilities.delegate_allow.is_empty() {
            return Err(CliError::new(
                Code::RenderRefused,
                format!(
                    "member {}: capabilities.delegate is not available on Kubernetes: a sub-capsule needs a supervisor beside its parent, which a cluster does not have in this release",
                    m.name
                ),
                format!(
                    "remove capabilities.delegate from {}, or run the formation with `mur run`",
                    m.manifest.path.display()
                ),
            ));
        }
    }
    let name = plan
        .formation
        .as_ref()
        .map(|f| f.name.clone())
        .unwrap_or_default();
    Ok((plan, name))
}

/// Every object of the formation at `path`: the formation's default-deny policy first, then per
/// member its Secret, ConfigMap, Service, Deployment and NetworkPolicy.
pub fn kubernetes(path: &Path, opts: &Options) -> CliResult<Vec<Object>> {
    let (plan, formation) = plan(path)?;
    let layout = names::Layout::of(&plan, &formation, &opts.namespace)?;
    let minted = secrets::tokens(&plan, &layout, opts.secrets_from.as_deref())?;
    let mut out = vec![Object {
        member: None,
        value: network::default_deny(&layout),
    }];
    for (i, member) in plan.members.iter().enumerate() {
        let wiring = secrets::wiring(&plan, &layout, i, &minted).ok_or_else(|| {
            CliError::new(
                Code::RenderOutput,
                format!("member {} has no wiring", member.name),
                "report this bug",
            )
        })?;
        let config = objects::capsule_config(&layout, i, &minted[i]);
        let values = [
            secrets::secret(&layout, i, &minted[i], &wiring)?,
            objects::config_map(&layout, i, member, &config, &wiring)?,
            objects::service(&layout, i),
            objects::deployment(&layout, i, &opts.image),
            network::member_policy(&plan, &layout, i),
        ];
        out.extend(values.into_iter().map(|value| Object {
            member: Some(member.name.clone()),
            value,
        }));
    }
    Ok(out)
}

/// The name every object of the formation's entry member carries (its Secret's among them):
/// what `mur token --kubernetes` points at.
pub fn entry_object(path: &Path, namespace: &str) -> CliResult<String> {
    let (plan, formation) = plan(path)?;
    let layout = names::Layout::of(&plan, &formation, namespace)?;
    Ok(layout.members[layout.entry].object.clone())
}
