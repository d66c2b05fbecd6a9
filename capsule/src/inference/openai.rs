//! OpenAI's Chat Completions API, which DeepSeek and local servers (llama.cpp, vLLM, Ollama)
//! speak too: the request body (function `tools`, images as `image_url` data URLs, tool results
//! as `role: tool` messages) and its stream of `chat.completion.chunk`s (`delta.content`,
//! `delta.reasoning_content` where the server reasons aloud, `delta.tool_calls` whose arguments
//! arrive split across chunks by `index`, `finish_reason`, a last usage chunk under
//! `stream_options.include_usage`, then `data: [DONE]`).

use serde_json::{json, Value};

use super::client::Body;
use super::error::Failure;
use super::sse::Parser;
use super::{Block, Delta, Msg, Provider, Reply, Request, Role, Stop, ToolCall, Usage};

pub fn headers(api_key: Option<&str>) -> Vec<(&'static str, String)> {
    api_key
        .map(|k| vec![("authorization", format!("Bearer {k}"))])
        .unwrap_or_default()
}

/// The request field that caps a reply's tokens. OpenAI's own API has deprecated `max_tokens`
/// and refuses it for its reasoning models (the o-series the guide's worker names, gpt-5), which
/// take only `max_completion_tokens`; DeepSeek, Ollama and LM Studio read only `max_tokens`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenCap {
    MaxTokens,
    MaxCompletionTokens,
}

impl TokenCap {
    /// OpenAI's own hosts (api.openai.com, Azure OpenAI) take the new name; every other server
    /// the driver may be pointed at takes the old one.
    pub fn for_host(provider: Provider, host: &str) -> TokenCap {
        let host = host.to_ascii_lowercase();
        let openai_own = host == "api.openai.com" || host.ends_with(".openai.azure.com");
        match provider {
            Provider::OpenAi if openai_own => TokenCap::MaxCompletionTokens,
            _ => TokenCap::MaxTokens,
        }
    }

    fn key(self) -> &'static str {
        match self {
            TokenCap::MaxTokens => "max_tokens",
            TokenCap::MaxCompletionTokens => "max_completion_tokens",
        }
    }
}

