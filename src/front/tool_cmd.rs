//! `lmcp tools`, `lmcp tool show|enable|disable|create`, `lmcp call`: the tool list, one tool's
//! help, and direct calls.

use std::sync::Arc;

use serde_json::{Value, json};

use super::cli::{CallArgs, ProfileArg};
use super::door::{cancel_on_ctrl_c, emit, person, read_input, render_outcome, table, timeout_arg};

use crate::error::{Error, Result};
use crate::gate::{CallContext, CallRequest, ConfirmMode, Confirmer, NoPerson, Origin};
use crate::host::Host;
use crate::registry::{Availability, Profile};
use crate::text::arg_words::Words;

pub(super) fn availability_text(a: &Availability) -> String {
    match a {
        Availability::Available => "available".into(),
        Availability::Unavailable { detail, .. } => format!("unavailable: {detail}"),
    }
}

pub(super) fn tools(host: &Arc<Host>, profile: ProfileArg, json: bool) -> Result<u8> {
    let profile = match profile {
        ProfileArg::Code => Profile::Code,
        ProfileArg::Core => Profile::Core,
        ProfileArg::Full => Profile::Full,
    };
    let list = host.tools(profile);
    let value = Value::Array(
        list.iter()
            .map(|(t, a)| {
                let s = t.spec();
                json!({
                    "name": s.name, "title": s.title, "effect": s.effect, "kind": s.kind,
                    "profile": s.profile, "availability": a,
                })
            })
            .collect(),
    );
    emit(json, &value, || {
        let rows: Vec<Vec<String>> = list
            .iter()
            .map(|(t, a)| {
                let s = t.spec();
                let effect = if s.annotations.destructive_hint {
                    format!("{} (destructive)", s.effect)
                } else {
                    s.effect.to_string()
                };
                vec![
                    s.name.clone(),
                    effect,
                    availability_text(a),
                    s.title.clone(),
                ]
            })
            .collect();
        table(&["NAME", "EFFECT", "AVAILABILITY", "TITLE"], &rows)
    });
    Ok(0)
}

pub(super) fn lookup(host: &Host, name: &str) -> Result<Arc<crate::registry::Tool>> {
    host.registry().get(name).ok_or_else(|| Error::UnknownTool {
        name: name.to_string(),
        suggestions: host.registry().closest(name),
    })
}

pub(super) fn show_tool(host: &Arc<Host>, name: &str, json: bool) -> Result<u8> {
    let tool = lookup(host, name)?;
    let s = tool.spec();
    let config = host.config();
    let availability = s.availability(&config, host.transport());
    let (grant, source) = config.grant_for(&s.name, s.effect, s.annotations.destructive_hint);
    let value = json!({
        "name": s.name, "title": s.title, "description": s.description,
        "effect": s.effect, "kind": s.kind, "profile": s.profile,
        "annotations": s.annotations, "availability": availability,
        "grant": grant, "grant_source": source, "has_preview": s.has_preview,
        "may_call": s.capabilities.as_ref().map(|c| c.describe()),
        "input_schema": s.input_schema, "output_schema": s.output_schema,
    });
    emit(json, &value, || {
        let pretty = |v: &Value| crate::text::terminal::json(v, true);
        let a = s.annotations;
        let mut out = format!(
            "{} — {}\n\n{}\n\neffect        {}{}\nkind          {}\nprofile       {}\n\
             availability  {}\ngrant         {} ({})\nannotations   readOnly={} destructive={} \
             idempotent={} openWorld={}\n\ninput schema:\n{}\n",
            s.name,
            s.title,
            s.description,
            s.effect,
            if s.has_preview {
                ""
            } else {
                " (no preview: acts when called)"
            },
            s.kind,
            s.profile,
            availability_text(&availability),
            grant,
            source,
            a.read_only_hint,
            a.destructive_hint,
            a.idempotent_hint,
            a.open_world_hint,
            pretty(&s.input_schema),
        );
        if let Some(c) = &s.capabilities {
            out = out.replacen(
                "\n\ninput schema:",
                &format!("\nmay call      {}\n\ninput schema:", c.describe()),
                1,
            );
        }
        if let Some(o) = &s.output_schema {
            out.push_str(&format!("\noutput schema:\n{}\n", pretty(o)));
        }
        out
    });
    Ok(0)
}

