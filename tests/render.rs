//! `mur render --target kubernetes` end to end (DESIGN §11): every shipped formation renders
//! into objects the Kubernetes OpenAPI schemas accept (`kubernetes-validate`, pinned in
//! scripts/setup_test_deps.py); the NetworkPolicies, evaluated as a cluster would, allow
//! exactly the `calls` edges; tokens appear in Secrets and nowhere else, and each door holds
//! the digests of its own; the refusals say what was wrong; and the container's command, run
//! here from the rendered ConfigMap and Secret, serves its card and a task with the rendered
//! token — one code path with `mur run`.

#[path = "render/container.rs"]
mod container;
#[path = "render/netpol.rs"]
mod netpol;
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};

use container::{post, start_container};
use netpol::{allows, member_pod, Pod};
use support::{
    alive, cmdline, descendants, http, message, repo_root, signal, wait_until, Fixture, Home,
};

/// The Kubernetes release the objects are validated against (kubernetes-validate's schemas).
const KUBERNETES: &str = "1.37.0";
const NAMESPACE: &str = "murmur-test";

/// `(exit code, stdout, stderr)` of `mur ARGS` in `home`.
fn mur(home: &Home, args: &[&str]) -> (i32, String, String) {
    home.run(args)
}

fn documents(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).expect("the render is readable YAML"))
        .filter(|v| !v.is_null())
        .collect()
}

/// `mur render --target kubernetes FORMATION EXTRA...`: (exit code, stdout, stderr).
fn render_kubernetes(home: &Home, formation: &str, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec!["render", "--target", "kubernetes", formation];
    args.extend_from_slice(extra);
    mur(home, &args)
}

/// The objects of `formation`, rendered into [`NAMESPACE`].
fn render(home: &Home, formation: &Path) -> Vec<Value> {
    let path = formation.to_str().unwrap();
    let (code, out, err) = render_kubernetes(home, path, &["--namespace", NAMESPACE]);
    assert_eq!(code, 0, "mur render {path} failed: {err}");
    documents(&out)
}

/// Every shipped formation: the manifests under manifests/ with a top-level `formation:` key.
fn shipped_formations() -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![repo_root().join("manifests")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml") {
                let text = std::fs::read_to_string(&path).unwrap();
                if text.lines().any(|l| l.starts_with("formation:")) {
                    found.push(path);
                }
            }
        }
    }
    found.sort();
    assert!(
        found.len() >= 2,
        "the shipped formations are not where this test looks: {found:?}"
    );
    found
}

/// The formation's `calls` edges, from the formation file itself.
fn calls_of(formation: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let doc: Value = serde_yaml::from_str(&std::fs::read_to_string(formation).unwrap()).unwrap();
    doc["formation"]["members"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, m)| {
            let calls = m["calls"]
                .as_array()
                .map(|c| c.iter().map(|c| c.as_str().unwrap().to_owned()).collect())
                .unwrap_or_default();
            (name.clone(), calls)
        })
        .collect()
}

/// A formation in `dir` whose members all run one fixture worker with `extra` manifest keys;
/// answers the formation's path.
fn worker_formation(home: &Home, dir: &str, extra: &'static str, formation: &str) -> PathBuf {
    let worker = Fixture {
        extra,
        ..Fixture::default()
    }
    .yaml();
    home.write(&format!("{dir}/worker.yaml"), &worker);
    home.write(&format!("{dir}/formation.yaml"), formation)
}

fn of_kind<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

fn named<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

/// Runs kubernetes-validate on `file`; a missing validator fails the test, never skips it.
fn validate(file: &Path) -> String {
    let out = Command::new("python3")
        .args(["-m", "kubernetes_validate", "--strict", "-k", KUBERNETES])
        .arg(file)
        .output()
        .expect("python3 runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !text.contains("No module named kubernetes_validate"),
        "kubernetes-validate is not installed: run scripts/setup_test_deps.py (pip install kubernetes-validate==1.37.0)"
    );
    assert!(
        out.status.success(),
        "kubernetes-validate refused {}:\n{text}",
        file.display()
    );
    text
}

#[test]
fn every_shipped_formation_renders_objects_the_kubernetes_schemas_accept() {
    let home = Home::new();
    for formation in shipped_formations() {
        let objects = render(&home, &formation);
        let calls = calls_of(&formation);
        let name = formation
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        // The formation's default-deny, then six objects per member.
        assert_eq!(objects.len(), 1 + 6 * calls.len(), "{name}");
        assert_eq!(objects[0]["kind"], "NetworkPolicy");
        for member in calls.keys() {
            let object = format!("{name}-{member}");
            let wiring = format!("{object}-wiring");
            for (kind, named_as) in [
                ("Secret", &object),
                ("Secret", &wiring),
                ("ConfigMap", &object),
                ("Service", &object),
                ("Deployment", &object),
                ("NetworkPolicy", &object),
            ] {
                let o = named(&objects, kind, named_as);
                assert_eq!(o["metadata"]["namespace"], NAMESPACE);
                assert_eq!(
                    o["metadata"]["labels"]["murmur.dev/formation"],
                    name.as_str()
                );
                assert_eq!(
                    o["metadata"]["labels"]["murmur.dev/member"],
                    member.as_str()
                );
            }
            check_deployment(named(&objects, "Deployment", &object), &object);
        }
        let file = home.write(&format!("{name}.yaml"), &as_yaml(&objects));
        let report = validate(&file);
        let passed = report.matches(" passed for resource ").count();
        assert_eq!(passed, objects.len(), "{name}: {report}");
    }
}

/// The hardening and wiring every member's Deployment carries.
fn check_deployment(d: &Value, object: &str) {
    assert_eq!(d["spec"]["replicas"], 1);
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(pod["automountServiceAccountToken"], false);
    let c = &pod["containers"][0];
    assert_eq!(c["args"], json!(["capsule", "--listen", "0.0.0.0:8080"]));
    // No containerPort: podman would publish it on its host (docs/kubernetes.md).
    assert_eq!(c.get("ports"), None);
    for probe in ["readinessProbe", "livenessProbe"] {
        assert_eq!(
            c[probe]["httpGet"],
            json!({"path": "/.well-known/agent-card.json", "port": 8080,
                   "httpHeaders": [{"name": "Host", "value": "localhost:8080"}]})
        );
    }
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(c["securityContext"]["capabilities"]["drop"], json!(["ALL"]));
    assert_eq!(
        c["securityContext"],
        json!({"allowPrivilegeEscalation": false, "privileged": false,
            "readOnlyRootFilesystem": true, "runAsNonRoot": true,
            "capabilities": {"drop": ["ALL"]}})
    );
    assert!(c["resources"]["requests"]["cpu"].is_string());
    assert!(c["resources"]["requests"]["memory"].is_string());
    // docs/kubernetes.md states these figures.
    assert_eq!(
        c["resources"],
        json!({"requests": {"cpu": "100m", "memory": "128Mi", "ephemeral-storage": "256Mi"},
               "limits": {"cpu": "2", "memory": "1Gi", "ephemeral-storage": "2Gi"}})
    );
    assert_eq!(
        c["env"][0],
        json!({"name": "MURMUR_CAPSULE_CONFIG",
               "valueFrom": {"configMapKeyRef": {"name": object, "key": "capsule.json"}}})
    );
    // The user's own variables (API keys) come from `<formation>-env`, when it exists.
    let formation = d["metadata"]["labels"]["murmur.dev/formation"]
        .as_str()
        .unwrap();
    assert_eq!(
        c["envFrom"],
        json!([{"secretRef": {"name": format!("{formation}-env"), "optional": true}}])
    );
    // The door's own tokens never reach the pod: its Secret `<object>` is named nowhere in the
    // pod; the one Secret mounted is the wiring's own, whole (podman ignores `items`).
    let wiring = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "wiring")
        .unwrap();
    assert_eq!(
        wiring["secret"],
        json!({"secretName": format!("{object}-wiring"), "defaultMode": 0o400, "optional": false})
    );
    assert_eq!(
        secrets_named_in(pod),
        BTreeSet::from([format!("{object}-wiring"), format!("{formation}-env")])
    );
    // podman makes an emptyDir a volume of its host, by name: each member names its own.
    let names: Vec<&str> = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    let (state, tmp) = (format!("{object}-state"), format!("{object}-tmp"));
    assert_eq!(names, ["config", "wiring", &state, &tmp]);
}

