//! Authoring: scaffolding bundles, adding and importing tools.
