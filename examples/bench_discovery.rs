//! What deferred tool discovery saves on a bundle of real tool definitions
//! (see bench/discovery.sh): the initial tool list of `rlp serve --expose all`
//! against `--expose core`, and for each task of a task list the extra
//! exchanges discovery needs under `core` (`rlp.search_tools`,
//! `rlp.describe_tools`, then the call through `rlp.call_tool` instead of a
//! direct `tools/call`).
//!
//! Everything is counted on the JSON the model's host exchanges with the
//! server, in compact form: the `params` of each request and the `result` of
//! each response (the JSON-RPC envelope — `jsonrpc`, `id`, `method` — is
//! framing no model sees). Tokens are OpenAI's o200k_base encoding
//! (`tiktoken-rs`, whose BPE table is built in).
//!
//! Usage: `bench_discovery --rlp RLP --bundle DIR --tasks FILE --published FILE`
//! (`--published`: the servers' own definitions, bench/discovery/tools.json,
//! measured as a reference row). The home is `$RUNLOOP_HOME`. Prints Markdown
//! on stdout.

// An example program: it prints what it finds and runs what it measures.
#![allow(unreachable_pub, clippy::print_stdout, clippy::print_stderr, clippy::disallowed_methods)]

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde::Deserialize;
use serde_json::{Value, json};
use tiktoken_rs::CoreBPE;

/// Command-line arguments.
struct Args {
    rlp: PathBuf,
    bundle: PathBuf,
    tasks: PathBuf,
    published: PathBuf,
}

/// The arguments, or the usage line.
fn parse_args() -> Result<Args, String> {
    const USAGE: &str = "usage: bench_discovery --rlp RLP --bundle DIR --tasks FILE --published FILE";
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let (mut rlp, mut bundle, mut tasks, mut published) = (None, None, None, None);
    for pair in argv.chunks(2) {
        let [flag, value] = pair else { return Err(USAGE.into()) };
        let slot = match flag.as_str() {
            "--rlp" => &mut rlp,
            "--bundle" => &mut bundle,
            "--tasks" => &mut tasks,
            "--published" => &mut published,
            _ => return Err(USAGE.into()),
        };
        *slot = Some(PathBuf::from(value));
    }
    match (rlp, bundle, tasks, published) {
        (Some(rlp), Some(bundle), Some(tasks), Some(published)) => Ok(Args { rlp, bundle, tasks, published }),
        _ => Err(USAGE.into()),
    }
}

/// One task of bench/discovery/tasks.json.
#[derive(Deserialize)]
struct Task {
    /// What the user asks for, in words.
    task: String,
    /// The `rlp.search_tools` arguments the model would send, in order: a
    /// search that misses is followed by another.
    searches: Vec<Value>,
    /// The ids it would then pass to `rlp.describe_tools`.
    describe: Vec<String>,
    /// The call that does the task.
    call: Call,
}

/// The tool call that does a task.
#[derive(Deserialize)]
struct Call {
    id: String,
    arguments: Value,
}

/// The task list file.
#[derive(Deserialize)]
struct TaskList {
    tasks: Vec<Task>,
}

/// Size of some JSON as the model's context would hold it.
#[derive(Clone, Copy, Default)]
struct Cost {
    bytes: usize,
    tokens: usize,
}

impl std::ops::Add for Cost {
    type Output = Cost;
    fn add(self, other: Cost) -> Cost {
        Cost { bytes: self.bytes + other.bytes, tokens: self.tokens + other.tokens }
    }
}

/// Measures JSON values in bytes and o200k tokens.
struct Meter {
    bpe: CoreBPE,
}

impl Meter {
    /// The o200k_base tokenizer, from the table built into `tiktoken-rs`.
    fn new() -> Result<Meter, String> {
        tiktoken_rs::o200k_base().map(|bpe| Meter { bpe }).map_err(|e| format!("o200k_base: {e}"))
    }

