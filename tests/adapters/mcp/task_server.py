"""An MCP server that answers tool calls as tasks (the 2026-07-28 tasks extension), in process or
as ``python -m tests.adapters.mcp.task_server PORT`` over streamable HTTP.

``charge`` acts when it is called (one ledger line: the call and its idempotency key) and
answers with a task that completes ``seconds`` later; ``tasks/get`` and ``tasks/cancel`` are
ledger lines too, so a test can count what the server saw. A client that did not declare the
extension gets the plain result. The hostile tools answer with broken tasks. The first
``cancel_first`` tasks end ``cancelled`` by the server's own doing, after the tool acted.

A task answer has the shape the published extension gives it (SEP-2663: ``CreateTaskResult`` is
``Result & Task``, the task's fields beside ``resultType``); with ``nested`` it has the shape of
the drafts before it (``{"resultType": "task", "task": {...}}``).
Environment (as a process): LEDGER (a file), TASK_SECONDS, ANSWER_DELAY (seconds the server waits
after acting and before answering with the task), POLL_MS, NESTED (1: the draft shape).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import MCPServer

TASKS = "io.modelcontextprotocol/tasks"
KEY = "dev.bide/idempotency-key"


class TaskParams(types.RequestParams):
    task_id: str


class Tasks(Extension):
    identifier = TASKS

    def __init__(
        self,
        ledger: Path | None,
        *,
        seconds: float,
        answer_delay: float = 0.0,
        poll_ms: int | None = 50,
        fail: bool = False,
        cancel_first: int = 0,
        nested: bool = False,
    ) -> None:
        self.nested = nested
        self.ledger = ledger
        self.seen: list[str] = []
        self.seconds = seconds
        self.answer_delay = answer_delay
        self.poll_ms = poll_ms
        self.fail = fail
        self.cancel_first = cancel_first
        self.tasks: dict[str, dict[str, Any]] = {}
        self.hostile_get: dict[str, Any] | None = None

    def note(self, line: str) -> None:
        self.seen.append(line)
        if self.ledger is not None:
            with open(self.ledger, "a") as f:
                f.write(line + "\n")
                f.flush()
                os.fsync(f.fileno())

    def count(self, word: str) -> int:
        return sum(1 for line in self.seen if line.split()[0] == word)

    def methods(self) -> list[MethodBinding]:
        async def get(ctx: Any, params: TaskParams) -> dict[str, Any]:
            self.note(f"get {params.task_id}")
            if self.hostile_get is not None:
                return self.hostile_get
            task = self.tasks.get(params.task_id)
            if task is None:
                raise ValueError(f"no task {params.task_id}")
            return self._reading(params.task_id, task)

        async def cancel(ctx: Any, params: TaskParams) -> dict[str, Any]:
            self.note(f"cancel {params.task_id}")
            task = self.tasks[params.task_id]
            if task["status"] == "working":
                task["status"] = "cancelled"
            return self._reading(params.task_id, task)

        return [
            MethodBinding("tasks/get", TaskParams, get),
            MethodBinding("tasks/cancel", TaskParams, cancel),
        ]

    def _reading(self, task_id: str, task: dict[str, Any]) -> dict[str, Any]:
        if task["status"] == "working" and time.monotonic() >= task["done_at"]:
            ended = "cancelled" if task["cancels"] else "failed" if self.fail else "completed"
            task["status"] = ended
        reading: dict[str, Any] = {
            "taskId": task_id,
            "status": task["status"],
            "createdAt": task["created"],
            "lastUpdatedAt": _now(),
            "ttl": None,
        }
        if self.poll_ms is not None:
            reading["pollIntervalMs"] = self.poll_ms
        if task["status"] == "completed":
            reading["result"] = task["result"]
        if task["status"] == "failed":
            reading["statusMessage"] = "the card was declined"
        if task["status"] == "cancelled" and task["cancels"]:
            reading["statusMessage"] = "stopped by an operator"
        return reading

    async def intercept_tool_call(self, params: Any, ctx: Any, call_next: Any) -> Any:
        meta = dict(ctx.meta or {})
        capabilities = meta.get(types.CLIENT_CAPABILITIES_META_KEY) or {}
        if TASKS not in (capabilities.get("extensions") or {}):
            self.note(f"call-plain {params.name}")
            return await call_next(ctx)
        if params.name == "no_id":
            return self._answer({"status": "working"})
        if params.name == "odd_status":
            return self._answer({"taskId": "t-1", "status": "sleeping"})
        if params.name == "both_shapes":
            task = {"taskId": "t-1", "status": "working"}
            return {"resultType": "task", **task, "task": task}
        key = (params.meta or {}).get(KEY) if params.meta is not None else None
        key = key or meta.get(KEY)
        self.note(f"call {params.name} {key}")
        result = await call_next(ctx)
        task_id = uuid.uuid4().hex
        self.tasks[task_id] = {
            # The first ``cancel_first`` tasks are cancelled by the server itself, after acting.
            "cancels": len(self.tasks) < self.cancel_first,
            "status": "working",
            "done_at": time.monotonic() + self.seconds,
            "created": _now(),
            "result": result.model_dump(by_alias=True, mode="json", exclude_none=True),
        }
        if self.answer_delay:
            await asyncio.sleep(self.answer_delay)
        task: dict[str, Any] = {
            "taskId": task_id,
            "status": "working",
            "createdAt": self.tasks[task_id]["created"],
            "lastUpdatedAt": _now(),
            "ttl": 3_600_000,
        }
        if self.poll_ms is not None:
            task["pollIntervalMs"] = self.poll_ms
        return self._answer(task)

    def _answer(self, task: dict[str, Any]) -> dict[str, Any]:
        if self.nested:
            return {"resultType": "task", "task": task}
        return {"resultType": "task", **task}


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def task_server(tasks: Tasks) -> MCPServer:
    server = MCPServer("tasks", extensions=[tasks])

    @server.tool()
    def charge(amount: int) -> str:
        """Charge a card (a side effect, answered as a task)."""
        return json.dumps({"charged": amount})

    @server.tool()
    def no_id() -> str:
        """Answer with a task that has no id."""
        return "unreachable"

    @server.tool()
    def both_shapes() -> str:
        """Answer with a task both flattened and nested."""
        return "unreachable"

    @server.tool()
    def odd_status() -> str:
        """Answer with a task whose status is not one of the five."""
        return "unreachable"

    return server


if __name__ == "__main__":
    extension = Tasks(
        Path(os.environ["LEDGER"]),
        seconds=float(os.environ.get("TASK_SECONDS", "0.3")),
        answer_delay=float(os.environ.get("ANSWER_DELAY", "0")),
        poll_ms=int(os.environ.get("POLL_MS", "50")),
        nested=os.environ.get("NESTED") == "1",
    )
    task_server(extension).run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
