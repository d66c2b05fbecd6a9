#!/usr/bin/env python3
"""The official A2A Python SDK's server with a no-op agent, the comparison for scripts/bench.

A JSON-RPC door on POST / (uvicorn, with uvloop when it is installed): every task is answered
at once with a one-line artifact and TASK_STATE_COMPLETED, so what is measured is the SDK's own
request path. Usage: a2a_sdk_server.py PORT
"""
import sys

import uvicorn
from starlette.applications import Starlette

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part, Task, TaskState,
                       TaskStatus)


class NoOp(AgentExecutor):
    """Completes every task at once with a fixed answer."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if task is None:
            task = Task(
                id=context.task_id,
                context_id=context.context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
            )
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.add_artifact([Part(text="ok")], name="response")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel()


def main() -> None:
    port = int(sys.argv[1])
    card = AgentCard(
        name="noop",
        description="a no-op agent for benchmarks",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=f"http://127.0.0.1:{port}/", protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="noop", name="noop", description="answers at once", tags=["bench"])],
    )
    handler = DefaultRequestHandler(agent_executor=NoOp(), task_store=InMemoryTaskStore(), agent_card=card)
    routes = create_agent_card_routes(card) + create_jsonrpc_routes(handler, rpc_url="/")
    try:
        import uvloop  # noqa: F401

        loop = "uvloop"
    except ImportError:
        loop = "asyncio"
    uvicorn.run(Starlette(routes=routes), host="127.0.0.1", port=port, loop=loop, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
