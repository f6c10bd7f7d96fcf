//! `lmcp recipe ...` and `lmcp run FILE.json`: recipes from the command line, rendered as a step
//! table for people (a plan with its hash, or what ran) and as JSON with `--json`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Subcommand;
use serde_json::{Map, Value, json};

use super::door::{YesTo, ask, emit, gated, gated_with, person, write_output};
use crate::error::{Error, Result};
use crate::gate::Outcome;
use crate::host::Host;
use crate::program::header::{Header, ParamSpec, ParamType};

/// `lmcp recipe ...`
#[derive(Debug, Subcommand)]
pub enum RecipeCommand {
    /// List the saved recipes.
    List,
    /// Show a recipe's manifest.
    Show {
        /// The recipe's name.
        #[arg(add = clap_complete::ArgValueCandidates::new(super::complete::recipes))]
        name: String,
    },
    /// Save a recipe from a manifest file (.json) or a Lua program with a header (.lua).
    Save {
        /// The manifest.
        file: PathBuf,
        /// Replace a recipe of the same name.
        #[arg(long)]
        replace: bool,
    },
    /// Run a recipe: a plan (nothing state-changing runs) unless confirmed.
    Run {
        /// The recipe's name.
        #[arg(add = clap_complete::ArgValueCandidates::new(super::complete::recipes))]
        name: String,
        /// A parameter as NAME=VALUE (repeatable).
        #[arg(short, long = "param", value_name = "NAME=VALUE")]
        params: Vec<String>,
        /// Run state-changing steps for real.
        #[arg(short, long)]
        yes: bool,
        /// Run only if the plan still has this hash (what a person approved).
        #[arg(long, value_name = "HASH")]
        plan_hash: Option<String>,
        /// Resume run ID (`lmcp runs`): its done steps hand back their results without running.
        #[arg(long, value_name = "ID", requires = "yes")]
        resume: Option<String>,
        /// With --resume: run again a step the run died in (it may have happened once already).
        #[arg(long, requires = "resume")]
        retry_unknown: bool,
    },
    /// Write a portable bundle of a recipe.
    Export {
        /// The recipe's name.
        #[arg(add = clap_complete::ArgValueCandidates::new(super::complete::recipes))]
        name: String,
        /// Write the bundle here instead of stdout.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Replace FILE even when it is a symlink, FIFO or device.
        #[arg(long, requires = "output")]
        force: bool,
    },
    /// Check a bundle, show what it will call, and save it.
    Import {
        /// The bundle.
        file: PathBuf,
        /// Save without asking.
        #[arg(short, long)]
        yes: bool,
        /// Replace a recipe of the same name.
        #[arg(long)]
        replace: bool,
    },
    /// Delete a recipe (asks first; --yes to confirm up front).
    Delete {
        /// The recipe's name.
        #[arg(add = clap_complete::ArgValueCandidates::new(super::complete::recipes))]
        name: String,
        /// Confirm without asking.
        #[arg(short, long)]
        yes: bool,
    },
}

/// Calls a tool through the gate as a person's direct action; the outcome.
/// Renders an outcome's result, or fails with its error.
fn done(outcome: Outcome) -> Result<Value> {
    outcome.into_result()
}

