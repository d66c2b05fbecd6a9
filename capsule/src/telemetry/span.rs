//! A span as murmur builds it: its ids (continued from a W3C parent or new), name, kind, start,
//! attributes and events. Ending it (`end.rs`) hands it, once, to the trace and the exporter.
//! Nothing here waits, locks or does I/O: a span costs a few small allocations.

use std::borrow::Cow;
use std::time::SystemTime;

use opentelemetry::trace::{SpanContext, SpanId, SpanKind, TraceFlags, TraceId, TraceState};
use opentelemetry::{KeyValue, Value};
use rand::RngCore;

/// What a span is, in the conventions' words: a door answering (SERVER), a call out (CLIENT),
/// or work inside the capsule (INTERNAL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Server,
    Client,
    Internal,
}

impl Kind {
    pub fn otel(self) -> SpanKind {
        match self {
            Kind::Server => SpanKind::Server,
            Kind::Client => SpanKind::Client,
            Kind::Internal => SpanKind::Internal,
        }
    }
}

/// One event on a span: a cancel, an egress refusal, a spend ceiling, a restart.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanEvent {
    pub name: Cow<'static, str>,
    pub at: SystemTime,
    pub attributes: Vec<KeyValue>,
}

impl SpanEvent {
    pub fn now(name: &'static str, attributes: Vec<KeyValue>) -> SpanEvent {
        SpanEvent {
            name: Cow::Borrowed(name),
            at: SystemTime::now(),
            attributes,
        }
    }
}

/// Where a span's trace goes: into `trace.jsonl` and the exporter, or the exporter only (a
/// door span of a method that starts no task: GetTask, ListTasks, … are not worth a trace
/// record each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    Recorded,
    ExportOnly,
}

/// A span under way. Dropped without [`Span::end`], it is lost (nothing is half-written).
#[derive(Debug)]
pub struct Span {
    pub(super) context: SpanContext,
    pub(super) parent: Option<(SpanId, bool)>,
    pub(super) name: Cow<'static, str>,
    pub(super) kind: Kind,
    pub(super) start: SystemTime,
    pub(super) attributes: Vec<KeyValue>,
    pub(super) events: Vec<SpanEvent>,
    /// `error.type`'s failure message, when the span failed.
    pub(super) error: Option<String>,
    pub(super) kept: Kept,
}

impl Span {
    /// A span starting now, under `parent` (a W3C parent from a request, or a span of this
    /// capsule), else the root of a new trace. A parent's sampling decision is kept; a root is
    /// sampled.
    pub fn start(
        name: impl Into<Cow<'static, str>>,
        kind: Kind,
        parent: Option<&SpanContext>,
    ) -> Span {
        let (trace_id, flags, state, parent_ids) = match parent.filter(|p| p.is_valid()) {
            Some(p) => (
                p.trace_id(),
                p.trace_flags(),
                p.trace_state().clone(),
                Some((p.span_id(), p.is_remote())),
            ),
            None => (
                new_trace_id(),
                TraceFlags::SAMPLED,
                TraceState::default(),
                None,
            ),
        };
        Span {
            context: SpanContext::new(trace_id, new_span_id(), flags, false, state),
            parent: parent_ids,
            name: name.into(),
            kind,
            start: SystemTime::now(),
            // Room for a door span's attributes, the most common span, without regrowing.
            attributes: Vec::with_capacity(6),
            events: Vec::new(),
            error: None,
            kept: Kept::Recorded,
        }
    }

    /// The same span, started at `at` instead (a call measured before its span was made).
    pub fn started_at(mut self, at: SystemTime) -> Span {
        self.start = at;
        self
    }

    /// The same span, kept by the exporter only.
    pub fn export_only(mut self) -> Span {
        self.kept = Kept::ExportOnly;
        self
    }

    /// What children and outgoing calls carry as their parent.
    pub fn context(&self) -> &SpanContext {
        &self.context
    }

    /// Sets (or replaces) an attribute.
    pub fn set(&mut self, key: &'static str, value: impl Into<Value>) {
        let value = value.into();
        match self.attributes.iter_mut().find(|kv| kv.key.as_str() == key) {
            Some(kv) => kv.value = value,
            None => self.attributes.push(KeyValue::new(key, value)),
        }
    }

    /// Sets an attribute when there is a value.
    pub fn set_some(&mut self, key: &'static str, value: Option<impl Into<Value>>) {
        if let Some(v) = value {
            self.set(key, v);
        }
    }

    /// Adds an event stamped now.
    pub fn event(&mut self, name: &'static str, attributes: Vec<KeyValue>) {
        self.events.push(SpanEvent::now(name, attributes));
    }

    /// Adds events that were noted while the span ran.
    pub fn events(&mut self, events: Vec<SpanEvent>) {
        self.events.extend(events);
    }

    /// Marks the span failed: `error.type` (the conventions' low-cardinality class) and the
    /// status message.
    pub fn fail(&mut self, error_type: &'static str, message: impl Into<String>) {
        self.set("error.type", error_type);
        self.error = Some(message.into());
    }
}

fn new_trace_id() -> TraceId {
    let mut bytes = [0u8; 16];
    while bytes == [0u8; 16] {
        rand::thread_rng().fill_bytes(&mut bytes);
    }
    TraceId::from_bytes(bytes)
}

fn new_span_id() -> SpanId {
    let mut bytes = [0u8; 8];
    while bytes == [0u8; 8] {
        rand::thread_rng().fill_bytes(&mut bytes);
    }
    SpanId::from_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_continues_its_parents_trace_and_names_it() {
        let root = Span::start("root", Kind::Server, None);
        let child = Span::start("child", Kind::Internal, Some(root.context()));
        assert_eq!(child.context.trace_id(), root.context.trace_id());
        assert_ne!(child.context.span_id(), root.context.span_id());
        assert_eq!(child.parent, Some((root.context.span_id(), false)));
        assert!(child.context.is_sampled());
    }

    #[test]
    fn an_unsampled_parent_keeps_its_children_unsampled() {
        let parent = SpanContext::new(
            TraceId::from_bytes([1; 16]),
            SpanId::from_bytes([2; 8]),
            TraceFlags::default(),
            true,
            TraceState::default(),
        );
        let child = Span::start("child", Kind::Internal, Some(&parent));
        assert!(!child.context.is_sampled());
        assert_eq!(child.parent, Some((SpanId::from_bytes([2; 8]), true)));
    }

    #[test]
    fn set_replaces_an_attribute_of_the_same_key() {
        let mut s = Span::start("s", Kind::Internal, None);
        s.set("a2a.task.state", "TASK_STATE_SUBMITTED");
        s.set("a2a.task.state", "TASK_STATE_COMPLETED");
        assert_eq!(s.attributes.len(), 1);
        assert_eq!(s.attributes[0].value.as_str(), "TASK_STATE_COMPLETED");
    }
}
