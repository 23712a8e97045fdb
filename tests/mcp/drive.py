"""Drives an MCP server with the official Python SDK and reports what it saw.

Usage: python drive.py < scenario.json

The scenario (JSON on stdin):

    {
      "transport": {"kind": "stdio", "command": "rlp", "args": [...],
                    "env": {...}, "cwd": "...", "stderr": "file for its stderr"}
                 | {"kind": "http", "url": "http://127.0.0.1:PORT/mcp", "token": "..."?},
      "mode": "legacy" | "auto" | "2026-07-28",
      "elicitation": [answer, ...] | null,
      "steps": [step, ...]
    }

`mode` is the SDK's connect mode: "legacy" is the initialize handshake
(2025-11-25), "2026-07-28" the stateless revision, "auto" the SDK's default
(server/discover, falling back to initialize). `elicitation` is the script of
answers (`{"action": "accept", "content": {...}}`, `{"action": "decline"}`,
`{"hang": true}`: never answer; `"after_ms": N` beside an answer: give it
N ms late),
given in turn to each elicitation request; null means the client does not
support elicitation at all. A step is one of:

    {"op": "list"}                          tools/list, entries as sent
    {"op": "call", "tool": ..., "arguments": {...}, "meta": {...}?,
     "progress": true?, "cancel": {"after_ms": N} | {"when_file": path}?}
    {"op": "parallel", "calls": [call, ...]}  the calls at once
    {"op": "watch_pid", "file": path, "limit_ms": N}
                                            when the process whose pid the
                                            file holds is gone (polled)
    {"op": "request", "method": "...", "params": {...}?}
                                            any client request (resources/*,
                                            prompts/*, completion/complete,
                                            ping…, read by the SDK's
                                            ClientRequest type): its `result`
                                            as sent, its JSON-RPC `error`
                                            {code, message, data}, or why
                                            the SDK found the result not
                                            valid for the revision spoken
                                            (`invalid`)
    {"op": "await", "method": "...", "limit_ms": N}
                                            until a notification of `method`
                                            has been received (see
                                            `notifications` below): `seen`
                                            true, or false at the limit (a
                                            guard against a hang, not a
                                            timing assertion)

It prints one JSON document: the negotiated protocol version, the
capabilities the server declared (`server_capabilities`, as sent), one
record per step (a call's result as sent, or its JSON-RPC error's code,
message and data, or that it was cancelled), every elicitation request with
the answer given, every progress notification, every log message (level,
logger, data), every other notification the server sent (`notifications`:
`{"method", "params", "at_ms"}` in the order received, e.g.
notifications/resources/updated and notifications/*/list_changed;
cancellations are the SDK's own and not reported), and times in
milliseconds since the driver started. A failure outside the steps
(cannot connect) is reported as `fatal` with exit code 1.
"""

import json
import os
import sys
import time
import traceback
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter, ValidationError

# How long a cancellation waits for its file, and a watch for its pid file:
# a guard against a hang, not a timing assertion.
PATIENCE_S = 20
# How often files and processes are polled.
POLL_S = 0.005

START = time.monotonic()


def now_ms() -> float:
    """Milliseconds since the driver started."""
    return round((time.monotonic() - START) * 1000, 1)


def wire(model: Any) -> Any:
    """A result model as the server sent it (fields it did not send left out)."""
    return model.model_dump(by_alias=True, mode="json", exclude_unset=True)


class Observer:
    """Everything the client saw besides step results."""

    def __init__(self, answers: list[dict] | None) -> None:
        self.answers = list(answers or [])
        self.elicitations: list[dict] = []
        self.progress: list[dict] = []
        self.logs: list[dict] = []
        self.notifications: list[dict] = []

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        """Records a log message notification."""
        self.logs.append({"level": params.level, "logger": params.logger, "data": params.data})

    async def notice(self, message: Any) -> None:
        """Records a server notification other than progress and log messages
        (transport faults, which the SDK hands here too, are not notifications)."""
        if isinstance(message, Exception):
            return
        if isinstance(message, (types.ProgressNotification, types.LoggingMessageNotification)):
            return
        params = wire(message).get("params")
        self.notifications.append({"method": message.method, "params": params, "at_ms": now_ms()})

    async def elicit(self, _context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        """Answers an elicitation request with the next scripted answer (declines when none is left)."""
        answer = dict(self.answers.pop(0)) if self.answers else {"action": "decline"}
        record = {"params": wire(params), "answer": answer, "at_ms": now_ms()}
        self.elicitations.append(record)
        if answer.get("hang"):
            await anyio.sleep_forever()
        late = answer.pop("after_ms", 0)
        if late:
            await anyio.sleep(late / 1000)
        record["answered_ms"] = now_ms()
        return types.ElicitResult(**answer)

    def progress_of(self, label: str):
        """A progress callback recording notifications for call `label`."""

        async def record(progress: float, total: float | None, message: str | None) -> None:
            self.progress.append(
                {"call": label, "progress": progress, "total": total, "message": message, "at_ms": now_ms()}
            )

        return record


def transport_of(spec: dict):
    """The SDK transport the scenario names."""
    if spec["kind"] == "stdio":
        params = StdioServerParameters(
            command=spec["command"], args=spec.get("args", []), env=spec.get("env"), cwd=spec.get("cwd")
        )
        errlog = open(spec["stderr"], "w") if spec.get("stderr") else sys.stderr
        return stdio_client(params, errlog=errlog)
    headers = {"Authorization": f"Bearer {spec['token']}"} if spec.get("token") else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300))
    return streamable_http_client(spec["url"], http_client=http)


