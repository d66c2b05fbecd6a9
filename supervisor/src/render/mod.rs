//! `mur render --target kubernetes` (DESIGN §11): a formation as Kubernetes objects with the
//! same wiring `mur run` gives it. The formation is read, validated and planned by the code
//! `mur run` uses — so a formation `mur run` refuses is refused here with the same error — and
//! its tokens and wiring are minted by that code too. Each member becomes a Deployment running
//! `mur capsule` from the same `CapsuleConfig` a local launch hands it, a Service, a Secret of
//! its door's tokens, a Secret of its wiring (the only one its pod mounts) and a ConfigMap;
//! NetworkPolicies enforce its `calls` edges. With `--persist`, a PersistentVolumeClaim keeps
//! each member's records across its pods.
//!
//! Delegation (`capabilities.delegate`) is refused: a sub-capsule needs a supervisor beside
//! its parent, which a cluster does not have yet (docs/kubernetes.md).

mod names;
mod network;
mod objects;
mod secrets;
mod storage;
pub mod yaml;

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{CliError, CliResult, Code};
use crate::formation::Plan;

pub use names::{check_namespace, ENTRY_LABEL, FORMATION_LABEL};
pub use secrets::OPERATOR_KEY;
pub use storage::Size;

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
    /// `--persist`: each member's records on a claim of this size rather than in its pod.
    pub persist: Option<Size>,
}

/// One rendered object, and the member it belongs to (`None`: the formation's own).
pub struct Object {
    pub member: Option<String>,
    pub value: Value,
}

/// A formation's plan, refused as `mur run` would refuse it, and for what a cluster cannot do.
pub fn plan(path: &Path) -> CliResult<(Plan, String)> {
    let plan = Plan::runnable(path)?;
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
    for m in &plan.members {
        refuse_written_keys(m)?;
        refuse_open_ports(m)?;
    }
    let name = plan
        .formation
        .as_ref()
        .map(|f| f.name.clone())
        .unwrap_or_default();
    Ok((plan, name))
}

/// A member whose manifest writes an API key itself (not `${VAR}`) is refused: its manifest goes
/// into a ConfigMap as written, which anyone who may read the namespace's ConfigMaps reads. A
/// manifest this check cannot read is refused too: passing it would put whatever it holds in
/// the ConfigMap unchecked.
fn refuse_written_keys(m: &crate::formation::plan::PlannedMember) -> CliResult<()> {
    let path = &m.manifest.path;
    refuse_written_key(&m.name, path, std::fs::read_to_string(path))
}

/// [`refuse_written_keys`] for member `member`, whose manifest at `path` read as `text`.
fn refuse_written_key(member: &str, path: &Path, text: std::io::Result<String>) -> CliResult<()> {
    let unchecked = |why: String| {
        CliError::new(
            Code::RenderRefused,
            format!(
                "member {member}: {} cannot be read to check that it writes no api_key: {why}",
                path.display()
            ),
            "mur render puts each manifest in a ConfigMap only once it has checked it; make the file readable YAML (`mur run` must accept it) and render again",
        )
    };
    let text = text.map_err(|e| unchecked(e.to_string()))?;
    let Some(i) = written_key(&text, path).map_err(unchecked)? else {
        return Ok(());
    };
    Err(CliError::new(
        Code::RenderRefused,
        format!(
            "member {member}: artifacts[{i}].gateway.api_key is written in {}, which mur render puts in a ConfigMap as it is: anyone who may read the namespace's ConfigMaps would read the key",
            path.display()
        ),
        "write api_key: ${YOUR_KEY_VARIABLE} and put the key in the formation's env Secret (docs/kubernetes.md)",
    ))
}

/// The index of the first artifact whose `gateway.api_key` is written out in `text` (not a
/// `${VAR}`), read as the manifest loader reads it — `${VAR}` kept intact where plain YAML
/// would choke on its braces (a flow mapping) — or why `text` cannot be read so.
fn written_key(text: &str, path: &Path) -> Result<Option<usize>, String> {
    let raw =
        capsule::manifest::load::parse_yaml(text, path).map_err(|e| e.message().to_owned())?;
    let artifacts = raw.get("artifacts").and_then(|a| a.as_sequence());
    Ok(artifacts.into_iter().flatten().position(|artifact| {
        let key = artifact
            .get("gateway")
            .and_then(|g| g.get("api_key"))
            .and_then(|k| k.as_str());
        key.is_some_and(|k| !capsule::manifest::interpolate::has_reference(k))
    }))
}

