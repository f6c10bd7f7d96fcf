//! `lmcp run FILE.lua`: runs a script with its declared parameters, prints its result, and lists
//! the state-changing calls it previewed when the run was not confirmed.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};

use super::cli::RunArgs;
use super::door::{cancel_on_ctrl_c, emit, run_confirmation, timeout_arg};
use crate::error::{Error, Result};
use crate::gate::{CallContext, Origin, Preview};
use crate::host::Host;
use crate::program::header::Header;
use crate::program::{Body, LuaBody, Program, run_lua};
use crate::registry::Capabilities;
use crate::script::Output;
use crate::text::escape_controls;

/// Runs a script file; the exit code.
pub async fn run_file(host: &Arc<Host>, args: RunArgs, json: bool) -> Result<u8> {
    let path = &args.file;
    if args.plan_hash.is_some() {
        return Err(Error::Usage("--plan-hash applies to recipe manifests (.json); a Lua script previews with its own run".into()));
    }
    let source = super::door::read_input(path)?;
    if path.extension().and_then(|e| e.to_str()) != Some("lua") {
        return Err(Error::Usage(format!(
            "{} is not a .lua script",
            path.display()
        )));
    }
    let header = Header::parse(&source, &chunk_name(path))?;
    let given = header.params_from_cli(&args.params)?;
    let params = header.bind(&given)?;
    let chunk = chunk_name(path);
    // The person's own script: with `---@uses` it may call only those tools; without, any tool,
    // each call gated and confirmed on its own (no up-front yes covers it).
    let capabilities = match &header.uses {
        Some(uses) => Capabilities::Tools(uses.clone()),
        None => Capabilities::Unrestricted,
    };
    let program = Program {
        name: chunk.clone(),
        params: header.params.clone(),
        capabilities,
        timeout: timeout_arg(args.timeout)?.or(header.timeout),
        body: Body::Lua(LuaBody {
            source,
            chunk,
            modules: Vec::new(),
            config: None,
        }),
    };
    let (mode, confirmer) = run_confirmation(args.yes);
    let ctx = CallContext::root(Origin::Cli, mode).with_confirmer(confirmer);
    cancel_on_ctrl_c(&ctx);
    let output = if json {
        Output::Capture
    } else {
        Output::Terminal
    };
    let outcome = match run_lua(host, &ctx, &program, params, output).await {
        Ok(o) => o,
        Err(failure) if json => {
            let e = &failure.error;
            let value = json!({
                "outcome": "failed",
                "error": e.to_json(),
                "previews": failure.previews,
                "output": failure.output,
            });
            emit(true, &value, String::new);
            return Ok(e.exit_code());
        }
        Err(failure) => {
            if !failure.previews.is_empty() {
                // previews first, then the error (printed by main, escaped)
                errw!("{}", render(&Value::Null, &failure.previews));
            }
            return Err(failure.error);
        }
    };
    let value = json!({
        "outcome": "done",
        "result": outcome.value,
        "previews": outcome.previews,
        "output": outcome.output,
    });
    emit(json, &value, || render(&outcome.value, &outcome.previews));
    Ok(0)
}

/// The chunk name: the file name only, so error messages never show host paths.
pub(crate) fn chunk_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "script.lua".into())
}

fn render(value: &Value, previews: &[Preview]) -> String {
    let mut out = match value {
        Value::Null => String::new(),
        Value::String(s) => format!("{s}\n"),
        other => format!(
            "{}\n",
            serde_json::to_string_pretty(other).unwrap_or_default()
        ),
    };
    if !previews.is_empty() {
        out.push_str(&format!(
            "\npreviewed {} state-changing call(s); nothing was changed (run with --yes to make them):\n",
            previews.len()
        ));
        for p in previews {
            out.push_str(&format!(
                "  {} ({}): {}\n",
                escape_controls(&p.tool),
                p.effect,
                escape_controls(&p.summary)
            ));
        }
    }
    out
}
