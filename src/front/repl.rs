//! `lmcp repl`: try tools by hand in Lua, with completion and history.
//!
//! One sandboxed Lua state lives for the whole session. Globals persist between lines, and so do
//! a chunk's top-level `local`s, as in node and ipython (`local n = 6`, then `n * 7` gives 42;
//! `locals.rs`, `session_scope.rs`). A line that does not compile yet because it ends too early
//! continues on a `>>` prompt. Expressions print their value, on one line when it fits the
//! terminal, else a line per entry (`inspect` with a width); `tools.NAME{...}` calls go through
//! the gate with origin `repl` and the session's confirmation mode (default: ask y/N before each
//! state-changing call). Meta-commands start with `/`, which cannot begin a Lua statement (`:`
//! could: `::label::`). Ctrl-C stops the running chunk and keeps the session; at the prompt it
//! clears the line. Ctrl-D exits. History lives in the data directory, and is not written in
//! private mode.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};

use rustyline::completion::{Completer, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::DefaultHistory;
use rustyline::validate::Validator;
use rustyline::{CompletionType, Config, Context, Editor, Helper};
use serde_json::Value as Json;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::gate::{CallContext, ConfirmMode, Confirmer, NoPerson, Origin, TtyPrompt};
use crate::host::Host;
use crate::registry::Profile;
use crate::script::{Output, Vm, VmOptions};
use crate::text::arg_words::Words;

use super::keep::{Chunk, Kept};
use super::session_scope::SessionScope;

/// What one input line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// Nothing (blank line).
    Empty,
    /// A meta-command.
    Meta(Meta),
    /// Lua source.
    Lua(String),
}

/// The `/` commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Meta {
    /// `/help`
    Help,
    /// `/tools`
    Tools,
    /// `/doc NAME`
    Doc(String),
    /// `/confirm` (show) or `/confirm ask|preview|yes`
    Confirm(Option<ConfirmMode>),
    /// `/history`: the kept chunks.
    History,
    /// `/drop N...`
    Drop(Vec<usize>),
    /// `/params` (show) or `/params NAME...` (mark).
    Params(Vec<String>),
    /// `/save recipe|tool NAME [-o FILE] [--replace] [DESCRIPTION]`
    Save(Save),
    /// `/quit` or `/exit`
    Quit,
    /// Anything else starting with `/`, with what went wrong.
    Bad(String),
}

/// What `/save` makes of the kept chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaveAs {
    /// A recipe (`recipe_save`).
    Recipe,
    /// A custom tool (`custom_tool_create`).
    Tool,
}

/// `/save recipe|tool NAME [-o FILE] [--replace] [DESCRIPTION]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Save {
    /// Recipe or tool.
    pub kind: SaveAs,
    /// The program's name.
    pub name: String,
    /// `-o FILE`: write the `.lua` there instead of saving it.
    pub file: Option<std::path::PathBuf>,
    /// `--replace`: save over a program of the same name (without it, `/save` asks).
    pub replace: bool,
    /// The description given on the line; asked for when absent.
    pub description: Option<String>,
}

const SAVE_USAGE: &str = "use /save recipe NAME or /save tool user_NAME, then optionally \
                          -o FILE.lua, --replace and a description";

impl SaveAs {
    /// The word `/save` takes for it.
    fn word(self) -> &'static str {
        match self {
            SaveAs::Recipe => "recipe",
            SaveAs::Tool => "tool",
        }
    }
}

fn parse_save(rest: &str) -> Meta {
    let mut words = rest.split_whitespace();
    let kind = match words.next() {
        Some("recipe") => SaveAs::Recipe,
        Some("tool") => SaveAs::Tool,
        _ => return Meta::Bad(SAVE_USAGE.into()),
    };
    let Some(name) = words.next().filter(|n| !n.starts_with('-')) else {
        return Meta::Bad(SAVE_USAGE.into());
    };
    let mut file = None;
    let mut replace = false;
    let mut words: Vec<&str> = words.collect();
    // the options, in any order, before the description
    loop {
        match words.first() {
            Some(&"-o") if file.is_none() => {
                match words
                    .get(1)
                    .filter(|f| !f.starts_with('-') && !matches!(**f, "\"\"" | "''"))
                {
                    Some(f) => file = Some(std::path::PathBuf::from(f)),
                    None => return Meta::Bad("-o needs a file name, like -o tried.lua".into()),
                }
                words.drain(..2);
            }
            Some(&"--replace") if !replace => {
                replace = true;
                words.remove(0);
            }
            _ => break,
        }
    }
    let description = (!words.is_empty()).then(|| words.join(" "));
    Meta::Save(Save {
        kind,
        name: name.to_string(),
        file,
        replace,
        description,
    })
}

