//! A skill's scripts as programs and tools (`skill__SKILL__SCRIPT`), and the skill tools:
//! `skill_call` resolves the script before the gate asks, so the question shows what it may do.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::bad;
use super::package::{Package, check_package, valid_name};
use super::storage::{
    get, install, list, load_package, read_meta, remove, secret_values, set_config, set_enabled,
    skill_dir, tool_name, values,
};
use crate::text::{redact, redact_json};

use crate::error::{Error, Result};
use crate::gate::CallContext;
use crate::gate::Caller;
use crate::host::Host;
use crate::program::run::RunMode;
use crate::program::{self, Program, Scope};
use crate::registry::Resolved;
use crate::registry::{Annotations, Effect, Handler, Kind, Registry, ToolSpec, handler};

pub(super) fn unregister_scripts(host: &Host, name: &str) {
    let prefix = format!("skill__{}__", name.replace('-', "_"));
    for t in host.registry().all() {
        if t.spec().name.starts_with(&prefix) {
            host.registry().unregister(&t.spec().name);
        }
    }
}

/// The program a script is, with the modules and config it runs with (config read now).
pub(super) fn script_program(host: &Host, skill: &str, script: &str) -> Result<Program> {
    if !valid_name(skill) || !skill_dir(host, skill).exists() {
        return Err(Error::Refused(format!(
            "there is no skill `{skill}`; {} lists them",
            crate::text::arg_words::tool("skill_list", "lmcp skill list")
        )));
    }
    let p = load_package(host, skill)?;
    let meta = read_meta(host, skill)?.ok_or_else(|| bad(skill, "meta.json is missing"))?;
    if !meta.enabled {
        return Err(Error::Refused(format!(
            "the skill `{skill}` is disabled; {} turns it on",
            crate::text::arg_words::tool("skill_enable", &format!("lmcp skill enable {skill}"))
        )));
    }
    let s = p.scripts.iter().find(|s| s.name == script).ok_or_else(|| {
        let names: Vec<&str> = p.scripts.iter().map(|s| s.name.as_str()).collect();
        Error::Refused(format!(
            "`{skill}` has no script `{script}` (scripts: {})",
            if names.is_empty() {
                "none".into()
            } else {
                names.join(", ")
            }
        ))
    })?;
    if s.is_module() {
        return Err(Error::Refused(format!(
            "`{script}` is a module of the skill `{skill}` ({} `require`s it), not a script to \
             call; call {}",
            s.required_by.join(", "),
            s.required_by.join(" or ")
        )));
    }
    let mut config = values(host, skill)?;
    for (key, f) in &p.md.config {
        if !config.contains_key(key) {
            match &f.default {
                Some(d) => {
                    config.insert(key.clone(), d.clone());
                }
                None if f.required => {
                    return Err(Error::Refused(format!(
                        "`{skill}` needs its config field `{key}` ({}); set it with {}",
                        f.title,
                        crate::text::arg_words::tool(
                            "skill_config",
                            &format!("lmcp skill config {skill} {key}=VALUE")
                        )
                    )));
                }
                None => {}
            }
        }
    }
    let modules = p
        .scripts
        .iter()
        .map(|m| (m.name.clone(), m.code.clone()))
        .collect();
    Ok(s.program.clone().in_package(modules, config))
}

/// The gate's view of a `skill_call` call: the script it runs.
pub(super) fn resolve_call(caller: &dyn Caller, args: &Value) -> Result<Resolved> {
    let program = script_program(
        Host::of(caller),
        args["skill"].as_str().unwrap_or(""),
        args["script"].as_str().unwrap_or(""),
    )?;
    Ok(program.resolved(true))
}

pub(super) fn register_scripts(host: &Host, package: &Package) -> Result<Vec<ToolSpec>> {
    let mut registered = Vec::new();
    for s in package.scripts.iter().filter(|s| !s.is_module()) {
        let caps = s.program.capabilities.clone();
        let (effect, annotations) =
            Scope::of(host.registry(), &caps, true).effect_and_annotations();
        let description = if s.program.description.is_empty() {
            format!(
                "The `{}` script of the `{}` skill.",
                s.name, package.md.name
            )
        } else {
            s.program.description.clone()
        };
        let name = tool_name(&package.md.name, &s.name);
        let spec = ToolSpec::new(
            &name,
            &format!("{} / {}", package.md.name, s.name),
            &description,
            s.program.header().params_schema(),
        )
        .effect(effect, annotations)
        .kind(Kind::Workflow)
        .capabilities(caps)
        .connects(s.program.connect.clone())
        .output(crate::program::output::lua_run(s.program.returns.as_ref()));
        host.registry()
            .register_or_replace(spec.clone(), script_handler(&package.md.name, &s.name))?;
        registered.push(spec);
    }
    Ok(registered)
}

