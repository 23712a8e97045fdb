//! The layer map of docs/architecture.md, kept by a test: every `crate::…`
//! (and `super::…` reaching the crate root) path in `src/` is read, and an
//! import that points up a layer, sideways on one, from a leaf to a layer,
//! or across a rule the page lists fails the test with its file, line and
//! rule. Every top-level module must sit on the table, once.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

/// Where a module sits: a numbered layer, or among the leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Layer(u32),
    Leaf,
}

/// The layer table and the rules table of docs/architecture.md.
#[derive(Debug)]
struct Map {
    places: BTreeMap<String, Place>,
    /// module → (modules it never imports, or `None` for "anything but
    /// leaves"; the reason the page gives).
    rules: BTreeMap<String, (Option<BTreeSet<String>>, String)>,
}

/// One import of another top-level module.
#[derive(Debug)]
struct Import {
    file: PathBuf,
    line: usize,
    from: String,
    to: String,
}

/// An import the map does not allow, or a module the map does not place.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Violation(String);

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

const SECTION: &str = "## Directions of dependence";

/// The modules named in backticks in a table cell.
fn ticked(cell: &str) -> Vec<String> {
    cell.split('`').skip(1).step_by(2).map(str::to_owned).collect()
}

fn read_map(doc: &str) -> Map {
    let section = doc.split(SECTION).nth(1).unwrap_or_else(|| panic!("docs/architecture.md has no {SECTION:?}"));
    let section = section.split("\n## ").next().unwrap();
    let mut places = BTreeMap::new();
    let mut rules = BTreeMap::new();
    for line in section.lines().filter(|l| l.starts_with('|') && !l.starts_with("|---")) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        match cells.as_slice() {
            ["layer", "modules"] | ["module", "never imports", "why"] => {}
            [place, modules] => {
                let place = match *place {
                    "leaves" => Place::Leaf,
                    n => Place::Layer(n.parse().unwrap_or_else(|_| panic!("not a layer number: {line}"))),
                };
                for module in ticked(modules) {
                    let before = places.insert(module.clone(), place);
                    assert!(before.is_none(), "docs/architecture.md places `{module}` twice");
                }
            }
            [module, never, why] => {
                let module = ticked(module).pop().unwrap_or_else(|| panic!("no module in rule row: {line}"));
                let never = if never.starts_with("anything but leaves") {
                    None
                } else {
                    Some(ticked(never).into_iter().collect())
                };
                rules.insert(module, (never, why.to_string()));
            }
            _ => panic!("unexpected row in the layer tables of docs/architecture.md: {line}"),
        }
    }
    assert!(places.len() > 10, "the layer table of docs/architecture.md was not found");
    Map { places, rules }
}

