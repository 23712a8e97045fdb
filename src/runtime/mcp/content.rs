//! What the ledger keeps of an MCP server's content: content blocks (text,
//! image, audio, embedded resources, resource links) and resource contents
//! are recorded as sent, except that binary data longer than [`INLINE_BYTES`]
//! (an image's or audio's `data`, a resource's `blob`, base64) is recorded
//! by its BLAKE3 digest and size instead: `"data"` becomes
//! `"data_blake3"` and `"data_bytes"` (and `"blob"` `"blob_blake3"` and
//! `"blob_bytes"`), the size being that of the decoded bytes. The client of
//! the call gets the content whole; a trace says what it got, and proves it
//! by digest, without holding every screenshot a server sent.

use serde_json::{Map, Value};

/// Longest base64 text of one binary field kept inline in a frame (48 KiB
/// of data).
pub(crate) const INLINE_BYTES: usize = 64 * 1024;

/// `blocks` (content blocks) as the ledger records them.
pub(crate) fn recorded_blocks(blocks: &[Value]) -> Vec<Value> {
    blocks.iter().map(recorded_block).collect()
}

/// One content block as the ledger records it: an image's or audio's
/// `data`, an embedded resource's `blob`, past the bound, by digest.
fn recorded_block(block: &Value) -> Value {
    let mut block = block.clone();
    if let Some(fields) = block.as_object_mut() {
        bound_field(fields, "data");
        if let Some(resource) = fields.get_mut("resource").and_then(Value::as_object_mut) {
            bound_field(resource, "blob");
        }
    }
    block
}

/// The contents of a `resources/read` answer (`{"contents": [...]}`) as the
/// ledger records them: each `blob` past the bound by digest.
pub(crate) fn recorded_contents(answer: &Value) -> Value {
    let mut answer = answer.clone();
    if let Some(contents) = answer.get_mut("contents").and_then(Value::as_array_mut) {
        for content in contents.iter_mut().filter_map(Value::as_object_mut) {
            bound_field(content, "blob");
        }
    }
    answer
}

/// A prompt's messages (`{"messages": [{"role", "content"}]}`) as the
/// ledger records them: each message's content block bounded.
pub(crate) fn recorded_messages(answer: &Value) -> Value {
    let mut answer = answer.clone();
    if let Some(messages) = answer.get_mut("messages").and_then(Value::as_array_mut) {
        for message in messages.iter_mut().filter_map(Value::as_object_mut) {
            if let Some(content) = message.get_mut("content") {
                let recorded = match &*content {
                    Value::Array(blocks) => Value::Array(recorded_blocks(blocks)),
                    block => recorded_block(block),
                };
                *content = recorded;
            }
        }
    }
    answer
}

/// A tool's result as the ledger records it: rlp's form of a server's
/// content blocks (`{"content": [...]}`) bounded, anything else as is.
pub(crate) fn recorded_result(result: &Value) -> Value {
    match result.as_object() {
        Some(only) if only.len() == 1 => match only.get("content") {
            Some(Value::Array(blocks)) => serde_json::json!({ "content": recorded_blocks(blocks) }),
            _ => result.clone(),
        },
        _ => result.clone(),
    }
}

/// Replaces `fields[name]`, a base64 string longer than [`INLINE_BYTES`],
/// by `<name>_blake3` and `<name>_bytes`.
fn bound_field(fields: &mut Map<String, Value>, name: &str) {
    let Some(Value::String(text)) = fields.get(name) else { return };
    if text.len() <= INLINE_BYTES {
        return;
    }
    let digest = blake3::hash(text.as_bytes()).to_hex().to_string();
    let bytes = decoded_len(text);
    fields.remove(name);
    fields.insert(format!("{name}_blake3"), Value::String(digest));
    fields.insert(format!("{name}_bytes"), Value::from(bytes));
}

/// The length of what the base64 `text` decodes to (its padding aside).
pub(crate) fn decoded_len(text: &str) -> usize {
    let padding = text.bytes().rev().take_while(|b| *b == b'=').count().min(2);
    (text.len() / 4 * 3).saturating_sub(padding)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn small_data_stays_and_large_data_is_recorded_by_digest() {
        let small = json!({"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="});
        assert_eq!(recorded_blocks(std::slice::from_ref(&small)), vec![small]);
        let big = "QUFB".repeat(INLINE_BYTES / 4 + 1);
        let block = json!({"type": "audio", "mimeType": "audio/wav", "data": big});
        let recorded = &recorded_blocks(&[block])[0];
        assert_eq!(recorded["data_bytes"], json!((INLINE_BYTES / 4 + 1) * 3));
        assert_eq!(recorded["data_blake3"], json!(blake3::hash(big.as_bytes()).to_hex().to_string()));
        assert!(recorded.get("data").is_none());
        assert_eq!(recorded["mimeType"], "audio/wav");
    }

    #[test]
    fn blobs_of_embedded_resources_and_read_contents_are_bounded() {
        let big = format!("{}==", "A".repeat(INLINE_BYTES + 2));
        let embedded = json!({"type": "resource", "resource": {"uri": "test://b", "blob": big}});
        let recorded = &recorded_blocks(&[embedded])[0];
        assert_eq!(recorded["resource"]["uri"], "test://b");
        assert!(recorded["resource"].get("blob").is_none());
        assert_eq!(recorded["resource"]["blob_bytes"], json!((INLINE_BYTES + 4) / 4 * 3 - 2));
        let read = json!({"contents": [{"uri": "test://b", "blob": big}, {"uri": "test://t", "text": "hi"}]});
        let recorded = recorded_contents(&read);
        assert!(recorded["contents"][0].get("blob_blake3").is_some());
        assert_eq!(recorded["contents"][1], json!({"uri": "test://t", "text": "hi"}));
    }

    #[test]
    fn results_other_than_content_blocks_are_recorded_as_they_are() {
        let structured = json!({"content": "not blocks", "n": 1});
        assert_eq!(recorded_result(&structured), structured);
        let prompt = json!({"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}]});
        assert_eq!(recorded_messages(&prompt), prompt);
    }
}
