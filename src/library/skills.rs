//! Skills: installable packages of a prompt, Lua scripts, references and per-user config.
//!
//! A package is `SKILL.md` (YAML front matter: `name`, `description`, optional `version` and
//! `config` fields; the Markdown body is the prompt for an AI), `scripts/*.lua` (each with the
//! program header) and `references/*` (text files). It is checked whole before anything is
//! written, then stored under `DATA/skills/NAME/` by writing a temporary folder and renaming it
//! into place, so an invalid update changes nothing and a failed one leaves the old version.
//!
//! Each enabled skill's scripts are also tools named `skill__SKILL__SCRIPT` (hyphens in the
//! skill's name become `_`), so MCP clients discover them; calling one is `skill_call`. A script
//! runs in the Lua sandbox with its skill's other scripts as the only modules it can `require`,
//! `params` typed by its header, a read-only `config` table, a 300 s timeout unless its
//! `@timeout` says otherwise, and only the tools its `---@uses` lists (read tools without one).
//!
//! Config values live in `CONFIG/skills/NAME.json`; values of fields marked `secret` live apart
//! in `CONFIG/skills/NAME.secrets.json`, readable by the user only (0600). Secrets are never
//! returned by `skill_get` or `skill_list`, never printed, and the arguments of `skill_config`
//! are hidden from previews, prompts and history.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::error::{Error, Result};
use crate::gate::CallContext;
use crate::host::Host;
use crate::program::check as checks;
use crate::program::header::Header;
use crate::program::steps::RunMode;
use crate::program::{self, Body, LuaBody, Program, Resolved, Scope};
use crate::registry::{
    Annotations, Capabilities, Effect, Handler, Kind, Registry, ToolSpec, handler,
};
use crate::store::{self, FileLock};

/// A script's default timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// Largest script or reference accepted.
pub const MAX_FILE_BYTES: usize = 1 << 20;

/// A config field's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FieldType {
    /// Free text.
    Text,
    /// A number.
    Number,
    /// One of `values`.
    Select,
    /// On or off.
    Switch,
}

/// One config field a skill declares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigField {
    /// Shown to people.
    pub title: String,
    /// Its type.
    #[serde(rename = "type")]
    pub kind: FieldType,
    /// Whether its value is sensitive (stored apart, never shown).
    #[serde(default)]
    pub secret: bool,
    /// Whether scripts need a value.
    #[serde(default)]
    pub required: bool,
    /// The value when none is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// The choices of a select field.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<Value>,
}

impl ConfigField {
    fn accepts(&self, v: &Value) -> bool {
        match self.kind {
            FieldType::Text => v.is_string(),
            FieldType::Number => v.is_number(),
            FieldType::Switch => v.is_boolean(),
            FieldType::Select => self.values.contains(v),
        }
    }

    /// Reads a value from command-line text.
    pub fn from_text(&self, text: &str) -> std::result::Result<Value, String> {
        let v = match self.kind {
            FieldType::Text => Value::String(text.to_string()),
            FieldType::Number => text
                .trim()
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
                .ok_or(format!("`{text}` is not a number"))?,
            FieldType::Switch => match text.trim() {
                "true" | "on" | "yes" | "1" => json!(true),
                "false" | "off" | "no" | "0" => json!(false),
                _ => return Err(format!("`{text}` is not on or off")),
            },
            FieldType::Select => self
                .values
                .iter()
                .find(|v| v.as_str() == Some(text) || v.to_string().as_str() == text)
                .cloned()
                .ok_or_else(|| {
                    format!(
                        "`{text}` is not one of {}",
                        Value::Array(self.values.clone())
                    )
                })?,
        };
        Ok(v)
    }
}

/// A parsed `SKILL.md`.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillMd {
    /// Lowercase letters, digits and hyphens, at most 64.
    pub name: String,
    /// What the skill is for.
    pub description: String,
    /// Its version, if given.
    pub version: Option<String>,
    /// Config fields, in declaration order.
    pub config: Vec<(String, ConfigField)>,
    /// The Markdown body: the prompt.
    pub prompt: String,
}

fn bad(what: &str, message: impl Into<String>) -> Error {
    Error::Definition {
        tool: what.to_string(),
        message: message.into(),
    }
}

