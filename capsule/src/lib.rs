//! One capsule's runtime: the manifest, the A2A door, the task registry, the harness transport
//! and the trace. The `mur` binary re-executes itself into [`runtime::main`]; nothing here
//! spawns capsules.

pub mod agent;
pub mod allocator;
pub mod auth;
pub mod clock;
pub mod door;
pub mod harness;
pub mod ids;
pub mod manifest;
pub mod runtime;
pub mod session;
pub mod stream;
pub mod tasks;
pub mod text;
pub mod trace;
