//! The command line: parse, build a host, turn the command into calls or settings, render.
//!
//! Output is for people by default (tables, pretty JSON for results) and one line of JSON with
//! `--json` on every command. Exit codes are stable: 0 done, 1 a tool failed, 2 bad usage or
//! invalid arguments, 3 denied, unavailable or not confirmed. Warnings go to stderr.

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use serde_json::{Value, json};

use crate::config::{DESTRUCTIVE_KEY, Grant};
use crate::error::{Error, Result};
use crate::gate::{
    AlwaysYes, CallContext, CallRequest, ConfirmMode, Confirmer, NoPerson, Origin, Outcome,
    TtyPrompt,
};
use crate::host::Host;
use crate::registry::{Availability, Effect, Profile};
use crate::store::Paths;

/// lmcp: a local tool host. Call tools by hand, script them, serve them to AI agents — every
/// call through one grant and confirmation gate.
#[derive(Debug, Parser)]
#[command(name = "lmcp", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// Print one line of JSON instead of text for people.
    #[arg(long, global = true)]
    pub json: bool,

    /// What to do; without one, the REPL starts on a terminal.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the tools: name, effect, kind, availability.
    Tools {
        /// Which tool list: core (everyday) or full (everything).
        #[arg(long, value_enum, default_value_t = ProfileArg::Full)]
        profile: ProfileArg,
    },
    /// Show one tool, or switch it on or off.
    #[command(subcommand)]
    Tool(ToolCommand),
    /// Call a tool through the gate.
    Call(CallArgs),
    /// Serve the tools to an MCP client over stdio (for Claude Desktop, goose, the Inspector...).
    Serve {
        /// Which tool list clients see: core (everyday) or full (everything).
        #[arg(long, value_enum, default_value_t = ProfileArg::Core)]
        profile: ProfileArg,
    },
    /// An interactive Lua session where every tool is tools.NAME{...} (the default on a terminal).
    Repl,
    /// Run a Lua script or a recipe manifest (.json): every tool call goes through the gate; state-changing calls are
    /// previewed unless you confirm (--yes, or y at the prompt on a terminal).
    Run(RunArgs),
    /// List or change grants: allow, ask or deny, per tool or per effect.
    Grants {
        #[command(subcommand)]
        action: Option<GrantsCommand>,
    },
    /// Show or switch the modes: private, read-only, no-terminal.
    Mode {
        /// The mode to show or switch.
        #[arg(value_enum)]
        mode: Option<ModeArg>,
        /// Turn it on or off.
        #[arg(value_enum)]
        state: Option<Switch>,
    },
    /// List, add or remove the folders the file tools may use.
    Roots {
        #[command(subcommand)]
        action: Option<RootsCommand>,
    },
    /// Write LuaLS definitions of every tool (for editor completion and type checks).
    Types {
        /// Write them to this file instead of stdout.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Save, run, share and delete recipes.
    #[command(subcommand)]
    Recipe(super::recipe::RecipeCommand),
    /// Turn images into one PDF (imports them into a scratch workspace and builds).
    Pdf(super::pdf::PdfArgs),
    /// Install, configure and call skills.
    #[command(subcommand)]
    Skill(super::skill::SkillCommand),
    /// Turn anonymous friction signals on or off, or set where they go.
    Signals {
        #[command(subcommand)]
        action: Option<SignalsCommand>,
    },
    /// Send waiting friction reports, or show every report sent or waiting.
    #[command(subcommand)]
    Friction(FrictionCommand),
    /// Show the most recent calls (shapes only, never values).
    History {
        /// How many calls to show.
        #[arg(short = 'n', long, default_value_t = 20)]
        count: usize,
    },
    /// Show where lmcp keeps its files.
    Paths,
}

/// `lmcp tool ...`
#[derive(Debug, Subcommand)]
pub enum ToolCommand {
    /// Show a tool's description, schema, annotations, availability and grant.
    Show {
        /// The tool's name.
        name: String,
    },
    /// Make a tool available again.
    Enable {
        /// The tool's name.
        name: String,
    },
    /// Make a tool unavailable (it stays listed, with the reason).
    Disable {
        /// The tool's name.
        name: String,
    },
    /// Save a custom tool from a definition file (.json) or a Lua program with a header (.lua).
    Create {
        /// The definition.
        file: PathBuf,
        /// Replace a custom tool of the same name.
        #[arg(long)]
        replace: bool,
    },
    /// List the custom tools.
    List,
    /// Delete a custom tool (asks first; --yes to confirm up front).
    Delete {
        /// The tool's name (user_...).
        name: String,
        /// Confirm without asking.
        #[arg(short, long)]
        yes: bool,
    },
}

