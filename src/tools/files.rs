//! `read_file`, `write_file` and `list_dir`, confined to the allowed roots.
//!
//! Roots are the lmcp workspace (`DATA/workspace`, the default, where relative paths land) and
//! the directories added with `lmcp roots add`. A path is refused when it contains `..`, when it
//! is absolute and outside every root, or when symlinks lead it outside: the longest existing
//! prefix is canonicalized (resolving every symlink) and must still lie inside a canonical root.
//! Files are text (UTF-8) and size-capped; writes are atomic.

use std::fs;
use std::path::{Component, Path, PathBuf};

use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::registry::{Annotations, Effect, Handler, ToolSpec, handler};
use crate::store;

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
    .summary(|args| {
        let bytes = args["content"].as_str().map_or(0, str::len);
        let verb = if args["overwrite"].as_bool() == Some(true) { "write (replacing)" } else { "write" };
        format!("{verb} {bytes} bytes to {}", args["path"].as_str().unwrap_or("?"))
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
        "List a folder inside the allowed roots: each entry's name, kind (file, dir, symlink) \
         and size, sorted by name, at most 1000 entries. Without a path, lists the workspace.",
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Folder path; default: the workspace"}
            },
            "additionalProperties": false
        }),
    )
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
        let roots = inv.host.roots()?;
        let path = resolve(&roots, inv.args["path"].as_str().unwrap_or_default())?;
        let meta = fs::metadata(&path).map_err(|e| Error::io(&path, e))?;
        if meta.is_dir() {
            return Err(Error::Refused(format!(
                "{} is a folder; use list_dir to see what it holds",
                path.display()
            )));
        }
        if meta.len() > MAX_FILE_BYTES {
            return Err(Error::Limit {
                what: format!("{} is {} bytes", path.display(), meta.len()),
                limit: format!("{MAX_FILE_BYTES} bytes"),
            });
        }
        let bytes = fs::read(&path).map_err(|e| Error::io(&path, e))?;
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
        let roots = inv.host.roots()?;
        let path = resolve(&roots, inv.args["path"].as_str().unwrap_or_default())?;
        let content = inv.args["content"].as_str().unwrap_or_default();
        if content.len() as u64 > MAX_FILE_BYTES {
            return Err(Error::Limit {
                what: format!("the content is {} bytes", content.len()),
                limit: format!("{MAX_FILE_BYTES} bytes"),
            });
        }
        let exists = match fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => {
                return Err(Error::Refused(format!("{} is a folder", path.display())));
            }
            Ok(_) => true,
            Err(_) => false,
        };
        if exists && inv.args["overwrite"].as_bool() != Some(true) {
            return Err(Error::Refused(format!(
                "{} exists; pass \"overwrite\": true to replace it",
                path.display()
            )));
        }
        store::atomic_write(&path, content.as_bytes())?;
        Ok(json!({"path": path.display().to_string(), "bytes": content.len(), "replaced": exists}))
    })
}

/// `list_dir`'s handler.
pub fn list_handler() -> Handler {
    handler(|inv| async move {
        let roots = inv.host.roots()?;
        let given = inv.args.get("path").and_then(Value::as_str).unwrap_or("");
        let path = resolve(&roots, if given.is_empty() { "." } else { given })?;
        let read = fs::read_dir(&path).map_err(|e| Error::io(&path, e))?;
        let mut entries = Vec::new();
        for entry in read {
            let entry = entry.map_err(|e| Error::io(&path, e))?;
            let meta = match entry.path().symlink_metadata() {
                Ok(m) => m,
                Err(_) => continue, // removed while we listed
            };
            let kind = if meta.file_type().is_symlink() {
                "symlink"
            } else if meta.is_dir() {
                "dir"
            } else {
                "file"
            };
            let size = if meta.is_file() { meta.len() } else { 0 };
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
    })
}

/// Resolves a caller's path inside the roots (the first root is where relative paths land).
/// The result is absolute with every existing symlink resolved; refused when outside.
pub fn resolve(roots: &[PathBuf], input: &str) -> Result<PathBuf> {
    let given = Path::new(input);
    if given.components().any(|c| c == Component::ParentDir) {
        return Err(Error::Refused(format!(
            "`{input}` contains `..`; give a path inside an allowed root (see `lmcp roots`)"
        )));
    }
    let default_root = roots
        .first()
        .ok_or_else(|| Error::Refused("no file roots are set".into()))?;
    let candidate = if given.is_absolute() {
        given.to_path_buf()
    } else {
        default_root.join(given)
    };
    let real = canonical_prefix(&candidate)?;
    let inside = roots
        .iter()
        .filter_map(|r| fs::canonicalize(r).ok())
        .any(|root| real.starts_with(&root));
    if !inside {
        return Err(Error::Refused(format!(
            "`{input}` is outside the allowed roots (through a symlink or an absolute path); \
             add its folder with `lmcp roots add DIR` if it should be reachable"
        )));
    }
    Ok(real)
}

/// Canonicalizes the longest existing prefix of `path` and appends the rest unchanged (the rest
/// does not exist, so it holds no symlinks).
fn canonical_prefix(path: &Path) -> Result<PathBuf> {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        match fs::canonicalize(&existing) {
            Ok(mut real) => {
                for part in rest.iter().rev() {
                    real.push(part);
                }
                return Ok(real);
            }
            Err(e) => {
                // A dangling symlink exists but does not canonicalize: refuse rather than follow.
                if fs::symlink_metadata(&existing).is_ok() {
                    return Err(Error::Refused(format!(
                        "{} is a symlink to nowhere; remove it or point it inside a root",
                        existing.display()
                    )));
                }
                match (existing.file_name(), existing.parent()) {
                    (Some(name), Some(parent)) => {
                        rest.push(name.to_os_string());
                        existing = parent.to_path_buf();
                    }
                    _ => return Err(Error::io(path, e)),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confinement() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        let outside = dir.path().join("outside");
        fs::create_dir_all(&root).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("secret"), "s").unwrap();
        let roots = vec![root.clone()];
        let real_root = fs::canonicalize(&root).unwrap();

        assert_eq!(
            resolve(&roots, "a/b.txt").unwrap(),
            real_root.join("a/b.txt")
        );
        assert_eq!(resolve(&roots, ".").unwrap(), real_root);
        assert!(
            resolve(&roots, "../outside/secret")
                .unwrap_err()
                .to_string()
                .contains("..")
        );
        let abs = outside.join("secret");
        assert!(
            resolve(&roots, abs.to_str().unwrap())
                .unwrap_err()
                .to_string()
                .contains("outside")
        );
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
            assert!(resolve(&roots, "link/secret").is_err());
            assert!(resolve(&roots, "link/new.txt").is_err());
            std::os::unix::fs::symlink(dir.path().join("nowhere"), root.join("dangling")).unwrap();
            assert!(resolve(&roots, "dangling").is_err());
        }
        let roots = vec![root.clone(), outside.clone()];
        assert!(resolve(&roots, abs.to_str().unwrap()).is_ok());
    }
}
