//! What a session holds for the parts above it: the harness session each context keeps
//! (`harness_sessions`) and the shell commands the model left running (`commands`, with each
//! one's `output`). Small types
//! below `session.rs`, which holds them, and below the harness and the shell, which use them:
//! they name none of those.

pub mod commands;
pub mod harness_sessions;
pub mod output;
