//! What each member is called in the cluster: one DNS label `<formation>-<member>` names its
//! Deployment, Service, Secret, ConfigMap and NetworkPolicy, and its Service's DNS name is the
//! URL its callers are wired to. Names Kubernetes cannot take are refused here, before anything
//! is rendered, rather than bent into something that might collide.

use std::collections::BTreeMap;

use crate::error::{CliError, CliResult, Code};
use crate::formation::Plan;

/// The port a member's door serves on when the formation pins none: every member has its own
/// pod, so they can all share it.
pub const DEFAULT_PORT: u16 = 8080;

/// The longest `<formation>-<member>`: its pod's volumes are named `<formation>-<member>-state`
/// (render::objects), which must be a DNS label too.
const MAX_OBJECT: usize = 63 - super::objects::Volume::LONGEST_SUFFIX;

/// `<formation>-default-deny` names the formation's own NetworkPolicy, so no member may.
pub const DEFAULT_DENY: &str = "default-deny";

/// `<formation>-env` names the Secret of the user's own variables (API keys a manifest's
/// `${VAR}` reads), which every member's container takes when it exists; no member may take it.
pub const ENV_SECRET: &str = "env";

/// Object names the formation keeps for itself, and what each names.
const RESERVED: [(&str, &str); 2] = [
    (DEFAULT_DENY, "the formation's default-deny NetworkPolicy"),
    (ENV_SECRET, "the Secret of the formation's own variables"),
];

/// Label keys (docs/kubernetes.md).
pub const FORMATION_LABEL: &str = "murmur.dev/formation";
pub const MEMBER_LABEL: &str = "murmur.dev/member";
/// On the entry member's Secret, so `kubectl -l` finds the front door's token.
pub const ENTRY_LABEL: &str = "murmur.dev/entry";
/// The label a client pod wears to reach the entry member's door.
pub const CLIENT_LABEL: &str = "murmur.dev/client";

/// One member, as the cluster knows it.
pub struct Placed {
    /// The roster name (the formation's key).
    pub name: String,
    /// The member's label value: its roster name in DNS-label spelling.
    pub label: String,
    /// `<formation>-<member>`: every object of the member carries this name.
    pub object: String,
    pub port: u16,
    /// `http://<object>.<namespace>.svc.cluster.local:<port>`.
    pub url: String,
}

/// The formation's placement: its label value and each member's, in plan order.
pub struct Layout {
    pub formation: String,
    pub namespace: String,
    pub members: Vec<Placed>,
    pub entry: usize,
}

/// Refuses a `--namespace` Kubernetes would not take (it also goes into shell commands that
/// `mur token --kubernetes` prints).
pub fn check_namespace(namespace: &str) -> CliResult<()> {
    if is_dns_label(namespace) {
        return Ok(());
    }
    Err(CliError::new(
        Code::RenderRefused,
        format!("--namespace {namespace:?} is not a Kubernetes namespace name"),
        "use lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters",
    ))
}

impl Layout {
    pub fn of(plan: &Plan, formation: &str, namespace: &str) -> CliResult<Layout> {
        check_namespace(namespace)?;
        let formation_label = spelled(formation);
        let mut seen: BTreeMap<String, &str> = BTreeMap::new();
        let mut members = Vec::new();
        for m in &plan.members {
            let label = spelled(&m.name);
            let object = format!("{formation_label}-{label}");
            let hint = format!("name the formation and its members with letters, digits, '-' and '_', starting with a letter, together at most {} characters", MAX_OBJECT - 1);
            if !is_dns_label(&object) || !object.starts_with(|c: char| c.is_ascii_lowercase()) {
                return Err(CliError::new(
                    Code::RenderRefused,
                    format!(
                        "member {}: {object:?} cannot name a Kubernetes Service",
                        m.name
                    ),
                    hint,
                ));
            }
            if object.len() > MAX_OBJECT {
                return Err(CliError::new(
                    Code::RenderRefused,
                    format!("member {}: {object:?} is too long to name its pod's volumes ({object}-state is longer than 63 characters)", m.name),
                    hint,
                ));
            }
            if let Some((_, what)) = RESERVED.iter().find(|(name, _)| *name == label) {
                return Err(CliError::new(
                    Code::RenderRefused,
                    format!("member {}: {object:?} is the name of {what}", m.name),
                    "rename the member",
                ));
            }
            if let Some(other) = seen.insert(label.clone(), &m.name) {
                return Err(CliError::new(
                    Code::RenderRefused,
                    format!(
                        "members {other} and {} both become {object:?} in Kubernetes",
                        m.name
                    ),
                    "rename one of them: names that differ only in case or '_' against '-' collide",
                ));
            }
            let port = m.port.unwrap_or(DEFAULT_PORT);
            let url = format!("http://{object}.{namespace}.svc.cluster.local:{port}");
            members.push(Placed {
                name: m.name.clone(),
                label,
                object,
                port,
                url,
            });
        }
        Ok(Layout {
            formation: formation_label,
            namespace: namespace.to_owned(),
            members,
            entry: plan.entry,
        })
    }

    /// The labels every object of member `i` wears, and its pods are selected by.
    pub fn member_labels(&self, i: usize) -> serde_json::Value {
        serde_json::json!({
            FORMATION_LABEL: self.formation,
            MEMBER_LABEL: self.members[i].label,
        })
    }

    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.members.iter().position(|m| m.name == name)
    }
}

/// Lowercase, `_` as `-`: how a roster name is spelled in a DNS label.
fn spelled(name: &str) -> String {
    name.to_ascii_lowercase().replace('_', "-")
}

/// RFC 1123 label: what Kubernetes accepts as a namespace or object name.
pub fn is_dns_label(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !s.is_empty()
        && s.len() <= 63
        && s.chars().all(|c| alnum(c) || c == '-')
        && s.starts_with(alnum)
        && s.ends_with(alnum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_labels_are_checked_as_kubernetes_does() {
        assert!(is_dns_label("split-lead"));
        assert!(is_dns_label("a1"));
        for bad in ["", "-a", "a-", "A", "a_b", "a.b", &"a".repeat(64)] {
            assert!(!is_dns_label(bad), "{bad:?}");
        }
        assert_eq!(spelled("Code_Reviewer"), "code-reviewer");
    }
}
