//! NetworkPolicies evaluated as a cluster evaluates them (matchLabels selectors, namespace
//! selectors, ipBlocks, ports), so that tests/render.rs can ask, for any two pods, whether the
//! rendered policies let one reach the other.

use serde_json::{json, Value};

use super::NAMESPACE;

/// A pod, by its labels and its namespace's.
pub struct Pod {
    pub labels: Value,
    pub namespace: &'static str,
}

pub fn matches(selector: &Value, labels: &Value) -> bool {
    assert!(
        selector.get("matchExpressions").is_none(),
        "this evaluator reads matchLabels only: {selector}"
    );
    selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .map(|want| want.iter().all(|(k, v)| labels.get(k) == Some(v)))
        .unwrap_or(true)
}

/// Whether one `from` / `to` peer of a policy in [`NAMESPACE`] takes in `pod`.
fn peer_takes(peer: &Value, pod: &Pod) -> bool {
    if let Some(block) = peer.get("ipBlock") {
        // Pod addresses are unknown here: only an everything-block could take one in.
        let cidr = block["cidr"].as_str().unwrap();
        return cidr.ends_with("/0");
    }
    let namespace_ok = match peer.get("namespaceSelector") {
        None => pod.namespace == NAMESPACE,
        Some(sel) => matches(sel, &json!({"kubernetes.io/metadata.name": pod.namespace})),
    };
    let pod_ok = match peer.get("podSelector") {
        None => true,
        Some(sel) => matches(sel, &pod.labels),
    };
    namespace_ok && pod_ok
}

fn port_open(rule: &Value, protocol: &str, port: u64) -> bool {
    match rule.get("ports").and_then(Value::as_array) {
        None => true,
        Some(ports) => ports.iter().any(|p| {
            p.get("protocol").and_then(Value::as_str).unwrap_or("TCP") == protocol
                && p.get("port").is_none_or(|v| v.as_u64() == Some(port))
        }),
    }
}

/// Whether the policies let `from` reach `to` on `protocol`/`port`, in one direction's terms:
/// `Ingress` (policies selecting `to`) or `Egress` (policies selecting `from`).
pub fn allows(
    policies: &[&Value],
    direction: &str,
    from: &Pod,
    to: &Pod,
    protocol: &str,
    port: u64,
) -> bool {
    let (subject, other, rules_key, peers_key) = match direction {
        "Ingress" => (to, from, "ingress", "from"),
        _ => (from, to, "egress", "to"),
    };
    let selecting: Vec<&&Value> = policies
        .iter()
        .filter(|p| {
            subject.namespace == NAMESPACE && matches(&p["spec"]["podSelector"], &subject.labels)
        })
        .filter(|p| {
            p["spec"]["policyTypes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t == direction)
        })
        .collect();
    if selecting.is_empty() {
        return true; // not isolated in this direction
    }
    selecting.iter().any(|p| {
        p["spec"][rules_key]
            .as_array()
            .into_iter()
            .flatten()
            .any(|rule| {
                let peers_ok = match rule.get(peers_key).and_then(Value::as_array) {
                    None => true,
                    Some(peers) => peers.iter().any(|peer| peer_takes(peer, other)),
                };
                peers_ok && port_open(rule, protocol, port)
            })
    })
}

/// A member's pod as its rendered Deployment makes it: the template's own labels, so a policy
/// and a Deployment that disagree on them fail the edge table.
pub fn member_pod(deployment: &Value) -> Pod {
    Pod {
        labels: deployment["spec"]["template"]["metadata"]["labels"].clone(),
        namespace: NAMESPACE,
    }
}
