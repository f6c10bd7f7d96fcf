//! What travels with every call: the request, its context, and the typed outcome.
//!
//! A front door builds one root [`CallContext`] per action (a CLI command, a REPL line, an MCP
//! request) and every nested call a program makes gets a [`CallContext::child`] of it: one level
//! deeper, origin `program`, the same cancellation token (cancelling the root stops the whole
//! tree), the same deadline or an earlier one, and the same confirmation mode or a weaker one.
//! The fields are private so no code holding a context can raise its own confirmation mode.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::approval::{Approval, ShownCall};
use super::confirm::{Confirmer, NoPerson};
use super::plan::Plan;
use crate::error::Error;
use crate::registry::{Capabilities, Effect};

/// Which front door a call came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    /// `lmcp call` and other subcommands.
    Cli,
    /// The interactive REPL.
    Repl,
    /// An MCP client.
    Mcp,
    /// A program (recipe, custom tool, skill script, Lua run) calling a tool.
    Program,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Origin::Cli => "cli",
            Origin::Repl => "repl",
            Origin::Mcp => "mcp",
            Origin::Program => "program",
        })
    }
}

/// How state-changing calls (effect write or send) are confirmed in this run. Ordered from the
/// weakest to the strongest; a nested run can only keep or lower its parent's mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ConfirmMode {
    /// State-changing calls return a preview and do nothing (a dry run).
    Preview,
    /// Each state-changing call asks the run's [`Confirmer`] (a person).
    Ask,
    /// State-changing calls run; calls under an `ask` grant still need a person's yes.
    Confirmed,
}

impl ConfirmMode {
    /// Parses `preview`, `ask` or `confirmed` (also `yes`).
    pub fn parse(s: &str) -> Option<ConfirmMode> {
        match s {
            "preview" => Some(ConfirmMode::Preview),
            "ask" => Some(ConfirmMode::Ask),
            "confirmed" | "yes" => Some(ConfirmMode::Confirmed),
            _ => None,
        }
    }
}

/// A progress report from a long-running tool.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Progress {
    /// Units done so far.
    pub done: u64,
    /// Units in all, when known.
    pub total: Option<u64>,
    /// What is happening now.
    pub message: String,
}

/// Where progress reports go: a CLI progress line, MCP notifications, or nowhere.
pub type ProgressSink = Arc<dyn Fn(Progress) + Send + Sync>;

/// What the program a call runs inside declared: the tools it may call and the hosts its
/// requests may reach.
#[derive(Debug)]
struct Restriction {
    program: String,
    capabilities: Capabilities,
    connect: Vec<String>,
    /// The program this one runs inside, if any: its hosts bound this one's too.
    outer: Option<Arc<Restriction>>,
}

/// The context of one call. Cheap to clone.
#[derive(Clone)]
pub struct CallContext {
    origin: Origin,
    /// The front door the whole call tree came through (never `program`).
    door: Origin,
    depth: u32,
    /// Shared by the whole call tree (an `Arc`: cloning a token itself takes a lock).
    cancel: Arc<CancellationToken>,
    deadline: Option<Instant>,
    budget: Duration,
    progress: Option<ProgressSink>,
    confirm: ConfirmMode,
    confirmer: Arc<dyn Confirmer>,
    /// The program this call runs inside, if it declared what it may call.
    restrictions: Option<Arc<Restriction>>,
    /// What a person said yes to in this call tree: the state-changing calls they were shown.
    approval: Option<Arc<Approval>>,
    /// The plan of the program this call runs in, if a runner records one.
    plan: Option<Arc<Plan>>,
    /// Values never shown in this call tree's previews and prompts (a skill's secrets).
    secrets: Option<Arc<Vec<String>>>,
    /// The journal of the run this call is part of, if it keeps one.
    journal: Option<Arc<super::journal::Journal>>,
    /// The host memory budget of the run this call is part of (none outside runs).
    host_memory: Option<Arc<super::HostMemory>>,
}

