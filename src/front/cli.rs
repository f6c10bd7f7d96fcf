//! The command line: parse, build a host, turn the command into calls or settings, render.
//!
//! Output is for people by default (tables, pretty JSON for results) and one line of JSON with
//! `--json` on every command. Exit codes are stable: 0 done, 1 a tool failed, 2 bad usage or
//! invalid arguments, 3 denied, unavailable or not confirmed. Warnings go to stderr.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand, ValueEnum};
use clap_complete::ArgValueCandidates;
use serde_json::json;

use crate::error::{Error, Result};
use crate::host::Host;
use crate::registry::Profile;
use crate::store::Paths;

use super::door::{call_tool, emit, gated, shown};
use super::settings::{config_cmd, grants, history, mode_cmd, paths, roots, signals, types};
use super::tool_cmd::{call, custom_tool_args, enable_tool, show_tool, tools};

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

impl Cli {
    /// The command line of `lmcp run` or `lmcp call`, parsed without building the whole
    /// command-line definition: building it (every subcommand, every help text) was a third of
    /// a one-line `lmcp run`'s time. `None` when the line is anything else, or anything
    /// `HotCli` cannot take whole (help, a version flag, a mistake): the full definition then
    /// parses it, so every message and every help text comes from one place.
    pub fn parse_hot<I, T>(args: I) -> Option<Cli>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
        // the first word that is not the global flag names the subcommand
        let first = args.iter().skip(1).find(|a| *a != "--json")?;
        if first != "run" && first != "call" {
            return None;
        }
        let hot = HotCli::try_parse_from(args).ok()?;
        Some(Cli {
            json: hot.json,
            command: Some(match hot.command {
                HotCommand::Run(a) => Command::Run(a),
                HotCommand::Call(a) => Command::Call(a),
            }),
        })
    }
}

/// The two subcommands scripts call most, alone: the same argument structs as [`Command`]'s,
/// so a line either parses to what the full definition makes of it or falls back to that
/// definition (the tests below compare the two).
#[derive(Debug, Parser)]
#[command(
    name = "lmcp",
    disable_help_flag = true,
    disable_help_subcommand = true
)]
struct HotCli {
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: HotCommand,
}

