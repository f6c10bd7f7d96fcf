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

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::program::{
    Intent, Policy, Program, Scope, Source, SourceBody, StepSource, Template,
    compile as compile_source,
};
use crate::registry::{Kind, Registry, ToolSpec};

mod storage;
mod tools;

pub(super) use storage::load_indexed;
pub use storage::{delete, dir, list, load_file, save, stored_files};
pub use tools::{register_tools, workflow_handler};

/// The version of the stored definition format.
pub const FORMAT: u32 = 1;
/// Most steps in one JSON workflow.
pub const MAX_STEPS: usize = 100;

/// A typed input of a custom tool: optional unless it says `required: true`.
pub type Parameter = crate::program::Param;

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

/// How custom tools are compiled: steps and `---@uses` may call leaf tools only, at most
/// [`MAX_STEPS`] steps, and a parameter is optional unless it says `required: true`.
pub const POLICY: Policy = Policy {
    what: "custom tool",
    intent: Intent::Save,
    header_name: true,
    callable: &[Kind::Leaf],
    not_steps: &[],
    max_steps: MAX_STEPS,
    unmarked_required: false,
    default_timeout: None,
    check_literal_calls: true,
};

/// Whether `name` can name a custom tool; the message says what a name must be.
pub fn check_name(name: &str) -> std::result::Result<(), &'static str> {
    if !name.starts_with("user_") || crate::registry::check_name(name).is_err() || name.len() <= 5 {
        return Err(
            "the name must start with `user_` and then use lowercase letters, digits and `_` \
             (at most 64 characters), like `user_daily_summary`",
        );
    }
    Ok(())
}

/// A custom tool's output schema: a JSON workflow's `{result?, steps, run?}` with `result` of
/// its last step's tool's output schema, or a Lua body's `{result, output, previews, run?}`
/// with `result` of its `---@return` type (any value when it declares none).
pub fn output_schema(program: &Program) -> serde_json::Value {
    match program.body {
        crate::program::Body::Steps(_) => {
            crate::program::output::steps_run(program.returns.as_ref())
        }
        crate::program::Body::Lua(_) => crate::program::output::lua_run(program.returns.as_ref()),
    }
}

/// Checks a definition against the tools registered now.
pub fn compile(registry: &Registry, definition: Definition) -> Result<Compiled> {
    let name = definition.name.clone();
    check_name(&name).map_err(|m| bad(&name, m))?;
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
    let body = match (&definition.steps, &definition.lua) {
        (Some(_), Some(_)) => return Err(bad(&name, "give either `steps` or `lua`, not both")),
        (None, None) => {
            return Err(bad(
                &name,
                "`steps` is required: give the body, JSON `steps` or a `lua` program",
            ));
        }
        (Some(steps), None) => SourceBody::Steps(
            steps
                .iter()
                .map(|s| StepSource::Call {
                    id: Some(s.id.clone()),
                    tool: s.tool.clone(),
                    args: Template::Placeholders(Value::Object(s.arguments.clone())),
                })
                .collect(),
        ),
        (None, Some(lua)) => {
            if !definition.parameters.is_empty() {
                return Err(bad(
                    &name,
                    "a Lua body declares its parameters in its header (`---@param NAME TYPE \
                     description`), not in `parameters`",
                ));
            }
            SourceBody::Lua {
                source: lua.clone(),
                modules: Vec::new(),
                config: None,
            }
        }
    };
    let source = Source {
        name: name.clone(),
        chunk: format!("{name}.lua"),
        description: definition.description.clone(),
        params: definition.parameters.clone(),
        params_at: "/parameters".into(),
        body,
        steps_at: "/steps".into(),
        args_key: "arguments",
        lua_at: "/lua".into(),
        timeout: None,
        policy: POLICY,
    };
    let program = compile_source(source, registry).map_err(|p| bad(&name, p.to_string()))?;
    let (effect, annotations) =
        Scope::of(registry, &program.capabilities, true).effect_and_annotations();
    let spec = ToolSpec::new(
        &name,
        &name,
        &definition.description,
        program.header().params_schema(),
    )
    .effect(effect, annotations)
    .kind(Kind::Workflow)
    .capabilities(program.capabilities.clone())
    .connects(program.connect.clone())
    .output(output_schema(&program));
    Ok(Compiled {
        definition,
        program,
        spec,
    })
}
