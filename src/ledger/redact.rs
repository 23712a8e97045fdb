//! Redaction of a trace for sharing: chosen fields of calls' arguments and
//! results replaced by stable placeholders (`<redacted:N>`), the same value
//! by the same placeholder throughout a trace, so that a replay can match a
//! call on them.
//!
//! Which fields: [`Rule`]s, each a [`CallPointer`] (`/args/…` into a
//! `tool.call`'s arguments, `/result/…` into a successful `tool.result`'s
//! result and into the result a `tool.hook` gave in its place), for every
//! tool or one, for every agent or one.
//!
//! A redacted export reads the trace twice ([`crate::ledger::export`]):
//!
//! 1. [`Collector`]: every value a rule names is numbered, in order of first
//!    appearance (frame order, then document order: a value before what it
//!    holds, object members in canonical order), values compared by their
//!    RFC 8785 form. The strings of at least [`MIN_SEARCHED_CHARS`]
//!    characters and the numbers written with at least as many inside a
//!    named object or array are numbered too, right after it.
//! 2. [`Scrubber`]: each frame's payload with the named values replaced by
//!    their placeholders, then every other value of the payload scrubbed
//!    ([`Scrubber::redact`]) but those rlp writes to identify the frame
//!    ([`KEPT`]): a string equal to a numbered one, a number of at least
//!    [`MIN_SEARCHED_CHARS`] characters equal to a numbered one, and an
//!    object or array equal to a numbered one become its placeholder; each
//!    numbered string of at least [`MIN_SEARCHED_CHARS`] characters (as is,
//!    as JSON and as ASCII-only JSON write it inside a string, and
//!    percent-encoded) and each such number's text (where no digit is next
//!    to it) is replaced wherever it appears inside another string, object
//!    keys included.
//!
//! Only the numbering map and each call's tool are kept between frames.

use std::collections::{HashMap, HashSet};

use aho_corasick::{AhoCorasick, Input, MatchKind};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Map, Value};

use crate::bundle::call_pointer::{CallPointer, CallRoot, PointerError, Step};
use crate::bundle::pointer::Segment;
use crate::bundle::tools::is_valid_tool_id;
use crate::event::EventKind;
use crate::event::canonical::canonical_text;
use crate::event::placeholder::{is_placeholder, placeholder};

/// The shortest string (in characters) or number text searched for inside
/// other strings: shorter ones would match where they mean nothing else.
pub const MIN_SEARCHED_CHARS: usize = 4;

/// The members of a payload that rlp writes to identify the frame, its call
/// and its place (ids, tool ids, schema digests, decisions, timings):
/// never scrubbed, so the redacted file reads, replays and diffs as the
/// original does. (`error` keeps its own: [`KEPT_IN_ERROR`].)
pub const KEPT: &[&str] = &[
    "v",
    "invocation_id",
    "tool",
    "attempt",
    "duration_ms",
    "usage",
    "input_schema",
    "input_schema_blake3",
    "result_schema",
    "result_schema_blake3",
    "traceparent",
    "replay",
    "decision",
    "approved",
    "hook",
    "effect",
    "replay_of",
    "mode",
    "recorded_agent",
    "action",
    "ids",
    "server",
    "method",
];

/// The members of a result's `error` rlp reads besides its `message`.
pub const KEPT_IN_ERROR: &[&str] = &["kind", "transient", "retry_after_ms", "status", "will_retry"];

/// Which values to redact: a pointer into calls, for every agent or one,
/// for every tool or one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The agent whose frames it applies to (`None`: every agent).
    pub agent: Option<String>,
    /// The tool whose calls it applies to (`None`: every tool).
    pub tool: Option<String>,
    /// The field.
    pub pointer: CallPointer,
}

impl Rule {
    /// Reads a `--redact` value: `POINTER`, or `TOOL:POINTER` for the calls
    /// of one tool, for every agent.
    pub fn parse(text: &str) -> Result<Rule, PointerError> {
        let (tool, pointer) = match text.split_once(':') {
            Some((tool, pointer)) if !text.starts_with('/') => (Some(tool), pointer),
            _ => (None, text),
        };
        if let Some(tool) = tool
            && !is_valid_tool_id(tool)
        {
            return Err(PointerError {
                message: format!("`{tool}` is not a tool id"),
                help: "write TOOL:POINTER with a tool id of the trace (lowercase names joined by dots), e.g. \
                       mail.send:/args/to, or the pointer alone for every tool"
                    .into(),
            });
        }
        Ok(Rule { agent: None, tool: tool.map(str::to_string), pointer: CallPointer::parse(pointer)? })
    }

