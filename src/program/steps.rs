//! The steps engine: runs a program's tool calls in order, each through the gate as a nested
//! call, and keeps a record of what each step did. Recipes and custom tools resolve their
//! arguments their own way (`${...}` and `{"$input": ...}`) and share this runner and the result
//! paths (`result.items[0].name`).

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::gate::{CallContext, CallRequest, Outcome};
use crate::host::Host;

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

/// How a step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StepStatus {
    /// It ran.
    Done,
    /// The run is a preview and the step changes state: it was not run.
    Previewed,
}

/// What one completed step did.
#[derive(Debug, Clone, Serialize)]
pub struct StepRecord {
    /// The step's id (or index, for recipes).
    pub id: String,
    /// The tool it called.
    pub tool: String,
    /// Done or previewed.
    pub status: StepStatus,
    /// The arguments it ran with, after resolution.
    pub args: Value,
    /// The tool's result (for a previewed step, the preview).
    pub result: Value,
    /// How long it took, in milliseconds.
    pub duration_ms: f64,
}

impl StepRecord {
    /// `{id, tool, status, result}` for error details and results.
    pub fn summary(&self) -> Value {
        json!({"id": self.id, "tool": self.tool, "status": self.status, "result": self.result})
    }
}

/// Runs one step through the gate as a call nested in `ctx`.
pub async fn run_step(
    host: &Arc<Host>,
    ctx: &CallContext,
    id: &str,
    tool: &str,
    args: Value,
) -> Result<StepRecord> {
    let started = Instant::now();
    let outcome = host
        .call(CallRequest::new(tool, args.clone(), ctx.child()))
        .await;
    let (status, result) = match outcome {
        Outcome::Done(v) => (StepStatus::Done, v),
        Outcome::Preview(p) => (StepStatus::Previewed, p.to_json()),
        other => return Err(other.into_result().err().unwrap_or(Error::Cancelled)),
    };
    Ok(StepRecord {
        id: id.to_string(),
        tool: tool.to_string(),
        status,
        args,
        result,
        duration_ms: started.elapsed().as_secs_f64() * 1000.0,
    })
}

/// The error for a program stopped at a failing step, with the steps completed before it.
pub fn step_failed(
    program: &str,
    step: &str,
    tool: &str,
    error: &Error,
    done: &[StepRecord],
) -> Error {
    Error::StepFailed(Box::new(crate::error::StepFailure {
        program: program.to_string(),
        step: step.to_string(),
        tool: tool.to_string(),
        class: error.class().to_string(),
        message: error.to_string(),
        completed: done.iter().map(StepRecord::summary).collect(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

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
