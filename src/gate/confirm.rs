//! Asking a person before a call runs.
//!
//! The gate asks a [`Confirmer`] when a call runs under an `ask` grant, or when a state-changing
//! call runs in `ask` confirmation mode. Each front door supplies its own: [`TtyPrompt`] on a
//! terminal (default No), [`AlwaysYes`] when a person passed `--yes`, [`NoPerson`] when nobody can
//! be asked (no TTY, no flag: the call is not run), MCP elicitation later, and [`Scripted`] for
//! tests.

use std::collections::VecDeque;
use std::future::Future;
use std::io::IsTerminal;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::approval::ShownCall;
use crate::registry::Effect;
use crate::text::escape_controls;
use crate::text::terminal::Tty;

/// A person's answer, or the lack of one. Each is reported in its own words: a person who
/// declined is not one who dismissed the question, nor a client that could not show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Run it.
    Yes,
    /// Do not run it.
    No,
    /// The person dismissed the question without answering (MCP's "cancel").
    Dismissed,
    /// Nobody could be asked (no terminal, a client without elicitation).
    CannotAsk,
    /// The question could not be shown: the client answered with an error (its words).
    Failed(String),
}

/// What the person is asked about.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfirmRequest {
    /// The tool's name.
    pub tool: String,
    /// Its effect.
    pub effect: Effect,
    /// Whether it may destroy data.
    pub destructive: bool,
    /// The validated arguments.
    pub args: Value,
    /// One line: what the call would do.
    pub summary: String,
    /// Why we ask (which grant or mode).
    pub why: String,
    /// For a program: every state-changing call it may make. A yes covers exactly these.
    pub calls: Vec<ShownCall>,
    /// For a program: the hosts its requests may reach (`---@connect`). A yes covers these
    /// hosts and no others.
    pub hosts: Vec<String>,
    /// The tool's own grant is `ask`: it is asked every time, whatever was approved before.
    pub every_time: bool,
    /// Set when the question is not lmcp's but another's (an MCP server, during one of its
    /// tools' calls): who asks. Shown as theirs, in their words, and never as a call to allow.
    pub asked_by: Option<String>,
}

/// The future a confirmer returns.
pub type AnswerFuture<'a> = Pin<Box<dyn Future<Output = Answer> + Send + 'a>>;

/// Something that can ask a person whether a call may run.
pub trait Confirmer: Send + Sync {
    /// Asks about `request`.
    fn confirm(&self, request: &ConfirmRequest) -> AnswerFuture<'_>;

    /// Puts a question someone else asks (another MCP server, during one of its tools' calls)
    /// to the person, labelled as theirs. Only a person answers it: a yes given up front
    /// (`--yes`) is a yes to lmcp's own questions, never to another server's, so such a
    /// confirmer answers [`Answer::CannotAsk`]. Required of every confirmer, so a new one decides.
    fn ask_for_another(&self, request: &ConfirmRequest) -> AnswerFuture<'_>;
}

/// Nobody to ask: every question is answered [`Answer::CannotAsk`].
#[derive(Debug, Default, Clone, Copy)]
pub struct NoPerson;

impl Confirmer for NoPerson {
    fn confirm(&self, _request: &ConfirmRequest) -> AnswerFuture<'_> {
        Box::pin(std::future::ready(Answer::CannotAsk))
    }

    fn ask_for_another(&self, _request: &ConfirmRequest) -> AnswerFuture<'_> {
        Box::pin(std::future::ready(Answer::CannotAsk))
    }
}

/// A person said yes up front (`--yes`).
#[derive(Debug, Default, Clone, Copy)]
pub struct AlwaysYes;

impl Confirmer for AlwaysYes {
    fn confirm(&self, _request: &ConfirmRequest) -> AnswerFuture<'_> {
        Box::pin(std::future::ready(Answer::Yes))
    }

    fn ask_for_another(&self, _request: &ConfirmRequest) -> AnswerFuture<'_> {
        // --yes is a yes to lmcp's questions, given before anyone else asked anything
        Box::pin(std::future::ready(Answer::CannotAsk))
    }
}

/// Answers from a list, in order, and remembers what was asked; for tests. When the list runs
/// out it answers [`Answer::CannotAsk`].
#[derive(Debug, Default)]
pub struct Scripted {
    answers: Mutex<VecDeque<Answer>>,
    asked: Mutex<Vec<ConfirmRequest>>,
}

impl Scripted {
    /// A confirmer that gives these answers in turn.
    pub fn new(answers: impl IntoIterator<Item = Answer>) -> Scripted {
        Scripted {
            answers: Mutex::new(answers.into_iter().collect()),
            asked: Mutex::default(),
        }
    }

