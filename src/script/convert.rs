//! Lua values to JSON and back, for tool arguments, results and `json.encode`/`decode`.
//!
//! Lua → JSON walks tables *raw*: no `__index`, `__pairs`, `__len` or `__tostring` runs, so a
//! script cannot change an argument after it was validated, and converting never runs script
//! code. Cycles, depth beyond [`MAX_DEPTH`] and sizes beyond the limits are errors that name the
//! JSON pointer where they were found. Conventions:
//!
//! - `nil` and `json.null` are JSON `null`;
//! - a table whose keys are exactly `1..n` is an array; a table with string keys is an object;
//!   an empty table is `{}` unless it carries the array marker (`json.array{}`, or it came from a
//!   JSON array), and tool arguments whose schema says `array` turn `{}` into `[]`;
//! - integers stay integers; NaN and infinities are refused; strings must be UTF-8.
//!
//! JSON → Lua follows mlua's serde conversion, made directly: `null` becomes `json.null` and
//! arrays get the array marker, so an empty array stays an array on the way back out.
//!
//! Both directions work on the Lua stack with the C API, because every tool call from Lua
//! makes one of each: through mlua's safe API each table and string is a reference of its own
//! and each table or string made is a protected call of its own, which would be most of a
//! gated call's cost. The safety argument is local to each direction:
//!
//! - Lua → JSON only reads: it uses no API function that allocates in Lua or can raise an error
//!   (`lua_next` on keys it was handed, `lua_rawgeti`, `lua_to*` on values of the right type),
//!   so no Lua error can jump over the Rust frames that own the JSON being built;
//! - JSON → Lua allocates, so it runs inside one protected call ([`Lua::exec_raw`]); the frames
//!   an out-of-memory error would jump over hold only references and integers.

use std::ffi::{c_char, c_int, c_void};

use std::sync::Arc;

use mlua::{Lua, LuaSerdeExt, Value, ffi};
use serde_json::{Map, Number, Value as Json};

use crate::gate::{Held, HostMemory, JSON_VALUE_COST};

/// Deepest nesting of tables accepted.
pub const MAX_DEPTH: usize = 64;
/// Most values (table entries, recursively) in one conversion.
pub const MAX_NODES: usize = 1_000_000;
/// Most string bytes in one conversion.
pub const MAX_BYTES: usize = 64 << 20;

/// Lua stack slots one table level of the walk uses: the table, a key and a value.
const SLOTS_PER_LEVEL: c_int = 3;

/// Converts a Lua value to JSON without running any metamethod.
pub fn to_json(lua: &Lua, value: &Value) -> Result<Json, String> {
    walk(lua, value, None)
}

/// [`to_json`], charging the JSON to a run's host memory as it grows (a table that holds one
/// subtable many times becomes a copy per mention): the hold comes back with the value, to be
/// kept while the value lives.
pub fn to_json_held(
    lua: &Lua,
    value: &Value,
    memory: &Arc<HostMemory>,
) -> Result<(Json, Held), String> {
    let mut held = memory.hold_nothing();
    let json = walk(lua, value, Some(&mut held))?;
    Ok((json, held))
}

fn walk(lua: &Lua, value: &Value, held: Option<&mut Held>) -> Result<Json, String> {
    // an error value is the one kind pushing would allocate for
    if let Value::Error(_) = value {
        return Err(Problem::new(What::NotJson("error")).render());
    }
    lua.exec_raw_lua(|raw| {
        let state = raw.state();
        // SAFETY: see the module's note: nothing here allocates in Lua or raises. Every slot
        // used is checked for first, and the stack is put back as it was found.
        unsafe {
            let top = ffi::lua_gettop(state);
            if ffi::lua_checkstack(state, SLOTS_PER_LEVEL) == 0 {
                return Err("the Lua stack is full".to_string());
            }
            // a scalar is copied, anything else is a reference: pushing it copies a slot
            raw.push_value(value).map_err(|e| e.to_string())?;
            let mut w = Walker {
                lua,
                state,
                array_mt: None,
                on_path: [std::ptr::null(); MAX_DEPTH],
                nodes: 0,
                bytes: 0,
                held,
            };
            let result = w.value(top + 1, 0);
            ffi::lua_settop(state, top);
            result.map_err(|p| p.render())
        }
    })
}

