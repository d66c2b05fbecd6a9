#!/usr/bin/env python3
"""An official A2A client against a murmur door: the interop half of tests/interop.rs.

Drives the official A2A Python SDK (a2a-sdk, pinned in scripts/setup_test_deps.py) against the
door at the URL given as the only argument, exactly as a user of that SDK would: resolve the
card, build a client from it, send / get / list / cancel. It prints one JSON object describing
what the SDK saw; the Rust test asserts on it. It exits 0 when it ran to the end (whatever it
saw), 3 when the SDK is not installed, and non-zero with a traceback on anything unexpected.

The door's stream methods are not used (the client is built with streaming=False), so this
exercises SendMessage, GetTask, ListTasks and CancelTask, and the SDK's mapping of the door's
A2A errors.
"""
import asyncio
import json
import sys

try:
    import httpx
    from google.protobuf import json_format
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
    from a2a.types import a2a_pb2 as pb
    from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError
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


async def send(client, text, context_id, return_immediately=False):
    request = pb.SendMessageRequest(message=text_message(text, context_id))
    if return_immediately:
        request.configuration.return_immediately = True
    events = [event async for event in client.send_message(request)]
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


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: a2a_sdk_client.py http://localhost:PORT")
    asyncio.run(main(sys.argv[1]))
