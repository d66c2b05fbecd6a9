//! The `murmur.yaml` model, `${VAR}` interpolation and validation with `E-MAN-*` error codes.
//! Everything that reads a manifest goes through `load`, `load_str` or `load_document`, and gets
//! back either a fully validated value or one `ManifestError` naming the file, the key path and
//! the fix — so no other module re-checks manifest content.
//!
//! Layout: `load` (files, YAML, `.env`), `limits` (size and nesting, checked before parsing),
//! `reader` (walking `serde_yaml::Value`), `keypath`, `validate` + `artifacts` + `network` +
//! `driver` + `harness` (capsule manifests), `formation`, `model` (the validated types), `builtin` (the
//! `murmur/` artifacts), `interpolate`, `locate` (line/column), `suggest` (did-you-mean), `paths`,
//! `error`.

pub mod approvals;
pub mod artifacts;
pub mod builtin;
pub mod driver;
pub mod error;
pub mod formation;
pub mod harness;
pub mod harness_limits;
pub mod interpolate;
pub mod keypath;
pub mod limits;
pub mod load;
pub mod locate;
pub mod model;
pub mod network;
pub mod paths;
pub mod process;
pub mod reader;
pub mod spend;
pub mod suggest;
pub mod telemetry;
pub mod validate;

#[cfg(test)]
mod tests;

pub use builtin::Builtin;
pub use error::{ErrorCode, ManifestError};
pub use formation::{Formation, Member, OnMemberFailure, Restart, RestartPolicy};
pub use load::{load, load_document, load_str, Document};
pub use model::{
    AfterTask, Artifact, Authentication, Capabilities, ContextLimits, Exports, Gateway,
    HarnessPolicy, Inference, InputDialect, Interrupt, Lifecycle, Manifest, ModelApi, Network,
    OutputDialect, Permissions, ProcessDriver, PromptMode, StateHome, TaskAcceptance, Transport,
    Wall, CONTROL_REQUEST_BOUND,
};
pub use spend::{Price, SpendPolicy, Usd};
