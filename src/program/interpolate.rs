//! Recipe interpolation: `${name}` for a declared parameter and `${steps[N].result...}` for an
//! earlier step's output, inside any string of a step's arguments.
//!
//! Rules:
//! - a string that is exactly one `${...}` keeps the value's JSON type (`"limit": "${count}"`
//!   gives the integer);
//! - inside a longer string the value is written as text (strings as they are, other values as
//!   compact JSON);
//! - `${steps[N].result}` reads step N's result (0-based, earlier steps only), with `.key` and
//!   `[i]` chains after it: `${steps[0].result.accounts[0].name}`;
//! - `$${` writes a literal `${` (so `"$${HOME}"` is the text `${HOME}`).

use serde_json::{Map, Value};

use super::steps::{Segment, lookup, parse_path};
use crate::error::Error;
use crate::gate::{Held, JSON_VALUE_COST, json_cost};

/// One piece of a template string.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    /// Text written as it is.
    Text(String),
    /// `${name}`.
    Param(String),
    /// `${steps[N].result...}`.
    Step {
        /// The step's 0-based index.
        index: usize,
        /// The path after `.result`.
        path: Vec<Segment>,
        /// The expression as written, for messages.
        text: String,
    },
}

/// Splits a string into text and references. Errors name the position.
pub fn parse(s: &str) -> Result<Vec<Part>, String> {
    let mut parts = Vec::new();
    let mut text = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        text.push_str(&rest[..i]);
        let after = &rest[i..];
        if let Some(escaped) = after.strip_prefix("$${") {
            text.push_str("${");
            rest = escaped;
        } else if let Some(inner_start) = after.strip_prefix("${") {
            let end = inner_start.find('}').ok_or_else(|| {
                format!(
                    "`${{` at position {} has no closing `}}` (write `$${{` for a literal `${{`)",
                    s.len() - after.len() + 1
                )
            })?;
            let expr = inner_start[..end].trim();
            if !text.is_empty() {
                parts.push(Part::Text(std::mem::take(&mut text)));
            }
            parts.push(reference(expr)?);
            rest = &inner_start[end + 1..];
        } else {
            text.push('$');
            rest = &after[1..];
        }
    }
    text.push_str(rest);
    if !text.is_empty() || parts.is_empty() {
        parts.push(Part::Text(text));
    }
    Ok(parts)
}

fn reference(expr: &str) -> Result<Part, String> {
    if let Some(after) = expr.strip_prefix("steps[") {
        let close = after
            .find(']')
            .ok_or_else(|| format!("`${{{expr}}}` is missing `]`"))?;
        let index: usize = after[..close].trim().parse().map_err(|_| {
            format!(
                "`${{{expr}}}`: `{}` is not a step number (0, 1, ...)",
                &after[..close]
            )
        })?;
        let tail = &after[close + 1..];
        let path = tail.strip_prefix(".result").ok_or_else(|| {
            format!("`${{{expr}}}` must read the step's result: `${{steps[{index}].result...}}`")
        })?;
        let path = parse_path(path).map_err(|m| format!("`${{{expr}}}`: {m}"))?;
        return Ok(Part::Step {
            index,
            path,
            text: expr.to_string(),
        });
    }
    let ok = expr.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && expr.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ok {
        return Err(format!(
            "`${{{expr}}}` is neither a parameter name nor `steps[N].result...`"
        ));
    }
    Ok(Part::Param(expr.to_string()))
}

