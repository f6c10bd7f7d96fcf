//! The library index: what every saved program registers (name, schema, effect, what it may
//! call), keyed by the stamp (sizes and modification times) of the files it came from.
//!
//! Loading the library compiles and checks a program only when its files changed since they
//! were indexed; an unchanged one is registered from its entry and compiled on first call. So
//! opening a library of a thousand programs costs a read of one file and a `stat` per program,
//! not a thousand Lua compiles and schema checks, and listing stays exact: an entry counts only
//! while its files carry the stamp it was made from. The writers (saving or deleting a custom
//! tool, installing, changing or removing a skill) bring their entry up to date at once; a file
//! changed behind lmcp's back no longer matches its stamp and is compiled again.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Stamp;
use crate::gate::journal::Sealer;
use crate::host::Host;
use crate::registry::{Annotations, Capabilities, Effect, Kind, ToolSpec};
use crate::store::{self, FileLock};

/// The index as stored in `DATA/library-index.json`.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Index {
    /// The lmcp version that wrote it: a program's effect follows from the built-in tools it may
    /// call, so another version compiles everything again.
    version: String,
    /// By file name under `DATA/tools/`.
    pub custom_tools: BTreeMap<String, Entry>,
    /// By skill (folder) name under `DATA/skills/`.
    pub skills: BTreeMap<String, Entry>,
}

/// One program file (or skill folder) as indexed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Entry {
    /// The stamp its files had when it was compiled.
    pub stamp: Stamp,
    /// The tools it registered (none for a disabled skill).
    pub tools: Vec<Indexed>,
    /// Its seal under the installation's key, set when the index is stored: an entry whose
    /// seal does not verify (edited to say `effect: read` for a program that writes) is not
    /// trusted, and its program is compiled again from its files.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    seal: String,
}

impl Entry {
    /// An entry for files with this stamp that registered these tools (sealed when stored).
    pub fn new(stamp: Stamp, tools: Vec<Indexed>) -> Entry {
        Entry {
            stamp,
            tools,
            seal: String::new(),
        }
    }

    /// What the seal covers: which store and key it is under, its stamp and its tools.
    fn sealed_text(part: &str, key: &str, entry: &Entry) -> Vec<u8> {
        serde_json::to_vec(&(part, key, &entry.stamp, &entry.tools)).unwrap_or_default()
    }
}

/// The seal's tag (see `gate::journal::Sealer`).
const SEAL_TAG: &str = "library-index-entry-1";

/// What a saved program's tool is, without its handler.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Indexed {
    name: String,
    title: String,
    description: String,
    input_schema: Value,
    effect: Effect,
    annotations: Annotations,
    capabilities: Option<Capabilities>,
    /// The hosts its requests may reach (see `ToolSpec::connect`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    connect: Vec<String>,
    /// Its output schema (a custom tool's or skill script's result, typed by its `---@return`
    /// or its last step's tool; #37).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    output_schema: Option<Value>,
}

impl Indexed {
    /// The index entry of a registered program's tool.
    pub fn of(spec: &ToolSpec) -> Indexed {
        Indexed {
            name: spec.name.clone(),
            title: spec.title.clone(),
            description: spec.description.clone(),
            input_schema: spec.input_schema.clone(),
            effect: spec.effect,
            annotations: spec.annotations,
            capabilities: spec.capabilities.clone(),
            connect: spec.connect.clone(),
            output_schema: spec.output_schema.clone(),
        }
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The spec it was made from (saved programs are all workflows).
    pub fn spec(&self) -> ToolSpec {
        let spec = ToolSpec::new(
            &self.name,
            &self.title,
            &self.description,
            self.input_schema.clone(),
        )
        .effect(self.effect, self.annotations)
        .kind(Kind::Workflow)
        .connects(self.connect.clone());
        let spec = match &self.output_schema {
            Some(o) => spec.output(o.clone()),
            None => spec,
        };
        match &self.capabilities {
            Some(c) => spec.capabilities(c.clone()),
            None => spec,
        }
    }
}

/// Largest index read; a bigger one is ignored (and replaced by the next load).
const MAX_INDEX_BYTES: u64 = 64 << 20;

/// What `version` says for this lmcp: the package version, and a format number raised when
/// the same version would index a program differently (2: a skill's modules are no tools, #34;
/// 3: a program's hosts, #36; 4: its output schema, #37), so an index written before is
/// compiled again rather than trusted.
fn this_version() -> String {
    format!("{}+4", env!("CARGO_PKG_VERSION"))
}

fn path(host: &Host) -> PathBuf {
    host.paths().data_dir.join("library-index.json")
}

impl Index {
    /// An empty index for this lmcp.
    pub fn new() -> Index {
        Index {
            version: this_version(),
            ..Index::default()
        }
    }

