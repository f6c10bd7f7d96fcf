//! Custom tools: named workflows that agents and people save, which become `user_*` tools at once.
//!
//! A definition is JSON steps (`[{id, tool, arguments}]`, where `{"$input": "x"}` substitutes an
//! input and `{"$step": "id", "path": "result.items[0]"}` reads an earlier step's result) or a Lua
//! body with the program header. It is checked completely when it is created — names, step
//! references, argument types against each step tool's schema, required inputs — and stored as one
//! JSON file per tool under `DATA/tools/`, loaded again at start (a file that no longer checks is
//! reported and skipped; the others still load).
//!
//! A custom tool's effect is the strongest effect of the tools it may call, and the gate confirms
//! the call as a whole; its steps then run as nested calls under that confirmation, each still
//! checked for grants, modes and availability, and limited to the tools the definition declared
//! (its steps, or a Lua body's `---@uses`; a Lua body without one may call read tools only).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::error::{Error, Result, SchemaProblem};
use crate::host::Host;
use crate::program::header::{Header, ParamType};
use crate::program::steps::{self, Segment, StepRecord};
use crate::registry::{Annotations, Capabilities, Effect, Handler, Kind, ToolSpec, handler};
use crate::script::{self, Output, Script, VmOptions};
use crate::store::{self, FileLock};

/// The version of the stored definition format.
pub const FORMAT: u32 = 1;
/// Most steps in one JSON workflow.
pub const MAX_STEPS: usize = 100;

/// A typed input of a custom tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Parameter {
    /// Its name (letters, digits, `_`).
    pub name: String,
    /// string, number, integer, boolean, object or array.
    #[serde(rename = "type")]
    pub kind: String,
    /// What it means.
    #[serde(default)]
    pub description: String,
    /// Whether callers must give it.
    #[serde(default)]
    pub required: bool,
}

/// One JSON step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// Unique within the tool; later steps refer to it.
    pub id: String,
    /// An existing leaf tool.
    pub tool: String,
    /// The arguments, with `$input` and `$step` placeholders.
    #[serde(default)]
    pub arguments: Map<String, Value>,
}

/// A custom tool as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Definition {
    /// The stored format's version.
    #[serde(default = "format")]
    pub format: u32,
    /// `user_...`.
    pub name: String,
    /// Its precise purpose.
    pub description: String,
    /// Typed inputs (JSON workflows; a Lua body declares them in its header).
    #[serde(default)]
    pub parameters: Vec<Parameter>,
    /// JSON steps, or...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<Vec<Step>>,
    /// ...a Lua body with the program header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lua: Option<String>,
    /// When it was first created (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    /// When it was last saved (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated: Option<String>,
}

fn format() -> u32 {
    FORMAT
}

/// A checked definition, ready to run.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// What was stored.
    pub definition: Definition,
    /// Its parameters as one list (from `parameters` or the Lua header).
    pub parameters: Vec<Parameter>,
    /// The Lua header (parameters with defaults, timeout), for Lua bodies.
    pub header: Option<Header>,
    /// What it may call.
    pub capabilities: Capabilities,
    /// The tool's description for the registry.
    pub spec: ToolSpec,
}

fn bad(name: &str, message: impl Into<String>) -> Error {
    Error::Definition {
        tool: name.to_string(),
        message: message.into(),
    }
}

fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Checks a definition against the tools registered now.
pub fn compile(host: &Host, definition: Definition) -> Result<Compiled> {
    let name = definition.name.clone();
    if !name.starts_with("user_") || crate::registry::check_name(&name).is_err() || name.len() <= 5
    {
        return Err(bad(
            &name,
            "the name must start with `user_` and then use lowercase letters, digits and `_` \
             (at most 64 characters), like `user_daily_summary`",
        ));
    }
    if definition.description.trim().is_empty() {
        return Err(bad(
            &name,
            "`description` is empty; say precisely what the tool does",
        ));
    }
    if definition.format != FORMAT {
        return Err(bad(
            &name,
            format!(
                "unknown definition format {}; this lmcp reads format {FORMAT}",
                definition.format
            ),
        ));
    }
    match (&definition.steps, &definition.lua) {
        (Some(_), Some(_)) => Err(bad(&name, "give either `steps` or `lua`, not both")),
        (None, None) => Err(bad(&name, "give the body: JSON `steps` or a `lua` program")),
        (Some(steps), None) => compile_steps(host, &definition, steps),
        (None, Some(lua)) => compile_lua(host, &definition, lua),
    }
}

