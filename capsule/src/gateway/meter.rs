//! Reading what a model call used from its answer as the answer passes through, in each API's
//! own words: Anthropic's `message_start` and `message_delta` usage (cache tokens included),
//! OpenAI Responses' `response.completed`, Chat Completions' final usage chunk; or the `usage`
//! of a whole JSON answer. The bytes themselves are never held back: the meter sees a copy of
//! each chunk, keeps at most [`MOST_BUFFERED`] bytes of an unfinished line or JSON body, and
//! gives up (an unmetered call) rather than grow.

use serde_json::Value;

use super::api::Api;

/// The most of one SSE line, or of a whole JSON answer, the meter keeps.
pub const MOST_BUFFERED: usize = 64 << 10;

/// What one call used, as the provider reported it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Usage {
    pub model: Option<String>,
    /// Input tokens not read from or written to the cache.
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub stop_reason: Option<String>,
}

impl Usage {
    /// Every token the call used: what a token ceiling counts.
    pub fn tokens(&self) -> u64 {
        self.input
            .saturating_add(self.output)
            .saturating_add(self.cache_read)
            .saturating_add(self.cache_write)
    }
}

/// Follows one answer's bytes.
pub struct Meter {
    api: Api,
    sse: bool,
    buffer: Vec<u8>,
    /// A line (or body) grew past the bound: skipped to its end, or the body given up.
    overflowed: bool,
    usage: Usage,
    /// Whether the provider reported any usage at all.
    reported: bool,
    /// What an event's data must hold to be worth parsing (see [`Meter::carries_usage`]).
    wanted: Vec<memchr::memmem::Finder<'static>>,
    /// A chat chunk's `"usage"`, worth parsing unless it is one of these (`"usage":null`).
    usage_unless: Option<(
        memchr::memmem::Finder<'static>,
        Vec<memchr::memmem::Finder<'static>>,
    )>,
}

impl Meter {
    /// `sse`: the answer is `text/event-stream`; otherwise one JSON body.
    pub fn new(api: Api, sse: bool) -> Meter {
        let finders = |needles: &[&'static str]| {
            needles
                .iter()
                .map(|n| memchr::memmem::Finder::new(n.as_bytes()))
                .collect::<Vec<_>>()
        };
        let (wanted, usage_unless) = match api {
            Api::Anthropic => (finders(&["\"message_start\"", "\"message_delta\""]), None),
            Api::OpenaiResponses => (finders(&["\"response.completed\""]), None),
            Api::OpenaiChat => (
                finders(&["\"finish_reason\":\"", "\"finish_reason\": \""]),
                Some((
                    memchr::memmem::Finder::new(b"\"usage\""),
                    finders(&["\"usage\":null", "\"usage\": null"]),
                )),
            ),
        };
        Meter {
            api,
            sse,
            buffer: Vec::new(),
            overflowed: false,
            usage: Usage::default(),
            reported: false,
            wanted,
            usage_unless,
        }
    }

    pub fn feed(&mut self, mut bytes: &[u8]) {
        if !self.sse {
            if self.buffer.len() + bytes.len() > MOST_BUFFERED {
                self.overflowed = true;
                self.buffer = Vec::new();
            } else if !self.overflowed {
                self.buffer.extend_from_slice(bytes);
            }
            return;
        }
        while let Some(end) = memchr::memchr(b'\n', bytes) {
            let (line, rest) = bytes.split_at(end);
            bytes = &rest[1..];
            if self.overflowed {
                self.overflowed = false;
                self.buffer.clear();
                continue;
            }
            if self.buffer.is_empty() {
                self.line(line);
            } else {
                let mut whole = std::mem::take(&mut self.buffer);
                whole.extend_from_slice(line);
                self.line(&whole);
            }
        }
        if self.overflowed || self.buffer.len() + bytes.len() > MOST_BUFFERED {
            self.overflowed = true;
            self.buffer.clear();
        } else {
            self.buffer.extend_from_slice(bytes);
        }
    }