    /// The cost of `value` written as compact JSON.
    fn cost(&self, value: &Value) -> Cost {
        let text = value.to_string();
        Cost { bytes: text.len(), tokens: self.bpe.encode_ordinary(&text).len() }
    }
}

/// One request and its answer, measured.
struct Exchange {
    result: Value,
    cost: Cost,
}

/// An `rlp serve` child spoken to over stdio, one request at a time.
struct Session {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Session {
    /// Starts `rlp serve BUNDLE --expose EXPOSE` and completes the 2025-11-25
    /// handshake.
    fn start(args: &Args, expose: &str) -> Result<Session, String> {
        let mut child = Command::new(&args.rlp)
            .arg("serve")
            .arg(&args.bundle)
            .args(["--expose", expose])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("spawning {}: {e}", args.rlp.display()))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("rlp serve: no stdio pipes".into());
        };
        let mut session = Session { child, stdin, stdout: BufReader::new(stdout), next_id: 1 };
        let client = json!({"name": "bench_discovery", "version": "1"});
        session.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client}),
        )?;
        session.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(session)
    }

    /// Writes one message line.
    fn send(&mut self, message: &Value) -> Result<(), String> {
        writeln!(self.stdin, "{message}")
            .and_then(|()| self.stdin.flush())
            .map_err(|e| format!("writing to rlp serve: {e}"))
    }

    /// Sends `method` with `params` and returns the `result` of its answer,
    /// skipping notifications; a JSON-RPC error is an error.
    fn request(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        let mut line = String::new();
        loop {
            line.clear();
            let read = self.stdout.read_line(&mut line).map_err(|e| format!("reading from rlp serve: {e}"))?;
            if read == 0 {
                return Err(format!("rlp serve closed its output before answering {method}"));
            }
            let mut message: Value =
                serde_json::from_str(&line).map_err(|e| format!("rlp serve wrote non-JSON ({e}): {line}"))?;
            if message.get("id") != Some(&json!(id)) {
                continue;
            }
            if let Some(error) = message.get("error") {
                return Err(format!("{method} failed: {error}"));
            }
            return message
                .get_mut("result")
                .map(Value::take)
                .ok_or_else(|| format!("{method}: answer without result"));
        }
    }

    /// Sends `method` with `params` and measures both.
    fn exchange(&mut self, meter: &Meter, method: &str, params: Value) -> Result<Exchange, String> {
        let sent = meter.cost(&params);
        let result = self.request(method, params)?;
        let cost = sent + meter.cost(&result);
        Ok(Exchange { result, cost })
    }

    /// `tools/call` of `name`, measured; a result with `isError` is an error.
    fn call(&mut self, meter: &Meter, name: &str, arguments: Value) -> Result<Exchange, String> {
        let exchange = self.exchange(meter, "tools/call", json!({"name": name, "arguments": arguments}))?;
        if exchange.result.get("isError") == Some(&json!(true)) {
            return Err(format!("{name} failed: {}", exchange.result));
        }
        Ok(exchange)
    }

    /// The `tools/list` result (`{"tools": [...]}`), which must come in one page.
    fn list(&mut self) -> Result<Value, String> {
        let result = self.request("tools/list", json!({}))?;
        if result.get("nextCursor").is_some_and(|cursor| !cursor.is_null()) {
            return Err("tools/list is paginated; this benchmark measures one page".into());
        }
        Ok(result)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The measurements of one task under `--expose core`.
struct TaskRow {
    /// Where the called tool ranks in each search's results (1-based).
    ranks: Vec<Option<usize>>,
    /// All the searches together.
    search: Cost,
    describe: Cost,
    /// Tokens the call through `rlp.call_tool` costs beyond the direct call.
    call_extra: isize,
    /// Discovery requests made (searches, describe).
    round_trips: usize,
}

impl TaskRow {
    /// Tokens this task spends on discovery.
    fn extra_tokens(&self) -> isize {
        (self.search.tokens + self.describe.tokens) as isize + self.call_extra
    }
}

/// A call result without its `_meta` (which names this call's own
/// invocation and trace), for comparing two calls' results.
fn without_meta(result: &Value) -> Value {
    let mut result = result.clone();
    if let Some(object) = result.as_object_mut() {
        object.remove("_meta");
    }
    result
}

/// The ids `rlp.search_tools` returned, in rank order.
fn found_ids(result: &Value) -> Vec<&str> {
    let tools = result.pointer("/structuredContent/tools").and_then(Value::as_array);
    tools.into_iter().flatten().filter_map(|tool| tool.get("id").and_then(Value::as_str)).collect()
}

/// Runs one task's discovery and call under core; `direct` is the same
/// call's exchange under all.
fn run_task(core: &mut Session, meter: &Meter, task: &Task, direct: &Exchange) -> Result<TaskRow, String> {
    let mut ranks = Vec::new();
    let mut search = Cost::default();
    for arguments in &task.searches {
        let found = core.call(meter, "rlp.search_tools", arguments.clone())?;
        ranks.push(found_ids(&found.result).iter().position(|id| *id == task.call.id).map(|index| index + 1));
        search = search + found.cost;
    }
    let describe = core.call(meter, "rlp.describe_tools", json!({"ids": task.describe}))?;
    let unknown = describe.result.pointer("/structuredContent/unknown").and_then(Value::as_array);
    if unknown.is_some_and(|ids| !ids.is_empty()) {
        return Err(format!("{}: rlp.describe_tools does not know {}", task.task, describe.result));
    }
    let arguments = json!({"id": task.call.id, "arguments": task.call.arguments});
    let through = core.call(meter, "rlp.call_tool", arguments)?;
    if without_meta(&through.result) != without_meta(&direct.result) {
        return Err(format!(
            "{}: rlp.call_tool answered {} where the direct call answered {}",
            task.call.id, through.result, direct.result
        ));
    }
    Ok(TaskRow {
        round_trips: ranks.len() + 1,
        ranks,
        search,
        describe: describe.cost,
        call_extra: through.cost.tokens as isize - direct.cost.tokens as isize,
    })
}

/// `n` with thousands separators.
fn grouped(n: isize) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    if n < 0 { format!("−{out}") } else { out }
}

