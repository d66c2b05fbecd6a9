//! Records are private to the user (DESIGN §3): every folder murmur creates under `$MURMUR_HOME`
//! is 0700 and every file in them 0600, because traces hold what agents were asked and answered,
//! and `run/` holds what reaches a live door. Every folder and file murmur writes there is created
//! through here, with its mode given at creation (so it is never briefly readable by others,
//! whatever the umask) and reset when murmur reuses one made before records were private.

use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The mode of every folder murmur creates under `$MURMUR_HOME`.
pub const DIR_MODE: u32 = 0o700;
/// The mode of every file murmur writes under `$MURMUR_HOME`.
pub const FILE_MODE: u32 = 0o600;

/// Creates `dir` and any missing parent, each 0700 from its creation, and makes `dir` 0700 when
/// it already existed.
pub fn create_dir_all(dir: &Path) -> std::io::Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)?;
    std::fs::set_permissions(dir, Permissions::from_mode(DIR_MODE))
}

/// [`create_dir_all`], then every folder from `root` (excluded) down to `dir` made 0700: they
/// are murmur's (`records/…`, `run/`) and may predate this rule, or have been created under a
/// umask that narrowed less than 0700 asks. `root` itself (`$MURMUR_HOME`, which the user may
/// have made) is left as it is unless this call created it.
pub fn create_dir_under(root: &Path, dir: &Path) -> std::io::Result<()> {
    create_dir_all(dir)?;
    let Ok(below) = dir.strip_prefix(root) else {
        return Ok(());
    };
    let mut level = root.to_path_buf();
    for part in below.components() {
        level.push(part);
        std::fs::set_permissions(&level, Permissions::from_mode(DIR_MODE))?;
    }
    Ok(())
}

/// Opens `path` for writing, created 0600; an existing file is made 0600 through the handle,
/// before anything is written to it. `append` keeps what it holds, otherwise it is truncated.
/// A symbolic link at `path` is refused (`O_NOFOLLOW`): a record is never written through one
/// to wherever it points.
pub fn open(path: &Path, append: bool) -> std::io::Result<File> {
    let file = OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    file.set_permissions(Permissions::from_mode(FILE_MODE))?;
    Ok(file)
}

/// Writes `bytes` to `path` (replacing what it held), 0600: into a new file of its own
/// (`O_EXCL | O_NOFOLLOW`, so nothing prepared in advance is written into), then renamed over
/// `path`, which replaces whatever was there — a link included, never what it points at — and
/// leaves no reader a half-written file.
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let fresh = path.with_file_name(format!(".{name}.{}", rand::random::<u64>()));
    let written = OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&fresh)
        .and_then(|mut f| f.write_all(bytes))
        .and_then(|()| std::fs::rename(&fresh, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&fresh);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_link_planted_where_a_record_goes_is_never_written_through() {
        let root = std::env::temp_dir().join(format!("murmur-links-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let victim = root.join("victim");
        std::fs::write(&victim, "theirs").unwrap();
        let trace = root.join("trace.jsonl");
        std::os::unix::fs::symlink(&victim, &trace).unwrap();
        let err = open(&trace, true).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ELOOP), "{err}");
        let tokens = root.join("ses.tokens");
        std::os::unix::fs::symlink(&victim, &tokens).unwrap();
        write(&tokens, b"mine").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "theirs");
        assert_eq!(std::fs::read_to_string(&tokens).unwrap(), "mine");
        assert!(!std::fs::symlink_metadata(&tokens)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(mode(&tokens), FILE_MODE);
        // Nothing of the fresh file is left beside it.
        let left: Vec<_> = std::fs::read_dir(&root)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left.len(), 3, "{left:?}");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn folders_and_files_are_private_new_or_reused() {
        let root = std::env::temp_dir().join(format!("murmur-private-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("records/old")).unwrap();
        std::fs::set_permissions(root.join("records"), Permissions::from_mode(0o755)).unwrap();
        let session = root.join("records/old/new/ses");
        create_dir_under(&root, &session).unwrap();
        for level in [
            "records",
            "records/old",
            "records/old/new",
            "records/old/new/ses",
        ] {
            assert_eq!(mode(&root.join(level)), 0o700, "{level}");
        }

        let file = session.join("trace.jsonl");
        std::fs::write(&file, "old\n").unwrap();
        std::fs::set_permissions(&file, Permissions::from_mode(0o644)).unwrap();
        open(&file, true).unwrap().write_all(b"new\n").unwrap();
        assert_eq!(mode(&file), 0o600);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "old\nnew\n");
        write(&session.join("guide.md"), b"guide").unwrap();
        assert_eq!(mode(&session.join("guide.md")), 0o600);
        write(&file, b"replaced").unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "replaced");
        let _ = std::fs::remove_dir_all(&root);
    }
}