/// `lmcp call NAME [ARGS]`
#[derive(Debug, Args)]
pub struct CallArgs {
    /// The tool's name.
    pub name: String,
    /// Arguments as a JSON object; `-` reads them from stdin, `@FILE` from a file. Default `{}`.
    pub args: Option<String>,
    /// Say yes to every confirmation (for scripts; a person's yes given up front).
    #[arg(short, long)]
    pub yes: bool,
    /// Give up after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,
}

/// `lmcp run FILE`
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The script (`.lua`) or recipe manifest (`.json`).
    pub file: PathBuf,
    /// A parameter the script declares, as NAME=VALUE (repeatable).
    #[arg(short, long = "param", value_name = "NAME=VALUE")]
    pub params: Vec<String>,
    /// Run state-changing calls without asking (a person's yes given up front).
    #[arg(short, long)]
    pub yes: bool,
    /// Stop the script after this many seconds (default: its header's @timeout, else 30).
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,
    /// For a manifest: run only if the plan still has this hash (what a person approved).
    #[arg(long, value_name = "HASH")]
    pub plan_hash: Option<String>,
}

/// `lmcp grants ...`
#[derive(Debug, Subcommand)]
pub enum GrantsCommand {
    /// List the rules and the grant each tool gets.
    List,
    /// Run without asking.
    Allow {
        /// A tool name, an effect (read, write, send) or `destructive`.
        key: String,
    },
    /// Ask a person first.
    Ask {
        /// A tool name, an effect (read, write, send) or `destructive`.
        key: String,
    },
    /// Never run.
    Deny {
        /// A tool name, an effect (read, write, send) or `destructive`.
        key: String,
    },
    /// Remove one rule, or every rule when no key is given.
    Reset {
        /// The rule to remove.
        key: Option<String>,
    },
}

/// `lmcp signals ...`
#[derive(Debug, Subcommand)]
pub enum SignalsCommand {
    /// Allow anonymous friction reports.
    On,
    /// Send and keep nothing.
    Off,
    /// Show whether signals are on and where they go.
    Status,
    /// Set (or, with --clear, remove) where reports are sent: https://, or http:// on loopback.
    Endpoint {
        /// The URL.
        url: Option<String>,
        /// Remove the endpoint: reports wait in the outbox.
        #[arg(long, conflicts_with = "url")]
        clear: bool,
    },
}

/// `lmcp friction ...`
#[derive(Debug, Subcommand)]
pub enum FrictionCommand {
    /// Send the reports that are due (all of them with --force).
    Flush {
        /// Ignore the backoff and try every waiting report now.
        #[arg(long)]
        force: bool,
        /// Send without asking (a send asks under the default grant).
        #[arg(short, long)]
        yes: bool,
    },
    /// Show exactly the payloads sent or waiting, as JSON.
    Log,
}

/// `lmcp roots ...`
#[derive(Debug, Subcommand)]
pub enum RootsCommand {
    /// List the roots (the workspace first).
    List,
    /// Let the file tools use this folder.
    Add {
        /// An existing folder.
        dir: PathBuf,
    },
    /// Stop letting the file tools use this folder.
    Remove {
        /// A folder added before.
        dir: PathBuf,
    },
}

/// A tool profile on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ProfileArg {
    /// The everyday tools.
    Core,
    /// Every tool.
    Full,
}

/// A mode on the command line.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum ModeArg {
    /// No history or logs are written; nothing is sent.
    Private,
    /// No tool that writes or sends runs.
    ReadOnly,
    /// Tools that need a terminal (run_command) are unavailable.
    NoTerminal,
}

/// On or off.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Switch {
    /// Turn on.
    On,
    /// Turn off.
    Off,
}

/// Parses the command line and runs it; the process exit code.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let json = cli.json;
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(run(cli));
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            if json {
                println!("{}", json!({"error": e.to_json()}));
            } else {
                eprintln!("error: {}", shown(&e.to_string()));
            }
            ExitCode::from(e.exit_code())
        }
    }
}

/// Runs a parsed command; the exit code.
pub async fn run(cli: Cli) -> Result<u8> {
    let host = Host::open(Paths::discover()?)?;
    let code = dispatch(&host, cli).await;
    for w in host.take_warnings() {
        eprintln!("warning: {}", shown(&w));
    }
    code
}

