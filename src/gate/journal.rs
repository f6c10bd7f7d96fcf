//! Run journals: every confirmed run of a program (`lmcp run`) gets an id and an append-only
//! journal under `DATA/runs/`, and a run that failed or was killed can be resumed without
//! repeating what it already did.
//!
//! The gate journals each state-changing leaf call a run makes (the calls a plan lists): before
//! the handler runs, a `step` line with the tool and a hash of its arguments, written and synced
//! — so a step the process died in is known to be *unknown*, never silently re-run — and after
//! it, the outcome with its result. A resumed run replays the journal: its state-changing calls
//! are matched in order, tool and argument hash; a done step returns its recorded result without
//! running; a failed step runs again; the first call that does not match stops the resume (the
//! program or its inputs changed). A step whose outcome is unknown runs again only when the tool
//! says repeating it is harmless (`idempotentHint`) or the person said `--retry-unknown`.
//!
//! Journals keep no argument values (a hash only), and results pass the run's secret masking.
//! Private mode keeps no journal.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::host::Host;
use crate::store;

/// Results larger than this are not kept (their size is); a resume cannot hand such a step's result
/// back, and says so.
const MAX_KEPT_RESULT: usize = 1 << 20;

/// Where run journals live.
pub fn runs_dir(host: &Host) -> PathBuf {
    host.paths().data_dir.join("runs")
}

/// A keyed hash (HMAC-SHA-256 under `key`) of a JSON value that does not depend on the order
/// of object keys: with the key kept out of the journal, a short secret in the arguments
/// cannot be guessed from it.
pub fn value_hash(key: &[u8; 32], v: &Value) -> String {
    hmac(key, |h| feed(v, h))
}

/// The seal of step `n`'s result: a keyed hash of the number and the result together.
fn result_seal(key: &[u8; 32], n: u64, v: &Value) -> String {
    hmac(key, |h| {
        h.update(n.to_le_bytes());
        feed(v, h);
    })
}

/// HMAC-SHA-256 under `key` of what `message` feeds, in hex.
fn hmac(key: &[u8; 32], message: impl FnOnce(&mut Sha256)) -> String {
    let mut block = [0u8; 64];
    block[..32].copy_from_slice(key);
    let mut inner = Sha256::new();
    inner.update(block.map(|b| b ^ 0x36));
    message(&mut inner);
    let mut outer = Sha256::new();
    outer.update(block.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    format!("{:x}", outer.finalize())
}

/// Feeds a JSON value's canonical text (object keys sorted) to a hash.
fn feed(v: &Value, h: &mut Sha256) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            h.update(b"{");
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    h.update(b",");
                }
                let _ = serde_json::to_writer(HashWriter(h), k);
                h.update(b":");
                feed(&m[k], h);
            }
            h.update(b"}");
        }
        Value::Array(a) => {
            h.update(b"[");
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    h.update(b",");
                }
                feed(x, h);
            }
            h.update(b"]");
        }
        // scalars as JSON writes them, so the hash is that of the canonical text
        scalar => {
            let _ = serde_json::to_writer(HashWriter(h), scalar);
        }
    }
}

