//! The gate: the one function every tool call passes through.
//!
//! [`call`] takes a [`CallRequest`] and runs these stages, in this order, stopping at the first
//! that decides the outcome:
//!
//! 1. **resolve** the tool; an unknown name fails with the closest names as suggestions; inside
//!    a program that declared its capabilities (`---@uses`, JSON steps), any other tool is
//!    denied;
//! 2. **availability**: an unavailable tool fails with the reason;
//! 3. **validate** the arguments against the input schema; failures name the JSON pointer and
//!    the rule, and an unknown property the declared one it was probably meant to be
//!    (`skillMd`: did you mean `skill_md`?);
//!    A call that runs a program (a gateway or a `user_` tool) works out that program first and
//!    takes *its* effect: the strongest effect of every tool it may call, destructive if any is;
//! 4. **grants**: `deny` refuses; `ask` needs a person's yes at stage 6;
//! 5. **modes**: read-only refuses `write` and `send` tools; private refuses `send` tools;
//!    then the tool's own **precheck**, if it has one (a path outside the roots), refuses what
//!    would be refused anyway, so nobody is asked to allow it;
//! 6. **confirmation**: in `preview` mode a state-changing leaf call (or one under an `ask`
//!    grant) returns a [`Preview`] and does nothing, and a program runs with its own calls
//!    previewing; an `ask` grant, or a state-changing call in `ask` mode, asks the context's
//!    confirmer: no means denied, nobody-to-ask means needs-confirmation. A question about a
//!    program lists every state-changing call it may make, and a yes covers exactly those
//!    ([`Approval`]); a per-tool `ask` grant is never covered. Every state-changing leaf call
//!    previewed or run is recorded in the run's [`Plan`], and a run of an approved plan refuses
//!    any call that plan did not show;
//! 7. **run** the handler with the call context, racing cancellation and the deadline, within the
//!    nesting limit;
//! 8. **record** the call in the history ring, unless private mode is on.
//!
//! Handlers can only be run with a [`Pass`], and only this module can make one.
//!
//! | file          | its part                                                            |
//! |---------------|---------------------------------------------------------------------|
//! | `mod.rs`      | [`call`]: the stages above, and the [`Pass`] only it makes          |
//! | `context.rs`  | what travels with every call: request, context, outcome             |
//! | `confirm.rs`  | asking a person before a call runs                                  |
//! | `approval.rs` | what a person's yes covers: exactly the calls they were shown       |
//! | `plan.rs`     | the state-changing calls of a program run, in order, and their hash |
//! | `journal.rs`  | run journals: a failed run resumed without repeating what it did    |
//! | `hint.rs`     | what a schema problem says; did-you-mean for an unknown argument    |
//! | `history.rs`  | the call history ring: what was called, and how it ended            |

mod approval;
mod caller;
mod confirm;
mod context;
mod hint;
mod history;
mod host_memory;
pub mod journal;
mod plan;
mod scope;

pub use approval::{Approval, ShownCall};
pub use caller::Caller;
pub use confirm::{
    AlwaysYes, Answer, AnswerFuture, ConfirmRequest, Confirmer, NoPerson, Scripted, TtyPrompt,
    calls_line, hosts_line, render_prompt, shorten,
};
pub use context::{
    CallContext, CallRequest, ConfirmMode, Origin, Outcome, Preview, Progress, ProgressSink,
};
pub(crate) use hint::problem as schema_problem;
pub use hint::{closest_property, snake_case};
pub use history::{ArgShape, History, HistoryEntry, Recent, arg_shapes, size_bucket};
pub use host_memory::{Held, HostMemory, JSON_VALUE_COST, LuaShare, json_cost};
pub use plan::{Plan, plan_hash, plan_hash_reaching};
pub use scope::Scope;

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use crate::config::{Config, Grant, HostDecision, HostPort, Pin};
use crate::error::{Error, SchemaProblem};
use crate::registry::{Availability, Effect, Invocation, Tool};

/// Proof that the gate approved a call. Its field is private to this module, so nothing else can
/// make one, and [`Tool::run`] requires one.
pub struct Pass(());

/// At most this many schema problems are reported for one call.
const MAX_PROBLEMS: usize = 8;

