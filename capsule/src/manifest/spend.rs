//! Reading `spend:`, the ceilings on what a capsule's (or a whole formation's) model calls may
//! use, and the prices that turn tokens into dollars (`gateway::spend` enforces them;
//! docs/keys-and-spend.md). The same block serves a capsule manifest (its tasks and its session)
//! and a formation manifest (every member and sub-capsule together):
//!
//! ```yaml
//! spend:
//!   max_tokens_per_task: 200000
//!   max_tokens: 2000000
//!   max_usd: 25.0
//!   prices: { claude-sonnet-5: { input: 3, output: 15, cache_read: 0.3, cache_write: 3.75 } }
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_yaml::Value;

use crate::manifest::error::{ErrorCode, ManifestError};
use crate::manifest::keypath::KeyPath;
use crate::manifest::reader::Reader;

const KEYS: [&str; 4] = ["max_tokens_per_task", "max_tokens", "max_usd", "prices"];
const PRICE_KEYS: [&str; 4] = ["input", "output", "cache_read", "cache_write"];

/// An amount of US dollars, held in billionths so that sums are exact and ordered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Usd(pub u64);

impl Usd {
    const PER_DOLLAR: f64 = 1e9;

    pub fn from_dollars(dollars: f64) -> Usd {
        Usd((dollars * Self::PER_DOLLAR).round() as u64)
    }

    pub fn dollars(self) -> f64 {
        self.0 as f64 / Self::PER_DOLLAR
    }

    /// What `tokens` cost at `per_million` dollars per million tokens.
    pub fn of_tokens(tokens: u64, per_million: Usd) -> Usd {
        Usd((u128::from(tokens) * u128::from(per_million.0) / 1_000_000) as u64)
    }

    pub fn saturating_add(self, other: Usd) -> Usd {
        Usd(self.0.saturating_add(other.0))
    }
}

impl std::fmt::Display for Usd {
    /// `$1.2345`: four decimals, enough for a call of a few thousand tokens.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "${:.4}", self.dollars())
    }
}

/// Dollars per million tokens of one model. A cache price left out is the input price.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Price {
    pub input: Usd,
    pub output: Usd,
    pub cache_read: Usd,
    pub cache_write: Usd,
}

/// `spend:`, validated; every ceiling is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpendPolicy {
    /// Input and output tokens (cache tokens included) one task's calls may use.
    pub max_tokens_per_task: Option<u64>,
    /// The same for the session, or in a formation file for every member together.
    pub max_tokens: Option<u64>,
    /// Dollars, by `prices`, for the session or the formation.
    pub max_usd: Option<Usd>,
    /// By model name, as the provider reports it.
    pub prices: BTreeMap<String, Price>,
}

impl SpendPolicy {
    /// Whether it sets any ceiling at all.
    pub fn has_ceiling(&self) -> bool {
        self.max_tokens_per_task.is_some() || self.max_tokens.is_some() || self.max_usd.is_some()
    }
}

/// The block as written at `path`; absent is no ceiling and no price. `model` is the
/// manifest's `inference.model`, which `max_usd` needs a price for when it names one.
pub fn read(
    r: &Reader,
    value: Option<&Value>,
    path: &KeyPath,
    model: Option<&str>,
) -> Result<SpendPolicy, ManifestError> {
    let mut policy = SpendPolicy::default();
    if value.is_none() {
        return Ok(policy);
    }
    let f = r.mapping(value, path, &KEYS)?;
    let tokens = |key: &str, example: &str| -> Result<Option<u64>, ManifestError> {
        f.get(key)
            .map(|v| {
                r.number(
                    v,
                    &f.path(key),
                    (1, u64::MAX),
                    &format!("write the most tokens, e.g. {key}: {example}"),
                )
            })
            .transpose()
    };
    policy.max_tokens_per_task = tokens("max_tokens_per_task", "200000")?;
    policy.max_tokens = tokens("max_tokens", "2000000")?;
    policy.max_usd = f
        .get("max_usd")
        .map(|v| dollars(r, v, &f.path("max_usd"), "max_usd: 25.0", false))
        .transpose()?;
    for (name, v) in r.entries(f.get("prices"), &f.path("prices"))? {
        let at = f.path("prices").key(&name);
        policy.prices.insert(name, price(r, v, &at)?);
    }
    if policy.max_usd.is_some() {
        if policy.prices.is_empty() {
            return Err(r.error(
                ErrorCode::BadValue,
                &f.path("max_usd"),
                format!(
                    "{} needs a price for each model the calls use, and {} names none",
                    f.path("max_usd"),
                    f.path("prices")
                ),
                "add prices: { <model>: { input: 3, output: 15 } } (USD per million tokens)",
            ));
        }
        if let Some(model) = model.filter(|m| !policy.prices.contains_key(*m)) {
            return Err(r.error(
                ErrorCode::BadValue,
                &f.path("prices"),
                format!(
                    "{} has no price for {model}, the model inference.model names, which {} needs",
                    f.path("prices"),
                    f.path("max_usd")
                ),
                format!(
                    "add {model}: {{ input: 3, output: 15 }} under prices (USD per million tokens)"
                ),
            ));
        }
    }
    Ok(policy)
}