    /// Whether the rule applies to the calls of `tool` of `agent`.
    fn covers(&self, agent: &str, tool: &str) -> bool {
        self.agent.as_deref().is_none_or(|a| a == agent) && self.tool.as_deref().is_none_or(|t| t == tool)
    }
}

/// A rule that named no value in the frames exported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unmatched {
    /// Its index among the rules.
    pub rule: usize,
    /// Whether a call the rule covers is among the frames (the pointer
    /// named nothing in it), or there is none.
    pub called: bool,
}

/// What a redacted export did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RedactionReport {
    /// The values numbered (each has its placeholder).
    pub values: u64,
    /// The frames whose payload changed.
    pub frames_changed: u64,
    /// The rules that named nothing, in their order.
    pub unmatched: Vec<Unmatched>,
}

/// One value a rule names: where, and which rules name it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Found {
    path: Vec<Segment>,
    rules: Vec<usize>,
}

/// The keys of `map` in canonical (RFC 8785) order: document order.
fn canonical_keys(map: &Map<String, Value>) -> Vec<&String> {
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort_unstable_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
    keys
}

/// The values of `root` the `pointers` (each a rule's index and the steps
/// left to take) name, in document order, each with the rules naming it.
fn find(root: &Value, pointers: &[(usize, &[Step])]) -> Vec<Found> {
    let mut found = Vec::new();
    find_in(root, pointers, &mut Vec::new(), &mut found);
    found
}

fn find_in(value: &Value, pointers: &[(usize, &[Step])], path: &mut Vec<Segment>, found: &mut Vec<Found>) {
    let here: Vec<usize> = pointers.iter().filter(|(_, steps)| steps.is_empty()).map(|(rule, _)| *rule).collect();
    if !here.is_empty() {
        found.push(Found { path: path.clone(), rules: here });
    }
    match value {
        Value::Object(map) => {
            for key in canonical_keys(map) {
                let inner = advance(pointers, |step| step.matches_key(key));
                if !inner.is_empty() {
                    path.push(Segment::Key(key.clone()));
                    find_in(&map[key.as_str()], &inner, path, found);
                    path.pop();
                }
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                let inner = advance(pointers, |step| step.matches_index(index));
                if !inner.is_empty() {
                    path.push(Segment::Index(index));
                    find_in(item, &inner, path, found);
                    path.pop();
                }
            }
        }
        _ => {}
    }
}

/// The pointers whose next step `matches`, past it.
fn advance<'s>(pointers: &[(usize, &'s [Step])], matches: impl Fn(&Step) -> bool) -> Vec<(usize, &'s [Step])> {
    pointers
        .iter()
        .filter_map(|(rule, steps)| match steps.split_first() {
            Some((step, rest)) if matches(step) => Some((*rule, rest)),
            _ => None,
        })
        .collect()
}

/// The value at `path` inside `root`.
fn value_at<'v>(root: &'v mut Value, path: &[Segment]) -> Option<&'v mut Value> {
    path.iter().try_fold(root, |value, segment| match segment {
        Segment::Key(key) => value.get_mut(key.as_str()),
        Segment::Index(index) => value.get_mut(*index),
    })
}

/// Whether a number or string is searched for inside other strings.
fn searched(value: &Value) -> bool {
    match value {
        Value::String(text) => text.chars().nth(MIN_SEARCHED_CHARS - 1).is_some(),
        Value::Number(_) => canonical_text(value).len() >= MIN_SEARCHED_CHARS,
        _ => false,
    }
}

/// Each redacted value's number, by its RFC 8785 form.
#[derive(Debug, Default)]
struct Numbering {
    numbers: HashMap<String, u64>,
}

impl Numbering {
    /// The number of the value with canonical form `canonical`, given it
    /// the next one if it has none.
    fn number(&mut self, canonical: String) -> u64 {
        let next = self.numbers.len() as u64 + 1;
        *self.numbers.entry(canonical).or_insert(next)
    }

