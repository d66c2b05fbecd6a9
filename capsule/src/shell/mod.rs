//! The http agent's shell (`capabilities.shell.allow`; spec agent-card.md "runningCommands",
//! "Residue items"; a2a-messaging-guide.md "What the cancel names"). The model runs a command
//! with the `bash` tool ([`tool`]); it runs in the jail a harness attempt runs in (same walls,
//! egress proxy and environment list), in the foreground until the model's wait is over, then in
//! the background with a `wrk_` handle. This module owns the session's table of those commands:
//! - a foreground command is moved to the background when its wait ends, or at once when its
//!   task is canceled ([`demote_task`]), and is then a `detached_shell` residue item;
//! - a task that ends while its background commands run lists them as `runningCommands`
//!   ([`Commands::running_of`]);
//! - a background command's result, when it ends on its own, is a task of the session's own in
//!   the command's context, so the model reads it in the same conversation;
//! - the session's end ends every command and all it started ([`end_all`]).

mod line;
mod run;

use std::time::Duration;

pub use crate::held::commands::{cut, Command, Commands, Ended, Place};
pub use crate::held::output::Output;
pub use run::{spec, tool, Call, Shell, TOOL};

/// How long the session's end waits for its commands to be ended.
const END_WITHIN: Duration = Duration::from_secs(10);

/// The session ends: every command of its table is ended with all it started, and its end
/// recorded, before the trace closes.
pub async fn end_all(table: &Commands) {
    let commands = table.all();
    for c in &commands {
        let _ = c.end.send_replace(true);
    }
    let all_ended = async {
        for c in &commands {
            let mut ended = c.ended.subscribe();
            let _ = ended.wait_for(Option::is_some).await;
        }
    };
    let _ = tokio::time::timeout(END_WITHIN, all_ended).await;
}