/// Runs one call through every stage of the gate. Never panics on bad input; every failure is an
/// [`Outcome`].
pub(crate) async fn call(host: &Arc<dyn Caller>, mut req: CallRequest) -> Outcome {
    let started = Instant::now();
    let config = host.config();
    let tool = match req.resolved.take() {
        Some(t) => Some(t),
        None => host.registry().get(&req.tool),
    };
    let (origin, depth) = (req.ctx.origin(), req.ctx.depth());
    // Shapes are taken before the call: the handler owns the arguments afterwards.
    let shapes = if config.modes.private {
        Vec::new()
    } else {
        arg_shapes(&req.args, tool.as_ref().map(|t| &t.spec().input_schema))
    };
    // A call whose future is dropped before it ends (a client's cancel that the transport
    // carries out by dropping the request) is recorded as cancelled all the same.
    let mut record = Record {
        host,
        entry: (!config.modes.private).then(|| HistoryEntry {
            at_ms: 0,
            tool: tool
                .as_ref()
                .map_or_else(|| "(unknown)".to_string(), |t| t.spec().name.clone()),
            origin: origin.to_string(),
            depth,
            outcome: String::new(),
            duration_ms: 0.0,
            args: shapes,
        }),
        started,
    };
    let outcome = match &tool {
        None => Outcome::Failed(Error::UnknownTool {
            suggestions: host.registry().closest(&req.tool),
            name: req.tool,
        }),
        Some(t) => with_config_problem(host.as_ref(), decide_and_run(host, t, &config, req).await),
    };
    record.done(outcome.class());
    outcome
}

/// The history entry of one call, written when the call ends or when its future is dropped.
struct Record<'a> {
    host: &'a Arc<dyn Caller>,
    /// `None` in private mode, and once written.
    entry: Option<HistoryEntry>,
    started: Instant,
}

impl Record<'_> {
    fn done(&mut self, outcome: String) {
        let Some(mut entry) = self.entry.take() else {
            return;
        };
        entry.at_ms = chrono::Utc::now().timestamp_millis();
        entry.outcome = outcome;
        entry.duration_ms = self.started.elapsed().as_secs_f64() * 1000.0;
        if let Err(e) = self.host.history().record(&entry) {
            self.host
                .warn(format!("could not record the call in the history: {e}"));
        }
    }
}

impl Drop for Record<'_> {
    fn drop(&mut self) {
        if self.entry.is_some() {
            self.done(Outcome::Failed(Error::Cancelled).class());
        }
    }
}

