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

#[cfg(test)]
mod tests {
    use super::*;

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