/// An allow-list entry that names an address without a port or a scheme allows every port of
/// it, and a NetworkPolicy rule for it would open every port and protocol: refused, so that what
/// the cluster opens is what the manifest meant.
fn refuse_open_ports(m: &crate::formation::plan::PlannedMember) -> CliResult<()> {
    for written in &m.manifest.capabilities.network_allow {
        let Ok(entry) = capsule::policy::Entry::parse(written) else {
            continue;
        };
        let host = entry.host().trim_matches(['[', ']']);
        let address = host.parse::<std::net::IpAddr>();
        if address.is_ok_and(|ip| !ip.is_loopback())
            && entry.port().is_none()
            && !entry.names_scheme()
        {
            return Err(CliError::new(
                Code::RenderRefused,
                format!(
                    "member {}: capabilities.network.allow entry {written:?} names no port, and a NetworkPolicy for it would open every port of {host}",
                    m.name
                ),
                format!("write the port it is reached on ({host}:443), or its scheme (https://{host})"),
            ));
        }
    }
    Ok(())
}

/// Every object of the formation at `path`: the formation's default-deny policy first, then per
/// member its tokens Secret, wiring Secret, ConfigMap, Service, records claim (`--persist`
/// only), Deployment and NetworkPolicy.
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
        // The claim before the Deployment whose pod mounts it, so `kubectl apply` makes it first.
        let claim = opts
            .persist
            .as_ref()
            .map(|size| storage::records_claim(&layout, i, size));
        let values = [
            Some(secrets::tokens_secret(&layout, i, &minted[i])),
            Some(secrets::wiring_secret(&layout, i, &wiring)?),
            Some(objects::config_map(&layout, i, member, &config, &wiring)?),
            Some(objects::service(&layout, i)),
            claim,
            Some(objects::deployment(
                &layout,
                i,
                &opts.image,
                opts.persist.is_some(),
            )),
            Some(network::member_policy(&plan, &layout, i)),
        ];
        out.extend(values.into_iter().flatten().map(|value| Object {
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

#[cfg(test)]
mod tests {
    use super::*;

    const KEYED: &str = "name: keyed\nversion: \"0.1.0\"\nartifacts:\n  - name: murmur/driver-anthropic\n    runtime: driver\n    gateway: { endpoint: https://api.anthropic.com, api_key: sk-ant-literal }\n";

    #[test]
    fn a_written_key_is_found_past_a_variable_in_a_flow_mapping() {
        let path = Path::new("worker.yaml");
        assert_eq!(written_key(KEYED, path), Ok(Some(0)));
        // Plain YAML cannot read `${MODEL}` in a flow mapping; the check once passed such a file.
        let flow = format!("{KEYED}inference: {{ transport: http, model: ${{MODEL}} }}\n");
        assert!(serde_yaml::from_str::<serde_yaml::Value>(&flow).is_err());
        assert_eq!(written_key(&flow, path), Ok(Some(0)));
        let referenced = flow.replace("sk-ant-literal", "${KEY}");
        assert_eq!(written_key(&referenced, path), Ok(None));
    }

    #[test]
    fn text_the_check_cannot_read_is_refused_not_passed() {
        let path = Path::new("/f/worker.yaml");
        let broken = format!("{KEYED}inference: {{ transport: http\n");
        let said = refuse_written_key("w", path, Ok(broken))
            .unwrap_err()
            .to_string();
        assert!(
            said.starts_with("error[E-RND-002]: member w: /f/worker.yaml cannot be read to check that it writes no api_key: line 8 column 1: ")
                && said.ends_with("\n  hint: mur render puts each manifest in a ConfigMap only once it has checked it; make the file readable YAML (`mur run` must accept it) and render again"),
            "{said}"
        );
        let gone = std::io::Error::from(std::io::ErrorKind::NotFound);
        assert_eq!(
            refuse_written_key("w", path, Err(gone)).unwrap_err().to_string(),
            "error[E-RND-002]: member w: /f/worker.yaml cannot be read to check that it writes no api_key: entity not found\n  hint: mur render puts each manifest in a ConfigMap only once it has checked it; make the file readable YAML (`mur run` must accept it) and render again"
        );
    }
}
