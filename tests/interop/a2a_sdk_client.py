#!/usr/bin/env python3
"""An official A2A client against a murmur door: the interop half of tests/interop.rs.

Drives the official A2A Python SDK (a2a-sdk, pinned in scripts/setup_test_deps.py) against a
door exactly as a user of that SDK would, and prints one JSON object describing what the SDK
saw; the Rust test asserts on it. It exits 0 when it ran to the end (whatever it saw), 3 when
the SDK is not installed, and non-zero with a traceback on anything unexpected.

    a2a_sdk_client.py URL              a public door: resolve the card, build a polling client
                                       (streaming=False), send / get / list / cancel, and the
                                       SDK's mapping of the door's A2A errors
    a2a_sdk_client.py URL auth TOKEN   an authenticated door: the SDK's AuthInterceptor with a
                                       bearer credential, a streaming client (SendStreamingMessage,
                                       SubscribeToTask), the extended card; the output has the
                                       shape tests/support/clients.rs checks for every client
"""
import asyncio
import json
import sys

try:
    import httpx
    from google.protobuf import json_format
    from a2a.client import A2ACardResolver, ClientCallContext, ClientConfig, ClientFactory
    from a2a.client.auth import AuthInterceptor, InMemoryContextCredentialStore
    from a2a.types import a2a_pb2 as pb
    from a2a.utils.errors import A2AError, TaskNotCancelableError, TaskNotFoundError
except ImportError as e:  # The Rust test turns this into a failure naming the install command.
    sys.stderr.write(f"a2a-sdk is not installed: {e}\n")
    sys.exit(3)


def state_name(task):
    return pb.TaskState.Name(task.status.state)


def task_summary(task):
    return {
        "id": task.id,
        "contextId": task.context_id,
        "state": state_name(task),
        "statusText": [p.text for p in task.status.message.parts],
        "artifacts": [
            {"artifactId": a.artifact_id, "name": a.name, "texts": [p.text for p in a.parts]}
            for a in task.artifacts
        ],
    }


def text_message(text, context_id):
    return pb.Message(
        message_id=f"sdk-{abs(hash((text, context_id))) % 10**9}",
        context_id=context_id,
        role=pb.Role.ROLE_USER,
        parts=[pb.Part(text=text)],
    )


async def send(client, text, context_id, return_immediately=False, context=None):
    request = pb.SendMessageRequest(message=text_message(text, context_id))
    if return_immediately:
        request.configuration.return_immediately = True
    events = [event async for event in client.send_message(request, context=context)]
    assert len(events) == 1 and events[0].HasField("task"), events
    return events[0].task


async def main(url):
    out = {}
    async with httpx.AsyncClient(timeout=30) as http:
        # The card, under a strict ProtoJSON parser (unknown fields are an error), and as the
        # SDK's own resolver reads it.
        raw = (await http.get(url + "/.well-known/agent-card.json")).json()
        strict = json_format.ParseDict(raw, pb.AgentCard(), ignore_unknown_fields=False)
        out["strictCard"] = {
            "name": strict.name,
            "interfaces": [
                [i.url, i.protocol_binding, i.protocol_version] for i in strict.supported_interfaces
            ],
            "extensions": [e.uri for e in strict.capabilities.extensions],
            "streaming": strict.capabilities.streaming,
        }
        card = await A2ACardResolver(http, url).get_agent_card()

    factory = ClientFactory(ClientConfig(streaming=False))
    client = factory.create(card)
    try:
        done = await send(client, "Acknowledge message from orchestrator capsule.", "ctx-interop")
        out["held"] = task_summary(done)

        queued = await send(client, "@sleep 30", "ctx-interop", return_immediately=True)
        out["immediate"] = task_summary(queued)
        got = None
        for _ in range(500):
            got = await client.get_task(pb.GetTaskRequest(id=queued.id))
            if state_name(got) == "TASK_STATE_WORKING":
                break
            await asyncio.sleep(0.01)
        out["got"] = task_summary(got)

        page = await client.list_tasks(pb.ListTasksRequest(context_id="ctx-interop"))
        out["listed"] = {
            "ids": [t.id for t in page.tasks],
            "totalSize": page.total_size,
            "pageSize": page.page_size,
            "nextPageToken": page.next_page_token,
        }
        first = await client.list_tasks(pb.ListTasksRequest(page_size=1))
        second = await client.list_tasks(
            pb.ListTasksRequest(page_size=1, page_token=first.next_page_token)
        )
        out["walk"] = [
            [t.id for t in first.tasks],
            [t.id for t in second.tasks],
            second.next_page_token,
        ]
        with_artifacts = await client.list_tasks(
            pb.ListTasksRequest(context_id="ctx-interop", include_artifacts=True)
        )
        out["listedArtifacts"] = [[a.artifact_id for a in t.artifacts] for t in with_artifacts.tasks]

        canceled = await client.cancel_task(pb.CancelTaskRequest(id=queued.id))
        out["canceled"] = task_summary(canceled)
        try:
            await client.cancel_task(pb.CancelTaskRequest(id=queued.id))
            out["cancelAgain"] = "answered"
        except TaskNotCancelableError as e:
            out["cancelAgain"] = {"error": type(e).__name__, "message": e.message, "data": e.data}
        try:
            await client.get_task(pb.GetTaskRequest(id="tsk_0000000000007000800000000000000a"))
            out["unknown"] = "answered"
        except TaskNotFoundError as e:
            out["unknown"] = {"error": type(e).__name__, "message": e.message, "data": e.data}
    finally:
        await client.close()
    print(json.dumps(out))