/// Every Secret a pod spec names: in a volume, in `envFrom`, in an `env` value.
fn secrets_named_in(pod: &Value) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut add = |v: &Value| {
        if let Some(name) = v.as_str() {
            found.insert(name.to_owned());
        }
    };
    for v in pod["volumes"].as_array().unwrap() {
        add(&v["secret"]["secretName"]);
    }
    for c in pod["containers"].as_array().unwrap() {
        for e in c["envFrom"].as_array().into_iter().flatten() {
            add(&e["secretRef"]["name"]);
        }
        for e in c["env"].as_array().into_iter().flatten() {
            add(&e["valueFrom"]["secretKeyRef"]["name"]);
        }
    }
    found
}

// ---- NetworkPolicies ----

/// For every ordered pair of members (itself included), the rendered policies allow ingress
/// and egress exactly along the formation's `calls`; a client pod reaches the entry and nothing
/// else; an unlabelled pod reaches nothing; every member reaches the cluster DNS.
fn check_edges(
    objects: &[Value],
    formation: &str,
    calls: &BTreeMap<String, BTreeSet<String>>,
    entry: &str,
) {
    let policies = of_kind(objects, "NetworkPolicy");
    let deployment = |m: &str| named(objects, "Deployment", &format!("{formation}-{m}"));
    let pod = |m: &str| member_pod(deployment(m));
    // A policy's port is the pod's own (a Service's port is translated to it before policies
    // apply): the port the container's door listens on, which the Service targets.
    let port = |m: &str| {
        let listen = &deployment(m)["spec"]["template"]["spec"]["containers"][0]["args"][2];
        let listen = listen.as_str().unwrap();
        listen
            .strip_prefix("0.0.0.0:")
            .and_then(|p| p.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("{m} listens on {listen}"))
    };
    for m in calls.keys() {
        let service = named(objects, "Service", &format!("{formation}-{m}"));
        assert!(
            netpol::matches(
                &json!({"matchLabels": service["spec"]["selector"]}),
                &pod(m).labels
            ),
            "{formation}: the Service of {m} selects its pod"
        );
        assert_eq!(service["spec"]["ports"][0]["targetPort"], port(m), "{m}");
    }
    let mut table = Vec::new();
    for (a, callees) in calls {
        for b in calls.keys() {
            let (pa, pb) = (pod(a), pod(b));
            let edge = callees.contains(b);
            let ingress = allows(&policies, "Ingress", &pa, &pb, "TCP", port(b));
            let egress = allows(&policies, "Egress", &pa, &pb, "TCP", port(b));
            table.push(format!(
                "{a}->{b} edge={edge} ingress={ingress} egress={egress}"
            ));
            assert_eq!(
                (ingress, egress),
                (edge, edge),
                "{formation}: {}",
                table.join("\n")
            );
            // Any other port of a callee stays closed.
            assert!(!allows(&policies, "Ingress", &pa, &pb, "TCP", port(b) + 1));
            assert!(!allows(&policies, "Egress", &pa, &pb, "TCP", port(b) + 1));
        }
    }
    let client = Pod {
        labels: json!({"murmur.dev/client": "true"}),
        namespace: NAMESPACE,
    };
    let stranger = Pod {
        labels: json!({"app": "other"}),
        namespace: NAMESPACE,
    };
    let dns = Pod {
        labels: json!({"k8s-app": "kube-dns"}),
        namespace: "kube-system",
    };
    for m in calls.keys() {
        let pod = pod(m);
        assert_eq!(
            allows(&policies, "Ingress", &client, &pod, "TCP", port(m)),
            m == entry,
            "{formation}: client -> {m}"
        );
        assert!(!allows(
            &policies,
            "Ingress",
            &stranger,
            &pod,
            "TCP",
            port(m)
        ));
        assert!(!allows(&policies, "Egress", &pod, &stranger, "TCP", 80));
        assert!(!allows(&policies, "Egress", &pod, &client, "TCP", 8080));
        assert!(
            allows(&policies, "Egress", &pod, &dns, "UDP", 53),
            "{m} -> DNS"
        );
        assert!(
            allows(&policies, "Egress", &pod, &dns, "TCP", 53),
            "{m} -> DNS"
        );
        assert!(!allows(&policies, "Egress", &pod, &dns, "TCP", 443));
    }
}

#[test]
fn network_policies_allow_exactly_the_calls_edges() {
    let home = Home::new();
    for formation in shipped_formations() {
        let objects = render(&home, &formation);
        let doc: Value =
            serde_yaml::from_str(&std::fs::read_to_string(&formation).unwrap()).unwrap();
        let name = doc["formation"]["name"].as_str().unwrap().to_owned();
        let entry = doc["formation"]["entry"].as_str().unwrap().to_owned();
        check_edges(&objects, &name, &calls_of(&formation), &entry);
    }
    // A cycle, a pinned port, and a member nobody calls.
    let formation = worker_formation(
        &home,
        "mesh",
        "exports:\n  peer_tasks:\n    accept: true\n",
        "formation:\n  name: mesh\n  version: \"0.1.0\"\n  entry: hub\n  members:\n    hub:\n      manifest: worker.yaml\n      calls: [a, b]\n    a:\n      manifest: worker.yaml\n      calls: [b]\n    b:\n      manifest: worker.yaml\n      calls: [hub]\n      port: 9090\n    idle:\n      manifest: worker.yaml\n",
    );
    let objects = render(&home, &formation);
    assert_eq!(
        named(&objects, "Service", "mesh-b")["spec"]["ports"][0]["port"],
        9090
    );
    check_edges(&objects, "mesh", &calls_of(&formation), "hub");
}

#[test]
fn allow_list_addresses_become_ip_blocks_and_host_names_are_named_as_not_rendered() {
    let home = Home::new();
    let formation = worker_formation(
        &home,
        "net",
        "capabilities:\n  network:\n    allow:\n      - 10.20.30.40:443\n      - api.example.com\n      - localhost:9999\n",
        "formation:\n  name: net\n  version: \"0.1.0\"\n  entry: solo\n  members:\n    solo:\n      manifest: worker.yaml\n",
    );
    let objects = render(&home, &formation);
    let policy = named(&objects, "NetworkPolicy", "net-solo");
    assert_eq!(
        policy["metadata"]["annotations"],
        json!({"murmur.dev/allow-not-rendered": "api.example.com"})
    );
    let egress = policy["spec"]["egress"].as_array().unwrap();
    assert_eq!(
        egress.last().unwrap(),
        &json!({"to": [{"ipBlock": {"cidr": "10.20.30.40/32"}}], "ports": [{"protocol": "TCP", "port": 443}]})
    );
    assert_eq!(egress.len(), 2, "DNS and the one address: {egress:?}");
    let file = home.write("net.yaml", &as_yaml(&objects));
    validate(&file);
}

