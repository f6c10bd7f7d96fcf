//! What `lmcp call NAME ARGS...` takes: one JSON object (inline, `-` for stdin, `@FILE`), or
//! `KEY=VALUE` pairs typed by the tool's input schema, as people type them
//! (`lmcp call calculate expression=6*7`).
//!
//! A pair's value is read by the type the schema gives its key, with the one text parser
//! `--param` uses for recipes ([`ParamType::from_text`]): a string is the text as typed, an
//! integer or number is parsed, a boolean is `true`/`false` (also yes/no, 1/0, on/off), an array
//! or object is JSON, and `null` is null. A key whose schema names several types takes the first
//! that reads the text; a key with no type takes JSON when the text is JSON and the text
//! otherwise. `KEY=@FILE` reads the value from a file (bounded by `limits.input_mb`, like every
//! `@FILE`); `KEY=@@text` is the literal `@text`. A value that does not fit is an error naming
//! the key and the type; unknown keys are left to the gate, which names them against the schema.

use serde_json::{Map, Value, json};

use super::door::{read_input, read_stdin};
use crate::error::{Error, Result};
use crate::program::header::ParamType;

/// The arguments of `lmcp call` as one JSON object, from what was typed after the tool's name.
/// `schema` is the tool's input schema (it types `KEY=VALUE` pairs).
pub(super) fn call_arguments(raw: &[String], schema: &Value) -> Result<Value> {
    match raw {
        [] => Ok(json!({})),
        [one] if is_whole(one) => read_whole(one),
        pairs => {
            if let Some(whole) = pairs.iter().find(|p| is_whole(p)) {
                return Err(Error::Usage(format!(
                    "`{}` is the arguments as a whole (JSON, `-` or `@FILE`) and comes alone; \
                     give either that or KEY=VALUE pairs",
                    short(whole)
                )));
            }
            let mut out = Map::new();
            for pair in pairs {
                let (key, text) = pair.split_once('=').ok_or_else(|| {
                    Error::Usage(format!(
                        "`{}` is not KEY=VALUE; give KEY=VALUE pairs (like expression=6*7) or \
                         one JSON object",
                        short(pair)
                    ))
                })?;
                if key.is_empty() {
                    return Err(Error::Usage(format!(
                        "`{}` has no key before `=`",
                        short(pair)
                    )));
                }
                if out.contains_key(key) {
                    return Err(Error::Usage(format!(
                        "`{key}` is given twice; give each key once"
                    )));
                }
                let value = typed(key, &value_text(key, text)?, &schema["properties"][key])?;
                out.insert(key.to_string(), value);
            }
            Ok(Value::Object(out))
        }
    }
}

/// Whether an argument is the arguments as a whole: `-`, `@FILE` or a JSON object.
pub(super) fn is_whole(arg: &str) -> bool {
    arg == "-" || arg.starts_with('@') || arg.trim_start().starts_with('{')
}

/// Reads the arguments as a whole: inline JSON, `-` for stdin, `@FILE` for a file.
fn read_whole(raw: &str) -> Result<Value> {
    let (text, source) = match raw {
        "-" => (read_stdin("arguments from stdin")?, "stdin".to_string()),
        at if at.starts_with('@') => {
            let path = &at[1..];
            (read_input(std::path::Path::new(path))?, path.to_string())
        }
        inline => (inline.to_string(), "ARGS".to_string()),
    };
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| Error::Usage(format!("the arguments in {source} are not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(Error::Usage(format!(
            "the arguments in {source} must be a JSON object, like {{\"expression\": \"1+2\"}}"
        )));
    }
    Ok(value)
}

