//! The checks every program gets before it is saved, whichever library it belongs to: the Lua
//! compile check, the tool lookup with "did you mean",
//! and the identifier rule for parameter names and step ids. Each returns a message without a
//! location; the caller adds its own (a JSON pointer into the manifest, or `file.lua:LINE`).

use std::sync::Arc;

use serde_json::{Map, Value};

use super::header::{Header, ParamSpec};
use super::interpolate::{self, Part};
use super::steps::{Placeholder, Template, placeholder};
use crate::host::Host;
use crate::registry::{Capabilities, Kind, Tool};

/// Longest description of a program or a tool (it is sent with every tool list).
pub const MAX_DESCRIPTION: usize = 2000;

/// Refuses a description longer than [`MAX_DESCRIPTION`] characters, naming the limit.
pub fn check_description(text: &str) -> std::result::Result<(), String> {
    let n = text.chars().count();
    if n > MAX_DESCRIPTION {
        return Err(format!(
            "the description is {n} characters; the limit is {MAX_DESCRIPTION} (it goes out with \
             every tool list)"
        ));
    }
    Ok(())
}

/// Longest parameter name or step id.
pub const MAX_IDENTIFIER: usize = 64;

/// Parameter names and step ids: a letter or `_`, then letters, digits and `_`, at most 64.
pub fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_IDENTIFIER
        && s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Compiles Lua source without running it. The error names the place as `chunk:LINE`.
pub fn compile_lua(source: &str, chunk: &str) -> std::result::Result<(), String> {
    if let Some(refused) = crate::script::refuse_slow_source(source, chunk) {
        return Err(refused);
    }
    let lua = mlua::Lua::new_with(mlua::StdLib::NONE, mlua::LuaOptions::new())
        .map_err(|e| e.to_string())?;
    lua.load(source)
        .set_name(format!("={chunk}"))
        .set_mode(mlua::chunk::ChunkMode::Text)
        .into_function()
        .map(|_| ())
        .map_err(|e| format!("the program does not compile: {e}"))
}

/// The registered tool `name`, or a message suggesting the closest names.
pub fn find_tool(host: &Host, name: &str) -> std::result::Result<Arc<Tool>, String> {
    host.registry().get(name).ok_or_else(|| {
        let hint = match host.registry().did_you_mean(name) {
            h if h.is_empty() => "; tools/list (`lmcp tools`) lists them".to_string(),
            h => h,
        };
        format!("there is no tool `{name}`{hint}")
    })
}

/// A tool a program may call, of one of the `kinds` allowed there.
pub fn callable_tool(
    host: &Host,
    name: &str,
    kinds: &[Kind],
) -> std::result::Result<Arc<Tool>, String> {
    let t = find_tool(host, name)?;
    if !kinds.contains(&t.spec().kind) {
        let allowed: Vec<String> = kinds.iter().map(|k| k.to_string()).collect();
        return Err(format!(
            "`{name}` is a {} tool; steps can only call {} tools",
            t.spec().kind,
            allowed.join(" or ")
        ));
    }
    Ok(t)
}

/// The capabilities a Lua header's `---@uses` gives: exactly those tools (each checked to exist
/// and be of an allowed kind), or read tools only without it. The error names the place as
/// `chunk:LINE`.
pub fn uses_capabilities(
    host: &Host,
    header: &Header,
    chunk: &str,
    kinds: &[Kind],
) -> std::result::Result<Capabilities, String> {
    match &header.uses {
        Some(list) => {
            let line = header.uses_line.unwrap_or(1);
            for tool in list {
                callable_tool(host, tool, kinds)
                    .map_err(|m| format!("{chunk}:{line}: @uses lists `{tool}`: {m}"))?;
            }
            Ok(Capabilities::Tools(list.clone()))
        }
        None => Ok(Capabilities::ReadOnly),
    }
}

/// A reference in a step's arguments.
#[derive(Debug, Clone, PartialEq)]
pub enum ArgRef {
    /// `${...}` inside a string (recipes), and whether it is the whole string.
    Text(Part, bool),
    /// `{"$input": ...}` or `{"$step": ...}` (custom tools).
    Placeholder(Placeholder),
}

impl ArgRef {
    /// The parameter an exact reference names: its value arrives with the parameter's type.
    fn exact_param(&self) -> Option<&str> {
        match self {
            ArgRef::Text(Part::Param(p), true) => Some(p),
            ArgRef::Placeholder(Placeholder::Input(n)) => Some(n),
            _ => None,
        }
    }
}

/// A step's arguments with each reference replaced by a sample of what it will hold (a value of
/// the parameter's type for an exact parameter reference, text where a reference sits inside
/// text, null for a step's result), and every reference with its JSON pointer. A malformed
/// reference is an error naming its pointer.
pub fn sample_args(
    template: &Template,
    params: &[ParamSpec],
) -> std::result::Result<(Value, Vec<(String, ArgRef)>), String> {
    let mut refs = Vec::new();
    let instance = match template {
        Template::Interpolated(v) => {
            let mut found = Vec::new();
            interpolate::references(v, "", &mut found)?;
            refs = found
                .into_iter()
                .map(|(p, part, exact)| (p, ArgRef::Text(part, exact)))
                .collect();
            sample_text(v, params)
        }
        Template::Placeholders(v) => sample_placeholders(v, params, "", &mut refs)?,
    };
    Ok((instance, refs))
}

