//! The libraries of programs people and agents save: custom tools, recipes and skills. Each
//! library stores its programs under the data directory, registers them as tools and offers the
//! authoring tools that create and delete them. Beside them, [`lua_run`] runs an unsaved Lua
//! chunk once, as a saved program is run (the same compile policy, gate and runner).
//!
//! The saved programs are registered when first needed ([`crate::registry::Registry::defer`]),
//! from the library index where their files are unchanged (`index`), so start-up does not grow
//! with the library.

pub mod custom_tools;
mod index;
pub mod lua_run;
pub mod recipes;
mod saving;
pub mod skills;

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::host::{Host, Seen, Stamp};
use crate::registry::{Kind, Registry};

/// Registers every library's authoring tools.
pub fn register_tools(registry: &Registry) -> Result<()> {
    custom_tools::register_tools(registry)?;
    recipes::register_tools(registry)?;
    lua_run::register_tools(registry)?;
    skills::register_tools(registry)
}

/// Finishes what writes a kill cut short left in the program stores (a skill update between its
/// renames), so every door sees whole programs even before the library is loaded.
pub fn recover(host: &Host) {
    skills::recover(host);
}

/// Loads every saved program as a tool; problems become warnings on the host. Programs whose
/// files are as the library index saw them are registered from it and compiled on first call;
/// the others are compiled and checked now, and the index is brought up to date.
pub fn load_all(host: &Host) {
    let old = index::Index::read(host);
    let mut fresh = index::Index::new();
    let tools_changed = custom_tools::load_indexed(host, old.custom_tools, &mut fresh.custom_tools);
    let skills_changed = skills::load_indexed(host, old.skills, &mut fresh.skills);
    if tools_changed || skills_changed {
        fresh.write(host);
    }
}

/// A tool name's prefix for the script tools of the skill `name`.
fn skill_prefix(name: &str) -> String {
    skills::tool_name(name, "")
}

/// A path's file name, as text (`""` for none).
fn file_name_of(path: &Path) -> String {
    path.file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A path's file name without its extension, as text: a custom tool's name from its file.
fn file_stem_of(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn file_stamp(path: &Path) -> Stamp {
    std::fs::metadata(path)
        .ok()
        .map(|m| vec![crate::host::file_stamp_of(&m)])
        .unwrap_or_default()
}

/// The stamps of everything in a folder, two levels deep (a skill: SKILL.md, meta.json,
/// scripts/*), sorted by name.
fn folder_stamp(dir: &Path) -> Stamp {
    let mut found: Vec<(PathBuf, crate::host::FileStamp)> = Vec::new();
    let mut walk = vec![(dir.to_path_buf(), 0)];
    while let Some((d, depth)) = walk.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            // one stat per entry (the entry's type comes with the listing)
            let Ok(meta) = e.metadata() else {
                continue;
            };
            if meta.is_dir() && depth < 1 {
                walk.push((e.path(), depth + 1));
            }
            found.push((e.path(), crate::host::file_stamp_of(&meta)));
        }
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found.into_iter().map(|(_, stamp)| stamp).collect()
}

/// Each installed skill's name and the stamp of its folder (its files one level down): what
/// the watcher compares to see a skill installed, replaced, removed or switched on or off.
pub fn skill_stamps(host: &Host) -> Vec<(String, Stamp)> {
    skills::installed(host)
        .into_iter()
        .map(|(name, dir)| (name, folder_stamp(&dir)))
        .collect()
}

/// The program stores as they are now (what [`load_all`] just loaded).
fn seen_now(host: &Host) -> Seen {
    Seen {
        custom_tools: custom_tools::stored_files(host)
            .into_iter()
            .map(|p| (p.display().to_string(), file_stamp(&p)))
            .collect(),
        skills: skill_stamps(host).into_iter().collect(),
    }
}

/// Starts watching the stores: from now on [`sync`] reloads what changed since this moment.
pub fn watch(host: &Host) {
    // what is saved up to now is loaded first, so that only later changes count as changes
    host.registry().load_deferred();
    let now = seen_now(host);
    *host.library_seen() = Some(now);
}

/// Notes that this process just wrote or removed a custom tool's file (and has registered the
/// change itself), so the watcher does not reload it and announce the same change twice.
pub fn noted_custom_tool(host: &Host, path: &Path) {
    let stamp = file_stamp(path);
    let name = file_stem_of(path);
    let entry = host
        .registry()
        .get(&name)
        .filter(|t| t.spec().kind == Kind::Workflow && !stamp.is_empty())
        .map(|t| index::Entry::new(stamp.clone(), vec![index::Indexed::of(t.spec())]));
    index::Index::update(host, |i| &mut i.custom_tools, &file_name_of(path), entry);
    if let Some(seen) = host.library_seen().as_mut() {
        let key = path.display().to_string();
        if stamp.is_empty() {
            seen.custom_tools.remove(&key);
        } else {
            seen.custom_tools.insert(key, stamp);
        }
    }
}

/// Drops a skill's library index entry: it is loaded (and checked) afresh next time.
pub fn forget_skill(host: &Host, name: &str) {
    index::Index::update(host, |i| &mut i.skills, name, None);
}

/// Like [`noted_custom_tool`], for a skill's folder after an install, removal or change.
pub fn noted_skill(host: &Host, name: &str, dir: &Path) {
    let stamp = dir.exists().then(|| folder_stamp(dir));
    let entry = stamp.clone().map(|stamp| {
        let prefix = skill_prefix(name);
        let tools = host
            .registry()
            .all()
            .iter()
            .filter(|t| t.spec().name.starts_with(&prefix))
            .map(|t| index::Indexed::of(t.spec()))
            .collect();
        index::Entry::new(stamp, tools)
    });
    index::Index::update(host, |i| &mut i.skills, name, entry);
    if let Some(seen) = host.library_seen().as_mut() {
        match stamp {
            Some(stamp) => seen.skills.insert(name.to_string(), stamp),
            None => seen.skills.remove(name),
        };
    }
}

/// Brings the registry in line with the stores on disk after another process (the command line
/// beside a long-running MCP server, say) saved, changed or removed custom tools or skills.
/// Every change goes through the registry, so MCP clients hear `tools/list_changed`; changes
/// this process made itself were noted when made, and are not reloaded. Returns whether
/// anything was reloaded or removed; does nothing before [`watch`].
pub fn sync(host: &Host) -> bool {
    let now = seen_now(host);
    let mut guard = host.library_seen();
    let Some(seen) = guard.as_mut() else {
        return false;
    };
    if &now == seen {
        return false;
    }
    let before = std::mem::replace(seen, now.clone());
    drop(guard);
    for (path, stamp) in &now.custom_tools {
        if before.custom_tools.get(path) != Some(stamp) {
            custom_tools::load_file(host, Path::new(path));
        }
    }
    for path in before.custom_tools.keys() {
        if !now.custom_tools.contains_key(path) {
            let name = file_stem_of(Path::new(path));
            let is_custom = host
                .registry()
                .get(&name)
                .is_some_and(|t| t.spec().kind == Kind::Workflow);
            if is_custom {
                host.registry().unregister(&name);
            }
        }
    }
    for (name, stamp) in &now.skills {
        if before.skills.get(name) != Some(stamp) {
            skills::load_one(host, name);
        }
    }
    for name in before.skills.keys() {
        if !now.skills.contains_key(name) {
            skills::load_one(host, name);
        }
    }
    true
}
