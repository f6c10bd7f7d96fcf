//! `lmcp run FILE.lua` (or `-` for stdin, or `-e CHUNK`): runs a script with its declared
//! parameters, after one question on a terminal (`run_question`), prints its result, and lists
//! the state-changing calls it previewed when the run was a dry run.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};

use super::cli::{RunArgs, RunsCommand};
use super::door::{cancel_on_ctrl_c, emit, run_person, timeout_arg};
use super::run_question::decide;
use crate::error::{Error, Result};
use crate::gate::journal::{Journal, RunLog};
use crate::gate::{CallContext, Origin, Preview};
use crate::host::Host;
use crate::program::compile::Location;
use crate::program::{Intent, Policy, Program, Source, compile, run_lua};
use crate::registry::Kind;
use crate::script::Output;
use crate::text::escape_controls;

/// How the person's own script is compiled for `lmcp run`: with `---@uses` it may call only
/// those tools; without, any tool (the one question before the run says so). It is compiled
/// before anything of its run begins; its tools are looked up as it calls them.
pub const SCRIPT_POLICY: Policy = Policy {
    what: "script",
    intent: Intent::RunNow,
    header_name: false,
    callable: &[Kind::Leaf, Kind::Workflow, Kind::Gateway, Kind::Authoring],
    not_steps: &[],
    max_steps: 0,
    unmarked_required: false,
    default_timeout: None,
    check_literal_calls: true,
};

/// The script of a run: its source, its chunk name (for messages, never a host path) and the
/// words that run it again (for the resume hint).
struct Script {
    source: String,
    chunk: String,
    again: String,
}

/// Reads the script: `-e CHUNK`, `-` (stdin) or a `.lua` file.
fn script(args: &RunArgs) -> Result<Script> {
    if let Some(chunk) = &args.eval {
        return Ok(Script {
            source: chunk.clone(),
            chunk: "(command line)".into(),
            again: format!("-e {}", super::recipe::shell_quote(chunk)),
        });
    }
    let Some(path) = &args.file else {
        return Err(Error::Usage(
            "give a script: FILE.lua, `-` for stdin, or -e CHUNK".into(),
        ));
    };
    if path.as_os_str() == "-" {
        return Ok(Script {
            source: super::door::read_stdin("the script on stdin")?,
            chunk: "stdin".into(),
            again: "- (the same script on stdin)".into(),
        });
    }
    let source = super::door::read_input(path)?;
    if path.extension().and_then(|e| e.to_str()) != Some("lua") {
        return Err(Error::Usage(format!(
            "{} is not a .lua script",
            path.display()
        )));
    }
    Ok(Script {
        source,
        chunk: chunk_name(path),
        again: super::recipe::shell_quote(&path.display().to_string()),
    })
}

/// Runs a script file, stdin or a chunk; the exit code.
pub async fn run_file(host: &Arc<Host>, args: RunArgs, json: bool) -> Result<u8> {
    if args.plan_hash.is_some() {
        return Err(Error::Usage("--plan-hash applies to recipe manifests (.json); a Lua script previews with its own run".into()));
    }
    let script = script(&args)?;
    let chunk = &script.chunk;
    let program = compile(
        Source {
            timeout: timeout_arg(args.timeout)?,
            ..Source::lua_file(chunk, chunk, script.source.clone(), SCRIPT_POLICY)
        },
        host.registry(),
    )
    .map_err(|p| match p.at {
        Location::Line { chunk, line } => Error::Header {
            chunk,
            line,
            message: p.message,
        },
        Location::Pointer(_) => Error::Usage(p.to_string()),
    })?;
    let header = program.header();
    let given = header.params_from_cli(&args.params)?;
    let params = header.bind(&given)?;
    let on_stdin = args.file.as_deref().is_some_and(|f| f.as_os_str() == "-");
    // one question, before anything runs
    let decided = decide(host, &program, run_person(args.yes, on_stdin)).await?;
    let mode = decided.mode;
    let mut ctx = CallContext::root(Origin::Cli, mode).with_confirmer(decided.confirmer);
    ctx.approve(&decided.approved);
    ctx.approve_hosts(&decided.hosts);
    let journal = journal_for(host, &args, mode, &program)?;
    if let Some(j) = &journal {
        ctx = ctx.with_journal(Arc::clone(j));
    }
    cancel_on_ctrl_c(&ctx);
    let output = if json {
        Output::Capture
    } else {
        Output::Terminal
    };
    let run_id = journal.as_ref().map(|j| j.id().to_string());
    let ran = run_lua(&host.caller(), &ctx, &program, params, output).await;
    if let Some(j) = &journal {
        j.end(if ran.is_ok() { "done" } else { "failed" });
    }
    let refused = journal.as_ref().is_some_and(|j| j.refused());
    let outcome = match ran {
        Ok(o) => o,
        Err(failure) if json => {
            let e = &failure.error;
            let value = json!({
                "outcome": "failed",
                "error": e.to_json(),
                "previews": failure.previews,
                "output": failure.output,
                "run": run_id,
            });
            emit(true, &value, String::new);
            return Ok(e.exit_code());
        }
        Err(failure) => {
            if !failure.previews.is_empty() {
                // previews first, then the error (printed by main, escaped)
                errw!("{}", render(&Value::Null, &failure.previews));
            }
            if let Some(id) = run_id.as_ref().filter(|_| !refused) {
                errln!(
                    "run {id} failed; once its cause is fixed (outside the script: a changed script \
                     is not resumed), go on from where it stopped with \
                     `lmcp run {} --yes --resume {id}`",
                    script.again
                );
            }
            return Err(failure.error);
        }
    };
    let value = json!({
        "outcome": "done",
        "result": outcome.value,
        "previews": outcome.previews,
        "output": outcome.output,
        "run": run_id,
    });
    emit(json, &value, || render(&outcome.value, &outcome.previews));
    Ok(0)
}

