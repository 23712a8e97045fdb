"""The measurements of bench/bridge.sh, in one run; prints a Markdown report.

Every series calls the everything server's `echo` tool with
{"message": "hi"} and checks the answer ("Echo: hi").

Warm calls (µs per `tools/call` round trip, one after the other over one
session), the series of a table interleaved round by round so that load on
the machine touches them alike, each after a warm-up:
  - stdio: the server (`node EVERYTHING_JS`) called directly; through
    `rlp serve` (stdio) whose `echo` is bridged to its own stdio server,
    sandboxed by default and with the sandbox off; through a FastMCP proxy
    (bench/bridge_fastmcp.py) of its own stdio server, a fresh backend
    session per request (create_proxy's default) and one shared session;
  - HTTP: one server (`node EVERYTHING_JS streamableHttp`) on 127.0.0.1
    called directly over Streamable HTTP; through `rlp serve --http` and a
    FastMCP proxy served over Streamable HTTP (the client's leg is HTTP as
    in the direct series); and through `rlp serve` and a FastMCP proxy
    served over stdio (a host that starts the gateway, which reaches a
    remote server).
The client is the same in every series: the official MCP Python SDK's
`Client` (mode "legacy": the initialize handshake, 2025-11-25). As a
cross-check, a raw client without the SDK times the direct and rlp series
again: newline-delimited JSON-RPC on stdio (bench/serve_bench.py's), and
Python's http.client over one keep-alive connection for HTTP. A series at
tens of ms a call (FastMCP's fresh sessions over HTTP, a stalled raw HTTP
series) makes a tenth of the calls.

Cold start (wall ms, median of REPEATS, interleaved):
  - the server's own start-up as the SDK client sees it: spawn
    `node EVERYTHING_JS` until `initialize` is answered; then one call and
    stopping it (stdin closed, exit awaited);
  - one `rlp tools call BUNDLE echo` process (its own start, the bundle, the
    ledger, the server started in the sandbox, handshake, pin check, call,
    server stopped), sandboxed and with the sandbox off: until its answer is
    on stdout, and until it exited;
  - HTTP, the server already running: connect, initialize, one call and
    close from the SDK client, against one `rlp tools call` of the bundle
    bridged to it.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

sys.dont_write_bytecode = True  # no __pycache__ in bench/
sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_bench import StdioClient, check  # noqa: E402

TOOL = "echo"
ARGUMENTS = {"message": "hi"}
ANSWER = "Echo: hi"
SLOW_DIVISOR = 10


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without rlp's own variables, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RUNLOOP_", "RLP_", "OTEL_"))}
    env.update(extra)
    return env


def checked(result) -> None:
    """Fails unless `result` is the echo's answer."""
    texts = [getattr(block, "text", None) for block in result.content]
    if result.is_error or texts != [ANSWER]:
        raise RuntimeError(f"unexpected answer: {result.model_dump(mode='json', exclude_none=True)}")


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Paths:
    """Where the series' programs and logs are."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.logs = Path(args.logs)

    def log(self, name: str):
        return open(self.logs / f"{name}.stderr", "a")

    def server(self) -> list[str]:
        return [self.args.node, self.args.everything]

    def rlp_serve(self, bundle: str, *extra: str) -> list[str]:
        return [self.args.rlp, "serve", bundle, *extra]

    def fastmcp(self, session: str, *target: str, http_port_file: str | None = None) -> list[str]:
        extra = ["--http-port-file", http_port_file] if http_port_file else []
        return [self.args.python, self.args.fastmcp, "--session", session, *extra, *target]


def sdk_stdio(argv: list[str], env: dict[str, str], log) -> Client:
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env)
    return Client(stdio_client(params, errlog=log), mode="legacy", cache=None)


def sdk_http(url: str) -> Client:
    return Client(streamable_http_client(url), mode="legacy", cache=None)


class NoDelayConnection(http.client.HTTPConnection):
    """http.client's connection with TCP_NODELAY, as HTTP clients set it
    (httpx, curl, hyper): http.client sends a request's head and body in two
    writes, and with Nagle on, the body waits for the server to acknowledge
    the head, which a server waiting for the body delays (40 ms on Linux)."""

    def connect(self) -> None:
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class RawHttpClient:
    """A minimal Streamable HTTP client: one keep-alive connection
    (TCP_NODELAY), a POST per message, the answer read as JSON or as the SSE
    stream that carries it."""

    def __init__(self, url: str):
        parsed = urllib.parse.urlsplit(url)
        self.path = parsed.path
        self.conn = NoDelayConnection(parsed.hostname, parsed.port, timeout=30)
        self.headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        self.next_id = 0
        response = self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
        session = response.getheader("mcp-session-id")
        self.answer(response, 0)
        if session:
            self.headers["mcp-session-id"] = session
        self.headers["mcp-protocol-version"] = "2025-11-25"
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}).read()

    def post(self, message: dict):
        body = json.dumps(message).encode()
        try:
            self.conn.request("POST", self.path, body, self.headers)
            response = self.conn.getresponse()
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            # The server closed the idle keep-alive connection (Node.js and
            # uvicorn do after 5 s): connect again and send it again.
            self.conn.close()
            self.conn.request("POST", self.path, body, self.headers)
            response = self.conn.getresponse()
        if response.status >= 300:
            raise RuntimeError(f"HTTP {response.status}: {response.read()[:300]!r}")
        return response

    def answer(self, response, request_id: int) -> dict:
        body = response.read().decode()
        if response.getheader("content-type", "").startswith("text/event-stream"):
            for line in body.splitlines():
                if line.startswith("data:") and line[5:].strip():
                    message = json.loads(line[5:])
                    if message.get("id") == request_id and "method" not in message:
                        return check(message)
            raise RuntimeError(f"no answer to {request_id} in the stream: {body[:300]!r}")
        return check(json.loads(body))

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        return self.answer(self.post({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}),
                           self.next_id)

    def call(self) -> dict:
        return self.request("tools/call", {"name": TOOL, "arguments": ARGUMENTS})

    def close(self) -> None:
        self.conn.close()


def slow_raw_series(raw: dict) -> set[str]:
    """The raw series whose calls take tens of ms (timed with 20 calls each)."""
    slow = set()
    for name, client in raw.items():
        start = time.perf_counter()
        for _ in range(20):
            client.call()
        if (time.perf_counter() - start) / 20 > 0.02:
            slow.add(name)
    return slow


class Background:
    """A gateway serving Streamable HTTP, started before the series and
    stopped after; `url` is its endpoint."""

    def __init__(self, argv: list[str], env: dict[str, str], log_path: Path, *, listening_line: str | None = None,
                 port_file: Path | None = None):
        self.log = open(log_path, "w")
        self.url = ""
        if listening_line:
            self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.PIPE, text=True)
            found = threading.Event()

            def drain():
                for line in self.proc.stderr:
                    self.log.write(line)
                    self.log.flush()
                    if line.startswith(listening_line):
                        self.url = line[len(listening_line):].strip()
                        found.set()
                found.set()

            threading.Thread(target=drain, daemon=True).start()
            if not found.wait(30) or not self.url:
                raise RuntimeError(f"{argv[0]} announced no endpoint (see {log_path})")
        else:
            self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log)
            deadline = time.monotonic() + 30
            while not port_file.exists():
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{argv[0]} did not start (see {log_path})")
                time.sleep(0.05)
            self.url = f"http://127.0.0.1:{port_file.read_text().strip()}/mcp"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def share(name: str, count: int, slow: set[str]) -> int:
    """`count` calls, a tenth of them for a series in `slow` (tens of ms a
    call: a tenth keeps the run short and its mean still far apart)."""
    return max(1, count // SLOW_DIVISOR) if name in slow else count


async def warm(clients: dict[str, Client], iterations: int, warmup: int, rounds: int,
               slow: set[str] = frozenset()) -> dict[str, list[float]]:
    """Samples (µs) of each client's calls: `warmup` calls each, then
    `rounds` rounds each running every client in turn for
    iterations/rounds calls (a tenth of both for a series in `slow`)."""
    for name, client in clients.items():
        for _ in range(share(name, warmup, slow)):
            checked(await client.call_tool(TOOL, ARGUMENTS))
    samples: dict[str, list[float]] = {name: [] for name in clients}
    per_round = max(1, iterations // rounds)
    for _ in range(rounds):
        for name, client in clients.items():
            for _ in range(share(name, per_round, slow)):
                start = time.perf_counter()
                result = await client.call_tool(TOOL, ARGUMENTS)
                samples[name].append((time.perf_counter() - start) * 1e6)
                checked(result)
    return samples


def warm_raw(series: dict, iterations: int, warmup: int, rounds: int,
             slow: set[str] = frozenset()) -> dict[str, list[float]]:
    """As `warm`, with raw clients (StdioClient or RawHttpClient)."""

    def call(client) -> None:
        if isinstance(client, RawHttpClient):
            result = client.call()
        else:
            result = client.wait_for(client.send("tools/call", {"name": TOOL, "arguments": ARGUMENTS}))
        if [block.get("text") for block in result["content"]] != [ANSWER]:
            raise RuntimeError(f"unexpected answer: {result}")

    for name, client in series.items():
        for _ in range(share(name, warmup, slow)):
            call(client)
    samples: dict[str, list[float]] = {name: [] for name in series}
    per_round = max(1, iterations // rounds)
    for _ in range(rounds):
        for name, client in series.items():
            for _ in range(share(name, per_round, slow)):
                start = time.perf_counter()
                call(client)
                samples[name].append((time.perf_counter() - start) * 1e6)
    return samples


def warm_table(title: str, samples: dict[str, list[float]], direct: str, rlp: str, fastmcp: list[str]) -> list[str]:
    """The Markdown table of one set of warm series, overheads against
    `direct` and FastMCP's series against `rlp`'s."""
    base_mean = statistics.mean(samples[direct])
    base_p50 = statistics.median(samples[direct])
    out = [f"| {title} | calls | mean µs | p50 µs | p99 µs | above direct, mean µs | above direct, p50 µs |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for name, values in samples.items():
        mean, p50 = statistics.mean(values), statistics.median(values)
        above = "–" if name == direct else f"{mean - base_mean:+.0f}"
        above_p50 = "–" if name == direct else f"{p50 - base_p50:+.0f}"
        out.append(f"| {name} | {len(values)} | {mean:.0f} | {p50:.0f} | {percentile(values, 0.99):.0f} | {above} | {above_p50} |")
    if fastmcp:
        rlp_mean = statistics.mean(samples[rlp])
        rlp_over = rlp_mean - base_mean
        out += ["", f"| FastMCP against {rlp} (means) | per call, FastMCP / rlp | above direct, FastMCP / rlp |",
                "|---|---:|---:|"]
        for name in fastmcp:
            mean = statistics.mean(samples[name])
            over = f"{(mean - base_mean) / rlp_over:.2f}×" if rlp_over > 0 else "rlp at or below direct"
            out.append(f"| {name} | {mean / rlp_mean:.2f}× | {over} |")
    return out


def over_direct(args: argparse.Namespace, what: str, samples: dict[str, list[float]], direct: str, rlp: str) -> None:
    """Records the first target: rlp serve under 0.5 ms per call above direct."""
    above = statistics.mean(samples[rlp]) - statistics.mean(samples[direct])
    above_p50 = statistics.median(samples[rlp]) - statistics.median(samples[direct])
    args.targets.append((f"`rlp serve` under 0.5 ms per call above direct: {what}",
                         f"{above:+.0f} µs mean, {above_p50:+.0f} µs p50", "yes" if above < 500 else "no"))


def ahead_of_fastmcp(args: argparse.Namespace, what: str, samples: dict[str, list[float]], rlp: str,
                     fastmcp: list[str]) -> None:
    """Records the second target: rlp serve's calls faster than every FastMCP proxy setting."""
    rlp_mean = statistics.mean(samples[rlp])
    best = min(statistics.mean(samples[name]) for name in fastmcp)
    args.targets.append((f"`rlp serve` ahead of the FastMCP proxy: {what}",
                         f"fastest FastMCP setting / rlp = {best / rlp_mean:.2f}× (means)", "yes" if best > rlp_mean else "no"))


