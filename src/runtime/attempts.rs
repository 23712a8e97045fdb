//! Steps 5 to 7 of a call: its attempts, each handed to the transport as
//! one [`Attempt`], retried with backoff while the failure is transient;
//! each attempt's result validated and recorded before it is handed back.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::event::{EventKind, Outcome, PAYLOAD_VERSION, ToolResultPayload, Usage, now_ms};
use crate::runtime::asking::rounds::Stop;
use crate::runtime::call::{Call, CallOutcome};
use crate::runtime::context::Progress;
use crate::runtime::error::{CallError, CallErrorKind};
use crate::runtime::mcp::content;
use crate::runtime::transport::{Attempt, AttemptError, FailureKind, Plan, Reply};

/// First retry delay; doubles with each attempt.
const BACKOFF_BASE_MS: u64 = 200;
/// Longest wait between attempts, whatever the tool asks for.
const BACKOFF_MAX_MS: u64 = 30_000;

fn backoff_ms(attempt: u32, retry_after_ms: Option<u64>) -> u64 {
    let exponential = BACKOFF_BASE_MS.saturating_mul(1u64 << attempt.saturating_sub(1).min(16));
    retry_after_ms.unwrap_or(exponential).min(BACKOFF_MAX_MS)
}

/// What one attempt came to: a result (validated) or why it failed.
type Ended = Result<(Value, Option<Usage>), AttemptError>;

