//! Reading `network`: the pinned port and `authentication` — the bearer scheme, credentials in
//! declared order, reserved names refused, scopes spelled as `auth::scope` spells them (A2A 0.3
//! names refused with their v1.0 replacement named).

use crate::auth::scope::Scope;
use crate::manifest::error::{ErrorCode, ManifestError};
use crate::manifest::keypath::KeyPath;
use crate::manifest::model::{Authentication, Network};
use crate::manifest::reader::{is_plain_name, Reader};
use crate::manifest::suggest::nearest;
use serde_yaml::Value;

/// Credential names no manifest may declare: the runtime mints them itself.
const RESERVED_CREDENTIAL: &str = "operator";

/// The `network` block (absent reads as empty).
pub fn read(r: &Reader, value: Option<&Value>, path: &KeyPath) -> Result<Network, ManifestError> {
    let f = r.mapping(value, path, &["internal_port", "authentication", "hosts"])?;
    let internal_port = match f.get("internal_port") {
        Some(v) => Some(r.port(
            v,
            &f.path("internal_port"),
            "write internal_port: 52222, or remove it to let the OS assign a port",
        )?),
        None => None,
    };
    let authentication = match f.get("authentication") {
        Some(v) => Some(authentication(r, v, &f.path("authentication"))?),
        None => None,
    };
    let hosts = match f.get("hosts") {
        Some(v) => r.string_list(v, &f.path("hosts"), "[agents.example.com]")?,
        None => Vec::new(),
    };
    let hosts_path = f.path("hosts");
    for (i, name) in hosts.iter().enumerate() {
        if !is_host_name(name) {
            let at = hosts_path.index(i);
            return Err(r.error(
                ErrorCode::BadValue,
                &at,
                format!("{at} is {name:?}, which is not a host name"),
                "write a name the door is reached by, with a port when it is not the door's own: \
                 agents.example.com or agents.example.com:443",
            ));
        }
    }
    Ok(Network {
        internal_port,
        authentication,
        hosts,
    })
}

/// A name a `Host` header can carry: letters, digits, `.`, `-`, an optional `:port`, or a
/// bracketed IPv6 address.
fn is_host_name(name: &str) -> bool {
    let (host, port) = match name.rsplit_once(':') {
        Some((h, p)) if !p.contains(']') => (h, Some(p)),
        _ => (name, None),
    };
    let host_ok = !host.is_empty()
        && (host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
            || (host.starts_with('[') && host.ends_with(']')));
    host_ok && port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p > 0))
}

fn authentication(
    r: &Reader,
    value: &Value,
    path: &KeyPath,
) -> Result<Authentication, ManifestError> {
    let f = r.mapping(Some(value), path, &["scheme", "credentials"])?;
    match f.get("scheme") {
        Some(v) => r.choice(v, &f.path("scheme"), &["bearer"])?,
        None => return Err(r.missing(&f.path("scheme"), "add scheme: bearer")),
    };
    let creds_path = f.path("credentials");
    let mut credentials = Vec::new();
    for (cred, v) in r.entries(f.get("credentials"), &creds_path)? {
        let cred_path = creds_path.key(&cred);
        if cred == RESERVED_CREDENTIAL || cred.starts_with(crate::wiring::MEMBER_PREFIX) {
            return Err(r.error(
                ErrorCode::BadValue,
                &cred_path,
                format!("{cred_path} is reserved: murmur mints the {cred} credential itself"),
                "give the credential another name; the operator token (mur token) already \
                 holds every scope",
            ));
        }
        if !is_plain_name(&cred) {
            return Err(r.error(
                ErrorCode::BadValue,
                &cred_path,
                format!("{cred_path} is not a credential name"),
                "name credentials with letters, digits, '.', '_' and '-', e.g. watcher",
            ));
        }
        let cf = r.mapping(Some(v), &cred_path, &["scopes"])?;
        let scopes_path = cf.path("scopes");
        let Some(list) = cf.get("scopes") else {
            return Err(r.missing(&scopes_path, "add scopes: [GetTask, ListTasks]"));
        };
        let mut scopes: Vec<Scope> = Vec::new();
        for (i, written) in r
            .string_list(list, &scopes_path, "[GetTask]")?
            .iter()
            .enumerate()
        {
            let scope = scope(r, written, &scopes_path.index(i))?;
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
        credentials.push((cred, scopes));
    }
    Ok(Authentication { credentials })
}

/// A scope name; A2A 0.3 names get a hint naming their v1.0 replacement.
fn scope(r: &Reader, written: &str, path: &KeyPath) -> Result<Scope, ManifestError> {
    if let Some(scope) = Scope::parse(written) {
        return Ok(scope);
    }
    if let Some(new) = Scope::legacy(written) {
        return Err(r.error(
            ErrorCode::Scope,
            path,
            format!("{path} is {written}, an A2A 0.3 name"),
            format!("write {new}: the door speaks A2A v1.0"),
        ));
    }
    let names = Scope::ALL.map(|s| s.as_str());
    let listing = format!("the scopes are {}", names.join(", "));
    let near = Scope::parse(&format!("murmur.{written}"))
        .map(|s| s.as_str())
        .or_else(|| nearest(written, &names));
    let hint = match near {
        Some(near) => format!("did you mean {near}? {listing}"),
        None => listing,
    };
    Err(r.error(
        ErrorCode::Scope,
        path,
        format!("{path} is {written}, which is not a scope"),
        hint,
    ))
}