async def stdio_series(paths: Paths, args: argparse.Namespace) -> list[str]:
    env = clean_env()
    rlp_env = clean_env(RUNLOOP_HOME=args.home)
    off_env = clean_env(RUNLOOP_HOME=args.home_off)
    makers = {
        "direct: client → `node everything` (stdio)":
            lambda: sdk_stdio(paths.server(), env, paths.log("stdio-direct")),
        "client → `rlp serve` (stdio) → server (stdio, sandboxed)":
            lambda: sdk_stdio(paths.rlp_serve(args.bundle_stdio), rlp_env, paths.log("stdio-rlp")),
        "client → `rlp serve` (stdio) → server (stdio, sandbox off)":
            lambda: sdk_stdio(paths.rlp_serve(args.bundle_stdio), off_env, paths.log("stdio-rlp-off")),
        "client → FastMCP proxy (stdio) → server (stdio), fresh session per request":
            lambda: sdk_stdio(paths.fastmcp("fresh", "--", *paths.server()), env, paths.log("stdio-fastmcp-fresh")),
        "client → FastMCP proxy (stdio) → server (stdio), one shared session":
            lambda: sdk_stdio(paths.fastmcp("shared", "--", *paths.server()), env, paths.log("stdio-fastmcp-shared")),
    }
    async with AsyncExitStack() as stack:
        clients = {name: await stack.enter_async_context(make()) for name, make in makers.items()}
        samples = await warm(clients, args.iterations, args.warmup, args.rounds)
    names = list(makers)
    out = [f"**stdio** — {args.iterations} calls per series after {args.warmup} warm-up calls, "
           f"{args.rounds} interleaved rounds, MCP Python SDK client:", ""]
    out += warm_table("stdio server, one `echo` round trip", samples, names[0], names[1], names[3:])
    over_direct(args, "stdio, SDK client", samples, names[0], names[1])
    ahead_of_fastmcp(args, "stdio", samples, names[1], names[3:])

    # The raw client, direct and through rlp serve only.
    raw = {
        "direct (raw client)": StdioClient(paths.server(), env, paths.log("stdio-raw-direct")),
        "`rlp serve`, sandboxed (raw client)": StdioClient(paths.rlp_serve(args.bundle_stdio), rlp_env, paths.log("stdio-raw-rlp")),
    }
    raw_samples = warm_raw(raw, args.iterations, args.warmup, args.rounds)
    for client in raw.values():
        client.close()
    out += ["", "Cross-check with a raw client (newline-delimited JSON-RPC, no SDK), same counts:", ""]
    out += warm_table("stdio server, one `echo` round trip", raw_samples, *list(raw), [])
    over_direct(args, "stdio, raw client", raw_samples, *list(raw))
    return out