/// Writes into a hash, so nothing is written out first.
struct HashWriter<'a>(&'a mut Sha256);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// This installation's key for argument hashes (`CONFIG/journal.key`, readable by the user
/// only), made on first use.
fn journal_key(host: &Host) -> Result<[u8; 32]> {
    let path = host.paths().config_dir.join("journal.key");
    let parse = |text: &str| -> Option<[u8; 32]> {
        let text = text.trim();
        (text.len() == 64).then_some(())?;
        let mut key = [0u8; 32];
        for (i, byte) in key.iter_mut().enumerate() {
            *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(key)
    };
    for _ in 0..50 {
        if let Ok(text) = std::fs::read_to_string(&path)
            && let Some(key) = parse(&text)
        {
            return Ok(key);
        }
        store::ensure_dir(&host.paths().config_dir)?;
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        match options.open(&path) {
            Ok(mut f) => {
                let random = [uuid::Uuid::new_v4(), uuid::Uuid::new_v4()];
                let hex: String = random
                    .iter()
                    .flat_map(|u| u.as_bytes().to_vec())
                    .map(|b| format!("{b:02x}"))
                    .collect();
                f.write_all(hex.as_bytes())
                    .and_then(|()| f.sync_all())
                    .map_err(|e| Error::io(&path, e))?;
            }
            // another process is making it: read it again in a moment
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            Err(e) => return Err(Error::io(&path, e)),
        }
    }
    Err(Error::Corrupt {
        path,
        message: "the journal key is not 64 hex digits; remove the file (old run journals \
                  can then no longer be resumed)"
            .into(),
    })
}

/// A step as an earlier run recorded it.
#[derive(Debug, Clone)]
struct Recorded {
    tool: String,
    args: String,
    outcome: Option<Done>,
    /// The result's seal ([`result_seal`]).
    seal: Option<String>,
}

#[derive(Debug, Clone)]
enum Done {
    Result(Value),
    /// Done, but its result was not kept (why: too large, or it held a secret).
    NotKept(&'static str),
    Failed,
}

/// What the gate does with a state-changing call of a journaled run.
pub(crate) enum Step {
    /// Done in the run being resumed: this is its result; the handler does not run.
    Replay(Value),
    /// Run it, as step `n`.
    Run(u64),
    /// The resume stops here, for this reason.
    Refuse(String),
}

/// One run's journal.
#[derive(Debug)]
pub struct Journal {
    id: String,
    path: PathBuf,
    file: Arc<Mutex<Writer>>,
    state: Mutex<Cursor>,
    retry_unknown: bool,
    /// The key argument hashes are made with.
    key: [u8; 32],
    /// The resume stopped at a call that did not match: the run is left as it was.
    refused: std::sync::atomic::AtomicBool,
}

/// The journal file, written through a buffer: lines reach the file within [`FLUSH_EVERY`]
/// (a background thread flushes), or at once where a step's safety needs it synced.
#[derive(Debug)]
struct Writer {
    out: std::io::BufWriter<File>,
    dirty: bool,
    /// The line being made (kept, so a step costs no allocation for it).
    scratch: Vec<u8>,
}

/// How soon a journal line reaches the file (and so survives a kill of the process). A line
/// lost to a kill in that time is an idempotent step's (run again on a resume, harmlessly) or
/// an outcome (the step is then unknown: the careful side).
const FLUSH_EVERY: std::time::Duration = std::time::Duration::from_millis(10);

impl Writer {
    fn open(file: File) -> Arc<Mutex<Writer>> {
        let writer = Arc::new(Mutex::new(Writer {
            out: std::io::BufWriter::with_capacity(64 << 10, file),
            dirty: false,
            scratch: Vec::new(),
        }));
        let weak = Arc::downgrade(&writer);
        // ends with the journal
        let _ = std::thread::Builder::new()
            .name("lmcp-journal".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(FLUSH_EVERY);
                    let Some(w) = weak.upgrade() else { return };
                    let mut w = w.lock().unwrap_or_else(|p| p.into_inner());
                    if w.dirty {
                        let _ = w.out.flush();
                        w.dirty = false;
                    }
                }
            });
        writer
    }

    /// Appends one line; `sync` flushes it and syncs the file before returning.
    fn line(&mut self, path: &Path, v: &Value, sync: bool) -> Result<()> {
        self.scratch.clear();
        let _ = serde_json::to_writer(&mut self.scratch, v);
        self.commit(path, sync)
    }

    /// Appends the line in `scratch`; `sync` as for [`Writer::line`].
    fn commit(&mut self, path: &Path, sync: bool) -> Result<()> {
        self.scratch.push(b'\n');
        let written = self.out.write_all(&self.scratch).and_then(|()| {
            if sync {
                self.out.flush()?;
                self.out.get_ref().sync_data()
            } else {
                Ok(())
            }
        });
        self.dirty = !sync;
        written.map_err(|e| Error::io(path, e))
    }
}

#[derive(Debug, Default)]
struct Cursor {
    /// The next state-changing call's number (from 1).
    next: u64,
    /// The steps of the run being resumed, by number.
    replay: Vec<Recorded>,
}

fn new_id() -> String {
    let now = chrono::Utc::now().format("%Y%m%d-%H%M%S");
    let tail = uuid::Uuid::new_v4().simple().to_string();
    format!("{now}-{}", &tail[..6])
}