async fn dispatch(host: &Arc<Host>, cli: Cli) -> Result<u8> {
    let json = cli.json;
    let command = match cli.command {
        Some(c) => c,
        None if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() => Command::Repl,
        None => {
            use clap::CommandFactory;
            let _ = Cli::command().print_help();
            return Ok(2);
        }
    };
    match command {
        Command::Serve { profile } => {
            let profile = match profile {
                ProfileArg::Core => Profile::Core,
                ProfileArg::Full => Profile::Full,
            };
            super::mcp::serve(Arc::clone(host), profile).await
        }
        Command::Repl => {
            let host = Arc::clone(host);
            let handle = tokio::runtime::Handle::current();
            tokio::task::spawn_blocking(move || super::repl::run_blocking(host, handle))
                .await
                .map_err(|e| Error::Usage(format!("the REPL stopped: {e}")))?
        }
        Command::Tools { profile } => tools(host, profile, json),
        Command::Tool(ToolCommand::Show { name }) => show_tool(host, &name, json),
        Command::Tool(ToolCommand::Enable { name }) => enable_tool(host, &name, true, json),
        Command::Tool(ToolCommand::Disable { name }) => enable_tool(host, &name, false, json),
        Command::Tool(ToolCommand::Create { file, replace }) => {
            let args = custom_tool_args(&file, replace)?;
            call_tool(host, "custom_tool_create", args, false, json).await
        }
        Command::Tool(ToolCommand::List) => {
            call_tool(host, "custom_tool_list", json!({}), false, json).await
        }
        Command::Tool(ToolCommand::Delete { name, yes }) => {
            call_tool(host, "custom_tool_delete", json!({"name": name}), yes, json).await
        }
        Command::Call(args) => call(host, args, json).await,
        Command::Run(args) if args.file.extension().is_some_and(|e| e == "json") => {
            super::recipe::run_manifest(
                host,
                &args.file,
                &args.params,
                args.yes,
                args.plan_hash.as_deref(),
                json,
            )
            .await
        }
        Command::Run(args) => super::run::run_file(host, args, json).await,
        Command::Recipe(command) => super::recipe::recipe(host, command, json).await,
        Command::Skill(command) => super::skill::skill(host, command, json).await,
        Command::Pdf(args) => super::pdf::pdf(host, args, json).await,
        Command::Grants { action } => grants(host, action.unwrap_or(GrantsCommand::List), json),
        Command::Mode { mode, state } => mode_cmd(host, mode, state, json),
        Command::Roots { action } => roots(host, action.unwrap_or(RootsCommand::List), json),
        Command::History { count } => history(host, count, json),
        Command::Signals { action } => {
            signals(host, action.unwrap_or(SignalsCommand::Status), json)
        }
        Command::Friction(FrictionCommand::Flush { force, yes }) => {
            let report = gated(host, "friction_flush", json!({"force": force}), yes, false)
                .await
                .into_result()?;
            emit(json, &report, || {
                let mut s = format!("sent {}, waiting {}\n", report["sent"], report["waiting"]);
                for p in report["problems"].as_array().into_iter().flatten() {
                    s.push_str(&format!("  {}\n", p.as_str().unwrap_or("")));
                }
                s
            });
            Ok(0)
        }
        Command::Friction(FrictionCommand::Log) => {
            let log = gated(host, "friction_log", json!({}), false, false)
                .await
                .into_result()?;
            let text = serde_json::to_string_pretty(&log).unwrap_or_default();
            emit(json, &log, || text);
            Ok(0)
        }
        Command::Types { output } => types(host, output, json),
        Command::Paths => paths(host, json),
    }
}

/// Prints `value` as one JSON line, or `human` for people.
pub(crate) fn emit(json: bool, value: &Value, human: impl FnOnce() -> String) {
    let mut out = std::io::stdout().lock();
    // Text for people holds names and descriptions agents chose: shown, never obeyed.
    let text = if json {
        value.to_string()
    } else {
        shown(&human()).into_owned()
    };
    // A closed pipe (`lmcp tools | head`) is not an error worth a panic.
    let _ = writeln!(out, "{}", text.trim_end_matches('\n'));
}

fn availability_text(a: &Availability) -> String {
    match a {
        Availability::Available => "available".into(),
        Availability::Unavailable { detail, .. } => format!("unavailable: {detail}"),
    }
}

