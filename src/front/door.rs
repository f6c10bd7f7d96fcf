//! What the front doors share: a gated call as a person's own action, who answers for the
//! person (`--yes`, a terminal prompt, nobody), progress lines, Ctrl-C, output for people or
//! `--json`, and text shown with its control characters escaped.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::gate::{
    AlwaysYes, Answer, AnswerFuture, CallContext, CallRequest, ConfirmMode, ConfirmRequest,
    Confirmer, NoPerson, Origin, Outcome, TtyPrompt,
};
use crate::host::Host;
use crate::text::arg_words::Words;
use crate::text::terminal::Stream;

/// The largest input read from a file or stdin, in bytes (`limits.input_mb`, set at start).
static INPUT_LIMIT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(16 << 20);

/// Sets the input limit from the config (the command line does this once at start).
pub(crate) fn set_input_limit(mib: u32) {
    INPUT_LIMIT.store(
        u64::from(mib.max(1)) << 20,
        std::sync::atomic::Ordering::Relaxed,
    );
}

/// Reads at most the input limit from `reader`; more is an error naming the limit and `what`.
fn read_bounded(reader: impl std::io::Read, what: &str) -> Result<String> {
    use std::io::Read;
    let limit = INPUT_LIMIT.load(std::sync::atomic::Ordering::Relaxed);
    let mut bytes = Vec::new();
    reader
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::Usage(format!("cannot read {what}: {e}")))?;
    if bytes.len() as u64 > limit {
        return Err(Error::Limit {
            what: format!("{what} is larger than {} MiB", limit >> 20),
            limit: format!("{} MiB (limits.input_mb)", limit >> 20),
        });
    }
    let text =
        String::from_utf8(bytes).map_err(|_| Error::Usage(format!("{what} is not UTF-8 text")))?;
    // A byte order mark some editors write is not part of the text (JSON and Lua refuse it).
    Ok(match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_string(),
        None => text,
    })
}

/// Reads a text file named on the command line, bounded by `limits.input_mb`.
pub(crate) fn read_input(path: &std::path::Path) -> Result<String> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    read_bounded(file, &path.display().to_string())
}

/// Reads stdin, bounded by `limits.input_mb`.
pub(crate) fn read_stdin(what: &str) -> Result<String> {
    read_bounded(std::io::stdin().lock(), what)
}

/// Writes to stdout through the terminal writer: controls escaped, and a closed pipe
/// (`lmcp types | head`) ends the process quietly with exit 0.
pub(crate) fn out(text: &str) {
    crate::text::terminal::show(Stream::Out, text);
}

/// [`out`] with a newline.
pub(crate) fn outln(text: &str) {
    crate::text::terminal::show_line(Stream::Out, text);
}

/// Prints `value` as one JSON line, or `human` for people.
pub(crate) fn emit(json: bool, value: &Value, human: impl FnOnce() -> String) {
    let text = if json {
        crate::text::terminal::json(value, false)
    } else {
        human()
    };
    outln(text.trim_end_matches('\n'));
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

/// Says yes to the one call a person just approved on screen (a recipe run bound to the plan
/// they read), and passes every other question, and any per-tool `ask` grant, to `then`.
pub(crate) struct YesTo {
    /// The tool whose question was already answered.
    pub tool: String,
    /// Who answers the rest.
    pub then: Arc<dyn Confirmer>,
}

impl Confirmer for YesTo {
    fn confirm(&self, request: &ConfirmRequest) -> AnswerFuture<'_> {
        if request.tool == self.tool && !request.every_time {
            Box::pin(std::future::ready(Answer::Yes))
        } else {
            self.then.confirm(request)
        }
    }

    fn ask_for_another(&self, request: &ConfirmRequest) -> AnswerFuture<'_> {
        self.then.ask_for_another(request)
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
    gated_with(host, tool, args, person(yes), progress).await
}

/// [`gated`] with a given confirmer.
pub(crate) async fn gated_with(
    host: &Arc<Host>,
    tool: &str,
    args: Value,
    confirmer: Arc<dyn Confirmer>,
    progress: bool,
) -> Outcome {
    gated_within(host, tool, args, confirmer, progress, None).await
}

