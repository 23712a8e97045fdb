//! Reading a payload object into its type with messages that name the
//! field: `the payload has no `tool``, `the payload's `tool` is not a string`.
//!
//! [`read`] hands the payload's members to the type's derived
//! `Deserialize` one by one, so a missing field is reported by name and a
//! field's own error is prefixed with it; the helpers below are the
//! `deserialize_with` functions the payload types use to say what is wrong
//! with one value. Fields that rlp records but does not read back are read
//! with [`lenient`]: a value of another type there is ignored, as it always
//! was.

use std::fmt;

use serde::de::value::{MapAccessDeserializer, StringDeserializer};
use serde::de::{DeserializeOwned, DeserializeSeed, Error as _, IntoDeserializer, MapAccess};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use uuid::Uuid;

/// What is wrong with a payload, in words.
#[derive(Debug)]
struct FieldError(String);

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FieldError {}

impl serde::de::Error for FieldError {
    fn custom<T: fmt::Display>(message: T) -> Self {
        FieldError(message.to_string())
    }

    fn missing_field(field: &'static str) -> Self {
        FieldError(format!("the payload has no `{field}`"))
    }
}

/// The members of a payload object, handed out one at a time.
struct Fields {
    members: serde_json::map::IntoIter,
    current: Option<(String, Value)>,
}

impl<'de> MapAccess<'de> for Fields {
    type Error = FieldError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, FieldError> {
        let Some((key, value)) = self.members.next() else { return Ok(None) };
        let deserializer: StringDeserializer<FieldError> = key.clone().into_deserializer();
        let key_value = seed.deserialize(deserializer)?;
        self.current = Some((key, value));
        Ok(Some(key_value))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, FieldError> {
        let (key, value) = self.current.take().unwrap_or_default();
        seed.deserialize(value).map_err(|e| FieldError(format!("the payload's `{key}` {e}")))
    }
}

/// Reads a payload object as `T`; the error names the field at fault.
pub(crate) fn read<T: DeserializeOwned>(payload: Value) -> Result<T, String> {
    let Value::Object(members) = payload else {
        return Err("the payload is not a JSON object".into());
    };
    let fields = Fields { members: Map::into_iter(members), current: None };
    T::deserialize(MapAccessDeserializer::new(fields)).map_err(|e| e.0)
}

/// A string.
pub(crate) fn text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    match Value::deserialize(d)? {
        Value::String(text) => Ok(text),
        _ => Err(D::Error::custom("is not a string")),
    }
}

/// A UUID, written as a string.
pub(crate) fn uuid<'de, D: Deserializer<'de>>(d: D) -> Result<Uuid, D::Error> {
    let text = text(d)?;
    Uuid::parse_str(&text).map_err(|_| D::Error::custom(format!("(`{text}`) is not a UUID")))
}

/// A non-negative integer, or nothing (`null`).
pub(crate) fn count<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        value => value.as_u64().map(Some).ok_or_else(|| D::Error::custom("is not a non-negative integer")),
    }
}

/// The first attempt, for a result that does not say which it was.
pub(crate) fn first_attempt() -> u64 {
    1
}

/// An attempt number (the first when `null`).
pub(crate) fn attempt<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    Ok(count(d)?.unwrap_or_else(first_attempt))
}

/// `true` or `false`.
pub(crate) fn flag<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Value::deserialize(d)?.as_bool().ok_or_else(|| D::Error::custom("is not true or false"))
}

/// A list of strings (empty when `null`): tags, tool ids.
pub(crate) fn tags<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items
            .into_iter()
            .map(|item| match item {
                Value::String(tag) => Ok(tag),
                _ => Err(D::Error::custom("holds a non-string")),
            })
            .collect(),
        _ => Err(D::Error::custom("is not an array")),
    }
}

/// A value of type `T`, or `T`'s default when the value is of another type.
pub(crate) fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned + Default>(d: D) -> Result<T, D::Error> {
    Ok(T::deserialize(Value::deserialize(d)?).unwrap_or_default())
}
