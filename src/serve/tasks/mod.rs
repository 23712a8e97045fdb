//! Tool calls run as MCP tasks (docs/serve.md, "Tasks"): the call goes
//! through the runtime as any other, on its own, while the client polls
//! its task for the status and, at the end, the result.
//!
//! Two revisions of the protocol speak of tasks: the experimental tasks of
//! 2025-11-25, which the client asks for (a `task` member in `tools/call`),
//! and the `io.modelcontextprotocol/tasks` extension of 2026-07-28
//! (SEP-2663), where the server decides. They share the store here
//! ([`Tasks`]); their messages are [`wire`]'s, and the 2025-11-25 ones,
//! which the SDK no longer knows, are read and advertised by [`legacy`].
//!
//! Memory is bounded: at most [`MAX_TASKS`] tasks, [`MAX_TASKS_PER_OWNER`]
//! per session, each kept at most [`MAX_TTL`] from its creation (its
//! running call is cancelled then).

pub(crate) mod legacy;
pub(crate) mod wire;

use std::collections::HashMap;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rmcp::model::{CallToolResponse, ElicitResult, InputRequests, InputResponses, ServerNotification, TaskStatus};
use rmcp::service::Peer;
use rmcp::{ErrorData, RoleServer};
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::runtime::Cancel;
use crate::serve::asking::Asker;
use crate::serve::calls::{Event, Pending, outcome};

/// Longest a task is kept from its creation, whatever the client asks:
/// a call still running then is cancelled, a result no longer kept.
pub(crate) const MAX_TTL: Duration = Duration::from_secs(3600);
/// Most tasks kept at once, over all sessions.
pub(crate) const MAX_TASKS: usize = 1024;
/// Most tasks one session (or, for 2026-07-28, all stateless requests
/// together) keeps at once.
pub(crate) const MAX_TASKS_PER_OWNER: usize = 64;
/// The polling interval suggested to clients.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_millis(500);
/// How long a task's question waits for the client to name the task
/// ([`TaskAsker`]) before it is sent anyway: ten polling intervals.
const KNOWN_WAIT: Duration = Duration::from_secs(5);
/// The tag a call run as a task is recorded with, before the task id.
pub(crate) const TAG_PREFIX: &str = "mcp.task=";

/// Whose a task is: the session that made it (2025-11-25), or none for a
/// stateless request (2026-07-28), whose tasks are found by id alone.
pub(crate) type Owner = Option<Uuid>;

/// What a task is at one moment.
#[derive(Clone, Debug)]
pub(crate) struct State {
    pub(crate) status: TaskStatus,
    pub(crate) message: Option<String>,
    /// Milliseconds since the Unix epoch of the last change.
    pub(crate) updated_ms: i64,
    /// The questions the call waits on (2026-07-28, `input_required`).
    pub(crate) input: Option<InputRequests>,
    /// What the call answered: its result (as JSON) or its JSON-RPC error.
    pub(crate) outcome: Option<Result<Value, ErrorData>>,
    /// The call has ended and is recorded.
    pub(crate) ended: bool,
}

/// One task.
pub(crate) struct Task {
    pub(crate) id: String,
    owner: Owner,
    pub(crate) created_ms: i64,
    pub(crate) ttl: Duration,
    deadline: Instant,
    state: watch::Sender<State>,
    /// Cancels the call.
    cancel: Cancel,
    /// Withdraws a question the call waits on.
    pub(crate) stop: CancellationToken,
    /// Where the client's answers go (2026-07-28 `tasks/update`).
    answers: Mutex<Option<Sender<InputResponses>>>,
    /// The session told of status changes (2025-11-25), through one
    /// forwarder so the notifications reach it in the order of the changes.
    listener: Option<tokio::sync::mpsc::UnboundedSender<ServerNotification>>,
    /// The client has named the task in a request: it has the answer that
    /// made it ([`Task::wait_known`]).
    known: (Mutex<bool>, Condvar),
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A random task id with 128 bits of entropy; none when the system has no
/// randomness to give.
fn new_id() -> Option<String> {
    let mut secret = [0u8; 16];
    getrandom::fill(&mut secret).ok()?;
    Some(secret.iter().map(|b| format!("{b:02x}")).collect())
}

impl Task {
    /// Notes that the client named the task in a request.
    fn mark_known(&self) {
        *self.known.0.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.known.1.notify_all();
    }