#[derive(Debug, Subcommand)]
enum HotCommand {
    #[command(disable_help_flag = true)]
    Run(RunArgs),
    #[command(disable_help_flag = true)]
    Call(CallArgs),
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the tools: name, effect, availability, title.
    Tools {
        /// Which tool list: code (lua_run and tool_search), core (everyday) or full (everything).
        #[arg(long, value_enum, default_value_t = ProfileArg::Full)]
        profile: ProfileArg,
    },
    /// Show one tool, or switch it on or off.
    #[command(subcommand)]
    Tool(ToolCommand),
    /// Call a tool through the gate.
    Call(CallArgs),
    /// Serve the tools to MCP clients: over stdio (Claude Desktop, goose, the Inspector...), or
    /// with --http to many clients at once over Streamable HTTP.
    Serve {
        /// Which tool list clients see: code (lua_run and tool_search), core (everyday) or full (everything).
        #[arg(long, value_enum, default_value_t = ProfileArg::Core)]
        profile: ProfileArg,
        /// Serve over MCP's Streamable HTTP on ADDR (IP:PORT or a port; default 127.0.0.1:8765),
        /// at /mcp. Clients need the bearer token; tools that read local files the client names
        /// are unavailable, and the file tools reach only the lmcp workspace.
        #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = super::http::DEFAULT_ADDR)]
        http: Option<String>,
        /// With --http: listen on an address other machines can reach.
        #[arg(long, requires = "http")]
        allow_remote: bool,
        /// With --http: print the bearer token clients need (made on first use), and exit.
        #[arg(long, requires = "http")]
        show_token: bool,
        /// With --http: make a new bearer token, print it, and exit (servers started later need
        /// the new one).
        #[arg(long, requires = "http", conflicts_with = "show_token")]
        rotate_token: bool,
        /// With --http: close a session nobody used for SECS seconds (its client must start a
        /// new one).
        #[arg(long, value_name = "SECS", requires = "http", default_value_t = super::http::IDLE_AFTER.as_secs(),
              value_parser = clap::value_parser!(u64).range(1..=7 * 24 * 3600))]
        idle_timeout: u64,
        /// With --http: cut off a client that has not sent a request's headers within SECS
        /// seconds (hidden: for tests, which need not wait the default).
        #[arg(long, value_name = "SECS", requires = "http", hide = true,
              default_value_t = super::http::HEADER_TIMEOUT.as_secs(),
              value_parser = clap::value_parser!(u64).range(1..=3600))]
        header_timeout: u64,
    },
    /// An interactive Lua session where every tool is tools.NAME{...} (the default on a terminal).
    Repl,
    /// Run a Lua script (a file, `-` for stdin, or `-e CHUNK`) or a recipe manifest (.json): every
    /// tool call goes through the gate. On a terminal it asks once, before the script runs, for
    /// the state-changing tools its `---@uses` lists (any tool without one); --yes answers up
    /// front; with no terminal, state-changing calls are previewed (a dry run).
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
        /// Write them here instead of stdout: a FILE.lua, or a folder that gets lmcp.lua and
        /// the bundled modules (tbl, retry, inspect, test) for `require`.
        #[arg(short, long, value_name = "FILE.lua|DIR")]
        output: Option<PathBuf>,
        /// Also write .emmyrc.json and .luarc.json here, in the current folder, so EmmyLua and
        /// LuaLS use the definitions (and accept program headers).
        #[arg(long, requires = "output")]
        config: bool,
        /// Replace what is in the way: a symlink, FIFO or device at FILE, or config files that
        /// exist with other contents.
        #[arg(long, requires = "output")]
        force: bool,
    },
    /// Save, run, share and delete recipes.
    #[command(subcommand)]
    Recipe(super::recipe::RecipeCommand),
    /// Turn images into one PDF (imports them into a scratch workspace and builds).
    Pdf(super::pdf::PdfArgs),
    /// Install, configure and call skills.
    #[command(subcommand)]
    Skill(super::skill::SkillCommand),
    /// Other MCP servers whose tools lmcp offers behind its gate (`mcp__SERVER__TOOL`).
    Servers {
        #[command(subcommand)]
        action: Option<super::servers::ServersCommand>,
    },
    /// The hosts `http_request` may reach without asking, or never: list, allow, deny, remove.
    Hosts {
        #[command(subcommand)]
        action: Option<super::hosts::HostsCommand>,
    },
    /// Turn anonymous friction signals on or off, or set where they go.
    Signals {
        #[command(subcommand)]
        action: Option<SignalsCommand>,
    },
    /// Send waiting friction reports, or show every report sent or waiting.
    #[command(subcommand)]
    Friction(FrictionCommand),
    /// List the runs of scripts kept in journals (newest first), or show one: `runs show ID`.
    Runs {
        #[command(subcommand)]
        action: Option<RunsCommand>,
    },
    /// Show the most recent calls (shapes only, never values).
    History {
        /// How many calls to show.
        #[arg(short = 'n', long, default_value_t = 20)]
        count: usize,
    },
    /// Show where lmcp keeps its files.
    Paths,
    /// Check config.json; `repair` sets a broken one aside and starts from the defaults.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Print a shell completion script, e.g. `source <(lmcp completions bash)`.
    Completions {
        /// The shell to complete for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), e.g. `lmcp man | man -l -`, or write every page.
    Man {
        /// Write lmcp.1 and one page per subcommand into this folder instead.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

/// `lmcp config ...`
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Say whether config.json can be read, and what lmcp runs on.
    Check,
    /// Set a config.json that cannot be read aside (under a name of its own) and write the
    /// defaults. Asks first; --yes to confirm up front.
    Repair {
        /// Repair without asking.
        #[arg(short, long)]
        yes: bool,
    },
}

/// `lmcp tool ...`
#[derive(Debug, Subcommand)]
pub enum ToolCommand {
    /// Show a tool's description, schema, annotations, availability and grant.
    Show {
        /// The tool's name.
        #[arg(add = ArgValueCandidates::new(super::complete::tools))]
        name: String,
    },
    /// Make a tool available again.
    Enable {
        /// The tool's name.
        #[arg(add = ArgValueCandidates::new(super::complete::tools))]
        name: String,
    },
    /// Make a tool unavailable (it stays listed, with the reason).
    Disable {
        /// The tool's name.
        #[arg(add = ArgValueCandidates::new(super::complete::tools))]
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
        #[arg(add = ArgValueCandidates::new(super::complete::tools))]
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
    #[arg(add = ArgValueCandidates::new(super::complete::tools))]
    pub name: String,
    /// Arguments as KEY=VALUE pairs, each value read by the type the tool's schema gives its
    /// key (a string as typed; numbers, booleans and `null` parsed; arrays and objects as JSON):
    /// `expression=6*7`. KEY=@FILE reads the value from a file; KEY=@@... is a literal leading
    /// `@`. Or one JSON object: inline, `-` for stdin, `@FILE` for a file. Default `{}`.
    #[arg(value_name = "KEY=VALUE|JSON")]
    pub args: Vec<String>,
    /// Say yes to every confirmation (for scripts; a person's yes given up front).
    #[arg(short, long)]
    pub yes: bool,
    /// Give up after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,
}

/// `lmcp run FILE`, `lmcp run -`, `lmcp run -e CHUNK`
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The script (`.lua`) or recipe manifest (`.json`); `-` reads a Lua script from stdin
    /// (questions are then asked on the controlling terminal).
    #[arg(required_unless_present = "eval", conflicts_with = "eval")]
    pub file: Option<PathBuf>,
    /// Run this Lua chunk instead of a file, as `lua -e` does: `lmcp run -e 'return 1+1'`.
    #[arg(
        short = 'e',
        long = "eval",
        value_name = "CHUNK",
        allow_hyphen_values = true
    )]
    pub eval: Option<String>,
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
    /// Resume run ID (`lmcp runs`): its done steps hand back their results without running.
    #[arg(long, value_name = "ID")]
    pub resume: Option<String>,
    /// With --resume: run again a step the run died in (it may have happened once already).
    #[arg(long, requires = "resume")]
    pub retry_unknown: bool,
}

