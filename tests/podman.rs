//! The rendered formation run by a real engine that plays Kubernetes YAML: `podman kube play`
//! (Debian's podman 4.3), tried as a new user without a cluster would (docs/kubernetes.md,
//! "Playing it with podman"). The image is imported from a root filesystem built here around
//! this build's `mur` and the shipped harnesses — nothing is pulled. `manifests/split` is
//! rendered, each member's file is played as written onto one podman network with an alias for
//! its Service's DNS name, and a task sent to the lead's door comes back with both workers'
//! answers. The files played are the files kubernetes-validate accepts: one YAML for both.
//! Inside each played pod (podman exec), no file of its volumes holds a token of its own door:
//! only the tokens its wiring presents to its callees are there.
//!
//! podman runs in a store of the test's own (its graph and run roots, network configs, locks
//! and containers.conf under the test's folder), so the host's podman is neither seen nor
//! touched, and a guard tears everything down — pods, volumes, Secrets, network, images — even
//! when the test fails. podman needs root here: the test reaches the pods on their bridge.

#[path = "podman/engine.rs"]
mod engine;
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use engine::{build_image, podman_usable, Podman, IMAGE};
use support::{alive, cmdline, descendants, http_to, message, repo_root, wait_until, Home};

/// The namespace rendered into the wiring's Service names (`split-left.default.svc...`).
const NAMESPACE: &str = "default";
/// The Kubernetes release the played files are validated against (as tests/render.rs does).
const KUBERNETES: &str = "1.37.0";

/// Everything the test made in its podman store, torn down on drop (a failed test too).
struct Played<'a> {
    podman: &'a Podman,
    network: String,
    files: Vec<PathBuf>,
    secrets: Vec<String>,
    torn_down: bool,
}

impl Played<'_> {
    /// Removes what was played, then the network and the images; answers what failed.
    fn tear_down(&mut self) -> Vec<String> {
        self.torn_down = true;
        let p = self.podman;
        let mut failed = Vec::new();
        let mut step = |args: &[&str]| {
            let (ok, said) = p.run(args);
            if !ok {
                failed.push(format!("podman {}: {said}", args.join(" ")));
            }
        };
        for file in self.files.iter().rev() {
            step(&["kube", "down", file.to_str().unwrap()]);
        }
        // podman 4.3's `kube down` leaves the Secrets and the volumes it filled from them.
        for secret in &self.secrets {
            step(&["secret", "rm", secret]);
        }
        step(&["volume", "rm", "--all", "--force"]);
        step(&["network", "rm", "--force", &self.network]);
        step(&["rmi", "--all", "--force"]);
        failed
    }
}

impl Drop for Played<'_> {
    fn drop(&mut self) {
        if !self.torn_down {
            for f in self.tear_down() {
                eprintln!("tearing down: {f}");
            }
        }
    }
}

/// A member's rendered file: its Deployment's name and pod labels, its Service's name, its
/// two Secrets (its door's tokens, its wiring).
struct Member {
    file: PathBuf,
    deployment: String,
    labels: Value,
    service: String,
    secret: Value,
    wiring: Value,
}

fn member(file: &Path) -> Member {
    let text = std::fs::read_to_string(file).unwrap();
    let docs: Vec<Value> = serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap())
        .filter(|d| !d.is_null())
        .collect();
    let of = |kind: &str| docs.iter().find(|d| d["kind"] == kind).unwrap().clone();
    let name = |kind: &str| of(kind)["metadata"]["name"].as_str().unwrap().to_owned();
    let deployment = name("Deployment");
    let secret = |name: &str| {
        docs.iter()
            .find(|d| d["kind"] == "Secret" && d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no Secret {name} in {}", file.display()))
            .clone()
    };
    Member {
        file: file.to_owned(),
        labels: of("Deployment")["spec"]["template"]["metadata"]["labels"].clone(),
        service: name("Service"),
        secret: secret(&deployment),
        wiring: secret(&format!("{deployment}-wiring")),
        deployment,
    }
}

impl Member {
    /// The tokens of its own door: `credential -> token`, from its tokens Secret.
    fn door_tokens(&self) -> BTreeMap<String, String> {
        let tokens: BTreeMap<String, String> = secret_value(&self.secret, "tokens")
            .lines()
            .map(|l| {
                let (c, t) = l.split_once(' ').unwrap();
                (c.to_owned(), t.to_owned())
            })
            .collect();
        assert_eq!(tokens["operator"], secret_value(&self.secret, "operator"));
        tokens
    }

