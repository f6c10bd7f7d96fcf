//! Portable bundles: `recipe_export` writes a versioned bundle with a content hash, and
//! `recipe_import` checks it and reports every tool the recipe may call, with its effect and
//! availability here, before saving anything.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::storage::{load, save};
use super::{BUNDLE_FORMAT, BUNDLE_VERSION, check, parse_manifest};

use crate::error::{Error, Result};
use crate::host::Host;
use crate::registry::Capabilities;
use crate::store;

/// A portable bundle of a saved recipe.
pub fn export(host: &Host, name: &str) -> Result<Value> {
    let stored = load(host, name)?;
    let recipe = serde_json::to_value(&stored.manifest).unwrap_or_default();
    Ok(json!({
        "format": BUNDLE_FORMAT,
        "version": BUNDLE_VERSION,
        "lmcp_version": env!("CARGO_PKG_VERSION"),
        "exported_at": store::timestamp(),
        "sha256": content_hash(&recipe),
        "recipe": recipe,
    }))
}

fn content_hash(recipe: &Value) -> String {
    format!(
        "{:x}",
        Sha256::digest(serde_json::to_vec(recipe).unwrap_or_default())
    )
}

/// Checks a bundle (format, version, content hash, manifest) and reports every tool it calls
/// with its effect and availability here. Saves it unless `check_only`.
pub fn import(host: &Host, bundle: &Value, check_only: bool, replace: bool) -> Result<Value> {
    let format = bundle.get("format").and_then(Value::as_str).unwrap_or("");
    if format != BUNDLE_FORMAT {
        return Err(Error::Refused(format!(
            "this is not a recipe bundle (format is \"{format}\", expected \"{BUNDLE_FORMAT}\")"
        )));
    }
    let version = bundle.get("version").and_then(Value::as_i64).unwrap_or(0);
    if version != BUNDLE_VERSION {
        return Err(Error::Refused(format!(
            "bundle version {version} is not supported; this lmcp reads version {BUNDLE_VERSION}"
        )));
    }
    let recipe = bundle
        .get("recipe")
        .cloned()
        .ok_or_else(|| Error::Refused("the bundle holds no recipe".into()))?;
    let claimed = bundle.get("sha256").and_then(Value::as_str).unwrap_or("");
    if content_hash(&recipe) != claimed {
        return Err(Error::Refused(
            "the bundle's content does not match its sha256: it was changed after export (or damaged); \
             ask for a fresh export"
                .into(),
        ));
    }
    let manifest = parse_manifest(recipe)?;
    let checked = check(host.registry(), manifest)?;
    let config = host.config();
    let mut tools: Vec<Value> = Vec::new();
    let names: Vec<String> = match &checked.program.capabilities {
        Capabilities::Tools(names) => names.clone(),
        _ => Vec::new(),
    };
    for tool in &names {
        let t = host.registry().get(tool);
        // a tool not installed here has no effect to report: the field is left out
        tools.push(match &t {
            Some(t) => json!({
                "tool": tool,
                "effect": t.spec().effect,
                "availability": t.spec().availability(&config, host.transport()),
            }),
            None => json!({
                "tool": tool,
                "availability": {"status": "unavailable", "detail": "not installed"},
            }),
        });
    }
    let mut report = json!({
        "name": checked.manifest.name,
        "step_count": checked.step_count(),
        "body": if checked.manifest.lua.is_some() { "lua" } else { "steps" },
        "tools": tools,
        "saved": false,
    });
    if checked.program.capabilities == Capabilities::ReadOnly {
        report["note"] = json!("a Lua recipe without ---@uses: it may call read tools only");
    }
    if !check_only {
        save(host, checked.manifest, replace)?;
        report["saved"] = json!(true);
    }
    Ok(report)
}