    /// The usage read, once the answer has ended; `None` when the provider reported none.
    pub fn finish(mut self) -> Option<Usage> {
        if !self.sse && !self.overflowed {
            if let Ok(body) = serde_json::from_slice::<Value>(&self.buffer) {
                self.whole(&body);
            }
        }
        self.reported.then_some(self.usage)
    }

    fn line(&mut self, line: &[u8]) {
        let Some(data) = line.strip_prefix(b"data:") else {
            return;
        };
        // Most events are text deltas: only those that can carry usage are parsed.
        if !self.carries_usage(data) {
            return;
        }
        let Ok(event) = serde_json::from_slice::<Value>(data.trim_ascii()) else {
            return;
        };
        match self.api {
            Api::Anthropic => self.anthropic_event(&event),
            Api::OpenaiResponses => {
                if event.get("type").and_then(Value::as_str) == Some("response.completed") {
                    if let Some(response) = event.get("response") {
                        self.responses(response);
                    }
                }
            }
            Api::OpenaiChat => self.chat(&event),
        }
    }

    /// Whether an event's data may hold what the meter reads: a search before the parse, so
    /// a stream of text deltas costs a scan, not a JSON parse per event. A chat chunk naming
    /// its finish reason is parsed even when its usage is null.
    fn carries_usage(&self, data: &[u8]) -> bool {
        let any =
            |fs: &[memchr::memmem::Finder<'static>]| fs.iter().any(|f| f.find(data).is_some());
        any(&self.wanted)
            || self
                .usage_unless
                .as_ref()
                .is_some_and(|(usage, null)| usage.find(data).is_some() && !any(null))
    }

    fn whole(&mut self, body: &Value) {
        match self.api {
            Api::Anthropic => {
                self.model(body);
                if let Some(u) = body.get("usage") {
                    self.anthropic_usage(u);
                }
                self.stop(body.get("stop_reason"));
            }
            Api::OpenaiResponses => self.responses(body),
            Api::OpenaiChat => self.chat(body),
        }
    }

    fn anthropic_event(&mut self, event: &Value) {
        match event.get("type").and_then(Value::as_str) {
            Some("message_start") => {
                if let Some(message) = event.get("message") {
                    self.model(message);
                    if let Some(u) = message.get("usage") {
                        self.anthropic_usage(u);
                    }
                }
            }
            Some("message_delta") => {
                if let Some(u) = event.get("usage") {
                    self.anthropic_usage(u);
                }
                self.stop(event.pointer("/delta/stop_reason"));
            }
            _ => {}
        }
    }

    /// Anthropic's counts are running totals: a later event's figure replaces an earlier one.
    fn anthropic_usage(&mut self, u: &Value) {
        let n = |k: &str| u.get(k).and_then(Value::as_u64);
        let mut any = false;
        for (key, slot) in [
            ("input_tokens", &mut self.usage.input),
            ("output_tokens", &mut self.usage.output),
            ("cache_read_input_tokens", &mut self.usage.cache_read),
            ("cache_creation_input_tokens", &mut self.usage.cache_write),
        ] {
            if let Some(v) = n(key) {
                *slot = v;
                any = true;
            }
        }
        self.reported |= any;
    }

    fn responses(&mut self, response: &Value) {
        self.model(response);
        if let Some(u) = response.get("usage").filter(|u| u.is_object()) {
            let cached = u
                .pointer("/input_tokens_details/cached_tokens")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            let input = u.get("input_tokens").and_then(Value::as_u64).unwrap_or(0);
            self.usage.input = input.saturating_sub(cached);
            self.usage.cache_read = cached;
            self.usage.output = u.get("output_tokens").and_then(Value::as_u64).unwrap_or(0);
            self.reported = true;
        }
        self.stop(response.get("status"));
    }

    fn chat(&mut self, chunk: &Value) {
        self.model(chunk);
        if let Some(reason) = chunk
            .pointer("/choices/0/finish_reason")
            .filter(|r| r.is_string())
        {
            self.stop(Some(reason));
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            let cached = u
                .pointer("/prompt_tokens_details/cached_tokens")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            let input = u.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0);
            self.usage.input = input.saturating_sub(cached);
            self.usage.cache_read = cached;
            self.usage.output = u
                .get("completion_tokens")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            self.reported = true;
        }
    }