    /// The tokens its wiring presents to its callees.
    fn wiring_tokens(&self) -> BTreeSet<String> {
        let wiring: Value =
            serde_json::from_str(&secret_value(&self.wiring, "wiring.json")).unwrap();
        wiring["callees"]
            .as_object()
            .unwrap()
            .values()
            .map(|c| c["token"].as_str().unwrap().to_owned())
            .collect()
    }
}

/// A Secret's `data` value, decoded.
fn secret_value(secret: &Value, key: &str) -> String {
    use base64::Engine;
    let encoded = secret["data"][key].as_str().unwrap();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .unwrap();
    String::from_utf8(bytes).unwrap()
}

/// The capsule container of a member's pod: the one wearing its pod template's labels.
fn capsule_container(podman: &Podman, m: &Member) -> Value {
    let all = podman.json(&["ps", "--all", "--format", "json"]);
    let wears = |c: &Value| {
        let labels = m.labels.as_object().unwrap();
        labels.iter().all(|(k, v)| &c["Labels"][k] == v)
    };
    all.as_array()
        .unwrap()
        .iter()
        .find(|c| c["IsInfra"] == false && wears(c))
        .cloned()
        .unwrap_or_else(|| panic!("no capsule container of {}: {all}", m.deployment))
}

/// The door of a member's pod, on the test's network, and the Host its clients name.
fn door(podman: &Podman, network: &str, m: &Member) -> (SocketAddr, String) {
    let id = capsule_container(podman, m)["Id"]
        .as_str()
        .unwrap()
        .to_owned();
    let inspect = podman.json(&["inspect", &id]);
    let ip = inspect[0]["NetworkSettings"]["Networks"][network]["IPAddress"]
        .as_str()
        .unwrap_or_else(|| panic!("{} has no address on {network}", m.deployment))
        .parse::<IpAddr>()
        .unwrap();
    let host = format!("{}.{NAMESPACE}.svc.cluster.local:8080", m.service);
    (SocketAddr::new(ip, 8080), host)
}

