//! Anthropic's Messages API: the request body (`tools` with `input_schema`, images as base64
//! `image` blocks, tool results as `tool_result` blocks) and its SSE stream (`message_start`,
//! `content_block_start` / `_delta` / `_stop` for text, thinking and tool_use blocks,
//! `message_delta` with the stop reason and usage, `message_stop`, `error`).

use serde_json::{json, Value};

use super::client::Body;
use super::error::Failure;
use super::sse::Parser;
use super::{Block, Delta, Msg, Reply, Request, Role, Stop, ToolCall};

const VERSION: &str = "2023-06-01";

pub fn headers(api_key: Option<&str>) -> Vec<(&'static str, String)> {
    let mut h = vec![("anthropic-version", VERSION.to_owned())];
    if let Some(k) = api_key {
        h.push(("x-api-key", k.to_owned()));
    }
    h
}

pub fn body(req: &Request<'_>) -> Value {
    let tools: Vec<Value> = req
        .tools
        .iter()
        .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.schema}))
        .collect();
    json!({
        "model": req.model,
        "max_tokens": req.max_tokens,
        "system": req.system,
        "messages": req.messages.iter().map(message).collect::<Vec<_>>(),
        "tools": tools,
        "stream": true,
    })
}

fn message(m: &Msg) -> Value {
    let role = match m.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    let content: Vec<Value> = m
        .blocks
        .iter()
        .map(|b| match b {
            Block::Text(t) => json!({"type": "text", "text": t}),
            Block::Image { media_type, base64 } => json!({"type": "image", "source": {
                "type": "base64", "media_type": media_type, "data": base64}}),
            Block::ToolUse { id, name, input } => {
                json!({"type": "tool_use", "id": id, "name": name, "input": input})
            }
            Block::ToolResult {
                id,
                content,
                is_error,
            } => json!({"type": "tool_result", "tool_use_id": id, "content": content,
                        "is_error": is_error}),
        })
        .collect();
    json!({"role": role, "content": content})
}

/// A content block being streamed.
enum Open {
    Text,
    Thinking,
    Tool(usize),
    Other,
}