/// Parses one line typed at the main prompt.
pub fn parse_line(line: &str) -> Input {
    let trimmed = line.trim();
    if trimmed.is_empty() {
        return Input::Empty;
    }
    let Some(cmd) = trimmed.strip_prefix('/') else {
        return Input::Lua(line.to_string());
    };
    let mut words = cmd.split_whitespace();
    let name = words.next().unwrap_or("");
    match name {
        "save" => return Input::Meta(parse_save(cmd["save".len()..].trim())),
        "params" => {
            return Input::Meta(Meta::Params(words.map(str::to_string).collect()));
        }
        _ => {}
    }
    let arg = words.next();
    let extra = words.next();
    let meta = match (name, arg, extra) {
        ("help" | "h" | "?", None, _) => Meta::Help,
        ("tools", None, _) => Meta::Tools,
        ("doc", Some(n), None) => Meta::Doc(n.to_string()),
        ("doc", None, _) => Meta::Bad("/doc needs a tool name, like /doc calculate".into()),
        ("confirm", None, _) => Meta::Confirm(None),
        ("confirm", Some(m), None) => match ConfirmMode::parse(m) {
            Some(mode) => Meta::Confirm(Some(mode)),
            None => Meta::Bad(format!(
                "unknown mode `{m}`; use /confirm ask, /confirm preview or /confirm yes"
            )),
        },
        ("history", None, _) => Meta::History,
        ("drop", Some(_), _) => {
            let numbers: std::result::Result<Vec<usize>, String> = cmd["drop".len()..]
                .split_whitespace()
                .map(|n| {
                    n.parse()
                        .map_err(|_| format!("/drop needs chunk numbers from /history, not `{n}`"))
                })
                .collect();
            match numbers {
                Ok(n) => Meta::Drop(n),
                Err(m) => Meta::Bad(m),
            }
        }
        ("drop", None, _) => Meta::Bad("/drop needs a chunk number from /history".into()),
        ("quit" | "exit" | "q", None, _) => Meta::Quit,
        _ => Meta::Bad(format!(
            "unknown command `/{name}`; /help lists the commands"
        )),
    };
    Input::Meta(meta)
}

const HELP: &str = "\
Type Lua. Expressions print their value; top-level locals last the session; tools are functions:
  tools.calculate{expression = \"2^10\"}
  for _, e in ipairs(tools.list_dir{}.entries) do print(e.name) end
Globals: tools, params, json, log, sleep, lmcp, require (inspect, tbl, retry, test).

Commands:
  /help               this text
  /tools              list the tools
  /doc NAME           a tool's description and arguments
  /confirm [MODE]     how state-changing calls are confirmed: ask (default), preview, yes
  /history            the chunks kept so far (those that ran without error)
  /drop N...          leave these chunks out
  /params [NAME...]   lift `local NAME = <literal>` lines into parameters (clear: none)
  /save recipe NAME [-o FILE] [--replace] [DESCRIPTION]
  /save tool user_NAME [-o FILE] [--replace] [DESCRIPTION]
                      the kept chunks as one Lua program, shown, then saved (or written to FILE);
                      one of the same name is replaced if you say so (asked, or --replace)
  /quit               leave (or Ctrl-D)
Tab completes globals and locals, tools.NAME, argument names inside tools.NAME{...} and\nmodule names in require(\"...\"); a second Tab lists the candidates.
Ctrl-C stops a running chunk; a line ending early continues on the next (>>).";

/// The widest a tool name is shown in `/tools` before it is clipped with `…` (`/doc` and Tab
/// give it whole), so the titles stay in one column on an 80-column terminal.
const TOOL_NAME_COLUMN: usize = 32;

/// `/tools`: name, effect and title in columns whose widths come from the rows.
fn tools_listing(rows: &[Vec<String>]) -> String {
    super::door::table_within(&["NAME", "EFFECT", "TITLE"], rows, TOOL_NAME_COLUMN)
}

/// Lua keywords, completed like globals.
const KEYWORDS: &[&str] = &[
    "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if", "in",
    "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while",
];

/// Each global's name and, for tables, the names of its fields: what completion offers.
type GlobalNames = Arc<Mutex<Vec<(String, Vec<String>)>>>;

/// Completion for the REPL: globals (and one level of their fields), tool names and tool
/// argument names. Globals are a snapshot refreshed after every line.
pub struct ReplHelper {
    host: Arc<Host>,
    globals: GlobalNames,
    /// What `require` can find: the stdlib modules (and a skill's own, in a VM that has them).
    modules: Vec<String>,
}

impl ReplHelper {
    fn tool_names(&self) -> Vec<String> {
        self.host
            .tools(Profile::Full)
            .iter()
            .map(|(t, _)| t.spec().name.clone())
            .collect()
    }

    fn arg_names(&self, tool: &str) -> Vec<String> {
        self.host
            .registry()
            .get(tool)
            .and_then(|t| {
                t.spec()
                    .input_schema
                    .get("properties")
                    .and_then(Json::as_object)
                    .map(|p| p.keys().cloned().collect())
            })
            .unwrap_or_default()
    }

    /// The candidates at `pos`: where the replaced word starts, and the words.
    pub fn candidates(&self, line: &str, pos: usize) -> (usize, Vec<String>) {
        let before = &line[..pos];
        let start = before
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
            .map_or(0, |i| {
                i + before[i..].chars().next().map_or(1, char::len_utf8)
            });
        if let Some(at) = open_require(before) {
            let typed = &before[at..];
            let mut names: Vec<String> = self
                .modules
                .iter()
                .filter(|m| m.starts_with(typed))
                .cloned()
                .collect();
            names.sort();
            return (at, names);
        }
        let word = &before[start..];
        if let Some(tool) = open_tool_call(before)
            && !word.contains('.')
        {
            let words = self
                .arg_names(&tool)
                .into_iter()
                .filter(|a| a.starts_with(word))
                .map(|a| format!("{a} = "))
                .collect();
            return (start, words);
        }
        if let Some((table, field)) = word.rsplit_once('.') {
            let members: Vec<String> = if table == "tools" {
                self.tool_names()
            } else {
                let globals = self.globals.lock().unwrap_or_else(|p| p.into_inner());
                globals
                    .iter()
                    .find(|(g, _)| g == table)
                    .map(|(_, m)| m.clone())
                    .unwrap_or_default()
            };
            let mut out: Vec<String> = members
                .into_iter()
                .filter(|m| m.starts_with(field))
                .map(|m| format!("{table}.{m}"))
                .collect();
            out.sort();
            return (start, out);
        }
        let globals = self.globals.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<String> = globals
            .iter()
            .map(|(g, _)| g.clone())
            .chain(KEYWORDS.iter().map(|k| k.to_string()))
            .filter(|g| g.starts_with(word) && !word.is_empty())
            .collect();
        out.sort();
        out.dedup();
        (start, out)
    }
}

/// Where the module name starts when `before` ends inside `require("…`, `require '…` or the
/// like: what is typed there is a module's name, not a global's.
fn open_require(before: &str) -> Option<usize> {
    let quote = before.rfind(['"', '\''])?;
    let typed = &before[quote + 1..];
    if !typed
        .chars()
        .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
    {
        return None;
    }
    let head = before[..quote].trim_end();
    let head = head.strip_suffix('(').map_or(head, str::trim_end);
    let rest = head.strip_suffix("require")?;
    let part_of_a_name = |c: char| c.is_alphanumeric() || matches!(c, '_' | '.' | ':');
    (!rest.ends_with(part_of_a_name)).then_some(quote + 1)
}

/// The tool whose argument table is open at the end of `before` (`tools.NAME{` or
/// `tools.NAME({` without its closing brace), if any.
fn open_tool_call(before: &str) -> Option<String> {
    let at = before.rfind("tools.")?;
    let rest = &before[at + "tools.".len()..];
    let name_len = rest.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    let name = &rest[..name_len];
    let after = rest[name_len..].trim_start();
    let after = after
        .strip_prefix('(')
        .map(str::trim_start)
        .unwrap_or(after);
    let inside = after.strip_prefix('{')?;
    let depth = inside.chars().fold(1i32, |d, c| match c {
        '{' => d + 1,
        '}' => d - 1,
        _ => d,
    });
    (depth > 0).then(|| name.to_string())
}

impl Completer for ReplHelper {
    type Candidate = Pair;
    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let (start, words) = self.candidates(line, pos);
        Ok((
            start,
            words
                .into_iter()
                .map(|w| Pair {
                    display: w.clone(),
                    replacement: w,
                })
                .collect(),
        ))
    }
}

impl Hinter for ReplHelper {
    type Hint = String;
}

impl Highlighter for ReplHelper {
    fn highlight_prompt<'b, 's: 'b, 'p: 'b>(
        &'s self,
        prompt: &'p str,
        _default: bool,
    ) -> Cow<'b, str> {
        Cow::Borrowed(prompt)
    }
}