/// The journal a confirmed run keeps (none in preview or private mode), new or resumed.
fn journal_for(
    host: &Host,
    args: &RunArgs,
    mode: crate::gate::ConfirmMode,
    program: &Program,
) -> Result<Option<Arc<Journal>>> {
    let private = host.config().modes.private;
    let fingerprint = program.fingerprint();
    match &args.resume {
        Some(_) if private => Err(Error::Usage(
            "private mode keeps no run journals, so there is no run to resume; turn it off \
             with `lmcp mode private off` for the runs to come"
                .into(),
        )),
        Some(_) if mode == crate::gate::ConfirmMode::Preview => Err(Error::Usage(
            "a resumed run goes on for real: add --yes (or run it on a terminal to be asked)"
                .into(),
        )),
        Some(id) => Ok(Some(Arc::new(Journal::resume(
            host,
            id,
            &program.name,
            &fingerprint,
            args.retry_unknown,
        )?))),
        None if private || mode == crate::gate::ConfirmMode::Preview => Ok(None),
        None => Ok(Some(Arc::new(Journal::start(
            host,
            &program.name,
            &fingerprint,
        )?))),
    }
}

/// `lmcp runs` and `lmcp runs show ID`.
pub fn runs(host: &Arc<Host>, action: RunsCommand, json: bool) -> Result<u8> {
    match action {
        RunsCommand::List => {
            let runs = RunLog::all(host.as_ref());
            let value = Value::Array(runs.iter().map(|r| r.to_json(false)).collect());
            emit(json, &value, || {
                if runs.is_empty() {
                    return "no runs kept yet: confirmed scripts (`lmcp run`), recipe runs and calls of \
                            state-changing custom tools keep a journal\n"
                        .to_string();
                }
                let rows: Vec<Vec<String>> = runs
                    .iter()
                    .map(|r| {
                        let v = r.to_json(false);
                        let last = v["last_step"].as_object().map_or(String::new(), |s| {
                            format!(
                                "{} {} ({})",
                                s["step"],
                                s["tool"].as_str().unwrap_or(""),
                                s["outcome"].as_str().unwrap_or("")
                            )
                        });
                        vec![
                            r.id.clone(),
                            escape_controls(&r.program).into_owned(),
                            r.started.clone(),
                            r.state.clone(),
                            last,
                        ]
                    })
                    .collect();
                super::door::table(&["RUN", "PROGRAM", "STARTED", "STATE", "LAST STEP"], &rows)
            });
        }
        RunsCommand::Show { id } => {
            let run = RunLog::read(host.as_ref(), &id)?;
            let value = run.to_json(true);
            emit(json, &value, || {
                let mut out = format!(
                    "run {} of {}, started {}: {}{}\n",
                    run.id,
                    escape_controls(&run.program),
                    run.started,
                    run.state,
                    if run.resumed > 0 {
                        format!(" (resumed {} time(s))", run.resumed)
                    } else {
                        String::new()
                    }
                );
                for s in value["step_list"].as_array().into_iter().flatten() {
                    out.push_str(&format!(
                        "  {:>4}  {}  {}\n",
                        s["step"],
                        s["tool"].as_str().unwrap_or(""),
                        s["outcome"].as_str().unwrap_or("")
                    ));
                }
                out
            });
        }
    }
    Ok(0)
}

/// The chunk name: the file name only, so error messages never show host paths.
pub(crate) fn chunk_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "script.lua".into())
}

fn render(value: &Value, previews: &[Preview]) -> String {
    let mut out = match value {
        Value::Null => String::new(),
        Value::String(s) => format!("{s}\n"),
        other => format!("{}\n", crate::text::terminal::json(other, true)),
    };
    if !previews.is_empty() {
        out.push_str(&format!(
            "\npreviewed {} state-changing call(s); nothing was changed (run with --yes to make them):\n",
            previews.len()
        ));
        for p in previews {
            out.push_str(&format!(
                "  {} ({}): {}\n",
                escape_controls(&p.tool),
                p.effect,
                escape_controls(&p.summary)
            ));
        }
    }
    out
}
