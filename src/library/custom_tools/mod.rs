//! Custom tools: named workflows that agents and people save, which become `user_*` tools at once.
//!
//! A definition is JSON steps (`[{id, tool, arguments}]`, where `{"$input": "x"}` substitutes an
//! input and `{"$step": "id", "path": "result.items[0]"}` reads an earlier step's result) or a Lua
//! body with the program header. It is checked completely when it is created — names, step
//! references, argument types against each step tool's schema, required inputs — and stored as one
//! JSON file per tool under `DATA/tools/`, loaded again when first needed (a file that no longer checks is
//! reported and skipped; the others still load).
//!
//! A custom tool's effect is the strongest effect of the tools it may call, and the gate confirms
//! the call as a whole; its steps then run as nested calls under that confirmation, each still
//! checked for grants, modes and availability, and limited to the tools the definition declared
//! (its steps, or a Lua body's `---@uses`; a Lua body without one may call read tools only).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::host::Host;
use crate::program::check::{self as checks, ArgRef, is_identifier};
use crate::program::header::{Header, ParamSpec, ParamType};
use crate::program::steps::{Placeholder, Template};
use crate::program::{self, Body, LuaBody, Program, Scope};
use crate::registry::{Capabilities, Kind, ToolSpec};

mod storage;
mod tools;

pub(super) use storage::load_indexed;
pub use storage::{delete, dir, list, load_file, save, stored_files};
pub use tools::{register_tools, workflow_handler};

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
    checks::check_description(&definition.description).map_err(|m| bad(&name, m))?;
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
