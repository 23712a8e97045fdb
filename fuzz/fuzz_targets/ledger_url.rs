//! Fuzzes ledger URLs (`--ledger`, `RUNLOOP_LEDGER_URL`, `[ledger] url`):
//! any text is read or refused without a panic, and the password a URL
//! carries (`scheme://user:PASSWORD@host/…`) is in neither the refusal nor
//! the location shown.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rlp::ledger::Location;

/// What may be a password in `text`: everything between the first `:`
/// after `://` and the last `@` (however the URL is meant to split).
fn password(text: &str) -> Option<&str> {
    let rest = text.split_once("://")?.1;
    let userinfo = rest.rsplit_once('@')?.0;
    Some(userinfo.split_once(':')?.1)
}

/// What rlp shows for `text`: the location, or why it is refused.
fn shown(text: &str) -> String {
    match Location::parse(text) {
        Ok(location) => location.to_string(),
        Err(why) => why,
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let shown_text = shown(text);
    // A password long enough to tell apart, and found nowhere else in the URL.
    if let Some(secret) = password(text).filter(|p| p.len() >= 6 && text.matches(*p).count() == 1) {
        // rlp's own words may hold the same letters: what is shown for the
        // same URL with another password of that length must hold them too.
        let other = text.replacen(secret, &"Z".repeat(secret.len()), 1);
        assert!(!shown_text.contains(secret) || shown(&other).contains(secret), "the password shows in {shown_text:?}");
    }
});