/// What made a value impossible to convert, and where: the path is kept as segments while the
/// walk unwinds and made into a JSON pointer only for the message, so a walk that succeeds
/// spends nothing on pointers.
struct Problem {
    what: What,
    /// The pointer's segments, innermost first (already escaped for a JSON pointer).
    path: Vec<String>,
}

enum What {
    NotJson(&'static str),
    NotFinite(f64),
    NotUtf8,
    KeyNotUtf8,
    TooDeep,
    StackFull,
    Cycle,
    Mixed,
    Hole(i64),
    TooManyValues,
    TooManyBytes,
    /// The run's host memory budget would be passed (the error's text).
    HostMemory(String),
}

impl Problem {
    fn new(what: What) -> Problem {
        Problem {
            what,
            path: Vec::new(),
        }
    }

    /// Stops the walk at once, wherever it is: the limits name no place.
    fn is_limit(&self) -> bool {
        matches!(
            self.what,
            What::TooManyValues | What::TooManyBytes | What::HostMemory(_)
        )
    }

    /// Adds the segment of the parent's key, on the way out.
    fn under(mut self, segment: impl FnOnce() -> String) -> Problem {
        if !self.is_limit() {
            self.path.push(segment());
        }
        self
    }

    fn render(&self) -> String {
        let pointer: String = self.path.iter().rev().map(|s| format!("/{s}")).collect();
        let at = if pointer.is_empty() {
            "the value".to_string()
        } else {
            format!("the value at {pointer}")
        };
        match &self.what {
            What::NotJson(type_name) => format!(
                "{at} is a {type_name}; only nil, booleans, numbers, strings and tables can \
                 become JSON"
            ),
            What::NotFinite(f) => format!("{at} is {f}, which JSON cannot hold"),
            What::NotUtf8 => format!("{at} is not UTF-8 text"),
            What::KeyNotUtf8 => format!("{at} has a key that is not UTF-8 text"),
            What::TooDeep => format!("{at} is nested deeper than {MAX_DEPTH} tables"),
            What::StackFull => format!("{at} is nested too deep for the Lua stack"),
            What::Cycle => format!("{at} contains itself (a cycle)"),
            What::Mixed => format!(
                "{at} mixes list items and named keys (or has keys that are not strings); JSON \
                 needs a list (keys 1..n) or an object (string keys)"
            ),
            What::Hole(expected) => format!(
                "{at} is a list with a hole or a key out of 1..n (index {expected} is missing)"
            ),
            What::TooManyValues => format!("too many values (more than {MAX_NODES})"),
            What::TooManyBytes => {
                format!("the strings are larger than {MAX_BYTES} bytes in all")
            }
            What::HostMemory(why) => why.clone(),
        }
    }
}

fn number(f: f64) -> Result<Json, Problem> {
    Number::from_f64(f)
        .map(Json::Number)
        .ok_or(Problem::new(What::NotFinite(f)))
}

/// A string's bytes as JSON text, counted against [`MAX_BYTES`].
fn string(b: &[u8], bytes: &mut usize) -> Result<Json, Problem> {
    *bytes += b.len();
    if *bytes > MAX_BYTES {
        return Err(Problem::new(What::TooManyBytes));
    }
    match std::str::from_utf8(b) {
        Ok(text) => Ok(Json::String(text.to_string())),
        Err(_) => Err(Problem::new(What::NotUtf8)),
    }
}

/// The walk over the Lua stack.
struct Walker<'a> {
    lua: &'a Lua,
    state: *mut ffi::lua_State,
    /// The array marker's address, looked up the first time an empty table needs it.
    array_mt: Option<*const c_void>,
    /// The tables being walked, outermost first: the first `depth` entries (a scan beats a
    /// hash at these depths).
    on_path: [*const c_void; MAX_DEPTH],
    nodes: usize,
    bytes: usize,
    /// The run's host memory, charged as the JSON grows (when the caller keeps the value).
    held: Option<&'a mut Held>,
}