fn tools(host: &Arc<Host>, profile: ProfileArg, json: bool) -> Result<u8> {
    let profile = match profile {
        ProfileArg::Core => Profile::Core,
        ProfileArg::Full => Profile::Full,
    };
    let list = host.tools(profile);
    let value = Value::Array(
        list.iter()
            .map(|(t, a)| {
                let s = t.spec();
                json!({
                    "name": s.name, "title": s.title, "effect": s.effect, "kind": s.kind,
                    "profile": s.profile, "availability": a,
                })
            })
            .collect(),
    );
    emit(json, &value, || {
        let rows: Vec<Vec<String>> = list
            .iter()
            .map(|(t, a)| {
                let s = t.spec();
                let effect = if s.annotations.destructive_hint {
                    format!("{} (destructive)", s.effect)
                } else {
                    s.effect.to_string()
                };
                vec![
                    s.name.clone(),
                    effect,
                    availability_text(a),
                    s.title.clone(),
                ]
            })
            .collect();
        table(&["NAME", "EFFECT", "AVAILABILITY", "TITLE"], &rows)
    });
    Ok(0)
}

/// Left-aligned columns, two spaces apart.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}  ", w = widths[i]));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

fn lookup(host: &Host, name: &str) -> Result<Arc<crate::registry::Tool>> {
    host.registry().get(name).ok_or_else(|| Error::UnknownTool {
        name: name.to_string(),
        suggestions: host.registry().closest(name),
    })
}

fn show_tool(host: &Arc<Host>, name: &str, json: bool) -> Result<u8> {
    let tool = lookup(host, name)?;
    let s = tool.spec();
    let config = host.config();
    let availability = s.availability(&config, host.transport());
    let (grant, source) = config.grant_for(&s.name, s.effect, s.annotations.destructive_hint);
    let value = json!({
        "name": s.name, "title": s.title, "description": s.description,
        "effect": s.effect, "kind": s.kind, "profile": s.profile,
        "annotations": s.annotations, "availability": availability,
        "grant": grant, "grant_source": source, "has_preview": s.has_preview,
        "may_call": s.capabilities.as_ref().map(|c| c.describe()),
        "input_schema": s.input_schema, "output_schema": s.output_schema,
    });
    emit(json, &value, || {
        let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default();
        let a = s.annotations;
        let mut out = format!(
            "{} — {}\n\n{}\n\neffect        {}{}\nkind          {}\nprofile       {}\n\
             availability  {}\ngrant         {} ({})\nannotations   readOnly={} destructive={} \
             idempotent={} openWorld={}\n\ninput schema:\n{}\n",
            s.name,
            s.title,
            s.description,
            s.effect,
            if s.has_preview {
                ""
            } else {
                " (no preview: acts when called)"
            },
            s.kind,
            s.profile,
            availability_text(&availability),
            grant,
            source,
            a.read_only_hint,
            a.destructive_hint,
            a.idempotent_hint,
            a.open_world_hint,
            pretty(&s.input_schema),
        );
        if let Some(c) = &s.capabilities {
            out = out.replacen(
                "\n\ninput schema:",
                &format!("\nmay call      {}\n\ninput schema:", c.describe()),
                1,
            );
        }
        if let Some(o) = &s.output_schema {
            out.push_str(&format!("\noutput schema:\n{}\n", pretty(o)));
        }
        out
    });
    Ok(0)
}

fn enable_tool(host: &Arc<Host>, name: &str, enable: bool, json: bool) -> Result<u8> {
    let tool = lookup(host, name)?;
    let name = tool.spec().name.clone();
    host.update_config(|c| {
        c.disabled_tools.retain(|t| t != &name);
        if !enable {
            c.disabled_tools.push(name.clone());
            c.disabled_tools.sort();
        }
        Ok(())
    })?;
    let state = if enable { "enabled" } else { "disabled" };
    emit(json, &json!({"tool": name, "state": state}), || {
        format!("{name} is {state}")
    });
    Ok(0)
}

