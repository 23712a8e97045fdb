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

#[test]
fn every_command_has_a_man_page_that_man_renders() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man1");
    let written = Command::new(env!("CARGO_BIN_EXE_rlp")).args(["man", "--out"]).arg(&out).output().unwrap();
    assert!(written.status.success(), "{}", String::from_utf8_lossy(&written.stderr));
    let all = commands(Vec::new());
    let mut files: Vec<String> =
        std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    files.sort();
    let mut expected: Vec<String> = all
        .iter()
        .map(|path| {
            format!("{}.1", std::iter::once("rlp").chain(path.iter().map(String::as_str)).collect::<Vec<_>>().join("-"))
        })
        .collect();
    expected.sort();
    assert_eq!(files, expected, "one page per command, none for `help`");
    assert_eq!(
        String::from_utf8_lossy(&written.stderr),
        format!("wrote {} man pages into {}\n", expected.len(), out.display())
    );
    for path in &all {
        let file = out.join(format!(
            "{}.1",
            std::iter::once("rlp").chain(path.iter().map(String::as_str)).collect::<Vec<_>>().join("-")
        ));
        // Plain text: `col -b` takes out the overstriking man uses for bold.
        let rendered = Command::new("bash")
            .args(["-c", "set -o pipefail; man -l \"$1\" | col -bx", "bash"])
            .arg(&file)
            .env("MANWIDTH", "100")
            .output()
            .unwrap();
        assert!(rendered.status.success(), "man -l {}: {}", file.display(), String::from_utf8_lossy(&rendered.stderr));
        let text = String::from_utf8_lossy(&rendered.stdout);
        assert!(text.contains("NAME") && text.contains("SYNOPSIS"), "{}: {text}", file.display());
        // The page says what --help says, examples included.
        let help = help(&path.iter().map(String::as_str).collect::<Vec<_>>());
        if help.contains("Examples:") {
            assert!(text.contains("Examples:"), "{}: no examples", file.display());
        }
    }
    // One page to stdout, the same as the file written.
    let printed = Command::new(env!("CARGO_BIN_EXE_rlp")).args(["man", "tools", "call"]).output().unwrap();
    assert!(printed.status.success());
    assert_eq!(printed.stdout, std::fs::read(out.join("rlp-tools-call.1")).unwrap());
    let unknown = Command::new(env!("CARGO_BIN_EXE_rlp")).args(["man", "tools", "cal"]).output().unwrap();
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).starts_with("error: `rlp tools cal` is not a command\n"));
}
