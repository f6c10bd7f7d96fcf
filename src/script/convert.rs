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

use mlua::{IntoLua, Lua, LuaSerdeExt, Table, Value};
use serde_json::{Map, Number, Value as Json};

/// Deepest nesting of tables accepted.
pub const MAX_DEPTH: usize = 64;
/// Most values (table entries, recursively) in one conversion.
pub const MAX_NODES: usize = 1_000_000;
/// Most string bytes in one conversion.
pub const MAX_BYTES: usize = 64 << 20;

struct Walker<'a> {
    lua: &'a Lua,
    /// The tables being walked, outermost first (at most [`MAX_DEPTH`]: a scan beats a hash).
    on_path: Vec<usize>,
    nodes: usize,
    bytes: usize,
}

/// Converts a Lua value to JSON without running any metamethod.
pub fn to_json(lua: &Lua, value: &Value) -> Result<Json, String> {
    let mut w = Walker {
        lua,
        on_path: Vec::new(),
        nodes: 0,
        bytes: 0,
    };
    let mut pointer = String::new();
    w.value(value, &mut pointer, 0)
}

fn at(pointer: &str) -> String {
    if pointer.is_empty() {
        "the value".to_string()
    } else {
        format!("the value at {pointer}")
    }
}

impl Walker<'_> {
    fn value(&mut self, v: &Value, pointer: &mut String, depth: usize) -> Result<Json, String> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(format!("too many values (more than {MAX_NODES})"));
        }
        Ok(match v {
            Value::Nil => Json::Null,
            Value::LightUserData(ud) if ud.0.is_null() => Json::Null,
            Value::Boolean(b) => Json::Bool(*b),
            Value::Integer(i) => Json::Number((*i).into()),
            Value::Number(f) => Number::from_f64(*f)
                .map(Json::Number)
                .ok_or_else(|| format!("{} is {f}, which JSON cannot hold", at(pointer)))?,
            Value::String(s) => {
                let b = s.as_bytes();
                self.bytes += b.len();
                if self.bytes > MAX_BYTES {
                    return Err(format!(
                        "the strings are larger than {MAX_BYTES} bytes in all"
                    ));
                }
                match std::str::from_utf8(&b) {
                    Ok(text) => Json::String(text.to_string()),
                    Err(_) => return Err(format!("{} is not UTF-8 text", at(pointer))),
                }
            }
            Value::Table(t) => self.table(t, pointer, depth)?,
            other => {
                return Err(format!(
                    "{} is a {}; only nil, booleans, numbers, strings and tables can become JSON",
                    at(pointer),
                    other.type_name()
                ));
            }
        })
    }

    fn table(&mut self, t: &Table, pointer: &mut String, depth: usize) -> Result<Json, String> {
        if depth >= MAX_DEPTH {
            return Err(format!(
                "{} is nested deeper than {MAX_DEPTH} tables",
                at(pointer)
            ));
        }
        let id = t.to_pointer() as usize;
        if self.on_path.contains(&id) {
            return Err(format!("{} contains itself (a cycle)", at(pointer)));
        }
        self.on_path.push(id);
        let mut entries: Vec<(Value, Value)> = Vec::new();
        t.for_each::<Value, Value>(|k, v| {
            entries.push((k, v));
            Ok(())
        })
        .map_err(|e| e.to_string())?;
        let result = if entries.is_empty() {
            let is_array = t
                .metatable()
                .is_some_and(|mt| mt.to_pointer() == self.lua.array_metatable().to_pointer());
            Ok(if is_array {
                Json::Array(vec![])
            } else {
                Json::Object(Map::new())
            })
        } else if entries.iter().all(|(k, _)| matches!(k, Value::Integer(_))) {
            self.array(entries, pointer, depth)
        } else if entries.iter().all(|(k, _)| matches!(k, Value::String(_))) {
            self.object(entries, pointer, depth)
        } else {
            Err(format!(
                "{} mixes list items and named keys (or has keys that are not strings); JSON \
                 needs a list (keys 1..n) or an object (string keys)",
                at(pointer)
            ))
        };
        self.on_path.pop();
        result
    }

    fn array(
        &mut self,
        mut entries: Vec<(Value, Value)>,
        pointer: &mut String,
        depth: usize,
    ) -> Result<Json, String> {
        entries.sort_by_key(|(k, _)| match k {
            Value::Integer(i) => *i,
            _ => 0,
        });
        let mut out = Vec::with_capacity(entries.len());
        for (expected, (k, v)) in (1i64..).zip(entries.iter()) {
            if !matches!(k, Value::Integer(i) if *i == expected) {
                return Err(format!(
                    "{} is a list with a hole or a key out of 1..n (index {expected} is missing)",
                    at(pointer)
                ));
            }
            let len = pointer.len();
            pointer.push('/');
            pointer.push_str(itoa::Buffer::new().format(expected - 1));
            out.push(self.value(v, pointer, depth + 1)?);
            pointer.truncate(len);
        }
        Ok(Json::Array(out))
    }

    fn object(
        &mut self,
        entries: Vec<(Value, Value)>,
        pointer: &mut String,
        depth: usize,
    ) -> Result<Json, String> {
        let mut keyed: Vec<(String, Value)> = Vec::with_capacity(entries.len());
        for (k, v) in entries {
            let Value::String(k) = k else {
                unreachable!("checked by the caller")
            };
            let key = k
                .to_str()
                .map_err(|_| format!("{} has a key that is not UTF-8 text", at(pointer)))?
                .to_string();
            self.bytes += key.len();
            keyed.push((key, v));
        }
        // Lua's iteration order is arbitrary; sorted keys make output deterministic.
        keyed.sort_by(|a, b| a.0.cmp(&b.0));
        let mut map = Map::with_capacity(keyed.len());
        for (key, v) in keyed {
            let len = pointer.len();
            pointer.push('/');
            if key.contains(['~', '/']) {
                pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
            } else {
                pointer.push_str(&key);
            }
            let j = self.value(&v, pointer, depth + 1)?;
            pointer.truncate(len);
            map.insert(key, j);
        }
        Ok(Json::Object(map))
    }
}

