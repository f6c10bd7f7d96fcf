//! The gate, stage by stage and outcome by outcome, table-driven.

use std::sync::Arc;
use std::time::Duration;

use lmcp::config::{Config, Grant};
use lmcp::gate::{AlwaysYes, Answer, Confirmer, NoPerson, Scripted};
use lmcp::{CallContext, CallRequest, ConfirmMode, Origin, Outcome};
use serde_json::{Value, json};

use crate::common::{self, TestHost, call_yes};

/// One row of the table.
struct Case {
    name: &'static str,
    setup: fn(&mut Config),
    mode: ConfirmMode,
    answers: &'static [Answer],
    tool: &'static str,
    args: Value,
    /// The outcome class, e.g. `done`, `denied`, `failed:invalid_args`.
    expect: &'static str,
    /// Whether the probe's handler must have run.
    entered: bool,
    /// How many times a person was asked.
    asked: usize,
    /// A piece of the message or result the outcome must contain.
    mentions: &'static str,
}

fn none(_: &mut Config) {}

fn cases() -> Vec<Case> {
    use ConfirmMode::*;
    let a = || json!({"n": 1});
    vec![
        Case {
            name: "a write outside the roots is refused before anyone is asked",
            setup: none,
            mode: Ask,
            answers: &[Answer::Yes],
            tool: "write_file",
            args: json!({"path": "/lmcp-never/x.txt", "content": "x"}),
            expect: "failed:refused",
            entered: false,
            asked: 0,
            mentions: "outside the allowed roots",
        },
        Case {
            name: "a write outside the roots is refused, not previewed",
            setup: none,
            mode: Preview,
            answers: &[],
            tool: "write_file",
            args: json!({"path": "/lmcp-never/x.txt", "content": "x"}),
            expect: "failed:refused",
            entered: false,
            asked: 0,
            mentions: "outside the allowed roots",
        },
        Case {
            name: "a folder outside the roots is refused before an ask grant asks",
            setup: |c| {
                c.grants.insert("list_dir".into(), Grant::Ask);
            },
            mode: Ask,
            answers: &[Answer::Yes],
            tool: "list_dir",
            args: json!({"path": "/"}),
            expect: "failed:refused",
            entered: false,
            asked: 0,
            mentions: "outside the allowed roots",
        },
        Case {
            name: "a command in a folder outside the roots is refused before anyone is asked",
            setup: none,
            mode: Ask,
            answers: &[Answer::Yes],
            tool: "run_command",
            args: json!({"program": "true", "cwd": "/"}),
            expect: "failed:refused",
            entered: false,
            asked: 0,
            mentions: "outside the allowed roots",
        },
        Case {
            name: "a write inside the roots still asks",
            setup: none,
            mode: Ask,
            answers: &[Answer::No],
            tool: "write_file",
            args: json!({"path": "inside.txt", "content": "x"}),
            expect: "denied",
            entered: false,
            asked: 1,
            mentions: "declined",
        },
        Case {
            name: "unknown tool suggests names",
            setup: none,
            mode: Confirmed,
            answers: &[],
            tool: "probe_reed",
            args: a(),
            expect: "failed:unknown_tool",
            entered: false,
            asked: 0,
            mentions: "did you mean one of `probe_read`",
        },
        Case {
            name: "disabled tool is unavailable",
            setup: |c| c.disabled_tools.push("probe_read".into()),
            mode: Confirmed,
            answers: &[],
            tool: "probe_read",
            args: a(),
            expect: "failed:unavailable",
            entered: false,
            asked: 0,
            mentions: "lmcp tool enable probe_read",
        },
        Case {
            name: "no-terminal mode makes run_command unavailable",
            setup: |c| c.modes.no_terminal = true,
            mode: Confirmed,
            answers: &[],
            tool: "run_command",
            args: json!({"program": "true"}),
            expect: "failed:unavailable",
            entered: false,
            asked: 0,
            mentions: "no terminal access",
        },
        Case {
            name: "wrong type names the pointer and rule",
            setup: none,
            mode: Confirmed,
            answers: &[],
            tool: "probe_read",
            args: json!({"n": "x"}),
            expect: "failed:invalid_args",
            entered: false,
            asked: 0,
            mentions: "at /n: ",
        },
        Case {
            name: "minimum names the rule",
            setup: none,
            mode: Confirmed,
            answers: &[],
            tool: "probe_read",
            args: json!({"n": -1}),
            expect: "failed:invalid_args",
            entered: false,
            asked: 0,
            mentions: "rule `minimum`",
        },
        Case {
            name: "extra property is refused",
            setup: none,
            mode: Confirmed,
            answers: &[],
            tool: "probe_read",
            args: json!({"zz": 1}),
            expect: "failed:invalid_args",
            entered: false,
            asked: 0,
            mentions: "rule `additionalProperties`",
        },
        Case {
            name: "missing required argument",
            setup: none,
            mode: Confirmed,
            answers: &[],
            tool: "calculate",
            args: json!({}),
            expect: "failed:invalid_args",
            entered: false,
            asked: 0,
            mentions: "rule `required`",
        },
        Case {
            name: "validation precedes grants",
            setup: |c| {
                c.grants.insert("probe_read".into(), Grant::Deny);
            },
            mode: Confirmed,
            answers: &[],
            tool: "probe_read",
            args: json!({"n": "x"}),
            expect: "failed:invalid_args",
            entered: false,
            asked: 0,
            mentions: "",
        },
        Case {
            name: "deny grant on the tool",
            setup: |c| {
                c.grants.insert("probe_read".into(), Grant::Deny);
            },
            mode: Confirmed,
            answers: &[],
            tool: "probe_read",
            args: a(),
            expect: "denied",
            entered: false,
            asked: 0,
            mentions: "grants allow probe_read",
        },
        Case {
            name: "deny grant on the effect",
            setup: |c| {
                c.grants.insert("write".into(), Grant::Deny);
            },
            mode: Confirmed,
            answers: &[],
            tool: "probe_write",
            args: a(),
            expect: "denied",
            entered: false,
            asked: 0,
            mentions: "grant for write tools",
        },
        Case {
            name: "grants precede modes",
            setup: |c| {
                c.grants.insert("probe_write".into(), Grant::Deny);
                c.modes.read_only = true;
            },
            mode: Confirmed,
            answers: &[],
            tool: "probe_write",
            args: a(),
            expect: "denied",
            entered: false,
            asked: 0,
            mentions: "grant for `probe_write`",
        },
        Case {
            name: "read-only blocks write",
            setup: |c| c.modes.read_only = true,
            mode: Confirmed,
            answers: &[],
            tool: "probe_write",
            args: a(),
            expect: "denied",
            entered: false,
            asked: 0,
            mentions: "read-only mode is on",
        },
        Case {
            name: "read-only blocks send",
            setup: |c| {
                c.modes.read_only = true;
                c.grants.insert("send".into(), Grant::Allow);
            },
            mode: Confirmed,
            answers: &[],
            tool: "probe_send",
            args: a(),
            expect: "denied",
            entered: false,
            asked: 0,
            mentions: "read-only",
        },
        Case {
            name: "read-only lets reads run",
            setup: |c| c.modes.read_only = true,
            mode: Confirmed,
            answers: &[],
            tool: "probe_read",
            args: a(),
            expect: "done",
            entered: true,
            asked: 0,
            mentions: "echo",
        },
        Case {
            name: "private blocks send",
            setup: |c| {
                c.modes.private = true;
                c.grants.insert("send".into(), Grant::Allow);
            },
            mode: Confirmed,
            answers: &[],
            tool: "probe_send",
            args: a(),
            expect: "denied",
            entered: false,
            asked: 0,
            mentions: "private mode",
        },
        Case {
            name: "private lets writes run",
            setup: |c| c.modes.private = true,
            mode: Confirmed,
            answers: &[],
            tool: "probe_write",
            args: a(),
            expect: "done",
            entered: true,
            asked: 0,
            mentions: "",
        },
        Case {
            name: "preview mode previews a write",
            setup: none,
            mode: Preview,
            answers: &[],
            tool: "probe_write",
            args: a(),
            expect: "preview",
            entered: false,
            asked: 0,
            mentions: "would call probe_write (write) with n",
        },
        Case {
            name: "preview mode runs a read",
            setup: none,
            mode: Preview,
            answers: &[],
            tool: "probe_read",
            args: a(),
            expect: "done",
            entered: true,
            asked: 0,
            mentions: "",
        },
        Case {
            name: "preview mode previews an ask-grant read",
            setup: |c| {
                c.grants.insert("probe_read".into(), Grant::Ask);
            },
            mode: Preview,
            answers: &[Answer::Yes],
            tool: "probe_read",
            args: a(),
            expect: "preview",
            entered: false,
            asked: 0,
            mentions: "",
        },
        Case {
            name: "no-preview tool is asked, not previewed",
            setup: none,
            mode: Preview,
            answers: &[Answer::Yes],
            tool: "probe_nopreview",
            args: a(),
            expect: "done",
            entered: true,
            asked: 1,
            mentions: "sent",
        },
        Case {
            name: "no-preview tool allowed runs in preview mode",
            setup: |c| {
                c.grants.insert("probe_nopreview".into(), Grant::Allow);
            },
            mode: Preview,
            answers: &[],
            tool: "probe_nopreview",
            args: a(),
            expect: "done",
            entered: true,
            asked: 0,
            mentions: "",
        },
        Case {
            name: "ask grant, person says no",
            setup: |c| {
                c.grants.insert("probe_read".into(), Grant::Ask);
            },
            mode: Confirmed,
            answers: &[Answer::No],
            tool: "probe_read",
            args: a(),
            expect: "denied",
            entered: false,
            asked: 1,
            mentions: "declined",
        },
        Case {
            name: "ask grant, person says yes",
            setup: |c| {
                c.grants.insert("probe_read".into(), Grant::Ask);
            },
            mode: Confirmed,
            answers: &[Answer::Yes],
            tool: "probe_read",
            args: a(),
            expect: "done",
            entered: true,
            asked: 1,
            mentions: "",
        },
        Case {
            name: "ask grant, nobody to ask",
            setup: |c| {
                c.grants.insert("probe_read".into(), Grant::Ask);
            },
            mode: Confirmed,
            answers: &[],
            tool: "probe_read",
            args: a(),
            expect: "needs_confirmation",
            entered: false,
            asked: 1,
            mentions: "--yes",
        },
        Case {
            name: "send asks by default",
            setup: none,
            mode: Confirmed,
            answers: &[Answer::No],
            tool: "probe_send",
            args: a(),
            expect: "denied",
            entered: false,
            asked: 1,
            mentions: "",
        },
        Case {
            name: "destructive asks by default",
            setup: none,
            mode: Confirmed,
            answers: &[Answer::Yes],
            tool: "probe_destructive",
            args: a(),
            expect: "done",
            entered: true,
            asked: 1,
            mentions: "",
        },
        Case {
            name: "write runs by default when confirmed",
            setup: none,
            mode: Confirmed,
            answers: &[],
            tool: "probe_write",
            args: a(),
            expect: "done",
            entered: true,
            asked: 0,
            mentions: "",
        },
        Case {
            name: "ask mode asks before a write",
            setup: none,
            mode: Ask,
            answers: &[Answer::No],
            tool: "probe_write",
            args: a(),
            expect: "denied",
            entered: false,
            asked: 1,
            mentions: "",
        },
        Case {
            name: "ask mode does not ask for reads",
            setup: none,
            mode: Ask,
            answers: &[],
            tool: "probe_read",
            args: a(),
            expect: "done",
            entered: true,
            asked: 0,
            mentions: "",
        },
    ]
}

