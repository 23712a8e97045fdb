#!/usr/bin/env bash
# The MCP bridge, in one run (measurements: bench/bridge_bench.py): the
# everything server's `echo` called warm through `rlp serve` against the same
# call made directly to the same server and through a FastMCP proxy of it
# (bench/bridge_fastmcp.py, `create_proxy`), for a stdio server and a
# Streamable HTTP server; then the cold start of one `rlp tools call` of the
# bridged tool against the server's own start-up time; then, against a small
# MCP Python SDK server over Streamable HTTP (bench/bridge_resource_server.py),
# a 1 MiB `resources/read` through `rlp serve --http` against the same read
# sent directly, and the throughput of 8 concurrent clients of one
# `rlp serve --http` against the same load sent directly.
#
# Usage: bench/bridge.sh              (ITERATIONS=1000 WARMUP=50 ROUNDS=5 REPEATS=10
#                                      RESOURCE_ITERATIONS=100 CLIENTS=8 THROUGHPUT_SECONDS=5 by default)
#        UPDATE_DOCS=0 bench/bridge.sh  to print without rewriting docs/benchmarks.md
#        ONLY=stdio,http,cold,resources,throughput
#                                       a subset of the measurements (implies UPDATE_DOCS=0)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

iterations="${ITERATIONS:-1000}"
warmup="${WARMUP:-50}"
rounds="${ROUNDS:-5}"
repeats="${REPEATS:-10}"
resource_iterations="${RESOURCE_ITERATIONS:-100}"
clients="${CLIENTS:-8}"
throughput_seconds="${THROUGHPUT_SECONDS:-5}"
all="stdio,http,cold,resources,throughput"
only="${ONLY:-$all}"
[ "$only" = "$all" ] || export UPDATE_DOCS=0
disk_dir="${BENCH_DISK:-target/bench-bridge}"
tmpfs_dir="${BENCH_TMPFS:-/dev/shm}"
target_dir="${CARGO_TARGET_DIR:-target}"
shown_target="${target_dir#"$PWD"/}"
work="$disk_dir/work"
rm -rf "$work"
mkdir -p "$work/logs"
work="$(realpath "$work")"

cargo build --release --bin rlp >&2
# The build measured: the commit, and whether the sources had changes not
# yet committed. A copy, so that a rebuild meanwhile does not swap it.
build="commit $(git rev-parse --short HEAD)"
[ -z "$(git status --porcelain -- src Cargo.toml Cargo.lock)" ] || build="$build with uncommitted changes in src/"
cp "$target_dir/release/rlp" "$work/rlp"
rlp="$work/rlp"

# The servers: the pinned npm reference servers of the bridge tests.
servers_env="$(sh tests/bridge/setup.sh "$target_dir/bridge")"
set -a
# shellcheck disable=SC1090 # written by tests/bridge/setup.sh
source "$servers_env"
set +a

# The client's interpreter and the FastMCP proxy's: bench/serve.sh's venv and pins.
python="$(mcp_venv)"

# rlp's homes (ledger included) on tmpfs, as bench/serve.sh's latency series:
# one with the default sandbox, one with the sandbox off.
home="$tmpfs_dir/bench-bridge-home"
home_off="$tmpfs_dir/bench-bridge-home-off"
rm -rf "$home" "$home_off"
mkdir -p "$home" "$home_off"
printf '[runtime]\nsandbox = "off"\n' >"$home_off/config.toml"

# The HTTP server, on a free loopback port, for the whole run.
port="$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
url="http://127.0.0.1:$port/mcp"
PORT="$port" "$NODE" "$EVERYTHING_JS" streamableHttp </dev/null >"$work/logs/http-server.stdout" 2>"$work/logs/http-server.stderr" &
http_pid=$!
# The resource server (MCP Python SDK, Streamable HTTP), on a port it picks.
"$python" bench/bridge_resource_server.py --port-file "$work/resource-server.port" \
  </dev/null >"$work/logs/resource-server.stdout" 2>"$work/logs/resource-server.stderr" &
