//! `mur render --target kubernetes FORMATION [--namespace NS] [--image IMAGE] [--out DIR]
//! [--secrets-from FILE] [--persist SIZE]`: the formation's objects as one multi-document YAML on stdout, or a
//! file per member (`member-<name>.yaml`) plus the formation's own (`formation.yaml`) in DIR
//! (docs/kubernetes.md).

use std::path::{Path, PathBuf};

use crate::error::{CliError, CliResult, Code};
use crate::render::{self, yaml, Object, Options, Size, Target};

pub struct RenderArgs {
    pub target: String,
    pub manifest: PathBuf,
    pub namespace: String,
    pub image: String,
    pub out: Option<PathBuf>,
    pub secrets_from: Option<PathBuf>,
    /// `--persist SIZE`, as written: checked before the formation is read.
    pub persist: Option<String>,
}

/// The image `mur render` names unless `--image` says otherwise: the Dockerfile's, tagged
/// with this release.
pub fn default_image() -> String {
    format!("murmur:{}", env!("CARGO_PKG_VERSION"))
}

pub fn run(args: RenderArgs) -> CliResult<i32> {
    // It prints tokens: a harness holds its task token and nothing more (DESIGN §3).
    if capsule::process::inside_harness() {
        return Err(CliError::new(
            Code::InsideHarness,
            "mur render does not run inside a harness: it mints door tokens, and a harness holds only its own task token (MURMUR_TASK_TOKEN)",
            "run `mur render` from your own terminal",
        ));
    }
    let Target::Kubernetes = Target::parse(&args.target)?;
    let persist = args.persist.as_deref().map(Size::parse).transpose()?;
    let objects = render::kubernetes(
        &args.manifest,
        &Options {
            namespace: args.namespace,
            image: args.image,
            secrets_from: args.secrets_from,
            persist,
        },
    )?;
    match &args.out {
        None => super::emit(&documents(&objects, |_| true)?),
        Some(dir) => write_files(dir, &objects)?,
    }
    Ok(0)
}

fn documents(objects: &[Object], keep: impl Fn(&Object) -> bool) -> CliResult<String> {
    let values: Vec<_> = objects
        .iter()
        .filter(|o| keep(o))
        .map(|o| &o.value)
        .collect();
    yaml::to_documents(&values)
        .map_err(|why| CliError::new(Code::RenderOutput, why, "report this bug"))
}

/// `formation.yaml` (the formation's own objects) and `member-<name>.yaml` for each member, 0600
/// (they hold tokens); each path written is printed. All or nothing: every file is written
/// beside its place first and renamed into it only once all are written, so a failure (or a
/// kill) leaves the folder as the last render made it, never members with tokens from two
/// renders. A `member-*.yaml` of this formation whose member is gone is removed, so that
/// `kubectl apply -f DIR` cannot bring it back.
fn write_files(dir: &Path, objects: &[Object]) -> CliResult<()> {
    let failed = |path: &Path, e: std::io::Error| {
        CliError::new(
            Code::RenderOutput,
            format!("cannot write {}: {e}", path.display()),
            "pass --out a folder you can write, or leave it out to print to stdout",
        )
    };
    std::fs::create_dir_all(dir).map_err(|e| failed(dir, e))?;
    let mut groups: Vec<(String, Option<&str>)> = vec![("formation.yaml".into(), None)];
    for o in objects {
        if let Some(m) = o.member.as_deref() {
            if !groups.iter().any(|(_, g)| *g == Some(m)) {
                groups.push((format!("member-{m}.yaml"), Some(m)));
            }
        }
    }
    let mut staged: Vec<(PathBuf, PathBuf)> = Vec::new();
    let unstage = |staged: &[(PathBuf, PathBuf)]| {
        for (tmp, _) in staged {
            let _ = std::fs::remove_file(tmp);
        }
    };
    for (file, member) in &groups {
        let text = documents(objects, |o| o.member.as_deref() == *member)?;
        let (tmp, path) = (dir.join(format!(".{file}.partial")), dir.join(file));
        if let Err(e) = capsule::private::write(&tmp, text.as_bytes()) {
            let _ = std::fs::remove_file(&tmp);
            unstage(&staged);
            return Err(failed(&path, e));
        }
        staged.push((tmp, path));
    }
    // What would refuse a rename (a folder in a file's place) refuses them all, before any.
    if let Some((_, path)) = staged.iter().find(|(_, path)| path.is_dir()) {
        unstage(&staged);
        return Err(CliError::new(
            Code::RenderOutput,
            format!("cannot write {}: it is a folder", path.display()),
            "pass --out a folder you can write, or leave it out to print to stdout",
        ));
    }
    let mut written = String::new();
    for (n, (tmp, path)) in staged.iter().enumerate() {
        if let Err(e) = std::fs::rename(tmp, path) {
            unstage(&staged[n..]);
            return Err(failed(path, e));
        }
        written.push_str(&format!("{}\n", path.display()));
    }
    let kept: Vec<&str> = groups.iter().map(|(f, _)| f.as_str()).collect();
    for stale in stale_members(dir, formation_of(objects), &kept) {
        if std::fs::remove_file(&stale).is_ok() {
            eprintln!(
                "removed {}: its member is no longer in the formation",
                stale.display()
            );
        }
    }
    super::emit(&written);
    Ok(())
}

/// The formation's name, from the label every rendered object carries.
fn formation_of(objects: &[Object]) -> Option<&str> {
    objects
        .iter()
        .find_map(|o| o.value["metadata"]["labels"][render::FORMATION_LABEL].as_str())
}

/// The `member-*.yaml` files in `dir`, not in `kept`, that hold this formation's objects (an
/// earlier render's, of a member since removed or renamed).
fn stale_members(dir: &Path, formation: Option<&str>, kept: &[&str]) -> Vec<PathBuf> {
    let Some(formation) = formation else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("member-") && name.ends_with(".yaml") && !kept.contains(&&*name)
        })
        .map(|e| e.path())
        .filter(|p| {
            let objects = std::fs::read_to_string(p).map(|text| yaml::documents(&text));
            let Ok(Ok(objects)) = objects else {
                return false;
            };
            objects
                .iter()
                .any(|o| o["metadata"]["labels"][render::FORMATION_LABEL] == formation)
        })
        .collect()
}
