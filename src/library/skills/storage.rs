//! Where skills live: `DATA/skills/NAME/` written as a temporary folder renamed into place,
//! config values (secrets apart, 0600) under the config folder, and loading them at start.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::package::{Package, check_package, valid_name};
use super::tools::{register_scripts, script_handler, unregister_scripts};
use super::{DEFAULT_TIMEOUT, bad};

use crate::error::{Error, Result};
use crate::host::Host;
use crate::library::folder_stamp;
use crate::library::index::{Entry, load_store};
use crate::registry::ToolSpec;
use crate::store::{self, FileLock};

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

pub(super) fn skills_dir(host: &Host) -> PathBuf {
    host.paths().data_dir.join("skills")
}

pub(super) fn skill_dir(host: &Host, name: &str) -> PathBuf {
    skills_dir(host).join(name)
}

pub(super) fn values_path(host: &Host, name: &str, secret: bool) -> PathBuf {
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

pub(super) fn read_meta(host: &Host, name: &str) -> Result<Option<Meta>> {
    store::read_plain_json(&skill_dir(host, name).join("meta.json"), 64 << 10)
}

/// Loads an installed skill's package from disk.
pub(super) fn load_package(host: &Host, name: &str) -> Result<Package> {
    let dir = skill_dir(host, name);
    let skill_md = store::read_plain_text(&dir.join("SKILL.md"), super::MAX_FILE_BYTES)?;
    let scripts = read_folder(&dir.join("scripts"), 1)?;
    let references = read_folder(&dir.join("references"), super::MAX_REFERENCE_DEPTH)?;
    check_package(host.registry(), &skill_md, &scripts, &references)
}

/// The files under `path` as (relative name with `/`, text), sorted, down to `depth` levels
/// (1: its own files only); a missing folder has none. Only lmcp writes here, and
/// [`check_package`] checks what was read, names and sizes included.
fn read_folder(path: &Path, depth: usize) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut walk = vec![(path.to_path_buf(), String::new(), 1)];
    while let Some((folder, prefix, level)) = walk.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for e in entries.flatten() {
            let name = format!("{prefix}{}", e.file_name().to_string_lossy());
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            if is_dir {
                if level < depth {
                    walk.push((e.path(), format!("{name}/"), level + 1));
                }
                continue;
            }
            // as installed: plain files of at most a reference's size (a link or a FIFO put
            // there since is refused, not followed or waited on)
            let text = store::read_plain_text(&e.path(), super::MAX_FILE_BYTES)?;
            out.push((name, text));
        }
    }
    out.sort();
    Ok(out)
}

/// The values set for a skill: plain and secret, merged (secrets never leave the host).
pub(super) fn values(host: &Host, name: &str) -> Result<Map<String, Value>> {
    let mut all: Map<String, Value> =
        store::read_json(&values_path(host, name, false))?.unwrap_or_default();
    let secrets: Map<String, Value> =
        store::read_json(&values_path(host, name, true))?.unwrap_or_default();
    all.extend(secrets);
    Ok(all)
}

/// The values stored as secret for a skill: they stay secret until removed, whatever a later
/// SKILL.md says about their field.
fn stored_secrets(host: &Host, name: &str) -> Result<Map<String, Value>> {
    Ok(store::read_json(&values_path(host, name, true))?.unwrap_or_default())
}

/// The text of each stored secret of a skill, to mask wherever it could be shown.
pub(super) fn secret_values(host: &Host, name: &str) -> Result<Vec<String>> {
    Ok(stored_secrets(host, name)?
        .values()
        .flat_map(|v| match v {
            Value::String(s) => vec![s.clone()],
            // a whole number stored as 12345678.0 is read by a script as 12345678 too
            Value::Number(n) => {
                let mut forms = vec![n.to_string()];
                if let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15) {
                    forms.push(format!("{}", f as i64));
                }
                forms
            }
            _ => Vec::new(),
        })
        .flat_map(|s| crate::text::secret_forms(&s))
        .collect())
}

pub(super) fn write_private(path: &Path, value: &Value) -> Result<()> {
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
    // Secret values were given to the scripts that were installed then: new code never gets
    // them (it could hand them out in a form no mask catches). The person sets them again.
    let secrets_cleared =
        old.is_some() && !stored_secrets(host, &name)?.is_empty() && !same_scripts(&dest, &package);
    if secrets_cleared {
        let path = values_path(host, &name, true);
        if let Err(e) = std::fs::remove_file(&path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(Error::io(&path, e));
        }
    }
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
    crate::library::noted_skill(host, &name, &dest);
    let mut summary = summary(host, &package, &meta)?;
    if secrets_cleared {
        summary["secrets_cleared"] = Value::Bool(true);
        summary["note"] = Value::from(format!(
            "its scripts changed, so its secret values were removed: set them again with `lmcp \
             skill config {name} KEY=VALUE` once you trust the new scripts"
        ));
    }
    Ok((summary, old.is_some()))
}

