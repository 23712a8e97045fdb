//! Everything that talks to a person at a terminal, all on stderr: the
//! authoring questions ([`TerminalAsk`]), call confirmations
//! ([`confirmer`]), tools' questions ([`answerer`]), hidden values
//! ([`hidden_value`], [`passphrase_asker`]) and progress lines ([`ByteProgress`], [`FrameCounter`]).
//! Each is drawn only when there is a terminal to draw on; commands never
//! reach for dialoguer or indicatif themselves.

#![allow(clippy::disallowed_methods, reason = "this module owns the prompts and progress on stderr")]

use std::io::IsTerminal;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use dialoguer::theme::{ColorfulTheme, SimpleTheme, Theme};
use dialoguer::{Confirm, Input, Password, Select};

use crate::authoring::ask::{Ask, AskError, Check};
use crate::cli::output::diagnostic;
use crate::pack::{NoProgress, Progress};
use crate::runtime::answer::{AnswerRequest, AnswerSource, Answerer, GivenAnswer, NoAnswerer};
use crate::runtime::confirm::{ConfirmRequest, Confirmation, Confirmer, NoTerminal, PreApproved, prompt_text};
use crate::secrets::SecretValue;
use crate::secrets::store::AskPassphrase;

/// Whether standard input is a terminal a person can answer prompts on.
pub(crate) fn stdin_is_terminal() -> bool {
    std::io::stdin().is_terminal()
}

/// Whether prompts can be both shown and answered.
fn can_prompt() -> bool {
    stdin_is_terminal() && std::io::stderr().is_terminal()
}

/// The wizard's questions on the terminal (dialoguer, rendered on stderr).
pub(crate) struct TerminalAsk {
    theme: Box<dyn Theme>,
}

impl TerminalAsk {
    /// Colourful prompts when `color`, plain ones otherwise.
    pub(crate) fn new(color: bool) -> Self {
        let theme: Box<dyn Theme> = if color { Box::new(ColorfulTheme::default()) } else { Box::new(SimpleTheme) };
        TerminalAsk { theme }
    }
}

fn ask_error(e: dialoguer::Error) -> AskError {
    AskError(e.to_string())
}

impl Ask for TerminalAsk {
    fn text(&mut self, prompt: &str, default: Option<&str>, check: Check<'_>) -> Result<String, AskError> {
        let mut input = Input::<String>::with_theme(&*self.theme)
            .with_prompt(prompt)
            .allow_empty(true)
            .validate_with(|answer: &String| check(answer));
        if let Some(default) = default {
            input = input.default(default.to_string());
        }
        input.interact_text().map_err(ask_error)
    }

    fn confirm(&mut self, prompt: &str, default: bool) -> Result<bool, AskError> {
        Confirm::with_theme(&*self.theme)
            .with_prompt(prompt)
            .default(default)
            .wait_for_newline(true)
            .interact()
            .map_err(ask_error)
    }

    fn select(&mut self, prompt: &str, items: &[&str], default: usize) -> Result<usize, AskError> {
        Select::with_theme(&*self.theme).with_prompt(prompt).items(items).default(default).interact().map_err(ask_error)
    }

    fn say(&mut self, text: &str) {
        diagnostic(text);
    }
}

/// The terminal's prompts, one at a time for the whole process: concurrent
/// calls (a batch) confirm and answer in turn.
static PROMPTS: Mutex<()> = Mutex::new(());

/// Holds the terminal until the guard is dropped: no confirmation or
/// question is asked meanwhile (a batch prints a result line under it, so
/// that no line lands in the middle of a prompt).
pub(crate) fn hold_prompts() -> MutexGuard<'static, ()> {
    PROMPTS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Who approves calls that need confirmation: everyone when `yes` (`--yes`),
/// the person at the terminal when there is one, else nobody (such calls
/// are refused).
pub(crate) fn confirmer(yes: bool) -> Arc<dyn Confirmer> {
    if yes {
        Arc::new(PreApproved)
    } else if can_prompt() {
        Arc::new(TerminalConfirmer)
    } else {
        Arc::new(NoTerminal)
    }
}

/// Asks on the terminal (stderr), one prompt at a time ([`hold_prompts`]).
struct TerminalConfirmer;

impl Confirmer for TerminalConfirmer {
    fn confirm(&self, request: &ConfirmRequest<'_>) -> Confirmation {
        let _held = hold_prompts();
        let text = prompt_text(request);
        let (details, question) = text.rsplit_once('\n').unwrap_or(("", text.as_str()));
        diagnostic(&crate::text::terminal_safe(details));
        match Confirm::new().with_prompt(question).default(false).interact_opt() {
            Ok(Some(true)) => Confirmation { approved: true, by: "operator".into(), how: "terminal prompt".into() },
            Ok(_) => {
                Confirmation { approved: false, by: "operator".into(), how: "declined at the terminal prompt".into() }
            }
            Err(e) => Confirmation { approved: false, by: "runtime".into(), how: format!("the prompt failed: {e}") },
        }
    }
}

