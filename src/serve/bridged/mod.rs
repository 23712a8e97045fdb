//! What `rlp serve` passes on of its bundle's MCP servers besides their
//! tools: resources (listed, read, subscribed to), resource templates,
//! prompts and completions, each from the server it belongs to
//! ([`routes`]), each recorded in the ledger as a frame of its own kind
//! before the client gets the answer ([`crate::event::ServerExchangePayload`]),
//! and the servers' notifications that belong to no call ([`notices`]).
//!
//! Governed as the servers' tools are: a server's resources and prompts are
//! offered only when the effective policy grants every capability the
//! server needs and the trust policy admits the bundle, and the operator's
//! allow/deny list (`[agents.<agent>.tools]`, `--tools`) applies to their
//! names as served.

pub(crate) mod notices;
pub(crate) mod routes;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use rmcp::ErrorData;
use rmcp::model::ErrorCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::event::{EventKind, PAYLOAD_VERSION, ServerExchangePayload};
use crate::runtime::Runtime;
use crate::runtime::exposure::decide_listed;
use crate::runtime::mcp::content;
use crate::runtime::mcp::forward::{Answered, Relay, ServerError};
use crate::serve::bridged::routes::{Known, Offered};
use crate::serve::handler::Shared;

/// One of the lists a client may ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum List {
    /// `resources/list`.
    Resources,
    /// `resources/templates/list`.
    Templates,
    /// `prompts/list`.
    Prompts,
}

impl List {
    /// The method, the member its items are in, the capability a server
    /// offers it under, and the frame kind it is recorded as.
    fn parts(self) -> (&'static str, &'static str, &'static str, EventKind) {
        match self {
            List::Resources => ("resources/list", "resources", "resources", EventKind::ResourceList),
            List::Templates => {
                ("resources/templates/list", "resourceTemplates", "resources", EventKind::ResourceTemplates)
            }
            List::Prompts => ("prompts/list", "prompts", "prompts", EventKind::PromptList),
        }
    }
}

/// The bridged servers a server offers, and what their lists said.
#[derive(Debug)]
pub(crate) struct Bridged {
    /// The servers whose resources and prompts are offered.
    pub(crate) servers: Vec<Offered>,
    known: Mutex<Known>,
    /// Who subscribed to which resource, and who hears of list changes.
    pub(crate) listeners: notices::Listeners,
}

impl Bridged {
    /// The servers of `runtime` the effective policy exposes.
    pub(crate) fn of(runtime: &Runtime) -> Bridged {
        let tools: Vec<crate::bundle::tools::Tool> =
            runtime.tool_ids().iter().filter_map(|id| runtime.tool(id)).cloned().collect();
        let servers = runtime.exposed_servers().into_iter().map(|server| Offered::new(server, &tools)).collect();
        Bridged { servers, known: Mutex::default(), listeners: notices::Listeners::default() }
    }

    /// Whether any server's resources and prompts are offered.
    pub(crate) fn any(&self) -> bool {
        !self.servers.is_empty()
    }

    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Forgets what `lists` of server `index` said.
    pub(crate) fn forget(&self, index: usize, lists: &[List]) {
        let mut known = self.known();
        for list in lists {
            known.forget(index, *list);
        }
    }

    /// The index of the server named `name`.
    pub(crate) fn index(&self, name: &str) -> Option<usize> {
        self.servers.iter().position(|server| server.name == name)
    }
}

/// Whether the operator's lists let the name served `served` through.
fn listed(runtime: &Runtime, served: &str) -> bool {
    decide_listed(runtime.tool_list(), served).is_none_or(|d| d.decision == crate::event::Decision::Allow)
}

/// Where a client's request for a bridged server comes from: the trace it
/// is recorded in, and who answers what the server asks meanwhile.
pub(crate) struct Origin {
    /// The trace of the request's frames.
    pub(crate) trace: Uuid,
    /// The client, as it answers the server's questions.
    pub(crate) relay: Relay,
}

/// One request to a server, on a blocking thread within the call limit:
/// its answer, what the server asked meanwhile, and how long it took.
async fn ask(
    shared: &Arc<Shared>,
    origin: &Origin,
    server: &str,
    method: &'static str,
    params: Value,
) -> Result<(Answered, u64), ErrorData> {
    let permit = Arc::clone(&shared.calls)
        .acquire_owned()
        .await
        .map_err(|_| ErrorData::internal_error("the server is shutting down", None))?;
    let runtime = Arc::clone(&shared.runtime);
    let server = server.to_string();
    let relay = origin.relay.clone();
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let answer = runtime.ask_server(&server, method, params, &relay);
        drop(permit);
        (answer, u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX))
    })
    .await
    .map_err(|e| ErrorData::internal_error(format!("the request failed: {e}"), None))
}