/// Every reference in a JSON value, with the JSON pointer of the string holding it and whether
/// it is the whole string.
pub fn references(
    value: &Value,
    pointer: &str,
    out: &mut Vec<(String, Part, bool)>,
) -> Result<(), String> {
    match value {
        Value::String(s) => {
            let parts = parse(s).map_err(|m| format!("at {}: {m}", display(pointer)))?;
            let exact = parts.len() == 1 && !matches!(parts[0], Part::Text(_));
            for p in parts {
                if !matches!(p, Part::Text(_)) {
                    out.push((pointer.to_string(), p, exact));
                }
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                references(v, &format!("{pointer}/{i}"), out)?;
            }
        }
        Value::Object(m) => {
            for (k, v) in m {
                references(
                    v,
                    &format!("{pointer}/{}", k.replace('~', "~0").replace('/', "~1")),
                    out,
                )?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// A JSON pointer for messages: `(root)` for the empty one.
pub fn display(pointer: &str) -> &str {
    if pointer.is_empty() {
        "(root)"
    } else {
        pointer
    }
}

/// Why a value could not be filled in.
#[derive(Debug)]
pub enum RenderError {
    /// A reference has no value (yet): a plan shows the step with its template.
    Unresolved(String),
    /// Building it would pass the run's host memory.
    Memory(Error),
}

impl From<String> for RenderError {
    fn from(m: String) -> Self {
        RenderError::Unresolved(m)
    }
}

impl std::fmt::Display for RenderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RenderError::Unresolved(m) => f.write_str(m),
            RenderError::Memory(e) => e.fmt(f),
        }
    }
}

/// What the arguments being built are called in a memory error.
const BUILDING: &str = "a step's arguments";

/// Holds `bytes` more of the value being built on the run's host memory.
pub(super) fn charge(held: &mut Held, bytes: usize) -> Result<(), RenderError> {
    held.grow(bytes, BUILDING).map_err(RenderError::Memory)
}

/// Fills in a JSON value: parameters from `params`, step results from `results` (`None` for a
/// step with no result yet, like a previewed one). What it builds is held on `held` as it grows,
/// so a parameter interpolated many times fails at the run's host memory, not at the machine's.
pub fn render(
    value: &Value,
    params: &Map<String, Value>,
    results: &[Option<Value>],
    held: &mut Held,
) -> Result<Value, RenderError> {
    Ok(match value {
        Value::String(s) => {
            let parts = parse(s)?;
            if parts.len() == 1 && !matches!(parts[0], Part::Text(_)) {
                let v = resolve(&parts[0], params, results)?;
                charge(held, json_cost(&v))?;
                v
            } else {
                charge(held, JSON_VALUE_COST)?;
                let mut out = String::new();
                for p in &parts {
                    match p {
                        Part::Text(t) => {
                            charge(held, t.len())?;
                            out.push_str(t)
                        }
                        other => match resolve(other, params, results)? {
                            Value::String(v) => {
                                charge(held, v.len())?;
                                out.push_str(&v)
                            }
                            v => {
                                let text = v.to_string();
                                charge(held, text.len())?;
                                out.push_str(&text)
                            }
                        },
                    }
                }
                Value::String(out)
            }
        }
        Value::Array(a) => {
            charge(held, JSON_VALUE_COST)?;
            let mut out = Vec::with_capacity(a.len());
            for v in a {
                out.push(match unset(v, params) {
                    true => Value::Null,
                    false => render(v, params, results, held)?,
                });
            }
            Value::Array(out)
        }
        Value::Object(m) => {
            charge(held, JSON_VALUE_COST)?;
            let mut out = Map::new();
            for (k, v) in m {
                if !unset(v, params) {
                    charge(held, k.len())?;
                    out.insert(k.clone(), render(v, params, results, held)?);
                }
            }
            Value::Object(out)
        }
        other => {
            charge(held, JSON_VALUE_COST)?;
            other.clone()
        }
    })
}

/// Whether `v` is exactly `${name}` for a parameter without a value (an optional one not
/// given): its argument is left out (null in a list), as a custom tool's `$input` is. The
/// compile refuses such a parameter inside longer text, where nothing could be left out.
fn unset(v: &Value, params: &Map<String, Value>) -> bool {
    let Value::String(s) = v else { return false };
    matches!(parse(s).as_deref(), Ok([Part::Param(p)]) if !params.contains_key(p))
}

fn resolve(
    part: &Part,
    params: &Map<String, Value>,
    results: &[Option<Value>],
) -> Result<Value, String> {
    match part {
        Part::Text(t) => Ok(Value::String(t.clone())),
        Part::Param(name) => params
            .get(name)
            .cloned()
            .ok_or_else(|| format!("parameter `{name}` has no value")),
        Part::Step { index, path, text } => {
            let result = results
                .get(*index)
                .ok_or_else(|| format!("`${{{text}}}` reads step {index}, which has not run"))?
                .as_ref()
                .ok_or_else(|| format!("`${{{text}}}` reads step {index}, which has no result (it was previewed, not run)"))?;
            lookup(result, path, &format!("steps[{index}].result")).cloned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`render`] on a budget no test reaches, its error as text.
    fn render3(
        value: &Value,
        params: &Map<String, Value>,
        results: &[Option<Value>],
    ) -> Result<Value, String> {
        let mut held = crate::gate::HostMemory::new(1 << 30).hold_nothing();
        render(value, params, results, &mut held).map_err(|e| e.to_string())
    }
    use serde_json::json;

    fn params() -> Map<String, Value> {
        json!({"count": 3, "who": "ana", "on": true})
            .as_object()
            .unwrap()
            .clone()
    }

    #[test]
    fn exact_references_keep_their_type() {
        let r = render3(
            &json!({"limit": "${count}", "flag": "${on}", "name": "${ who }"}),
            &params(),
            &[],
        )
        .unwrap();
        assert_eq!(r, json!({"limit": 3, "flag": true, "name": "ana"}));
    }

    #[test]
    fn embedded_references_become_text() {
        let r = render3(&json!("top ${count} for ${who}: ${on}"), &params(), &[]).unwrap();
        assert_eq!(r, json!("top 3 for ana: true"));
        let results = vec![Some(json!({"list": [1, 2]}))];
        assert_eq!(
            render3(&json!("got ${steps[0].result.list}"), &params(), &results).unwrap(),
            json!("got [1,2]")
        );
    }

    #[test]
    fn step_paths_follow_keys_and_indexes() {
        let results = vec![Some(
            json!({"accounts": [{"name": "main"}, {"name": "side"}]}),
        )];
        let v = render3(
            &json!({"a": "${steps[0].result.accounts[1].name}", "all": "${steps[0].result}"}),
            &params(),
            &results,
        )
        .unwrap();
        assert_eq!(v["a"], json!("side"));
        assert_eq!(v["all"], results[0].clone().unwrap());
        let e = render3(
            &json!("${steps[0].result.accounts[5].name}"),
            &params(),
            &results,
        )
        .unwrap_err();
        assert!(e.contains("out of range"), "{e}");
        let e = render3(&json!("${steps[0].result.nope}"), &params(), &results).unwrap_err();
        assert!(e.contains("has no key `nope`"), "{e}");
        let e = render3(&json!("${steps[1].result}"), &params(), &results).unwrap_err();
        assert!(e.contains("has not run"), "{e}");
        let e = render3(&json!("${steps[0].result}"), &params(), &[None]).unwrap_err();
        assert!(e.contains("previewed"), "{e}");
    }

    /// A parameter embedded many times in one string fails at the run's host memory, having
    /// held no more than the budget.
    #[test]
    fn a_parameter_repeated_many_times_stops_at_the_budget() {
        let memory = crate::gate::HostMemory::new(1 << 20);
        let mut held = memory.hold_nothing();
        let big = json!({"p": "x".repeat(64 << 10)});
        let template = json!({"a": "${p}".repeat(1000)});
        let e = render(&template, big.as_object().unwrap(), &[], &mut held).unwrap_err();
        assert!(matches!(e, RenderError::Memory(_)), "{e}");
        assert!(e.to_string().contains("host memory"), "{e}");
        assert!(held.bytes() <= 1 << 20);
        drop(held);
        assert_eq!(memory.used(), 0);
    }

    #[test]
    fn escapes_and_errors() {
        assert_eq!(
            render3(&json!("$${HOME} costs $5"), &params(), &[]).unwrap(),
            json!("${HOME} costs $5")
        );
        assert!(parse("${count").unwrap_err().contains("no closing"));
        assert!(parse("${a-b}").unwrap_err().contains("neither a parameter"));
        assert!(
            parse("${steps[x].result}")
                .unwrap_err()
                .contains("not a step number")
        );
        assert!(
            parse("${steps[0].value}")
                .unwrap_err()
                .contains("must read the step's result")
        );
        assert!(
            render3(&json!("a ${missing}"), &params(), &[])
                .unwrap_err()
                .contains("`missing` has no value")
        );
        // a whole argument that is an unset parameter is left out (null in a list)
        assert_eq!(
            render3(
                &json!({"a": "${missing}", "b": ["${missing}", 1], "c": "${count}"}),
                &params(),
                &[]
            )
            .unwrap(),
            json!({"b": [null, 1], "c": 3})
        );
    }

    #[test]
    fn references_are_listed_with_pointers() {
        let mut out = Vec::new();
        references(
            &json!({"a": ["x ${who}"], "b": "${steps[2].result.k}"}),
            "",
            &mut out,
        )
        .unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].0, "/a/0");
        assert!(!out[0].2);
        assert_eq!(out[1].0, "/b");
        assert!(out[1].2);
    }
}
