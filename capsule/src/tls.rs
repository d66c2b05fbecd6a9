//! The one TLS client setup every `https://` connection a capsule makes goes through (an
//! inference provider, a peer door): rustls with the webpki roots, plus the certificates of the
//! PEM file `MURMUR_CA_FILE` names, for a private CA (a company's proxy, a cluster's own CA).
//! The server's name is always checked against its certificate.

use std::sync::{Arc, OnceLock};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// The variable naming a PEM file of extra trusted CA certificates.
pub const CA_ENV: &str = "MURMUR_CA_FILE";

/// The client config, built once: `Err` says why `MURMUR_CA_FILE` cannot be used (every
/// `https://` connection then fails with that sentence, rather than trusting less or more
/// than the user said).
fn config() -> Result<Arc<rustls::ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| build(std::env::var_os(CA_ENV).map(std::path::PathBuf::from)))
        .clone()
}

fn build(ca_file: Option<std::path::PathBuf>) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = ca_file {
        let shown = path.display();
        let pem = std::fs::read(&path).map_err(|e| format!("{CA_ENV}={shown}: {e}"))?;
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{CA_ENV}={shown} is not a PEM file of certificates: {e}"))?;
        if certs.is_empty() {
            return Err(format!("{CA_ENV}={shown} holds no certificate"));
        }
        for cert in certs {
            roots
                .add(cert)
                .map_err(|e| format!("{CA_ENV}={shown} holds a certificate rustls refuses: {e}"))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("no TLS version to speak: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Why TLS could not be opened, said once, and what to check for that very failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsError {
    /// The sentence: what failed (it does not repeat the peer's address; the caller says it).
    pub message: String,
    /// The cause alone, for a caller whose own sentence already says a handshake failed.
    pub why: String,
    /// What to check: the certificate's name and the CAs trusted, or the CA file and what is
    /// wrong with it.
    pub hint: String,
}

impl std::fmt::Display for TlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// What murmur trusts, as a hint names it.
fn trusted() -> String {
    match std::env::var_os(CA_ENV) {
        Some(path) => format!(
            "the webpki roots and the certificates in {CA_ENV}={}",
            std::path::Path::new(&path).display()
        ),
        None => format!(
            "the webpki roots (for a private CA, set {CA_ENV} to a PEM file of its certificate)"
        ),
    }
}

/// Opens TLS over `tcp` to `host`, whose certificate must name it.
pub async fn connect(host: &str, tcp: TcpStream) -> Result<TlsStream<TcpStream>, TlsError> {
    let config = config().map_err(|message| TlsError {
        why: message.clone(),
        message,
        hint: format!("point {CA_ENV} at a readable PEM file of CA certificates, or unset it"),
    })?;
    let name =
        ServerName::try_from(host.trim_matches(['[', ']']).to_owned()).map_err(|e| TlsError {
            message: format!("{host} is not a server name: {e}"),
            why: format!("{host} is not a server name: {e}"),
            hint: "write the peer's host name, as its certificate names it".into(),
        })?;
    tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|e| handshake_failed(host, &e))
}

/// A failed handshake: a certificate refused, or no TLS spoken at all.
fn handshake_failed(host: &str, e: &std::io::Error) -> TlsError {
    let refused = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .is_some_and(|r| matches!(r, rustls::Error::InvalidCertificate(_)));
    let hint = match refused {
        true => format!(
            "its certificate must name {host} and chain to a CA murmur trusts: {}",
            trusted()
        ),
        false => format!("check that {host} speaks TLS on that port: an http:// door does not"),
    };
    TlsError {
        message: format!("the TLS handshake failed: {e}"),
        why: e.to_string(),
        hint,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_that_cannot_be_used_says_why() {
        let dir = std::env::temp_dir().join(format!("murmur-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("missing.pem");
        let err = build(Some(missing.clone())).unwrap_err();
        assert!(
            err.starts_with(&format!("{CA_ENV}={}: ", missing.display())),
            "{err}"
        );
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        assert_eq!(
            build(Some(empty.clone())).unwrap_err(),
            format!("{CA_ENV}={} holds no certificate", empty.display())
        );
        assert!(build(None).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