/// Reads the ARGS of `lmcp call`: inline JSON, `-` for stdin, `@FILE` for a file.
fn read_call_args(raw: Option<&str>) -> Result<Value> {
    let (text, source) = match raw {
        None => return Ok(json!({})),
        Some("-") => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .map_err(|e| Error::Usage(format!("cannot read arguments from stdin: {e}")))?;
            (s, "stdin".to_string())
        }
        Some(at) if at.starts_with('@') => {
            let path = &at[1..];
            let s = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
            (s, path.to_string())
        }
        Some(inline) => (inline.to_string(), "ARGS".to_string()),
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

/// The arguments of `custom_tool_create` from a file: a JSON definition, or a Lua program whose
/// header names and describes it.
fn custom_tool_args(file: &std::path::Path, replace: bool) -> Result<Value> {
    let text = std::fs::read_to_string(file).map_err(|e| Error::io(file, e))?;
    let mut args = match file.extension().and_then(|e| e.to_str()) {
        Some("json") => {
            let v: Value = serde_json::from_str(&text)
                .map_err(|e| Error::Usage(format!("{} is not valid JSON: {e}", file.display())))?;
            if !v.is_object() {
                return Err(Error::Usage(format!(
                    "{} must hold a JSON object",
                    file.display()
                )));
            }
            v
        }
        Some("lua") => {
            let header =
                crate::program::header::Header::parse(&text, &super::run::chunk_name(file))?;
            let (Some(name), Some(description)) = (header.name, header.description) else {
                return Err(Error::Usage(format!(
                    "{} needs `---@name user_...` and `---@description ...` in its header",
                    file.display()
                )));
            };
            json!({"name": name, "description": description, "lua": text})
        }
        _ => {
            return Err(Error::Usage(format!(
                "{} is neither .json nor .lua",
                file.display()
            )));
        }
    };
    if replace {
        args["replace"] = json!(true);
    }
    Ok(args)
}

/// Who answers for a person on the command line: `--yes` says yes up front; on a terminal the
/// person is asked; otherwise nobody can answer and calls that need a yes are not run.
pub(crate) fn person(yes: bool) -> Arc<dyn Confirmer> {
    if yes {
        Arc::new(AlwaysYes)
    } else if std::io::stdin().is_terminal() {
        Arc::new(TtyPrompt::new())
    } else {
        Arc::new(NoPerson)
    }
}

/// Calls a tool through the gate as a person's direct action (confirmed; asking where a grant
/// says ask), with a progress line on a terminal when `progress`.
pub(crate) async fn gated(
    host: &Arc<Host>,
    tool: &str,
    args: Value,
    yes: bool,
    progress: bool,
) -> Outcome {
    let mut ctx = CallContext::root(Origin::Cli, ConfirmMode::Confirmed)
        .with_confirmer(super::cli::person(yes));
    if progress {
        ctx = with_progress(ctx);
    }
    cancel_on_ctrl_c(&ctx);
    host.call(CallRequest::new(tool, args, ctx)).await
}

/// Shows progress reports on one stderr line, on a terminal.
pub(crate) fn with_progress(ctx: CallContext) -> CallContext {
    if !std::io::stderr().is_terminal() {
        return ctx;
    }
    ctx.with_progress(Arc::new(|p| {
        let total = p.total.unwrap_or(0);
        eprint!("\r\x1b[2K{}", crate::text::escape_controls(&p.message));
        if p.total.is_some() && p.done >= total {
            eprint!("\r\x1b[2K");
        }
        let _ = std::io::stderr().flush();
    }))
}

/// Asks a yes/no question on the terminal; anything but y or yes is no.
pub(crate) fn ask(question: &str) -> Result<bool> {
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .map_err(|e| Error::Usage(format!("cannot read the answer: {e}")))?;
    Ok(matches!(
        line.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

/// Calls one tool for a subcommand (a person's direct action: confirmed, asking where a grant
/// says ask) and renders the outcome.
async fn call_tool(host: &Arc<Host>, name: &str, args: Value, yes: bool, json: bool) -> Result<u8> {
    let ctx = CallContext::root(Origin::Cli, ConfirmMode::Confirmed).with_confirmer(person(yes));
    cancel_on_ctrl_c(&ctx);
    let outcome = host.call(CallRequest::new(name, args, ctx)).await;
    render_outcome(&outcome, json);
    Ok(outcome.exit_code())
}

async fn call(host: &Arc<Host>, args: CallArgs, json: bool) -> Result<u8> {
    let arguments = read_call_args(args.args.as_deref())?;
    // Arguments read from stdin leave no terminal to ask on.
    let confirmer: Arc<dyn Confirmer> = if args.args.as_deref() == Some("-") && !args.yes {
        Arc::new(NoPerson)
    } else {
        person(args.yes)
    };
    // A direct call is the person's own action: it runs unless a grant says ask or deny.
    let mut ctx = CallContext::root(Origin::Cli, ConfirmMode::Confirmed).with_confirmer(confirmer);
    if let Some(t) = timeout_arg(args.timeout)? {
        ctx = ctx.with_timeout(t);
    }
    if std::io::stderr().is_terminal() && !json {
        ctx = ctx.with_progress(Arc::new(|p| {
            let total = p.total.map(|t| format!("/{t}")).unwrap_or_default();
            eprint!(
                "\r\x1b[2K[{}{}] {}",
                p.done,
                total,
                crate::text::escape_controls(&p.message)
            );
            if p.total == Some(p.done) {
                eprintln!();
            }
        }));
    }
    cancel_on_ctrl_c(&ctx);
    let outcome = host.call(CallRequest::new(args.name, arguments, ctx)).await;
    render_outcome(&outcome, json);
    Ok(outcome.exit_code())
}

/// Cancels the context's call tree when the user presses Ctrl-C.
pub(crate) fn cancel_on_ctrl_c(ctx: &CallContext) {
    let cancel = ctx.cancel_token().clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.cancel();
        }
    });
}

/// Picks how a command-line run confirms: `--yes` confirms everything; on a terminal each
/// state-changing call asks; otherwise state-changing calls are previewed.
pub(crate) fn run_confirmation(yes: bool) -> (ConfirmMode, Arc<dyn Confirmer>) {
    if yes {
        (ConfirmMode::Confirmed, Arc::new(AlwaysYes))
    } else if std::io::stdin().is_terminal() {
        (ConfirmMode::Ask, Arc::new(TtyPrompt::new()))
    } else {
        (ConfirmMode::Preview, Arc::new(NoPerson))
    }
}

/// Reads `--timeout`: a positive number of seconds.
pub(crate) fn timeout_arg(secs: Option<f64>) -> Result<Option<Duration>> {
    match secs {
        None => Ok(None),
        Some(s) if s > 0.0 && s.is_finite() => Ok(Some(Duration::from_secs_f64(s))),
        Some(_) => Err(Error::Usage(
            "--timeout must be a positive number of seconds".into(),
        )),
    }
}

/// Prints an outcome: the result on stdout, refusals and errors on stderr (or all as JSON).
fn render_outcome(outcome: &Outcome, json: bool) {
    if json {
        println!("{}", outcome.to_json());
        return;
    }
    match outcome {
        Outcome::Done(v) => match v {
            Value::String(s) => println!("{}", shown(s)),
            other => println!(
                "{}",
                serde_json::to_string_pretty(other).unwrap_or_default()
            ),
        },
        Outcome::Preview(p) => {
            println!("preview (nothing was done): {}", shown(&p.summary));
        }
        Outcome::Denied { tool, reason } => {
            eprintln!("denied: `{}`: {}", shown(tool), shown(reason))
        }
        Outcome::NeedsConfirmation { tool, reason } => {
            eprintln!(
                "not run: `{}` needs confirmation: {}",
                shown(tool),
                shown(reason)
            )
        }
        Outcome::Failed(e) => eprintln!("error: {}", shown(&e.to_string())),
    }
}

/// A message for people: lines kept, anything that could rewrite the terminal escaped.
pub(crate) fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    crate::text::escape_controls_keep_lines(text)
}