pub(super) fn enable_tool(host: &Arc<Host>, name: &str, enable: bool, json: bool) -> Result<u8> {
    let tool = lookup(host, name)?;
    let name = tool.spec().name.clone();
    host.update_config(|c| {
        c.disabled_tools.retain(|t| t != &name);
        if !enable {
            c.disabled_tools.push(name.clone());
            c.disabled_tools.sort();
        }
        Ok(())
    })?;
    let state = if enable { "enabled" } else { "disabled" };
    emit(json, &json!({"tool": name, "state": state}), || {
        format!("{name} is {state}")
    });
    Ok(0)
}

/// The arguments of `custom_tool_create` from a file: a JSON definition, or a Lua program whose
/// header names and describes it.
pub(super) fn custom_tool_args(file: &std::path::Path, replace: bool) -> Result<Value> {
    let text = read_input(file)?;
    let mut args = match file.extension().and_then(|e| e.to_str()) {
        Some("json") => {
            let v: Value = serde_json::from_str(&text)
                .map_err(|e| Error::Usage(format!("{} is not valid JSON: {e}", file.display())))?;
            if !v.is_object() {
                return Err(Error::Usage(format!(
                    "{} must hold a JSON object",
                    file.display()
                )));
            }
            v
        }
        Some("lua") => lua_tool_args(&text, &super::run::chunk_name(file), &file.display())?,
        _ => {
            return Err(Error::Usage(format!(
                "{} is neither .json nor .lua",
                file.display()
            )));
        }
    };
    if replace {
        args["replace"] = json!(true);
    }
    Ok(args)
}

/// The arguments of `custom_tool_create` for a Lua program whose header names and describes
/// it; `source` says where it comes from in errors.
pub(super) fn lua_tool_args(
    text: &str,
    chunk: &str,
    source: &dyn std::fmt::Display,
) -> Result<Value> {
    let header = crate::program::header::Header::parse(text, chunk)?;
    let (Some(name), Some(description)) = (header.name, header.description) else {
        return Err(Error::Usage(format!(
            "{source} needs `---@name user_...` and `---@description ...` in its header"
        )));
    };
    Ok(json!({"name": name, "description": description, "lua": text}))
}

pub(super) async fn call(host: &Arc<Host>, args: CallArgs, json: bool) -> Result<u8> {
    // the tool's schema types KEY=VALUE pairs (an unknown name is the gate's to report)
    let schema = host
        .registry()
        .get(&args.name)
        .map_or(Value::Null, |t| t.spec().input_schema.clone());
    let arguments = super::call_args::call_arguments(&args.args, &schema)?;
    // Arguments read from stdin leave no terminal to ask on.
    let confirmer: Arc<dyn Confirmer> = if args.args.iter().any(|a| a == "-") && !args.yes {
        Arc::new(NoPerson)
    } else {
        person(args.yes)
    };
    // A direct call is the person's own action: it runs unless a grant says ask or deny.
    let mut ctx = CallContext::root(Origin::Cli, ConfirmMode::Confirmed).with_confirmer(confirmer);
    if let Some(t) = timeout_arg(args.timeout)? {
        ctx = ctx.with_timeout(t);
    }
    if crate::text::terminal::is_terminal(crate::text::terminal::Stream::Err) && !json {
        ctx = ctx.with_progress(Arc::new(|p| {
            let total = p.total.map(|t| format!("/{t}")).unwrap_or_default();
            crate::text::terminal::clear_line(crate::text::terminal::Stream::Err);
            errw!(
                "[{}{}] {}",
                p.done,
                total,
                crate::text::escape_controls(&p.message)
            );
            if p.total == Some(p.done) {
                errln!();
            }
        }));
    }
    cancel_on_ctrl_c(&ctx);
    let outcome = host.call(CallRequest::new(args.name, arguments, ctx)).await;
    // advice names arguments as the person gave them: KEY=VALUE pairs, or JSON
    let pairs = !matches!(args.args.as_slice(), [one] if super::call_args::is_whole(one));
    let outcome = super::door::in_words(outcome, Words::Cli { flags: &[], pairs });
    render_outcome(&outcome, json);
    Ok(outcome.exit_code())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align() {
        let t = table(&["A", "BB"], &[vec!["long".into(), "x".into()]]);
        assert_eq!(t, "A     BB\nlong  x\n");
    }
}
