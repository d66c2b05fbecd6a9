//! A member's workload: the capsule config it starts from (the same `CapsuleConfig` `mur run`
//! hands a capsule, in the same `MURMUR_CAPSULE_CONFIG` variable), the ConfigMap carrying that
//! config and the member's manifest, the Deployment running `mur capsule` on the member's port
//! with probes on its agent card and a locked-down security context, and its Service, whose DNS
//! name is the URL its callers are wired to. With `--persist` the Deployment mounts the member's
//! records claim (render::storage) over its records folder.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use capsule::door::CARD_PATH;
use capsule::ids::SessionId;
use capsule::process::containment;
use capsule::runtime::{CapsuleConfig, CONFIG_ENV};
use capsule::wiring::{Source, Wiring};

use super::names::{Derived, Layout, ENV_SECRET};
use super::secrets::WIRING_KEY;
use crate::error::{CliError, CliResult, Code};
use crate::formation::plan::PlannedMember;
use crate::tokens::{self, Minted};

/// Where the ConfigMap is mounted: the manifest is `/etc/murmur/manifest.yaml`, so relative
/// paths in it resolve from `/etc/murmur`.
pub const CONFIG_DIR: &str = "/etc/murmur";
/// Where the wiring Secret is mounted; hidden from harnesses like `run/` where namespaces can
/// hide it (docs/kubernetes.md, "Containment in a container").
pub const SECRET_DIR: &str = "/var/run/murmur";
/// The member's writable state (records, trace, work folder, HOME): an emptyDir.
pub const STATE_DIR: &str = "/var/lib/murmur";
/// The records folder inside [`STATE_DIR`]: the capsule config's `records_dir`, and where
/// `--persist` mounts the member's claim.
const RECORDS: &str = "records";
/// Where the image keeps `mur` (Dockerfile).
pub const MUR_EXE: &str = "/usr/local/bin/mur";
/// The ConfigMap's keys.
pub const MANIFEST_KEY: &str = "manifest.yaml";
pub const CONFIG_KEY: &str = "capsule.json";
pub const CALLEES_KEY: &str = "callees.json";
/// The user the container runs as (distroless's `nonroot`).
const RUN_AS: u32 = 65532;

/// The config member `i`'s capsule starts from: the digests of its door tokens, its wiring file,
/// and paths inside its container.
pub fn capsule_config(layout: &Layout, i: usize, minted: &[Minted]) -> CapsuleConfig {
    CapsuleConfig {
        manifest: Path::new(CONFIG_DIR).join(MANIFEST_KEY),
        session_id: SessionId::mint().to_string(),
        records_dir: records_dir(),
        workdir: Path::new(STATE_DIR).join("work"),
        url: layout.members[i].url.clone(),
        mur_exe: PathBuf::from(MUR_EXE),
        launch: None,
        tokens: tokens::digests(minted),
        // The capsule decides, as `MURMUR_CONTAINMENT` in the Deployment says.
        containment: None,
        run_dir: Some(PathBuf::from(SECRET_DIR)),
        wiring: Some(Source::File(Path::new(SECRET_DIR).join(WIRING_KEY))),
        control: false,
        completion: None,
        completion_token: None,
        harness_url: None,
        protect: Vec::new(),
        storeless: false,
        spend_home: None,
        formation_spend: None,
    }
}

/// Where the member's records (trace, task store) are, in its container.
fn records_dir() -> PathBuf {
    Path::new(STATE_DIR).join(RECORDS)
}

fn encode_failed(what: &str, e: impl std::fmt::Display) -> CliError {
    CliError::new(
        Code::RenderOutput,
        format!("cannot encode {what}: {e}"),
        "report this bug",
    )
}

/// Member `i`'s ConfigMap: its manifest as written, its capsule config, and (for people
/// reading it; the capsule reads the wiring Secret's file) its callees' URLs.
pub fn config_map(
    layout: &Layout,
    i: usize,
    member: &PlannedMember,
    config: &CapsuleConfig,
    wiring: &Wiring,
) -> CliResult<Value> {
    let placed = &layout.members[i];
    let manifest = std::fs::read_to_string(&member.manifest.path).map_err(|e| {
        CliError::new(
            Code::RenderOutput,
            format!(
                "member {}: cannot read {}: {e}",
                placed.name,
                member.manifest.path.display()
            ),
            "check that the manifest is still there and readable",
        )
    })?;
    let config = serde_json::to_string(config).map_err(|e| encode_failed("a capsule config", e))?;
    let callees: serde_json::Map<String, Value> = wiring
        .callees
        .iter()
        .map(|(name, c)| (name.clone(), json!(c.url)))
        .collect();
    let callees = serde_json::to_string(&callees).map_err(|e| encode_failed("the callees", e))?;
    Ok(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": placed.object,
            "namespace": layout.namespace,
            "labels": layout.member_labels(i),
        },
        "data": {
            MANIFEST_KEY: manifest,
            CONFIG_KEY: config,
            CALLEES_KEY: callees,
        },
    }))
}

/// Member `i`'s Deployment: one replica of `mur capsule` (its door is one session's). With
/// `persist`, its records are on its claim (`<object>-data`, render::storage).
pub fn deployment(layout: &Layout, i: usize, image: &str, persist: bool) -> Value {
    let placed = &layout.members[i];
    let labels = layout.member_labels(i);
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": placed.object,
            "namespace": layout.namespace,
            "labels": labels,
        },
        "spec": {
            "replicas": 1,
            // Never two sessions of one member at once; and a ReadWriteOnce claim (`--persist`)
            // cannot be mounted by a second pod on another node while the first still runs.
            "strategy": { "type": "Recreate" },
            "selector": { "matchLabels": labels },
            "template": {
                "metadata": { "labels": labels },
                "spec": {
                    "automountServiceAccountToken": false,
                    "enableServiceLinks": false,
                    "securityContext": {
                        "runAsNonRoot": true,
                        "runAsUser": RUN_AS,
                        "runAsGroup": RUN_AS,
                        "fsGroup": RUN_AS,
                        "seccompProfile": { "type": "RuntimeDefault" },
                    },
                    "containers": [container(placed.port, &placed.object, &layout.formation, image, persist)],
                    "volumes": volumes(&placed.object, persist),
                },
            },
        },
    })
}