/// [`gated_with`] under a deadline (`--timeout`), when one is given.
pub(crate) async fn gated_within(
    host: &Arc<Host>,
    tool: &str,
    args: Value,
    confirmer: Arc<dyn Confirmer>,
    progress: bool,
    timeout: Option<std::time::Duration>,
) -> Outcome {
    let mut ctx = CallContext::root(Origin::Cli, ConfirmMode::Confirmed).with_confirmer(confirmer);
    if let Some(t) = timeout {
        ctx = ctx.with_timeout(t);
    }
    if progress {
        ctx = with_progress(ctx);
    }
    cancel_on_ctrl_c(&ctx);
    in_flags(tool, host.call(CallRequest::new(tool, args, ctx)).await)
}

/// The arguments the subcommands give as flags, by tool: advice naming one of them (pass
/// `"replace": true`) says the flag the person typed (`--replace`) instead. Calls a subcommand
/// builds from flags are said so (`gated*`, [`call_tool`]); `lmcp call` says the arguments as
/// its pairs, or as JSON where the person wrote JSON ([`crate::text::arg_words::Words`]).
const FLAGS: &[(&str, &[(&str, &str)])] = &[
    ("recipe_save", &[("replace", "--replace")]),
    ("recipe_import", &[("replace", "--replace")]),
    ("custom_tool_create", &[("replace", "--replace")]),
    (
        "recipe_run",
        &[
            ("confirm", "--yes"),
            ("plan_hash", "--plan-hash"),
            ("resume", "--resume"),
            ("retry_unknown", "--retry-unknown"),
        ],
    ),
    ("friction_flush", &[("force", "--force")]),
];

/// A subcommand's outcome in the command line's words (see [`FLAGS`]).
fn in_flags(tool: &str, outcome: Outcome) -> Outcome {
    let flags = FLAGS
        .iter()
        .find(|(t, _)| *t == tool)
        .map_or(&[][..], |(_, f)| f);
    in_words(
        outcome,
        Words::Cli {
            flags,
            pairs: false,
        },
    )
}

/// An outcome's refusal or failure in `words`: what the door in use says to its caller
/// ([`Error::in_words`]).
pub(crate) fn in_words(outcome: Outcome, words: Words<'_>) -> Outcome {
    let say = |reason: String| crate::text::arg_words::say(&reason, words);
    match outcome {
        Outcome::Failed(e) => Outcome::Failed(e.in_words(words)),
        Outcome::Denied { tool, reason } => Outcome::Denied {
            tool,
            reason: say(reason),
        },
        Outcome::NeedsConfirmation { tool, reason } => Outcome::NeedsConfirmation {
            tool,
            reason: say(reason),
        },
        other => other,
    }
}

/// Shows progress reports on one stderr line, on a terminal.
pub(crate) fn with_progress(ctx: CallContext) -> CallContext {
    if !crate::text::terminal::is_terminal(Stream::Err) {
        return ctx;
    }
    ctx.with_progress(Arc::new(|p| {
        let total = p.total.unwrap_or(0);
        crate::text::terminal::clear_line(Stream::Err);
        errw!("{}", crate::text::escape_controls(&p.message));
        if p.total.is_some() && p.done >= total {
            crate::text::terminal::clear_line(Stream::Err);
        }
    }))
}

