//! The recipe tools, and running a recipe: `recipe_run` resolves the recipe before the gate asks
//! (so the question shows what it may do), runs that snapshot, and journals the run.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::bundle::{export, import};
use super::storage::{delete, list, load, save};
use super::{Recipe, check, parse_manifest};

use crate::error::{Error, Result};
use crate::gate::Caller;
use crate::gate::journal::Journal;
use crate::gate::{CallContext, size_bucket};
use crate::host::Host;
use crate::program::run::RunMode;
use crate::program::{self, Program};
use crate::registry::Resolved;
use crate::registry::{Annotations, Effect, Kind, Registry, ToolSpec, handler};
use crate::store::FileLock;

pub use crate::program::RunReport;

fn shape(v: &Value) -> Value {
    match v {
        Value::String(s) => json!({"type": "string", "size": size_bucket(s.chars().count())}),
        Value::Array(a) => json!({"type": "array", "size": size_bucket(a.len())}),
        Value::Object(o) => json!({"type": "object", "size": size_bucket(o.len())}),
        Value::Null => json!({"type": "null"}),
        Value::Bool(_) => json!({"type": "boolean"}),
        Value::Number(_) => json!({"type": "number"}),
    }
}

/// Appends a run's summary (per step: status, duration, result shape) to `recipe_runs.jsonl`
/// unless private mode.
fn journal_summary(host: &Host, name: &str, outcome: &Result<RunReport>) {
    if host.config().modes.private {
        return;
    }
    let (confirmed, steps, result) = match outcome {
        Ok(r) => {
            let steps: Vec<Value> = r
                .records
                .iter()
                .map(|s| json!({"status": s.status, "duration_ms": s.duration_ms, "result": shape(&s.result)}))
                .collect();
            (r.confirmed, steps, "done".to_string())
        }
        Err(e) => (false, Vec::new(), format!("failed:{}", e.class())),
    };
    let entry = json!({
        "at": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "recipe": name,
        "confirmed": confirmed,
        "outcome": result,
        "steps": steps,
    });
    let path = host.paths().data_dir.join("recipe_runs.jsonl");
    let write = || -> Result<()> {
        let _lock = FileLock::acquire(&path)?;
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        let mut line = entry.to_string();
        line.push('\n');
        f.write_all(line.as_bytes())
            .map_err(|e| Error::io(&path, e))
    };
    if let Err(e) = write() {
        host.warn(format!("could not write the recipe journal: {e}"));
    }
}

/// Which earlier run a `recipe_run` call resumes (`resume`), and whether a step of unknown
/// outcome may run again (`retry_unknown`).
pub struct Resume<'a> {
    /// The run's id.
    pub id: &'a str,
    /// Run again a step the run died in.
    pub retry_unknown: bool,
}

/// Runs a checked recipe. `ctx` is the context of the call that runs it; `confirm` chooses a
/// real run or a plan; a given `expected_hash` must match the plan before anything runs, and
/// then only the plan's calls may run. A confirmed run keeps a journal (none in private mode),
/// new or the one `resume` names; the report, or the failure of a step, names the run.
pub async fn run(
    host: &Arc<Host>,
    ctx: &CallContext,
    recipe: &Program,
    given: &Map<String, Value>,
    confirm: bool,
    expected_hash: Option<&str>,
    resume: Option<Resume<'_>>,
) -> Result<RunReport> {
    let mode = if confirm {
        RunMode::Confirmed {
            plan_hash: expected_hash.map(str::to_string),
        }
    } else {
        RunMode::Plan
    };
    let journal = recipe_journal(host, recipe, confirm, resume, ctx.journal().is_some())?;
    let ctx = match &journal {
        Some(j) => ctx.clone().with_journal(Arc::clone(j)),
        None => ctx.clone(),
    };
    let mut outcome = program::run(&host.caller(), &ctx, recipe, given, mode).await;
    journal_summary(host, &recipe.name, &outcome);
    if let Some(j) = &journal {
        j.end(if outcome.is_ok() { "done" } else { "failed" });
        match &mut outcome {
            Ok(report) => report.run = Some(j.id().to_string()),
            Err(Error::StepFailed(f)) if !j.refused() => f.run = Some(j.id().to_string()),
            Err(_) => {}
        }
    }
    outcome
}

