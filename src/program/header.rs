//! The program header: what a `.lua` program declares about itself, read without running it.
//!
//! Recipes, custom tools and skill scripts written in Lua all start with the same header, in
//! LuaLS-style comments, so editors show it and lmcp can validate parameters, set the timeout and
//! limit the tools a program may call before a single line of it runs:
//!
//! ```lua
//! ---@name user_word_count
//! ---@description Count the words of a text.
//! ---@param text string The text to count
//! ---@param limit? integer=10 How many words to return
//! ---@timeout 30
//! ---@uses read_file, calculate
//! ---@connect api.example.org
//! ```
//!
//! The header is the leading block of `--` comment lines (a `#!` line and blank lines may come
//! first or between). `?` after a name makes a parameter optional; `=VALUE` after the type gives
//! a default (which also makes it optional; a string default with spaces is written in JSON
//! quotes: `string="two words"`). Types: `string`, `integer`, `number`, `boolean`, `table` or
//! `object`, `array`. A bad header is an error naming its line.
//!
//! `---@return TYPE` declares what the program returns, in LuaLS type syntax read by
//! [`super::luatype`] (`---@return {total: number, files: string[]}`): a custom tool or skill
//! script that declares one has its result typed in its tool's output schema. A type with no
//! portable schema is refused, naming its line.

use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::error::{Error, Result};

/// A parameter's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ParamType {
    /// Text.
    String,
    /// A whole number.
    Integer,
    /// Any number.
    Number,
    /// true or false.
    Boolean,
    /// A table with named keys (a JSON object).
    Object,
    /// A list (a JSON array).
    Array,
}

impl ParamType {
    /// The accepted type names, for error messages.
    pub const NAMES: &'static str =
        "use string, integer (int), number, boolean (bool), object (table) or array";

    /// Parses a type name: the one parser for Lua headers, recipe manifests and custom tools.
    pub fn parse(s: &str) -> Option<ParamType> {
        Some(match s {
            "string" => ParamType::String,
            "integer" | "int" => ParamType::Integer,
            "number" => ParamType::Number,
            "boolean" | "bool" => ParamType::Boolean,
            "table" | "object" => ParamType::Object,
            "array" => ParamType::Array,
            _ => return None,
        })
    }

    /// The JSON Schema type name.
    pub fn json_type(self) -> &'static str {
        match self {
            ParamType::String => "string",
            ParamType::Integer => "integer",
            ParamType::Number => "number",
            ParamType::Boolean => "boolean",
            ParamType::Object => "object",
            ParamType::Array => "array",
        }
    }

    /// A value of this type, to check templates against a tool's schema before anything runs.
    pub fn sample(self) -> Value {
        match self {
            ParamType::String => json!("x"),
            ParamType::Integer => json!(1),
            ParamType::Number => json!(1.5),
            ParamType::Boolean => json!(true),
            ParamType::Object => json!({}),
            ParamType::Array => json!([]),
        }
    }

    /// Whether `v` is a value of this type ([`ParamType::coerce`] takes it).
    pub fn accepts(self, v: &Value) -> bool {
        self.coerce(v).is_ok()
    }

    /// `v` as a value of this type, or why it is not one. The one rule for integers, wherever
    /// a value comes from (a call, a default): a whole-valued number like `1.0` is the integer
    /// 1 (JSON Schema says it is one), and a whole number beyond the 64-bit range Lua holds is
    /// refused, not handed on as an inexact float.
    pub fn coerce(self, v: &Value) -> std::result::Result<Value, String> {
        let fits = match self {
            ParamType::String => v.is_string(),
            ParamType::Number => v.is_number(),
            ParamType::Boolean => v.is_boolean(),
            ParamType::Object => v.is_object(),
            ParamType::Array => v.is_array(),
            ParamType::Integer => return integer(v),
        };
        if fits {
            Ok(v.clone())
        } else {
            Err(format!(
                "must be {}, got {}",
                self.with_article(),
                json_type_name(v)
            ))
        }
    }

    /// The type's name with its article: "a string", "an integer".
    pub fn with_article(self) -> &'static str {
        match self {
            ParamType::String => "a string",
            ParamType::Integer => "an integer",
            ParamType::Number => "a number",
            ParamType::Boolean => "a boolean",
            ParamType::Object => "an object",
            ParamType::Array => "an array",
        }
    }

    /// Reads a value of this type from command-line text (`--param k=v`).
    pub fn from_text(self, text: &str) -> std::result::Result<Value, String> {
        match self {
            ParamType::String => Ok(Value::String(text.to_string())),
            ParamType::Integer => match text.trim().parse::<i64>() {
                Ok(n) => Ok(Value::from(n)),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow
                    ) =>
                {
                    Err(format!(
                        "`{text}` is beyond the integer range ({} to {})",
                        i64::MIN,
                        i64::MAX
                    ))
                }
                Err(_) => Err(format!("`{text}` is not an integer")),
            },
            ParamType::Number => text
                .trim()
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
                .ok_or_else(|| format!("`{text}` is not a number")),
            ParamType::Boolean => match text.trim() {
                "true" | "yes" | "1" | "on" => Ok(Value::Bool(true)),
                "false" | "no" | "0" | "off" => Ok(Value::Bool(false)),
                _ => Err(format!("`{text}` is not a boolean (use true or false)")),
            },
            ParamType::Object | ParamType::Array => {
                let v: Value =
                    serde_json::from_str(text).map_err(|e| format!("`{text}` is not JSON: {e}"))?;
                if self.accepts(&v) {
                    Ok(v)
                } else {
                    Err(format!("`{text}` is not a JSON {}", self.json_type()))
                }
            }
        }
    }
}