async def http_series(paths: Paths, args: argparse.Namespace) -> list[str]:
    env = clean_env()
    rlp_env = clean_env(RUNLOOP_HOME=args.home)
    logs = paths.logs
    backgrounds = [
        Background(paths.rlp_serve(args.bundle_http, "--http", "127.0.0.1:0"), rlp_env, logs / "http-rlp-http.stderr",
                   listening_line="rlp serve: listening on "),
    ]
    for session in ("fresh", "shared"):
        port_file = logs / f"http-fastmcp-{session}.port"
        port_file.unlink(missing_ok=True)
        backgrounds.append(Background(paths.fastmcp(session, "--url", args.url, http_port_file=str(port_file)), env,
                                      logs / f"http-fastmcp-http-{session}.stderr", port_file=port_file))
    rlp_http, fastmcp_fresh, fastmcp_shared = (b.url for b in backgrounds)
    makers = {
        "direct: client → server (HTTP)": lambda: sdk_http(args.url),
        "client → `rlp serve --http` → server (HTTP)": lambda: sdk_http(rlp_http),
        "client → FastMCP proxy (HTTP) → server (HTTP), fresh session per request": lambda: sdk_http(fastmcp_fresh),
        "client → FastMCP proxy (HTTP) → server (HTTP), one shared session": lambda: sdk_http(fastmcp_shared),
        "client → `rlp serve` (stdio) → server (HTTP)":
            lambda: sdk_stdio(paths.rlp_serve(args.bundle_http), rlp_env, paths.log("http-rlp-stdio")),
        "client → FastMCP proxy (stdio) → server (HTTP), fresh session per request":
            lambda: sdk_stdio(paths.fastmcp("fresh", "--url", args.url), env, paths.log("http-fastmcp-stdio-fresh")),
        "client → FastMCP proxy (stdio) → server (HTTP), one shared session":
            lambda: sdk_stdio(paths.fastmcp("shared", "--url", args.url), env, paths.log("http-fastmcp-stdio-shared")),
    }
    try:
        async with AsyncExitStack() as stack:
            clients = {name: await stack.enter_async_context(make()) for name, make in makers.items()}
            slow = {name for name in makers if "fresh session" in name}
            samples = await warm(clients, args.iterations, args.warmup, args.rounds, slow)
        raw = {"direct (raw client)": RawHttpClient(args.url), "`rlp serve --http` (raw client)": RawHttpClient(rlp_http)}
        raw_samples = warm_raw(raw, args.iterations, args.warmup, args.rounds, slow_raw_series(raw))
        for client in raw.values():
            client.close()
    finally:
        for background in backgrounds:
            background.stop()
    names = list(makers)
    out = [f"**Streamable HTTP** — the same counts (a tenth of them for a series at tens of ms a call); one server "
           "for every series; the first four series reach their first hop over Streamable HTTP as the direct one "
           "does, the last three over stdio:", ""]
    out += warm_table("HTTP server, one `echo` round trip", samples, names[0], names[1], names[2:4])
    over_direct(args, "Streamable HTTP (`rlp serve --http`), SDK client", samples, names[0], names[1])
    ahead_of_fastmcp(args, "Streamable HTTP, HTTP front", samples, names[1], names[2:4])
    ahead_of_fastmcp(args, "Streamable HTTP, stdio front", samples, names[4], names[5:])
    rlp_mean = statistics.mean(samples[names[4]])
    out += ["", "| gateway over stdio, HTTP server (means) | per call, FastMCP / rlp |", "|---|---:|"]
    for name in names[5:]:
        out.append(f"| {name} | {statistics.mean(samples[name]) / rlp_mean:.2f}× |")
    out += ["", "Cross-check with a raw client (Python's `http.client`, one keep-alive connection, a POST per message), "
            "same counts (a tenth for a series at tens of ms a call):", ""]
    out += warm_table("HTTP server, one `echo` round trip", raw_samples, *list(raw), [])
    over_direct(args, "Streamable HTTP, raw client", raw_samples, *list(raw))
    return out