/// Whether the skill installed at `dest` has exactly `package`'s scripts, code and all.
fn same_scripts(dest: &Path, package: &Package) -> bool {
    let dir = dest.join("scripts");
    let installed = std::fs::read_dir(&dir).map_or(0, |entries| {
        entries
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "lua"))
            .count()
    });
    installed == package.scripts.len()
        && package.scripts.iter().all(|s| {
            std::fs::read_to_string(dir.join(format!("{}.lua", s.name))).is_ok_and(|c| c == s.code)
        })
}

pub(super) fn summary(host: &Host, package: &Package, meta: &Meta) -> Result<Value> {
    let _ = host;
    Ok(json!({
        "name": package.md.name,
        "description": package.md.description,
        "toolNames": package.scripts.iter().filter(|s| !s.is_module()).map(|s| s.name.clone()).collect::<Vec<_>>(),
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
    let stored_secret = stored_secrets(host, name)?;
    let mut config = Map::new();
    let mut shown = Map::new();
    for (key, f) in &p.md.config {
        config.insert(key.clone(), serde_json::to_value(f).unwrap_or_default());
        if f.secret || stored_secret.contains_key(key) {
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
            if s.is_module() {
                return json!({"name": s.name, "module_of": s.required_by});
            }
            let mut row = json!({
                "name": s.name,
                "tool": tool_name(name, &s.name),
                "params": s.program.header().params_schema(),
                "timeout_secs": s.program.timeout.unwrap_or(DEFAULT_TIMEOUT).as_secs_f64(),
                "may_call": s.program.capabilities.describe(),
            });
            // absent, not null, without a ---@description (skill_get's declared shape)
            if !s.program.description.is_empty() {
                row["description"] = json!(s.program.description);
            }
            if !s.program.connect.is_empty() {
                row["may_reach"] = json!(s.program.connect);
            }
            row
        })
        .collect();
    record["scripts"] = json!(scripts);
    record["prompt"] = json!(p.md.prompt);
    record["config"] = Value::Object(config);
    record["values"] = Value::Object(shown);
    if let Some(v) = &p.md.version {
        record["version"] = json!(v);
    }
    // the Agent Skills fields, kept as written; allowed-tools with what it means here
    if let Some(l) = &p.md.license {
        record["license"] = json!(l);
    }
    if let Some(c) = &p.md.compatibility {
        record["compatibility"] = json!(c);
    }
    if !p.md.allowed_tools.is_empty() {
        record["allowed_tools"] = json!(p.md.allowed_tools);
        record["allowed_tools_note"] = json!(super::ALLOWED_TOOLS_NOTE);
    }
    if !p.md.metadata.is_empty() {
        record["metadata"] = Value::Object(
            p.md.metadata
                .iter()
                .map(|(k, v)| (k.clone(), json!(v)))
                .collect(),
        );
    }
    // every reference is text to read: none is run, whatever its language
    if !p.references.is_empty() {
        record["references_note"] = json!(super::READ_ONLY_NOTE);
    }
    Ok(record)
}

/// What an MCP client sees of one enabled skill: its prompt and the files it may read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Shown {
    /// The skill's name (its prompt's name).
    pub name: String,
    /// Its description, as SKILL.md gives it.
    pub description: String,
    /// SKILL.md's body: the prompt for an AI.
    pub prompt: String,
    /// Its script tools' names (modules are not tools), sorted.
    pub tools: Vec<String>,
    /// Its references' names and sizes in bytes, sorted by name.
    pub references: Vec<(String, usize)>,
}

/// Every enabled skill as an MCP client sees it, sorted by name. SKILL.md is parsed and the
/// reference folder listed; no script is compiled, so this is cheap enough to compare on each
/// look for changes. A skill that cannot be read is left out (and warned about).
pub fn shown(host: &Host) -> Vec<Shown> {
    let registry_tools: Vec<String> = host
        .registry()
        .all()
        .iter()
        .map(|t| t.spec().name.clone())
        .collect();
    let mut out = Vec::new();
    for (name, _) in installed(host) {
        let enabled = read_meta(host, &name)
            .ok()
            .flatten()
            .is_some_and(|m| m.enabled);
        if !enabled || !valid_name(&name) {
            continue;
        }
        // checked as `lmcp skill list` checks it: a skill that fails is no prompt either
        let package = match load_package(host, &name) {
            Ok(p) => p,
            Err(e) => {
                host.warn(format!("skill `{name}` could not be read: {e}"));
                continue;
            }
        };
        let prefix = tool_name(&name, "");
        let mut tools: Vec<String> = registry_tools
            .iter()
            .filter(|t| t.starts_with(&prefix))
            .cloned()
            .collect();
        tools.sort();
        let references = package
            .references
            .iter()
            .map(|(n, text)| (n.clone(), text.len()))
            .collect();
        out.push(Shown {
            name,
            description: package.md.description,
            prompt: package.md.prompt,
            tools,
            references,
        });
    }
    out
}

/// The text of one reference of an enabled skill, by the name [`shown`] lists: nothing else
/// under the skill's folder can be named (no path is joined from what a client sent).
pub fn reference(host: &Host, skill: &str, name: &str) -> Option<String> {
    if !valid_name(skill)
        || !read_meta(host, skill)
            .ok()
            .flatten()
            .is_some_and(|m| m.enabled)
    {
        return None;
    }
    // the whole package, checked as it is for a call: a skill that fails serves nothing
    load_package(host, skill)
        .ok()?
        .references
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, text)| text)
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
    crate::library::noted_skill(host, name, &dir);
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
        // a value stored as secret stays secret until it is removed
        if field.secret || secrets.contains_key(key) {
            secrets.insert(key.clone(), v.clone());
            plain.remove(key);
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
    crate::library::noted_skill(host, name, &skill_dir(host, name));
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

/// Finishes what an install cut short by a kill left behind: a skill set aside (`.NAME.ID.old`)
/// with nothing in its place is put back; one whose replacement is in place is removed; a
/// staging folder (`.NAME.ID.tmp`) no install has touched for ten minutes is removed. Each under
/// the skill's lock, so a running install is never disturbed.
pub fn recover(host: &Host) {
    let root = skills_dir(host);
    let Ok(entries) = std::fs::read_dir(&root) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = file.strip_prefix('.') else {
            continue;
        };
        let (stem, kind) = if let Some(s) = rest.strip_suffix(".old") {
            (s, "old")
        } else if let Some(s) = rest.strip_suffix(".tmp") {
            (s, "tmp")
        } else {
            continue;
        };
        let Some((name, _id)) = stem.rsplit_once('.') else {
            continue;
        };
        if !valid_name(name) || !entry.path().is_dir() {
            continue;
        }
        let stale = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|d| d > std::time::Duration::from_secs(600));
        // a young staging folder is an install at work: not waited for (every start runs this)
        if kind == "tmp" && !stale {
            continue;
        }
        let Ok(_lock) = FileLock::acquire(&root.join(name)) else {
            continue;
        };
        let dest = skill_dir(host, name);
        let path = entry.path();
        match kind {
            "old" if !dest.exists() => match std::fs::rename(&path, &dest) {
                Ok(()) => host.warn(format!(
                    "an update of the skill `{name}` was cut short; the version before it is back"
                )),
                Err(e) => host.warn(format!("could not restore the skill `{name}`: {e}")),
            },
            "old" => {
                let _ = std::fs::remove_dir_all(&path);
            }
            _ => {
                let _ = std::fs::remove_dir_all(&path);
            }
        }
    }
}

