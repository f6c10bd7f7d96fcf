//! Recipes: named, reusable runs of tool calls, as JSON manifests (the seed's shape) or Lua.
//!
//! A manifest is checked completely when saved (every error names its JSON pointer and how to
//! fix it) and stored as one file under `DATA/recipes/`. `recipe_run` runs it: without
//! `confirm: true` it is a *plan* — read steps run for real, state-changing steps are previewed —
//! with a `plan_hash` over the state-changing steps; with `confirm: true` it runs for real, and if
//! a `plan_hash` is given the plan is recomputed first and nothing runs unless it still matches,
//! so what a person approved is exactly what runs. Each step is a nested call through the gate.
//! `recipe_export` writes a versioned bundle with a content hash that `recipe_import` checks, and
//! the import reports every tool the recipe calls, with its effect and availability here.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::host::Host;
use crate::program::check::{self as checks, ArgRef, is_identifier};
use crate::program::header::{Header, ParamSpec, ParamType};
use crate::program::interpolate::Part;
use crate::program::steps::{Step, Template};
use crate::program::{Body, LuaBody, Program};
use crate::registry::{Capabilities, Kind};

mod bundle;
mod storage;
mod tools;

pub use bundle::{export, import};
pub use storage::{delete, list, save};
pub use tools::{Resume, RunReport, register_tools, run};

/// The manifest schema version this lmcp writes and reads.
pub const SCHEMA_VERSION: i64 = 1;
/// The export bundle format name.
pub const BUNDLE_FORMAT: &str = "lmcp-recipe";
/// The export bundle version.
pub const BUNDLE_VERSION: i64 = 1;
/// Most steps in a recipe.
pub const MAX_STEPS: usize = 10_000;
/// Longest wait step, in seconds.
pub const MAX_WAIT_SECS: f64 = 3600.0;

/// A declared recipe parameter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecipeParam {
    /// Its name.
    pub name: String,
    /// `string`, `int` or `bool` (also `integer`, `boolean`, `number`, `object`, `array`).
    #[serde(rename = "type")]
    pub kind: String,
    /// The value used when the run does not give one; without it the parameter is required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// What it means.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A recipe manifest, exactly the seed's shape (plus `lua` for Lua recipes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// The recipe's name (free text, like "Demo morning brief").
    pub name: String,
    /// What it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The manifest schema version (1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_version: Option<i64>,
    /// Declared parameters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub params: Vec<RecipeParam>,
    /// Tool calls `{tool, args}` and pauses `{wait: N}` / `{wait: {seconds: N}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<Vec<Value>>,
    /// A Lua program instead of steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lua: Option<String>,
    /// What the recipe produces, for people: `[{kind}]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<Value>,
}

/// A checked recipe: the manifest as given and the program it is.
#[derive(Debug, Clone)]
pub struct Recipe {
    /// What was given.
    pub manifest: Manifest,
    /// The program: typed params, what it may call, steps or Lua.
    pub program: Program,
}

impl Recipe {
    /// How many steps it has (0 for a Lua recipe).
    pub fn step_count(&self) -> usize {
        match &self.program.body {
            Body::Steps(s) => s.len(),
            Body::Lua(_) => 0,
        }
    }
}

/// The tool kinds a recipe may call: everything but authoring tools.
const CALLABLE: &[Kind] = &[Kind::Leaf, Kind::Workflow, Kind::Gateway];

fn bad(name: &str, pointer: impl Into<String>, message: impl Into<String>) -> Error {
    let pointer = pointer.into();
    Error::Manifest {
        name: name.to_string(),
        pointer: if pointer.is_empty() {
            "(root)".into()
        } else {
            pointer
        },
        message: message.into(),
    }
}

/// Parses manifest JSON, turning serde's complaints into manifest errors.
pub fn parse_manifest(value: Value) -> Result<Manifest> {
    let name = value
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_string();
    serde_json::from_value(value).map_err(|e| bad(&name, "", format!("{e}; the shape is {{name, description, schema_version, params, steps | lua, outputs}}")))
}

