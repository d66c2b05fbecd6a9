//! The exporter: spans ended anywhere in the capsule go through one bounded queue to a task on
//! the capsule's runtime, which sends them in batches as OTLP over HTTP/protobuf
//! (`opentelemetry-otlp` on the hyper client). Nothing on a request's path waits for it: a span
//! that finds the queue full is dropped and counted, and so is a batch the collector refused or
//! did not answer in time. The first drop is said once, on stderr and in the trace; the total
//! is written at the session's end.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::{SpanData, SpanExporter as _};
use opentelemetry_sdk::Resource;
use tokio::sync::{mpsc, oneshot};

use super::config::Config;
use super::record::span_data;
use super::span::Span;
use crate::trace::TraceEvent;

/// Spans that may wait for the exporter (the SDK's `OTEL_BSP_MAX_QUEUE_SIZE` default).
pub const QUEUE_BOUND: usize = 2048;
/// Spans per request to the collector (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`'s default).
pub const MAX_BATCH: usize = 512;
/// How long a batch waits to fill before it is sent anyway.
pub const SCHEDULE_DELAY: Duration = Duration::from_millis(500);

/// Writes a record into the session's trace.
pub type Record = Arc<dyn Fn(TraceEvent) + Send + Sync>;

enum Msg {
    Span(Box<SpanData>),
    /// Send everything queued before this, then answer.
    Flush(oneshot::Sender<()>),
}

struct Exporting {
    queue: mpsc::Sender<Msg>,
    endpoint: String,
    dropped: AtomicU64,
    said: AtomicBool,
    record: Record,
}

static EXPORTING: OnceLock<Exporting> = OnceLock::new();

/// Whether spans go to a collector.
pub fn on() -> bool {
    EXPORTING.get().is_some()
}

/// Starts the exporter's task on the current runtime. An error says what in the configuration
/// is wrong; nothing is started then.
pub fn start(config: &Config, resource: Resource, record: Record) -> Result<(), String> {
    let client =
        opentelemetry_http::hyper::HyperClient::with_default_connector(config.timeout, None);
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(config.endpoint.clone())
        .with_timeout(config.timeout)
        .build()
        .map_err(|e| {
            format!(
                "the OTLP exporter for {} cannot be built: {e}",
                config.endpoint
            )
        })?;
    exporter.set_resource(&resource);
    let (queue, rx) = mpsc::channel(QUEUE_BOUND);
    let exporting = Exporting {
        queue,
        endpoint: config.endpoint.clone(),
        dropped: AtomicU64::new(0),
        said: AtomicBool::new(false),
        record,
    };
    if EXPORTING.set(exporting).is_err() {
        return Err("the exporter was already started".into());
    }
    tokio::spawn(run(rx, exporter));
    Ok(())
}

/// Queues an ended span; drops (and counts) it when the queue is full.
pub fn queue(span: Span, end: SystemTime) {
    let Some(x) = EXPORTING.get() else {
        return;
    };
    let data = Box::new(span_data(span, end));
    if x.queue.try_send(Msg::Span(data)).is_err() {
        x.dropped(
            1,
            "the export queue was full: the collector takes spans slower than they come",
        );
    }
}

/// Sends what is queued, waiting at most `within`; then writes the session's drop count, if
/// any. Called as the capsule ends.
pub async fn flush(within: Duration) {
    let Some(x) = EXPORTING.get() else {
        return;
    };
    let (tx, rx) = oneshot::channel();
    let sent = async {
        if x.queue.send(Msg::Flush(tx)).await.is_ok() {
            let _ = rx.await;
        }
    };
    if tokio::time::timeout(within, sent).await.is_err() {
        let waiting = (QUEUE_BOUND - x.queue.capacity()) as u64;
        x.dropped(
            waiting,
            "the collector did not take the last spans before the capsule ended",
        );
    }
    let total = x.dropped.load(Ordering::Relaxed);
    if total > 0 {
        (x.record)(TraceEvent::SpansDropped {
            dropped: total,
            reason: "spans dropped in this session, in all".into(),
            endpoint: x.endpoint.clone(),
        });
    }
}

/// How many spans were dropped so far.
pub fn dropped() -> u64 {
    EXPORTING
        .get()
        .map(|x| x.dropped.load(Ordering::Relaxed))
        .unwrap_or(0)
}

impl Exporting {
    fn dropped(&self, n: u64, why: &str) {
        if n == 0 {
            return;
        }
        self.dropped.fetch_add(n, Ordering::Relaxed);
        if self.said.swap(true, Ordering::Relaxed) {
            return;
        }
        eprintln!(
            "murmur: telemetry: {n} span(s) dropped: {why} (collector {}); the task goes on, and \
             later drops are counted in the trace's spans_dropped record",
            self.endpoint
        );
        (self.record)(TraceEvent::SpansDropped {
            dropped: n,
            reason: why.to_owned(),
            endpoint: self.endpoint.clone(),
        });
    }
}

async fn run(mut rx: mpsc::Receiver<Msg>, exporter: opentelemetry_otlp::SpanExporter) {
    let mut batch: Vec<SpanData> = Vec::with_capacity(MAX_BATCH);
    let mut waiting: Vec<oneshot::Sender<()>> = Vec::new();
    while let Some(first) = rx.recv().await {
        take(first, &mut batch, &mut waiting);
        let deadline = tokio::time::Instant::now() + SCHEDULE_DELAY;
        while batch.len() < MAX_BATCH && waiting.is_empty() {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(msg)) => take(msg, &mut batch, &mut waiting),
                Ok(None) | Err(_) => break,
            }
        }
        if !batch.is_empty() {
            let spans = std::mem::replace(&mut batch, Vec::with_capacity(MAX_BATCH));
            let n = spans.len() as u64;
            if let Err(e) = exporter.export(spans).await {
                if let Some(x) = EXPORTING.get() {
                    x.dropped(n, &format!("the collector did not take a batch: {e}"));
                }
            }
        }
        for w in waiting.drain(..) {
            let _ = w.send(());
        }
    }
}

fn take(msg: Msg, batch: &mut Vec<SpanData>, waiting: &mut Vec<oneshot::Sender<()>>) {
    match msg {
        Msg::Span(s) => batch.push(*s),
        Msg::Flush(tx) => waiting.push(tx),
    }
}