    /// Waits until the client has named the task (or `stop` is cancelled),
    /// at most `longest`. The answer that makes a task and a request the
    /// server sends are written in either order (rmcp writes them from two
    /// queues): a question about a task its client cannot know of yet would
    /// reach it before the task does.
    fn wait_known(&self, longest: Duration) {
        let until = Instant::now() + longest;
        let mut known = self.known.0.lock().unwrap_or_else(PoisonError::into_inner);
        while !*known && !self.stop.is_cancelled() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            // Woken by `mark_known`; `stop` is looked at every polling interval.
            let step = left.min(POLL_INTERVAL / 5);
            known = self.known.1.wait_timeout(known, step).unwrap_or_else(PoisonError::into_inner).0;
        }
    }

    /// The current state.
    pub(crate) fn state(&self) -> State {
        self.state.borrow().clone()
    }

    /// Waits until the task reaches a terminal status, or its call ended.
    pub(crate) async fn terminal(&self) -> State {
        let mut watching = self.state.subscribe();
        let reached = watching.wait_for(|s| s.status.is_terminal()).await.map(|s| s.clone());
        reached.unwrap_or_else(|_| self.state())
    }

    /// Waits until the call has ended and is recorded.
    pub(crate) async fn ended(&self) {
        let mut watching = self.state.subscribe();
        let _ = watching.wait_for(|s| s.ended).await;
    }

    /// Waits until the task is terminal or waits on the client.
    pub(crate) async fn settled(&self) {
        let mut watching = self.state.subscribe();
        let _ = watching.wait_for(|s| s.status.is_terminal() || s.status == TaskStatus::InputRequired).await;
    }

    /// Changes the status (a terminal status stays), and tells the session.
    pub(crate) fn set(&self, status: TaskStatus, message: Option<String>, input: Option<InputRequests>) {
        let changed = self.state.send_if_modified(|state| {
            if state.status.is_terminal() || (state.status == status && status == TaskStatus::Working) {
                return false;
            }
            state.status = status;
            state.message = message;
            state.input = input;
            state.updated_ms = now_ms();
            true
        });
        if changed {
            self.tell();
        }
    }

    /// Records the call's end: its outcome, and the status it gives (a
    /// cancelled task stays cancelled).
    fn finish(&self, answered: Result<CallToolResponse, ErrorData>) {
        let outcome = answered.and_then(|response| match response {
            CallToolResponse::Complete(result) => serde_json::to_value(result)
                .map_err(|e| ErrorData::internal_error(format!("cannot build the result: {e}"), None)),
            _ => Err(ErrorData::internal_error("the call ended without a result", None)),
        });
        let changed = self.state.send_if_modified(|state| {
            state.ended = true;
            if state.status.is_terminal() {
                return true;
            }
            let failed = match &outcome {
                Ok(result) => result.get("isError").and_then(Value::as_bool).unwrap_or(false),
                Err(_) => true,
            };
            state.status = if failed { TaskStatus::Failed } else { TaskStatus::Completed };
            state.message = match &outcome {
                Err(error) => Some(error.message.to_string()),
                Ok(_) if failed => Some("the tool call ended with an error (isError)".into()),
                Ok(_) => None,
            };
            state.input = None;
            state.outcome = Some(outcome);
            state.updated_ms = now_ms();
            true
        });
        if changed {
            self.tell();
        }
    }

    /// Cancels the task: `cancelled` at once; its call is cancelled and
    /// recorded as such. Fails for a task already terminal.
    pub(crate) fn cancel(&self, why: &str) -> Result<(), TaskStatus> {
        let mut was = TaskStatus::Working;
        let changed = self.state.send_if_modified(|state| {
            was = state.status;
            if state.status.is_terminal() {
                return false;
            }
            state.status = TaskStatus::Cancelled;
            state.message = Some(why.to_string());
            state.input = None;
            state.outcome = Some(Err(ErrorData::internal_error(
                "the task was cancelled; the call was recorded as cancelled",
                None,
            )));
            state.updated_ms = now_ms();
            true
        });
        if !changed {
            return Err(was);
        }
        self.cancel.cancel();
        self.stop.cancel();
        drop(self.answers.lock().unwrap_or_else(PoisonError::into_inner).take());
        self.tell();
        Ok(())
    }

