//! The output schemas of program runs, once for every tool that runs a program (issue #37).
//!
//! `lua_run`, `skill_call`, a Lua custom tool and a skill script's tool all return what a Lua
//! run returns ([`lua_run`]); a JSON custom tool returns its last step's result with its steps
//! ([`steps_run`]); `recipe_run` returns a [`crate::program::RunReport`] ([`run_report`]). A
//! program that declares its result (a `---@return` type, or a JSON program's last tool's
//! output schema, see [`crate::program::Program::returns`]) has `result` typed by it.
//!
//! Previews: an MCP call runs confirmed (it asks through the client), so a tool's own
//! `structuredContent` is never an [`crate::gate::Outcome::Preview`]. Inside a run, previews
//! have a declared shape ([`preview`], titled `Preview` so `lmcp types` names it after the
//! class scripts already know): the `previews` of a Lua run and the `result` of a previewed
//! step.
//!
//! A declared result is a promise made to clients that validate it, so [`fit`] checks a
//! confirmed run's result against it before it is returned.

use serde_json::{Value, json};

use crate::error::{Error, Result};

/// The shape of a preview: a state-changing call that was shown, not run.
pub fn preview() -> Value {
    json!({
        "title": "Preview",
        "type": "object",
        "description": "A state-changing call shown instead of run: nothing was done",
        "properties": {
            "preview": {"type": "boolean", "description": "Always true"},
            "tool": {"type": "string"},
            "args": {"type": "object", "description": "The arguments it would have run with"},
            "effect": {"type": "string", "enum": ["write", "send"]},
            "summary": {"type": "string", "description": "What it would do, in one line"}
        },
        "required": ["preview", "tool", "args", "effect", "summary"]
    })
}

/// A parameter as a recipe manifest or a custom tool declares it ([`crate::program::Param`]).
pub fn declared_param() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "type": {"type": "string", "description": "string, integer (int), number, boolean (bool), object (table) or array"},
            "description": {"type": "string"},
            "required": {"type": "boolean"},
            "default": {"description": "The value used when a call leaves it out"}
        },
        "required": ["name", "type"]
    })
}

/// A program's result: its declared type, or any value (`untyped` says which).
fn result(declared: Option<&Value>, untyped: &str, typed: &str) -> Value {
    let (mut schema, description) = match declared {
        Some(d) => (d.clone(), typed),
        None => (json!({}), untyped),
    };
    if let Some(map) = schema.as_object_mut() {
        map.entry("description")
            .or_insert_with(|| json!(description));
    }
    schema
}

/// What a Lua run returns (`lua_run`, `skill_call`, a Lua custom tool, a skill script's tool):
/// `{result, output, previews, run?}`, with `result` of the `declared` type.
pub fn lua_run(declared: Option<&Value>) -> Value {
    json!({
        "type": "object",
        "properties": {
            "result": result(
                declared,
                "What the program returned (null when it returned nothing)",
                "What the program returned, of its ---@return type",
            ),
            "output": {"type": "string", "description": "What it printed (print, log)"},
            "previews": {
                "type": "array",
                "description": "The state-changing calls that previewed instead of running (a run that was not confirmed)",
                "items": preview()
            },
            "run": {"type": "string", "description": "The run's id, when it kept a journal (a confirmed run outside private mode): `lmcp runs show ID`"}
        },
        "required": ["result", "output", "previews"]
    })
}

/// One completed step of a JSON custom tool: `{id, tool, status, result}`.
fn step_record() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "tool": {"type": "string"},
            "status": {"type": "string", "enum": ["done", "previewed"]},
            "result": {"description": "The tool's result (a previewed step's: its preview)"}
        },
        "required": ["id", "tool", "status", "result"]
    })
}

/// What a JSON custom tool returns: `{result?, steps, run?}`, with `result` (its last step's
/// result, absent when that step previewed) of the `declared` type.
pub fn steps_run(declared: Option<&Value>) -> Value {
    json!({
        "type": "object",
        "properties": {
            "result": result(
                declared,
                "The last step's result (absent when it previewed)",
                "The last step's result, of its tool's output type (absent when it previewed)",
            ),
            "steps": {"type": "array", "items": step_record(), "description": "Each step that ran or previewed, in order"},
            "run": {"type": "string", "description": "The run's id, when it kept a journal (a confirmed call of a tool that changes state): `lmcp runs show ID`"}
        },
        "required": ["steps"]
    })
}

