//! The one outbound TCP connect of the capsule. It takes an [`Allowed`] destination, which only
//! [`super::check`] makes, so a connection the allow list refused cannot be opened.

use std::io;
use std::time::Duration;

use tokio::net::TcpStream;

use super::Allowed;

/// Connects to an allowed destination within `within`. `localhost` is dialled as 127.0.0.1,
/// the address every door binds (as `mur` itself dials it); other names are resolved and each
/// address tried in turn. Names are matched by the check as written, never by what they
/// resolve to.
pub async fn dial(allowed: &Allowed, within: Duration) -> io::Result<TcpStream> {
    let target = allowed.target();
    let port = target.port();
    let connect = async {
        match target.host() {
            "localhost" => TcpStream::connect(("127.0.0.1", port)).await,
            host => {
                let host = host.trim_start_matches('[').trim_end_matches(']');
                TcpStream::connect((host, port)).await
            }
        }
    };
    match tokio::time::timeout(within, connect).await {
        Ok(connected) => connected,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("no connection within {} s", within.as_secs()),
        )),
    }
}