/// Checks a manifest against the tools registered now.
pub fn check(host: &Host, mut manifest: Manifest) -> Result<Recipe> {
    // One spelling per name: composed (NFC), so names that look the same are the same.
    manifest.name = normal_name(&manifest.name);
    let name = manifest.name.clone();
    if name.trim().is_empty() || name.chars().count() > 100 {
        return Err(bad(
            &name,
            "/name",
            "the name must be 1-100 characters of text",
        ));
    }
    if crate::text::escape_controls(&name) != name {
        return Err(bad(
            &name,
            "/name",
            "the name holds control or text-reordering characters; use plain text",
        ));
    }
    if slug(&name).is_empty() {
        return Err(bad(
            &name,
            "/name",
            "the name needs at least one letter or digit",
        ));
    }
    if let Some(d) = &manifest.description {
        checks::check_description(d).map_err(|m| bad(&name, "/description", m))?;
    }
    if let Some(v) = manifest.schema_version
        && v != SCHEMA_VERSION
    {
        return Err(bad(
            &name,
            "/schema_version",
            format!("this lmcp reads schema_version {SCHEMA_VERSION}, not {v}"),
        ));
    }
    for (i, o) in manifest.outputs.iter().enumerate() {
        if !o.get("kind").is_some_and(Value::is_string) {
            return Err(bad(
                &name,
                format!("/outputs/{i}"),
                "an output is {\"kind\": string}",
            ));
        }
    }
    let mut params = Vec::new();
    for (i, p) in manifest.params.iter().enumerate() {
        let at = format!("/params/{i}");
        if !is_identifier(&p.name) {
            return Err(bad(
                &name,
                format!("{at}/name"),
                format!(
                    "`{}` is not a valid parameter name (letters, digits, _)",
                    p.name
                ),
            ));
        }
        if params.iter().any(|q: &ParamSpec| q.name == p.name) {
            return Err(bad(
                &name,
                format!("{at}/name"),
                format!("parameter `{}` is declared twice", p.name),
            ));
        }
        let kind = ParamType::parse(&p.kind).ok_or_else(|| {
            bad(
                &name,
                format!("{at}/type"),
                format!("unknown type `{}`; {}", p.kind, ParamType::NAMES),
            )
        })?;
        if let Some(d) = &p.default
            && !kind.accepts(d)
        {
            return Err(bad(
                &name,
                format!("{at}/default"),
                format!("the default {d} is not a {}", p.kind),
            ));
        }
        params.push(ParamSpec {
            name: p.name.clone(),
            kind,
            required: p.default.is_none(),
            default: p.default.clone(),
            description: p.description.clone().unwrap_or_default(),
        });
    }
    match (&manifest.steps, &manifest.lua) {
        (Some(_), Some(_)) => Err(bad(&name, "", "give either `steps` or `lua`, not both")),
        (None, None) => Err(bad(
            &name,
            "/steps",
            "`steps` is required and must not be empty (or give a `lua` program)",
        )),
        (None, Some(lua)) => {
            let header = Header::parse(lua, &format!("{}.lua", slug(&name)))
                .map_err(|e| bad(&name, "/lua", e.to_string()))?;
            if !header.params.is_empty() && !params.is_empty() {
                return Err(bad(
                    &name,
                    "/params",
                    "declare the parameters once: in `params` or in the Lua header",
                ));
            }
            if params.is_empty() {
                params = header.params.clone();
            }
            let chunk = format!("{}.lua", slug(&name));
            checks::compile_lua(lua, &chunk).map_err(|m| bad(&name, "/lua", m))?;
            let capabilities = checks::uses_capabilities(host, &header, &chunk, CALLABLE)
                .map_err(|m| bad(&name, "/lua", m))?;
            let program = Program {
                name: name.clone(),
                params,
                capabilities,
                timeout: header.timeout,
                body: Body::Lua(LuaBody {
                    source: lua.clone(),
                    chunk,
                    modules: Vec::new(),
                    config: None,
                }),
            };
            Ok(Recipe { manifest, program })
        }
        (Some(raw), None) => {
            if raw.is_empty() {
                return Err(bad(&name, "/steps", "`steps` must not be empty"));
            }
            if raw.len() > MAX_STEPS {
                return Err(bad(
                    &name,
                    "/steps",
                    format!("{} steps is more than the {MAX_STEPS} allowed", raw.len()),
                ));
            }
            let mut checked: Vec<Step> = Vec::new();
            let mut tools: Vec<String> = Vec::new();
            for (i, v) in raw.iter().enumerate() {
                let step = check_step(host, &name, i, v, &params, &checked)?;
                if let Step::Call { tool, .. } = &step
                    && !tools.contains(tool)
                {
                    tools.push(tool.clone());
                }
                checked.push(step);
            }
            let program = Program {
                name: name.clone(),
                params,
                capabilities: Capabilities::Tools(tools),
                timeout: None,
                body: Body::Steps(checked),
            };
            Ok(Recipe { manifest, program })
        }
    }
}

