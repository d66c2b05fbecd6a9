//! The rendered formation run by a real engine that plays Kubernetes YAML: `podman kube play`
//! (Debian's podman 4.3), tried as a new user without a cluster would (docs/kubernetes.md,
//! "Playing it with podman"). The image is imported from a root filesystem built here around
//! this build's `mur` and the shipped harnesses — nothing is pulled. `manifests/split` is
//! rendered, each member's file is played as written onto one podman network with an alias for
//! its Service's DNS name, and a task sent to the lead's door comes back with both workers'
//! answers. The files played are the files kubernetes-validate accepts: one YAML for both.
//!
//! podman runs in a store of the test's own (its graph and run roots, network configs, locks
//! and containers.conf under the test's folder), so the host's podman is neither seen nor
//! touched, and a guard tears everything down — pods, volumes, Secrets, network, images — even
//! when the test fails. podman needs root here: the test reaches the pods on their bridge.

mod support;

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use support::{alive, cmdline, descendants, http_to, message, repo_root, wait_until, Home};

const IMAGE: &str = "localhost/murmur-e2e:podman";
/// The namespace rendered into the wiring's Service names (`split-left.default.svc...`).
const NAMESPACE: &str = "default";
/// The Kubernetes release the played files are validated against (as tests/render.rs does).
const KUBERNETES: &str = "1.37.0";
/// What the split formation's harnesses run (scripts/harness/lead.sh and worker.sh, and `env`
/// for their shebang): copied from this host into the image with the libraries they load.
const TOOLS: [&str; 10] = [
    "bash", "env", "cat", "tr", "wc", "head", "basename", "mktemp", "rm", "sleep",
];

/// podman with a store of its own under `dir`.
struct Podman {
    dir: PathBuf,
}

impl Podman {
    /// Writes the store's containers.conf and storage.conf.
    fn new(dir: PathBuf) -> Podman {
        std::fs::create_dir_all(&dir).unwrap();
        let at = |p: &str| dir.join(p).display().to_string();
        let storage = format!(
            "[storage]\ndriver = \"overlay\"\ngraphroot = \"{}\"\nrunroot = \"{}\"\n",
            at("graph"),
            at("run")
        );
        // The hard limits of these hosts are below podman's default ulimits (1048576 open
        // files), which runc then fails to set ("error setting rlimits"): the test asks for
        // what this process may give. File locks, under tmp_dir: the shm lock segment is
        // shared by every store on the host.
        let containers = format!(
            "[containers]\ndefault_ulimits = [\"nofile={n}:{n}\", \"nproc={p}:{p}\"]\n\
             [network]\nnetwork_config_dir = \"{}\"\n\
             [engine]\ntmp_dir = \"{}\"\nlock_type = \"file\"\n",
            at("networks"),
            at("tmp"),
            n = hard_limit("Max open files").min(65536),
            p = hard_limit("Max processes").min(4096),
        );
        std::fs::write(dir.join("storage.conf"), storage).unwrap();
        std::fs::write(dir.join("containers.conf"), containers).unwrap();
        Podman { dir }
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new("podman");
        c.env("CONTAINERS_CONF", self.dir.join("containers.conf"))
            .env("CONTAINERS_STORAGE_CONF", self.dir.join("storage.conf"))
            .stdin(Stdio::null());
        c
    }

    /// `podman ARGS`: whether it succeeded, and what it said.
    fn run(&self, args: &[&str]) -> (bool, String) {
        match self.cmd().args(args).output() {
            Ok(o) => (
                o.status.success(),
                format!(
                    "{}{}",
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                ),
            ),
            Err(e) => (false, format!("podman cannot be run: {e}")),
        }
    }

    /// `podman ARGS`, which must succeed; answers its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.cmd().args(args).output().expect("podman runs");
        assert!(
            out.status.success(),
            "podman {} failed: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn json(&self, args: &[&str]) -> Value {
        let out = self.ok(args);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("podman {args:?}: {e}: {out}"))
    }
}

/// A hard limit of this process, from /proc.
fn hard_limit(name: &str) -> u64 {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
    let line = limits.lines().find(|l| l.starts_with(name)).unwrap();
    let hard = line[name.len()..].split_whitespace().nth(1).unwrap();
    hard.parse().unwrap_or(u64::MAX)
}