/// The source with comments, string and character literals blanked out
/// (newlines kept, so line numbers still hold).
fn code_only(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let rest = &chars[i..];
        if rest.starts_with(&['/', '/']) {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if rest.starts_with(&['/', '*']) {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i..].starts_with(&['/', '*']) {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i..].starts_with(&['*', '/']) {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if let Some(hashes) = raw_string_start(rest) {
            let open = 2 + hashes + usize::from(rest[0] == 'b');
            let close: Vec<char> = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
            out.extend(std::iter::repeat_n(' ', open));
            i += open;
            while i < chars.len() && !chars[i..].starts_with(&close) {
                out.push(blank(chars[i]));
                i += 1;
            }
            out.extend(std::iter::repeat_n(' ', close.len()));
            i += close.len();
        } else if chars[i] == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                let step = if chars[i] == '\\' { 2 } else { 1 };
                for c in &chars[i..(i + step).min(chars.len())] {
                    out.push(blank(*c));
                }
                i += step;
            }
            out.push(' ');
            i += 1;
        } else if let Some(len) = char_literal_len(rest) {
            out.extend(std::iter::repeat_n(' ', len));
            i += len;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// The number of `#`s of a raw string literal starting here (`r"`, `r#"`,
/// `br"` …), or `None`.
fn raw_string_start(rest: &[char]) -> Option<usize> {
    let rest = rest.strip_prefix(&['b']).unwrap_or(rest);
    let rest = rest.strip_prefix(&['r'])?;
    let hashes = rest.iter().take_while(|c| **c == '#').count();
    (rest.get(hashes) == Some(&'"')).then_some(hashes)
}

/// The length of a character literal starting here (`'x'`, `'\n'`,
/// `'\u{7f}'`), or `None` for a lifetime or anything else.
fn char_literal_len(rest: &[char]) -> Option<usize> {
    if rest.first() != Some(&'\'') {
        return None;
    }
    if rest.get(1) == Some(&'\\') {
        return rest.iter().skip(2).position(|c| *c == '\'').map(|p| p + 3);
    }
    (rest.get(2) == Some(&'\'')).then_some(3)
}

/// A token of the code: an identifier, `::`, or one other character.
#[derive(Debug, PartialEq)]
enum Token<'a> {
    Ident(&'a str),
    PathSep,
    Punct(char),
}

fn tokens(code: &str) -> Vec<(usize, Token<'_>)> {
    let mut out = Vec::new();
    for (index, line) in code.lines().enumerate() {
        let mut rest = line;
        while let Some(c) = rest.chars().next() {
            if c.is_alphanumeric() || c == '_' {
                let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len());
                out.push((index + 1, Token::Ident(&rest[..end])));
                rest = &rest[end..];
            } else if rest.starts_with("::") {
                out.push((index + 1, Token::PathSep));
                rest = &rest[2..];
            } else {
                if !c.is_whitespace() {
                    out.push((index + 1, Token::Punct(c)));
                }
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    out
}

/// The module path of a file below `src/` (`sandbox/world/mod.rs` →
/// `["sandbox", "world"]`).
fn module_path(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let file = parts.pop().unwrap();
    let stem = file.trim_end_matches(".rs");
    if stem != "mod" {
        parts.push(stem.to_string());
    }
    parts
}

/// The top-level modules each path in `source` names, with its line: the
/// first segment after `crate::` (each one of a `crate::{…}` group), and
/// after the `super::`s that climb to the crate root.
fn imports(relative: &Path, source: &str) -> Vec<(usize, String)> {
    let code = code_only(source);
    let tokens = tokens(&code);
    let file_module = module_path(relative);
    // Inline modules (`mod tests { … }`) open at a brace depth.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut found = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let (line, token) = &tokens[i];
        match token {
            Token::Punct('{') => depth += 1,
            Token::Punct('}') => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(_, at)| *at == depth) {
                    inline.pop();
                }
            }
            Token::Ident("mod") => {
                if let (Some((_, Token::Ident(name))), Some((_, Token::Punct('{')))) =
                    (tokens.get(i + 1), tokens.get(i + 2))
                {
                    inline.push((name.to_string(), depth));
                }
            }
            Token::Ident("crate") if tokens.get(i + 1).map(|t| &t.1) == Some(&Token::PathSep) => {
                heads(&tokens, i + 2, *line, &mut found);
            }
            Token::Ident("super") if i == 0 || tokens[i - 1].1 != Token::PathSep => {
                let mut supers = 0;
                let mut j = i;
                while matches!(tokens.get(j), Some((_, Token::Ident("super"))))
                    && tokens.get(j + 1).map(|t| &t.1) == Some(&Token::PathSep)
                {
                    supers += 1;
                    j += 2;
                }
                let here = file_module.len() + inline.len();
                if supers == here {
                    heads(&tokens, j, *line, &mut found);
                }
                i = j.max(i + 1);
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    found
}

/// The first segment at `at` (or each first segment of a `{…}` group).
fn heads(tokens: &[(usize, Token<'_>)], at: usize, line: usize, found: &mut Vec<(usize, String)>) {
    match tokens.get(at) {
        Some((_, Token::Ident(name))) => found.push((line, name.to_string())),
        Some((_, Token::Punct('{'))) => {
            let mut depth = 0;
            let mut expect_head = true;
            for (l, token) in &tokens[at + 1..] {
                match token {
                    Token::Punct('{') => depth += 1,
                    Token::Punct('}') if depth == 0 => break,
                    Token::Punct('}') => depth -= 1,
                    Token::Punct(',') if depth == 0 => expect_head = true,
                    Token::Ident(name) if depth == 0 && expect_head => {
                        found.push((*l, name.to_string()));
                        expect_head = false;
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// The top-level modules of `src/`: its folders and its `.rs` files but
/// the crate roots.
fn top_level_modules(src: &Path) -> BTreeSet<String> {
    fs::read_dir(src)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?.to_string();
            if path.is_dir() {
                Some(name)
            } else {
                name.strip_suffix(".rs").filter(|stem| !matches!(*stem, "lib" | "main")).map(str::to_owned)
            }
        })
        .collect()
}

/// Every import of one top-level module by another, in `files` (paths
/// relative to `src/`, with their text).
fn cross_imports(files: &[(PathBuf, String)], modules: &BTreeSet<String>) -> Vec<Import> {
    let mut out = Vec::new();
    for (relative, source) in files {
        let from = module_path(relative).first().cloned().unwrap_or_default();
        if !modules.contains(&from) {
            continue;
        }
        for (line, to) in imports(relative, source) {
            if to != from && modules.contains(&to) {
                out.push(Import { file: Path::new("src").join(relative), line, from: from.clone(), to });
            }
        }
    }
    out
}

/// What breaks the map: modules it misplaces, and imports against it.
fn check(map: &Map, modules: &BTreeSet<String>, files: &[(PathBuf, String)]) -> Vec<Violation> {
    let mut out = Vec::new();
    for module in modules.iter().filter(|m| !map.places.contains_key(*m)) {
        out.push(Violation(format!(
            "src/{module}: the module `{module}` is not on the layer table of docs/architecture.md; add it to a layer"
        )));
    }
    for module in map.places.keys().filter(|m| !modules.contains(*m)) {
        out.push(Violation(format!(
            "docs/architecture.md: the layer table places `{module}`, which is not a module of src/"
        )));
    }
    let imports = cross_imports(files, modules);
    for import in &imports {
        let (Some(&from), Some(&to)) = (map.places.get(&import.from), map.places.get(&import.to)) else {
            continue;
        };
        let at = format!("{}:{}", import.file.display(), import.line);
        let (a, b) = (&import.from, &import.to);
        match (from, to) {
            (Place::Leaf, Place::Layer(n)) => out.push(Violation(format!(
                "{at}: the leaf `{a}` imports `{b}` (layer {n}); rule: leaves import only leaves"
            ))),
            (Place::Layer(m), Place::Layer(n)) if n >= m => {
                let which = if n == m { "its own layer" } else { "a higher layer" };
                out.push(Violation(format!(
                    "{at}: `{a}` (layer {m}) imports `{b}` (layer {n}), on {which}; rule: a module imports only lower layers and the leaves"
                )))
            }
            _ => {}
        }
        if let Some((never, why)) = map.rules.get(a) {
            let forbidden = match never {
                None => to != Place::Leaf,
                Some(never) => never.contains(b),
            };
            if forbidden {
                out.push(Violation(format!("{at}: `{a}` imports `{b}`; rule: `{a}` never imports it ({why})")));
            }
        }
    }
    out.extend(leaf_cycles(map, &imports));
    out.sort();
    out.dedup();
    out
}

/// Cycles among the leaves (the layers cannot have any).
fn leaf_cycles(map: &Map, imports: &[Import]) -> Vec<Violation> {
    let is_leaf = |m: &String| map.places.get(m) == Some(&Place::Leaf);
    let mut edges: BTreeMap<&str, BTreeMap<&str, &Import>> = BTreeMap::new();
    for import in imports.iter().filter(|i| is_leaf(&i.from) && is_leaf(&i.to)) {
        edges.entry(&import.from).or_default().entry(&import.to).or_insert(import);
    }
    let mut out = Vec::new();
    for (&start, next) in &edges {
        for (&to, first) in next {
            // A path back from `to` to `start` closes a cycle through `first`.
            let mut seen = BTreeSet::new();
            let mut stack = vec![to];
            while let Some(at) = stack.pop() {
                if at == start {
                    out.push(Violation(format!(
                        "{}:{}: the leaf `{start}` imports `{to}`, which leads back to `{start}`; rule: leaves import only leaves, without cycles",
                        first.file.display(),
                        first.line
                    )));
                    break;
                }
                if seen.insert(at) {
                    stack.extend(edges.get(at).into_iter().flat_map(|n| n.keys().copied()));
                }
            }
        }
    }
    out
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn source_files(src: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut folders = vec![src.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = fs::read_to_string(&path).unwrap();
                out.push((path.strip_prefix(src).unwrap().to_path_buf(), text));
            }
        }
    }
    out.sort();
    out
}

fn the_map() -> Map {
    read_map(&fs::read_to_string(root().join("docs/architecture.md")).unwrap())
}

#[test]
fn every_import_follows_the_layer_map() {
    let src = root().join("src");
    let violations = check(&the_map(), &top_level_modules(&src), &source_files(&src));
    let report: Vec<String> = violations.iter().map(ToString::to_string).collect();
    assert!(report.is_empty(), "the layer map of docs/architecture.md is broken:\n{}", report.join("\n"));
}

/// The tree with one file's text replaced.
fn with_file(relative: &str, text: &str) -> Vec<(PathBuf, String)> {
    let mut files = source_files(&root().join("src"));
    let slot = files.iter_mut().find(|(p, _)| p == Path::new(relative)).expect(relative);
    slot.1 = text.to_string();
    files
}

fn check_with(relative: &str, text: &str) -> Vec<String> {
    let src = root().join("src");
    check(&the_map(), &top_level_modules(&src), &with_file(relative, text)).iter().map(ToString::to_string).collect()
}

#[test]
fn an_upward_import_is_named_with_its_file_line_and_rule() {
    let original = fs::read_to_string(root().join("src/bundle/policy.rs")).unwrap();
    let text = format!("use crate::cli::Cli;\n{original}");
    assert_eq!(
        check_with("bundle/policy.rs", &text),
        [
            "src/bundle/policy.rs:1: `bundle` (layer 0) imports `cli` (layer 8), on a higher layer; rule: a module imports only lower layers and the leaves",
            "src/bundle/policy.rs:1: `bundle` imports `cli`; rule: `bundle` never imports it (the data model: no runtime, ledger, process, terminal or network code)",
        ]
    );
}

#[test]
fn the_cycles_the_map_once_had_are_found() {
    // `secrets` took REDACTED from the runtime's scrubber, and the sandbox
    // took the tool's PATH from the process runner.
    let value = fs::read_to_string(root().join("src/secrets/value.rs")).unwrap();
    let found =
        check_with("secrets/value.rs", &value.replacen("use zeroize", "use crate::runtime::scrub::X;\nuse zeroize", 1));
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].contains("`secrets` (layer 4) imports `runtime` (layer 5), on a higher layer"), "{found:#?}");

    let fs_rules = fs::read_to_string(root().join("src/sandbox/fs.rs")).unwrap();
    let grouped = fs_rules.replacen("use landlock", "use crate::{process::tool::TOOL_PATH, text};\nuse landlock", 1);
    let found = check_with("sandbox/fs.rs", &grouped);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].contains("`sandbox` (layer 2) imports `process` (layer 3)"), "{found:#?}");
}

#[test]
fn paths_in_comments_and_strings_are_not_imports_and_super_reaches_the_root() {
    let source = r##"
//! See [`crate::cli`].
/* crate::serve */
const A: &str = "crate::serve";
const B: &str = r#"crate::serve"#;
const C: char = '{';
fn f<'a>(x: &'a str) -> &'a str { crate::text::plural(x) }
mod tests {
    use super::f;
    mod deeper { use super::super::super::home::Home; }
}
"##;
    assert_eq!(imports(Path::new("fsutil.rs"), source), [(7, "text".to_string()), (10, "home".to_string())]);
    assert_eq!(imports(Path::new("a/b.rs"), source), [(7, "text".to_string())]);
    assert_eq!(
        imports(Path::new("a.rs"), "mod t { mod u { use super::super::super::home::X; } }"),
        [(1, "home".to_string())]
    );
}

#[test]
fn a_leaf_cycle_and_an_unplaced_module_are_found() {
    let kill = fs::read_to_string(root().join("src/kill.rs")).unwrap();
    let found = check_with("kill.rs", &format!("use crate::fsutil::X;\n{kill}"));
    assert!(
        found.iter().any(|v| v.contains("the leaf `fsutil` imports `interrupt`, which leads back to `fsutil`")),
        "{found:#?}"
    );

    let mut map = the_map();
    map.places.remove("oci");
    let src = root().join("src");
    let found = check(&map, &top_level_modules(&src), &source_files(&src));
    assert!(found.iter().any(|v| v.0.starts_with("src/oci: the module `oci` is not on the layer table")), "{found:#?}");
}
