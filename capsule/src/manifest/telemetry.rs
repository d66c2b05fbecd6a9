//! A formation's top-level `telemetry:` block (docs/telemetry.md): where every member and
//! sub-capsule sends its spans, as the standard OpenTelemetry variables say it. The supervisor
//! hands each capsule the variables its own environment leaves unset, so the environment wins.

use serde_yaml::Value;

use super::error::ManifestError;
use super::keypath::KeyPath;
use super::reader::Reader;
use crate::telemetry::config;

const KEYS: [&str; 5] = [
    "endpoint",
    "headers",
    "service_name",
    "resource_attributes",
    "capture_message_content",
];

/// What the block sets, as OpenTelemetry variables.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Telemetry {
    pub variables: Vec<(&'static str, String)>,
}

impl Telemetry {
    /// The variables the block sets that `var` (the environment) leaves unset or empty.
    pub fn unset_in(&self, var: impl Fn(&str) -> Option<String>) -> Vec<(&'static str, String)> {
        self.variables
            .iter()
            .filter(|(name, _)| var(name).is_none_or(|v| v.trim().is_empty()))
            .cloned()
            .collect()
    }
}

pub fn read(r: &Reader, value: Option<&Value>, path: &KeyPath) -> Result<Telemetry, ManifestError> {
    let mut t = Telemetry::default();
    if value.is_none() {
        return Ok(t);
    }
    let f = r.mapping(value, path, &KEYS)?;
    if let Some(v) = f.get("endpoint") {
        let at = f.path("endpoint");
        let hint = "write the collector's OTLP/HTTP address, e.g. endpoint: http://localhost:4318";
        let endpoint = r.text(v, &at, hint)?;
        if !endpoint.starts_with("http://") {
            return Err(r.bad(&at, "an http:// URL", v, format!("{hint} (murmur sends plain HTTP to a collector beside it, which forwards over TLS)")));
        }
        t.variables.push((config::ENDPOINT, endpoint));
    }
    for (key, variable) in [
        ("headers", config::HEADERS),
        ("resource_attributes", config::RESOURCE_ATTRIBUTES),
    ] {
        let at = f.path(key);
        let mut pairs = Vec::new();
        for (name, v) in r.entries(f.get(key), &at)? {
            let text = r.string(v, &at.key(&name))?;
            if name.contains([',', '=']) || text.contains(',') {
                return Err(r.bad(
                    &at.key(&name),
                    "a name and a value without commas (and a name without `=`)",
                    v,
                    "OpenTelemetry joins these as name=value,name=value: leave the commas out",
                ));
            }
            pairs.push(format!("{name}={text}"));
        }
        if !pairs.is_empty() {
            t.variables.push((variable, pairs.join(",")));
        }
    }
    if let Some(v) = f.get("service_name") {
        let name = r.text(
            v,
            &f.path("service_name"),
            "write service_name: my-formation",
        )?;
        t.variables.push((config::SERVICE_NAME, name));
    }
    if let Some(v) = f.get("capture_message_content") {
        let on = r.boolean(v, &f.path("capture_message_content"))?;
        t.variables.push((config::CAPTURE_CONTENT, on.to_string()));
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_wins_over_the_block() {
        let t = Telemetry {
            variables: vec![
                (config::ENDPOINT, "http://collector:4318".into()),
                (config::SERVICE_NAME, "split".into()),
            ],
        };
        let env = |k: &str| (k == config::ENDPOINT).then(|| "http://mine:4318".to_owned());
        assert_eq!(
            t.unset_in(env),
            vec![(config::SERVICE_NAME, "split".into())]
        );
    }
}
