//! The host API: the one table of Rust functions and values the prelude gets, from which it
//! builds everything a script sees (`print`, `log`, `sleep`, `json`, `tools`, `require`'s
//! sources, the pattern functions of `string`).
//!
//! The table is handed to the prelude as its argument and never set in the globals, so what a
//! script can reach is decided in one place, `lua/prelude.lua`, which keeps these functions in
//! locals and wraps them. A failure the script should see at its own line, as it sees Lua's
//! own errors, comes back as `(false, message)` ([`refusal`]) for the prelude to raise with
//! `error(message, 2)`: raised from Rust, it would carry the position of no line of the
//! script. The functions reach their run through a `RunCell`, since the state is made before
//! its run is known (`prelude.rs`). A tool call itself is the bridge's (`bridge.rs`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use mlua::{Lua, LuaSerdeExt, MultiValue, Table, Value};
use serde_json::Value as Json;

use super::bridge::call_tool;
use super::vm::{RunCell, clean_message};
use super::{convert, patterns, stdlib};
use crate::error::Error;
use crate::gate::{Held, Preview};
use crate::registry::Profile;

/// `json.decode` takes text of at most this fraction of the Lua memory limit.
pub const JSON_DECODE_FRACTION: usize = 8;

/// An error a host function raised, as a script sees it: the message, after the script's
/// position when the traceback names one (`name.lua:3: bad argument #1: ...`).
fn error_text(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { traceback, cause } => {
            let message = error_text(cause);
            match script_position(traceback) {
                Some(at) => format!("{at} {message}"),
                None => message,
            }
        }
        other => clean_message(&other.to_string()),
    }
}

/// The first frame of a traceback that is the script's own (not C, not the prelude), as
/// `chunk:line:`.
fn script_position(traceback: &str) -> Option<&str> {
    traceback
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("[C]") && !l.starts_with("prelude:"))
        .find_map(|l| {
            // `chunk:LINE: in ...`: the first `:` followed by digits and another `:`
            l.match_indices(':').find_map(|(i, _)| {
                let rest = &l[i + 1..];
                let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
                (digits > 0 && rest.as_bytes().get(digits) == Some(&b':'))
                    .then(|| &l[..i + 1 + digits + 1])
            })
        })
}

