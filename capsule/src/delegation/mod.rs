//! Delegation (DESIGN §7 delegate-task): a capsule asks its supervisor to start a sub-capsule
//! from one of `capabilities.delegate.allow`, sends nothing itself, and waits for the child's
//! completion at its own door. This module holds what crosses the process boundary: the
//! requests a capsule sends its supervisor over the control socket the supervisor handed it,
//! and what a child is told about the parent its completion goes to.

pub mod completion;
pub mod protocol;
pub mod supervisor;

#[cfg(test)]
mod tests;
