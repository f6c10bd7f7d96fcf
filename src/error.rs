//! The crate's one error type.
//!
//! Every failure in lmcp is an [`Error`]. Each variant names the thing that went wrong (a tool, a
//! file, a JSON pointer) and its message says how to fix it, lowercase and without a trailing
//! period, so the front doors can print it as it is. Errors are converted once at each edge: the
//! CLI prints them and picks an exit code from [`Error::exit_code`], the MCP server turns them into
//! `isError` results, Lua raises them as error values. [`Error::class`] is the short, stable name
//! used in history entries and friction reports, which must never contain a message (messages may
//! quote user input).

use std::path::PathBuf;
use std::time::Duration;

/// Shorthand for results whose error is the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One problem found while validating a JSON value against a JSON Schema.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SchemaProblem {
    /// JSON pointer to the offending part of the instance (`""` is the whole value).
    pub pointer: String,
    /// The JSON Schema keyword that was broken, e.g. `type`, `required`, `maximum`.
    pub rule: String,
    /// What is wrong, without echoing the offending value.
    pub message: String,
}

impl std::fmt::Display for SchemaProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = if self.pointer.is_empty() {
            "(root)"
        } else {
            &self.pointer
        };
        write!(f, "at {at}: {} (rule `{}`)", self.message, self.rule)
    }
}

/// Every way an lmcp operation can fail.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No tool has this name; `suggestions` holds the closest registered names.
    #[error(
        "unknown tool `{}`{}",
        crate::text::clip(name, 80),
        suggest(suggestions)
    )]
    UnknownTool {
        name: String,
        suggestions: Vec<String>,
    },

    /// The tool exists but cannot run here and now; `reason` is readable by a person.
    #[error("tool `{tool}` is unavailable: {reason}")]
    Unavailable { tool: String, reason: String },

    /// The arguments do not match the tool's input schema.
    #[error(
        "invalid arguments for `{tool}`: {}; tools/list (`lmcp tool show {tool}`) shows its input schema",
        join(problems)
    )]
    InvalidArgs {
        tool: String,
        problems: Vec<SchemaProblem>,
    },

    /// A grant or mode refused the call; `reason` says which and how to change it.
    #[error("`{tool}` was denied: {reason}")]
    Denied { tool: String, reason: String },

    /// The call needed a person's yes and none could be asked.
    #[error("`{tool}` needs confirmation: {reason}")]
    NeedsConfirmation { tool: String, reason: String },

    /// The call, or the run it belongs to, was cancelled.
    #[error("cancelled")]
    Cancelled,

    /// The call ran past its deadline.
    #[error("timed out after {}", human_duration(*after))]
    Timeout { after: Duration },

    /// A resource limit was hit (nesting depth, output size, file size...).
    #[error("limit reached: {what} (the limit is {limit})")]
    Limit { what: String, limit: String },

    /// A tool ran and failed; `message` is its own explanation.
    #[error("{tool} failed: {message}")]
    Tool { tool: String, message: String },

    /// A tool ran and failed, and described the failure in a result of its own declared shape
    /// (`build_image_pdf`'s `stage: failed`, `retryable` and `error`): an error at every door
    /// (exit 1, `isError`, a Lua error), with that result kept as its details for machines.
    #[error("{tool} failed: {message}")]
    Reported {
        tool: String,
        message: String,
        result: Box<serde_json::Value>,
    },

    /// A tool was given a path or value it refuses (outside the allowed roots, too big...).
    #[error("{0}")]
    Refused(String),

    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },

    /// A file holds data that does not parse.
    #[error("{} is corrupt: {message}", path.display())]
    Corrupt { path: PathBuf, message: String },

    /// A tool definition is inconsistent (bad name, bad schema). A bug in whoever defined it.
    #[error("bad tool definition `{tool}`: {message}")]
    Definition { tool: String, message: String },

    /// The command line or a request was malformed.
    #[error("{0}")]
    Usage(String),

    /// A recipe manifest is malformed; `pointer` is the JSON pointer of the bad part.
    #[error("bad recipe `{name}`: at {pointer}: {message}")]
    Manifest {
        name: String,
        pointer: String,
        message: String,
    },

    /// A program's header (its leading `---@` comments) is malformed; the place is named as
    /// `file.lua:LINE`, like Lua's own errors.
    #[error("bad program header: {chunk}:{line}: {message}")]
    Header {
        chunk: String,
        line: usize,
        message: String,
    },

    /// A Lua script failed: a syntax error, or an error it raised and did not catch.
    #[error("{message}")]
    Script { message: String },

    /// A Lua script stopped on a tool call it did not catch, which was refused (`denied`,
    /// `needs_confirmation` or `unavailable`): the run was refused, with the exit code of a
    /// refusal.
    #[error("{message}")]
    ScriptRefused { message: String, refusal: String },

    /// A step of a program failed; the steps completed before it are kept so the caller can
    /// inspect their side effects before retrying.
    #[error("{0}")]
    StepFailed(Box<StepFailure>),
}