async def cold(paths: Paths, args: argparse.Namespace) -> list[str]:
    env = clean_env()
    times: dict[str, list[float]] = {}

    def note(name: str, ms: float) -> None:
        times.setdefault(name, []).append(ms)

    def rlp_call(bundle: str, home: str) -> tuple[float, float]:
        """Wall ms until `rlp tools call` printed its answer, and until it exited."""
        start = time.perf_counter()
        proc = subprocess.Popen([args.rlp, "tools", "call", bundle, TOOL, "--args", json.dumps(ARGUMENTS)],
                                env=clean_env(RUNLOOP_HOME=home), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        first = proc.stdout.read(1)
        answered = (time.perf_counter() - start) * 1e3
        out = first + proc.stdout.read()
        err = proc.stderr.read()
        code = proc.wait()
        exited = (time.perf_counter() - start) * 1e3
        if code != 0 or json.loads(out) != {"content": [{"type": "text", "text": ANSWER}]}:
            raise RuntimeError(f"rlp tools call failed ({code}): {out[:300]!r} {err[-600:]!r}")
        return answered, exited

    startup = "stdio server start-up: spawn `node everything` → `initialize` answered"
    direct_call = "then one `echo` call"
    direct_stop = "then the server stopped: stdin closed → exit"
    rlp_answer = "`rlp tools call`, sandboxed: its answer on stdout"
    rlp_exit = "`rlp tools call`, sandboxed: the process exited"
    off_answer = "`rlp tools call`, sandbox off: its answer on stdout"
    off_exit = "`rlp tools call`, sandbox off: the process exited"
    http_direct = "HTTP server running: SDK client connect, `initialize`, one `echo`, close"
    http_answer = "HTTP server running: `rlp tools call`, its answer on stdout"
    http_exit = "HTTP server running: `rlp tools call`, the process exited"
    with paths.log("cold-direct") as log:
        for _ in range(args.repeats):
            start = time.perf_counter()
            async with sdk_stdio(paths.server(), env, log) as client:
                initialized = time.perf_counter()
                checked(await client.call_tool(TOOL, ARGUMENTS))
                called = time.perf_counter()
            stopped = time.perf_counter()
            note(startup, (initialized - start) * 1e3)
            note(direct_call, (called - initialized) * 1e3)
            note(direct_stop, (stopped - called) * 1e3)
            for (answer, exit_), home in (((rlp_answer, rlp_exit), args.home), ((off_answer, off_exit), args.home_off)):
                answered, exited = rlp_call(args.bundle_stdio, home)
                note(answer, answered)
                note(exit_, exited)
            start = time.perf_counter()
            async with sdk_http(args.url) as client:
                checked(await client.call_tool(TOOL, ARGUMENTS))
            note(http_direct, (time.perf_counter() - start) * 1e3)
            answered, exited = rlp_call(args.bundle_http, args.home)
            note(http_answer, answered)
            note(http_exit, exited)
    out = [f"**Cold start** — {args.repeats} repeats, interleaved; wall ms from spawning the first process "
           "(the SDK client's rows are in its running process; each `rlp tools call` is a whole process):", "",
           "| one call from nothing | median ms | min ms | max ms |", "|---|---:|---:|---:|"]
    for name, values in times.items():
        out.append(f"| {name} | {statistics.median(values):.1f} | {min(values):.1f} | {max(values):.1f} |")
    median = {name: statistics.median(values) for name, values in times.items()}
    through_call = median[startup] + median[direct_call]
    through_stop = through_call + median[direct_stop]
    out += ["", "| cold, medians | ms above | × |", "|---|---:|---:|"]
    ratios = (
        ("`rlp tools call` answered (sandboxed), against the server's start-up", median[rlp_answer], median[startup]),
        ("`rlp tools call` answered (sandboxed), against start-up + one call", median[rlp_answer], through_call),
        ("`rlp tools call` answered (sandbox off), against start-up + one call", median[off_answer], through_call),
        ("`rlp tools call` exited (sandboxed), against start-up + one call + stop", median[rlp_exit], through_stop),
        ("`rlp tools call` answered (HTTP), against the SDK client's connect + call", median[http_answer], median[http_direct]),
    )
    for label, value, base in ratios:
        out.append(f"| {label} | {value - base:+.1f} | {value / base:.2f}× |")
    return out


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system, every thread) a running process has used."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuAccount:
    """CPU seconds of some processes (name → pid; "client" is this one),
    summed over the timed blocks of each series."""

    def __init__(self, pids: dict[str, int]):
        self.pids = pids
        self.used: dict[str, dict[str, float]] = {}

    def snapshot(self) -> dict[str, float]:
        now = {name: cpu_seconds(pid) for name, pid in self.pids.items()}
        now["client"] = time.process_time()
        return now

    def add(self, series: str, before: dict[str, float], after: dict[str, float], **extra: float) -> None:
        used = self.used.setdefault(series, {})
        for name in before:
            used[name] = used.get(name, 0.0) + after[name] - before[name]
        for name, seconds in extra.items():
            used[name] = used.get(name, 0.0) + seconds

    def per(self, series: str, name: str, count: int) -> str:
        """ms of `name`'s CPU per operation of `series`, or – when it took no part."""
        seconds = self.used.get(series, {}).get(name)
        return "–" if seconds is None else f"{seconds * 1e3 / count:.2f}"


