//! RLP217, RLP218: what `rlp serve --expose core` offers up front
//! (docs/discovery.md).

use crate::bundle::LoadedBundle;
use crate::bundle::diag::{At, Code, Diagnostics, Finding};
use crate::bundle::pointer::Pointer;
use crate::bundle::tools::{Discoverability, TOOLS_FILE};

/// Above this many tools, a bundle should say which are core.
pub(crate) const DEFAULT_CORE_THRESHOLD: usize = 30;

/// Runs RLP217 on the bundle (with `threshold`) and RLP218 on each tool.
pub(super) fn check(bundle: &LoadedBundle, threshold: usize, out: &mut Vec<Finding>) {
    let tools = bundle.tool_list();
    let mut diags = Diagnostics::new(bundle.display_path(TOOLS_FILE));
    let core: Vec<_> = tools.iter().filter(|t| t.discoverability == Discoverability::Core).collect();
    if tools.len() > threshold && core.is_empty() {
        diags
            .report(
                Code::CoreToolsMissing,
                At::Key(Pointer::root().key("tools")),
                format!(
                    "{} tools and none marked core: under `rlp serve --expose core` the model starts with only the search",
                    tools.len()
                ),
            )
            .help(
                "set `\"discoverability\": \"core\"` on the few tools most tasks need (docs/discovery.md); \
                 the rest stay one search away",
            );
    }
    for tool in core.into_iter().filter(|t| t.category.is_none()) {
        diags
            .report(
                Code::CoreToolUncategorised,
                At::Key(tool.at.key("discoverability")),
                format!("core tool `{}` has no category", tool.id),
            )
            .help(
                "add `\"category\"` (e.g. `\"issues\"`): the search names the categories, and a model filters by them \
                 to find this tool's neighbours",
            );
    }
    out.extend(diags.into_findings());
}