/// Records what passed (`answer` as the client gets it) as a frame of
/// `kind` in `trace`; a frame that cannot be recorded fails the request.
async fn record(
    shared: &Arc<Shared>,
    trace: Uuid,
    kind: EventKind,
    exchange: ServerExchangePayload,
) -> Result<(), ErrorData> {
    let runtime = Arc::clone(&shared.runtime);
    let recorded = tokio::task::spawn_blocking(move || runtime.record_frame(trace, kind, &exchange)).await;
    match recorded {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(ErrorData::internal_error(format!("cannot record the request: {e}"), None)),
        Err(e) => Err(ErrorData::internal_error(format!("cannot record the request: {e}"), None)),
    }
}

/// The frame of one exchange: `answer` as recorded, and what the server
/// asked meanwhile.
fn exchange(
    server: &str,
    method: &str,
    request: Value,
    answer: &Result<Value, ServerError>,
    asked: Vec<Value>,
    ms: u64,
) -> ServerExchangePayload {
    ServerExchangePayload {
        v: PAYLOAD_VERSION,
        server: server.to_string(),
        method: method.to_string(),
        request,
        response: answer.as_ref().ok().cloned(),
        error: answer.as_ref().err().map(|e| e.message.clone()),
        asked,
        duration_ms: Some(ms),
    }
}

/// A server's error as the client gets it: its own code and message.
fn client_error(error: ServerError) -> ErrorData {
    match error.code {
        Some(code) => ErrorData::new(ErrorCode(code), error.message, None),
        None => ErrorData::internal_error(error.message, None),
    }
}

/// The items of `list` of every offered server that offers it, names
/// served under each server's prefix and through the operator's lists;
/// each server's part recorded. A server that fails is left out (its
/// failure recorded and told on stderr), so one broken server does not
/// hide the others.
pub(crate) async fn list(shared: &Arc<Shared>, origin: &Origin, list: List) -> Result<Vec<Value>, ErrorData> {
    let (method, member, capability, kind) = list.parts();
    let bridged = &shared.bridged;
    let mut all = Vec::new();
    for (index, server) in bridged.servers.iter().enumerate() {
        let runtime = Arc::clone(&shared.runtime);
        let name = server.name.clone();
        let offers = tokio::task::spawn_blocking(move || runtime.server_offers(&name, capability)).await;
        match offers {
            Ok(Ok(true)) => {}
            Ok(Ok(false)) => continue,
            Ok(Err(error)) => {
                crate::notice::note(&format!("rlp serve: {method}: {}", error.message));
                continue;
            }
            Err(e) => return Err(ErrorData::internal_error(format!("the request failed: {e}"), None)),
        }
        let (Answered { answer, asked }, ms) = ask(shared, origin, &server.name, method, json!({})).await?;
        let answer = answer.map(|mut answer| {
            let items = answer.get_mut(member).map(Value::take).unwrap_or(Value::Array(Vec::new()));
            let served = served_items(shared, bridged, index, list, items);
            json!({ member: served })
        });
        let request = json!({});
        record(shared, origin.trace, kind, exchange(&server.name, method, request, &answer, asked, ms)).await?;
        match answer {
            Ok(mut answer) => {
                if let Some(Value::Array(items)) = answer.get_mut(member).map(Value::take) {
                    all.extend(items);
                }
            }
            Err(error) => {
                crate::notice::note(&format!("rlp serve: {method} of server `{}`: {}", server.name, error.message))
            }
        }
    }
    Ok(all)
}

/// `items` of server `index`'s `list`, named as served, those the
/// operator's lists let through; where each is, remembered (hidden ones
/// too, so that asking for one again needs no list).
fn served_items(shared: &Shared, bridged: &Bridged, index: usize, list: List, items: Value) -> Vec<Value> {
    let server = &bridged.servers[index];
    let mut known = bridged.known();
    known.forget(index, list);
    known.read.insert(list);
    let Value::Array(items) = items else { return Vec::new() };
    items
        .into_iter()
        .filter_map(|mut item| {
            let own = item.get("name").and_then(Value::as_str)?.to_string();
            let served = server.served(&own);
            match list {
                List::Resources => {
                    let uri = item.get("uri").and_then(Value::as_str)?.to_string();
                    known.resources.insert(uri, (index, served.clone()));
                }
                List::Templates => {
                    let template = item.get("uriTemplate").and_then(Value::as_str)?.to_string();
                    known.templates.push((template, index, served.clone()));
                }
                List::Prompts => {
                    known.prompts.insert(served.clone(), index);
                }
            }
            if !listed(&shared.runtime, &served) {
                return None;
            }
            item["name"] = Value::String(served);
            Some(item)
        })
        .collect()
}

/// The server a resource URI belongs to, listing the servers' resources and
/// templates first when they were not yet; `None` when none is found or the
/// operator's lists keep the resource from the client.
async fn route_uri(shared: &Arc<Shared>, origin: &Origin, uri: &str) -> Result<Option<usize>, ErrorData> {
    let bridged = &shared.bridged;
    // The servers' lists say where a URI is, and under which name the
    // operator's lists judge it; with one server and no list of the
    // operator's to keep to, the URI can only be that server's.
    let sole = bridged.servers.len() == 1 && shared.runtime.tool_list().is_empty();
    let unread = !bridged.known().read.contains(&List::Resources);
    if bridged.known().resource(uri).is_none() && !sole && unread {
        list(shared, origin, List::Resources).await?;
        list(shared, origin, List::Templates).await?;
    }
    Ok(match bridged.known().resource(uri) {
        Some((index, served)) => listed(&shared.runtime, &served).then_some(index),
        None if sole => Some(0),
        None => None,
    })
}