UNKNOWN = "tsk_0000000000007000800000000000000a"


def event_summary(event):
    kind = event.WhichOneof("payload")
    if kind == "task":
        return {"kind": "task", "taskId": event.task.id, "state": state_name(event.task)}
    if kind == "status_update":
        u = event.status_update
        return {"kind": "statusUpdate", "taskId": u.task_id, "state": pb.TaskState.Name(u.status.state)}
    if kind == "artifact_update":
        u = event.artifact_update
        return {"kind": "artifactUpdate", "taskId": u.task_id, "artifactId": u.artifact.artifact_id,
                "texts": [p.text for p in u.artifact.parts]}
    return {"kind": kind}


async def refused(call):
    """What the SDK raised for a call the door refuses, or "answered"."""
    try:
        await call()
        return "answered"
    except A2AError as e:
        return {"error": type(e).__name__, "message": e.message, "data": e.data}


async def drain(stream):
    return [event_summary(e) async for e in stream]


async def auth_scenario(url, token):
    """The common interop scenario on an authenticated door (tests/support/clients.rs)."""
    out = {}
    async with httpx.AsyncClient(timeout=30) as http:
        card = await A2ACardResolver(http, url).get_agent_card()

    # The SDK's own auth: a credential store keyed by the call's sessionId, read by the
    # AuthInterceptor, which adds `Authorization: Bearer` for the card's bearer scheme.
    store = InMemoryContextCredentialStore()
    await store.set_credentials("interop", "bearer", token)
    await store.set_credentials("forged", "bearer", "mur_not-minted")
    auth = ClientCallContext(state={"sessionId": "interop"})
    forged = ClientCallContext(state={"sessionId": "forged"})
    client = ClientFactory(ClientConfig(streaming=True)).create(card, interceptors=[AuthInterceptor(store)])
    poller = ClientFactory(ClientConfig(streaming=False)).create(card, interceptors=[AuthInterceptor(store)])
    try:
        unknown = pb.GetTaskRequest(id=UNKNOWN)
        out["noToken"] = await refused(lambda: client.get_task(unknown))
        out["badToken"] = await refused(lambda: client.get_task(unknown, context=forged))

        done = await send(poller, "Acknowledge message from orchestrator capsule.", "ctx-interop", context=auth)
        out["held"] = task_summary(done)

        streamed = pb.SendMessageRequest(message=text_message("Stream this task.", "ctx-interop"))
        out["streamed"] = await drain(client.send_message(streamed, context=auth))

        live = await send(poller, "@sleep 30", "ctx-interop", return_immediately=True, context=auth)
        out["live"] = task_summary(live)
        got = None
        for _ in range(500):
            got = await client.get_task(pb.GetTaskRequest(id=live.id), context=auth)
            if state_name(got) == "TASK_STATE_WORKING":
                break
            await asyncio.sleep(0.01)
        out["got"] = task_summary(got)

        page = await client.list_tasks(pb.ListTasksRequest(), context=auth)
        out["listed"] = {"ids": [t.id for t in page.tasks], "totalSize": page.total_size}

        subscription = client.subscribe(pb.SubscribeToTaskRequest(id=live.id), context=auth)
        out["subscribed"] = [event_summary(await subscription.__anext__())]
        canceled = await client.cancel_task(pb.CancelTaskRequest(id=live.id), context=auth)
        out["canceled"] = task_summary(canceled)
        out["subscribed"] += await drain(subscription)

        out["cancelAgain"] = await refused(
            lambda: client.cancel_task(pb.CancelTaskRequest(id=live.id), context=auth))
        out["subscribeEnded"] = await refused(
            lambda: drain(client.subscribe(pb.SubscribeToTaskRequest(id=live.id), context=auth)))
        out["unknown"] = await refused(lambda: client.get_task(unknown, context=auth))

        extended = await client.get_extended_agent_card(pb.GetExtendedAgentCardRequest(), context=auth)
        exts = extended.capabilities.extensions
        out["extended"] = {
            "extensions": [e.uri for e in exts],
            "sessionId": json_format.MessageToDict(exts[1].params).get("sessionId") if len(exts) > 1 else None,
            "extendedAgentCard": extended.capabilities.extended_agent_card,
            "securitySchemes": list(extended.security_schemes.keys()),
        }
    finally:
        await client.close()
        await poller.close()
    print(json.dumps(out))


if __name__ == "__main__":
    if len(sys.argv) == 2:
        asyncio.run(main(sys.argv[1]))
    elif len(sys.argv) == 4 and sys.argv[2] == "auth":
        asyncio.run(auth_scenario(sys.argv[1], sys.argv[3]))
    else:
        sys.exit("usage: a2a_sdk_client.py http://localhost:PORT [auth TOKEN]")