/// Registers the script tools of every enabled skill: a skill whose folder carries the stamp
/// of its entry in `indexed` from that entry (scripts are read at each call anyway), the others
/// loaded and checked now. `fresh` gets the entries of all that loaded; returns whether they
/// differ from `indexed`. `recover` ran when the host opened.
pub(in crate::library) fn load_indexed(
    host: &Host,
    indexed: BTreeMap<String, Entry>,
    fresh: &mut BTreeMap<String, Entry>,
) -> bool {
    let stored = installed(host)
        .into_iter()
        .map(|(name, dir)| (name, folder_stamp(&dir)));
    let restore = |name: &str, entry: &Entry| {
        let prefix = tool_name(name, "");
        entry.tools.iter().all(|t| {
            t.name().strip_prefix(&prefix).is_some_and(|script| {
                host.registry()
                    .restore(t.spec(), script_handler(name, script))
                    .is_ok()
            })
        })
    };
    load_store(indexed, fresh, stored, restore, |name| load_one(host, name))
}

/// (Re)registers one skill's script tools as its files say: none when it is disabled or gone;
/// problems become warnings. Returns the specs registered, or `None` when it did not load.
pub fn load_one(host: &Host, name: &str) -> Option<Vec<ToolSpec>> {
    unregister_scripts(host, name);
    if !skill_dir(host, name).is_dir() {
        return None;
    }
    let loaded = load_package(host, name).and_then(|p| {
        let meta = read_meta(host, name)?.ok_or_else(|| bad(name, "meta.json is missing"))?;
        if meta.enabled {
            register_scripts(host, &p)
        } else {
            Ok(Vec::new())
        }
    });
    match loaded {
        Ok(specs) => Some(specs),
        Err(e) => {
            host.warn(format!("skill `{name}` was not loaded: {e}"));
            None
        }
    }
}