/// Asks a yes/no question on the terminal; anything but y or yes is no.
pub(crate) fn ask(question: &str) -> Result<bool> {
    errw!("{question} [y/N] ");
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
pub(crate) async fn call_tool(
    host: &Arc<Host>,
    name: &str,
    args: Value,
    yes: bool,
    json: bool,
) -> Result<u8> {
    let ctx = CallContext::root(Origin::Cli, ConfirmMode::Confirmed).with_confirmer(person(yes));
    cancel_on_ctrl_c(&ctx);
    let outcome = in_flags(name, host.call(CallRequest::new(name, args, ctx)).await);
    render_outcome(&outcome, json);
    Ok(outcome.exit_code())
}

/// Cancels the context's call tree when the user presses Ctrl-C.
pub(crate) fn cancel_on_ctrl_c(ctx: &CallContext) {
    let cancel = ctx.cancel_token().clone();
    let mut ctrl_c = CtrlC::listen();
    tokio::spawn(async move {
        if ctrl_c.next().await {
            cancel.cancel();
        }
    });
}

/// Ctrl-C, listened for from the moment it is made. tokio's `ctrl_c()` registers only when a
/// task first polls it: a Ctrl-C before that killed the process (or was lost, when SIGINT came
/// in ignored), which happened under load. Make it on the runtime, before the work starts.
pub struct CtrlC {
    #[cfg(unix)]
    signal: Option<tokio::signal::unix::Signal>,
}

impl CtrlC {
    /// Starts listening now. Call it on a runtime thread.
    pub fn listen() -> CtrlC {
        CtrlC {
            #[cfg(unix)]
            signal: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok(),
        }
    }

    /// Waits for the next Ctrl-C; false when none can come.
    pub async fn next(&mut self) -> bool {
        #[cfg(unix)]
        {
            match &mut self.signal {
                Some(s) => s.recv().await.is_some(),
                None => false,
            }
        }
        #[cfg(not(unix))]
        {
            tokio::signal::ctrl_c().await.is_ok()
        }
    }
}

/// Who answers for the person in `lmcp run`.
pub(crate) enum RunPerson {
    /// `--yes`: a person's yes given up front.
    Yes,
    /// A person at a terminal, asked once before the run (and again by a per-tool `ask`).
    Asked(Arc<TtyPrompt>),
    /// Nobody can be asked: the run is a dry run.
    Nobody,
}

/// Picks who answers for a command-line run: `--yes` answers yes; a person at a terminal is
/// asked (on the controlling terminal when stdin holds the script, as sudo and git ask);
/// with no terminal at all nobody can be, and state-changing calls are previewed.
pub(crate) fn run_person(yes: bool, script_on_stdin: bool) -> RunPerson {
    if yes {
        RunPerson::Yes
    } else if script_on_stdin {
        match crate::text::terminal::Tty::open() {
            Some(tty) => RunPerson::Asked(Arc::new(TtyPrompt::on(tty))),
            None => RunPerson::Nobody,
        }
    } else if std::io::stdin().is_terminal() {
        RunPerson::Asked(Arc::new(TtyPrompt::new()))
    } else {
        RunPerson::Nobody
    }
}

/// Reads `--timeout`: a positive number of seconds.
pub(crate) fn timeout_arg(secs: Option<f64>) -> Result<Option<Duration>> {
    secs.map(|s| {
        crate::program::compile::check_timeout(s, MAX_TIMEOUT_SECS)
            .map_err(|m| Error::Usage(format!("--timeout: {m}")))
    })
    .transpose()
}

/// Longest `--timeout` accepted, in seconds.
pub const MAX_TIMEOUT_SECS: f64 = 86_400.0;

/// Prints an outcome: the result on stdout, refusals and errors on stderr (or all as JSON).
pub(crate) fn render_outcome(outcome: &Outcome, json: bool) {
    if json {
        outln(&crate::text::terminal::json(&outcome.to_json(), false));
        return;
    }
    match outcome {
        Outcome::Done(v) => match v {
            Value::String(s) => outln(s),
            other => outln(&crate::text::terminal::json(other, true)),
        },
        Outcome::Preview(p) => {
            outln(&format!(
                "preview (nothing was done): {}",
                shown(&p.summary)
            ));
        }
        Outcome::Denied { tool, reason } => {
            errln!("denied: `{}`: {}", shown(tool), shown(reason))
        }
        Outcome::NeedsConfirmation { tool, reason } => {
            errln!(
                "not run: `{}` needs confirmation: {}",
                shown(tool),
                shown(reason)
            )
        }
        Outcome::Failed(e) => errln!("error: {}", shown(&for_people(&e.to_string()))),
    }
}

/// An error's text as the command line says it to people: a tool named with its command
/// (`skill_list (`lmcp skill list`)`) said as the command. Errors whose text is made as they
/// are shown (an unknown tool's suggestions) are said so here, where the command line prints.
pub(crate) fn for_people(text: &str) -> String {
    crate::text::arg_words::say(text, Words::COMMAND_LINE)
}

/// A message for people: lines kept, anything that could rewrite the terminal escaped.
pub(crate) fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    crate::text::escape_controls_keep_lines(text)
}

