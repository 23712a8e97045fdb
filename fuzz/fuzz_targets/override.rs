//! Fuzzes the operator override (`$RUNLOOP_HOME/caps/overrides/<agent>.toml`)
//! as the runtime applies it, on any UTF-8 text (the loader refuses other
//! bytes), against a bundle policy that grants something of every family
//! (the `full.caps` policy seed). What it accepts may only narrow the
//! bundle: the effective policy is bundle ∩ override, each decision agrees
//! with it, and no capability the bundle lacks is ever allowed. A refusal
//! names the file, line and column.

#![no_main]

use std::path::Path;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use rlp::bundle::capability::Capability;
use rlp::bundle::policy::Policy;
use rlp::event::Decision;
use rlp::runtime::exposure::apply_override;

const FILE: &str = "/home/op/.runloop/caps/overrides/mailer.toml";
const BUNDLE_POLICY: &str = include_str!("../seeds/policy/full.caps");
/// Capabilities asked about besides the bundle's own: some it grants only
/// in part, some not at all.
const PROBES: [&str; 7] = [
    "net:api.mail.example:8443",
    "net:evil.example",
    "fs:/home/user/work/notes/2025/today.md",
    "fs:/etc/passwd",
    "kb_read:drafts",
    "kb_write:sent",
    "secrets:runloop/other/key",
];

/// The bundle policy, and every capability to decide.
fn bundle() -> &'static (Policy, Vec<Capability>) {
    static BUNDLE: OnceLock<(Policy, Vec<Capability>)> = OnceLock::new();
    BUNDLE.get_or_init(|| {
        let grants = rlp::bundle::parse_policy(BUNDLE_POLICY).0.expect("the full.caps seed parses");
        let policy = Policy::from_bundle(&grants);
        let mut caps = policy.capabilities();
        caps.extend(PROBES.iter().map(|c| c.parse::<Capability>().expect("a probe parses")));
        (policy, caps)
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (bundle, caps) = bundle();
    let (policy, warnings) = match apply_override(bundle.clone(), Path::new(FILE), text) {
        Ok(applied) => applied,
        Err(message) => {
            assert!(message.starts_with(&format!("{FILE}:")), "{message}");
            return;
        }
    };
    assert_eq!(&policy.bundle, bundle);
    assert!(warnings.iter().all(|w| w.starts_with(FILE)), "{warnings:?}");
    let (grants, findings) = rlp::bundle::parse_policy(text);
    assert!(findings.is_empty(), "an override the runtime accepts has findings as a policy file: {findings:?}");
    let grants = grants.expect("an override without findings has grants");
    assert_eq!(policy.effective, bundle.intersect(&Policy::from_override(&grants)));
    for cap in policy.effective.capabilities() {
        assert!(bundle.allows(&cap), "the override granted {cap}, which the bundle does not");
    }
    for cap in caps {
        let (decision, reason) = policy.decide(cap);
        assert_eq!(decision == Decision::Allow, policy.effective.allows(cap), "{cap}: {reason}");
        assert!(decision != Decision::Allow || bundle.allows(cap), "{cap} allowed beyond the bundle");
    }
});