fn price(r: &Reader, value: &Value, at: &KeyPath) -> Result<Price, ManifestError> {
    let f = r.mapping(Some(value), at, &PRICE_KEYS)?;
    let example = "{ input: 3, output: 15, cache_read: 0.3, cache_write: 3.75 }";
    let one = |key: &str| -> Result<Option<Usd>, ManifestError> {
        f.get(key)
            .map(|v| dollars(r, v, &f.path(key), example, true))
            .transpose()
    };
    let (Some(input), Some(output)) = (one("input")?, one("output")?) else {
        let missing = if f.get("input").is_none() {
            "input"
        } else {
            "output"
        };
        return Err(r.missing(
            &f.path(missing),
            format!("write the model's price in USD per million tokens, e.g. {example}"),
        ));
    };
    Ok(Price {
        input,
        output,
        cache_read: one("cache_read")?.unwrap_or(input),
        cache_write: one("cache_write")?.unwrap_or(input),
    })
}

/// A non-negative amount of dollars (`zero_ok`) or a positive one.
fn dollars(
    r: &Reader,
    value: &Value,
    at: &KeyPath,
    example: &str,
    zero_ok: bool,
) -> Result<Usd, ManifestError> {
    let hint = format!("write a number of US dollars, e.g. {example}");
    let amount = match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => r.interpolate(s, at)?.trim().parse::<f64>().ok(),
        _ => None,
    };
    let expected = match zero_ok {
        true => "a number of dollars, 0 or more",
        false => "a number of dollars above 0",
    };
    match amount {
        Some(a) if a.is_finite() && a < 1e9 && (a > 0.0 || (zero_ok && a == 0.0)) => {
            Ok(Usd::from_dollars(a))
        }
        _ => Err(r.bad(at, expected, value, hint)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::tests::parse;
    use crate::manifest::ErrorCode;

    fn with(spend: &str) -> String {
        format!(
            "name: h\nversion: \"1\"\nartifacts: [{{ name: murmur/driver-claude-code, runtime: driver }}]\n\
             inference: {{ model: claude-sonnet-5 }}\nspend:\n  {spend}\n"
        )
    }

    #[test]
    fn ceilings_and_prices_are_read() {
        let m = parse(&with(
            "{ max_tokens_per_task: 2000, max_tokens: 9000, max_usd: 2.5, prices: { claude-sonnet-5: { input: 3, output: 15, cache_read: 0.3 } } }",
        ))
        .unwrap();
        assert_eq!(m.spend.max_tokens_per_task, Some(2000));
        assert_eq!(m.spend.max_tokens, Some(9000));
        assert_eq!(m.spend.max_usd, Some(Usd::from_dollars(2.5)));
        assert_eq!(
            m.spend.prices["claude-sonnet-5"],
            Price {
                input: Usd::from_dollars(3.0),
                output: Usd::from_dollars(15.0),
                cache_read: Usd::from_dollars(0.3),
                cache_write: Usd::from_dollars(3.0)
            }
        );
        // 1,500 output tokens at $15 per million: $0.0225.
        assert_eq!(
            Usd::of_tokens(1500, Usd::from_dollars(15.0)).to_string(),
            "$0.0225"
        );
        assert!(!parse(&with("{}")).unwrap().spend.has_ceiling());
    }

    #[test]
    fn bad_blocks_are_refused_saying_how_to_fix_them() {
        let table = [
            ("{ max_token: 5 }", ErrorCode::UnknownKey, "spend.max_token", "did you mean spend.max_tokens?"),
            ("{ max_tokens: 0 }", ErrorCode::BadValue, "spend.max_tokens", "a whole number of at least 1"),
            ("{ max_usd: -1 }", ErrorCode::BadValue, "spend.max_usd", "a number of dollars above 0"),
            (
                "{ max_usd: 5 }",
                ErrorCode::BadValue,
                "spend.max_usd",
                "spend.max_usd needs a price for each model the calls use, and spend.prices names none",
            ),
            (
                "{ max_usd: 5, prices: { other: { input: 1, output: 2 } } }",
                ErrorCode::BadValue,
                "spend.prices",
                "spend.prices has no price for claude-sonnet-5, the model inference.model names, which spend.max_usd needs",
            ),
            (
                "{ prices: { m: { input: 1 } } }",
                ErrorCode::MissingKey,
                "spend.prices.m.output",
                "write the model's price in USD per million tokens",
            ),
        ];
        for (block, code, key_path, needle) in table {
            let e = parse(&with(block)).unwrap_err();
            assert_eq!((e.code(), e.key_path()), (code, key_path), "{block}: {e}");
            assert!(e.to_string().contains(needle), "{block}: {e}");
        }
    }
}
