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
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::{mpsc, oneshot, Notify};

use super::config::Config;
use super::record::span_data;
use super::span::Span;
use crate::trace::TraceEvent;

/// Spans that may wait for the exporter (the SDK's `OTEL_BSP_MAX_QUEUE_SIZE` default).
pub const QUEUE_BOUND: usize = 2048;
/// Spans per request to the collector (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`'s default).
pub const MAX_BATCH: usize = 512;
/// How long spans wait for the exporter when no batch fills sooner.
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
    /// Wakes the exporter before its delay is up: a batch is full, or a flush waits. A span
    /// alone never wakes it, so a busy door pays no task wake per span.
    wake: Notify,
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
        wake: Notify::new(),
        endpoint: without_userinfo(&config.endpoint),
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

/// The endpoint as stderr and the trace name it: a `user:password@` in it stays out.
fn without_userinfo(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
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
    if QUEUE_BOUND - x.queue.capacity() == MAX_BATCH {
        x.wake.notify_one();
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
            x.wake.notify_one();
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

/// Sleeps for the schedule delay (or until woken), then sends everything queued in batches.
/// Draining with `try_recv` keeps the senders' side free of wake-ups.
async fn run(mut rx: mpsc::Receiver<Msg>, exporter: opentelemetry_otlp::SpanExporter) {
    let Some(x) = EXPORTING.get() else {
        return;
    };
    let mut batch: Vec<SpanData> = Vec::with_capacity(MAX_BATCH);
    let mut waiting: Vec<oneshot::Sender<()>> = Vec::new();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(SCHEDULE_DELAY) => {}
            _ = x.wake.notified() => {}
        }
        let mut closed = false;
        loop {
            match rx.try_recv() {
                Ok(msg) => take(msg, &mut batch, &mut waiting),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    closed = true;
                    break;
                }
            }
            if batch.len() == MAX_BATCH {
                send(&exporter, &mut batch, x).await;
            }
        }
        send(&exporter, &mut batch, x).await;
        for w in waiting.drain(..) {
            let _ = w.send(());
        }
        if closed {
            return;
        }
    }
}

async fn send(
    exporter: &opentelemetry_otlp::SpanExporter,
    batch: &mut Vec<SpanData>,
    x: &Exporting,
) {
    if batch.is_empty() {
        return;
    }
    let spans = std::mem::replace(batch, Vec::with_capacity(MAX_BATCH));
    let n = spans.len() as u64;
    if let Err(e) = exporter.export(spans).await {
        x.dropped(n, &format!("the collector did not take a batch: {e}"));
    }
}

fn take(msg: Msg, batch: &mut Vec<SpanData>, waiting: &mut Vec<oneshot::Sender<()>>) {
    match msg {
        Msg::Span(s) => batch.push(*s),
        Msg::Flush(tx) => waiting.push(tx),
    }
}

#[cfg(test)]
mod tests {
    use super::without_userinfo;

    #[test]
    fn credentials_in_the_endpoint_are_never_shown() {
        assert_eq!(
            without_userinfo("http://user:s3cret@collector:4318/v1/traces"),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            without_userinfo("http://127.0.0.1:4318/v1/traces"),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(without_userinfo("http://a:1/p@q"), "http://a:1/p@q");
    }
}
