//! The call history ring: what was called, from where, how it ended and how long it took.
//!
//! Entries never hold a value: each argument is recorded as its JSON type and a size bucket, and
//! only arguments the tool's schema declares are named (anything else is `(other)`, since the key
//! of a free-form object can itself be user data). Friction reports are built from this ring.
//!
//! Storage is two JSON-lines files. A writer thread appends the entries queued since its last
//! write to `history.jsonl` under the history lock with one write; when that file holds the ring's
//! size it is renamed to `history.1.jsonl` (replacing the one before) and a new one begun. Readers
//! take the newest entries of the two. So keeping the ring bounded costs one rename, never a
//! rewrite and its fsyncs, which stalled calls beside it on the same disk. A call only queues
//! its line. A line that does not parse (a torn write after a crash) is skipped and counted,
//! never fatal.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

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
///
/// Recording only queues the entry's line: a writer thread appends what has queued in one write
/// and compacts the file when it has grown, so neither a lock on the file nor a rewrite ever
/// sits on a call's path. Reading ([`History::recent`]) and [`History::flush`] (the front doors
/// call it before they exit) first wait for the queue to be written, so this process's readers
/// see every entry; a crash can lose what was queued and not yet written (a few entries at most).
#[derive(Debug)]
pub struct History {
    path: PathBuf,
    capacity: usize,
    shared: Arc<Shared>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// What the recording threads and the writer share.
#[derive(Debug)]
struct Shared {
    queue: Mutex<Queue>,
    /// Wakes the writer: something is queued, or the history is closing.
    work: Condvar,
    /// Wakes waiters in [`History::flush`]: a batch was written.
    written: Condvar,
}

#[derive(Debug, Default)]
struct Queue {
    /// Whole lines waiting to be appended.
    lines: Vec<u8>,
    /// Entries queued so far, and of those written (or failed) so far.
    queued: u64,
    done: u64,
    /// The last write's failure, reported to the next caller of `record` or `flush`.
    error: Option<String>,
    closing: bool,
    /// Someone waits in `flush`: the writer does not linger for more entries.
    urgent: bool,
}

/// How long the writer gathers entries after the first of a batch before it writes them: calls
/// in a loop then cost one append per few milliseconds, not one each (and a crash can lose at
/// most what came in that time).
const LINGER: std::time::Duration = std::time::Duration::from_millis(2);

/// Above this many queued bytes a recording thread waits for the writer (a disk that stalls
/// must not grow memory without bound).
const MAX_QUEUED_BYTES: usize = 4 << 20;

#[derive(Debug)]
struct OpenFiles {
    lock: LockFile,
    file: File,
    /// The current file's length and line count when this writer last wrote it: while the
    /// length is still that, no one else has written and the count needs no read.
    known: Option<(u64, usize)>,
}

/// What reading the history found.
#[derive(Debug, Clone, Default)]
pub struct Recent {
    /// The newest entries, oldest first.
    pub entries: Vec<HistoryEntry>,
    /// Lines that did not parse and were skipped.
    pub skipped: usize,
    /// The files those lines were in.
    pub damaged: Vec<PathBuf>,
    /// History files that are not regular files (a folder or a FIFO in their place): skipped.
    pub not_files: Vec<PathBuf>,
}

impl History {
    /// A ring of `capacity` entries stored at `path`.
    pub fn new(path: PathBuf, capacity: usize) -> History {
        History {
            path,
            capacity: capacity.max(1),
            shared: Arc::new(Shared {
                queue: Mutex::new(Queue::default()),
                work: Condvar::new(),
                written: Condvar::new(),
            }),
            writer: Mutex::new(None),
        }
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.shared.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues an entry for the writer. An error is an earlier write's failure.
    pub fn record(&self, entry: &HistoryEntry) -> Result<()> {
        let mut line = serde_json::to_vec(entry).map_err(|e| Error::Corrupt {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        line.push(b'\n');
        self.start_writer()?;
        let mut q = self.queue();
        while q.lines.len() > MAX_QUEUED_BYTES && !q.closing {
            q = self
                .shared
                .written
                .wait(q)
                .unwrap_or_else(|p| p.into_inner());
        }
        // only the first entry of a batch wakes the writer; it gathers the rest itself
        let first = q.lines.is_empty();
        q.lines.extend_from_slice(&line);
        q.queued += 1;
        let failed = q.error.take();
        drop(q);
        if first {
            self.shared.work.notify_one();
        }
        match failed {
            Some(message) => Err(Error::Tool {
                tool: "history".into(),
                message,
            }),
            None => Ok(()),
        }
    }

    /// Waits until every entry queued so far is written (at most 10 s: a disk that hangs does
    /// not hang the process with it).
    pub fn flush(&self) -> Result<()> {
        let mut q = self.queue();
        let target = q.queued;
        if q.done < target {
            q.urgent = true;
            self.shared.work.notify_one();
        }
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while q.done < target {
            let left = until.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            q = self
                .shared
                .written
                .wait_timeout(q, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        if let Some(message) = q.error.take() {
            return Err(Error::Tool {
                tool: "history".into(),
                message,
            });
        }
        if q.done < target {
            return Err(Error::Tool {
                tool: "history".into(),
                message: format!(
                    "{} entries were not written within 10 s: another process holds the \
                     history's lock ({}) or the disk does not answer",
                    target - q.done,
                    store::lock_path(&self.path).display()
                ),
            });
        }
        Ok(())
    }

    /// Starts the writer thread if it is not running.
    fn start_writer(&self) -> Result<()> {
        let mut writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        if writer.is_some() {
            return Ok(());
        }
        let (shared, path, capacity) = (Arc::clone(&self.shared), self.path.clone(), self.capacity);
        let handle = std::thread::Builder::new()
            .name("lmcp-history".into())
            .spawn(move || write_loop(&shared, &path, capacity))
            .map_err(|e| Error::io(&self.path, e))?;
        *writer = Some(handle);
        Ok(())
    }

    /// The newest `n` entries, oldest first (everything this process recorded included).
    pub fn recent(&self, n: usize) -> Result<Recent> {
        // a failed write was reported to its caller already; what is on disk is what there is
        let _ = self.flush();
        let mut all = read_locked(&self.path)?;
        let start = all.entries.len().saturating_sub(n.min(self.capacity));
        all.entries.drain(..start);
        Ok(all)
    }
}

impl Drop for History {
    fn drop(&mut self) {
        self.queue().closing = true;
        self.shared.work.notify_one();
        let writer = self.writer.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(w) = writer {
            // it writes what is queued before it ends
            let _ = w.join();
        }
    }
}

/// The writer thread: appends queued lines in batches until the history closes.
fn write_loop(shared: &Shared, path: &Path, capacity: usize) {
    let mut open: Option<OpenFiles> = None;
    loop {
        let (batch, count, closing) = {
            let mut q = shared.queue.lock().unwrap_or_else(|p| p.into_inner());
            while q.lines.is_empty() && !q.closing {
                q = shared.work.wait(q).unwrap_or_else(|p| p.into_inner());
            }
            // a batch has begun: what comes within LINGER joins it (unless someone waits)
            let until = std::time::Instant::now() + LINGER;
            while !q.closing && !q.urgent && q.lines.len() < MAX_QUEUED_BYTES / 2 {
                let left = until.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    break;
                }
                q = shared
                    .work
                    .wait_timeout(q, left)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
            q.urgent = false;
            (std::mem::take(&mut q.lines), q.queued, q.closing)
        };
        let result = if batch.is_empty() {
            Ok(())
        } else {
            append(&mut open, path, capacity, &batch)
        };
        {
            let mut q = shared.queue.lock().unwrap_or_else(|p| p.into_inner());
            q.done = count;
            if let Err(e) = result {
                q.error = Some(e.to_string());
                // reopened next time: the failure may have been the handle's
                open = None;
            }
        }
        shared.written.notify_all();
        if closing && batch.is_empty() {
            return;
        }
    }
}

/// Appends whole lines under the history lock; once the current file holds `capacity` lines
/// it becomes the older file and a new one is begun.
fn append(open: &mut Option<OpenFiles>, path: &Path, capacity: usize, lines: &[u8]) -> Result<()> {
    if open.is_none() {
        if let Some(dir) = path.parent() {
            store::ensure_dir(dir)?;
        }
        *open = Some(OpenFiles {
            lock: LockFile::open(path)?,
            file: open_append(path)?,
            known: None,
        });
    }
    let files = open.as_mut().expect("opened above");
    let _guard = files.lock.lock()?;
    // Another process may have begun a new file since we opened this one.
    let current = fs::metadata(path).ok();
    let held = files.file.metadata().map_err(|e| Error::io(path, e))?;
    let mut len = held.len();
    if !current.is_some_and(|c| store::same_file(&c, &held)) {
        files.file = open_append(path)?;
        files.known = None;
        len = files.file.metadata().map_err(|e| Error::io(path, e))?.len();
    }
    let cut = cut_torn_tail(&files.file, len).map_err(|e| Error::io(path, e))?;
    let count = match files.known {
        Some((at, count)) if at == cut => count,
        // someone else wrote (or this is the first write): count what is there
        _ => count_lines(&files.file).map_err(|e| Error::io(path, e))?,
    };
    files
        .file
        .write_all(lines)
        .map_err(|e| Error::io(path, e))?;
    let count = count + lines.iter().filter(|b| **b == b'\n').count();
    files.known = Some((cut + lines.len() as u64, count));
    if count >= capacity {
        // the rename is atomic: a crash leaves either name, each file whole
        if let Err(e) = fs::rename(path, older(path)) {
            // something not a file has the older file's name: keep the ring bounded in place
            // (rare: a rewrite) and say what is in the way
            let text = fs::read(path).map_err(|e| Error::io(path, e))?;
            store::atomic_write(path, newest_lines(&text, capacity.div_ceil(2)))?;
            files.file = open_append(path)?;
            files.known = None;
            return Err(Error::io(
                older(path),
                std::io::Error::new(
                    e.kind(),
                    format!("{e}; move it away so the history can begin a new file"),
                ),
            ));
        }
        files.file = open_append(path)?;
        files.known = Some((0, 0));
    }
    Ok(())
}

/// The last `n` whole lines of `text`.
fn newest_lines(text: &[u8], n: usize) -> &[u8] {
    let mut seen = 0;
    for (i, b) in text.iter().enumerate().rev() {
        if *b == b'\n' {
            seen += 1;
            if seen > n {
                return &text[i + 1..];
            }
        }
    }
    text
}

/// Where the previous `capacity` entries are kept.
fn older(path: &Path) -> PathBuf {
    path.with_extension("1.jsonl")
}

/// Opens the history for appending: a regular file only (a FIFO in its place is refused at
/// once, never waited on).
fn open_append(path: &Path) -> Result<File> {
    let mut options = OpenOptions::new();
    options.create(true).append(true).read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(|e| Error::io(path, e))?;
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    if !meta.is_file() {
        return Err(Error::io(
            path,
            std::io::Error::other("not a regular file; move it away so lmcp can make the history"),
        ));
    }
    Ok(file)
}

/// The number of lines in a file, read from its start.
fn count_lines(file: &File) -> std::io::Result<usize> {
    use std::io::{Read, Seek, SeekFrom};
    let mut reader = file;
    reader.seek(SeekFrom::Start(0))?;
    let mut buf = vec![0u8; 64 << 10];
    let mut count = 0;
    loop {
        match reader.read(&mut buf)? {
            0 => return Ok(count),
            n => count += buf[..n].iter().filter(|b| **b == b'\n').count(),
        }
    }
}

/// [`read_all`] under the history lock, so no writer begins a new file between the two reads.
/// Without a lock file (nothing was ever written, or private mode) or without the right to open
/// it (a read-only data folder), it reads unlocked: reading never makes or needs a file of its own.
fn read_locked(path: &Path) -> Result<Recent> {
    let lock = LockFile::existing(path);
    let _guard = match &lock {
        Some(lock) => Some(lock.lock()?),
        None => None,
    };
    read_all(path)
}

/// Every entry the two files hold, oldest first; lines that do not parse are counted. Only
/// regular files are read (a FIFO or a folder put in their place is skipped, never waited on).
fn read_all(path: &Path) -> Result<Recent> {
    let mut recent = Recent::default();
    for file in [older(path), path.to_path_buf()] {
        let text = match read_regular(&file) {
            Ok(Some(b)) => b,
            Ok(None) => {
                recent.not_files.push(file);
                continue;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(&file, e)),
        };
        let skipped = recent.skipped;
        for line in text.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            match serde_json::from_slice(line) {
                Ok(e) => recent.entries.push(e),
                Err(_) => recent.skipped += 1,
            }
        }
        if recent.skipped > skipped {
            recent.damaged.push(file);
        }
    }
    Ok(recent)
}

/// A regular file's bytes; `None` when something else has its name.
fn read_regular(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // a FIFO opens at once instead of waiting for a writer
        options.custom_flags(libc::O_NONBLOCK);
    }
    let mut file = options.open(path)?;
    if !file.metadata()?.is_file() {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(Some(bytes))
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
/// next entry starts on a line of its own; the file's length after. Called with the history lock
/// held and the file's length `len`.
fn cut_torn_tail(file: &File, len: u64) -> std::io::Result<u64> {
    use std::io::{Read, Seek, SeekFrom};
    if len == 0 {
        return Ok(0);
    }
    let mut reader = file;
    // the usual case, one byte read: the last write ended its line
    let mut last = [0u8];
    reader.seek(SeekFrom::Start(len - 1))?;
    reader.read_exact(&mut last)?;
    if last[0] == b'\n' {
        return Ok(len);
    }
    let tail = len.min(64 << 10);
    reader.seek(SeekFrom::Start(len - tail))?;
    let mut buf = Vec::with_capacity(tail as usize);
    reader.take(tail).read_to_end(&mut buf)?;
    let keep = match buf.iter().rposition(|b| *b == b'\n') {
        Some(i) => len - tail + i as u64 + 1,
        None if tail == len => 0,
        // a line longer than the tail looked at: start the next entry on a line of its own
        None => {
            (&*file).write_all(b"\n")?;
            return Ok(len + 1);
        }
    };
    file.set_len(keep)?;
    Ok(keep)
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
        h.flush().unwrap();
        // a write cut short by a kill
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(br#"{"at_ms": 2, "tool": "tor"#).unwrap();
        drop(f);
        h.record(&entry("second")).unwrap();
        h.flush().unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        let tools = newest(&h, 10);
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
        h.flush().unwrap();
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

/// The tools of the newest `n` entries, oldest first.
#[cfg(test)]
fn newest(h: &History, n: usize) -> Vec<String> {
    h.recent(n)
        .unwrap()
        .entries
        .into_iter()
        .map(|e| e.tool)
        .collect()
}

#[cfg(test)]
mod writer_tests {
    use super::*;

    fn entry(tool: String) -> HistoryEntry {
        HistoryEntry {
            at_ms: 1,
            tool,
            origin: "mcp".into(),
            depth: 0,
            outcome: "done".into(),
            duration_ms: 0.1,
            args: vec![],
        }
    }

    /// Recording never waits for the file: with another process's hold on the history lock it
    /// still returns at once, and the entries are written once the lock is free.
    #[test]
    fn recording_does_not_wait_for_the_file_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.jsonl");
        let h = History::new(path.clone(), 100);
        h.record(&entry("warm".into())).unwrap();
        h.flush().unwrap();
        let lock = LockFile::open(&path).unwrap();
        let held = lock.lock().unwrap();
        for i in 0..10 {
            h.record(&entry(format!("t{i}"))).unwrap();
        }
        assert_eq!(
            read_all(&path).unwrap().entries.len(),
            1,
            "nothing written while the lock is held"
        );
        drop(held);
        h.flush().unwrap();
        assert_eq!(read_all(&path).unwrap().entries.len(), 11);
    }

    /// Entries from many threads all land, each thread's in its own order; dropping the
    /// history writes what is still queued.
    #[test]
    fn every_entry_lands_and_a_dropped_history_writes_its_queue() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.jsonl");
        let h = History::new(path.clone(), 100_000);
        std::thread::scope(|s| {
            for t in 0..4 {
                let h = &h;
                s.spawn(move || {
                    for i in 0..500 {
                        h.record(&entry(format!("{t}:{i}"))).unwrap();
                    }
                });
            }
        });
        drop(h);
        let all = read_all(&path).unwrap();
        assert_eq!((all.entries.len(), all.skipped), (2000, 0));
        for t in 0..4 {
            let mine: Vec<usize> = all
                .entries
                .iter()
                .filter_map(|e| e.tool.strip_prefix(&format!("{t}:"))?.parse().ok())
                .collect();
            assert_eq!(mine, (0..500).collect::<Vec<_>>());
        }
    }

    fn lines(path: &Path) -> usize {
        fs::read_to_string(path).map_or(0, |t| t.lines().count())
    }

    /// The ring stays bounded by renaming, never by rewriting: the current file holds fewer
    /// than `capacity` lines, the older one at most a ring's worth, and readers get the newest
    /// entries in order across both.
    #[test]
    fn the_ring_is_kept_by_renaming_the_full_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.jsonl");
        let h = History::new(path.clone(), 7);
        for i in 0..50 {
            h.record(&entry(format!("t{i}"))).unwrap();
            // batches of one, two and three entries
            if i % 3 != 1 {
                h.flush().unwrap();
            }
        }
        h.flush().unwrap();
        assert!(lines(&path) < 7, "{}", lines(&path));
        assert!(lines(&older(&path)) <= 7 + 2, "{}", lines(&older(&path)));
        let tools = newest(&h, 100);
        let want: Vec<String> = (43..50).map(|i| format!("t{i}")).collect();
        assert_eq!(tools, want);
    }

    /// Two writers (as two processes) append to one history: each notices the other's lines
    /// and the other's new file, so the count stays right and nothing is lost or doubled.
    #[test]
    fn two_writers_share_the_ring() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.jsonl");
        let (a, b) = (
            History::new(path.clone(), 10),
            History::new(path.clone(), 10),
        );
        for i in 0..45 {
            let h = if i % 2 == 0 { &a } else { &b };
            h.record(&entry(format!("t{i}"))).unwrap();
            h.flush().unwrap();
        }
        assert!(lines(&path) < 10 && lines(&older(&path)) <= 10);
        assert_eq!(lines(&path) + lines(&older(&path)), 10 + 45 % 10);
        let tools = newest(&a, 10);
        let want: Vec<String> = (35..45).map(|i| format!("t{i}")).collect();
        assert_eq!(tools, want);
    }

    /// A file longer than the ring (`limits.history_size` made smaller) is moved aside at the
    /// next write, and reads still give the newest entries.
    #[test]
    fn a_file_longer_than_the_ring_is_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.jsonl");
        let mut text = String::new();
        for i in 0..30 {
            text.push_str(&serde_json::to_string(&entry(format!("old{i}"))).unwrap());
            text.push('\n');
        }
        fs::write(&path, text).unwrap();
        let h = History::new(path.clone(), 10);
        h.record(&entry("new".into())).unwrap();
        h.flush().unwrap();
        assert_eq!((lines(&path), lines(&older(&path))), (0, 31));
        let tools = newest(&h, 3);
        assert_eq!(tools, vec!["old28", "old29", "new"]);
    }

    /// A folder in the older file's place: the history stays bounded (rewritten in place),
    /// the error names the folder, and reading skips it and says so.
    #[test]
    fn a_folder_in_the_older_files_place_is_named_and_the_ring_stays_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.jsonl");
        fs::create_dir(older(&path)).unwrap();
        let h = History::new(path.clone(), 6);
        let mut errors = Vec::new();
        for i in 0..40 {
            h.record(&entry(format!("t{i}"))).ok();
            if let Err(e) = h.flush() {
                errors.push(e.to_string());
            }
        }
        assert!(lines(&path) <= 6, "{}", lines(&path));
        assert!(
            !errors.is_empty() && errors.iter().all(|e| e.contains("h.1.jsonl")),
            "{errors:?}"
        );
        let r = h.recent(100).unwrap();
        assert_eq!(r.not_files, vec![older(&path)]);
        assert_eq!(r.entries.last().unwrap().tool, "t39");
    }

    /// A FIFO in place of either file is never waited on: reads skip it at once, and writes
    /// fail at once with a reason.
    #[cfg(unix)]
    #[test]
    fn a_fifo_in_place_of_a_history_file_is_never_waited_on() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.jsonl");
        let fifo = |p: &Path| {
            let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
            // SAFETY: `c` is a NUL-terminated path that outlives the call
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        };
        fifo(&older(&path));
        let h = History::new(path.clone(), 10);
        h.record(&entry("a".into())).unwrap();
        h.flush().unwrap();
        let r = h.recent(10).unwrap();
        assert_eq!((r.entries.len(), r.not_files.len()), (1, 1));

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.jsonl");
        fifo(&path);
        let h = History::new(path.clone(), 10);
        let started = std::time::Instant::now();
        h.record(&entry("a".into())).unwrap();
        let e = h.flush().unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        assert!(h.recent(10).unwrap().entries.is_empty());
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }

    /// Reading needs no lock file and makes none (nothing written yet, or a read-only folder).
    #[test]
    fn reading_makes_no_lock_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.jsonl");
        fs::write(
            &path,
            format!("{}\n", serde_json::to_string(&entry("x".into())).unwrap()),
        )
        .unwrap();
        let r = read_locked(&path).unwrap();
        assert_eq!(r.entries.len(), 1);
        assert!(!store::lock_path(&path).exists());
    }
}
