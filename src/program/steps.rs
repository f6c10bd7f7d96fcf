//! The program runner: one for each engine, used by recipes, custom tools and skill scripts.
//!
//! [`run`] runs a [`Program`]: JSON steps here, each a nested call through the gate with a
//! record of what it did, or Lua through [`super::lua`]. It binds the parameters, records the
//! run's state-changing calls into a [`Plan`] (nested programs feed it too) and hashes it. A
//! plan stops at its first failed step. A confirmed run given an approved plan hash first makes
//! the plan again, refuses to start unless it still matches, and then runs with that plan as
//! the only calls allowed, so a run can never do what was not shown. Step arguments are
//! templates in one of two styles, `${...}` (recipes) or `{"$input": ...}` (custom tools);
//! both read earlier results through the same paths (`result.items[0].name`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::{Body, Program, interpolate};
use crate::error::{Error, Result};
use crate::gate::{CallContext, CallRequest, ConfirmMode, Outcome, Plan};
use crate::host::Host;
use crate::script::Output;

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

/// How a runner runs a program.
#[derive(Debug, Clone, PartialEq)]
pub enum RunMode {
    /// In the caller's confirmation mode (a custom tool or skill script called as a tool).
    AsCalled,
    /// A plan: state-changing calls preview.
    Plan,
    /// For real; with a hash, only if the plan still has that hash, and only its calls.
    Confirmed {
        /// The plan hash a person approved.
        plan_hash: Option<String>,
    },
}

/// What a run did (or, as a plan, would do).
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// The program's name.
    pub name: String,
    /// Whether state-changing calls ran (true) or were previewed (false).
    pub confirmed: bool,
    /// The hash of the state-changing calls, nested programs' included; pass it with
    /// `confirm: true` to run exactly them.
    pub plan_hash: String,
    /// For steps: each step with its resolved arguments, effect and status. For Lua: each
    /// previewed call.
    pub steps: Vec<Value>,
    /// Every state-changing call of the run, those of nested programs included, in order: what
    /// the plan hash is made of.
    pub calls: Vec<Value>,
    /// The last step's result, or the Lua program's return value.
    pub result: Value,
    /// Captured output of a Lua program.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub output: String,
    /// The completed steps, for results that list them.
    #[serde(skip)]
    pub records: Vec<StepRecord>,
    /// The previewed calls of a Lua program, as programs see them.
    #[serde(skip)]
    pub previews: Vec<Value>,
    /// The run's journal id, when it kept one (a confirmed run of a recipe).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
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
        class: error.caller_class().to_string(),
        message: error.to_string(),
        completed: done.iter().map(StepRecord::summary).collect(),
        run: None,
    }))
}

/// Runs a program with the given parameters (bound and checked against its declared ones here).
pub async fn run(
    host: &Arc<Host>,
    ctx: &CallContext,
    program: &Program,
    given: &Map<String, Value>,
    mode: RunMode,
) -> Result<RunReport> {
    let params = program.header().bind(given)?;
    let parent = ctx.plan().cloned();
    let ctx = &ctx
        .clone()
        .restricted(&program.name, program.capabilities.clone());
    match mode {
        RunMode::AsCalled => {
            let plan = Plan::new(parent);
            run_once(
                host,
                &ctx.clone().with_plan(plan.clone()),
                program,
                &params,
                &plan,
            )
            .await
        }
        RunMode::Plan => {
            let plan = Plan::new(parent);
            let ctx = ctx.lowered(ConfirmMode::Preview).with_plan(plan.clone());
            run_once(host, &ctx, program, &params, &plan).await
        }
        RunMode::Confirmed { plan_hash: None } => {
            let plan = Plan::new(parent);
            let ctx = ctx.lowered(ConfirmMode::Confirmed).with_plan(plan.clone());
            run_once(host, &ctx, program, &params, &plan).await
        }
        RunMode::Confirmed {
            plan_hash: Some(expected),
        } => {
            // The plan is made again, detached from any outer plan (it is not a run).
            let check = Plan::new(None);
            let preview = ctx.lowered(ConfirmMode::Preview).with_plan(check.clone());
            run_once(host, &preview, program, &params, &check).await?;
            let now = check.hash();
            if now != expected {
                return Err(Error::Refused(format!(
                    "the plan changed since it was approved (approved {}, now {}); nothing ran. \
                     Run it without confirm to see the new plan",
                    short(&expected),
                    short(&now)
                )));
            }
            let plan = Plan::expecting(parent, check.entries());
            let ctx = ctx.lowered(ConfirmMode::Confirmed).with_plan(plan.clone());
            run_once(host, &ctx, program, &params, &plan).await
        }
    }
}

