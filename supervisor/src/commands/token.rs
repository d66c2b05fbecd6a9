//! `mur token [ADDRESS]`: each credential of a running authenticated session and its token, one
//! per line, `operator <token>` first. A formation member's own door is addressed by its own
//! session: its operator, its manifest's declared credentials, then `member:<caller>` for each
//! member whose `calls` name it (the order `run/<session>.tokens` keeps).

use crate::error::{CliError, CliResult, Code};
use crate::records;
use crate::tokens;

pub fn run(address: Option<&str>) -> CliResult<i32> {
    // A harness holds its task token and nothing more (DESIGN §3, docs/containment.md).
    if capsule::process::inside_harness() {
        return Err(CliError::new(
            Code::InsideHarness,
            "mur token does not run inside a harness: a harness holds only its own task token (MURMUR_TASK_TOKEN)",
            "call your own capsule's helpers (`mur request-input`) with MURMUR_TASK_TOKEN; run `mur token` from your own terminal",
        ));
    }
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
    let lines: String = list
        .iter()
        .map(|(credential, token)| format!("{credential} {token}\n"))
        .collect();
    super::emit(&lines);
    Ok(0)
}

/// `mur token --kubernetes [--manifest FORMATION] [--namespace NS]`: how to read a rendered
/// formation's tokens with kubectl. Nothing is read here: the tokens live in the cluster's
/// Secrets (docs/kubernetes.md). With the formation, the entry's Secret is named exactly.
pub fn kubernetes(manifest: Option<&std::path::Path>, namespace: &str) -> CliResult<i32> {
    use crate::render::{ENTRY_LABEL, FORMATION_LABEL, OPERATOR_KEY};
    crate::render::check_namespace(namespace)?;
    let entry = match manifest {
        Some(path) => format!("secret {}", crate::render::entry_object(path, namespace)?),
        None => format!("secret -l {FORMATION_LABEL}=FORMATION,{ENTRY_LABEL}=true"),
    };
    let items = match manifest {
        Some(_) => "",
        None => ".items[0]",
    };
    let text = format!(
        "# `mur render --target kubernetes` keeps each member's tokens in its Secret (named <formation>-<member>):\n\
         #   key {OPERATOR_KEY}: the door's operator token; key tokens: every credential, `credential token` per line.\n\
         # The entry member's operator token:\n\
         kubectl -n {namespace} get {entry} -o jsonpath='{{{items}.data.{OPERATOR_KEY}}}' | base64 -d\n\
         # Every credential of one member:\n\
         kubectl -n {namespace} get secret FORMATION-MEMBER -o jsonpath='{{.data.tokens}}' | base64 -d\n"
    );
    super::emit(&text);
    Ok(0)
}
