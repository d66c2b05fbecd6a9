//! `mur install [--manifest M]`: resolves the manifest's artifacts — built-in drivers, and the
//! commands process drivers run (on PATH or by path) — reports what is missing, and says which
//! containment (DESIGN §3) harness attempts will run in, and why. An http driver is built in;
//! its gateway endpoint is checked to accept a connection. A CLI preset's program is asked its
//! version, which is compared with the one this release was tested with. This release installs nothing
//! from a registry: what is missing is named with how to get it.

use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use capsule::manifest::{self, Artifact, Document, Manifest};
use capsule::process::Containment;

use crate::error::{CliError, CliResult, Code};
use crate::records;

/// The program a command names, when it can be found.
fn find_program(program: &str) -> Option<PathBuf> {
    let p = Path::new(program);
    if program.contains('/') {
        return p.is_file().then(|| p.to_path_buf());
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// One line about an artifact, and whether it is ready.
fn resolve(a: &Artifact) -> (String, bool) {
    let version = a.version.as_deref().unwrap_or("-");
    if let Some(gateway) = a.gateway.as_ref().filter(|_| a.is_http_driver()) {
        return match reach(&gateway.endpoint) {
            Ok(at) => (
                format!(
                    "ok       {} {version}: built-in http driver, endpoint {at} answers",
                    a.name
                ),
                true,
            ),
            Err(why) => (format!("missing  {} {version}: {why}", a.name), false),
        };
    }
    let Some(program) = a.process.as_ref().and_then(|p| p.command.first()) else {
        return (
            format!("missing  {} {version}: no command to run", a.name),
            false,
        );
    };
    match find_program(program) {
        Some(path) => match a.builtin.and_then(|b| b.tested_cli()) {
            Some(tested) => (cli_line(a, version, &path, tested), true),
            None => (format!("ok       {} {version}: {}", a.name, path.display()), true),
        },
        None => (
            format!("missing  {} {version}: {program} is not on PATH (install it, or give its path in process.command)", a.name),
            false,
        ),
    }
}

/// How long `mur install` waits for a CLI to print its version.
const VERSION_WITHIN: Duration = Duration::from_secs(15);

/// The line for a preset's CLI: its version, where it was found, and whether this release was
/// tested with it (a warning when its major version differs from the tested one).
fn cli_line(a: &Artifact, version: &str, path: &Path, (cli, tested): (&str, &str)) -> String {
    let at = path.display();
    let found = match crate::launch::probe_output(path, &["--version"], VERSION_WITHIN) {
        Ok(out) => cli_version(&out),
        Err(why) => return format!("ok       {} {version}: {cli} at {at}; its version could not be read ({cli} --version {why})", a.name),
    };
    let Some(found) = found else {
        return format!(
            "ok       {} {version}: {cli} at {at}; its version could not be read",
            a.name
        );
    };
    let major = |v: &str| v.split('.').next().unwrap_or_default().to_owned();
    let verdict = if found == tested {
        "tested with this release".to_owned()
    } else if major(&found) == major(tested) {
        format!("this release was tested with {tested}")
    } else {
        format!("warning: untested major version; this release was tested with {cli} {tested}, and its flags may differ (docs/agent-clis.md)")
    };
    format!(
        "ok       {} {version}: {cli} {found} at {at} ({verdict})",
        a.name
    )
}

/// The first word of `--version` output shaped like a version (`2.1.332 (Claude Code)`,
/// `codex-cli 0.171.0`).
fn cli_version(out: &str) -> Option<String> {
    out.split_whitespace()
        .find(|w| {
            w.split('.').count() >= 2
                && w.split('.')
                    .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        })
        .map(str::to_owned)
}

/// How long `mur install` waits for an endpoint to accept a connection.
const REACH_WITHIN: Duration = Duration::from_secs(3);

/// Whether an http driver's endpoint is usable and accepts a TCP connection (a quick check:
/// nothing is sent, no key is used). Answers `host:port`, or what is wrong.
fn reach(endpoint: &str) -> Result<String, String> {
    let parsed = capsule::inference::Endpoint::parse(endpoint, None).map_err(|e| e.0)?;
    let (host, port) = parsed.host_port();
    let at = parsed.shown();
    let addrs: Vec<_> = (host, port)
        .to_socket_addrs()
        .map_err(|e| {
            format!("cannot resolve {host} ({e}); check gateway.endpoint, or this machine's DNS")
        })?
        .collect();
    let mut last = None;
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, REACH_WITHIN) {
            Ok(_) => return Ok(at),
            Err(e) => last = Some(e),
        }
    }
    let why = last
        .map(|e| e.to_string())
        .unwrap_or_else(|| "no address".into());
    Err(format!(
        "nothing answers at {at} ({why}); start the server, or fix gateway.endpoint"
    ))
}

/// The containment `mur run` would choose here, probed the same way.
fn containment() -> Result<Containment, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the mur binary: {e}"))?;
    let run_dir = records::run_dir();
    Containment::detect(
        &exe,
        vec![run_dir].into_iter().filter(|d| d.is_dir()).collect(),
    )
}

pub fn run(manifest_path: &Path) -> CliResult<i32> {
    let document =
        manifest::load_document(manifest_path).map_err(|e| CliError::Formatted(e.to_string()))?;
    // A formation's members, each under its name; a capsule alone, as it is.
    let capsules: Vec<(Option<String>, Manifest)> = match document {
        Document::Capsule(m) => vec![(None, *m)],
        Document::Formation(f) => f
            .members
            .into_iter()
            .map(|m| (Some(m.name), m.capsule))
            .collect(),
    };
    let (mut missing, mut total) = (0, 0);
    for (member, m) in &capsules {
        if let Some(name) = member {
            println!("member {name}: {} {}", m.name, m.version);
        }
        for a in &m.artifacts {
            let (line, ok) = resolve(a);
            match member {
                Some(_) => println!("  {line}"),
                None => println!("{line}"),
            }
            missing += usize::from(!ok);
            total += 1;
        }
    }
    match containment() {
        Ok(c) => {
            println!("containment: {} ({})", c.mode.word(), c.reason);
            for (wall, state) in c.walls().rows() {
                println!("  wall {wall}: {state}");
            }
            if let Ok(exe) = std::env::current_exe() {
                println!("{}", capsule::process::keeper_exe::beside_of(&exe).line());
            }
        }
        Err(why) => {
            println!("containment: unavailable ({why})");
            return Err(CliError::new(
                Code::Containment,
                why,
                "unset MURMUR_CONTAINMENT (or set it to auto) to use the fallback",
            ));
        }
    }
    if missing > 0 {
        let of = match (&capsules[..], manifest_path.display()) {
            ([(None, m)], _) => m.name.clone(),
            (_, path) => path.to_string(),
        };
        return Err(CliError::new(
            Code::NotAvailable,
            format!("{missing} of {total} artifacts of {of} are missing"),
            "install what the lines above name, then run `mur install` again",
        ));
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::cli_version;

    #[test]
    fn versions_as_the_clis_print_them() {
        assert_eq!(
            cli_version("2.1.332 (Claude Code)\n").as_deref(),
            Some("2.1.332")
        );
        assert_eq!(
            cli_version("codex-cli 0.171.0\n").as_deref(),
            Some("0.171.0")
        );
        assert_eq!(cli_version("codex-cli dev\n"), None);
    }
}
