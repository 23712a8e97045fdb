//! The questions a tool asks (`needs_input`, docs/runtime.md "Questions"):
//! what a question may be, and whether an answer fits it.
//!
//! A question's `schema` is the flat subset of JSON Schema that MCP
//! elicitation allows: one `string` (optional `format` email, uri, date or
//! date-time, `enum`, `minLength`/`maxLength`), `number` or `integer`
//! (`minimum`/`maximum`), or `boolean`. No schema means a string. Answers
//! are checked by the schema validator itself (formats included).

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

/// Most questions one round may ask.
pub const MAX_QUESTIONS: usize = 32;
/// Longest question id.
const MAX_ID_LEN: usize = 64;
/// Longest question text kept.
const MAX_TEXT_LEN: usize = 1024;
/// Words that make a question id look like it asks for a secret.
const SECRET_WORDS: &[&str] = &["password", "passwd", "passphrase", "token", "secret", "api_key", "apikey"];
/// The `format`s a string question may have.
const FORMATS: &[&str] = &["email", "uri", "date", "date-time"];
/// The keywords each type of question may use (besides `type`, `title`,
/// `description` and `default`).
const STRING_KEYWORDS: &[&str] = &["format", "enum", "enumNames", "minLength", "maxLength"];
const NUMBER_KEYWORDS: &[&str] = &["minimum", "maximum"];
const NOTE_KEYWORDS: &[&str] = &["type", "title", "description", "default"];

/// The type of answer a question wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnswerType {
    /// A string.
    Text,
    /// A number.
    Number,
    /// An integer.
    Integer,
    /// true or false.
    Boolean,
}

impl AnswerType {
    /// How the type reads in messages: `a string`, `an integer`…
    pub fn described(self) -> &'static str {
        match self {
            AnswerType::Text => "a string",
            AnswerType::Number => "a number",
            AnswerType::Integer => "an integer",
            AnswerType::Boolean => "true or false",
        }
    }
}

/// One checked question.
#[derive(Debug)]
pub struct Question {
    /// Its id, the key of its answer.
    pub id: String,
    /// What the tool asks.
    pub text: String,
    /// The type of answer.
    pub answer_type: AnswerType,
    /// The allowed answers, for a string with an `enum`.
    pub choices: Option<Vec<String>>,
    /// The default answer, if the tool gave one that fits.
    pub default: Option<Value>,
    /// The question object as the tool wrote it (recorded as is).
    pub raw: Value,
    validator: jsonschema::Validator,
}

/// Reads the questions of one `needs_input` envelope; the error says which
/// question is wrong and why (the tool's fault).
pub fn read_questions(values: &[Value]) -> Result<Vec<Question>, String> {
    if values.len() > MAX_QUESTIONS {
        return Err(format!("it asked {} questions at once; rlp takes at most {MAX_QUESTIONS}", values.len()));
    }
    let mut seen = BTreeSet::new();
    let mut questions = Vec::with_capacity(values.len());
    for (index, value) in values.iter().enumerate() {
        let question = read_question(value).map_err(|why| format!("question {} {why}", index + 1))?;
        if !seen.insert(question.id.clone()) {
            return Err(format!("question id `{}` is asked twice", question.id));
        }
        questions.push(question);
    }
    Ok(questions)
}

/// Whether a question id looks like it asks for a secret (docs/runtime.md:
/// secrets come from the secret resolver, never from answers).
pub fn looks_secret(id: &str) -> bool {
    let lower = id.to_ascii_lowercase();
    SECRET_WORDS.iter().any(|word| lower.contains(word))
}

