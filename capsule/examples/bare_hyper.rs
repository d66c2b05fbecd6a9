//! The ceiling for scripts/bench/compare.sh: a hyper HTTP/1 server on the same runtime as a
//! capsule's door (two worker threads, nodelay), which reads each request's body and answers a
//! fixed JSON-RPC body. Whatever the door does beyond this is what the door costs.
//! Usage: `cargo run --release --example bare_hyper -- PORT`

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

const BODY: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"tsk_0","contextId":"ctx_0","status":{"state":"TASK_STATE_COMPLETED"}}}}"#;

async fn answer(req: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    // Read the body as the door does, then drop it.
    let _ = req.into_body().collect().await;
    let mut res = Response::new(Full::new(Bytes::from_static(BODY.as_bytes())));
    res.headers_mut().insert(
        "content-type",
        "application/json".parse().expect("a valid header"),
    );
    Ok(res)
}

fn main() -> std::io::Result<()> {
    let port: u16 = match std::env::args().nth(1).map(|p| p.parse()) {
        Some(Ok(p)) => p,
        _ => {
            eprintln!("usage: bare_hyper PORT");
            std::process::exit(2);
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
        loop {
            let (stream, _) = listener.accept().await?;
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service_fn(answer))
                    .await;
            });
        }
    })
}
