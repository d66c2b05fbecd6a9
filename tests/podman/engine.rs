//! The engine tests/podman.rs plays the rendered files with: podman in a store of the test's
//! own (graph and run roots, network configs, file locks, containers.conf under the test's
//! folder), so the host's podman is neither seen nor touched; whether it can be used here; and
//! the image, imported from a root filesystem laid out from this host's files (nothing pulled).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use super::support::{self, repo_root};

/// The image, in the test's store.
pub const IMAGE: &str = "localhost/murmur-e2e:podman";
/// What the split formation's harnesses run (scripts/harness/lead.sh and worker.sh, and `env`
/// for their shebang; the test reads the pods' files with bash, `wc` and `cat`): copied from
/// this host into the image with the libraries they load.
const TOOLS: [&str; 10] = [
    "bash", "env", "cat", "tr", "wc", "head", "basename", "mktemp", "rm", "sleep",
];

/// podman with a store of its own under `dir`.
pub struct Podman {
    pub dir: PathBuf,
}

impl Podman {
    /// Writes the store's containers.conf and storage.conf.
    pub fn new(dir: PathBuf) -> Podman {
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

    pub fn cmd(&self) -> Command {
        let mut c = Command::new("podman");
        c.env("CONTAINERS_CONF", self.dir.join("containers.conf"))
            .env("CONTAINERS_STORAGE_CONF", self.dir.join("storage.conf"))
            .stdin(Stdio::null());
        c
    }

    /// `podman ARGS`: whether it succeeded, and what it said.
    pub fn run(&self, args: &[&str]) -> (bool, String) {
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
    pub fn ok(&self, args: &[&str]) -> String {
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

    pub fn json(&self, args: &[&str]) -> Value {
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
pub fn podman_usable() -> bool {
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
pub fn build_image(podman: &Podman, rootfs: &Path) {
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