fn read_question(value: &Value) -> Result<Question, String> {
    let Value::Object(members) = value else { return Err("is not an object".to_string()) };
    let id = match members.get("id") {
        Some(Value::String(id)) if valid_id(id) => id.clone(),
        Some(Value::String(id)) => {
            return Err(format!(
                "has the id `{}`, which is not a name (a letter, then letters, digits, `_`, `-` or `.`; at most {MAX_ID_LEN} characters)",
                crate::text::ellipsize(id, MAX_ID_LEN)
            ));
        }
        _ => return Err("has no string `id`".to_string()),
    };
    let text = match members.get("text") {
        Some(Value::String(text)) => text.chars().take(MAX_TEXT_LEN).collect(),
        None => id.clone(),
        Some(_) => return Err(format!("`{id}` has a `text` that is not a string")),
    };
    let schema = match members.get("schema") {
        None | Some(Value::Null) => json!({"type": "string"}),
        Some(schema @ Value::Object(_)) => schema.clone(),
        Some(_) => return Err(format!("`{id}` has a `schema` that is not an object")),
    };
    let (answer_type, choices) = read_schema(&schema).map_err(|why| format!("`{id}`: its schema {why}"))?;
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .map_err(|e| format!("`{id}`: its schema does not compile: {e}"))?;
    let default = members.get("default").or_else(|| schema.get("default")).filter(|d| validator.is_valid(d)).cloned();
    Ok(Question { id, text, answer_type, choices, default, raw: value.clone(), validator })
}