/// Runs `lmcp recipe ...`.
pub async fn recipe(host: &Arc<Host>, command: RecipeCommand, json: bool) -> Result<u8> {
    match command {
        RecipeCommand::List => {
            let v = done(gated(host, "recipe_list", json!({}), false, false).await)?;
            emit(json, &v, || {
                let list = v["recipes"].as_array().cloned().unwrap_or_default();
                if list.is_empty() {
                    return "no recipes yet; save one with `lmcp recipe save FILE`".into();
                }
                list.iter()
                    .map(|r| {
                        let body = if r["body"] == "lua" {
                            "    Lua".to_string()
                        } else {
                            format!("{:>3} step(s)", r["step_count"])
                        };
                        format!(
                            "{:<28} {body}  {}\n",
                            r["name"].as_str().unwrap_or(""),
                            r["description"].as_str().unwrap_or("")
                        )
                    })
                    .collect()
            });
            Ok(0)
        }
        RecipeCommand::Show { name } => {
            let v = done(gated(host, "recipe_get", json!({"name": name}), false, false).await)?;
            emit(json, &v, || {
                crate::text::terminal::json(&v["manifest"], true)
            });
            Ok(0)
        }
        RecipeCommand::Save { file, replace } => {
            let manifest = manifest_from_file(&file)?;
            let v = done(
                gated(
                    host,
                    "recipe_save",
                    json!({"manifest": manifest, "replace": replace}),
                    false,
                    false,
                )
                .await,
            )?;
            emit(json, &v, || {
                let body = if manifest_is_lua(&v) {
                    "a Lua recipe".to_string()
                } else {
                    format!("{} step(s)", v["step_count"])
                };
                format!("saved \"{}\" ({body})", v["name"].as_str().unwrap_or(""))
            });
            Ok(0)
        }
        RecipeCommand::Run {
            name,
            params,
            yes,
            plan_hash,
            resume,
            retry_unknown,
        } => {
            let got = done(gated(host, "recipe_get", json!({"name": name}), false, false).await)?;
            let given = typed_params(&got["manifest"], &params)?;
            let mut args = json!({"name": name, "params": given, "confirm": yes});
            if let Some(h) = &plan_hash {
                args["plan_hash"] = json!(h);
            }
            resume_args(&mut args, resume.as_deref(), retry_unknown);
            let report = done(gated(host, "recipe_run", args.clone(), yes, !json).await)?;
            if json {
                emit(true, &report, String::new);
                return Ok(0);
            }
            super::door::out(&render_report(
                &report,
                &format!(
                    "lmcp recipe run {}{}",
                    shell_quote(&name),
                    param_flags(&params)
                ),
            ));
            let changes = report["steps"].as_array().is_some_and(|s| {
                s.iter()
                    .any(|x| matches!(x["status"].as_str(), Some("previewed" | "unresolved")))
            });
            if !yes
                && changes
                && std::io::stdin().is_terminal()
                && ask("Run these steps for real?")?
            {
                args["confirm"] = json!(true);
                args["plan_hash"] = report["plan_hash"].clone();
                // The person said yes to this plan, and the run is bound to it by its hash; a
                // per-tool ask grant still asks on the terminal.
                let confirmer = Arc::new(YesTo {
                    tool: "recipe_run".into(),
                    then: person(false),
                });
                let report = done(gated_with(host, "recipe_run", args, confirmer, true).await)?;
                super::door::out(&render_report(&report, ""));
            }
            Ok(0)
        }
        RecipeCommand::Export {
            name,
            output,
            force,
        } => {
            let bundle =
                done(gated(host, "recipe_export", json!({"name": name}), false, false).await)?;
            let text = crate::text::terminal::json(&bundle, true) + "\n";
            match output {
                Some(path) => {
                    write_output(host, &path, text.as_bytes(), force)?;
                    let shown = path.display().to_string();
                    emit(json, &json!({"written": shown}), || {
                        format!("wrote {shown}")
                    });
                }
                None => super::door::out(&text),
            }
            Ok(0)
        }
        RecipeCommand::Import { file, yes, replace } => {
            let text = super::door::read_input(&file)?;
            let bundle: Value = serde_json::from_str(&text)
                .map_err(|e| Error::Usage(format!("{} is not valid JSON: {e}", file.display())))?;
            let report = done(
                gated(
                    host,
                    "recipe_import",
                    json!({"bundle": bundle, "check_only": true}),
                    false,
                    false,
                )
                .await,
            )?;
            if !json {
                super::door::out(&super::door::shown(&render_import(&report)));
            }
            let go = yes || (std::io::stdin().is_terminal() && !json && ask("Save this recipe?")?);
            if !go {
                if json {
                    emit(true, &report, String::new);
                } else {
                    super::door::outln("not saved (pass --yes to save it)");
                }
                return Ok(if yes { 0 } else { 3 });
            }
            let v = done(
                gated(
                    host,
                    "recipe_import",
                    json!({"bundle": bundle, "replace": replace}),
                    true,
                    false,
                )
                .await,
            )?;
            emit(json, &v, || {
                format!("saved \"{}\"", v["name"].as_str().unwrap_or(""))
            });
            Ok(0)
        }
        RecipeCommand::Delete { name, yes } => {
            let outcome = gated(host, "recipe_delete", json!({"name": name}), yes, false).await;
            let code = outcome.exit_code();
            match outcome.into_result() {
                Ok(v) => emit(json, &v, || format!("deleted \"{name}\"")),
                Err(e) if json => emit(true, &json!({"error": e.to_json()}), String::new),
                Err(e) => errln!("error: {}", super::door::shown(&e.to_string())),
            }
            Ok(code)
        }
    }
}

