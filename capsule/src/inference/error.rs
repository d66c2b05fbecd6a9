//! Why an inference call failed, and the one table of sentences that say so (docs/inference.md
//! "Provider errors" repeats it). Every sentence names the provider and, for an HTTP answer, its
//! status; none carries the API key (`client::Endpoint::scrub` removes it from whatever a
//! provider echoed).

use std::time::Duration;

use super::Provider;

/// What went wrong with one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The provider answered with an error status; `detail` is its own error message, if any.
    Status {
        status: u16,
        detail: String,
        retry_after: Option<Duration>,
    },
    /// No TCP connection (refused, unreachable, timed out).
    Connect(String),
    /// The TLS handshake failed.
    Tls(String),
    /// The body was not the provider's wire format.
    Malformed(String),
    /// The stream ended before the message did.
    Truncated,
    /// The reply went on past the most one call may take (its seconds), however steadily it
    /// trickled.
    Overran(u64),
    /// The provider sent an error in the stream.
    Streamed(String),
    /// The provider said mid-stream it is overloaded (Anthropic's `overloaded_error`): worth
    /// another attempt while nothing of the reply has been streamed.
    Overloaded(String),
}

/// A failed call: the provider, the failure, and how many attempts were made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallError {
    pub provider: Provider,
    pub failure: Failure,
    pub attempts: u32,
}

impl CallError {
    pub fn new(provider: Provider, failure: Failure) -> CallError {
        CallError {
            provider,
            failure,
            attempts: 1,
        }
    }

    /// 429, 5xx and a mid-stream overload are worth another attempt; nothing else is.
    pub fn retryable(&self) -> bool {
        match self.failure {
            Failure::Status { status, .. } => status == 429 || status >= 500,
            Failure::Overloaded(_) => true,
            _ => false,
        }
    }

    /// How long the provider asked us to wait (`retry-after`).
    pub fn retry_after(&self) -> Option<Duration> {
        match &self.failure {
            Failure::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    pub fn after_attempts(mut self, attempts: u32) -> CallError {
        self.attempts = attempts;
        self
    }

    /// The HTTP status, when the provider answered with one.
    pub fn status(&self) -> Option<u16> {
        match &self.failure {
            Failure::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = self.provider.name();
        let tries = match self.attempts {
            1 => String::new(),
            n => format!(" (after {n} attempts)"),
        };
        let detail = |d: &str| match d.is_empty() {
            true => String::new(),
            false => format!(": {d}"),
        };
        match &self.failure {
            Failure::Status { status: 401, detail: d, .. } => write!(
                f,
                "{p} refused the API key (HTTP 401){}; check gateway.api_key",
                detail(d)
            ),
            Failure::Status { status: 403, detail: d, .. } => write!(
                f,
                "{p} denied access (HTTP 403){}; the key may lack access to this model",
                detail(d)
            ),
            Failure::Status { status: 404, detail: d, .. } => write!(
                f,
                "{p} found no such model or endpoint (HTTP 404){}; check inference.model and gateway.endpoint",
                detail(d)
            ),
            Failure::Status { status: 429, detail: d, .. } => write!(
                f,
                "{p} rate-limited the call (HTTP 429){tries}{}",
                detail(d)
            ),
            Failure::Status { status, detail: d, .. } if *status >= 500 => write!(
                f,
                "{p} failed with HTTP {status}{tries}{}",
                detail(d)
            ),
            Failure::Status { status, detail: d, .. } => write!(
                f,
                "{p} rejected the request (HTTP {status}){}",
                detail(d)
            ),
            Failure::Connect(why) => write!(f, "cannot connect to {p}: {why}"),
            Failure::Tls(why) => write!(f, "the TLS handshake with {p} failed: {why}"),
            Failure::Malformed(why) => write!(f, "{p} sent a reply that is not its wire format: {why}"),
            Failure::Truncated => write!(f, "{p}'s reply stream ended before the message did"),
            Failure::Overran(secs) => write!(
                f,
                "{p}'s reply was still streaming after {secs} s, the most one call may take"
            ),
            Failure::Streamed(why) => write!(f, "{p} reported an error mid-stream: {why}"),
            Failure::Overloaded(why) => write!(
                f,
                "{p} reported an error mid-stream{tries}: overloaded_error: {why}"
            ),
        }
    }
}