/// Checks a grant key: a registered tool, an effect, or `destructive`.
fn check_grant_key(host: &Host, key: &str) -> Result<()> {
    if Effect::parse(key).is_some() || key == DESTRUCTIVE_KEY || host.registry().get(key).is_some()
    {
        return Ok(());
    }
    // Saved tools (user_*) may not be loaded in this process; accept well-formed names of those.
    if key.starts_with("user_") && crate::registry::check_name(key).is_ok() {
        return Ok(());
    }
    let mut hint = host.registry().closest(key);
    hint.truncate(1);
    Err(Error::Usage(format!(
        "`{key}` is not a tool, an effect (read, write, send) or `destructive`{}",
        hint.first()
            .map(|h| format!("; did you mean `{h}`?"))
            .unwrap_or_default()
    )))
}

fn grants(host: &Arc<Host>, action: GrantsCommand, json: bool) -> Result<u8> {
    let set = |key: String, grant: Grant| -> Result<u8> {
        check_grant_key(host, &key)?;
        host.update_config(|c| {
            c.grants.insert(key.clone(), grant);
            Ok(())
        })?;
        emit(json, &json!({"key": key, "grant": grant}), || {
            format!("{key}: {grant}")
        });
        Ok(0)
    };
    match action {
        GrantsCommand::Allow { key } => set(key, Grant::Allow),
        GrantsCommand::Ask { key } => set(key, Grant::Ask),
        GrantsCommand::Deny { key } => set(key, Grant::Deny),
        GrantsCommand::Reset { key } => {
            let removed = host.update_config(|c| match &key {
                Some(k) => Ok(c.grants.remove(k).map_or(0, |_| 1)),
                None => {
                    let n = c.grants.len();
                    c.grants.clear();
                    Ok(n)
                }
            })?;
            if let (Some(k), 0) = (&key, removed) {
                return Err(Error::Usage(format!(
                    "there is no rule for `{k}`; see `lmcp grants`"
                )));
            }
            emit(json, &json!({"removed": removed}), || {
                format!("removed {removed} rule(s)")
            });
            Ok(0)
        }
        GrantsCommand::List => {
            let config = host.config();
            let tools: Vec<Value> = host
                .registry()
                .all()
                .iter()
                .map(|t| {
                    let s = t.spec();
                    let (g, source) =
                        config.grant_for(&s.name, s.effect, s.annotations.destructive_hint);
                    json!({"tool": s.name, "grant": g, "source": source})
                })
                .collect();
            let value = json!({"rules": config.grants, "tools": tools});
            emit(json, &value, || {
                let mut out = String::from("rules:\n");
                if config.grants.is_empty() {
                    out.push_str("  (none: defaults apply — read and write allow, send and destructive ask)\n");
                }
                for (k, g) in &config.grants {
                    out.push_str(&format!("  {k}: {g}\n"));
                }
                out.push('\n');
                let rows: Vec<Vec<String>> = tools
                    .iter()
                    .map(|t| {
                        vec![
                            t["tool"].as_str().unwrap_or_default().to_string(),
                            t["grant"].as_str().unwrap_or_default().to_string(),
                            t["source"].as_str().unwrap_or_default().to_string(),
                        ]
                    })
                    .collect();
                out.push_str(&table(&["TOOL", "GRANT", "FROM"], &rows));
                out
            });
            Ok(0)
        }
    }
}

