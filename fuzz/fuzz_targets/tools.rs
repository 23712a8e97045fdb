//! Fuzzes the tools.json reader, then places every finding in the text the
//! way lint does (span lookup, line and column).

#![no_main]

use libfuzzer_sys::fuzz_target;
use rlp::bundle::source::{SourceFile, Syntax};
use rlp::bundle::tools::TOOLS_FILE;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (tools, findings) = rlp::bundle::parse_tools(text);
    if let Some(tools) = &tools {
        for tool in &tools.tools {
            let _ = tool.required_capabilities();
            let _ = tools.server_of(tool);
        }
        for server in &tools.servers {
            let _ = server.required_capabilities();
        }
    }
    let source = SourceFile::new(TOOLS_FILE, text.to_string(), Syntax::Json);
    for finding in &findings {
        if let Some(span) = source.locate(&finding.at) {
            assert!(span.start <= span.end && span.end <= text.len(), "span {span:?} outside the text");
            let position = source.position(span.start);
            assert!(position.line >= 1 && position.column >= 1);
        }
    }
});