fn check_step(
    host: &Host,
    name: &str,
    i: usize,
    v: &Value,
    params: &[ParamSpec],
    earlier: &[Step],
) -> Result<Step> {
    let at = format!("/steps/{i}");
    let shape = "a step is {\"tool\": NAME, \"args\": {...}} or {\"wait\": {\"seconds\": N}}";
    let Value::Object(m) = v else {
        return Err(bad(name, &at, shape));
    };
    if let Some(w) = m.get("wait") {
        if m.len() != 1 {
            return Err(bad(
                name,
                &at,
                format!("a wait step holds only `wait`; {shape}"),
            ));
        }
        let secs = match w {
            Value::Number(n) => n.as_f64(),
            Value::Object(o) if o.len() == 1 => o.get("seconds").and_then(Value::as_f64),
            _ => None,
        }
        .ok_or_else(|| {
            bad(
                name,
                format!("{at}/wait"),
                "write {\"wait\": N} or {\"wait\": {\"seconds\": N}}",
            )
        })?;
        if !(secs > 0.0 && secs <= MAX_WAIT_SECS) {
            return Err(bad(
                name,
                format!("{at}/wait"),
                format!(
                    "a wait must be more than 0 and at most {MAX_WAIT_SECS} seconds, got {secs}"
                ),
            ));
        }
        return Ok(Step::Wait(Duration::from_secs_f64(secs)));
    }
    let tool_name = m
        .get("tool")
        .and_then(Value::as_str)
        .ok_or_else(|| bad(name, &at, shape))?;
    if let Some(extra) = m.keys().find(|k| *k != "tool" && *k != "args") {
        return Err(bad(
            name,
            format!("{at}/{extra}"),
            format!("unknown key `{extra}`; {shape}"),
        ));
    }
    let tool =
        checks::find_tool(host, tool_name).map_err(|m| bad(name, format!("{at}/tool"), m))?;
    if tool.spec().kind == Kind::Authoring || tool_name == "recipe_run" {
        return Err(bad(
            name,
            format!("{at}/tool"),
            format!(
                "a recipe step cannot call `{tool_name}` (authoring tools and recipe_run cannot be steps)"
            ),
        ));
    }
    let args = m.get("args").cloned().unwrap_or_else(|| json!({}));
    if !args.is_object() {
        return Err(bad(name, format!("{at}/args"), "`args` must be an object"));
    }
    let template = Template::Interpolated(args);
    let (instance, refs) =
        checks::sample_args(&template, params).map_err(|m| bad(name, format!("{at}/args"), m))?;
    for (pointer, r) in &refs {
        let here = format!("{at}/args{pointer}");
        match r {
            ArgRef::Text(Part::Param(p), _) if !params.iter().any(|q| &q.name == p) => {
                let declared: Vec<&str> = params.iter().map(|q| q.name.as_str()).collect();
                return Err(bad(
                    name,
                    here,
                    format!(
                        "`${{{p}}}` is not a declared param ({}); add it to `params`",
                        if declared.is_empty() {
                            "none are declared".to_string()
                        } else {
                            format!("declared: {}", declared.join(", "))
                        }
                    ),
                ));
            }
            ArgRef::Text(Part::Step { index, text, .. }, _) => {
                if *index >= i {
                    let earlier = if i == 0 {
                        "the first step has no earlier step".to_string()
                    } else {
                        format!("a step can read only earlier steps (0 to {})", i - 1)
                    };
                    return Err(bad(
                        name,
                        here,
                        format!("`${{{text}}}` reads step {index}, but {earlier}"),
                    ));
                }
                if matches!(earlier[*index], Step::Wait(_)) {
                    return Err(bad(
                        name,
                        here,
                        format!(
                            "`${{{text}}}` reads step {index}, which is a wait and has no result"
                        ),
                    ));
                }
            }
            _ => {}
        }
    }
    // Check what can already be seen: literals, and exact params by their type.
    checks::check_args(&tool, &instance, &refs, params)
        .map_err(|(pointer, m)| bad(name, format!("{at}/args{pointer}"), m))?;
    Ok(Step::Call {
        id: i.to_string(),
        tool: tool_name.to_string(),
        args: template,
    })
}

/// A recipe name in its one spelling: Unicode NFC.
pub fn normal_name(name: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    name.nfc().collect()
}

/// A file name from a recipe name: lowercase letters and digits of any script, and `-`; at most
/// 128 bytes. Only the file is named by it: a recipe is found by its exact name.
pub fn slug(name: &str) -> String {
    let mut out = String::new();
    for c in normal_name(name).chars() {
        if c.is_alphanumeric() {
            for l in c.to_lowercase() {
                if out.len() + l.len_utf8() > 128 {
                    return out.trim_end_matches('-').to_string();
                }
                out.push(l);
            }
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs() {
        assert_eq!(slug("Demo morning brief"), "demo-morning-brief");
        assert_eq!(slug("  Weekly: Report!! "), "weekly-report");
        assert_eq!(slug("***"), "");
        assert_eq!(slug("Утренняя сводка"), "утренняя-сводка");
        assert_eq!(slug("早报"), "早报");
        assert_eq!(slug(&"é".repeat(100)).len(), 128);
    }
}
