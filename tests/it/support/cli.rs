//! The command tree of `rlp` as clap declares it.

/// Every command of the tree (the root first, as an empty path), `help`
/// aside: its path (`["agent", "scaffold"]`) and whether it is a leaf (has no
/// subcommands).
pub fn commands() -> Vec<(Vec<String>, bool)> {
    fn walk(command: &clap::Command, path: Vec<String>, out: &mut Vec<(Vec<String>, bool)>) {
        let subcommands: Vec<_> = command.get_subcommands().filter(|c| c.get_name() != "help").collect();
        out.push((path.clone(), subcommands.is_empty()));
        for sub in subcommands {
            let mut sub_path = path.clone();
            sub_path.push(sub.get_name().to_string());
            walk(sub, sub_path, out);
        }
    }
    let mut out = Vec::new();
    walk(&rlp::cli::command_tree(), Vec::new(), &mut out);
    out
}

/// Every leaf command (`agent scaffold`, `lint`, …), `help` aside.
pub fn leaves() -> Vec<String> {
    commands().into_iter().filter(|(_, leaf)| *leaf).map(|(path, _)| path.join(" ")).collect()
}
