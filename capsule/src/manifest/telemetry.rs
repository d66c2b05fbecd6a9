//! A formation's top-level `telemetry:` block (docs/telemetry.md): where every member and
//! sub-capsule sends its spans. Plain data: the supervisor turns it into the standard
//! OpenTelemetry variables its own environment leaves unset, so the environment wins.

use serde_yaml::Value;

use super::error::ManifestError;
use super::keypath::KeyPath;
use super::reader::Reader;

const KEYS: [&str; 5] = [
    "endpoint",
    "headers",
    "service_name",
    "resource_attributes",
    "capture_message_content",
];

/// What the block sets, each in the form its OpenTelemetry variable takes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Telemetry {
    /// `endpoint`: the collector's OTLP/HTTP base URL.
    pub endpoint: Option<String>,
    /// `headers`, joined `name=value,name=value`.
    pub headers: Option<String>,
    pub service_name: Option<String>,
    /// `resource_attributes`, joined `name=value,name=value`.
    pub resource_attributes: Option<String>,
    pub capture_message_content: Option<bool>,
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
        t.endpoint = Some(endpoint);
    }
    for key in ["headers", "resource_attributes"] {
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
        let joined = (!pairs.is_empty()).then(|| pairs.join(","));
        match key {
            "headers" => t.headers = joined,
            _ => t.resource_attributes = joined,
        }
    }
    if let Some(v) = f.get("service_name") {
        let name = r.text(
            v,
            &f.path("service_name"),
            "write service_name: my-formation",
        )?;
        t.service_name = Some(name);
    }
    if let Some(v) = f.get("capture_message_content") {
        let on = r.boolean(v, &f.path("capture_message_content"))?;
        t.capture_message_content = Some(on);
    }
    Ok(t)
}