/// An integer from a JSON number: see [`ParamType::coerce`].
fn integer(v: &Value) -> std::result::Result<Value, String> {
    let range = format!("{} to {}", i64::MIN, i64::MAX);
    match v {
        Value::Number(n) if n.is_i64() => Ok(v.clone()),
        Value::Number(n) if n.is_u64() => Err(format!(
            "{n} is beyond the integer range ({range}); give a smaller integer or use a number"
        )),
        Value::Number(n) => {
            let f = n.as_f64().unwrap_or(f64::NAN);
            // i64::MAX as f64 rounds up to 2^63, which is already out of range
            if f.fract() != 0.0 || !f.is_finite() {
                Err(format!("must be an integer, got {n}"))
            } else if f < i64::MIN as f64 || f >= i64::MAX as f64 {
                Err(format!(
                    "{n} is beyond the integer range ({range}); give a smaller integer or use a number"
                ))
            } else {
                Ok(Value::from(f as i64))
            }
        }
        other => Err(format!("must be an integer, got {}", json_type_name(other))),
    }
}

/// One declared parameter.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParamSpec {
    /// Its name (an identifier).
    pub name: String,
    /// Its type.
    #[serde(rename = "type")]
    pub kind: ParamType,
    /// Whether a caller must give it.
    pub required: bool,
    /// The value used when it is not given.
    pub default: Option<Value>,
    /// What it means.
    pub description: String,
}

/// Everything a program header declares.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Header {
    /// `---@name`.
    pub name: Option<String>,
    /// `---@description` (several lines join with spaces).
    pub description: Option<String>,
    /// `---@param` lines, in order.
    pub params: Vec<ParamSpec>,
    /// `---@timeout` in seconds.
    #[serde(serialize_with = "secs")]
    pub timeout: Option<Duration>,
    /// `---@uses`: the tools the program may call; `None` when not declared.
    pub uses: Option<Vec<String>>,
    /// `---@connect`: the host patterns its requests may reach (empty: none).
    pub connect: Vec<String>,
    /// The line of the first `---@uses`, for messages about what it lists.
    #[serde(skip)]
    pub uses_line: Option<usize>,
    /// The line of `---@name`, for messages about the name.
    #[serde(skip)]
    pub name_line: Option<usize>,
    /// `---@return`: the JSON Schema of what the program returns, when declared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub returns: Option<Value>,
}