/// The pod's volumes. Every optional field is written out (`podman kube play` 4.3 crashes on a
/// secret volume without `optional`), and every volume podman makes a named volume of its host
/// from is named after the member (render::names, [`Derived`]): an emptyDir by its own name,
/// the ConfigMap and the Secret by theirs; the records claim (`persist`) by its own.
fn volumes(object: &str, persist: bool) -> Value {
    let mut volumes = json!([
        { "name": "config", "configMap": { "name": object, "optional": false } },
        {
            "name": "wiring",
            "secret": {
                // The wiring's own Secret, whole: the door's tokens are in `<object>`, which no
                // pod mounts. No `items` (podman 4.3 ignores them; one key needs none).
                "secretName": Derived::Wiring.of(object),
                "defaultMode": 0o400,
                "optional": false,
            },
        },
        { "name": Derived::State.of(object), "emptyDir": {} },
        { "name": Derived::Tmp.of(object), "emptyDir": {} },
    ]);
    if persist {
        let claim = Derived::Records.of(object);
        push(
            &mut volumes,
            json!({
                "name": claim,
                "persistentVolumeClaim": { "claimName": claim, "readOnly": false },
            }),
        );
    }
    volumes
}

/// `item` at the end of the array `list`.
fn push(list: &mut Value, item: Value) {
    if let Some(list) = list.as_array_mut() {
        list.push(item);
    }
}

/// A probe on the agent card, which every door serves without a token. The kubelet would name
/// the pod's IP in `Host`, which the door does not answer for (docs/choices.md "Door"): the probe
/// names the door's loopback address, as a client in the pod would.
fn probe(port: u16, period: u32, failures: u32) -> Value {
    json!({
        "httpGet": {
            "path": CARD_PATH,
            "port": port,
            "httpHeaders": [{ "name": "Host", "value": format!("localhost:{port}") }],
        },
        "periodSeconds": period,
        "failureThreshold": failures,
    })
}

/// The capsule's container: `mur capsule --listen 0.0.0.0:PORT` (docs/kubernetes.md).
fn container(port: u16, object: &str, formation: &str, image: &str, persist: bool) -> Value {
    let mut container = json!({
        "name": "capsule",
        "image": image,
        "args": ["capsule", "--listen", format!("0.0.0.0:{port}")],
        "env": [
            {
                "name": CONFIG_ENV,
                "valueFrom": { "configMapKeyRef": { "name": object, "key": CONFIG_KEY } },
            },
            // A restricted pod gets no unprivileged user namespaces (docs/containment.md).
            { "name": containment::ENV, "value": "fallback" },
            { "name": "HOME", "value": STATE_DIR },
            { "name": "TMPDIR", "value": "/tmp" },
        ],
        // The user's own variables (API keys), when they made that Secret (docs/kubernetes.md).
        "envFrom": [{
            "secretRef": { "name": format!("{formation}-{ENV_SECRET}"), "optional": true },
        }],
        // No `ports`: a containerPort is only a note to a cluster, but `podman kube play` 4.3
        // publishes each on the host, where every member's 8080 would collide. The probes and
        // the Service name the port by number.
        "readinessProbe": probe(port, 5, 3),
        "livenessProbe": probe(port, 20, 6),
        // Bounded on every resource a pod can take from its node: a harness that loops, or
        // fills its emptyDirs, is stopped by the kubelet rather than starving its neighbours.
        "resources": {
            "requests": { "cpu": "100m", "memory": "128Mi", "ephemeral-storage": "256Mi" },
            "limits": { "cpu": "2", "memory": "1Gi", "ephemeral-storage": "2Gi" },
        },
        "securityContext": {
            "allowPrivilegeEscalation": false,
            "privileged": false,
            "readOnlyRootFilesystem": true,
            "runAsNonRoot": true,
            "capabilities": { "drop": ["ALL"] },
        },
        "volumeMounts": [
            { "name": "config", "mountPath": CONFIG_DIR, "readOnly": true },
            { "name": "wiring", "mountPath": SECRET_DIR, "readOnly": true },
            { "name": Derived::State.of(object), "mountPath": STATE_DIR },
            { "name": Derived::Tmp.of(object), "mountPath": "/tmp" },
        ],
    });
    if persist {
        // Over the records folder only, listed after the state emptyDir it sits in: the work
        // folder and HOME stay the pod's own, and what the claim keeps is what a rescheduled
        // pod needs to answer for its earlier tasks.
        push(
            &mut container["volumeMounts"],
            json!({
                "name": Derived::Records.of(object),
                "mountPath": records_dir().to_string_lossy(),
            }),
        );
    }
    container
}

/// Member `i`'s Service: its door on its port, by DNS name.
pub fn service(layout: &Layout, i: usize) -> Value {
    let placed = &layout.members[i];
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": placed.object,
            "namespace": layout.namespace,
            "labels": layout.member_labels(i),
        },
        "spec": {
            "selector": layout.member_labels(i),
            "ports": [{
                "name": "door",
                "port": placed.port,
                "targetPort": placed.port,
                "protocol": "TCP",
            }],
        },
    })
}