fn yaml_to_json(y: &yaml_rust2::Yaml) -> Value {
    use yaml_rust2::Yaml;
    match y {
        Yaml::Real(r) => r
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::Null, Value::Number),
        Yaml::Integer(i) => json!(i),
        Yaml::String(s) => json!(s),
        Yaml::Boolean(b) => json!(b),
        Yaml::Array(a) => Value::Array(a.iter().map(yaml_to_json).collect()),
        Yaml::Hash(h) => Value::Object(
            h.iter()
                .map(|(k, v)| {
                    let key = match k {
                        Yaml::String(s) => s.clone(),
                        other => yaml_to_json(other).to_string(),
                    };
                    (key, yaml_to_json(v))
                })
                .collect(),
        ),
        Yaml::Null | Yaml::BadValue | Yaml::Alias(_) => Value::Null,
    }
}

/// Whether a skill name is valid: lowercase letters, digits and hyphens, 1-64 characters.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// Parses `SKILL.md`: YAML front matter between `---` lines, then the prompt.
pub fn parse_skill_md(text: &str) -> Result<SkillMd> {
    let what = "SKILL.md";
    let body = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = body
        .strip_prefix("---\n")
        .or_else(|| body.strip_prefix("---\r\n"))
        .ok_or_else(|| {
            bad(
                what,
                "it must start with YAML front matter between `---` lines",
            )
        })?;
    let end = rest
        .find("\n---\n")
        .or_else(|| rest.find("\n---\r\n"))
        .map(|i| (i, 5))
        .or_else(|| rest.ends_with("\n---").then(|| (rest.len() - 4, 4)))
        .ok_or_else(|| bad(what, "the front matter has no closing `---` line"))?;
    let front = &rest[..end.0];
    let prompt = rest[end.0 + end.1..]
        .trim_start_matches(['\r', '\n'])
        .to_string();
    let docs = yaml_rust2::YamlLoader::load_from_str(front)
        .map_err(|e| bad(what, format!("the front matter is not valid YAML: {e}")))?;
    let doc = docs.first().map(yaml_to_json).unwrap_or(Value::Null);
    let Value::Object(m) = doc else {
        return Err(bad(
            what,
            "the front matter must be a YAML mapping (name: ..., description: ...)",
        ));
    };
    for key in m.keys() {
        if !["name", "description", "version", "config"].contains(&key.as_str()) {
            return Err(bad(
                what,
                format!(
                    "unknown front matter key `{key}`; use name, description, version and config"
                ),
            ));
        }
    }
    let name = m
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if !valid_name(&name) {
        return Err(bad(
            what,
            format!(
                "`name` must be lowercase letters, digits and hyphens, at most 64 characters; got `{name}`"
            ),
        ));
    }
    let description = m
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim()
        .to_string();
    if description.is_empty() {
        return Err(bad(
            what,
            "`description` is required: say what the skill does",
        ));
    }
    let version = match m.get("version") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => Some(other.to_string()),
    };
    let mut config = Vec::new();
    match m.get("config") {
        None | Some(Value::Null) => {}
        Some(Value::Object(fields)) => {
            for (key, f) in fields {
                let at = format!("at /config/{key}");
                if !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') || key.is_empty() {
                    return Err(bad(
                        what,
                        format!("{at}: field names are letters, digits and _"),
                    ));
                }
                let Value::Object(f) = f else {
                    return Err(bad(
                        what,
                        format!("{at}: must be a mapping (title, type, ...)"),
                    ));
                };
                let kind: FieldType =
                    serde_json::from_value(f.get("type").cloned().unwrap_or(json!("text")))
                        .map_err(|_| {
                            bad(
                                what,
                                format!("{at}/type: must be text, number, select or switch"),
                            )
                        })?;
                let values: Vec<Value> = match f.get("values") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(Value::Array(a)) => a.clone(),
                    Some(_) => return Err(bad(what, format!("{at}/values: must be a list"))),
                };
                if kind == FieldType::Select && values.is_empty() {
                    return Err(bad(what, format!("{at}: a select field needs `values`")));
                }
                let field = ConfigField {
                    title: f
                        .get("title")
                        .and_then(Value::as_str)
                        .unwrap_or(key)
                        .to_string(),
                    kind,
                    secret: f.get("secret").and_then(Value::as_bool).unwrap_or(false),
                    required: f.get("required").and_then(Value::as_bool).unwrap_or(false),
                    default: f.get("default").filter(|d| !d.is_null()).cloned(),
                    values,
                };
                if let Some(d) = &field.default
                    && !field.accepts(d)
                {
                    return Err(bad(
                        what,
                        format!("{at}/default: {d} does not fit a {:?} field", field.kind),
                    ));
                }
                if field.secret && field.default.is_some() {
                    return Err(bad(
                        what,
                        format!(
                            "{at}: a secret field cannot have a default (it would be shared in the package)"
                        ),
                    ));
                }
                config.push((key.clone(), field));
            }
        }
        Some(_) => {
            return Err(bad(
                what,
                "`config` must be a mapping of field names to {title, type, ...}",
            ));
        }
    }
    Ok(SkillMd {
        name,
        description,
        version,
        config,
        prompt,
    })
}