    /// The placeholder of `value`; an object or array has its searched
    /// strings and numbers numbered after it, in document order.
    fn placeholder_of(&mut self, value: &Value) -> String {
        let number = self.number(canonical_text(value));
        if matches!(value, Value::Object(_) | Value::Array(_)) {
            self.number_inside(value);
        }
        placeholder(number)
    }

    fn number_inside(&mut self, value: &Value) {
        match value {
            Value::Object(map) => {
                canonical_keys(map).into_iter().for_each(|key| self.number_inside(&map[key.as_str()]))
            }
            Value::Array(items) => items.iter().for_each(|item| self.number_inside(item)),
            leaf if searched(leaf) => {
                self.number(canonical_text(leaf));
            }
            _ => {}
        }
    }

    /// The placeholder of the value with canonical form `canonical`, if it
    /// has a number.
    fn get(&self, canonical: &str) -> Option<String> {
        self.numbers.get(canonical).map(|n| placeholder(*n))
    }
}

/// The rules and, as the frames go by, the tool of each call (a result or
/// a hook frame is of its call's tool).
#[derive(Debug)]
struct Pointers<'r> {
    rules: &'r [Rule],
    tools: HashMap<String, String>,
}

impl<'r> Pointers<'r> {
    fn new(rules: &'r [Rule]) -> Self {
        Pointers { rules, tools: HashMap::new() }
    }

    /// The call's tool for a `tool.call` frame (which is remembered), a
    /// `tool.result` or a `tool.hook`, and the member the rules start
    /// from in it (none when the frame holds no arguments or result).
    fn tool_and_root(&mut self, kind: &str, payload: &Value) -> Option<(String, CallRoot, &'static str)> {
        let invocation = payload.get("invocation_id").and_then(Value::as_str).unwrap_or_default();
        let own = payload.get("tool").and_then(Value::as_str).unwrap_or_default();
        if kind == EventKind::ToolCall.as_str() {
            self.tools.insert(invocation.to_string(), own.to_string());
            return Some((own.to_string(), CallRoot::Args, "args"));
        }
        if kind != EventKind::ToolResult.as_str() && kind != EventKind::ToolHook.as_str() {
            return None;
        }
        let tool = self.tools.get(invocation).map_or(own, String::as_str);
        Some((tool.to_string(), CallRoot::Result, "result"))
    }

    /// Replaces the values the rules name in `payload` by their
    /// placeholders; returns what was found (empty: the payload is as it was).
    fn apply(&mut self, agent: &str, kind: &str, payload: &mut Value, numbering: &mut Numbering) -> Vec<Found> {
        let Some((tool, root, member)) = self.tool_and_root(kind, payload) else { return Vec::new() };
        let rules = self.rules;
        let pointers: Vec<(usize, &[Step])> = (rules.iter().enumerate())
            .filter(|(_, rule)| rule.pointer.root() == root && rule.covers(agent, &tool))
            .map(|(i, rule)| (i, rule.pointer.steps()))
            .collect();
        let Some(start) = payload.get_mut(member).filter(|_| !pointers.is_empty()) else { return Vec::new() };
        let found = find(start, &pointers);
        let mut replaced: Option<&[Segment]> = None;
        for item in &found {
            // A value inside one already replaced is gone with it.
            if replaced.is_some_and(|outer| item.path.starts_with(outer)) {
                continue;
            }
            if let Some(target) = value_at(start, &item.path) {
                *target = Value::String(numbering.placeholder_of(target));
                replaced = Some(&item.path);
            }
        }
        found
    }
}

/// The first pass: numbers the values the rules name, frame by frame.
#[derive(Debug)]
pub struct Collector<'r> {
    pointers: Pointers<'r>,
    numbering: Numbering,
    matched: Vec<bool>,
    called: HashSet<(String, String)>,
}

impl<'r> Collector<'r> {
    /// A first pass with `rules`.
    pub fn new(rules: &'r [Rule]) -> Self {
        Collector {
            pointers: Pointers::new(rules),
            numbering: Numbering::default(),
            matched: vec![false; rules.len()],
            called: HashSet::new(),
        }
    }

    /// Reads one frame of `agent`: its kind and canonical payload text.
    pub fn frame(&mut self, agent: &str, kind: &str, payload_json: &str) -> Result<(), String> {
        let mut payload = read(payload_json)?;
        if kind == EventKind::ToolCall.as_str() {
            let tool = payload.get("tool").and_then(Value::as_str).unwrap_or_default();
            self.called.insert((agent.to_string(), tool.to_string()));
        }
        for found in self.pointers.apply(agent, kind, &mut payload, &mut self.numbering) {
            found.rules.iter().for_each(|rule| self.matched[*rule] = true);
        }
        Ok(())
    }