/// A cost as "bytes B / tokens".
fn shown(cost: Cost) -> String {
    format!("{} B / {}", grouped(cost.bytes as isize), grouped(cost.tokens as isize))
}

/// Number of tools in a `{"tools": [...]}` value.
fn tool_count(list: &Value) -> usize {
    list.get("tools").and_then(Value::as_array).map_or(0, Vec::len)
}

/// The servers' own definitions as one `{"tools": [...]}` list.
fn published_list(path: &PathBuf) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let file: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let servers = file.get("servers").and_then(Value::as_array).ok_or("published file without servers")?;
    let tools: Vec<Value> =
        servers.iter().filter_map(|server| server.get("tools").and_then(Value::as_array)).flatten().cloned().collect();
    Ok(json!({ "tools": tools }))
}

fn run() -> Result<(), String> {
    let args = parse_args()?;
    let meter = Meter::new()?;
    let text = std::fs::read_to_string(&args.tasks).map_err(|e| format!("{}: {e}", args.tasks.display()))?;
    let tasks: TaskList = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", args.tasks.display()))?;
    let published = published_list(&args.published)?;

    let mut all = Session::start(&args, "all")?;
    let all_list = all.list()?;
    let direct: Vec<Exchange> = tasks
        .tasks
        .iter()
        .map(|task| all.call(&meter, &task.call.id, task.call.arguments.clone()))
        .collect::<Result<_, _>>()?;
    drop(all);

    let mut core = Session::start(&args, "core")?;
    let core_list = core.list()?;
    let rows: Vec<TaskRow> = tasks
        .tasks
        .iter()
        .zip(&direct)
        .map(|(task, direct)| run_task(&mut core, &meter, task, direct))
        .collect::<Result<_, _>>()?;
    drop(core);

    let (all_cost, core_cost) = (meter.cost(&all_list), meter.cost(&core_list));
    print_lists(&meter, &published, &all_list, &core_list);
    let saved_up_front = all_cost.tokens as isize - core_cost.tokens as isize;
    print_tasks(&tasks.tasks, &rows, saved_up_front);
    print_summary(&rows, all_cost, core_cost);
    Ok(())
}

