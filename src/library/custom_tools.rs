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

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::error::{Error, Result};
use crate::host::Host;
use crate::program::check::{self as checks, ArgRef, is_identifier};
use crate::program::header::{Header, ParamSpec, ParamType};
use crate::program::steps::{Placeholder, RunMode, StepRecord, Template};
use crate::program::{self, Body, LuaBody, Program, Scope};
use crate::registry::{Annotations, Capabilities, Effect, Handler, Kind, ToolSpec, handler};
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
    /// The program it is: typed params, what it may call, steps or Lua.
    pub program: Program,
    /// The tool's description for the registry.
    pub spec: ToolSpec,
}

fn bad(name: &str, message: impl Into<String>) -> Error {
    Error::Definition {
        tool: name.to_string(),
        message: message.into(),
    }
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

/// The declared parameters, checked: identifiers, no duplicates, known types.
fn check_parameters(name: &str, params: &[Parameter]) -> Result<Vec<ParamSpec>> {
    let mut out: Vec<ParamSpec> = Vec::new();
    for (i, p) in params.iter().enumerate() {
        let at = format!("at /parameters/{i}");
        if !is_identifier(&p.name) {
            return Err(bad(
                name,
                format!(
                    "{at}: `{}` is not a valid name (letters, digits, _)",
                    p.name
                ),
            ));
        }
        if out.iter().any(|q| q.name == p.name) {
            return Err(bad(
                name,
                format!("{at}: parameter `{}` is declared twice", p.name),
            ));
        }
        let kind = ParamType::parse(&p.kind).ok_or_else(|| {
            bad(
                name,
                format!(
                    "{at}: `{}` has unknown type `{}`; {}",
                    p.name,
                    p.kind,
                    ParamType::NAMES
                ),
            )
        })?;
        out.push(ParamSpec {
            name: p.name.clone(),
            kind,
            required: p.required,
            default: None,
            description: p.description.clone(),
        });
    }
    Ok(out)
}

/// The spec of a custom tool running `program`: its effect is what the program may do.
fn workflow_spec(host: &Host, def: &Definition, program: &Program) -> ToolSpec {
    let (effect, annotations) =
        Scope::of(host.registry(), &program.capabilities, true).effect_and_annotations();
    ToolSpec::new(
        &def.name,
        &def.name,
        &def.description,
        program.header().params_schema(),
    )
    .effect(effect, annotations)
    .kind(Kind::Workflow)
    .capabilities(program.capabilities.clone())
}

/// A tool a custom tool's step or `---@uses` may call: leaf tools only.
fn leaf_tool(host: &Host, name: &str, tool: &str, at: &str) -> Result<Arc<crate::registry::Tool>> {
    checks::callable_tool(host, tool, &[Kind::Leaf]).map_err(|m| bad(name, format!("{at}: {m}")))
}

fn compile_steps(host: &Host, def: &Definition, steps_list: &[Step]) -> Result<Compiled> {
    let name = &def.name;
    let params = check_parameters(name, &def.parameters)?;
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
    let mut body: Vec<program::Step> = Vec::new();
    for (i, step) in steps_list.iter().enumerate() {
        let at = format!("at /steps/{i}");
        if !is_identifier(&step.id) {
            return Err(bad(
                name,
                format!(
                    "{at}/id: `{}` must be a letter or `_`, then letters, digits or `_`",
                    step.id
                ),
            ));
        }
        if ids.contains(&step.id.as_str()) {
            return Err(bad(
                name,
                format!(
                    "{at}/id: the id `{}` is used twice; step ids must be unique",
                    step.id
                ),
            ));
        }
        let tool = leaf_tool(host, name, &step.tool, &format!("{at}/tool"))?;
        let template = Template::Placeholders(Value::Object(step.arguments.clone()));
        let (instance, found) = checks::sample_args(&template, &params)
            .map_err(|m| bad(name, format!("{at}/arguments: {m}")))?;
        for (pointer, r) in &found {
            let here = format!("{at}/arguments{pointer}");
            let ArgRef::Placeholder(p) = r else { continue };
            match p {
                Placeholder::Input(input) => {
                    if !params.iter().any(|q| &q.name == input) {
                        return Err(bad(
                            name,
                            format!(
                                "{here}: uses input `{input}`, which is not declared in `parameters`"
                            ),
                        ));
                    }
                }
                Placeholder::Step { id, text, .. } => {
                    if id == &step.id {
                        return Err(bad(
                            name,
                            format!("{here}: refers to its own step; refer to an earlier one"),
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
                            format!("{here}: reads `{id}` ({text}), which is {why}"),
                        ));
                    }
                }
            }
        }
        checks::check_args(&tool, &instance, &found, &params)
            .map_err(|(pointer, m)| bad(name, format!("{at}/arguments{pointer}: {m}")))?;
        ids.push(&step.id);
        if !tools.contains(&step.tool) {
            tools.push(step.tool.clone());
        }
        body.push(program::Step::Call {
            id: step.id.clone(),
            tool: step.tool.clone(),
            args: template,
        });
    }
    let program = Program {
        name: name.clone(),
        params,
        capabilities: Capabilities::Tools(tools),
        timeout: None,
        body: Body::Steps(body),
    };
    let spec = workflow_spec(host, def, &program);
    Ok(Compiled {
        definition: def.clone(),
        program,
        spec,
    })
}

fn compile_lua(host: &Host, def: &Definition, source: &str) -> Result<Compiled> {
    let name = &def.name;
    let header =
        Header::parse(source, &format!("{name}.lua")).map_err(|e| bad(name, e.to_string()))?;
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
    checks::compile_lua(source, &format!("{name}.lua"))
        .map_err(|m| bad(name, format!("the Lua body: {m}")))?;
    let capabilities =
        checks::uses_capabilities(host, &header, &format!("{name}.lua"), &[Kind::Leaf])
            .map_err(|m| bad(name, m))?;
    let program = Program {
        name: name.clone(),
        params: header.params.clone(),
        capabilities,
        timeout: header.timeout,
        body: Body::Lua(LuaBody {
            source: source.to_string(),
            chunk: format!("{name}.lua"),
            modules: Vec::new(),
            config: None,
        }),
    };
    let spec = workflow_spec(host, def, &program);
    Ok(Compiled {
        definition: def.clone(),
        program,
        spec,
    })
}

/// The handler that runs a compiled custom tool: its program, in the caller's confirmation mode.
pub fn workflow_handler(compiled: Arc<Compiled>) -> Handler {
    handler(move |inv| {
        let c = Arc::clone(&compiled);
        async move {
            let inputs = inv.args.as_object().cloned().unwrap_or_default();
            let report =
                program::run(&inv.host, &inv.ctx, &c.program, &inputs, RunMode::AsCalled).await?;
            Ok(match c.program.body {
                Body::Lua(_) => {
                    json!({"result": report.result, "output": report.output, "previews": report.previews})
                }
                Body::Steps(_) => {
                    let records: Vec<Value> =
                        report.records.iter().map(StepRecord::summary).collect();
                    json!({"result": report.result, "steps": records})
                }
            })
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
                "may_call": c.program.capabilities.describe(),
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