/// ` -p 'k=v'` for each given parameter, so a rerun hint runs the same plan.
fn param_flags(pairs: &[String]) -> String {
    pairs
        .iter()
        .map(|p| format!(" -p {}", shell_quote(p)))
        .collect()
}

fn manifest_is_lua(saved: &Value) -> bool {
    saved["body"] == "lua"
}

/// `s` as one shell word, quoted when it holds more than letters, digits and `-_.`.
pub(super) fn shell_quote(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// A manifest from a file: JSON as it is, or a Lua program whose header names it.
pub fn manifest_from_file(file: &Path) -> Result<Value> {
    let text = super::door::read_input(file)?;
    match file.extension().and_then(|e| e.to_str()) {
        Some("json") => serde_json::from_str(&text)
            .map_err(|e| Error::Usage(format!("{} is not valid JSON: {e}", file.display()))),
        Some("lua") => lua_manifest(&text, &super::run::chunk_name(file), &file.display()),
        _ => Err(Error::Usage(format!(
            "{} is neither .json nor .lua",
            file.display()
        ))),
    }
}

/// A recipe manifest for a Lua program whose header names it; `source` says where it comes
/// from in errors.
pub fn lua_manifest(text: &str, chunk: &str, source: &dyn std::fmt::Display) -> Result<Value> {
    let header = crate::program::header::Header::parse(text, chunk)?;
    let name = header.name.ok_or_else(|| {
        Error::Usage(format!(
            "{source} needs `---@name ...` in its header to be a recipe"
        ))
    })?;
    let mut m = json!({"name": name, "lua": text});
    if let Some(d) = header.description {
        m["description"] = json!(d);
    }
    Ok(m)
}

/// `--param k=v` values typed by the manifest's declared params (or its Lua header's), parsed
/// by the one `k=v` parser ([`Header::params_from_cli`]).
fn typed_params(manifest: &Value, pairs: &[String]) -> Result<Map<String, Value>> {
    let mut header = match manifest["lua"].as_str() {
        Some(lua) => Header::parse(lua, "recipe.lua").unwrap_or_default(),
        None => Header::default(),
    };
    for p in manifest["params"].as_array().into_iter().flatten() {
        if let (Some(name), Some(kind)) = (
            p["name"].as_str(),
            p["type"].as_str().and_then(ParamType::parse),
        ) {
            header.params.push(ParamSpec {
                name: name.to_string(),
                kind,
                required: false,
                default: None,
                description: String::new(),
            });
        }
    }
    header.params_from_cli(pairs)
}

fn short_json(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 60 {
        format!("{}…", s.chars().take(59).collect::<String>())
    } else {
        s
    }
}

/// The step table for people: a plan with its hash and how to run it, or what ran.
pub fn render_report(report: &Value, rerun: &str) -> String {
    let confirmed = report["confirmed"].as_bool().unwrap_or(false);
    let mut out = format!(
        "{} — {}\n",
        report["name"].as_str().unwrap_or(""),
        if confirmed {
            "ran"
        } else {
            "plan (nothing that changes state ran)"
        }
    );
    for s in report["steps"].as_array().into_iter().flatten() {
        let step = match (s["tool"].as_str(), s["wait"].as_f64()) {
            (Some(t), _) => t.to_string(),
            (None, Some(w)) => format!("wait {w}s"),
            _ => "?".into(),
        };
        let detail = match s["status"].as_str() {
            Some("previewed") => s["result"]["summary"]
                .as_str()
                .or(s["summary"].as_str())
                .unwrap_or("")
                .to_string(),
            Some("unresolved") => s["reason"].as_str().unwrap_or("").to_string(),
            Some("failed") => s["error"]["message"].as_str().unwrap_or("").to_string(),
            _ => short_json(&s["result"]),
        };
        out.push_str(&format!(
            "  {:>3}  {:<20} {:<11} {}\n",
            s["index"],
            step,
            s["status"].as_str().unwrap_or(""),
            if s["result"].is_null()
                && !matches!(
                    s["status"].as_str(),
                    Some("previewed" | "unresolved" | "failed")
                )
            {
                String::new()
            } else {
                detail
            }
        ));
    }
    let calls = report["calls"].as_array().cloned().unwrap_or_default();
    let (made, previewed): (Vec<&Value>, Vec<&Value>) = calls
        .iter()
        .partition(|c| confirmed && c["previewed"] != true);
    let list = |title: &str, calls: &[&Value], out: &mut String| {
        if calls.is_empty() {
            return;
        }
        out.push_str(title);
        for c in calls {
            out.push_str(&format!(
                "  - {} {}{}\n",
                c["tool"].as_str().unwrap_or("?"),
                crate::gate::shorten(&c["args"]),
                if c["unresolved"] == true {
                    " (arguments known only when it runs)"
                } else {
                    ""
                }
            ));
        }
    };
    if confirmed {
        list(
            "state-changing calls made (nested programs included):\n",
            &made,
            &mut out,
        );
        list(
            "previewed only (a nested program ran as a plan):\n",
            &previewed,
            &mut out,
        );
    } else {
        list(
            "state-changing calls this plan would make (nested programs included):\n",
            &previewed,
            &mut out,
        );
    }
    if let Some(o) = report["output"].as_str().filter(|o| !o.is_empty()) {
        out.push_str(&format!("output:\n{o}"));
    }
    if confirmed {
        out.push_str(&format!(
            "result: {}\n",
            crate::text::terminal::json(&report["result"], true)
        ));
    } else {
        let hash = report["plan_hash"].as_str().unwrap_or("");
        out.push_str(&format!("plan hash: {hash}\n"));
        if !rerun.is_empty() {
            out.push_str(&format!(
                "to run exactly this plan: {rerun} --yes --plan-hash {hash}\n"
            ));
        }
    }
    // Names, summaries and output come from programs: shown, never obeyed.
    crate::text::escape_controls_keep_lines(&out).into_owned()
}

fn render_import(report: &Value) -> String {
    let mut out = format!(
        "recipe \"{}\": {} step(s); it calls:\n",
        report["name"].as_str().unwrap_or(""),
        report["step_count"]
    );
    for t in report["tools"].as_array().into_iter().flatten() {
        let avail = if t["availability"]["status"] == "available" {
            "available".to_string()
        } else {
            format!(
                "UNAVAILABLE: {}",
                t["availability"]["detail"].as_str().unwrap_or("")
            )
        };
        out.push_str(&format!(
            "  {:<20} {:<6} {}\n",
            t["tool"].as_str().unwrap_or(""),
            t["effect"].as_str().unwrap_or("?"),
            avail
        ));
    }
    if let Some(n) = report["note"].as_str() {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}

/// `lmcp run FILE.json`: runs a manifest without saving it.
/// Adds `resume` and `retry_unknown` to `recipe_run` arguments.
fn resume_args(args: &mut Value, resume: Option<&str>, retry_unknown: bool) {
    if let Some(id) = resume {
        args["resume"] = json!(id);
        args["retry_unknown"] = json!(retry_unknown);
    }
}

/// `lmcp run FILE.json`: runs a recipe manifest (through `recipe_run`, like a saved one).
pub async fn run_manifest(host: &Arc<Host>, run: &super::cli::RunArgs, json: bool) -> Result<u8> {
    let Some(file) = &run.file else {
        return Err(Error::Usage(
            "a recipe manifest is run from its .json file".into(),
        ));
    };
    let (params, yes) = (&run.params, run.yes);
    let timeout = super::door::timeout_arg(run.timeout)?;
    let manifest = manifest_from_file(file)?;
    let given = typed_params(&manifest, params)?;
    // Through the gate like any run of a recipe: a deny on recipe_run stops it too.
    let mut args = json!({"manifest": manifest, "params": given, "confirm": yes});
    if let Some(h) = &run.plan_hash {
        args["plan_hash"] = json!(h);
    }
    resume_args(&mut args, run.resume.as_deref(), run.retry_unknown);
    let outcome = super::door::gated_within(
        host,
        "recipe_run",
        args,
        super::door::person(yes),
        !json,
        timeout,
    )
    .await;
    let value = done(outcome)?;
    emit(json, &value, || {
        render_report(
            &value,
            &format!(
                "lmcp run {}{}",
                shell_quote(&file.display().to_string()),
                param_flags(params)
            ),
        )
    });
    Ok(0)
}