/// A pair's text: `@FILE` read from the file, `@@...` the literal text after the first `@`.
fn value_text(key: &str, text: &str) -> Result<String> {
    if let Some(literal) = text.strip_prefix("@@") {
        return Ok(format!("@{literal}"));
    }
    match text.strip_prefix('@') {
        Some("") => Err(Error::Usage(format!(
            "`{key}=@` names no file; write {key}=@FILE to read the value from a file, or \
             {key}=@@ for a literal `@`"
        ))),
        Some(path) => read_input(std::path::Path::new(path)).map_err(|e| match e {
            Error::Io { path, source } => Error::Usage(format!(
                "`{key}`: cannot read {}: {source} (a value starting with `@` names a file; \
                 write @@ for a literal `@`)",
                path.display()
            )),
            other => other,
        }),
        None => Ok(text.to_string()),
    }
}

/// The text as a value of the type `property` (the key's schema) gives.
fn typed(key: &str, text: &str, property: &Value) -> Result<Value> {
    let types: Vec<&str> = match &property["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if types.is_empty() {
        // no type to go by: JSON when it reads as JSON, the text as typed otherwise
        return Ok(serde_json::from_str(text).unwrap_or_else(|_| json!(text)));
    }
    // a string reads any text, so it is tried last: `n=5` for ["integer", "string"] is 5
    let mut order = types.clone();
    order.sort_by_key(|t| *t == "string");
    let mut why = Vec::new();
    for t in &order {
        let read = match *t {
            "null" if text.trim() == "null" => Ok(Value::Null),
            "null" => Err(format!("`{text}` is not null")),
            other => match ParamType::parse(other) {
                Some(kind) => kind.from_text(text),
                None => Err(format!("the schema's type `{other}` is not one lmcp reads")),
            },
        };
        match read {
            Ok(v) => return Ok(v),
            Err(e) => why.push(e),
        }
    }
    Err(Error::Usage(format!(
        "argument `{key}` must be {}: {}; give {key}=VALUE of that type, or the arguments as JSON",
        types.join(" or "),
        why.join("; ")
    )))
}

