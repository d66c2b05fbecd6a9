#!/usr/bin/env python3
"""Google's Agent Development Kit against a murmur door: the ADK half of tests/interop_adk.rs.

Runs under the ADK venv's interpreter (target/interop-clients/adk-venv/bin/python, made by
scripts/setup_test_deps.py). It uses ADK as an ADK user with no model would: a
`RemoteA2aAgent` built from the door's card URL as the root agent of an `InMemoryRunner`, and
each user message sent with `runner.run_async(...)`. It prints ONE JSON object saying what ADK
saw and kept; the Rust test asserts on it. It exits 0 when it ran to the end (whatever ADK
reported, errors included), 3 when ADK is not installed, and 1 with a traceback on stderr on
anything unexpected.

    adk_client.py CARD_URL SCENARIO [--streaming true|false] [--token TOKEN] [--bare-factory]
                  [--turn-timeout SECS]

CARD_URL is what RemoteA2aAgent's `agent_card` is given; ADK refuses a card whose interface URL
is not on the same origin (scheme, host, port) as CARD_URL, so it must name the host the card
does (http://localhost:PORT). SCENARIOS lists the scenarios. `--streaming` picks the A2A client
ADK builds: true is ADK's own default on a2a-sdk 1.x (SendStreamingMessage); false hands ADK an
`a2a.client.ClientFactory(ClientConfig(streaming=False, httpx_client=...))` (SendMessage,
held to the end; see `agent` for why the factory needs the httpx client).
`--token` authenticates through ADK's own mechanism: an HTTP bearer `auth_scheme` with its
`auth_credential`, which ADK turns into `Authorization: Bearer` on the card fetch and each call.

The output, for every scenario:

    {"scenario", "streaming",
     "turns": [{"sent": TEXT,
                "events": [{"author", "partial", "texts", "thoughts", "functionCalls",
                            "taskId", "contextId", "error", "statusCode"}],
                                         every event run_async yielded
                "storedTexts": [TEXT],   the text of each agent event the session kept
                "stored": TEXT | null,   the last of them: what ADK shows as the answer
                "question": TEXT | null, what ADK shows the user when the task needs input
                "errors": [TEXT],        error_message of any event of the turn
                "timedOut": BOOL}],      the turn outlived --turn-timeout (the last turn then)
     "contextIds": [...], "taskIds": [...],   distinct ids over every turn, in order seen
     "sessionEvents": N}
"""
import argparse
import asyncio
import json
import sys
import traceback
import warnings

# ADK marks every A2A class experimental with a UserWarning per use; a failing test's output
# should show the traceback, not forty of these.
warnings.filterwarnings("ignore", message=r"\[EXPERIMENTAL\]")

try:
    import httpx
    from a2a.client import ClientConfig, ClientFactory
    from fastapi.openapi.models import HTTPBearer
    from google.adk.agents.remote_a2a_agent import DEFAULT_TIMEOUT, RemoteA2aAgent
    from google.adk.auth.auth_credential import (
        AuthCredential, AuthCredentialTypes, HttpAuth, HttpCredentials)
    from google.adk.runners import InMemoryRunner
    from google.genai import types
except ImportError as e:  # The Rust test turns this into a failure naming the install command.
    sys.stderr.write(f"google-adk is not installed for this interpreter: {e}\n")
    sys.exit(3)

APP = "murmur-interop"
USER = "interop-user"
# The mock call ADK puts in place of an input-required task's question (google.adk.a2a.
# converters.to_adk_event); its args hold the question under "input_required".
INPUT_CALL = "mock_function_call_for_required_user_input"
A2A_TASK_ID = "a2a:task_id"
A2A_CONTEXT_ID = "a2a:context_id"
# The HTTP status ADK records on the error event of a refused call: str(e.status_code), which
# reads "None" for a2a-sdk 1.3's A2AClientError (it has no status_code; the message has it).
A2A_STATUS_CODE = "a2a:status_code"

# Each scenario's user messages, in order, in one ADK session. The fixture harness
# (scripts/harness/fixture.py) answers "Acknowledged." to plain text, asks QUESTION on
# `@ask QUESTION` (and answers "reply: <the reply>"), and sleeps on `@sleep SECS`.
QUESTION = "Which colour should the report use?"
SCENARIOS = {
    "answer": ["Acknowledge message from an ADK agent."],
    "two_turns": ["First message from ADK.", "Second message from ADK."],
    "input_required": [f"@ask {QUESTION}", "teal"],
    # Past the door's 15 s stream heartbeat (capsule/src/stream/sse.rs), so a streamed task
    # sees one before its answer.
    "long": ["@sleep 17"],
}


def agent(card_url, streaming, token, http):
    """The RemoteA2aAgent for the door. Non-streaming is selected through the A2A client
    factory, ADK's hook for the a2a-sdk client config; without one ADK builds a factory with
    a2a-sdk's defaults, and a2a-sdk 1.x defaults to streaming. The factory gets an httpx client
    (`http`, or None for `--bare-factory`): a2a-sdk's ClientFactory puts `A2A-Version: 1.0` on
    the client it is given, while ADK 2.13 rebinds a factory given none to an httpx client of
    its own without that header (its rebind looks for a `_httpx_client` attribute a2a-sdk 1.3's
    factory no longer has), so every call is refused -32009."""
    kwargs = {}
    if not streaming:
        kwargs["a2a_client_factory"] = ClientFactory(ClientConfig(streaming=False, httpx_client=http))
    if token is not None:
        kwargs["auth_scheme"] = HTTPBearer()
        kwargs["auth_credential"] = AuthCredential(
            auth_type=AuthCredentialTypes.HTTP,
            http=HttpAuth(scheme="bearer", credentials=HttpCredentials(token=token)))
    return RemoteA2aAgent(name="murmur_door", agent_card=card_url, **kwargs)


