//! LuaLS type expressions, read as JSON Schema: what a program header's `---@return` says its
//! result is (issue #37).
//!
//! A Lua custom tool or skill script declares its result in the type syntax editors already
//! read, and lmcp turns it into the output schema of the tool it becomes, so MCP clients and
//! `lmcp types` see the same shape the editor does:
//!
//! ```lua
//! ---@return {total: number, files: string[], first?: {name: string, size: integer}}
//! ```
//!
//! Only what has a portable JSON Schema is accepted (the keywords strict MCP clients read, one
//! `type` per schema): the names `string`, `integer`, `number`, `boolean`, `table` (`object`),
//! `array` and `any`; `T[]`; table types `{name: T, name?: T}` (`?` leaves a field out of
//! `required`); `table<string, T>` (a map); and parentheses. A union (`A|B`), `nil`, a literal
//! or a class name has no such schema, so it is refused, naming what could not be read. The
//! text is bounded: at most [`MAX_DEPTH`] nested types and [`MAX_FIELDS`] fields.

use serde_json::{Map, Value, json};

/// Most types nested inside one another (`{a: {b: ...}}`, `T[][]`).
pub const MAX_DEPTH: usize = 16;
/// Most fields in all the table types of one expression.
pub const MAX_FIELDS: usize = 256;

/// Reads the type at the start of `text`: its schema, and the text after it (a LuaLS
/// `---@return` may go on with a name and a description). The message says what could not be
/// read, and where.
pub fn parse(text: &str) -> Result<(Value, &str), String> {
    let mut p = Parser {
        text,
        at: 0,
        fields: 0,
    };
    p.skip_space();
    if p.at == text.len() {
        return Err("a type is missing, like `{total: number, files: string[]}`".into());
    }
    let schema = p.ty(0)?;
    p.skip_space();
    if p.peek() == Some('|') {
        return Err(p.union());
    }
    Ok((schema, &text[p.at..]))
}

