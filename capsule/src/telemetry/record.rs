//! The one conversion between a span and its forms: a live span to its `span` record
//! (`crate::trace::SpanRecord`, plain data the trace owns), and a live span or a record to the
//! SDK's `SpanData` the exporters take. So a span sent to a collector and the same span written
//! by `mur trace show --otlp` from the file are one shape, ids included.

use std::borrow::Cow;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{Array, InstrumentationScope, KeyValue, StringValue, Value};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use serde_json::Map;

use super::span::{Kind, Span};
pub use crate::trace::{EventRecord, SpanRecord};

/// The instrumentation scope every murmur span is reported under.
pub const SCOPE: &str = "murmur";

const KINDS: [(Kind, &str); 3] = [
    (Kind::Server, "server"),
    (Kind::Client, "client"),
    (Kind::Internal, "internal"),
];

fn kind_word(kind: Kind) -> &'static str {
    KINDS
        .iter()
        .find(|(k, _)| *k == kind)
        .map(|(_, w)| *w)
        .unwrap_or("internal")
}

fn kind_of(word: &str) -> SpanKind {
    KINDS
        .iter()
        .find(|(_, w)| *w == word)
        .map(|(k, _)| k.otel())
        .unwrap_or(SpanKind::Internal)
}

impl SpanRecord {
    /// The record of `span`, ended at `end`.
    pub fn of(span: &Span, end: SystemTime) -> SpanRecord {
        SpanRecord {
            name: span.name.to_string(),
            kind: kind_word(span.kind).to_owned(),
            trace_id: span.context.trace_id().to_string(),
            span_id: span.context.span_id().to_string(),
            parent_span_id: span.parent.map(|(id, _)| id.to_string()),
            start_ns: nanos(span.start),
            end_ns: nanos(end),
            status: match span.error {
                Some(_) => "error",
                None => "unset",
            }
            .to_owned(),
            status_message: span.error.clone(),
            attributes: json_attributes(&span.attributes),
            events: span
                .events
                .iter()
                .map(|e| EventRecord {
                    name: e.name.to_string(),
                    time_ns: nanos(e.at),
                    attributes: json_attributes(&e.attributes),
                })
                .collect(),
        }
    }

    /// The SDK's form of this record; `None` when its ids are not a span's (a record edited by
    /// hand, say).
    pub fn to_span_data(&self) -> Option<SpanData> {
        let trace_id = TraceId::from_hex(&self.trace_id).ok()?;
        let span_id = SpanId::from_hex(&self.span_id).ok()?;
        let parent = match &self.parent_span_id {
            Some(p) => SpanId::from_hex(p).ok()?,
            None => SpanId::INVALID,
        };
        let context = SpanContext::new(
            trace_id,
            span_id,
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        );
        Some(SpanData {
            span_context: context,
            parent_span_id: parent,
            parent_span_is_remote: false,
            span_kind: kind_of(&self.kind),
            name: Cow::Owned(self.name.clone()),
            start_time: time(self.start_ns),
            end_time: time(self.end_ns),
            attributes: otel_attributes(&self.attributes),
            dropped_attributes_count: 0,
            events: events(
                self.events
                    .iter()
                    .map(|e| {
                        opentelemetry::trace::Event::new(
                            e.name.clone(),
                            time(e.time_ns),
                            otel_attributes(&e.attributes),
                            0,
                        )
                    })
                    .collect(),
            ),
            links: SpanLinks::default(),
            status: match self.status.as_str() {
                "error" => Status::error(self.status_message.clone().unwrap_or_default()),
                _ => Status::Unset,
            },
            instrumentation_scope: scope(),
        })
    }
}

/// The SDK's form of a live span, ended at `end`.
pub fn span_data(span: Span, end: SystemTime) -> SpanData {
    let (parent, remote) = span.parent.unwrap_or((SpanId::INVALID, false));
    SpanData {
        span_context: span.context,
        parent_span_id: parent,
        parent_span_is_remote: remote,
        span_kind: span.kind.otel(),
        name: span.name,
        start_time: span.start,
        end_time: end,
        attributes: span.attributes,
        dropped_attributes_count: 0,
        events: events(
            span.events
                .into_iter()
                .map(|e| opentelemetry::trace::Event::new(e.name, e.at, e.attributes, 0))
                .collect(),
        ),
        links: SpanLinks::default(),
        status: match span.error {
            Some(m) => Status::error(m),
            None => Status::Unset,
        },
        instrumentation_scope: scope(),
    }
}