def event_summary(event):
    """What one ADK event carried: its text and thought parts, function calls, the A2A ids
    ADK stamped on it, its partial flag and error."""
    parts = (event.content.parts or []) if event.content else []
    meta = event.custom_metadata or {}
    return {
        "author": event.author,
        "partial": bool(event.partial),
        "texts": [p.text for p in parts if p.text is not None and not p.thought],
        "thoughts": [p.text for p in parts if p.text is not None and p.thought],
        "functionCalls": [{"name": p.function_call.name, "args": p.function_call.args}
                          for p in parts if p.function_call],
        "taskId": meta.get(A2A_TASK_ID),
        "contextId": meta.get(A2A_CONTEXT_ID),
        "error": event.error_message,
        "statusCode": meta.get(A2A_STATUS_CODE),
    }


def question_of(events):
    """The question ADK shows for an input-required task: its mock call's argument."""
    for event in events:
        for call in event["functionCalls"]:
            if call["name"] == INPUT_CALL:
                return (call["args"] or {}).get("input_required")
    return None


def stored_texts(session, author, skip):
    """The text of each of `author`'s events the session kept past its first `skip` events, in
    order: what ADK stored of this turn (the runner never stores a partial event)."""
    stored = []
    for event in session.events[skip:]:
        if event.author != author or not event.content:
            continue
        texts = [p.text for p in event.content.parts or [] if p.text and not p.thought]
        if texts:
            stored.append("".join(texts))
    return stored


async def turn(runner, session_id, text, limit):
    """Sends one user message through the runner; answers what the turn yielded and stored.
    A turn still running after `limit` seconds is stopped and reported `timedOut`, with what it
    had yielded, so a client that hangs shows what it saw instead of being killed blind."""
    before = await runner.session_service.get_session(
        app_name=APP, user_id=USER, session_id=session_id)
    skip = len(before.events)
    message = types.Content(role="user", parts=[types.Part(text=text)])
    events = []

    async def drain():
        async for event in runner.run_async(user_id=USER, session_id=session_id,
                                            new_message=message):
            events.append(event_summary(event))

    timed_out = False
    try:
        await asyncio.wait_for(drain(), limit)
    except asyncio.TimeoutError:
        timed_out = True
    after = await runner.session_service.get_session(
        app_name=APP, user_id=USER, session_id=session_id)
    stored = stored_texts(after, runner.agent.name, skip)
    return {
        "sent": text,
        "events": events,
        "stored": stored[-1] if stored else None,
        "storedTexts": stored,
        "question": question_of(events),
        "errors": [e["error"] for e in events if e["error"]],
        "timedOut": timed_out,
    }, len(after.events)


def distinct(turns, key):
    """The distinct non-empty values of `key` over every event of every turn, in order."""
    seen = []
    for t in turns:
        for e in t["events"]:
            if e[key] and e[key] not in seen:
                seen.append(e[key])
    return seen


async def run(card_url, scenario, streaming, token, bare_factory, limit):
    """Runs the scenario's messages in one ADK session, stopping after a turn that timed out;
    answers the output object."""
    # ADK's own default timeout (600 s): httpx's 5 s would cut a held SendMessage short.
    http = httpx.AsyncClient(timeout=httpx.Timeout(DEFAULT_TIMEOUT))
    remote = agent(card_url, streaming, token, None if bare_factory else http)
    runner = InMemoryRunner(agent=remote, app_name=APP)
    session = await runner.session_service.create_session(app_name=APP, user_id=USER)
    turns, count = [], 0
    try:
        for text in SCENARIOS[scenario]:
            result, count = await turn(runner, session.id, text, limit)
            turns.append(result)
            if result["timedOut"]:
                break
    finally:
        await remote.cleanup()
        await runner.close()
        await http.aclose()
    return {
        "scenario": scenario,
        "streaming": streaming,
        "turns": turns,
        "contextIds": distinct(turns, "contextId"),
        "taskIds": distinct(turns, "taskId"),
        "sessionEvents": count,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("card_url")
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--streaming", choices=["true", "false"], default="true")
    parser.add_argument("--token")
    parser.add_argument("--bare-factory", action="store_true",
                        help="with --streaming false, give ADK a client factory with no httpx "
                             "client (see `agent`)")
    parser.add_argument("--turn-timeout", type=float, default=60,
                        help="seconds a turn may take before it is stopped and reported")
    args = parser.parse_args()
    try:
        out = asyncio.run(run(args.card_url, args.scenario, args.streaming == "true", args.token,
                              args.bare_factory, args.turn_timeout))
    except Exception as e:  # noqa: BLE001  anything here is a driver or ADK failure, not data
        traceback.print_exc()
        sys.exit(f"adk_client.py: {args.scenario} (streaming {args.streaming}) failed: "
                 f"{type(e).__name__}: {e}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