fn valid_id(id: &str) -> bool {
    let mut chars = id.chars();
    id.len() <= MAX_ID_LEN
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// The answer type and choices of a flat elicitation schema.
fn read_schema(schema: &Value) -> Result<(AnswerType, Option<Vec<String>>), String> {
    let members = schema.as_object().map(Map::iter).into_iter().flatten();
    let kind = match schema.get("type").and_then(Value::as_str) {
        Some("string") => AnswerType::Text,
        Some("number") => AnswerType::Number,
        Some("integer") => AnswerType::Integer,
        Some("boolean") => AnswerType::Boolean,
        Some(other) => {
            return Err(format!("has the type `{other}`; a question takes string, number, integer or boolean"));
        }
        None => return Err("has no `type`".to_string()),
    };
    let allowed: &[&str] = match kind {
        AnswerType::Text => STRING_KEYWORDS,
        AnswerType::Number | AnswerType::Integer => NUMBER_KEYWORDS,
        AnswerType::Boolean => &[],
    };
    for (keyword, _) in members {
        if !allowed.contains(&keyword.as_str()) && !NOTE_KEYWORDS.contains(&keyword.as_str()) {
            return Err(format!("uses `{keyword}`, which a flat question schema of its type does not allow"));
        }
    }
    if let Some(format) = schema.get("format")
        && !format.as_str().is_some_and(|f| FORMATS.contains(&f))
    {
        return Err(format!("has the format {format}; a question takes {}", FORMATS.join(", ")));
    }
    let choices = match schema.get("enum") {
        None => None,
        Some(Value::Array(items)) if !items.is_empty() => Some(
            items
                .iter()
                .map(|item| item.as_str().map(str::to_string).ok_or("has an `enum` entry that is not a string"))
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(_) => return Err("has an `enum` that is not a non-empty array".to_string()),
    };
    Ok((kind, choices))
}

impl Question {
    /// Checks `value` as the answer; the error says what is expected.
    pub fn check(&self, value: &Value) -> Result<(), String> {
        if self.validator.is_valid(value) {
            return Ok(());
        }
        let why = self.validator.iter_errors(value).next().map(|e| e.to_string()).unwrap_or_default();
        Err(format!("{why} (question `{}` wants {})", self.id, self.expected()))
    }

    /// Reads an answer typed as text (a terminal, `--answer ID=TEXT`): a
    /// string question takes the text as it is (a JSON string literal is
    /// unquoted), other types read it as JSON (`yes`/`no` as booleans too).
    pub fn read_text(&self, text: &str) -> Value {
        let trimmed = text.trim();
        let json = serde_json::from_str::<Value>(trimmed).ok();
        match self.answer_type {
            AnswerType::Text => match json {
                Some(Value::String(s)) if trimmed.starts_with('"') => Value::String(s),
                _ => Value::String(text.to_string()),
            },
            AnswerType::Boolean => match trimmed.to_ascii_lowercase().as_str() {
                "y" | "yes" => Value::Bool(true),
                "n" | "no" => Value::Bool(false),
                _ => json.unwrap_or_else(|| Value::String(text.to_string())),
            },
            AnswerType::Number | AnswerType::Integer => json.unwrap_or_else(|| Value::String(text.to_string())),
        }
    }

    /// What an answer must be, in words: `a string, one of a, b`.
    pub fn expected(&self) -> String {
        let mut text = self.answer_type.described().to_string();
        if let Some(choices) = &self.choices {
            text.push_str(&format!(", one of {}", choices.join(", ")));
        }
        if let Some(format) = self.raw.pointer("/schema/format").and_then(Value::as_str) {
            text.push_str(&format!(" ({format})"));
        }
        let bounds = [
            ("minimum", "at least"),
            ("maximum", "at most"),
            ("minLength", "length at least"),
            ("maxLength", "length at most"),
        ];
        for (keyword, words) in bounds {
            if let Some(bound) = self.raw.pointer(&format!("/schema/{keyword}")) {
                text.push_str(&format!(", {words} {bound}"));
            }
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(value: Value) -> Result<Question, String> {
        read_questions(&[value]).map(|mut q| q.remove(0))
    }

    #[test]
    fn reads_flat_schemas_and_checks_answers() {
        let q = one(
            json!({"id": "tone", "text": "Which tone?", "schema": {"type": "string", "enum": ["formal", "casual"]}}),
        )
        .unwrap();
        assert_eq!(q.expected(), "a string, one of formal, casual");
        assert!(q.check(&json!("formal")).is_ok());
        let err = q.check(&json!("rude")).unwrap_err();
        assert!(err.ends_with("(question `tone` wants a string, one of formal, casual)"), "{err}");
        let n = one(json!({"id": "count", "schema": {"type": "integer", "minimum": 1, "maximum": 5}, "default": 2}))
            .unwrap();
        assert_eq!(n.text, "count");
        assert_eq!(n.default, Some(json!(2)));
        assert!(n.check(&json!(3)).is_ok());
        assert!(n.check(&json!(9)).is_err());
        assert!(n.check(&json!(2.5)).is_err());
        assert_eq!(n.read_text("4"), json!(4));
        let when = one(json!({"id": "when", "schema": {"type": "string", "format": "date"}})).unwrap();
        assert!(when.check(&json!("2026-11-24")).is_ok());
        assert!(when.check(&json!("next tuesday")).is_err());
        let b = one(json!({"id": "ok", "schema": {"type": "boolean"}})).unwrap();
        assert_eq!(b.read_text("yes"), json!(true));
        assert_eq!(b.read_text("false"), json!(false));
        let s = one(json!({"id": "name"})).unwrap();
        assert_eq!(s.read_text("42"), json!("42"));
        assert_eq!(s.read_text("\"quoted\""), json!("quoted"));
    }

    #[test]
    fn refuses_what_is_not_a_flat_question() {
        assert_eq!(one(json!({"text": "?"})).unwrap_err(), "question 1 has no string `id`");
        assert!(one(json!({"id": "9lives"})).unwrap_err().contains("not a name"));
        assert!(one(json!({"id": "a", "schema": {"type": "object"}})).unwrap_err().contains("type `object`"));
        assert!(
            one(json!({"id": "a", "schema": {"type": "string", "pattern": "x"}})).unwrap_err().contains("`pattern`")
        );
        assert!(
            one(json!({"id": "a", "schema": {"type": "string", "format": "ipv4"}})).unwrap_err().contains("format")
        );
        let twice = read_questions(&[json!({"id": "a"}), json!({"id": "a"})]).unwrap_err();
        assert_eq!(twice, "question id `a` is asked twice");
        assert!(looks_secret("smtp_Password") && looks_secret("api_token") && !looks_secret("recipient"));
    }
}