resource_pid=$!
cleanup() {
  kill "$http_pid" "$resource_pid" 2>/dev/null || true
  wait "$http_pid" "$resource_pid" 2>/dev/null || true
  rm -rf "$home" "$home_off"
}
trap cleanup EXIT
for _ in $(seq 100); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
  kill -0 "$http_pid" 2>/dev/null || { cat "$work/logs/http-server.stderr" >&2; exit 1; }
  sleep 0.1
done
for _ in $(seq 300); do
  [ -s "$work/resource-server.port" ] && break
  kill -0 "$resource_pid" 2>/dev/null || { cat "$work/logs/resource-server.stderr" >&2; exit 1; }
  sleep 0.1
done
resource_url="http://127.0.0.1:$(cat "$work/resource-server.port")/mcp"

# Two bundles made as a user makes them: scaffolded, then the server's tools
# imported with their pins, under the server's own names (--bare-ids), so the
# client calls `echo` whatever path it takes.
RUNLOOP_HOME="$home" "$rlp" agent scaffold bench_stdio --non-interactive --root "$work" >/dev/null
RUNLOOP_HOME="$home" "$rlp" tools import "$work/bench_stdio" --mcp everything --bare-ids \
  --cap "fs:$NODE_MODULES" --grant -- "$NODE" "$EVERYTHING_JS" >"$work/logs/import-stdio.out" 2>&1
RUNLOOP_HOME="$home" "$rlp" agent scaffold bench_http --non-interactive --root "$work" >/dev/null
RUNLOOP_HOME="$home" "$rlp" tools import "$work/bench_http" --mcp everything --bare-ids \
  --url "$url" --grant >"$work/logs/import-http.out" 2>&1
RUNLOOP_HOME="$home" "$rlp" agent scaffold bench_resources --non-interactive --root "$work" >/dev/null
RUNLOOP_HOME="$home" "$rlp" tools import "$work/bench_resources" --mcp bench --bare-ids \
  --url "$resource_url" --grant >"$work/logs/import-resources.out" 2>&1

load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
report="$("$python" bench/bridge_bench.py --rlp "$rlp" --node "$NODE" --everything "$EVERYTHING_JS" --url "$url" \
  --bundle-stdio "$work/bench_stdio" --bundle-http "$work/bench_http" --home "$home" --home-off "$home_off" \
  --python "$python" --fastmcp bench/bridge_fastmcp.py --logs "$work/logs" \
  --iterations "$iterations" --warmup "$warmup" --rounds "$rounds" --repeats "$repeats" \
  --resource-url "$resource_url" --resource-server-pid "$resource_pid" --http-server-pid "$http_pid" \
  --bundle-resources "$work/bench_resources" --resource-iterations "$resource_iterations" \
  --clients "$clients" --throughput-seconds "$throughput_seconds" --only "$only")"

server_version="$(grep -m1 '^server ' "$work/logs/import-stdio.out" | sed 's/^server [^:]*: //; s/, [0-9]* tools$//')"
cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)"
machine="$(nproc) cores${cpu:+, $cpu}, $(uname -sr), Node.js $("$NODE" --version), $("$python" --version)"

section="$(cat <<SECTION
## Bridge (\`bench/bridge.sh\`)

