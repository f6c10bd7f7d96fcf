//! Recipes: named, reusable runs of tool calls, as JSON manifests or Lua.
//!
//! A manifest is checked completely when saved (every error names its JSON pointer and how to
//! fix it) and stored as one file under `DATA/recipes/`. `recipe_run` runs it: without
//! `confirm: true` it is a *plan* — read steps run for real, state-changing steps are previewed —
//! with a `plan_hash` over the state-changing steps; with `confirm: true` it runs for real, and if
//! a `plan_hash` is given the plan is recomputed first and nothing runs unless it still matches,
//! so what a person approved is exactly what runs. Each step is a nested call through the gate.
//! `recipe_export` writes a versioned bundle with a content hash that `recipe_import` checks, and
//! the import reports every tool the recipe calls, with its effect and availability here.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::program::{
    Body, Intent, Policy, Program, Source, SourceBody, StepSource, Template, compile,
};
use crate::registry::{Kind, Registry};

mod bundle;
mod storage;
mod tools;

pub use bundle::{export, import};
pub use storage::{delete, exists, list, save};
pub use tools::{Resume, RunReport, register_tools, run};

/// The manifest schema version this lmcp writes and reads.
pub const SCHEMA_VERSION: i64 = 1;
/// The export bundle format name.
pub const BUNDLE_FORMAT: &str = "lmcp-recipe";
/// The export bundle version.
pub const BUNDLE_VERSION: i64 = 1;
/// Most steps in a recipe.
pub const MAX_STEPS: usize = 10_000;
pub use crate::program::compile::MAX_WAIT_SECS;

/// A declared recipe parameter: required unless it has a default (or says `required`).
pub type RecipeParam = crate::program::Param;

/// A recipe manifest: `steps` or `lua`, with its declared `params` and described `outputs`.
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

/// How recipes are compiled: steps and `---@uses` may call leaf, workflow and gateway tools
/// (not authoring tools, nor another recipe), at most [`MAX_STEPS`] steps, and a parameter is
/// required unless it has a default.
pub const POLICY: Policy = Policy {
    what: "recipe",
    intent: Intent::Save,
    header_name: true,
    callable: &[Kind::Leaf, Kind::Workflow, Kind::Gateway],
    not_steps: &[(
        "recipe_run",
        "a recipe step does not run another recipe (a Lua recipe may, listing recipe_run in \
         `---@uses`)",
    )],
    max_steps: MAX_STEPS,
    unmarked_required: true,
    default_timeout: None,
    check_literal_calls: true,
};

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
pub fn check(registry: &Registry, mut manifest: Manifest) -> Result<Recipe> {
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
    let body = match (&manifest.steps, &manifest.lua) {
        (Some(_), Some(_)) => return Err(bad(&name, "", "give either `steps` or `lua`, not both")),
        (None, None) => {
            return Err(bad(
                &name,
                "/steps",
                "`steps` is required: give the body, JSON `steps` or a `lua` program",
            ));
        }
        (None, Some(lua)) => SourceBody::Lua {
            source: lua.clone(),
            modules: Vec::new(),
            config: None,
        },
        (Some(raw), None) => SourceBody::Steps(
            raw.iter()
                .enumerate()
                .map(|(i, v)| parse_step(&name, i, v))
                .collect::<Result<_>>()?,
        ),
    };
    let source = Source {
        name: name.clone(),
        chunk: format!("{}.lua", slug(&name)),
        description: manifest.description.clone().unwrap_or_default(),
        params: manifest.params.clone(),
        params_at: "/params".into(),
        body,
        steps_at: "/steps".into(),
        args_key: "args",
        lua_at: "/lua".into(),
        timeout: None,
        policy: POLICY,
    };
    let program = compile(source, registry)
        .map_err(|p| bad(&name, p.pointer("/lua"), p.located_message()))?;
    // The description a Lua header gives is the recipe's, whichever door saved it.
    if manifest.description.is_none() && !program.description.is_empty() {
        manifest.description = Some(program.description.clone());
    }
    Ok(Recipe { manifest, program })
}

/// Reads one step of the manifest's shape: `{tool, args}` or a wait.
fn parse_step(name: &str, i: usize, v: &Value) -> Result<StepSource> {
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
        return Ok(StepSource::Wait(secs));
    }
    let tool = m
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
    let args = m.get("args").cloned().unwrap_or_else(|| json!({}));
    if !args.is_object() {
        return Err(bad(name, format!("{at}/args"), "`args` must be an object"));
    }
    Ok(StepSource::Call {
        id: None,
        tool: tool.to_string(),
        args: Template::Interpolated(args),
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
