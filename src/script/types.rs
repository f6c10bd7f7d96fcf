//! LuaLS definitions generated from the registry, so editors complete and type-check scripts.
//!
//! `lmcp types` prints them (or writes them with `-o`); `lua/meta/tools.lua` is the copy for the
//! built-in tools, kept fresh by a test. Every tool becomes a typed function on `tools`, with a
//! `---@class` for its arguments and, when it declares an output schema, for its result.
//!
//! The definitions are meant to be trusted by a model writing code and by an editor checking
//! it (#37): argument classes are exact (`---@class (exact) NAME_args`), so a field a tool does
//! not take is flagged, as a missing or mistyped one is; a field a schema does not require is
//! optional (`?`), because it may be absent; and a nested object the schema describes is a
//! class of its own (`NAME_result.field`), not a bare `table`.

use serde_json::Value;

use crate::registry::Tool;

/// The globals every script has, described once.
const GLOBALS: &str = r#"---@class ToolError
---@field code string       error class: denied, needs_confirmation, invalid_args, tool_error, ...
---@field message string    what went wrong and how to fix it
---@field tool string       the tool that was called
---@field details? table     for a failed program: failed_step and completed_steps

---What a state-changing call returns in a dry run instead of its result: nothing was done.
---`tostring(p)` and `print(p)` say "preview of TOOL (effect), not run: summary".
---@class Preview
---@field preview true
---@field tool string
---@field args table
---@field effect "write"|"send"
---@field summary string

---The parameters the program was run with (declared by its `---@param` header).
---@type table<string, any>
params = {}

---A skill script's config values, by key (secret ones included); empty elsewhere.
---@type table<string, any>
config = {}

---A list, as a program header's `---@param name array` declares one.
---@alias array any[]
---A map, as a program header's `---@param name object` declares one.
---@alias object table<string, any>

---@class json
---@field null lightuserdata  JSON null
json = {}
---@param value any
---@param pretty? boolean|{pretty: boolean}
---@return string
function json.encode(value, pretty) end
---@param text string
---@return any
function json.decode(text) end
---Marks a table as a list, so an empty one encodes as [] rather than {}.
---@param t? table
---@return table
function json.array(t) end

---@class log
log = {}
---@param ... any
function log.info(...) end
---@param ... any
function log.warn(...) end
---@param ... any
function log.error(...) end

---Waits, cancellably, within the run's deadline.
---@param seconds number
function sleep(seconds) end

---@class lmcp
---@field version string
lmcp = {}
---@return {name: string, title: string, description: string, effect: string, kind: string, available: boolean, annotations: table, input_schema: table}[]
function lmcp.tools() end
---@param name string
---@return boolean
function lmcp.has_tool(name) end
---@return Preview[]
function lmcp.previews() end

---Every registered tool, called through the gate. A failed call raises a ToolError. A call
---that changes state returns a Preview instead of its result when the run only previews.
---@class tools
tools = {}
"#;