/// Stages 2 to 7 for a resolved tool.
async fn decide_and_run(
    host: &Arc<dyn Caller>,
    tool: &Tool,
    config: &Config,
    req: CallRequest,
) -> Outcome {
    let spec = tool.spec();
    // borrowed: most calls pass, and only the outcomes that name the tool need it owned
    let name: &str = &spec.name;
    let CallRequest { args, mut ctx, .. } = req;

    // 1b. capabilities: inside a program that declared what it may call, nothing else runs
    if let Some((program, caps)) = ctx.refusing_program(spec) {
        let program = program.to_string();
        return Outcome::Denied {
            reason: format!(
                "`{program}` may call {} (its declared capabilities), and `{name}` is not among them",
                caps.describe()
            ),
            tool: name.to_string(),
        };
    }

    // 2. availability
    if let Availability::Unavailable { detail, .. } = spec.availability(config, host.transport()) {
        return Outcome::Failed(Error::Unavailable {
            tool: name.to_string(),
            reason: detail,
        });
    }

    // 3. arguments
    let problems = match schema_problems(tool, &args) {
        Ok(p) => p,
        Err(e) => return Outcome::Failed(e),
    };
    if !problems.is_empty() {
        return Outcome::Failed(Error::InvalidArgs {
            tool: name.to_string(),
            problems,
        });
    }

    // 3b. a program's effect is what it may do, worked out before anything is asked or run
    let mode = ctx.confirm_mode();
    let (program, scope) = match program_scope(host, tool, &args, mode) {
        Ok(p) => p,
        Err(e) => return Outcome::Failed(e),
    };
    let (effect, destructive) = match &scope {
        Some(s) => (s.effect(), s.destructive()),
        None => (spec.effect, spec.annotations.destructive_hint),
    };

    // 4. grants; an allow of another server's tool holds only for the definition it was
    // given for (a server that changes a tool after it was trusted is asked about again)
    let (mut grant, grant_source) = config.grant_for(name, effect, destructive);
    let mut unpinned = None;
    if grant == Grant::Allow
        && let Some(hash) = &spec.definition
    {
        match config.pin(name, hash) {
            Pin::Holds => {}
            pin => {
                grant = Grant::Ask;
                unpinned = Some(pin);
            }
        }
    }
    if grant == Grant::Deny {
        return Outcome::Denied {
            reason: {
                // name the rule that denied, so the hint changes the right one
                let server_key = crate::config::upstream_server(name)
                    .map(|s| format!("{}{s}", crate::config::UPSTREAM_PREFIX));
                let key = if config.grants.get(name) == Some(&Grant::Deny) {
                    name.to_string()
                } else if let Some(k) =
                    server_key.filter(|k| config.grants.get(k.as_str()) == Some(&Grant::Deny))
                {
                    k
                } else if destructive
                    && config.grants.get(crate::config::DESTRUCTIVE_KEY) == Some(&Grant::Deny)
                {
                    crate::config::DESTRUCTIVE_KEY.to_string()
                } else {
                    effect.as_str().to_string()
                };
                format!(
                    "the {grant_source} is deny (a deny at any level wins); allow it with \
                     `lmcp grants allow {key}`"
                )
            },
            tool: name.to_string(),
        };
    }

    // 4b. where a request goes: only to a host its program declared (`---@connect`), and by
    // the host rules (`lmcp hosts`), which stand in for the effect's grant: a deny wins, an
    // allowed host runs without asking, any other host asks. A rule for the tool's own name
    // only makes it stricter (`ask` asks every time, `deny` refused above): an allow of
    // `http_request` allows no host
    let target = match spec.reaches {
        None => None,
        Some(reaches) => match reaches(&args) {
            Ok(to) => Some(to),
            Err(e) => return Outcome::Failed(e),
        },
    };
    let mut host_why = None;
    if let Some(to) = &target {
        if let Some(reason) = ctx.connect_refusal(to) {
            return Outcome::Denied {
                reason,
                tool: name.to_string(),
            };
        }
        let asks_always = config.grants.get(name) == Some(&Grant::Ask);
        match config.host_decision(to) {
            HostDecision::Denied(pattern) => {
                return Outcome::Denied {
                    reason: format!(
                        "the host `{to}` is denied by the hosts rule `{pattern}` (a deny wins); \
                         `lmcp hosts remove {pattern}` removes it"
                    ),
                    tool: name.to_string(),
                };
            }
            HostDecision::Allowed { .. } if !asks_always => grant = Grant::Allow,
            HostDecision::Unlisted => {
                grant = Grant::Ask;
                host_why = Some(format!(
                    "the host `{to}` is not among the allowed hosts (`lmcp hosts allow {to}` \
                     allows it)"
                ));
            }
            _ => {}
        }
    }

    // 5. modes
    let changes_state = effect.changes_state();
    if config.modes.read_only && changes_state {
        return Outcome::Denied {
            reason: format!(
                "read-only mode is on and this {} has effect {effect}; turn it off with \
                 `lmcp mode read-only off`",
                if scope.is_some() { "program" } else { "tool" }
            ),
            tool: name.to_string(),
        };
    }
    // another server's tool that reaches outside this machine (so its server says, or does not
    // say otherwise) is a send in private mode, whatever effect it claims
    let leaves = spec.definition.is_some() && spec.annotations.open_world_hint;
    if config.modes.private && (effect == Effect::Send || leaves) {
        return Outcome::Denied {
            reason: "private mode is on, so nothing is sent; turn it off with \
                     `lmcp mode private off`"
                .to_string(),
            tool: name.to_string(),
        };
    }

    // 5b. the tool's own refusals, before anyone is asked (asked first, a person's yes would
    // only lead to the same refusal)
    if let Some(precheck) = spec.precheck
        && let Err(e) = precheck(host.as_ref(), &args)
    {
        return Outcome::Failed(e);
    }

    // 6. confirmation (what a preview, a question or a plan shows is made only when one is: a
    // read call needs none, and that is most calls)
    let plan_entry = !spec.runs_program() && spec.has_preview && changes_state;
    if mode == ConfirmMode::Preview
        && spec.has_preview
        && !spec.runs_program()
        && (changes_state || grant == Grant::Ask)
    {
        let (shown_args, summary) = shown(spec, &args, ctx.secrets());
        if plan_entry && let Some(refused) = record_in_plan(&ctx, name, &shown_args, true) {
            return refused;
        }
        return Outcome::Preview(Preview {
            tool: name.to_string(),
            args: shown_args,
            effect,
            summary,
        });
    }
    let per_tool_ask = config.grants.get(name) == Some(&Grant::Ask);
    let covered = ctx.approval().is_some_and(|a| {
        a.covers(name, effect, destructive) && target.as_ref().is_none_or(|to| a.covers_host(to))
    });
    let why = if per_tool_ask {
        Some(format!("the {grant_source} is ask, so it asks every time"))
    } else if let Some(pin) = unpinned {
        Some(match pin {
            Pin::Changed => format!(
                "the {grant_source} is allow, but the server changed this tool since it was \
                 allowed; `lmcp grants allow {name}` allows it as it is now"
            ),
            _ => format!(
                "the {grant_source} is allow, but this tool was not among the ones allowed \
                 (it is newer, or the grant was written by hand); `lmcp grants allow {name}` \
                 allows it as it is now"
            ),
        })
    } else if covered {
        None // a person said yes to a program that showed this call
    } else if let Some(why) = &host_why {
        Some(why.clone())
    } else if grant == Grant::Ask {
        Some(format!("the {grant_source} is ask"))
    } else if mode == ConfirmMode::Ask && changes_state {
        Some(format!("this run asks before every {effect} call"))
    } else {
        None
    };
    if let Some(why) = why {
        let calls = match &scope {
            Some(s) => s.calls.clone(),
            None if changes_state => vec![ShownCall {
                tool: name.to_string(),
                effect,
                destructive,
            }],
            None => Vec::new(),
        };
        let (shown_args, summary) = shown(spec, &args, ctx.secrets());
        let request = ConfirmRequest {
            tool: name.to_string(),
            effect,
            destructive,
            args: shown_args,
            summary,
            why: why.clone(),
            every_time: per_tool_ask,
            calls: if scope.is_some() {
                calls.clone()
            } else {
                Vec::new()
            },
            hosts: scope.as_ref().map(|s| s.hosts.clone()).unwrap_or_default(),
            asked_by: None,
        };
        let answer = tokio::select! {
            a = ctx.confirmer().confirm(&request) => a,
            _ = ctx.cancel_token().cancelled() => return Outcome::Failed(Error::Cancelled),
        };
        match answer {
            Answer::Yes => {
                ctx.approve(&calls);
                ctx.approve_hosts(&request.hosts);
            }
            Answer::No => {
                return Outcome::Denied {
                    tool: name.to_string(),
                    reason: "a person declined the call".into(),
                };
            }
            Answer::Dismissed => {
                return Outcome::Denied {
                    tool: name.to_string(),
                    reason: "the person dismissed the question without allowing the call".into(),
                };
            }
            Answer::CannotAsk => {
                return Outcome::NeedsConfirmation {
                    reason: format!(
                        "{why} and nobody could be asked; {}",
                        match (&host_why, &target) {
                            (Some(_), Some(to)) => how_to_allow_host(ctx.door(), to),
                            _ => how_to_allow(ctx.door(), name),
                        }
                    ),
                    tool: name.to_string(),
                };
            }
            Answer::Failed(error) => {
                return Outcome::NeedsConfirmation {
                    reason: format!(
                        "{why}, and the client failed to ask a person ({}); nothing was run",
                        crate::text::escape_controls(&error)
                    ),
                    tool: name.to_string(),
                };
            }
        }
    }
    if plan_entry
        && ctx.plan().is_some()
        && let Some(refused) =
            record_in_plan(&ctx, name, &shown(spec, &args, ctx.secrets()).0, false)
    {
        return refused;
    }

    // 7. run
    let max_depth = config.limits.max_depth;
    if ctx.depth() > max_depth {
        return Outcome::Failed(Error::Limit {
            what: format!("calls nested {} deep", ctx.depth()),
            limit: max_depth.to_string(),
        });
    }
    if ctx.cancel_token().is_cancelled() {
        return Outcome::Failed(Error::Cancelled);
    }
    let cancel = ctx.cancel_token().clone();
    let deadline = ctx.deadline();
    let budget = ctx.budget();
    if deadline.is_some_and(|d| Instant::now() >= d) {
        return Outcome::Failed(Error::Timeout { after: budget });
    }
    // a journaled run: a state-changing call done in the run being resumed is not run again
    let journaled = match ctx.journal().filter(|_| plan_entry) {
        None => None,
        Some(j) => match j.step(name, &args, spec.annotations.idempotent_hint) {
            Ok(journal::Step::Replay(v)) => return Outcome::Done(v),
            Ok(journal::Step::Refuse(why)) => return Outcome::Failed(Error::Refused(why)),
            Ok(journal::Step::Run(n)) => Some((Arc::clone(j), n, ctx.secrets().to_vec())),
            Err(e) => return Outcome::Failed(e),
        },
    };
    let invocation = Invocation {
        args,
        ctx,
        caller: Arc::clone(host),
        program,
    };
    let mut running = std::pin::pin!(tool.run(invocation, &Pass(())));
    // A handler that finishes when first polled (most leaf tools do) needs no race against
    // cancellation and the deadline: no timer is set, no waiter registered.
    let first = std::future::poll_fn(|cx| std::task::Poll::Ready(running.as_mut().poll(cx))).await;
    let result = match first {
        std::task::Poll::Ready(r) => r,
        std::task::Poll::Pending => tokio::select! {
            r = running => r,
            _ = cancel.cancelled() => Err(Error::Cancelled),
            _ = sleep_until(deadline) => Err(Error::Timeout { after: budget }),
        },
    };
    if let Some((journal, n, secrets)) = journaled {
        // a call cut short by its deadline or a cancel may have done its work: its outcome
        // stays unknown (a resume asks before running it again), never "failed"
        if !matches!(result, Err(Error::Cancelled | Error::Timeout { .. })) {
            journal.finished(n, result.as_ref(), &secrets);
        }
    }
    match result {
        Ok(v) => Outcome::Done(v),
        Err(e) => Outcome::Failed(e),
    }
}