    /// The stored index, or an empty one when there is none, it cannot be read or another
    /// lmcp version wrote it (everything is then compiled and indexed again).
    pub fn read(host: &Host) -> Index {
        let path = path(host);
        // far above any real library's (1,100 programs take 0.7 MB): not read into memory
        if std::fs::metadata(&path).is_ok_and(|m| m.len() > MAX_INDEX_BYTES) {
            return Index::new();
        }
        match store::read_json::<Index>(&path) {
            Ok(Some(mut index)) if index.version == this_version() => {
                index.keep_sealed(Sealer::of(host).ok().as_ref());
                index
            }
            _ => Index::new(),
        }
    }

    /// Drops every entry whose seal does not verify (all of them without a key): those are
    /// compiled again from their files, as if never indexed.
    fn keep_sealed(&mut self, sealer: Option<&Sealer>) {
        for (part, map) in [
            ("custom_tools", &mut self.custom_tools),
            ("skills", &mut self.skills),
        ] {
            map.retain(|key, entry| {
                sealer.is_some_and(|s| {
                    s.verifies(SEAL_TAG, &Entry::sealed_text(part, key, entry), &entry.seal)
                })
            });
        }
    }

    /// Seals every entry (none without a key: they are then compiled on the next load).
    fn seal_all(&mut self, sealer: Option<&Sealer>) {
        for (part, map) in [
            ("custom_tools", &mut self.custom_tools),
            ("skills", &mut self.skills),
        ] {
            for (key, entry) in map.iter_mut() {
                entry.seal = sealer
                    .map(|s| s.seal(SEAL_TAG, &Entry::sealed_text(part, key, entry)))
                    .unwrap_or_default();
            }
        }
    }

    /// Stores the index (atomically, under its lock). Best effort: a library that cannot be
    /// indexed (a read-only data folder) still loads, only without the saving.
    pub fn write(&self, host: &Host) {
        let path = path(host);
        let Ok(_lock) = FileLock::acquire(&path) else {
            return;
        };
        Self::store(host, &path, self);
    }

    /// Written compact (it is read whole on every load of the library), every entry sealed.
    fn store(host: &Host, path: &std::path::Path, index: &Index) {
        let mut index = index.clone();
        index.seal_all(Sealer::of(host).ok().as_ref());
        if let Ok(mut text) = serde_json::to_vec(&index) {
            text.push(b'\n');
            let _ = store::atomic_write(path, &text);
        }
    }

    /// Changes one entry in the stored index, under its lock: what a writer does after it
    /// saved, changed or removed a program (`entry` is `None` when it is gone).
    pub fn update(
        host: &Host,
        which: fn(&mut Index) -> &mut BTreeMap<String, Entry>,
        key: &str,
        entry: Option<Entry>,
    ) {
        let path = path(host);
        let Ok(_lock) = FileLock::acquire(&path) else {
            return;
        };
        let mut index = Index::read(host);
        let map = which(&mut index);
        let changed = match entry {
            Some(e) => map
                .insert(key.to_string(), e.clone())
                .is_none_or(|old| old.stamp != e.stamp || old.tools != e.tools),
            None => map.remove(key).is_some(),
        };
        if changed {
            Self::store(host, &path, &index);
        }
    }
}

/// Loads one store's programs against its part of the index: each stored program (`key`, the
/// stamp of its files) whose entry carries that stamp is kept as indexed if `restore` registers
/// it from the entry; the others are loaded now (`load`: compiled, checked, registered; `None`
/// when they do not load, so they are never indexed). `fresh` gets the entries of all that
/// loaded; returns whether they differ from `indexed`.
pub(super) fn load_store(
    mut indexed: BTreeMap<String, Entry>,
    fresh: &mut BTreeMap<String, Entry>,
    stored: impl IntoIterator<Item = (String, Stamp)>,
    mut restore: impl FnMut(&str, &Entry) -> bool,
    mut load: impl FnMut(&str) -> Option<Vec<ToolSpec>>,
) -> bool {
    let mut changed = false;
    for (key, stamp) in stored {
        if let Some(entry) = indexed.remove(&key).filter(|e| e.stamp == stamp)
            && restore(&key, &entry)
        {
            fresh.insert(key, entry);
            continue;
        }
        changed = true;
        if let Some(specs) = load(&key) {
            let tools = specs.iter().map(Indexed::of).collect();
            fresh.insert(key, Entry::new(stamp, tools));
        }
    }
    changed || !indexed.is_empty()
}