fn secs<S: serde::Serializer>(d: &Option<Duration>, s: S) -> std::result::Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_f64(d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

/// LuaLS annotations that may appear in a header and mean nothing to lmcp.
const LUALS_TAGS: &[&str] = &[
    "type",
    "class",
    "field",
    "alias",
    "meta",
    "diagnostic",
    "module",
    "see",
    "deprecated",
    "version",
    "author",
    "license",
    "nodiscard",
    "async",
    "cast",
    "enum",
    "generic",
    "overload",
];

/// Most hosts one program's `---@connect` lines name.
pub const MAX_CONNECT: usize = 64;

/// Longest timeout a header may declare, in seconds.
pub const MAX_TIMEOUT_SECS: f64 = 3600.0;

fn bad(line: usize, message: impl Into<String>) -> Error {
    Error::Header {
        chunk: String::new(),
        line,
        message: message.into(),
    }
}

use super::compile::is_identifier;

impl Header {
    /// Reads the header of a Lua program; errors name the place as `chunk:LINE`.
    pub fn parse(source: &str, chunk: &str) -> Result<Header> {
        Header::read(source).map_err(|e| match e {
            Error::Header { line, message, .. } => Error::Header {
                chunk: chunk.to_string(),
                line,
                message,
            },
            other => other,
        })
    }

    fn read(source: &str) -> Result<Header> {
        let mut h = Header::default();
        let source = source.strip_prefix('\u{feff}').unwrap_or(source);
        for (i, raw) in source.lines().enumerate() {
            let line_no = i + 1;
            let line = raw.trim();
            if line.is_empty() || (i == 0 && line.starts_with("#!")) {
                continue;
            }
            if !line.starts_with("--") {
                break;
            }
            let Some(rest) = line.strip_prefix("---@") else {
                continue;
            };
            let (tag, value) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            let value = value.trim();
            match tag {
                "name" => {
                    if value.is_empty() {
                        return Err(bad(
                            line_no,
                            "@name needs a name, like `---@name user_word_count`",
                        ));
                    }
                    h.name = Some(value.to_string());
                    h.name_line = Some(line_no);
                }
                "description" => {
                    let d = h.description.get_or_insert_with(String::new);
                    if !d.is_empty() {
                        d.push(' ');
                    }
                    d.push_str(value);
                }
                "param" => {
                    if h.params.len() == super::compile::MAX_PARAMS {
                        return Err(bad(
                            line_no,
                            format!(
                                "more than {} parameters; a program takes at most that many: \
                                 pass a table as one parameter instead",
                                super::compile::MAX_PARAMS
                            ),
                        ));
                    }
                    let p = parse_param(value, line_no)?;
                    if h.params.iter().any(|q| q.name == p.name) {
                        return Err(bad(
                            line_no,
                            format!("parameter `{}` is declared twice", p.name),
                        ));
                    }
                    h.params.push(p);
                }
                "timeout" => {
                    let secs: f64 = value.trim_end_matches('s').parse().map_err(|_| {
                        bad(
                            line_no,
                            format!("@timeout needs a number of seconds, got `{value}`"),
                        )
                    })?;
                    let t = super::compile::check_timeout(secs, MAX_TIMEOUT_SECS)
                        .map_err(|m| bad(line_no, format!("@timeout: {m}")))?;
                    h.timeout = Some(t);
                }
                "uses" => {
                    h.uses_line.get_or_insert(line_no);
                    let list = h.uses.get_or_insert_with(Vec::new);
                    for name in value
                        .split([',', ' '])
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                    {
                        if crate::registry::check_name(name).is_err() {
                            return Err(bad(
                                line_no,
                                format!("@uses lists `{name}`, which is not a tool name"),
                            ));
                        }
                        if !list.iter().any(|n| n == name) {
                            if list.len() == super::compile::MAX_USES {
                                return Err(bad(
                                    line_no,
                                    format!(
                                        "@uses lists more than {} tools, the most a program may",
                                        super::compile::MAX_USES
                                    ),
                                ));
                            }
                            list.push(name.to_string());
                        }
                    }
                }
                "connect" => {
                    for host in value.split([',', ' ']).filter(|s| !s.is_empty()) {
                        let pattern = crate::config::HostPattern::parse(host)
                            .map_err(|m| bad(line_no, format!("@connect: {m}")))?
                            .to_string();
                        if !h.connect.contains(&pattern) {
                            if h.connect.len() == MAX_CONNECT {
                                return Err(bad(
                                    line_no,
                                    format!(
                                        "@connect names more than {MAX_CONNECT} hosts, the most \
                                         a program may"
                                    ),
                                ));
                            }
                            h.connect.push(pattern);
                        }
                    }
                    if value.is_empty() {
                        return Err(bad(
                            line_no,
                            "@connect needs a host, like `---@connect api.example.org`",
                        ));
                    }
                }
                "return" => {
                    if h.returns.is_some() {
                        return Err(bad(
                            line_no,
                            "a second @return: a program returns one value, so declare one \
                             type (a table type holds several fields)",
                        ));
                    }
                    let (schema, _name_and_description) = super::luatype::parse(value)
                        .map_err(|m| bad(line_no, format!("@return: {m}")))?;
                    h.returns = Some(schema);
                }
                t if LUALS_TAGS.contains(&t) => {}
                other => {
                    return Err(bad(
                        line_no,
                        format!(
                            "unknown tag `@{other}`; lmcp reads @name, @description, @param, @timeout, @uses, @connect and @return"
                        ),
                    ));
                }
            }
        }
        if let Some(d) = &h.description {
            super::compile::check_description(d).map_err(|m| bad(1, m))?;
        }
        Ok(h)
    }

    /// The parameters as a JSON Schema object (the input schema of a program used as a tool).
    pub fn params_schema(&self) -> Value {
        let mut props = Map::new();
        for p in &self.params {
            let mut s = json!({"type": p.kind.json_type()});
            if !p.description.is_empty() {
                s["description"] = json!(p.description);
            }
            if let Some(d) = &p.default {
                s["default"] = d.clone();
            }
            props.insert(p.name.clone(), s);
        }
        let required: Vec<&str> = self
            .params
            .iter()
            .filter(|p| p.required)
            .map(|p| p.name.as_str())
            .collect();
        json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
    }

    /// Checks given parameters and fills in defaults: the `params` table a program sees.
    pub fn bind(&self, given: &Map<String, Value>) -> Result<Map<String, Value>> {
        let mut out = Map::new();
        for (k, v) in given {
            let Some(p) = self.params.iter().find(|p| &p.name == k) else {
                return Err(Error::Usage(format!(
                    "unknown parameter `{k}`; {}",
                    self.declared()
                )));
            };
            let v = p
                .kind
                .coerce(v)
                .map_err(|m| Error::Usage(format!("parameter `{k}`: {m}")))?;
            out.insert(k.clone(), v);
        }
        for p in &self.params {
            if out.contains_key(&p.name) {
                continue;
            }
            match (&p.default, p.required) {
                (Some(d), _) => {
                    out.insert(p.name.clone(), d.clone());
                }
                (None, true) => {
                    return Err(Error::Usage(format!(
                        "missing required parameter `{}` ({}); give it with --param {}=VALUE",
                        p.name,
                        p.kind.json_type(),
                        p.name
                    )));
                }
                (None, false) => {}
            }
        }
        Ok(out)
    }

    /// Parses `k=v` texts from the command line by the declared types.
    pub fn params_from_cli(&self, pairs: &[String]) -> Result<Map<String, Value>> {
        let mut out = Map::new();
        for pair in pairs {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| Error::Usage(format!("--param needs NAME=VALUE, got `{pair}`")))?;
            let p = self.params.iter().find(|p| p.name == k).ok_or_else(|| {
                Error::Usage(format!("unknown parameter `{k}`; {}", self.declared()))
            })?;
            let value = p
                .kind
                .from_text(v)
                .map_err(|e| Error::Usage(format!("parameter `{k}`: {e}")))?;
            out.insert(k.to_string(), value);
        }
        Ok(out)
    }

    fn declared(&self) -> String {
        if self.params.is_empty() {
            "this program declares no parameters".to_string()
        } else {
            let names: Vec<String> = self
                .params
                .iter()
                .map(|p| format!("`{}`", p.name))
                .collect();
            format!("declared: {}", names.join(", "))
        }
    }
}

