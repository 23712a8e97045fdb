//! Asking a person during a call: whether it may go ahead (confirmation of
//! external actions), and the questions its tool asks.
//!
//! The library never touches a terminal: the CLI passes in a
//! [`confirm::Confirmer`] and an [`answer::Answerer`] that prompt, `rlp
//! serve` ones that ask the MCP client (`serve::asking`).
//!
//! - [`confirm`]: the confirmation a call asks for, the `Confirmer` trait,
//!   and step 4 of a call;
//! - [`questions`]: what a question a tool asks may be, and whether an
//!   answer fits it;
//! - [`answer`]: the `Answerer` trait, through which questions get answers;
//! - `rounds`: the rounds of questions of one call, recorded as inquiry and
//!   answer frames.

pub mod answer;
pub mod confirm;
pub mod questions;
pub(crate) mod rounds;