impl Validator for ReplHelper {}

impl Helper for ReplHelper {}

/// The session's state between lines.
struct Session {
    host: Arc<Host>,
    handle: tokio::runtime::Handle,
    vm: Vm,
    mode: ConfirmMode,
    current: Arc<Mutex<Running>>,
    globals: GlobalNames,
    /// The chunks that ran without error, for `/save`.
    kept: Kept,
    /// Where the chunks' top-level locals live between lines.
    scope: SessionScope,
}

/// The chunk being run: its cancellation token (Ctrl-C cancels it), and whether it is still
/// running, so the watchdog can tell a chunk that ignored Ctrl-C from one that stopped.
#[derive(Debug, Default)]
struct Running {
    token: CancellationToken,
    line: u64,
    busy: bool,
}

/// Marks the current chunk as finished when it returns, however it returns.
struct Finished<'a>(&'a Mutex<Running>);

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).busy = false;
    }
}

/// Ctrl-C cancels the running chunk; should it still run [`script::WATCHDOG_GRACE`] later (a C
/// call no hook can interrupt), the process ends rather than hang the terminal.
fn watch_ctrl_c(
    current: Arc<Mutex<Running>>,
    handle: &tokio::runtime::Handle,
    mut ctrl_c: super::door::CtrlC,
) {
    let runtime = handle.clone();
    handle.spawn(async move {
        while ctrl_c.next().await {
            let line = {
                let running = current.lock().unwrap_or_else(|p| p.into_inner());
                running.token.cancel();
                running.line
            };
            let watched = Arc::clone(&current);
            runtime.spawn(async move {
                tokio::time::sleep(crate::script::WATCHDOG_GRACE).await;
                let running = watched.lock().unwrap_or_else(|p| p.into_inner());
                if running.busy && running.line == line {
                    errln!(
                        "lmcp: a Lua chunk did not stop within {}s of Ctrl-C; ending the REPL",
                        crate::script::WATCHDOG_GRACE.as_secs()
                    );
                    std::process::exit(crate::script::WATCHDOG_EXIT);
                }
            });
        }
    });
}

