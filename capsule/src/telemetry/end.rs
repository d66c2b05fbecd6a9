//! Ending a span: it is handed, once, to the trace (a `span` record, what `mur trace show
//! --otlp` reads) unless it is export-only, and, when a collector is configured and its trace
//! is sampled, to the exporter's queue. Nothing here waits: the trace and the queue take it or
//! count it lost.

use std::time::SystemTime;

use super::export;
use super::record::SpanRecord;
use super::span::{Kept, Span};
use crate::trace::{Trace, TraceEvent};

impl Span {
    /// Ends the span now: written to `trace` as a `span` record (unless export-only), and
    /// queued for the collector when one is configured and the trace is sampled.
    pub fn end(self, trace: &Trace) {
        self.end_with(&|e| trace.event(e));
    }

    /// [`Span::end`], writing the record through `record` (a part of the capsule that holds
    /// the trace as a recorder, as the model gateway does).
    pub fn end_with(self, record: &dyn Fn(TraceEvent)) {
        let end = SystemTime::now();
        if self.kept == Kept::Recorded {
            record(TraceEvent::Span(Box::new(SpanRecord::of(&self, end))));
        }
        if self.context.is_sampled() {
            export::queue(self, end);
        }
    }
}