/// An argument shortened for a message.
fn short(arg: &str) -> String {
    if arg.chars().count() > 60 {
        format!("{}…", arg.chars().take(59).collect::<String>())
    } else {
        arg.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "s": {"type": "string"},
            "i": {"type": "integer"},
            "n": {"type": "number"},
            "b": {"type": "boolean"},
            "z": {"type": "null"},
            "a": {"type": "array"},
            "o": {"type": "object"},
            "either": {"type": ["integer", "string"]},
            "maybe": {"type": ["null", "integer"]},
            "any": {},
        }})
    }

    fn call(pairs: &[&str]) -> Result<Value> {
        let raw: Vec<String> = pairs.iter().map(|p| p.to_string()).collect();
        call_arguments(&raw, &schema())
    }

    #[test]
    fn a_string_is_the_text_as_typed() {
        assert_eq!(call(&["s=6*7"]).unwrap(), json!({"s": "6*7"}));
        assert_eq!(call(&["s=a=b"]).unwrap(), json!({"s": "a=b"}));
        assert_eq!(call(&["s="]).unwrap(), json!({"s": ""}));
        assert_eq!(call(&["s=42"]).unwrap(), json!({"s": "42"}));
    }

    #[test]
    fn an_integer_is_parsed() {
        assert_eq!(call(&["i=42"]).unwrap(), json!({"i": 42}));
        assert!(call(&["i=42"]).unwrap()["i"].is_i64());
    }

    #[test]
    fn a_number_is_parsed() {
        assert_eq!(call(&["n=2.5"]).unwrap(), json!({"n": 2.5}));
    }

    #[test]
    fn a_boolean_is_true_or_false() {
        assert_eq!(call(&["b=true"]).unwrap(), json!({"b": true}));
        assert_eq!(call(&["b=no"]).unwrap(), json!({"b": false}));
    }

    #[test]
    fn null_is_null() {
        assert_eq!(call(&["z=null"]).unwrap(), json!({"z": null}));
        assert_eq!(call(&["maybe=null"]).unwrap(), json!({"maybe": null}));
        assert_eq!(call(&["maybe=3"]).unwrap(), json!({"maybe": 3}));
    }

    #[test]
    fn arrays_and_objects_are_json() {
        assert_eq!(call(&["a=[1,\"x\"]"]).unwrap(), json!({"a": [1, "x"]}));
        assert_eq!(call(&["o={\"k\":1}"]).unwrap(), json!({"o": {"k": 1}}));
        let e = call(&["a={}"]).unwrap_err().to_string();
        assert!(e.contains("argument `a` must be array"), "{e}");
    }

    #[test]
    fn several_types_try_the_string_last_and_no_type_reads_json_or_text() {
        assert_eq!(call(&["either=5"]).unwrap(), json!({"either": 5}));
        assert_eq!(call(&["either=five"]).unwrap(), json!({"either": "five"}));
        assert_eq!(
            call(&["any=[1]", "s=x"]).unwrap(),
            json!({"any": [1], "s": "x"})
        );
        assert_eq!(call(&["any=hello"]).unwrap(), json!({"any": "hello"}));
        // a key the schema does not know is left for the gate to name
        assert_eq!(call(&["other=7"]).unwrap(), json!({"other": 7}));
    }

    #[test]
    fn a_value_that_does_not_fit_names_the_key_and_the_type() {
        let e = call(&["i=six"]).unwrap_err();
        assert!(matches!(e, Error::Usage(_)));
        let e = e.to_string();
        assert!(e.contains("argument `i` must be integer"), "{e}");
        assert!(e.contains("`six` is not an integer"), "{e}");
        let e = call(&["maybe=x"]).unwrap_err().to_string();
        assert!(
            e.contains("argument `maybe` must be null or integer"),
            "{e}"
        );
    }

    #[test]
    fn at_reads_a_file_and_at_at_is_a_literal_at() {
        let dir = tempfile::tempdir().unwrap();
        let notes = dir.path().join("notes.txt");
        std::fs::write(&notes, "line one\nline two\n").unwrap();
        let at = format!("s=@{}", notes.display());
        assert_eq!(
            call(&[at.as_str()]).unwrap(),
            json!({"s": "line one\nline two\n"})
        );
        std::fs::write(&notes, "[1, 2]").unwrap();
        let at = format!("a=@{}", notes.display());
        assert_eq!(call(&[at.as_str()]).unwrap(), json!({"a": [1, 2]}));
        assert_eq!(call(&["s=@@home"]).unwrap(), json!({"s": "@home"}));
        assert_eq!(call(&["s=@@"]).unwrap(), json!({"s": "@"}));
        let e = call(&["s=@/no/such/file"]).unwrap_err().to_string();
        assert!(e.contains("`s`: cannot read /no/such/file"), "{e}");
        assert!(e.contains("write @@ for a literal `@`"), "{e}");
        let e = call(&["s=@"]).unwrap_err().to_string();
        assert!(e.contains("s=@@"), "{e}");
    }

    #[test]
    fn the_whole_arguments_come_alone_and_pairs_are_pairs() {
        assert_eq!(call(&[]).unwrap(), json!({}));
        assert_eq!(call(&[r#"{"i": 1}"#]).unwrap(), json!({"i": 1}));
        let e = call(&["{nope"]).unwrap_err().to_string();
        assert!(e.contains("not valid JSON"), "{e}");
        let e = call(&[r#"{"i": 1}"#, "s=x"]).unwrap_err().to_string();
        assert!(e.contains("comes alone"), "{e}");
        let e = call(&["expression"]).unwrap_err().to_string();
        assert!(e.contains("`expression` is not KEY=VALUE"), "{e}");
        let e = call(&["s=1", "s=2"]).unwrap_err().to_string();
        assert!(e.contains("`s` is given twice"), "{e}");
        let e = call(&["=1"]).unwrap_err().to_string();
        assert!(e.contains("no key"), "{e}");
    }
}
