//! The command-line surface as a whole: every command's `--help` has
//! examples that can be copied and pasted as they are printed.

use std::process::Command;

fn help(path: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_rlp")).args(path).arg("--help").output().unwrap();
    assert!(output.status.success(), "rlp {} --help failed", path.join(" "));
    String::from_utf8(output.stdout).unwrap()
}

/// Every command path (`[]`, `["agent"]`, `["agent", "install"]`, …).
fn commands(path: Vec<String>) -> Vec<Vec<String>> {
    let text = help(&path.iter().map(String::as_str).collect::<Vec<_>>());
    let mut all = vec![path.clone()];
    if let Some(section) = text.split("Commands:\n").nth(1) {
        // A command's line is indented two columns; a wrapped description more.
        let names = section.lines().take_while(|l| !l.is_empty()).filter(|l| !l.starts_with("   "));
        for line in names {
            let name = line.split_whitespace().next().unwrap_or_default();
            if name != "help" {
                let mut sub = path.clone();
                sub.push(name.to_string());
                all.extend(commands(sub));
            }
        }
    }
    all
}

#[test]
fn help_examples_are_whole_commands() {
    let all = commands(Vec::new());
    assert!(all.len() > 20, "{all:?}");
    for path in all {
        let text = help(&path.iter().map(String::as_str).collect::<Vec<_>>());
        let name = format!("rlp {}", path.join(" "));
        let Some(examples) = text.split("Examples:\n").nth(1) else { continue };
        let mut continued = false;
        for line in examples.lines().take_while(|l| !l.is_empty()) {
            // An example starts two columns in (with `rlp`, or a command
            // piping into it); its continuation lines six.
            let starts = line.starts_with("  ") && !line.starts_with("   ");
            assert!(
                starts || (continued && line.starts_with("      ")),
                "{name}: an example is cut in two by wrapping: {line:?}"
            );
            continued = line.ends_with('\\');
        }
    }
}
