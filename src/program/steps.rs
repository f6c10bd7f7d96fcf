//! Step templates: what a JSON step is, and how its arguments are filled in.
//!
//! Step arguments are templates in one of two styles, `${...}` (recipes) or
//! `{"$input": ...}` (custom tools); both read earlier results through the same paths
//! (`result.items[0].name`). The runner that walks the steps is [`super::run`].

use std::time::Duration;

use serde_json::{Map, Value};

use super::interpolate::{self, RenderError, charge};
use crate::gate::{Held, JSON_VALUE_COST, json_cost};
/// A step's arguments, with references to parameters and earlier results.
#[derive(Debug, Clone, PartialEq)]
pub enum Template {
    /// `${param}` and `${steps[N].result.key}` inside strings (recipes).
    Interpolated(Value),
    /// `{"$input": "name"}` and `{"$step": "id", "path": "result.key"}` objects (custom tools);
    /// an optional input that was not given leaves its argument out.
    Placeholders(Value),
}

/// One checked step.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// A tool call.
    Call {
        /// The step's id (its index, for recipes).
        id: String,
        /// The tool it calls.
        tool: String,
        /// Its arguments.
        args: Template,
    },
    /// A pause.
    Wait(Duration),
}

/// One segment of a result path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// `.key`
    Key(String),
    /// `[i]`
    Index(usize),
}

/// Parses a path after its root, like `.items[0].name` (empty: the root itself).
pub fn parse_path(path: &str) -> std::result::Result<Vec<Segment>, String> {
    let b = path.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'.' => {
                let start = i + 1;
                let mut j = start;
                while j < b.len() && b[j] != b'.' && b[j] != b'[' {
                    j += 1;
                }
                if j == start {
                    return Err(format!("empty key at position {} of `{path}`", i + 1));
                }
                out.push(Segment::Key(path[start..j].to_string()));
                i = j;
            }
            b'[' => {
                let close = path[i..]
                    .find(']')
                    .map(|k| i + k)
                    .ok_or_else(|| format!("missing `]` in `{path}`"))?;
                let n = path[i + 1..close].trim().parse::<usize>().map_err(|_| {
                    format!(
                        "`[{}]` in `{path}` is not a list index (0, 1, ...)",
                        &path[i + 1..close]
                    )
                })?;
                out.push(Segment::Index(n));
                i = close + 1;
            }
            _ => {
                return Err(format!(
                    "expected `.key` or `[index]` at position {} of `{path}`",
                    i + 1
                ));
            }
        }
    }
    Ok(out)
}

/// Follows a path into a value; errors say where it stopped and what was there.
pub fn lookup<'a>(
    root: &'a Value,
    segments: &[Segment],
    root_name: &str,
) -> std::result::Result<&'a Value, String> {
    let mut cur = root;
    let mut at = root_name.to_string();
    for seg in segments {
        cur = match (seg, cur) {
            (Segment::Key(k), Value::Object(m)) => m.get(k).ok_or_else(|| {
                let keys: Vec<&str> = m.keys().map(String::as_str).take(10).collect();
                format!(
                    "`{at}` has no key `{k}` (it has: {})",
                    if keys.is_empty() {
                        "nothing".into()
                    } else {
                        keys.join(", ")
                    }
                )
            })?,
            (Segment::Index(n), Value::Array(a)) => a.get(*n).ok_or_else(|| {
                format!(
                    "`{at}[{n}]` is out of range: `{at}` has {} item(s)",
                    a.len()
                )
            })?,
            (Segment::Key(k), other) => {
                return Err(format!(
                    "`{at}` is {}, not an object, so it has no key `{k}`",
                    kind(other)
                ));
            }
            (Segment::Index(n), other) => {
                return Err(format!(
                    "`{at}` is {}, not a list, so it has no item [{n}]",
                    kind(other)
                ));
            }
        };
        match seg {
            Segment::Key(k) => at = format!("{at}.{k}"),
            Segment::Index(n) => at = format!("{at}[{n}]"),
        }
    }
    Ok(cur)
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The earlier steps' results, by index and by id (None for a wait or a previewed step).
#[derive(Default)]
pub(super) struct Results {
    ids: Vec<String>,
    values: Vec<Option<Value>>,
}

impl Results {
    pub(super) fn push(&mut self, id: String, value: Option<Value>) {
        self.ids.push(id);
        self.values.push(value);
    }

    /// Whether `t` reads the result of an earlier step that has none (one previewed in a
    /// plan): a plan shows such a step with its template; any other failure to fill it in
    /// stops the plan as it stops a run.
    pub(super) fn waits_on_preview(&self, t: &Template) -> bool {
        use super::compile::{ArgRef, sample_args};
        use super::interpolate::Part;
        let Ok((_, refs)) = sample_args(t, &[]) else {
            return false;
        };
        refs.iter().any(|(_, r)| match r {
            ArgRef::Text(Part::Step { index, .. }, _) => {
                matches!(self.values.get(*index), Some(None))
            }
            ArgRef::Placeholder(Placeholder::Step { id, .. }) => {
                matches!(self.by_id(id), Some(None))
            }
            _ => false,
        })
    }

    /// The result of the step with this id; `None` when no earlier step has it.
    fn by_id(&self, id: &str) -> Option<&Option<Value>> {
        self.ids
            .iter()
            .position(|i| i == id)
            .map(|k| &self.values[k])
    }
}

