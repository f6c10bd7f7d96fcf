//! Where recipes live: one JSON file per recipe under `DATA/recipes/`, named by its slug,
//! written atomically under a file lock; a corrupt file is reported and hides nothing else.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{Manifest, Recipe, check, normal_name, slug};

use crate::error::{Error, Result};
use crate::host::Host;
use crate::library::saving::Saving;
use crate::store::{self, FileLock};

/// A recipe as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Stored {
    /// The stored format's version ([`FORMAT`]).
    format: u32,
    /// The manifest as saved.
    pub(super) manifest: Manifest,
    /// When it was first saved (RFC 3339).
    pub(super) created: String,
    /// When it was last saved (RFC 3339).
    pub(super) updated: String,
}

/// The version of the stored recipe format this lmcp writes and reads.
const FORMAT: u32 = 1;

fn dir(host: &Host) -> PathBuf {
    host.paths().data_dir.join("recipes")
}

fn file(host: &Host, name: &str) -> PathBuf {
    dir(host).join(format!("{}.json", slug(name)))
}

pub(super) fn load(host: &Host, name: &str) -> Result<Stored> {
    let name = &normal_name(name);
    let path = file(host, name);
    let stored: Stored = store::read_json(&path)?.ok_or_else(|| {
        let names: Vec<String> = list(host)
            .0
            .iter()
            .filter_map(|r| r["name"].as_str().map(str::to_string))
            .collect();
        let close: Vec<&String> = names
            .iter()
            .filter(|n| strsim::jaro_winkler(&n.to_lowercase(), &name.to_lowercase()) > 0.8)
            .collect();
        let hint = close
            .first()
            .map(|n| format!("; did you mean \"{n}\"?"))
            .unwrap_or_else(|| {
                format!(
                    "; {} lists them",
                    crate::text::arg_words::tool("recipe_list", "lmcp recipe list")
                )
            });
        Error::Refused(format!("there is no recipe \"{name}\"{hint}"))
    })?;
    if let Err(why) = fits(&stored, &path) {
        return Err(Error::Corrupt {
            path,
            message: format!(
                "{why}; delete it (`lmcp recipe delete` with the file's name) or save over it \
                 with {}",
                crate::text::arg_words::arg("replace", "true")
            ),
        });
    }
    // Found by its exact name (after NFC): the file name is only a slug of it.
    if normal_name(&stored.manifest.name) != *name {
        return Err(Error::Refused(format!(
            "there is no recipe \"{name}\"; did you mean \"{}\"?",
            stored.manifest.name
        )));
    }
    Ok(stored)
}

/// Whether a recipe of this name is saved (and readable): saving another under it needs
/// `replace`.
pub fn exists(host: &Host, name: &str) -> bool {
    load(host, name).is_ok()
}

/// Why a stored recipe that parsed cannot be used as it is: a format this lmcp does not read,
/// or a name whose file is another (the file name must be the slug of the recipe's name).
fn fits(stored: &Stored, path: &Path) -> std::result::Result<(), String> {
    if stored.format != FORMAT {
        return Err(format!(
            "it is of recipe format {}; this lmcp reads format {FORMAT}",
            stored.format
        ));
    }
    let own = format!("{}.json", slug(&stored.manifest.name));
    if crate::library::file_name_of(path) != own {
        return Err(format!(
            "it holds the recipe \"{}\", whose file is {own}: the file name must match the \
             recipe's name",
            stored.manifest.name
        ));
    }
    Ok(())
}

/// Saves a recipe after checking it; returns the checked recipe and whether one was replaced.
/// The recipe is checked before its file is touched.
pub fn save(host: &Host, manifest: Manifest, replace: bool) -> Result<(Recipe, bool)> {
    let recipe = check(host.registry(), manifest)?;
    let name = recipe.manifest.name.clone();
    let path = file(host, &name);
    let saving = Saving::<Stored>::begin(&path, replace, |s| fits(s, &path))?;
    let existing = &saving.existing;
    if let Some(old) = &existing {
        if normal_name(&old.manifest.name) != name {
            return Err(Error::Refused(format!(
                "\"{name}\" and the saved recipe \"{}\" would share the file name {}.json; \
                 choose another name",
                old.manifest.name,
                slug(&name)
            )));
        }
        if !replace {
            return Err(Error::Refused(format!(
                "a recipe named \"{name}\" exists; pass {} to replace it",
                crate::text::arg_words::arg("replace", "true")
            )));
        }
    }
    let now = store::timestamp();
    let stored = Stored {
        format: FORMAT,
        manifest: recipe.manifest.clone(),
        created: existing
            .as_ref()
            .map_or_else(|| now.clone(), |o| o.created.clone()),
        updated: now,
    };
    saving.write(host, &stored, "recipe")?;
    Ok((recipe, existing.is_some()))
}

/// Every saved recipe, and the files that could not be read (reported, never hiding the rest).
pub fn list(host: &Host) -> (Vec<Value>, Vec<String>) {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir(host)) else {
        return (out, problems);
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    for path in paths {
        match store::read_json::<Stored>(&path) {
            Ok(Some(s)) => match fits(&s, &path) {
                Err(why) => problems.push(format!("{}: {why}; skipped", path.display())),
                Ok(()) => {
                    let mut row = json!({
                        "name": s.manifest.name,
                        "body": if s.manifest.lua.is_some() { "lua" } else { "steps" },
                        "step_count": s.manifest.steps.as_ref().map_or(0, Vec::len),
                        "params": s.manifest.params,
                        "created": s.created,
                        "updated": s.updated,
                    });
                    // absent, not null, when the manifest has none (its declared shape)
                    if let Some(d) = &s.manifest.description {
                        row["description"] = json!(d);
                    }
                    out.push(row);
                }
            },
            Ok(None) => {}
            Err(e) => problems.push(format!("{e}; skipped")),
        }
    }
    (out, problems)
}

/// Deletes a saved recipe; a file under the name's file that cannot be used (it does not
/// parse, or holds a recipe that belongs in another file) is deleted by that name too, since
/// nothing else can reach it.
pub fn delete(host: &Host, name: &str) -> Result<()> {
    let path = match load(host, name) {
        Ok(stored) => file(host, &stored.manifest.name),
        Err(Error::Corrupt { path, .. }) => path,
        Err(e) => return Err(e),
    };
    let _lock = FileLock::acquire(&path)?;
    std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))
}