impl fmt::Debug for CallContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallContext")
            .field("origin", &self.origin)
            .field("depth", &self.depth)
            .field("confirm", &self.confirm)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl CallContext {
    /// A root context for a front door: depth 0, a fresh cancellation token, no deadline, no
    /// progress sink, and a confirmer that cannot ask anyone (set one with
    /// [`with_confirmer`](Self::with_confirmer)).
    pub fn root(origin: Origin, confirm: ConfirmMode) -> CallContext {
        CallContext {
            origin,
            door: origin,
            depth: 0,
            cancel: Arc::new(CancellationToken::new()),
            deadline: None,
            budget: Duration::ZERO,
            progress: None,
            confirm,
            confirmer: Arc::new(NoPerson),
            restrictions: None,
            approval: None,
            plan: None,
            journal: None,
            secrets: None,
            host_memory: None,
        }
    }

    /// Sets who answers confirmation prompts. Only front doors build roots, so a program cannot.
    pub fn with_confirmer(mut self, confirmer: Arc<dyn Confirmer>) -> Self {
        self.confirmer = confirmer;
        self
    }

    /// Sets a deadline `after` from now, or keeps the current one if it is earlier.
    pub fn with_timeout(mut self, after: Duration) -> Self {
        let d = Instant::now() + after;
        match self.deadline {
            Some(old) if old <= d => {}
            _ => {
                self.deadline = Some(d);
                self.budget = after;
            }
        }
        self
    }

    /// Sends progress reports to `sink`.
    pub fn with_progress(mut self, sink: ProgressSink) -> Self {
        self.progress = Some(sink);
        self
    }

    /// Uses `token` for cancellation (a front door that cancels on Ctrl-C or an MCP notice).
    pub fn with_cancel(mut self, token: CancellationToken) -> Self {
        self.cancel = Arc::new(token);
        self
    }

    /// The context for a call made by a program running under this one.
    pub fn child(&self) -> CallContext {
        // every field named, so a child clones each shared part once
        CallContext {
            origin: Origin::Program,
            door: self.door,
            depth: self.depth + 1,
            // One token per call tree: only a front door cancels, and it cancels the whole
            // tree (a child token per call cost a tree node and a lock on every nested call).
            cancel: Arc::clone(&self.cancel),
            deadline: self.deadline,
            budget: self.budget,
            // A call's progress is its own program's: a nested program reporting its steps on
            // the same sink would make the caller's progress go back (MCP wants one increasing
            // series per call), so nested calls report nothing.
            progress: None,
            confirm: self.confirm,
            confirmer: Arc::clone(&self.confirmer),
            restrictions: self.restrictions.clone(),
            approval: self.approval.clone(),
            plan: self.plan.clone(),
            secrets: self.secrets.clone(),
            journal: self.journal.clone(),
            host_memory: self.host_memory.clone(),
        }
    }

    /// Like [`child`](Self::child) but asking for `mode`; the child never gets a stronger mode
    /// than this context has (confirmation flows down, never up).
    pub fn child_with_mode(&self, mode: ConfirmMode) -> CallContext {
        let mut c = self.child();
        c.confirm = self.confirm.min(mode);
        c
    }

    /// This context with its confirmation mode lowered to `mode` if that is weaker (never
    /// raised), at the same depth: a gateway running a program in preview or confirmed mode.
    pub fn lowered(&self, mode: ConfirmMode) -> CallContext {
        let mut c = self.clone();
        c.confirm = self.confirm.min(mode);
        c
    }

    /// Which front door started this call tree (or `program` for nested calls).
    pub fn origin(&self) -> Origin {
        self.origin
    }

    /// The front door the whole call tree came through, also for nested calls: how to tell the
    /// person what to do is the door's business (a flag on the command line, a grant over MCP).
    pub fn door(&self) -> Origin {
        self.door
    }

    /// How many calls this one is nested in.
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// How state-changing calls are confirmed.
    pub fn confirm_mode(&self) -> ConfirmMode {
        self.confirm
    }

    /// Whether the call's deadline has passed: blocking work (which no `select!` can stop)
    /// asks this and the cancellation token now and then.
    pub fn timed_out(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// The cancellation token; tools doing long work should watch it.
    pub fn cancel_token(&self) -> &CancellationToken {
        &self.cancel
    }

    /// When this call must be done by, if ever.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The time budget the deadline was set with (for messages such as "timed out after 30s").
    pub fn budget(&self) -> Duration {
        self.budget
    }

    /// This context inside a run: it keeps the host memory budget of the run it is already in
    /// (a nested run charges its parent's), or gets a new one of `limit` bytes.
    pub fn in_run(mut self, limit: usize) -> Self {
        if self.host_memory.is_none() {
            self.host_memory = Some(super::HostMemory::new(limit));
        }
        self
    }

    /// The host memory budget of the run this call is part of, if it is part of one.
    pub fn host_memory(&self) -> Option<&Arc<super::HostMemory>> {
        self.host_memory.as_ref()
    }

    /// Reports progress, if anyone listens.
    pub fn progress(&self, done: u64, total: Option<u64>, message: impl Into<String>) {
        if let Some(sink) = &self.progress {
            sink(Progress {
                done,
                total,
                message: message.into(),
            });
        }
    }

    pub(crate) fn confirmer(&self) -> &Arc<dyn Confirmer> {
        &self.confirmer
    }

    /// Limits every call made in this context (and below it) to what `program` declared it may
    /// call. A program is only ever reached through a call its parent's restriction allowed (a
    /// gateway or workflow it declared), so inside it its own declaration is what holds: it can
    /// call nothing its parent did not let it be called for, and no more than it declared.
    /// Its requests reach only the hosts it declared (`connect`) *and* every program it runs
    /// inside declared: a yes to the outer program's hosts is a yes to those hosts only, so a
    /// program it starts (a recipe it runs, a custom tool it calls) cannot reach further.
    pub fn restricted(
        mut self,
        program: &str,
        capabilities: Capabilities,
        connect: Vec<String>,
    ) -> Self {
        let outer = self.restrictions.take();
        self.restrictions = Some(Arc::new(Restriction {
            program: program.to_string(),
            capabilities,
            connect,
            outer,
        }));
        self
    }

    /// The program whose declared capabilities refuse `spec`, if any.
    pub(crate) fn refusing_program(
        &self,
        spec: &crate::registry::ToolSpec,
    ) -> Option<(&str, &Capabilities)> {
        self.restrictions
            .as_deref()
            .filter(|r| !r.capabilities.allows(spec))
            .map(|r| (r.program.as_str(), &r.capabilities))
    }

    /// Why a request to `to` is refused by the program this call runs in (its `---@connect`
    /// lines do not name the host), if it is. Outside any program, nothing refuses it here.
    pub fn connect_refusal(&self, to: &crate::config::HostPort) -> Option<String> {
        // the innermost program whose hosts leave `to` out, walking out to the outermost
        let mut level = self.restrictions.as_deref();
        let r = loop {
            let r = level?;
            let named = r
                .connect
                .iter()
                .any(|h| crate::config::HostPattern::parse(h).is_ok_and(|p| p.matches(to)));
            if !named {
                break r;
            }
            level = r.outer.as_deref();
        };
        Some(if r.connect.is_empty() {
            format!(
                "`{}` declares no host, so it makes no request; a Lua program names the hosts \
                 it reaches with `---@connect HOST` lines in its header (`---@connect {}`)",
                r.program, to
            )
        } else {
            format!(
                "`{}` may reach {} (its `---@connect` lines, or the hosts its steps' URLs name), \
                 and `{to}` is not among them",
                r.program,
                r.connect.join(", ")
            )
        })
    }

    /// What a person said yes to in this call tree, if anything.
    pub fn approval(&self) -> Option<&Approval> {
        self.approval.as_deref()
    }

    /// Records a person's yes to `calls` for this call and everything nested in it.
    pub(crate) fn approve(&mut self, calls: &[ShownCall]) {
        let mut a = self.approval.as_deref().cloned().unwrap_or_default();
        a.extend(calls);
        self.approval = Some(Arc::new(a));
    }

    /// Records a person's yes to requests to `hosts` for this call and everything nested in it.
    pub(crate) fn approve_hosts(&mut self, hosts: &[String]) {
        if hosts.is_empty() {
            return;
        }
        let mut a = self.approval.as_deref().cloned().unwrap_or_default();
        a.extend_hosts(hosts);
        self.approval = Some(Arc::new(a));
    }

    /// Records this call tree's state-changing calls into `plan` (a program runner's).
    pub(crate) fn with_plan(mut self, plan: Arc<Plan>) -> Self {
        self.plan = Some(plan);
        self
    }

    /// Masks `secrets` in every preview and prompt of this call tree (added to any already set).
    pub(crate) fn with_secrets(mut self, secrets: Vec<String>) -> Self {
        if secrets.is_empty() {
            return self;
        }
        let mut all = self.secrets.as_deref().cloned().unwrap_or_default();
        all.extend(secrets);
        self.secrets = Some(Arc::new(all));
        self
    }

    /// The values masked in this call tree's previews and prompts.
    pub(crate) fn secrets(&self) -> &[String] {
        self.secrets.as_deref().map_or(&[], Vec::as_slice)
    }

    /// The plan a runner records into, if any.
    pub fn plan(&self) -> Option<&Arc<Plan>> {
        self.plan.as_ref()
    }

    /// Journals this call tree's state-changing calls in `journal` (a confirmed run's).
    pub fn with_journal(mut self, journal: Arc<super::journal::Journal>) -> Self {
        self.journal = Some(journal);
        self
    }

    /// The journal of the run, if it keeps one.
    pub fn journal(&self) -> Option<&Arc<super::journal::Journal>> {
        self.journal.as_ref()
    }
}

/// One call: which tool, with which arguments, in which context.
#[derive(Debug, Clone)]
pub struct CallRequest {
    /// The tool's name.
    pub tool: String,
    /// The arguments (a JSON object).
    pub args: Value,
    /// Origin, depth, cancellation, deadline, progress and confirmation.
    pub ctx: CallContext,
    /// The tool, when the caller looked it up already (the Lua bridge does, to shape the
    /// arguments): the gate then does not look it up again. Only from the registry.
    pub(crate) resolved: Option<std::sync::Arc<crate::registry::Tool>>,
}

impl CallRequest {
    /// A request for `tool` with `args` in `ctx`.
    pub fn new(tool: impl Into<String>, args: Value, ctx: CallContext) -> CallRequest {
        CallRequest {
            tool: tool.into(),
            args,
            ctx,
            resolved: None,
        }
    }

    /// A request for a tool the caller just took from the registry.
    pub(crate) fn to_tool(
        tool: std::sync::Arc<crate::registry::Tool>,
        args: Value,
        ctx: CallContext,
    ) -> CallRequest {
        CallRequest {
            tool: tool.spec().name.clone(),
            args,
            ctx,
            resolved: Some(tool),
        }
    }
}

/// What a state-changing call would have done, returned instead of doing it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Preview {
    /// The tool that was not run.
    pub tool: String,
    /// The validated arguments it would have run with.
    pub args: Value,
    /// Its effect.
    pub effect: Effect,
    /// One line for people: what it would do.
    pub summary: String,
}