/// A string on the Lua stack, borrowed. The caller keeps it reachable (on the stack, or as a
/// key of a table on the stack) and allocates nothing in Lua while the slice lives.
unsafe fn lua_bytes<'s>(state: *mut ffi::lua_State, idx: c_int) -> &'s [u8] {
    let mut len = 0usize;
    // SAFETY: the value is a string (checked by the callers), so no conversion happens.
    unsafe {
        let p = ffi::lua_tolstring(state, idx, &mut len);
        std::slice::from_raw_parts(p as *const u8, len)
    }
}

/// A table key, as the walk classifies it.
enum Key {
    Index(i64),
    Name(String),
    /// Not UTF-8: refused once the table is known to be an object.
    BadName,
    /// Neither an integer nor a string.
    Other,
}

impl Key {
    /// The name of a string key (only names are left when an object's keys are sorted).
    fn name(&self) -> &str {
        match self {
            Key::Name(n) => n,
            _ => "",
        }
    }
}

/// A JSON pointer segment for an object key (`~` and `/` escaped).
fn segment(key: &str) -> String {
    if key.contains(['~', '/']) {
        key.replace('~', "~0").replace('/', "~1")
    } else {
        key.to_string()
    }
}

impl Walker<'_> {
    /// The value at absolute stack index `idx`, `depth` tables down.
    unsafe fn value(&mut self, idx: c_int, depth: usize) -> Result<Json, Problem> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(Problem::new(What::TooManyValues));
        }
        if let Some(held) = self.held.as_deref_mut() {
            let cost = self
                .bytes
                .saturating_add(self.nodes.saturating_mul(JSON_VALUE_COST));
            if let Err(e) = held.cover(cost, "the JSON a Lua value becomes") {
                return Err(Problem::new(What::HostMemory(e.to_string())));
            }
        }
        let state = self.state;
        // SAFETY: `idx` is a valid slot; each reader matches the type it was asked about.
        unsafe {
            Ok(match ffi::lua_type(state, idx) {
                ffi::LUA_TNIL => Json::Null,
                ffi::LUA_TBOOLEAN => Json::Bool(ffi::lua_toboolean(state, idx) != 0),
                ffi::LUA_TNUMBER if ffi::lua_isinteger(state, idx) != 0 => {
                    Json::Number(ffi::lua_tointegerx(state, idx, std::ptr::null_mut()).into())
                }
                ffi::LUA_TNUMBER => number(ffi::lua_tonumberx(state, idx, std::ptr::null_mut()))?,
                ffi::LUA_TSTRING => string(lua_bytes(state, idx), &mut self.bytes)?,
                ffi::LUA_TTABLE => self.table(idx, depth)?,
                ffi::LUA_TLIGHTUSERDATA if ffi::lua_touserdata(state, idx).is_null() => Json::Null,
                ffi::LUA_TLIGHTUSERDATA => {
                    return Err(Problem::new(What::NotJson("lightuserdata")));
                }
                ffi::LUA_TFUNCTION => return Err(Problem::new(What::NotJson("function"))),
                ffi::LUA_TTHREAD => return Err(Problem::new(What::NotJson("thread"))),
                ffi::LUA_TUSERDATA => return Err(Problem::new(What::NotJson("userdata"))),
                _ => return Err(Problem::new(What::NotJson("other"))),
            })
        }
    }

    /// A table: one pass over its entries converts every value and classifies every key; what
    /// the table is (list, object, neither) is decided after, so a problem with the table
    /// itself is reported before any problem inside it, and a value's problem is the first in
    /// key order, whatever order Lua iterates in.
    unsafe fn table(&mut self, idx: c_int, depth: usize) -> Result<Json, Problem> {
        if depth >= MAX_DEPTH {
            return Err(Problem::new(What::TooDeep));
        }
        let state = self.state;
        // SAFETY: the table stays at `idx` for the whole walk; nothing modifies it (no Lua code
        // runs), so `lua_next` is always handed a key it returned.
        unsafe {
            if ffi::lua_checkstack(state, SLOTS_PER_LEVEL) == 0 {
                return Err(Problem::new(What::StackFull));
            }
            let id = ffi::lua_topointer(state, idx);
            if self.on_path[..depth].contains(&id) {
                return Err(Problem::new(What::Cycle));
            }
            self.on_path[depth] = id;
            let mut entries: Vec<(Key, Result<Json, Problem>)> = Vec::new();
            ffi::lua_pushnil(state);
            while ffi::lua_next(state, idx) != 0 {
                let key = match ffi::lua_type(state, -2) {
                    ffi::LUA_TNUMBER if ffi::lua_isinteger(state, -2) != 0 => {
                        Key::Index(ffi::lua_tointegerx(state, -2, std::ptr::null_mut()))
                    }
                    ffi::LUA_TSTRING => match std::str::from_utf8(lua_bytes(state, -2)) {
                        Ok(name) => {
                            self.bytes += name.len();
                            Key::Name(name.to_string())
                        }
                        Err(_) => Key::BadName,
                    },
                    _ => Key::Other,
                };
                let value = self.value(ffi::lua_gettop(state), depth + 1);
                ffi::lua_pop(state, 1);
                if let Err(p) = &value
                    && p.is_limit()
                {
                    ffi::lua_pop(state, 1);
                    return value;
                }
                entries.push((key, value));
            }
            if entries.is_empty() {
                let marked = ffi::lua_getmetatable(state, idx) != 0 && {
                    let mt = ffi::lua_topointer(state, -1);
                    ffi::lua_pop(state, 1);
                    mt == self.array_marker()
                };
                return Ok(if marked {
                    Json::Array(vec![])
                } else {
                    Json::Object(Map::new())
                });
            }
            finish(entries)
        }
    }

    fn array_marker(&mut self) -> *const c_void {
        *self
            .array_mt
            .get_or_insert_with(|| self.lua.array_metatable().to_pointer())
    }
}

