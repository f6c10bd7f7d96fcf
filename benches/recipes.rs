//! A 1,000-step JSON recipe of a trivial read tool, against the same 1,000 calls as a Lua loop
//! (criterion reports elements/s; one element is one step). Private mode, so neither writes the
//! history or the journal. Run with `cargo bench --bench recipes`.

mod common;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use lmcp::library::recipes;
use lmcp::script::{Output, Script, VmOptions};
use lmcp::{CallContext, ConfirmMode, Origin};
use serde_json::{Map, json};

const STEPS: usize = 1000;

fn bench(c: &mut Criterion) {
    let rt = common::runtime();
    let dir = tempfile::tempdir().unwrap();
    let (host, _) = common::echo_host(dir.path());
    common::private(&host);
    let steps: Vec<serde_json::Value> = (0..STEPS)
        .map(|_| json!({"tool": "echo", "args": {"text": "x"}}))
        .collect();
    let manifest = recipes::parse_manifest(json!({"name": "bench", "steps": steps})).unwrap();
    let recipe = recipes::check(host.registry(), manifest).unwrap();
    let ctx = || CallContext::root(Origin::Cli, ConfirmMode::Confirmed);

    let mut group = c.benchmark_group("recipe_1000_steps");
    group.sample_size(20);
    group.throughput(Throughput::Elements(STEPS as u64));
    group.bench_function("json_steps", |b| {
        b.iter(|| {
            rt.block_on(recipes::run(
                &host,
                &ctx(),
                &recipe.program,
                &Map::new(),
                true,
                None,
                None,
            ))
            .unwrap()
        })
    });
    let lua = format!("for i = 1, {STEPS} do tools.echo{{text = 'x'}} end");
    group.bench_function("lua_loop", |b| {
        b.iter(|| {
            let script = Script {
                source: lua.clone(),
                name: "bench.lua".into(),
            };
            let options = VmOptions {
                output: Output::Capture,
                ..Default::default()
            };
            rt.block_on(lmcp::script::run(&host.caller(), script, ctx(), options))
                .unwrap()
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
