//! The Lua runner: one way to run a Lua program, for recipes, custom tools, skill scripts and
//! `lmcp run`. It binds the parameters, sets the timeout (the program's, else the configured
//! one), limits the calls to the program's capabilities, and runs the sandbox on a blocking
//! thread.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use super::{Body, Program};
use crate::error::Error;
use crate::gate::CallContext;
use crate::host::Host;
use crate::script::{self, Output, Script, ScriptFailure, ScriptOutcome, VmOptions};

/// Runs a Lua program with already bound parameters in `ctx`, restricted to its capabilities.
/// `output` chooses where `print` goes (captured everywhere but `lmcp run` and the REPL).
pub async fn run_lua(
    host: &Arc<Host>,
    ctx: &CallContext,
    program: &Program,
    params: Map<String, Value>,
    output: Output,
) -> std::result::Result<ScriptOutcome, ScriptFailure> {
    let Body::Lua(body) = &program.body else {
        return Err(ScriptFailure::from(Error::Script {
            message: format!("`{}` is not a Lua program", program.name),
        }));
    };
    let config = host.config();
    let timeout = program.timeout.unwrap_or(Duration::from_secs(
        config.limits.lua_timeout_secs.max(1) as u64,
    ));
    let options = VmOptions {
        limits: config.limits.script(),
        output,
        params,
        modules: body.modules.clone(),
        config: body.config.clone(),
    };
    let ctx = ctx
        .clone()
        .restricted(&program.name, program.capabilities.clone())
        .with_timeout(timeout);
    let script = Script {
        source: body.source.clone(),
        name: body.chunk.clone(),
    };
    script::run(host, script, ctx, options).await
}