/// Whether the door at `addr` answers its card with 200 (a refused or reset connection is
/// a no: the capsule may be starting, or restarting).
fn card_answers(addr: SocketAddr, host: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let req = format!(
        "GET /.well-known/agent-card.json HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    );
    let mut head = [0u8; 12];
    s.write_all(req.as_bytes()).is_ok()
        && s.read_exact(&mut head).is_ok()
        && head.starts_with(b"HTTP/1.1 200")
}

/// The host pids of every container of the store (conmon, the container's first process and
/// what runs below it).
fn store_pids(podman: &Podman) -> BTreeSet<u32> {
    let mut pids = BTreeSet::new();
    let all = podman.json(&["ps", "--all", "--format", "json"]);
    for c in all.as_array().unwrap() {
        let inspect = podman.json(&["inspect", c["Id"].as_str().unwrap()]);
        for key in ["Pid", "ConmonPid"] {
            if let Some(pid) = inspect[0]["State"][key].as_u64().filter(|p| *p > 0) {
                pids.insert(pid as u32);
                pids.extend(descendants(pid as u32));
            }
        }
    }
    pids
}

/// Inside each pod, as root with every capability (so no file's mode hides it), nothing under
/// its volumes — nor the capsule's environment — holds a token of its own door, as written
/// or in the base64 podman mounts a Secret's data in. The tokens that are there are exactly
/// those its wiring presents to its callees (the lead's two; the workers call nobody).
fn no_door_token_in_its_pod(podman: &Podman, members: &[Member]) {
    let all: BTreeMap<String, String> = members
        .iter()
        .flat_map(|m| {
            m.door_tokens()
                .into_iter()
                .map(|(c, t)| (t, format!("{}'s {c}", m.deployment)))
        })
        .collect();
    for m in members {
        let files = pod_files(podman, m);
        let found: BTreeSet<String> = all
            .keys()
            .filter(|t| files.iter().any(|(_, text)| holds(text, t)))
            .cloned()
            .collect();
        for (credential, t) in m.door_tokens() {
            let holders: Vec<&str> = files
                .iter()
                .filter(|(_, text)| holds(text, &t))
                .map(|(path, _)| path.as_str())
                .collect();
            assert!(
                holders.is_empty(),
                "{}'s own {credential} token is in its pod: {holders:?}",
                m.deployment
            );
        }
        let whose: Vec<&String> = found.iter().map(|t| &all[t]).collect();
        assert_eq!(found, m.wiring_tokens(), "{}: {whose:?}", m.deployment);
    }
}

/// Reads every file under a member's capsule container's mounts, and its first process's
/// environment, inside the container: `(path, contents)`. Run as root with every capability,
/// so that a file's mode hides nothing; retried while the container restarts (the lead's
/// `after_task: exit`).
fn pod_files(podman: &Podman, m: &Member) -> Vec<(String, Vec<u8>)> {
    // Each file as its path, its size and its bytes, so any byte may be in it.
    const READ: &str = r#"shopt -s globstar dotglob nullglob
for d in "$@"; do
  for f in "$d" "$d"/**; do
    if [[ -f $f ]]; then printf '%s\0%s\0' "$f" "$(wc -c < "$f")"; cat "$f"; fi
  done
done"#;
    let id = capsule_container(podman, m)["Id"]
        .as_str()
        .unwrap()
        .to_owned();
    let inspect = podman.json(&["inspect", &id]);
    let mut places: Vec<String> = inspect[0]["Mounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|mount| mount["Destination"].as_str().unwrap().to_owned())
        .collect();
    places.sort();
    assert_eq!(
        places,
        ["/etc/murmur", "/tmp", "/var/lib/murmur", "/var/run/murmur"],
        "{}",
        m.deployment
    );
    places.push("/proc/1/environ".to_owned());
    let mut args = vec![
        "exec",
        "--user",
        "0",
        "--privileged",
        &id,
        "bash",
        "-c",
        READ,
        "read",
    ];
    args.extend(places.iter().map(String::as_str));
    let mut out = None;
    let read = wait_until(Duration::from_secs(60), || {
        let o = podman.cmd().args(&args).output().expect("podman runs");
        out = Some(o);
        out.as_ref().is_some_and(|o| o.status.success())
    });
    let out = out.unwrap();
    assert!(
        read,
        "podman exec in {} failed: {}",
        m.deployment,
        String::from_utf8_lossy(&out.stderr)
    );
    let files = split_files(&out.stdout);
    let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    for must in [
        "/var/run/murmur/wiring.json",
        "/etc/murmur/capsule.json",
        "/proc/1/environ",
    ] {
        assert!(paths.contains(&must), "{}: {paths:?}", m.deployment);
    }
    files
}

/// `path NUL size NUL bytes`, repeated, as pod_files reads them.
fn split_files(mut out: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    let field = |out: &mut &[u8]| {
        let end = out
            .iter()
            .position(|b| *b == 0)
            .expect("a NUL ends the field");
        let text = String::from_utf8_lossy(&out[..end]).into_owned();
        *out = &out[end + 1..];
        text
    };
    while !out.is_empty() {
        let path = field(&mut out);
        let size: usize = field(&mut out).trim().parse().expect("a size");
        files.push((path, out[..size].to_vec()));
        out = &out[size..];
    }
    files
}

/// Whether `bytes` hold `token`, as written or base64-decoded (podman 4.3 mounts a Secret's
/// data undecoded).
fn holds(bytes: &[u8], token: &str) -> bool {
    use base64::Engine;
    let text = String::from_utf8_lossy(bytes);
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    text.contains(token) || decoded.contains(token)
}

/// kubernetes-validate on the files about to be played: the same YAML both engines take.
fn validate(files: &[PathBuf]) {
    let out = Command::new("python3")
        .args(["-m", "kubernetes_validate", "--strict", "-k", KUBERNETES])
        .args(files)
        .output()
        .expect("python3 runs");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        !text.contains("No module named kubernetes_validate"),
        "kubernetes-validate is not installed: run scripts/setup_test_deps.py"
    );
    assert!(out.status.success(), "kubernetes-validate refused: {text}");
}

#[test]
fn the_rendered_split_formation_answers_under_podman_kube_play() {
    if !podman_usable() {
        return;
    }
    let home = Home::new();
    let podman = Podman::new(home.root.join("podman"));
    let network = format!("murmur-e2e-{}", std::process::id());
    let mut played = Played {
        podman: &podman,
        network: network.clone(),
        files: Vec::new(),
        secrets: Vec::new(),
        torn_down: false,
    };
    build_image(&podman, &home.root.join("rootfs"));

    let formation = repo_root().join("manifests/split/formation.yaml");
    let out = home.root.join("rendered");
    let (code, stdout, err) = home.run(&[
        "render",
        "--target",
        "kubernetes",
        formation.to_str().unwrap(),
        "--image",
        IMAGE,
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "mur render failed: {err}");
    let files: Vec<PathBuf> = stdout.lines().map(PathBuf::from).collect();
    validate(&files);
    let members: Vec<Member> = files
        .iter()
        .filter(|f| {
            f.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("member-")
        })
        .map(|f| member(f))
        .collect();
    assert_eq!(members.len(), 3, "{stdout}");

    // The formation's own file holds its default-deny NetworkPolicy alone: podman plays none.
    let (ok, said) = podman.run(&["kube", "play", out.join("formation.yaml").to_str().unwrap()]);
    assert!(!ok, "podman played a file of NetworkPolicies: {said}");

    podman.ok(&["network", "create", &network]);
    for m in &members {
        played.files.push(m.file.clone());
        for secret in [&m.secret, &m.wiring] {
            let name = secret["metadata"]["name"].as_str().unwrap();
            played.secrets.push(name.to_owned());
        }
        let alias = format!(
            "{network}:alias={}.{NAMESPACE}.svc.cluster.local",
            m.service
        );
        podman.ok(&[
            "kube",
            "play",
            "--network",
            &alias,
            m.file.to_str().unwrap(),
        ]);
    }

    // podman makes a host volume of each ConfigMap, Secret and emptyDir a pod mounts, named
    // after it: each member has its own four, and none is another's. No door is published on
    // the host.
    let volumes: BTreeSet<String> = podman
        .ok(&["volume", "ls", "--format", "{{.Name}}"])
        .lines()
        .map(str::to_owned)
        .collect();
    let expected: BTreeSet<String> = members
        .iter()
        .flat_map(|m| {
            ["", "-wiring", "-state", "-tmp"].map(|suffix| format!("{}{suffix}", m.deployment))
        })
        .collect();
    assert_eq!(volumes, expected);
    for c in podman
        .json(&["ps", "--all", "--format", "json"])
        .as_array()
        .unwrap()
    {
        assert!(
            c["Ports"].as_array().is_none_or(|p| p.is_empty()),
            "published on the host: {c}"
        );
    }

    // Every door answers its card under its Service's name before the task is sent.
    let doors: Vec<(SocketAddr, String)> =
        members.iter().map(|m| door(&podman, &network, m)).collect();
    for (m, (addr, host)) in members.iter().zip(&doors) {
        if !wait_until(Duration::from_secs(60), || card_answers(*addr, host)) {
            let id = capsule_container(&podman, m)["Id"]
                .as_str()
                .unwrap()
                .to_owned();
            let (_, logs) = podman.run(&["logs", "--tail", "20", &id]);
            panic!("the door of {host} did not answer its card within 60 s; its logs:\n{logs}");
        }
    }

    let lead = members
        .iter()
        .position(|m| m.deployment == "split-lead")
        .unwrap();
    let token = secret_value(&members[lead].secret, "operator");
    let bearer = format!("Bearer {token}");
    let (addr, host) = &doors[lead];
    let body = support::request(
        serde_json::json!(1),
        "SendMessage",
        message("count these words for me please", false),
    );
    let resp = http_to(
        *addr,
        "POST",
        "/",
        &[
            ("Host", host),
            ("Content-Type", "application/json"),
            ("A2A-Version", "1.0"),
            ("Authorization", &bearer),
        ],
        body.as_bytes(),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let task = &resp.json()["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    let answer = task["artifacts"][0]["parts"][0]["text"].as_str().unwrap();
    let lines: Vec<&str> = answer.lines().collect();
    assert_eq!(lines.len(), 4, "{answer}");
    assert_eq!(
        lines[0], "left: Acknowledged: count these words",
        "{answer}"
    );
    assert_eq!(lines[2], "right: Acknowledged: for me please", "{answer}");
    for line in [lines[1], lines[3]] {
        assert!(
            line.starts_with("(3 words on 1 lines, answered by worker.sh for task tsk_"),
            "{answer}"
        );
    }
    assert_ne!(lines[1], lines[3], "each worker answered its own task");

    // Inside each pod, no file holds a token of its own door.
    no_door_token_in_its_pod(&podman, &members);
    assert_eq!(members[lead].wiring_tokens().len(), 2);

    // Torn down, nothing of it runs on: not a container's process, not its conmon, not a
    // helper podman started for the store (aardvark-dns), which names the store's folder.
    let pids = store_pids(&podman);
    assert!(!pids.is_empty());
    let failed = played.tear_down();
    assert!(failed.is_empty(), "tearing down: {failed:?}");
    assert_eq!(podman.ok(&["ps", "--all", "--quiet"]), "");
    assert_eq!(podman.ok(&["images", "--quiet"]), "");
    let store = podman.dir.display().to_string();
    let left = || {
        let mut left: Vec<u32> = pids.iter().copied().filter(|p| alive(*p)).collect();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let pid = entry.file_name().to_string_lossy().parse::<u32>();
            if let Ok(pid) = pid {
                if pid != std::process::id() && cmdline(pid).contains(&store) {
                    left.push(pid);
                }
            }
        }
        left
    };
    assert!(
        wait_until(Duration::from_secs(30), || left().is_empty()),
        "still running after the teardown: {:?}",
        left()
            .iter()
            .map(|p| format!("{p} {}", cmdline(*p)))
            .collect::<Vec<_>>()
    );
}
