//! Door tokens: minted per launch for an authenticated capsule (`operator` first, then each
//! declared credential), kept in a 0600 file beside the running-capsule record and never in the
//! record, the trace or a log line. The capsule receives only their sha256 digests.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use rand::RngCore;

use capsule::auth::{digest_hex, TokenDigest, OPERATOR};
use capsule::manifest::Manifest;

use crate::records::{tokens_path, write_private};

/// One credential's token.
pub struct Minted {
    pub credential: String,
    pub token: String,
    pub scopes: Option<Vec<String>>,
}

/// A new token for `credential`.
pub fn fresh_credential(credential: String, scopes: Vec<String>) -> Minted {
    Minted {
        credential,
        token: fresh(),
        scopes: Some(scopes),
    }
}

fn fresh() -> String {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    format!("mur_{}", URL_SAFE_NO_PAD.encode(bytes))
}

/// The tokens a launch of `m` mints: none for a public door, which a formation member never is.
pub fn mint(m: &Manifest, member: bool) -> Vec<Minted> {
    let declared = Default::default();
    let auth = match (&m.network.authentication, member) {
        (Some(auth), _) => auth,
        (None, true) => &declared,
        (None, false) => return Vec::new(),
    };
    let mut out = vec![Minted {
        credential: OPERATOR.to_owned(),
        token: fresh(),
        scopes: None,
    }];
    for (name, scopes) in &auth.credentials {
        out.push(Minted {
            credential: name.clone(),
            token: fresh(),
            scopes: Some(scopes.iter().map(|s| s.as_str().to_owned()).collect()),
        });
    }
    out
}

pub fn digests(minted: &[Minted]) -> Vec<TokenDigest> {
    minted
        .iter()
        .map(|m| TokenDigest {
            credential: m.credential.clone(),
            sha256: digest_hex(&m.token),
            scopes: m.scopes.clone(),
        })
        .collect()
}

/// Writes `credential token` lines, operator first, mode 0600.
pub fn save(session_id: &str, minted: &[Minted]) -> std::io::Result<()> {
    if minted.is_empty() {
        return Ok(());
    }
    write_private(&tokens_path(session_id), to_lines(minted).as_bytes())
}

/// The `credential token` lines a session's tokens file (and a rendered Secret) holds.
pub fn to_lines(minted: &[Minted]) -> String {
    minted
        .iter()
        .map(|m| format!("{} {}\n", m.credential, m.token))
        .collect()
}

/// `(credential, token)` pairs from [`to_lines`]'s text.
pub fn from_lines(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(c, t)| (c.to_owned(), t.trim().to_owned()))
        .collect()
}

/// `(credential, token)` pairs of a running session, operator first; empty for a public door.
pub fn load(session_id: &str) -> Vec<(String, String)> {
    from_lines(&std::fs::read_to_string(tokens_path(session_id)).unwrap_or_default())
}

/// The operator token of a running session, when its door is authenticated.
pub fn operator(session_id: &str) -> Option<String> {
    load(session_id)
        .into_iter()
        .find(|(c, _)| c == OPERATOR)
        .map(|(_, t)| t)
}

pub fn remove(session_id: &str) {
    let _ = std::fs::remove_file(tokens_path(session_id));
}

/// The operator's token among what was minted for a capsule.
pub fn operator_of(minted: &[Minted]) -> Option<String> {
    minted
        .iter()
        .find(|t| t.scopes.is_none())
        .map(|t| t.token.clone())
}
