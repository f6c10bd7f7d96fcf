//! The one question `lmcp run` asks on a terminal, before the script runs.
//!
//! A script is asked about once, from its declared scope, not call by call with no overview:
//! the state-changing tools its `---@uses` lists, with their effects, or "any tool" when it has
//! no `---@uses`. The script then runs once, for real. A yes is recorded as the run's
//! [`Approval`](crate::gate::Approval) of exactly the calls shown, as a gateway's is (the gate
//! asks again about anything outside it, and a per-tool `ask` grant asks every time). A no runs
//! nothing. `--yes` answers before the question; with no terminal at all nobody can answer, and
//! the run is the dry run it always was.

use std::sync::Arc;

use super::door::RunPerson;
use crate::error::{Error, Result};
use crate::gate::{AlwaysYes, Answer, ConfirmMode, Confirmer, NoPerson, Scope, ShownCall};
use crate::host::Host;
use crate::program::Program;
use crate::registry::Capabilities;
use crate::text::escape_controls;

/// How a run goes once its question is answered.
pub(crate) struct Decided {
    /// Preview (a dry run) or confirmed.
    pub mode: ConfirmMode,
    /// Who answers the questions the gate still asks (a per-tool `ask` grant, a call outside
    /// what was shown).
    pub confirmer: Arc<dyn Confirmer>,
    /// The state-changing calls the person's yes covers, for [`CallContext::approve`].
    ///
    /// [`CallContext::approve`]: crate::gate::CallContext
    pub approved: Vec<ShownCall>,
    /// The hosts the person's yes covers (the script's `---@connect` lines).
    pub hosts: Vec<String>,
}

/// Asks the person about `program`'s scope, when there is a person to ask and anything to ask
/// about; a no is an error (exit 3) and nothing runs.
pub(crate) async fn decide(host: &Host, program: &Program, person: RunPerson) -> Result<Decided> {
    let prompt = match person {
        RunPerson::Yes => {
            return Ok(Decided {
                mode: ConfirmMode::Confirmed,
                confirmer: Arc::new(AlwaysYes),
                approved: Vec::new(),
                hosts: Vec::new(),
            });
        }
        RunPerson::Nobody => return Ok(dry_run()),
        RunPerson::Asked(prompt) => prompt,
    };
    let any = matches!(program.capabilities, Capabilities::Unrestricted);
    let scope = program.scope(host.registry(), true);
    if !any && scope.calls.is_empty() {
        // nothing it may call changes state: nothing to ask about before it runs
        return Ok(Decided {
            mode: ConfirmMode::Confirmed,
            confirmer: prompt,
            approved: Vec::new(),
            hosts: Vec::new(),
        });
    }
    match prompt.ask(question(&program.name, &scope, any)).await {
        Answer::Yes => Ok(Decided {
            mode: ConfirmMode::Confirmed,
            confirmer: prompt,
            approved: scope.calls,
            hosts: scope.hosts,
        }),
        Answer::CannotAsk => Ok(dry_run()),
        Answer::No | Answer::Dismissed | Answer::Failed(_) => Err(Error::Denied {
            tool: program.name.clone(),
            reason: "a person declined the run; nothing was run (with no terminal, or \
                     `< /dev/null`, a run is a dry run that previews its state-changing calls)"
                .into(),
        }),
    }
}

/// A run nobody can answer for: state-changing calls are previewed.
fn dry_run() -> Decided {
    Decided {
        mode: ConfirmMode::Preview,
        confirmer: Arc::new(NoPerson),
        approved: Vec::new(),
        hosts: Vec::new(),
    }
}

/// The question: what the script may change, what a yes covers, and that it runs once.
/// `any` when the script declared no `---@uses` (then it may call any tool).
fn question(name: &str, scope: &Scope, any: bool) -> String {
    let name = escape_controls(name);
    let mut s = if any {
        format!(
            "\n{name} has no ---@uses line, so it may call any tool, state-changing ones \
             included.\n  A yes lets it call any tool in this run"
        )
    } else {
        let mut s = format!("\n{name} may change state through these tools (its ---@uses):\n");
        for c in &scope.calls {
            s.push_str(&format!("  {}\n", escape_controls(&c.describe())));
        }
        s.push_str("  A yes lets exactly these run in this run");
        s
    };
    if !scope.hosts.is_empty() {
        let hosts: Vec<String> = scope
            .hosts
            .iter()
            .map(|h| escape_controls(h).into_owned())
            .collect();
        s.push_str(&format!(
            ";\n  its requests may reach only these hosts (its ---@connect): {}",
            hosts.join(", ")
        ));
    }
    s.push_str(
        "; a tool whose own grant is ask still asks each time.\n  \
         Without a yes nothing runs.\n",
    );
    s.push_str(&format!("Run {name}? [y/N] "));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Effect;

    #[test]
    fn the_question_lists_the_declared_tools_or_says_any_tool() {
        let scope = Scope {
            calls: vec![
                ShownCall {
                    tool: "write_file".into(),
                    effect: Effect::Write,
                    destructive: true,
                },
                ShownCall {
                    tool: "mcp__mail__send".into(),
                    effect: Effect::Send,
                    destructive: false,
                },
            ],
            ..Scope::default()
        };
        let q = question("notes.lua", &scope, false);
        assert!(
            q.contains("notes.lua may change state through these tools (its ---@uses):"),
            "{q}"
        );
        assert!(q.contains("  write_file (write, destructive)\n"), "{q}");
        assert!(q.contains("  mcp__mail__send (send)\n"), "{q}");
        assert!(q.contains("grant is ask still asks each time"), "{q}");
        assert!(q.ends_with("Run notes.lua? [y/N] "), "{q}");
        let q = question("x\u{1b}[2J.lua", &scope, true);
        assert!(q.contains("may call any tool"), "{q}");
        assert!(!q.contains("write_file"), "{q}");
        assert!(
            !q.contains('\u{1b}'),
            "a script's name is shown escaped: {q}"
        );
    }
}
