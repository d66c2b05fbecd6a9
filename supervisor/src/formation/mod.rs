//! Launching a formation (DESIGN §3, §7): the plan (members, pins, calls), the credentials and
//! wiring each member is handed, the launch itself, its supervision (exits, restarts, the
//! stop), and how a member's death is recorded. A capsule manifest is launched as a formation
//! of one, through the same path.

mod failure;
pub mod launch;
pub mod plan;
pub mod restart;
mod supervise;
pub mod wire;

pub use launch::Options;
pub use plan::Plan;