#[tokio::test]
async fn every_stage_and_outcome() {
    let mut failures = Vec::new();
    for case in cases() {
        let t = TestHost::new();
        t.host
            .update_config(|c| {
                (case.setup)(c);
                Ok(())
            })
            .unwrap();
        let confirmer = Arc::new(Scripted::new(case.answers.iter().cloned()));
        let ctx = CallContext::root(Origin::Cli, case.mode).with_confirmer(confirmer.clone());
        let outcome = t
            .host
            .call(CallRequest::new(case.tool, case.args.clone(), ctx))
            .await;
        let class = outcome.class();
        let text = outcome.to_json().to_string();
        let entered = t.entered.count(case.tool) > 0;
        let asked = confirmer.asked().len();
        if class != case.expect
            || entered != case.entered
            || asked != case.asked
            || !text.contains(case.mentions)
        {
            failures.push(format!(
                "{}: got {class}, entered={entered}, asked={asked}, {text}",
                case.name
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[tokio::test]
async fn a_denied_handler_is_never_entered_whatever_the_confirmer() {
    let t = TestHost::new();
    t.set_grant("probe_write", Grant::Deny);
    for confirmer in [
        Arc::new(AlwaysYes) as Arc<dyn Confirmer>,
        Arc::new(NoPerson),
    ] {
        for mode in [
            ConfirmMode::Preview,
            ConfirmMode::Ask,
            ConfirmMode::Confirmed,
        ] {
            let ctx = CallContext::root(Origin::Mcp, mode).with_confirmer(confirmer.clone());
            let o = t
                .host
                .call(CallRequest::new("probe_write", json!({}), ctx))
                .await;
            assert_eq!(o.class(), "denied");
        }
    }
    assert_eq!(t.entered.count("probe_write"), 0);
}

#[tokio::test]
async fn cancellation_stops_a_running_call() {
    let t = TestHost::new();
    let ctx = CallContext::root(Origin::Cli, ConfirmMode::Confirmed);
    let cancel = ctx.cancel_token().clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        cancel.cancel();
    });
    let o = t
        .host
        .call(CallRequest::new("probe_slow", json!({"n": 60_000}), ctx))
        .await;
    assert_eq!(o.class(), "failed:cancelled");
    assert_eq!(t.entered.count("probe_slow"), 1);
}

/// A call whose future is dropped mid-run (a transport carrying out a client's cancel by
/// dropping the request) is still recorded, as cancelled.
#[tokio::test]
async fn a_dropped_call_is_recorded_as_cancelled() {
    let t = TestHost::new();
    let ctx = CallContext::root(Origin::Cli, ConfirmMode::Confirmed);
    let call = t
        .host
        .call(CallRequest::new("probe_slow", json!({"n": 60_000}), ctx));
    let gave_up = tokio::time::timeout(Duration::from_millis(50), call).await;
    assert!(gave_up.is_err(), "the call was still running");
    assert_eq!(t.entered.count("probe_slow"), 1);
    t.host.history().flush().unwrap();
    let recent = t.host.history().recent(10).unwrap().entries;
    assert_eq!(recent.len(), 1, "{recent:?}");
    assert_eq!(recent[0].tool, "probe_slow");
    assert_eq!(recent[0].outcome, "failed:cancelled");
    assert!(recent[0].duration_ms >= 40.0, "{}", recent[0].duration_ms);
}

#[tokio::test]
async fn a_deadline_stops_a_running_call() {
    let t = TestHost::new();
    let ctx = CallContext::root(Origin::Cli, ConfirmMode::Confirmed)
        .with_timeout(Duration::from_millis(50));
    let o = t
        .host
        .call(CallRequest::new("probe_slow", json!({"n": 60_000}), ctx))
        .await;
    assert_eq!(o.class(), "failed:timeout");
    assert!(o.to_json().to_string().contains("timed out after 50ms"));
}

#[tokio::test]
async fn nesting_is_bounded() {
    let t = TestHost::new();
    let ctx = || CallContext::root(Origin::Cli, ConfirmMode::Confirmed);
    let o = t
        .host
        .call(CallRequest::new("probe_nest", json!({"n": 3}), ctx()))
        .await;
    assert_eq!(o.into_result().unwrap(), json!(3));
    let o = t
        .host
        .call(CallRequest::new("probe_nest", json!({"n": 40}), ctx()))
        .await;
    let text = o.to_json().to_string();
    assert_eq!(o.class(), "failed:limit", "{text}");
    assert!(
        text.contains("nested 17 deep") && text.contains("the limit is 16"),
        "{text}"
    );
}

#[tokio::test]
async fn a_program_cannot_raise_its_confirmation_mode() {
    let t = TestHost::new();
    let root =
        CallContext::root(Origin::Repl, ConfirmMode::Preview).with_confirmer(Arc::new(AlwaysYes));
    let child = root.child_with_mode(ConfirmMode::Confirmed);
    let o = t
        .host
        .call(CallRequest::new("probe_write", json!({}), child))
        .await;
    assert_eq!(o.class(), "preview");
    assert_eq!(t.entered.count("probe_write"), 0);
}

#[tokio::test]
async fn history_records_shapes_and_never_values() {
    let t = TestHost::new();
    let ctx = || CallContext::root(Origin::Cli, ConfirmMode::Confirmed);
    t.host
        .call(CallRequest::new(
            "probe_read",
            json!({"n": 987654, "text": "my-secret-words"}),
            ctx(),
        ))
        .await;
    t.host
        .call(CallRequest::new(
            "no_such_tool_secretname",
            json!({}),
            ctx(),
        ))
        .await;
    // written behind the calls: flushed before the file is read
    t.host.history().flush().unwrap();
    let raw = std::fs::read_to_string(t.host.paths().history_file()).unwrap();
    assert!(!raw.contains("987654") && !raw.contains("secret"), "{raw}");
    let recent = t.host.history().recent(10).unwrap().entries;
    assert_eq!(recent.len(), 2);
    assert_eq!(recent[0].tool, "probe_read");
    assert_eq!(recent[0].outcome, "done");
    assert_eq!(recent[0].origin, "cli");
    assert_eq!(recent[0].args[1].kind, "string");
    assert_eq!(recent[0].args[1].size, "1-15");
    assert_eq!(recent[1].tool, "(unknown)");
    assert_eq!(recent[1].outcome, "failed:unknown_tool");
}

#[tokio::test]
async fn private_mode_writes_no_history() {
    let t = TestHost::new();
    t.host
        .update_config(|c| {
            c.modes.private = true;
            Ok(())
        })
        .unwrap();
    let ctx = CallContext::root(Origin::Cli, ConfirmMode::Confirmed);
    let o = t
        .host
        .call(CallRequest::new("probe_read", json!({"n": 1}), ctx))
        .await;
    assert!(matches!(o, Outcome::Done(_)));
    assert!(!t.host.paths().history_file().exists());
    assert!(t.host.history().recent(10).unwrap().entries.is_empty());
}

#[tokio::test]
/// Another process's change applies within `CONFIG_RECHECK` (the file is not looked at on
/// every call); this process's own change applies at once.
async fn another_process_changing_the_config_is_seen_within_the_recheck_time() {
    let t = TestHost::new();
    let ctx = || CallContext::root(Origin::Mcp, ConfirmMode::Confirmed);
    assert_eq!(
        t.host
            .call(CallRequest::new("probe_read", json!({}), ctx()))
            .await
            .class(),
        "done"
    );
    // As `lmcp grants deny probe_read` in another process would.
    let other = lmcp::Host::open(t.host.paths().clone()).unwrap();
    other
        .update_config(|c| {
            c.grants.insert("probe_read".into(), Grant::Deny);
            c.limits.max_depth = 3; // change the length too, so the stamp differs even in the same tick
            Ok(())
        })
        .unwrap();
    tokio::time::sleep(lmcp::host::CONFIG_RECHECK + std::time::Duration::from_millis(5)).await;
    assert_eq!(
        t.host
            .call(CallRequest::new("probe_read", json!({}), ctx()))
            .await
            .class(),
        "denied"
    );
    t.host
        .update_config(|c| {
            c.grants.remove("probe_read");
            Ok(())
        })
        .unwrap();
    assert_eq!(
        t.host
            .call(CallRequest::new("probe_read", json!({}), ctx()))
            .await
            .class(),
        "done",
        "this process's own change applies at once"
    );
}

// ---- A yes covers what was shown, nothing more (programs, plans, prompts, front doors) ----

/// Saves a program through the gate as a person who said yes.
async fn save(t: &TestHost, tool: &str, args: Value) {
    call_yes(&t.host, tool, args)
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
}

/// Runs `tool` in ask mode (a REPL) with these answers; the outcome and what was asked.
async fn in_ask_mode(
    t: &TestHost,
    tool: &str,
    args: Value,
    answers: &[Answer],
) -> (Outcome, Vec<lmcp::gate::ConfirmRequest>) {
    let confirmer = Arc::new(Scripted::new(answers.iter().cloned()));
    let ctx = CallContext::root(Origin::Repl, ConfirmMode::Ask).with_confirmer(confirmer.clone());
    let o = t.host.call(CallRequest::new(tool, args, ctx)).await;
    (o, confirmer.asked())
}

const SKILL: &str = "---\nname: risky\ndescription: A skill that writes and sends.\n---\nDo it.\n";

/// Each gateway runs a program with a destructive and a send step: one question, up front,
/// listing both with their effects, and the steps run under that yes, once each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_yes_shows_every_state_changing_call_of_the_program() {
    let t = TestHost::new();
    let steps = json!([{"tool": "probe_destructive", "args": {"n": 1}}, {"tool": "probe_send", "args": {"n": 2}}]);
    save(
        &t,
        "recipe_save",
        json!({"manifest": {"name": "both", "steps": steps}}),
    )
    .await;
    let lua = "---@uses probe_destructive, probe_send\ntools.probe_destructive{n = 1}\ntools.probe_send{n = 2}\nreturn 1";
    save(
        &t,
        "recipe_save",
        json!({"manifest": {"name": "both lua", "lua": lua}}),
    )
    .await;
    save(
        &t,
        "custom_tool_create",
        json!({"name": "user_both", "description": "d", "lua": lua}),
    )
    .await;
    save(
        &t,
        "skill_install",
        json!({"skill_md": SKILL, "scripts": [{"name": "go.lua", "code": lua}]}),
    )
    .await;
    let rows: Vec<(&str, Value)> = vec![
        ("recipe_run", json!({"name": "both", "confirm": true})),
        ("recipe_run", json!({"name": "both lua", "confirm": true})),
        ("user_both", json!({})),
        ("skill_call", json!({"skill": "risky", "script": "go"})),
    ];
    let mut failures = Vec::new();
    for (i, (tool, args)) in rows.into_iter().enumerate() {
        let (o, asked) = in_ask_mode(&t, tool, args.clone(), &[Answer::Yes]).await;
        let shown: Vec<String> = asked
            .first()
            .map(|a| a.calls.iter().map(|c| c.describe()).collect())
            .unwrap_or_default();
        let prompt = asked
            .first()
            .map(lmcp::gate::render_prompt)
            .unwrap_or_default();
        let ok = o.class() == "done"
            && asked.len() == 1
            && asked[0].effect == lmcp::registry::Effect::Send
            && asked[0].destructive
            && shown.contains(&"probe_destructive (write, destructive)".to_string())
            && shown.contains(&"probe_send (send)".to_string())
            && prompt.contains("probe_send (send)")
            && t.entered.count("probe_destructive") == i + 1
            && t.entered.count("probe_send") == i + 1;
        if !ok {
            failures.push(format!(
                "{tool} {args}: {} asked {} {shown:?}",
                o.to_json(),
                asked.len()
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// A per-tool ask grant asks again inside an approved program, and a no stops the step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_grant_asks_again_under_an_approved_program() {
    let t = TestHost::new();
    let steps = json!([{"tool": "probe_write", "args": {"n": 1}}, {"tool": "probe_destructive", "args": {"n": 2}}]);
    save(
        &t,
        "recipe_save",
        json!({"manifest": {"name": "two", "steps": steps}}),
    )
    .await;
    t.set_grant("probe_write", Grant::Ask);
    let args = json!({"name": "two", "confirm": true});
    let (o, asked) = in_ask_mode(&t, "recipe_run", args.clone(), &[Answer::Yes, Answer::No]).await;
    assert_eq!(asked.len(), 2, "{}", o.to_json());
    assert_eq!(asked[1].tool, "probe_write");
    assert_eq!(o.class(), "failed:step_failed", "{}", o.to_json());
    assert_eq!(t.entered.count("probe_write"), 0);
    assert_eq!(t.entered.count("probe_destructive"), 0);
    // from an MCP-like confirmed run too: the recipe's yes does not cover the ask grant
    let confirmer = Arc::new(Scripted::new([Answer::Yes]));
    let ctx =
        CallContext::root(Origin::Mcp, ConfirmMode::Confirmed).with_confirmer(confirmer.clone());
    let o = t.host.call(CallRequest::new("recipe_run", args, ctx)).await;
    assert_eq!(confirmer.asked().len(), 2, "{}", o.to_json());
    assert_eq!(o.class(), "failed:step_failed");
}

/// A recipe that runs another recipe: its plan shows and hashes the nested write, and the
/// "nothing changes" hash cannot run it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_programs_are_in_the_plan_and_its_hash() {
    let t = TestHost::new();
    let inner = json!([{"tool": "probe_write", "args": {"n": 7}}]);
    save(
        &t,
        "recipe_save",
        json!({"manifest": {"name": "inner", "steps": inner}}),
    )
    .await;
    let lua = "---@uses recipe_run\nreturn tools.recipe_run{name = 'inner', confirm = true}.result";
    save(
        &t,
        "recipe_save",
        json!({"manifest": {"name": "outer", "lua": lua}}),
    )
    .await;
    let plan = call_yes(&t.host, "recipe_run", json!({"name": "outer"}))
        .await
        .unwrap();
    let empty = lmcp::gate::plan_hash(&[]);
    assert_ne!(plan["plan_hash"], json!(empty), "{plan}");
    assert_eq!(t.entered.count("probe_write"), 0);
    let e = call_yes(
        &t.host,
        "recipe_run",
        json!({"name": "outer", "confirm": true, "plan_hash": empty}),
    )
    .await
    .unwrap_err();
    assert!(e.contains("the plan changed"), "{e}");
    assert_eq!(t.entered.count("probe_write"), 0);
    let r = call_yes(
        &t.host,
        "recipe_run",
        json!({"name": "outer", "confirm": true, "plan_hash": plan["plan_hash"]}),
    )
    .await
    .unwrap();
    assert_eq!(t.entered.count("probe_write"), 1, "{r}");
}

/// What the plan depends on changes between the preview and the run: nothing runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_changed_between_preview_and_run_does_not_run() {
    let t = TestHost::new();
    let ws = t.home().join("data/workspace");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("src.txt"), "shown").unwrap();
    let lua = "---@uses read_file, write_file\nlocal s = tools.read_file{path = 'src.txt'}.content\nreturn tools.write_file{path = 'out.txt', content = s, overwrite = true}";
    save(
        &t,
        "recipe_save",
        json!({"manifest": {"name": "copy", "lua": lua}}),
    )
    .await;
    let plan = call_yes(&t.host, "recipe_run", json!({"name": "copy"}))
        .await
        .unwrap();
    std::fs::write(ws.join("src.txt"), "never shown").unwrap();
    let e = call_yes(
        &t.host,
        "recipe_run",
        json!({"name": "copy", "confirm": true, "plan_hash": plan["plan_hash"]}),
    )
    .await
    .unwrap_err();
    assert!(e.contains("the plan changed"), "{e}");
    assert!(!ws.join("out.txt").exists());
}

/// A plan stops at its first failed step and has no hash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_stops_at_a_failed_step() {
    let t = TestHost::new();
    let steps = json!([
        {"tool": "read_file", "args": {"path": "missing.txt"}},
        {"tool": "probe_write", "args": {"n": 1}}
    ]);
    save(
        &t,
        "recipe_save",
        json!({"manifest": {"name": "fails", "steps": steps}}),
    )
    .await;
    let ctx = CallContext::root(Origin::Cli, ConfirmMode::Confirmed);
    let o = t
        .host
        .call(CallRequest::new(
            "recipe_run",
            json!({"name": "fails"}),
            ctx,
        ))
        .await;
    assert_eq!(o.class(), "failed:step_failed", "{}", o.to_json());
    assert_eq!(o.exit_code(), 1);
    assert!(!o.to_json().to_string().contains("plan_hash"));
    assert!(!o.to_json().to_string().contains("probe_write"));
}

/// A path with ESC, BEL and NUL is shown escaped in the prompt, never raw.
#[tokio::test]
async fn a_prompt_shows_control_characters_escaped() {
    let t = TestHost::new();
    let path = "a\u{1b}[2K\u{1b}[1A\u{7}\u{0}b.txt";
    let (o, asked) = in_ask_mode(
        &t,
        "write_file",
        json!({"path": path, "content": "x"}),
        &[Answer::No],
    )
    .await;
    assert_eq!(o.class(), "denied");
    let prompt = lmcp::gate::render_prompt(&asked[0]);
    for raw in ['\u{1b}', '\u{7}', '\u{0}'] {
        assert!(!prompt.contains(raw), "{prompt:?}");
    }
    assert!(
        prompt.contains("\\e[2K") || prompt.contains("\\u001b[2K"),
        "{prompt:?}"
    );
}

/// `lmcp run x.json` is a recipe_run call: a deny on recipe_run stops it.
#[test]
fn lmcp_run_of_a_manifest_goes_through_the_gate() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let file = h.join("r.json");
    std::fs::write(
        &file,
        json!({"name": "r", "steps": [{"tool": "write_file", "args": {"path": "x.txt", "content": "x"}}]}).to_string(),
    )
    .unwrap();
    common::lmcp_ok(h, &["grants", "deny", "recipe_run"]);
    let out = common::lmcp(h, &["run", file.to_str().unwrap(), "--yes"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!h.join("data/workspace/x.txt").exists());
}

/// `lmcp skill config` goes through the gate like every call: under an ask grant with nobody
/// to ask, it is not run.
#[test]
fn skill_config_asks_under_an_ask_grant() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let dir = h.join("pkg");
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        "---\nname: cfg\ndescription: d\nconfig:\n  greeting:\n    type: text\n---\nx\n",
    )
    .unwrap();
    common::lmcp_ok(h, &["skill", "install", dir.to_str().unwrap(), "--yes"]);
    common::lmcp_ok(h, &["grants", "ask", "skill_config"]);
    let out = common::lmcp(h, &["skill", "config", "cfg", "greeting=hi"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    common::lmcp_ok(h, &["skill", "config", "cfg", "greeting=hi", "--yes"]);
}

/// A plan shows every state-changing call, nested programs' too; a nested failure a script
/// catches still fails the plan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_shows_nested_calls_and_fails_with_a_nested_failure() {
    let t = TestHost::new();
    let user = "---@uses probe_write\ntools.probe_write{n = 5}\nreturn 1";
    save(
        &t,
        "custom_tool_create",
        json!({"name": "user_wr", "description": "writes", "lua": user}),
    )
    .await;
    let lua = "---@uses user_wr\ntools.user_wr{}\nreturn 1";
    save(
        &t,
        "recipe_save",
        json!({"manifest": {"name": "via user", "lua": lua}}),
    )
    .await;
    let plan = call_yes(&t.host, "recipe_run", json!({"name": "via user"}))
        .await
        .unwrap();
    assert_eq!(
        plan["calls"],
        json!([{"tool": "probe_write", "args": {"n": 5}, "previewed": true}]),
        "{plan}"
    );
    let failing = json!([{"tool": "probe_write", "args": {"n": 1}}, {"tool": "read_file", "args": {"path": "nope.txt"}}]);
    save(
        &t,
        "recipe_save",
        json!({"manifest": {"name": "fail", "steps": failing}}),
    )
    .await;
    let lua = "---@uses recipe_run, probe_write\npcall(function() return tools.recipe_run{name = 'fail', confirm = true} end)\ntools.probe_write{n = 2}\nreturn 1";
    save(
        &t,
        "recipe_save",
        json!({"manifest": {"name": "catches", "lua": lua}}),
    )
    .await;
    let e = call_yes(&t.host, "recipe_run", json!({"name": "catches"}))
        .await
        .unwrap_err();
    assert!(e.contains("failed inside a nested program"), "{e}");
    assert_eq!(t.entered.count("probe_write"), 0);
}

/// `deny write` stops destructive write tools too, and gateways running them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_write_stops_destructive_writes_and_their_gateways() {
    let t = TestHost::new();
    let steps = json!([{"tool": "probe_destructive", "args": {"n": 1}}]);
    save(
        &t,
        "recipe_save",
        json!({"manifest": {"name": "d", "steps": steps}}),
    )
    .await;
    t.set_grant("write", Grant::Deny);
    for (tool, args) in [
        ("probe_destructive", json!({"n": 1})),
        ("recipe_run", json!({"name": "d", "confirm": true})),
    ] {
        let e = call_yes(&t.host, tool, args).await.unwrap_err();
        assert!(e.contains("deny"), "{tool}: {e}");
    }
    assert_eq!(t.entered.count("probe_destructive"), 0);
}

