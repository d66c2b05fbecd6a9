//! What of the user's files an attempt may neither read nor change, whatever folders it writes
//! (DESIGN §8, docs/containment.md "The files"): the user's secrets and other murmur homes'
//! records are out of sight, and inside a writable folder the files that decide what the user's
//! next command runs are read-only. A harness that could write them would plant a program for
//! the user to run outside every wall: a replaced `mur`, a manifest with a wider allow list, a git
//! hook, a shell rc file.

use std::path::{Path, PathBuf};

use crate::session::Session;

/// The user's secrets a harness does not see unless `harness.read` grants them: keys, cloud,
/// cluster, registry and package-index credentials, relative to the home folder.
pub const SECRETS: [&str; 14] = [
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
];

/// What decides the user's next command, in any writable folder: git's hooks and config, the
/// files direnv and dotenv load, shell rc and profile files (a work folder may be a home).
pub const NEXT_COMMAND: [&str; 14] = [
    ".git/hooks",
    ".git/config",
    ".envrc",
    ".env",
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
];

/// The user's home, as the capsule was given it.
fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute() && h.as_os_str().len() > 1)
}

/// Hidden from the attempt where they exist: [`SECRETS`] in the user's home, and the running
/// records and records of the default murmur home (`~/.murmur`) when this session's home is
/// another one (`murmur_home`, whose own `run/` and `records/` are covered already), but for
/// what `harness.read` grants.
pub(crate) fn secrets(session: &Session, murmur_home: Option<&Path>) -> Vec<PathBuf> {
    let Some(home) = home() else {
        return vec![session.records_dir.join(crate::store::DIR)];
    };
    let mut hidden: Vec<PathBuf> = SECRETS.iter().map(|s| home.join(s)).collect();
    let default_home = home.join(".murmur");
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    };
    if !murmur_home.is_some_and(|m| same(m, &default_home)) {
        hidden.push(default_home.join("run"));
        hidden.push(default_home.join("records"));
    }
    // The session's own records stay in sight, but for its task store: a harness that could
    // write it could rewrite the answers its door gives after a restart.
    hidden.push(session.records_dir.join(crate::store::DIR));
    // The spend ledger and counters: a harness that could write them could lift its ceiling.
    hidden.push(default_home.join("spend"));
    if let Some(m) = murmur_home {
        hidden.push(m.join("spend"));
    }
    // A `.env` beside this run's manifests holds what `${VAR}` reads: often the provider's key.
    let manifests = std::iter::once(session.manifest.path.as_path())
        .chain(session.run_files.iter().map(PathBuf::as_path));
    for manifest in manifests {
        if let Some(env) = manifest.parent().map(|d| d.join(".env")) {
            if !hidden.contains(&env) {
                hidden.push(env);
            }
        }
    }
    let granted: Vec<PathBuf> = session
        .manifest
        .harness
        .read
        .iter()
        .map(|p| match p.strip_prefix("~") {
            Ok(rest) => home.join(rest),
            Err(_) => p.clone(),
        })
        .collect();
    // A grant names an entry of the list or a folder that holds entries.
    hidden.retain(|h| !granted.iter().any(|g| h.starts_with(g)));
    hidden
}

/// Makes sure a file is at `keeper`, `mur-keeper`'s place beside a `mur` that lies in a writable
/// folder, so that it is protected as the rest: with none there, a harness could plant one for
/// the user's next `mur`. An empty file, as git's own hooks folder is made empty: it holds no
/// build stamp, so no capsule runs it (`process::keeper_exe`). Never follows a link.
fn hold_the_place_of(keeper: &Path) {
    if std::fs::symlink_metadata(keeper).is_err() {
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(keeper);
    }
}

/// Made read-only in the attempt where they exist inside one of `writable`: this run's
/// manifests (the capsule's own, the `.env` beside it, a formation's files), the files its
/// driver's command names, `mur`'s own binary and `mur-keeper` beside it (an empty one held in
/// its place when there is none: [`hold_the_place_of`]), [`NEXT_COMMAND`] in each writable
/// folder (and a `.git` that is a file, pointing elsewhere), and what `harness.protect` adds.
pub(crate) fn protected(
    session: &Session,
    command: &[String],
    writable: &[PathBuf],
) -> Vec<PathBuf> {
    let manifest = &session.manifest;
    let mut paths = vec![manifest.path.clone(), manifest.dir.join(".env")];
    paths.extend(session.run_files.iter().cloned());
    paths.extend(
        command
            .iter()
            .map(PathBuf::from)
            .filter(|p| p.is_absolute() && p.is_file()),
    );
    let real_mur = session.mur_exe.canonicalize().ok();
    for mur in std::iter::once(&session.mur_exe).chain(&real_mur) {
        paths.push(mur.clone());
        let keeper = crate::process::keeper_exe::beside(mur);
        if writable.iter().any(|w| keeper.starts_with(w)) {
            hold_the_place_of(&keeper);
        }
        paths.push(keeper);
    }
    for dir in writable {
        let git = dir.join(".git");
        if git.is_file() {
            paths.push(git.clone());
        } else if git.is_dir() && !git.join("hooks").exists() {
            // An empty hooks folder (git makes one itself) is protected like any other; one
            // the harness could make would run at the user's next commit.
            let _ = std::fs::create_dir(git.join("hooks"));
        }
        paths.extend(NEXT_COMMAND.iter().map(|name| dir.join(name)));
    }
    paths.extend(
        manifest
            .harness
            .protect
            .iter()
            .map(|p| session.workdir.join(p)),
    );
    let mut inside: Vec<PathBuf> = paths
        .into_iter()
        .filter(|p| writable.iter().any(|w| p.starts_with(w) && p != w))
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
        .collect();
    inside.sort();
    inside.dedup();
    inside
}
