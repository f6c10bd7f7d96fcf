//! The gate's cost: `Host::call` on a trivial read tool against calling the same handler
//! directly, with history on (the default) and in private mode (no history write).
//!
//! Run with `cargo bench --bench gate`.

mod common;

use criterion::{Criterion, criterion_group, criterion_main};
use lmcp::registry::Invocation;
use lmcp::{CallContext, CallRequest, ConfirmMode, Origin};
use serde_json::json;

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (host, handler) = common::echo_host(dir.path());
    let args = json!({"text": "hello"});

    let mut group = c.benchmark_group("trivial_read_tool");
    group.bench_function("handler_direct", |b| {
        b.iter(|| {
            let inv = Invocation {
                args: args.clone(),
                ctx: CallContext::root(Origin::Cli, ConfirmMode::Confirmed),
                caller: host.caller(),
                program: None,
            };
            rt.block_on(handler(inv)).unwrap()
        })
    });
    group.bench_function("host_call_with_history", |b| {
        b.iter(|| {
            let ctx = CallContext::root(Origin::Cli, ConfirmMode::Confirmed);
            rt.block_on(host.call(CallRequest::new("echo", args.clone(), ctx)))
                .into_result()
                .unwrap()
        })
    });
    common::private(&host);
    group.bench_function("host_call_private", |b| {
        b.iter(|| {
            let ctx = CallContext::root(Origin::Cli, ConfirmMode::Confirmed);
            rt.block_on(host.call(CallRequest::new("echo", args.clone(), ctx)))
                .into_result()
                .unwrap()
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