/// Decides what a walked table with entries is, now that all its keys are known.
fn finish(mut entries: Vec<(Key, Result<Json, Problem>)>) -> Result<Json, Problem> {
    let (mut names, mut indexes) = (0, 0);
    for (key, _) in &entries {
        match key {
            Key::Index(_) => indexes += 1,
            Key::Name(_) | Key::BadName => names += 1,
            Key::Other => return Err(Problem::new(What::Mixed)),
        }
    }
    if names > 0 && indexes > 0 {
        return Err(Problem::new(What::Mixed));
    }
    if indexes > 0 {
        entries.sort_unstable_by_key(|(k, _)| match k {
            Key::Index(i) => *i,
            _ => 0,
        });
        for (expected, (key, _)) in (1i64..).zip(entries.iter()) {
            if !matches!(key, Key::Index(i) if *i == expected) {
                return Err(Problem::new(What::Hole(expected)));
            }
        }
        let mut out = Vec::with_capacity(entries.len());
        for (i, (_, value)) in entries.into_iter().enumerate() {
            out.push(value.map_err(|p| p.under(|| i.to_string()))?);
        }
        return Ok(Json::Array(out));
    }
    if entries.iter().any(|(k, _)| matches!(k, Key::BadName)) {
        return Err(Problem::new(What::KeyNotUtf8));
    }
    entries.sort_unstable_by(|a, b| a.0.name().cmp(b.0.name()));
    let mut map = Map::with_capacity(entries.len());
    for (key, value) in entries {
        let Key::Name(key) = key else {
            unreachable!("every key is a name here")
        };
        match value {
            Ok(v) => {
                map.insert(key, v);
            }
            Err(p) => return Err(p.under(|| segment(&key))),
        }
    }
    Ok(Json::Object(map))
}