impl Preview {
    /// The preview as a JSON value marked `"preview": true`, as programs see it.
    pub fn to_json(&self) -> Value {
        json!({
            "preview": true,
            "tool": self.tool,
            "args": self.args,
            "effect": self.effect,
            "summary": self.summary,
        })
    }
}

/// How a call ended.
#[derive(Debug)]
pub enum Outcome {
    /// It ran and returned this result.
    Done(Value),
    /// It changes state and the run is a preview: nothing was done.
    Preview(Preview),
    /// A grant or mode refused it, or a person said no.
    Denied { tool: String, reason: String },
    /// It needed a person's yes and none could be asked.
    NeedsConfirmation { tool: String, reason: String },
    /// It could not run or it failed.
    Failed(Error),
}

impl Outcome {
    /// The outcome class recorded in history: `done`, `preview`, `denied`,
    /// `needs_confirmation`, or `failed:<error class>`.
    pub fn class(&self) -> String {
        match self {
            Outcome::Done(_) => "done".into(),
            Outcome::Preview(_) => "preview".into(),
            Outcome::Denied { .. } => "denied".into(),
            Outcome::NeedsConfirmation { .. } => "needs_confirmation".into(),
            Outcome::Failed(e) => format!("failed:{}", e.class()),
        }
    }