/// Whether an error class is one of a refused call (exit code 3).
pub fn is_refusal(class: &str) -> bool {
    matches!(class, "denied" | "needs_confirmation" | "unavailable")
}

/// Where a program stopped, and what it had done before.
#[derive(Debug, Clone)]
pub struct StepFailure {
    /// The program (custom tool, recipe) that stopped.
    pub program: String,
    /// The failing step's id.
    pub step: String,
    /// The tool the failing step called.
    pub tool: String,
    /// The failing step's error class.
    pub class: String,
    /// The failing step's error message.
    pub message: String,
    /// `{id, tool, status, result}` of each completed step.
    pub completed: Vec<serde_json::Value>,
    /// The run's journal id, when it kept one: resuming it goes on from the failed step.
    pub run: Option<String>,
}

impl std::fmt::Display for StepFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} stopped at step `{}` ({}): {}{}{}",
            self.program,
            self.step,
            self.tool,
            self.message,
            completed_note(&self.completed),
            match &self.run {
                Some(id) =>
                    format!("; this is run {id}, which can be resumed once the cause is fixed"),
                None => String::new(),
            }
        )
    }
}

fn completed_note(completed: &[serde_json::Value]) -> String {
    if completed.is_empty() {
        return "; no step had completed".to_string();
    }
    let named = |previewed: bool| -> Vec<String> {
        completed
            .iter()
            .filter(|c| (c["status"] == "previewed") == previewed)
            .map(|c| {
                format!(
                    "{} ({})",
                    c["id"].as_str().unwrap_or("?"),
                    c["tool"].as_str().unwrap_or("?")
                )
            })
            .collect()
    };
    let (done, previewed) = (named(false), named(true));
    let mut out = String::new();
    if !done.is_empty() {
        out.push_str(&format!(
            "; completed before it: {} — check their effects before retrying",
            done.join(", ")
        ));
    }
    if !previewed.is_empty() {
        out.push_str(&format!(
            "; only previewed before it (nothing changed): {} — in a plan, a step that reads what \
             a previewed step would write fails",
            previewed.join(", ")
        ));
    }
    out
}

