//! Tests of the manifest module as a whole: every error code with its exact text, defaults,
//! presets, the spec's manifests, and formations. Shared helpers live here.

mod capsule;
mod errors;
mod formation;

use crate::manifest::{load_str, ErrorCode, Manifest, ManifestError};
use std::path::{Path, PathBuf};

/// The variables the tests' manifests may name.
pub fn env(name: &str) -> Option<String> {
    match name {
        "ANTHROPIC_API_KEY" => Some("sk-ant-test".to_string()),
        "OPENAI_API_KEY" => Some("sk-openai-test".to_string()),
        "PORT" => Some("52222".to_string()),
        "ACCEPT" => Some("true".to_string()),
        _ => None,
    }
}

/// Loads `text` as `worker/murmur.yaml`.
pub fn parse(text: &str) -> Result<Manifest, ManifestError> {
    load_str(text, Path::new("worker/murmur.yaml"), &env)
}

/// Loads `text`, which must fail, and checks the code, key path and exact printed form.
pub fn refused(text: &str, code: ErrorCode, key_path: &str, printed: &str) -> ManifestError {
    let err = match parse(text) {
        Ok(manifest) => panic!("expected {code}, got {manifest:#?}"),
        Err(err) => err,
    };
    assert_eq!(err.to_string(), printed);
    assert_eq!(err.code(), code);
    assert_eq!(err.key_path(), key_path);
    err
}

/// The smallest valid capsule: one http driver, a model.
pub const MINIMAL: &str = "\
name: my-worker
version: \"0.1.0\"
artifacts:
  - name: murmur/driver-anthropic
    runtime: driver
    gateway: { endpoint: https://api.anthropic.com, api_key: ${ANTHROPIC_API_KEY} }
inference:
  model: claude-sonnet-5
";

/// `MINIMAL` plus more top-level keys.
pub fn with(extra: &str) -> String {
    format!("{MINIMAL}{extra}")
}

/// A fresh folder under the system temp dir holding `files` (path, text).
pub fn tree(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let root = std::env::temp_dir().join(format!("murmur-manifest-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    for (path, text) in files {
        let file = root.join(path);
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(file, text).unwrap();
    }
    root
}