/// The JSON type name of a value, for messages.
pub fn json_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn parse_param(value: &str, line: usize) -> Result<ParamSpec> {
    let usage = "write `---@param NAME[?] TYPE[=DEFAULT] description`";
    let (name_tok, rest) = value.split_once(char::is_whitespace).unwrap_or((value, ""));
    if name_tok.is_empty() {
        return Err(bad(
            line,
            format!("@param needs a name and a type; {usage}"),
        ));
    }
    let (name, optional) = match name_tok.strip_suffix('?') {
        Some(n) => (n, true),
        None => (name_tok, false),
    };
    if !is_identifier(name) {
        return Err(bad(
            line,
            format!("`{name}` is not a valid parameter name (letters, digits, _)"),
        ));
    }
    let rest = rest.trim_start();
    let type_end = rest
        .find(|c: char| c == '=' || c.is_whitespace())
        .unwrap_or(rest.len());
    let type_tok = &rest[..type_end];
    if type_tok.is_empty() {
        return Err(bad(
            line,
            format!("parameter `{name}` has no type; {usage}"),
        ));
    }
    let kind = ParamType::parse(type_tok).ok_or_else(|| {
        bad(line, format!("parameter `{name}` has unknown type `{type_tok}`; use string, integer, number, boolean, table or array"))
    })?;
    let mut rest = &rest[type_end..];
    let mut default = None;
    if let Some(after) = rest.strip_prefix('=') {
        let (text, remaining) =
            split_default(after).map_err(|m| bad(line, format!("parameter `{name}`: {m}")))?;
        let v = default_value(kind, text)
            .map_err(|m| bad(line, format!("parameter `{name}`'s default {m}")))?;
        default = Some(v);
        rest = remaining;
    }
    Ok(ParamSpec {
        name: name.to_string(),
        kind,
        required: !optional && default.is_none(),
        default,
        description: rest.trim().to_string(),
    })
}