/// A script of a package, checked.
#[derive(Debug, Clone)]
pub struct SkillScript {
    /// Its name (the file name without `.lua`).
    pub name: String,
    /// Its source.
    pub code: String,
    /// Its header.
    pub header: Header,
}

/// A whole, checked package.
#[derive(Debug, Clone)]
pub struct Package {
    /// `SKILL.md`, parsed.
    pub md: SkillMd,
    /// `SKILL.md` as given.
    pub skill_md: String,
    /// The scripts.
    pub scripts: Vec<SkillScript>,
    /// The references: name and content.
    pub references: Vec<(String, String)>,
}

fn valid_script_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 40
        && n.starts_with(|c: char| c.is_ascii_lowercase())
        && n.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

fn valid_reference_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 100
        && !n.starts_with('.')
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

/// Checks a package against the tools registered now; nothing is written.
pub fn check_package(
    host: &Host,
    skill_md: &str,
    scripts: &[(String, String)],
    references: &[(String, String)],
) -> Result<Package> {
    let md = parse_skill_md(skill_md)?;
    let mut checked = Vec::new();
    for (i, (file, code)) in scripts.iter().enumerate() {
        let name = file.strip_suffix(".lua").unwrap_or(file);
        let at = format!("at /scripts/{i} (`{file}`)");
        if !valid_script_name(name) {
            return Err(bad(
                &md.name,
                format!(
                    "{at}: script names are lowercase letters, digits and _ (at most 40), like `make_album`"
                ),
            ));
        }
        if checked.iter().any(|s: &SkillScript| s.name == name) {
            return Err(bad(
                &md.name,
                format!("{at}: two scripts are named `{name}`"),
            ));
        }
        if code.len() > MAX_FILE_BYTES {
            return Err(bad(&md.name, format!("{at}: larger than 1 MiB")));
        }
        let header = Header::parse(code, &format!("{name}.lua"))
            .map_err(|e| bad(&md.name, format!("{at}: {e}")))?;
        checks::compile_lua(code, &format!("{name}.lua"))
            .map_err(|m| bad(&md.name, format!("{at}: {m}")))?;
        checks::uses_capabilities(host, &header, &format!("{name}.lua"), &[Kind::Leaf])
            .map_err(|m| bad(&md.name, m))?;
        checked.push(SkillScript {
            name: name.to_string(),
            code: code.clone(),
            header,
        });
    }
    let mut refs: Vec<(String, String)> = Vec::new();
    for (i, (name, content)) in references.iter().enumerate() {
        if !valid_reference_name(name) {
            return Err(bad(
                &md.name,
                format!(
                    "at /references/{i}: `{name}` is not a plain file name (letters, digits, . _ -)"
                ),
            ));
        }
        if content.len() > MAX_FILE_BYTES {
            return Err(bad(
                &md.name,
                format!("at /references/{i} (`{name}`): larger than 1 MiB"),
            ));
        }
        if refs.iter().any(|(n, _)| n == name) {
            return Err(bad(
                &md.name,
                format!("at /references/{i}: two references are named `{name}`"),
            ));
        }
        refs.push((name.clone(), content.clone()));
    }
    Ok(Package {
        md,
        skill_md: skill_md.to_string(),
        scripts: checked,
        references: refs,
    })
}

/// Install times and the on/off switch.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Meta {
    /// When first installed (unix milliseconds).
    pub installtime: i64,
    /// When last installed or updated (unix milliseconds).
    pub updatetime: i64,
    /// Whether its scripts can run.
    pub enabled: bool,
}