/// The server of prompt `served` and its own name there.
async fn route_prompt(
    shared: &Arc<Shared>,
    origin: &Origin,
    served: &str,
) -> Result<Option<(usize, String)>, ErrorData> {
    let bridged = &shared.bridged;
    if !bridged.known().read.contains(&List::Prompts) {
        list(shared, origin, List::Prompts).await?;
    }
    let index = bridged.known().prompts.get(served).copied();
    Ok(index
        .filter(|_| listed(&shared.runtime, served))
        .and_then(|index| Some((index, bridged.servers[index].own(served)?.to_string()))))
}

/// The server resource `uri` belongs to; an error when none offers it.
pub(crate) async fn route(shared: &Arc<Shared>, origin: &Origin, uri: &str) -> Result<usize, ErrorData> {
    route_uri(shared, origin, uri).await?.ok_or_else(|| {
        ErrorData::resource_not_found(
            format!("no resource `{uri}` is offered: list them with resources/list and resources/templates/list"),
            None,
        )
    })
}

/// `resources/read`, `resources/subscribe` or `resources/unsubscribe` of
/// `uri` by server `index`: the server's answer, recorded (a read's binary
/// contents past the bound by digest).
pub(crate) async fn resource_at(
    shared: &Arc<Shared>,
    origin: &Origin,
    index: usize,
    method: &'static str,
    uri: &str,
) -> Result<Value, ErrorData> {
    let server = shared.bridged.servers[index].name.clone();
    let request = json!({ "uri": uri });
    let (Answered { answer, asked }, ms) = ask(shared, origin, &server, method, request.clone()).await?;
    let kind = if method == "resources/read" { EventKind::ResourceRead } else { EventKind::ResourceSubscribe };
    let recorded = answer.as_ref().map(content::recorded_contents).map_err(Clone::clone);
    record(shared, origin.trace, kind, exchange(&server, method, request, &recorded, asked, ms)).await?;
    answer.map_err(client_error)
}

/// `prompts/get` of the prompt served as `name`.
pub(crate) async fn prompt(
    shared: &Arc<Shared>,
    origin: &Origin,
    name: &str,
    arguments: Option<Value>,
) -> Result<Value, ErrorData> {
    let Some((index, own)) = route_prompt(shared, origin, name).await? else {
        return Err(ErrorData::invalid_params(
            format!("no prompt `{name}` is offered: list them with prompts/list"),
            None,
        ));
    };
    let server = shared.bridged.servers[index].name.clone();
    let (mut params, mut request) = (json!({ "name": own }), json!({ "name": name }));
    if let Some(arguments) = arguments {
        params["arguments"] = arguments.clone();
        request["arguments"] = arguments;
    }
    let (Answered { answer, asked }, ms) = ask(shared, origin, &server, "prompts/get", params).await?;
    let recorded = answer.as_ref().map(content::recorded_messages).map_err(Clone::clone);
    let frame = exchange(&server, "prompts/get", request, &recorded, asked, ms);
    record(shared, origin.trace, EventKind::PromptGet, frame).await?;
    answer.map_err(client_error)
}

/// `completion/complete` of a prompt's (by its name served) or a resource
/// template's (by URI) argument.
pub(crate) async fn complete(shared: &Arc<Shared>, origin: &Origin, request: Value) -> Result<Value, ErrorData> {
    let reference = request.get("ref").cloned().unwrap_or(Value::Null);
    let (index, mut params) = match reference.get("type").and_then(Value::as_str) {
        Some("ref/prompt") => {
            let served = reference.get("name").and_then(Value::as_str).unwrap_or_default();
            let Some((index, own)) = route_prompt(shared, origin, served).await? else {
                return Err(ErrorData::invalid_params(format!("no prompt `{served}` is offered"), None));
            };
            let mut params = request.clone();
            params["ref"]["name"] = Value::String(own);
            (index, params)
        }
        Some("ref/resource") => {
            let uri = reference.get("uri").and_then(Value::as_str).unwrap_or_default();
            let Some(index) = route_uri(shared, origin, uri).await? else {
                return Err(ErrorData::invalid_params(format!("no resource or template `{uri}` is offered"), None));
            };
            (index, request.clone())
        }
        _ => return Err(ErrorData::invalid_params("`ref` must be a ref/prompt or a ref/resource", None)),
    };
    if let Some(meta) = params.as_object_mut() {
        meta.remove("_meta");
    }
    let server = shared.bridged.servers[index].name.clone();
    let (Answered { answer, asked }, ms) = ask(shared, origin, &server, "completion/complete", params).await?;
    let frame = exchange(&server, "completion/complete", request, &answer, asked, ms);
    record(shared, origin.trace, EventKind::CompletionComplete, frame).await?;
    answer.map_err(client_error)
}
