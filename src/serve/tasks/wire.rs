//! A task as each revision writes it: the `Task` of 2025-11-25 (`ttl`,
//! `pollInterval`; a tool result with `isError` is `failed`), and the
//! `DetailedTask` of the 2026-07-28 extension (`ttlMs`, `pollIntervalMs`,
//! the result, error or questions inline; only a JSON-RPC error is
//! `failed`).

use rmcp::ErrorData;
use rmcp::model::{CreateTaskResult, CustomNotification, GetTaskResult, ServerNotification, TaskStatus};
use serde_json::{Map, Value, json};

use crate::serve::tasks::{POLL_INTERVAL, State, Task};
use crate::text::format_ts;

/// The `_meta` key tying a message to its task.
pub(crate) const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
/// Most tasks one `tasks/list` page holds.
const LIST_PAGE: usize = 50;

fn status_name(status: TaskStatus) -> Value {
    serde_json::to_value(status).unwrap_or_else(|_| json!("working"))
}

fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The members both revisions share, and the time to live and polling
/// interval under each one's names.
fn base(task: &Task, state: &State, status: TaskStatus, ttl: &str, poll: &str) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("taskId".into(), json!(task.id));
    fields.insert("status".into(), status_name(status));
    if let Some(message) = &state.message {
        fields.insert("statusMessage".into(), json!(message));
    }
    fields.insert("createdAt".into(), json!(format_ts(task.created_ms)));
    fields.insert("lastUpdatedAt".into(), json!(format_ts(state.updated_ms)));
    fields.insert(ttl.into(), json!(millis(task.ttl)));
    fields.insert(poll.into(), json!(millis(POLL_INTERVAL)));
    fields
}

/// The task as 2025-11-25 writes it.
pub(crate) fn legacy_task(task: &Task) -> Value {
    let state = task.state();
    Value::Object(base(task, &state, state.status, "ttl", "pollInterval"))
}

/// `notifications/tasks/status` with the task's state (2025-11-25).
pub(crate) fn legacy_status_notification(task: &Task) -> ServerNotification {
    ServerNotification::CustomNotification(CustomNotification::new(
        "notifications/tasks/status",
        Some(legacy_task(task)),
    ))
}

/// The answer to a `tools/call` run as a task (2025-11-25 `CreateTaskResult`).
pub(crate) fn legacy_created(task: &Task) -> Value {
    json!({ "task": legacy_task(task) })
}

/// What `tasks/result` answers for a terminal task (2025-11-25): what the
/// call would have answered, its result tied to the task in `_meta`.
pub(crate) fn legacy_result(task: &Task, state: State) -> Result<Value, ErrorData> {
    let mut result =
        state.outcome.unwrap_or_else(|| Err(ErrorData::internal_error("the task ended without an outcome", None)))?;
    if let Some(fields) = result.as_object_mut() {
        // 2025-11-25 results carry no `resultType`.
        fields.remove("resultType");
        let meta = fields.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(RELATED_TASK.into(), json!({"taskId": task.id}));
        }
    }
    Ok(result)
}

/// One page of `tasks/list` (2025-11-25): `cursor` is the offset the
/// previous page ended at.
pub(crate) fn legacy_list(tasks: &[std::sync::Arc<Task>], cursor: Option<&str>) -> Result<Value, ErrorData> {
    let start = match cursor {
        None => 0,
        Some(cursor) => cursor
            .parse::<usize>()
            .ok()
            .filter(|offset| *offset <= tasks.len())
            .ok_or_else(|| ErrorData::invalid_params("invalid or expired `cursor`", None))?,
    };
    let end = (start + LIST_PAGE).min(tasks.len());
    let page: Vec<Value> = tasks[start..end].iter().map(|task| legacy_task(task)).collect();
    let mut listed = json!({ "tasks": page });
    if end < tasks.len() {
        listed["nextCursor"] = json!(end.to_string());
    }
    Ok(listed)
}

/// The task as the 2026-07-28 extension writes it (`DetailedTask`): a tool
/// result, even with `isError`, makes it `completed`; a JSON-RPC error
/// `failed`.
fn detailed(task: &Task) -> Map<String, Value> {
    let state = task.state();
    let status = match (&state.status, &state.outcome) {
        (TaskStatus::Failed, Some(Ok(_))) => TaskStatus::Completed,
        (status, _) => *status,
    };
    let mut fields = base(task, &state, status, "ttlMs", "pollIntervalMs");
    match (status, state.outcome, state.input) {
        (TaskStatus::Completed, Some(Ok(result)), _) => {
            fields.insert("result".into(), result);
        }
        (TaskStatus::Failed, Some(Err(error)), _) => {
            fields.insert("error".into(), serde_json::to_value(error).unwrap_or_default());
        }
        (TaskStatus::InputRequired, _, Some(input)) => {
            fields.insert("inputRequests".into(), serde_json::to_value(input).unwrap_or_default());
        }
        _ => {}
    }
    fields
}

fn typed<T: serde::de::DeserializeOwned>(fields: Map<String, Value>) -> Result<T, ErrorData> {
    serde_json::from_value(Value::Object(fields))
        .map_err(|e| ErrorData::internal_error(format!("cannot write the task: {e}"), None))
}

/// The answer to a `tools/call` run as a task (2026-07-28).
pub(crate) fn created(task: &Task) -> Result<CreateTaskResult, ErrorData> {
    let mut fields = detailed(task);
    for inline in ["result", "error", "inputRequests"] {
        fields.remove(inline);
    }
    fields.insert("resultType".into(), json!("task"));
    typed(fields)
}

/// The answer to `tasks/get` (2026-07-28).
pub(crate) fn got(task: &Task) -> Result<GetTaskResult, ErrorData> {
    let mut fields = detailed(task);
    fields.insert("resultType".into(), json!("complete"));
    typed(fields)
}
