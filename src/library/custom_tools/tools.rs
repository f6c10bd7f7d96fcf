//! The custom tool tools (`custom_tool_create`, `custom_tool_list`, `custom_tool_delete`) and
//! the handler that runs a saved one.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use serde_json::{Value, json};

use super::storage::{compile_stored, delete, list, save};
use super::{Compiled, Definition};

use crate::error::{Error, Result};
use crate::library::index::Indexed;
use crate::program::run::{RunMode, StepRecord};
use crate::program::{self, Body};
use crate::registry::{Annotations, Effect, Handler, Kind, ToolSpec, handler};

/// The handler that runs a compiled custom tool: its program, in the caller's confirmation mode.
pub fn workflow_handler(compiled: Arc<Compiled>) -> Handler {
    handler(move |inv| {
        let c = Arc::clone(&compiled);
        async move { run(&inv, &c).await }
    })
}

/// The handler of a custom tool registered from the library index: its stored definition is
/// compiled and checked on the first call — and must still be the tool the gate confirmed the
/// call as (the indexed one) — then it runs as [`workflow_handler`]'s does.
pub(in crate::library) fn indexed_handler(path: PathBuf) -> Handler {
    let compiled: Arc<OnceLock<Arc<Compiled>>> = Arc::default();
    let path = Arc::new(path);
    handler(move |inv| {
        let (compiled, path) = (Arc::clone(&compiled), Arc::clone(&path));
        async move {
            let c = match compiled.get() {
                Some(c) => Arc::clone(c),
                None => {
                    let c = Arc::new(compile_stored(&inv.host(), &path)?);
                    let registered = inv.host().registry().get(&c.spec.name);
                    if registered.is_none_or(|t| Indexed::of(t.spec()) != Indexed::of(&c.spec)) {
                        // the gate confirmed the tool as it was listed, not as it is now: the
                        // new one is registered (and indexed) for the calls to come, not run
                        let name = c.spec.name.clone();
                        inv.host()
                            .registry()
                            .register_or_replace(c.spec.clone(), workflow_handler(c))?;
                        crate::library::noted_custom_tool(&inv.host(), &path);
                        return Err(Error::Refused(format!(
                            "`{name}` was changed on disk ({}) since lmcp listed it, so this \
                             call did not run; it is loaded anew: check it (`lmcp tool show \
                             {name}`) and call it again",
                            path.display()
                        )));
                    }
                    Arc::clone(compiled.get_or_init(|| c))
                }
            };
            run(&inv, &c).await
        }
    })
}

/// Runs a compiled custom tool's program for one call.
async fn run(inv: &crate::registry::Invocation, c: &Compiled) -> Result<Value> {
    let inputs = inv.args.as_object().cloned().unwrap_or_default();
    let journal = tool_journal(inv, c)?;
    let ctx = match &journal {
        Some(j) => inv.ctx.clone().with_journal(Arc::clone(j)),
        None => inv.ctx.clone(),
    };
    let ran = program::run(&inv.caller, &ctx, &c.program, &inputs, RunMode::AsCalled).await;
    let run_id = journal.as_ref().map(|j| {
        j.end(if ran.is_ok() { "done" } else { "failed" });
        j.id().to_string()
    });
    let report = match ran {
        Ok(r) => r,
        Err(Error::StepFailed(mut f)) => {
            f.run = run_id;
            return Err(Error::StepFailed(f));
        }
        Err(e) => return Err(e),
    };
    let mut out = match c.program.body {
        Body::Lua(_) => {
            let result = program::output::checked_result(
                &c.spec.name,
                c.program.returns.as_ref(),
                report.result,
                report.confirmed,
            )?;
            json!({"result": result, "output": report.output, "previews": report.previews})
        }
        Body::Steps(_) => {
            let records: Vec<Value> = report.records.iter().map(StepRecord::summary).collect();
            let mut out = json!({"steps": records});
            // a last step that previewed has no result: left out, as the output schema says
            if !report.result.is_null() {
                out["result"] = report.result;
            }
            out
        }
    };
    if let Some(id) = run_id {
        out["run"] = json!(id);
    }
    Ok(out)
}

