//! The door answers only for its own address (docs/choices.md "Door"): a web page the user
//! opens can rebind its own name to 127.0.0.1 and reach the door from the user's browser, but
//! its requests then carry its name in `Host`, and its origin in `Origin`. Checked before
//! anything else, the card and the control surface included, so a page learns nothing either.
//!
//! The door answers for the address its card advertises, the loopback names (`localhost`,
//! `127.0.0.1`, `[::1]`) at the ports of that address and of the address its harnesses use,
//! and the names `network.hosts` declares. A request without `Host` (HTTP/1.0) is answered: no
//! browser sends one without it.

use hyper::header::{HOST, ORIGIN};
use hyper::HeaderMap;

use super::error::HttpRefusal;

/// The `host:port` pairs this door answers for, lowercased.
#[derive(Debug, Clone)]
pub struct Hosts {
    allowed: Vec<String>,
}

/// `host:port` of a URL, the port defaulted from its scheme; `None` when it is no http URL.
fn authority(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://").unwrap_or(("http", url));
    let default = match scheme {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    with_port(authority, default)
}

/// `host:port`, lowercased, the port `default` when it names none. `None` for an empty host or
/// a port that is not one.
fn with_port(authority: &str, default: u16) -> Option<String> {
    let authority = authority.trim().to_ascii_lowercase();
    let (host, port) = match authority.rsplit_once(':') {
        // `[::1]` alone: its colons are the address's.
        Some((host, port)) if !port.contains(']') => (host.to_owned(), port.parse::<u16>().ok()?),
        _ => (authority.clone(), default),
    };
    (!host.is_empty()).then(|| format!("{host}:{port}"))
}

impl Hosts {
    /// The hosts of a door advertised at `urls` (its card's URL, its harnesses' URL) that
    /// listens on `listening`, and `declared` (`network.hosts`: `name` at the door's ports, or
    /// `name:port`).
    pub fn new(urls: &[&str], listening: Option<u16>, declared: &[String]) -> Hosts {
        let mut allowed: Vec<String> = Vec::new();
        let mut add = |a: String| {
            if !allowed.contains(&a) {
                allowed.push(a);
            }
        };
        let own: Vec<String> = urls.iter().filter_map(|u| authority(u)).collect();
        let mut ports: Vec<String> = own
            .iter()
            .filter_map(|a| a.rsplit_once(':').map(|(_, p)| p.to_owned()))
            .collect();
        if let Some(port) = listening.map(|p| p.to_string()) {
            if !ports.contains(&port) {
                ports.push(port);
            }
        }
        for a in &own {
            add(a.clone());
        }
        for port in &ports {
            for name in ["localhost", "127.0.0.1", "[::1]"] {
                add(format!("{name}:{port}"));
            }
        }
        for name in declared {
            let name = name.trim().to_ascii_lowercase();
            match name.rsplit_once(':') {
                Some((_, p)) if !p.contains(']') => add(name.clone()),
                _ => ports.iter().for_each(|p| add(format!("{name}:{p}"))),
            }
        }
        Hosts { allowed }
    }

    fn admits(&self, authority: &str) -> bool {
        with_port(authority, 80).is_some_and(|a| self.allowed.contains(&a))
    }

    /// The addresses this door answers for, as a refusal lists them.
    fn listing(&self) -> String {
        self.allowed.join(", ")
    }

    /// Refuses a request for another host, or one a web page of another origin sent.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), HttpRefusal> {
        let mut hosts = headers.get_all(HOST).iter();
        match (hosts.next(), hosts.next()) {
            (None, _) => {}
            (Some(host), None) if host.to_str().is_ok_and(|h| self.admits(h)) => {}
            (Some(host), _) => return Err(self.host_refused(host.as_bytes())),
        }
        let mut origins = headers.get_all(ORIGIN).iter();
        match (origins.next(), origins.next()) {
            (None, _) => Ok(()),
            (Some(origin), None) if origin.to_str().is_ok_and(|o| self.same_origin(o)) => Ok(()),
            (Some(origin), _) => Err(origin_refused(origin.as_bytes())),
        }
    }

    /// An origin is this door's own when it is `http(s)://` one of its addresses.
    fn same_origin(&self, origin: &str) -> bool {
        let default = match origin.split_once("://") {
            Some(("http", _)) => 80,
            Some(("https", _)) => 443,
            _ => return false,
        };
        let rest = origin.split_once("://").map(|(_, r)| r).unwrap_or_default();
        !rest.contains('/') && with_port(rest, default).is_some_and(|a| self.allowed.contains(&a))
    }

    fn host_refused(&self, host: &[u8]) -> HttpRefusal {
        HttpRefusal {
            status: 421,
            www_authenticate: None,
            error: "host_not_served",
            message: format!(
                "this door answers for {}, not for {}; a name of your own goes in the manifest's network.hosts",
                self.listing(),
                shown(host)
            ),
        }
    }
}

