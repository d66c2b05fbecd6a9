//! The formation's NetworkPolicies (DESIGN §11): one that denies every formation pod all
//! ingress and egress, then one per member allowing exactly its edges — ingress on its door
//! from the members that call it (and, for the entry member, from pods labelled
//! `murmur.dev/client: "true"`), egress to its callees' doors, to the cluster DNS, to the
//! hosts of its manifest's `capabilities.network.allow` that a NetworkPolicy can name, and (on
//! `inference.transport: http`) to its driver's `gateway.endpoint`, which the capsule dials as
//! its own inference whatever its allow list says.
//!
//! A NetworkPolicy names addresses, not host names: an IP entry becomes an `ipBlock`, a
//! `localhost` entry needs nothing (it stays inside the pod), and a host name cannot be
//! expressed at all. Those are listed in the annotation [`UNRENDERED_ANNOTATION`] and stay
//! closed — the cluster errs on the side the capsule's own allow list does.

use std::net::IpAddr;

use serde_json::{json, Value};

use capsule::policy::Entry;

use super::names::{Layout, CLIENT_LABEL, DEFAULT_DENY, FORMATION_LABEL};
use crate::formation::Plan;

/// Names the allow-list hosts a member's policy could not render.
pub const UNRENDERED_ANNOTATION: &str = "murmur.dev/allow-not-rendered";

/// Denies all traffic to and from every pod of the formation; the members' own policies add
/// their edges on top.
pub fn default_deny(layout: &Layout) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": format!("{}-{DEFAULT_DENY}", layout.formation),
            "namespace": layout.namespace,
            "labels": { FORMATION_LABEL: layout.formation },
        },
        "spec": {
            "podSelector": { "matchLabels": { FORMATION_LABEL: layout.formation } },
            "policyTypes": ["Ingress", "Egress"],
        },
    })
}

/// The selector of member `i`'s pods.
fn pods_of(layout: &Layout, i: usize) -> Value {
    json!({ "podSelector": { "matchLabels": layout.member_labels(i) } })
}

fn tcp(port: u16) -> Value {
    json!({ "protocol": "TCP", "port": port })
}

/// Member `i`'s edges.
pub fn member_policy(plan: &Plan, layout: &Layout, i: usize) -> Value {
    let placed = &layout.members[i];
    let member = &plan.members[i];

    let mut from: Vec<Value> = plan
        .callers_of(&member.name)
        .into_iter()
        .filter_map(|c| layout.index_of(c))
        .map(|c| pods_of(layout, c))
        .collect();
    if i == layout.entry {
        from.push(json!({ "podSelector": { "matchLabels": { CLIENT_LABEL: "true" } } }));
    }
    let ingress: Vec<Value> = match from.is_empty() {
        true => vec![],
        false => vec![json!({ "from": from, "ports": [tcp(placed.port)] })],
    };

    let mut egress: Vec<Value> = member
        .calls
        .iter()
        .filter_map(|c| layout.index_of(c))
        .map(|c| json!({ "to": [pods_of(layout, c)], "ports": [tcp(layout.members[c].port)] }))
        .collect();
    egress.push(dns());
    let (allowed, unrendered) = allow_rules(&destinations(&member.manifest));
    egress.extend(allowed);

    let mut metadata = json!({
        "name": placed.object,
        "namespace": layout.namespace,
        "labels": layout.member_labels(i),
    });
    if !unrendered.is_empty() {
        metadata["annotations"] = json!({ UNRENDERED_ANNOTATION: unrendered.join(", ") });
    }
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata,
        "spec": {
            "podSelector": { "matchLabels": layout.member_labels(i) },
            "policyTypes": ["Ingress", "Egress"],
            "ingress": ingress,
            "egress": egress,
        },
    })
}

/// The cluster DNS (kube-dns / CoreDNS in kube-system), UDP and TCP 53.
fn dns() -> Value {
    json!({
        "to": [{
            "namespaceSelector": {
                "matchLabels": { "kubernetes.io/metadata.name": "kube-system" },
            },
            "podSelector": { "matchLabels": { "k8s-app": "kube-dns" } },
        }],
        "ports": [
            { "protocol": "UDP", "port": 53 },
            { "protocol": "TCP", "port": 53 },
        ],
    })
}

/// Where a member's capsule may dial besides its callees: its allow list, and the gateway of
/// an http driver.
fn destinations(m: &capsule::manifest::Manifest) -> Vec<String> {
    let mut all = m.capabilities.network_allow.clone();
    if m.inference.transport == capsule::manifest::Transport::Http {
        let gateway = m.driver_artifact().and_then(|a| a.gateway.as_ref());
        // An entry names a destination, not the endpoint's path.
        if let Some(Ok(allowed)) = gateway.map(|g| capsule::policy::gateway(&g.endpoint)) {
            all.push(allowed.target().origin());
        }
    }
    all
}

/// Egress rules for the allow list's IP entries; the entries no rule can express.
fn allow_rules(allow: &[String]) -> (Vec<Value>, Vec<String>) {
    let mut rules = Vec::new();
    let mut unrendered = Vec::new();
    for written in allow {
        let Ok(entry) = Entry::parse(written) else {
            // The manifest refused unreadable entries already; the policy allows none either.
            continue;
        };
        let host = entry.host().trim_start_matches('[').trim_end_matches(']');
        if host == "localhost" {
            continue;
        }
        match host.parse::<IpAddr>() {
            Ok(ip) if ip.is_loopback() => {}
            Ok(ip) => {
                let cidr = match ip {
                    IpAddr::V4(_) => format!("{ip}/32"),
                    IpAddr::V6(_) => format!("{ip}/128"),
                };
                // An entry with no port or scheme is refused before this (`render::plan`).
                let mut rule = json!({ "to": [{ "ipBlock": { "cidr": cidr } }] });
                if let Some(port) = entry.implied_port() {
                    rule["ports"] = json!([tcp(port)]);
                }
                rules.push(rule);
            }
            Err(_) => unrendered.push(written.trim().to_owned()),
        }
    }
    (rules, unrendered)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_entries_become_ip_blocks_and_names_are_listed() {
        let allow = [
            "10.1.2.3:443".to_owned(),
            "http://[fd00::1]:8080".to_owned(),
            "api.example.com".to_owned(),
            "localhost:52222".to_owned(),
            "127.0.0.1".to_owned(),
            "https://192.168.0.9".to_owned(),
        ];
        let (rules, unrendered) = allow_rules(&allow);
        assert_eq!(
            rules,
            vec![
                json!({"to": [{"ipBlock": {"cidr": "10.1.2.3/32"}}], "ports": [tcp(443)]}),
                json!({"to": [{"ipBlock": {"cidr": "fd00::1/128"}}], "ports": [tcp(8080)]}),
                json!({"to": [{"ipBlock": {"cidr": "192.168.0.9/32"}}], "ports": [tcp(443)]}),
            ]
        );
        assert_eq!(unrendered, vec!["api.example.com".to_owned()]);
    }
}