/// Largest journal read back.
const MAX_JOURNAL_BYTES: u64 = 64 << 20;

/// Journals kept: beyond this many, the oldest runs that ended are removed as new runs start.
const KEEP_RUNS: usize = 200;
/// Beyond this many, the oldest go whatever their state (runs nobody resumed).
const MAX_RUNS: usize = 1000;

/// Removes the oldest journals beyond [`KEEP_RUNS`] whose run ended (`done`), and any beyond
/// [`MAX_RUNS`]; a failed or unfinished run stays resumable until then.
fn prune(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut names: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    if names.len() <= KEEP_RUNS {
        return;
    }
    // ids start with the time they started, so names sort oldest first
    names.sort();
    let mut left = names.len();
    for (i, path) in names.iter().enumerate() {
        if left <= KEEP_RUNS {
            break;
        }
        let too_many = names.len() - i > MAX_RUNS;
        if (too_many || ended_done(path)) && std::fs::remove_file(path).is_ok() {
            left -= 1;
        }
    }
}

/// Whether a journal's last line says the run ended done (read from its tail only).
fn ended_done(path: &Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = File::open(path) else {
        return false;
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let mut tail = Vec::new();
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(256)));
    let _ = f.take(256).read_to_end(&mut tail);
    let text = String::from_utf8_lossy(&tail);
    text.trim_end()
        .rsplit('\n')
        .next()
        .and_then(|l| serde_json::from_str::<Value>(l).ok())
        .is_some_and(|l| l["end"] == "done")
}

/// Opens a journal for appending (a new one, private to the user), and takes its lock for as
/// long as the run goes on: a resume of a run that is still going is refused. Symlinks are not
/// followed.
fn open_journal(path: &Path, new: bool) -> Result<File> {
    let mut options = OpenOptions::new();
    options.append(true);
    if new {
        options.create_new(true);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600).custom_flags(libc::O_NOFOLLOW);
    }
    let file = options.open(path).map_err(|e| Error::io(path, e))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::Refused(format!(
            "run {} is in use by another lmcp process (still running, or being resumed); \
             wait for it to end",
            path.file_stem()
                .map(|s| s.to_string_lossy())
                .unwrap_or_default()
        ))),
        Err(std::fs::TryLockError::Error(e)) => Err(Error::io(path, e)),
    }
}

/// Whether a process holds the journal (its run is going on).
fn in_use(path: &Path) -> bool {
    File::open(path).is_ok_and(|f| match f.try_lock_shared() {
        Ok(()) => {
            let _ = f.unlock();
            false
        }
        Err(std::fs::TryLockError::WouldBlock) => true,
        Err(_) => false,
    })
}

impl Journal {
    /// Starts the journal of a new run of `program` (`fingerprint`: a hash of its source).
    pub fn start(host: &Host, program: &str, fingerprint: &str) -> Result<Journal> {
        let dir = runs_dir(host);
        store::ensure_dir(&dir)?;
        prune(&dir);
        let id = new_id();
        let path = dir.join(format!("{id}.jsonl"));
        let file = open_journal(&path, true)?;
        let file = Writer::open(file);
        let header = json!({"run": id, "program": program, "fingerprint": fingerprint, "started": store::timestamp()});
        lock(&file).line(&path, &header, true)?;
        store::sync_dir(&dir);
        Ok(Journal {
            id,
            path,
            file,
            state: Mutex::new(Cursor {
                next: 1,
                replay: Vec::new(),
            }),
            retry_unknown: false,
            key: journal_key(host)?,
            refused: Default::default(),
        })
    }