/// Whether podman can be driven here. Under `CI=true` it must be (scripts/setup_test_deps.py
/// installs it); otherwise a skip says why on stderr, past the harness's capture.
fn podman_usable() -> bool {
    use std::os::unix::fs::MetadataExt;
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    let version = Command::new("podman").arg("--version").output();
    let why = match (root, version) {
        (true, Ok(o)) if o.status.success() => return true,
        (false, _) => "it needs root here: the test reaches the pods on their bridge network, which rootless podman keeps from the host".to_owned(),
        (true, _) => {
            // Where scripts/setup_test_deps.py records why it could not install it.
            let clients = std::env::var_os("MURMUR_INTEROP_CLIENTS")
                .map(PathBuf::from)
                .unwrap_or_else(|| repo_root().join("target/interop-clients"));
            let recorded = clients.join("podman.unavailable");
            std::fs::read_to_string(recorded)
                .map(|w| w.trim().to_owned())
                .unwrap_or_else(|_| "podman is not installed".to_owned())
        }
    };
    let how = "run `python3 scripts/setup_test_deps.py` as root (scripts/test.sh does): it installs podman, iptables and runc from Debian";
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("podman cannot be used, and CI=true needs it: {why}\n{how}");
    }
    let line = format!("\nSKIPPED: podman cannot be used: {why}\n  ({how})\n");
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    false
}

/// Where `name` is on PATH.
fn which(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} is not on PATH: the image is built from this host's"))
}

/// Copies `file` into `rootfs` at `to`, with every library `ldd` says it loads at its own path.
fn copy_with_libraries(rootfs: &Path, file: &Path, to: &str) {
    let place = |from: &Path, at: &Path| {
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::fs::copy(from, at).unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
    };
    place(file, &rootfs.join(to.trim_start_matches('/')));
    let ldd = Command::new("ldd").arg(file).output().expect("ldd runs");
    for lib in String::from_utf8_lossy(&ldd.stdout)
        .split_whitespace()
        .filter(|w| w.starts_with('/'))
    {
        place(Path::new(lib), &rootfs.join(lib.trim_start_matches('/')));
    }
}

/// The image the formation runs in, as the Dockerfile's `demo` target lays it out (`mur` at
/// /usr/local/bin, the harnesses at /scripts/harness, bash), imported from a root filesystem
/// built from this host's files: nothing is pulled.
fn build_image(podman: &Podman, rootfs: &Path) {
    copy_with_libraries(rootfs, Path::new(support::mur_bin()), "/usr/local/bin/mur");
    for tool in TOOLS {
        copy_with_libraries(rootfs, &which(tool), &format!("/usr/bin/{tool}"));
    }
    std::os::unix::fs::symlink("usr/bin", rootfs.join("bin")).unwrap();
    let harness = rootfs.join("scripts/harness");
    std::fs::create_dir_all(&harness).unwrap();
    for script in ["lead.sh", "worker.sh"] {
        let from = repo_root().join("scripts/harness").join(script);
        std::fs::copy(from, harness.join(script)).unwrap();
    }
    std::fs::create_dir_all(rootfs.join("etc")).unwrap();
    std::fs::write(
        rootfs.join("etc/passwd"),
        "root:x:0:0::/root:/bin/bash\nnonroot:x:65532:65532::/var/lib/murmur:/bin/bash\n",
    )
    .unwrap();
    std::fs::create_dir_all(rootfs.join("tmp")).unwrap();
    let mut tar = Command::new("tar")
        .arg("-C")
        .arg(rootfs)
        .args(["-cf", "-", "."])
        .stdout(Stdio::piped())
        .spawn()
        .expect("tar runs");
    let import = podman
        .cmd()
        .args([
            "import",
            "--change",
            "ENTRYPOINT [\"/usr/local/bin/mur\"]",
            "--change",
            "ENV PATH=/usr/local/bin:/usr/bin:/bin",
            "--change",
            "USER 65532:65532",
            "-",
            IMAGE,
        ])
        .stdin(Stdio::from(tar.stdout.take().unwrap()))
        .output()
        .expect("podman import runs");
    assert!(
        tar.wait().unwrap().success(),
        "tar of the root filesystem failed"
    );
    assert!(
        import.status.success(),
        "podman import failed: {}",
        String::from_utf8_lossy(&import.stderr)
    );
}

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
/// Secret.
struct Member {
    file: PathBuf,
    deployment: String,
    labels: Value,
    service: String,
    secret: Value,
}

fn member(file: &Path) -> Member {
    let text = std::fs::read_to_string(file).unwrap();
    let docs: Vec<Value> = serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap())
        .filter(|d| !d.is_null())
        .collect();
    let of = |kind: &str| docs.iter().find(|d| d["kind"] == kind).unwrap().clone();
    let name = |kind: &str| of(kind)["metadata"]["name"].as_str().unwrap().to_owned();
    Member {
        file: file.to_owned(),
        deployment: name("Deployment"),
        labels: of("Deployment")["spec"]["template"]["metadata"]["labels"].clone(),
        service: name("Service"),
        secret: of("Secret"),
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
        played
            .secrets
            .push(m.secret["metadata"]["name"].as_str().unwrap().to_owned());
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

    // Each member has its own state and tmp, and no door is published on the host.
    let volumes = podman.ok(&["volume", "ls", "--format", "{{.Name}}"]);
    for m in &members {
        for v in ["state", "tmp"] {
            let name = format!("{}-{v}", m.deployment);
            assert!(volumes.lines().any(|l| l == name), "no {name}: {volumes}");
        }
    }
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