    /// Passes the client's answers to the call waiting on them.
    pub(crate) fn answer(&self, responses: InputResponses) {
        if self.state().status != TaskStatus::InputRequired {
            return;
        }
        if let Some(answers) = self.answers.lock().unwrap_or_else(PoisonError::into_inner).as_ref() {
            let _ = answers.send(responses);
        }
        self.set(TaskStatus::Working, None, None);
    }

    /// Sends `notifications/tasks/status` to the session that made the task.
    fn tell(&self) {
        if let Some(listener) = &self.listener {
            let _ = listener.send(wire::legacy_status_notification(self));
        }
    }
}

/// Asks the client of a 2025-11-25 session for a call run as a task: the
/// task is `input_required` while the form is open, and the form names the
/// task in its `_meta`.
pub(crate) struct TaskAsker {
    pub(crate) inner: Arc<dyn Asker>,
    pub(crate) task: Arc<Task>,
}

impl Asker for TaskAsker {
    fn ask(&self, mut form: Value) -> Option<ElicitResult> {
        if let Some(fields) = form.as_object_mut() {
            let meta = fields.entry("_meta").or_insert_with(|| serde_json::json!({}));
            if let Some(meta) = meta.as_object_mut() {
                meta.insert(wire::RELATED_TASK.into(), serde_json::json!({"taskId": self.task.id}));
            }
        }
        self.task.set(
            TaskStatus::InputRequired,
            Some("the call waits for the client's answer to an elicitation".into()),
            None,
        );
        // Asked once the client knows the task: after `input_required`, a
        // client calls `tasks/result` (or polls `tasks/get`) for it.
        self.task.wait_known(KNOWN_WAIT);
        let answer = self.inner.ask(form);
        self.task.set(TaskStatus::Working, None, None);
        answer
    }
}

/// Why a task could not be made.
#[derive(Debug)]
pub(crate) enum Refused {
    /// The caps of tasks held are reached.
    Full,
    /// No randomness for an id.
    NoRandomness,
}

/// Why a task cannot be had.
pub(crate) const NOT_FOUND: &str = "Failed to retrieve task: Task not found (unknown, expired, or another session's)";

/// The tasks of one server.
#[derive(Default)]
pub(crate) struct Tasks {
    tasks: Mutex<HashMap<String, Arc<Task>>>,
}

/// What a new task is made of.
pub(crate) struct NewTask {
    pub(crate) owner: Owner,
    /// The time to live the client asked for, if it did.
    pub(crate) ttl_ms: Option<u64>,
    pub(crate) cancel: Cancel,
    /// The session told of status changes, if any.
    pub(crate) listener: Option<Peer<RoleServer>>,
}

/// A sender whose notifications reach `peer` one after the other, in the
/// order sent (a spawned send per notification could overtake another);
/// the forwarder ends when the task, and with it the sender, is dropped.
fn forwarder(peer: Peer<RoleServer>) -> tokio::sync::mpsc::UnboundedSender<ServerNotification> {
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(notification) = receiver.recv().await {
            let _ = peer.send_notification(notification).await;
        }
    });
    sender
}

impl Tasks {
    /// Makes a task (in `working`), unless the caps are reached.
    pub(crate) fn create(&self, new: NewTask) -> Result<Arc<Task>, Refused> {
        let id = new_id().ok_or(Refused::NoRandomness)?;
        let ttl = new.ttl_ms.map_or(MAX_TTL, Duration::from_millis).min(MAX_TTL);
        let created_ms = now_ms();
        let state = State {
            status: TaskStatus::Working,
            message: None,
            updated_ms: created_ms,
            input: None,
            outcome: None,
            ended: false,
        };
        let task = Arc::new(Task {
            id: id.clone(),
            owner: new.owner,
            created_ms,
            ttl,
            deadline: Instant::now() + ttl,
            state: watch::Sender::new(state),
            cancel: new.cancel,
            stop: CancellationToken::new(),
            answers: Mutex::new(None),
            listener: new.listener.map(forwarder),
            known: (Mutex::new(false), Condvar::new()),
        });
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        tasks.retain(|_, task| task.deadline > Instant::now());
        let owned = tasks.values().filter(|t| t.owner == new.owner).count();
        if tasks.len() >= MAX_TASKS || owned >= MAX_TASKS_PER_OWNER {
            return Err(Refused::Full);
        }
        tasks.insert(id, Arc::clone(&task));
        Ok(task)
    }

