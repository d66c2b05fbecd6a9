//! Who may call an authenticated door: the token table (sha256 digests only — the runtime never
//! holds a door token itself), the scopes each credential reaches, and the step-2 and step-11
//! refusals. Which tasks a credential sees is [`crate::tasks::Viewer`].

pub mod scope;

use hyper::HeaderMap;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::refusal::HttpRefusal;
use crate::tasks::Viewer;
use scope::Scope;

/// The operator credential: every scope, every task.
pub const OPERATOR: &str = "operator";

/// One minted token, as the supervisor hands it to the capsule: its credential and digest.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct TokenDigest {
    pub credential: String,
    /// Lowercase hex sha256 of the token.
    pub sha256: String,
    /// The scopes the credential reaches; `None` for the operator (all).
    pub scopes: Option<Vec<String>>,
}

/// The token of an `Authorization: Bearer <token>` value (the scheme in any case).
pub fn bearer(value: &hyper::header::HeaderValue) -> Option<&str> {
    value
        .to_str()
        .ok()
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, t)| t)
}

pub fn digest_hex(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A caller the door let in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credential {
    pub name: String,
    /// `None`: every scope (the operator).
    pub scopes: Option<Vec<Scope>>,
}

impl Credential {
    /// A formation member's credential (`member:<caller>`), which a caller's runtime holds.
    pub fn is_member(&self) -> bool {
        self.name.starts_with(crate::wiring::MEMBER_PREFIX)
    }

    pub fn reaches(&self, scope: Scope) -> bool {
        self.scopes.as_ref().is_none_or(|s| s.contains(&scope))
    }

    pub fn viewer(&self) -> Viewer {
        match self.scopes {
            None => Viewer::Everyone,
            Some(_) => Viewer::Credential(self.name.clone()),
        }
    }
}

struct Entry {
    digest: [u8; 32],
    credential: Credential,
}

/// The tokens this session minted.
pub struct TokenTable {
    entries: Vec<Entry>,
    realm: String,
}

fn parse_hex(hex: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    if hex.len() != 64 {
        return None;
    }
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(i * 2..i * 2 + 2)?, 16).ok()?;
    }
    Some(out)
}

impl TokenTable {
    /// `realm`: the capsule's name, named in every `www-authenticate`.
    pub fn new(realm: &str, digests: &[TokenDigest]) -> TokenTable {
        let entries = digests
            .iter()
            .filter_map(|d| {
                let scopes = d
                    .scopes
                    .as_ref()
                    .map(|list| list.iter().filter_map(|s| Scope::parse(s)).collect());
                Some(Entry {
                    digest: parse_hex(&d.sha256)?,
                    credential: Credential {
                        name: d.credential.clone(),
                        scopes,
                    },
                })
            })
            .collect();
        TokenTable {
            entries,
            realm: realm.to_owned(),
        }
    }

    fn challenge(&self, error: Option<&str>, scope: Option<Scope>) -> String {
        let mut v = format!("Bearer realm=\"{}\"", self.realm);
        if let Some(e) = error {
            v.push_str(&format!(", error=\"{e}\""));
        }
        if let Some(s) = scope {
            v.push_str(&format!(", scope=\"{}\"", s.as_str()));
        }
        v
    }

    /// Step 2: exactly one `Authorization: Bearer <token>` naming a token this session minted.
    pub fn authenticate(&self, headers: &HeaderMap) -> Result<Credential, HttpRefusal> {
        let mut values = headers.get_all(hyper::header::AUTHORIZATION).iter();
        let (Some(value), None) = (values.next(), values.next()) else {
            let none = headers.get(hyper::header::AUTHORIZATION).is_none();
            return Err(if none {
                HttpRefusal {
                    status: 401,
                    www_authenticate: Some(self.challenge(None, None)),
                    error: "unauthenticated",
                    message: "this door takes a bearer token: send Authorization: Bearer <token> (mur token prints them)".into(),
                }
            } else {
                self.invalid("send exactly one Authorization header")
            });
        };
        let Some(token) = bearer(value) else {
            return Err(self.invalid("the Authorization header must read Bearer <token>"));
        };
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut found = None;
        // Every entry is compared, in constant time, so timing says nothing about near misses.
        for e in &self.entries {
            if bool::from(e.digest.ct_eq(&digest)) {
                found = Some(e.credential.clone());
            }
        }
        found.ok_or_else(|| self.invalid("the token is not one this session minted"))
    }

    fn invalid(&self, why: &str) -> HttpRefusal {
        HttpRefusal {
            status: 401,
            www_authenticate: Some(self.challenge(Some("invalid_token"), None)),
            error: "invalid_token",
            message: format!("{why}; tokens are valid for the session that minted them"),
        }
    }

    /// Step 11: the credential reaches the method's scope.
    pub fn authorize(&self, credential: &Credential, scope: Scope) -> Result<(), HttpRefusal> {
        if credential.reaches(scope) {
            return Ok(());
        }
        Err(HttpRefusal {
            status: 403,
            www_authenticate: Some(self.challenge(Some("insufficient_scope"), Some(scope))),
            error: "insufficient_scope",
            message: format!(
                "credential '{}' does not reach {}",
                credential.name,
                scope.as_str()
            ),
        })
    }
}
