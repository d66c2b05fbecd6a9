//! What each member is called in the cluster: one DNS label `<formation>-<member>` names its
//! Deployment, Service, Secret, ConfigMap and NetworkPolicy, and its Service's DNS name is the
//! URL its callers are wired to; its wiring Secret, its pod's emptyDirs and its records claim
//! take that name and a suffix ([`Derived`]). Names Kubernetes cannot take are refused here, before anything is
//! rendered, rather than bent into something that might collide.

use std::collections::BTreeMap;

use crate::error::{CliError, CliResult, Code};
use crate::formation::Plan;

/// The port a member's door serves on when the formation pins none: every member has its own
/// pod, so they can all share it.
pub const DEFAULT_PORT: u16 = 8080;

/// The longest `<formation>-<member>`: the names derived from it ([`Derived`]) are DNS labels
/// too, the longest `<formation>-<member>-wiring`.
const MAX_OBJECT: usize = 63 - Derived::LONGEST_SUFFIX;

/// A member's names beside `<object>` itself: a suffix each, so that every member's are its own.
/// `podman kube play` makes a host volume of each of them (and of the ConfigMap, `<object>`),
/// named as the object or emptyDir it comes from: they must differ from each other and from
/// every other member's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Derived {
    /// The Secret of the wiring file alone, the one Secret the pod mounts: the door's own
    /// tokens stay in `<object>`, which no pod mounts.
    Wiring,
    /// The emptyDir of the member's state (records, trace, work folder, HOME).
    State,
    /// The emptyDir at `/tmp`.
    Tmp,
    /// The PersistentVolumeClaim of the member's records (`--persist`). Its name is kept from
    /// other members' even when it is not rendered, so `--persist` never refuses a formation
    /// that renders without it.
    Records,
}

impl Derived {
    const ALL: [Derived; 4] = [
        Derived::Wiring,
        Derived::State,
        Derived::Tmp,
        Derived::Records,
    ];

    /// The longest suffix, which bounds `<object>`.
    pub const LONGEST_SUFFIX: usize = {
        let (mut i, mut longest) = (0, 0);
        while i < Derived::ALL.len() {
            let n = Derived::ALL[i].suffix().len();
            if n > longest {
                longest = n;
            }
            i += 1;
        }
        longest
    };

    const fn suffix(self) -> &'static str {
        match self {
            Derived::Wiring => "-wiring",
            Derived::State => "-state",
            Derived::Tmp => "-tmp",
            // Not `-records`: one character longer than `-wiring`, it would shorten the names
            // every formation may take.
            Derived::Records => "-data",
        }
    }

    /// What the name names, for a refusal.
    fn what(self) -> &'static str {
        match self {
            Derived::Wiring => "wiring Secret",
            Derived::State => "state volume",
            Derived::Tmp => "tmp volume",
            Derived::Records => "records claim",
        }
    }

    /// `<object><suffix>`.
    pub fn of(self, object: &str) -> String {
        format!("{object}{}", self.suffix())
    }
}

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
            let wiring = Derived::Wiring.of(&object);
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
                    format!("member {}: {object:?} is too long to name its wiring Secret ({wiring} is longer than 63 characters)", m.name),
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
        refuse_derived_clashes(&members)?;
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

/// A member whose `<object>` is another member's derived name (`lead-wiring` beside `lead`) is
/// refused: on a cluster its Secret and the other's wiring Secret would be one object, and under
/// podman its ConfigMap's volume and the other's emptyDir one volume.
fn refuse_derived_clashes(members: &[Placed]) -> CliResult<()> {
    for m in members {
        for other in members {
            let clash = Derived::ALL
                .into_iter()
                .find(|d| d.of(&other.object) == m.object);
            if let Some(d) = clash {
                return Err(CliError::new(
                    Code::RenderRefused,
                    format!(
                        "member {}: {:?} is the name of member {}'s {}",
                        m.name,
                        m.object,
                        other.name,
                        d.what()
                    ),
                    "rename the member",
                ));
            }
        }
    }
    Ok(())
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

    #[test]
    fn derived_names_are_the_objects_own_and_bound_its_length() {
        assert_eq!(Derived::LONGEST_SUFFIX, "-wiring".len());
        assert_eq!(MAX_OBJECT, 56);
        let names: Vec<String> = Derived::ALL.iter().map(|d| d.of("split-lead")).collect();
        assert_eq!(
            names,
            [
                "split-lead-wiring",
                "split-lead-state",
                "split-lead-tmp",
                "split-lead-data"
            ]
        );
        assert!(Derived::ALL
            .iter()
            .all(|d| is_dns_label(&d.of(&"a".repeat(MAX_OBJECT)))));
        let placed = |name: &str| Placed {
            name: name.to_owned(),
            label: name.to_owned(),
            object: format!("split-{name}"),
            port: DEFAULT_PORT,
            url: String::new(),
        };
        let fine = [placed("lead"), placed("left"), placed("wiring")];
        assert!(refuse_derived_clashes(&fine).is_ok());
        let clash = [placed("lead-state"), placed("lead")];
        let e = refuse_derived_clashes(&clash).unwrap_err();
        assert_eq!(
            e.to_string(),
            "error[E-RND-002]: member lead-state: \"split-lead-state\" is the name of member lead's state volume\n  hint: rename the member"
        ); // The claim's name is kept whether or not `--persist` renders it.
        let clash = [placed("lead"), placed("lead-data")];
        assert_eq!(
            refuse_derived_clashes(&clash).unwrap_err().to_string(),
            "error[E-RND-002]: member lead-data: \"split-lead-data\" is the name of member lead's records claim\n  hint: rename the member"
        );
    }
}
