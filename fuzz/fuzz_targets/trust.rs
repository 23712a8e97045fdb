//! Fuzzes `$RUNLOOP_HOME/trust-policy.toml`: the strict reader on any UTF-8
//! text (the loader refuses other bytes), the decisions made from what it
//! accepts, and the two edits the CLI makes to the file — `rlp trust revoke`
//! and `rlp trust add` — which must change only what they add: the file
//! written reads back as the policy before plus the new entry, and a refused
//! edit leaves the file as it was.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use rlp::bundle::capability::Capability;
use rlp::integrity::Reason;
use rlp::integrity::keys::{PublicKey, SecretKey};
use rlp::integrity::trust::{AllowCaps, Anchor, Rule, TrustPolicy, add_anchor, revoke};

const FILE: &str = "trust-policy.toml";
/// The anchor `rlp trust add` is asked to add.
const NAME: &str = "fuzz";

fn new_key() -> PublicKey {
    SecretKey::from_seed(&[7; 32]).public()
}

/// Whether a refused edit is one the editor documents: it edits only
/// `[anchors.NAME]`, `[rules.NAME]` and `[revoked]` tables.
fn is_documented_refusal(failure: &rlp::integrity::Failure) -> bool {
    failure.reason == Reason::TrustPolicy
        && (failure.message.contains("is an inline table") || failure.message.contains("`keys` must be a list"))
}

fn check_decisions(policy: &TrustPolicy) {
    for anchor in &policy.anchors {
        assert_eq!(policy.anchor_for(anchor.key_id()).map(|a| &a.name), Some(&anchor.name));
        assert_eq!(policy.anchor_named(&anchor.name), Some(anchor));
        let rule = anchor.effective_rule();
        let _ = rule.describe();
        let allowed = rule.policy().capabilities();
        assert_eq!(rule.first_denied(&allowed), None, "{rule:?} denies one of its own capabilities");
    }
}

fn check_revoke(file: &Path, text: &[u8], before: &TrustPolicy) {
    std::fs::write(file, text).expect("the scratch file is writable");
    let id = new_key().key_id();
    match revoke(file, id) {
        Ok((after, newly)) => {
            assert_eq!(newly, !before.is_revoked(id));
            let mut revoked = before.revoked.clone();
            revoked.insert(id);
            assert_eq!(after, TrustPolicy { anchors: before.anchors.clone(), revoked });
            assert_eq!(TrustPolicy::load(file).as_ref(), Ok(&after), "the file written does not read back");
        }
        Err(failure) => {
            assert!(is_documented_refusal(&failure), "revoke refused a policy it read: {failure:?}");
            assert_eq!(std::fs::read(file).expect("readable"), text, "a refused revoke changed the file");
        }
    }
}

fn check_add(file: &Path, text: &[u8], before: &TrustPolicy) {
    std::fs::write(file, text).expect("the scratch file is writable");
    let key = new_key();
    let rule = Rule { allow_caps: AllowCaps::Only(vec![Capability::Exec, Capability::Time]), allow_exec: Some(true) };
    match add_anchor(file, NAME, &key, &rule) {
        Ok(after) => {
            let mut anchors = before.anchors.clone();
            anchors.push(Anchor { name: NAME.into(), key, rule: Some(rule) });
            assert_eq!(after, TrustPolicy { anchors, revoked: before.revoked.clone() });
            assert_eq!(TrustPolicy::load(file).as_ref(), Ok(&after), "the file written does not read back");
        }
        Err(failure) => {
            let expected = match failure.reason {
                Reason::Revoked => before.is_revoked(key.key_id()),
                Reason::Usage => before.anchor_named(NAME).is_some() || before.anchor_for(key.key_id()).is_some(),
                _ => is_documented_refusal(&failure),
            };
            assert!(expected, "add refused a policy it read: {failure:?}");
            assert_eq!(std::fs::read(file).expect("readable"), text, "a refused add changed the file");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let policy = match TrustPolicy::parse(text, Path::new(FILE)) {
        Ok(policy) => policy,
        Err(failure) => {
            assert_eq!(failure.reason, Reason::TrustPolicy);
            assert!(failure.message.starts_with("trust-policy.toml:"), "{}", failure.message);
            return;
        }
    };
    check_decisions(&policy);
    let file = rlp_fuzz::scratch_dir().join(FILE);
    check_revoke(&file, data, &policy);
    check_add(&file, data, &policy);
    let _ = std::fs::remove_file(&file);
});
