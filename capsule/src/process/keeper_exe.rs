//! Which binary a keeper runs. `mur` re-executed costs every attempt the loading of a 13 MB
//! binary twice (the keeper, then its forked init): its page faults and its 10,000
//! relocations, about a third of the keeper's CPU. `mur-keeper`, built beside `mur` from the
//! same sources, is the keeper alone (1.3 MB, 1,300 relocations): a jailed task costs a
//! quarter less CPU with it (BENCHMARKS.md, "A keeper binary of its own").
//!
//! It is opened when the capsule starts and run through that descriptor, never by path (a file
//! put there later is not what runs), and only when it carries this build's stamp
//! (capsule/build.rs): a `mur-keeper` left from another build, or any other file of that name,
//! is never run, and `mur` keeps the attempts itself, as it does when there is none.

use std::ffi::OsString;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The keeper binary's file name, in `mur`'s own folder.
pub const FILE_NAME: &str = "mur-keeper";

/// This build's stamp: every keeper argument list starts with it (`--build`), and a keeper
/// binary is run only when its file holds it.
pub const STAMP: &str = concat!("murmur-build-", env!("MURMUR_BUILD_STAMP"));

/// The most program headers read, and the most bytes of one segment: far past what any
/// `mur-keeper` has; a file past them is not this build's keeper.
const MAX_HEADERS: usize = 64;
const MAX_SEGMENT: u64 = 64 << 20;

/// `mur-keeper` as opened at capsule start (`None`: there was none to open).
static OPENED: OnceLock<Option<File>> = OnceLock::new();
/// What keepers are started as, decided at the first attempt.
static PROGRAM: OnceLock<Program> = OnceLock::new();

/// How a keeper is started: the program to exec and the `argv[0]` it shows in `ps`.
pub(super) struct Program {
    pub exec: OsString,
    pub arg0: OsString,
}

/// Where `mur-keeper` is looked for: beside `mur`.
pub fn beside(mur_exe: &Path) -> PathBuf {
    mur_exe.with_file_name(FILE_NAME)
}

/// What lies beside a `mur`, for `mur install` to say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Beside {
    /// This build's `mur-keeper`: attempts are kept by it.
    ThisBuild,
    /// No `mur-keeper` (or none that opens): `mur` keeps the attempts itself.
    Absent,
    /// A file of that name that is not this build's keeper: `mur` keeps them itself.
    OtherBuild,
}

impl Beside {
    /// The line `mur install` prints after the walls.
    pub fn line(self) -> &'static str {
        match self {
            Beside::ThisBuild => "keeper: mur-keeper, beside mur (this build)",
            Beside::Absent => {
                "keeper: mur itself (no mur-keeper beside it: tasks start slower; cargo build \
                 builds both)"
            }
            Beside::OtherBuild => {
                "keeper: mur itself (the mur-keeper beside it is not this build's: tasks start \
                 slower; install mur and mur-keeper from one build)"
            }
        }
    }
}

/// What lies beside `mur_exe`, checked as a capsule checks it.
pub fn beside_of(mur_exe: &Path) -> Beside {
    match File::open(beside(mur_exe)) {
        Ok(file) if carries_stamp(&file) => Beside::ThisBuild,
        Ok(_) => Beside::OtherBuild,
        Err(_) => Beside::Absent,
    }
}

/// Opens `mur-keeper` beside `mur_exe`, once per process; called as the capsule starts.
pub fn open_beside(mur_exe: &Path) {
    OPENED.get_or_init(|| File::open(beside(mur_exe)).ok());
}

/// The keeper binary: the opened `mur-keeper` when it is this build's, else `mur` itself.
pub(super) fn program() -> &'static Program {
    PROGRAM.get_or_init(|| match OPENED.get().and_then(Option::as_ref) {
        Some(file) if carries_stamp(file) => Program {
            exec: format!("/proc/self/fd/{}", file.as_raw_fd()).into(),
            arg0: FILE_NAME.into(),
        },
        _ => Program {
            exec: super::SELF_EXE.into(),
            arg0: super::SELF_EXE.into(),
        },
    })
}

