//! `[runtime] sandbox`: how hard rlp insists on confining exec tools.

use std::fmt;
use std::str::FromStr;

/// How exec tools are confined (`[runtime] sandbox` in config.toml),
/// weakest first: the order is what a system `[policy]` floor compares.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum SandboxMode {
    /// No confinement: the tool runs with every right of the user.
    Off,
    /// Everything the kernel offers; what it cannot enforce is recorded and
    /// warned about once per process.
    #[default]
    BestEffort,
    /// A tool the kernel cannot confine is refused (exit 3).
    Required,
}

impl SandboxMode {
    /// The spelling in config.toml and on frames.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::Off => "off",
            SandboxMode::BestEffort => "best-effort",
            SandboxMode::Required => "required",
        }
    }
}

impl fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SandboxMode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "off" => Ok(SandboxMode::Off),
            "best-effort" => Ok(SandboxMode::BestEffort),
            "required" => Ok(SandboxMode::Required),
            other => Err(format!("`{other}` is not a sandbox mode (required, best-effort or off)")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_round_trip_and_order_by_strength() {
        for mode in [SandboxMode::Off, SandboxMode::BestEffort, SandboxMode::Required] {
            assert_eq!(mode.as_str().parse::<SandboxMode>(), Ok(mode));
        }
        assert!("strict".parse::<SandboxMode>().unwrap_err().contains("required, best-effort or off"));
        assert!(SandboxMode::Off < SandboxMode::BestEffort && SandboxMode::BestEffort < SandboxMode::Required);
        assert_eq!(SandboxMode::default(), SandboxMode::BestEffort);
    }
}
