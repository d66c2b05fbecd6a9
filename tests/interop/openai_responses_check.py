#!/usr/bin/env python3
"""The official `openai` Python SDK (pinned in scripts/setup_test_deps.py) reads the test fake
provider's Responses API streams (tests/support/fake_provider.rs, module `responses`), so that
the fake the Codex-facing tests rely on is checked against OpenAI's own stream parser, not only
against what we believe the wire format is. tests/fake_responses.rs starts the fake and runs
this script.

Usage: openai_responses_check.py PORT

It makes three streamed calls to http://127.0.0.1:PORT/v1/responses, each with an input the
fake's responder answers in its own way, and prints one JSON object describing what the SDK
made of them:

- "text": a text reply read with `client.responses.stream(...)`, the SDK's accumulating helper
  (which checks the response and item identities across events): the event types in order,
  the text deltas, the final response's `output_text`, status and usage;
- "function_call": a function call read the same way: the event types, the argument deltas,
  and the call's name, call_id and arguments from `get_final_response()`;
- "failed": a failing response read with `client.responses.create(..., stream=True)`: the
  event types and the error's code and message.

Every raw event is also validated strictly against the SDK class its `type` selects from the
`ResponseStreamEvent` union (the SDK itself builds events without validation, so a missing
required field would otherwise pass unseen); each failure is listed under "invalid", which the
test expects to be empty.
"""
import json
import sys

import openai
import pydantic

MODEL = "gpt-test"


def checked(event, invalid: list) -> str:
    """Validates a raw event strictly, as the SDK class it was read as (the one its `type`
    selects from the `ResponseStreamEvent` union); answers its type and that class's name."""
    try:
        type(event).model_validate(event.to_dict())
    except pydantic.ValidationError as e:
        invalid.append(f"{event.type}: {e}")
    return f"{event.type} {type(event).__name__}"


def usage_of(response) -> dict:
    u = response.usage
    return {
        "input_tokens": u.input_tokens,
        "cached_tokens": u.input_tokens_details.cached_tokens,
        "cache_write_tokens": u.input_tokens_details.cache_write_tokens,
        "output_tokens": u.output_tokens,
        "reasoning_tokens": u.output_tokens_details.reasoning_tokens,
        "total_tokens": u.total_tokens,
    }


def text(client, invalid: list) -> dict:
    seen = {"events": [], "deltas": []}
    with client.responses.stream(model=MODEL, input="say hello") as stream:
        for event in stream:
            seen["events"].append(event.type)
            if event.type == "response.output_text.delta":
                seen["deltas"].append(event.delta)
        final = stream.get_final_response()
    seen["id"] = final.id
    seen["status"] = final.status
    seen["output_text"] = final.output_text
    seen["usage"] = usage_of(final)
    # The raw stream, event by event, as the SDK types it.
    raw = client.responses.create(model=MODEL, input="say hello", stream=True)
    seen["raw"] = [checked(e, invalid) for e in raw]
    return seen


def function_call(client, invalid: list) -> dict:
    seen = {"events": [], "deltas": []}
    with client.responses.stream(model=MODEL, input="run a tool") as stream:
        for event in stream:
            seen["events"].append(event.type)
            if event.type == "response.function_call_arguments.delta":
                seen["deltas"].append(event.delta)
        final = stream.get_final_response()
    calls = [item for item in final.output if item.type == "function_call"]
    seen["calls"] = [
        {"id": c.id, "call_id": c.call_id, "name": c.name, "arguments": c.arguments, "status": c.status}
        for c in calls
    ]
    seen["status"] = final.status
    seen["usage"] = usage_of(final)
    raw = client.responses.create(model=MODEL, input="run a tool", stream=True)
    seen["raw"] = [checked(e, invalid) for e in raw]
    return seen


def failed(client, invalid: list) -> dict:
    seen = {"events": []}
    for event in client.responses.create(model=MODEL, input="fail please", stream=True):
        seen["events"].append(checked(event, invalid))
        if event.type == "response.failed":
            seen["status"] = event.response.status
            seen["error"] = {"code": event.response.error.code, "message": event.response.error.message}
    return seen


def main() -> None:
    port = int(sys.argv[1])
    # No retries: a fake that answers wrongly should show it at once, not after backoff.
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0, timeout=30)
    invalid: list = []
    summary = {
        "version": openai.__version__,
        "text": text(client, invalid),
        "function_call": function_call(client, invalid),
        "failed": failed(client, invalid),
    }
    summary["invalid"] = invalid
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
