//! One file per `mur` command.

pub mod approve;
pub mod cancel;
pub mod capsule;
pub mod gc;
pub mod helpers;
pub mod install;
pub mod ps;
pub mod render;
pub mod run;
pub mod spend;
pub mod stop;
pub mod token;
pub mod top;
pub mod trace;
pub mod watch;

/// Writes a command's whole output. A reader that went away (`mur trace show | head`) ends the
/// output quietly: `print!` would panic on the broken pipe.
pub fn emit(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
}