/// The table of initial tool lists.
fn print_lists(meter: &Meter, published: &Value, all: &Value, core: &Value) {
    println!("| initial tool list | tools | bytes | o200k tokens |");
    println!("|---|---:|---:|---:|");
    for (name, list) in [
        ("as the six servers publish it (reference)", published),
        ("`rlp serve --expose all`", all),
        ("`rlp serve --expose core`", core),
    ] {
        let cost = meter.cost(list);
        println!(
            "| {name} | {} | {} | {} |",
            tool_count(list),
            grouped(cost.bytes as isize),
            grouped(cost.tokens as isize)
        );
    }
    println!();
}

/// The table of tasks: what discovery costs each, and the net saving.
fn print_tasks(tasks: &[Task], rows: &[TaskRow], saved_up_front: isize) {
    println!(
        "| task | tool called | rank in each search | extra round trips | searches (req + resp) | describe (req + resp) | call via rlp.call_tool, tokens beyond direct | extra tokens | net saving, tokens |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for (task, row) in tasks.iter().zip(rows) {
        let ranks: Vec<String> =
            row.ranks.iter().map(|rank| rank.map_or("none".into(), |rank| rank.to_string())).collect();
        let rank = ranks.join(" → ");
        println!(
            "| {} | `{}` | {rank} | {} | {} | {} | {} | {} | {} |",
            task.task,
            task.call.id,
            row.round_trips,
            shown(row.search),
            shown(row.describe),
            grouped(row.call_extra),
            grouped(row.extra_tokens()),
            grouped(saved_up_front - row.extra_tokens()),
        );
    }
    println!();
}

/// The summary line: the ratios against the targets.
fn print_summary(rows: &[TaskRow], all: Cost, core: Cost) {
    let saved_up_front = all.tokens as isize - core.tokens as isize;
    let fewer = 100.0 * saved_up_front as f64 / all.tokens as f64;
    let net_positive = rows.iter().filter(|row| saved_up_front > row.extra_tokens()).count();
    let first_hit = rows.iter().filter(|row| row.ranks.first().is_some_and(Option::is_some)).count();
    let last_hit = rows.iter().filter(|row| row.ranks.last().is_some_and(Option::is_some)).count();
    let tasks = rows.len().max(1) as f64;
    let mean_extra = rows.iter().map(TaskRow::extra_tokens).sum::<isize>() as f64 / tasks;
    let mean_trips = rows.iter().map(|row| row.round_trips).sum::<usize>() as f64 / tasks;
    println!(
        "Summary: `--expose core` lists {fewer:.1}% fewer tokens up front ({} → {}; target ≥ 85%); \
         net saving on {net_positive} of {} tasks (target ≥ 8). The first search found the called tool \
         for {first_hit} of {} tasks, the last for {last_hit}. Discovery costs {} tokens and {mean_trips:.1} \
         round trips per task on average: a session breaks even after {:.0} tasks that each discover a tool.",
        grouped(all.tokens as isize),
        grouped(core.tokens as isize),
        rows.len(),
        rows.len(),
        grouped(mean_extra.round() as isize),
        saved_up_front as f64 / mean_extra,
    );
}

fn main() {
    if let Err(message) = run() {
        eprintln!("bench_discovery: {message}");
        std::process::exit(1);
    }
}