/// Deepest JSON turned into Lua tables (as mlua's serde conversion allows).
const MAX_LUA_DEPTH: usize = 128;

/// Converts JSON to a Lua value: `null` is `json.null`, arrays carry the array marker. Made
/// directly (not through serde's data model): a tool's result is converted on every call.
pub fn to_lua(lua: &Lua, value: &Json) -> mlua::Result<Value> {
    to_lua_at(lua, &lua.array_metatable(), value, 0)
}

fn to_lua_at(lua: &Lua, array_mt: &Table, value: &Json, depth: usize) -> mlua::Result<Value> {
    if depth > MAX_LUA_DEPTH {
        return Err(mlua::Error::SerializeError(format!(
            "JSON nested deeper than {MAX_LUA_DEPTH} levels"
        )));
    }
    Ok(match value {
        Json::Null => lua.null(),
        Json::Bool(b) => Value::Boolean(*b),
        Json::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Value::Integer(i),
            (None, Some(u)) => u.into_lua(lua)?,
            _ => Value::Number(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => Value::String(lua.create_string(s)?),
        Json::Array(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            t.set_metatable(Some(array_mt.clone()))?;
            for (i, item) in items.iter().enumerate() {
                t.raw_set(i + 1, to_lua_at(lua, array_mt, item, depth + 1)?)?;
            }
            Value::Table(t)
        }
        Json::Object(map) => {
            let t = lua.create_table_with_capacity(0, map.len())?;
            for (k, v) in map {
                t.raw_set(k.as_str(), to_lua_at(lua, array_mt, v, depth + 1)?)?;
            }
            Value::Table(t)
        }
    })
}

/// Turns `{}` into `[]` wherever the schema expects an array (Lua cannot tell an empty list from
/// an empty object). Follows `properties` and `items`.
pub fn coerce_empty_arrays(value: &mut Json, schema: &Json) {
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
                        coerce_empty_arrays(v, s);
                    }
                }
            }
        }
        Json::Array(items) => {
            if let Some(s) = schema.get("items") {
                for v in items {
                    coerce_empty_arrays(v, s);
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