fn sample_of(params: &[ParamSpec], name: &str) -> Value {
    params
        .iter()
        .find(|q| q.name == name)
        .map_or(Value::Null, |q| q.kind.sample())
}

fn sample_text(v: &Value, params: &[ParamSpec]) -> Value {
    match v {
        Value::String(s) => match interpolate::parse(s) {
            Ok(parts) if parts.len() == 1 => match &parts[0] {
                Part::Param(p) => sample_of(params, p),
                Part::Step { .. } => Value::Null,
                Part::Text(t) => Value::String(t.clone()),
            },
            _ => Value::String("x".into()),
        },
        Value::Array(a) => Value::Array(a.iter().map(|x| sample_text(x, params)).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| (k.clone(), sample_text(x, params)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn sample_placeholders(
    v: &Value,
    params: &[ParamSpec],
    pointer: &str,
    found: &mut Vec<(String, ArgRef)>,
) -> std::result::Result<Value, String> {
    if let Some(p) =
        placeholder(v).map_err(|m| format!("at {}: {m}", interpolate::display(pointer)))?
    {
        let sample = match &p {
            Placeholder::Input(name) => sample_of(params, name),
            Placeholder::Step { .. } => Value::Null,
        };
        found.push((pointer.to_string(), ArgRef::Placeholder(p)));
        return Ok(sample);
    }
    Ok(match v {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, x) in m {
                let ptr = format!("{pointer}/{}", k.replace('~', "~0").replace('/', "~1"));
                out.insert(k.clone(), sample_placeholders(x, params, &ptr, found)?);
            }
            Value::Object(out)
        }
        Value::Array(a) => {
            let mut out = Vec::new();
            for (i, x) in a.iter().enumerate() {
                out.push(sample_placeholders(
                    x,
                    params,
                    &format!("{pointer}/{i}"),
                    found,
                )?);
            }
            Value::Array(out)
        }
        other => other.clone(),
    })
}

/// Checks sampled arguments against the tool's input schema before anything runs. What only
/// the run can know (a step's result, text built from references) is left to the run; a
/// literal that breaks the schema, an exact parameter of the wrong type, and an optional
/// parameter without a default where the tool requires the argument are refused. The error is
/// `(pointer into the arguments, message)`.
pub fn check_args(
    tool: &Tool,
    instance: &Value,
    refs: &[(String, ArgRef)],
    params: &[ParamSpec],
) -> std::result::Result<(), (String, String)> {
    let spec = tool.spec();
    let name = &spec.name;
    let validator = tool
        .validator()
        .map_err(|e| (String::new(), e.to_string()))?;
    for e in validator.iter_errors(instance) {
        let pointer = e.instance_path().to_string();
        let keyword = e.kind().keyword();
        let under = refs
            .iter()
            .find(|(p, _)| pointer == *p || pointer.starts_with(&format!("{p}/")));
        match under {
            None => {
                return Err((
                    pointer,
                    format!(
                        "{} (rule `{keyword}`) for `{name}`; its input schema is in tools/list (`lmcp tool show {name}`)",
                        e.masked()
                    ),
                ));
            }
            Some((p, r)) if *p == pointer && keyword == "type" && r.exact_param().is_some() => {
                let input = r.exact_param().unwrap_or("?");
                let given = params
                    .iter()
                    .find(|q| q.name == input)
                    .map_or("?", |q| q.kind.json_type());
                let key = pointer.trim_start_matches('/');
                let expected = match &spec.input_schema["properties"][key]["type"] {
                    Value::String(t) => format!("a {t}"),
                    Value::Null => "another type".to_string(),
                    other => format!("one of {other}"),
                };
                return Err((
                    pointer.clone(),
                    format!(
                        "takes input `{input}`, a {given}, but `{name}` expects {expected} there"
                    ),
                ));
            }
            // A constraint on a value only the run knows.
            Some(_) => {}
        }
    }
    let required: Vec<&str> = spec
        .input_schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for (pointer, r) in refs {
        let Some(input) = r.exact_param() else {
            continue;
        };
        let key = pointer.trim_start_matches('/');
        let optional = params
            .iter()
            .any(|q| q.name == input && !q.required && q.default.is_none());
        if optional && !key.contains('/') && required.contains(&key) {
            return Err((
                pointer.clone(),
                format!(
                    "`{name}` requires `{key}`, but it takes the optional input `{input}`; make \
                     `{input}` required or give a literal"
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers() {
        for ok in ["a", "_x", "step_2", "A1"] {
            assert!(is_identifier(ok), "{ok}");
        }
        for bad in ["", "1a", "a-b", "a b", "é", &"x".repeat(65)] {
            assert!(!is_identifier(bad), "{bad}");
        }
    }

    #[test]
    fn compile_errors_name_the_chunk_and_line() {
        assert!(compile_lua("return 1", "t.lua").is_ok());
        assert!(compile_lua("local x <close> = nil", "t.lua").is_ok());
        let e = compile_lua("\nlocal x <close> = 1 +", "t.lua").unwrap_err();
        assert!(e.contains("t.lua:2:"), "{e}");
        let e = compile_lua("return return", "t.lua").unwrap_err();
        assert!(e.contains("t.lua:1:"), "{e}");
    }
}
