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

/// How one server wants a request's model and token cap spelled. The guide's workers name
/// models as people say them (`o3-mini-high`, `deepseek-r1`); the providers' own APIs take
/// other ids, so on their own hosts those names are translated, and nowhere else.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spelling {
    model: String,
    /// OpenAI's own API has deprecated `max_tokens` and refuses it for its reasoning models,
    /// which take only `max_completion_tokens`; DeepSeek, Ollama and LM Studio read only
    /// `max_tokens`.
    cap_key: &'static str,
    reasoning_effort: Option<&'static str>,
}

/// Model names the guide uses that DeepSeek's API knows by another id.
const DEEPSEEK_MODELS: &[(&str, &str)] = &[
    ("deepseek-r1", "deepseek-reasoner"),
    ("deepseek-v3", "deepseek-chat"),
];
/// The effort suffixes of OpenAI's reasoning models as ChatGPT names them (`o3-mini-high`);
/// the API takes the model without it and the effort as `reasoning_effort`.
const EFFORTS: &[&str] = &["low", "medium", "high"];

impl Spelling {
    pub fn for_server(provider: Provider, host: &str, model: &str) -> Spelling {
        let host = host.to_ascii_lowercase();
        let plain = Spelling {
            model: model.to_owned(),
            cap_key: "max_tokens",
            reasoning_effort: None,
        };
        match provider {
            Provider::OpenAi if host == "api.openai.com" || host.ends_with(".openai.azure.com") => {
                let (model, effort) = split_effort(model);
                Spelling {
                    model: model.to_owned(),
                    cap_key: "max_completion_tokens",
                    reasoning_effort: effort,
                }
            }
            Provider::DeepSeek if host == "api.deepseek.com" => Spelling {
                model: DEEPSEEK_MODELS
                    .iter()
                    .find(|(said, _)| *said == model)
                    .map_or(model, |(_, id)| id)
                    .to_owned(),
                ..plain
            },
            _ => plain,
        }
    }
}

/// `o3-mini-high` → (`o3-mini`, high); any other name is left whole.
fn split_effort(model: &str) -> (&str, Option<&'static str>) {
    let Some((base, suffix)) = model.rsplit_once('-') else {
        return (model, None);
    };
    let effort = EFFORTS.iter().find(|e| **e == suffix);
    let series = base.strip_suffix("-mini").unwrap_or(base);
    let reasoning = series
        .strip_prefix('o')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    match effort {
        Some(e) if reasoning => (base, Some(*e)),
        _ => (model, None),
    }
}

pub fn body(req: &Request<'_>, spelling: &Spelling) -> Value {
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
        "model": spelling.model,
        "messages": messages,
        "tools": tools,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    body[spelling.cap_key] = req.max_tokens.into();
    if let Some(effort) = spelling.reasoning_effort {
        body["reasoning_effort"] = effort.into();
    }
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
    // The usage chunk and `data: [DONE]` follow the finish (the request asks for them): a
    // stream cut before `[DONE]` would pass its reply off with no usage counted.
    if !finished || !done {
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

    fn sent(provider: Provider, host: &str, model: &str) -> Value {
        let req = Request {
            model,
            max_tokens: 321,
            system: "s",
            messages: &[],
            tools: &[],
        };
        body(&req, &Spelling::for_server(provider, host, model))
    }

    #[test]
    fn the_token_cap_is_named_as_each_server_reads_it() {
        let table = [
            (Provider::OpenAi, "api.openai.com", "max_completion_tokens"),
            (Provider::OpenAi, "API.OpenAI.com", "max_completion_tokens"),
            (
                Provider::OpenAi,
                "me.openai.azure.com",
                "max_completion_tokens",
            ),
            (Provider::OpenAi, "127.0.0.1", "max_tokens"),
            (Provider::OpenAi, "localhost", "max_tokens"),
            (Provider::OpenAi, "api.openai.com.example", "max_tokens"),
            (Provider::DeepSeek, "api.deepseek.com", "max_tokens"),
        ];
        for (provider, host, key) in table {
            let body = sent(provider, host, "gpt-5");
            assert_eq!(body[key], 321, "{provider:?} at {host}");
            let other = match key {
                "max_tokens" => "max_completion_tokens",
                _ => "max_tokens",
            };
            assert!(body.get(other).is_none(), "{provider:?} at {host}: {body}");
        }
    }

    #[test]
    fn the_guides_model_names_reach_each_provider_as_its_api_ids() {
        let table = [
            // (provider, host, written, sent, reasoning_effort)
            (
                Provider::OpenAi,
                "api.openai.com",
                "o3-mini-high",
                "o3-mini",
                Some("high"),
            ),
            (
                Provider::OpenAi,
                "api.openai.com",
                "o1-low",
                "o1",
                Some("low"),
            ),
            (
                Provider::OpenAi,
                "api.openai.com",
                "o4-mini-medium",
                "o4-mini",
                Some("medium"),
            ),
            (
                Provider::OpenAi,
                "api.openai.com",
                "o3-mini",
                "o3-mini",
                None,
            ),
            (
                Provider::OpenAi,
                "api.openai.com",
                "gpt-4o-high",
                "gpt-4o-high",
                None,
            ),
            (Provider::OpenAi, "api.openai.com", "o-high", "o-high", None),
            (
                Provider::OpenAi,
                "127.0.0.1",
                "o3-mini-high",
                "o3-mini-high",
                None,
            ),
            (
                Provider::DeepSeek,
                "api.deepseek.com",
                "deepseek-r1",
                "deepseek-reasoner",
                None,
            ),
            (
                Provider::DeepSeek,
                "api.deepseek.com",
                "deepseek-v3",
                "deepseek-chat",
                None,
            ),
            (
                Provider::DeepSeek,
                "api.deepseek.com",
                "deepseek-chat",
                "deepseek-chat",
                None,
            ),
            (
                Provider::DeepSeek,
                "localhost",
                "deepseek-r1",
                "deepseek-r1",
                None,
            ),
        ];
        for (provider, host, written, model, effort) in table {
            let body = sent(provider, host, written);
            assert_eq!(body["model"], model, "{written} at {host}");
            assert_eq!(
                body.get("reasoning_effort").and_then(Value::as_str),
                effort,
                "{written} at {host}"
            );
        }
    }
}
