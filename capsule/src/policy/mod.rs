//! The outbound allow list (`capabilities.network.allow`, DESIGN §6–7, and the messaging guide's
//! "Network policy enforcement"): which destinations a capsule's runtime may open a TCP
//! connection to. A destination not on the list is refused before any packet is sent.
//!
//! The check and the connection are one path: [`check`] answers an [`Allowed`] destination,
//! which only this module makes — by the check, or for the two destinations a capsule reaches
//! by its own declaration ([`gateway`], its http driver's endpoint; [`own_door`], its door as
//! its jailed harness reaches it) — and [`dial`], the one place in the capsule that opens an
//! outbound TCP connection, takes nothing else. So no caller can connect without one of them,
//! and a test (`only_the_policy_dials` below) keeps every other file from opening a socket.
//!
//! Matching (`docs/choices.md`, "Outbound messages"):
//! - `host` allows every port of that host, `host:port` that port, `scheme://host[:port]` that
//!   scheme and port (a URL without a port means its scheme's: 80 for http, 443 for https).
//! - Hosts match exactly, ignoring ASCII case: no wildcards, no suffixes, and a name is never
//!   matched by the address it resolves to. `localhost`, `127.0.0.1` and `[::1]` are three
//!   different hosts, each allowed only when named.
//! - A destination without a scheme is `http://` (`localhost:52222` is how `mur run` prints a
//!   door); one with a user part (`http://a@b`) is refused as unreadable.

mod dial;
mod entry;
mod target;

use std::fmt;

pub use dial::dial;
pub use entry::{Entry, EntryError};
pub use target::{Scheme, Target};

/// Why a destination may not be reached. Its sentence names the destination and what the list
/// allows, so a harness (and the person reading its output) knows what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The destination as it was asked for.
    pub destination: String,
    pub reason: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

/// A destination the capsule may reach: made only in this module, taken by [`dial`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowed {
    target: Target,
}

impl Allowed {
    pub fn target(&self) -> &Target {
        &self.target
    }
}

/// How a record names a destination it was asked for: `scheme://host:port`, never its path or
/// query (which may carry a secret), and nothing of one that does not read.
pub fn shown(url: &str) -> String {
    Target::parse(url)
        .map(|t| t.origin())
        .unwrap_or_else(|_| "(an unreadable destination)".into())
}

/// The capsule's own inference endpoint (`gateway.endpoint` of its http driver), which it
/// reaches by that declaration rather than by `capabilities.network.allow`: the allow list is
/// for the capsule's peers (the guide's orchestrator lists only its worker, and still reaches
/// its provider). The endpoint was checked when the driver was built (`inference::Endpoint`).
pub fn gateway(url: &str) -> Result<Allowed, Refusal> {
    declared(url, "gateway.endpoint is not one this capsule can reach")
}

/// A destination the capsule reaches by its own declaration, not by the allow list; `what`
/// says what it is when `url` does not read.
fn declared(url: &str, what: &str) -> Result<Allowed, Refusal> {
    Target::parse(url)
        .map(|target| Allowed { target })
        .map_err(|why| Refusal {
            destination: url.to_owned(),
            reason: format!("{what}: {why}"),
        })
}

/// The capsule's own door (`http://localhost:PORT`), which a jailed harness reaches through a
/// port forwarded into its namespace: its helpers' one way to the capsule, on no allow list.
pub fn own_door(url: &str) -> Result<Allowed, Refusal> {
    declared(url, "the capsule's own door is not an address")
}

