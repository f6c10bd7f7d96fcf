//! `lua_run`: an agent hands lmcp one Lua chunk instead of twenty tool calls (issue #37, "code
//! mode").
//!
//! The chunk is a program like any other: it is compiled through the one compile path
//! ([`program::compile`]) with the policy of a saved program ([`POLICY`]), so without `---@uses`
//! it may call read tools only and the refusal says which line to write. Like `recipe_run`, the
//! tool is a gateway: its resolver compiles the chunk before the gate asks, so the one question
//! shows the state-changing tools its `---@uses` lists, and a yes covers exactly those. Without
//! `confirm: true` it runs as a plan: its state-changing calls preview. It runs once, through
//! [`program::run`], with the sandbox, limits and timeout of any Lua program.
//!
//! A chunk that fails is reported as a failed recipe is ([`Error::StepFailed`]): the error with
//! its line, the calls that completed (from the run's journal, when a confirmed run kept one)
//! and the run id.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::error::{Error, Result, StepFailure};
use crate::gate::journal::{Journal, RunLog};
use crate::gate::{CallContext, Caller};
use crate::host::Host;
use crate::program::compile::{Location, check_timeout};
use crate::program::header::MAX_TIMEOUT_SECS;
use crate::program::run::RunMode;
use crate::program::{self, Intent, Policy, Program, Source, compile};
use crate::registry::{Annotations, Effect, Kind, Registry, Resolved, ToolSpec, handler};

/// The tool's name, and the program name its runs and errors carry.
pub const NAME: &str = "lua_run";

/// The chunk name in Lua's messages (`chunk.lua:3: ...`).
pub const CHUNK: &str = "chunk.lua";

/// How a chunk is compiled: as a saved program is (others may have written it: an agent did),
/// so a missing `---@uses` means read tools only; it may call leaf, workflow and gateway tools
/// (a nested `recipe_run` or `lua_run` joins its plan), not the authoring tools.
pub const POLICY: Policy = Policy {
    what: "Lua chunk",
    intent: Intent::Save,
    header_name: false,
    callable: &[Kind::Leaf, Kind::Workflow, Kind::Gateway],
    not_steps: &[],
    max_steps: 0,
    unmarked_required: false,
    default_timeout: None,
    check_literal_calls: true,
};

/// Compiles a `lua_run` call's chunk, with its `timeout_secs` over the header's `---@timeout`.
fn compiled(registry: &Registry, args: &Value) -> Result<Program> {
    let code = args["code"].as_str().unwrap_or_default().to_string();
    let timeout = match args["timeout_secs"].as_f64() {
        Some(secs) => Some(
            check_timeout(secs, MAX_TIMEOUT_SECS)
                .map_err(|m| Error::Usage(format!("timeout_secs: {m}")))?,
        ),
        None => None,
    };
    compile(
        Source {
            timeout,
            ..Source::lua_file(NAME, CHUNK, code, POLICY)
        },
        registry,
    )
    .map_err(|p| match p.at {
        // the chunk's own line, as Lua says it: `chunk.lua:3: ...`
        Location::Line { .. } => Error::Script {
            message: p.to_string(),
        },
        Location::Pointer(_) => Error::Usage(p.to_string()),
    })
}

/// The gate's view of a `lua_run` call: the compiled chunk, and whether it runs for real.
fn resolve(caller: &dyn Caller, args: &Value) -> Result<Resolved> {
    let program = compiled(caller.registry(), args)?;
    Ok(program.resolved(args["confirm"] == json!(true)))
}

/// The journal a confirmed run keeps (none in a plan, in private mode, or inside a journaled
/// run, whose journal its calls go to): new, or the one `resume` names, which only the same
/// chunk may go on with (the journal checks its fingerprint).
fn journal(
    host: &Host,
    ctx: &CallContext,
    program: &Program,
    args: &Value,
) -> Result<Option<Arc<Journal>>> {
    let confirm = args["confirm"] == json!(true);
    let private = host.config().modes.private;
    let fingerprint = program.fingerprint();
    match args["resume"].as_str() {
        Some(_) if private => Err(Error::Usage(
            "private mode keeps no run journals, so there is no run to resume".into(),
        )),
        Some(_) if !confirm => Err(Error::Usage(format!(
            "a resumed run goes on for real: pass {}",
            crate::text::arg_words::arg("confirm", "true")
        ))),
        Some(id) => Ok(Some(Arc::new(Journal::resume(
            host,
            id,
            NAME,
            &fingerprint,
            args["retry_unknown"] == json!(true),
        )?))),
        None if !confirm || private || ctx.journal().is_some() => Ok(None),
        None => Ok(Some(Arc::new(Journal::start(host, NAME, &fingerprint)?))),
    }
}