/// The journal a recipe run keeps: for a confirmed run outside private mode, new or resumed.
fn recipe_journal(
    host: &Host,
    recipe: &Program,
    confirm: bool,
    resume: Option<Resume<'_>>,
    ctx_has_journal: bool,
) -> Result<Option<Arc<Journal>>> {
    let private = host.config().modes.private;
    let fingerprint = recipe.fingerprint();
    // inside a journaled run (a script running a recipe), the recipe's calls are that run's
    if resume.is_none() && ctx_has_journal {
        return Ok(None);
    }
    match resume {
        Some(_) if private => Err(Error::Usage(
            "private mode keeps no run journals, so there is no run to resume".into(),
        )),
        Some(_) if !confirm => Err(Error::Usage(format!(
            "a resumed run goes on for real: pass {}",
            crate::text::arg_words::arg("confirm", "true")
        ))),
        Some(r) => Ok(Some(Arc::new(Journal::resume(
            host,
            r.id,
            &recipe.name,
            &fingerprint,
            r.retry_unknown,
        )?))),
        None if private || !confirm => Ok(None),
        None => Ok(Some(Arc::new(Journal::start(
            host,
            &recipe.name,
            &fingerprint,
        )?))),
    }
}

/// The recipe a `recipe_run` call names (saved) or carries (an unsaved manifest), checked now.
fn requested(host: &Host, args: &Value) -> Result<Recipe> {
    match (
        args.get("name").and_then(Value::as_str),
        args.get("manifest"),
    ) {
        (Some(name), None) => check(host.registry(), load(host, name)?.manifest),
        (None, Some(m)) => check(host.registry(), parse_manifest(m.clone())?),
        _ => Err(Error::Usage(
            "give either `name` (a saved recipe) or `manifest` (an unsaved one), not both".into(),
        )),
    }
}

/// The gate's view of a `recipe_run` call: the program it runs, and whether for real.
fn resolve_run(caller: &dyn Caller, args: &Value) -> Result<Resolved> {
    let recipe = requested(Host::of(caller), args)?;
    Ok(recipe.program.resolved(args["confirm"] == json!(true)))
}

fn name_arg(v: &Value) -> String {
    v["name"].as_str().unwrap_or_default().to_string()
}

/// A recipe manifest as saved and exported (see [`super::Manifest`]).
fn manifest_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "description": {"type": "string"},
            "schema_version": {"type": "integer"},
            "params": {"type": "array", "items": program::output::declared_param()},
            "steps": {"type": "array", "items": {"type": "object", "description": "A call {tool, args} or a pause {wait}"}},
            "lua": {"type": "string", "description": "A Lua program, instead of steps"},
            "outputs": {"type": "array", "items": {"type": "object"}, "description": "What it produces, for people: [{kind}]"}
        },
        "required": ["name"]
    })
}

/// Whether a recipe is JSON steps or a Lua program.
fn body_schema() -> Value {
    json!({"type": "string", "enum": ["steps", "lua"]})
}