/// Fills in a step's arguments from the parameters and the earlier steps' results, holding what
/// it builds on `held` (the run's host memory) as it grows.
pub(super) fn resolve(
    t: &Template,
    params: &Map<String, Value>,
    results: &Results,
    held: &mut Held,
) -> std::result::Result<Value, RenderError> {
    match t {
        Template::Interpolated(v) => interpolate::render(v, params, &results.values, held),
        Template::Placeholders(v) => Ok(fill(v, params, results, held)?.unwrap_or_default()),
    }
}

/// A placeholder in custom-tool step arguments.
#[derive(Debug, Clone, PartialEq)]
pub enum Placeholder {
    /// `{"$input": "name"}`
    Input(String),
    /// `{"$step": "id", "path": "result.key"}`
    Step {
        /// The earlier step's id.
        id: String,
        /// The path below `result`.
        path: Vec<Segment>,
        /// The path as written.
        text: String,
    },
}

/// The placeholder `v` is, if it is one; a malformed one is an error.
pub fn placeholder(v: &Value) -> std::result::Result<Option<Placeholder>, String> {
    let Value::Object(m) = v else { return Ok(None) };
    if let Some(input) = m.get("$input") {
        let name = input
            .as_str()
            .ok_or("`$input` must name an input (a string)")?;
        if m.len() != 1 {
            return Err("an `$input` object holds only `$input`".into());
        }
        return Ok(Some(Placeholder::Input(name.to_string())));
    }
    if let Some(step) = m.get("$step") {
        let id = step
            .as_str()
            .ok_or("`$step` must name an earlier step (a string)")?;
        let path = match m.get("path") {
            None => "result",
            Some(Value::String(p)) => p.as_str(),
            Some(_) => return Err("`path` must be a string like \"result.items[0]\"".into()),
        };
        if m.keys().any(|k| k != "$step" && k != "path") {
            return Err("a `$step` object holds only `$step` and `path`".into());
        }
        let rest = path.strip_prefix("result").ok_or_else(|| {
            format!("`path` starts at the step's result, like \"result\" or \"result.items[0]\"; got \"{path}\"")
        })?;
        let segments = parse_path(rest)?;
        return Ok(Some(Placeholder::Step {
            id: id.to_string(),
            path: segments,
            text: path.to_string(),
        }));
    }
    Ok(None)
}

/// Resolves placeholders: inputs from the parameters, `$step` from earlier results. `None` for
/// an optional input that was not given (its argument is left out).
fn fill(
    v: &Value,
    inputs: &Map<String, Value>,
    results: &Results,
    held: &mut Held,
) -> std::result::Result<Option<Value>, RenderError> {
    match placeholder(v)? {
        Some(Placeholder::Input(name)) => {
            let value = inputs.get(&name);
            if let Some(value) = value {
                charge(held, json_cost(value))?;
            }
            Ok(value.cloned())
        }
        Some(Placeholder::Step { id, path, text }) => {
            let result = results
                .by_id(&id)
                .ok_or_else(|| format!("step `{id}` has not run"))?
                .as_ref()
                .ok_or_else(|| format!("step `{id}` has no result (it was previewed, not run)"))?;
            let found = lookup(result, &path, "result")
                .map_err(|m| format!("reading `{id}`'s {text}: {m}"))?;
            charge(held, json_cost(found))?;
            Ok(Some(found.clone()))
        }
        None => Ok(Some(match v {
            Value::Object(m) => {
                charge(held, JSON_VALUE_COST)?;
                let mut out = Map::new();
                for (k, x) in m {
                    if let Some(r) = fill(x, inputs, results, held)? {
                        charge(held, k.len())?;
                        out.insert(k.clone(), r);
                    }
                }
                Value::Object(out)
            }
            Value::Array(a) => {
                charge(held, JSON_VALUE_COST)?;
                let mut out = Vec::new();
                for x in a {
                    out.push(fill(x, inputs, results, held)?.unwrap_or(Value::Null));
                }
                Value::Array(out)
            }
            other => {
                charge(held, json_cost(other))?;
                other.clone()
            }
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_parse_and_follow() {
        let v = json!({"items": [{"name": "a"}, {"name": "b"}], "n": 1});
        let p = parse_path(".items[1].name").unwrap();
        assert_eq!(
            p,
            vec![
                Segment::Key("items".into()),
                Segment::Index(1),
                Segment::Key("name".into())
            ]
        );
        assert_eq!(lookup(&v, &p, "result").unwrap(), &json!("b"));
        assert_eq!(lookup(&v, &[], "result").unwrap(), &v);
        let e = lookup(&v, &parse_path(".items[5]").unwrap(), "result").unwrap_err();
        assert_eq!(
            e,
            "`result.items[5]` is out of range: `result.items` has 2 item(s)"
        );
        let e = lookup(&v, &parse_path(".nope").unwrap(), "result").unwrap_err();
        assert!(e.contains("has no key `nope` (it has: items, n)"), "{e}");
        let e = lookup(&v, &parse_path(".n.x").unwrap(), "result").unwrap_err();
        assert!(e.contains("is a number, not an object"), "{e}");
        assert!(
            parse_path(".a[x]")
                .unwrap_err()
                .contains("not a list index")
        );
        assert!(parse_path("..a").unwrap_err().contains("empty key"));
        assert!(parse_path(".a[1").unwrap_err().contains("missing `]`"));
        assert!(parse_path("a").unwrap_err().contains("expected `.key`"));
    }
}
