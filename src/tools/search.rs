//! `tool_search`: the tools available here whose name or description holds every word of a
//! query, each with its name, one line and effect, never its schema.
//!
//! It is what a `code` session lists beside `lua_run` (issue #37): the agent finds the tools a
//! chunk needs without every schema in its context. It searches every available tool, whatever
//! the session's profile, because a profile decides what is listed, never what a program may
//! call; the grants decide that, at each call.

use serde_json::{Value, json};

use crate::registry::{self, Availability, Handler, Profile, Tool, ToolSpec};

/// Most tools one search returns.
pub const MAX_LIMIT: u64 = 200;

/// The tool's spec.
pub fn spec() -> ToolSpec {
    ToolSpec::new(
        "tool_search",
        "Find tools",
        "Find the tools available here whose name or description contains every word of \
         `query` (case-insensitive; an empty query lists them all), best matches first: each \
         with its name, a one-line description and its effect (read, write, send; destructive \
         when it may destroy data). Call them from lua_run as tools.NAME{...}, listed in the \
         chunk's ---@uses. Returns {tools: [{name, description, effect, destructive}], total}.",
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "maxLength": 200, "description": "Words to look for, such as \"pdf image\""},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": 20, "description": "Most tools to return"}
            },
            "required": ["query"],
            "additionalProperties": false
        }),
    )
    .profile(Profile::Code)
    .output(json!({
        "type": "object",
        "properties": {
            "tools": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "description": {"type": "string", "description": "Its first sentence"},
                        "effect": {"type": "string", "enum": ["read", "write", "send"]},
                        "destructive": {"type": "boolean"}
                    },
                    "required": ["name", "description", "effect", "destructive"]
                }
            },
            "total": {"type": "integer", "description": "How many tools matched, those left out by limit included"}
        },
        "required": ["tools", "total"]
    }))
}

/// The tool's handler.
pub fn handler() -> Handler {
    registry::handler(|inv| async move {
        let query = inv.args["query"].as_str().unwrap_or_default();
        let limit = inv.args["limit"].as_u64().unwrap_or(20).min(MAX_LIMIT) as usize;
        let config = inv.caller.config();
        let tools =
            inv.caller
                .registry()
                .in_profile(Profile::Full, &config, inv.caller.transport());
        let available = tools
            .iter()
            .filter(|(_, a)| matches!(a, Availability::Available))
            .map(|(t, _)| t.as_ref());
        Ok(search(available, query, limit))
    })
}

/// The tools matching every word of `query`, best first (a word in the name counts most, then
/// in the title), at most `limit` of them, and how many matched.
fn search<'a>(tools: impl Iterator<Item = &'a Tool>, query: &str, limit: usize) -> Value {
    let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
    let mut found: Vec<(usize, &ToolSpec)> = tools
        .filter_map(|t| {
            let spec = t.spec();
            let (name, title) = (spec.name.to_lowercase(), spec.title.to_lowercase());
            let description = spec.description.to_lowercase();
            let mut score = 0;
            for w in &words {
                score += if name.contains(w.as_str()) {
                    3
                } else if title.contains(w.as_str()) {
                    2
                } else if description.contains(w.as_str()) {
                    1
                } else {
                    return None;
                };
            }
            Some((score, spec))
        })
        .collect();
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.name.cmp(&b.1.name)));
    let total = found.len();
    let tools: Vec<Value> = found
        .into_iter()
        .take(limit)
        .map(|(_, spec)| {
            json!({
                "name": spec.name,
                "description": first_sentence(&spec.description),
                "effect": spec.effect.as_str(),
                "destructive": spec.annotations.destructive_hint,
            })
        })
        .collect();
    json!({"tools": tools, "total": total})
}

/// The description up to the end of its first sentence (or line).
fn first_sentence(description: &str) -> String {
    let line = description.lines().next().unwrap_or("").trim();
    match line.find(". ") {
        Some(i) => line[..=i].to_string(),
        None => line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_sentence_is_the_line() {
        assert_eq!(first_sentence("Do a. Then b."), "Do a.");
        assert_eq!(first_sentence("One line\nand more"), "One line");
    }
}
