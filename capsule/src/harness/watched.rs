//! Waiting on a watch channel until its value says so: how the attempt hears of a cancel, a
//! turn's end or the end of the attempt, in the attempt and in its stdin writer alike.

use tokio::sync::watch;

/// Resolves once the watched value satisfies `f`; never, if its sender goes away first.
pub(super) async fn signalled<T>(rx: &mut watch::Receiver<T>, f: impl FnMut(&T) -> bool) {
    if rx.wait_for(f).await.is_err() {
        std::future::pending::<()>().await;
    }
}