    /// The second pass, once every frame was read; an error when the
    /// values are too many or too large to search for.
    pub fn into_scrubber(self) -> Result<Scrubber<'r>, String> {
        let rules = self.pointers.rules;
        let unmatched = (rules.iter().enumerate())
            .filter(|(i, _)| !self.matched[*i])
            .map(|(rule, r)| Unmatched { rule, called: self.called.iter().any(|(agent, tool)| r.covers(agent, tool)) })
            .collect();
        let needles = Needles::of(&self.numbering)?;
        let containers = self.numbering.numbers.keys().any(|k| k.starts_with(['{', '[']));
        Ok(Scrubber {
            pointers: Pointers::new(rules),
            numbering: self.numbering,
            needles,
            containers,
            report: RedactionReport { unmatched, ..RedactionReport::default() },
        })
    }
}

/// Reads a payload text.
fn read(payload_json: &str) -> Result<Value, String> {
    serde_json::from_str(payload_json).map_err(|e| format!("the payload does not read as JSON: {e}"))
}

/// What is searched for inside strings: each text with its placeholder.
#[derive(Debug)]
struct Needles {
    automaton: Option<AhoCorasick>,
    /// By pattern id: the placeholder, and whether the text is a number's
    /// (found only where no digit is next to it).
    replacements: Vec<(String, bool)>,
}

impl Needles {
    /// The needles of the numbered values, the lowest number first.
    fn of(numbering: &Numbering) -> Result<Needles, String> {
        let mut entries: Vec<(&String, &u64)> = numbering.numbers.iter().collect();
        entries.sort_unstable_by_key(|(_, n)| **n);
        let mut patterns = Vec::new();
        let mut replacements = Vec::new();
        for (canonical, number) in entries {
            let Ok(value) = serde_json::from_str::<Value>(canonical) else { continue };
            if !searched(&value) {
                continue;
            }
            let is_number = value.is_number();
            for text in spellings(&value, canonical) {
                patterns.push(text);
                replacements.push((placeholder(*number), is_number));
            }
        }
        if patterns.is_empty() {
            return Ok(Needles { automaton: None, replacements });
        }
        let automaton = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(&patterns)
            .map_err(|e| format!("the {} redacted values cannot be searched for: {e}", replacements.len()))?;
        Ok(Needles { automaton: Some(automaton), replacements })
    }

    /// `text` with every needle in it replaced, when there is one.
    fn replace(&self, text: &str) -> Option<String> {
        let automaton = self.automaton.as_ref()?;
        let (mut out, mut copied, mut at, mut replaced) = (String::new(), 0, 0, false);
        while let Some(found) = automaton.find(Input::new(text).span(at..text.len())) {
            let (placeholder, is_number) = &self.replacements[found.pattern().as_usize()];
            if *is_number && digit_beside(text, found.start(), found.end()) {
                // A number's text is ASCII: the next byte starts a character.
                at = found.start() + 1;
                continue;
            }
            out.push_str(&text[copied..found.start()]);
            out.push_str(placeholder);
            (copied, at, replaced) = (found.end(), found.end(), true);
        }
        replaced.then(|| out + &text[copied..])
    }
}

/// Whether a digit comes right before `start` or right at `end` of `text`
/// (the text there is part of a longer number).
fn digit_beside(text: &str, start: usize, end: usize) -> bool {
    let bytes = text.as_bytes();
    let before = start.checked_sub(1).and_then(|i| bytes.get(i));
    [before, bytes.get(end)].into_iter().flatten().any(u8::is_ascii_digit)
}

/// What percent-encoding leaves as is: the unreserved characters of RFC 3986.
const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// How a searched value is written inside other strings: a number as its
/// text; a string as is, as JSON writes it inside a string (`\"`, `\\`,
/// control characters escaped), as ASCII-only JSON does (`\u00e9`) and
/// percent-encoded (`%40`, as in a URL).
fn spellings(value: &Value, canonical: &str) -> Vec<String> {
    let Value::String(text) = value else { return vec![canonical.to_string()] };
    let mut out = vec![text.clone()];
    let json = &canonical[1..canonical.len() - 1];
    let percent = utf8_percent_encode(text, UNRESERVED).to_string();
    for spelling in [json.to_string(), ascii_json(json), percent] {
        if !out.contains(&spelling) {
            out.push(spelling);
        }
    }
    out
}

