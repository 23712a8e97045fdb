//! The files `rlp agent scaffold` writes, embedded from `templates/`, and a
//! tiny `{{name}}` placeholder filler.

/// `templates/manifest.toml`.
pub(crate) const MANIFEST: &str = include_str!("../../templates/manifest.toml");
/// `templates/policy.caps`.
pub(crate) const POLICY: &str = include_str!("../../templates/policy.caps");
/// `templates/tools.json`.
pub(crate) const TOOLS: &str = include_str!("../../templates/tools.json");
/// `templates/README.md`.
pub(crate) const README: &str = include_str!("../../templates/README.md");

/// Replaces every `{{key}}` with its value, in one pass (values are never
/// scanned again); unknown keys are left as they are.
pub(crate) fn fill(template: &str, vars: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len() + 256);
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find("}}") {
            Some(end) => {
                let key = &after[..end];
                match vars.iter().find(|(k, _)| *k == key) {
                    Some((_, value)) => out.push_str(value),
                    None => out.push_str(&rest[start..start + 2 + end + 2]),
                }
                rest = &after[end + 2..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_once() {
        assert_eq!(fill("a {{x}} b {{y}} {{z", &[("x", "{{y}}"), ("y", "2")]), "a {{y}} b 2 {{z");
        assert_eq!(fill("{{nope}}", &[]), "{{nope}}");
    }
}
