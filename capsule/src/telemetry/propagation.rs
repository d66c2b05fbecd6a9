//! W3C Trace Context (`traceparent`, `tracestate`): read from a request's headers, written on
//! every A2A call murmur makes and into a harness's environment (`TRACEPARENT`, `TRACESTATE`).
//! The SDK's `TraceContextPropagator` parses and formats; a malformed header is no parent.

use hyper::HeaderMap;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{SpanContext, TraceContextExt};
use opentelemetry::Context;
use opentelemetry_sdk::propagation::TraceContextPropagator;

pub const TRACEPARENT: &str = "traceparent";
pub const TRACESTATE: &str = "tracestate";

struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

/// The parent a request names, when its `traceparent` is valid.
pub fn extract(headers: &HeaderMap) -> Option<SpanContext> {
    headers.get(TRACEPARENT)?;
    let cx = TraceContextPropagator::new().extract(&Headers(headers));
    let parent = cx.span().span_context().clone();
    parent.is_valid().then_some(parent)
}

/// The parent an environment names (`TRACEPARENT`, `TRACESTATE`), as a helper reads it.
pub fn extract_pairs(traceparent: &str, tracestate: Option<&str>) -> Option<SpanContext> {
    let mut headers = HeaderMap::new();
    headers.insert(TRACEPARENT, traceparent.parse().ok()?);
    if let Some(state) = tracestate.and_then(|s| s.parse().ok()) {
        headers.insert(TRACESTATE, state);
    }
    extract(&headers)
}

#[derive(Default)]
struct Pairs(Vec<(&'static str, String)>);

impl Injector for Pairs {
    fn set(&mut self, key: &str, value: String) {
        let key = match key {
            TRACEPARENT => TRACEPARENT,
            TRACESTATE => TRACESTATE,
            _ => return,
        };
        if !value.is_empty() {
            self.0.push((key, value));
        }
    }
}

/// The headers that make `context` the parent of what a peer does: `traceparent`, and
/// `tracestate` when it has entries.
pub fn headers_of(context: &SpanContext) -> Vec<(&'static str, String)> {
    if !context.is_valid() {
        return Vec::new();
    }
    let mut pairs = Pairs::default();
    let cx = Context::new().with_remote_span_context(context.clone());
    TraceContextPropagator::new().inject_context(&cx, &mut pairs);
    pairs.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{SpanId, TraceFlags, TraceId, TraceState};

    #[test]
    fn a_traceparent_reads_and_writes_back_the_same() {
        let line = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let mut h = HeaderMap::new();
        h.insert(TRACEPARENT, line.parse().unwrap());
        h.insert(TRACESTATE, "vendor=x".parse().unwrap());
        let parent = extract(&h).unwrap();
        assert_eq!(
            parent.trace_id(),
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap()
        );
        assert!(parent.is_remote() && parent.is_sampled());
        let out = headers_of(&parent);
        assert_eq!(
            out,
            [
                (TRACEPARENT, line.to_owned()),
                (TRACESTATE, "vendor=x".to_owned())
            ]
        );
    }

    #[test]
    fn malformed_or_zero_traceparents_are_no_parent() {
        for bad in [
            "garbage",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            let mut h = HeaderMap::new();
            h.insert(TRACEPARENT, bad.parse().unwrap());
            assert!(extract(&h).is_none(), "{bad}");
        }
        assert!(extract(&HeaderMap::new()).is_none());
    }

    #[test]
    fn an_invalid_context_writes_no_header() {
        let none = SpanContext::new(
            TraceId::INVALID,
            SpanId::INVALID,
            TraceFlags::default(),
            false,
            TraceState::default(),
        );
        assert!(headers_of(&none).is_empty());
    }
}
