//! How a harness's CLI reaches its model (docs/keys-and-spend.md): through the capsule's
//! gateway, never straight to the provider. Decided once when the capsule starts:
//! - where the calls go and with which key: the driver artifact's `gateway` block, else what
//!   the preset's CLI would read from murmur's own environment (Claude Code:
//!   `ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY` or `ANTHROPIC_AUTH_TOKEN`; Codex: the provider
//!   its `config.toml` selects and that provider's `env_key`, else `OPENAI_BASE_URL` and
//!   `OPENAI_API_KEY`);
//! - how the CLI is pointed at the gateway: its base-URL variable or config key, and the
//!   variable it reads its key from, which holds the attempt's placeholder instead.
//!
//! A CLI with no key in murmur's environment is logged in with an account: Claude Code still
//! calls through the gateway with its own credential (its placeholder rides in a header of its
//! own, `ANTHROPIC_CUSTOM_HEADERS`); Codex's account login speaks another API to another host,
//! and keeps its own way out (the egress proxy), unmetered.

use crate::gateway::{Api, KeyHeader, Secret};

/// The variables a route takes out of the harness's environment, whatever the allow lists say:
/// the provider's real keys and addresses.
pub const WITHHELD: [&str; 5] = [
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
];

/// Where one capsule's CLI sends its model calls, and how it is told.
#[derive(Debug, Clone)]
pub struct Route {
    /// The real endpoint, as its CLI would have called it.
    pub endpoint: String,
    pub api: Api,
    /// The real key; `None`: the CLI's own credential goes on (an account login).
    pub key: Option<(KeyHeader, Secret)>,
    /// How the CLI learns the gateway's URL.
    pub base: Base,
    /// The variable the CLI reads its key from: it holds the placeholder.
    pub key_var: String,
    /// Variables of the real provider withheld beyond [`WITHHELD`] (a Codex provider's
    /// `env_key`).
    pub withheld: Vec<String>,
}

/// How a CLI is given the gateway's base URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Base {
    /// An environment variable.
    Var(&'static str),
    /// A Codex `-c` config override (`model_providers.<name>.base_url`).
    CodexConfig(String),
}

impl Route {
    /// The arguments and variables that point the CLI at `gateway_url`, the attempt's
    /// placeholder aside.
    pub fn pointing(&self, gateway_url: &str) -> (Vec<String>, Vec<(String, String)>) {
        match &self.base {
            Base::Var(var) => (
                Vec::new(),
                vec![((*var).to_owned(), gateway_url.to_owned())],
            ),
            Base::CodexConfig(key) => (
                vec![
                    "-c".into(),
                    format!("{key}={}", serde_json::Value::from(gateway_url)),
                ],
                Vec::new(),
            ),
        }
    }

    /// The attempt's variables carrying its `placeholder`.
    pub fn placeholder_env(&self, placeholder: &str) -> Vec<(String, String)> {
        match (&self.key, self.api) {
            // An account login sends its own credential; the placeholder rides beside it.
            (None, Api::Anthropic) => vec![(
                "ANTHROPIC_CUSTOM_HEADERS".into(),
                format!("{}: {placeholder}", crate::gateway::PLACEHOLDER_HEADER),
            )],
            _ => vec![(self.key_var.clone(), placeholder.to_owned())],
        }
    }
}

fn set(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.trim().is_empty())
}

/// Claude Code's route: `artifact` (the driver's `gateway` block: endpoint and key), else
/// murmur's environment.
pub fn claude_code(artifact: Option<&crate::manifest::Gateway>) -> Route {
    let (endpoint, key) = match artifact {
        Some(g) => (
            g.endpoint.clone(),
            g.api_key
                .as_deref()
                .map(|k| (KeyHeader::XApiKey, Secret::new(k))),
        ),
        None => (
            set("ANTHROPIC_BASE_URL").unwrap_or_else(|| "https://api.anthropic.com".into()),
            set("ANTHROPIC_API_KEY")
                .map(|k| (KeyHeader::XApiKey, Secret::new(&k)))
                .or_else(|| {
                    set("ANTHROPIC_AUTH_TOKEN").map(|k| (KeyHeader::Bearer, Secret::new(&k)))
                }),
        ),
    };
    Route {
        endpoint,
        api: Api::Anthropic,
        key,
        base: Base::Var("ANTHROPIC_BASE_URL"),
        key_var: "ANTHROPIC_API_KEY".into(),
        withheld: Vec::new(),
    }
}

