//! `mur trace show --otlp`: the `span` records of finished sessions as one OTLP/JSON
//! `ExportTraceServiceRequest` (the official protobuf definitions' JSON mapping), one resource
//! per session, so a run made without a collector can still be loaded into one.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
use serde_json::Value;

use super::{offline_resource, Identity, SpanRecord};

/// The `span` records among a trace file's parsed lines; other records are not spans.
pub fn spans_of(lines: &[Value]) -> Vec<SpanRecord> {
    lines
        .iter()
        .filter(|l| l["event_type"] == "span")
        .filter_map(|l| serde_json::from_value(l.clone()).ok())
        .collect()
}

/// One request holding every session's spans under that session's resource. Records whose ids
/// are not a span's are left out.
pub fn request(sessions: &[(Identity<'_>, Vec<SpanRecord>)]) -> Result<String, String> {
    let mut resource_spans = Vec::new();
    for (who, records) in sessions {
        let spans = records
            .iter()
            .filter_map(SpanRecord::to_span_data)
            .collect();
        let resource = ResourceAttributesWithSchema::from(&offline_resource(who));
        resource_spans.extend(group_spans_by_resource_and_scope(spans, &resource));
    }
    let request = ExportTraceServiceRequest { resource_spans };
    serde_json::to_string_pretty(&request)
        .map_err(|e| format!("the spans could not be written as OTLP JSON: {e}"))
}

#[cfg(test)]
mod tests {
    use super::super::{Kind, Span};
    use super::*;
    use std::time::SystemTime;

    #[test]
    fn records_become_otlp_json_with_hex_ids_and_the_sessions_resource() {
        let mut s = Span::start("invoke_agent lead", Kind::Internal, None);
        s.set("gen_ai.usage.input_tokens", 7i64);
        let record = SpanRecord::of(&s, SystemTime::now());
        let mut line = serde_json::to_value(&record).unwrap();
        line["event_type"] = "span".into();
        let other = serde_json::json!({"event_type": "task_start"});
        let records = spans_of(&[other, line]);
        assert_eq!(records.len(), 1);
        let who = Identity {
            session_id: "ses_1",
            capsule: "lead",
            formation: Some(("split", "lead")),
        };
        let json: Value = serde_json::from_str(&request(&[(who, records)]).unwrap()).unwrap();
        let rs = &json["resourceSpans"][0];
        let span = &rs["scopeSpans"][0]["spans"][0];
        assert_eq!(span["traceId"], record.trace_id.as_str());
        assert_eq!(span["spanId"], record.span_id.as_str());
        assert_eq!(span["name"], "invoke_agent lead");
        assert_eq!(rs["scopeSpans"][0]["scope"]["name"], "murmur");
        let attrs = rs["resource"]["attributes"].as_array().unwrap();
        assert!(attrs
            .iter()
            .any(|a| a["key"] == "murmur.session.id" && a["value"]["stringValue"] == "ses_1"));
        assert!(attrs
            .iter()
            .any(|a| a["key"] == "service.name" && a["value"]["stringValue"] == "murmur"));
    }
}