    /// The task `id` of `owner`, if it is kept; the client named it.
    pub(crate) fn get(&self, id: &str, owner: Owner) -> Result<Arc<Task>, ErrorData> {
        let tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        let task = tasks
            .get(id)
            .filter(|task| task.owner == owner && task.deadline > Instant::now())
            .cloned()
            .ok_or_else(|| ErrorData::invalid_params(NOT_FOUND, None))?;
        task.mark_known();
        Ok(task)
    }

    /// `owner`'s tasks, newest first.
    pub(crate) fn of(&self, owner: Owner) -> Vec<Arc<Task>> {
        let tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let mut owned: Vec<Arc<Task>> =
            tasks.values().filter(|task| task.owner == owner && task.deadline > now).cloned().collect();
        owned.sort_by(|a, b| b.created_ms.cmp(&a.created_ms).then_with(|| a.id.cmp(&b.id)));
        owned
    }

    /// Forgets a task that never was handed out (its call answered in time).
    pub(crate) fn forget(&self, id: &str) {
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner).remove(id);
    }
}

/// Follows the call of `task` to its end, in the background: its
/// questions (2026-07-28) make it `input_required`, its outcome is kept;
/// past the task's time to live the call is cancelled.
pub(crate) fn run(task: Arc<Task>, mut pending: Pending) {
    *task.answers.lock().unwrap_or_else(PoisonError::into_inner) = pending.answers.take();
    tokio::spawn(async move {
        let expiry = tokio::time::sleep_until(tokio::time::Instant::from_std(task.deadline));
        tokio::pin!(expiry);
        let mut expired = false;
        loop {
            tokio::select! {
                event = pending.events.recv() => match event {
                    Some(Event::Input(requests)) => task.set(
                        TaskStatus::InputRequired,
                        Some("the call waits for the client's answer (tasks/update)".into()),
                        Some(requests),
                    ),
                    Some(Event::Done(result)) => {
                        let shape = pending.shape;
                        pending.notifications.finish().await;
                        task.finish(outcome(*result, shape));
                        return;
                    }
                    None => {
                        task.finish(Err(ErrorData::internal_error("the call ended without an outcome", None)));
                        return;
                    }
                },
                () = &mut expiry, if !expired => {
                    expired = true;
                    let _ = task.cancel("the task outlived its time to live");
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    struct Recording(Arc<AtomicBool>);

    impl Asker for Recording {
        fn ask(&self, _form: Value) -> Option<ElicitResult> {
            self.0.store(true, Ordering::SeqCst);
            None
        }
    }

    fn new_task(tasks: &Tasks) -> Arc<Task> {
        let new = NewTask { owner: None, ttl_ms: None, cancel: Cancel::new().unwrap(), listener: None };
        tasks.create(new).unwrap()
    }

    #[test]
    fn a_tasks_question_waits_until_the_client_names_the_task() {
        let tasks = Tasks::default();
        let task = new_task(&tasks);
        let asked = Arc::new(AtomicBool::new(false));
        let asker = TaskAsker { inner: Arc::new(Recording(asked.clone())), task: Arc::clone(&task) };
        let asking = std::thread::spawn(move || asker.ask(serde_json::json!({"message": "?"})));
        std::thread::sleep(Duration::from_millis(300));
        assert!(!asked.load(Ordering::SeqCst), "asked before the client knew the task");
        assert_eq!(task.state().status, TaskStatus::InputRequired);
        tasks.get(&task.id, None).unwrap();
        asking.join().unwrap();
        assert!(asked.load(Ordering::SeqCst));
        assert_eq!(task.state().status, TaskStatus::Working);
    }

    #[test]
    fn a_question_of_a_task_stopped_while_it_waits_goes_on_at_once() {
        let tasks = Tasks::default();
        let task = new_task(&tasks);
        task.stop.cancel();
        // Waiting for the client here would hang the test for a day.
        task.wait_known(Duration::from_secs(86_400));
        assert!(task.stop.is_cancelled());
    }
}