impl Session {
    fn context(&self) -> CallContext {
        let token = CancellationToken::new();
        {
            let mut running = self.current.lock().unwrap_or_else(|p| p.into_inner());
            running.token = token.clone();
            running.line += 1;
            running.busy = true;
        }
        // `/confirm yes` confirms state-changing calls, but a grant that says ask still asks the
        // person: the confirmer is the same terminal prompt in every mode.
        let confirmer: Arc<dyn Confirmer> = session_confirmer();
        CallContext::root(Origin::Repl, self.mode)
            .with_confirmer(confirmer)
            .with_cancel(token)
    }

    /// Runs one complete chunk: an expression if it compiles as one, else statements, whose
    /// top-level locals become the session's (`locals.rs`). Values are shown to fit `width`
    /// columns.
    fn eval(&mut self, source: &str, width: usize) -> Result<Vec<String>> {
        self.vm.set_context(self.context());
        let _finished = Finished(&self.current);
        let scope = self.scope.next_chunk()?;
        let as_expr = format!("return {source}");
        let expression = self.vm.compile_in(&as_expr, "stdin", &scope).is_ok();
        let chunk = if expression {
            as_expr
        } else {
            // compiled as typed first: a syntax error points at what was typed, and Lua's own
            // `<const>` check holds inside the chunk
            self.vm.compile(source, "stdin")?;
            super::locals::for_session(source)
        };
        self.vm.take_called();
        self.vm.take_connected();
        let ran = self.vm.exec_in(&chunk, "stdin", &scope);
        let tools = self.vm.take_called();
        let hosts = self.vm.take_connected();
        let values = ran?;
        self.kept.push(Chunk {
            source: source.to_string(),
            expression,
            statement: !expression || self.vm.compile(source, "stdin").is_ok(),
            tools,
            hosts,
        });
        let inspect = self.vm.exec("return require('inspect')", "repl")?;
        let inspect = match inspect.into_iter().next() {
            Some(mlua::Value::Function(f)) => f,
            _ => {
                return Err(Error::Script {
                    message: "the inspect module is missing".into(),
                });
            }
        };
        let options = self
            .vm
            .lua()
            .create_table()
            .and_then(|t| t.set("width", width.max(20)).map(|()| t))
            .map_err(|e| Error::Script {
                message: format!("the result cannot be shown: {e}"),
            })?;
        let mut shown = Vec::new();
        for v in values {
            let text: String = inspect
                .call((v, &options))
                .unwrap_or_else(|e| format!("<{e}>"));
            shown.push(text);
        }
        for p in self.vm.take_previews() {
            shown.push(format!("(previewed, not run: {} — {})", p.tool, p.summary));
        }
        self.refresh_globals();
        Ok(shown)
    }

    /// The names completion offers: the session's locals, then the globals.
    fn refresh_globals(&self) {
        let mut snapshot = Vec::new();
        let slots = self.scope.slots().ok();
        let tables = slots.iter().chain(std::iter::once(self.vm.env()));
        let _ = tables.into_iter().try_for_each(|t| {
            t.for_each::<mlua::Value, mlua::Value>(|k, v| {
                // Only names Lua can spell after `.` are offered: the line editor draws
                // candidates itself, and a key read from someone's file could hold controls.
                if let mlua::Value::String(k) = k
                    && crate::program::compile::is_identifier(&k.to_string_lossy())
                {
                    let name = k.to_string_lossy();
                    let mut members = Vec::new();
                    if let mlua::Value::Table(t) = v {
                        let _ = t.for_each::<mlua::Value, mlua::Value>(|mk, _| {
                            if let mlua::Value::String(mk) = mk
                                && crate::program::compile::is_identifier(&mk.to_string_lossy())
                            {
                                members.push(mk.to_string_lossy());
                            }
                            Ok(())
                        });
                    }
                    snapshot.push((name, members));
                }
                Ok(())
            })
        });
        // Members of the string library are reached through `string.`.
        *self.globals.lock().unwrap_or_else(|p| p.into_inner()) = snapshot;
    }

