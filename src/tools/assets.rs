//! Workspaces and image assets: what `build_image_pdf` works from.
//!
//! A workspace is a folder `DATA/workspaces/UUID/` with `workspace.json` (its name and the next
//! asset id) and `assets/` holding a copy of every imported image, indexed in `assets.json`.
//! Asset ids are positive integers handed out in order and never reused, even after a removal,
//! so a reference to an asset never silently points at another image. Importing reads a local
//! file, so it needs the local (stdio) transport and stays inside the allowed roots; the file
//! must decode as an image, and that decode also prepares what `build_image_pdf` needs.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::gate::CallContext;
use crate::host::Host;
use crate::registry::{Annotations, Effect, Handler, Requirements, ToolSpec, handler};
use crate::store::{self, FileLock};
use crate::tools::beneath::Roots;
use crate::tools::pdf::prepare;

/// Largest image file imported.
pub const MAX_IMAGE_BYTES: u64 = 200 << 20;

/// A workspace as stored.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Workspace {
    /// Its UUID.
    pub workspace_id: String,
    /// A name for people.
    pub name: String,
    /// When it was created (RFC 3339).
    pub created: String,
    /// The id the next imported asset gets.
    pub next_asset_id: u64,
    /// Made to be removed once a document is taken out of it (`lmcp pdf -o` makes one): its
    /// imports are not synced to disk, which is most of an import's wait, and a crash can lose
    /// nothing anyone keeps (the next `lmcp pdf` removes what a killed one left) (#39).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub scratch: bool,
}

impl Workspace {
    /// How its files are written: synced, unless it is a scratch workspace.
    pub fn durability(&self) -> store::Durability {
        if self.scratch {
            store::Durability::Unsynced
        } else {
            store::Durability::Synced
        }
    }
}

/// One imported image.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Asset {
    /// Positive, stable, never reused.
    pub asset_id: u64,
    /// `image/jpeg`, `image/png`, ...
    pub media_type: String,
    /// Pixels across.
    pub width: u32,
    /// Pixels down.
    pub height: u32,
    /// File size.
    pub bytes: u64,
    /// The file's SHA-256, hex.
    pub sha256: String,
    /// The stored copy's file name inside the workspace's `assets/`.
    pub file: String,
    /// The file name it was imported from (`photo.jpg`, without its folder), named in a
    /// build's manifest; `None` for assets imported before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_name: Option<String>,
    /// When it was imported (RFC 3339).
    pub imported: String,
}

fn root(host: &Host) -> PathBuf {
    host.paths().data_dir.join("workspaces")
}

/// A workspace's folder; refuses anything but a UUID, so no id can name another path.
pub fn workspace_dir(host: &Host, id: &str) -> Result<PathBuf> {
    let parsed = uuid::Uuid::parse_str(id)
        .map_err(|_| Error::Refused(format!("`{id}` is not a workspace id (a UUID)")))?;
    let dir = root(host).join(parsed.hyphenated().to_string());
    if !dir.join("workspace.json").exists() {
        return Err(Error::Refused(format!(
            "there is no workspace `{id}`; `workspace_list` lists them"
        )));
    }
    Ok(dir)
}

fn read_workspace(dir: &std::path::Path) -> Result<Workspace> {
    store::read_json(&dir.join("workspace.json"))?
        .ok_or_else(|| Error::Refused("the workspace is missing".into()))
}

/// The assets of a workspace.
pub fn assets(host: &Host, id: &str) -> Result<Vec<Asset>> {
    let dir = workspace_dir(host, id)?;
    Ok(store::read_json(&dir.join("assets.json"))?.unwrap_or_default())
}

/// One asset and the path of its stored copy.
pub fn asset(host: &Host, id: &str, asset_id: u64) -> Result<(Asset, PathBuf)> {
    let dir = workspace_dir(host, id)?;
    let a = assets(host, id)?
        .into_iter()
        .find(|a| a.asset_id == asset_id)
        .ok_or_else(|| Error::Refused(format!("workspace `{id}` has no asset {asset_id}")))?;
    let path = dir.join("assets").join(&a.file);
    Ok((a, path))
}