fn check_parameters(name: &str, params: &[Parameter]) -> Result<()> {
    let mut seen = Vec::new();
    for (i, p) in params.iter().enumerate() {
        let at = format!("parameters[{i}]");
        if !is_identifier(&p.name) || p.name.contains('-') {
            return Err(bad(
                name,
                format!(
                    "{at}: `{}` is not a valid name (letters, digits, _)",
                    p.name
                ),
            ));
        }
        if seen.contains(&p.name.as_str()) {
            return Err(bad(
                name,
                format!("{at}: parameter `{}` is declared twice", p.name),
            ));
        }
        seen.push(&p.name);
        if ParamType::parse(&p.kind).is_none()
            || p.kind == "table"
            || p.kind == "int"
            || p.kind == "bool"
        {
            return Err(bad(
                name,
                format!(
                    "{at}: `{}` has unknown type `{}`; use string, number, integer, boolean, object or array",
                    p.name, p.kind
                ),
            ));
        }
    }
    Ok(())
}

fn params_schema(params: &[Parameter]) -> Value {
    let mut props = Map::new();
    for p in params {
        let mut s = json!({"type": p.kind});
        if !p.description.is_empty() {
            s["description"] = json!(p.description);
        }
        props.insert(p.name.clone(), s);
    }
    let required: Vec<&str> = params
        .iter()
        .filter(|p| p.required)
        .map(|p| p.name.as_str())
        .collect();
    json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
}

/// The spec of a custom tool whose calls are limited to `tools` (looked up now).
fn workflow_spec(
    host: &Host,
    def: &Definition,
    params: &[Parameter],
    caps: &Capabilities,
) -> ToolSpec {
    let (effect, annotations) = crate::registry::program_effect(host.registry(), caps);
    ToolSpec::new(
        &def.name,
        &def.name,
        &def.description,
        params_schema(params),
    )
    .effect(effect, annotations)
    .kind(Kind::Workflow)
    .capabilities(caps.clone())
}

fn leaf_tool(host: &Host, name: &str, tool: &str, at: &str) -> Result<Arc<crate::registry::Tool>> {
    let t = host.registry().get(tool).ok_or_else(|| {
        let hint = host.registry().closest(tool);
        let hint = hint
            .first()
            .map(|h| format!("; did you mean `{h}`?"))
            .unwrap_or_default();
        bad(name, format!("{at}: there is no tool `{tool}`{hint}"))
    })?;
    if t.spec().kind != Kind::Leaf {
        return Err(bad(
            name,
            format!(
                "{at}: `{tool}` is a {} tool; steps can only call leaf tools (no gateways, workflows or authoring tools)",
                t.spec().kind
            ),
        ));
    }
    Ok(t)
}

/// A placeholder in step arguments.
#[derive(Debug, Clone, PartialEq)]
enum Placeholder {
    Input(String),
    Step {
        id: String,
        path: Vec<Segment>,
        text: String,
    },
}

fn placeholder(v: &Value) -> std::result::Result<Option<Placeholder>, String> {
    let Value::Object(m) = v else { return Ok(None) };
    if let Some(input) = m.get("$input") {
        let name = input
            .as_str()
            .ok_or("`$input` must name an input (a string)")?;
        if m.len() != 1 {
            return Err("an `$input` object holds only `$input`".into());
        }
        return Ok(Some(Placeholder::Input(name.to_string())));
    }
    if let Some(step) = m.get("$step") {
        let id = step
            .as_str()
            .ok_or("`$step` must name an earlier step (a string)")?;
        let path = match m.get("path") {
            None => "result",
            Some(Value::String(p)) => p.as_str(),
            Some(_) => return Err("`path` must be a string like \"result.items[0]\"".into()),
        };
        if m.keys().any(|k| k != "$step" && k != "path") {
            return Err("a `$step` object holds only `$step` and `path`".into());
        }
        let rest = path
            .strip_prefix("result")
            .ok_or_else(|| format!("`path` starts at the step's result, like \"result\" or \"result.items[0]\"; got \"{path}\""))?;
        let segments = steps::parse_path(rest)?;
        return Ok(Some(Placeholder::Step {
            id: id.to_string(),
            path: segments,
            text: path.to_string(),
        }));
    }
    Ok(None)
}

