//! OpenTelemetry (DESIGN §10): the capsule's spans, named and attributed by the GenAI and A2A
//! semantic conventions (docs/telemetry.md names the version), continued from and handed on as
//! W3C Trace Context, so one task sent to a formation is one trace across its members and
//! sub-capsules. Every span is written to `trace.jsonl` as a `span` record (except door spans of
//! methods that start no task); when `OTEL_EXPORTER_OTLP_*` names a collector, spans are also
//! exported off the request path ([`export`]). Off, nothing here starts a task or a thread.
//!
//! No attribute carries a token, key, prompt or answer; message content only under
//! `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`, and then only to the collector.

pub mod config;
mod end;
mod export;
pub mod keys;
pub mod otlp_json;
pub mod propagation;
mod record;
mod span;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub use export::{dropped, Record};
pub use opentelemetry::trace::SpanContext;
pub use opentelemetry::KeyValue;
pub use record::SpanRecord;
pub use span::{Kind, Span, SpanEvent};

use opentelemetry_sdk::Resource;

static CAPTURE: AtomicBool = AtomicBool::new(false);

/// Who this capsule is, on every span's resource.
pub struct Identity<'a> {
    pub session_id: &'a str,
    pub capsule: &'a str,
    pub formation: Option<(&'a str, &'a str)>,
}

/// Reads the standard variables and, when they name a collector, starts the exporter on the
/// current runtime. An error says which variable is wrong; a capsule refuses to start on it.
pub fn start(who: &Identity<'_>, record: Record) -> Result<bool, String> {
    let var = |name: &str| std::env::var(name).ok();
    CAPTURE.store(config::captures_content(var), Ordering::Relaxed);
    let Some(config) = config::from(var)? else {
        return Ok(false);
    };
    export::start(&config, resource(who), record)?;
    Ok(true)
}

/// Whether spans go to a collector.
pub fn exporting() -> bool {
    export::on()
}

/// Whether prompts and answers may go on exported spans.
pub fn captures_content() -> bool {
    CAPTURE.load(Ordering::Relaxed) && exporting()
}

/// Sends what is queued before the capsule exits, waiting at most `within`.
pub async fn flush(within: Duration) {
    export::flush(within).await
}

fn resource(who: &Identity<'_>) -> Resource {
    let service = std::env::var(config::SERVICE_NAME)
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| config::DEFAULT_SERVICE.to_owned());
    let mut attributes = vec![
        KeyValue::new(keys::CAPSULE, who.capsule.to_owned()),
        KeyValue::new("process.pid", i64::from(std::process::id())),
        KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
    ];
    if !who.session_id.is_empty() {
        attributes.push(KeyValue::new(keys::SESSION_ID, who.session_id.to_owned()));
    }
    if let Some((formation, member)) = who.formation {
        attributes.push(KeyValue::new(keys::FORMATION, formation.to_owned()));
        attributes.push(KeyValue::new(keys::MEMBER, member.to_owned()));
    }
    Resource::builder()
        .with_service_name(service)
        .with_attributes(attributes)
        .build()
}

/// The resource `mur trace show --otlp` reports a session's spans under.
pub fn offline_resource(who: &Identity<'_>) -> Resource {
    resource(who)
}