#[test]
fn an_http_members_gateway_is_its_egress_where_an_address_names_it() {
    let home = Home::new();
    let http = |endpoint: &str| {
        format!(
            "name: lead\nversion: \"0.1.0\"\nartifacts:\n  - name: murmur/driver-openai\n    version: \"0.19.0\"\n    runtime: driver\n    gateway: {{ endpoint: \"{endpoint}\" }}\ninference:\n  transport: http\n  model: m\n  driver: {{ artifact: murmur/driver-openai }}\n"
        )
    };
    home.write("gw/by-ip.yaml", &http("https://10.9.8.7:8443/v1"));
    home.write("gw/by-name.yaml", &http("https://api.openai.com/v1"));
    let formation = home.write(
        "gw/formation.yaml",
        "formation:\n  name: gw\n  version: \"0.1.0\"\n  entry: ip\n  members:\n    ip:\n      manifest: by-ip.yaml\n    name:\n      manifest: by-name.yaml\n",
    );
    let objects = render(&home, &formation);
    let by_ip = named(&objects, "NetworkPolicy", "gw-ip");
    assert_eq!(
        by_ip["spec"]["egress"].as_array().unwrap().last().unwrap(),
        &json!({"to": [{"ipBlock": {"cidr": "10.9.8.7/32"}}], "ports": [{"protocol": "TCP", "port": 8443}]}),
        "{by_ip}"
    );
    assert!(by_ip["metadata"].get("annotations").is_none(), "{by_ip}");
    // A host name is no address: the policy says so rather than opening all egress.
    let by_name = named(&objects, "NetworkPolicy", "gw-name");
    assert_eq!(
        by_name["metadata"]["annotations"],
        json!({"murmur.dev/allow-not-rendered": "https://api.openai.com:443"})
    );
    assert_eq!(
        by_name["spec"]["egress"].as_array().unwrap().len(),
        1,
        "DNS only: {by_name}"
    );
    let file = home.write("gw.yaml", &as_yaml(&objects));
    validate(&file);
}

fn as_yaml(objects: &[Value]) -> String {
    objects
        .iter()
        .map(|o| format!("---\n{}", serde_yaml::to_string(o).unwrap()))
        .collect()
}

// ---- Tokens ----

/// A Secret's `data` value, decoded: the render writes base64 `data` (podman reads no
/// `stringData`).
fn secret_value(secret: &Value, key: &str) -> String {
    use base64::Engine;
    assert_eq!(secret.get("stringData"), None, "{secret}");
    let encoded = secret["data"][key].as_str().unwrap();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .unwrap();
    String::from_utf8(bytes).unwrap()
}

/// `member -> credential -> token`, from the tokens Secrets' `tokens` lines (a wiring Secret
/// has none).
fn secret_tokens(objects: &[Value]) -> BTreeMap<String, BTreeMap<String, String>> {
    of_kind(objects, "Secret")
        .into_iter()
        .filter(|s| s["data"].get("tokens").is_some())
        .map(|s| {
            let member = s["metadata"]["labels"]["murmur.dev/member"]
                .as_str()
                .unwrap()
                .to_owned();
            let lines = secret_value(s, "tokens");
            let tokens = lines
                .lines()
                .map(|l| {
                    let (c, t) = l.split_once(' ').unwrap();
                    (c.to_owned(), t.to_owned())
                })
                .collect();
            (member, tokens)
        })
        .collect()
}

#[test]
fn tokens_live_in_secrets_only_and_each_door_holds_its_own_digests() {
    let home = Home::new();
    let formation = repo_root().join("manifests/split-agents/formation.yaml");
    let objects = render(&home, &formation);
    let tokens = secret_tokens(&objects);
    assert_eq!(
        tokens["coder"].keys().collect::<Vec<_>>(),
        vec!["member:lead", "operator"]
    );
    assert_eq!(tokens["lead"].keys().collect::<Vec<_>>(), vec!["operator"]);
    let all: Vec<&String> = tokens.values().flat_map(|c| c.values()).collect();
    assert_eq!(all.len(), 3 + 2, "three operators, two member tokens");
    for o in objects.iter().filter(|o| o["kind"] != "Secret") {
        let text = o.to_string();
        for t in &all {
            assert!(t.starts_with("mur_") && t.len() > 40);
            assert!(
                !text.contains(t.as_str()),
                "a token outside a Secret: {text}"
            );
        }
    }
    for (member, creds) in &tokens {
        let secret = named(&objects, "Secret", &format!("split-agents-{member}"));
        assert_eq!(secret_value(secret, "operator"), creds["operator"]);
        let keys = |s: &Value| {
            s["data"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(keys(secret), ["operator", "tokens"]);
        let wiring_secret = named(&objects, "Secret", &format!("split-agents-{member}-wiring"));
        assert_eq!(keys(wiring_secret), ["wiring.json"]);
        assert_eq!(
            wiring_secret["metadata"]["labels"].get("murmur.dev/entry"),
            None
        );
        let config_map = named(&objects, "ConfigMap", &format!("split-agents-{member}"));
        let config: Value =
            serde_json::from_str(config_map["data"]["capsule.json"].as_str().unwrap()).unwrap();
        let digests: BTreeMap<String, String> = config["tokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                (
                    d["credential"].as_str().unwrap().to_owned(),
                    d["sha256"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        let expected: BTreeMap<String, String> = creds
            .iter()
            .map(|(c, t)| (c.clone(), capsule::auth::digest_hex(t)))
            .collect();
        assert_eq!(digests, expected, "{member}'s door holds its own digests");
        // The wiring a member presents to a callee is that callee's member:<self> token; its
        // own door's tokens are not in it, and no other object its pod mounts holds one.
        let text = secret_value(wiring_secret, "wiring.json");
        for t in creds.values() {
            assert!(
                !text.contains(t.as_str()),
                "{member}'s own token in its wiring"
            );
        }
        let wiring: Value = serde_json::from_str(&text).unwrap();
        for (callee, c) in wiring["callees"].as_object().unwrap() {
            assert_eq!(
                c["url"],
                format!("http://split-agents-{callee}.{NAMESPACE}.svc.cluster.local:8080")
            );
            assert_eq!(
                c["token"],
                tokens[callee][&format!("member:{member}")].as_str()
            );
        }
        assert_eq!(config["wiring"], "/var/run/murmur/wiring.json");
    }
    // Every render mints fresh tokens.
    let again = secret_tokens(&render(&home, &formation));
    assert_ne!(again["lead"]["operator"], tokens["lead"]["operator"]);
}

#[test]
fn out_replaces_its_files_all_at_once_and_removes_a_gone_members_file() {
    let home = Home::new();
    let split = repo_root().join("manifests/split");
    let out = home.root.join("rendered");
    let out_s = out.to_str().unwrap();
    let (code, _, err) = render_kubernetes(
        &home,
        split.join("formation.yaml").to_str().unwrap(),
        &["--out", out_s],
    );
    assert_eq!(code, 0, "{err}");
    // The same formation, its member `right` renamed `third`.
    let renamed = home.write(
        "renamed/formation.yaml",
        &format!(
            "formation:\n  name: split\n  version: \"0.1.0\"\n  entry: lead\n  members:\n    lead:\n      manifest: {lead}\n      calls: [left, third]\n    left:\n      manifest: {worker}\n    third:\n      manifest: {worker}\n",
            lead = split.join("lead.yaml").display(),
            worker = split.join("worker.yaml").display(),
        ),
    );
    let (code, stdout, err) =
        render_kubernetes(&home, renamed.to_str().unwrap(), &["--out", out_s]);
    assert_eq!(code, 0, "{err}");
    let written: Vec<String> = ["formation", "member-lead", "member-left", "member-third"]
        .iter()
        .map(|f| out.join(format!("{f}.yaml")).display().to_string())
        .collect();
    assert_eq!(stdout.lines().collect::<Vec<_>>(), written);
    assert_eq!(
        err,
        format!(
            "removed {}: its member is no longer in the formation\n",
            out.join("member-right.yaml").display()
        )
    );
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "formation.yaml",
            "member-lead.yaml",
            "member-left.yaml",
            "member-third.yaml"
        ]
    );

    // A file that cannot be replaced refuses the render before any file is: no member is left
    // with tokens of another render than its callers', and nothing half-written stays.
    let before: Vec<String> = ["formation.yaml", "member-lead.yaml", "member-left.yaml"]
        .iter()
        .map(|f| std::fs::read_to_string(out.join(f)).unwrap())
        .collect();
    std::fs::remove_file(out.join("member-third.yaml")).unwrap();
    std::fs::create_dir(out.join("member-third.yaml")).unwrap();
    let (code, stdout, err) =
        render_kubernetes(&home, renamed.to_str().unwrap(), &["--out", out_s]);
    assert_eq!((code, stdout.as_str()), (1, ""));
    assert_eq!(
        err,
        format!(
            "error[E-RND-004]: cannot write {}: it is a folder\n  hint: pass --out a folder you can write, or leave it out to print to stdout\n",
            out.join("member-third.yaml").display()
        )
    );
    let after: Vec<String> = ["formation.yaml", "member-lead.yaml", "member-left.yaml"]
        .iter()
        .map(|f| std::fs::read_to_string(out.join(f)).unwrap())
        .collect();
    assert_eq!(after, before, "no file was replaced");
    let partial: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".partial"))
        .map(|e| e.file_name())
        .collect();
    assert!(partial.is_empty(), "{partial:?}");
}