/// The handler of a skill's script tool: the script is read and checked again at each call,
/// and runs only while it may call what the tool was listed (and confirmed) as calling.
pub(super) fn script_handler(skill: &str, script: &str) -> Handler {
    let (skill, script) = (skill.to_string(), script.to_string());
    handler(move |inv| {
        let (skill, script) = (skill.clone(), script.clone());
        async move {
            let program = Arc::new(script_program(&inv.host(), &skill, &script)?);
            let name = tool_name(&skill, &script);
            let listed = inv.host().registry().get(&name);
            let same = listed.is_some_and(|t| {
                t.spec().capabilities.as_ref() == Some(&program.capabilities)
                    && t.spec().input_schema == program.header().params_schema()
                    && t.spec().output_schema
                        == Some(crate::program::output::lua_run(program.returns.as_ref()))
            });
            if !same {
                // changed on disk since it was registered (same stamps, or before a sync):
                // registered anew for the calls to come, not run as what the gate confirmed
                match super::storage::load_one(&inv.host(), &skill) {
                    Some(_) => crate::library::noted_skill(
                        &inv.host(),
                        &skill,
                        &skill_dir(&inv.host(), &skill),
                    ),
                    // not indexed: the next load tries (and warns) again
                    None => crate::library::forget_skill(&inv.host(), &skill),
                }
                return Err(Error::Refused(format!(
                    "the `{script}` script of the skill `{skill}` was changed on disk since lmcp \
                     listed `{name}`, so this call did not run; it is loaded anew: check it \
                     (`lmcp tool show {name}`) and call it again"
                )));
            }
            let params = inv.args.as_object().cloned().unwrap_or_default();
            call(
                &inv.host(),
                &inv.ctx,
                &skill,
                &script,
                &params,
                Some(program),
            )
            .await
        }
    })
}

/// Runs one script of a skill: `program` when the gate resolved it already, else read now.
pub async fn call(
    host: &Arc<Host>,
    ctx: &CallContext,
    skill: &str,
    script: &str,
    params: &Map<String, Value>,
    program: Option<Arc<Program>>,
) -> Result<Value> {
    let program = match program {
        Some(p) => p,
        None => Arc::new(script_program(host, skill, script)?),
    };
    // The script may read its secrets; nothing it returns, prints, previews or fails with shows
    // them, and no preview or prompt of a call it makes does either.
    let secrets = secret_values(host, skill)?;
    let ctx = ctx.clone().with_secrets(secrets.clone());
    let report = program::run(&host.caller(), &ctx, &program, params, RunMode::AsCalled)
        .await
        .map_err(|e| redact_error(e, &secrets))?;
    // masked before it is checked: what the caller gets must meet the declared type, and a
    // secret the result holds becomes text (or leaves a key) where the type may say otherwise
    let masked = redact_json(&report.result, &secrets);
    let holds_secret = masked != report.result;
    let tool = tool_name(skill, script);
    let result = crate::program::output::checked_result(
        &tool,
        program.returns.as_ref(),
        masked,
        report.confirmed,
    )
    .map_err(|e| {
        let e = if holds_secret {
            Error::tool(
                &tool,
                format!(
                    "{e} (the result holds one of the skill's secret values, which lmcp masks \
                     as ********: return it in no field whose type that breaks, or not at all)"
                ),
            )
        } else {
            e
        };
        redact_error(e, &secrets)
    })?;
    let out = json!({"result": result, "output": report.output, "previews": report.previews});
    Ok(redact_json(&out, &secrets))
}

/// An error whose message holds a secret, told without it (as a script error).
fn redact_error(e: Error, secrets: &[String]) -> Error {
    let message = e.to_string();
    match redact(&message, secrets) {
        std::borrow::Cow::Borrowed(_) => e,
        std::borrow::Cow::Owned(clean) => Error::Script { message: clean },
    }
}