/// Replaces placeholders by type samples (for schema checks) and collects them by pointer.
fn sample(
    v: &Value,
    params: &[Parameter],
    pointer: &str,
    found: &mut Vec<(String, Placeholder)>,
) -> std::result::Result<Value, String> {
    if let Some(p) = placeholder(v).map_err(|m| format!("at {pointer}: {m}"))? {
        let s = match &p {
            Placeholder::Input(name) => match params.iter().find(|q| &q.name == name) {
                Some(q) => sample_of(&q.kind),
                None => Value::Null,
            },
            Placeholder::Step { .. } => Value::Null,
        };
        found.push((pointer.to_string(), p));
        return Ok(s);
    }
    Ok(match v {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, x) in m {
                let ptr = format!("{pointer}/{}", k.replace('~', "~0").replace('/', "~1"));
                out.insert(k.clone(), sample(x, params, &ptr, found)?);
            }
            Value::Object(out)
        }
        Value::Array(a) => {
            let mut out = Vec::new();
            for (i, x) in a.iter().enumerate() {
                out.push(sample(x, params, &format!("{pointer}/{i}"), found)?);
            }
            Value::Array(out)
        }
        other => other.clone(),
    })
}

fn sample_of(kind: &str) -> Value {
    match kind {
        "string" => json!("x"),
        "integer" => json!(1),
        "number" => json!(1.5),
        "boolean" => json!(true),
        "object" => json!({}),
        "array" => json!([]),
        _ => Value::Null,
    }
}

fn compile_steps(host: &Host, def: &Definition, steps_list: &[Step]) -> Result<Compiled> {
    let name = &def.name;
    check_parameters(name, &def.parameters)?;
    if steps_list.is_empty() {
        return Err(bad(name, "`steps` is empty; give at least one step"));
    }
    if steps_list.len() > MAX_STEPS {
        return Err(bad(
            name,
            format!(
                "{} steps is more than the {MAX_STEPS} allowed",
                steps_list.len()
            ),
        ));
    }
    let mut ids: Vec<&str> = Vec::new();
    let mut tools: Vec<String> = Vec::new();
    for (i, step) in steps_list.iter().enumerate() {
        let at = format!("steps[{i}] (`{}`)", step.id);
        if !is_identifier(&step.id) {
            return Err(bad(
                name,
                format!(
                    "steps[{i}]: id `{}` must be letters, digits, `_` or `-`",
                    step.id
                ),
            ));
        }
        if ids.contains(&step.id.as_str()) {
            return Err(bad(
                name,
                format!(
                    "{at}: the id `{}` is used twice; step ids must be unique",
                    step.id
                ),
            ));
        }
        let tool = leaf_tool(host, name, &step.tool, &at)?;
        let mut found = Vec::new();
        let instance = sample(
            &Value::Object(step.arguments.clone()),
            &def.parameters,
            "",
            &mut found,
        )
        .map_err(|m| bad(name, format!("{at}: arguments {m}")))?;
        for (pointer, p) in &found {
            let arg = if pointer.is_empty() {
                "(root)".to_string()
            } else {
                pointer.clone()
            };
            match p {
                Placeholder::Input(input) => {
                    if !def.parameters.iter().any(|q| &q.name == input) {
                        return Err(bad(
                            name,
                            format!(
                                "{at}: argument {arg} uses input `{input}`, which is not declared in `parameters`"
                            ),
                        ));
                    }
                }
                Placeholder::Step { id, text, .. } => {
                    if id == &step.id {
                        return Err(bad(
                            name,
                            format!(
                                "{at}: argument {arg} refers to its own step; refer to an earlier one"
                            ),
                        ));
                    }
                    if !ids.contains(&id.as_str()) {
                        let later = steps_list.iter().any(|s| &s.id == id);
                        let why = if later {
                            "a later step; references must point backward"
                        } else {
                            "no step"
                        };
                        return Err(bad(
                            name,
                            format!("{at}: argument {arg} reads `{id}` ({text}), which is {why}"),
                        ));
                    }
                }
            }
        }
        check_arguments(name, &at, &tool, &instance, &found, &def.parameters)?;
        ids.push(&step.id);
        if !tools.contains(&step.tool) {
            tools.push(step.tool.clone());
        }
    }
    let caps = Capabilities::Tools(tools);
    let spec = workflow_spec(host, def, &def.parameters, &caps);
    Ok(Compiled {
        definition: def.clone(),
        parameters: def.parameters.clone(),
        header: None,
        capabilities: caps,
        spec,
    })
}