    /// `/save`: the kept chunks as one program, shown, then saved through the gate (or written
    /// to the file given).
    fn save(&self, save: Save, ask: &mut dyn FnMut(&str) -> Option<String>) -> Result<()> {
        if self.kept.is_empty() {
            return Err(Error::Usage(
                "nothing to save: no chunk has run without error in this session".into(),
            ));
        }
        if save.kind == SaveAs::Tool
            && let Err(why) = crate::library::custom_tools::check_name(&save.name)
        {
            return Err(Error::Usage(format!(
                "nothing was saved: `{}` cannot name a tool: {why}",
                crate::text::escape_controls(&save.name)
            )));
        }
        let again = format!("/save {} {} --replace", save.kind.word(), save.name);
        let mut replace = save.replace;
        if !replace && save.file.is_none() && self.exists(save.kind, &save.name) {
            let what = match save.kind {
                SaveAs::Recipe => format!("a recipe named \"{}\"", save.name),
                SaveAs::Tool => format!("the tool {}", save.name),
            };
            let answer = ask(&format!("{what} exists; replace it? [y/N] ")).unwrap_or_default();
            if !matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes") {
                return Err(Error::Usage(format!(
                    "nothing was saved: {what} exists; `{again}` replaces it, or choose \
                     another name"
                )));
            }
            replace = true;
        }
        let description = match save.description {
            Some(d) => d,
            None => {
                outln!("{DESCRIPTION_QUESTION}");
                description_from(ask(DESCRIPTION_PROMPT))?
            }
        };
        let text = self.kept.program(&save.name, &description)?;
        outln!("{text}");
        outln!(
            "(---@uses lists the tools the kept chunks called; a branch the session did not take \
             may need more: write the program with -o FILE and add them)"
        );
        let chunk = format!("{}.lua", save.name);
        // the same checks as a file given to `lmcp recipe save` / `lmcp tool create`
        let (tool, mut args) = match save.kind {
            SaveAs::Recipe => (
                "recipe_save",
                serde_json::json!({"manifest": super::recipe::lua_manifest(&text, &chunk, &chunk)?}),
            ),
            SaveAs::Tool => (
                "custom_tool_create",
                super::tool_cmd::lua_tool_args(&text, &chunk, &chunk)?,
            ),
        };
        if let Some(file) = save.file {
            return self.write_program(save.kind, &file, &text, &args);
        }
        if replace {
            args["replace"] = Json::Bool(true);
        }
        let ctx = self.context();
        let _finished = Finished(&self.current);
        let outcome = self.handle.block_on(
            self.host
                .call(crate::gate::CallRequest::new(tool, args, ctx)),
        );
        if let crate::gate::Outcome::Preview(_) = outcome {
            outln!("previewed, not saved (/confirm preview): /confirm ask, then /save again");
            return Ok(());
        }
        // `replace` is said the way /save takes it
        let flags = [("replace", again.as_str())];
        super::door::in_words(
            outcome,
            Words::Cli {
                flags: &flags,
                pairs: false,
            },
        )
        .into_result()?;
        match save.kind {
            SaveAs::Recipe => outln!(
                "saved the recipe \"{}\"; run it with `lmcp recipe run {} --yes`",
                save.name,
                save.name
            ),
            SaveAs::Tool => outln!(
                "saved the tool {}; call it as tools.{}{{...}} or `lmcp call {}`",
                save.name,
                save.name,
                save.name
            ),
        }
        Ok(())
    }

    /// Whether a program `/save` would make is saved under `name` already.
    fn exists(&self, kind: SaveAs, name: &str) -> bool {
        match kind {
            SaveAs::Recipe => crate::library::recipes::exists(&self.host, name),
            SaveAs::Tool => self.host.registry().get(name).is_some(),
        }
    }

    /// `/save ... -o FILE`: the program checked as saving would check it, then written to a new
    /// file (never over one) instead of saved.
    fn write_program(
        &self,
        kind: SaveAs,
        file: &std::path::Path,
        text: &str,
        args: &Json,
    ) -> Result<()> {
        // checked as saving would check it, before anything is written
        match kind {
            SaveAs::Recipe => {
                let manifest = crate::library::recipes::parse_manifest(args["manifest"].clone())?;
                crate::library::recipes::check(self.host.registry(), manifest)?;
            }
            SaveAs::Tool => {
                let definition = serde_json::from_value(args.clone())
                    .map_err(|e| Error::Usage(format!("the tool cannot be defined: {e}")))?;
                crate::library::custom_tools::compile(self.host.registry(), definition)?;
            }
        }
        let parent = file.parent().filter(|p| !p.as_os_str().is_empty());
        if parent.is_some_and(|p| !p.is_dir()) {
            return Err(Error::Usage(format!(
                "{} is not a folder; give a file in an existing folder (nothing was written)",
                parent.unwrap_or(file).display()
            )));
        }
        if std::fs::symlink_metadata(file).is_ok() {
            return Err(Error::Usage(format!(
                "{} exists; give another file name (nothing was written)",
                file.display()
            )));
        }
        crate::store::atomic_write(file, text.as_bytes())?;
        let later = match kind {
            SaveAs::Recipe => "lmcp recipe save",
            SaveAs::Tool => "lmcp tool create",
        };
        outln!(
            "wrote {}; save it with `{later} {}`",
            file.display(),
            super::recipe::shell_quote(&file.display().to_string())
        );
        Ok(())
    }

    fn meta(&mut self, meta: Meta, ask: &mut dyn FnMut(&str) -> Option<String>) -> bool {
        match meta {
            Meta::History => outln!("{}", self.kept.listing()),
            Meta::Drop(numbers) => match self.kept.drop_chunks(&numbers) {
                Ok((dropped, lost)) => {
                    for (n, c) in numbers.iter().zip(&dropped) {
                        outln!(
                            "dropped chunk {n}: {}",
                            c.source.lines().next().unwrap_or("")
                        );
                    }
                    if !lost.is_empty() {
                        outln!(
                            "no longer parameters (set in a dropped chunk): {}",
                            lost.join(", ")
                        );
                    }
                    outln!("the chunks are numbered anew: /history shows them");
                }
                Err(e) => errln!("{e}"),
            },
            Meta::Params(names) if names.is_empty() => outln!("{}", self.kept.params_listing()),
            Meta::Params(names) => match self.kept.add_params(names) {
                Ok(()) => outln!("{}", self.kept.params_listing()),
                Err(e) => errln!("{e}"),
            },
            Meta::Save(save) => {
                if let Err(e) = self.save(save, ask) {
                    errln!("error: {e}");
                }
            }
            Meta::Help => outln!("{HELP}"),
            Meta::Tools => {
                let rows: Vec<Vec<String>> = self
                    .host
                    .tools(Profile::Full)
                    .iter()
                    .map(|(t, a)| {
                        let s = t.spec();
                        let title = if a.is_available() {
                            s.title.clone()
                        } else {
                            format!("{}  (unavailable)", s.title)
                        };
                        vec![s.name.clone(), s.effect.to_string(), title]
                    })
                    .collect();
                outln!("{}", tools_listing(&rows).trim_end());
            }
            Meta::Doc(name) => match self.host.registry().get(&name) {
                Some(t) => {
                    let s = t.spec();
                    outln!("{} — {} ({})\n{}", s.name, s.title, s.effect, s.description);
                    let required: Vec<&str> = s.input_schema["required"]
                        .as_array()
                        .map(|r| r.iter().filter_map(Json::as_str).collect())
                        .unwrap_or_default();
                    if let Some(props) = s.input_schema["properties"].as_object() {
                        for (k, p) in props {
                            let ty = p
                                .get("type")
                                .map(|t| t.to_string().replace('"', ""))
                                .unwrap_or_else(|| "any".into());
                            let opt = if required.contains(&k.as_str()) {
                                ""
                            } else {
                                "?"
                            };
                            let desc = p.get("description").and_then(Json::as_str).unwrap_or("");
                            outln!("  {k}{opt}: {ty}  {desc}");
                        }
                    }
                    outln!("example: tools.{}{{...}}", s.name);
                }
                None => {
                    let e = Error::UnknownTool {
                        suggestions: self.host.registry().closest(&name),
                        name,
                    };
                    errln!("{e}");
                }
            },
            Meta::Confirm(None) => outln!("confirmation: {}", mode_name(self.mode)),
            Meta::Confirm(Some(m)) => {
                self.mode = m;
                outln!("confirmation: {}", mode_name(m));
            }
            Meta::Quit => return false,
            Meta::Bad(msg) => errln!("{msg}"),
        }
        true
    }
}

