//! Stamps each build of the capsule with a hash of its version and sources
//! (`MURMUR_BUILD_STAMP`). A keeper binary beside `mur` runs an attempt only when it carries the
//! stamp of the capsule starting it: a `mur-keeper` left from another build is not run
//! (`process::keeper_exe`). A hash rather than a random number, so one source builds one stamp.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=Cargo.toml");
    let mut files = Vec::new();
    sources(Path::new("src"), &mut files);
    files.sort();
    let mut hash = Fnv::default();
    hash.write(env!("CARGO_PKG_VERSION").as_bytes());
    for file in &files {
        hash.write(file.to_string_lossy().as_bytes());
        match std::fs::read(file) {
            Ok(bytes) => hash.write(&bytes),
            Err(e) => panic!("cannot read {}: {e}", file.display()),
        }
    }
    println!("cargo:rustc-env=MURMUR_BUILD_STAMP={:016x}", hash.0);
}

/// Every file under `dir`, depth first.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// FNV-1a, 64 bits: stable across toolchains, unlike std's hasher.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
        // A separator, so that ("ab", "c") and ("a", "bc") differ.
        self.0 = (self.0 ^ 0xff).wrapping_mul(0x0100_0000_01b3);
    }
}
