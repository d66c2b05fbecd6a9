//! `mur stop ADDRESS`: the session's account of what it leaves running, then its launch's end
//! (a formation member's whole formation), as [`crate::stopping::stop`] does it.

use crate::error::CliResult;
use crate::records;
use crate::stopping::{self, Said};

pub async fn run(address: &str) -> CliResult<i32> {
    let rec = records::resolve_running(Some(address))?;
    stopping::stop(&rec, |said| match said {
        Said::Line(l) => println!("{l}"),
        Said::Warning(w) => eprintln!("{w}"),
    })
    .await?;
    Ok(0)
}
