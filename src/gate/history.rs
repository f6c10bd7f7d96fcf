//! The call history ring: what was called, from where, how it ended and how long it took.
//!
//! Entries never hold a value: each argument is recorded as its JSON type and a size bucket, and
//! only arguments the tool's schema declares are named (anything else is `(other)`, since the key
//! of a free-form object can itself be user data). Friction reports are built from this ring.
//!
//! Storage is a JSON-lines file. Each entry is appended under the history lock with one write, and
//! when the file grows past twice the ring size it is compacted to the newest entries with an
//! atomic rewrite. A line that does not parse (a torn write after a crash) is skipped and counted,
//! never fatal.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::store::{self, LockFile};

/// One argument's shape: its name (if declared), JSON type and size bucket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArgShape {
    /// The argument's name when the schema declares it, else `(other)`.
    pub name: String,
    /// `string`, `number`, `integer`, `boolean`, `array`, `object` or `null`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Approximate size: characters for strings, items for arrays and objects; `-` otherwise.
    pub size: String,
}

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// Unix time in milliseconds when the call ended.
    pub at_ms: i64,
    /// The tool's name (`(unknown)` when no such tool exists, since a typo may be anything).
    pub tool: String,
    /// `cli`, `repl`, `mcp` or `program`.
    pub origin: String,
    /// Nesting depth.
    pub depth: u32,
    /// The outcome class (`done`, `preview`, `denied`, `needs_confirmation`, `failed:<class>`).
    pub outcome: String,
    /// How long the call took, in milliseconds.
    pub duration_ms: f64,
    /// The shapes of the arguments.
    pub args: Vec<ArgShape>,
}

/// The persisted ring of recent calls.
#[derive(Debug)]
pub struct History {
    path: PathBuf,
    capacity: usize,
    /// The lock file and the append handle, opened on first use and kept: reopening both on
    /// every call cost more than the rest of the gate.
    open: Mutex<Option<OpenFiles>>,
}

#[derive(Debug)]
struct OpenFiles {
    lock: LockFile,
    file: File,
}

/// What reading the history found.
#[derive(Debug, Clone, Default)]
pub struct Recent {
    /// The newest entries, oldest first.
    pub entries: Vec<HistoryEntry>,
    /// Lines that did not parse and were skipped.
    pub skipped: usize,
}

impl History {
    /// A ring of `capacity` entries stored at `path`.
    pub fn new(path: PathBuf, capacity: usize) -> History {
        History {
            path,
            capacity: capacity.max(1),
            open: Mutex::new(None),
        }
    }

    /// Appends an entry; compacts the file when it holds more than twice the ring size.
    pub fn record(&self, entry: &HistoryEntry) -> Result<()> {
        let mut line = serde_json::to_vec(entry).map_err(|e| Error::Corrupt {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        line.push(b'\n');
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if open.is_none() {
            if let Some(dir) = self.path.parent() {
                store::ensure_dir(dir)?;
            }
            *open = Some(OpenFiles {
                lock: LockFile::open(&self.path)?,
                file: self.open_append()?,
            });
        }
        let files = open.as_mut().expect("opened above");
        let _guard = files.lock.lock()?;
        // Another process may have compacted (replaced) the file since we opened it.
        let current = fs::metadata(&self.path).ok();
        let held = files
            .file
            .metadata()
            .map_err(|e| Error::io(&self.path, e))?;
        if !current.is_some_and(|c| store::same_file(&c, &held)) {
            files.file = self.open_append()?;
        }
        cut_torn_tail(&files.file).map_err(|e| Error::io(&self.path, e))?;
        files
            .file
            .write_all(&line)
            .map_err(|e| Error::io(&self.path, e))?;
        let len = files.file.metadata().map(|m| m.len()).unwrap_or(0);
        // Entries are ~150-400 bytes; compaction by size avoids counting lines on every call.
        if len > (self.capacity as u64) * 2 * 300 {
            self.compact_locked()?;
        }
        Ok(())
    }

    /// Opens the history for appending.
    fn open_append(&self) -> Result<File> {
        OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(&self.path)
            .map_err(|e| Error::io(&self.path, e))
    }

    fn compact_locked(&self) -> Result<()> {
        let recent = self.read_all()?;
        let keep = recent.entries.len().saturating_sub(self.capacity);
        let mut out = Vec::new();
        for e in &recent.entries[keep..] {
            out.extend(serde_json::to_vec(e).unwrap_or_default());
            out.push(b'\n');
        }
        store::atomic_write(&self.path, &out)
    }

    fn read_all(&self) -> Result<Recent> {
        let text = match fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Recent::default()),
            Err(e) => return Err(Error::io(&self.path, e)),
        };
        let mut recent = Recent::default();
        for line in text.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            match serde_json::from_slice(line) {
                Ok(e) => recent.entries.push(e),
                Err(_) => recent.skipped += 1,
            }
        }
        Ok(recent)
    }

    /// The newest `n` entries, oldest first.
    pub fn recent(&self, n: usize) -> Result<Recent> {
        let mut all = self.read_all()?;
        let start = all.entries.len().saturating_sub(n.min(self.capacity));
        all.entries.drain(..start);
        Ok(all)
    }
}