impl Call<'_> {
    /// Runs attempts until one succeeds, one fails for good, or the tool's
    /// questions end the call. An attempt that asks questions that get
    /// answered is followed by one that has the answers (it does not count
    /// as a try); a transient failure is retried, at most
    /// `retry.max_attempts` tries in all.
    pub(crate) fn attempts(&mut self, plan: &impl Plan) -> Result<CallOutcome, CallError> {
        // What a recording answers is answered once.
        let max_attempts = if plan.recorded() { 1 } else { self.tool().max_attempts.max(1) };
        let (mut attempt, mut tries) = (1, 1);
        loop {
            let attempt_started = Instant::now();
            // Set when questions end the call (it says how the call fails).
            let mut stop = None;
            // Attempts after answered questions are not tries: each adds one
            // to the most the call can make.
            // The content blocks an MCP server sent beside its structured result.
            let mut content = None;
            let outcome = match self.attempt(plan, attempt, max_attempts + attempt - tries) {
                Ok(Reply::Questions(asked)) => match self.ask(&asked, attempt) {
                    Ok(()) => {
                        attempt += 1;
                        continue;
                    }
                    Err(Stop { error, kind, help }) => {
                        stop = Some((kind, help));
                        Err(error)
                    }
                },
                // 6. Validate the result.
                Ok(Reply::Result { value, usage }) => self.check_result(value, usage),
                Ok(Reply::Structured { value, content: blocks }) => {
                    content = Some(blocks);
                    self.check_result(value, None)
                }
                Ok(Reply::Asks(_)) => unreachable!("an attempt answers what a server asks before it returns"),
                Err(e) => Err(e),
            };
            let will_retry = matches!(&outcome, Err(e) if e.transient) && tries < max_attempts;
            // The operator's hooks see the final result before the caller;
            // their frames go with the result's.
            let seen = match &outcome {
                Ok((value, _)) => self.after_call(value, content.as_deref()),
                Err(_) => None,
            };
            // 7. Record the result, then hand it back.
            let result = self.record_result(&outcome, content.as_deref(), attempt, attempt_started, will_retry)?;
            match outcome {
                Ok((_, usage)) => {
                    let done = match seen {
                        None => {
                            let mut done = self.outcome(result, usage, attempt);
                            done.content = content.map(|blocks| self.journal.scrubber.scrubbed(&Value::Array(blocks)));
                            done
                        }
                        Some(Ok(seen)) => {
                            let mut done = self.outcome(seen.result, usage, attempt);
                            done.content = seen.content.map(Value::Array);
                            done.annotations = seen.annotations;
                            done
                        }
                        Some(Err(mut withheld)) => {
                            withheld.attempts = attempt;
                            return Err(withheld);
                        }
                    };
                    return Ok(done);
                }
                Err(e) if will_retry => {
                    self.pause(tries, e.retry_after_ms);
                    attempt += 1;
                    tries += 1;
                }
                Err(e) => return Err(self.failed(&e, stop, attempt)),
            }
        }
    }

    /// One attempt, as the progress sink hears of it; the audits the
    /// transport made on the way are recorded with the call.
    fn attempt(&mut self, plan: &impl Plan, number: u32, of: u32) -> Result<Reply, AttemptError> {
        self.context.report(Progress::AttemptStarted { attempt: number, of });
        let reply = if self.context.is_cancelled() {
            Err(AttemptError::new(
                FailureKind::Cancelled,
                format!("the call of `{}` was cancelled before attempt {number} started", self.tool().id),
            ))
        } else {
            let mut audits = Vec::new();
            let mut reply = plan.run(&self.request(number), &mut audits);
            for audit in audits {
                self.journal.audit(&audit.capability, audit.decision, &audit.reason);
            }
            // What a server asks meanwhile is answered, and the attempt goes on.
            while let Ok(Reply::Asks(conversation)) = reply {
                let answer = self.answer_server(&conversation, number);
                reply = conversation.answer(answer);
            }
            reply
        };
        self.context.report(Progress::AttemptEnded { attempt: number, of, ok: reply.is_ok() });
        reply
    }

    /// What attempt `number` hands the transport.
    fn request(&self, number: u32) -> Attempt<'_> {
        let tool = self.tool();
        let timeout = Duration::from_millis(tool.timeout_ms);
        let deadline_ms = now_ms().saturating_add(i64::try_from(tool.timeout_ms).unwrap_or(i64::MAX));
        Attempt {
            runtime: self.runtime,
            tool: &tool.id,
            invocation_id: self.journal.invocation_id,
            trace_id: self.journal.trace_id,
            number,
            arguments: &self.request.arguments,
            answers: &self.questions.answers,
            options: self.options_given(),
            deadline: Instant::now() + timeout,
            timeout_ms: tool.timeout_ms,
            deadline_ms,
            secrets: &self.secrets,
            scrubber: &self.journal.scrubber,
            cancel: self.context.cancel.as_ref(),
            progress: self.context.progress.as_ref(),
            traceparent: self.journal.traceparent.as_deref(),
        }
    }

    /// Step 7: the result frame of attempt `attempt` (with the content
    /// blocks an MCP server sent beside a structured result), made durable;
    /// returns the result scrubbed (`null` for a failure). A bridged
    /// server's binary content past a bound is recorded by digest
    /// ([`crate::runtime::mcp::content`]); the result returned keeps it.
    fn record_result(
        &mut self,
        outcome: &Ended,
        content: Option<&[Value]>,
        attempt: u32,
        started: Instant,
        will_retry: bool,
    ) -> Result<Value, CallError> {
        let prepared = self.prepared;
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let bridged = matches!(prepared.tool.transport, Some(crate::bundle::tools::Transport::Mcp { .. }));
        let (result, recorded, usage) = match outcome {
            Ok((result, usage)) => {
                let result = self.journal.scrubber.scrubbed(result);
                let recorded = if bridged { content::recorded_result(&result) } else { result.clone() };
                (result, Outcome::Result(recorded), *usage)
            }
            Err(e) => (Value::Null, Outcome::Error(e.to_frame(will_retry)), None),
        };
        let content = content.map(|blocks| {
            let scrubbed = self.journal.scrubber.scrubbed(&Value::Array(blocks.to_vec()));
            content::recorded_blocks(scrubbed.as_array().map_or(&[], Vec::as_slice))
        });
        let frame = ToolResultPayload {
            v: PAYLOAD_VERSION,
            invocation_id: self.journal.invocation_id,
            tool: prepared.tool.id.clone(),
            outcome: recorded,
            attempt: attempt.into(),
            duration_ms: Some(duration_ms),
            result_schema: prepared.result_schema.reference.clone(),
            result_schema_blake3: prepared.result_schema.blake3.clone(),
            usage,
            content,
            tags: self.journal.tags.clone(),
            traceparent: self.journal.traceparent.clone(),
        };
        self.journal.push(EventKind::ToolResult, format!("tool:{}", prepared.tool.id), frame);
        if let Err(failure) = self.journal.flush() {
            let shown = match outcome {
                Ok(_) => result,
                Err(e) => serde_json::json!({"error": e.message}),
            };
            let mut error = self.unrecorded_error(&failure, shown);
            error.attempts = attempt;
            return Err(error);
        }
        Ok(result)
    }

    /// Waits before a retry; a cancel ends the pause (the next turn records
    /// the call as cancelled).
    fn pause(&self, tries: u32, retry_after_ms: Option<u64>) {
        let pause = Duration::from_millis(backoff_ms(tries, retry_after_ms));
        match &self.context.cancel {
            Some(cancel) => {
                cancel.wait_timeout(pause);
            }
            None => std::thread::sleep(pause),
        }
    }

    /// The error of a call whose last attempt, `attempt`, failed with `e`;
    /// `stop` says how when questions ended it.
    fn failed(&self, e: &AttemptError, stop: Option<(CallErrorKind, String)>, attempt: u32) -> CallError {
        let error = match stop {
            Some((kind, help)) => CallError::new(kind, self.journal.scrubber.scrub_string(&e.message)).help(help),
            None => self.failed_error(e, attempt),
        };
        let mut error = error.of_call(self.journal.invocation_id, self.journal.trace_id);
        error.attempts = attempt;
        error
    }

    /// The error of a call whose last attempt failed (scrubbed here too,
    /// whichever transport wrote it).
    fn failed_error(&self, e: &AttemptError, attempt: u32) -> CallError {
        let kind = match e.kind {
            FailureKind::Cancelled => CallErrorKind::Cancelled,
            _ if e.refused => CallErrorKind::Refused,
            _ => CallErrorKind::Tool,
        };
        let mut error = CallError::new(kind, self.journal.scrubber.scrub_string(&e.message));
        if attempt > 1 && e.kind != FailureKind::NeedsInput {
            error.message.push_str(&format!(" (after {attempt} attempts)"));
        }
        error.help = Some(match e.kind {
            FailureKind::NeedsInput => "an http tool cannot be asked again with answers; make it an exec tool, or have the API take the value as an argument".into(),
            FailureKind::Timeout => {
                "the tool took longer than its timeout_ms; raise it in tools.json if the work needs longer".into()
            }
            FailureKind::OutputTooLarge => {
                "the tool's output exceeds max_output_bytes; raise it in tools.json or make the output smaller".into()
            }
            FailureKind::InvalidResult => "fix the tool, or its result_schema in tools.json".into(),
            FailureKind::Cancelled => "the caller cancelled the call; call again to run it".into(),
            FailureKind::Refused => {
                "grant the redirect target in policy.caps, or point the tool at the final URL".into()
            }
            FailureKind::NotRecorded => "a replay answers only the recorded calls: record the session again, or \
                                         replay with --fallback live to run the calls no recording answers \
                                         (docs/replay.md)"
                .into(),
            _ if e.transient => {
                "the tool says the failure is transient; retry later, or set retry.max_attempts in tools.json".into()
            }
            _ => format!("see the tool's message; the call is recorded under invocation {}", self.journal.invocation_id),
        });
        error
    }

    /// The error of a tool that ran but whose outcome the ledger refused:
    /// it says so, and carries the outcome and the ids.
    fn unrecorded_error(&self, failure: &CallError, outcome: Value) -> CallError {
        let journal = &self.journal;
        let mut error = CallError::new(
            CallErrorKind::Recording,
            format!("tool `{}` ran, but its result was not recorded: {}", journal.tool, failure.message),
        )
        .help(format!(
            "the result is printed above; the call is invocation {} in trace {}. Calling again runs the tool again \
             (and repeats what it did); free disk space or fix the ledger first",
            journal.invocation_id, journal.trace_id
        ))
        .with_source_of(failure)
        .of_call(journal.invocation_id, journal.trace_id);
        error.unrecorded = Some(Box::new(outcome));
        error
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_honours_retry_after() {
        assert_eq!(backoff_ms(1, None), 200);
        assert_eq!(backoff_ms(3, None), 800);
        assert_eq!(backoff_ms(2, Some(50)), 50);
        assert_eq!(backoff_ms(40, None), BACKOFF_MAX_MS);
        assert_eq!(backoff_ms(1, Some(u64::MAX)), BACKOFF_MAX_MS);
    }
}
