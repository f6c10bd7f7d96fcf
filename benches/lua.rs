//! The Lua bridge's cost. Each loop makes 1,000 calls from Lua (criterion reports elements/s):
//! - `gated_tool_call`: `tools.echo{text = "x"}` through the whole gate (private mode, so no
//!   history write, like the gate bench's fast path);
//! - `bare_callback`: a Rust function doing nothing, called from Lua;
//! - `serde_round_trip`: the same one-field table through `from_value`/`to_value` only;
//! - `sandbox_lua_call` against `plain_lua_call`: a small Lua function called from Lua, in the
//!   sandbox (whose limit hook runs before every call) and in a bare state without hooks.
//!
//! And, once per iteration, `sandbox_new`: building a fresh sandboxed state.
//!
//! Run with `cargo bench --bench lua`.

mod common;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use lmcp::script::{Output, Vm, VmOptions};
use lmcp::{CallContext, ConfirmMode, Origin};
use mlua::{Function, Lua, LuaSerdeExt, Table, Value};

const CALLS: u64 = 1000;

fn bench(c: &mut Criterion) {
    let rt = common::runtime();
    let dir = tempfile::tempdir().unwrap();
    let (host, _) = common::echo_host(dir.path());
    common::private(&host);
    let options = || VmOptions {
        output: Output::Capture,
        ..Default::default()
    };
    let ctx = || CallContext::root(Origin::Cli, ConfirmMode::Confirmed);

    let mut group = c.benchmark_group("lua_1000_calls");
    group.throughput(Throughput::Elements(CALLS));

    let vm = Vm::new(host.caller(), rt.handle().clone(), ctx(), options()).unwrap();
    let gated: Function = vm
        .exec(
            "return function(n) for i = 1, n do tools.echo{text = 'x'} end end",
            "bench",
        )
        .unwrap()
        .into_iter()
        .next()
        .and_then(|v| v.as_function().cloned())
        .unwrap();
    group.bench_function("gated_tool_call", |b| {
        b.iter(|| gated.call::<()>(CALLS).unwrap())
    });

    let lua = Lua::new();
    let bare = lua.create_function(|_, t: Table| Ok(t)).unwrap();
    lua.globals().set("bare", bare).unwrap();
    let bare_loop: Function = lua
        .load("return function(n) for i = 1, n do bare{text = 'x'} end end")
        .eval()
        .unwrap();
    group.bench_function("bare_callback", |b| {
        b.iter(|| bare_loop.call::<()>(CALLS).unwrap())
    });

    let serde = lua
        .create_function(|lua, v: Value| {
            let j: serde_json::Value = lua.from_value(v)?;
            lua.to_value(&j)
        })
        .unwrap();
    lua.globals().set("serde", serde).unwrap();
    let serde_loop: Function = lua
        .load("return function(n) for i = 1, n do serde{text = 'x'} end end")
        .eval()
        .unwrap();
    group.bench_function("serde_round_trip", |b| {
        b.iter(|| serde_loop.call::<()>(CALLS).unwrap())
    });

    let add = "return function(n) local function add(a, b) return a + b end \
               local s = 0 for i = 1, n do s = add(s, i) end return s end";
    let sandboxed: Function = vm
        .exec(add, "bench")
        .unwrap()
        .into_iter()
        .next()
        .and_then(|v| v.as_function().cloned())
        .unwrap();
    group.bench_function("sandbox_lua_call", |b| {
        b.iter(|| sandboxed.call::<i64>(CALLS).unwrap())
    });
    let plain: Function = lua.load(add).eval().unwrap();
    group.bench_function("plain_lua_call", |b| {
        b.iter(|| plain.call::<i64>(CALLS).unwrap())
    });
    group.finish();

    c.bench_function("sandbox_new", |b| {
        b.iter(|| Vm::new(host.caller(), rt.handle().clone(), ctx(), options()).unwrap())
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