/// Asked, on a line of its own, when `/save` was given no description.
const DESCRIPTION_QUESTION: &str =
    "Describe what the program does, in one line (an empty line cancels /save):";

/// The prompt the description is typed at: not `lmcp> `, so it is not taken for the next
/// command's.
const DESCRIPTION_PROMPT: &str = "description> ";

/// The description typed for `/save` (`None`: Ctrl-C or Ctrl-D). An empty answer, or one that
/// is a `/` command typed as if the question were not there, cancels the save with a message
/// rather than becoming the description.
fn description_from(answer: Option<String>) -> Result<String> {
    let answer = answer.unwrap_or_default();
    let answer = answer.trim();
    if answer.is_empty() {
        return Err(Error::Usage(
            "nothing was saved: a saved program needs a description; /save again and describe \
             it, or give it at the end of the /save line"
                .into(),
        ));
    }
    if answer.starts_with('/') {
        return Err(Error::Usage(format!(
            "nothing was saved: `{answer}` is a command, not a description; /save again and \
             describe the program"
        )));
    }
    Ok(answer.to_string())
}

/// Who answers in the REPL: the person at the terminal, or nobody when stdin is not one. Never
/// an always-yes, whatever the mode.
fn session_confirmer() -> Arc<dyn Confirmer> {
    if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        Arc::new(TtyPrompt::new())
    } else {
        Arc::new(NoPerson)
    }
}

fn mode_name(m: ConfirmMode) -> &'static str {
    match m {
        ConfirmMode::Ask => "ask (y/N before each state-changing call)",
        ConfirmMode::Preview => "preview (state-changing calls are previewed, not run)",
        ConfirmMode::Confirmed => "yes (state-changing calls run; ask grants still ask)",
    }
}