/// What `recipe_run` returns: a [`crate::program::RunReport`].
pub fn run_report() -> Value {
    let step = json!({
        "type": "object",
        "description": "A step: a call (index, id, tool, args, effect, status, result or summary or reason) or a wait (index, wait, status)",
        "properties": {
            "index": {"type": "integer", "description": "Its place in the program (0-based)"},
            "id": {"type": "string"},
            "tool": {"type": "string"},
            "args": {"type": "object", "description": "Its arguments, resolved (or as written, when unresolved)"},
            "effect": {"type": "string", "enum": ["read", "write", "send"]},
            "status": {"type": "string", "enum": ["done", "previewed", "unresolved", "waited", "skipped in a plan"]},
            "result": {"description": "The tool's result (a previewed step's: its preview)"},
            "summary": {"type": "string", "description": "A previewed call of a Lua recipe: what it would do"},
            "reason": {"type": "string", "description": "Why an unresolved step's arguments are not known yet"},
            "wait": {"type": "number", "description": "A pause, in seconds"}
        },
        "required": ["index", "status"]
    });
    let call = json!({
        "type": "object",
        "properties": {
            "tool": {"type": "string"},
            "args": {"type": "object"},
            "previewed": {"type": "boolean", "description": "Present (true) when the call was only previewed"},
            "unresolved": {"type": "boolean", "description": "Present (true) when its arguments wait on a previewed step"}
        },
        "required": ["tool", "args"]
    });
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "The recipe's name"},
            "confirmed": {"type": "boolean", "description": "Whether state-changing calls ran (true) or were previewed (false)"},
            "plan_hash": {"type": "string", "description": "Pass it with confirm: true to run exactly this plan"},
            "steps": {"type": "array", "items": step},
            "calls": {"type": "array", "items": call, "description": "Every state-changing call, those of nested programs included: what plan_hash is made of"},
            "hosts": {"type": "array", "items": {"type": "string"}, "description": "The hosts its requests may reach (absent when none)"},
            "result": {"description": "The last step's result, or the Lua recipe's return value"},
            "output": {"type": "string", "description": "What a Lua recipe printed (absent when nothing)"},
            "run": {"type": "string", "description": "The run's id (a confirmed run outside private mode); give it as resume to go on after a failure"}
        },
        "required": ["name", "confirmed", "plan_hash", "steps", "calls", "result"]
    })
}

/// `value` as the `declared` schema describes it: an empty table Lua returned where a list is
/// declared is the empty list (Lua cannot tell `{}` from `[]`), and a value that still does not
/// meet the schema is refused with what is wrong and where.
pub fn fit(value: Value, declared: &Value) -> std::result::Result<Value, String> {
    let value = lists_where_declared(value, declared);
    let validator = jsonschema::validator_for(declared).map_err(|e| e.to_string())?;
    let problems: Vec<String> = validator
        .iter_errors(&value)
        .take(3)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("at {at}: {e}")
            }
        })
        .collect();
    if problems.is_empty() {
        Ok(value)
    } else {
        Err(problems.join("; "))
    }
}

/// A Lua program's result as its `---@return` declares it (see [`fit`]), for the tool that
/// runs it: a confirmed run's result that does not meet it fails the call, since clients
/// validate the tool's output schema; a preview's is returned as it is (its calls did not run,
/// so what it returns is only what it would have been).
pub fn checked_result(
    tool: &str,
    declared: Option<&Value>,
    result: Value,
    confirmed: bool,
) -> Result<Value> {
    match declared {
        Some(declared) if confirmed => fit(result, declared).map_err(|m| {
            Error::tool(
                tool,
                format!("its result does not match the type its `---@return` line declares: {m}"),
            )
        }),
        _ => Ok(result),
    }
}

/// Empty objects turned into empty lists where `schema` says a list (see [`fit`]).
fn lists_where_declared(value: Value, schema: &Value) -> Value {
    match value {
        Value::Object(map) if map.is_empty() && schema["type"] == "array" => Value::Array(vec![]),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| {
                    let sub = schema["properties"]
                        .get(&k)
                        .or_else(|| schema.get("additionalProperties"))
                        .cloned()
                        .unwrap_or(Value::Null);
                    let v = lists_where_declared(v, &sub);
                    (k, v)
                })
                .collect(),
        ),
        Value::Array(items) => {
            let item = schema.get("items").cloned().unwrap_or(Value::Null);
            Value::Array(
                items
                    .into_iter()
                    .map(|v| lists_where_declared(v, &item))
                    .collect(),
            )
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declared_result_is_fitted_or_refused() {
        let declared = crate::program::luatype::parse("{files: string[], n: integer}")
            .unwrap()
            .0;
        assert_eq!(
            fit(json!({"files": {}, "n": 0}), &declared).unwrap(),
            json!({"files": [], "n": 0})
        );
        let e = fit(json!({"files": ["a"], "n": "one"}), &declared).unwrap_err();
        assert!(e.contains("at /n") && e.contains("integer"), "{e}");
        let e = fit(json!({"files": []}), &declared).unwrap_err();
        assert!(e.contains("\"n\" is a required property"), "{e}");
    }

    #[test]
    fn run_schemas_are_valid_and_type_their_result() {
        let declared = json!({"type": "integer"});
        for s in [
            lua_run(None),
            lua_run(Some(&declared)),
            steps_run(Some(&declared)),
            run_report(),
        ] {
            assert!(jsonschema::meta::is_valid(&s), "{s}");
        }
        assert_eq!(
            lua_run(Some(&declared))["properties"]["result"]["type"],
            "integer"
        );
        assert!(lua_run(None)["properties"]["result"].get("type").is_none());
    }
}
