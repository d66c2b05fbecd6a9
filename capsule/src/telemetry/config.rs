//! Whether and where spans are exported, from the standard OpenTelemetry variables:
//! `OTEL_SDK_DISABLED`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as it is) or
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (+ `/v1/traces`), `OTEL_EXPORTER_OTLP_TIMEOUT` /
//! `_TRACES_TIMEOUT` (ms). Headers (`OTEL_EXPORTER_OTLP_HEADERS`) are read by the exporter
//! crate itself; `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` by the resource. None set:
//! no exporter, no task, no cost. A formation's `telemetry:` block reaches its capsules as
//! these same variables (the supervisor sets those the environment leaves unset).

use std::time::Duration;

pub const SDK_DISABLED: &str = "OTEL_SDK_DISABLED";
pub const ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
pub const TRACES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
pub const HEADERS: &str = "OTEL_EXPORTER_OTLP_HEADERS";
pub const TIMEOUT: &str = "OTEL_EXPORTER_OTLP_TIMEOUT";
pub const TRACES_TIMEOUT: &str = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT";
pub const SERVICE_NAME: &str = "OTEL_SERVICE_NAME";
pub const RESOURCE_ATTRIBUTES: &str = "OTEL_RESOURCE_ATTRIBUTES";
pub const CAPTURE_CONTENT: &str = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT";

/// The service name when `OTEL_SERVICE_NAME` is unset.
pub const DEFAULT_SERVICE: &str = "murmur";
/// How long one export may take (the specification's default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Every variable murmur reads or hands on for telemetry: the supervisor passes these to the
/// capsules it starts, and a formation's `telemetry:` block sets them.
pub const VARIABLES: [&str; 9] = [
    SDK_DISABLED,
    ENDPOINT,
    TRACES_ENDPOINT,
    HEADERS,
    TIMEOUT,
    TRACES_TIMEOUT,
    SERVICE_NAME,
    RESOURCE_ATTRIBUTES,
    CAPTURE_CONTENT,
];

/// A formation's `telemetry:` block as the variables it sets, those `var` (the environment)
/// leaves unset or empty only: the environment wins.
pub fn from_block(
    block: &crate::manifest::telemetry::Telemetry,
    var: impl Fn(&str) -> Option<String>,
) -> Vec<(&'static str, String)> {
    let set = [
        (ENDPOINT, block.endpoint.clone()),
        (HEADERS, block.headers.clone()),
        (SERVICE_NAME, block.service_name.clone()),
        (RESOURCE_ATTRIBUTES, block.resource_attributes.clone()),
        (
            CAPTURE_CONTENT,
            block.capture_message_content.map(|c| c.to_string()),
        ),
    ];
    set.into_iter()
        .filter_map(|(name, value)| Some((name, value?)))
        .filter(|(name, _)| var(name).is_none_or(|v| v.trim().is_empty()))
        .collect()
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The full URL spans are posted to.
    pub endpoint: String,
    pub timeout: Duration,
}

/// The configuration `var` gives, `None` when export is off. An endpoint that is no
/// `http://` or `https://` URL is an error saying so.
pub fn from(var: impl Fn(&str) -> Option<String>) -> Result<Option<Config>, String> {
    let set = |name: &str| {
        var(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    if set(SDK_DISABLED).is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    let (name, given) = match (set(TRACES_ENDPOINT), set(ENDPOINT)) {
        (Some(e), _) => (TRACES_ENDPOINT, e),
        (None, Some(base)) => (ENDPOINT, base),
        (None, None) => return Ok(None),
    };
    if given.starts_with("https://") {
        return Err(format!(
            "{name} is {given:?}: murmur sends OTLP over plain HTTP, to a collector on this \
             machine or network (docs/telemetry.md); run an OpenTelemetry Collector there, which \
             forwards over TLS, and point {name} at it"
        ));
    }
    if !given.starts_with("http://") {
        return Err(format!(
            "{name} is {given:?}, which is no http:// URL; set it to the collector's OTLP/HTTP \
             address, e.g. http://localhost:4318"
        ));
    }
    let url = match name {
        ENDPOINT => format!("{}/v1/traces", given.trim_end_matches('/')),
        _ => given,
    };
    let timeout = set(TRACES_TIMEOUT)
        .or_else(|| set(TIMEOUT))
        .and_then(|ms| ms.parse::<u64>().ok())
        .map(Duration::from_millis)
        .unwrap_or(DEFAULT_TIMEOUT);
    Ok(Some(Config {
        endpoint: url,
        timeout,
    }))
}

/// Whether prompts and answers may go into spans (`…_CAPTURE_MESSAGE_CONTENT=true`).
pub fn captures_content(var: impl Fn(&str) -> Option<String>) -> bool {
    var(CAPTURE_CONTENT).is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn nothing_set_is_off() {
        assert_eq!(from(env(&[])), Ok(None));
    }

    #[test]
    fn the_base_endpoint_gets_the_traces_path_and_the_signal_one_is_kept() {
        let c = from(env(&[(ENDPOINT, "http://127.0.0.1:4318/")]))
            .unwrap()
            .unwrap();
        assert_eq!(c.endpoint, "http://127.0.0.1:4318/v1/traces");
        assert_eq!(c.timeout, DEFAULT_TIMEOUT);
        let c = from(env(&[
            (ENDPOINT, "http://a:1"),
            (TRACES_ENDPOINT, "http://b:2/custom"),
            (TIMEOUT, "250"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(c.endpoint, "http://b:2/custom");
        assert_eq!(c.timeout, Duration::from_millis(250));
    }

    #[test]
    fn disabled_wins_over_an_endpoint() {
        let off = from(env(&[(ENDPOINT, "http://a:1"), (SDK_DISABLED, "TRUE")]));
        assert_eq!(off, Ok(None));
    }

    #[test]
    fn an_endpoint_that_is_no_url_says_which_variable() {
        let e = from(env(&[(ENDPOINT, "localhost:4318")])).unwrap_err();
        assert!(
            e.starts_with("OTEL_EXPORTER_OTLP_ENDPOINT is \"localhost:4318\""),
            "{e}"
        );
    }

    #[test]
    fn an_https_endpoint_says_to_go_through_a_local_collector() {
        let e = from(env(&[(
            TRACES_ENDPOINT,
            "https://otlp.example.com/v1/traces",
        )]))
        .unwrap_err();
        assert!(e.contains("run an OpenTelemetry Collector there"), "{e}");
    }

    #[test]
    fn the_environment_wins_over_a_formations_block() {
        let block = crate::manifest::telemetry::Telemetry {
            endpoint: Some("http://collector:4318".into()),
            service_name: Some("split".into()),
            ..Default::default()
        };
        let set = from_block(&block, env(&[(ENDPOINT, "http://mine:4318")]));
        assert_eq!(set, vec![(SERVICE_NAME, "split".to_owned())]);
    }

    #[test]
    fn content_is_captured_only_when_asked() {
        assert!(!captures_content(env(&[])));
        assert!(!captures_content(env(&[(CAPTURE_CONTENT, "yes")])));
        assert!(captures_content(env(&[(CAPTURE_CONTENT, "true")])));
    }
}
