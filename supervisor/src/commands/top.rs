//! `mur top [ADDRESS] [--once]`: the live view on a terminal; one text snapshot with `--once`
//! or when stdout is not a terminal (a pipe, a file, a script).

use std::io::IsTerminal;

use crate::error::CliResult;
use crate::terminal;
use crate::top;

pub async fn run(address: Option<&str>, once: bool) -> CliResult<i32> {
    if once || !std::io::stdout().is_terminal() {
        super::emit(&terminal::shown(&top::snapshot(address).await?));
        return Ok(0);
    }
    // https://no-color.org: set and not empty.
    let color = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    top::live(address, color).await
}