/// Deepest JSON turned into Lua tables (as mlua's serde conversion allows).
const MAX_LUA_DEPTH: usize = 128;

/// Converts JSON to a Lua value: `null` is `json.null`, arrays carry the array marker. Made
/// directly on the stack (not through serde's data model): a tool's result is converted on
/// every call.
pub fn to_lua(lua: &Lua, value: &Json) -> mlua::Result<Value> {
    match value {
        Json::Null => return Ok(lua.null()),
        Json::Bool(b) => return Ok(Value::Boolean(*b)),
        Json::Number(n) => return Ok(number_to_lua(n)),
        _ => {}
    }
    let mut stop = Stop::No;
    for _ in 0..2 {
        let stopped = &mut stop;
        // SAFETY: see the module's note. The closure runs in a protected call and leaves
        // exactly the converted value (or nil when it stopped). An error raised inside it (out
        // of memory, the stack limit) jumps over frames that own nothing.
        let v = unsafe {
            lua.exec_raw::<Value>((), |state| {
                if !push_json(state, value, 0, stopped) {
                    ffi::lua_settop(state, 0);
                    ffi::lua_pushnil(state);
                }
            })
        }?;
        match stop {
            Stop::No => return Ok(v),
            Stop::TooDeep => break,
            Stop::NoMarker => {
                // the first array this state converts: keep mlua's array marker where the
                // conversion finds it with one lookup, then convert again
                // SAFETY: stores the table passed as the only argument; raises nothing.
                unsafe {
                    lua.exec_raw::<()>(lua.array_metatable(), |state| {
                        ffi::lua_rawsetp(state, ffi::LUA_REGISTRYINDEX, array_key());
                    })
                }?;
                stop = Stop::No;
            }
        }
    }
    Err(mlua::Error::SerializeError(format!(
        "JSON nested deeper than {MAX_LUA_DEPTH} levels"
    )))
}

/// Why [`push_json`] stopped before the end.
#[derive(Clone, Copy)]
enum Stop {
    No,
    /// Nested deeper than [`MAX_LUA_DEPTH`].
    TooDeep,
    /// The state has no array marker under [`array_key`] yet.
    NoMarker,
}

/// The registry key under which each state keeps mlua's array marker for [`push_json`].
static ARRAY_MARKER: u8 = 0;

fn array_key() -> *const c_void {
    &ARRAY_MARKER as *const u8 as *const c_void
}

/// A JSON number as mlua's serde conversion makes it: an integer when it fits in 64 signed
/// bits, a float otherwise.
fn number_to_lua(n: &Number) -> Value {
    match (n.as_i64(), n.as_u64()) {
        (Some(i), _) => Value::Integer(i),
        (None, Some(u)) => Value::Number(u as f64),
        _ => Value::Number(n.as_f64().unwrap_or(f64::NAN)),
    }
}