/// The program a call would run and what it may do: a gateway's resolved program, or a
/// workflow's declared capabilities. `None` for tools that run no program.
#[allow(clippy::type_complexity)]
/// How a person can let `tool` run, in the words of the door the call came through.
fn how_to_allow(door: Origin, tool: &str) -> String {
    match door {
        Origin::Mcp => format!(
            "this MCP client cannot ask a person (it does not support elicitation): use a client \
             that can, or allow it in a terminal with `lmcp grants allow {tool}`"
        ),
        Origin::Repl => format!(
            "answer at the prompt on a terminal, switch with `/confirm yes`, or allow it with \
             `lmcp grants allow {tool}`"
        ),
        Origin::Cli | Origin::Program => {
            format!("confirm with --yes, or allow it with `lmcp grants allow {tool}`")
        }
    }
}

/// How a person can let a request to `to` run, in the words of the door the call came through.
fn how_to_allow_host(door: Origin, to: &HostPort) -> String {
    match door {
        Origin::Mcp => format!(
            "this MCP client cannot ask a person (it does not support elicitation): use a client \
             that can, or allow the host in a terminal with `lmcp hosts allow {to}`"
        ),
        Origin::Repl => format!(
            "answer at the prompt on a terminal, switch with `/confirm yes`, or allow the host \
             with `lmcp hosts allow {to}`"
        ),
        Origin::Cli | Origin::Program => {
            format!("confirm with --yes, or allow the host with `lmcp hosts allow {to}`")
        }
    }
}

