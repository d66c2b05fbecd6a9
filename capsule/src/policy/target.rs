//! A destination as the runtime is asked to reach it: `[scheme://]host[:port][/path]`, read
//! strictly enough that what is checked is what is dialled (no user part, no second host hiding
//! behind `@`, `?` or `#`).

use std::net::Ipv6Addr;

/// The schemes an allow entry or a destination may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    pub fn parse(s: &str) -> Option<Scheme> {
        match s.to_ascii_lowercase().as_str() {
            "http" => Some(Scheme::Http),
            "https" => Some(Scheme::Https),
            _ => None,
        }
    }

    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// A destination: scheme (http when unwritten), host (lowercase; an IPv6 address in brackets,
/// in its canonical spelling), port (the scheme's when unwritten) and the request path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    scheme: Scheme,
    host: String,
    port: u16,
    path: String,
}

impl Target {
    pub fn parse(url: &str) -> Result<Target, String> {
        let (scheme, rest) = match url.split_once("://") {
            Some((s, rest)) => (
                Scheme::parse(s)
                    .ok_or("the scheme is not one the runtime speaks (http or https)")?,
                rest,
            ),
            None => (Scheme::Http, url),
        };
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        let (host, port) = host_port(authority)?;
        // The fragment never travels; the query does, after the path.
        let tail = tail.split('#').next().unwrap_or("");
        let path = match tail {
            "" => "/".to_owned(),
            t if t.starts_with('/') => t.to_owned(),
            t => format!("/{t}"),
        };
        Ok(Target {
            scheme,
            host,
            port: port.unwrap_or(scheme.default_port()),
            path,
        })
    }

    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    pub fn host(&self) -> &str {
        &self.host
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// What the request line asks for: `/` unless the destination named a path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// `host:port`: the Host header, and how the trace names a peer (`peer_url`).
    pub fn authority(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// `scheme://host:port`: the destination without its path and query, which may carry
    /// secrets (`?key=…`) that no record may hold.
    pub fn origin(&self) -> String {
        format!("{}://{}", self.scheme.as_str(), self.authority())
    }
}

/// `host[:port]` of an allow entry or a destination: the host lowercased (an IPv6 address in
/// brackets, canonical), the port when written.
pub(super) fn host_port(authority: &str) -> Result<(String, Option<u16>), String> {
    if authority.contains('@') {
        return Err("a destination with a user part (user@host) is refused".into());
    }
    if authority.contains('*') {
        return Err("wildcards are not supported: name each host".into());
    }
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let (addr, after) = v6
                .split_once(']')
                .ok_or("an IPv6 address must be closed with ]")?;
            let addr: Ipv6Addr = addr
                .parse()
                .map_err(|_| "the host in [ ] is not an IPv6 address".to_owned())?;
            let port = match after {
                "" => None,
                p => Some(
                    p.strip_prefix(':')
                        .ok_or("a port follows the host after :")?,
                ),
            };
            (format!("[{addr}]"), port)
        }
        None => match authority.split_once(':') {
            Some((h, p)) => (h.to_ascii_lowercase(), Some(p)),
            None => (authority.to_ascii_lowercase(), None),
        },
    };
    if host.is_empty() {
        return Err("it names no host".into());
    }
    let name_ok = host.starts_with('[')
        || host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
    // The parts of a destination are not echoed back: a destination may carry a secret where
    // a host or port should be, and refusals reach the trace.
    if !name_ok {
        return Err("the host is not a name or an address".into());
    }
    let port = match port {
        None => None,
        Some(p) => Some(
            p.parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or("the port is not a number from 1 to 65535")?,
        ),
    };
    Ok((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(url: &str) -> (Scheme, String, u16, String) {
        let t = Target::parse(url).unwrap_or_else(|e| panic!("{url}: {e}"));
        (t.scheme, t.host, t.port, t.path)
    }

    #[test]
    fn destinations_read_as_a_url_would() {
        let s = |x: &str| x.to_owned();
        assert_eq!(
            parsed("localhost:52222"),
            (Scheme::Http, s("localhost"), 52222, s("/"))
        );
        assert_eq!(
            parsed("HTTPS://Example.COM"),
            (Scheme::Https, s("example.com"), 443, s("/"))
        );
        assert_eq!(
            parsed("http://h:1/a2a?x=1#frag"),
            (Scheme::Http, s("h"), 1, s("/a2a?x=1"))
        );
        assert_eq!(parsed("http://h:1?x").3, "/?x");
        assert_eq!(parsed("http://[::1]:7").1, "[::1]");
        assert_eq!(parsed("http://[0:0::1]:7").1, "[::1]");
    }

    #[test]
    fn unreadable_destinations_are_refused() {
        for bad in [
            "",
            "http://",
            "ftp://h:1",
            "http://u@h:1",
            "http://h:0",
            "http://h:65536",
            "http://h:x",
            "http://h:1:2",
            "http://[::1",
            "http://[zz]:1",
            "http://h h:1",
            "http://*.h",
            ":80",
        ] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
    }
}