    fn model(&mut self, v: &Value) {
        if let Some(m) = v.get("model").and_then(Value::as_str) {
            self.usage.model = Some(m.to_owned());
        }
    }

    fn stop(&mut self, v: Option<&Value>) {
        if let Some(s) = v.and_then(Value::as_str) {
            self.usage.stop_reason = Some(s.to_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `text` in pieces of `size` bytes, so events split anywhere.
    fn metered(api: Api, sse: bool, text: &str, size: usize) -> Option<Usage> {
        let mut m = Meter::new(api, sse);
        for piece in text.as_bytes().chunks(size) {
            m.feed(piece);
        }
        m.finish()
    }

    const ANTHROPIC: &str = "event: message_start\n\
        data: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-5\",\"usage\":{\"input_tokens\":1000,\"cache_read_input_tokens\":200,\"cache_creation_input_tokens\":100,\"output_tokens\":1}}}\n\n\
        event: content_block_delta\n\
        data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n\
        event: message_delta\n\
        data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":200}}\n\n\
        event: message_stop\n\
        data: {\"type\":\"message_stop\"}\n\n";

    #[test]
    fn anthropic_streams_are_metered_however_they_are_cut() {
        for size in [1, 7, 64, 4096] {
            let u = metered(Api::Anthropic, true, ANTHROPIC, size).unwrap();
            assert_eq!(
                (u.input, u.output, u.cache_read, u.cache_write, u.tokens()),
                (1000, 200, 200, 100, 1500),
                "pieces of {size}"
            );
            assert_eq!(u.model.as_deref(), Some("claude-sonnet-5"));
            assert_eq!(u.stop_reason.as_deref(), Some("end_turn"));
        }
    }

    #[test]
    fn openai_responses_and_chat_report_cached_input_apart() {
        let responses = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"model\":\"gpt-5\"}}\n\n\
            event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"model\":\"gpt-5\",\"status\":\"completed\",\"usage\":{\"input_tokens\":900,\"input_tokens_details\":{\"cached_tokens\":400},\"output_tokens\":600,\"total_tokens\":1500}}}\n\n";
        let u = metered(Api::OpenaiResponses, true, responses, 5).unwrap();
        assert_eq!(
            (u.input, u.cache_read, u.output, u.tokens()),
            (500, 400, 600, 1500)
        );
        let chat = "data: {\"model\":\"m\",\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":null}],\"usage\":null}\n\n\
            data: {\"model\":\"m\",\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
            data: {\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":5}}\n\ndata: [DONE]\n\n";
        let u = metered(Api::OpenaiChat, true, chat, 3).unwrap();
        assert_eq!(
            (u.input, u.output, u.stop_reason.as_deref()),
            (10, 5, Some("stop"))
        );
    }

    #[test]
    fn whole_json_answers_are_metered_and_garbage_is_not() {
        let body = "{\"model\":\"claude-sonnet-5\",\"stop_reason\":\"end_turn\",\"usage\":{\"input_tokens\":7,\"output_tokens\":3}}";
        let u = metered(Api::Anthropic, false, body, 4).unwrap();
        assert_eq!(u.tokens(), 10);
        assert_eq!(metered(Api::Anthropic, false, "not json", 4), None);
        assert_eq!(
            metered(Api::Anthropic, true, "data: {\"type\":\"ping\"}\n", 4),
            None
        );
    }

    #[test]
    fn a_line_past_the_bound_is_skipped_and_the_buffer_stays_bounded() {
        let mut m = Meter::new(Api::Anthropic, true);
        let long = vec![b'x'; MOST_BUFFERED * 3];
        m.feed(b"data: ");
        for piece in long.chunks(1000) {
            m.feed(piece);
            assert!(m.buffer.len() <= MOST_BUFFERED);
        }
        m.feed(b"\n");
        m.feed(ANTHROPIC.as_bytes());
        assert_eq!(m.finish().unwrap().tokens(), 1500);
        let mut whole = Meter::new(Api::Anthropic, false);
        whole.feed(&long);
        assert!(whole.buffer.is_empty());
        assert_eq!(whole.finish(), None);
    }
}
