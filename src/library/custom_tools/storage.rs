//! Where custom tools live: one JSON file per tool under `DATA/tools/`, written atomically
//! under a file lock, loaded when first needed (a file that no longer checks is reported and skipped).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};

use super::tools::{indexed_handler, workflow_handler};
use super::{Compiled, Definition, bad, compile};

use crate::error::{Error, Result};
use crate::host::Host;
use crate::library::index::{Entry, load_store};
use crate::library::saving::Saving;
use crate::library::{file_name_of, file_stamp, file_stem_of};
use crate::registry::{Kind, ToolSpec};
use crate::store::{self, FileLock};

/// Where custom tools are stored.
pub fn dir(host: &Host) -> PathBuf {
    host.paths().data_dir.join("tools")
}

fn file(host: &Host, name: &str) -> PathBuf {
    dir(host).join(format!("{name}.json"))
}

/// The stored custom tool files (`NAME.json`), sorted.
pub fn stored_files(host: &Host) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir(host)) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    paths
}

/// Loads every stored custom tool: one whose file carries the stamp of its entry in `indexed`
/// from that entry (compiled on its first call), the others compiled and checked now. `fresh`
/// gets the entries of all that loaded; returns whether they differ from `indexed`.
pub(in crate::library) fn load_indexed(
    host: &Host,
    indexed: BTreeMap<String, Entry>,
    fresh: &mut BTreeMap<String, Entry>,
) -> bool {
    let dir = dir(host);
    let stored = stored_files(host)
        .into_iter()
        .map(|path| (file_name_of(&path), file_stamp(&path)));
    let restore = |key: &str, entry: &Entry| {
        let path = dir.join(key);
        // one tool, named as its file
        matches!(entry.tools.as_slice(), [tool] if file_stem_of(&path) == tool.name()
            && host
                .registry()
                .restore(tool.spec(), indexed_handler(path.clone()))
                .is_ok())
    };
    let load = |key: &str| load_file(host, &dir.join(key)).map(|spec| vec![spec]);
    load_store(indexed, fresh, stored, restore, load)
}

/// Reads and compiles one stored definition (its file name must be its tool's).
pub(super) fn compile_stored(host: &Host, path: &Path) -> Result<Compiled> {
    let d = store::read_json::<Definition>(path)?
        .ok_or_else(|| Error::io(path, std::io::Error::from(std::io::ErrorKind::NotFound)))?;
    let expected = file_stem_of(path);
    if d.name != expected {
        return Err(bad(
            &d.name,
            format!("it is stored as {expected}.json; the file name must match the tool name"),
        ));
    }
    compile(host.registry(), d)
}

/// Loads (or reloads) one stored custom tool and returns the spec it registered; a file that
/// does not parse or check is reported and skipped.
pub fn load_file(host: &Host, path: &Path) -> Option<ToolSpec> {
    let loaded = compile_stored(host, path).and_then(|c| {
        let c = Arc::new(c);
        host.registry()
            .register_or_replace(c.spec.clone(), workflow_handler(Arc::clone(&c)))?;
        Ok(c.spec.clone())
    });
    match loaded {
        Ok(spec) => Some(spec),
        Err(e) => {
            host.warn(format!(
                "custom tool {} was not loaded: {e}",
                path.display()
            ));
            None
        }
    }
}

/// Saves (and registers) a definition; the tool is callable as soon as this returns. The
/// definition is compiled before the file is touched: one that does not compile changes
/// nothing on disk.
pub fn save(host: &Host, def: Definition, replace: bool) -> Result<(Arc<Compiled>, bool)> {
    let name = def.name.clone();
    let mut compiled = compile(host.registry(), def)?;
    let path = file(host, &name);
    let saving = Saving::<Definition>::begin(&path, replace, |d| fits(d, &path))?;
    let existing = &saving.existing;
    let exists = existing.is_some() || host.registry().get(&name).is_some();
    if exists && !replace {
        return Err(Error::Refused(format!(
            "`{name}` already exists; pass {} to replace it",
            crate::text::arg_words::arg("replace", "true")
        )));
    }
    if let Some(t) = host.registry().get(&name)
        && t.spec().kind != Kind::Workflow
    {
        return Err(Error::Refused(format!(
            "`{name}` is not a custom tool and cannot be replaced"
        )));
    }
    let now = store::timestamp();
    let def = &mut compiled.definition;
    def.created = existing
        .as_ref()
        .and_then(|d| d.created.clone())
        .or_else(|| Some(now.clone()));
    def.updated = Some(now);
    let compiled = Arc::new(compiled);
    saving.write(host, &compiled.definition, "definition")?;
    host.registry().register_or_replace(
        compiled.spec.clone(),
        workflow_handler(Arc::clone(&compiled)),
    )?;
    crate::library::noted_custom_tool(host, &path);
    Ok((compiled, exists))
}

/// Why a stored definition that parsed cannot be saved over as it is: a format this lmcp does
/// not read, or a tool name that is not its file's.
fn fits(d: &Definition, path: &Path) -> std::result::Result<(), String> {
    if d.format != super::FORMAT {
        return Err(format!(
            "it is of definition format {}; this lmcp reads format {}",
            d.format,
            super::FORMAT
        ));
    }
    let stem = file_stem_of(path);
    if d.name != stem {
        return Err(format!(
            "it holds the tool `{}`, but the file name must match the tool name",
            d.name
        ));
    }
    Ok(())
}

/// Deletes a custom tool: its file and its registration.
pub fn delete(host: &Host, name: &str) -> Result<()> {
    if !name.starts_with("user_") {
        return Err(Error::Refused(format!(
            "`{name}` is not a custom tool (their names start with `user_`)"
        )));
    }
    let path = file(host, name);
    let _lock = FileLock::acquire(&path)?;
    let on_disk = path.exists();
    if !on_disk && host.registry().get(name).is_none() {
        return Err(Error::Refused(format!(
            "there is no custom tool `{name}`{}",
            host.registry().did_you_mean(name)
        )));
    }
    if on_disk {
        std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
    }
    host.registry().unregister(name);
    crate::library::noted_custom_tool(host, &path);
    Ok(())
}

/// Every custom tool, described for people and agents.
pub fn list(host: &Host) -> Vec<Value> {
    let mut out = BTreeMap::new();
    for t in host.registry().all() {
        let s = t.spec();
        if s.kind != Kind::Workflow {
            continue;
        }
        let def: Option<Definition> = store::read_json(&file(host, &s.name)).ok().flatten();
        let mut row = json!({
            "name": s.name,
            "description": s.description,
            "body": if def.as_ref().is_some_and(|d| d.lua.is_some()) { "lua" } else { "steps" },
            "effect": s.effect,
            "destructive": s.annotations.destructive_hint,
            "input_schema": s.input_schema,
        });
        // what is not known is left out, not null (the tool's declared shape)
        if let Some(c) = &s.capabilities {
            row["may_call"] = json!(c.describe());
        }
        if let Some(d) = &def {
            for (key, at) in [("created", &d.created), ("updated", &d.updated)] {
                if let Some(at) = at {
                    row[key] = json!(at);
                }
            }
        }
        out.insert(s.name.clone(), row);
    }
    out.into_values().collect()
}
