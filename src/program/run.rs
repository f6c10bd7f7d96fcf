//! The program runner: one entry for both engines, used by recipes, custom tools, skill scripts
//! and `lmcp run`.
//!
//! [`run`] runs a [`Program`]: JSON steps here, each a nested call through the gate with a
//! record of what it did, or Lua through [`run_lua`], which binds the parameters, sets the
//! timeout (the program's, else the configured one), limits the calls to the program's
//! capabilities and runs the sandbox. The runner records the run's state-changing calls into a
//! [`Plan`] (nested programs feed it too) and hashes it. A plan stops at its first failed step.
//! A confirmed run given an approved plan hash first makes the plan again, refuses to start
//! unless it still matches, and then runs with that plan as the only calls allowed, so a run can
//! never do what was not shown.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::interpolate::RenderError;
use super::steps::{Results, Step, Template, resolve};
use super::{Body, Program};
use crate::error::{Error, Result};
use crate::gate::{CallContext, CallRequest, ConfirmMode, Outcome, Plan};
use crate::gate::{Caller, HostMemory, json_cost};
use crate::script::{self, Output, Script, ScriptFailure, ScriptOutcome, VmOptions};

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
    /// The hosts the program's requests may reach (its `---@connect` lines, or its steps'
    /// literal hosts): part of what the plan hash covers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
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
    host: &Arc<dyn Caller>,
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
    host: &Arc<dyn Caller>,
    ctx: &CallContext,
    program: &Program,
    given: &Map<String, Value>,
    mode: RunMode,
) -> Result<RunReport> {
    let params = program.header().bind(given)?;
    let parent = ctx.plan().cloned();
    let ctx = &ctx
        .clone()
        .in_run(host.config().limits.script().memory)
        .restricted(
            &program.name,
            program.capabilities.clone(),
            program.connect.clone(),
        );
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
            let now = crate::gate::plan_hash_reaching(&check.entries(), &program.connect);
            if now != expected {
                return Err(Error::Refused(format!(
                    "the plan changed since it was approved (approved {}, now {}); nothing ran. \
                     Run it without {} to see the new plan",
                    short(&expected),
                    short(&now),
                    crate::text::arg_words::arg("confirm", "true")
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
    host: &Arc<dyn Caller>,
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
    host: &Arc<dyn Caller>,
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
        hosts: program.connect.clone(),
        result: Value::Null,
        output: String::new(),
        records: Vec::new(),
        previews: Vec::new(),
        run: None,
    };
    match &program.body {
        Body::Lua(_) => {
            let outcome = run_lua(host, ctx, program, params.clone(), Output::Capture).await?;
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
    report.plan_hash = crate::gate::plan_hash_reaching(&report.calls, &program.connect);
    Ok(report)
}

async fn run_steps(
    host: &Arc<dyn Caller>,
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
    // What the run keeps of each step (its arguments in the report, its result three times:
    // for later steps, the report, the records), held on the run's host memory until it ends.
    let memory = match ctx.host_memory() {
        Some(m) => Arc::clone(m),
        None => HostMemory::new(host.config().limits.script().memory),
    };
    let mut kept = memory.hold_nothing();
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
        let mut building = memory.hold_nothing();
        let resolved = match resolve(args, params, &results, &mut building) {
            Ok(a) => a,
            Err(RenderError::Memory(e)) => {
                return Err(step_failed(name, id, tool, &e, &report.records));
            }
            Err(RenderError::Unresolved(m)) if !confirmed && results.waits_on_preview(args) => {
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
            Err(RenderError::Unresolved(m)) => {
                let e = Error::tool(tool, format!("step `{id}`: {m}"));
                return Err(step_failed(name, id, tool, &e, &report.records));
            }
        };
        // one copy goes to the call, one stays in the report
        kept.absorb(building);
        if let Err(e) = kept.grow(json_cost(&resolved), "the run's step arguments") {
            return Err(step_failed(name, id, tool, &e, &report.records));
        }
        match run_step(host, ctx, id, tool, resolved.clone()).await {
            Ok(record) => {
                let cost = json_cost(&record.result).saturating_mul(3);
                if let Err(e) = kept.grow(cost, "the run's step results") {
                    return Err(step_failed(name, id, tool, &e, &report.records));
                }
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

/// Runs a Lua program with already bound parameters in `ctx`, restricted to its capabilities.
/// `output` chooses where `print` goes (captured everywhere but `lmcp run` and the REPL).
pub async fn run_lua(
    host: &Arc<dyn Caller>,
    ctx: &CallContext,
    program: &Program,
    params: Map<String, Value>,
    output: Output,
) -> std::result::Result<ScriptOutcome, ScriptFailure> {
    let Body::Lua(body) = &program.body else {
        return Err(ScriptFailure::from(Error::Script {
            message: format!("`{}` is not a Lua program", program.name),
        }));
    };
    let config = host.config();
    let timeout = program.timeout.unwrap_or(Duration::from_secs(
        config.limits.lua_timeout_secs.max(1) as u64,
    ));
    let options = VmOptions {
        limits: config.limits.script(),
        output,
        params,
        modules: body.modules.clone(),
        config: body.config.clone(),
    };
    let ctx = ctx
        .clone()
        .restricted(
            &program.name,
            program.capabilities.clone(),
            program.connect.clone(),
        )
        .with_timeout(timeout);
    let script = Script {
        source: body.source.clone(),
        name: body.chunk.clone(),
    };
    script::run(host, script, ctx, options).await
}