fn program_scope(
    host: &Arc<dyn Caller>,
    tool: &Tool,
    args: &Value,
    mode: ConfirmMode,
) -> crate::error::Result<(Option<crate::registry::AnyProgram>, Option<Scope>)> {
    let spec = tool.spec();
    if let Some(resolve) = spec.resolve {
        let resolved = resolve(host.as_ref(), args)?;
        let for_real = resolved.for_real && mode != ConfirmMode::Preview;
        let scope = Scope::of(host.registry(), &resolved.capabilities, for_real)
            .with_hosts(&resolved.connect);
        return Ok((Some(resolved.program), Some(scope)));
    }
    Ok((
        None,
        spec.capabilities.as_ref().map(|c| {
            Scope::of(host.registry(), c, mode != ConfirmMode::Preview).with_hosts(&spec.connect)
        }),
    ))
}

/// Records a state-changing leaf call (previewed or about to run) in the run's plan, if one is
/// kept; the refusal when an approved plan did not show it.
fn record_in_plan(ctx: &CallContext, tool: &str, args: &Value, previewed: bool) -> Option<Outcome> {
    let plan = ctx.plan()?;
    if let Some(memory) = ctx.host_memory() {
        // each level of the plan keeps its own copy of the entry
        let cost = json_cost(args).saturating_mul(plan.levels());
        match memory.hold(cost, "the run's plan entries") {
            Ok(held) => plan.keep(held),
            Err(e) => return Some(Outcome::Failed(e)),
        }
    }
    let why = plan.record(tool, args, previewed, false).err()?;
    Some(Outcome::Denied {
        tool: tool.to_string(),
        reason: format!("the plan changed since it was approved: {why}; nothing more runs"),
    })
}