fn skills_dir(host: &Host) -> PathBuf {
    host.paths().data_dir.join("skills")
}

fn skill_dir(host: &Host, name: &str) -> PathBuf {
    skills_dir(host).join(name)
}

fn values_path(host: &Host, name: &str, secret: bool) -> PathBuf {
    host.paths().config_dir.join("skills").join(if secret {
        format!("{name}.secrets.json")
    } else {
        format!("{name}.json")
    })
}

/// The tool name of a skill's script.
pub fn tool_name(skill: &str, script: &str) -> String {
    format!("skill__{}__{script}", skill.replace('-', "_"))
}

fn read_meta(host: &Host, name: &str) -> Result<Option<Meta>> {
    store::read_json(&skill_dir(host, name).join("meta.json"))
}

/// Loads an installed skill's package from disk.
fn load_package(host: &Host, name: &str) -> Result<Package> {
    let dir = skill_dir(host, name);
    let skill_md = std::fs::read_to_string(dir.join("SKILL.md"))
        .map_err(|e| Error::io(dir.join("SKILL.md"), e))?;
    let read_folder = |sub: &str| -> Result<Vec<(String, String)>> {
        let path = dir.join(sub);
        let mut out = Vec::new();
        let Ok(entries) = std::fs::read_dir(&path) else {
            return Ok(out);
        };
        for e in entries.flatten() {
            let file = e.file_name().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(e.path()).map_err(|err| Error::io(e.path(), err))?;
            out.push((file, text));
        }
        out.sort();
        Ok(out)
    };
    let scripts = read_folder("scripts")?;
    let references = read_folder("references")?;
    check_package(host, &skill_md, &scripts, &references)
}

/// The values set for a skill: plain and secret, merged (secrets never leave the host).
fn values(host: &Host, name: &str) -> Result<Map<String, Value>> {
    let mut all: Map<String, Value> =
        store::read_json(&values_path(host, name, false))?.unwrap_or_default();
    let secrets: Map<String, Value> =
        store::read_json(&values_path(host, name, true))?.unwrap_or_default();
    all.extend(secrets);
    Ok(all)
}

fn write_private(path: &Path, value: &Value) -> Result<()> {
    let mut text = serde_json::to_vec_pretty(value).unwrap_or_default();
    text.push(b'\n');
    store::atomic_write_private(path, &text)
}