/// Registers the recipe tools.
pub fn register_tools(registry: &Registry) -> Result<()> {
    let write = Annotations::changing(false, true, false);
    let name_schema = json!({"type": "object", "properties": {"name": {"type": "string", "minLength": 1}}, "required": ["name"], "additionalProperties": false});

    let save_spec = ToolSpec::new(
        "recipe_save",
        "Save a recipe",
        "Save a reusable recipe — a named, ordered sequence of tool calls with parameters — so it \
         can be run again any time with recipe_run. The manifest: {\"name\": string (required), \
         \"description\": string, \"schema_version\": 1, \"params\": [{\"name\": string, \"type\": \
         \"string\"|\"integer\"|\"number\"|\"boolean\"|\"object\"|\"array\", \"required\": bool, \
         \"default\": any}] (a recipe's param is required unless it has a default or says \
         required: false; a custom tool's is optional unless it says required: true; an optional \
         one without a default may only be a whole arg, \"${name}\", left out when not given), \"steps\": [...] (required, non-empty), \
         \"outputs\": [{\"kind\": string}]}. A step is {\"tool\": NAME, \"args\": {...}} or a pause \
         {\"wait\": {\"seconds\": N}} (also {\"wait\": N}). Any arg string may interpolate a declared \
         param with ${name}; an arg that is exactly \"${name}\" keeps the param's type. A later step \
         reads an earlier step's output with \"${steps[N].result.KEY}\" (0-based; .key and [i]). \
         Write $${ for a literal ${. Instead of steps, \"lua\" may hold a Lua program. On recipe_run \
         a state-changing step previews unless confirm: true. Returns {name, step_count}.",
        json!({
            "type": "object",
            "properties": {
                "manifest": {"type": "object", "description": "The recipe manifest (see the description)"},
                "replace": {"type": "boolean", "default": false, "description": "Replace a recipe of the same name"}
            },
            "required": ["manifest"],
            "additionalProperties": false
        }),
    )
    .effect(Effect::Write, write)
    .kind(Kind::Authoring)
    .output(json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "step_count": {"type": "integer", "description": "0 for a Lua recipe"},
            "body": body_schema(),
            "replaced": {"type": "boolean", "description": "Whether it replaced a recipe of the same name"}
        },
        "required": ["name", "step_count", "body", "replaced"]
    }))
    .summary(|a| format!("save the recipe \"{}\"", a["manifest"]["name"].as_str().unwrap_or("?")));
    registry.register_builtin(save_spec, handler(|inv| async move {
        let manifest = parse_manifest(inv.args["manifest"].clone())?;
        let replace = inv.args["replace"].as_bool().unwrap_or(false);
        let (recipe, replaced) = save(&inv.host(), manifest, replace)?;
        let body = if recipe.manifest.lua.is_some() { "lua" } else { "steps" };
        Ok(json!({"name": recipe.manifest.name, "step_count": recipe.step_count(), "body": body, "replaced": replaced}))
    }))?;

    let run_spec = ToolSpec::new(
        "recipe_run",
        "Run a recipe",
        "Run a saved recipe by name (or an unsaved one given as `manifest`) with its params. \
         Without confirm: true it is a plan: read steps run, state-changing calls are previewed \
         (those of nested programs too), and the result lists each step with its resolved \
         arguments, effect and status plus a plan_hash. With confirm: true it runs for real; pass \
         the plan_hash a person approved and nothing runs unless the plan still matches, and only \
         the calls it showed may run. A failing step stops the run (a plan too) and returns the \
         completed steps with the error. A confirmed run keeps a journal and names its `run` id; \
         give that id as `resume` to go on after a failure: done steps hand back their results \
         without running. The effect of a call is that of the recipe's tools.",
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1, "description": "A saved recipe's name"},
                "manifest": {"type": "object", "description": "An unsaved recipe manifest, instead of name"},
                "params": {"type": "object"},
                "confirm": {"type": "boolean", "default": false},
                "plan_hash": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                "resume": {"type": "string", "pattern": "^[0-9A-Za-z-]{1,64}$", "description": "The id of a confirmed run that failed or was cut short: its done steps hand back their results without running"},
                "retry_unknown": {"type": "boolean", "default": false, "description": "With resume: run again a step the run died in (it may have happened once already)"}
            },
            "additionalProperties": false
        }),
    )
    .effect(Effect::Write, Annotations::changing(false, false, true))
    .kind(Kind::Gateway)
    .without_preview()
    .resolves(resolve_run)
    .output(program::output::run_report())
    .summary(|a| {
        let name = a["name"].as_str().or(a["manifest"]["name"].as_str()).unwrap_or("?");
        format!("run the recipe \"{name}\"{}", if a["confirm"] == json!(true) { " for real" } else { " as a plan" })
    });
    registry.register_builtin(
        run_spec,
        handler(|inv| async move {
            let program = match inv.program::<Program>() {
                Some(p) => p,
                None => Arc::new(requested(&inv.host(), &inv.args)?.program),
            };
            let params = inv.args["params"].as_object().cloned().unwrap_or_default();
            let confirm = inv.args["confirm"].as_bool().unwrap_or(false);
            if inv.args["retry_unknown"] == json!(true) && inv.args.get("resume").is_none() {
                return Err(Error::Usage(format!(
                    "{} applies to a resumed run: give {} too",
                    crate::text::arg_words::arg("retry_unknown", "true"),
                    crate::text::arg_words::arg("resume", "\"ID\"")
                )));
            }
            let resume = inv.args["resume"].as_str().map(|id| Resume {
                id,
                retry_unknown: inv.args["retry_unknown"] == json!(true),
            });
            let report = run(
                &inv.host(),
                &inv.ctx,
                &program,
                &params,
                confirm,
                inv.args["plan_hash"].as_str(),
                resume,
            )
            .await?;
            Ok(serde_json::to_value(report).unwrap_or_default())
        }),
    )?;

    let list_spec = ToolSpec::new(
        "recipe_list",
        "List recipes",
        "List the saved recipes: name, description, body (steps or lua), step count, params, and when each was created and updated.",
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
    )
    .output(json!({
        "type": "object",
        "properties": {
            "recipes": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "description": {"type": "string"},
                    "body": body_schema(),
                    "step_count": {"type": "integer"},
                    "params": {"type": "array", "items": program::output::declared_param()},
                    "created": {"type": "string", "description": "RFC 3339"},
                    "updated": {"type": "string", "description": "RFC 3339"}
                },
                "required": ["name", "body", "step_count", "params", "created", "updated"]
            }},
            "unreadable": {"type": "array", "items": {"type": "string"}, "description": "Recipe files that could not be read, and why (skipped)"}
        },
        "required": ["recipes", "unreadable"]
    }));
    registry.register_builtin(
        list_spec,
        handler(|inv| async move {
            let (recipes, problems) = list(&inv.host());
            for p in &problems {
                inv.host().warn(p.clone());
            }
            Ok(json!({"recipes": recipes, "unreadable": problems}))
        }),
    )?;

    let get_spec = ToolSpec::new(
        "recipe_get",
        "Show a recipe",
        "Return a saved recipe's manifest, with when it was created and updated.",
        name_schema.clone(),
    )
    .output(json!({
        "type": "object",
        "properties": {
            "manifest": manifest_schema(),
            "created": {"type": "string", "description": "RFC 3339"},
            "updated": {"type": "string", "description": "RFC 3339"}
        },
        "required": ["manifest", "created", "updated"]
    }));
    registry.register_builtin(
        get_spec,
        handler(|inv| async move {
            let s = load(&inv.host(), &name_arg(&inv.args))?;
            Ok(json!({"manifest": s.manifest, "created": s.created, "updated": s.updated}))
        }),
    )?;

    let export_spec = ToolSpec::new(
        "recipe_export",
        "Export a recipe",
        "Return a saved recipe as a portable, versioned bundle with a content hash, for recipe_import on another machine.",
        name_schema.clone(),
    )
    .output(json!({
        "type": "object",
        "properties": {
            "format": {"type": "string", "enum": [super::BUNDLE_FORMAT]},
            "version": {"type": "integer"},
            "lmcp_version": {"type": "string"},
            "exported_at": {"type": "string", "description": "RFC 3339"},
            "sha256": {"type": "string", "description": "The hash of the recipe's JSON: recipe_import checks it"},
            "recipe": manifest_schema()
        },
        "required": ["format", "version", "lmcp_version", "exported_at", "sha256", "recipe"]
    }));
    registry.register_builtin(
        export_spec,
        handler(|inv| async move { export(&inv.host(), &name_arg(&inv.args)) }),
    )?;

    let import_spec = ToolSpec::new(
        "recipe_import",
        "Import a recipe",
        "Import a bundle made by recipe_export: refuses a bundle whose content does not match its \
         hash, checks the recipe like recipe_save, and reports every tool it calls with its effect \
         and availability here. With check_only: true it only reports.",
        json!({
            "type": "object",
            "properties": {
                "bundle": {"type": "object"},
                "check_only": {"type": "boolean", "default": false},
                "replace": {"type": "boolean", "default": false}
            },
            "required": ["bundle"],
            "additionalProperties": false
        }),
    )
    .effect(Effect::Write, write)
    .kind(Kind::Authoring)
    .output(json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "step_count": {"type": "integer"},
            "body": body_schema(),
            "tools": {"type": "array", "description": "Every tool it may call, with its effect and availability here", "items": {
                "type": "object",
                "properties": {
                    "tool": {"type": "string"},
                    "effect": {"type": "string", "enum": ["read", "write", "send"], "description": "Absent when the tool is not installed here"},
                    "availability": crate::registry::Availability::schema()
                },
                "required": ["tool", "availability"]
            }},
            "saved": {"type": "boolean", "description": "False with check_only: true"},
            "note": {"type": "string"}
        },
        "required": ["name", "step_count", "body", "tools", "saved"]
    }))
    .summary(|a| {
        format!(
            "import the recipe \"{}\"",
            a["bundle"]["recipe"]["name"].as_str().unwrap_or("?")
        )
    });
    registry.register_builtin(
        import_spec,
        handler(|inv| async move {
            let check_only = inv.args["check_only"].as_bool().unwrap_or(false);
            let replace = inv.args["replace"].as_bool().unwrap_or(false);
            import(&inv.host(), &inv.args["bundle"], check_only, replace)
        }),
    )?;

    let delete_spec = ToolSpec::new(
        "recipe_delete",
        "Delete a recipe",
        "Delete a saved recipe. It cannot be undone.",
        name_schema,
    )
    .effect(Effect::Write, Annotations::changing(true, true, false))
    .kind(Kind::Authoring)
    .output(json!({"type": "object", "properties": {"deleted": {"type": "string", "description": "The deleted recipe's name"}}, "required": ["deleted"]}))
    .summary(|a| {
        format!(
            "delete the recipe \"{}\"",
            a["name"].as_str().unwrap_or("?")
        )
    });
    registry.register_builtin(
        delete_spec,
        handler(|inv| async move {
            let name = name_arg(&inv.args);
            delete(&inv.host(), &name)?;
            Ok(json!({"deleted": name}))
        }),
    )?;
    Ok(())
}