    /// Opens run `id` to resume it: refused when it ran another program, or `fingerprint`
    /// (the program's source now) differs from the one it ran.
    pub fn resume(
        host: &Host,
        id: &str,
        program: &str,
        fingerprint: &str,
        retry_unknown: bool,
    ) -> Result<Journal> {
        let log = RunLog::read(host, id)?;
        if log.program != program {
            return Err(Error::Refused(format!(
                "run {id} ran `{}`, not `{program}`; `lmcp runs` lists the runs",
                log.program
            )));
        }
        if log.fingerprint != fingerprint {
            return Err(Error::Refused(format!(
                "`{program}` changed since run {id}, so its steps cannot be matched; run it \
                 anew (without --resume)"
            )));
        }
        let file = open_journal(&log.path, false)?;
        // a line a kill or a full disk tore is ended, so the next one stands on its own
        let torn = std::fs::read(&log.path).is_ok_and(|t| !t.is_empty() && !t.ends_with(b"\n"));
        let file = Writer::open(file);
        if torn {
            lock(&file).scratch.clear();
            let _ = lock(&file).commit(&log.path, false);
        }
        lock(&file).line(&log.path, &json!({"resumed": store::timestamp()}), true)?;
        Ok(Journal {
            id: id.to_string(),
            path: log.path,
            file,
            state: Mutex::new(Cursor {
                next: 1,
                replay: log.steps,
            }),
            retry_unknown,
            key: journal_key(host)?,
            refused: Default::default(),
        })
    }

    /// The run's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Decides the next state-changing call: replayed, run (its start recorded first), or the
    /// end of the resume (after which every call is refused: a mismatch caught by the program
    /// does not let it go on).
    pub(crate) fn step(&self, tool: &str, args: &Value, idempotent: bool) -> Result<Step> {
        use std::sync::atomic::Ordering;
        if self.refused.load(Ordering::Acquire) {
            return Ok(Step::Refuse(format!(
                "the resume of run {} stopped earlier; run it anew (without --resume)",
                self.id
            )));
        }
        let hash = value_hash(&self.key, args);
        let step = self.decide(tool, &hash, idempotent);
        match step {
            Step::Refuse(_) => self.refused.store(true, Ordering::Release),
            Step::Run(n) => self.started(n, tool, &hash, idempotent)?,
            Step::Replay(_) => {}
        }
        Ok(step)
    }

    /// Whether the resume stopped at a call that did not match the run.
    pub fn refused(&self) -> bool {
        self.refused.load(std::sync::atomic::Ordering::Acquire)
    }

    fn decide(&self, tool: &str, hash: &str, idempotent: bool) -> Step {
        let mut cursor = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let n = cursor.next;
        cursor.next += 1;
        let Some(recorded) = cursor.replay.get(n as usize - 1) else {
            return Step::Run(n);
        };
        if recorded.tool != tool || recorded.args != hash {
            return Step::Refuse(format!(
                "the resume of run {} stopped at its state-changing call {n}: the run called `{}` \
                 there, and now `{tool}`{} — the program or its inputs changed; run it anew \
                 (without --resume)",
                self.id,
                recorded.tool,
                if recorded.tool == tool {
                    " with other arguments"
                } else {
                    ""
                }
            ));
        }
        match &recorded.outcome {
            Some(Done::Result(v))
                if recorded.seal.as_deref() == Some(&result_seal(&self.key, n, v)) =>
            {
                Step::Replay(v.clone())
            }
            Some(Done::Result(_)) => Step::Refuse(format!(
                "the resume of run {} stopped at its state-changing call {n} (`{tool}`): its \
                 recorded result was changed after it was written, so it is not handed back; \
                 run it anew (without --resume)",
                self.id
            )),
            Some(Done::NotKept(why)) => Step::Refuse(format!(
                "the resume of run {} stopped at its state-changing call {n} (`{tool}`): it was \
                 done, but its result {why}, so it cannot be handed back; run it anew (without \
                 --resume)",
                self.id
            )),
            Some(Done::Failed) => Step::Run(n),
            None if idempotent || self.retry_unknown => Step::Run(n),
            None => Step::Refuse(format!(
                "state-changing call {n} of run {} (`{tool}`) may or may not have happened: the \
                 run was cut short during it. Check, then resume with --retry-unknown to run it \
                 again",
                self.id
            )),
        }
    }

    /// Records that step `n` is about to run. For a tool that is not idempotent the line is
    /// synced before it runs, so a step the process died in is known to be unknown; an
    /// idempotent one may run again on a resume anyway, so it costs no sync.
    fn started(&self, n: u64, tool: &str, hash: &str, idempotent: bool) -> Result<()> {
        let mut w = lock(&self.file);
        w.scratch.clear();
        let _ = write!(w.scratch, "{{\"step\":{n},\"tool\":");
        let _ = serde_json::to_writer(&mut w.scratch, tool);
        let _ = write!(w.scratch, ",\"args\":\"{hash}\"}}");
        w.commit(&self.path, !idempotent)
    }