fn origin_refused(origin: &[u8]) -> HttpRefusal {
    HttpRefusal {
        status: 403,
        www_authenticate: None,
        error: "origin_not_allowed",
        message: format!(
            "this door does not answer requests a web page at {} sends: a capsule's door is for its own clients, not for browsers",
            shown(origin)
        ),
    }
}

/// A header value as a refusal names it: lossy, and cut to 100 characters.
fn shown(value: &[u8]) -> String {
    let text = String::from_utf8_lossy(value);
    let mut out: String = text.chars().take(100).collect();
    if text.chars().count() > 100 {
        out.push('…');
    }
    format!("{out:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                hyper::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    fn door() -> Hosts {
        Hosts::new(&["http://localhost:41873"], Some(41873), &[])
    }

    #[test]
    fn the_loopback_names_at_the_door_s_port_are_answered() {
        for host in [
            "localhost:41873",
            "LOCALHOST:41873",
            "127.0.0.1:41873",
            "[::1]:41873",
        ] {
            assert!(door().check(&headers(&[("host", host)])).is_ok(), "{host}");
        }
        assert!(door().check(&headers(&[])).is_ok());
    }

    #[test]
    fn another_name_or_port_is_refused_421_naming_what_is_answered() {
        for host in [
            "attacker.example:41873",
            "localhost:80",
            "localhost",
            "127.0.0.1:1",
            "",
        ] {
            let r = door().check(&headers(&[("host", host)])).unwrap_err();
            assert_eq!((r.status, r.error), (421, "host_not_served"), "{host}");
        }
        let r = door()
            .check(&headers(&[("host", "attacker.example:41873")]))
            .unwrap_err();
        assert_eq!(
            r.message,
            "this door answers for localhost:41873, 127.0.0.1:41873, [::1]:41873, not for \
             \"attacker.example:41873\"; a name of your own goes in the manifest's network.hosts"
        );
        let two = headers(&[("host", "localhost:41873"), ("host", "localhost:41873")]);
        assert_eq!(door().check(&two).unwrap_err().status, 421);
    }

    #[test]
    fn a_cross_site_origin_is_refused_and_the_door_s_own_answered() {
        let host = ("host", "localhost:41873");
        for ok in ["http://localhost:41873", "http://127.0.0.1:41873"] {
            assert!(
                door().check(&headers(&[host, ("origin", ok)])).is_ok(),
                "{ok}"
            );
        }
        for bad in [
            "http://attacker.example",
            "http://localhost:41874",
            "null",
            "http://localhost:41873/x",
            "file://",
        ] {
            let r = door()
                .check(&headers(&[host, ("origin", bad)]))
                .unwrap_err();
            assert_eq!((r.status, r.error), (403, "origin_not_allowed"), "{bad}");
        }
    }

    #[test]
    fn the_advertised_address_and_declared_names_are_answered() {
        let hosts = Hosts::new(
            &["http://lead.murmur.svc:8080", "http://127.0.0.1:9000"],
            Some(8080),
            &["proxy.example".into(), "other.example:443".into()],
        );
        for host in [
            "lead.murmur.svc:8080",
            "localhost:8080",
            "127.0.0.1:9000",
            "proxy.example:8080",
            "proxy.example:9000",
            "other.example:443",
        ] {
            assert!(hosts.check(&headers(&[("host", host)])).is_ok(), "{host}");
        }
        assert!(hosts
            .check(&headers(&[("host", "other.example:8080")]))
            .is_err());
        let plain = Hosts::new(&["http://door.example"], None, &[]);
        assert!(plain.check(&headers(&[("host", "localhost:80")])).is_ok());
        let listening = Hosts::new(&["http://localhost:1"], Some(5000), &[]);
        assert!(listening
            .check(&headers(&[("host", "127.0.0.1:5000")]))
            .is_ok());
        assert!(plain.check(&headers(&[("host", "door.example")])).is_ok());
    }
}