fn events(list: Vec<opentelemetry::trace::Event>) -> SpanEvents {
    let mut events = SpanEvents::default();
    events.events = list;
    events
}

/// Built once: every span carries a clone (two borrowed strings).
pub fn scope() -> InstrumentationScope {
    static SCOPE_OF: std::sync::OnceLock<InstrumentationScope> = std::sync::OnceLock::new();
    SCOPE_OF
        .get_or_init(|| {
            InstrumentationScope::builder(SCOPE)
                .with_version(env!("CARGO_PKG_VERSION"))
                .build()
        })
        .clone()
}

fn nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn time(ns: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(ns)
}

fn json_attributes(attributes: &[KeyValue]) -> Map<String, serde_json::Value> {
    attributes
        .iter()
        .map(|kv| (kv.key.to_string(), json_value(&kv.value)))
        .collect()
}

fn json_value(v: &Value) -> serde_json::Value {
    match v {
        Value::Bool(b) => (*b).into(),
        Value::I64(i) => (*i).into(),
        Value::F64(f) => (*f).into(),
        Value::String(s) => s.as_str().into(),
        Value::Array(Array::String(a)) => a.iter().map(|s| s.as_str()).collect(),
        Value::Array(Array::I64(a)) => a.iter().copied().collect(),
        Value::Array(Array::Bool(a)) => a.iter().copied().collect(),
        Value::Array(Array::F64(a)) => a.iter().copied().collect(),
        other => other.to_string().into(),
    }
}

fn otel_attributes(m: &Map<String, serde_json::Value>) -> Vec<KeyValue> {
    m.iter()
        .filter_map(|(k, v)| Some(KeyValue::new(k.clone(), otel_value(v)?)))
        .collect()
}

fn otel_value(v: &serde_json::Value) -> Option<Value> {
    use serde_json::Value as J;
    Some(match v {
        J::Bool(b) => Value::Bool(*b),
        J::Number(n) => match n.as_i64() {
            Some(i) => Value::I64(i),
            None => Value::F64(n.as_f64()?),
        },
        J::String(s) => Value::String(s.clone().into()),
        J::Array(a) => Value::Array(Array::String(
            a.iter()
                .map(|x| StringValue::from(x.as_str().map(str::to_owned).unwrap_or_default()))
                .collect(),
        )),
        J::Null | J::Object(_) => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_as_the_span_it_was() {
        let root = Span::start("invoke_agent lead", Kind::Internal, None);
        let mut s = Span::start("chat fake", Kind::Client, Some(root.context()));
        s.set("gen_ai.usage.input_tokens", 12i64);
        s.set("gen_ai.request.model", "fake");
        s.event("cancel", vec![KeyValue::new("by", "operator")]);
        s.fail("canceled", "the task was canceled");
        let context = s.context().clone();
        let record = SpanRecord::of(&s, SystemTime::now());
        let line = serde_json::to_string(&record).unwrap();
        let back: SpanRecord = serde_json::from_str(&line).unwrap();
        let data = back.to_span_data().unwrap();
        assert_eq!(data.span_context.trace_id(), context.trace_id());
        assert_eq!(data.span_context.span_id(), context.span_id());
        assert_eq!(data.parent_span_id, root.context().span_id());
        assert_eq!(data.span_kind, SpanKind::Client);
        assert_eq!(data.name, "chat fake");
        assert!(data
            .attributes
            .contains(&KeyValue::new("gen_ai.usage.input_tokens", 12i64)));
        assert_eq!(data.events.events[0].name, "cancel");
        assert_eq!(data.status, Status::error("the task was canceled"));
    }

    #[test]
    fn a_record_with_ids_that_are_not_hex_is_no_span() {
        let s = Span::start("x", Kind::Internal, None);
        let mut record = SpanRecord::of(&s, SystemTime::now());
        record.span_id = "not-hex".into();
        assert!(record.to_span_data().is_none());
    }
}