fn mode_cmd(
    host: &Arc<Host>,
    mode: Option<ModeArg>,
    state: Option<Switch>,
    json: bool,
) -> Result<u8> {
    if let (Some(mode), Some(state)) = (mode, state) {
        let on = matches!(state, Switch::On);
        host.update_config(|c| {
            match mode {
                ModeArg::Private => c.modes.private = on,
                ModeArg::ReadOnly => c.modes.read_only = on,
                ModeArg::NoTerminal => c.modes.no_terminal = on,
            }
            Ok(())
        })?;
    }
    let m = host.config().modes.clone();
    let all = [
        ("private", m.private),
        ("read-only", m.read_only),
        ("no-terminal", m.no_terminal),
    ];
    let shown: Vec<(&str, bool)> = match mode {
        Some(ModeArg::Private) => vec![all[0]],
        Some(ModeArg::ReadOnly) => vec![all[1]],
        Some(ModeArg::NoTerminal) => vec![all[2]],
        None => all.to_vec(),
    };
    let value = Value::Object(
        shown
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect(),
    );
    emit(json, &value, || {
        shown
            .iter()
            .map(|(k, v)| format!("{k}: {}\n", if *v { "on" } else { "off" }))
            .collect()
    });
    Ok(0)
}

fn roots(host: &Arc<Host>, action: RootsCommand, json: bool) -> Result<u8> {
    match action {
        RootsCommand::List => {
            let roots = host.roots()?;
            let value = json!(
                roots
                    .iter()
                    .map(|r| r.display().to_string())
                    .collect::<Vec<_>>()
            );
            emit(json, &value, || {
                roots
                    .iter()
                    .enumerate()
                    .map(|(i, r)| {
                        let tag = if i == 0 {
                            "  (workspace; relative paths land here)"
                        } else {
                            ""
                        };
                        format!("{}{tag}\n", r.display())
                    })
                    .collect()
            });
        }
        RootsCommand::Add { dir } => {
            let real = std::fs::canonicalize(&dir).map_err(|e| {
                Error::Usage(format!("cannot add {} as a root: {e}", dir.display()))
            })?;
            if !real.is_dir() {
                return Err(Error::Usage(format!("{} is not a folder", dir.display())));
            }
            let added = host.update_config(|c| {
                if c.roots.contains(&real) {
                    return Ok(false);
                }
                c.roots.push(real.clone());
                Ok(true)
            })?;
            let d = real.display().to_string();
            emit(json, &json!({"root": d, "added": added}), || {
                if added {
                    format!("added {d}")
                } else {
                    format!("{d} is already a root")
                }
            });
        }
        RootsCommand::Remove { dir } => {
            let real = std::fs::canonicalize(&dir).unwrap_or(dir.clone());
            let removed = host.update_config(|c| {
                let before = c.roots.len();
                c.roots.retain(|r| r != &real && r != &dir);
                Ok(before != c.roots.len())
            })?;
            if !removed {
                return Err(Error::Usage(format!(
                    "{} is not a root; `lmcp roots` lists them",
                    dir.display()
                )));
            }
            emit(
                json,
                &json!({"removed": real.display().to_string()}),
                || format!("removed {}", real.display()),
            );
        }
    }
    Ok(0)
}

