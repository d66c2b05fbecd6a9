//! Reading a server-sent-event stream as it arrives: bytes in, `(event, data)` pairs out. Both
//! providers stream this way (Anthropic names its events; OpenAI sends bare `data:` lines).
//! Lines and the whole stream are bounded, so a provider cannot grow memory without end.

/// The longest line kept; past it the stream is malformed.
const MAX_LINE: usize = 4 << 20;

/// The most one call's stream may carry. A reply `max_tokens` bounds is far smaller; an endpoint
/// that streams past this is broken (or hostile), and its call fails rather than the capsule.
const MAX_STREAM: usize = 64 << 20;

/// One event: its `event:` name (empty when none) and its joined `data:` lines.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Event {
    pub name: String,
    pub data: String,
}

/// The parser's state between chunks.
#[derive(Default)]
pub struct Parser {
    line: Vec<u8>,
    current: Event,
    has_data: bool,
    /// Bytes fed so far.
    seen: usize,
}

impl Parser {
    /// Feeds a chunk; answers the events it completed, or an error for an oversized line.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Vec<Event>, String> {
        self.seen = self.seen.saturating_add(chunk.len());
        if self.seen > MAX_STREAM {
            return Err(format!("the stream is longer than {MAX_STREAM} bytes"));
        }
        let mut out = Vec::new();
        for &b in chunk {
            if b != b'\n' {
                if self.line.len() >= MAX_LINE {
                    return Err(format!("a stream line is longer than {MAX_LINE} bytes"));
                }
                self.line.push(b);
                continue;
            }
            if self.line.last() == Some(&b'\r') {
                self.line.pop();
            }
            let line = std::mem::take(&mut self.line);
            let line = String::from_utf8_lossy(&line);
            if line.is_empty() {
                if self.has_data {
                    out.push(std::mem::take(&mut self.current));
                }
                self.current = Event::default();
                self.has_data = false;
            } else if let Some(v) = field(&line, "data") {
                if self.has_data {
                    self.current.data.push('\n');
                }
                self.current.data.push_str(v);
                self.has_data = true;
            } else if let Some(v) = field(&line, "event") {
                self.current.name = v.to_owned();
            }
        }
        Ok(out)
    }
}

fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let rest = line.strip_prefix(name)?.strip_prefix(':')?;
    Some(rest.strip_prefix(' ').unwrap_or(rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_that_never_ends_is_refused_not_kept() {
        let mut p = Parser::default();
        let event =
            b"data: {\"x\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}\n\n";
        let chunk = event.repeat(16 << 10);
        let mut fed = 0;
        let refused = loop {
            match p.feed(&chunk) {
                Ok(_) => fed += chunk.len(),
                Err(why) => break why,
            }
            assert!(fed <= MAX_STREAM, "fed {fed} bytes without a refusal");
        };
        assert_eq!(
            refused,
            format!("the stream is longer than {MAX_STREAM} bytes")
        );
    }

    #[test]
    fn events_split_across_chunks_come_out_whole() {
        let mut p = Parser::default();
        assert!(p.feed(b"event: ping\r\nda").unwrap().is_empty());
        let got = p
            .feed(b"ta: {\"a\":1}\n\n: comment\n\ndata: x\ndata: y\n\n")
            .unwrap();
        assert_eq!(
            got,
            vec![
                Event {
                    name: "ping".into(),
                    data: "{\"a\":1}".into()
                },
                Event {
                    name: String::new(),
                    data: "x\ny".into()
                },
            ]
        );
    }
}
