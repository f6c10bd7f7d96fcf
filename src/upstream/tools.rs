//! Another server's tool definitions as lmcp tools: names made Lua identifiers, effects from
//! the claims (which only lower trust), and the tools that cannot be offered refused one by
//! one, each with its reason.

use std::collections::BTreeMap;

use serde_json::Value;

use super::names;
use super::trust;
use crate::registry::{Kind, Profile, ToolSpec};

/// Longest description kept from a server, in bytes; the rest is cut at a character boundary.
const MAX_DESCRIPTION: usize = 8 << 10;

/// One of the server's tools as lmcp offers it.
#[derive(Debug, Clone)]
pub struct Offered {
    /// Its spec (name `mcp__SERVER__TOOL`, effect from its claims, definition hash).
    pub spec: ToolSpec,
    /// Its name on the server.
    pub upstream: String,
}

/// A tool the server lists that lmcp does not offer, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// Its name on the server (escaped when shown).
    pub upstream: String,
    /// Why it is not offered.
    pub reason: String,
}

/// The tools of `server` lmcp offers from its definitions, and the ones it refuses.
pub fn offered(server: &str, definitions: &[Value]) -> (Vec<Offered>, Vec<Refused>) {
    let mut by_name: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    let mut refused = Vec::new();
    for d in definitions {
        let Some(upstream) = d
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        else {
            refused.push(Refused {
                upstream: "(no name)".into(),
                reason: "its definition has no name, or an empty one".into(),
            });
            continue;
        };
        by_name
            .entry(names::tool_name(server, upstream))
            .or_default()
            .push(d);
    }
    let mut out = Vec::new();
    for (name, defs) in by_name {
        let upstream_names: Vec<&str> = defs
            .iter()
            .filter_map(|d| d.get("name").and_then(Value::as_str))
            .collect();
        if defs.len() > 1 {
            for u in &upstream_names {
                refused.push(Refused {
                    upstream: u.to_string(),
                    reason: format!(
                        "`{}` all become `{name}` in lmcp; the server should rename one",
                        upstream_names.join("`, `")
                    ),
                });
            }
            continue;
        }
        let (d, upstream) = (defs[0], upstream_names[0]);
        match spec_of(server, &name, d) {
            Ok(spec) => out.push(Offered {
                spec,
                upstream: upstream.to_string(),
            }),
            Err(reason) => refused.push(Refused {
                upstream: upstream.to_string(),
                reason,
            }),
        }
    }
    (out, refused)
}

fn spec_of(server: &str, name: &str, d: &Value) -> Result<ToolSpec, String> {
    crate::registry::check_name(name).map_err(|_| {
        format!("its lmcp name `{name}` is longer than 64 characters, which MCP clients refuse")
    })?;
    let input = d.get("inputSchema").cloned().unwrap_or(Value::Null);
    if input.get("type") != Some(&Value::String("object".into())) {
        return Err("its input schema is not an object schema".into());
    }
    jsonschema::meta::validate(&input)
        .map_err(|e| format!("its input schema is not valid JSON Schema: {e}"))?;
    jsonschema::validator_for(&input)
        .map_err(|e| format!("its input schema cannot be used: {e}"))?;
    let upstream = d.get("name").and_then(Value::as_str).unwrap_or(name);
    let mut description = d
        .get("description")
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| format!("The tool `{upstream}` of the MCP server `{server}`."));
    if description.len() > MAX_DESCRIPTION {
        let mut cut = MAX_DESCRIPTION;
        while !description.is_char_boundary(cut) {
            cut -= 1;
        }
        description.truncate(cut);
        description.push('…');
    }
    let annotations = d.get("annotations");
    let title = d
        .get("title")
        .or_else(|| annotations.and_then(|a| a.get("title")))
        .and_then(Value::as_str)
        .unwrap_or(upstream);
    let (effect, claimed) = trust::effect_of(annotations);
    let mut spec = ToolSpec::new(name, title, &description, input)
        .effect(effect, claimed)
        .kind(Kind::Leaf)
        .profile(Profile::Core)
        .from_upstream(trust::definition_hash(d));
    // an output schema that cannot be used is dropped, not the tool
    if let Some(output) = d.get("outputSchema")
        && output.get("type") == Some(&Value::String("object".into()))
        && jsonschema::meta::validate(output).is_ok()
    {
        spec = spec.output(output.clone());
    }
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Effect;
    use serde_json::json;

    fn tool(name: &str, annotations: Value) -> Value {
        json!({"name": name, "description": "d", "inputSchema": {"type": "object"}, "annotations": annotations})
    }

    #[test]
    fn tools_are_offered_under_lua_names_with_their_claimed_effects() {
        let (ok, refused) = offered(
            "files",
            &[
                tool("read-file", json!({"readOnlyHint": true})),
                tool("write.file", json!({"destructiveHint": false})),
                tool("wipe", Value::Null),
            ],
        );
        assert!(refused.is_empty(), "{refused:?}");
        let got: Vec<(&str, Effect, bool)> = ok
            .iter()
            .map(|o| {
                (
                    o.spec.name.as_str(),
                    o.spec.effect,
                    o.spec.annotations.destructive_hint,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("mcp__files__read_file", Effect::Read, false),
                ("mcp__files__wipe", Effect::Send, true),
                ("mcp__files__write_file", Effect::Write, false),
            ]
        );
        assert!(ok.iter().all(|o| o.spec.definition.is_some()));
    }

    #[test]
    fn clashing_and_unusable_tools_are_refused_by_name() {
        let (ok, refused) = offered(
            "s",
            &[
                tool("a-b", Value::Null),
                tool("a.b", Value::Null),
                json!({"name": "flat", "inputSchema": {"type": "string"}}),
                json!({"name": "x".repeat(70), "inputSchema": {"type": "object"}}),
                json!({"description": "nameless"}),
                json!({"name": "", "inputSchema": {"type": "object"}}),
                tool("Fine", Value::Null),
            ],
        );
        assert_eq!(ok.len(), 1);
        assert_eq!(ok[0].spec.name, "mcp__s__Fine");
        assert_eq!(refused.len(), 6, "{refused:?}");
        assert!(
            refused
                .iter()
                .any(|r| r.reason.contains("`a-b`, `a.b` all become `mcp__s__a_b`")),
            "{refused:?}"
        );
    }
}
