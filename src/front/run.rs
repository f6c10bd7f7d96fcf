//! `lmcp run FILE.lua`: runs a script with its declared parameters, prints its result, and lists
//! the state-changing calls it previewed when the run was not confirmed.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::cli::{RunArgs, cancel_on_ctrl_c, emit, run_confirmation, timeout_arg};
use crate::error::{Error, Result};
use crate::gate::{CallContext, Origin, Preview};
use crate::host::Host;
use crate::program::header::Header;
use crate::script::{self, Output, Script, VmOptions};

/// Runs a script file; the exit code.
pub async fn run_file(host: &Arc<Host>, args: RunArgs, json: bool) -> Result<u8> {
    let path = &args.file;
    if args.plan_hash.is_some() {
        return Err(Error::Usage("--plan-hash applies to recipe manifests (.json); a Lua script previews with its own run".into()));
    }
    let source = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    if path.extension().and_then(|e| e.to_str()) != Some("lua") {
        return Err(Error::Usage(format!(
            "{} is not a .lua script",
            path.display()
        )));
    }
    let header = Header::parse(&source)?;
    let given = header.params_from_cli(&args.params)?;
    let params = header.bind(&given)?;
    let config = host.config();
    let timeout = timeout_arg(args.timeout)?
        .or(header.timeout)
        .unwrap_or(Duration::from_secs(
            config.limits.lua_timeout_secs.max(1) as u64
        ));
    let (mode, confirmer) = run_confirmation(args.yes);
    let ctx = CallContext::root(Origin::Cli, mode)
        .with_confirmer(confirmer)
        .with_timeout(timeout);
    cancel_on_ctrl_c(&ctx);
    let options = VmOptions {
        limits: config.limits.script(),
        output: if json {
            Output::Capture
        } else {
            Output::Terminal
        },
        params,
        modules: Vec::new(),
        config: None,
    };
    let script = Script {
        source,
        name: chunk_name(path),
    };
    let outcome = match script::run(host, script, ctx, options).await {
        Ok(o) => o,
        Err(failure) if json => {
            let e = &failure.error;
            let value = json!({
                "outcome": "failed",
                "error": {"class": e.class(), "message": e.to_string()},
                "previews": failure.previews,
                "output": failure.output,
            });
            emit(true, &value, String::new);
            return Ok(e.exit_code());
        }
        Err(failure) => {
            if !failure.previews.is_empty() {
                eprint!("{}", render(&Value::Null, &failure.previews));
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
fn chunk_name(path: &Path) -> String {
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
            out.push_str(&format!("  {} ({}): {}\n", p.tool, p.effect, p.summary));
        }
    }
    out
}
