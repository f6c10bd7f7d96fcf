//! The gate, stage by stage and outcome by outcome, table-driven.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::TestHost;
use lmcp::config::{Config, Grant};
use lmcp::gate::{AlwaysYes, Answer, Confirmer, NoPerson, Scripted};
use lmcp::{CallContext, CallRequest, ConfirmMode, Origin, Outcome};
use serde_json::{Value, json};

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
        let confirmer = Arc::new(Scripted::new(case.answers.iter().copied()));
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
async fn another_process_changing_the_config_is_seen_at_once() {
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
    assert_eq!(
        t.host
            .call(CallRequest::new("probe_read", json!({}), ctx()))
            .await
            .class(),
        "denied"
    );
}
