//! The writer's promises: records reach the file in order, a flush is a barrier, a full queue
//! drops and counts instead of blocking (and the count reaches the file), and nothing queued is
//! lost when the trace is closed or dropped.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};

use serde_json::Value;

use super::*;
use crate::ids::TaskId;
use std::fs::Permissions;

/// A sink the test can read while the writer still holds it (also for other modules' tests).
#[derive(Clone, Default)]
pub(crate) struct Shared(Arc<Mutex<Vec<u8>>>);

impl Shared {
    /// Every record written so far.
    pub(crate) fn records(&self) -> Vec<Value> {
        let bytes = self.0.lock().unwrap().clone();
        String::from_utf8(bytes)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A sink whose every write waits until the test opens the gate: a stalled disk.
#[derive(Clone, Default)]
struct Gated {
    open: Arc<(Mutex<bool>, Condvar)>,
    inner: Shared,
}

impl Gated {
    fn open(&self) {
        *self.open.0.lock().unwrap() = true;
        self.open.1.notify_all();
    }
}

impl Write for Gated {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let (lock, opened) = &*self.open;
        let mut open = lock.lock().unwrap();
        while !*open {
            open = opened.wait(open).unwrap();
        }
        drop(open);
        self.inner.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn ses() -> SessionId {
    SessionId::from_wire("ses_test")
}

fn failed(n: usize) -> TraceEvent {
    TraceEvent::TaskFailed {
        task_id: TaskId::from_wire(&format!("tsk_{n}")),
        cause: format!("cause {n}"),
    }
}

fn kinds(records: &[Value]) -> Vec<&str> {
    records
        .iter()
        .map(|r| r["event_type"].as_str().unwrap())
        .collect()
}

/// The task numbers of the `task_failed` records, and the sum the lost records report.
fn tally(records: &[Value]) -> (Vec<usize>, u64) {
    let mut seen = Vec::new();
    let mut lost = 0;
    for r in records {
        match r["event_type"].as_str() {
            Some("task_failed") => {
                let id = r["task_id"].as_str().unwrap();
                seen.push(id["tsk_".len()..].parse().unwrap());
            }
            Some("trace_records_lost") => lost += r["lost"].as_u64().unwrap(),
            other => panic!("unexpected record {other:?}"),
        }
    }
    (seen, lost)
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "murmur-trace-{name}-{}-{}",
        std::process::id(),
        Millis::now().0
    ));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[tokio::test]
async fn a_flush_returns_once_everything_before_it_is_in_the_file() {
    let dir = temp_dir("flush");
    let trace = Trace::open(&dir.join("ses_test"), ses()).unwrap();
    for n in 0..100 {
        trace.event(failed(n));
    }
    assert_eq!(trace.flush().await, Flushed::Written);
    // Read straight after the barrier, with the writer still running.
    let text = std::fs::read_to_string(dir.join("ses_test").join(FILE_NAME)).unwrap();
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(tally(&records), ((0..100).collect(), 0));
    assert_eq!(records[0]["session_id"], "ses_test");
    drop(trace);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_file_is_0600_in_a_0700_folder() {
    let dir = temp_dir("modes");
    let session = dir.join("ses_test");
    std::fs::create_dir_all(&session).unwrap();
    std::fs::set_permissions(&session, Permissions::from_mode(0o755)).unwrap();
    let trace = Trace::open(&session, ses()).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&session), 0o700, "an existing folder is tightened");
    assert_eq!(mode(&session.join(FILE_NAME)), 0o600);
    drop(trace);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn nothing_queued_is_lost_when_the_trace_is_dropped() {
    let sink = Shared::default();
    let trace = Trace::to_sink(sink.clone(), ses(), 2048).unwrap();
    for n in 0..1000 {
        trace.event(failed(n));
    }
    drop(trace);
    assert_eq!(tally(&sink.records()), ((0..1000).collect(), 0));
}

#[tokio::test]
async fn close_writes_everything_before_it_and_nothing_after() {
    let sink = Shared::default();
    let trace = Trace::to_sink(sink.clone(), ses(), 16).unwrap();
    for n in 0..10 {
        trace.event(failed(n));
    }
    assert_eq!(trace.close().await, Flushed::Written);
    assert_eq!(tally(&sink.records()), ((0..10).collect(), 0));
    trace.event(failed(10));
    assert_eq!(trace.flush().await, Flushed::NoWriter);
    drop(trace);
    assert_eq!(sink.records().len(), 10, "nothing is written after close");
}

#[tokio::test]
async fn a_full_queue_drops_and_counts_and_never_blocks() {
    let sink = Gated::default();
    let trace = Trace::to_sink(sink.clone(), ses(), 4).unwrap();
    // The writer is stalled on its first write; this loop must still finish at once.
    let sent = 500;
    for n in 0..sent {
        trace.event(failed(n));
    }
    assert!(trace.lost.load(Ordering::Relaxed) > 0, "some had no room");
    sink.open();
    assert_eq!(trace.flush().await, Flushed::Written);
    let records = sink.inner.records();
    let (seen, lost) = tally(&records);
    assert!(lost > 0, "{:?}", kinds(&records));
    assert_eq!(
        seen.len() as u64 + lost,
        sent as u64,
        "every record is written or counted"
    );
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "in order: {seen:?}");
    assert_eq!(
        trace.lost.load(Ordering::Relaxed),
        0,
        "the barrier reported them"
    );
}

#[tokio::test]
async fn the_lost_count_lands_where_the_gap_is() {
    let sink = Gated::default();
    let trace = Trace::to_sink(sink.clone(), ses(), 4).unwrap();
    for n in 0..500 {
        trace.event(failed(n));
    }
    let lost = trace.lost.load(Ordering::Relaxed);
    assert!(lost > 0);
    sink.open();
    // Wait for room without a barrier (which would report the count itself).
    let queue = trace.queue.clone().unwrap();
    while queue.capacity() < queue.max_capacity() {
        tokio::task::yield_now().await;
    }
    trace.event(failed(500));
    assert_eq!(trace.flush().await, Flushed::Written);
    let records = sink.inner.records();
    let tail = &records[records.len() - 2..];
    assert_eq!(kinds(tail), ["trace_records_lost", "task_failed"]);
    assert_eq!(tail[0]["lost"], lost);
    assert_eq!(tail[1]["task_id"], "tsk_500");
    let (seen, reported) = tally(&records);
    assert_eq!(seen.len() as u64 + reported, 501);
}

#[tokio::test]
async fn a_disabled_trace_writes_nothing_and_never_waits() {
    let trace = Trace::disabled(ses());
    trace.event(failed(0));
    assert_eq!(trace.flush().await, Flushed::NoWriter);
    assert_eq!(trace.close().await, Flushed::NoWriter);
}