/// A value typed without echo (a secret, a passphrase), asked twice when
/// `confirm`; typing it differently the second time asks again. Says why
/// when there is no terminal to ask on.
pub(crate) fn hidden_value(prompt: &str, confirm: bool) -> Result<SecretValue, String> {
    if !can_prompt() {
        return Err("there is no terminal to ask on".to_string());
    }
    let _held = hold_prompts();
    let mut password = Password::new().with_prompt(prompt).allow_empty_password(false);
    if confirm {
        password = password.with_confirmation("Again, to confirm", "The two entries differ; try again.");
    }
    password.interact().map(SecretValue::new).map_err(|e| format!("the prompt failed: {e}"))
}

/// Asks for the secret store's passphrase on the terminal ([`hidden_value`]).
pub(crate) fn passphrase_asker() -> AskPassphrase {
    Arc::new(hidden_value)
}

/// Who answers the questions tools ask: the person at the terminal when
/// `ask` and there is one, else nobody (the call then fails, naming the
/// questions and the `--answer` flag).
pub(crate) fn answerer(ask: bool) -> Arc<dyn Answerer> {
    if ask && can_prompt() { Arc::new(TerminalAnswerer) } else { Arc::new(NoAnswerer) }
}

/// Asks the questions on the terminal (stderr), checking each answer
/// against its question and asking again until it fits; one prompt at a
/// time ([`hold_prompts`]).
struct TerminalAnswerer;

impl Answerer for TerminalAnswerer {
    fn answer(&self, request: &AnswerRequest<'_>) -> Vec<GivenAnswer> {
        let _held = hold_prompts();
        diagnostic(&crate::text::terminal_safe(&format!(
            "Tool `{}` asks {}:",
            request.tool,
            crate::text::plural(request.questions.len(), "question")
        )));
        let mut answers = Vec::new();
        for question in request.questions {
            let prompt = format!(
                "{} [{}]",
                crate::text::terminal_safe_line(&question.text),
                crate::text::terminal_safe_line(&question.expected())
            );
            let mut input = Input::<String>::new().with_prompt(prompt).validate_with(|text: &String| {
                question
                    .check(&question.read_text(text))
                    .map_err(|why| crate::text::terminal_safe_line(&why).into_owned())
            });
            if let Some(default) = &question.default {
                let shown = match default {
                    serde_json::Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                input = input.default(crate::text::terminal_safe_line(&shown).into_owned());
            }
            match input.interact_text() {
                Ok(text) => answers.push(GivenAnswer {
                    id: question.id.clone(),
                    value: question.read_text(&text),
                    source: AnswerSource::Terminal,
                }),
                Err(_) => break,
            }
        }
        answers
    }
}

/// Work smaller than this many bytes goes without a progress bar.
const PROGRESS_THRESHOLD: u64 = 16 << 20;

/// A byte progress bar on stderr, drawn only for large work on a terminal.
pub(crate) struct ByteProgress {
    bar: std::cell::OnceCell<indicatif::ProgressBar>,
    label: &'static str,
}

impl ByteProgress {
    /// A bar labelled `label` (e.g. "packing") when stderr is a terminal,
    /// else no progress at all.
    pub(crate) fn on_terminal(label: &'static str) -> Box<dyn Progress> {
        if std::io::stderr().is_terminal() {
            Box::new(ByteProgress { bar: std::cell::OnceCell::new(), label })
        } else {
            Box::new(NoProgress)
        }
    }
}

impl Progress for ByteProgress {
    fn start(&self, total: u64) {
        if total < PROGRESS_THRESHOLD {
            return;
        }
        let bar = indicatif::ProgressBar::with_draw_target(Some(total), indicatif::ProgressDrawTarget::stderr());
        if let Ok(style) = indicatif::ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes} ({eta})") {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(self.label);
        let _ = self.bar.set(bar);
    }
    fn advance(&self, bytes: u64) {
        if let Some(bar) = self.bar.get() {
            bar.inc(bytes);
        }
    }
    fn finish(&self) {
        if let Some(bar) = self.bar.get() {
            bar.finish_and_clear();
        }
    }
}

/// Items between two updates of a [`FrameCounter`].
const COUNTER_STEP: u64 = 4096;

/// A running count of frames on stderr (`replaying: 12,288 frames (…/s)`),
/// drawn only when stderr is a terminal.
pub(crate) struct FrameCounter {
    bar: Option<indicatif::ProgressBar>,
    count: u64,
}

impl FrameCounter {
    /// A counter whose line starts with `label`.
    pub(crate) fn new(label: &'static str) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
            if let Ok(style) =
                indicatif::ProgressStyle::with_template("{spinner} {msg}: {human_pos} frames ({per_sec})")
            {
                bar.set_style(style);
            }
            bar.set_message(label);
            bar
        });
        FrameCounter { bar, count: 0 }
    }

    /// Counts one frame.
    pub(crate) fn tick(&mut self) {
        self.count += 1;
        if self.count.is_multiple_of(COUNTER_STEP)
            && let Some(bar) = &self.bar
        {
            bar.set_position(self.count);
        }
    }
}

impl Drop for FrameCounter {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