    /// Every request asked so far.
    pub fn asked(&self) -> Vec<ConfirmRequest> {
        self.asked.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Confirmer for Scripted {
    fn confirm(&self, request: &ConfirmRequest) -> AnswerFuture<'_> {
        self.asked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(request.clone());
        let a = self
            .answers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop_front()
            .unwrap_or(Answer::CannotAsk);
        Box::pin(std::future::ready(a))
    }

    fn ask_for_another(&self, request: &ConfirmRequest) -> AnswerFuture<'_> {
        self.confirm(request)
    }
}

/// Asks on the terminal: the prompt goes to stderr and the answer comes from stdin, or both go
/// through the controlling terminal ([`TtyPrompt::on`]) when stdin holds something else. Anything
/// but `y`/`yes` (including end of input) is No. With no terminal to read it cannot ask.
#[derive(Debug, Default)]
pub struct TtyPrompt {
    /// Serializes prompts so two concurrent calls never interleave their questions.
    lock: tokio::sync::Mutex<()>,
    /// The controlling terminal, when questions go there rather than to stderr and stdin.
    tty: Option<Arc<Tty>>,
}

impl TtyPrompt {
    /// A prompt on this process's stderr and stdin.
    pub fn new() -> TtyPrompt {
        TtyPrompt::default()
    }

    /// A prompt on the controlling terminal (`/dev/tty`), as sudo and git ask: stdin holds
    /// something else (`lmcp run -` reads its script from it).
    pub fn on(tty: Tty) -> TtyPrompt {
        TtyPrompt {
            tty: Some(Arc::new(tty)),
            ..TtyPrompt::default()
        }
    }

    /// Shows `question` (escaped) and reads the answer: [`Answer::Yes`] for `y` or `yes`,
    /// [`Answer::CannotAsk`] when there is no terminal to read, [`Answer::No`] otherwise.
    pub async fn ask(&self, question: String) -> Answer {
        if self.tty.is_none() && !std::io::stdin().is_terminal() {
            return Answer::CannotAsk;
        }
        let _guard = self.lock.lock().await;
        // Should the call be cancelled while the question is open, this future is dropped
        // and the flag tells the reader to stop: a reader left blocked on the terminal
        // would swallow the next line typed (the REPL's next command).
        let withdrawn = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let _withdraw = Withdrawn(Arc::clone(&withdrawn));
        let tty = self.tty.clone();
        let line = tokio::task::spawn_blocking(move || match &tty {
            Some(t) => {
                t.show(&question);
                read_answer(answer_fd(Some(t)), &withdrawn)
            }
            None => {
                crate::text::terminal::show(crate::text::terminal::Stream::Err, &question);
                read_answer(answer_fd(None), &withdrawn)
            }
        })
        .await;
        match line {
            Ok(Ok(l)) if matches!(l.trim().to_ascii_lowercase().as_str(), "y" | "yes") => {
                Answer::Yes
            }
            _ => Answer::No,
        }
    }
}

impl Confirmer for TtyPrompt {
    fn confirm(&self, request: &ConfirmRequest) -> AnswerFuture<'_> {
        Box::pin(self.ask(render_prompt(request)))
    }

    fn ask_for_another(&self, request: &ConfirmRequest) -> AnswerFuture<'_> {
        self.confirm(request)
    }
}

/// Where answers are read: the controlling terminal's descriptor, or stdin's (0).
#[cfg(unix)]
fn answer_fd(tty: Option<&Tty>) -> std::os::fd::RawFd {
    tty.map_or(0, Tty::fd)
}

#[cfg(not(unix))]
fn answer_fd(_tty: Option<&Tty>) -> i32 {
    0
}

/// Sets its flag when dropped.
struct Withdrawn(Arc<std::sync::atomic::AtomicBool>);