/// The widest a column other than the last grows; longer cells are clipped with `…` (a name
/// read from a damaged file can be any length).
const MAX_COLUMN: usize = 60;

/// Left-aligned columns, two spaces apart.
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    table_within(header, rows, MAX_COLUMN)
}

/// [`table`] with columns other than the last at most `max` wide (the REPL's `/tools` keeps
/// the titles on a line).
pub(crate) fn table_within(header: &[&str], rows: &[Vec<String>], max: usize) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count()).min(max);
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else if c.chars().count() > widths[i] {
                let clipped: String = c.chars().take(widths[i].saturating_sub(1)).collect();
                s.push_str(&format!("{clipped}…  "));
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

/// Refuses an output into lmcp's own folders (its config or data, all but the workspace),
/// however the folder is reached: `--force` never writes over lmcp's own settings.
pub(crate) fn refuse_own_folders(
    host: &Host,
    folder: &std::path::Path,
    shown: &std::path::Path,
) -> Result<()> {
    let real = std::fs::canonicalize(folder).map_err(|e| Error::io(folder, e))?;
    if crate::store::OwnFolders::of(host.paths()).contains(&real) {
        return Err(Error::Refused(format!(
            "{} is inside lmcp's own settings or data; write it somewhere else",
            shown.display()
        )));
    }
    Ok(())
}

/// Writes a command's `-o FILE` output: atomically, to a regular file, in a folder that exists.
/// An existing file that is not a regular file (a symlink, FIFO or device) is replaced only with
/// `force`, and a folder never; no parent folder is created that was not asked for.
pub(crate) fn write_output(
    host: &Host,
    path: &std::path::Path,
    bytes: &[u8],
    force: bool,
) -> Result<()> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    };
    if !parent.is_dir() {
        return Err(Error::Usage(format!(
            "{} does not exist; create the folder first",
            parent.display()
        )));
    }
    refuse_own_folders(host, parent, path)?;
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        let kind = meta.file_type();
        if kind.is_dir() {
            return Err(Error::Refused(format!("{} is a folder", path.display())));
        }
        if !kind.is_file() && !force {
            let what = if kind.is_symlink() {
                "a symlink"
            } else {
                "not a regular file (a device, FIFO or socket)"
            };
            return Err(Error::Refused(format!(
                "{} is {what}; nothing was written. Pass --force to replace it with a regular file",
                path.display()
            )));
        }
    }
    crate::store::atomic_write(path, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::Scripted;
    use crate::registry::Effect;

    #[test]
    fn tables_clip_cells_too_wide_for_a_column() {
        let long = "p".repeat(100_000);
        let t = table(
            &["A", "B"],
            &[vec![long.clone(), "x".into()], vec!["s".into(), long]],
        );
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[0].trim_end(),
            format!("A{}B", " ".repeat(MAX_COLUMN + 1))
        );
        assert_eq!(lines[1], format!("{}…  x", "p".repeat(MAX_COLUMN - 1)));
        assert!(lines[2].starts_with(&format!("s{}p", " ".repeat(MAX_COLUMN + 1))));
    }

    fn request(tool: &str, every_time: bool) -> ConfirmRequest {
        ConfirmRequest {
            tool: tool.into(),
            effect: Effect::Write,
            destructive: true,
            args: Value::Null,
            summary: String::new(),
            why: String::new(),
            calls: Vec::new(),
            hosts: Vec::new(),
            every_time,
            asked_by: None,
        }
    }

    #[tokio::test]
    async fn yes_to_covers_only_the_call_shown_and_never_a_per_tool_ask() {
        let then = Arc::new(Scripted::new([Answer::No, Answer::No]));
        let c = YesTo {
            tool: "recipe_run".into(),
            then: then.clone(),
        };
        assert_eq!(c.confirm(&request("recipe_run", false)).await, Answer::Yes);
        assert_eq!(c.confirm(&request("recipe_run", true)).await, Answer::No);
        assert_eq!(c.confirm(&request("write_file", false)).await, Answer::No);
        assert_eq!(then.asked().len(), 2);
    }
}