/// Reads the stream into a reply, handing each delta to `on` as it arrives.
pub async fn read(
    body: &mut Body,
    on: &mut (dyn FnMut(Delta<'_>) + Send),
) -> Result<Reply, Failure> {
    let mut parser = Parser::default();
    let mut reply = Reply::unfinished();
    let mut open: Vec<(u64, Open)> = Vec::new();
    let mut stopped = false;
    while let Some(chunk) = body.chunk().await? {
        for event in parser.feed(&chunk).map_err(Failure::Malformed)? {
            let v: Value = serde_json::from_str(&event.data)
                .map_err(|e| Failure::Malformed(format!("an event's data is not JSON ({e})")))?;
            let kind = v.get("type").and_then(Value::as_str).unwrap_or(&event.name);
            match kind {
                "message_start" => {
                    let u = &v["message"]["usage"];
                    reply.usage.input_tokens = count(&u["input_tokens"]);
                    reply.usage.output_tokens = count(&u["output_tokens"]);
                }
                "content_block_start" => {
                    let index = count(&v["index"]);
                    let block = &v["content_block"];
                    let kind = match block["type"].as_str() {
                        Some("text") => Open::Text,
                        Some("thinking") => Open::Thinking,
                        Some("tool_use") => {
                            let call = ToolCall {
                                id: str_of(&block["id"]),
                                name: str_of(&block["name"]),
                                arguments: String::new(),
                            };
                            on(Delta::ToolStarted {
                                id: &call.id,
                                name: &call.name,
                            });
                            reply.tool_calls.push(call);
                            Open::Tool(reply.tool_calls.len() - 1)
                        }
                        _ => Open::Other,
                    };
                    open.push((index, kind));
                }
                "content_block_delta" => {
                    let index = count(&v["index"]);
                    let delta = &v["delta"];
                    let Some((_, block)) = open.iter().find(|(i, _)| *i == index) else {
                        return Err(Failure::Malformed(format!(
                            "a delta for content block {index}, which never started"
                        )));
                    };
                    // Empty pieces (Anthropic opens every tool input with `partial_json: ""`)
                    // would only be empty frames.
                    let piece = |key: &str| delta[key].as_str().filter(|t| !t.is_empty());
                    match (block, delta["type"].as_str()) {
                        (Open::Text, Some("text_delta")) => {
                            let Some(t) = piece("text") else { continue };
                            reply.text.push_str(t);
                            on(Delta::Text(t));
                        }
                        (Open::Thinking, Some("thinking_delta")) => {
                            let Some(t) = piece("thinking") else { continue };
                            reply.thinking.push_str(t);
                            on(Delta::Thinking(t));
                        }
                        (Open::Tool(at), Some("input_json_delta")) => {
                            let Some(t) = piece("partial_json") else {
                                continue;
                            };
                            let call = &mut reply.tool_calls[*at];
                            call.arguments.push_str(t);
                            on(Delta::ToolProgress {
                                id: &call.id,
                                chunk: t,
                            });
                        }
                        _ => {}
                    }
                }
                "message_delta" => {
                    if let Some(s) = v["delta"]["stop_reason"].as_str() {
                        reply.stop = match s {
                            "end_turn" | "stop_sequence" => Stop::EndTurn,
                            "tool_use" => Stop::ToolUse,
                            "max_tokens" => Stop::MaxTokens,
                            other => Stop::Other(other.to_owned()),
                        };
                    }
                    if let Some(n) = v["usage"]["output_tokens"].as_u64() {
                        reply.usage.output_tokens = n;
                    }
                    if let Some(n) = v["usage"]["input_tokens"].as_u64() {
                        reply.usage.input_tokens = n;
                    }
                }
                "message_stop" => stopped = true,
                "error" => {
                    let e = &v["error"];
                    let kind = e["type"].as_str().unwrap_or("error");
                    let message = e["message"].as_str().unwrap_or_default();
                    if kind == "overloaded_error" {
                        return Err(Failure::Overloaded(message.to_owned()));
                    }
                    return Err(Failure::Streamed(format!("{kind}: {message}")));
                }
                _ => {}
            }
        }
        if stopped {
            break;
        }
    }
    if !stopped {
        return Err(Failure::Truncated);
    }
    Ok(reply)
}

fn count(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

fn str_of(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inference::ToolSpec;

    #[test]
    fn images_are_base64_blocks_and_tool_results_name_their_call() {
        let messages = [
            Msg {
                role: Role::User,
                blocks: vec![
                    Block::Text("look".into()),
                    Block::Image {
                        media_type: "image/png".into(),
                        base64: "AAAA".into(),
                    },
                ],
            },
            Msg {
                role: Role::Assistant,
                blocks: vec![Block::ToolUse {
                    id: "t1".into(),
                    name: "request-input".into(),
                    input: json!({"question": "?"}),
                }],
            },
            Msg {
                role: Role::User,
                blocks: vec![Block::ToolResult {
                    id: "t1".into(),
                    content: "{}".into(),
                    is_error: true,
                }],
            },
        ];
        let tools = [ToolSpec {
            name: "x",
            description: "d".into(),
            schema: json!({"type": "object"}),
        }];
        let req = Request {
            model: "m",
            max_tokens: 9,
            system: "s",
            messages: &messages,
            tools: &tools,
        };
        let b = body(&req);
        assert_eq!(b["system"], "s");
        assert_eq!(
            b["tools"],
            json!([{"name": "x", "description": "d", "input_schema": {"type": "object"}}])
        );
        assert_eq!(
            b["messages"][0]["content"][1],
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}})
        );
        assert_eq!(b["messages"][1]["content"][0]["type"], "tool_use");
        assert_eq!(
            b["messages"][2]["content"][0],
            json!({"type": "tool_result", "tool_use_id": "t1", "content": "{}", "is_error": true})
        );
    }
}