The everything reference server's \`echo\` (\`{"message": "hi"}\`) called
through \`rlp serve\`, whose bundle bridges it to the server, against the same
call made directly to the same server and through a
[FastMCP](https://pypi.org/project/fastmcp/) proxy of it
(\`fastmcp.server.create_proxy\`, \`bench/bridge_fastmcp.py\`), for a stdio
server and a Streamable HTTP server, in one run. Warm: one session per
series, calls one after the other, the series of a table interleaved round
by round. Cold: one \`rlp tools call\` process against the server's own
start-up, interleaved. The bundles are made as a user makes them
(\`rlp agent scaffold\`, then \`rlp tools import --mcp everything --bare-ids --grant\`:
pinned definitions, no confirmation for \`echo\`), unsigned working folders;
rlp's home and ledger on tmpfs ($tmpfs_dir), as in \`bench/serve.sh\`'s latency
rows. A stdio server runs in rlp's sandbox unless a row says the sandbox is
off; \`rlp serve --http\` listens on 127.0.0.1.

Resources and throughput: a small server made with the MCP Python SDK
(\`bench/bridge_resource_server.py\`: \`MCPServer\`, Streamable HTTP on
127.0.0.1, a 1 MiB binary and a 1 MiB text resource, and an \`echo\` tool
like the everything server's), imported as the others
(\`rlp tools import --mcp bench --bare-ids --url … --grant\`). One
\`resources/read\` through \`rlp serve --http\` (recorded as a
\`resource.read\` frame: the blob by digest, the text inline) against the
same read sent to the server directly, by the same raw client, interleaved.
Throughput: $clients client processes at once, each with its own session,
calling \`echo\` one call after the other for a fixed time, all on one
\`rlp serve --http\` or all directly on the server, for the everything
server and the Python one, interleaved; the clients, rlp and the server
share the machine's $(nproc) cores.

Every series uses the same client: the MCP Python SDK's \`Client\`
(\`mcp==2.3.0\`, the initialize handshake, 2025-11-25), in one process. The
SDK's own cost per call is in every row alike, so the differences are the
paths; it also sets the floor of what a single call can show (the direct
rows). A raw client without the SDK (newline-delimited JSON-RPC on stdio,
Python's \`http.client\` for HTTP) times the direct and rlp series again.
FastMCP's proxy runs two ways: as \`create_proxy(transport)\` makes it (a
fresh backend session for each request: FastMCP's default and its
documentation's example) and with a connected client handed to
\`create_proxy\` (one shared session, its fastest setting).

Reproduce: \`bench/bridge.sh\` (\`ITERATIONS=$iterations WARMUP=$warmup ROUNDS=$rounds REPEATS=$repeats\`
\`RESOURCE_ITERATIONS=$resource_iterations CLIENTS=$clients THROUGHPUT_SECONDS=$throughput_seconds\`;
builds with \`cargo build --release\` ($build), installs the servers with
\`tests/bridge/setup.sh $shown_target/bridge\` and \`mcp==2.3.0 fastmcp==4.2.3\` into \`bench/work/serve-venv\`,
then runs \`bench/bridge_bench.py\` with a copy of \`$shown_target/release/rlp\`).

Machine: $machine; server: $server_version. Run: $(date -u +%Y-%m-%d), load average at the start: $load_start, at the end: $(cut -d' ' -f1-3 /proc/loadavg).

$report

Targets (the last table, from the means above): \`rlp serve\` under 0.5 ms per
call above the direct call, for a stdio and an HTTP server; \`rlp serve\`
faster per call than a FastMCP proxy of the same server measured the same way;
a 1 MiB \`resources/read\` through \`rlp serve --http\` at most 1.2× the direct
read (means); $clients clients of one \`rlp serve --http\` at least 0.8× the calls/s
of the same clients on the server directly.

How to read the warm rows: the direct rows are the client's floor — most of
a direct call is the Python client itself (compare the SDK and the raw direct
rows), and it is in every row alike. An rlp row's "above direct" is the
whole gateway: a second JSON-RPC hop (parse, serialise, one more pipe or
socket) and rlp's pipeline for every call — trust, exposure, input
validation, the pin check, the call and result frames durable in the ledger
before the answer — none of which a FastMCP proxy does. The stdio-front rows
of the HTTP table do not compare with its direct row (their client leg is
stdio, cheaper for the SDK than HTTP): rlp's share there is that row minus
the stdio direct row minus one raw HTTP round trip.

Where rlp's time goes in a warm call (\`strace\` and \`perf record\` of
\`rlp serve\` under the raw clients, and the sources): about 1 ms of CPU per
call in rlp (the throughput table's rlp column) — trust, exposure,
validation, the pin check, two durable ledger group commits (two fsyncs) per
call — against about 0.25 ms in the server, and a call crosses several
threads (the MCP front, the server's session, the ledger writer) on $(nproc) cores.
A server's progress and log messages reach the waiting call as rlp's client
transport receives them, in order, before the answer
(src/runtime/mcp/ordered.rs), so no call waits for notifications that might
still come (a fixed 10 ms wait after every answer, between commits 57b3414
and e8a9cbf, had put rlp behind FastMCP). For an HTTP server rlp opens a new TCP connection for every call
(socket, connect, shutdown after the answer), which costs the server CPU too
(the everything server's column in the throughput table, through rlp against
direct).

Throughput: $clients clients calling one call after the other make about
$clients calls per call latency. A call through rlp costs about 3 ms of CPU in all
(server + rlp + clients columns) against about 1.5 ms direct, and the
clients, rlp and the server share $(nproc) cores, so a fast server's direct
rate is out of reach here unless rlp's and the server's CPU per call fall (a
connection kept between calls would take back part of the server's extra);
against a server that spends more per call itself (the Python SDK's), rlp's
share matters less.

Resources: rlp passes a read on store-and-forward — it reads the server's
whole answer, records it, and serialises it again before its client gets a
byte — so its CPU per read (the rlp column) adds to the read's latency
almost one for one. \`perf record\` of \`rlp serve --http\` over 40 reads of the
blob: about 40% of rlp's CPU goes to reading the server's SSE answer in
rmcp's Streamable HTTP client (rmcp 3.11's \`SseEventSizeLimiter::observe\`
walks the 1.4 MB event a byte at a time, about 24% on its own, and
\`sse-stream\`'s line parser scans it again, 9–17%); about 13% to writing
the answer out again for the client (serde_json escaping the 1.4 MB string);
about 5% to parsing it; about 5% to \`IndexMap\` clones of the contents
(\`recorded_contents\`, \`Scrubber::scrubbed\`); 3% to the BLAKE3 digest that
stands for the blob in the frame; most of the rest to copies between these.
For the text, recorded inline, the ledger append is about 30% of rlp's CPU
(\`canonical::push_json_string\` encoding the 1 MiB string, about 10%; the
SQLite insert, its WAL and checkpoints, about 16%). Within 1.2× of the
direct read, rlp may add about 6 ms to the blob's read here: less than half
its CPU per read now.

The raw HTTP client sets \`TCP_NODELAY\`, as HTTP clients do (httpx, curl,
hyper): \`http.client\` writes a request's head and body separately, and with
Nagle on the body waits for the server's delayed acknowledgement. The 40 ms
stall of \`rlp serve --http\` in the previous run (its own sockets without
\`TCP_NODELAY\`) is gone. The bench's own Python servers (the FastMCP proxy
over HTTP and \`bench/bridge_resource_server.py\`) listen on a socket made with
\`IPPROTO_TCP\` named, without which asyncio leaves Nagle on for the sockets
it accepts and ends every SSE response 40 ms late; the FastMCP HTTP rows of
the previous run were measured without that.

Cold: \`rlp tools call\` prints its answer within the spread of the server's own
start-up as the SDK client measures it — both are Node starting the server,
about 0.4 s here; rlp's own start, the sandbox, the handshake, \`tools/list\`
for the pin check and the ledger fit inside that spread. It then stops the
server as a direct client does (stdin closed, exit awaited), and the
everything server takes about 0.35 s to exit once its stdin closes: the
"process exited" rows. Against a running HTTP server, one \`rlp tools call\`
process answers sooner than the SDK client connects, initialises and calls
from its already running process.
SECTION
)"

echo "$section"

update_doc_section "## Bridge (\`bench/bridge.sh\`)" "$section"