pub(super) fn build_api(lua: &Lua, run: &RunCell) -> mlua::Result<Table> {
    let api = lua.create_table()?;

    let s = run.clone();
    api.set(
        "check",
        lua.create_function(move |lua, mut args: MultiValue| {
            s.get()?.check()?;
            // what `pcall` caught from a host function is mlua's error value: the script gets
            // its message, with the script's line, as for any error Lua raises
            if matches!(args.front(), Some(Value::Boolean(false)))
                && let Some(Value::Error(e)) = args.get(1)
            {
                let text = lua.create_string(error_text(e))?;
                args[1] = Value::String(text);
            }
            Ok(args)
        })?,
    )?;
    let s = run.clone();
    api.set(
        "interrupted",
        lua.create_function(move |_, ()| Ok(s.get()?.poll().is_some()))?,
    )?;

    let s = run.clone();
    api.set(
        "write",
        lua.create_function(move |_, text: mlua::LuaString| {
            s.get()?.write(&text.to_string_lossy())
        })?,
    )?;
    let s = run.clone();
    api.set(
        "log",
        lua.create_function(move |_, (level, text): (String, mlua::LuaString)| {
            s.get()?.log(&level, &text.to_string_lossy())
        })?,
    )?;

    let s = run.clone();
    api.set(
        "sleep",
        lua.create_function(move |_, seconds: f64| {
            if !(seconds >= 0.0 && seconds.is_finite()) {
                return Err(mlua::Error::runtime("sleep: seconds must be a number ≥ 0"));
            }
            let s = s.get()?;
            s.check()?;
            let ctx = s.ctx.lock().unwrap_or_else(|p| p.into_inner()).clone();
            let mut until = Instant::now() + Duration::from_secs_f64(seconds.min(1e9));
            if let Some(d) = ctx.deadline() {
                until = until.min(d);
            }
            s.handle.block_on(async {
                tokio::select! {
                    _ = tokio::time::sleep_until(until.into()) => {}
                    _ = ctx.cancel_token().cancelled() => {}
                }
            });
            s.check()
        })?,
    )?;

    let s = run.clone();
    api.set(
        "call",
        lua.create_function(move |lua, (name, args): (mlua::LuaString, Value)| {
            call_tool(lua, s.get()?, &name.to_str()?, &args)
        })?,
    )?;

    let s = run.clone();
    api.set(
        "tool_exists",
        lua.create_function(move |_, name: String| {
            Ok(s.get()?.host.registry().get(&name).is_some())
        })?,
    )?;
    let s = run.clone();
    api.set(
        "unknown_tool",
        lua.create_function(move |_, name: String| {
            let e = Error::UnknownTool {
                suggestions: s.get()?.host.registry().closest(&name),
                name,
            };
            Ok(format!("tools: {e}"))
        })?,
    )?;
    let s = run.clone();
    api.set(
        "tool_list",
        lua.create_function(move |lua, ()| {
            let host = &s.get()?.host;
            let list: Vec<Json> = host
                .registry()
                .in_profile(Profile::Full, &host.config(), host.transport())
                .iter()
                .map(|(t, a)| {
                    let sp = t.spec();
                    serde_json::json!({
                        "name": sp.name, "title": sp.title, "description": sp.description,
                        "effect": sp.effect, "kind": sp.kind, "available": a.is_available(),
                        "annotations": sp.annotations,
                        "input_schema": sp.input_schema,
                    })
                })
                .collect();
            convert::to_lua(lua, &Json::Array(list))
        })?,
    )?;
    let s = run.clone();
    api.set(
        "previews",
        lua.create_function(move |lua, ()| {
            let list: Vec<Json> = s
                .get()?
                .previews
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .map(Preview::to_json)
                .collect();
            convert::to_lua(lua, &Json::Array(list))
        })?,
    )?;

    let s = run.clone();
    api.set(
        "json_encode",
        // (true, text), or (false, message) for the prelude to raise at the script's line
        lua.create_function(move |lua, (v, opts): (Value, Option<Value>)| {
            let refused = |m: String| refusal(lua, format!("json.encode: {m}"));
            let memory = s.get()?.memory();
            let (j, _held) = match convert::to_json_held(lua, &v, &memory) {
                Ok(j) => j,
                Err(m) => return refused(m),
            };
            let pretty = match opts {
                Some(Value::Boolean(b)) => b,
                Some(Value::Table(t)) => t.raw_get::<Option<bool>>("pretty")?.unwrap_or(false),
                _ => false,
            };
            // the text is held too, as it grows (escapes make it up to six times the strings)
            let mut text = HeldBuffer {
                bytes: Vec::new(),
                held: memory.hold_nothing(),
                what: "the text json.encode makes",
            };
            let written = if pretty {
                serde_json::to_writer_pretty(&mut text, &j)
            } else {
                serde_json::to_writer(&mut text, &j)
            };
            match written {
                Ok(()) => Ok((true, Value::String(lua.create_string(&text.bytes)?))),
                Err(e) => refused(e.to_string()),
            }
        })?,
    )?;
    let s = run.clone();
    api.set(
        "json_decode",
        // (true, value), or (false, message) for the prelude to raise at the script's line
        lua.create_function(move |lua, text: mlua::LuaString| {
            let memory = s.get()?.memory_limit;
            let refused = |m: String| refusal(lua, format!("json.decode: {m}"));
            // The parsed value lives outside the Lua memory limit until it is converted (at
            // tens of bytes per element), so the text it comes from is bounded by that limit.
            let limit = memory / JSON_DECODE_FRACTION;
            if text.as_bytes().len() > limit {
                return refused(format!(
                    "the text is {} bytes; at most {limit} can be decoded (1/{} of \
                     limits.lua_memory_mb)",
                    text.as_bytes().len(),
                    JSON_DECODE_FRACTION
                ));
            }
            match serde_json::from_slice::<Json>(&text.as_bytes()) {
                Ok(j) => Ok((true, convert::to_lua(lua, &j)?)),
                Err(e) => refused(e.to_string()),
            }
        })?,
    )?;
    api.set("null", lua.null())?;
    api.set("array_mt", lua.array_metatable())?;
    api.set("version", env!("CARGO_PKG_VERSION"))?;

    let s = run.clone();
    api.set(
        "module_source",
        lua.create_function(move |_, name: String| {
            Ok(match stdlib::module_source(&name, &s.get()?.modules) {
                Ok((src, chunk)) => (Some(src), chunk),
                Err(msg) => (None, msg),
            })
        })?,
    )?;

    api.set("patterns", pattern_api(lua, run)?)?;
    api.set(
        "source_check",
        lua.create_function(|_, (src, name): (mlua::LuaString, Option<String>)| {
            let name = name.unwrap_or_else(|| "chunk".into());
            Ok(super::refuse_slow_source(
                &src.to_string_lossy(),
                name.trim_start_matches(['=', '@']),
            ))
        })?,
    )?;
    Ok(api)
}