    /// Records step `n`'s outcome: its result (masked) or that it failed.
    pub(crate) fn finished(
        &self,
        n: u64,
        result: std::result::Result<&Value, &Error>,
        secrets: &[String],
    ) {
        let mut w = lock(&self.file);
        w.scratch.clear();
        match result {
            Ok(v) if !secrets.is_empty() && crate::text::redact_json(v, secrets) != *v => {
                // a result with a secret in it is not written, and cannot be handed back
                let _ = write!(w.scratch, "{{\"step\":{n},\"result_masked\":true}}");
            }
            Ok(v) => {
                let _ = write!(w.scratch, "{{\"step\":{n},\"result\":");
                let start = w.scratch.len();
                let _ = serde_json::to_writer(&mut w.scratch, v);
                let size = w.scratch.len() - start;
                if size > MAX_KEPT_RESULT {
                    w.scratch.clear();
                    let _ = write!(w.scratch, "{{\"step\":{n},\"result_too_large\":{size}");
                } else {
                    // sealed under the install's key: a result changed in the file is not
                    // handed back
                    let seal = result_seal(&self.key, n, v);
                    let _ = write!(w.scratch, ",\"seal\":\"{seal}\"");
                }
                w.scratch.push(b'}');
            }
            Err(e) => {
                let message = Value::from(crate::text::redact(&e.to_string(), secrets).as_ref());
                let _ = write!(w.scratch, "{{\"step\":{n},\"failed\":{message}}}");
            }
        }
        // not synced: an outcome lost in a crash leaves the step unknown, the careful side
        let _ = w.commit(&self.path, false);
    }

    /// Records how the run ended (synced, with everything before it); a resume that stopped
    /// at a mismatch leaves the run as it was.
    pub fn end(&self, outcome: &str) {
        if self.refused() {
            return;
        }
        let _ = lock(&self.file).line(
            &self.path,
            &json!({"end": outcome, "at": store::timestamp()}),
            true,
        );
    }
}

fn lock(file: &Mutex<Writer>) -> std::sync::MutexGuard<'_, Writer> {
    file.lock().unwrap_or_else(|p| p.into_inner())
}

/// A run journal as read back: for `lmcp runs` and for resuming.
#[derive(Debug)]
pub struct RunLog {
    /// The run's id.
    pub id: String,
    /// The program it ran.
    pub program: String,
    fingerprint: String,
    /// When it started.
    pub started: String,
    /// done, failed, or `unfinished` (killed, or still running).
    pub state: String,
    /// How many times it was resumed.
    pub resumed: usize,
    steps: Vec<Recorded>,
    path: PathBuf,
}

impl RunLog {
    /// Reads run `id`'s journal; a torn last line (a kill mid-write) is ignored.
    pub fn read(host: &Host, id: &str) -> Result<RunLog> {
        let ok = !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        let path = runs_dir(host).join(format!("{id}.jsonl"));
        if !ok || !path.is_file() {
            return Err(Error::Refused(format!(
                "there is no run `{id}`; `lmcp runs` lists the runs"
            )));
        }
        RunLog::read_path(&path)
    }