impl Error {
    /// A stable, value-free name for this kind of error, used in history and friction reports.
    pub fn class(&self) -> &'static str {
        match self {
            Error::UnknownTool { .. } => "unknown_tool",
            Error::Unavailable { .. } => "unavailable",
            Error::InvalidArgs { .. } => "invalid_args",
            Error::Denied { .. } => "denied",
            Error::NeedsConfirmation { .. } => "needs_confirmation",
            Error::Cancelled => "cancelled",
            Error::Timeout { .. } => "timeout",
            Error::Limit { .. } => "limit",
            Error::Tool { .. } | Error::Reported { .. } => "tool_error",
            Error::Refused(_) => "refused",
            Error::Io { .. } => "io",
            Error::Corrupt { .. } => "corrupt",
            Error::Definition { .. } => "definition",
            Error::Usage(_) => "usage",
            Error::Header { .. } => "header",
            Error::Manifest { .. } => "manifest",
            Error::Script { .. } | Error::ScriptRefused { .. } => "script_error",
            Error::StepFailed(_) => "step_failed",
        }
    }

    /// The process exit code a front door uses for this error: 1 a tool failed, 2 bad usage or
    /// invalid arguments, 3 denied, unavailable or not confirmed.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::UnknownTool { .. }
            | Error::InvalidArgs { .. }
            | Error::Usage(_)
            | Error::Header { .. }
            | Error::Manifest { .. }
            | Error::Definition { .. } => 2,
            _ if self.refusal().is_some() => 3,
            _ => 1,
        }
    }

    /// The class a caller of the failed tool is told: the refusal when the error ends in one
    /// (so a refusal nested in a program stays one), else [`Error::class`].
    pub fn caller_class(&self) -> &str {
        self.refusal().unwrap_or(self.class())
    }

    /// `denied`, `needs_confirmation` or `unavailable` when this error is, or ends in, a call
    /// that was refused (exit code 3): a program's step, or a script's uncaught tool error,
    /// however deeply nested the program that was refused.
    pub fn refusal(&self) -> Option<&str> {
        match self {
            Error::Denied { .. } => Some("denied"),
            Error::NeedsConfirmation { .. } => Some("needs_confirmation"),
            Error::Unavailable { .. } => Some("unavailable"),
            Error::StepFailed(f) if is_refusal(&f.class) => Some(&f.class),
            Error::ScriptRefused { refusal, .. } => Some(refusal),
            _ => None,
        }
    }

    /// The one JSON shape of an error, used in results, reports and `--json` output:
    /// `{class, message}` plus `details` when the error has them.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({"class": self.class(), "message": self.to_string()});
        if let Some(d) = self.details() {
            v["details"] = d;
        }
        v
    }

    /// Structured details for machine readers (MCP results, `--json`): the completed steps of a
    /// failed program, or the result a tool described its failure in.
    pub fn details(&self) -> Option<serde_json::Value> {
        match self {
            Error::StepFailed(f) => Some(serde_json::json!({
                "failed_step": {"id": f.step, "tool": f.tool, "error": {"class": f.class, "message": f.message}},
                "completed_steps": f.completed,
                "run": f.run,
            })),
            Error::Reported { result, .. } => Some((**result).clone()),
            Error::ScriptRefused { refusal, .. } => Some(serde_json::json!({"refusal": refusal})),
            _ => None,
        }
    }

    /// The error in the words of the door in use ([`crate::text::arg_words::say`]): each
    /// argument and tool its advice names is said as the door's caller gives it, so `lmcp
    /// recipe import` says `--replace`, `lmcp call` says `replace=true` and a Lua script reads
    /// `replace = true` where an MCP client reads `"replace": true`. The failures of programs a
    /// call ran (a step, a script) keep their words: their arguments were written in the
    /// program, not given by this caller.
    pub fn in_words(self, words: crate::text::arg_words::Words<'_>) -> Error {
        let say = |s: String| crate::text::arg_words::say(&s, words);
        match self {
            Error::Refused(m) => Error::Refused(say(m)),
            Error::Usage(m) => Error::Usage(say(m)),
            Error::Corrupt { path, message } => Error::Corrupt {
                path,
                message: say(message),
            },
            Error::Tool { tool, message } => Error::Tool {
                tool,
                message: say(message),
            },
            Error::Manifest {
                name,
                pointer,
                message,
            } => Error::Manifest {
                name,
                pointer,
                message: say(message),
            },
            Error::Denied { tool, reason } => Error::Denied {
                tool,
                reason: say(reason),
            },
            Error::NeedsConfirmation { tool, reason } => Error::NeedsConfirmation {
                tool,
                reason: say(reason),
            },
            other => other,
        }
    }

    /// Wraps an I/O error with the path it happened on.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// A tool's own failure, with its message.
    pub fn tool(tool: &str, message: impl Into<String>) -> Self {
        Error::Tool {
            tool: tool.to_string(),
            message: message.into(),
        }
    }
}

fn suggest(names: &[String]) -> String {
    match names {
        [] => format!(
            "; {} lists the tools",
            crate::text::arg_words::tool("tools/list", "lmcp tools")
        ),
        [one] => format!("; did you mean `{one}`?"),
        many => {
            let quoted: Vec<String> = many.iter().map(|n| format!("`{n}`")).collect();
            format!("; did you mean one of {}?", quoted.join(", "))
        }
    }
}

fn join(problems: &[SchemaProblem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Renders a duration for people: `250ms`, `3s`, `1.5s`.
pub fn human_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_tool_message_suggests_names() {
        let e = Error::UnknownTool {
            name: "calc".into(),
            suggestions: vec!["calculate".into()],
        };
        assert_eq!(
            e.to_string(),
            "unknown tool `calc`; did you mean `calculate`?"
        );
        let e = Error::UnknownTool {
            name: "zz".into(),
            suggestions: vec![],
        };
        assert!(e.to_string().contains("lmcp tools"));
    }

    #[test]
    fn invalid_args_names_pointer_and_rule() {
        let e = Error::InvalidArgs {
            tool: "calculate".into(),
            problems: vec![SchemaProblem {
                pointer: "/expression".into(),
                rule: "type".into(),
                message: "value is not of type \"string\"".into(),
            }],
        };
        let s = e.to_string();
        assert!(s.contains("at /expression"), "{s}");
        assert!(s.contains("rule `type`"), "{s}");
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn exit_codes_follow_the_contract() {
        assert_eq!(
            Error::Denied {
                tool: "x".into(),
                reason: "r".into()
            }
            .exit_code(),
            3
        );
        assert_eq!(Error::tool("x", "boom").exit_code(), 1);
        assert_eq!(Error::Usage("u".into()).exit_code(), 2);
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(human_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(human_duration(Duration::from_secs(3)), "3s");
        assert_eq!(human_duration(Duration::from_millis(1500)), "1.5s");
    }
}