fn short(h: &str) -> &str {
    &h[..h.len().min(12)]
}

/// Runs once; a failed plan is noted in the plan's tree, so an outer plan knows even when a
/// script caught the error.
async fn run_once(
    host: &Arc<Host>,
    ctx: &CallContext,
    program: &Program,
    params: &Map<String, Value>,
    plan: &Arc<Plan>,
) -> Result<RunReport> {
    let result = run_body(host, ctx, program, params, plan).await;
    if let Err(e) = &result
        && ctx.confirm_mode() == ConfirmMode::Preview
    {
        plan.note_failure(&e.to_string());
    }
    result
}

async fn run_body(
    host: &Arc<Host>,
    ctx: &CallContext,
    program: &Program,
    params: &Map<String, Value>,
    plan: &Arc<Plan>,
) -> Result<RunReport> {
    let confirmed = ctx.confirm_mode() != ConfirmMode::Preview;
    let mut report = RunReport {
        name: program.name.clone(),
        confirmed,
        plan_hash: String::new(),
        steps: Vec::new(),
        calls: Vec::new(),
        result: Value::Null,
        output: String::new(),
        records: Vec::new(),
        previews: Vec::new(),
        run: None,
    };
    match &program.body {
        Body::Lua(_) => {
            let outcome =
                super::lua::run_lua(host, ctx, program, params.clone(), Output::Capture).await?;
            report.steps = outcome
                .previews
                .iter()
                .enumerate()
                .map(|(i, p)| json!({"index": i, "tool": p.tool, "args": p.args, "effect": p.effect, "status": "previewed", "summary": p.summary}))
                .collect();
            report.previews = outcome.previews.iter().map(|p| p.to_json()).collect();
            report.result = outcome.value;
            report.output = outcome.output;
        }
        Body::Steps(steps) => {
            run_steps(host, ctx, program, steps, params, plan, &mut report).await?
        }
    }
    if !report.confirmed
        && let Some(why) = plan.first_failure()
    {
        return Err(Error::Refused(format!(
            "the plan of `{}` failed inside a nested program ({why}); a plan with a failure has \
             no hash",
            program.name
        )));
    }
    report.calls = plan.entries();
    report.plan_hash = crate::gate::plan_hash(&report.calls);
    Ok(report)
}

