//! Fuzzes what rlp reads from a tool's stdout: any bytes as an outcome
//! envelope, and the questions of a `needs_input` one, each checked against
//! answers made of the same bytes. Nothing may panic; what is accepted must
//! hold:
//!
//! - a `usage` has a non-negative finite `usd`;
//! - a `needs_input` envelope has at least one question, and the questions
//!   read back have distinct, well-formed ids, at most `MAX_QUESTIONS`;
//! - a question's default (when kept) is an answer that fits it.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rlp::runtime::envelope::{Outcome, Stdout, parse};
use rlp::runtime::questions::{MAX_QUESTIONS, read_questions};

fuzz_target!(|data: &[u8]| {
    let Stdout::Envelope(outcome) = parse(data) else { return };
    match outcome {
        Outcome::Success { usage: Some(usage), .. } => {
            assert!(usage.usd.is_none_or(|usd| usd.is_finite() && usd >= 0.0), "{usage:?}");
        }
        Outcome::NeedsInput { questions } => {
            assert!(!questions.is_empty());
            let Ok(read) = read_questions(&questions) else { return };
            assert!(read.len() <= MAX_QUESTIONS);
            let mut ids: Vec<&str> = read.iter().map(|q| q.id.as_str()).collect();
            ids.sort_unstable();
            ids.dedup();
            assert_eq!(ids.len(), read.len(), "question ids are distinct");
            let text = String::from_utf8_lossy(data);
            for question in &read {
                assert!(question.id.starts_with(|c: char| c.is_ascii_alphabetic()));
                if let Some(default) = &question.default {
                    assert!(question.check(default).is_ok(), "a kept default fits its question");
                }
                let _ = question.check(&question.read_text(&text));
                let _ = question.expected();
            }
        }
        _ => {}
    }
});