/// Pushes `value`; `false` (with `stop` saying why) when it could not.
unsafe fn push_json(
    state: *mut ffi::lua_State,
    value: &Json,
    depth: usize,
    stop: &mut Stop,
) -> bool {
    if depth > MAX_LUA_DEPTH {
        *stop = Stop::TooDeep;
        return false;
    }
    // SAFETY: inside the protected call of `to_lua`; raising is allowed here.
    unsafe {
        ffi::luaL_checkstack(state, SLOTS_PER_LEVEL, std::ptr::null());
        match value {
            Json::Null => ffi::lua_pushlightuserdata(state, std::ptr::null_mut()),
            Json::Bool(b) => ffi::lua_pushboolean(state, c_int::from(*b)),
            Json::Number(n) => match number_to_lua(n) {
                Value::Integer(i) => ffi::lua_pushinteger(state, i),
                Value::Number(f) => ffi::lua_pushnumber(state, f),
                _ => unreachable!("numbers are integers or floats"),
            },
            Json::String(s) => {
                ffi::lua_pushlstring(state, s.as_ptr() as *const c_char, s.len());
            }
            Json::Array(items) => {
                ffi::lua_createtable(state, c_int::try_from(items.len()).unwrap_or(c_int::MAX), 0);
                if ffi::lua_rawgetp(state, ffi::LUA_REGISTRYINDEX, array_key()) != ffi::LUA_TTABLE {
                    *stop = Stop::NoMarker;
                    return false;
                }
                ffi::lua_setmetatable(state, -2);
                for (i, item) in items.iter().enumerate() {
                    if !push_json(state, item, depth + 1, stop) {
                        return false;
                    }
                    ffi::lua_rawseti(state, -2, i as ffi::lua_Integer + 1);
                }
            }
            Json::Object(map) => {
                ffi::lua_createtable(state, 0, c_int::try_from(map.len()).unwrap_or(c_int::MAX));
                for (k, v) in map {
                    ffi::lua_pushlstring(state, k.as_ptr() as *const c_char, k.len());
                    if !push_json(state, v, depth + 1, stop) {
                        return false;
                    }
                    ffi::lua_rawset(state, -3);
                }
            }
        }
    }
    true
}

/// Turns `{}` into `[]` wherever the schema expects an array (Lua cannot tell an empty list from
/// an empty object). Follows `properties` and `items`.
pub fn coerce_empty_arrays(value: &mut Json, schema: &Json) {
    // most arguments hold no empty table: nothing to look up in the schema then
    if has_empty_object(value) {
        coerce_at(value, schema);
    }
}

fn has_empty_object(value: &Json) -> bool {
    match value {
        Json::Object(map) => map.is_empty() || map.values().any(has_empty_object),
        Json::Array(items) => items.iter().any(has_empty_object),
        _ => false,
    }
}

