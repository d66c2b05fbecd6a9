//! `mur token [ADDRESS]`: each credential of a running authenticated session and its token, one
//! per line, `operator <token>` first.

use crate::error::{CliError, CliResult, Code};
use crate::records;
use crate::tokens;

pub fn run(address: Option<&str>) -> CliResult<i32> {
    let rec = records::resolve_running(address)?;
    let list = tokens::load(&rec.session_id);
    if list.is_empty() {
        return Err(CliError::new(
            Code::NoSuchSession,
            format!(
                "session {} serves a public door: it has no tokens",
                rec.session_id
            ),
            "declare network.authentication in the manifest to have tokens minted",
        ));
    }
    for (credential, token) in list {
        println!("{credential} {token}");
    }
    Ok(0)
}