    fn read_path(path: &Path) -> Result<RunLog> {
        // a regular file of a sane size only: not a FIFO (which would hang), not a symlink
        let meta = std::fs::symlink_metadata(path).map_err(|e| Error::io(path, e))?;
        if !meta.is_file() || meta.len() > MAX_JOURNAL_BYTES {
            return Err(Error::Corrupt {
                path: path.to_path_buf(),
                message: "not a run journal (not a regular file, or over 64 MiB)".into(),
            });
        }
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let mut lines = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok());
        let header = lines.next().ok_or_else(|| Error::Corrupt {
            path: path.to_path_buf(),
            message: "the journal has no header".into(),
        })?;
        let field = |k: &str| header[k].as_str().unwrap_or_default().to_string();
        let mut log = RunLog {
            id: field("run"),
            program: field("program"),
            fingerprint: field("fingerprint"),
            started: field("started"),
            state: "unfinished".into(),
            resumed: 0,
            steps: Vec::new(),
            path: path.to_path_buf(),
        };
        for l in lines {
            if let Some(end) = l["end"].as_str() {
                log.state = end.to_string();
                continue;
            }
            if l.get("resumed").is_some() {
                log.resumed += 1;
                log.state = "unfinished".into();
                continue;
            }
            let Some(n) = l["step"].as_u64().filter(|n| *n >= 1) else {
                continue;
            };
            let i = n as usize - 1;
            if let Some(tool) = l["tool"].as_str() {
                let step = Recorded {
                    tool: tool.to_string(),
                    args: l["args"].as_str().unwrap_or_default().to_string(),
                    outcome: None,
                    seal: None,
                };
                // a resume writes the steps it runs again under the same numbers
                if i < log.steps.len() {
                    log.steps[i] = step;
                } else if i == log.steps.len() {
                    log.steps.push(step);
                }
            } else if let Some(step) = log.steps.get_mut(i) {
                step.outcome = if let Some(v) = l.get("result") {
                    step.seal = l["seal"].as_str().map(str::to_string);
                    Some(Done::Result(v.clone()))
                } else if l.get("result_too_large").is_some() {
                    Some(Done::NotKept("was too large to keep"))
                } else if l.get("result_masked").is_some() {
                    Some(Done::NotKept("held a secret and was not kept"))
                } else {
                    l.get("failed").map(|_| Done::Failed)
                };
            }
        }
        if in_use(path) {
            log.state = "running".into();
        }
        Ok(log)
    }

    /// Every run, newest first.
    pub fn all(host: &Host) -> Vec<RunLog> {
        let Ok(entries) = std::fs::read_dir(runs_dir(host)) else {
            return Vec::new();
        };
        let mut runs: Vec<RunLog> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .filter_map(|p| RunLog::read_path(&p).ok())
            .collect();
        runs.sort_by(|a, b| b.started.cmp(&a.started).then(b.id.cmp(&a.id)));
        runs
    }

    /// The run for `lmcp runs`: id, program, started, state, its steps and the last one.
    pub fn to_json(&self, with_steps: bool) -> Value {
        let step = |(i, s): (usize, &Recorded)| {
            let outcome = match &s.outcome {
                Some(Done::Result(_) | Done::NotKept(_)) => "done",
                Some(Done::Failed) => "failed",
                None => "unknown",
            };
            json!({"step": i + 1, "tool": s.tool, "outcome": outcome})
        };
        let mut v = json!({
            "run": self.id,
            "program": self.program,
            "started": self.started,
            "state": self.state,
            "resumed": self.resumed,
            "steps": self.steps.len(),
            "last_step": self.steps.iter().enumerate().next_back().map(step),
        });
        if with_steps {
            v["step_list"] = Value::Array(self.steps.iter().enumerate().map(step).collect());
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_journals_are_pruned_ended_ones_first() {
        let dir = tempfile::tempdir().unwrap();
        let write = |i: usize, end: &str| {
            let text = format!("{{\"run\":\"r{i:05}\"}}\n{end}");
            std::fs::write(dir.path().join(format!("r{i:05}.jsonl")), text).unwrap();
        };
        for i in 0..KEEP_RUNS + 10 {
            // the five oldest failed (kept), the rest done
            let end = if i < 5 {
                "{\"end\":\"failed\"}\n"
            } else {
                "{\"end\":\"done\"}\n"
            };
            write(i, end);
        }
        prune(dir.path());
        let left = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(left, KEEP_RUNS);
        for i in 0..5 {
            assert!(
                dir.path().join(format!("r{i:05}.jsonl")).exists(),
                "failed runs stay"
            );
        }
        assert!(
            !dir.path().join("r00005.jsonl").exists(),
            "the oldest done run went"
        );
    }

    #[test]
    fn argument_hashes_ignore_key_order() {
        let a: Value = serde_json::from_str(r#"{"b": 1, "a": [1, {"y": 2, "x": 3}]}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a": [1, {"x": 3, "y": 2}], "b": 1}"#).unwrap();
        let key = [7u8; 32];
        assert_eq!(value_hash(&key, &a), value_hash(&key, &b));
        assert_ne!(value_hash(&key, &a), value_hash(&key, &json!({"b": 2})));
        assert_ne!(value_hash(&key, &a), value_hash(&[8u8; 32], &a), "keyed");
    }
}