/// `skill_install`'s `scripts` or `references` as (name, text) pairs, leniently: a missing
/// field reads as empty (for saying what a package becomes; [`files_arg`] is the strict reading
/// that installs).
pub fn named_files(v: &Value, key: &str, value_key: &str) -> Vec<(String, String)> {
    v[key]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            (
                s["name"].as_str().unwrap_or("").to_string(),
                s[value_key].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

pub(super) fn files_arg(v: &Value, key: &str, value_key: &str) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for (i, item) in v[key].as_array().into_iter().flatten().enumerate() {
        let name = item["name"]
            .as_str()
            .ok_or_else(|| Error::Usage(format!("{key}[{i}] needs a name")))?;
        let content = item[value_key]
            .as_str()
            .ok_or_else(|| Error::Usage(format!("{key}[{i}] needs {value_key}")))?;
        out.push((name.to_string(), content.to_string()));
    }
    Ok(out)
}

/// A skill's summary, as `skill_list` lists it (see `storage::summary`).
fn summary_properties() -> serde_json::Map<String, Value> {
    let v = json!({
        "name": {"type": "string"},
        "description": {"type": "string"},
        "toolNames": {"type": "array", "items": {"type": "string"}, "description": "Its scripts that are tools (skill__SKILL__SCRIPT)"},
        "referenceNames": {"type": "array", "items": {"type": "string"}},
        "hasConfig": {"type": "boolean"},
        "enabled": {"type": "boolean"},
        "installtime": {"type": "integer", "description": "When it was installed (Unix milliseconds)"},
        "updatetime": {"type": "integer", "description": "When it was last updated (Unix milliseconds)"}
    });
    v.as_object().cloned().unwrap_or_default()
}

const SUMMARY_REQUIRED: [&str; 8] = [
    "name",
    "description",
    "toolNames",
    "referenceNames",
    "hasConfig",
    "enabled",
    "installtime",
    "updatetime",
];

fn summary_schema() -> Value {
    json!({"type": "object", "properties": summary_properties(), "required": SUMMARY_REQUIRED})
}

/// What a skill's script may call and reach, or whose module it is.
fn script_calls() -> serde_json::Map<String, Value> {
    let v = json!({
        "may_call": {"type": "string", "description": "The tools it may call (a script)"},
        "may_reach": {"type": "array", "items": {"type": "string"}, "description": "The hosts its requests may reach (absent when none)"},
        "module_of": {"type": "array", "items": {"type": "string"}, "description": "The scripts that require it (a module, not a tool)"}
    });
    v.as_object().cloned().unwrap_or_default()
}

/// A skill's record, as `skill_get` returns it (see `storage::get`).
fn record_schema() -> Value {
    let mut script = script_calls();
    for (k, v) in json!({
        "name": {"type": "string"},
        "tool": {"type": "string", "description": "The tool it is (a script, not a module)"},
        "description": {"type": "string", "description": "Its ---@description (absent when it has none)"},
        "params": {"type": "object", "description": "Its parameters, as a JSON Schema"},
        "timeout_secs": {"type": "number"}
    })
    .as_object()
    .into_iter()
    .flatten()
    {
        script.insert(k.clone(), v.clone());
    }
    let mut props = summary_properties();
    for (k, v) in json!({
        "scripts": {"type": "array", "items": {"type": "object", "properties": script, "required": ["name"]}},
        "prompt": {"type": "string", "description": "SKILL.md's body"},
        "config": {"type": "object", "description": "Its config fields, by key", "additionalProperties": {
            "type": "object",
            "properties": {
                "title": {"type": "string"},
                "type": {"type": "string", "enum": ["text", "number", "select", "switch"]},
                "secret": {"type": "boolean"},
                "required": {"type": "boolean"},
                "default": {"description": "The value when none is set"},
                "values": {"type": "array", "description": "A select field's choices"}
            },
            "required": ["title", "type", "secret", "required"]
        }},
        "values": {"type": "object", "description": "The values set (or defaults), by key; a secret one is {secret: true, set} and never its value", "additionalProperties": {}},
        "version": {"type": "string"},
        "license": {"type": "string", "description": "SKILL.md's license field, as written"},
        "compatibility": {"type": "string", "description": "SKILL.md's compatibility field, as written"},
        "allowed_tools": {"type": "array", "items": {"type": "string"}, "description": "SKILL.md's allowed-tools: another host's tools, which grant nothing here"},
        "allowed_tools_note": {"type": "string", "description": "What allowed-tools means here (nothing is granted)"},
        "metadata": {"type": "object", "additionalProperties": {"type": "string"}, "description": "SKILL.md's metadata, as written"},
        "references_note": {"type": "string", "description": "That references are only read, never run"}
    })
    .as_object()
    .into_iter()
    .flatten()
    {
        props.insert(k.clone(), v.clone());
    }
    let mut required: Vec<&str> = SUMMARY_REQUIRED.to_vec();
    required.extend(["scripts", "prompt", "config", "values"]);
    json!({"type": "object", "properties": props, "required": required})
}

/// What `skill_install` returns: the skill's summary, whether it replaced one, and what each
/// of its scripts may call.
fn install_schema() -> Value {
    let mut props = summary_properties();
    props.insert("updated".into(), json!({"type": "boolean", "description": "Whether it replaced an installed skill of the same name"}));
    let mut calls = script_calls();
    calls.insert("script".into(), json!({"type": "string"}));
    props.insert(
        "scripts_call".into(),
        json!({"type": "array", "items": {"type": "object", "properties": calls, "required": ["script"]}}),
    );
    let mut required: Vec<&str> = SUMMARY_REQUIRED.to_vec();
    required.extend(["updated", "scripts_call"]);
    json!({"type": "object", "properties": props, "required": required})
}

/// Registers the skill tools.
pub fn register_tools(registry: &Registry) -> Result<()> {
    let write = Annotations::changing(false, true, false);
    let name_only = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"], "additionalProperties": false});
    let files = |value: &str| json!({"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}, value: {"type": "string"}}, "required": ["name", value], "additionalProperties": false}});

    registry.register_builtin(
        ToolSpec::new("skill_list", "List skills", "List the installed skills: name, description, toolNames, referenceNames, hasConfig, enabled, installtime, updatetime.", json!({"type": "object", "properties": {}, "additionalProperties": false}))
            .output(json!({"type": "object", "properties": {"skills": {"type": "array", "items": summary_schema()}}, "required": ["skills"]})),
        handler(|inv| async move { Ok(json!({"skills": list(&inv.host())})) }),
    )?;
    registry.register_builtin(
        ToolSpec::new("skill_get", "Show a skill", "A skill's record: its summary plus the prompt (SKILL.md's body), the config schema and the values set (secrets never shown); `skill` is absent when there is no such skill.", name_only.clone())
            .output(json!({"type": "object", "properties": {"skill": record_schema()}})),
        handler(|inv| async move {
            // no such skill: `skill` is left out (nil to a script), as its output schema says
            let record = get(&inv.host(), inv.args["name"].as_str().unwrap_or(""))?;
            Ok(if record.is_null() { json!({}) } else { json!({"skill": record}) })
        }),
    )?;
    let install_spec = ToolSpec::new(
        "skill_install",
        "Install a skill",
        "Install a skill package (an Agent Skills folder's content): skill_md (SKILL.md with YAML front matter: name, description, optional license, compatibility, allowed-tools, metadata, version and config fields {title, type: text|number|select|switch, secret, required, default, values}; the body is the prompt; allowed-tools names another host's tools and grants nothing here), scripts [{name, code}] (Lua only, named NAME.lua or NAME: search.lua installs as search; a ---@param header; ---@uses lists the tools a script calls; ---@return may type its result, like {total: number, names: string[]}; a script another one require()s by name is a module, not a tool, and takes no ---@param) and references [{name, content}] (text only read, never run: every other file of the folder, by its path, like reference.md or scripts/helper.py; at most 100, 1 MiB each, 8 MiB in all). A skill of the same name is updated (installtime kept); an invalid package changes nothing.",
        json!({"type": "object", "properties": {"skill_md": {"type": "string", "minLength": 1}, "scripts": files("code"), "references": files("content")}, "required": ["skill_md"], "additionalProperties": false}),
    )
    .effect(Effect::Write, write)
    .kind(Kind::Authoring)
    .output(install_schema())
    .summary(install_summary);
    registry.register_builtin(
        install_spec,
        handler(|inv| async move {
            let scripts = files_arg(&inv.args, "scripts", "code")?;
            let references = files_arg(&inv.args, "references", "content")?;
            let package = check_package(
                inv.host().registry(),
                inv.args["skill_md"].as_str().unwrap_or(""),
                &scripts,
                &references,
            )?;
            let calls: Vec<Value> = package
                .scripts
                .iter()
                .map(|s| match s.is_module() {
                    true => json!({"script": s.name, "module_of": s.required_by}),
                    false if s.program.connect.is_empty() => {
                        json!({"script": s.name, "may_call": s.program.capabilities.describe()})
                    }
                    false => json!({
                        "script": s.name,
                        "may_call": s.program.capabilities.describe(),
                        "may_reach": s.program.connect,
                    }),
                })
                .collect();
            let (mut summary, updated) = install(&inv.host(), package)?;
            summary["updated"] = json!(updated);
            summary["scripts_call"] = json!(calls);
            Ok(summary)
        }),
    )?;
    let remove_spec = ToolSpec::new("skill_remove", "Remove a skill", "Remove an installed skill, its config values and its script tools. Returns whether it was installed.", name_only.clone())
        .effect(Effect::Write, Annotations::changing(true, true, false))
        .kind(Kind::Authoring)
        .output(json!({"type": "object", "properties": {"removed": {"type": "boolean", "description": "Whether it was installed"}}, "required": ["removed"]}))
        .summary(|a| format!("remove the skill {}", a["name"].as_str().unwrap_or("?")));
    registry.register_builtin(
        remove_spec,
        handler(|inv| async move {
            Ok(json!({"removed": remove(&inv.host(), inv.args["name"].as_str().unwrap_or(""))?}))
        }),
    )?;
    let call_spec = ToolSpec::new(
        "skill_call",
        "Call a skill script",
        "Run one script of an installed, enabled skill directly, with its params; it sees the skill's config, can require the skill's other scripts, and may call only the tools its ---@uses lists. Timeout 300 s unless the script's @timeout says otherwise.",
        json!({"type": "object", "properties": {"skill": {"type": "string"}, "script": {"type": "string"}, "params": {"type": "object"}}, "required": ["skill", "script"], "additionalProperties": false}),
    )
    .effect(Effect::Write, Annotations::changing(false, false, true))
    .kind(Kind::Gateway)
    .without_preview()
    .resolves(resolve_call)
    .output(crate::program::output::lua_run(None));
    registry.register_builtin(
        call_spec,
        handler(|inv| async move {
            let params = inv.args["params"].as_object().cloned().unwrap_or_default();
            call(
                &inv.host(),
                &inv.ctx,
                inv.args["skill"].as_str().unwrap_or(""),
                inv.args["script"].as_str().unwrap_or(""),
                &params,
                inv.program::<Program>(),
            )
            .await
        }),
    )?;
    let config_spec = ToolSpec::new(
        "skill_config",
        "Configure a skill",
        "Set a skill's config values ({key: value}; null removes one). Values of secret fields are stored apart, readable by the user only, and never shown again.",
        json!({"type": "object", "properties": {"name": {"type": "string"}, "values": {"type": "object"}}, "required": ["name", "values"], "additionalProperties": false}),
    )
    .effect(Effect::Write, write)
    .kind(Kind::Authoring)
    .secret_args()
    .output(json!({"type": "object", "properties": {"set": {"type": "array", "items": {"type": "string"}, "description": "The keys set or removed (never their values)"}}, "required": ["set"]}))
    .summary(|a| format!("set config of the skill {} (values hidden)", a["name"].as_str().unwrap_or("?")));
    registry.register_builtin(
        config_spec,
        handler(|inv| async move {
            let values = inv.args["values"].as_object().cloned().unwrap_or_default();
            let keys = set_config(
                &inv.host(),
                inv.args["name"].as_str().unwrap_or(""),
                &values,
            )?;
            Ok(json!({"set": keys}))
        }),
    )?;
    let enable_spec = ToolSpec::new(
        "skill_enable",
        "Enable or disable a skill",
        "Turn a skill on or off; a disabled skill's scripts cannot be called and its script tools disappear.",
        json!({"type": "object", "properties": {"name": {"type": "string"}, "enabled": {"type": "boolean"}}, "required": ["name", "enabled"], "additionalProperties": false}),
    )
    .effect(Effect::Write, write)
    .kind(Kind::Authoring)
    .output(json!({"type": "object", "properties": {"name": {"type": "string"}, "enabled": {"type": "boolean"}}, "required": ["name", "enabled"]}));
    registry.register_builtin(
        enable_spec,
        handler(|inv| async move {
            let enabled = inv.args["enabled"].as_bool().unwrap_or(true);
            set_enabled(
                &inv.host(),
                inv.args["name"].as_str().unwrap_or(""),
                enabled,
            )?;
            Ok(json!({"name": inv.args["name"], "enabled": enabled}))
        }),
    )?;
    Ok(())
}

/// The question for `skill_install`: what the package becomes (which scripts are tools, which
/// files are only read), that its `allowed-tools` grants nothing here, and who reads the
/// skill's secrets with what they may call (a skill's scripts are trusted with its secrets).
fn install_summary(a: &Value) -> String {
    let scripts = named_files(a, "scripts", "code");
    let references: Vec<String> = named_files(a, "references", "content")
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let becomes = super::what_it_becomes(&scripts, &references);
    let Ok(md) = super::parse_skill_md(a["skill_md"].as_str().unwrap_or("")) else {
        return format!("install a skill: {becomes}");
    };
    let mut out = format!("install the skill {}: {becomes}", md.name);
    if !md.allowed_tools.is_empty() {
        let named: Vec<String> = md
            .allowed_tools
            .iter()
            .take(8)
            .map(|t| crate::text::clip(t, 40).into_owned())
            .collect();
        out.push_str(&format!(
            "; its allowed-tools ({}{}) grant nothing here",
            named.join(", "),
            if md.allowed_tools.len() > 8 {
                ", ..."
            } else {
                ""
            }
        ));
    }
    if let Some(note) = super::secrets_note(&md, &scripts) {
        out.push_str("; ");
        out.push_str(&note);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The question for installing the example skill with a secret names the secret, its
    /// reader and what that reader may call.
    #[test]
    fn the_install_question_names_who_reads_the_secrets() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/skills/team-standup");
        let md = std::fs::read_to_string(dir.join("SKILL.md")).unwrap();
        let code = std::fs::read_to_string(dir.join("scripts/write_standup.lua")).unwrap();
        let args =
            json!({"skill_md": md, "scripts": [{"name": "write_standup.lua", "code": code}]});
        let q = install_summary(&args);
        assert!(
            q.starts_with(
                "install the skill team-standup: tools (Lua scripts): write_standup; secrets webhook_token:"
            ) && q.contains("trusted")
                && q.contains("write_standup (may call get_datetime, write_file)"),
            "{q}"
        );
        let plain = json!({"skill_md": "---\nname: x\ndescription: y\n---\nbody", "scripts": []});
        assert_eq!(install_summary(&plain), "install the skill x: no tools");
    }

    /// The question says what becomes a tool, what is a module and what is only read, and
    /// that allowed-tools grants nothing (#38).
    #[test]
    fn the_install_question_says_what_becomes_a_tool_and_what_is_only_read() {
        let args = json!({
            "skill_md": "---\nname: x\ndescription: y\nallowed-tools: Bash(git add:*) Read\n---\nbody",
            "scripts": [
                {"name": "main.lua", "code": "local u = require('util')\nreturn u"},
                {"name": "util.lua", "code": "return {}"}
            ],
            "references": [
                {"name": "scripts/helper.py", "content": "print(1)"},
                {"name": "LICENSE.txt", "content": "MIT"}
            ]
        });
        assert_eq!(
            install_summary(&args),
            "install the skill x: tools (Lua scripts): main; modules of those tools: util; only \
             read, never run: scripts/helper.py, LICENSE.txt; its allowed-tools (Bash(git add:*), \
             Read) grant nothing here"
        );
        let broken =
            json!({"skill_md": "no front matter", "references": [{"name": "a.md", "content": ""}]});
        assert_eq!(
            install_summary(&broken),
            "install a skill: no tools; only read, never run: a.md"
        );
    }
}
