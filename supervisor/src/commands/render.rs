//! `mur render --target kubernetes FORMATION [--namespace NS] [--image IMAGE] [--out DIR]
//! [--secrets-from FILE]`: the formation's objects as one multi-document YAML on stdout, or a
//! file per member (`member-<name>.yaml`) plus the formation's own (`formation.yaml`) in DIR
//! (docs/kubernetes.md).

use std::path::{Path, PathBuf};

use crate::error::{CliError, CliResult, Code};
use crate::render::{self, yaml, Object, Options, Target};

pub struct RenderArgs {
    pub target: String,
    pub manifest: PathBuf,
    pub namespace: String,
    pub image: String,
    pub out: Option<PathBuf>,
    pub secrets_from: Option<PathBuf>,
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
    let objects = render::kubernetes(
        &args.manifest,
        &Options {
            namespace: args.namespace,
            image: args.image,
            secrets_from: args.secrets_from,
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
/// (they hold tokens); each path written is printed.
fn write_files(dir: &Path, objects: &[Object]) -> CliResult<()> {
    let failed = |path: &Path, e: std::io::Error| {
        CliError::new(
            Code::RenderOutput,
            format!("cannot write {}: {e}", path.display()),
            "pass --out a folder you can write, or leave it out to print to stdout",
        )
    };
    std::fs::create_dir_all(dir).map_err(|e| failed(dir, e))?;
    let mut groups: Vec<(String, Option<&str>)> = vec![("formation".into(), None)];
    for o in objects {
        if let Some(m) = o.member.as_deref() {
            if !groups.iter().any(|(_, g)| *g == Some(m)) {
                groups.push((format!("member-{m}"), Some(m)));
            }
        }
    }
    let mut written = String::new();
    for (file, member) in groups {
        let text = documents(objects, |o| o.member.as_deref() == member)?;
        let path = dir.join(format!("{file}.yaml"));
        capsule::private::write(&path, text.as_bytes()).map_err(|e| failed(&path, e))?;
        written.push_str(&format!("{}\n", path.display()));
    }
    super::emit(&written);
    Ok(())
}