/// Installs or updates a skill. The old version stays intact unless the new one is complete.
pub fn install(host: &Host, package: Package) -> Result<(Value, bool)> {
    let name = package.md.name.clone();
    let root = skills_dir(host);
    store::ensure_dir(&root)?;
    let _lock = FileLock::acquire(&root.join(&name))?;
    let old = read_meta(host, &name)?;
    let now = chrono::Utc::now().timestamp_millis();
    let meta = Meta {
        installtime: old.as_ref().map_or(now, |m| m.installtime),
        updatetime: now,
        enabled: old.as_ref().is_none_or(|m| m.enabled),
    };
    let tmp = root.join(format!(".{name}.{}.tmp", uuid::Uuid::new_v4()));
    let write_all = || -> Result<()> {
        store::atomic_write(&tmp.join("SKILL.md"), package.skill_md.as_bytes())?;
        for s in &package.scripts {
            store::atomic_write(
                &tmp.join("scripts").join(format!("{}.lua", s.name)),
                s.code.as_bytes(),
            )?;
        }
        for (n, c) in &package.references {
            store::atomic_write(&tmp.join("references").join(n), c.as_bytes())?;
        }
        store::write_json(&tmp.join("meta.json"), &meta)
    };
    if let Err(e) = write_all() {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    let dest = skill_dir(host, &name);
    let aside = root.join(format!(".{name}.{}.old", uuid::Uuid::new_v4()));
    if dest.exists() {
        std::fs::rename(&dest, &aside).map_err(|e| Error::io(&dest, e))?;
    }
    if let Err(e) = std::fs::rename(&tmp, &dest) {
        if aside.exists() {
            let _ = std::fs::rename(&aside, &dest);
        }
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(Error::io(&dest, e));
    }
    let _ = std::fs::remove_dir_all(&aside);
    // Tools of scripts that went away disappear; the others are (re)registered.
    unregister_scripts(host, &name);
    if meta.enabled {
        register_scripts(host, &package)?;
    }
    Ok((summary(host, &package, &meta)?, old.is_some()))
}

fn unregister_scripts(host: &Host, name: &str) {
    let prefix = format!("skill__{}__", name.replace('-', "_"));
    for t in host.registry().all() {
        if t.spec().name.starts_with(&prefix) {
            host.registry().unregister(&t.spec().name);
        }
    }
}

fn capabilities(script: &SkillScript) -> Capabilities {
    match &script.header.uses {
        Some(uses) => Capabilities::Tools(uses.clone()),
        None => Capabilities::ReadOnly,
    }
}

/// The program a script is, with the modules and config it runs with (config read now).
fn script_program(host: &Host, skill: &str, script: &str) -> Result<Program> {
    if !valid_name(skill) || !skill_dir(host, skill).exists() {
        return Err(Error::Refused(format!(
            "there is no skill `{skill}`; `lmcp skill list` lists them"
        )));
    }
    let p = load_package(host, skill)?;
    let meta = read_meta(host, skill)?.ok_or_else(|| bad(skill, "meta.json is missing"))?;
    if !meta.enabled {
        return Err(Error::Refused(format!(
            "the skill `{skill}` is disabled; `lmcp skill enable {skill}` turns it on"
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
    let mut config = values(host, skill)?;
    for (key, f) in &p.md.config {
        if !config.contains_key(key) {
            match &f.default {
                Some(d) => {
                    config.insert(key.clone(), d.clone());
                }
                None if f.required => {
                    return Err(Error::Refused(format!(
                        "`{skill}` needs its config field `{key}` ({}); set it with `lmcp skill config {skill} {key}=VALUE`",
                        f.title
                    )));
                }
                None => {}
            }
        }
    }
    Ok(Program {
        name: tool_name(skill, script),
        params: s.header.params.clone(),
        capabilities: capabilities(s),
        timeout: Some(s.header.timeout.unwrap_or(DEFAULT_TIMEOUT)),
        body: Body::Lua(LuaBody {
            source: s.code.clone(),
            chunk: format!("{}.lua", s.name),
            modules: p
                .scripts
                .iter()
                .map(|m| (m.name.clone(), m.code.clone()))
                .collect(),
            config: Some(config),
        }),
    })
}

/// The gate's view of a `skill_call` call: the script it runs.
fn resolve_call(host: &Host, args: &Value) -> Result<Resolved> {
    let program = script_program(
        host,
        args["skill"].as_str().unwrap_or(""),
        args["script"].as_str().unwrap_or(""),
    )?;
    Ok(Resolved {
        program: Arc::new(program),
        for_real: true,
    })
}

fn register_scripts(host: &Host, package: &Package) -> Result<()> {
    for s in &package.scripts {
        let caps = capabilities(s);
        let (effect, annotations) =
            Scope::of(host.registry(), &caps, true).effect_and_annotations();
        let description = s.header.description.clone().unwrap_or_else(|| {
            format!(
                "The `{}` script of the `{}` skill.",
                s.name, package.md.name
            )
        });
        let name = tool_name(&package.md.name, &s.name);
        let spec = ToolSpec::new(
            &name,
            &format!("{} / {}", package.md.name, s.name),
            &description,
            s.header.params_schema(),
        )
        .effect(effect, annotations)
        .kind(Kind::Workflow)
        .capabilities(caps);
        let (skill, script) = (package.md.name.clone(), s.name.clone());
        let h: Handler = handler(move |inv| {
            let (skill, script) = (skill.clone(), script.clone());
            async move {
                let params = inv.args.as_object().cloned().unwrap_or_default();
                call(&inv.host, &inv.ctx, &skill, &script, &params, None).await
            }
        });
        host.registry().register_or_replace(spec, h)?;
    }
    Ok(())
}

fn summary(host: &Host, package: &Package, meta: &Meta) -> Result<Value> {
    let _ = host;
    Ok(json!({
        "name": package.md.name,
        "description": package.md.description,
        "toolNames": package.scripts.iter().map(|s| s.name.clone()).collect::<Vec<_>>(),
        "referenceNames": package.references.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
        "hasConfig": !package.md.config.is_empty(),
        "enabled": meta.enabled,
        "installtime": meta.installtime,
        "updatetime": meta.updatetime,
    }))
}

/// Every installed skill's summary; unreadable ones are reported and skipped.
pub fn list(host: &Host) -> Vec<Value> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(skills_dir(host)) else {
        return out;
    };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    for name in names {
        let loaded = load_package(host, &name).and_then(|p| {
            let meta = read_meta(host, &name)?.ok_or_else(|| bad(&name, "meta.json is missing"))?;
            summary(host, &p, &meta)
        });
        match loaded {
            Ok(s) => out.push(s),
            Err(e) => host.warn(format!("skill `{name}` could not be read: {e}")),
        }
    }
    out
}

/// A skill's record (summary, prompt, config schema, non-secret values), or null.
pub fn get(host: &Host, name: &str) -> Result<Value> {
    if !valid_name(name) || !skill_dir(host, name).exists() {
        return Ok(Value::Null);
    }
    let p = load_package(host, name)?;
    let meta = read_meta(host, name)?.ok_or_else(|| bad(name, "meta.json is missing"))?;
    let mut record = summary(host, &p, &meta)?;
    let set = values(host, name)?;
    let mut config = Map::new();
    let mut shown = Map::new();
    for (key, f) in &p.md.config {
        config.insert(key.clone(), serde_json::to_value(f).unwrap_or_default());
        if f.secret {
            shown.insert(
                key.clone(),
                json!({"secret": true, "set": set.contains_key(key)}),
            );
        } else if let Some(v) = set.get(key).or(f.default.as_ref()) {
            shown.insert(key.clone(), v.clone());
        }
    }
    let scripts: Vec<Value> = p
        .scripts
        .iter()
        .map(|s| {
            json!({
                "name": s.name,
                "tool": tool_name(name, &s.name),
                "description": s.header.description,
                "params": s.header.params_schema(),
                "timeout_secs": s.header.timeout.unwrap_or(DEFAULT_TIMEOUT).as_secs_f64(),
                "may_call": capabilities(s).describe(),
            })
        })
        .collect();
    record["scripts"] = json!(scripts);
    record["prompt"] = json!(p.md.prompt);
    record["config"] = Value::Object(config);
    record["values"] = Value::Object(shown);
    if let Some(v) = &p.md.version {
        record["version"] = json!(v);
    }
    Ok(record)
}

/// Removes a skill (its files, values and tools); whether it was there.
pub fn remove(host: &Host, name: &str) -> Result<bool> {
    if !valid_name(name) {
        return Ok(false);
    }
    let dir = skill_dir(host, name);
    if !dir.exists() {
        return Ok(false);
    }
    let _lock = FileLock::acquire(&dir)?;
    std::fs::remove_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    for secret in [false, true] {
        let _ = std::fs::remove_file(values_path(host, name, secret));
    }
    unregister_scripts(host, name);
    Ok(true)
}

/// Sets config values; checks each against its field. Returns the keys set (never values).
pub fn set_config(host: &Host, name: &str, given: &Map<String, Value>) -> Result<Vec<String>> {
    let p = load_package(host, name)
        .map_err(|_| Error::Refused(format!("there is no skill `{name}`")))?;
    let mut plain: Map<String, Value> =
        store::read_json(&values_path(host, name, false))?.unwrap_or_default();
    let mut secrets: Map<String, Value> =
        store::read_json(&values_path(host, name, true))?.unwrap_or_default();
    for (key, v) in given {
        let (_, field) = p.md.config.iter().find(|(k, _)| k == key).ok_or_else(|| {
            let keys: Vec<&str> = p.md.config.iter().map(|(k, _)| k.as_str()).collect();
            Error::Refused(format!(
                "`{name}` has no config field `{key}` (fields: {})",
                if keys.is_empty() {
                    "none".into()
                } else {
                    keys.join(", ")
                }
            ))
        })?;
        if v.is_null() {
            plain.remove(key);
            secrets.remove(key);
            continue;
        }
        if !field.accepts(v) {
            // The value itself is not repeated: it may be a secret.
            return Err(Error::Refused(format!(
                "the value for `{key}` does not fit its {:?} field",
                field.kind
            )));
        }
        if field.secret {
            secrets.insert(key.clone(), v.clone());
        } else {
            plain.insert(key.clone(), v.clone());
        }
    }
    store::write_json(&values_path(host, name, false), &plain)?;
    write_private(&values_path(host, name, true), &Value::Object(secrets))?;
    Ok(given.keys().cloned().collect())
}

/// Switches a skill on or off (its script tools come and go with it).
pub fn set_enabled(host: &Host, name: &str, enabled: bool) -> Result<()> {
    let p = load_package(host, name)
        .map_err(|_| Error::Refused(format!("there is no skill `{name}`")))?;
    let path = skill_dir(host, name).join("meta.json");
    let _lock = FileLock::acquire(&path)?;
    let mut meta = read_meta(host, name)?.ok_or_else(|| bad(name, "meta.json is missing"))?;
    meta.enabled = enabled;
    store::write_json(&path, &meta)?;
    unregister_scripts(host, name);
    if enabled {
        register_scripts(host, &p)?;
    }
    Ok(())
}

/// The installed skills' folders (names not starting with `.`: those are installs underway).
pub fn installed(host: &Host) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(skills_dir(host)) else {
        return Vec::new();
    };
    let mut found: Vec<(String, PathBuf)> = entries
        .flatten()
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .filter(|(name, path)| !name.starts_with('.') && path.is_dir())
        .collect();
    found.sort();
    found
}

/// Registers the script tools of every enabled skill; problems become warnings.
pub fn load_all(host: &Host) {
    for (name, _) in installed(host) {
        load_one(host, &name);
    }
}

/// (Re)registers one skill's script tools as its files say: none when it is disabled or gone;
/// problems become warnings.
pub fn load_one(host: &Host, name: &str) {
    unregister_scripts(host, name);
    if !skill_dir(host, name).is_dir() {
        return;
    }
    let loaded = load_package(host, name).and_then(|p| {
        let meta = read_meta(host, name)?.ok_or_else(|| bad(name, "meta.json is missing"))?;
        if meta.enabled {
            register_scripts(host, &p)
        } else {
            Ok(())
        }
    });
    if let Err(e) = loaded {
        host.warn(format!("skill `{name}` was not loaded: {e}"));
    }
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
    let report = program::run(host, ctx, &program, params, RunMode::AsCalled).await?;
    Ok(json!({"result": report.result, "output": report.output, "previews": report.previews}))
}

fn files_arg(v: &Value, key: &str, value_key: &str) -> Result<Vec<(String, String)>> {
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

/// Registers the skill tools.
pub fn register_tools(registry: &Registry) -> Result<()> {
    let write = Annotations::changing(false, true, false);
    let name_only = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"], "additionalProperties": false});
    let files = |value: &str| json!({"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}, value: {"type": "string"}}, "required": ["name", value], "additionalProperties": false}});

    registry.register_builtin(
        ToolSpec::new("skill_list", "List skills", "List the installed skills: name, description, toolNames, referenceNames, hasConfig, enabled, installtime, updatetime.", json!({"type": "object", "properties": {}, "additionalProperties": false})),
        handler(|inv| async move { Ok(json!({"skills": list(&inv.host)})) }),
    )?;
    registry.register_builtin(
        ToolSpec::new("skill_get", "Show a skill", "A skill's record: its summary plus the prompt (SKILL.md's body), the config schema and the values set (secrets never shown), or null when there is no such skill.", name_only.clone()),
        handler(|inv| async move { Ok(json!({"skill": get(&inv.host, inv.args["name"].as_str().unwrap_or(""))?})) }),
    )?;
    let install_spec = ToolSpec::new(
        "skill_install",
        "Install a skill",
        "Install a skill package: skill_md (SKILL.md with YAML front matter: name, description, optional version and config fields {title, type: text|number|select|switch, secret, required, default, values}; the body is the prompt), scripts [{name, code}] (Lua with a ---@param header; ---@uses lists the tools a script calls) and references [{name, content}]. A skill of the same name is updated (installtime kept); an invalid package changes nothing.",
        json!({"type": "object", "properties": {"skill_md": {"type": "string", "minLength": 1}, "scripts": files("code"), "references": files("content")}, "required": ["skill_md"], "additionalProperties": false}),
    )
    .effect(Effect::Write, write)
    .kind(Kind::Authoring)
    .summary(|a| format!("install a skill with {} script(s)", a["scripts"].as_array().map_or(0, Vec::len)));
    registry.register_builtin(
        install_spec,
        handler(|inv| async move {
            let scripts = files_arg(&inv.args, "scripts", "code")?;
            let references = files_arg(&inv.args, "references", "content")?;
            let package = check_package(
                &inv.host,
                inv.args["skill_md"].as_str().unwrap_or(""),
                &scripts,
                &references,
            )?;
            let calls: Vec<Value> = package
                .scripts
                .iter()
                .map(|s| json!({"script": s.name, "may_call": capabilities(s).describe()}))
                .collect();
            let (mut summary, updated) = install(&inv.host, package)?;
            summary["updated"] = json!(updated);
            summary["scripts_call"] = json!(calls);
            Ok(summary)
        }),
    )?;
    let remove_spec = ToolSpec::new("skill_remove", "Remove a skill", "Remove an installed skill, its config values and its script tools. Returns whether it was installed.", name_only.clone())
        .effect(Effect::Write, Annotations::changing(true, true, false))
        .kind(Kind::Authoring)
        .summary(|a| format!("remove the skill {}", a["name"].as_str().unwrap_or("?")));
    registry.register_builtin(
        remove_spec,
        handler(|inv| async move {
            Ok(json!({"removed": remove(&inv.host, inv.args["name"].as_str().unwrap_or(""))?}))
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
    .resolves(resolve_call);
    registry.register_builtin(
        call_spec,
        handler(|inv| async move {
            let params = inv.args["params"].as_object().cloned().unwrap_or_default();
            call(
                &inv.host,
                &inv.ctx,
                inv.args["skill"].as_str().unwrap_or(""),
                inv.args["script"].as_str().unwrap_or(""),
                &params,
                inv.program.clone(),
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
    .summary(|a| format!("set config of the skill {} (values hidden)", a["name"].as_str().unwrap_or("?")));
    registry.register_builtin(
        config_spec,
        handler(|inv| async move {
            let values = inv.args["values"].as_object().cloned().unwrap_or_default();
            let keys = set_config(&inv.host, inv.args["name"].as_str().unwrap_or(""), &values)?;
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
    .kind(Kind::Authoring);
    registry.register_builtin(
        enable_spec,
        handler(|inv| async move {
            let enabled = inv.args["enabled"].as_bool().unwrap_or(true);
            set_enabled(&inv.host, inv.args["name"].as_str().unwrap_or(""), enabled)?;
            Ok(json!({"name": inv.args["name"], "enabled": enabled}))
        }),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skill_md_parses_and_explains() {
        let md = "---\nname: photo-album\ndescription: Turn photos into a PDF album.\nversion: 1.2\nconfig:\n  api_key:\n    title: API key\n    type: text\n    secret: true\n    required: true\n  size:\n    type: select\n    values: [small, large]\n    default: small\n---\n# Album\nUse make_album.\n";
        let s = parse_skill_md(md).unwrap();
        assert_eq!(s.name, "photo-album");
        assert_eq!(s.version.as_deref(), Some("1.2"));
        assert_eq!(s.prompt, "# Album\nUse make_album.\n");
        assert_eq!(s.config.len(), 2);
        assert!(s.config[0].1.secret && s.config[0].1.required);
        assert_eq!(s.config[1].1.default, Some(json!("small")));
        for (bad_md, what) in [
            ("no front matter", "must start with YAML"),
            ("---\nname: x\n", "no closing"),
            (
                "---\nname: Bad_Name\ndescription: d\n---\n",
                "lowercase letters",
            ),
            ("---\nname: ok\n---\n", "`description` is required"),
            (
                "---\nname: ok\ndescription: d\nauthor: me\n---\n",
                "unknown front matter key `author`",
            ),
            (
                "---\nname: ok\ndescription: d\nconfig:\n  k:\n    type: colour\n---\n",
                "text, number, select or switch",
            ),
            (
                "---\nname: ok\ndescription: d\nconfig:\n  k:\n    type: select\n---\n",
                "needs `values`",
            ),
            (
                "---\nname: ok\ndescription: d\nconfig:\n  k:\n    secret: true\n    default: x\n---\n",
                "cannot have a default",
            ),
            ("---\nname: [\n---\n", "not valid YAML"),
        ] {
            let e = parse_skill_md(bad_md).unwrap_err().to_string();
            assert!(e.contains(what), "{bad_md:?}: {e}");
        }
    }

    #[test]
    fn tool_names_fit_mcp() {
        assert_eq!(
            tool_name("photo-album", "make_album"),
            "skill__photo_album__make_album"
        );
        crate::registry::check_name(&tool_name("a-b-c", "x1")).unwrap();
    }
}