struct Parser<'a> {
    text: &'a str,
    at: usize,
    fields: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.text[self.at..].chars().next()
    }

    fn skip_space(&mut self) {
        let rest = &self.text[self.at..];
        self.at += rest.len() - rest.trim_start().len();
    }

    fn eat(&mut self, c: char) -> bool {
        self.skip_space();
        if self.peek() == Some(c) {
            self.at += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char, what: &str) -> Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(format!("expected `{c}` {what} at {}", self.place()))
        }
    }

    /// Where the parser stands, for messages: the text from there (or "the end").
    fn place(&self) -> String {
        let rest: String = self.text[self.at..].chars().take(20).collect();
        if rest.is_empty() {
            "the end".into()
        } else {
            format!("`{rest}`")
        }
    }

    fn word(&mut self) -> &str {
        self.skip_space();
        let start = self.at;
        let rest = &self.text[start..];
        let len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .unwrap_or(rest.len());
        self.at += len;
        &self.text[start..start + len]
    }

    fn union(&self) -> String {
        "a union (`|`) has no portable schema: declare one type (a field that may be absent \
         is `name?: TYPE`)"
            .into()
    }

    /// A type and any `[]` after it.
    fn ty(&mut self, depth: usize) -> Result<Value, String> {
        if depth >= MAX_DEPTH {
            return Err(format!("types nest more than {MAX_DEPTH} deep"));
        }
        let mut schema = self.primary(depth)?;
        let mut nested = depth;
        loop {
            // `[]` right after the type (LuaLS allows no space before it)
            if self.text[self.at..].starts_with("[]") {
                nested += 1;
                if nested >= MAX_DEPTH {
                    return Err(format!("types nest more than {MAX_DEPTH} deep"));
                }
                self.at += 2;
                schema = json!({"type": "array", "items": schema});
            } else {
                return Ok(schema);
            }
        }
    }

    fn primary(&mut self, depth: usize) -> Result<Value, String> {
        self.skip_space();
        match self.peek() {
            Some('{') => {
                self.at += 1;
                self.table(depth)
            }
            Some('(') => {
                self.at += 1;
                let inner = self.ty(depth + 1)?;
                if self.eat('|') {
                    return Err(self.union());
                }
                self.expect(')', "to close `(`")?;
                Ok(inner)
            }
            Some('"' | '\'') => Err(format!(
                "a literal type ({}) has no portable schema: use `string`",
                self.place()
            )),
            _ => {
                let start = self.place();
                let name = self.word().to_string();
                match name.as_str() {
                    "string" => Ok(json!({"type": "string"})),
                    "integer" => Ok(json!({"type": "integer"})),
                    "number" => Ok(json!({"type": "number"})),
                    "boolean" => Ok(json!({"type": "boolean"})),
                    "array" => Ok(json!({"type": "array"})),
                    "any" => Ok(json!({})),
                    "object" => Ok(json!({"type": "object"})),
                    "table" if self.eat('<') => self.map(depth),
                    "table" => Ok(json!({"type": "object"})),
                    "" => Err(format!("expected a type at {start}")),
                    "nil" => Err(
                        "`nil` has no portable schema: a field that may be absent is `name?: TYPE`"
                            .into(),
                    ),
                    other => Err(format!(
                        "unknown type `{other}`: use string, integer, number, boolean, table, \
                         array, any, T[], table<string, T> or a table type {{name: T, name?: T}}"
                    )),
                }
            }
        }
    }

    /// `table<string, T>`, after `table<`.
    fn map(&mut self, depth: usize) -> Result<Value, String> {
        let key = self.word().to_string();
        if key != "string" {
            return Err(format!(
                "a map's keys must be `string` (JSON object keys are text), got `{key}`"
            ));
        }
        self.expect(',', "between a map's key and value types")?;
        let value = self.ty(depth + 1)?;
        if self.eat('|') {
            return Err(self.union());
        }
        self.expect('>', "to close `table<`")?;
        Ok(json!({"type": "object", "additionalProperties": value}))
    }

    /// `{name: T, name?: T}`, after `{`.
    fn table(&mut self, depth: usize) -> Result<Value, String> {
        let mut properties = Map::new();
        let mut required = Vec::new();
        loop {
            if self.eat('}') {
                break;
            }
            self.skip_space();
            let at = self.place();
            let name = self.word().to_string();
            if name.is_empty()
                || name.contains('.')
                || name.starts_with(|c: char| c.is_ascii_digit())
            {
                return Err(format!(
                    "expected a field name (letters, digits, _) at {at}"
                ));
            }
            let optional = self.eat('?');
            self.expect(':', &format!("after the field `{name}`"))?;
            let schema = self.ty(depth + 1)?;
            if self.eat('|') {
                return Err(self.union());
            }
            self.fields += 1;
            if self.fields > MAX_FIELDS {
                return Err(format!("more than {MAX_FIELDS} fields"));
            }
            if properties.insert(name.clone(), schema).is_some() {
                return Err(format!("the field `{name}` is declared twice"));
            }
            if !optional {
                required.push(name);
            }
            if self.eat('}') {
                break;
            }
            self.expect(',', "between fields")?;
        }
        let mut schema = json!({"type": "object", "properties": properties});
        if !required.is_empty() {
            schema["required"] = json!(required);
        }
        Ok(schema)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_types_become_schemas() {
        let (s, rest) =
            parse("{total: number, files: string[], first?: {name: string}} the sum").unwrap();
        assert_eq!(
            s,
            json!({"type": "object", "properties": {
                "total": {"type": "number"},
                "files": {"type": "array", "items": {"type": "string"}},
                "first": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
            }, "required": ["total", "files"]})
        );
        assert_eq!(rest.trim(), "the sum");
        assert!(jsonschema::meta::is_valid(&s));
        assert_eq!(parse("integer").unwrap().0, json!({"type": "integer"}));
        assert_eq!(
            parse("{a: integer}[][]").unwrap().0["items"]["items"]["type"],
            "object"
        );
        assert_eq!(
            parse("table<string, (boolean)>").unwrap().0,
            json!({"type": "object", "additionalProperties": {"type": "boolean"}})
        );
        assert_eq!(
            parse("{}").unwrap().0,
            json!({"type": "object", "properties": {}})
        );
        assert_eq!(parse("{a: any,}").unwrap().0["properties"]["a"], json!({}));
    }

    #[test]
    fn what_has_no_portable_schema_is_refused_by_name() {
        let cases = [
            ("", "a type is missing"),
            ("string|nil", "union"),
            ("{a: string|number}", "union"),
            ("{a?: nil}", "`nil`"),
            ("MyClass", "unknown type `MyClass`"),
            ("{a: string", "expected `,` between fields"),
            ("{a string}", "expected `:` after the field `a`"),
            ("{1a: string}", "field name"),
            ("\"x\"", "literal type"),
            ("table<integer, string>", "keys must be `string`"),
            ("{a: string, a: number}", "declared twice"),
        ];
        for (text, what) in cases {
            let e = parse(text).unwrap_err();
            assert!(e.contains(what), "{text}: {e}");
        }
        let deep = format!("{}string{}", "{a: ".repeat(20), "}".repeat(20));
        assert!(parse(&deep).unwrap_err().contains("nest more than"));
        let many: Vec<String> = (0..300).map(|i| format!("f{i}: string")).collect();
        assert!(
            parse(&format!("{{{}}}", many.join(", ")))
                .unwrap_err()
                .contains("more than 256 fields")
        );
    }
}