/// `lmcp runs ...`
#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// List the runs, newest first: id, program, started, state, last step.
    List,
    /// Show one run and each of its state-changing steps.
    Show {
        /// The run's id.
        id: String,
    },
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
    /// Send and keep nothing: reports waiting to be sent are discarded too.
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
    /// Let the file tools use this folder. A very wide one (`/`, your home folder, or one
    /// holding lmcp's own folders) needs --yes; lmcp's own folders stay out of reach anyway.
    Add {
        /// An existing folder.
        dir: PathBuf,
        /// Add a very wide folder all the same.
        #[arg(short, long)]
        yes: bool,
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
    /// Code mode: lua_run and tool_search only.
    Code,
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
    use clap::FromArgMatches;
    // a shell asking for completions (`COMPLETE=bash lmcp -- ...`) is answered before anything
    // else starts, and the process ends there
    super::complete::respond();
    // the first Lua state is made on the other core while this one parses the arguments and
    // opens the host
    crate::script::ahead::start();
    let parsed = match Cli::parse_hot(std::env::args_os()) {
        Some(cli) => Ok(cli),
        None => super::docs::definition()
            .try_get_matches()
            .and_then(|m| Cli::from_arg_matches(&m)),
    };
    let cli = match parsed {
        Ok(c) => c,
        Err(e) => {
            // clap's own text quotes what was typed (a file name someone else chose, in
            // `lmcp pdf *.jpg`): plain, through the terminal writer like everything else
            let text = e.render().to_string();
            if e.use_stderr() {
                errw!("{text}");
            } else {
                super::door::out(&text);
            }
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let json = cli.json;
    // many HTTP sessions run their calls in parallel; every other command is one client
    let runtime = match &cli.command {
        Some(Command::Serve { http: Some(_), .. }) => tokio::runtime::Builder::new_multi_thread(),
        _ => tokio::runtime::Builder::new_current_thread(),
    }
    .enable_all()
    .build();
    let runtime = match runtime {
        Ok(r) => r,
        Err(e) => {
            errln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(run(cli));
    // Blocking work a timeout or cancellation gave up on (a check no await can interrupt)
    // must not keep the process alive: the command is over.
    runtime.shutdown_background();
    report_peak();
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            if json {
                // a closed stdout must not turn the failure into exit 0
                crate::text::terminal::show_line_keeping_exit(&crate::text::terminal::json(
                    &json!({"error": e.to_json()}),
                    false,
                ));
            } else {
                errln!("error: {}", shown(&super::door::for_people(&e.to_string())));
            }
            ExitCode::from(e.exit_code())
        }
    }
}

/// The variable naming a file where lmcp writes, as it ends, the peak of its own resident
/// memory in bytes. The memory bounds are measured with it (tests, benches): the kernel's
/// `ru_maxrss` of a child also counts the memory of the parent that started it, while this is
/// Linux's `VmHWM`, this process's own.
pub const PEAK_FILE_VAR: &str = "LMCP_PEAK_FILE";

/// Writes the peak of this process's resident memory where [`PEAK_FILE_VAR`] says, if it is set
/// (Linux only; elsewhere nothing is written).
fn report_peak() {
    let Some(path) = std::env::var_os(PEAK_FILE_VAR) else {
        return;
    };
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
    if let Some(kib) = kib
        && let Err(e) = std::fs::write(&path, format!("{}\n", kib * 1024))
    {
        errln!(
            "warning: cannot write the peak memory to {}: {e}",
            path.to_string_lossy()
        );
    }
}

/// Runs a parsed command; the exit code. For the binary only: it ends the process after.
async fn run(cli: Cli) -> Result<u8> {
    // Generated text about lmcp itself needs no host (and creates no folders).
    match &cli.command {
        Some(Command::Completions { shell }) => {
            super::door::out(&String::from_utf8_lossy(&super::docs::completions(*shell)));
            return Ok(0);
        }
        Some(Command::Man { dir }) => return super::docs::man(dir.as_deref(), cli.json),
        _ => {}
    }
    let paths = Paths::discover()?;
    let registry = crate::open::builtin_registry()?;
    // over HTTP the callers are not on this machine's side of the files
    let options = crate::HostOptions {
        transport: match &cli.command {
            Some(Command::Serve { http: Some(_), .. }) => crate::registry::Transport::Remote,
            _ => crate::registry::Transport::Local,
        },
    };
    let host = Host::open_prepared(paths, options, registry)?;
    super::door::set_input_limit(host.config().limits.input_mb);
    // A config that cannot be read is said on every command, not once.
    if let Some(problem) = host.config_problem()
        && !matches!(cli.command, Some(Command::Config(_)))
    {
        errln!("warning: {}", shown(&problem));
    }
    let code = dispatch(&host, cli).await;
    // the other MCP servers this command started end with it (`lmcp serve` included)
    if let Some(upstreams) = host.attached::<crate::upstream::Upstreams>() {
        upstreams.stop_all().await;
    }
    // the history is written behind the calls: what this command recorded goes out before it ends
    if let Err(e) = host.history().flush() {
        host.warn(format!("could not record calls in the history: {e}"));
    }
    for w in host.take_warnings() {
        errln!("warning: {}", shown(&w));
    }
    // The process ends now: taking the registry and the rest apart one allocation at a time
    // would only delay it (the history is flushed, locks go with the process).
    std::mem::forget(host);
    code
}

async fn dispatch(host: &Arc<Host>, cli: Cli) -> Result<u8> {
    let json = cli.json;
    let command = match cli.command {
        Some(c) => c,
        None if std::io::stdin().is_terminal()
            && crate::text::terminal::is_terminal(crate::text::terminal::Stream::Out) =>
        {
            Command::Repl
        }
        None => {
            let _ = super::docs::definition().print_help();
            return Ok(2);
        }
    };
    match command {
        Command::Serve {
            profile,
            http,
            allow_remote,
            show_token,
            rotate_token,
            idle_timeout,
            header_timeout,
        } => {
            let profile = match profile {
                ProfileArg::Code => Profile::Code,
                ProfileArg::Core => Profile::Core,
                ProfileArg::Full => Profile::Full,
            };
            match http {
                None => super::mcp::serve(Arc::clone(host), profile).await,
                Some(_) if show_token || rotate_token => {
                    let token = if rotate_token {
                        super::http::rotate_token(host)?
                    } else {
                        super::http::token(host)?
                    };
                    if json {
                        super::door::out(&format!("{}\n", json!({"token": token})));
                    } else {
                        super::door::out(&format!("{token}\n"));
                    }
                    Ok(0)
                }
                Some(addr) => {
                    let options = super::http::Options {
                        addr: super::http::parse_addr(&addr)?,
                        allow_remote,
                        idle: std::time::Duration::from_secs(idle_timeout),
                        header_timeout: std::time::Duration::from_secs(header_timeout),
                    };
                    super::http::serve(Arc::clone(host), profile, options).await
                }
            }
        }
        Command::Repl => {
            let host = Arc::clone(host);
            let handle = tokio::runtime::Handle::current();
            let ctrl_c = super::door::CtrlC::listen();
            tokio::task::spawn_blocking(move || super::repl::run_blocking(host, handle, ctrl_c))
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
        Command::Run(args)
            if args
                .file
                .as_ref()
                .is_some_and(|f| f.extension().is_some_and(|e| e == "json")) =>
        {
            super::recipe::run_manifest(host, &args, json).await
        }
        Command::Run(args) => super::run::run_file(host, args, json).await,
        Command::Recipe(command) => super::recipe::recipe(host, command, json).await,
        Command::Skill(command) => super::skill::skill(host, command, json).await,
        Command::Servers { action } => {
            let action = action.unwrap_or(super::servers::ServersCommand::List);
            super::servers::servers(host, action, json).await
        }
        Command::Hosts { action } => {
            let action = action.unwrap_or(super::hosts::HostsCommand::List);
            super::hosts::hosts(host, action, json)
        }
        Command::Pdf(args) => super::pdf::pdf(host, args, json).await,
        Command::Grants { action } => grants(host, action.unwrap_or(GrantsCommand::List), json),
        Command::Mode { mode, state } => mode_cmd(host, mode, state, json),
        Command::Roots { action } => roots(host, action.unwrap_or(RootsCommand::List), json),
        Command::History { count } => history(host, count, json),
        Command::Runs { action } => {
            super::run::runs(host, action.unwrap_or(RunsCommand::List), json)
        }
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
            let text = crate::text::terminal::json(&log, true);
            emit(json, &log, || text);
            Ok(0)
        }
        Command::Types {
            output,
            config,
            force,
        } => types(host, output, config, force, json),
        Command::Paths => paths(host, json),
        Command::Config(action) => config_cmd(host, action, json),
        Command::Completions { .. } | Command::Man { .. } => Ok(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
        HotCli::command().debug_assert();
    }

    /// The hot path parses `run` and `call` lines to exactly what the full definition makes of
    /// them, and leaves everything else (help, versions, mistakes, other subcommands) to it.
    #[test]
    fn hot_lines_parse_as_the_full_definition_parses_them() {
        use clap::FromArgMatches;
        let full = |line: &[&str]| {
            super::super::docs::definition()
                .try_get_matches_from(line)
                .and_then(|m| Cli::from_arg_matches(&m))
                .map(|c| format!("{c:?}"))
        };
        let taken = [
            &["lmcp", "run", "x.lua"][..],
            &["lmcp", "--json", "run", "x.lua"],
            &["lmcp", "run", "x.lua", "--json"],
            &["lmcp", "run", "-p", "a=1", "--param", "b=2", "-y", "x.json"],
            &[
                "lmcp",
                "run",
                "x.lua",
                "--timeout",
                "2.5",
                "--plan-hash",
                "abc",
            ],
            &["lmcp", "run", "x.json", "--resume", "r1", "--retry-unknown"],
            &["lmcp", "run", "--", "--help"],
            &["lmcp", "run", "-yp", "a=1", "x.lua"],
            &["lmcp", "run", "-"],
            &["lmcp", "run", "-e", "return 1+1"],
            &["lmcp", "run", "-e", "-1", "--yes"],
            &["lmcp", "call", "calculate"],
            &[
                "lmcp",
                "call",
                "calculate",
                "{\"expression\": \"6*7\"}",
                "--yes",
            ],
            &["lmcp", "--json", "call", "echo", "-", "--timeout", "1"],
            &["lmcp", "call", "echo", "@args.json", "-y", "--json"],
            &[
                "lmcp",
                "call",
                "write_file",
                "path=a.txt",
                "content=@notes.txt",
            ],
        ];
        for line in taken {
            let hot = Cli::parse_hot(line.iter().copied())
                .unwrap_or_else(|| panic!("{line:?} should take the hot path"));
            assert_eq!(
                Ok(format!("{hot:?}")),
                full(line).map_err(|e| e.to_string()),
                "{line:?}"
            );
        }
        let left = [
            &["lmcp"][..],
            &["lmcp", "--help"],
            &["lmcp", "--version"],
            &["lmcp", "run", "--help"],
            &["lmcp", "run", "-h"],
            &["lmcp", "run", "--version"],
            &["lmcp", "run", "-V"],
            &["lmcp", "call", "--help"],
            &["lmcp", "run"],
            &["lmcp", "run", "x.lua", "--retry-unknown"],
            &["lmcp", "run", "x.lua", "--timeout", "soon"],
            &["lmcp", "run", "x.lua", "extra"],
            &["lmcp", "run", "x.lua", "-e", "return 1"],
            &["lmcp", "runs"],
            &["lmcp", "tools"],
            &["lmcp", "--json", "tools"],
            &["lmcp", "help", "run"],
        ];
        for line in left {
            assert!(Cli::parse_hot(line.iter().copied()).is_none(), "{line:?}");
        }
    }
}
