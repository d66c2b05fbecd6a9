//! Path handling for manifests: absolute, lexically normalized paths for the manifest itself and
//! for what it names relative to its folder (process commands, `delegate.allow`, formation
//! members). Lexical so that files that do not exist yet still resolve, and equal paths compare
//! equal.

use std::path::{Path, PathBuf};

/// `path` with `.` and `..` removed lexically (symlinks are not resolved).
pub fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir | Component::Prefix(_)) => {}
                _ => out.push(".."),
            },
            other => out.push(other.as_os_str()),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// `path` made absolute against the current folder and normalized.
pub fn absolute(path: &Path) -> PathBuf {
    normalize(&std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()))
}

/// `relative` resolved against `dir` and normalized (an absolute `relative` stays as it is).
pub fn resolve(dir: &Path, relative: &str) -> PathBuf {
    normalize(&dir.join(relative))
}

/// A declared process command with its relative paths made absolute against the manifest's
/// folder `dir`, so the harness runs the same from any working folder (DESIGN §6: "relative
/// paths resolve against the manifest's folder"):
/// - the program (first element) when it contains `/` — as a shell would take it, a path — whether
///   or not it exists yet; a bare name (`python3`) stays a PATH lookup;
/// - any later element that names an existing regular file beside the manifest
///   (`["python3", "harness.py"]`). Options (`-…`) and absolute paths are left alone, and so are
///   folders: `python3 -m pkg` must keep its module name.
pub fn resolve_command(dir: &Path, mut command: Vec<String>) -> Vec<String> {
    for (i, element) in command.iter_mut().enumerate() {
        let relative = Path::new(element.as_str());
        if element.is_empty() || element.starts_with('-') || !relative.is_relative() {
            continue;
        }
        let resolved = resolve(dir, element);
        let is_path = if i == 0 {
            element.contains('/')
        } else {
            resolved.is_file()
        };
        if is_path {
            *element = resolved.to_string_lossy().into_owned();
        }
    }
    command
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_resolve_files_beside_the_manifest() {
        let dir = std::env::temp_dir().join(format!("murmur-paths-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("pkg")).unwrap();
        std::fs::write(dir.join("harness.py"), "").unwrap();
        std::fs::write(dir.join("python3"), "").unwrap();
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let at = |name: &str| dir.join(name).to_string_lossy().into_owned();
        assert_eq!(
            resolve_command(&dir, words(&["python3", "harness.py", "absent.py", "-v"])),
            vec![
                "python3".to_string(),
                at("harness.py"),
                "absent.py".into(),
                "-v".into()
            ],
            "a bare program is a PATH lookup even beside a file of that name"
        );
        assert_eq!(
            resolve_command(&dir, words(&["./run.sh", "-m", "pkg", "/abs/harness.py"])),
            vec![
                at("run.sh"),
                "-m".into(),
                "pkg".into(),
                "/abs/harness.py".into()
            ]
        );
        assert_eq!(
            resolve_command(&dir, words(&["bin/x", "./harness.py"])),
            vec![at("bin/x"), at("harness.py")]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn normalize_is_lexical() {
        assert_eq!(
            normalize(Path::new("/a/b/../c/./d")),
            PathBuf::from("/a/c/d")
        );
        assert_eq!(normalize(Path::new("a/../..")), PathBuf::from(".."));
        assert_eq!(normalize(Path::new("../../x")), PathBuf::from("../../x"));
        assert_eq!(normalize(Path::new("/../x")), PathBuf::from("/x"));
    }
}