/// Runs the REPL until Ctrl-D or `/quit`. Call it from a blocking thread (not a runtime worker):
/// Lua waits for gated calls with `handle.block_on`. `ctrl_c` must be listening already (made on
/// the runtime before this thread started).
pub fn run_blocking(
    host: Arc<Host>,
    handle: tokio::runtime::Handle,
    ctrl_c: super::door::CtrlC,
) -> Result<u8> {
    let current = Arc::new(Mutex::new(Running::default()));
    watch_ctrl_c(Arc::clone(&current), &handle, ctrl_c);
    let config = host.config();
    let options = VmOptions {
        limits: config.limits.script(),
        output: Output::Terminal,
        ..Default::default()
    };
    let root = CallContext::root(Origin::Repl, ConfirmMode::Ask);
    let vm = Vm::new(host.caller(), handle.clone(), root, options)?;
    let globals = Arc::new(Mutex::new(Vec::new()));
    let scope = SessionScope::new(&vm)?;
    let mut session = Session {
        host: Arc::clone(&host),
        handle,
        vm,
        mode: ConfirmMode::Ask,
        current,
        globals: Arc::clone(&globals),
        kept: Kept::default(),
        scope,
    };
    session.vm.record_calls();
    session.refresh_globals();
    let _ = &session.handle;

    // several candidates are listed, as readline lists them, rather than cycled through
    let editor_config = Config::builder()
        .completion_type(CompletionType::List)
        .auto_add_history(true)
        .max_history_size(1000)
        .map_err(readline_error)?
        .build();
    let mut editor: Editor<ReplHelper, DefaultHistory> =
        Editor::with_config(editor_config).map_err(readline_error)?;
    editor.set_helper(Some(ReplHelper {
        host: Arc::clone(&host),
        globals,
        modules: crate::script::STDLIB_MODULES
            .iter()
            .map(|(n, _)| n.to_string())
            .collect(),
    }));
    let history_file = host.paths().data_dir.join("repl_history.txt");
    let _ = editor.load_history(&history_file);

    outln!(
        "lmcp {} — Lua 5.4 with every tool as tools.NAME{{...}}. /help for help, Ctrl-D to leave.",
        env!("CARGO_PKG_VERSION"),
    );
    let mut buffer = String::new();
    loop {
        let prompt = if buffer.is_empty() { "lmcp> " } else { ">> " };
        match editor.readline(prompt) {
            Ok(line) => {
                if buffer.is_empty() {
                    match parse_line(&line) {
                        Input::Empty => continue,
                        Input::Meta(m) => {
                            let mut ask = |prompt: &str| editor.readline(prompt).ok();
                            if !session.meta(m, &mut ask) {
                                break;
                            }
                            continue;
                        }
                        Input::Lua(_) => {}
                    }
                }
                if !buffer.is_empty() {
                    buffer.push('\n');
                }
                buffer.push_str(&line);
                if session.vm.is_incomplete(&buffer) {
                    continue;
                }
                let source = std::mem::take(&mut buffer);
                // the terminal's width, or 80 when it cannot be told
                let width = editor
                    .dimensions()
                    .map(|(w, _)| usize::from(w))
                    .filter(|w| *w > 0)
                    .unwrap_or(80);
                match session.eval(&source, width) {
                    Ok(lines) => {
                        for l in lines {
                            outln!("{l}");
                        }
                    }
                    Err(e) => errln!("error: {e}"),
                }
            }
            Err(ReadlineError::Interrupted) => {
                buffer.clear();
                continue;
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(readline_error(e)),
        }
        if !host.config().modes.private {
            let _ = editor.save_history(&history_file);
        }
    }
    Ok(0)
}

fn readline_error(e: ReadlineError) -> Error {
    Error::Usage(format!("the line editor failed: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_into_inputs() {
        assert_eq!(parse_line("   "), Input::Empty);
        assert_eq!(parse_line("x = 1"), Input::Lua("x = 1".into()));
        assert_eq!(parse_line("::top::"), Input::Lua("::top::".into()));
        assert_eq!(parse_line("/help"), Input::Meta(Meta::Help));
        assert_eq!(parse_line(" /tools "), Input::Meta(Meta::Tools));
        assert_eq!(
            parse_line("/doc calculate"),
            Input::Meta(Meta::Doc("calculate".into()))
        );
        assert_eq!(
            parse_line("/confirm preview"),
            Input::Meta(Meta::Confirm(Some(ConfirmMode::Preview)))
        );
        assert_eq!(
            parse_line("/confirm yes"),
            Input::Meta(Meta::Confirm(Some(ConfirmMode::Confirmed)))
        );
        assert_eq!(parse_line("/confirm"), Input::Meta(Meta::Confirm(None)));
        assert!(
            matches!(parse_line("/confirm maybe"), Input::Meta(Meta::Bad(m)) if m.contains("unknown mode"))
        );
        assert!(matches!(parse_line("/doc"), Input::Meta(Meta::Bad(_))));
        assert!(matches!(parse_line("/frob"), Input::Meta(Meta::Bad(m)) if m.contains("/frob")));
        assert_eq!(parse_line("/history"), Input::Meta(Meta::History));
        assert_eq!(parse_line("/drop 2 4"), Input::Meta(Meta::Drop(vec![2, 4])));
        assert!(matches!(parse_line("/drop x"), Input::Meta(Meta::Bad(m)) if m.contains("`x`")));
        assert_eq!(
            parse_line("/params a b"),
            Input::Meta(Meta::Params(vec!["a".into(), "b".into()]))
        );
        assert_eq!(
            parse_line("/save tool user_x -o out.lua Adds  two"),
            Input::Meta(Meta::Save(Save {
                kind: SaveAs::Tool,
                name: "user_x".into(),
                file: Some("out.lua".into()),
                replace: false,
                description: Some("Adds two".into()),
            }))
        );
        assert_eq!(
            parse_line("/save recipe r"),
            Input::Meta(Meta::Save(Save {
                kind: SaveAs::Recipe,
                name: "r".into(),
                file: None,
                replace: false,
                description: None,
            }))
        );
        // --replace, before or after -o, and not once the description began
        for line in [
            "/save recipe r --replace -o f.lua Adds --replace",
            "/save recipe r -o f.lua --replace Adds --replace",
        ] {
            assert_eq!(
                parse_line(line),
                Input::Meta(Meta::Save(Save {
                    kind: SaveAs::Recipe,
                    name: "r".into(),
                    file: Some("f.lua".into()),
                    replace: true,
                    description: Some("Adds --replace".into()),
                })),
                "{line}"
            );
        }
        for bad in [
            "/save",
            "/save thing x",
            "/save tool",
            "/save recipe r -o",
            "/save recipe -o f.lua d",
            "/save recipe r -o -o d",
            "/save recipe r -o \"\" d",
        ] {
            assert!(
                matches!(parse_line(bad), Input::Meta(Meta::Bad(_))),
                "{bad}"
            );
        }
        assert_eq!(parse_line("/quit"), Input::Meta(Meta::Quit));
    }

    #[test]
    fn tools_are_listed_in_columns() {
        let long = format!("mcp__server__{}", "x".repeat(40));
        let rows = vec![
            vec!["calculate".into(), "read".into(), "Calculate".into()],
            vec![long, "send".into(), "Far away".into()],
            vec!["write_file".into(), "write".into(), "Write a file".into()],
        ];
        let text = tools_listing(&rows);
        let lines: Vec<&str> = text.lines().collect();
        let title_at: Vec<usize> = lines
            .iter()
            .zip(["TITLE", "Calculate", "Far away", "Write a file"])
            .map(|(l, title)| l[..l.find(title).unwrap()].chars().count())
            .collect();
        assert!(title_at.iter().all(|&c| c == title_at[0]), "{text}");
        assert_eq!(
            title_at[0],
            TOOL_NAME_COLUMN + 2 + "EFFECT".len() + 2,
            "{text}"
        );
        assert!(
            lines[2].starts_with(&format!("mcp__server__{}…  send", "x".repeat(18))),
            "{text}"
        );
    }

    #[test]
    fn a_description_is_never_empty_nor_a_command() {
        assert_eq!(
            description_from(Some("  Adds two ".into())).unwrap(),
            "Adds two"
        );
        for refused in [
            None,
            Some("".into()),
            Some("   ".into()),
            Some("/tools".into()),
        ] {
            let e = description_from(refused.clone()).unwrap_err().to_string();
            assert!(e.contains("nothing was saved"), "{refused:?}: {e}");
            // a string continued on the next line without `\` kept its indentation (#34)
            assert!(!e.contains("  "), "{refused:?}: {e}");
        }
    }

    #[test]
    fn open_tool_calls_are_found() {
        assert_eq!(
            open_tool_call("x = tools.calculate{ex").as_deref(),
            Some("calculate")
        );
        assert_eq!(
            open_tool_call("tools.write_file({path = 'a', con").as_deref(),
            Some("write_file")
        );
        assert_eq!(
            open_tool_call("tools.calculate{expression = '1'} + x"),
            None
        );
        assert_eq!(open_tool_call("tools.calc"), None);
    }

    #[test]
    fn completion_candidates() {
        let dir = tempfile::tempdir().unwrap();
        let host = Host::open(crate::store::Paths::under(dir.path())).unwrap();
        let globals = Arc::new(Mutex::new(vec![
            (
                "string".to_string(),
                vec!["format".to_string(), "find".to_string()],
            ),
            ("tostring".to_string(), vec![]),
            ("tools".to_string(), vec![]),
        ]));
        let h = ReplHelper {
            host,
            globals,
            modules: vec!["tbl".into(), "test".into(), "inspect".into()],
        };
        assert_eq!(
            h.candidates("tools.calc", 10),
            (0, vec!["tools.calculate".to_string()])
        );
        assert_eq!(
            h.candidates("x = tools.calculate{ex", 22),
            (20, vec!["expression = ".to_string()])
        );
        assert_eq!(
            h.candidates("print(string.f", 14),
            (
                6,
                vec!["string.find".to_string(), "string.format".to_string()]
            )
        );
        assert_eq!(h.candidates("tos", 3), (0, vec!["tostring".to_string()]));
        assert_eq!(h.candidates("whi", 3), (0, vec!["while".to_string()]));
        // inside require's string: module names, not globals (`table`, `tostring`)
        for line in ["local t = require(\"t", "require 't", "require ( \"t"] {
            assert_eq!(
                h.candidates(line, line.len()),
                (line.len() - 1, vec!["tbl".to_string(), "test".to_string()]),
                "{line}"
            );
        }
        for not_require in ["x = \"t", "m.require(\"t", "required(\"t"] {
            let (_, words) = h.candidates(not_require, not_require.len());
            assert!(!words.contains(&"tbl".to_string()), "{not_require}");
        }
    }
}