/// The shapes of a call's arguments. Only names declared in `schema.properties` are kept.
pub fn arg_shapes(args: &Value, schema: Option<&Value>) -> Vec<ArgShape> {
    let declared = schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object);
    let Value::Object(map) = args else {
        return vec![shape("(args)".into(), args)];
    };
    let mut shapes: Vec<ArgShape> = map
        .iter()
        .take(MAX_SHAPES)
        .map(|(k, v)| {
            let name = match declared {
                Some(d) if d.contains_key(k) => k.clone(),
                _ => "(other)".to_string(),
            };
            shape(name, v)
        })
        .collect();
    // A call with thousands of keys is recorded as the first few and a count, so one hostile
    // call cannot bloat every later read of the history.
    if map.len() > MAX_SHAPES {
        shapes.push(ArgShape {
            name: "(more)".into(),
            kind: "object".into(),
            size: size_bucket(map.len() - MAX_SHAPES),
        });
    }
    shapes
}

/// Most argument shapes recorded for one call (one more entry counts the rest).
pub const MAX_SHAPES: usize = 32;

fn shape(name: String, v: &Value) -> ArgShape {
    let (kind, size) = match v {
        Value::Null => ("null", None),
        Value::Bool(_) => ("boolean", None),
        Value::Number(n) if n.is_i64() || n.is_u64() => ("integer", None),
        Value::Number(_) => ("number", None),
        Value::String(s) => ("string", Some(s.chars().count())),
        Value::Array(a) => ("array", Some(a.len())),
        Value::Object(o) => ("object", Some(o.len())),
    };
    ArgShape {
        name,
        kind: kind.to_string(),
        size: size.map_or("-".to_string(), size_bucket),
    }
}

/// Cuts a torn last line (a write cut short by a kill) back to the last complete one, so the
/// next entry starts on a line of its own. Called with the history lock held.
fn cut_torn_tail(file: &File) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(());
    }
    let mut reader = file;
    let tail = len.min(64 << 10);
    reader.seek(SeekFrom::Start(len - tail))?;
    let mut buf = Vec::with_capacity(tail as usize);
    reader.take(tail).read_to_end(&mut buf)?;
    if buf.last() == Some(&b'\n') {
        return Ok(());
    }
    let keep = match buf.iter().rposition(|b| *b == b'\n') {
        Some(i) => len - tail + i as u64 + 1,
        None if tail == len => 0,
        // a line longer than the tail looked at: start the next entry on a line of its own
        None => return (&*file).write_all(b"\n"),
    };
    file.set_len(keep)
}

/// A coarse size bucket, so sizes hint at scale without identifying content.
pub fn size_bucket(n: usize) -> String {
    match n {
        0 => "0",
        1..=15 => "1-15",
        16..=255 => "16-255",
        256..=4095 => "256-4k",
        4096..=65535 => "4k-64k",
        _ => "64k+",
    }
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(tool: &str) -> HistoryEntry {
        HistoryEntry {
            at_ms: 1,
            tool: tool.into(),
            origin: "cli".into(),
            depth: 0,
            outcome: "done".into(),
            duration_ms: 0.5,
            args: vec![],
        }
    }

    #[test]
    fn a_torn_last_line_is_cut_before_the_next_entry() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.jsonl");
        let h = History::new(path.clone(), 10);
        let entry = |tool: &str| HistoryEntry {
            at_ms: 1,
            tool: tool.into(),
            origin: "cli".into(),
            depth: 0,
            outcome: "done".into(),
            duration_ms: 1.0,
            args: Vec::new(),
        };
        h.record(&entry("first")).unwrap();
        // a write cut short by a kill
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(br#"{"at_ms": 2, "tool": "tor"#).unwrap();
        drop(f);
        h.record(&entry("second")).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        let tools: Vec<String> = h
            .recent(10)
            .unwrap()
            .entries
            .into_iter()
            .map(|e| e.tool)
            .collect();
        assert_eq!(tools, vec!["first", "second"]);
    }

    #[test]
    fn shapes_hold_no_values_and_hide_undeclared_keys() {
        let schema = json!({"type": "object", "properties": {"path": {}, "n": {}}});
        let args = json!({"path": "secret-name.txt", "n": 42, "my-private-key": [1, 2]});
        let shapes = arg_shapes(&args, Some(&schema));
        let text = serde_json::to_string(&shapes).unwrap();
        assert!(!text.contains("secret") && !text.contains("42") && !text.contains("private"));
        assert_eq!(
            shapes[0],
            ArgShape {
                name: "path".into(),
                kind: "string".into(),
                size: "1-15".into()
            }
        );
        assert_eq!(shapes[1].kind, "integer");
        assert_eq!(shapes[2].name, "(other)");
    }

    #[test]
    fn ring_keeps_the_newest_and_skips_torn_lines() {
        let dir = tempfile::tempdir().unwrap();
        let h = History::new(dir.path().join("h.jsonl"), 5);
        for i in 0..40 {
            h.record(&entry(&format!("t{i}"))).unwrap();
        }
        let r = h.recent(100).unwrap();
        assert!(r.entries.len() <= 5, "{}", r.entries.len());
        assert_eq!(r.entries.last().unwrap().tool, "t39");
        let mut f = OpenOptions::new()
            .append(true)
            .open(dir.path().join("h.jsonl"))
            .unwrap();
        f.write_all(b"{\"torn\n").unwrap();
        h.record(&entry("after")).unwrap();
        let r = h.recent(3).unwrap();
        assert_eq!(r.skipped, 1);
        assert_eq!(r.entries.last().unwrap().tool, "after");
        assert_eq!(r.entries.len(), 3);
    }

    #[test]
    fn buckets() {
        assert_eq!(size_bucket(0), "0");
        assert_eq!(size_bucket(300), "256-4k");
        assert_eq!(size_bucket(1 << 20), "64k+");
    }
}