/// Validates a step's arguments (with placeholders replaced by samples) against its tool's schema.
fn check_arguments(
    name: &str,
    at: &str,
    tool: &crate::registry::Tool,
    instance: &Value,
    found: &[(String, Placeholder)],
    params: &[Parameter],
) -> Result<()> {
    let tool_name = &tool.spec().name;
    let validator = tool.validator()?;
    let mut problems: Vec<SchemaProblem> = Vec::new();
    for e in validator.iter_errors(instance) {
        let pointer = e.instance_path().to_string();
        let keyword = e.kind().keyword().to_string();
        let under = found
            .iter()
            .find(|(p, _)| pointer == *p || pointer.starts_with(&format!("{p}/")));
        match under {
            None => problems.push(SchemaProblem {
                pointer,
                rule: keyword,
                message: e.masked().to_string(),
            }),
            Some((p, Placeholder::Input(input))) if *p == pointer && keyword == "type" => {
                let given = params
                    .iter()
                    .find(|q| &q.name == input)
                    .map_or("?", |q| q.kind.as_str());
                let key = pointer.trim_start_matches('/');
                let expected = tool.spec().input_schema["properties"][key]["type"].clone();
                let expected = match expected {
                    Value::String(t) => format!("a {t}"),
                    Value::Null => "another type".to_string(),
                    other => format!("one of {other}"),
                };
                return Err(bad(
                    name,
                    format!(
                        "{at}: argument {pointer} takes input `{input}`, a {given}, but `{tool_name}` expects {expected} there"
                    ),
                ));
            }
            // Constraints on a value only known at run time (a step result, an input's length).
            Some(_) => {}
        }
    }
    if let Some(p) = problems.first() {
        return Err(bad(
            name,
            format!("{at}: the arguments do not fit `{tool_name}`: {p}"),
        ));
    }
    let required: Vec<&str> = tool
        .spec()
        .input_schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for (pointer, p) in found {
        if let Placeholder::Input(input) = p {
            let key = pointer.trim_start_matches('/');
            let optional = params.iter().any(|q| &q.name == input && !q.required);
            if optional && !key.contains('/') && required.contains(&key) {
                return Err(bad(
                    name,
                    format!(
                        "{at}: `{tool_name}` requires `{key}`, but it takes the optional input `{input}`; make `{input}` required or give a literal"
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn compile_lua(host: &Host, def: &Definition, source: &str) -> Result<Compiled> {
    let name = &def.name;
    let header = Header::parse(source).map_err(|e| bad(name, format!("the Lua body: {e}")))?;
    if let Some(h) = &header.name
        && h != name
    {
        return Err(bad(
            name,
            format!("the Lua header says `---@name {h}`, but the tool is named `{name}`"),
        ));
    }
    if !def.parameters.is_empty() {
        return Err(bad(
            name,
            "a Lua body declares its parameters in its header (`---@param NAME TYPE description`), not in `parameters`",
        ));
    }
    if let Some(line) = crate::script::find_close_attribute(source) {
        return Err(bad(
            name,
            format!(
                "the Lua body: line {line}: to-be-closed variables (<close>) are not available in the sandbox"
            ),
        ));
    }
    let lua = mlua::Lua::new_with(mlua::StdLib::NONE, mlua::LuaOptions::new())
        .map_err(|e| bad(name, e.to_string()))?;
    if let Err(e) = lua
        .load(source)
        .set_name(format!("={name}.lua"))
        .set_mode(mlua::chunk::ChunkMode::Text)
        .into_function()
    {
        return Err(bad(name, format!("the Lua body does not compile: {e}")));
    }
    let caps = match &header.uses {
        Some(uses) => {
            for (i, tool) in uses.iter().enumerate() {
                leaf_tool(host, name, tool, &format!("@uses[{i}]"))?;
            }
            Capabilities::Tools(uses.clone())
        }
        None => Capabilities::ReadOnly,
    };
    let parameters: Vec<Parameter> = header
        .params
        .iter()
        .map(|p| Parameter {
            name: p.name.clone(),
            kind: p.kind.json_type().to_string(),
            description: p.description.clone(),
            required: p.required,
        })
        .collect();
    let mut spec = workflow_spec(host, def, &parameters, &caps);
    spec.input_schema = header.params_schema();
    Ok(Compiled {
        definition: def.clone(),
        parameters,
        header: Some(header),
        capabilities: caps,
        spec,
    })
}

/// Resolves placeholders for a run: inputs from the call's arguments, `$step` from results.
fn resolve(
    v: &Value,
    inputs: &Map<String, Value>,
    done: &[StepRecord],
) -> std::result::Result<Option<Value>, String> {
    match placeholder(v)? {
        Some(Placeholder::Input(name)) => Ok(inputs.get(&name).cloned()),
        Some(Placeholder::Step { id, path, text }) => {
            let record = done
                .iter()
                .find(|r| r.id == id)
                .ok_or_else(|| format!("step `{id}` has not run"))?;
            let found = steps::lookup(&record.result, &path, "result")
                .map_err(|m| format!("reading `{id}`'s {text}: {m}"))?;
            Ok(Some(found.clone()))
        }
        None => Ok(Some(match v {
            Value::Object(m) => {
                let mut out = Map::new();
                for (k, x) in m {
                    // An optional input that was not given leaves its argument out.
                    if let Some(r) = resolve(x, inputs, done)? {
                        out.insert(k.clone(), r);
                    }
                }
                Value::Object(out)
            }
            Value::Array(a) => {
                let mut out = Vec::new();
                for x in a {
                    out.push(resolve(x, inputs, done)?.unwrap_or(Value::Null));
                }
                Value::Array(out)
            }
            other => other.clone(),
        })),
    }
}

/// The handler that runs a compiled custom tool.
pub fn workflow_handler(compiled: Arc<Compiled>) -> Handler {
    handler(move |inv| {
        let c = Arc::clone(&compiled);
        async move {
            let name = c.definition.name.clone();
            let ctx = inv.ctx.clone().restricted(&name, c.capabilities.clone());
            let inputs = inv.args.as_object().cloned().unwrap_or_default();
            if let Some(source) = &c.definition.lua {
                let config = inv.host.config();
                let header = c.header.clone().unwrap_or_default();
                let timeout = header.timeout.unwrap_or(Duration::from_secs(
                    config.limits.lua_timeout_secs.max(1) as u64,
                ));
                let params = header.bind(&inputs)?;
                let options = VmOptions {
                    limits: config.limits.script(),
                    output: Output::Capture,
                    params,
                    modules: Vec::new(),
                    config: None,
                };
                let script = Script {
                    source: source.clone(),
                    name: format!("{name}.lua"),
                };
                let outcome =
                    script::run(&inv.host, script, ctx.with_timeout(timeout), options).await?;
                let previews: Vec<Value> = outcome.previews.iter().map(|p| p.to_json()).collect();
                return Ok(
                    json!({"result": outcome.value, "output": outcome.output, "previews": previews}),
                );
            }
            let mut done: Vec<StepRecord> = Vec::new();
            for step in c.definition.steps.iter().flatten() {
                let args = resolve(&Value::Object(step.arguments.clone()), &inputs, &done)
                    .map_err(|m| Error::tool(&name, format!("step `{}`: {m}", step.id)))
                    .map(Option::unwrap_or_default);
                let record = match args {
                    Ok(args) => steps::run_step(&inv.host, &ctx, &step.id, &step.tool, args).await,
                    Err(e) => Err(e),
                };
                match record {
                    Ok(r) => done.push(r),
                    Err(e) => {
                        return Err(steps::step_failed(&name, &step.id, &step.tool, &e, &done));
                    }
                }
            }
            let result = done.last().map(|r| r.result.clone()).unwrap_or(Value::Null);
            let records: Vec<Value> = done.iter().map(StepRecord::summary).collect();
            Ok(json!({"result": result, "steps": records}))
        }
    })
}

/// Where custom tools are stored.
pub fn dir(host: &Host) -> PathBuf {
    host.paths().data_dir.join("tools")
}

fn file(host: &Host, name: &str) -> PathBuf {
    dir(host).join(format!("{name}.json"))
}

/// The stored custom tool files (`NAME.json`), sorted.
pub fn stored_files(host: &Host) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir(host)) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    paths
}

/// Loads every stored custom tool; a file that does not parse or check is reported and skipped.
pub fn load_all(host: &Host) {
    for path in stored_files(host) {
        load_file(host, &path);
    }
}

/// Loads (or reloads) one stored custom tool; a file that does not parse or check is reported
/// and skipped.
pub fn load_file(host: &Host, path: &Path) {
    let loaded = store::read_json::<Definition>(path).and_then(|d| {
        let d =
            d.ok_or_else(|| Error::io(path, std::io::Error::from(std::io::ErrorKind::NotFound)))?;
        let expected = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        if d.name != expected {
            return Err(bad(
                &d.name,
                format!("it is stored as {expected}.json; the file name must match the tool name"),
            ));
        }
        let c = Arc::new(compile(host, d)?);
        host.registry()
            .register_or_replace(c.spec.clone(), workflow_handler(Arc::clone(&c)))
    });
    if let Err(e) = loaded {
        host.warn(format!(
            "custom tool {} was not loaded: {e}",
            path.display()
        ));
    }
}

/// Saves (and registers) a definition; the tool is callable as soon as this returns.
pub fn save(host: &Host, mut def: Definition, replace: bool) -> Result<(Arc<Compiled>, bool)> {
    let name = def.name.clone();
    let path = file(host, &name);
    let _lock = FileLock::acquire(&path)?;
    let existing: Option<Definition> = match store::read_json(&path) {
        Ok(d) => d,
        Err(Error::Corrupt { .. }) => None,
        Err(e) => return Err(e),
    };
    let exists = existing.is_some() || host.registry().get(&name).is_some();
    if exists && !replace {
        return Err(Error::Refused(format!(
            "`{name}` already exists; pass \"replace\": true to replace it"
        )));
    }
    if let Some(t) = host.registry().get(&name)
        && t.spec().kind != Kind::Workflow
    {
        return Err(Error::Refused(format!(
            "`{name}` is not a custom tool and cannot be replaced"
        )));
    }
    let now = store::timestamp();
    def.created = existing
        .as_ref()
        .and_then(|d| d.created.clone())
        .or_else(|| Some(now.clone()));
    def.updated = Some(now);
    let compiled = Arc::new(compile(host, def)?);
    store::write_json(&path, &compiled.definition)?;
    host.registry().register_or_replace(
        compiled.spec.clone(),
        workflow_handler(Arc::clone(&compiled)),
    )?;
    Ok((compiled, exists))
}

/// Deletes a custom tool: its file and its registration.
pub fn delete(host: &Host, name: &str) -> Result<()> {
    if !name.starts_with("user_") {
        return Err(Error::Refused(format!(
            "`{name}` is not a custom tool (their names start with `user_`)"
        )));
    }
    let path = file(host, name);
    let _lock = FileLock::acquire(&path)?;
    let on_disk = path.exists();
    if !on_disk && host.registry().get(name).is_none() {
        let hint = host.registry().closest(name);
        let hint = hint
            .first()
            .map(|h| format!("; did you mean `{h}`?"))
            .unwrap_or_default();
        return Err(Error::Refused(format!(
            "there is no custom tool `{name}`{hint}"
        )));
    }
    if on_disk {
        std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
    }
    host.registry().unregister(name);
    Ok(())
}

/// Every custom tool, described for people and agents.
pub fn list(host: &Host) -> Vec<Value> {
    let mut out = BTreeMap::new();
    for t in host.registry().all() {
        let s = t.spec();
        if s.kind != Kind::Workflow {
            continue;
        }
        let def: Option<Definition> = store::read_json(&file(host, &s.name)).ok().flatten();
        out.insert(
            s.name.clone(),
            json!({
                "name": s.name,
                "description": s.description,
                "body": if def.as_ref().is_some_and(|d| d.lua.is_some()) { "lua" } else { "steps" },
                "effect": s.effect,
                "destructive": s.annotations.destructive_hint,
                "may_call": s.capabilities.as_ref().map(Capabilities::describe),
                "input_schema": s.input_schema,
                "created": def.as_ref().and_then(|d| d.created.clone()),
                "updated": def.as_ref().and_then(|d| d.updated.clone()),
            }),
        );
    }
    out.into_values().collect()
}

/// Registers `custom_tool_create`, `custom_tool_list` and `custom_tool_delete`.
pub fn register_tools(registry: &crate::registry::Registry) -> Result<()> {
    let param_schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "type": {"type": "string", "enum": ["string", "number", "integer", "boolean", "object", "array"]},
            "description": {"type": "string"},
            "required": {"type": "boolean"}
        },
        "required": ["name", "type"],
        "additionalProperties": false
    });
    let step_schema = json!({
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "tool": {"type": "string"},
            "arguments": {"type": "object"}
        },
        "required": ["id", "tool"],
        "additionalProperties": false
    });
    let create = ToolSpec::new(
        "custom_tool_create",
        "Create a custom tool",
        "Save a named, reusable workflow as a new tool, discoverable at once and kept across \
         restarts. Discover existing tools first; prefer a direct call for one-off work. Names start \
         with user_. Give a precise description and typed parameters [{name, type (string, number, \
         integer, boolean, object, array), description, required}], then either JSON steps [{id \
         (unique), tool (an existing leaf tool), arguments}] or a Lua body (`lua`, a program with a \
         ---@param header and ---@uses listing the tools it calls). In arguments, {\"$input\": \
         \"name\"} substitutes an input and {\"$step\": \"earlier_id\", \"path\": \"result\"} reads an \
         earlier step's result (deeper: \"result.items[0].name\"); other JSON is literal. References \
         point backward; an optional input cannot fill an argument its tool requires. Steps cannot \
         be gateways, workflows or authoring tools. Replacing a tool needs replace: true.",
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "pattern": "^user_[a-z0-9_]{1,59}$"},
                "description": {"type": "string", "minLength": 1},
                "parameters": {"type": "array", "items": param_schema},
                "steps": {"type": "array", "items": step_schema, "minItems": 1},
                "lua": {"type": "string", "minLength": 1},
                "replace": {"type": "boolean", "default": false}
            },
            "required": ["name", "description"],
            "additionalProperties": false
        }),
    )
    .effect(Effect::Write, Annotations::changing(false, true, false))
    .kind(Kind::Authoring)
    .summary(|a| format!("save the custom tool {}", a["name"].as_str().unwrap_or("?")));
    registry.register_builtin(
        create,
        handler(|inv| async move {
            let mut args = inv.args.clone();
            let replace = args
                .as_object_mut()
                .and_then(|m| m.remove("replace"))
                .and_then(|v| v.as_bool())
                .unwrap_or(false);
            let def: Definition = serde_json::from_value(args)
                .map_err(|e| Error::Usage(format!("bad custom tool definition: {e}")))?;
            let (c, replaced) = save(&inv.host, def, replace)?;
            Ok(json!({
                "name": c.spec.name,
                "effect": c.spec.effect,
                "may_call": c.capabilities.describe(),
                "input_schema": c.spec.input_schema,
                "replaced": replaced,
            }))
        }),
    )?;

    let list_spec = ToolSpec::new(
        "custom_tool_list",
        "List custom tools",
        "List the saved custom tools (user_*): description, body (steps or lua), effect, the tools \
         each may call, input schema, and when it was created and updated.",
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
    )
    .kind(Kind::Authoring);
    registry.register_builtin(
        list_spec,
        handler(|inv| async move { Ok(json!({"tools": list(&inv.host)})) }),
    )?;

    let delete_spec = ToolSpec::new(
        "custom_tool_delete",
        "Delete a custom tool",
        "Delete a saved custom tool (user_*). Only when asked to: it cannot be undone.",
        json!({
            "type": "object",
            "properties": {"name": {"type": "string", "pattern": "^user_"}},
            "required": ["name"],
            "additionalProperties": false
        }),
    )
    .effect(Effect::Write, Annotations::changing(true, true, false))
    .kind(Kind::Authoring)
    .summary(|a| {
        format!(
            "delete the custom tool {}",
            a["name"].as_str().unwrap_or("?")
        )
    });
    registry.register_builtin(
        delete_spec,
        handler(|inv| async move {
            let name = inv.args["name"].as_str().unwrap_or_default().to_string();
            delete(&inv.host, &name)?;
            Ok(json!({"deleted": name}))
        }),
    )?;
    Ok(())
}
