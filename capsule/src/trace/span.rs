//! A span as `trace.jsonl` keeps it: the `span` record's fields, plain data. What makes one from
//! a live span, and what turns one back into the SDK's form, is the telemetry module's (the trace
//! is below telemetry: it names no span type of its).

use serde::{Deserialize, Serialize};
use serde_json::Map;

/// One ended span, as its `span` record holds it. Ids are lowercase hex as in `traceparent`;
/// times are nanoseconds since the Unix epoch.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct SpanRecord {
    pub name: String,
    /// `server`, `client` or `internal`.
    pub kind: String,
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: Option<String>,
    pub start_ns: u64,
    pub end_ns: u64,
    /// `error` with the failure's sentence, or `unset`.
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub status_message: Option<String>,
    pub attributes: Map<String, serde_json::Value>,
    pub events: Vec<EventRecord>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct EventRecord {
    pub name: String,
    pub time_ns: u64,
    pub attributes: Map<String, serde_json::Value>,
}