/// Errors, results and plan hints on the command line show control characters escaped, and
/// the rerun hint keeps the parameters.
#[test]
fn the_command_line_never_prints_raw_control_characters() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let out = common::lmcp(
        h,
        &[
            "call",
            "read_file",
            r#"{"path": "a\u001b[31mred\u0000.txt"}"#,
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains('\u{1b}') && !err.contains('\u{0}'), "{err:?}");
    assert!(err.contains("\\e[31m"), "{err:?}");
    let file = h.join("r.json");
    std::fs::write(
        &file,
        json!({"name": "r", "params": [{"name": "p", "type": "string"}], "steps": [{"tool": "write_file", "args": {"path": "${p}", "content": "x"}}]}).to_string(),
    )
    .unwrap();
    common::lmcp_ok(h, &["recipe", "save", file.to_str().unwrap()]);
    let out = common::lmcp_ok(h, &["recipe", "run", "r", "-p", "p=b\u{1b}[2J.txt"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains('\u{1b}'), "{text:?}");
    assert!(text.contains("-p 'p=b\\e[2J.txt'"), "{text}");
}

/// A Lua recipe that runs another recipe can be planned from the command line with nobody to
/// ask: in a plan the nested program is a plan too, so nothing needs a yes.
#[test]
fn a_plan_of_a_recipe_that_runs_a_recipe_needs_no_yes() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let inner = h.join("inner.json");
    std::fs::write(
        &inner,
        json!({"name": "inner", "steps": [{"tool": "write_file", "args": {"path": "i.txt", "content": "x"}}]}).to_string(),
    )
    .unwrap();
    let outer = h.join("outer.lua");
    std::fs::write(
        &outer,
        "---@name outer\n---@uses recipe_run\nreturn tools.recipe_run{name = 'inner', confirm = true}.result\n",
    )
    .unwrap();
    common::lmcp_ok(h, &["recipe", "save", inner.to_str().unwrap()]);
    common::lmcp_ok(h, &["recipe", "save", outer.to_str().unwrap()]);
    let out = common::lmcp_ok(h, &["recipe", "run", "outer", "--json"]);
    let plan = common::json_out(&out);
    assert_eq!(plan["calls"][0]["tool"], json!("write_file"), "{plan}");
    assert!(!h.join("data/workspace/i.txt").exists());
}

