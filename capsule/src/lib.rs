//! One capsule's runtime: the manifest, the A2A door, the task registry, the harness transport,
//! the process containment, the trace, and the private modes of what it writes under
//! `$MURMUR_HOME`. The `mur` binary re-executes itself into [`runtime::main`]; nothing here
//! spawns capsules.

pub mod agent;
pub mod auth;
pub mod clock;
pub mod door;
pub mod harness;
pub mod ids;
pub mod manifest;
pub mod private;
pub mod process;
pub mod runtime;
pub mod session;
pub mod stream;
pub mod tasks;
pub mod text;
pub mod trace;