async def wait_for_file(path: str) -> str:
    """The text of file `path` once it exists (bounded)."""
    with anyio.fail_after(PATIENCE_S):
        while not os.path.exists(path):
            await anyio.sleep(POLL_S)
    return open(path).read().strip()


async def cancel_later(scope: anyio.CancelScope, cancel: dict, record: dict) -> None:
    """Cancels `scope` after `cancel.after_ms`, or once file `cancel.when_file` exists."""
    if "after_ms" in cancel:
        await anyio.sleep(cancel["after_ms"] / 1000)
    else:
        await wait_for_file(cancel["when_file"])
    record["cancelled_at_ms"] = now_ms()
    scope.cancel()


async def call(client: Client, observer: Observer, spec: dict, label: str) -> dict:
    """One tools/call: its result, its JSON-RPC error, or its cancellation."""
    record: dict[str, Any] = {"tool": spec["tool"], "started_ms": now_ms()}
    progress = observer.progress_of(label) if spec.get("progress") else None
    async with anyio.create_task_group() as watchers:
        with anyio.CancelScope() as scope:
            if "cancel" in spec:
                watchers.start_soon(cancel_later, scope, spec["cancel"], record)
            try:
                result = await client.call_tool(
                    spec["tool"], spec.get("arguments"), progress_callback=progress, meta=spec.get("meta")
                )
                record["result"] = wire(result)
            except MCPError as error:
                record["error"] = {"code": error.code, "message": error.message, "data": error.data}
        watchers.cancel_scope.cancel()
    if scope.cancelled_caught:
        record["cancelled"] = True
    record["ended_ms"] = now_ms()
    return record


async def parallel(client: Client, observer: Observer, specs: list[dict], label: str) -> dict:
    """The calls of `specs` at once; their records in the order given."""
    records: list[dict] = [{} for _ in specs]

    async def one(i: int, spec: dict) -> None:
        records[i] = await call(client, observer, spec, f"{label}.{i}")

    async with anyio.create_task_group() as group:
        for i, spec in enumerate(specs):
            group.start_soon(one, i, spec)
    return {"calls": records}


async def watch_pid(spec: dict) -> dict:
    """When the process named in file `spec.file` is gone, polled up to `spec.limit_ms`."""
    pid = int(await wait_for_file(spec["file"]))
    deadline = time.monotonic() + spec["limit_ms"] / 1000
    while time.monotonic() < deadline:
        if not running(pid):
            return {"pid": pid, "gone_at_ms": now_ms()}
        await anyio.sleep(POLL_S)
    return {"pid": pid, "still_running_at_ms": now_ms()}


async def request(client: Client, spec: dict) -> dict:
    """One client request of any method: its result as sent, or its JSON-RPC error."""
    message = {"method": spec["method"]}
    if "params" in spec:
        message["params"] = spec["params"]
    typed = types.client_request_adapter.validate_python(message)
    record: dict[str, Any] = {"method": spec["method"]}
    try:
        record["result"] = await client.session.send_request(typed, TypeAdapter(dict[str, Any]))
    except MCPError as error:
        record["error"] = {"code": error.code, "message": error.message, "data": error.data}
    except ValidationError as error:
        record["invalid"] = str(error)
    return record


async def await_notification(observer: Observer, spec: dict) -> dict:
    """Whether a notification of `spec.method` was received, polled up to `spec.limit_ms`."""
    deadline = time.monotonic() + spec["limit_ms"] / 1000
    while True:
        if any(n["method"] == spec["method"] for n in observer.notifications):
            return {"method": spec["method"], "seen": True}
        if time.monotonic() >= deadline:
            return {"method": spec["method"], "seen": False}
        await anyio.sleep(POLL_S)


def running(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return not stat.read().rsplit(") ", 1)[1].startswith("Z")
    except FileNotFoundError:
        return False


async def step(client: Client, observer: Observer, spec: dict, label: str) -> dict:
    """Runs one step of the scenario."""
    op = spec["op"]
    if op == "list":
        raw = await client.session.send_request(types.ListToolsRequest(), TypeAdapter(dict[str, Any]))
        return {"op": op, "tools": raw["tools"]}
    if op == "call":
        return {"op": op, **await call(client, observer, spec, label)}
    if op == "parallel":
        return {"op": op, **await parallel(client, observer, spec["calls"], label)}
    if op == "watch_pid":
        return {"op": op, **await watch_pid(spec)}
    if op == "request":
        return {"op": op, **await request(client, spec)}
    if op == "await":
        return {"op": op, **await await_notification(observer, spec)}
    raise ValueError(f"unknown step {op!r}")


async def drive(scenario: dict, report: dict) -> None:
    """Connects as the scenario says and runs its steps, filling `report`."""
    answers = scenario.get("elicitation")
    observer = Observer(answers)
    report["elicitations"] = observer.elicitations
    report["progress"] = observer.progress
    report["logs"] = observer.logs
    report["notifications"] = observer.notifications
    async with Client(
        transport_of(scenario["transport"]),
        mode=scenario.get("mode", "auto"),
        elicitation_callback=observer.elicit if answers is not None else None,
        logging_callback=observer.log,
        message_handler=observer.notice,
        cache=None,
    ) as client:
        report["protocol_version"] = client.protocol_version
        report["server_capabilities"] = wire(client.server_capabilities)
        for i, spec in enumerate(scenario["steps"]):
            report["steps"].append(await step(client, observer, spec, str(i)))


def main() -> int:
    scenario = json.load(sys.stdin)
    report: dict[str, Any] = {"steps": []}
    code = 0
    try:
        anyio.run(drive, scenario, report)
    except BaseException as error:  # reported, never lost: the test shows it
        report["fatal"] = "".join(traceback.format_exception(error))
        code = 1
    json.dump(report, sys.stdout)
    sys.stdout.write("\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