/// In a real run, a nested program run as a plan only previews: its calls are reported as
/// previewed, not as made, and nothing of it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_plan_in_a_real_run_is_reported_as_previewed() {
    let t = TestHost::new();
    let inner = json!([{"tool": "probe_write", "args": {"n": 3}}]);
    save(
        &t,
        "recipe_save",
        json!({"manifest": {"name": "inner", "steps": inner}}),
    )
    .await;
    let lua = "---@uses recipe_run, probe_destructive\ntools.probe_destructive{n = 1}\ntools.recipe_run{name = 'inner'}\nreturn 1";
    save(
        &t,
        "recipe_save",
        json!({"manifest": {"name": "outer", "lua": lua}}),
    )
    .await;
    let r = call_yes(
        &t.host,
        "recipe_run",
        json!({"name": "outer", "confirm": true}),
    )
    .await
    .unwrap();
    assert_eq!(
        r["calls"],
        json!([
            {"tool": "probe_destructive", "args": {"n": 1}},
            {"tool": "probe_write", "args": {"n": 3}, "previewed": true}
        ]),
        "{r}"
    );
    assert_eq!(t.entered.count("probe_write"), 0);
    assert_eq!(t.entered.count("probe_destructive"), 1);
}

/// An unknown argument name gets a did-you-mean from the names the tool's schema declares
/// where it was found, at every door, because the gate's validation is where every call passes
/// (#38): the skill contract's `skillMd` from an MCP client, `scriptName` and a nested
/// `steps/0/toolName` from `lmcp call`, and typos from Lua. The call is still refused: the
/// hint names the argument to send, it is no alias.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_argument_gets_a_did_you_mean_at_every_door() {
    let t = TestHost::new();
    let md = "---\nname: demo\ndescription: d\n---\nbody\n";
    let e = common::call(&t.host, "skill_install", json!({"skillMd": md}))
        .await
        .into_result()
        .expect_err("skillMd is no argument of skill_install");
    assert!(
        e.to_string().contains(
            "at (root): Additional properties are not allowed ('skillMd' was unexpected); did \
             you mean `skill_md`? (lmcp's arguments are snake_case) (rule `additionalProperties`)"
        ),
        "{e}"
    );
    assert!(t.host.registry().get("skill__demo__x").is_none());

    // from Lua: the error a program catches says the same
    let lua = "local function said(f, args)\n  local ok, e = pcall(f, args)\n  return e.message\nend\nreturn {said(tools.calculate, {expresion = '1+1'}), said(tools.read_file, {filePath = 'a.txt'})}";
    let out = common::run_lua(&t.host, lua, ConfirmMode::Preview, Duration::from_secs(10))
        .await
        .unwrap();
    let said = out.value.as_array().unwrap();
    assert!(
        said[0]
            .as_str()
            .unwrap()
            .contains("('expresion' was unexpected); did you mean `expression`? (rule"),
        "{said:?}"
    );
    assert!(
        said[1].as_str().unwrap().contains(
            "('filePath' was unexpected); did you mean `path`? (lmcp's arguments are snake_case)"
        ),
        "{said:?}"
    );

    // from the command line, and nested
    let home = tempfile::tempdir().unwrap();
    let out = common::lmcp(
        home.path(),
        &["call", "skill_call", "skill=demo", "scriptName=hello"],
    );
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(
        e.contains("('scriptName' was unexpected); did you mean `script`? (lmcp's arguments are snake_case)"),
        "{e}"
    );
    let out = common::lmcp(
        home.path(),
        &[
            "call",
            "custom_tool_create",
            "name=user_twice",
            "description=Doubles",
            r#"steps=[{"id": "a", "toolName": "calculate", "arguments": {}}]"#,
        ],
    );
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("at /steps/0: Additional properties are not allowed ('toolName' was unexpected); did you mean `tool`?"),
        "{e}"
    );
}