impl Drop for Withdrawn {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Reads one answer line from `fd` (stdin, or the controlling terminal), giving up when
/// `withdrawn` is set. The descriptor is polled
/// and then read one byte at a time, so this reader never blocks: a question withdrawn (Ctrl-C
/// in the REPL) while its reader waits must not leave a blocked read behind that takes the next
/// line the REPL's own editor was meant to get. It also never reads past the answer's newline.
#[cfg_attr(not(unix), allow(unused_variables))]
fn read_answer(fd: i32, withdrawn: &std::sync::atomic::AtomicBool) -> std::io::Result<String> {
    #[cfg(unix)]
    {
        let mut line = Vec::new();
        loop {
            if withdrawn.load(std::sync::atomic::Ordering::Relaxed) {
                return Err(std::io::Error::from(std::io::ErrorKind::Interrupted));
            }
            let mut poll = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: poll on one valid pollfd for at most 100 ms.
            let ready = unsafe { libc::poll(&mut poll, 1, 100) };
            if ready < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if ready == 0 || withdrawn.load(std::sync::atomic::Ordering::Relaxed) {
                continue;
            }
            let mut byte = 0u8;
            // SAFETY: reads at most one byte into a live local; poll said `fd` (stdin, or the
            // terminal the prompt holds open) is readable.
            let n = unsafe { libc::read(fd, (&raw mut byte).cast(), 1) };
            match n {
                1 if byte == b'\n' => break,
                1 => line.push(byte),
                0 if line.is_empty() => return Ok(String::new()),
                0 => break,
                _ => {
                    let e = std::io::Error::last_os_error();
                    if e.kind() != std::io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
            }
        }
        line.push(b'\n');
        Ok(String::from_utf8_lossy(&line).into_owned())
    }
    #[cfg(not(unix))]
    {
        use std::io::BufRead;
        let _ = withdrawn;
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line).map(|_| line)
    }
}

/// The question a person sees: tool, effect, why, each argument (long values shortened), and
/// for a program every state-changing call it may make. Every string is shown with its control
/// characters escaped, so nothing in it can rewrite the prompt.
pub fn render_prompt(request: &ConfirmRequest) -> String {
    if let Some(who) = &request.asked_by {
        return format!(
            "\n{} asks (its words, not lmcp's) — {}\n  {}\nAccept what it asks? [y/N] ",
            escape_controls(who),
            escape_controls(&request.why),
            escape_controls(&request.summary),
        );
    }
    let mut s = format!(
        "\n{} wants to run ({}{}) — {}\n  {}\n",
        escape_controls(&request.tool),
        request.effect,
        if request.destructive {
            ", destructive"
        } else {
            ""
        },
        escape_controls(&request.why),
        escape_controls(&request.summary),
    );
    if let Value::Object(map) = &request.args {
        for (k, v) in map {
            s.push_str(&format!("  {}: {}\n", escape_controls(k), shorten(v)));
        }
    }
    s.push_str(&calls_line(&request.calls));
    s.push_str(&hosts_line(&request.hosts));
    s.push_str("Allow? [y/N] ");
    s
}

/// "  may call: write_file (write), run_command (write, destructive)\n", or "" for none.
pub fn calls_line(calls: &[ShownCall]) -> String {
    if calls.is_empty() {
        return String::new();
    }
    let list: Vec<String> = calls
        .iter()
        .map(|c| escape_controls(&c.describe()).into_owned())
        .collect();
    format!(
        "  yes covers exactly these state-changing calls: {}\n",
        list.join(", ")
    )
}

/// "  its requests may reach only: a.org, b.org\n", or "" for none.
pub fn hosts_line(hosts: &[String]) -> String {
    if hosts.is_empty() {
        return String::new();
    }
    let list: Vec<String> = hosts
        .iter()
        .map(|h| escape_controls(h).into_owned())
        .collect();
    format!(
        "  its requests may reach only these hosts: {}\n",
        list.join(", ")
    )
}

/// A JSON value shown in at most ~120 characters, control characters escaped.
pub fn shorten(v: &Value) -> String {
    let text = escape_controls(&v.to_string()).into_owned();
    if text.chars().count() <= 120 {
        text
    } else {
        let head: String = text.chars().take(110).collect();
        format!("{head}… ({} chars)", text.chars().count())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req() -> ConfirmRequest {
        ConfirmRequest {
            tool: "write_file".into(),
            effect: Effect::Write,
            destructive: true,
            args: json!({"path": "a.txt", "content": "x".repeat(500)}),
            summary: "write 500 bytes to a.txt".into(),
            why: "the grant for destructive tools is ask".into(),
            calls: Vec::new(),
            hosts: Vec::new(),
            asked_by: None,
            every_time: false,
        }
    }

    #[test]
    fn prompt_shows_tool_effect_args_and_defaults_to_no() {
        let p = render_prompt(&req());
        assert!(
            p.contains("write_file wants to run (write, destructive)"),
            "{p}"
        );
        assert!(p.contains("path: \"a.txt\""), "{p}");
        assert!(p.contains("(502 chars)"), "{p}");
        assert!(p.ends_with("[y/N] "));
    }

    #[tokio::test]
    async fn scripted_answers_in_order_then_cannot_ask() {
        let s = Scripted::new([Answer::Yes, Answer::No]);
        assert_eq!(s.confirm(&req()).await, Answer::Yes);
        assert_eq!(s.confirm(&req()).await, Answer::No);
        assert_eq!(s.confirm(&req()).await, Answer::CannotAsk);
        assert_eq!(s.asked().len(), 3);
    }
}