/// The line of the chunk an error message names (`chunk.lua:3:`), if it names one.
fn line_of(message: &str) -> Option<usize> {
    let at = message.find(&format!("{CHUNK}:"))? + CHUNK.len() + 1;
    let digits: String = message[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// A failed chunk in the shape of a failed recipe: where it stopped (its line), the error, the
/// calls that completed (the journal's, of a confirmed run) and the run id.
fn failed(host: &Host, error: Error, run: Option<&str>) -> Error {
    let error = match error {
        // a nested program's failure keeps its own words, under this run
        Error::StepFailed(mut f) => {
            if f.run.is_none() {
                f.run = run.map(str::to_string);
            }
            return Error::StepFailed(f);
        }
        e => e,
    };
    let message = error.to_string();
    let completed = run
        .and_then(|id| RunLog::read(host, id).ok())
        .map(|log| {
            log.to_json(true)["step_list"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter(|s| s["outcome"] == "done")
                .map(|s| json!({"id": s["step"].to_string(), "tool": s["tool"], "status": "done", "result": null}))
                .collect()
        })
        .unwrap_or_default();
    Error::StepFailed(Box::new(StepFailure {
        program: NAME.to_string(),
        step: line_of(&message).map_or_else(|| "the chunk".to_string(), |l| format!("line {l}")),
        tool: "lua".to_string(),
        class: error.caller_class().to_string(),
        message,
        completed,
        run: run.map(str::to_string),
    }))
}

/// Runs a resolved chunk once with its params: `{result, output, previews, run?}`.
async fn run(inv: &crate::registry::Invocation, program: &Program) -> Result<Value> {
    let host = inv.host();
    let params: Map<String, Value> = inv.args["params"].as_object().cloned().unwrap_or_default();
    let confirm = inv.args["confirm"] == json!(true);
    let mode = if confirm {
        RunMode::Confirmed { plan_hash: None }
    } else {
        RunMode::Plan
    };
    if inv.args["retry_unknown"] == json!(true) && inv.args.get("resume").is_none() {
        return Err(Error::Usage(format!(
            "{} applies to a resumed run: give {} too",
            crate::text::arg_words::arg("retry_unknown", "true"),
            crate::text::arg_words::arg("resume", "\"ID\"")
        )));
    }
    // wrong params are the caller's mistake, told before any run (or journal) begins
    program.header().bind(&params)?;
    let journal = journal(&host, &inv.ctx, program, &inv.args)?;
    let ctx = match &journal {
        Some(j) => inv.ctx.clone().with_journal(Arc::clone(j)),
        None => inv.ctx.clone(),
    };
    let ran = program::run(&inv.caller, &ctx, program, &params, mode).await;
    let run_id = journal.as_ref().map(|j| {
        j.end(if ran.is_ok() { "done" } else { "failed" });
        j.id().to_string()
    });
    let refused = journal.as_ref().is_some_and(|j| j.refused());
    let run_id = run_id.filter(|_| !refused);
    let report = ran.map_err(|e| failed(&host, e, run_id.as_deref()))?;
    let mut out =
        json!({"result": report.result, "output": report.output, "previews": report.previews});
    if let Some(id) = run_id {
        out["run"] = json!(id);
    }
    Ok(out)
}

/// Registers `lua_run`.
pub fn register_tools(registry: &Registry) -> Result<()> {
    let spec = ToolSpec::new(
        NAME,
        "Run a Lua chunk",
        "Run a Lua program once, in lmcp's sandbox: one call instead of many. Read the resource \
         lmcp://types/lmcp.lua first: every tool as a typed function, its arguments and result \
         fields (or lmcp://types/tools/NAME.lua for just the tools you call; tool_search finds \
         tools by words). The chunk calls tools as \
         `tools.NAME{...}` (results come back as tables, not through you), reads `params`, may \
         `print`, and what it returns is `result`. It declares the tools it may \
         call on a header line `---@uses tool_a, tool_b`; without one it may call read tools \
         only. Without confirm: true its state-changing calls are previewed, not run (listed \
         in `previews`); with confirm: true it runs for real after one question listing the \
         state-changing tools `---@uses` names, and a yes covers exactly those. A failure \
         returns the error with its line, the calls that completed and the run id; give the \
         same code with that id as `resume` to go on: done calls hand back their results \
         without running. Returns {result, output, previews, run?}.",
        json!({
            "type": "object",
            "properties": {
                "code": {"type": "string", "minLength": 1, "description": "The Lua chunk, with its header (---@uses, ---@param, ---@timeout) first"},
                "params": {"type": "object", "description": "The chunk's params (as its ---@param lines declare them)"},
                "timeout_secs": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_TIMEOUT_SECS, "description": "How long it may run, over its ---@timeout (else the configured Lua timeout)"},
                "confirm": {"type": "boolean", "default": false, "description": "Run state-changing calls for real (else they preview)"},
                "resume": {"type": "string", "pattern": "^[0-9A-Za-z-]{1,64}$", "description": "The id of a confirmed run of the same chunk that failed or was cut short: its done calls hand back their results without running"},
                "retry_unknown": {"type": "boolean", "default": false, "description": "With resume: run again a call the run died in (it may have happened once already)"}
            },
            "required": ["code"],
            "additionalProperties": false
        }),
    )
    .effect(Effect::Write, Annotations::changing(false, false, true))
    .kind(Kind::Gateway)
    .without_preview()
    .resolves(resolve)
    .profile(crate::registry::Profile::Code)
    .output(program::output::lua_run(None))
    .summary(|a| {
        let lines = a["code"].as_str().map_or(0, |c| c.lines().count());
        format!(
            "run a Lua chunk of {lines} line(s){}",
            if a["confirm"] == json!(true) { " for real" } else { " as a plan" }
        )
    });
    registry.register_builtin(
        spec,
        handler(|inv| async move {
            let program = match inv.program::<Program>() {
                Some(p) => p,
                None => Arc::new(compiled(inv.caller.registry(), &inv.args)?),
            };
            run(&inv, &program).await
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_is_read_from_lua_messages() {
        assert_eq!(line_of("chunk.lua:3: attempt to call a nil value"), Some(3));
        assert_eq!(line_of("[string \"x\"]: oops"), None);
        assert_eq!(line_of("lua_run: chunk.lua:12:"), Some(12));
    }
}