/// The sandbox's own `os` and what it leaves out, for checkers that load Lua's standard
/// library (EmmyLua always does; LuaLS when `runtime.builtin` does not disable it): what is
/// not there is marked deprecated, with what to use instead.
const SANDBOX: &str = r#"
---The sandbox's os: time, date and clock only.
---@class os
os = {}
---@param t? table
---@return integer
function os.time(t) end
---@param format? string
---@param time? integer
---@return string|table
function os.date(format, time) end
---@return number
function os.clock() end
---@deprecated Not in the sandbox: run programs with tools.run_command.
function os.execute(...) end
---@deprecated Not in the sandbox: a script ends by returning.
function os.exit(...) end
---@deprecated Not in the sandbox: pass values as params (or a skill's config).
function os.getenv(...) end
---@deprecated Not in the sandbox: files go through the file tools.
function os.remove(...) end
---@deprecated Not in the sandbox: files go through the file tools.
function os.rename(...) end
---@deprecated Not in the sandbox.
function os.tmpname(...) end
---@deprecated Not in the sandbox.
function os.setlocale(...) end
---@deprecated Not in the sandbox: subtract the two times.
function os.difftime(...) end

---@deprecated The sandbox has no io library: use tools.read_file and tools.write_file.
io = nil
---@deprecated Not in the sandbox: use require for the bundled modules.
function dofile(...) end
---@deprecated Not in the sandbox: use load with text.
function loadfile(...) end
"#;

/// The classes made while typing one definitions file: nested object schemas become classes of
/// their own (named after where they stand, `recipe_list_result.recipes`, or after their
/// `title`, like `Preview`), so an editor knows what a nested table holds, not only `table`.
#[derive(Default)]
struct Classes {
    /// The text of the nested classes made so far, to follow the class that uses them.
    text: String,
    /// The class names already defined (the globals' included), so a titled shape is defined
    /// once and shared.
    defined: std::collections::BTreeSet<String>,
}

impl Classes {
    fn new() -> Classes {
        let mut c = Classes::default();
        // the globals define it (see GLOBALS), and the run schemas title their previews so
        c.defined.insert("Preview".into());
        c
    }

    /// The LuaLS type of a JSON Schema; `at` names the class a nested object would become.
    fn lua_type(&mut self, schema: &Value, at: &str) -> String {
        if let Some(values) = schema.get("enum").and_then(Value::as_array) {
            let names: Vec<String> = values.iter().map(|v| v.to_string()).collect();
            if !names.is_empty() {
                return names.join("|");
            }
        }
        match schema.get("type") {
            Some(Value::String(t)) => self.single_type(t, schema, at),
            Some(Value::Array(ts)) => {
                let names: Vec<String> = ts
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|t| self.single_type(t, schema, at))
                    .collect();
                names.join("|")
            }
            _ => "any".to_string(),
        }
    }

    fn single_type(&mut self, t: &str, schema: &Value, at: &str) -> String {
        match t {
            "string" => "string".into(),
            "integer" => "integer".into(),
            "number" => "number".into(),
            "boolean" => "boolean".into(),
            "null" => "nil".into(),
            "array" => match schema.get("items") {
                Some(items) => {
                    let inner = self.lua_type(items, at);
                    if inner.contains('|') {
                        format!("({inner})[]")
                    } else {
                        format!("{inner}[]")
                    }
                }
                None => "any[]".into(),
            },
            "object" => self.object(schema, at),
            _ => "any".into(),
        }
    }

    /// An object schema: a class when it names its properties, a map when it types its values
    /// (`table<string, T>`), else `table`.
    fn object(&mut self, schema: &Value, at: &str) -> String {
        let has_properties = schema
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| !p.is_empty());
        if has_properties {
            let name = match schema.get("title").and_then(Value::as_str) {
                Some(t) if is_class_name(t) => t.to_string(),
                _ => at.to_string(),
            };
            if self.defined.insert(name.clone()) {
                let text = self.class(&name, schema);
                self.text.push_str(&text);
            }
            return name;
        }
        match schema.get("additionalProperties") {
            Some(v @ Value::Object(m)) if !m.is_empty() => {
                format!("table<string, {}>", self.lua_type(v, at))
            }
            _ => "table".into(),
        }
    }

    /// `---@class` with a `---@field` per property: exact when the schema allows no other
    /// property (`additionalProperties: false`, as every tool's arguments), so EmmyLua and
    /// LuaLS flag a field the tool does not take; a property the schema does not require is
    /// optional (`?`), since it may be absent.
    fn class(&mut self, name: &str, schema: &Value) -> String {
        let exact = schema.get("additionalProperties") == Some(&Value::Bool(false));
        let mut out = String::new();
        if let Some(d) = schema.get("description").and_then(Value::as_str) {
            out.push_str(&format!("---{}\n", one_line(d)));
        }
        out.push_str(&format!(
            "---@class {}{name}\n",
            if exact { "(exact) " } else { "" }
        ));
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(props) = schema.get("properties").and_then(Value::as_object) {
            for (k, p) in props {
                let opt = if required.contains(&k.as_str()) {
                    ""
                } else {
                    "?"
                };
                let desc = p.get("description").and_then(Value::as_str).unwrap_or("");
                let ty = self.lua_type(p, &format!("{name}.{k}"));
                let line = format!("---@field {k}{opt} {ty} {}", one_line(desc));
                out.push_str(line.trim_end());
                out.push('\n');
            }
        }
        out
    }

    /// A top-level class and the nested classes it made, in that order.
    fn top(&mut self, name: &str, schema: &Value) -> String {
        self.defined.insert(name.to_string());
        let mut out = self.class(name, schema);
        out.push_str(&std::mem::take(&mut self.text));
        out
    }
}