async fn run_steps(
    host: &Arc<Host>,
    ctx: &CallContext,
    program: &Program,
    steps: &[Step],
    params: &Map<String, Value>,
    plan: &Arc<Plan>,
    report: &mut RunReport,
) -> Result<()> {
    let name = &program.name;
    let total = steps.len();
    let confirmed = report.confirmed;
    // Each step's id and result (None for a wait or a previewed step).
    let mut results = Results::default();
    for (i, step) in steps.iter().enumerate() {
        ctx.progress(
            i as u64,
            Some(total as u64),
            format!("step {} of {total}", i + 1),
        );
        let (id, tool, args) = match step {
            Step::Wait(d) => {
                results.push(i.to_string(), None);
                if confirmed {
                    tokio::select! {
                        _ = tokio::time::sleep(*d) => {}
                        _ = ctx.cancel_token().cancelled() => {
                            return Err(step_failed(name, &i.to_string(), "wait", &Error::Cancelled, &report.records));
                        }
                    }
                }
                let status = if confirmed {
                    "waited"
                } else {
                    "skipped in a plan"
                };
                report
                    .steps
                    .push(json!({"index": i, "wait": d.as_secs_f64(), "status": status}));
                continue;
            }
            Step::Call { id, tool, args } => (id, tool, args),
        };
        let effect = host.registry().get(tool).map(|t| t.spec().effect);
        let changes = effect.is_some_and(|e| e.changes_state());
        let resolved = match resolve(args, params, &results) {
            Ok(a) => a,
            Err(m) if !confirmed => {
                // A plan cannot know arguments that need a previewed step's result: the step is
                // shown with its template, and the plan records it as such.
                let template = template_value(args);
                if changes && let Err(why) = plan.record(tool, &template, true, true) {
                    return Err(Error::Refused(why));
                }
                results.push(id.clone(), None);
                report.steps.push(json!({"index": i, "id": id, "tool": tool, "args": template, "effect": effect, "status": "unresolved", "reason": m}));
                continue;
            }
            Err(m) => {
                let e = Error::tool(tool, format!("step `{id}`: {m}"));
                return Err(step_failed(name, id, tool, &e, &report.records));
            }
        };
        match run_step(host, ctx, id, tool, resolved.clone()).await {
            Ok(record) => {
                let status = match record.status {
                    StepStatus::Done => "done",
                    StepStatus::Previewed => "previewed",
                };
                results.push(
                    id.clone(),
                    (record.status == StepStatus::Done).then(|| record.result.clone()),
                );
                report.steps.push(json!({"index": i, "id": id, "tool": tool, "args": resolved, "effect": effect, "status": status, "result": record.result}));
                report.records.push(record);
            }
            Err(e) => {
                // A plan stops at its first failed step too: it reports it and has no hash.
                return Err(step_failed(name, id, tool, &e, &report.records));
            }
        }
    }
    ctx.progress(total as u64, Some(total as u64), "done");
    report.result = report
        .records
        .last()
        .filter(|r| r.status == StepStatus::Done)
        .map(|r| r.result.clone())
        .unwrap_or(Value::Null);
    Ok(())
}

/// The arguments as written, for plans that cannot resolve them.
fn template_value(t: &Template) -> Value {
    match t {
        Template::Interpolated(v) | Template::Placeholders(v) => v.clone(),
    }
}

/// The earlier steps' results, by index and by id (None for a wait or a previewed step).
#[derive(Default)]
struct Results {
    ids: Vec<String>,
    values: Vec<Option<Value>>,
}

impl Results {
    fn push(&mut self, id: String, value: Option<Value>) {
        self.ids.push(id);
        self.values.push(value);
    }

    /// The result of the step with this id; `None` when no earlier step has it.
    fn by_id(&self, id: &str) -> Option<&Option<Value>> {
        self.ids
            .iter()
            .position(|i| i == id)
            .map(|k| &self.values[k])
    }
}

/// Fills in a step's arguments from the parameters and the earlier steps' results.
fn resolve(
    t: &Template,
    params: &Map<String, Value>,
    results: &Results,
) -> std::result::Result<Value, String> {
    match t {
        Template::Interpolated(v) => interpolate::render(v, params, &results.values),
        Template::Placeholders(v) => Ok(fill(v, params, results)?.unwrap_or_default()),
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
) -> std::result::Result<Option<Value>, String> {
    match placeholder(v)? {
        Some(Placeholder::Input(name)) => Ok(inputs.get(&name).cloned()),
        Some(Placeholder::Step { id, path, text }) => {
            let result = results
                .by_id(&id)
                .ok_or_else(|| format!("step `{id}` has not run"))?
                .as_ref()
                .ok_or_else(|| format!("step `{id}` has no result (it was previewed, not run)"))?;
            let found = lookup(result, &path, "result")
                .map_err(|m| format!("reading `{id}`'s {text}: {m}"))?;
            Ok(Some(found.clone()))
        }
        None => Ok(Some(match v {
            Value::Object(m) => {
                let mut out = Map::new();
                for (k, x) in m {
                    if let Some(r) = fill(x, inputs, results)? {
                        out.insert(k.clone(), r);
                    }
                }
                Value::Object(out)
            }
            Value::Array(a) => {
                let mut out = Vec::new();
                for x in a {
                    out.push(fill(x, inputs, results)?.unwrap_or(Value::Null));
                }
                Value::Array(out)
            }
            other => other.clone(),
        })),
    }
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
