//! `read_file`, `write_file` and `list_dir`, confined to the allowed roots.
//!
//! Roots are the lmcp workspace (`DATA/workspace`, the default, where relative paths land) and
//! the directories added with `lmcp roots add`. Every path is opened beneath its root
//! ([`super::beneath`]): `..`, absolute paths outside every root, symlinks leading outside (even
//! one swapped in while the call runs) and lmcp's own folders are refused. Files are text
//! (UTF-8) and size-capped; writes are atomic.

use serde_json::{Value, json};

use super::beneath::Roots;
use crate::error::{Error, Result};
use crate::registry::{Annotations, Effect, Handler, ToolSpec, handler};

/// Largest file `read_file` returns and `write_file` writes.
pub const MAX_FILE_BYTES: u64 = 1 << 20;
/// Most entries `list_dir` returns.
pub const MAX_ENTRIES: usize = 1000;

/// The spec of `read_file`.
pub fn read_spec() -> ToolSpec {
    ToolSpec::new(
        "read_file",
        "Read a text file",
        "Read a UTF-8 text file (at most 1 MiB) inside the allowed roots. Relative paths are \
         inside the lmcp workspace; `lmcp roots` lists the roots.",
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1, "description": "File path, relative to the workspace or absolute inside a root"}
            },
            "required": ["path"],
            "additionalProperties": false
        }),
    )
    .prechecks(super::beneath::path_precheck)
    .output(json!({
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}, "bytes": {"type": "integer"}},
        "required": ["path", "content", "bytes"]
    }))
}

/// The spec of `write_file`.
pub fn write_spec() -> ToolSpec {
    ToolSpec::new(
        "write_file",
        "Write a text file",
        "Write UTF-8 text (at most 1 MiB) to a file inside the allowed roots, atomically, \
         creating parent folders. Replaces an existing file only with overwrite: true.",
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1, "description": "File path, relative to the workspace or absolute inside a root"},
                "content": {"type": "string", "description": "The text to write"},
                "overwrite": {"type": "boolean", "default": false, "description": "Replace the file if it exists"}
            },
            "required": ["path", "content"],
            "additionalProperties": false
        }),
    )
    .effect(
        Effect::Write,
        Annotations::changing(true, true, false),
    )
    .prechecks(super::beneath::path_precheck)
    .summary(|args| {
        let bytes = args["content"].as_str().map_or(0, str::len);
        let path = args["path"].as_str().unwrap_or("?");
        if args["overwrite"].as_bool() == Some(true) {
            format!("write {bytes} bytes to {path}, replacing it if it exists")
        } else {
            format!("write {bytes} bytes to {path}")
        }
    })
    .output(json!({
        "type": "object",
        "properties": {"path": {"type": "string"}, "bytes": {"type": "integer"}, "replaced": {"type": "boolean"}},
        "required": ["path", "bytes", "replaced"]
    }))
}

/// The spec of `list_dir`.
pub fn list_spec() -> ToolSpec {
    ToolSpec::new(
        "list_dir",
        "List a folder",
        "List a folder inside the allowed roots: each entry's name, kind (file, dir, symlink, other) \
         and size, sorted by name, at most 1000 entries. Without a path, lists the workspace.",
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Folder path; default: the workspace"}
            },
            "additionalProperties": false
        }),
    )
    .prechecks(super::beneath::path_precheck)
    .output(json!({
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "entries": {"type": "array", "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "kind": {"type": "string"}, "size": {"type": "integer"}},
                "required": ["name", "kind", "size"]
            }},
            "truncated": {"type": "boolean"}
        },
        "required": ["path", "entries", "truncated"]
    }))
}

/// `read_file`'s handler.
pub fn read_handler() -> Handler {
    handler(|inv| async move {
        let roots = Roots::of(&inv.host())?;
        let input = inv.args["path"].as_str().unwrap_or_default().to_string();
        let (path, bytes) = tokio::task::spawn_blocking(move || roots.read(&input, MAX_FILE_BYTES))
            .await
            .map_err(|e| Error::tool("read_file", e.to_string()))??;
        let n = bytes.len();
        let content = String::from_utf8(bytes).map_err(|_| {
            Error::Refused(format!(
                "{} is not UTF-8 text; read_file reads text files only",
                path.display()
            ))
        })?;
        Ok(json!({"path": path.display().to_string(), "content": content, "bytes": n}))
    })
}

/// `write_file`'s handler.
pub fn write_handler() -> Handler {
    handler(|inv| async move {
        let roots = Roots::of(&inv.host())?;
        let input = inv.args["path"].as_str().unwrap_or_default().to_string();
        let content = inv.args["content"].as_str().unwrap_or_default().to_string();
        if content.len() as u64 > MAX_FILE_BYTES {
            return Err(Error::Limit {
                what: format!("the content is {} bytes", content.len()),
                limit: format!("{MAX_FILE_BYTES} bytes"),
            });
        }
        let overwrite = inv.args["overwrite"].as_bool() == Some(true);
        let bytes = content.len();
        let (path, replaced) =
            tokio::task::spawn_blocking(move || roots.write(&input, content.as_bytes(), overwrite))
                .await
                .map_err(|e| Error::tool("write_file", e.to_string()))??;
        Ok(json!({"path": path.display().to_string(), "bytes": bytes, "replaced": replaced}))
    })
}

/// `list_dir`'s handler.
pub fn list_handler() -> Handler {
    handler(|inv| async move {
        let roots = Roots::of(&inv.host())?;
        let given = inv.args.get("path").and_then(Value::as_str).unwrap_or("");
        let input = if given.is_empty() { "." } else { given }.to_string();
        tokio::task::spawn_blocking(move || list(&roots, &input))
            .await
            .map_err(|e| Error::tool("list_dir", e.to_string()))?
    })
}

/// Lists a folder opened beneath its root: names, kinds and sizes, sorted, capped.
fn list(roots: &Roots, input: &str) -> Result<Value> {
    let (path, dir) = roots.open_dir(input)?;
    let read = dir.entries().map_err(|e| Error::io(&path, e))?;
    let mut entries = Vec::new();
    for entry in read {
        let entry = entry.map_err(|e| Error::io(&path, e))?;
        if crate::store::is_temp_name(&entry.file_name().to_string_lossy()) {
            continue; // a write in progress (or one a kill cut short): not a file of the user's
        }
        let Ok(file_type) = entry.file_type() else {
            continue; // removed while we listed
        };
        let kind = if file_type.is_symlink() {
            "symlink"
        } else if file_type.is_dir() {
            "dir"
        } else if file_type.is_file() {
            "file"
        } else {
            "other" // a FIFO, socket or device: nothing the file tools read
        };
        let size = if file_type.is_file() {
            entry.metadata().map(|m| m.len()).unwrap_or(0)
        } else {
            0
        };
        entries.push((entry.file_name().to_string_lossy().into_owned(), kind, size));
    }
    entries.sort();
    let truncated = entries.len() > MAX_ENTRIES;
    entries.truncate(MAX_ENTRIES);
    let entries: Vec<Value> = entries
        .into_iter()
        .map(|(name, kind, size)| json!({"name": name, "kind": kind, "size": size}))
        .collect();
    Ok(json!({"path": path.display().to_string(), "entries": entries, "truncated": truncated}))
}
