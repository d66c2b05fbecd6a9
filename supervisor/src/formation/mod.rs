//! Launching a formation (DESIGN §3, §7): the plan (members, pins, calls), the credentials and
//! wiring each member is handed, its start (`start`), its supervision (exits, restarts, the
//! stop), and how a member's death is recorded. A capsule manifest is launched as a formation
//! of one, through the same path.

mod failure;
pub mod plan;
pub mod restart;
pub mod resume;
pub mod start;
mod supervise;
pub mod wire;

pub use plan::Plan;
pub use start::Options;