fn history(host: &Arc<Host>, count: usize, json: bool) -> Result<u8> {
    let recent = host.history().recent(count)?;
    if recent.skipped > 0 {
        host.warn(format!(
            "skipped {} unreadable line(s) in {}",
            recent.skipped,
            host.paths().history_file().display()
        ));
    }
    let value = serde_json::to_value(&recent.entries).unwrap_or_default();
    emit(json, &value, || {
        let rows: Vec<Vec<String>> = recent
            .entries
            .iter()
            .map(|e| {
                let when = chrono::DateTime::from_timestamp_millis(e.at_ms)
                    .map(|t| {
                        t.with_timezone(&chrono::Local)
                            .format("%Y-%m-%d %H:%M:%S")
                            .to_string()
                    })
                    .unwrap_or_default();
                let args: Vec<String> = e
                    .args
                    .iter()
                    .map(|a| format!("{}:{}[{}]", a.name, a.kind, a.size))
                    .collect();
                vec![
                    when,
                    e.tool.clone(),
                    e.origin.clone(),
                    e.outcome.clone(),
                    format!("{:.1}ms", e.duration_ms),
                    args.join(" "),
                ]
            })
            .collect();
        table(
            &["WHEN", "TOOL", "ORIGIN", "OUTCOME", "TOOK", "ARGS"],
            &rows,
        )
    });
    Ok(0)
}

fn types(host: &Arc<Host>, output: Option<PathBuf>, json: bool) -> Result<u8> {
    let text = crate::script::types::lua_definitions(&host.registry().all());
    match output {
        Some(path) => {
            crate::store::atomic_write(&path, text.as_bytes())?;
            let shown = path.display().to_string();
            emit(
                json,
                &json!({"written": shown, "bytes": text.len()}),
                || format!("wrote {shown}"),
            );
        }
        None if json => emit(true, &json!({"definitions": text}), String::new),
        None => print!("{text}"),
    }
    Ok(0)
}

fn signals(host: &Arc<Host>, action: SignalsCommand, json: bool) -> Result<u8> {
    match action {
        SignalsCommand::On | SignalsCommand::Off => {
            let on = matches!(action, SignalsCommand::On);
            host.update_config(|c| {
                c.signals.enabled = on;
                Ok(())
            })?;
        }
        SignalsCommand::Endpoint { url, clear } => {
            if let Some(u) = &url {
                crate::config::check_endpoint(u)?;
            } else if !clear {
                return Err(Error::Usage(
                    "give a URL, or --clear to remove the endpoint".into(),
                ));
            }
            host.update_config(|c| {
                c.signals.endpoint = url.clone();
                Ok(())
            })?;
        }
        SignalsCommand::Status => {}
    }
    let s = host.config().signals.clone();
    let value = json!({"enabled": s.enabled, "endpoint": s.endpoint});
    emit(json, &value, || {
        format!(
            "anonymous signals: {}\nendpoint: {}\n",
            if s.enabled { "on" } else { "off" },
            s.endpoint
                .as_deref()
                .unwrap_or("(none: reports wait in the outbox)")
        )
    });
    Ok(0)
}

fn paths(host: &Arc<Host>, json: bool) -> Result<u8> {
    let p = host.paths();
    let entries = [
        ("config_dir", p.config_dir.clone()),
        ("data_dir", p.data_dir.clone()),
        ("config_file", p.config_file()),
        ("history_file", p.history_file()),
        ("workspace", p.workspace_dir()),
    ];
    let value = Value::Object(
        entries
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v.display().to_string())))
            .collect(),
    );
    emit(json, &value, || {
        entries
            .iter()
            .map(|(k, v)| format!("{k:<13} {}\n", v.display()))
            .collect()
    });
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn call_args_parse_and_explain_errors() {
        assert_eq!(read_call_args(None).unwrap(), json!({}));
        assert_eq!(read_call_args(Some(r#"{"a":1}"#)).unwrap(), json!({"a": 1}));
        let e = read_call_args(Some("{nope")).unwrap_err().to_string();
        assert!(e.contains("not valid JSON"), "{e}");
        let e = read_call_args(Some("[1]")).unwrap_err().to_string();
        assert!(e.contains("must be a JSON object"), "{e}");
    }

    #[test]
    fn tables_align() {
        let t = table(&["A", "BB"], &[vec!["long".into(), "x".into()]]);
        assert_eq!(t, "A     BB\nlong  x\n");
    }
}
