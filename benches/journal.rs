//! What a run journal costs: a 5,000-step chained Lua recipe (each call takes the previous
//! call's result) of a state-changing tool, run for real with and without a journal, in one
//! run. Two tools: `tally` (idempotent: its journal lines are not synced before the call) and
//! `stamp` (not idempotent: each call's start is synced first, the worst case). History is on
//! for both sides.
//!
//! Run with `cargo bench --bench journal`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use lmcp::gate::AlwaysYes;
use lmcp::gate::journal::Journal;
use lmcp::program::RunMode;
use lmcp::registry::{Annotations, Effect, ToolSpec, sync_handler};
use lmcp::{CallContext, ConfirmMode, Origin};
use serde_json::json;

const STEPS: u32 = 5000;

fn bench(c: &mut Criterion) {
    let rt = common::runtime();
    let dir = tempfile::tempdir().unwrap();
    let (host, _) = common::echo_host(dir.path());
    let schema =
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
    for (name, idempotent) in [("tally", true), ("stamp", false)] {
        host.registry()
            .register(
                ToolSpec::new(name, name, "adds one to n", schema.clone()).effect(
                    Effect::Write,
                    Annotations::changing(false, idempotent, false),
                ),
                sync_handler(|args| Ok(json!({"n": args["n"].as_i64().unwrap_or(0) + 1}))),
            )
            .unwrap();
    }
    let mut group = c.benchmark_group("recipe_5000_chained_steps");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    for tool in ["tally", "stamp"] {
        let program = lmcp::program::compile(
            lmcp::program::Source::lua_file(
                &format!("{tool}_chain"),
                "chain.lua",
                format!(
                    "---@uses {tool}\n---@timeout 600\nlocal n = 0 for i = 1, {STEPS} do n = tools.{tool}{{n = n}}.n end return n"
                ),
                lmcp::library::recipes::POLICY,
            ),
            host.registry(),
        )
        .unwrap();
        let ctx = || {
            CallContext::root(Origin::Cli, ConfirmMode::Confirmed)
                .with_confirmer(Arc::new(AlwaysYes))
        };
        let run = |ctx: CallContext| {
            let report = rt
                .block_on(lmcp::program::run(
                    &host.caller(),
                    &ctx,
                    &program,
                    &Default::default(),
                    RunMode::Confirmed { plan_hash: None },
                ))
                .unwrap();
            assert_eq!(report.result, json!(STEPS));
        };
        group.bench_function(format!("{tool}/no_journal"), |b| b.iter(|| run(ctx())));
        group.bench_function(format!("{tool}/journal"), |b| {
            b.iter(|| {
                // as a real run does: started, run, ended (so old journals are pruned)
                let journal =
                    Arc::new(Journal::start(host.as_ref(), &program.name, "bench").unwrap());
                run(ctx().with_journal(Arc::clone(&journal)));
                journal.end("done");
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