fn coerce_at(value: &mut Json, schema: &Json) {
    let wants_array = match schema.get("type") {
        Some(Json::String(t)) => t == "array",
        Some(Json::Array(ts)) => {
            ts.iter().any(|t| t == "array") && !ts.iter().any(|t| t == "object")
        }
        _ => false,
    };
    match value {
        Json::Object(map) if map.is_empty() && wants_array => *value = Json::Array(vec![]),
        Json::Object(map) => {
            if let Some(Json::Object(props)) = schema.get("properties") {
                for (k, v) in map.iter_mut() {
                    if let Some(s) = props.get(k) {
                        coerce_at(v, s);
                    }
                }
            }
        }
        Json::Array(items) => {
            if let Some(s) = schema.get("items") {
                for v in items {
                    coerce_at(v, s);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn eval(lua: &Lua, src: &str) -> Value {
        lua.load(src).eval().unwrap()
    }

    #[test]
    fn conventions() {
        let lua = Lua::new();
        let v = eval(
            &lua,
            r#"return {name = "x", list = {1, 2.5, "three"}, empty = {}, yes = true}"#,
        );
        assert_eq!(
            to_json(&lua, &v).unwrap(),
            json!({"empty": {}, "list": [1, 2.5, "three"], "name": "x", "yes": true})
        );
        let null = lua.null();
        assert_eq!(to_json(&lua, &null).unwrap(), Json::Null);
        let arr = lua.create_table().unwrap();
        arr.set_metatable(Some(lua.array_metatable())).unwrap();
        assert_eq!(to_json(&lua, &Value::Table(arr)).unwrap(), json!([]));
    }

    #[test]
    fn refusals_name_the_pointer() {
        let lua = Lua::new();
        let cases = [
            ("local t = {} t.self = t return {a = t}", "/a/self", "cycle"),
            ("return {a = {1, nil, 3}}", "/a", "hole"),
            ("return {a = {1, x = 2}}", "/a", "mixes"),
            ("return {f = print}", "/f", "function"),
            ("return {n = 0/0}", "/n", "JSON cannot hold"),
            ("return {s = '\\xff'}", "/s", "UTF-8"),
        ];
        for (src, pointer, what) in cases {
            let e = to_json(&lua, &eval(&lua, src)).unwrap_err();
            assert!(e.contains(pointer) && e.contains(what), "{src}: {e}");
        }
        let deep = eval(
            &lua,
            "local t = {} local cur = t for i = 1, 200000 do cur.x = {} cur = cur.x end return t",
        );
        assert!(to_json(&lua, &deep).unwrap_err().contains("deeper than 64"));
    }

    #[test]
    fn metamethods_never_run() {
        let lua = Lua::new();
        let v = eval(
            &lua,
            r#"
            ran = false
            local t = setmetatable({a = 1}, {
                __index = function() ran = true return 2 end,
                __pairs = function() ran = true return next, {} end,
                __len = function() ran = true return 9 end,
            })
            return t"#,
        );
        assert_eq!(to_json(&lua, &v).unwrap(), json!({"a": 1}));
        assert!(!lua.globals().get::<bool>("ran").unwrap());
    }

    #[test]
    fn round_trip_keeps_empty_arrays_and_null() {
        let lua = Lua::new();
        let original = json!({"a": [], "b": null, "c": [{"d": []}], "e": {}});
        let v = to_lua(&lua, &original).unwrap();
        assert_eq!(to_json(&lua, &v).unwrap(), original);
    }

    /// The direct conversion makes what mlua's serde conversion makes: the same values, the
    /// same integer/float split, null and the array marker.
    #[test]
    fn json_to_lua_matches_mlua_serde() {
        let lua = Lua::new();
        let original = json!({"a": [1, -2, 2.5, u64::MAX, i64::MIN, 1e300], "b": null,
            "c": [[], {}, [null]], "d": "é\u{0}x", "e": true, "f": {"g": {"h": [0.0, -0.0]}}});
        let ours = to_lua(&lua, &original).unwrap();
        let theirs = lua.to_value(&original).unwrap();
        lua.globals().set("ours", ours.clone()).unwrap();
        lua.globals().set("theirs", theirs).unwrap();
        let same: bool = lua
            .load(
                r#"
                local function same(x, y)
                    if type(x) ~= type(y) then return false end
                    if type(x) == "number" then return math.type(x) == math.type(y) and x == y end
                    if type(x) ~= "table" then return x == y end
                    if getmetatable(x) ~= getmetatable(y) then return false end
                    for k, v in pairs(x) do if not same(v, y[k]) then return false end end
                    for k in pairs(y) do if x[k] == nil then return false end end
                    return true
                end
                return same(ours, theirs)"#,
            )
            .eval()
            .unwrap();
        assert!(same);
        // u64::MAX does not fit a Lua integer: a float, for both
        let back = to_json(&lua, &ours).unwrap();
        assert_eq!(back["a"][3], json!(u64::MAX as f64));
        assert_eq!(back["c"], original["c"]);
        assert_eq!(back["f"], original["f"]);
        let mut deep = json!(1);
        for _ in 0..200 {
            deep = json!([deep]);
        }
        assert!(to_lua(&lua, &deep).is_err(), "nesting is bounded");
    }

    /// The conversions work on the stack of whichever thread calls them (a callback's, a
    /// coroutine's) and leave it as they found it: a script making a million tool calls must
    /// not fill its stack.
    #[test]
    fn conversions_inside_callbacks_leave_the_stack_as_found() {
        let lua = Lua::new();
        let round = lua
            .create_function(|lua, v: Value| {
                let j = to_json(lua, &v).map_err(mlua::Error::runtime)?;
                to_lua(lua, &j)
            })
            .unwrap();
        lua.globals().set("round", round).unwrap();
        let same: bool = lua
            .load(
                r#"
                local last
                for i = 1, 20000 do last = round({a = {i, "x", {b = true}}, c = {}}) end
                local co = coroutine.wrap(function() return round({1, 2, {3}}) end)
                local t = co()
                return last.a[1] == 20000 and last.a[3].b == true and t[3][1] == 3
                    and next(last.c) == nil"#,
            )
            .eval()
            .unwrap();
        assert!(same);
        // 64 levels of tables need more stack than a callback is given up front
        let deep = eval(
            &lua,
            "local t = {} local cur = t for i = 1, 63 do cur.x = {} cur = cur.x end return t",
        );
        // SAFETY: `lua_gettop` only reads the stack of the state mlua hands the closure
        let top = || lua.exec_raw_lua(|raw| unsafe { ffi::lua_gettop(raw.state()) });
        let before = top();
        let j = to_json(&lua, &deep).unwrap();
        let back = to_lua(&lua, &j).unwrap();
        assert_eq!(to_json(&lua, &back).unwrap(), j);
        let bad = eval(&lua, "return {a = {b = {c = print}}}");
        assert!(to_json(&lua, &bad).is_err());
        assert!(to_lua(&lua, &(0..200).fold(json!(1), |j, _| json!([j]))).is_err());
        assert_eq!(
            top(),
            before,
            "the main thread's stack is back where it was"
        );
    }

    /// An object's problem is the first in key order, whatever order Lua iterates in.
    #[test]
    fn an_objects_first_problem_in_key_order_is_reported() {
        let lua = Lua::new();
        for _ in 0..20 {
            let v = eval(
                &lua,
                "local t = {} for i = 1, 50 do t['k' .. i] = print end t.a = 0/0 return t",
            );
            let e = to_json(&lua, &v).unwrap_err();
            assert!(e.contains("/a ") && e.contains("JSON cannot hold"), "{e}");
        }
        let v = eval(&lua, r"return {b = 1, ['\xff'] = 2}");
        assert!(to_json(&lua, &v).unwrap_err().contains("not UTF-8"));
        let v = eval(&lua, "return {[1.5] = 1}");
        assert!(to_json(&lua, &v).unwrap_err().contains("mixes"));
        let v = eval(&lua, "return {[true] = 1}");
        assert!(to_json(&lua, &v).unwrap_err().contains("mixes"));
        let v = eval(&lua, "return {[2] = 'b', [3] = 'c'}");
        assert!(
            to_json(&lua, &v)
                .unwrap_err()
                .contains("index 1 is missing")
        );
    }

    /// Running out of memory while making Lua values is an error, not a crash, and the state
    /// goes on working.
    #[test]
    fn json_to_lua_out_of_memory_is_an_error() {
        let lua = Lua::new();
        let big = Json::Array((0..200_000).map(|i| json!({"n": i, "s": "text"})).collect());
        lua.set_memory_limit(4 << 20).unwrap();
        let e = to_lua(&lua, &big).unwrap_err();
        assert!(matches!(e, mlua::Error::MemoryError(_)), "{e:?}");
        lua.set_memory_limit(0).unwrap();
        let v = to_lua(&lua, &json!({"ok": [1, 2]})).unwrap();
        assert_eq!(to_json(&lua, &v).unwrap(), json!({"ok": [1, 2]}));
    }

    #[test]
    fn schema_turns_empty_objects_into_arrays() {
        let schema = json!({"type": "object", "properties": {
            "args": {"type": "array"},
            "opts": {"type": "object"},
            "nested": {"type": "array", "items": {"type": "object", "properties": {"xs": {"type": "array"}}}}
        }});
        let mut v = json!({"args": {}, "opts": {}, "nested": [{"xs": {}}]});
        coerce_empty_arrays(&mut v, &schema);
        assert_eq!(v, json!({"args": [], "opts": {}, "nested": [{"xs": []}]}));
    }
}
