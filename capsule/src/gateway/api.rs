//! What the gateway must know of each provider API it forwards: where the caller's key is
//! (`x-api-key` or `Authorization: Bearer`), which requests are model calls, what a call asks
//! for (model, `max_tokens`, streaming), and how that API writes an error, so that a refusal
//! reads to the CLI as its provider's own.

use serde_json::Value;

/// The wire format a gateway forwards (the manifest's `gateway.api`).
pub use crate::manifest::ModelApi as Api;

impl Api {
    /// The trace's word for the provider.
    pub fn word(self) -> &'static str {
        match self {
            Api::Anthropic => "anthropic",
            Api::OpenaiResponses | Api::OpenaiChat => "openai",
        }
    }

    /// Whether a request to `path` is a model call (metered and held to the ceilings); any
    /// other (`/v1/models`, `count_tokens`) is forwarded as it is.
    pub fn is_call(self, path: &str) -> bool {
        let path = path.split('?').next().unwrap_or(path);
        match self {
            Api::Anthropic => path.ends_with("/messages"),
            Api::OpenaiResponses => path.ends_with("/responses"),
            Api::OpenaiChat => path.ends_with("/chat/completions"),
        }
    }

    /// The key a request presents, in either header.
    pub fn presented(headers: &hyper::HeaderMap) -> Option<&str> {
        if let Some(k) = headers.get("x-api-key").and_then(|v| v.to_str().ok()) {
            return Some(k.trim());
        }
        let auth = headers.get("authorization")?.to_str().ok()?;
        auth.strip_prefix("Bearer ")
            .or_else(|| auth.strip_prefix("bearer "))
            .map(str::trim)
    }

    /// The body of an error answer in this API's format.
    pub fn error_body(self, kind: ErrorKind, message: &str) -> String {
        let body = match self {
            Api::Anthropic => serde_json::json!({
                "type": "error",
                "error": { "type": kind.anthropic(), "message": message },
            }),
            Api::OpenaiResponses | Api::OpenaiChat => serde_json::json!({
                "error": {
                    "message": message,
                    "type": kind.openai_type(),
                    "param": null,
                    "code": kind.openai_code(),
                },
            }),
        };
        body.to_string()
    }

    /// The status an error of `kind` answers with in this API.
    pub fn error_status(self, kind: ErrorKind) -> u16 {
        match (self, kind) {
            (_, ErrorKind::Key) => 401,
            (_, ErrorKind::Invalid) => 400,
            (_, ErrorKind::Upstream) => 502,
            // Anthropic answers a spent balance with 400 (the CLI does not retry it); OpenAI
            // with 429 `insufficient_quota`, which its clients do not retry either.
            (Api::Anthropic, ErrorKind::Spend) => 400,
            (_, ErrorKind::Spend) => 429,
        }
    }
}

/// Why the gateway answers instead of the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The key presented is not this capsule's placeholder.
    Key,
    /// A spend ceiling refuses the call.
    Spend,
    /// The request cannot be read.
    Invalid,
    /// The provider could not be reached.
    Upstream,
}

impl ErrorKind {
    fn anthropic(self) -> &'static str {
        match self {
            ErrorKind::Key => "authentication_error",
            ErrorKind::Spend | ErrorKind::Invalid => "invalid_request_error",
            ErrorKind::Upstream => "api_error",
        }
    }

    fn openai_type(self) -> &'static str {
        match self {
            ErrorKind::Key | ErrorKind::Invalid => "invalid_request_error",
            ErrorKind::Spend => "insufficient_quota",
            ErrorKind::Upstream => "server_error",
        }
    }

    fn openai_code(self) -> &'static str {
        match self {
            ErrorKind::Key => "invalid_api_key",
            ErrorKind::Spend => "insufficient_quota",
            ErrorKind::Invalid => "invalid_request",
            ErrorKind::Upstream => "upstream_unreachable",
        }
    }
}

/// What a model call's request asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Asked {
    pub model: Option<String>,
    /// The most output tokens it may answer: what an unmetered call counts as.
    pub max_tokens: u64,
}

impl Asked {
    pub fn of(api: Api, body: &Value) -> Asked {
        let n = |k: &str| body.get(k).and_then(Value::as_u64);
        let max_tokens = match api {
            Api::Anthropic => n("max_tokens"),
            Api::OpenaiResponses => n("max_output_tokens"),
            Api::OpenaiChat => n("max_completion_tokens").or_else(|| n("max_tokens")),
        };
        Asked {
            model: body.get("model").and_then(Value::as_str).map(str::to_owned),
            max_tokens: max_tokens.unwrap_or(0),
        }
    }
}

/// A streamed Chat Completions request reports its usage only when asked: asks, answering
/// whether the body changed.
pub fn ask_for_usage(api: Api, body: &mut Value) -> bool {
    if api != Api::OpenaiChat || body.get("stream").and_then(Value::as_bool) != Some(true) {
        return false;
    }
    let Some(obj) = body.as_object_mut() else {
        return false;
    };
    let options = obj
        .entry("stream_options")
        .or_insert_with(|| Value::Object(Default::default()));
    match options.as_object_mut() {
        Some(o) if o.get("include_usage").and_then(Value::as_bool) != Some(true) => {
            o.insert("include_usage".into(), Value::Bool(true));
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn model_calls_are_told_from_other_requests() {
        assert!(Api::Anthropic.is_call("/v1/messages"));
        assert!(Api::Anthropic.is_call("/v1/messages?beta=true"));
        assert!(!Api::Anthropic.is_call("/v1/messages/count_tokens"));
        assert!(Api::OpenaiResponses.is_call("/v1/responses"));
        assert!(!Api::OpenaiResponses.is_call("/v1/models"));
        assert!(Api::OpenaiChat.is_call("/v1/chat/completions"));
    }

    #[test]
    fn refusals_read_as_the_providers_own_errors() {
        let a: Value =
            serde_json::from_str(&Api::Anthropic.error_body(ErrorKind::Spend, "stop")).unwrap();
        assert_eq!(
            a,
            json!({"type":"error","error":{"type":"invalid_request_error","message":"stop"}})
        );
        assert_eq!(Api::Anthropic.error_status(ErrorKind::Spend), 400);
        let o: Value =
            serde_json::from_str(&Api::OpenaiResponses.error_body(ErrorKind::Spend, "stop"))
                .unwrap();
        assert_eq!(
            o,
            json!({"error":{"message":"stop","type":"insufficient_quota","param":null,"code":"insufficient_quota"}})
        );
        assert_eq!(Api::OpenaiChat.error_status(ErrorKind::Spend), 429);
        assert_eq!(Api::OpenaiChat.error_status(ErrorKind::Key), 401);
    }

    #[test]
    fn what_a_call_asks_for_and_the_usage_a_chat_stream_must_ask_for() {
        let asked = Asked::of(
            Api::Anthropic,
            &json!({"model": "claude-sonnet-5", "max_tokens": 8192}),
        );
        assert_eq!(asked.model.as_deref(), Some("claude-sonnet-5"));
        assert_eq!(asked.max_tokens, 8192);
        assert_eq!(
            Asked::of(Api::OpenaiChat, &json!({"max_tokens": 5})).max_tokens,
            5
        );
        let mut body = json!({"model": "m", "stream": true});
        assert!(ask_for_usage(Api::OpenaiChat, &mut body));
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        assert!(!ask_for_usage(Api::OpenaiChat, &mut body));
        let mut plain = json!({"model": "m"});
        assert!(!ask_for_usage(Api::OpenaiChat, &mut plain));
    }
}
