//! Questions the wizard asks, behind a trait: the command line answers them
//! on the terminal (dialoguer), tests with scripted answers.

/// A checker for a typed answer: `Err(message)` shows the message and asks again.
pub(crate) type Check<'a> = &'a dyn Fn(&str) -> Result<(), String>;

/// The person (or script) answering the wizard.
pub(crate) trait Ask {
    /// Asks for a line of text. An empty answer takes `default` when there is
    /// one (shown in brackets). `check` runs on every answer; a refused answer
    /// is shown with its message and asked again.
    fn text(&mut self, prompt: &str, default: Option<&str>, check: Check<'_>) -> Result<String, AskError>;

    /// Asks a yes/no question.
    fn confirm(&mut self, prompt: &str, default: bool) -> Result<bool, AskError>;

    /// Asks to pick one of `items`; returns its index.
    fn select(&mut self, prompt: &str, items: &[&str], default: usize) -> Result<usize, AskError>;

    /// Shows a line of information (a heading, a summary, a warning).
    fn say(&mut self, text: &str);
}

/// The answerer could not answer (terminal closed, interrupted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AskError(pub String);

impl std::fmt::Display for AskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for AskError {}

impl From<AskError> for crate::authoring::AuthoringError {
    fn from(e: AskError) -> Self {
        crate::authoring::AuthoringError::usage(format!("the wizard stopped: {}", e.0))
            .with_help("run it again on a terminal, or pass every answer as a flag with --non-interactive")
    }
}

/// Scripted answers, in order (for the wizard's tests).
/// `text` answers that fail the check are an error, not a retry.
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct Scripted {
    answers: std::collections::VecDeque<String>,
    /// Everything said or asked, in order.
    pub transcript: Vec<String>,
}

#[cfg(test)]
impl Scripted {
    /// Answers taken in order; `confirm` reads `y`/`n`, `select` an index or item.
    pub(crate) fn new<I: IntoIterator<Item = S>, S: Into<String>>(answers: I) -> Self {
        Scripted { answers: answers.into_iter().map(Into::into).collect(), transcript: Vec::new() }
    }

    fn next(&mut self, prompt: &str) -> Result<String, AskError> {
        self.transcript.push(prompt.to_string());
        self.answers.pop_front().ok_or_else(|| AskError(format!("no scripted answer for `{prompt}`")))
    }
}

#[cfg(test)]
impl Ask for Scripted {
    fn text(&mut self, prompt: &str, default: Option<&str>, check: Check<'_>) -> Result<String, AskError> {
        let answer = self.next(prompt)?;
        let answer = match (answer.is_empty(), default) {
            (true, Some(default)) => default.to_string(),
            _ => answer,
        };
        check(&answer).map_err(AskError)?;
        Ok(answer)
    }

    fn confirm(&mut self, prompt: &str, default: bool) -> Result<bool, AskError> {
        match self.next(prompt)?.as_str() {
            "" => Ok(default),
            "y" | "yes" => Ok(true),
            "n" | "no" => Ok(false),
            other => Err(AskError(format!("`{other}` is not y or n"))),
        }
    }

    fn select(&mut self, prompt: &str, items: &[&str], default: usize) -> Result<usize, AskError> {
        let answer = self.next(prompt)?;
        if answer.is_empty() {
            return Ok(default);
        }
        items
            .iter()
            .position(|i| *i == answer)
            .or_else(|| answer.parse().ok().filter(|n: &usize| *n < items.len()))
            .ok_or_else(|| AskError(format!("`{answer}` is not one of {}", items.join(", "))))
    }

    fn say(&mut self, text: &str) {
        self.transcript.push(text.to_string());
    }
}