/// The provider a Codex `config.toml` selects.
#[derive(Debug, Clone, Default)]
pub struct CodexProvider {
    pub name: String,
    pub base_url: Option<String>,
    /// The variable that holds the provider's key.
    pub env_key: Option<String>,
}

/// Codex's route; `None` for an account login (no key anywhere), which keeps its own way.
pub fn codex(
    artifact: Option<&crate::manifest::Gateway>,
    provider: Option<&CodexProvider>,
) -> Option<Route> {
    let (base, key_var) = match provider {
        Some(p) => (
            Base::CodexConfig(format!("model_providers.{}.base_url", p.name)),
            p.env_key.clone().unwrap_or_else(|| "OPENAI_API_KEY".into()),
        ),
        None => (Base::Var("OPENAI_BASE_URL"), "OPENAI_API_KEY".into()),
    };
    let (endpoint, key) = match artifact {
        Some(g) => (g.endpoint.clone(), g.api_key.clone()),
        None => (
            provider
                .and_then(|p| p.base_url.clone())
                .or_else(|| set("OPENAI_BASE_URL"))
                .unwrap_or_else(|| "https://api.openai.com/v1".into()),
            set(&key_var),
        ),
    };
    let key = key?;
    Some(Route {
        endpoint,
        api: Api::OpenaiResponses,
        key: Some((KeyHeader::Bearer, Secret::new(&key))),
        base,
        withheld: vec![key_var.clone()],
        key_var,
    })
}

/// A process driver of the manifest's own with a `gateway` block naming its `api`.
pub fn declared(g: &crate::manifest::Gateway) -> Option<Route> {
    let api = g.api?;
    let (base, key_var, header) = match api {
        Api::Anthropic => (
            "ANTHROPIC_BASE_URL",
            "ANTHROPIC_API_KEY",
            KeyHeader::XApiKey,
        ),
        Api::OpenaiResponses | Api::OpenaiChat => {
            ("OPENAI_BASE_URL", "OPENAI_API_KEY", KeyHeader::Bearer)
        }
    };
    Some(Route {
        endpoint: g.endpoint.clone(),
        api,
        key: g.api_key.as_deref().map(|k| (header, Secret::new(k))),
        base: Base::Var(base),
        key_var: key_var.into(),
        withheld: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_is_pointed_at_the_gateway_through_its_own_provider() {
        let provider = CodexProvider {
            name: "fake".into(),
            base_url: Some("http://127.0.0.1:9/v1".into()),
            env_key: Some("FAKE_KEY".into()),
        };
        let artifact = crate::manifest::Gateway {
            endpoint: "http://127.0.0.1:9/v1".into(),
            api_key: Some("sk-real".into()),
            api: None,
        };
        let route = codex(Some(&artifact), Some(&provider)).unwrap();
        assert_eq!(
            route.pointing("http://127.0.0.1:5/v1"),
            (
                vec![
                    "-c".to_owned(),
                    "model_providers.fake.base_url=\"http://127.0.0.1:5/v1\"".to_owned()
                ],
                vec![]
            )
        );
        assert_eq!(
            route.placeholder_env("mur_gw_x"),
            [("FAKE_KEY".to_owned(), "mur_gw_x".to_owned())]
        );
        assert_eq!(route.withheld, ["FAKE_KEY"]);
        assert!(format!("{route:?}").contains("[redacted]"));
        assert!(!format!("{route:?}").contains("sk-real"));
    }

    #[test]
    fn an_account_login_sends_its_placeholder_beside_its_own_credential() {
        let artifact = crate::manifest::Gateway {
            endpoint: "https://api.anthropic.com".into(),
            api_key: None,
            api: None,
        };
        let route = claude_code(Some(&artifact));
        assert_eq!(
            route.placeholder_env("mur_gw_y"),
            [(
                "ANTHROPIC_CUSTOM_HEADERS".to_owned(),
                "x-murmur-gateway-key: mur_gw_y".to_owned()
            )]
        );
        assert_eq!(
            route.pointing("http://127.0.0.1:5"),
            (
                vec![],
                vec![(
                    "ANTHROPIC_BASE_URL".to_owned(),
                    "http://127.0.0.1:5".to_owned()
                )]
            )
        );
    }
}
