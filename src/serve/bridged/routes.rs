//! Which bridged server a name or a URI belongs to, and what a client sees
//! of each server's names.
//!
//! A server's prompts (and the `name` of its resources and templates) are
//! served under the prefix its tools take in tools.json: none when each of
//! its tools' id is its name on the server (`rlp tools import --bare-ids`),
//! else `<server>.`. Resource URIs are served as the server wrote them:
//! a URI names its origin already, and tool results, prompts and other
//! resources point at resources by URI, so rewriting them would break the
//! links. A URI is routed to the server that listed it, else to the server
//! whose template it matches, else — with one server — to that server.

use std::collections::HashMap;

use super::List;
use crate::bundle::servers::Server;
use crate::bundle::tools::{Tool, Transport};

/// One bridged server whose resources and prompts are offered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Offered {
    /// Its name in tools.json.
    pub(crate) name: String,
    /// What its prompts' and resources' names are served under.
    pub(crate) prefix: String,
}

impl Offered {
    /// `server`, named as its tools in `tools` are.
    pub(crate) fn new(server: &Server, tools: &[Tool]) -> Offered {
        let mut own = tools.iter().filter_map(|tool| match &tool.transport {
            Some(Transport::Mcp { server: of, tool: name, .. }) if *of == server.name => Some((&tool.id, name)),
            _ => None,
        });
        let bare = own.clone().next().is_some() && own.all(|(id, name)| id == name);
        let prefix = if bare { String::new() } else { format!("{}.", server.name) };
        Offered { name: server.name.clone(), prefix }
    }

    /// `name` as served.
    pub(crate) fn served(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// The server's own name of `served`, if it is one of this server's.
    pub(crate) fn own<'n>(&self, served: &'n str) -> Option<&'n str> {
        served.strip_prefix(&self.prefix)
    }
}

/// What the lists a client was answered say of where each name and URI
/// belongs: server indexes into the offered servers, with the name served.
#[derive(Debug, Default)]
pub(crate) struct Known {
    /// Listed resources by URI.
    pub(crate) resources: HashMap<String, (usize, String)>,
    /// Listed templates: the URI template, its server, its name served.
    pub(crate) templates: Vec<(String, usize, String)>,
    /// Listed prompts by name served.
    pub(crate) prompts: HashMap<String, usize>,
    /// The lists read since the servers last said one changed.
    pub(crate) read: std::collections::HashSet<List>,
}

impl Known {
    /// The server of `uri`, and the name served of the resource or
    /// template it was found by (`None` when only found as the one server).
    pub(crate) fn resource(&self, uri: &str) -> Option<(usize, String)> {
        if let Some(found) = self.resources.get(uri) {
            return Some(found.clone());
        }
        self.templates
            .iter()
            .find(|(template, _, _)| template_matches(template, uri))
            .map(|(_, server, name)| (*server, name.clone()))
    }

    /// Forgets what the last `list` of server `index` said (before its new
    /// answer is remembered, or once it said that list changed).
    pub(crate) fn forget(&mut self, index: usize, list: List) {
        self.read.remove(&list);
        match list {
            List::Resources => self.resources.retain(|_, (of, _)| *of != index),
            List::Templates => self.templates.retain(|(_, of, _)| *of != index),
            List::Prompts => self.prompts.retain(|_, of| *of != index),
        }
    }
}

/// Whether `uri` is one of RFC 6570 URI template `template`'s URIs: each
/// expression (`{id}`, `{+path}`, …) stands for a run of at least one
/// character, the literal text between them must match exactly. Linear in
/// the template's parts times the URI's length, whatever either holds (both
/// come from outside: a server's template, a client's URI).
pub(crate) fn template_matches(template: &str, uri: &str) -> bool {
    // Where in `uri` the template read so far may end.
    let mut ends = vec![false; uri.len() + 1];
    ends[0] = true;
    let mut rest = template;
    while !rest.is_empty() {
        let (literal, expression, after) = match rest.find('{') {
            Some(open) => match rest[open..].find('}') {
                Some(close) => (&rest[..open], true, &rest[open + close + 1..]),
                None => (rest, false, ""),
            },
            None => (rest, false, ""),
        };
        if !literal.is_empty() {
            let mut next = vec![false; uri.len() + 1];
            for (at, _) in ends.iter().enumerate().filter(|(_, reached)| **reached) {
                if uri[at..].starts_with(literal) {
                    next[at + literal.len()] = true;
                }
            }
            ends = next;
        }
        if expression {
            // One character or more after the first place reached.
            let first = ends.iter().position(|reached| *reached);
            ends = (0..=uri.len()).map(|at| first.is_some_and(|f| at > f && uri.is_char_boundary(at))).collect();
        }
        rest = after;
    }
    ends[uri.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_match_their_templates() {
        assert!(template_matches("test://template/{id}/data", "test://template/123/data"));
        assert!(template_matches("file:///{+path}", "file:///a/b/c.txt"));
        assert!(template_matches("test://static", "test://static"));
        assert!(!template_matches("test://template/{id}/data", "test://template//data"));
        assert!(!template_matches("test://template/{id}/data", "test://template/1/other"));
        assert!(!template_matches("test://{a}", "other://x"));
        assert!(template_matches("db://{table}/{row}", "db://users/7"));
        assert!(template_matches("{a}", "x"));
        assert!(!template_matches("{a}", ""));
        assert!(template_matches("test://é/{id}", "test://é/ü"));
    }

    #[test]
    fn many_expressions_against_a_long_uri_end_at_once() {
        let template = "{a}{b}{c}{d}{e}{f}{g}{h}x";
        let uri = "y".repeat(100_000);
        assert!(!template_matches(template, &uri));
        assert!(template_matches(template, &format!("{uri}x")));
    }

    #[test]
    fn routes_come_from_lists_then_templates() {
        let mut known = Known::default();
        known.resources.insert("test://a".into(), (0, "files.a".into()));
        known.templates.push(("test://t/{id}".into(), 1, "notes.t".into()));
        assert_eq!(known.resource("test://a"), Some((0, "files.a".into())));
        assert_eq!(known.resource("test://t/9"), Some((1, "notes.t".into())));
        assert_eq!(known.resource("test://b"), None);
        known.forget(1, List::Templates);
        assert_eq!(known.resource("test://t/9"), None);
    }

    #[test]
    fn names_are_served_under_the_prefix() {
        let offered = Offered { name: "files".into(), prefix: "files.".into() };
        assert_eq!(offered.served("summarise"), "files.summarise");
        assert_eq!(offered.own("files.summarise"), Some("summarise"));
        assert_eq!(offered.own("notes.summarise"), None);
        let bare = Offered { name: "files".into(), prefix: String::new() };
        assert_eq!(bare.own("summarise"), Some("summarise"));
    }
}
