//! One `capabilities.network.allow` entry: `host`, `host:port` or `scheme://host[:port]`. The
//! manifest refuses an entry that does not read (E-MAN-005) so a typo cannot silently allow
//! nothing; the policy, handed lists from elsewhere too (a formation's wiring), lets such an
//! entry allow nothing.

use std::fmt;

use super::target::{host_port, Scheme, Target};

/// What an entry allows: a host, and optionally one port and one scheme.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    scheme: Option<Scheme>,
    host: String,
    port: Option<u16>,
}

/// Why an entry does not read, as a sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryError(pub String);

impl fmt::Display for EntryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Entry {
    pub fn parse(written: &str) -> Result<Entry, EntryError> {
        let written = written.trim();
        let bad = |why: String| EntryError(why);
        match written.split_once("://") {
            Some((scheme, rest)) => {
                let scheme = Scheme::parse(scheme).ok_or_else(|| {
                    bad(format!(
                        "the scheme {scheme:?} is not one the runtime speaks (http or https)"
                    ))
                })?;
                let authority = rest.strip_suffix('/').unwrap_or(rest);
                if authority.contains(['/', '?', '#']) {
                    return Err(bad(
                        "an entry names a destination, not a path: write scheme://host:port".into(),
                    ));
                }
                let (host, port) = host_port(authority).map_err(bad)?;
                Ok(Entry {
                    scheme: Some(scheme),
                    host,
                    port: Some(port.unwrap_or(scheme.default_port())),
                })
            }
            None => {
                if written.contains(['/', '?', '#']) {
                    return Err(bad(
                        "an entry names a destination, not a path: write host:port".into(),
                    ));
                }
                let (host, port) = host_port(written).map_err(bad)?;
                Ok(Entry {
                    scheme: None,
                    host,
                    port,
                })
            }
        }
    }

    /// The host, as read (ASCII case folded).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Whether the entry is written with a scheme (`https://host`), which implies its port.
    pub fn names_scheme(&self) -> bool {
        self.scheme.is_some()
    }

    /// The port a rule for this entry opens: the one it fixes, else the one its scheme implies.
    pub fn implied_port(&self) -> Option<u16> {
        self.port.or(self.scheme.map(|s| s.default_port()))
    }

    /// The one port the entry allows, when it fixes one.
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// Exact host (case was folded when both were read), then the port and the scheme when the
    /// entry fixes them.
    pub fn allows(&self, t: &Target) -> bool {
        self.host == t.host()
            && self.port.is_none_or(|p| p == t.port())
            && self.scheme.is_none_or(|s| s == t.scheme())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_form_reads() {
        let e = |s: &str| Entry::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        assert_eq!(
            e("localhost"),
            Entry {
                scheme: None,
                host: "localhost".into(),
                port: None
            }
        );
        assert_eq!(
            e(" LocalHost:52222 "),
            Entry {
                scheme: None,
                host: "localhost".into(),
                port: Some(52222)
            }
        );
        assert_eq!(
            e("http://localhost:52222/"),
            Entry {
                scheme: Some(Scheme::Http),
                host: "localhost".into(),
                port: Some(52222)
            }
        );
        assert_eq!(
            e("https://api.example.com"),
            Entry {
                scheme: Some(Scheme::Https),
                host: "api.example.com".into(),
                port: Some(443)
            }
        );
        assert_eq!(e("[::1]:9").host, "[::1]");
        assert_eq!(e("10.0.0.1").host, "10.0.0.1");
    }

    #[test]
    fn entries_that_would_mean_something_else_are_refused() {
        for bad in [
            "",
            "*",
            "*.example.com",
            "localhost:*",
            "localhost:0",
            "localhost:http",
            "ftp://localhost",
            "http://localhost:1/api",
            "localhost/api",
            "user@localhost",
            "http://",
            "local host",
        ] {
            assert!(Entry::parse(bad).is_err(), "{bad:?} was read");
        }
        assert!(Entry::parse("*.x").unwrap_err().0.contains("wildcard"));
    }
}