#[test]
fn out_writes_a_file_per_member_and_secrets_from_reuses_their_tokens() {
    let home = Home::new();
    let formation = repo_root().join("manifests/split/formation.yaml");
    let out = home.root.join("rendered");
    let (code, stdout, err) = render_kubernetes(
        &home,
        formation.to_str().unwrap(),
        &["--out", out.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    let files: Vec<String> = ["formation", "member-lead", "member-left", "member-right"]
        .iter()
        .map(|f| out.join(format!("{f}.yaml")).display().to_string())
        .collect();
    assert_eq!(stdout.lines().collect::<Vec<_>>(), files);
    let mut first = Vec::new();
    for f in &files {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{f} holds tokens");
        first.extend(documents(&std::fs::read_to_string(f).unwrap()));
    }
    assert_eq!(first.len(), 1 + 3 * 6);
    let (code, again, err) = render_kubernetes(
        &home,
        formation.to_str().unwrap(),
        &["--secrets-from", out.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(secret_tokens(&documents(&again)), secret_tokens(&first));

    // kubectl's form, a List, of Secrets written by hand with `stringData` (the rendered
    // files above hold base64 `data`, as `kubectl get secret -o yaml` prints it).
    let items: Vec<Value> = of_kind(&first, "Secret")
        .into_iter()
        .map(|s| {
            let plain: serde_json::Map<String, Value> = s["data"]
                .as_object()
                .unwrap()
                .keys()
                .map(|k| (k.clone(), json!(secret_value(s, k))))
                .collect();
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": s["metadata"], "stringData": plain})
        })
        .collect();
    let list = home.write(
        "kubectl.yaml",
        &serde_yaml::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": items}))
            .unwrap(),
    );
    let (code, from_list, err) = render_kubernetes(
        &home,
        formation.to_str().unwrap(),
        &["--secrets-from", list.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(secret_tokens(&documents(&from_list)), secret_tokens(&first));

    // Secrets of another formation hold nothing for this one.
    let other = repo_root().join("manifests/split-agents/formation.yaml");
    let (code, stdout, err) = render_kubernetes(
        &home,
        other.to_str().unwrap(),
        &["--secrets-from", out.to_str().unwrap()],
    );
    assert_eq!((code, stdout.as_str()), (1, ""));
    assert_eq!(
        err,
        format!(
            "error[E-RND-003]: member lead: {} holds no Secret for it (labels murmur.dev/formation=split-agents, murmur.dev/member=lead)\n  hint: pass the output of an earlier `mur render` of this formation, or `kubectl get secret -l murmur.dev/formation=NAME -o yaml`; leave out --secrets-from to mint fresh tokens\n",
            out.display()
        )
    );
}

// ---- --persist ----

#[test]
fn persist_puts_each_members_records_on_a_claim_of_that_size() {
    let home = Home::new();
    let formation = repo_root().join("manifests/split/formation.yaml");
    let path = formation.to_str().unwrap();
    let calls = calls_of(&formation);
    let (code, out, err) =
        render_kubernetes(&home, path, &["--namespace", NAMESPACE, "--persist", "1Gi"]);
    assert_eq!(code, 0, "{err}");
    let objects = documents(&out);
    // The formation's default-deny, then seven objects per member: the six, and its claim.
    assert_eq!(objects.len(), 1 + 7 * calls.len());
    let plain = render(&home, &formation);
    let at = |kind: &str, name: &str| {
        objects
            .iter()
            .position(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name}"))
    };
    for member in calls.keys() {
        let object = format!("split-{member}");
        let claim = format!("{object}-data");
        assert_eq!(
            named(&objects, "PersistentVolumeClaim", &claim),
            &json!({
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {
                    "name": claim,
                    "namespace": NAMESPACE,
                    "labels": {"murmur.dev/formation": "split", "murmur.dev/member": member},
                },
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            })
        );
        // Beside its member's Service and Deployment, before the pod that mounts it.
        let claim_at = at("PersistentVolumeClaim", &claim);
        assert_eq!(at("Service", &object) + 1, claim_at);
        assert_eq!(claim_at + 1, at("Deployment", &object));

        let d = named(&objects, "Deployment", &object);
        // One pod at a time: a ReadWriteOnce claim cannot be in two pods on two nodes.
        assert_eq!(d["spec"]["strategy"], json!({"type": "Recreate"}));
        let pod = &d["spec"]["template"]["spec"];
        let c = &pod["containers"][0];
        assert_eq!(
            pod["volumes"].as_array().unwrap().last().unwrap(),
            &json!({"name": claim, "persistentVolumeClaim": {"claimName": claim, "readOnly": false}})
        );
        let mounts = c["volumeMounts"].as_array().unwrap();
        assert_eq!(
            mounts.last().unwrap(),
            &json!({"name": claim, "mountPath": "/var/lib/murmur/records"})
        );
        // The claim is mounted where the capsule keeps its records; the rest of the state stays
        // the pod's emptyDir, mounted before the claim inside it.
        let config_map = named(&objects, "ConfigMap", &object);
        let config: Value =
            serde_json::from_str(config_map["data"]["capsule.json"].as_str().unwrap()).unwrap();
        assert_eq!(config["records_dir"], "/var/lib/murmur/records");
        let state = json!({"name": format!("{object}-state"), "mountPath": "/var/lib/murmur"});
        assert!(mounts[..mounts.len() - 1].contains(&state), "{mounts:?}");
        // Nothing else of the Deployment changes: without the claim it is the one rendered
        // without --persist (which holds no token or session id to differ by).
        let mut without = d.clone();
        let spec = &mut without["spec"]["template"]["spec"];
        spec["volumes"].as_array_mut().unwrap().pop();
        spec["containers"][0]["volumeMounts"]
            .as_array_mut()
            .unwrap()
            .pop();
        assert_eq!(&without, named(&plain, "Deployment", &object));
        check_deployment(named(&plain, "Deployment", &object), &object);
    }
    assert!(of_kind(&plain, "PersistentVolumeClaim").is_empty());
    let file = home.write("persist.yaml", &as_yaml(&objects));
    let report = validate(&file);
    let passed = report.matches(" passed for resource ").count();
    assert_eq!(passed, objects.len(), "{report}");

    // With --out, each member's claim is in its own file, with the objects it belongs to.
    let dir = home.root.join("persisted");
    let (code, _, err) = render_kubernetes(
        &home,
        path,
        &["--out", dir.to_str().unwrap(), "--persist", "500Mi"],
    );
    assert_eq!(code, 0, "{err}");
    for member in calls.keys() {
        let file = dir.join(format!("member-{member}.yaml"));
        let objects = documents(&std::fs::read_to_string(&file).unwrap());
        let claims = of_kind(&objects, "PersistentVolumeClaim");
        assert_eq!(claims.len(), 1, "{}", file.display());
        assert_eq!(
            claims[0]["metadata"]["name"],
            format!("split-{member}-data")
        );
        assert_eq!(
            claims[0]["spec"]["resources"]["requests"]["storage"],
            "500Mi"
        );
    }
    let formation_file = std::fs::read_to_string(dir.join("formation.yaml")).unwrap();
    assert!(of_kind(&documents(&formation_file), "PersistentVolumeClaim").is_empty());
}

/// A pod rescheduled with its claim answers for the tasks its predecessor took: the rendered
/// container is started here, killed, its emptyDirs wiped as a new pod's are, and started again
/// on the claim's folder alone.
#[test]
fn a_member_started_again_on_its_claim_answers_for_its_earlier_tasks() {
    let home = Home::new();
    let formation = worker_formation(
        &home,
        "kept",
        "",
        "formation:\n  name: kept\n  version: \"0.1.0\"\n  entry: solo\n  members:\n    solo:\n      manifest: worker.yaml\n",
    );
    let (code, out, err) =
        render_kubernetes(&home, formation.to_str().unwrap(), &["--persist", "1Gi"]);
    assert_eq!(code, 0, "{err}");
    let objects = documents(&out);
    let operator = secret_tokens(&objects)["solo"]["operator"].clone();
    let pod = &named(&objects, "Deployment", "kept-solo")["spec"]["template"]["spec"];
    let claimed: Vec<&str> = pod["containers"][0]["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| {
            pod["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|v| v["name"] == m["name"] && v.get("persistentVolumeClaim").is_some())
        })
        .map(|m| m["mountPath"].as_str().unwrap())
        .collect();
    assert_eq!(claimed, ["/var/lib/murmur/records"]);
    let root = home.root.join("container");
    let claim = root.join(claimed[0].trim_start_matches('/'));

    let first = start_container(&home, &objects, "kept-solo");
    let resp = post(
        first.port,
        Some(&operator),
        &[],
        "SendMessage",
        message("hello", false),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let task = resp.json()["result"]["task"].clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    // The task store is on the claim (wherever inside the records folder the capsule keeps it).
    assert!(
        files_under(&claim)
            .iter()
            .any(|f| f.file_name().is_some_and(|n| n == "store.sqlite")),
        "{:?}",
        files_under(&claim)
    );
    drop(first);

    // A new pod: every emptyDir is new; only the claim's folder is the one the first pod wrote.
    let kept = home.root.join("claim");
    std::fs::rename(&claim, &kept).unwrap();
    std::fs::remove_dir_all(&root).unwrap();
    std::fs::create_dir_all(claim.parent().unwrap()).unwrap();
    std::fs::rename(&kept, &claim).unwrap();
    let second = start_container(&home, &objects, "kept-solo");
    let resp = post(
        second.port,
        Some(&operator),
        &[],
        "GetTask",
        json!({"id": task["id"]}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let again = &resp.json()["result"];
    assert_eq!(again["id"], task["id"], "{again}");
    assert_eq!(again["status"]["state"], "TASK_STATE_COMPLETED", "{again}");
    assert_eq!(again["artifacts"], task["artifacts"], "{again}");
}

#[test]
fn persist_refuses_a_size_that_is_not_a_storage_quantity() {
    let home = Home::new();
    let split = repo_root().join("manifests/split/formation.yaml");
    let split = split.to_str().unwrap();
    const HINT: &str = "write digits, an optional decimal part and one of the suffixes Ki Mi Gi Ti Pi Ei k M G T P E, such as 1Gi, 500Mi or 10G";
    for bad in ["1GB", "-1Gi", "", "1.5.5Gi", "1 Gi", "1m"] {
        assert_eq!(
            refused(&home, &["render", "--target", "kubernetes", split, "--persist", bad]),
            format!("error[E-CLI-030]: --persist {bad:?} is not a Kubernetes storage quantity\n  hint: {HINT}\n"),
            "--persist {bad:?}"
        );
    }
    assert_eq!(
        refused(&home, &["render", "--target", "kubernetes", split, "--persist=0Gi"]),
        "error[E-CLI-030]: --persist \"0Gi\" requests no storage\n  hint: claim more than zero, such as 1Gi\n"
    );
    // The size is checked before the formation is read, and nothing is written.
    let missing = home.root.join("missing.yaml");
    let out = home.root.join("not-written");
    assert_eq!(
        refused(
            &home,
            &[
                "render",
                "--target",
                "kubernetes",
                missing.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
                "--persist",
                "1GB"
            ]
        ),
        format!("error[E-CLI-030]: --persist \"1GB\" is not a Kubernetes storage quantity\n  hint: {HINT}\n")
    );
    assert!(!out.exists());
}

// ---- Refusals ----

fn refused(home: &Home, args: &[&str]) -> String {
    let (code, out, err) = mur(home, args);
    assert_eq!(code, 1, "mur {args:?} should be refused: {out}");
    assert_eq!(out, "", "nothing is rendered when the render is refused");
    err
}

#[test]
fn a_written_key_beside_a_variable_in_a_flow_mapping_is_refused_and_never_rendered() {
    let home = Home::new();
    // Plain YAML cannot read a `${VAR}` in a flow mapping: the key check once passed such a
    // file unread, and the key reached the ConfigMap. It reads the file as `mur run` does.
    let flow = home.write(
        "flow/worker.yaml",
        "name: keyed\nversion: \"0.1.0\"\nartifacts:\n  - name: murmur/driver-anthropic\n    runtime: driver\n    gateway: { endpoint: https://api.anthropic.com, api_key: sk-ant-literal }\ninference: { transport: http, model: ${MODEL}, driver: { artifact: murmur/driver-anthropic } }\n",
    );
    home.write("flow/.env", "MODEL=m\n");
    let formation = home.write(
        "flow/formation.yaml",
        "formation:\n  name: keyed\n  version: \"0.1.0\"\n  entry: w\n  members:\n    w: { manifest: worker.yaml }\n",
    );
    let (code, out, err) = render_kubernetes(&home, formation.to_str().unwrap(), &[]);
    assert!(
        !out.contains("sk-ant-literal"),
        "the key was rendered: {out}"
    );
    assert_eq!(code, 1, "{err}");
    assert_eq!(
        err,
        format!("error[E-RND-002]: member w: artifacts[0].gateway.api_key is written in {}, which mur render puts in a ConfigMap as it is: anyone who may read the namespace's ConfigMaps would read the key\n  hint: write api_key: ${{YOUR_KEY_VARIABLE}} and put the key in the formation's env Secret (docs/kubernetes.md)\n", flow.display())
    );
}

#[test]
fn refusals_name_what_was_wrong() {
    let home = Home::new();
    let split = repo_root().join("manifests/split/formation.yaml");
    let split = split.to_str().unwrap();
    assert_eq!(
        refused(&home, &["render", "--target", "nomad", split]),
        "error[E-RND-001]: --target \"nomad\" is not a render target\n  hint: use --target kubernetes\n"
    );
    let missing = home.root.join("missing.yaml");
    assert_eq!(
        refused(&home, &["render", "--target", "kubernetes", missing.to_str().unwrap()]),
        format!("error[E-MAN-001]: {}: cannot be read: No such file or directory (os error 2)\n  hint: check the path; relative paths are taken from the current folder (formation members: from the formation's folder)\n", missing.display())
    );
    let worker = repo_root()
        .join("manifests/worker.yaml")
        .canonicalize()
        .unwrap();
    assert_eq!(
        refused(&home, &["render", "--target", "kubernetes", worker.to_str().unwrap()]),
        format!("error[E-RND-002]: {} is a capsule manifest: mur render takes a formation (a top-level formation: key)\n  hint: wrap the capsule in a formation of one member (see manifests/split/formation.yaml)\n", worker.display())
    );
    assert_eq!(
        refused(&home, &["render", "--target", "kubernetes", split, "--namespace", "Team_A"]),
        "error[E-RND-002]: --namespace \"Team_A\" is not a Kubernetes namespace name\n  hint: use lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters\n"
    );

    let file = home.write("a-file", "");
    assert_eq!(
        refused(&home, &["render", "--target", "kubernetes", split, "--out", file.to_str().unwrap()]),
        format!("error[E-RND-004]: cannot write {}: File exists (os error 17)\n  hint: pass --out a folder you can write, or leave it out to print to stdout\n", file.display())
    );
    assert_eq!(
        refused(&home, &["render", "--target", "kubernetes", split, "--secrets-from", missing.to_str().unwrap()]),
        format!("error[E-RND-003]: --secrets-from {}: No such file or directory (os error 2)\n  hint: pass a YAML file (or a folder of them) that `mur render` or `kubectl get secret -o yaml` wrote\n", missing.display())
    );
    let unreadable = home.write("unreadable.yaml", "a: [");
    assert_eq!(
        refused(&home, &["render", "--target", "kubernetes", split, "--secrets-from", unreadable.to_str().unwrap()]),
        format!("error[E-RND-003]: --secrets-from {}: not readable YAML: did not find expected node content at line 2 column 1, while parsing a flow node\n  hint: pass a YAML file (or a folder of them) that `mur render` or `kubectl get secret -o yaml` wrote\n", unreadable.display())
    );
    // An earlier render's Secrets: one member's missing, another's missing a credential.
    let earlier = home.root.join("earlier");
    let (code, _, err) = render_kubernetes(&home, split, &["--out", earlier.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let partial = home.root.join("partial");
    std::fs::create_dir(&partial).unwrap();
    std::fs::copy(
        earlier.join("member-lead.yaml"),
        partial.join("member-lead.yaml"),
    )
    .unwrap();
    assert_eq!(
        refused(&home, &["render", "--target", "kubernetes", split, "--secrets-from", partial.to_str().unwrap()]),
        format!("error[E-RND-003]: member left: {} holds no Secret for it (labels murmur.dev/formation=split, murmur.dev/member=left)\n  hint: pass the output of an earlier `mur render` of this formation, or `kubectl get secret -l murmur.dev/formation=NAME -o yaml`; leave out --secrets-from to mint fresh tokens\n", partial.display())
    );
    let mut right = documents(&std::fs::read_to_string(earlier.join("member-right.yaml")).unwrap());
    let secret = right.iter_mut().find(|o| o["kind"] == "Secret").unwrap();
    let tokens = secret_value(secret, "tokens");
    let without: String = tokens
        .lines()
        .filter(|l| !l.starts_with("member:lead "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(
        without, tokens,
        "the right member's Secret held member:lead"
    );
    use base64::Engine;
    secret["data"]["tokens"] = json!(base64::engine::general_purpose::STANDARD.encode(without));
    std::fs::write(earlier.join("member-right.yaml"), as_yaml(&right)).unwrap();
    let says = refused(
        &home,
        &[
            "render",
            "--target",
            "kubernetes",
            split,
            "--secrets-from",
            earlier.to_str().unwrap(),
        ],
    );
    assert_eq!(
        says,
        format!("error[E-RND-003]: member right: {} has no token for credential member:lead\n  hint: the formation gained a caller or credential since those Secrets were rendered: leave out --secrets-from to mint fresh tokens\n", earlier.display())
    );
    // It mints door tokens: not from inside a harness.
    let (code, out, err) = home
        .mur()
        .args(["render", "--target", "kubernetes", split])
        .env("MURMUR_TASK_TOKEN", "mur_task")
        .output()
        .map(|o| {
            (
                o.status.code(),
                String::from_utf8_lossy(&o.stdout).into_owned(),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            )
        })
        .unwrap();
    assert_eq!((code, out.as_str()), (Some(1), ""));
    assert_eq!(
        err,
        "error[E-CLI-021]: mur render does not run inside a harness: it mints door tokens, and a harness holds only its own task token (MURMUR_TASK_TOKEN)\n  hint: run `mur render` from your own terminal\n"
    );

    // Delegation needs a supervisor beside the parent: refused, naming the member.
    home.write(
        "deleg/child.yaml",
        &Fixture {
            name: "child",
            ..Fixture::default()
        }
        .yaml(),
    );
    let parent = format!(
        "{}capabilities:\n  delegate:\n    allow: [child.yaml]\n",
        Fixture {
            name: "parent",
            ..Fixture::default()
        }
        .yaml()
    );
    let parent_path = home.write("deleg/parent.yaml", &parent);
    let formation = home.write(
        "deleg/formation.yaml",
        "formation:\n  name: deleg\n  version: \"0.1.0\"\n  entry: boss\n  members:\n    boss:\n      manifest: parent.yaml\n",
    );
    assert_eq!(
        refused(&home, &["render", "--target", "kubernetes", formation.to_str().unwrap()]),
        format!("error[E-RND-002]: member boss: capabilities.delegate is not available on Kubernetes: a sub-capsule needs a supervisor beside its parent, which a cluster does not have in this release\n  hint: remove capabilities.delegate from {}, or run the formation with `mur run`\n", parent_path.display())
    );

    // A key written in a manifest would go into its ConfigMap as written: refused.
    let keyed = home.write(
        "keyed/worker.yaml",
        "name: keyed\nversion: \"0.1.0\"\nartifacts:\n  - name: murmur/driver-anthropic\n    runtime: driver\n    gateway: { endpoint: https://api.anthropic.com, api_key: sk-ant-literal }\ninference:\n  transport: http\n  model: m\n  driver: { artifact: murmur/driver-anthropic }\n",
    );
    let formation = home.write(
        "keyed/formation.yaml",
        "formation:\n  name: keyed\n  version: \"0.1.0\"\n  entry: w\n  members:\n    w: { manifest: worker.yaml }\n",
    );
    let said = refused(
        &home,
        &[
            "render",
            "--target",
            "kubernetes",
            formation.to_str().unwrap(),
        ],
    );
    assert_eq!(
        said,
        format!("error[E-RND-002]: member w: artifacts[0].gateway.api_key is written in {}, which mur render puts in a ConfigMap as it is: anyone who may read the namespace's ConfigMaps would read the key\n  hint: write api_key: ${{YOUR_KEY_VARIABLE}} and put the key in the formation's env Secret (docs/kubernetes.md)\n", keyed.display())
    );
    assert!(!said.contains("sk-ant-literal"));
    // An address with no port would open every port of it: refused.
    let open = home.write(
        "open/worker.yaml",
        &format!(
            "{}capabilities:\n  network:\n    allow: [\"10.0.0.7\"]\n",
            Fixture {
                name: "open",
                ..Fixture::default()
            }
            .yaml()
        ),
    );
    let _ = open;
    let formation = home.write(
        "open/formation.yaml",
        "formation:\n  name: open\n  version: \"0.1.0\"\n  entry: w\n  members:\n    w: { manifest: worker.yaml }\n",
    );
    assert_eq!(
        refused(&home, &["render", "--target", "kubernetes", formation.to_str().unwrap()]),
        "error[E-RND-002]: member w: capabilities.network.allow entry \"10.0.0.7\" names no port, and a NetworkPolicy for it would open every port of 10.0.0.7\n  hint: write the port it is reached on (10.0.0.7:443), or its scheme (https://10.0.0.7)\n"
    );

    // The formation checks `mur run` makes are made here, by the same code.
    let unknown = home.write(
        "bad/formation.yaml",
        "formation:\n  name: bad\n  version: \"0.1.0\"\n  entry: lead\n  members:\n    lead:\n      manifest: ../deleg/child.yaml\n      calls: [ghost]\n",
    );
    let by_render = refused(
        &home,
        &[
            "render",
            "--target",
            "kubernetes",
            unknown.to_str().unwrap(),
        ],
    );
    let by_run = refused(&home, &["run", "--manifest", unknown.to_str().unwrap()]);
    assert!(by_render.contains("ghost"), "{by_render}");
    assert_eq!(by_render, by_run);

    // Names Kubernetes cannot take are refused, not bent.
    let deny = home.write(
        "deny/formation.yaml",
        "formation:\n  name: deny\n  version: \"0.1.0\"\n  entry: default-deny\n  members:\n    default-deny:\n      manifest: ../deleg/child.yaml\n",
    );
    assert_eq!(
        refused(&home, &["render", "--target", "kubernetes", deny.to_str().unwrap()]),
        "error[E-RND-002]: member default-deny: \"deny-default-deny\" is the name of the formation's default-deny NetworkPolicy\n  hint: rename the member\n"
    );
    let env = home.write(
        "env/formation.yaml",
        "formation:\n  name: keys\n  version: \"0.1.0\"\n  entry: env\n  members:\n    env:\n      manifest: ../deleg/child.yaml\n",
    );
    assert_eq!(
        refused(&home, &["render", "--target", "kubernetes", env.to_str().unwrap()]),
        "error[E-RND-002]: member env: \"keys-env\" is the name of the Secret of the formation's own variables\n  hint: rename the member\n"
    );
    // `<formation>-<member>-wiring`, its longest name, must be a DNS label: `<formation>-<member>`
    // takes at most 56 characters. The longest renders, and its files pass the schemas.
    let long = |m: usize| {
        home.write(
            &format!("long{m}/formation.yaml"),
            &format!("formation:\n  name: long\n  version: \"0.1.0\"\n  entry: {m}\n  members:\n    {m}:\n      manifest: ../deleg/child.yaml\n", m = "m".repeat(m)),
        )
    };
    let longest = long(51);
    let (code, out, err) = render_kubernetes(&home, longest.to_str().unwrap(), &[]);
    assert_eq!(code, 0, "{err}");
    let objects = documents(&out);
    let object = format!("long-{}", "m".repeat(51));
    assert_eq!(object.len(), 56);
    let wiring = named(&objects, "Secret", &format!("{object}-wiring"));
    assert_eq!(wiring["metadata"]["name"].as_str().unwrap().len(), 63);
    validate(&home.write("longest.yaml", &as_yaml(&objects)));
    assert_eq!(
        refused(&home, &["render", "--target", "kubernetes", long(52).to_str().unwrap()]),
        format!("error[E-RND-002]: member {m}: \"long-{m}\" is too long to name its wiring Secret (long-{m}-wiring is longer than 63 characters)\n  hint: name the formation and its members with letters, digits, '-' and '_', starting with a letter, together at most 55 characters\n", m = "m".repeat(52))
    );
    assert_eq!(
        refused(&home, &["render", "--target", "kubernetes", long(60).to_str().unwrap()]),
        format!("error[E-RND-002]: member {m}: \"long-{m}\" cannot name a Kubernetes Service\n  hint: name the formation and its members with letters, digits, '-' and '_', starting with a letter, together at most 55 characters\n", m = "m".repeat(60))
    );
    // A member named as another's wiring Secret (or emptyDir) would take its name.
    let taken = home.write(
        "taken/formation.yaml",
        "formation:\n  name: taken\n  version: \"0.1.0\"\n  entry: lead\n  members:\n    lead:\n      manifest: ../deleg/child.yaml\n    lead_wiring:\n      manifest: ../deleg/child.yaml\n",
    );
    assert_eq!(
        refused(&home, &["render", "--target", "kubernetes", taken.to_str().unwrap()]),
        "error[E-RND-002]: member lead_wiring: \"taken-lead-wiring\" is the name of member lead's wiring Secret\n  hint: rename the member\n"
    );
    let clash = home.write(
        "clash/formation.yaml",
        "formation:\n  name: clash\n  version: \"0.1.0\"\n  entry: a_b\n  members:\n    a_b:\n      manifest: ../deleg/child.yaml\n    a-b:\n      manifest: ../deleg/child.yaml\n",
    );
    assert_eq!(
        refused(&home, &["render", "--target", "kubernetes", clash.to_str().unwrap()]),
        "error[E-RND-002]: members a_b and a-b both become \"clash-a-b\" in Kubernetes\n  hint: rename one of them: names that differ only in case or '_' against '-' collide\n"
    );
}

#[test]
fn mur_capsule_says_where_its_config_comes_from_and_which_address_it_could_not_take() {
    let home = Home::new();
    let (code, out, err) = mur(&home, &["capsule", "--listen", "127.0.0.1:0"]);
    assert_eq!((code, out.as_str()), (2, ""));
    assert_eq!(
        err,
        "error: mur capsule reads its capsule config (JSON) from MURMUR_CAPSULE_CONFIG: it is unset or unreadable\n  hint: `mur render --target kubernetes` puts it in each member's ConfigMap; to run a manifest here use `mur run`\n"
    );
    // Set, but not a config: serde's own words, with where it stopped.
    let out = home
        .mur()
        .args(["capsule", "--listen", "127.0.0.1:0"])
        .env("MURMUR_CAPSULE_CONFIG", "{\"manifest\": 5}")
        .output()
        .unwrap();
    assert_eq!(
        (out.status.code(), out.stdout.as_slice()),
        (Some(2), &b""[..])
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: mur capsule reads its capsule config (JSON) from MURMUR_CAPSULE_CONFIG: it is not a capsule config (invalid type: integer `5`, expected path string at line 1 column 14)\n  hint: `mur render --target kubernetes` puts it in each member's ConfigMap; to run a manifest here use `mur run`\n"
    );
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let config = json!({
        "manifest": home.root.join("absent.yaml"),
        "session_id": "ses_01a22d3838da77f9bbbcb7c030013286",
        "records_dir": home.root.join("records"),
        "workdir": home.work,
        "url": "http://localhost:1",
        "mur_exe": support::mur_bin(),
        "launch": null,
    });
    let out = home
        .mur()
        .args(["capsule", "--listen", &address])
        .env("MURMUR_CAPSULE_CONFIG", config.to_string())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("error: mur capsule cannot listen on {address}: Address already in use (os error 98)\n  hint: pass --listen HOST:PORT with a free port\n")
    );
}

#[test]
fn token_kubernetes_explains_how_to_read_the_entrys_token_with_kubectl() {
    let home = Home::new();
    let split = repo_root().join("manifests/split/formation.yaml");
    let (code, out, err) = mur(
        &home,
        &[
            "token",
            "--kubernetes",
            "--manifest",
            split.to_str().unwrap(),
            "--namespace",
            "demo",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines().any(|l| l
            == "kubectl -n demo get secret split-lead -o jsonpath='{.data.operator}' | base64 -d"),
        "{out}"
    );
    const ABOUT: &str = "# `mur render --target kubernetes` keeps each member's tokens in its Secret (named <formation>-<member>):\n#   key operator: the door's operator token; key tokens: every credential, `credential token` per line.\n# The entry member's operator token:\n";
    assert_eq!(
        out,
        format!("{ABOUT}kubectl -n demo get secret split-lead -o jsonpath='{{.data.operator}}' | base64 -d\n# Every credential of one member:\nkubectl -n demo get secret FORMATION-MEMBER -o jsonpath='{{.data.tokens}}' | base64 -d\n")
    );
    // The namespace goes into shell commands: one Kubernetes would refuse is refused here.
    let (code, out, err) = mur(&home, &["token", "--kubernetes", "--namespace", "a b;x"]);
    assert_eq!((code, out.as_str()), (1, ""));
    assert_eq!(
        err,
        "error[E-RND-002]: --namespace \"a b;x\" is not a Kubernetes namespace name\n  hint: use lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters\n"
    );
    let (code, out, _) = mur(&home, &["token", "--kubernetes"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("-l murmur.dev/formation=FORMATION,murmur.dev/entry=true"),
        "{out}"
    );
    assert_eq!(
        out,
        format!("{ABOUT}kubectl -n default get secret -l murmur.dev/formation=FORMATION,murmur.dev/entry=true -o jsonpath='{{.items[0].data.operator}}' | base64 -d\n# Every credential of one member:\nkubectl -n default get secret FORMATION-MEMBER -o jsonpath='{{.data.tokens}}' | base64 -d\n")
    );
    // The label it names is on the entry's Secret, and only there.
    let objects = render(&home, &split);
    let entries: Vec<&Value> = of_kind(&objects, "Secret")
        .into_iter()
        .filter(|s| s["metadata"]["labels"]["murmur.dev/entry"] == "true")
        .collect();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["metadata"]["name"], "split-lead");
}

// ---- One code path: the container's command, run here ----

#[test]
fn the_containers_command_serves_the_member_from_the_rendered_files() {
    let home = Home::new();
    let formation = worker_formation(
        &home,
        "pair",
        "exports:\n  peer_tasks:\n    accept: true\n",
        "formation:\n  name: pair\n  version: \"0.1.0\"\n  entry: front\n  members:\n    front:\n      manifest: worker.yaml\n      calls: [back]\n    back:\n      manifest: worker.yaml\n      calls: [front]\n",
    );
    let objects = render(&home, &formation);
    let tokens = secret_tokens(&objects);
    let front = start_container(&home, &objects, "pair-front");

    let card = http(front.port, "GET", "/.well-known/agent-card.json", &[], b"");
    assert_eq!(card.status, 200);
    assert_eq!(card.json()["name"], "fixture");

    // Without a token the door is closed; with the rendered operator token a task completes.
    let resp = post(
        front.port,
        None,
        &[],
        "SendMessage",
        message("hello", false),
    );
    assert_eq!(resp.status, 401, "{}", resp.text());
    let resp = post(
        front.port,
        Some(&tokens["front"]["operator"]),
        &[],
        "SendMessage",
        message("hello", false),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let task = &resp.json()["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "Acknowledged.");

    // Its caller's token, minted for member:back, opens it for a peer task.
    let resp = post(
        front.port,
        Some(&tokens["front"]["member:back"]),
        &[
            ("x-murmur-task-origin", "peer"),
            ("x-murmur-task-trust", "trusted"),
        ],
        "SendMessage",
        message("from back", false),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(
        resp.json()["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    // A token of another door is not one of this door's.
    let resp = post(
        front.port,
        Some(&tokens["back"]["operator"]),
        &[],
        "SendMessage",
        message("x", false),
    );
    assert_eq!(resp.status, 401, "{}", resp.text());

    // Its harnesses come back to the door over loopback, not through the Service.
    let resp = post(
        front.port,
        Some(&tokens["front"]["operator"]),
        &[],
        "SendMessage",
        message("@env", false),
    );
    let answer = resp.json()["result"]["task"]["artifacts"][0]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let env: Value = serde_json::from_str(&answer).unwrap_or_else(|_| panic!("{answer}"));
    assert_eq!(
        env["MURMUR_DOOR_URL"],
        format!("http://127.0.0.1:{}", front.port)
    );

    // The wiring came from the mounted Secret file: the harness guide names the callee.
    let guide = home.root.join("container/var/lib/murmur/records/guide.md");
    assert!(wait_until(Duration::from_secs(5), || guide.exists()));
    let guide = std::fs::read_to_string(guide).unwrap();
    assert!(guide.contains("Members you may call: back."), "{guide}");
    // Laid out as the kubelet mounts it, the pod holds none of its own door's tokens: not in
    // the ConfigMap, not in the wiring Secret, not in what the capsule wrote since.
    let files = files_under(&home.root.join("container"));
    assert!(files
        .iter()
        .any(|f| f.ends_with("var/run/murmur/wiring.json")));
    for f in &files {
        let text = String::from_utf8_lossy(&std::fs::read(f).unwrap()).into_owned();
        for (credential, t) in &tokens["front"] {
            assert!(
                !text.contains(t.as_str()),
                "front's {credential} token in {}",
                f.display()
            );
        }
    }

    // The pod's only murmur process dies (kill -9): nothing its harness started runs on.
    let grandchild = home.root.join("gc.pid");
    let resp = post(
        front.port,
        Some(&tokens["front"]["operator"]),
        &[],
        "SendMessage",
        message(
            &format!("@grandchild {}\n@sleep 120", grandchild.display()),
            true,
        ),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    // The pod runs in fallback containment: the pid file holds a pid of this namespace.
    let mut pid = None;
    assert!(wait_until(Duration::from_secs(30), || {
        pid = std::fs::read_to_string(&grandchild)
            .ok()
            .and_then(|t| t.trim().parse::<u32>().ok());
        pid.is_some()
    }));
    let grandchild = pid.unwrap();
    let below = descendants(front.pid());
    assert!(
        below.contains(&grandchild) || alive(grandchild),
        "{below:?}"
    );
    signal(front.pid(), 9);
    let left = || {
        below
            .iter()
            .chain([&grandchild])
            .copied()
            .filter(|p| alive(*p))
            .collect::<Vec<_>>()
    };
    assert!(
        wait_until(Duration::from_secs(30), || left().is_empty()),
        "still running after kill -9 of mur capsule: {:?}",
        left()
            .iter()
            .map(|p| format!("{p} {}", cmdline(*p)))
            .collect::<Vec<_>>()
    );
}

/// Every file under `dir`, at any depth.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_owned()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            match entry.file_type().unwrap().is_dir() {
                true => dirs.push(path),
                false => files.push(path),
            }
        }
    }
    files
}