/// Whether a schema's `title` can name a class (`Preview`, `Asset`).
fn is_class_name(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The whole definitions file for these tools (sorted by name).
pub fn lua_definitions(tools: &[std::sync::Arc<Tool>]) -> String {
    let mut out = String::from(
        "---@meta\n-- DO NOT EDIT. Generated by `lmcp types` from the tool registry; \
         `BLESS=1 cargo test --test all types::` refreshes this copy.\n\n",
    );
    out.push_str(GLOBALS);
    out.push_str(SANDBOX);
    out.push_str(&tool_definitions(tools));
    out
}

/// The definitions of these tools alone (sorted as given): their argument and result classes
/// and their functions on `tools`, without the globals every script has. An agent that knows
/// which tools it will call reads these instead of the whole file.
pub fn tool_definitions(tools: &[std::sync::Arc<Tool>]) -> String {
    let mut out = String::new();
    let mut classes = Classes::new();
    for tool in tools {
        let s = tool.spec();
        out.push('\n');
        let args = format!("{}_args", s.name);
        out.push_str(&classes.top(&args, &s.input_schema));
        let result = match &s.output_schema {
            Some(schema) => {
                let name = format!("{}_result", s.name);
                out.push_str(&classes.top(&name, schema));
                name
            }
            None => "any".to_string(),
        };
        // an unconfirmed run previews what changes state
        let result = if s.effect.changes_state() {
            format!("{result}|Preview")
        } else {
            result
        };
        for line in textwrap(&s.description, 96) {
            out.push_str(&format!("---{line}\n"));
        }
        out.push_str(&format!(
            "---effect: {}{}\n",
            s.effect,
            if s.annotations.destructive_hint {
                " (destructive)"
            } else {
                ""
            }
        ));
        let optional = s
            .input_schema
            .get("required")
            .and_then(Value::as_array)
            .is_none_or(|r| r.is_empty());
        out.push_str(&format!(
            "---@param args{} {args}\n---@return {result}\n",
            if optional { "?" } else { "" }
        ));
        out.push_str(&format!("function tools.{}(args) end\n", s.name));
    }
    // Descriptions and names were chosen by agents, skills and upstream servers, and editors
    // show this file: escaped like everything lmcp puts on a terminal (ours holds no controls).
    crate::text::escape_controls_keep_lines(&out).into_owned()
}

/// The editor configs `lmcp types --config` writes, pointing at `library` (the folder the
/// definitions were written to): `.emmyrc.json` for EmmyLua and `.luarc.json` for LuaLS.
///
/// Both run Lua 5.4 with the definitions as a library; LuaLS also leaves out its own `io`,
/// `os`, `debug` and `package` (the definitions describe the sandbox's). A program header's
/// `---@param` lines stand at the top of a chunk, outside any function, which EmmyLua reports
/// as `annotation-usage-error`: that one diagnostic is off, so the header stays one format for
/// recipes, tools and skills.
pub fn editor_configs(library: &str) -> [(&'static str, String); 2] {
    let emmy = serde_json::json!({
        "$schema": "https://raw.githubusercontent.com/EmmyLuaLs/emmylua-analyzer-rust/refs/heads/main/crates/emmylua_code_analysis/resources/schema.json",
        "runtime": {"version": "Lua5.4"},
        "workspace": {"library": [library]},
        "diagnostics": {"disable": ["annotation-usage-error"]},
    });
    let luals = serde_json::json!({
        "$schema": "https://raw.githubusercontent.com/LuaLS/vscode-lua/master/setting/schema.json",
        "runtime.version": "Lua 5.4",
        "runtime.builtin": {"io": "disable", "os": "disable", "debug": "disable", "package": "disable"},
        "workspace.library": [library],
        "workspace.checkThirdParty": false,
    });
    let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default() + "\n";
    [
        (".emmyrc.json", pretty(&emmy)),
        (".luarc.json", pretty(&luals)),
    ]
}

/// Greedy word wrap for doc comments.
fn textwrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schema_types_map_to_luals() {
        let mut c = Classes::new();
        let mut t = |s: Value| c.lua_type(&s, "x");
        assert_eq!(t(json!({"type": "string"})), "string");
        assert_eq!(
            t(json!({"type": "array", "items": {"type": "integer"}})),
            "integer[]"
        );
        assert_eq!(t(json!({"type": ["integer", "null"]})), "integer|nil");
        assert_eq!(
            t(json!({"enum": ["square", "portrait"]})),
            "\"square\"|\"portrait\""
        );
        assert_eq!(t(json!({})), "any");
        assert_eq!(
            t(json!({"type": "object", "additionalProperties": {"type": "boolean"}})),
            "table<string, boolean>"
        );
        assert_eq!(t(json!({"type": "object"})), "table");
        let mut c = Classes::new();
        let text = c.top(
            "x_args",
            &json!({"properties": {"a": {"type": "string", "description": "the a"}, "b": {"type": "object"}}, "required": ["a"], "additionalProperties": false}),
        );
        assert_eq!(
            text,
            "---@class (exact) x_args\n---@field a string the a\n---@field b? table\n"
        );
    }

    #[test]
    fn nested_objects_become_classes_and_titles_are_shared() {
        let mut c = Classes::new();
        let item = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
        let text = c.top(
            "t_result",
            &json!({"type": "object", "properties": {
                "items": {"type": "array", "items": item},
                "previews": {"type": "array", "items": json!({"title": "Preview", "type": "object", "properties": {"tool": {"type": "string"}}})},
                "by_key": {"type": "object", "additionalProperties": item}
            }, "required": ["items"]}),
        );
        assert!(text.starts_with("---@class t_result\n"), "{text}");
        assert!(
            text.contains("---@field items t_result.items[]\n"),
            "{text}"
        );
        assert!(text.contains("---@field previews? Preview[]"), "{text}");
        assert!(
            text.contains("---@field by_key? table<string, t_result.by_key>"),
            "{text}"
        );
        // the nested class, once, non-exact (the schema allows more), its field required
        assert_eq!(
            text.matches("---@class t_result.items\n").count(),
            1,
            "{text}"
        );
        assert!(text.contains("---@class t_result.items\n---@field name string\n"));
        // Preview is the globals' class, not made again
        assert!(!text.contains("---@class Preview"), "{text}");
    }
}
