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

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::gate::{CallContext, size_bucket};
use crate::host::Host;
use crate::program::check::{self as checks, ArgRef, is_identifier};
use crate::program::header::{Header, ParamSpec, ParamType};
use crate::program::interpolate::Part;
use crate::program::steps::{RunMode, Step, Template};
use crate::program::{self, Body, LuaBody, Program, Resolved};
use crate::registry::{Annotations, Capabilities, Effect, Kind, Registry, ToolSpec, handler};
use crate::store::{self, FileLock};

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
pub fn check(host: &Host, manifest: Manifest) -> Result<Recipe> {
    let name = manifest.name.clone();
    if name.trim().is_empty() || name.chars().count() > 100 || name.chars().any(char::is_control) {
        return Err(bad(
            &name,
            "/name",
            "the name must be 1-100 characters of text",
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

/// A file name from a recipe name: lowercase letters, digits and `-`.
pub fn slug(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let trimmed = out.trim_end_matches('-');
    trimmed.chars().take(64).collect()
}

/// A recipe as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    format: u32,
    manifest: Manifest,
    created: String,
    updated: String,
}

fn dir(host: &Host) -> PathBuf {
    host.paths().data_dir.join("recipes")
}

fn file(host: &Host, name: &str) -> PathBuf {
    dir(host).join(format!("{}.json", slug(name)))
}

fn load(host: &Host, name: &str) -> Result<Stored> {
    let path = file(host, name);
    let stored: Stored = store::read_json(&path)?.ok_or_else(|| {
        let names: Vec<String> = list(host)
            .0
            .iter()
            .filter_map(|r| r["name"].as_str().map(str::to_string))
            .collect();
        let close: Vec<&String> = names
            .iter()
            .filter(|n| strsim::jaro_winkler(&n.to_lowercase(), &name.to_lowercase()) > 0.8)
            .collect();
        let hint = close
            .first()
            .map(|n| format!("; did you mean \"{n}\"?"))
            .unwrap_or_else(|| "; `lmcp recipe list` lists them".into());
        Error::Refused(format!("there is no recipe \"{name}\"{hint}"))
    })?;
    if stored.manifest.name != name && slug(&stored.manifest.name) != slug(name) {
        return Err(Error::Refused(format!("there is no recipe \"{name}\"")));
    }
    Ok(stored)
}

/// Saves a recipe after checking it; returns the checked recipe and whether one was replaced.
pub fn save(host: &Host, manifest: Manifest, replace: bool) -> Result<(Recipe, bool)> {
    let recipe = check(host, manifest)?;
    let name = recipe.manifest.name.clone();
    let path = file(host, &name);
    let _lock = FileLock::acquire(&path)?;
    let existing: Option<Stored> = match store::read_json(&path) {
        Ok(s) => s,
        Err(Error::Corrupt { .. }) if replace => None,
        Err(e) => return Err(e),
    };
    if let Some(old) = &existing {
        if old.manifest.name != name {
            return Err(Error::Refused(format!(
                "the recipe \"{}\" already uses the file name {}.json; choose another name",
                old.manifest.name,
                slug(&name)
            )));
        }
        if !replace {
            return Err(Error::Refused(format!(
                "a recipe named \"{name}\" exists; pass \"replace\": true to replace it"
            )));
        }
    }
    let now = store::timestamp();
    let stored = Stored {
        format: 1,
        manifest: recipe.manifest.clone(),
        created: existing
            .as_ref()
            .map_or_else(|| now.clone(), |o| o.created.clone()),
        updated: now,
    };
    store::write_json(&path, &stored)?;
    Ok((recipe, existing.is_some()))
}

/// Every saved recipe, and the files that could not be read (reported, never hiding the rest).
pub fn list(host: &Host) -> (Vec<Value>, Vec<String>) {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir(host)) else {
        return (out, problems);
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    for path in paths {
        match store::read_json::<Stored>(&path) {
            Ok(Some(s)) => out.push(json!({
                "name": s.manifest.name,
                "description": s.manifest.description,
                "body": if s.manifest.lua.is_some() { "lua" } else { "steps" },
                "step_count": s.manifest.steps.as_ref().map_or(0, Vec::len),
                "params": s.manifest.params,
                "created": s.created,
                "updated": s.updated,
            })),
            Ok(None) => {}
            Err(e) => problems.push(format!("{e}; skipped")),
        }
    }
    (out, problems)
}

pub use crate::program::RunReport;

fn shape(v: &Value) -> Value {
    match v {
        Value::String(s) => json!({"type": "string", "size": size_bucket(s.chars().count())}),
        Value::Array(a) => json!({"type": "array", "size": size_bucket(a.len())}),
        Value::Object(o) => json!({"type": "object", "size": size_bucket(o.len())}),
        Value::Null => json!({"type": "null"}),
        Value::Bool(_) => json!({"type": "boolean"}),
        Value::Number(_) => json!({"type": "number"}),
    }
}

/// Appends a run's journal (per step: status, duration, result shape) unless private mode.
fn journal(host: &Host, name: &str, outcome: &Result<RunReport>) {
    if host.config().modes.private {
        return;
    }
    let (confirmed, steps, result) = match outcome {
        Ok(r) => {
            let steps: Vec<Value> = r
                .records
                .iter()
                .map(|s| json!({"status": s.status, "duration_ms": s.duration_ms, "result": shape(&s.result)}))
                .collect();
            (r.confirmed, steps, "done".to_string())
        }
        Err(e) => (false, Vec::new(), format!("failed:{}", e.class())),
    };
    let entry = json!({
        "at": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "recipe": name,
        "confirmed": confirmed,
        "outcome": result,
        "steps": steps,
    });
    let path = host.paths().data_dir.join("recipe_runs.jsonl");
    let write = || -> Result<()> {
        let _lock = FileLock::acquire(&path)?;
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        let mut line = entry.to_string();
        line.push('\n');
        f.write_all(line.as_bytes())
            .map_err(|e| Error::io(&path, e))
    };
    if let Err(e) = write() {
        host.warn(format!("could not write the recipe journal: {e}"));
    }
}

/// Runs a checked recipe. `ctx` is the context of the call that runs it; `confirm` chooses a
/// real run or a plan; a given `expected_hash` must match the plan before anything runs, and
/// then only the plan's calls may run.
pub async fn run(
    host: &Arc<Host>,
    ctx: &CallContext,
    recipe: &Program,
    given: &Map<String, Value>,
    confirm: bool,
    expected_hash: Option<&str>,
) -> Result<RunReport> {
    let mode = if confirm {
        RunMode::Confirmed {
            plan_hash: expected_hash.map(str::to_string),
        }
    } else {
        RunMode::Plan
    };
    let outcome = program::run(host, ctx, recipe, given, mode).await;
    journal(host, &recipe.name, &outcome);
    outcome
}

/// The recipe a `recipe_run` call names (saved) or carries (an unsaved manifest), checked now.
fn requested(host: &Host, args: &Value) -> Result<Recipe> {
    match (
        args.get("name").and_then(Value::as_str),
        args.get("manifest"),
    ) {
        (Some(name), None) => check(host, load(host, name)?.manifest),
        (None, Some(m)) => check(host, parse_manifest(m.clone())?),
        _ => Err(Error::Usage(
            "give either `name` (a saved recipe) or `manifest` (an unsaved one), not both".into(),
        )),
    }
}

/// The gate's view of a `recipe_run` call: the program it runs, and whether for real.
fn resolve_run(host: &Host, args: &Value) -> Result<Resolved> {
    let recipe = requested(host, args)?;
    Ok(Resolved {
        program: Arc::new(recipe.program),
        for_real: args["confirm"] == json!(true),
    })
}

/// A portable bundle of a saved recipe.
pub fn export(host: &Host, name: &str) -> Result<Value> {
    let stored = load(host, name)?;
    let recipe = serde_json::to_value(&stored.manifest).unwrap_or_default();
    Ok(json!({
        "format": BUNDLE_FORMAT,
        "version": BUNDLE_VERSION,
        "lmcp_version": env!("CARGO_PKG_VERSION"),
        "exported_at": store::timestamp(),
        "sha256": content_hash(&recipe),
        "recipe": recipe,
    }))
}

fn content_hash(recipe: &Value) -> String {
    format!(
        "{:x}",
        Sha256::digest(serde_json::to_vec(recipe).unwrap_or_default())
    )
}

/// Checks a bundle (format, version, content hash, manifest) and reports every tool it calls
/// with its effect and availability here. Saves it unless `check_only`.
pub fn import(host: &Host, bundle: &Value, check_only: bool, replace: bool) -> Result<Value> {
    let format = bundle.get("format").and_then(Value::as_str).unwrap_or("");
    if format != BUNDLE_FORMAT {
        return Err(Error::Refused(format!(
            "this is not a recipe bundle (format is \"{format}\", expected \"{BUNDLE_FORMAT}\")"
        )));
    }
    let version = bundle.get("version").and_then(Value::as_i64).unwrap_or(0);
    if version != BUNDLE_VERSION {
        return Err(Error::Refused(format!(
            "bundle version {version} is not supported; this lmcp reads version {BUNDLE_VERSION}"
        )));
    }
    let recipe = bundle
        .get("recipe")
        .cloned()
        .ok_or_else(|| Error::Refused("the bundle holds no recipe".into()))?;
    let claimed = bundle.get("sha256").and_then(Value::as_str).unwrap_or("");
    if content_hash(&recipe) != claimed {
        return Err(Error::Refused(
            "the bundle's content does not match its sha256: it was changed after export (or damaged); \
             ask for a fresh export"
                .into(),
        ));
    }
    let manifest = parse_manifest(recipe)?;
    let checked = check(host, manifest)?;
    let config = host.config();
    let mut tools: Vec<Value> = Vec::new();
    let names: Vec<String> = match &checked.program.capabilities {
        Capabilities::Tools(names) => names.clone(),
        _ => Vec::new(),
    };
    for tool in &names {
        let t = host.registry().get(tool);
        let (effect, availability) = match &t {
            Some(t) => (
                json!(t.spec().effect),
                json!(t.spec().availability(&config, host.transport())),
            ),
            None => (
                Value::Null,
                json!({"status": "unavailable", "detail": "not installed"}),
            ),
        };
        tools.push(json!({"tool": tool, "effect": effect, "availability": availability}));
    }
    let mut report = json!({
        "name": checked.manifest.name,
        "step_count": checked.step_count(),
        "body": if checked.manifest.lua.is_some() { "lua" } else { "steps" },
        "tools": tools,
        "saved": false,
    });
    if checked.program.capabilities == Capabilities::ReadOnly {
        report["note"] = json!("a Lua recipe without ---@uses: it may call read tools only");
    }
    if !check_only {
        save(host, checked.manifest, replace)?;
        report["saved"] = json!(true);
    }
    Ok(report)
}

/// Deletes a saved recipe.
pub fn delete(host: &Host, name: &str) -> Result<()> {
    let stored = load(host, name)?;
    let path = file(host, &stored.manifest.name);
    let _lock = FileLock::acquire(&path)?;
    std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))
}

fn name_arg(v: &Value) -> String {
    v["name"].as_str().unwrap_or_default().to_string()
}

/// Registers the recipe tools.
pub fn register_tools(registry: &Registry) -> Result<()> {
    let write = Annotations::changing(false, true, false);
    let name_schema = json!({"type": "object", "properties": {"name": {"type": "string", "minLength": 1}}, "required": ["name"], "additionalProperties": false});

    let save_spec = ToolSpec::new(
        "recipe_save",
        "Save a recipe",
        "Save a reusable recipe — a named, ordered sequence of tool calls with parameters — so it \
         can be run again any time with recipe_run. The manifest: {\"name\": string (required), \
         \"description\": string, \"schema_version\": 1, \"params\": [{\"name\": string, \"type\": \
         \"string\"|\"int\"|\"bool\", \"default\": any}], \"steps\": [...] (required, non-empty), \
         \"outputs\": [{\"kind\": string}]}. A step is {\"tool\": NAME, \"args\": {...}} or a pause \
         {\"wait\": {\"seconds\": N}} (also {\"wait\": N}). Any arg string may interpolate a declared \
         param with ${name}; an arg that is exactly \"${name}\" keeps the param's type. A later step \
         reads an earlier step's output with \"${steps[N].result.KEY}\" (0-based; .key and [i]). \
         Write $${ for a literal ${. Instead of steps, \"lua\" may hold a Lua program. On recipe_run \
         a state-changing step previews unless confirm: true. Returns {name, step_count}.",
        json!({
            "type": "object",
            "properties": {
                "manifest": {"type": "object", "description": "The recipe manifest (see the description)"},
                "replace": {"type": "boolean", "default": false, "description": "Replace a recipe of the same name"}
            },
            "required": ["manifest"],
            "additionalProperties": false
        }),
    )
    .effect(Effect::Write, write)
    .kind(Kind::Authoring)
    .summary(|a| format!("save the recipe \"{}\"", a["manifest"]["name"].as_str().unwrap_or("?")));
    registry.register_builtin(save_spec, handler(|inv| async move {
        let manifest = parse_manifest(inv.args["manifest"].clone())?;
        let replace = inv.args["replace"].as_bool().unwrap_or(false);
        let (recipe, replaced) = save(&inv.host, manifest, replace)?;
        let body = if recipe.manifest.lua.is_some() { "lua" } else { "steps" };
        Ok(json!({"name": recipe.manifest.name, "step_count": recipe.step_count(), "body": body, "replaced": replaced}))
    }))?;

    let run_spec = ToolSpec::new(
        "recipe_run",
        "Run a recipe",
        "Run a saved recipe by name (or an unsaved one given as `manifest`) with its params. \
         Without confirm: true it is a plan: read steps run, state-changing calls are previewed \
         (those of nested programs too), and the result lists each step with its resolved \
         arguments, effect and status plus a plan_hash. With confirm: true it runs for real; pass \
         the plan_hash a person approved and nothing runs unless the plan still matches, and only \
         the calls it showed may run. A failing step stops the run (a plan too) and returns the \
         completed steps with the error. The effect of a call is that of the recipe's tools.",
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1, "description": "A saved recipe's name"},
                "manifest": {"type": "object", "description": "An unsaved recipe manifest, instead of name"},
                "params": {"type": "object"},
                "confirm": {"type": "boolean", "default": false},
                "plan_hash": {"type": "string", "pattern": "^[0-9a-f]{64}$"}
            },
            "additionalProperties": false
        }),
    )
    .effect(Effect::Write, Annotations::changing(false, false, true))
    .kind(Kind::Gateway)
    .without_preview()
    .resolves(resolve_run)
    .summary(|a| {
        let name = a["name"].as_str().or(a["manifest"]["name"].as_str()).unwrap_or("?");
        format!("run the recipe \"{name}\"{}", if a["confirm"] == json!(true) { " for real" } else { " as a plan" })
    });
    registry.register_builtin(
        run_spec,
        handler(|inv| async move {
            let program = match &inv.program {
                Some(p) => Arc::clone(p),
                None => Arc::new(requested(&inv.host, &inv.args)?.program),
            };
            let params = inv.args["params"].as_object().cloned().unwrap_or_default();
            let confirm = inv.args["confirm"].as_bool().unwrap_or(false);
            let report = run(
                &inv.host,
                &inv.ctx,
                &program,
                &params,
                confirm,
                inv.args["plan_hash"].as_str(),
            )
            .await?;
            Ok(serde_json::to_value(report).unwrap_or_default())
        }),
    )?;

    let list_spec = ToolSpec::new(
        "recipe_list",
        "List recipes",
        "List the saved recipes: name, description, body (steps or lua), step count, params, and when each was created and updated.",
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
    );
    registry.register_builtin(
        list_spec,
        handler(|inv| async move {
            let (recipes, problems) = list(&inv.host);
            for p in &problems {
                inv.host.warn(p.clone());
            }
            Ok(json!({"recipes": recipes, "unreadable": problems}))
        }),
    )?;

    let get_spec = ToolSpec::new(
        "recipe_get",
        "Show a recipe",
        "Return a saved recipe's manifest, with when it was created and updated.",
        name_schema.clone(),
    );
    registry.register_builtin(
        get_spec,
        handler(|inv| async move {
            let s = load(&inv.host, &name_arg(&inv.args))?;
            Ok(json!({"manifest": s.manifest, "created": s.created, "updated": s.updated}))
        }),
    )?;

    let export_spec = ToolSpec::new(
        "recipe_export",
        "Export a recipe",
        "Return a saved recipe as a portable, versioned bundle with a content hash, for recipe_import on another machine.",
        name_schema.clone(),
    );
    registry.register_builtin(
        export_spec,
        handler(|inv| async move { export(&inv.host, &name_arg(&inv.args)) }),
    )?;

    let import_spec = ToolSpec::new(
        "recipe_import",
        "Import a recipe",
        "Import a bundle made by recipe_export: refuses a bundle whose content does not match its \
         hash, checks the recipe like recipe_save, and reports every tool it calls with its effect \
         and availability here. With check_only: true it only reports.",
        json!({
            "type": "object",
            "properties": {
                "bundle": {"type": "object"},
                "check_only": {"type": "boolean", "default": false},
                "replace": {"type": "boolean", "default": false}
            },
            "required": ["bundle"],
            "additionalProperties": false
        }),
    )
    .effect(Effect::Write, write)
    .kind(Kind::Authoring)
    .summary(|a| {
        format!(
            "import the recipe \"{}\"",
            a["bundle"]["recipe"]["name"].as_str().unwrap_or("?")
        )
    });
    registry.register_builtin(
        import_spec,
        handler(|inv| async move {
            let check_only = inv.args["check_only"].as_bool().unwrap_or(false);
            let replace = inv.args["replace"].as_bool().unwrap_or(false);
            import(&inv.host, &inv.args["bundle"], check_only, replace)
        }),
    )?;

    let delete_spec = ToolSpec::new(
        "recipe_delete",
        "Delete a recipe",
        "Delete a saved recipe. It cannot be undone.",
        name_schema,
    )
    .effect(Effect::Write, Annotations::changing(true, true, false))
    .kind(Kind::Authoring)
    .summary(|a| {
        format!(
            "delete the recipe \"{}\"",
            a["name"].as_str().unwrap_or("?")
        )
    });
    registry.register_builtin(
        delete_spec,
        handler(|inv| async move {
            let name = name_arg(&inv.args);
            delete(&inv.host, &name)?;
            Ok(json!({"deleted": name}))
        }),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs() {
        assert_eq!(slug("Demo morning brief"), "demo-morning-brief");
        assert_eq!(slug("  Weekly: Report!! "), "weekly-report");
        assert_eq!(slug("***"), "");
    }
}