    /// Process exit code: 0 done or previewed, 1 failed, 2 bad usage or arguments, 3 denied or
    /// not confirmed.
    pub fn exit_code(&self) -> u8 {
        match self {
            Outcome::Done(_) | Outcome::Preview(_) => 0,
            Outcome::Denied { .. } | Outcome::NeedsConfirmation { .. } => 3,
            Outcome::Failed(e) => e.exit_code(),
        }
    }

    /// A result for programs: the value, or the preview as a value, or an error.
    pub fn into_result(self) -> Result<Value, Error> {
        match self {
            Outcome::Done(v) => Ok(v),
            Outcome::Preview(p) => Ok(p.to_json()),
            Outcome::Denied { tool, reason } => Err(Error::Denied { tool, reason }),
            Outcome::NeedsConfirmation { tool, reason } => {
                Err(Error::NeedsConfirmation { tool, reason })
            }
            Outcome::Failed(e) => Err(e),
        }
    }

    /// The outcome as one JSON object for `--json` output and logs.
    pub fn to_json(&self) -> Value {
        match self {
            Outcome::Done(v) => json!({"outcome": "done", "result": v}),
            Outcome::Preview(p) => json!({"outcome": "preview", "preview": p}),
            Outcome::Denied { tool, reason } => {
                json!({"outcome": "denied", "tool": tool, "reason": reason})
            }
            Outcome::NeedsConfirmation { tool, reason } => {
                json!({"outcome": "needs_confirmation", "tool": tool, "reason": reason})
            }
            Outcome::Failed(e) => json!({"outcome": "failed", "error": e.to_json()}),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A nested run charges its parent's host memory: a program run inside another keeps the
    /// budget it finds in its context; only a call tree's first run makes one.
    #[test]
    fn nested_runs_share_the_first_runs_host_memory() {
        let root = CallContext::root(Origin::Cli, ConfirmMode::Confirmed);
        assert!(root.host_memory().is_none(), "a call outside runs has none");
        let outer = root.in_run(1000);
        let inner = outer.child().child().in_run(1 << 30);
        let (a, b) = (outer.host_memory().unwrap(), inner.host_memory().unwrap());
        assert!(Arc::ptr_eq(a, b));
        assert_eq!(b.limit(), 1000);
        let _held = b.hold(600, "inner").unwrap();
        assert!(a.hold(600, "outer").is_err(), "one budget for the tree");
    }

    #[test]
    fn children_go_deeper_and_never_raise_the_mode() {
        let root = CallContext::root(Origin::Cli, ConfirmMode::Preview);
        let c = root.child_with_mode(ConfirmMode::Confirmed);
        assert_eq!(c.confirm_mode(), ConfirmMode::Preview);
        assert_eq!(c.depth(), 1);
        assert_eq!(c.origin(), Origin::Program);
        let root = CallContext::root(Origin::Mcp, ConfirmMode::Confirmed);
        assert_eq!(
            root.child_with_mode(ConfirmMode::Preview).confirm_mode(),
            ConfirmMode::Preview
        );
    }

    #[test]
    fn cancelling_the_root_cancels_the_tree() {
        let root = CallContext::root(Origin::Cli, ConfirmMode::Confirmed);
        let grandchild = root.child().child();
        root.cancel_token().cancel();
        assert!(grandchild.cancel_token().is_cancelled());
    }

    #[test]
    fn deadlines_only_get_earlier() {
        let root = CallContext::root(Origin::Cli, ConfirmMode::Confirmed)
            .with_timeout(Duration::from_secs(1));
        let d = root.deadline().unwrap();
        let later = root.child().with_timeout(Duration::from_secs(100));
        assert_eq!(later.deadline(), Some(d));
    }
}
