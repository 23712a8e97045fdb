//! The `rlp` binary: everything happens in [`rlp::cli`].

fn main() -> std::process::ExitCode {
    rlp::cli::main()
}