/// JSON string content with every non-ASCII character as `\uXXXX` (UTF-16
/// units, lower-case hex), as ASCII-only JSON writers put it.
fn ascii_json(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

/// The second pass: each frame's payload redacted.
#[derive(Debug)]
pub struct Scrubber<'r> {
    pointers: Pointers<'r>,
    numbering: Numbering,
    needles: Needles,
    /// Whether an object or array was numbered (then each one met is
    /// looked up whole).
    containers: bool,
    report: RedactionReport,
}

impl Scrubber<'_> {
    /// The payload of a frame of `agent` (its kind and canonical payload
    /// text) redacted, in canonical form, or `None` when nothing in it
    /// changed.
    pub fn redact(&mut self, agent: &str, kind: &str, payload_json: &str) -> Result<Option<String>, String> {
        let mut payload = read(payload_json)?;
        let named = !self.pointers.apply(agent, kind, &mut payload, &mut self.numbering).is_empty();
        let scrubbed = self.scrub_payload(&mut payload);
        if !(named || scrubbed) {
            return Ok(None);
        }
        self.report.frames_changed += 1;
        Ok(Some(canonical_text(&payload)))
    }

    /// What was done, once every frame was redacted.
    pub fn finish(self) -> RedactionReport {
        RedactionReport { values: self.numbering.numbers.len() as u64, ..self.report }
    }

    /// Scrubs every member of a payload but those rlp writes ([`KEPT`]).
    fn scrub_payload(&self, payload: &mut Value) -> bool {
        let Value::Object(members) = payload else { return self.scrub(payload) };
        let mut changed = false;
        for (key, value) in members.iter_mut().filter(|(key, _)| !KEPT.contains(&key.as_str())) {
            changed |= match (key.as_str(), value) {
                ("error", Value::Object(error)) => {
                    let mut changed = false;
                    for (_, value) in error.iter_mut().filter(|(key, _)| !KEPT_IN_ERROR.contains(&key.as_str())) {
                        changed |= self.scrub(value);
                    }
                    changed
                }
                (_, value) => self.scrub(value),
            };
        }
        changed
    }

    /// Scrubs a value and everything in it; returns whether it changed.
    fn scrub(&self, value: &mut Value) -> bool {
        if let Some(placeholder) = self.whole(value) {
            *value = Value::String(placeholder);
            return true;
        }
        match value {
            Value::String(text) => match self.scrub_text(text) {
                Some(scrubbed) => {
                    *text = scrubbed;
                    true
                }
                None => false,
            },
            Value::Array(items) => items.iter_mut().fold(false, |changed, item| self.scrub(item) | changed),
            Value::Object(members) => self.scrub_members(members),
            _ => false,
        }
    }

    /// The placeholder a whole value is replaced by: a numbered string, a
    /// searched number, or a numbered object or array.
    fn whole(&self, value: &Value) -> Option<String> {
        let looked_up = match value {
            Value::String(_) => true,
            Value::Number(_) => searched(value),
            Value::Array(_) | Value::Object(_) => self.containers,
            _ => false,
        };
        looked_up.then(|| self.numbering.get(&canonical_text(value))).flatten()
    }

    /// A string (not numbered whole) with the needles in it replaced, when
    /// there is one; a placeholder is left as it is.
    fn scrub_text(&self, text: &str) -> Option<String> {
        if is_placeholder(text) {
            return None;
        }
        self.needles.replace(text)
    }

    /// Scrubs the members of an object, and its keys as strings.
    fn scrub_members(&self, members: &mut Map<String, Value>) -> bool {
        let mut changed = members.values_mut().fold(false, |changed, value| self.scrub(value) | changed);
        let keys: Vec<Option<String>> = members
            .keys()
            .map(|key| self.whole(&Value::String(key.clone())).or_else(|| self.scrub_text(key)))
            .collect();
        if keys.iter().any(Option::is_some) {
            let old = std::mem::take(members);
            for ((key, value), scrubbed) in old.into_iter().zip(keys) {
                members.insert(scrubbed.unwrap_or(key), value);
            }
            changed = true;
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const CALL: &str = EventKind::ToolCall.as_str();
    const RESULT: &str = EventKind::ToolResult.as_str();

    fn rules(texts: &[&str]) -> Vec<Rule> {
        texts.iter().map(|t| Rule::parse(t).unwrap()).collect()
    }

    fn steps(pointer: &CallPointer) -> (usize, &[Step]) {
        (0, pointer.steps())
    }

    fn paths(found: &[Found]) -> Vec<String> {
        found
            .iter()
            .map(|f| {
                f.path
                    .iter()
                    .map(|s| match s {
                        Segment::Key(k) => format!("/{k}"),
                        Segment::Index(i) => format!("/{i}"),
                    })
                    .collect()
            })
            .collect()
    }

    /// Both passes over `frames` (kind, payload), all of agent `a`: the
    /// redacted payloads (unchanged ones as they were) and the report.
    fn redact_all(rules: &[Rule], frames: &[(&str, Value)]) -> (Vec<Value>, RedactionReport) {
        let texts: Vec<String> = frames.iter().map(|(_, p)| canonical_text(p)).collect();
        let mut collector = Collector::new(rules);
        for ((kind, _), text) in frames.iter().zip(&texts) {
            collector.frame("a", kind, text).unwrap();
        }
        let mut scrubber = collector.into_scrubber().unwrap();
        let out = frames
            .iter()
            .zip(&texts)
            .map(|((kind, _), text)| {
                let redacted = scrubber.redact("a", kind, text).unwrap();
                serde_json::from_str(redacted.as_deref().unwrap_or(text)).unwrap()
            })
            .collect();
        (out, scrubber.finish())
    }

    #[test]
    fn a_rule_names_one_tool_or_every_tool() {
        let rule = Rule::parse("mail.send:/args/to").unwrap();
        assert_eq!((rule.tool.as_deref(), rule.pointer.as_str()), (Some("mail.send"), "/args/to"));
        assert!(rule.covers("any", "mail.send") && !rule.covers("any", "mail.read"));
        let rule = Rule::parse("/args/a:b").unwrap();
        assert_eq!((rule.tool, rule.pointer.as_str()), (None, "/args/a:b"));
        let e = Rule::parse("Mail.Send:/args/to").unwrap_err();
        assert_eq!(e.message, "`Mail.Send` is not a tool id");
        let e = Rule::parse("mail.send:args/to").unwrap_err();
        assert_eq!(e.message, "`args/to` does not start with /args or /result");
        let e = Rule::parse("mail.send").unwrap_err();
        assert_eq!(e.message, "`mail.send` does not start with /args or /result");
    }

    #[test]
    fn wildcards_walk_objects_and_arrays_in_document_order() {
        let value = json!({"messages": [{"from": "b", "to": "x"}, {"from": "a"}, 3], "zeta": {"from": 1}, "alpha": {"from": 2}});
        let p = CallPointer::parse("/result/messages/*/from").unwrap();
        assert_eq!(paths(&find(&value, &[steps(&p)])), ["/messages/0/from", "/messages/1/from"]);
        let p = CallPointer::parse("/result/*/from").unwrap();
        assert_eq!(paths(&find(&value, &[steps(&p)])), ["/alpha/from", "/zeta/from"]);
        let p = CallPointer::parse("/result/messages/1").unwrap();
        assert_eq!(paths(&find(&value, &[steps(&p)])), ["/messages/1"]);
        let p = CallPointer::parse("/result/*/*").unwrap();
        assert_eq!(
            paths(&find(&value, &[steps(&p)])),
            ["/alpha/from", "/messages/0", "/messages/1", "/messages/2", "/zeta/from"]
        );
        let p = CallPointer::parse("/result").unwrap();
        assert_eq!(paths(&find(&value, &[steps(&p)])), [""]);
        let p = CallPointer::parse("/result/messages/01").unwrap();
        assert!(find(&value, &[steps(&p)]).is_empty());
        // Two pointers, one inside the other: both named, the outer first.
        let outer = CallPointer::parse("/result/messages").unwrap();
        let inner = CallPointer::parse("/result/messages/*/to").unwrap();
        let found = find(&value, &[(0, outer.steps()), (1, inner.steps())]);
        assert_eq!(paths(&found), ["/messages", "/messages/0/to"]);
        assert_eq!((found[0].rules.clone(), found[1].rules.clone()), (vec![0], vec![1]));
    }

    #[test]
    fn values_are_numbered_in_order_of_first_appearance_and_reused() {
        let rules = rules(&["/args/to", "/result/*/from", "mail.read:/result/count"]);
        let frames = [
            (CALL, json!({"invocation_id": "i1", "tool": "mail.read", "args": {"to": "ada@example.com"}})),
            (
                RESULT,
                json!({"invocation_id": "i1", "tool": "mail.read", "result": {
                    "b": {"from": "bob@example.com"}, "a": {"from": "ada@example.com"}, "count": 12345}}),
            ),
            (
                CALL,
                json!({"invocation_id": "i2", "tool": "mail.send", "args": {"to": "bob@example.com", "count": 12345}}),
            ),
            (RESULT, json!({"invocation_id": "i2", "tool": "mail.send", "result": {"count": 7, "x": {"from": null}}})),
        ];
        let (out, report) = redact_all(&rules, &frames);
        assert_eq!(out[0]["args"], json!({"to": "<redacted:1>"}));
        assert_eq!(
            out[1]["result"],
            json!({"a": {"from": "<redacted:1>"}, "b": {"from": "<redacted:2>"}, "count": "<redacted:3>"})
        );
        // Not named here, but the same values: scrubbed whole.
        assert_eq!(out[2]["args"], json!({"to": "<redacted:2>", "count": "<redacted:3>"}));
        // mail.read's rule does not cover mail.send; null is a value too.
        assert_eq!(out[3]["result"], json!({"count": 7, "x": {"from": "<redacted:4>"}}));
        assert_eq!(report, RedactionReport { values: 4, frames_changed: 4, unmatched: vec![] });
    }

    #[test]
    fn objects_and_arrays_become_one_placeholder_and_their_strings_are_searched_too() {
        let rules = rules(&["/result/address", "/args/tags"]);
        let address = json!({"city": "Oslo", "street": "1 Main St", "zip": 150});
        let frames = [
            (CALL, json!({"invocation_id": "i1", "tool": "t", "args": {"tags": ["x", "y"]}})),
            (
                RESULT,
                json!({"invocation_id": "i1", "tool": "t", "result": {"address": address},
                       "content": [{"type": "text", "text": "{\"address\": {\"city\": \"Oslo\", \"street\": \"1 Main St\", \"zip\": 150}}"}]}),
            ),
            (
                CALL,
                json!({"invocation_id": "i2", "tool": "t", "args": {"again": address, "tags": "none", "t": ["x", "y"]}}),
            ),
        ];
        let (out, report) = redact_all(&rules, &frames);
        assert_eq!(out[0]["args"]["tags"], "<redacted:1>");
        assert_eq!(out[1]["result"]["address"], "<redacted:2>");
        assert_eq!(
            out[1]["content"][0]["text"],
            "{\"address\": {\"city\": \"<redacted:3>\", \"street\": \"<redacted:4>\", \"zip\": 150}}"
        );
        assert_eq!(out[2]["args"], json!({"again": "<redacted:2>", "tags": "<redacted:5>", "t": "<redacted:1>"}));
        assert_eq!(report.values, 5);
    }

    #[test]
    fn strings_are_scrubbed_everywhere_but_in_what_rlp_writes() {
        let rules = rules(&["/args/to", "/args/id", "/args/cc"]);
        let frames = [
            (
                EventKind::CapAudit.as_str(),
                json!({"invocation_id": "i1", "tool": "mail.send", "capability": "exec", "decision": "allow",
                       "reason": "to ada@example.com"}),
            ),
            (
                CALL,
                json!({"invocation_id": "i1", "tool": "mail.send", "args": {"to": "ada@example.com", "id": 48213,
                       "cc": "Zoë \"Z\"", "body": "Hi ada@example.com, re 48213 (not 148213), cc Zoë \"Z\""},
                       "tags": ["to=ada@example.com"], "input_schema_blake3": "00482130"}),
            ),
            (
                RESULT,
                json!({"invocation_id": "i1", "tool": "mail.send", "attempt": 1, "duration_ms": 48213,
                       "error": {"message": "no mailbox ada@example.com", "kind": "tool", "detail": {"ada@example.com": 1}},
                       "content": [{"type": "text", "text": "{\"cc\": \"Zo\\u00eb \\\"Z\\\"\", \"id\": 48213}"}]}),
            ),
            (
                EventKind::ToolInquiry.as_str(),
                json!({"invocation_id": "i1", "tool": "mail.send", "questions": [{"id": "q", "default": "ada@example.com"}],
                       "url": "https://api.example/find?to=ada%40example.com"}),
            ),
        ];
        let (out, report) = redact_all(&rules, &frames);
        // In document order (canonical: body, cc, id, to): cc 1, id 2, to 3.
        assert_eq!(out[0]["reason"], "to <redacted:3>");
        assert_eq!(out[0]["capability"], "exec");
        assert_eq!(
            out[1]["args"],
            json!({"to": "<redacted:3>", "id": "<redacted:2>", "cc": "<redacted:1>",
                   "body": "Hi <redacted:3>, re <redacted:2> (not 148213), cc <redacted:1>"})
        );
        assert_eq!(out[1]["tags"], json!(["to=<redacted:3>"]));
        assert_eq!(out[1]["input_schema_blake3"], "00482130");
        assert_eq!(out[2]["duration_ms"], 48213);
        assert_eq!(
            out[2]["error"],
            json!({"message": "no mailbox <redacted:3>", "kind": "tool", "detail": {"<redacted:3>": 1}})
        );
        assert_eq!(out[2]["content"][0]["text"], "{\"cc\": \"<redacted:1>\", \"id\": <redacted:2>}");
        assert_eq!(out[3]["questions"][0]["default"], "<redacted:3>");
        assert_eq!(out[3]["url"], "https://api.example/find?to=<redacted:3>");
        assert_eq!(report.frames_changed, 4);
    }

    #[test]
    fn short_values_are_replaced_only_whole() {
        let rules = rules(&["/args/country", "/args/n"]);
        let frames = [
            (CALL, json!({"invocation_id": "i1", "tool": "t", "args": {"country": "US", "n": 12, "note": "US 12"}})),
            (RESULT, json!({"invocation_id": "i1", "tool": "t", "result": {"c": "US", "n": 12}})),
        ];
        let (out, _) = redact_all(&rules, &frames);
        assert_eq!(out[0]["args"], json!({"country": "<redacted:1>", "n": "<redacted:2>", "note": "US 12"}));
        assert_eq!(out[1]["result"], json!({"c": "<redacted:1>", "n": 12}));
    }

    #[test]
    fn a_result_or_hook_frame_is_of_its_calls_tool_and_rules_report_what_they_missed() {
        let rules = vec![
            Rule::parse("mail.read:/result/from").unwrap(),
            Rule::parse("/args/missing").unwrap(),
            Rule { agent: Some("other".into()), ..Rule::parse("/args/to").unwrap() },
            Rule::parse("cal.list:/args/x").unwrap(),
        ];
        let frames = [
            (CALL, json!({"invocation_id": "i1", "tool": "mail.read", "args": {"to": "x"}})),
            (
                EventKind::ToolHook.as_str(),
                json!({"invocation_id": "i1", "tool": "", "hook": "h", "effect": "replaced", "result": {"from": "eve@example.com"}}),
            ),
            (RESULT, json!({"invocation_id": "i1", "result": {"from": "ada@example.com"}})),
        ];
        let (out, report) = redact_all(&rules, &frames);
        assert_eq!(out[1]["result"]["from"], "<redacted:1>");
        assert_eq!(out[2]["result"]["from"], "<redacted:2>");
        assert_eq!(out[0]["args"]["to"], "x");
        assert_eq!(
            report.unmatched,
            [
                Unmatched { rule: 1, called: true },
                Unmatched { rule: 2, called: false },
                Unmatched { rule: 3, called: false }
            ]
        );
    }

    #[test]
    fn redacting_twice_gives_the_same_text() {
        let rules = rules(&["/args/to"]);
        let frames = [(
            CALL,
            json!({"invocation_id": "i1", "tool": "t", "args": {"to": "ada@example.com", "z": "<redacted:9>"}}),
        )];
        let (once, _) = redact_all(&rules, &frames);
        let (twice, _) = redact_all(&rules, &frames);
        assert_eq!(canonical_text(&once[0]), canonical_text(&twice[0]));
        assert_eq!(once[0]["args"]["z"], "<redacted:9>");
        // Nothing to do: no frame changes.
        let (same, report) = redact_all(&[], &frames);
        assert_eq!((same[0].clone(), report.frames_changed), (frames[0].1.clone(), 0));
    }
}
