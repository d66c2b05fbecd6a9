#!/usr/bin/env python3
"""A stand-in model provider for trying the Claude Code and Codex presets offline
(docs/agent-clis.md): one local HTTP server that speaks Anthropic's Messages API and OpenAI's
Responses API, both streaming, so `claude` (ANTHROPIC_BASE_URL) and `codex` (a model_providers
entry) run with no account and no network.

Its "model" follows the task's text: each line `RUN <command>` becomes one shell tool call, in
order, `{mur}` standing for the path the capsule's guide gives for `mur` (read from the request,
so a call is only made when the guide reached the model). Once every command ran it answers
`DONE:` and their outputs; a task with no RUN line is answered `ANSWER(<first line>)`. The
tests drive the same protocol through their own fakes (tests/agent_clis.rs).

    python3 scripts/demo/fake_models.py 8765
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def text_of(content):
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content or [] if isinstance(b, dict))


def decide(task, results, body):
    steps = [l.strip()[4:] for l in task.splitlines() if l.strip().startswith("RUN ")]
    if len(results) < len(steps):
        raw = json.dumps(body)
        mur = "mur"
        if "`mur` is " in raw:
            mur = raw.split("`mur` is ", 1)[1].split(":", 1)[0]
        return "run", steps[len(results)].replace("{mur}", mur)
    if not steps:
        return "say", f"ANSWER({(task.splitlines() or [''])[0]})"
    return "say", "DONE: " + " | ".join(results)


def sse(events):
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def anthropic(body):
    task, results = "", []
    for m in body.get("messages", []):
        if m.get("role") != "user":
            continue
        blocks = m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]
        for b in blocks:
            if b.get("type") == "tool_result":
                results.append(text_of(b.get("content")))
            elif b.get("type") == "text" and not b["text"].lstrip().startswith("<"):
                task, results = b["text"], []
    kind, what = decide(task, results, body)
    usage = {"input_tokens": 20, "output_tokens": 1}
    start = {"type": "message_start", "message": {"id": "msg_demo", "type": "message", "role": "assistant",
             "model": body.get("model", "demo"), "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}}
    if kind == "run":
        block = {"type": "tool_use", "id": f"toolu_demo_{len(results)}", "name": "Bash", "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps({"command": what, "description": "run it"})}
        stop = "tool_use"
    else:
        block, delta, stop = {"type": "text", "text": ""}, {"type": "text_delta", "text": what}, "end_turn"
    return sse([start, {"type": "content_block_start", "index": 0, "content_block": block},
                {"type": "content_block_delta", "index": 0, "delta": delta},
                {"type": "content_block_stop", "index": 0},
                {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 5}},
                {"type": "message_stop"}])


def responses(body):
    task, results = "", []
    for item in body.get("input", []):
        if item.get("type") == "function_call_output":
            out = item.get("output")
            results.append(out if isinstance(out, str) else json.dumps(out))
        elif item.get("type") == "message" and item.get("role") == "user":
            text = text_of(item.get("content"))
            if not text.lstrip().startswith("<"):
                task, results = text, []
    kind, what = decide(task, results, body)
    if kind == "run":
        item = {"type": "function_call", "id": f"fc_demo_{len(results)}", "call_id": f"call_demo_{len(results)}",
                "name": "exec_command", "arguments": json.dumps({"cmd": what}), "status": "completed"}
        middle = [{"type": "response.function_call_arguments.delta", "item_id": item["id"], "output_index": 0, "delta": item["arguments"]}]
    else:
        item = {"type": "message", "id": "msg_demo", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": what, "annotations": []}]}
        middle = [{"type": "response.output_text.delta", "item_id": "msg_demo", "output_index": 0, "content_index": 0, "delta": what}]
    response = {"id": "resp_demo", "object": "response", "status": "completed", "model": body.get("model", "demo"), "output": [item],
                "usage": {"input_tokens": 20, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                          "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 25}}
    events = [{"type": "response.created", "response": dict(response, status="in_progress", output=[])},
              {"type": "response.output_item.added", "output_index": 0, "item": dict(item, status="in_progress")},
              *middle,
              {"type": "response.output_item.done", "output_index": 0, "item": item},
              {"type": "response.completed", "response": response}]
    for n, e in enumerate(events):
        e["sequence_number"] = n
    return sse(events)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def reply(self, code, body, kind="application/json"):
        self.send_response(code)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.reply(404, b"{}")

    def do_POST(self):
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        except ValueError:
            return self.reply(400, b'{"error":{"message":"the body is not JSON"}}')
        path = self.path.split("?")[0]
        if path.endswith("/messages/count_tokens"):
            return self.reply(200, b'{"input_tokens": 20}')
        if path.endswith("/messages"):
            return self.reply(200, anthropic(body), "text/event-stream")
        if path.endswith("/responses"):
            return self.reply(200, responses(body), "text/event-stream")
        self.reply(404, b"{}")

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 8765), Handler)
    # Port 0 asks the OS for one: the line names the port it gave.
    port = server.server_address[1]
    print(f"fake models on http://127.0.0.1:{port} (Anthropic Messages and OpenAI Responses)", flush=True)
    server.serve_forever()