def read_resource(client: RawHttpClient, uri: str, size: int) -> None:
    """One `resources/read` of `uri`, checked: one content of `size` bytes
    (base64 for the blob) or characters (the text)."""
    contents = client.request("resources/read", {"uri": uri})["contents"]
    content = contents[0] if len(contents) == 1 else {}
    length = len(content.get("blob", "")) if "blob" in content else len(content.get("text", ""))
    expected = 4 * ((size + 2) // 3) if "blob" in content else size
    if content.get("uri") != uri or length != expected:
        raise RuntimeError(f"unexpected contents of {uri}: {json.dumps(contents)[:300]}")


async def resources_series(paths: Paths, args: argparse.Namespace) -> list[str]:
    """A 1 MiB `resources/read` through `rlp serve --http` against the same
    read sent to the server directly, by the same raw HTTP client."""
    rlp_env = clean_env(RUNLOOP_HOME=args.home)
    gateway = Background(paths.rlp_serve(args.bundle_resources, "--http", "127.0.0.1:0"), rlp_env,
                         paths.logs / "resources-rlp-http.stderr", listening_line="rlp serve: listening on ")
    size_label = f"{args.resource_size // (1 << 20)} MiB" if args.resource_size % (1 << 20) == 0 else f"{args.resource_size} B"
    kinds = {"blob": ("bench://blob", f"binary, {size_label} (base64 on the wire)"),
             "text": ("bench://text", f"text, {size_label}")}
    try:
        clients = {"direct": RawHttpClient(args.resource_url), "rlp": RawHttpClient(gateway.url)}
        series = {(kind, path): (uri, clients[path]) for kind, (uri, _) in kinds.items() for path in clients}
        account = CpuAccount({"server": args.resource_server_pid, "rlp": gateway.proc.pid})
        for uri, client in series.values():
            for _ in range(args.resource_warmup):
                read_resource(client, uri, args.resource_size)
        samples: dict[tuple[str, str], list[float]] = {key: [] for key in series}
        per_round = max(1, args.resource_iterations // args.rounds)
        for _ in range(args.rounds):
            for key, (uri, client) in series.items():
                before = account.snapshot()
                for _ in range(per_round):
                    start = time.perf_counter()
                    read_resource(client, uri, args.resource_size)
                    samples[key].append((time.perf_counter() - start) * 1e3)
                account.add(f"{key}", before, account.snapshot())
        for client in clients.values():
            client.close()
    finally:
        gateway.stop()
    label = {"direct": "direct: client → server (HTTP)", "rlp": "client → `rlp serve --http` → server (HTTP)"}
    out = [f"**Resources** — one `resources/read` of {size_label} from a small MCP Python SDK server "
           f"(`bench/bridge_resource_server.py`, Streamable HTTP), {len(samples[('blob', 'direct')])} reads per series "
           f"after {args.resource_warmup} warm-up reads, {args.rounds} interleaved rounds, one raw client "
           "(Python's `http.client`, one keep-alive connection) for every series; CPU ms per read from `/proc` "
           "over the timed reads:", "",
           "| one `resources/read` | reads | mean ms | p50 ms | p99 ms | × direct, mean | × direct, p50 "
           "| CPU ms per read: server | rlp | client |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for kind, (uri, what) in kinds.items():
        base = samples[(kind, "direct")]
        for path in ("direct", "rlp"):
            values = samples[(kind, path)]
            mean, p50 = statistics.mean(values), statistics.median(values)
            ratio = "–" if path == "direct" else f"{mean / statistics.mean(base):.2f}×"
            ratio_p50 = "–" if path == "direct" else f"{p50 / statistics.median(base):.2f}×"
            cpu = [account.per(f"{(kind, path)}", name, len(values)) for name in ("server", "rlp", "client")]
            out.append(f"| `{uri}`, {what}: {label[path]} | {len(values)} | {mean:.1f} | {p50:.1f} "
                       f"| {percentile(values, 0.99):.1f} | {ratio} | {ratio_p50} | {' | '.join(cpu)} |")
        ratio = statistics.mean(samples[(kind, "rlp")]) / statistics.mean(base)
        args.targets.append((f"`rlp serve --http` {size_label} `resources/read` at most 1.2× direct: {kind}",
                             f"{ratio:.2f}× (means), "
                             f"{statistics.median(samples[(kind, 'rlp')]) / statistics.median(base):.2f}× (p50)",
                             "yes" if ratio <= 1.2 else "no"))
    return out


def throughput_worker(conn, urls: dict[str, str], warmup: int) -> None:
    """One of the concurrent clients of the throughput series (a process of
    its own): a raw HTTP client session per series, opened and warmed up at
    start; then, for each ("run", series, start_at, seconds) it gets, calls
    `echo` one call after the other from start_at (time.monotonic) until
    start_at + seconds, and answers (latencies µs, when its last call ended,
    its CPU seconds)."""
    clients = {name: RawHttpClient(url) for name, url in urls.items()}

    def call(client: RawHttpClient) -> None:
        result = client.call()
        if [block.get("text") for block in result["content"]] != [ANSWER]:
            raise RuntimeError(f"unexpected answer: {result}")

    for client in clients.values():
        for _ in range(warmup):
            call(client)
    conn.send("ready")
    while (message := conn.recv()) is not None:
        name, start_at, seconds = message
        client = clients[name]
        time.sleep(max(0.0, start_at - time.monotonic()))
        cpu = time.process_time()
        latencies = []
        end = start_at + seconds
        while time.monotonic() < end:
            start = time.perf_counter()
            call(client)
            latencies.append((time.perf_counter() - start) * 1e6)
        conn.send((latencies, time.monotonic(), time.process_time() - cpu))
    for client in clients.values():
        client.close()


async def throughput_series(paths: Paths, args: argparse.Namespace) -> list[str]:
    """CLIENTS concurrent clients (processes) calling `echo` as fast as they
    can, directly and through one `rlp serve --http`, for both HTTP servers."""
    import multiprocessing

    rlp_env = clean_env(RUNLOOP_HOME=args.home)
    servers = {
        "everything (Node.js)": (args.url, args.bundle_http, args.http_server_pid),
        "Python SDK (`bench/bridge_resource_server.py`)": (args.resource_url, args.bundle_resources,
                                                           args.resource_server_pid),
    }
    gateways = {server: Background(paths.rlp_serve(bundle, "--http", "127.0.0.1:0"), rlp_env,
                                   paths.logs / f"throughput-rlp-{index}.stderr", listening_line="rlp serve: listening on ")
                for index, (server, (_, bundle, _)) in enumerate(servers.items())}
    urls = {}
    for server, (url, _, _) in servers.items():
        urls[(server, "direct")] = url
        urls[(server, "rlp")] = gateways[server].url
    names = {key: f"{key}" for key in urls}
    context = multiprocessing.get_context("spawn")
    workers = []
    samples: dict[tuple[str, str], list[float]] = {key: [] for key in urls}
    elapsed: dict[tuple[str, str], float] = {key: 0.0 for key in urls}
    account = CpuAccount({})
    try:
        for _ in range(args.clients):
            parent, child = context.Pipe()
            process = context.Process(target=throughput_worker, args=(child, {names[k]: u for k, u in urls.items()}, 10),
                                      daemon=True)
            process.start()
            workers.append((process, parent))
        for process, conn in workers:
            if not conn.poll(120) or conn.recv() != "ready":
                raise RuntimeError("a throughput client did not start (see its traceback above)")

        def run(key: tuple[str, str], seconds: float, record: bool) -> None:
            server_pid = servers[key[0]][2]
            account.pids = {"server": server_pid, "rlp": gateways[key[0]].proc.pid}
            start_at = time.monotonic() + 0.2
            for _, conn in workers:
                conn.send((names[key], start_at, seconds))
            time.sleep(max(0.0, start_at - time.monotonic()))
            before = account.snapshot()
            answers = [conn.recv() for _, conn in workers]
            after = account.snapshot()
            if record:
                for latencies, _, _ in answers:
                    samples[key].extend(latencies)
                elapsed[key] += max(ended for _, ended, _ in answers) - start_at
                account.add(f"{key}", before, after, clients=sum(cpu for _, _, cpu in answers))

        for key in urls:  # a warm-up second per series
            run(key, 1.0, False)
        for _ in range(args.rounds):
            for key in urls:
                run(key, args.throughput_seconds, True)
    finally:
        for process, conn in workers:
            try:
                conn.send(None)
            except OSError:
                pass
            process.join(10)
            if process.is_alive():
                process.kill()
        for gateway in gateways.values():
            gateway.stop()
    label = {"direct": "direct: clients → server (HTTP)", "rlp": "clients → one `rlp serve --http` → server (HTTP)"}
    out = [f"**Throughput** — {args.clients} concurrent clients (processes, a raw HTTP client and session each) "
           f"calling `echo` one call after the other, {args.rounds} interleaved rounds of {args.throughput_seconds:g} s "
           "per series after a warm-up second; CPU ms per call from `/proc` over the timed rounds (client: the "
           f"{args.clients} processes together):", "",
           f"| {args.clients} clients, `echo` | calls | calls/s | × direct | latency mean ms | p50 ms | p99 ms "
           "| CPU ms per call: server | rlp | clients |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for server in servers:
        rates = {}
        for path in ("direct", "rlp"):
            key = (server, path)
            values = samples[key]
            rates[path] = len(values) / elapsed[key]
            ratio = "–" if path == "direct" else f"{rates['rlp'] / rates['direct']:.2f}×"
            cpu = [account.per(f"{key}", name, len(values)) for name in ("server", "rlp", "clients")]
            out.append(f"| {server}: {label[path]} | {len(values)} | {rates[path]:.0f} | {ratio} "
                       f"| {statistics.mean(values) / 1e3:.2f} | {statistics.median(values) / 1e3:.2f} "
                       f"| {percentile(values, 0.99) / 1e3:.2f} | {' | '.join(cpu)} |")
        ratio = rates["rlp"] / rates["direct"]
        args.targets.append((f"`rlp serve --http` throughput, {args.clients} clients, at least 0.8× direct: {server}",
                             f"{rates['rlp']:.0f} against {rates['direct']:.0f} calls/s = {ratio:.2f}×",
                             "yes" if ratio >= 0.8 else "no"))
    return out


async def main_async(args: argparse.Namespace) -> None:
    paths = Paths(args)
    out: list[str] = []
    sections = [
        ("stdio", stdio_series),
        ("http", http_series),
        ("cold", cold),
        ("resources", resources_series),
        ("throughput", throughput_series),
    ]
    for name, series in sections:
        if name in args.only:
            out += await series(paths, args)
            out.append("")
    if args.targets:
        out += ["| target | measured | met |", "|---|---|---|"]
        out += [f"| {target} | {measured} | {met} |" for target, measured, met in args.targets]
    print("\n".join(out).rstrip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rlp", required=True)
    parser.add_argument("--node", required=True)
    parser.add_argument("--everything", required=True, help="EVERYTHING_JS")
    parser.add_argument("--url", required=True, help="the running HTTP everything server's endpoint")
    parser.add_argument("--bundle-stdio", required=True, help="the bundle bridging `echo` to a stdio server")
    parser.add_argument("--bundle-http", required=True, help="the bundle bridging `echo` to --url")
    parser.add_argument("--home", required=True, help="RUNLOOP_HOME of rlp")
    parser.add_argument("--home-off", required=True, help="RUNLOOP_HOME of rlp with the sandbox off")
    parser.add_argument("--python", required=True, help="the venv's python, for the FastMCP proxy")
    parser.add_argument("--fastmcp", required=True, help="bench/bridge_fastmcp.py")
    parser.add_argument("--logs", required=True)
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--resource-url", required=True, help="bench/bridge_resource_server.py's endpoint")
    parser.add_argument("--resource-server-pid", type=int, required=True, help="its process")
    parser.add_argument("--http-server-pid", type=int, required=True, help="the HTTP everything server's process")
    parser.add_argument("--bundle-resources", required=True, help="the bundle bridging --resource-url")
    parser.add_argument("--resource-size", type=int, default=1 << 20, help="bytes of each resource of the server")
    parser.add_argument("--resource-iterations", type=int, default=100)
    parser.add_argument("--resource-warmup", type=int, default=5)
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients of the throughput series")
    parser.add_argument("--throughput-seconds", type=float, default=5.0, help="seconds per series and round")
    parser.add_argument("--only", default="stdio,http,cold,resources,throughput",
                        help="comma-separated: stdio, http, cold, resources, throughput")
    args = parser.parse_args()
    args.only = set(args.only.split(","))
    args.targets = []
    anyio.run(main_async, args)


if __name__ == "__main__":
    main()
