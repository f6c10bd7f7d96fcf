//! The tool bridge: `tools.NAME{...}` from a script to [`Host::call`] and back.
//!
//! A script's call goes through the same gate as any other caller's: its table is converted
//! to JSON once, raw (no metamethod runs; cycles and depth refused, see `convert`), and the
//! request carries a child of the run's context, so the run's confirmation mode flows into
//! every call and a script can never raise it. The Lua state runs on a thread where blocking
//! is fine and waits for each call there ([`run_to_end`]), so coroutines and `pcall` work
//! around tool calls exactly as around any function. Every way a call can fail comes back as
//! an error table (`code`, `message`, `tool`) the prelude raises at the script's line, except
//! an interrupted run, which must stop rather than hand the script a catchable error.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use mlua::{Lua, Table, Value};
use serde_json::{Map, Value as Json};

use super::api::refusal;
use super::convert;
use super::vm::RunState;
#[cfg(doc)]
use crate::gate::Caller;
use crate::gate::{CallRequest, Outcome};
use crate::text::arg_words::{Words, say};

/// Runs a call from the Lua thread (never a runtime thread) to its end: polled once in the
/// runtime's context first, since most calls finish at once and need no parking, then, if it
/// waits on something, driven by `block_on`.
fn run_to_end<F: std::future::Future>(handle: &tokio::runtime::Handle, call: F) -> F::Output {
    let mut call = std::pin::pin!(call);
    let first = {
        let _in_runtime = handle.enter();
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        call.as_mut().poll(&mut cx)
    };
    match first {
        std::task::Poll::Ready(out) => out,
        std::task::Poll::Pending => handle.block_on(call),
    }
}

pub(super) fn call_tool(
    lua: &Lua,
    s: &Arc<RunState>,
    name: &str,
    args: &Value,
) -> mlua::Result<(bool, Value)> {
    s.check()?;
    if s.recording.load(Ordering::Relaxed) {
        let mut called = s.called.lock().unwrap_or_else(|p| p.into_inner());
        if !called.iter().any(|c| c == name) {
            called.push(name.to_string());
        }
    }
    let fail = |code: &str, message: &str| -> mlua::Result<(bool, Value)> {
        Ok((false, Value::Table(error_table(lua, code, message, name)?)))
    };
    // the arguments' JSON is held on the run's host memory until the call returns
    let memory = s.memory();
    let json = match args {
        // `tools.NAME()`: no arguments
        Value::Nil => Ok((Json::Object(Map::new()), memory.hold_nothing())),
        Value::Table(_) => convert::to_json_held(lua, args, &memory),
        other => {
            return refusal(
                lua,
                format!(
                    "tools.{name} expects a table of arguments, got {}",
                    lua_type_name(other)
                ),
            );
        }
    };
    let (mut json, _held) = match json {
        Ok(j) => j,
        Err(m) => {
            return fail(
                "invalid_args",
                &format!("invalid arguments for `{name}`: {m}"),
            );
        }
    };
    // the hosts a recorded session's requests reach, for the `---@connect` lines of what it
    // becomes (the REPL's /save)
    if s.recording.load(Ordering::Relaxed)
        && name == "http_request"
        && let Some(url) = json.get("url").and_then(Json::as_str)
        && let Ok((_, to)) = crate::net::target(url)
    {
        let host = to.to_string();
        let mut connected = s.connected.lock().unwrap_or_else(|p| p.into_inner());
        if !connected.contains(&host) {
            connected.push(host);
        }
    }
    let ctx = s.ctx.lock().unwrap_or_else(|p| p.into_inner()).child();
    let request = match s.host.registry().get(name) {
        Some(tool) => {
            convert::coerce_empty_arrays(&mut json, &tool.spec().input_schema);
            CallRequest::to_tool(tool, json, ctx)
        }
        None => CallRequest::new(name, json, ctx),
    };
    let outcome = run_to_end(&s.handle, s.host.call(request));
    match outcome {
        Outcome::Done(v) => Ok((true, convert::to_lua(lua, &v)?)),
        Outcome::Preview(p) => {
            let v = convert::to_lua(lua, &p.to_json())?;
            if let Value::Table(t) = &v {
                t.set_metatable(Some(preview_metatable(lua)?))?;
            }
            s.keep_preview(p)?;
            Ok((true, v))
        }
        // A script gives arguments as a Lua table: advice says them so (`overwrite = true`).
        Outcome::Denied { reason, .. } => fail(
            "denied",
            &format!("`{name}` was denied: {}", say(&reason, Words::Lua)),
        ),
        Outcome::NeedsConfirmation { reason, .. } => fail(
            "needs_confirmation",
            &format!("`{name}` needs confirmation: {}", say(&reason, Words::Lua)),
        ),
        Outcome::Failed(e) => {
            // An interrupted run must stop, not hand the script a catchable tool error.
            s.check()?;
            let e = e.in_words(Words::Lua);
            let t = error_table(lua, e.caller_class(), &e.to_string(), name)?;
            if let Some(d) = e.details() {
                // The completed steps of a failed program: a script can inspect side effects.
                t.raw_set("details", convert::to_lua(lua, &d)?)?;
            }
            Ok((false, Value::Table(t)))
        }
    }
}

/// The metatable of the preview a dry run hands a script where it expected a result: `print`
/// and `tostring` of it say it is a preview and of which tool (`wrote nil` was printed for the
/// `bytes` of a preview), while its fields stay plain data, so `json.encode` and `p.preview`
/// read it as before. One per Lua state, closed like the tool errors' (`getmetatable` gives
/// the name `Preview`, never the table, so no script can add `__gc` to it).
fn preview_metatable(lua: &Lua) -> mlua::Result<Table> {
    const KEY: &str = "lmcp.preview_mt";
    if let Ok(Value::Table(mt)) = lua.named_registry_value::<Value>(KEY) {
        return Ok(mt);
    }
    let mt = lua.create_table()?;
    mt.raw_set("__name", "Preview")?;
    mt.raw_set("__metatable", "Preview")?;
    mt.raw_set(
        "__tostring",
        lua.create_function(|_, t: Table| {
            // raw reads: the fields are the script's to change, and no metamethod runs here
            let field = |k: &str| match t.raw_get::<Value>(k) {
                Ok(Value::String(s)) => s.to_string_lossy(),
                _ => "?".to_string(),
            };
            Ok(format!(
                "preview of {} ({}), not run: {}",
                field("tool"),
                field("effect"),
                field("summary")
            ))
        })?,
    )?;
    lua.set_named_registry_value(KEY, &mt)?;
    Ok(mt)
}

/// The error table a failed tool call raises: `{code=, message=, tool=}` (and `details=` when
/// the error has them).
fn error_table(lua: &Lua, code: &str, message: &str, tool: &str) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("code", code)?;
    t.raw_set("message", message)?;
    t.raw_set("tool", tool)?;
    Ok(t)
}

/// What Lua's `type` says of a value.
fn lua_type_name(v: &Value) -> &'static str {
    match v {
        Value::Integer(_) | Value::Number(_) => "number",
        Value::LightUserData(_) | Value::UserData(_) | Value::Error(_) | Value::Other(_) => {
            "userdata"
        }
        other => other.type_name(),
    }
}