pub fn body(req: &Request<'_>, cap: TokenCap) -> Value {
    let mut messages = vec![json!({"role": "system", "content": req.system})];
    for m in req.messages {
        messages.extend(message(m));
    }
    let tools: Vec<Value> = req
        .tools
        .iter()
        .map(|t| {
            json!({"type": "function", "function": {
            "name": t.name, "description": t.description, "parameters": t.schema}})
        })
        .collect();
    let mut body = json!({
        "model": req.model,
        "messages": messages,
        "tools": tools,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    body[cap.key()] = req.max_tokens.into();
    body
}

/// One neutral message may become several: each tool result is its own `tool` message.
fn message(m: &Msg) -> Vec<Value> {
    match m.role {
        Role::Assistant => {
            let text: String = m
                .blocks
                .iter()
                .filter_map(|b| match b {
                    Block::Text(t) => Some(t.as_str()),
                    _ => None,
                })
                .collect();
            let calls: Vec<Value> = m
                .blocks
                .iter()
                .filter_map(|b| match b {
                    Block::ToolUse { id, name, input } => {
                        Some(json!({"id": id, "type": "function",
                        "function": {"name": name, "arguments": input.to_string()}}))
                    }
                    _ => None,
                })
                .collect();
            let mut v = json!({"role": "assistant", "content": text});
            if !calls.is_empty() {
                v["tool_calls"] = Value::Array(calls);
            }
            vec![v]
        }
        Role::User => {
            let mut out = Vec::new();
            let mut parts = Vec::new();
            for b in &m.blocks {
                match b {
                    Block::ToolResult { id, content, .. } => out.push(json!({
                        "role": "tool", "tool_call_id": id, "content": content})),
                    Block::Text(t) => parts.push(json!({"type": "text", "text": t})),
                    Block::Image { media_type, base64 } => parts.push(json!({
                        "type": "image_url",
                        "image_url": {"url": format!("data:{media_type};base64,{base64}")}})),
                    Block::ToolUse { .. } => {}
                }
            }
            if !parts.is_empty() {
                // Text alone goes as a plain string: every compatible server reads that.
                let content = match parts.as_slice() {
                    [only] if only["type"] == "text" => only["text"].clone(),
                    _ => Value::Array(parts),
                };
                out.push(json!({"role": "user", "content": content}));
            }
            out
        }
    }
}

/// Reads the stream into a reply, handing each delta to `on` as it arrives.
pub async fn read(
    body: &mut Body,
    on: &mut (dyn FnMut(Delta<'_>) + Send),
) -> Result<Reply, Failure> {
    let mut parser = Parser::default();
    let mut reply = Reply::unfinished();
    // The stream's tool-call `index` → its place in `reply.tool_calls`.
    let mut by_index: Vec<(u64, usize)> = Vec::new();
    let (mut finished, mut done) = (false, false);
    while let Some(chunk) = body.chunk().await? {
        for event in parser.feed(&chunk).map_err(Failure::Malformed)? {
            if event.data.trim() == "[DONE]" {
                done = true;
                break;
            }
            let v: Value = serde_json::from_str(&event.data)
                .map_err(|e| Failure::Malformed(format!("a chunk is not JSON ({e})")))?;
            if let Some(e) = v.get("error") {
                let message = e["message"].as_str().unwrap_or("an error");
                return Err(Failure::Streamed(message.to_owned()));
            }
            if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
                reply.usage = Usage {
                    input_tokens: u["prompt_tokens"].as_u64().unwrap_or(0),
                    output_tokens: u["completion_tokens"].as_u64().unwrap_or(0),
                };
            }
            let Some(choice) = v["choices"].get(0) else {
                continue;
            };
            let delta = &choice["delta"];
            if let Some(t) = delta["reasoning_content"]
                .as_str()
                .filter(|t| !t.is_empty())
            {
                reply.thinking.push_str(t);
                on(Delta::Thinking(t));
            }
            if let Some(t) = delta["content"].as_str().filter(|t| !t.is_empty()) {
                reply.text.push_str(t);
                on(Delta::Text(t));
            }
            for call in delta["tool_calls"].as_array().into_iter().flatten() {
                tool_delta(&mut reply, &mut by_index, call, on)?;
            }
            if let Some(reason) = choice["finish_reason"].as_str() {
                finished = true;
                reply.stop = match reason {
                    "stop" => Stop::EndTurn,
                    "tool_calls" | "function_call" => Stop::ToolUse,
                    "length" => Stop::MaxTokens,
                    other => Stop::Other(other.to_owned()),
                };
            }
        }
        if done {
            break;
        }
    }
    if !finished {
        return Err(Failure::Truncated);
    }
    // Some servers say "stop" though they called tools.
    if reply.stop == Stop::EndTurn && !reply.tool_calls.is_empty() {
        reply.stop = Stop::ToolUse;
    }
    Ok(reply)
}

fn tool_delta(
    reply: &mut Reply,
    by_index: &mut Vec<(u64, usize)>,
    call: &Value,
    on: &mut (dyn FnMut(Delta<'_>) + Send),
) -> Result<(), Failure> {
    let index = call["index"].as_u64().unwrap_or(by_index.len() as u64);
    let at = match by_index.iter().find(|(i, _)| *i == index) {
        Some((_, at)) => *at,
        None => {
            let id = call["id"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| format!("call_{index}"));
            let name = call["function"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if name.is_empty() {
                return Err(Failure::Malformed(format!(
                    "tool call {index} starts with no function name"
                )));
            }
            reply.tool_calls.push(ToolCall {
                id,
                name,
                arguments: String::new(),
            });
            let at = reply.tool_calls.len() - 1;
            by_index.push((index, at));
            let c = &reply.tool_calls[at];
            on(Delta::ToolStarted {
                id: &c.id,
                name: &c.name,
            });
            at
        }
    };
    if let Some(args) = call["function"]["arguments"]
        .as_str()
        .filter(|a| !a.is_empty())
    {
        let c = &mut reply.tool_calls[at];
        c.arguments.push_str(args);
        on(Delta::ToolProgress {
            id: &c.id,
            chunk: args,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_cap_is_named_as_each_server_reads_it() {
        let table = [
            (Provider::OpenAi, "api.openai.com", "max_completion_tokens"),
            (Provider::OpenAi, "API.OpenAI.com", "max_completion_tokens"),
            (
                Provider::OpenAi,
                "mine.openai.azure.com",
                "max_completion_tokens",
            ),
            (Provider::OpenAi, "127.0.0.1", "max_tokens"),
            (Provider::OpenAi, "localhost", "max_tokens"),
            (Provider::OpenAi, "api.openai.com.example", "max_tokens"),
            (Provider::DeepSeek, "api.deepseek.com", "max_tokens"),
        ];
        let req = Request {
            model: "m",
            max_tokens: 321,
            system: "s",
            messages: &[],
            tools: &[],
        };
        for (provider, host, key) in table {
            let body = body(&req, TokenCap::for_host(provider, host));
            assert_eq!(body[key], 321, "{provider:?} at {host}");
            let other = match key {
                "max_tokens" => "max_completion_tokens",
                _ => "max_tokens",
            };
            assert!(body.get(other).is_none(), "{provider:?} at {host}: {body}");
        }
    }
}