/// A refusal made while the config cannot be read says so: the reason may be the fail-closed
/// policy rather than the person's own settings.
fn with_config_problem(host: &dyn Caller, outcome: Outcome) -> Outcome {
    // While the config cannot be read, the usual advice (a grant, a mode switch) would be
    // refused too: what helps is fixing or repairing the file.
    let note = |reason: String| match host.config_problem() {
        Some(p) => format!("refused because {p}"),
        None => reason,
    };
    match outcome {
        Outcome::Denied { tool, reason } => Outcome::Denied {
            tool,
            reason: note(reason),
        },
        Outcome::NeedsConfirmation { tool, reason } => Outcome::NeedsConfirmation {
            tool,
            reason: note(reason),
        },
        other => other,
    }
}

/// Sleeps until the deadline, or forever when there is none.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}

/// Validates arguments; at most [`MAX_PROBLEMS`] problems, each without the offending value,
/// and an unknown property with the did-you-mean of [`hint`] (every door's calls pass here).
fn schema_problems(tool: &Tool, args: &Value) -> crate::error::Result<Vec<SchemaProblem>> {
    let validator = tool.validator()?;
    // most calls are valid: a yes or no walks the arguments without building any error
    if validator.is_valid(args) {
        return Ok(Vec::new());
    }
    Ok(validator
        .iter_errors(args)
        .take(MAX_PROBLEMS)
        .map(|e| hint::problem(&tool.spec().input_schema, &e))
        .collect())
}

/// The arguments and summary a preview, a question or a plan shows.
fn shown(spec: &crate::registry::ToolSpec, args: &Value, secrets: &[String]) -> (Value, String) {
    let summary = spec
        .summarize
        .map_or_else(|| default_summary(spec, args), |f| f(args));
    // Arguments that may hold secrets are never shown in a preview or a prompt.
    if spec.secret_args {
        (
            serde_json::json!({"(hidden)": "this tool's arguments may hold secrets"}),
            summary,
        )
    } else if secrets.is_empty() {
        (args.clone(), summary)
    } else {
        // a skill's secrets never reach a preview, a prompt or a plan
        (
            crate::text::redact_json(args, secrets),
            crate::text::redact(&summary, secrets).into_owned(),
        )
    }
}

/// "would call NAME (effect) with a, b" when a tool has no summarizer of its own.
fn default_summary(spec: &crate::registry::ToolSpec, args: &Value) -> String {
    let keys: Vec<&str> = args
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    if keys.is_empty() {
        format!("would call {} ({})", spec.name, spec.effect)
    } else {
        format!(
            "would call {} ({}) with {}",
            spec.name,
            spec.effect,
            keys.join(", ")
        )
    }
}