/// `(false, message)`: a refusal the prelude raises as a plain message at the script's line.
/// Bytes written by serde, held on a run's host memory as they grow.
struct HeldBuffer {
    bytes: Vec<u8>,
    held: Held,
    what: &'static str,
}

impl std::io::Write for HeldBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.held
            .cover(self.bytes.len() + buf.len(), self.what)
            .map_err(std::io::Error::other)?;
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

pub(super) fn refusal(lua: &Lua, message: String) -> mlua::Result<(bool, Value)> {
    Ok((false, Value::String(lua.create_string(message)?)))
}

fn pattern_api(lua: &Lua, run: &RunCell) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let stopper = |run: &RunCell| {
        let run = run.clone();
        move || {
            let s = run.get().ok()?;
            s.poll().map(|why| s.message(why))
        }
    };
    for (key, find) in [("find", true), ("match", false)] {
        let stop = stopper(run);
        t.set(
            key,
            lua.create_function(
                move |lua,
                      (s, p, init, plain): (
                    mlua::LuaString,
                    mlua::LuaString,
                    Option<i64>,
                    Option<Value>,
                )| {
                    let plain =
                        plain.is_some_and(|v| !matches!(v, Value::Nil | Value::Boolean(false)));
                    patterns::find_aux(lua, &s.as_bytes(), &p.as_bytes(), init, plain, find, &stop)
                },
            )?,
        )?;
    }
    let stop: Arc<dyn Fn() -> Option<String> + Send + Sync> = Arc::new(stopper(run));
    t.set(
        "gmatch",
        lua.create_function(
            move |lua, (s, p, init): (mlua::LuaString, mlua::LuaString, Option<i64>)| {
                patterns::gmatch(lua, s, p, init, Arc::clone(&stop))
            },
        )?,
    )?;
    let stop = stopper(run);
    let cell = run.clone();
    t.set(
        "gsub",
        lua.create_function(
            move |lua, (s, p, repl, n): (mlua::LuaString, mlua::LuaString, Value, Option<i64>)| {
                let repl = match repl {
                    Value::String(r) => patterns::Replacement::Text(r.as_bytes().to_vec()),
                    Value::Integer(i) => patterns::Replacement::Text(i.to_string().into_bytes()),
                    Value::Number(f) => {
                        patterns::Replacement::Text(patterns::lua_number_string(f).into_bytes())
                    }
                    Value::Table(t) => patterns::Replacement::Table(t),
                    Value::Function(f) => patterns::Replacement::Function(f),
                    other => {
                        return Err(mlua::Error::runtime(format!(
                            "bad argument #3 to 'gsub' (string/function/table expected, got {})",
                            other.type_name()
                        )));
                    }
                };
                // the string being built is held on the run's host memory until Lua copies it
                let mut held = cell.get()?.memory().hold_nothing();
                patterns::gsub(
                    lua,
                    &s.as_bytes(),
                    &p.as_bytes(),
                    &repl,
                    n,
                    &stop,
                    &mut held,
                )
            },
        )?,
    )?;
    Ok(t)
}