/// Finishes deletes a kill cut short: folders renamed aside (`.deleting-*`) are already gone
/// as workspaces; what is left of them is removed.
fn sweep_deleted(host: &Host) {
    let Ok(entries) = std::fs::read_dir(root(host)) else {
        return;
    };
    for e in entries.flatten() {
        if e.file_name().to_string_lossy().starts_with(DELETING) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// The start of the name a workspace being deleted is renamed to.
const DELETING: &str = ".deleting-";

/// Creates a workspace; a `scratch` one is written without syncs (see [`Workspace::scratch`]).
pub fn create(host: &Host, name: &str, scratch: bool) -> Result<Workspace> {
    sweep_deleted(host);
    let id = uuid::Uuid::new_v4().hyphenated().to_string();
    let ws = Workspace {
        workspace_id: id.clone(),
        name: name.to_string(),
        created: store::timestamp(),
        next_asset_id: 1,
        scratch,
    };
    let dir = root(host).join(&id);
    store::ensure_dir(&dir.join("assets"))?;
    store::write_json(&dir.join("workspace.json"), &ws)?;
    Ok(ws)
}

/// Deletes a workspace and everything in it. It is renamed aside first, so a delete cut short
/// leaves no half-workspace that still looks valid.
pub fn delete(host: &Host, id: &str) -> Result<()> {
    sweep_deleted(host);
    let dir = workspace_dir(host, id)?;
    let aside = root(host).join(format!("{DELETING}{}", uuid::Uuid::new_v4().simple()));
    std::fs::rename(&dir, &aside).map_err(|e| Error::io(&dir, e))?;
    std::fs::remove_dir_all(&aside).map_err(|e| Error::io(&aside, e))
}

/// Every workspace, newest last.
pub fn list(host: &Host) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(root(host)) else {
        return Ok(out);
    };
    for e in entries.flatten() {
        let dir = e.path();
        match read_workspace(&dir) {
            Ok(ws) => {
                let count = store::read_json::<Vec<Asset>>(&dir.join("assets.json"))
                    .ok()
                    .flatten()
                    .map_or(0, |a| a.len());
                out.push(json!({"workspace_id": ws.workspace_id, "name": ws.name, "created": ws.created, "asset_count": count}));
            }
            Err(err) => host.warn(format!("{}: {err}; skipped", dir.display())),
        }
    }
    out.sort_by(|a, b| {
        a["created"]
            .as_str()
            .cmp(&b["created"].as_str())
            .then(a["name"].as_str().cmp(&b["name"].as_str()))
    });
    Ok(out)
}

fn media_type(format: image::ImageFormat) -> Option<(&'static str, &'static str)> {
    use image::ImageFormat::*;
    Some(match format {
        Jpeg => ("image/jpeg", "jpg"),
        Png => ("image/png", "png"),
        Gif => ("image/gif", "gif"),
        WebP => ("image/webp", "webp"),
        Tiff => ("image/tiff", "tiff"),
        Bmp => ("image/bmp", "bmp"),
        _ => return None,
    })
}

/// `e`, or when a person at the command line named a relative path that the workspace lacks
/// but the current folder has, an error that says so: a relative path is read from the lmcp
/// workspace, for every door alike, while `lmcp pdf` and the shell take it from here, and a
/// person who just typed `photo.jpg` beside the file deserves to know which (#34). Says how
/// to reach it: its full path, after `lmcp roots add DIR` when the folder is no root yet.
fn from_here(roots: &Roots, path: &str, e: Error) -> Error {
    let missing =
        matches!(&e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound);
    let Ok(cwd) = std::env::current_dir() else {
        return e;
    };
    let here = cwd.join(path);
    if !missing || std::path::Path::new(path).is_absolute() || !here.is_file() {
        return e;
    }
    let full = here.display();
    let how = match here.to_str().map(|h| roots.place(h)) {
        Some(Ok(_)) => format!("give its full path, {full}"),
        _ => format!(
            "let the file tools reach this folder with `lmcp roots add {}`, then give its full \
             path, {full}",
            cwd.display()
        ),
    };
    Error::Refused(format!(
        "{e}: a relative path is read from the lmcp workspace, and `{path}` is not there but in \
         the current folder; to import it, {how} (`lmcp pdf` takes paths from the current \
         folder)"
    ))
}

/// Imports an image file (inside the allowed roots) into a workspace.
pub fn import(host: &Host, id: &str, path: &str, ctx: &CallContext) -> Result<Asset> {
    // taken first, so a failure anywhere below gives the place up (see `ImportOrder`)
    let turn = host.import_order().turn(id, path);
    let dir = workspace_dir(host, id)?;
    let roots = Roots::of(host)?;
    let (source, bytes) = match roots.read(path, MAX_IMAGE_BYTES) {
        Err(e) if ctx.door() == crate::gate::Origin::Cli => return Err(from_here(&roots, path, e)),
        read => read?,
    };
    let format = image::guess_format(&bytes).map_err(|_| {
        Error::Refused(format!(
            "{} is not an image lmcp can read",
            source.display()
        ))
    })?;
    let (media, ext) = media_type(format).ok_or_else(|| {
        Error::Refused(format!(
            "{} is a {format:?} image; lmcp takes JPEG, PNG, GIF, WebP, TIFF and BMP",
            source.display()
        ))
    })?;
    // the workspace says whether its files wait for the disk (a scratch one's do not)
    let durability = read_workspace(&dir)?.durability();
    let sha256 = format!("{:x}", Sha256::digest(&bytes));
    // It must decode: a truncated or damaged file is refused now, not when a PDF is built. The
    // same decode makes what a build needs (thumbnail, compressed planes), so builds copy bytes.
    let budget = prepare::ImageBudget::from_limits(&host.config().limits);
    // the longest work: ended early when the call is cancelled or runs out of time
    let stop = || ctx.cancel_token().is_cancelled() || ctx.timed_out();
    let analysis = prepare::analyse(&bytes, &sha256, budget, &stop).map_err(|e| {
        Error::Refused(format!(
            "{} does not decode as an image: {e}",
            source.display()
        ))
    })?;
    // The files are written and synced before the lock is taken, under temporary names; under
    // it they are only renamed to the id handed out, so imports side by side barely wait.
    let assets_dir = dir.join("assets");
    let mut files = vec![(format!(".{ext}"), vec![bytes.as_slice()])];
    files.extend(
        analysis
            .files()
            .into_iter()
            .map(|(suffix, parts)| (suffix.to_string(), parts)),
    );
    let mut staged = Vec::new();
    // A cancelled import writes nothing; nor does one whose workspace went meanwhile (its
    // folders are not made again: a half-deleted workspace was left behind that way).
    if stop() {
        return Err(Error::Cancelled);
    }
    match std::fs::create_dir(&assets_dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(_) => {
            return Err(Error::Refused(format!(
                "workspace `{id}` was deleted while {} was being imported",
                source.display()
            )));
        }
    }
    let committed = (|| -> Result<Asset> {
        for (suffix, parts) in &files {
            staged.push((
                store::write_temp_as(&assets_dir, parts, durability)?,
                suffix.clone(),
            ));
        }
        turn.wait();
        let lock_path = dir.join("assets.json");
        let _lock = FileLock::acquire(&lock_path)?;
        let mut ws = read_workspace(&dir)?;
        let mut all: Vec<Asset> = store::read_json(&lock_path)?.unwrap_or_default();
        let asset_id = ws.next_asset_id.max(1);
        for (tmp, suffix) in &staged {
            let to = assets_dir.join(format!("{asset_id}{suffix}"));
            std::fs::rename(tmp, &to).map_err(|e| Error::io(&to, e))?;
        }
        store::sync_dir_as(&assets_dir, durability);
        let asset = Asset {
            asset_id,
            media_type: media.to_string(),
            width: analysis.width,
            height: analysis.height,
            bytes: bytes.len() as u64,
            sha256,
            file: format!("{asset_id}.{ext}"),
            source_name: source.file_name().map(|n| n.to_string_lossy().into_owned()),
            imported: store::timestamp(),
        };
        all.push(asset.clone());
        store::write_json_as(&lock_path, &all, durability)?;
        ws.next_asset_id = asset_id + 1;
        store::write_json_as(&dir.join("workspace.json"), &ws, durability)?;
        Ok(asset)
    })();
    if committed.is_err() {
        for (tmp, _) in &staged {
            let _ = std::fs::remove_file(tmp);
        }
    }
    let asset = committed?;
    Ok(asset)
}

fn asset_json(a: &Asset) -> Value {
    json!({
        "asset_id": a.asset_id, "media_type": a.media_type, "width": a.width, "height": a.height,
        "bytes": a.bytes, "sha256": a.sha256, "imported": a.imported,
    })
}

/// The shape of one imported image in results (`asset_import`, `asset_get`, `asset_list`).
fn asset_schema() -> Value {
    json!({"type": "object", "properties": {"asset_id": {"type": "integer"}, "media_type": {"type": "string"}, "width": {"type": "integer"}, "height": {"type": "integer"}, "bytes": {"type": "integer"}, "sha256": {"type": "string"}, "imported": {"type": "string", "description": "When it was imported (RFC 3339)"}}, "required": ["asset_id", "media_type", "width", "height", "bytes", "sha256", "imported"]})
}

fn uuid_schema() -> Value {
    json!({"type": "string", "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$", "description": "The workspace's id (a UUID)"})
}

/// The workspace and asset tools: spec and handler of each.
pub fn tools() -> Vec<(ToolSpec, Handler)> {
    let write = Annotations::changing(false, false, false);
    vec![
        (
            ToolSpec::new(
                "workspace_create",
                "Create a workspace",
                "Create a workspace to import images into (for build_image_pdf). Returns {workspace_id}. A scratch workspace (scratch: true) is for one build that is copied out and the workspace deleted: its imports do not wait for the disk, so a crash may lose them.",
                json!({"type": "object", "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 200}, "scratch": {"type": "boolean", "description": "Imports are not synced to disk (faster; lost in a crash): for a workspace deleted once its PDF is copied out", "default": false}}, "required": ["name"], "additionalProperties": false}),
            )
            .effect(Effect::Write, write)
            .output(json!({"type": "object", "properties": {"workspace_id": {"type": "string"}, "name": {"type": "string"}}, "required": ["workspace_id"]})),
            handler(|inv| async move {
                let scratch = inv.args["scratch"].as_bool().unwrap_or(false);
                let ws = create(&inv.host(), inv.args["name"].as_str().unwrap_or(""), scratch)?;
                Ok(json!({"workspace_id": ws.workspace_id, "name": ws.name}))
            }),
        ),
        (
            ToolSpec::new(
                "workspace_delete",
                "Delete a workspace",
                "Delete a workspace with its imported assets and built documents. It cannot be undone.",
                json!({"type": "object", "properties": {"workspace_id": {"type": "string", "format": "uuid"}}, "required": ["workspace_id"], "additionalProperties": false}),
            )
            .effect(Effect::Write, Annotations::changing(true, true, false))
            .summary(|a| format!("delete the workspace {}", a["workspace_id"].as_str().unwrap_or("?")))
            .output(json!({"type": "object", "properties": {"deleted": {"type": "string", "description": "The deleted workspace's id"}}, "required": ["deleted"]})),
            handler(|inv| async move {
                let id = inv.args["workspace_id"].as_str().unwrap_or("").to_string();
                delete(&inv.host(), &id)?;
                Ok(json!({"deleted": id}))
            }),
        ),
        (
            ToolSpec::new("workspace_list", "List workspaces", "List the workspaces: id, name, when created, how many assets.", json!({"type": "object", "properties": {}, "additionalProperties": false}))
                .output(json!({"type": "object", "properties": {"workspaces": {"type": "array", "items": {"type": "object", "properties": {"workspace_id": {"type": "string"}, "name": {"type": "string"}, "created": {"type": "string", "description": "When it was created (RFC 3339)"}, "asset_count": {"type": "integer"}}, "required": ["workspace_id", "name", "created", "asset_count"]}}}, "required": ["workspaces"]})),
            handler(|inv| async move { Ok(json!({"workspaces": list(&inv.host())?})) }),
        ),
        (
            ToolSpec::new(
                "asset_import",
                "Import an image",
                "Copy a local image file (JPEG, PNG, GIF, WebP, TIFF or BMP, inside the allowed roots) into a workspace. Returns {asset_id, media_type, width, height, bytes, sha256}. Local files only: needs the stdio transport.",
                json!({"type": "object", "properties": {"workspace_id": uuid_schema(), "path": {"type": "string", "minLength": 1}}, "required": ["workspace_id", "path"], "additionalProperties": false}),
            )
            .effect(Effect::Write, write)
            .requires(Requirements { terminal: false, local_files: true })
            .prechecks(crate::tools::beneath::path_precheck)
            .output(asset_schema()),
            handler(|inv| async move {
                let (host, args, ctx) = (inv.host(), inv.args, inv.ctx);
                let a = tokio::task::spawn_blocking(move || import(&host, args["workspace_id"].as_str().unwrap_or(""), args["path"].as_str().unwrap_or(""), &ctx))
                    .await
                    .map_err(|e| Error::tool("asset_import", e.to_string()))??;
                Ok(asset_json(&a))
            }),
        ),
        (
            ToolSpec::new(
                "asset_list",
                "List a workspace's images",
                "List the images imported into a workspace, by asset id.",
                json!({"type": "object", "properties": {"workspace_id": uuid_schema()}, "required": ["workspace_id"], "additionalProperties": false}),
            )
            .output(json!({"type": "object", "properties": {"assets": {"type": "array", "items": asset_schema()}}, "required": ["assets"]})),
            handler(|inv| async move {
                let all = assets(&inv.host(), inv.args["workspace_id"].as_str().unwrap_or(""))?;
                Ok(json!({"assets": all.iter().map(asset_json).collect::<Vec<_>>()}))
            }),
        ),
        (
            ToolSpec::new(
                "asset_get",
                "Show an image asset",
                "One imported image: media type, pixel size, bytes and sha256.",
                json!({"type": "object", "properties": {"workspace_id": uuid_schema(), "asset_id": {"type": "integer", "minimum": 1}}, "required": ["workspace_id", "asset_id"], "additionalProperties": false}),
            )
            .output(asset_schema()),
            handler(|inv| async move {
                let (a, _) = asset(&inv.host(), inv.args["workspace_id"].as_str().unwrap_or(""), inv.args["asset_id"].as_u64().unwrap_or(0))?;
                Ok(asset_json(&a))
            }),
        ),
    ]
}