/// The journal a custom tool's run keeps (`lmcp runs`): for a confirmed call of a tool that
/// changes state, outside private mode, unless it runs inside a journaled run (a script or
/// recipe), whose journal its calls go to.
fn tool_journal(
    inv: &crate::registry::Invocation,
    c: &Compiled,
) -> Result<Option<Arc<crate::gate::journal::Journal>>> {
    if c.spec.effect == Effect::Read
        || inv.ctx.journal().is_some()
        || inv.ctx.confirm_mode() != crate::gate::ConfirmMode::Confirmed
        || inv.host().config().modes.private
    {
        return Ok(None);
    }
    let journal = crate::gate::journal::Journal::start(
        inv.caller.as_ref(),
        &c.spec.name,
        &c.program.fingerprint(),
    )?;
    Ok(Some(Arc::new(journal)))
}

/// A tool's effect, as results report it.
fn effect_schema() -> Value {
    json!({"type": "string", "enum": ["read", "write", "send"]})
}

/// Registers `custom_tool_create`, `custom_tool_list` and `custom_tool_delete`.
pub fn register_tools(registry: &crate::registry::Registry) -> Result<()> {
    let param_schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "type": {"type": "string", "enum": ["string", "integer", "int", "number", "boolean", "bool", "object", "table", "array"]},
            "description": {"type": "string"},
            "required": {"type": "boolean"},
            "default": {"description": "The value used when a call leaves it out (makes it optional)"}
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
         integer, boolean, object, array), description, required, default}] — a custom tool's \
         parameter is optional unless it says required: true (a recipe's is required unless it \
         has a default or says required: false) — then either JSON steps [{id \
         (unique), tool (an existing leaf tool), arguments}] or a Lua body (`lua`, a program with a \
         ---@param header, ---@uses listing the tools it calls and, optionally, ---@return typing \
         its result, like {total: number, names: string[]}). In arguments, {\"$input\": \
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
    .output(json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "effect": effect_schema(),
            "may_call": {"type": "string", "description": "The tools it may call"},
            "may_reach": {"type": "array", "items": {"type": "string"}, "description": "The hosts its requests may reach"},
            "input_schema": {"type": "object"},
            "replaced": {"type": "boolean"}
        },
        "required": ["name", "effect", "may_call", "may_reach", "input_schema", "replaced"]
    }))
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
            let (c, replaced) = save(&inv.host(), def, replace)?;
            Ok(json!({
                "name": c.spec.name,
                "effect": c.spec.effect,
                "may_call": c.program.capabilities.describe(),
                "may_reach": c.program.connect,
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
    .kind(Kind::Authoring)
    .output(json!({
        "type": "object",
        "properties": {
            "tools": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "description": {"type": "string"},
                    "body": {"type": "string", "enum": ["steps", "lua"]},
                    "effect": effect_schema(),
                    "destructive": {"type": "boolean"},
                    "may_call": {"type": "string", "description": "The tools it may call"},
                    "input_schema": {"type": "object"},
                    "created": {"type": "string", "description": "RFC 3339 (absent when its file cannot be read)"},
                    "updated": {"type": "string", "description": "RFC 3339 (absent when its file cannot be read)"}
                },
                "required": ["name", "description", "body", "effect", "destructive", "input_schema"]
            }}
        },
        "required": ["tools"]
    }));
    registry.register_builtin(
        list_spec,
        handler(|inv| async move { Ok(json!({"tools": list(&inv.host())})) }),
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
    .output(json!({"type": "object", "properties": {"deleted": {"type": "string", "description": "The deleted tool's name"}}, "required": ["deleted"]}))
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
            delete(&inv.host(), &name)?;
            Ok(json!({"deleted": name}))
        }),
    )?;
    Ok(())
}