/// Checks `url` against `allow` (entries as written; an entry that does not parse allows
/// nothing). Answers the destination [`dial`] may connect to, or why not.
pub fn check(allow: &[String], url: &str) -> Result<Allowed, Refusal> {
    let target = Target::parse(url).map_err(|why| Refusal {
        destination: url.to_owned(),
        reason: format!("the destination is not one this capsule can reach: {why}"),
    })?;
    let allowed = allow
        .iter()
        .filter_map(|written| Entry::parse(written).ok())
        .any(|entry| entry.allows(&target));
    if allowed {
        return Ok(Allowed { target });
    }
    let listing = match allow.is_empty() {
        true => "it allows nothing".to_owned(),
        false => format!("it allows {}", allow.join(", ")),
    };
    Err(Refusal {
        destination: url.to_owned(),
        reason: format!(
            "{} is not in capabilities.network.allow ({listing}); nothing was sent",
            target.authority()
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[&str]) -> Vec<String> {
        entries.iter().map(|e| e.to_string()).collect()
    }

    fn allows(entries: &[&str], url: &str) -> bool {
        check(&list(entries), url).is_ok()
    }

    #[test]
    fn a_gateway_is_allowed_by_its_declaration_and_an_unreadable_one_is_not() {
        let allowed = gateway("https://api.anthropic.com:443").unwrap();
        assert_eq!(allowed.target().port(), 443);
        assert!(gateway("https://a@b:443").is_err());
    }

    #[test]
    fn a_host_port_entry_allows_that_port_of_that_host_only() {
        let allow = ["localhost:52222"];
        assert!(allows(&allow, "http://localhost:52222"));
        assert!(allows(&allow, "localhost:52222"));
        assert!(allows(&allow, "http://LOCALHOST:52222/"));
        assert!(allows(&allow, "https://localhost:52222"), "any scheme");
        assert!(!allows(&allow, "http://localhost:52223"), "another port");
        assert!(
            !allows(&allow, "http://localhost"),
            "the default port is 80"
        );
        assert!(!allows(&allow, "http://127.0.0.1:52222"), "another host");
        assert!(!allows(&allow, "http://[::1]:52222"), "another host");
        assert!(!allows(&allow, "http://localhost.:52222"), "exact names");
        assert!(!allows(&allow, "http://evil-localhost:52222"));
        assert!(!allows(&allow, "http://localhost.evil.com:52222"));
    }

    #[test]
    fn a_bare_host_allows_every_port_of_it() {
        let allow = ["api.example.com"];
        assert!(allows(&allow, "https://api.example.com"));
        assert!(allows(&allow, "http://api.example.com:8080/v1"));
        assert!(allows(&allow, "API.Example.COM:1"));
        assert!(!allows(&allow, "http://example.com"), "no parent domain");
        assert!(!allows(&allow, "http://x.api.example.com"), "no subdomain");
    }

    #[test]
    fn a_url_entry_fixes_the_scheme_and_the_port() {
        let allow = ["http://localhost:52222"];
        assert!(allows(&allow, "localhost:52222"), "no scheme reads as http");
        assert!(allows(&allow, "http://localhost:52222/"));
        assert!(!allows(&allow, "https://localhost:52222"), "another scheme");
        assert!(!allows(&allow, "http://localhost:52221"), "another port");
        let https = ["https://api.example.com"];
        assert!(allows(&https, "https://api.example.com:443/x"));
        assert!(allows(&https, "https://api.example.com"));
        assert!(!allows(&https, "http://api.example.com:443"));
        assert!(!allows(&https, "https://api.example.com:8443"));
        let http = ["http://example.com/"];
        assert!(allows(&http, "example.com"), "port 80");
        assert!(!allows(&http, "example.com:8080"));
    }

    #[test]
    fn addresses_match_as_written() {
        let allow = ["127.0.0.1:9000", "[::1]:9001"];
        assert!(allows(&allow, "http://127.0.0.1:9000"));
        assert!(!allows(&allow, "http://localhost:9000"));
        assert!(allows(&allow, "http://[::1]:9001"));
        assert!(
            allows(&allow, "[0:0:0:0:0:0:0:1]:9001"),
            "one address, two spellings"
        );
        assert!(!allows(&allow, "http://127.0.0.2:9000"));
    }

    #[test]
    fn nothing_is_allowed_by_an_empty_list_or_by_entries_that_do_not_parse() {
        assert!(!allows(&[], "http://localhost:1"));
        assert!(!allows(&["*"], "http://localhost:1"));
        assert!(!allows(&["*.example.com"], "http://a.example.com"));
        assert!(!allows(&["localhost:*"], "http://localhost:1"));
        assert!(!allows(&["ftp://localhost:1"], "http://localhost:1"));
        assert!(!allows(&["localhost:1/path"], "http://localhost:1"));
    }

    #[test]
    fn a_destination_hiding_another_host_is_refused() {
        let allow = ["localhost:52222"];
        // A user part would make a naive prefix match read the wrong host.
        assert!(!allows(&allow, "http://localhost:52222@evil.example:80/"));
        assert!(!allows(&allow, "http://evil.example#@localhost:52222"));
        assert!(!allows(&allow, "http://evil.example?@localhost:52222"));
        assert!(!allows(&allow, "ftp://localhost:52222"));
        assert!(!allows(&allow, ""));
        assert!(!allows(&allow, "http://"));
        assert!(!allows(&allow, "http://localhost:99999"));
        assert!(!allows(&allow, "http://local host:52222"));
    }

    #[test]
    fn a_refusal_names_the_destination_and_the_list() {
        let refused = check(&list(&["localhost:52222"]), "http://localhost:9/x").unwrap_err();
        assert_eq!(
            refused.reason,
            "localhost:9 is not in capabilities.network.allow (it allows localhost:52222); nothing was sent"
        );
        let refused = check(&[], "localhost:9").unwrap_err();
        assert!(refused.reason.contains("(it allows nothing)"), "{refused}");
        let unreadable = check(&[], "http://a@b:1").unwrap_err();
        assert!(unreadable.reason.contains("user"), "{unreadable}");
        for secret in [
            "http://h:s3cret",
            "http://s3cret@h:1",
            "http://s3cr*t:1",
            "s3cret://h",
        ] {
            let refused = check(&[], secret).unwrap_err();
            assert!(!refused.reason.contains("s3cr"), "{refused}");
        }
    }

    #[test]
    fn a_destination_is_shown_without_its_path_or_query() {
        assert_eq!(shown("localhost:1/a2a?key=s3cret"), "http://localhost:1");
        assert_eq!(shown("HTTPS://Example.com"), "https://example.com:443");
        assert_eq!(
            shown("http://user:s3cret@h:1"),
            "(an unreadable destination)"
        );
    }

    #[test]
    fn the_allowed_destination_is_the_one_asked_for() {
        let ok = check(&list(&["localhost"]), "http://localhost:52222/a2a").unwrap();
        assert_eq!(ok.target().host(), "localhost");
        assert_eq!(ok.target().port(), 52222);
        assert_eq!(ok.target().path(), "/a2a");
        assert_eq!(ok.target().authority(), "localhost:52222");
    }

    /// The promise of this module: nothing else in the capsule opens a TCP connection.
    #[test]
    fn only_the_policy_dials() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut offenders = Vec::new();
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                if path.extension().is_none_or(|e| e != "rs") || path.ends_with("policy/dial.rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                // Spelled in pieces so this file does not match itself.
                for needle in [
                    concat!("TcpStream", "::connect"),
                    concat!("TcpSocket", "::new"),
                    concat!("UdpSocket", "::bind"),
                    concat!("std::net::", "TcpStream"),
                ] {
                    if text.contains(needle) {
                        offenders.push(format!("{} uses {needle}", path.display()));
                    }
                }
            }
        }
        assert!(
            offenders.is_empty(),
            "connect through policy::dial: {offenders:?}"
        );
    }
}
