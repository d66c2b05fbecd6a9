//! `mur capsule [--listen ADDR]`: one capsule from the config in `MURMUR_CAPSULE_CONFIG`, on a
//! listener it binds itself — what a container runs (docs/kubernetes.md). `mur run` starts the
//! same capsule as `mur __capsule` on a listener it bound; both end in
//! `capsule::runtime::main` with the same config, so the door has one code path.

/// Why the capsule config could not be taken from the environment.
pub enum ConfigError {
    /// The variable is not set (or not UTF-8).
    Unset,
    /// It is set, but not a capsule config: serde's words, with line and column.
    Invalid(String),
}

/// The capsule config `mur run` (or a rendered Deployment) put in the environment.
pub fn config() -> Result<capsule::runtime::CapsuleConfig, ConfigError> {
    let text = std::env::var(capsule::runtime::CONFIG_ENV).map_err(|_| ConfigError::Unset)?;
    serde_json::from_str(&text).map_err(|e| ConfigError::Invalid(e.to_string()))
}

/// `mur capsule`: the same capsule as `__capsule`, from the same config in the same variable,
/// on a listener it binds itself because no supervisor bound one for it — a container's
/// command (docs/kubernetes.md). It makes its records and work folders, which a launch makes.
pub fn serve(listen: &str) -> i32 {
    use capsule::runtime::exit::CANNOT_START;
    let config = match config() {
        Ok(c) => c,
        Err(e) => {
            let why = match e {
                ConfigError::Unset => "it is unset or unreadable".to_owned(),
                ConfigError::Invalid(e) => format!("it is not a capsule config ({e})"),
            };
            eprintln!(
                "error: mur capsule reads its capsule config (JSON) from {}: {why}\n  hint: `mur render --target kubernetes` puts it in each member's ConfigMap; to run a manifest here use `mur run`",
                capsule::runtime::CONFIG_ENV
            );
            return CANNOT_START;
        }
    };
    // Records are private (0700); a work folder that exists is left as it is.
    let made = capsule::private::create_dir_all(&config.records_dir)
        .map_err(|e| (&config.records_dir, e))
        .and_then(|_| std::fs::create_dir_all(&config.workdir).map_err(|e| (&config.workdir, e)));
    if let Err((dir, e)) = made {
        eprintln!("error: cannot make {}: {e}", dir.display());
        return CANNOT_START;
    }
    let listener = match std::net::TcpListener::bind(listen) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: mur capsule cannot listen on {listen}: {e}\n  hint: pass --listen HOST:PORT with a free port");
            return CANNOT_START;
        }
    };
    let mut config = config;
    if let Ok(addr) = listener.local_addr() {
        eprintln!("mur capsule: listening on {addr}");
        // Its harnesses come back over loopback: the advertised URL (a Service) may not admit
        // the pod itself.
        if config.harness_url.is_none() {
            config.harness_url = Some(inside_url(addr));
        }
    }
    std::env::remove_var(capsule::runtime::CONFIG_ENV);
    capsule::runtime::main(config, listener)
}

/// `http://` + the listener's address, a wildcard one as its loopback.
fn inside_url(addr: std::net::SocketAddr) -> String {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let ip = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    format!("http://{}", std::net::SocketAddr::new(ip, addr.port()))
}
