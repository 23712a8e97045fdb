//! The rules that look across files. Each module owns the codes it reports.

mod agent;
mod artifacts;
mod commands;
mod discovery;
mod grants;
mod sandbox;
mod schemas;
mod secrets;
mod servers;
mod tools;

use crate::bundle::LoadedBundle;
use crate::bundle::diag::Finding;
use crate::lint::Settings;

pub(crate) use discovery::DEFAULT_CORE_THRESHOLD;

/// Runs every rule, appending to `out`.
pub(crate) fn check_all(bundle: &LoadedBundle, settings: &Settings, out: &mut Vec<Finding>) {
    agent::check(bundle, out);
    tools::check(bundle, out);
    discovery::check(bundle, settings.core_threshold, out);
    schemas::check(bundle, out);
    grants::check(bundle, out);
    servers::check(bundle, out);
    commands::check(bundle, out);
    sandbox::check(bundle, out);
    secrets::check(bundle, out);
    artifacts::check(bundle, out);
}