/// Splits the default value text from the description: a JSON string, a bracketed JSON value,
/// or a word.
fn split_default(s: &str) -> std::result::Result<(&str, &str), String> {
    let first = s.chars().next().ok_or("has `=` but no default value")?;
    if first == '"' || first == '[' || first == '{' {
        let mut stream = serde_json::Deserializer::from_str(s).into_iter::<Value>();
        match stream.next() {
            Some(Ok(_)) => {
                let end = stream.byte_offset();
                Ok((&s[..end], &s[end..]))
            }
            _ => Err("has a default that is not valid JSON".to_string()),
        }
    } else {
        let end = s.find(char::is_whitespace).unwrap_or(s.len());
        Ok((&s[..end], &s[end..]))
    }
}

fn default_value(kind: ParamType, text: &str) -> std::result::Result<Value, String> {
    if kind == ParamType::String && !text.starts_with('"') {
        return Ok(Value::String(text.to_string()));
    }
    let v: Value = serde_json::from_str(text)
        .map_err(|_| format!("`{text}` is not {}", kind.with_article()))?;
    kind.coerce(&v)
        .map_err(|m| format!("`{text}` is not {}: {m}", kind.with_article()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = "#!/usr/bin/env lmcp\n---@name user_word_count\n---@description Count the words\n---@description of a text.\n---@param text string The text to count\n---@param limit? integer=10 How many words to return\n---@param sep? string=\" \" The separator\n---@param strict boolean\n---@timeout 30\n---@uses calculate, read_file\n---@connect API.example.org, *.hooks.example.org\n---@connect [::1]:8080\n---@return table\nlocal x = 1\n---@param late string ignored: the header ended\n";

    #[test]
    fn reads_the_example_header() {
        let h = Header::parse(EXAMPLE, "t.lua").unwrap();
        assert_eq!(h.name.as_deref(), Some("user_word_count"));
        assert_eq!(h.description.as_deref(), Some("Count the words of a text."));
        assert_eq!(h.params.len(), 4);
        assert_eq!(
            h.params[0],
            ParamSpec {
                name: "text".into(),
                kind: ParamType::String,
                required: true,
                default: None,
                description: "The text to count".into()
            }
        );
        assert_eq!(h.params[1].default, Some(json!(10)));
        assert!(!h.params[1].required);
        assert_eq!(h.params[1].description, "How many words to return");
        assert_eq!(h.params[2].default, Some(json!(" ")));
        assert!(h.params[3].required);
        assert_eq!(h.timeout, Some(Duration::from_secs(30)));
        assert_eq!(
            h.uses,
            Some(vec!["calculate".to_string(), "read_file".to_string()])
        );
        assert_eq!(
            h.connect,
            ["api.example.org", "*.hooks.example.org", "[::1]:8080"]
        );
        // `---@return table` declares a table of any fields
        assert_eq!(h.returns, Some(json!({"type": "object"})));
        let typed = Header::parse(
            "---@return {total: number, files?: string[]} the sums",
            "t.lua",
        )
        .unwrap();
        assert_eq!(typed.returns.unwrap()["required"], json!(["total"]));
        let schema = h.params_schema();
        assert_eq!(schema["required"], json!(["text", "strict"]));
        assert!(jsonschema::meta::is_valid(&schema));
    }

    #[test]
    fn bad_headers_name_their_line() {
        let cases = [
            ("---@param", 1, "needs a name"),
            ("-- hi\n---@param x strng", 2, "unknown type `strng`"),
            (
                "---@param x integer=ten",
                1,
                "default `ten` is not an integer",
            ),
            (
                "---@param x string\n---@param x integer",
                2,
                "declared twice",
            ),
            ("---@timeout soon", 1, "number of seconds"),
            ("---@timeout 0", 1, "at least 0.001 seconds (1 ms)"),
            ("---@timeout 1e-12", 1, "at least 0.001 seconds (1 ms)"),
            ("---@parm x string", 1, "unknown tag `@parm`"),
            ("---@uses Read-File", 1, "not a tool name"),
            ("---@param 1x string", 1, "not a valid parameter name"),
            ("---@connect", 1, "@connect needs a host"),
            ("-- x\n---@connect http://a.org/", 2, "name only the host"),
            ("---@connect a.*.org", 1, "may only stand alone"),
            ("-- x\n---@return string|nil", 2, "@return: a union"),
            ("---@return {n: numbr}", 1, "@return: unknown type `numbr`"),
            (
                "---@return {a: number}\n---@return string",
                2,
                "a second @return",
            ),
        ];
        for (src, line, what) in cases {
            let e = Header::parse(src, "t.lua").unwrap_err();
            let Error::Header {
                line: l, message, ..
            } = &e
            else {
                panic!("{e}")
            };
            assert_eq!(*l, line, "{src}: {e}");
            assert!(message.contains(what), "{src}: {message}");
            assert!(e.to_string().contains(&format!("t.lua:{line}: ")));
        }
    }

    #[test]
    fn integers_are_whole_and_within_range_everywhere() {
        let h = Header::parse("---@param n integer", "t.lua").unwrap();
        let bind = |v: Value| h.bind(json!({ "n": v }).as_object().unwrap());
        // 1.0 is the integer JSON Schema says it is, and reaches the program as one
        assert_eq!(bind(json!(1.0)).unwrap()["n"], json!(1));
        assert!(bind(json!(1.0)).unwrap()["n"].is_i64());
        let e = bind(json!(1.5)).unwrap_err().to_string();
        assert!(e.contains("must be an integer, got 1.5"), "{e}");
        for big in [json!(18446744073709551615u64), json!(9.3e18), json!(-1e19)] {
            let e = bind(big.clone()).unwrap_err().to_string();
            assert!(e.contains("beyond the integer range"), "{big}: {e}");
        }
        let e = Header::parse("---@param n? integer=9223372036854775808", "t.lua").unwrap_err();
        assert!(e.to_string().contains("beyond the integer range"), "{e}");
        let e = h
            .params_from_cli(&["n=18446744073709551615".into()])
            .unwrap_err();
        assert!(e.to_string().contains("beyond the integer range"), "{e}");
        assert_eq!(
            Header::parse("---@param n? integer=2.0", "t.lua")
                .unwrap()
                .params[0]
                .default,
            Some(json!(2))
        );
    }

    #[test]
    fn binding_checks_types_and_fills_defaults() {
        let h = Header::parse(EXAMPLE, "t.lua").unwrap();
        let given = json!({"text": "a b", "strict": true})
            .as_object()
            .unwrap()
            .clone();
        let bound = h.bind(&given).unwrap();
        assert_eq!(bound["limit"], json!(10));
        assert!(
            h.bind(&json!({"strict": true}).as_object().unwrap().clone())
                .unwrap_err()
                .to_string()
                .contains("missing required parameter `text`")
        );
        assert!(
            h.bind(
                &json!({"text": 1, "strict": true})
                    .as_object()
                    .unwrap()
                    .clone()
            )
            .unwrap_err()
            .to_string()
            .contains("parameter `text`: must be a string, got integer")
        );
        assert!(
            h.bind(&json!({"bogus": 1}).as_object().unwrap().clone())
                .unwrap_err()
                .to_string()
                .contains("declared: `text`")
        );
        let cli = h
            .params_from_cli(&["limit=3".into(), "strict=yes".into(), "text=a=b".into()])
            .unwrap();
        assert_eq!(
            Value::Object(cli),
            json!({"limit": 3, "strict": true, "text": "a=b"})
        );
        assert!(
            h.params_from_cli(&["limit=x".into()])
                .unwrap_err()
                .to_string()
                .contains("not an integer")
        );
        assert!(
            h.params_from_cli(&["limit".into()])
                .unwrap_err()
                .to_string()
                .contains("NAME=VALUE")
        );
    }
}