/// Whether the file holds [`STAMP`] in the data it loads, read through the descriptor that
/// will be run. Only the loaded read-only segments are read (the stamp is a string constant),
/// found from the ELF64 program headers: a debug build's file is mostly debug information,
/// 50 times what is loaded. Anything that is not such a file is no keeper.
fn carries_stamp(file: &File) -> bool {
    let at = |offset: u64, len: usize| -> Option<Vec<u8>> {
        let mut bytes = vec![0; len];
        file.read_exact_at(&mut bytes, offset).ok().map(|()| bytes)
    };
    let Some(header) = at(0, 64) else {
        return false;
    };
    // ELF magic, 64-bit, little-endian.
    if header[..6] != *b"\x7fELF\x02\x01" {
        return false;
    }
    let phoff = u64_at(&header, 0x20);
    let (entry, count) = (
        u16_at(&header, 0x36) as usize,
        u16_at(&header, 0x38) as usize,
    );
    if entry < 56 || count > MAX_HEADERS {
        return false;
    }
    let Some(table) = at(phoff, entry * count) else {
        return false;
    };
    table.chunks_exact(entry).any(|ph| {
        const PT_LOAD: u32 = 1;
        const PF_X: u32 = 1;
        let (kind, flags) = (u32_at(ph, 0), u32_at(ph, 4));
        let (offset, size) = (u64_at(ph, 8), u64_at(ph, 32));
        kind == PT_LOAD
            && flags & PF_X == 0
            && size <= MAX_SEGMENT
            && at(offset, size as usize)
                .is_some_and(|data| memchr::memmem::find(&data, STAMP.as_bytes()).is_some())
    })
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut le = [0; 8];
    le.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(le)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_with(bytes: &[u8]) -> File {
        let path = std::env::temp_dir().join(format!(
            "murmur-keeper-exe-{}-{}",
            std::process::id(),
            bytes.len()
        ));
        File::create(&path)
            .and_then(|mut f| f.write_all(bytes))
            .unwrap();
        let file = File::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        file
    }

    /// A minimal ELF64 file of one loaded segment holding `data`, with `flags` (4: R, 5: R E).
    fn elf(data: &[u8], flags: u32) -> Vec<u8> {
        let mut f = vec![0u8; 64 + 56];
        f[..6].copy_from_slice(b"\x7fELF\x02\x01");
        f[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
        f[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        f[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes());
        let ph = &mut f[64..];
        ph[0..4].copy_from_slice(&1u32.to_le_bytes());
        ph[4..8].copy_from_slice(&flags.to_le_bytes());
        ph[8..16].copy_from_slice(&120u64.to_le_bytes());
        ph[32..40].copy_from_slice(&(data.len() as u64).to_le_bytes());
        f.extend_from_slice(data);
        f
    }

    #[test]
    fn only_a_file_loading_this_builds_stamp_is_a_keeper() {
        let stamped = [b"....".as_slice(), STAMP.as_bytes(), b"...."].concat();
        assert!(carries_stamp(&file_with(&elf(&stamped, 4))));
        // In code, or outside what is loaded (debug information, say), it is not a stamp.
        assert!(!carries_stamp(&file_with(&elf(&stamped, 5))));
        let unloaded = [elf(b"........", 4), STAMP.as_bytes().to_vec()].concat();
        assert!(!carries_stamp(&file_with(&unloaded)));
        let other = STAMP.replace("build-", "build-0");
        assert!(!carries_stamp(&file_with(&elf(other.as_bytes(), 4))));
        assert!(!carries_stamp(&file_with(b"#!/bin/sh\necho planted\n")));
        assert!(!carries_stamp(&file_with(STAMP.as_bytes())));
    }

    #[test]
    fn it_is_looked_for_beside_mur() {
        assert_eq!(
            beside(Path::new("/opt/murmur/bin/mur")),
            Path::new("/opt/murmur/bin/mur-keeper")
        );
    }
}
