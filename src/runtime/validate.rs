//! Steps 2 and 6 of a call: its arguments against the tool's
//! `input_schema`, the result of an attempt against its `result_schema`;
//! either must also be deep enough only to be read back once recorded.

use serde_json::Value;

use crate::bundle::schema::{error_lines, error_lines_except, quoted_errors};
use crate::bundle::value::{MAX_DATA_DEPTH, json_depth};
use crate::event::Usage;
use crate::event::payload::ReplayAnswered;
use crate::event::placeholder::holds_placeholder;
use crate::runtime::call::Call;
use crate::runtime::error::{CallError, CallErrorKind};
use crate::runtime::invalid_args::explain;
use crate::runtime::transport::{AttemptError, FailureKind};

/// What `value` breaks of the schema `validator` was compiled from, quoted;
/// `None` when it is valid.
pub(crate) fn schema_errors(validator: &jsonschema::Validator, value: &Value) -> Option<String> {
    quoted_errors(error_lines(validator, value))
}

impl Call<'_> {
    /// Step 2: the arguments fit the tool's `input_schema` and can be
    /// recorded.
    pub(crate) fn check_arguments(&mut self) -> Result<(), CallError> {
        let (prepared, arguments) = (self.prepared, &self.request.arguments);
        let tool = &prepared.tool;
        let depth = json_depth(arguments);
        if depth > MAX_DATA_DEPTH {
            return Err(self.journal.refuse(
                CallError::new(
                    CallErrorKind::InvalidInput,
                    format!(
                        "the arguments of `{}` nest arrays and objects {depth} levels deep; rlp accepts at most {MAX_DATA_DEPTH}",
                        tool.id
                    ),
                )
                .help("flatten the arguments"),
            ));
        }
        if let Some(why) = explain(&prepared.input, &prepared.input_schema.resolved, arguments) {
            return Err(self.journal.refuse(
                CallError::new(
                    CallErrorKind::InvalidInput,
                    format!("the arguments do not match the input_schema of `{}`: {}", tool.id, why.errors),
                )
                .help(why.help),
            ));
        }
        Ok(())
    }

    /// Step 6: the result fits the tool's `result_schema` and can be recorded.
    /// A recorded result a redacted export left placeholders in
    /// (`<redacted:N>`) is not held to the schema where they stand: an
    /// error about a value that is or holds one is not an error.
    pub(crate) fn check_result(
        &self,
        result: Value,
        usage: Option<Usage>,
    ) -> Result<(Value, Option<Usage>), AttemptError> {
        let prepared = self.prepared;
        let tool = &prepared.tool;
        let recorded = self.replay.as_ref().is_some_and(|mark| mark.answered == ReplayAnswered::Recording);
        let excused = move |value: &Value| recorded && holds_placeholder(value);
        match quoted_errors(error_lines_except(&prepared.result, &result, excused)) {
            None if json_depth(&result) > MAX_DATA_DEPTH => Err(AttemptError::new(
                FailureKind::InvalidResult,
                format!(
                    "the result of `{}` nests arrays and objects {} levels deep; rlp records at most {MAX_DATA_DEPTH}",
                    tool.id,
                    json_depth(&result)
                ),
            )),
            None => Ok((result, usage)),
            Some(errors) => Err(AttemptError::new(
                FailureKind::InvalidResult,
                self.journal
                    .scrubber
                    .scrub_string(&format!("the result of `{}` does not match its result_schema: {errors}", tool.id)),
            )),
        }
    }
}
