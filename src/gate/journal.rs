//! Run journals: every confirmed run of a program (`lmcp run`) gets an id and an append-only
//! journal under `DATA/runs/`, and a run that failed or was killed can be resumed without
//! repeating what it already did.
//!
//! The gate journals each state-changing leaf call a run makes (the calls a plan lists): before
//! the handler runs, a `step` line with the tool and a hash of its arguments — synced to disk
//! first where the tool is not idempotent, so a step the process died in is known to be
//! *unknown*, never silently re-run — and after it, the outcome with its result. A run whose
//! steps are all idempotent syncs nothing: losing its journal costs only running them again. A resumed run replays the journal: its state-changing calls
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

use hmac::{Hmac, Mac as _};
use serde_json::{Value, json};
use sha2::Sha256;

use super::Caller;
use crate::error::{Error, Result};
use crate::store;

/// Results larger than this are not kept (their size is); a resume cannot hand such a step's result
/// back, and says so.
const MAX_KEPT_RESULT: usize = 1 << 20;

/// Where run journals live.
pub fn runs_dir(host: &dyn Caller) -> PathBuf {
    host.paths().data_dir.join("runs")
}

/// HMAC-SHA-256 (RustCrypto's `hmac`).
type HmacSha256 = Hmac<Sha256>;

/// HMAC-SHA-256 under this installation's journal key. The keyed state is made once and cloned
/// for each hash: the key's two padded blocks are hashed once, so a step's hash costs two
/// compressions, not four.
#[derive(Clone)]
struct Keyed(HmacSha256);

impl std::fmt::Debug for Keyed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Keyed(..)")
    }
}

/// A keyed hash in hex, made without allocating.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Mac([u8; 64]);

impl Mac {
    /// The hex digits.
    fn as_str(&self) -> &str {
        // only ASCII hex digits are ever written into it
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl std::fmt::Debug for Mac {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Keyed {
    /// The hashing state for `key`.
    fn new(key: &[u8; 32]) -> Keyed {
        Keyed(HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length"))
    }

    /// The HMAC of what `message` feeds.
    fn mac(&self, message: impl FnOnce(&mut HmacSha256)) -> Mac {
        let mut h = self.0.clone();
        message(&mut h);
        let digest = h.finalize().into_bytes();
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; 64];
        for (i, b) in digest.iter().enumerate() {
            out[2 * i] = HEX[usize::from(b >> 4)];
            out[2 * i + 1] = HEX[usize::from(b & 15)];
        }
        Mac(out)
    }

    /// A keyed hash of a JSON value that does not depend on the order of object keys (that of
    /// its canonical text, made in `scratch`): with the key kept out of the journal, a short
    /// secret in the arguments cannot be guessed from it.
    fn value_hash(&self, v: &Value, scratch: &mut Vec<u8>) -> Mac {
        scratch.clear();
        canonical(v, scratch);
        let mac = self.mac(|h| h.update(&scratch[..]));
        if scratch.capacity() > KEEP_SCRATCH {
            *scratch = Vec::new();
        }
        mac
    }

    /// The seal of step `n`'s result, over the exact text the journal keeps of it: a result
    /// changed in the file is not handed back.
    fn seal(&self, n: u64, text: &[u8]) -> Mac {
        self.mac(|h| seal_message(h, n, text))
    }

    /// Whether `seal` (hex) is step `n`'s over the result's `text` as kept. The comparison
    /// takes the same time wherever the two differ, so timing tells nothing of the right seal.
    fn verifies(&self, n: u64, seal: &str, text: &str) -> bool {
        let Some(tag) = unhex32(seal) else {
            return false;
        };
        let mut h = self.0.clone();
        seal_message(&mut h, n, text.as_bytes());
        h.verify_slice(&tag).is_ok()
    }
}

/// What a seal is the HMAC of: a tag no canonical JSON text begins with (so no seal is ever the
/// hash of some arguments under the same key), the step's number, and the result's text.
fn seal_message(h: &mut HmacSha256, n: u64, text: &[u8]) {
    h.update(b"seal2");
    h.update(&n.to_le_bytes());
    h.update(text);
}

/// 64 lowercase hex digits (as [`Keyed::mac`] writes them) as the 32 bytes they stand for.
fn unhex32(text: &str) -> Option<[u8; 32]> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let text = text.as_bytes();
    if text.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = (digit(text[2 * i])? << 4) | digit(text[2 * i + 1])?;
    }
    Some(out)
}

/// A JSON value's canonical text (object keys sorted, no spaces): what hashes of JSON are
/// taken over, so that key order never changes a hash.
pub fn canonical_json(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    canonical(v, &mut out);
    out
}

/// Appends a JSON value's canonical text (object keys sorted, no spaces) to `out`.
fn canonical(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Object(m) => {
            let entry = |i: usize, (k, x): (&String, &Value), out: &mut Vec<u8>| {
                if i > 0 {
                    out.push(b',');
                }
                let _ = serde_json::to_writer(&mut *out, k);
                out.push(b':');
                canonical(x, out);
            };
            out.push(b'{');
            // most objects are small and often in order already: then nothing is gathered
            if m.keys().zip(m.keys().skip(1)).all(|(a, b)| a < b) {
                m.iter().enumerate().for_each(|(i, e)| entry(i, e, out));
            } else {
                let mut entries: Vec<(&String, &Value)> = m.iter().collect();
                entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
                entries
                    .into_iter()
                    .enumerate()
                    .for_each(|(i, e)| entry(i, e, out));
            }
            out.push(b'}');
        }
        Value::Array(a) => {
            out.push(b'[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                canonical(x, out);
            }
            out.push(b']');
        }
        // scalars as JSON writes them
        scalar => {
            let _ = serde_json::to_writer(&mut *out, scalar);
        }
    }
}

/// Largest scratch buffer a journal keeps between lines: a step with larger arguments or
/// result gives its memory back.
const KEEP_SCRATCH: usize = 64 << 10;

/// Seals for other files lmcp keeps and reads back as trusted (the library index): HMACs under
/// this installation's key, so a file edited behind lmcp's back is noticed. Each use names its
/// own tag, and no tag is a prefix of a journal seal's or canonical JSON's.
#[derive(Clone, Debug)]
pub struct Sealer(Keyed);

impl Sealer {
    /// The sealer of this installation (its key is made on first use).
    pub fn of(host: &dyn Caller) -> Result<Sealer> {
        Ok(Sealer(Keyed::new(&journal_key(host)?)))
    }

    /// The seal (hex) of `text` for the use `tag`.
    pub fn seal(&self, tag: &str, text: &[u8]) -> String {
        self.0
            .mac(|h| Self::message(h, tag, text))
            .as_str()
            .to_string()
    }

    /// Whether `seal` is the seal of `text` for `tag`, compared in constant time.
    pub fn verifies(&self, tag: &str, text: &[u8], seal: &str) -> bool {
        let Some(mac) = unhex32(seal) else {
            return false;
        };
        let mut h = self.0.0.clone();
        Self::message(&mut h, tag, text);
        h.verify_slice(&mac).is_ok()
    }

    fn message(h: &mut HmacSha256, tag: &str, text: &[u8]) {
        h.update(b"\x00sealed:");
        h.update(&(tag.len() as u64).to_le_bytes());
        h.update(tag.as_bytes());
        h.update(text);
    }
}

/// This installation's key for argument hashes (`CONFIG/journal.key`, readable by the user
/// only), made on first use.
fn journal_key(host: &dyn Caller) -> Result<[u8; 32]> {
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
    /// The result's seal ([`Keyed::seal`]).
    seal: Option<String>,
    /// The result's text as the journal keeps it (what the seal covers).
    result_text: Option<String>,
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
    /// The key argument hashes and seals are made with.
    keyed: Keyed,
    /// The resume stopped at a call that did not match: the run is left as it was.
    refused: std::sync::atomic::AtomicBool,
}

/// The journal's lines on their way to the file: gathered in memory and written by the
/// journal's own thread within [`FLUSH_EVERY`], so a run's steps do not wait on the file system;
/// written at once where a reader may look for them, and synced where a step's safety needs it.
#[derive(Debug)]
struct Writer {
    /// Lines not yet written, in order.
    pending: Vec<u8>,
    /// The file. Whoever writes takes its lock before letting go of the writer's, so lines
    /// reach the file in the order they were made.
    file: Arc<Mutex<File>>,
    /// The line being made (kept, so a step costs no allocation for it).
    scratch: Vec<u8>,
    /// Where a step's arguments are laid out canonically to be hashed (kept, likewise).
    canon: Vec<u8>,
    /// The folder whose entry for a new journal is not yet synced: synced with the first line
    /// that must be, so a run of idempotent steps only costs no sync at all.
    unsynced_dir: Option<PathBuf>,
    /// The key, for the hashes left to whoever writes the lines ([`MARK`]).
    keyed: Keyed,
    /// Where lines with hashes left to fill are laid out before they are written (kept).
    rendered: Vec<u8>,
    /// A write failed (a full disk, say): the lines after it would stand after a gap, so no
    /// more are taken, and the steps that would make them do not run.
    broken: Option<String>,
}

/// In a journal's lines in memory: a keyed hash left for whoever writes them (the journal's
/// thread, mostly) to fill in, so a run's own thread does not spend its time hashing. JSON text
/// never holds this byte raw. [`MARK_ARGS`] or [`MARK_SEAL`] follows.
const MARK: u8 = 0;
/// Then a `u32` (little-endian) length and that much canonical argument text: written as the
/// hex of its keyed hash ([`Keyed::value_hash`]).
const MARK_ARGS: u8 = b'A';
/// Then the step's number (`u64`) and the length (`u32`) of the result text that ends just
/// before [`SEAL_FIELD`]: written as the hex of its seal ([`Keyed::seal`]).
const MARK_SEAL: u8 = b'S';
/// What stands between a result's text and its seal.
const SEAL_FIELD: &[u8] = b",\"seal\":\"";

/// Appends `src` to `out` with every hash left in it ([`MARK`]) filled in.
fn render(keyed: &Keyed, src: &[u8], out: &mut Vec<u8>) {
    let mut rest = 0;
    while let Some(at) = src[rest..].iter().position(|b| *b == MARK) {
        let p = rest + at;
        out.extend_from_slice(&src[rest..p]);
        let word = |from: usize, n: usize| -> u64 {
            let mut bytes = [0u8; 8];
            bytes[..n].copy_from_slice(&src[from..from + n]);
            u64::from_le_bytes(bytes)
        };
        match src.get(p + 1) {
            Some(&MARK_ARGS) => {
                let len = word(p + 2, 4) as usize;
                let text = &src[p + 6..p + 6 + len];
                out.extend_from_slice(&keyed.mac(|h| h.update(text)).0);
                rest = p + 6 + len;
            }
            Some(&MARK_SEAL) => {
                let (n, len) = (word(p + 2, 8), word(p + 10, 4) as usize);
                let end = p - SEAL_FIELD.len();
                out.extend_from_slice(&keyed.seal(n, &src[end - len..end]).0);
                rest = p + 14;
            }
            // only this module writes the byte, always with one of the two
            _ => unreachable!("a journal mark of an unknown kind"),
        }
    }
    out.extend_from_slice(&src[rest..]);
}

/// Most bytes of lines kept in memory: beyond, the run writes them itself (the journal's
/// thread is falling behind).
const MAX_PENDING: usize = 1 << 20;

/// How far a journal line goes before [`Writer::commit`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// Into memory: in the file within [`FLUSH_EVERY`].
    Buffered,
    /// Into the file (the kernel's cache): it survives a kill of the process, and other
    /// processes see it.
    Written,
    /// Onto the disk, with the journal's folder entry: it survives a power cut.
    Synced,
}

/// How soon a journal line reaches the file (and so survives a kill of the process). A line
/// lost to a kill in that time is an idempotent step's (run again on a resume, harmlessly) or
/// an outcome (the step is then unknown: the careful side).
const FLUSH_EVERY: std::time::Duration = std::time::Duration::from_millis(10);

impl Writer {
    fn open(file: File, unsynced_dir: Option<PathBuf>, keyed: Keyed) -> Arc<Mutex<Writer>> {
        let writer = Arc::new(Mutex::new(Writer {
            pending: Vec::new(),
            file: Arc::new(Mutex::new(file)),
            scratch: Vec::new(),
            canon: Vec::new(),
            unsynced_dir,
            keyed: keyed.clone(),
            rendered: Vec::new(),
            broken: None,
        }));
        let weak = Arc::downgrade(&writer);
        // ends with the journal
        let _ = std::thread::Builder::new()
            .name("lmcp-journal".into())
            .spawn(move || {
                let (mut batch, mut out) = (Vec::new(), Vec::new());
                loop {
                    std::thread::sleep(FLUSH_EVERY);
                    let Some(writer) = weak.upgrade() else { return };
                    let mut w = lock(&writer);
                    if w.pending.is_empty() {
                        continue;
                    }
                    std::mem::swap(&mut w.pending, &mut batch);
                    let file = Arc::clone(&w.file);
                    let mut f = lock(&file);
                    drop(w);
                    // the hashes are made here, off the run's thread
                    render(&keyed, &batch, &mut out);
                    // lines that cannot be written are outcomes left unknown, or idempotent
                    // steps run again on a resume: the careful side; but nothing may follow
                    // them, or a resume would read past a gap
                    if let Err(e) = f.write_all(&out) {
                        lock(&writer).broken = Some(e.to_string());
                    }
                    drop(f);
                    for buf in [&mut batch, &mut out] {
                        buf.clear();
                        if buf.capacity() > MAX_PENDING {
                            *buf = Vec::new();
                        }
                    }
                }
            });
        writer
    }

    /// Appends one line, taken as far as `reach`.
    fn line(&mut self, path: &Path, v: &Value, reach: Reach) -> Result<()> {
        self.scratch.clear();
        let _ = serde_json::to_writer(&mut self.scratch, v);
        self.commit(path, reach)
    }

    /// Starts a step's line in `scratch`: `{"step":N,"FIELD":`.
    fn step_line(&mut self, n: u64, field: &str) {
        self.scratch.clear();
        self.scratch.extend_from_slice(b"{\"step\":");
        self.scratch
            .extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
        self.scratch.extend_from_slice(b",\"");
        self.scratch.extend_from_slice(field.as_bytes());
        self.scratch.extend_from_slice(b"\":");
    }

    /// Starts step `n`'s start line in `scratch`, up to its argument hash:
    /// `{"step":N,"tool":TOOL,"args":"`.
    fn start_line(&mut self, n: u64, tool: &str) {
        self.step_line(n, "tool");
        let _ = serde_json::to_writer(&mut self.scratch, tool);
        self.scratch.extend_from_slice(b",\"args\":\"");
    }

    /// Appends the line in `scratch`, taken as far as `reach` (with every line before it).
    fn commit(&mut self, path: &Path, reach: Reach) -> Result<()> {
        if let Some(e) = &self.broken {
            return Err(Error::io(
                path,
                std::io::Error::other(format!("the run's journal could not be written: {e}")),
            ));
        }
        self.scratch.push(b'\n');
        self.pending.extend_from_slice(&self.scratch);
        if self.scratch.capacity() > KEEP_SCRATCH {
            self.scratch = Vec::new();
        }
        if reach == Reach::Buffered && self.pending.len() <= MAX_PENDING {
            return Ok(());
        }
        let file = Arc::clone(&self.file);
        let mut f = lock(&file);
        self.rendered.clear();
        render(&self.keyed, &self.pending, &mut self.rendered);
        let written = f.write_all(&self.rendered).and_then(|()| {
            if reach == Reach::Synced {
                f.sync_data()?;
                if let Some(dir) = self.unsynced_dir.take() {
                    store::sync_dir(&dir);
                }
            }
            Ok(())
        });
        self.pending.clear();
        for buf in [&mut self.pending, &mut self.rendered] {
            if buf.capacity() > MAX_PENDING {
                *buf = Vec::new();
            }
        }
        if let Err(e) = &written {
            self.broken = Some(e.to_string());
        }
        written.map_err(|e| Error::io(path, e))
    }
}

impl Drop for Writer {
    /// Lines still in memory reach the file when the journal goes.
    fn drop(&mut self) {
        if !self.pending.is_empty() && self.broken.is_none() {
            let mut out = Vec::new();
            render(&self.keyed, &self.pending, &mut out);
            let _ = lock(&self.file).write_all(&out);
        }
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

/// Most journals [`prune`] reads the end of as a run starts: the work stays small however many
/// failed runs are kept.
const PRUNE_LOOKS: usize = 32;

/// Removes the oldest journals beyond [`KEEP_RUNS`] whose run ended (`done`), and the oldest
/// beyond [`MAX_RUNS`] whatever their state; a failed or unfinished run stays resumable until
/// then. Only the [`PRUNE_LOOKS`] oldest are read: behind as many kept runs, done ones wait for
/// the [`MAX_RUNS`] bound.
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
        if left <= KEEP_RUNS || (i >= PRUNE_LOOKS && left <= MAX_RUNS) {
            break;
        }
        let gone = if left > MAX_RUNS {
            std::fs::remove_file(path).is_ok()
        } else {
            ended_done(path) && std::fs::remove_file(path).is_ok()
        };
        left -= usize::from(gone);
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
    pub fn start(host: &dyn Caller, program: &str, fingerprint: &str) -> Result<Journal> {
        let dir = runs_dir(host);
        store::ensure_dir(&dir)?;
        prune(&dir);
        let id = new_id();
        let path = dir.join(format!("{id}.jsonl"));
        let file = open_journal(&path, true)?;
        // nothing is synced until a step needs it: a power cut that loses the journal of a
        // run of idempotent steps only costs running them again
        let keyed = Keyed::new(&journal_key(host)?);
        let file = Writer::open(file, Some(dir), keyed.clone());
        let header = json!({"run": id, "program": program, "fingerprint": fingerprint, "started": store::timestamp()});
        lock(&file).line(&path, &header, Reach::Written)?;
        Ok(Journal {
            id,
            path,
            file,
            state: Mutex::new(Cursor {
                next: 1,
                replay: Vec::new(),
            }),
            retry_unknown: false,
            keyed,
            refused: Default::default(),
        })
    }

    /// Opens run `id` to resume it: refused when it ran another program, or `fingerprint`
    /// (the program's source now) differs from the one it ran.
    pub fn resume(
        host: &dyn Caller,
        id: &str,
        program: &str,
        fingerprint: &str,
        retry_unknown: bool,
    ) -> Result<Journal> {
        // the lock first, then the read: a run that ends (or another resume that goes on)
        // between a read and the lock would leave this resume an old copy of its steps
        let path = journal_path(host, id)?;
        let file = open_journal(&path, false)?;
        let log = RunLog::read_path(&path)?;
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
        // a line a kill or a full disk tore is ended, so the next one stands on its own
        let torn = std::fs::read(&log.path).is_ok_and(|t| !t.is_empty() && !t.ends_with(b"\n"));
        let keyed = Keyed::new(&journal_key(host)?);
        let file = Writer::open(file, None, keyed.clone());
        if torn {
            lock(&file).scratch.clear();
            let _ = lock(&file).commit(&log.path, Reach::Buffered);
        }
        lock(&file).line(
            &log.path,
            &json!({"resumed": store::timestamp()}),
            Reach::Synced,
        )?;
        Ok(Journal {
            id: id.to_string(),
            path: log.path,
            file,
            state: Mutex::new(Cursor {
                next: 1,
                replay: log.steps,
            }),
            retry_unknown,
            keyed,
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
        let mut w = lock(&self.file);
        {
            let mut cursor = lock(&self.state);
            let n = cursor.next;
            if n as usize > cursor.replay.len() {
                // past what a resume hands back: nothing here needs the hash, so it is left
                // for the journal's thread to make
                cursor.next += 1;
                drop(cursor);
                w.start_line(n, tool);
                w.scratch.extend_from_slice(&[MARK, MARK_ARGS, 0, 0, 0, 0]);
                let at = w.scratch.len();
                canonical(args, &mut w.scratch);
                match u32::try_from(w.scratch.len() - at) {
                    Ok(len) => w.scratch[at - 4..at].copy_from_slice(&len.to_le_bytes()),
                    // past what a mark can say (4 GiB): hashed here
                    Err(_) => {
                        let mac = self.keyed.mac(|h| h.update(&w.scratch[at..]));
                        w.scratch.truncate(at - 6);
                        w.scratch.extend_from_slice(&mac.0);
                    }
                }
                w.scratch.extend_from_slice(b"\"}");
                w.commit(&self.path, Self::start_reach(idempotent))?;
                return Ok(Step::Run(n));
            }
        }
        let hash = self.keyed.value_hash(args, &mut w.canon);
        let step = self.decide(tool, &hash, idempotent);
        match step {
            Step::Refuse(_) => self.refused.store(true, Ordering::Release),
            Step::Run(n) => self.started(&mut w, n, tool, &hash, idempotent)?,
            Step::Replay(_) => {}
        }
        Ok(step)
    }

    /// Whether the resume stopped at a call that did not match the run.
    pub fn refused(&self) -> bool {
        self.refused.load(std::sync::atomic::Ordering::Acquire)
    }

    fn decide(&self, tool: &str, hash: &Mac, idempotent: bool) -> Step {
        let mut cursor = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let n = cursor.next;
        cursor.next += 1;
        let Some(recorded) = cursor.replay.get(n as usize - 1) else {
            return Step::Run(n);
        };
        if recorded.tool != tool || recorded.args.as_bytes() != hash.0 {
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
            Some(Done::Result(v)) if self.sealed(n, recorded) => Step::Replay(v.clone()),
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

    /// Whether step `n`'s recorded result carries its seal.
    fn sealed(&self, n: u64, recorded: &Recorded) -> bool {
        match (&recorded.seal, &recorded.result_text) {
            (Some(seal), Some(text)) => self.keyed.verifies(n, seal, text),
            _ => false,
        }
    }

    /// Records that step `n` is about to run. For a tool that is not idempotent the line is
    /// synced before it runs, so a step the process died in is known to be unknown; an
    /// idempotent one may run again on a resume anyway, so it costs no sync.
    fn started(
        &self,
        w: &mut Writer,
        n: u64,
        tool: &str,
        hash: &Mac,
        idempotent: bool,
    ) -> Result<()> {
        w.start_line(n, tool);
        w.scratch.extend_from_slice(&hash.0);
        w.scratch.extend_from_slice(b"\"}");
        w.commit(&self.path, Self::start_reach(idempotent))
    }

    /// How far a step's start line goes before the step runs: synced for a tool that is not
    /// idempotent, so a step the process died in is known to be unknown; an idempotent one may
    /// run again on a resume anyway, so it costs no sync.
    fn start_reach(idempotent: bool) -> Reach {
        if idempotent {
            Reach::Buffered
        } else {
            Reach::Synced
        }
    }

    /// Records step `n`'s outcome: its result (masked) or that it failed.
    pub(crate) fn finished(
        &self,
        n: u64,
        result: std::result::Result<&Value, &Error>,
        secrets: &[String],
    ) {
        let mut w = lock(&self.file);
        match result {
            Ok(v) if !secrets.is_empty() && crate::text::redact_json(v, secrets) != *v => {
                // a result with a secret in it is not written, and cannot be handed back
                w.step_line(n, "result_masked");
                w.scratch.extend_from_slice(b"true}");
            }
            Ok(v) => {
                w.step_line(n, "result");
                let start = w.scratch.len();
                let _ = serde_json::to_writer(&mut w.scratch, v);
                let size = w.scratch.len() - start;
                if size > MAX_KEPT_RESULT {
                    w.step_line(n, "result_too_large");
                    w.scratch
                        .extend_from_slice(itoa::Buffer::new().format(size).as_bytes());
                } else {
                    // sealed under the install's key (by the journal's thread): a result
                    // changed in the file is not handed back
                    w.scratch.extend_from_slice(SEAL_FIELD);
                    w.scratch.extend_from_slice(&[MARK, MARK_SEAL]);
                    w.scratch.extend_from_slice(&n.to_le_bytes());
                    w.scratch.extend_from_slice(&(size as u32).to_le_bytes());
                    w.scratch.push(b'"');
                }
                w.scratch.push(b'}');
            }
            Err(e) => {
                w.step_line(n, "failed");
                let message = e.to_string();
                let message = crate::text::redact(&message, secrets);
                let _ = serde_json::to_writer(&mut w.scratch, message.as_ref());
                w.scratch.push(b'}');
            }
        }
        // not synced: an outcome lost in a crash leaves the step unknown, the careful side
        let _ = w.commit(&self.path, Reach::Buffered);
    }

    /// Records how the run ended (written, with everything before it; not synced: a power cut
    /// that loses it leaves a run to resume whose done steps are handed back, and whose
    /// outcomes not on disk are unknown, the careful side); a resume that stopped at a
    /// mismatch leaves the run as it was.
    pub fn end(&self, outcome: &str) {
        if self.refused() {
            return;
        }
        let _ = lock(&self.file).line(
            &self.path,
            &json!({"end": outcome, "at": store::timestamp()}),
            Reach::Written,
        );
    }
}

/// Where run `id`'s journal is; refused for an id that names no run.
fn journal_path(host: &dyn Caller, id: &str) -> Result<PathBuf> {
    let ok = !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    let path = runs_dir(host).join(format!("{id}.jsonl"));
    if !ok || !path.is_file() {
        return Err(Error::Refused(format!(
            "there is no run `{id}`; `lmcp runs` lists the runs"
        )));
    }
    Ok(path)
}

/// A journal whose lines skip a step (a write lost in between): what follows cannot be matched
/// to what ran, so the run is not resumed.
fn gap(path: &Path, missing: usize) -> Error {
    Error::Corrupt {
        path: path.to_path_buf(),
        message: format!(
            "the line of state-changing call {missing} is missing (a write to the journal failed \
             or was damaged), so the steps after it cannot be trusted; run the program anew \
             (without --resume)"
        ),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The text of the result in step `n`'s outcome line, as [`Journal::finished`] lays it out
/// (`{"step":N,"result":TEXT,"seal":"HEX"}`); `None` for a line laid out otherwise.
fn result_text(line: &str, n: u64) -> Option<&str> {
    let rest = line.strip_prefix(&format!("{{\"step\":{n},\"result\":"))?;
    let rest = rest.strip_suffix("\"}")?;
    let (text, hex) = rest.split_at_checked(rest.len().checked_sub(64 + 9)?)?;
    hex.strip_prefix(",\"seal\":\"")?;
    Some(text)
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
    pub fn read(host: &dyn Caller, id: &str) -> Result<RunLog> {
        RunLog::read_path(&journal_path(host, id)?)
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
        // bytes, then text: a last line torn inside a character must not hide the run
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        let text = String::from_utf8_lossy(&bytes);
        let mut lines = text
            .lines()
            .filter_map(|line| Some((serde_json::from_str::<Value>(line).ok()?, line)));
        let (header, _) = lines.next().ok_or_else(|| Error::Corrupt {
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
        for (l, line) in lines {
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
                    result_text: None,
                };
                // a resume writes the steps it runs again under the same numbers
                if i < log.steps.len() {
                    log.steps[i] = step;
                } else if i == log.steps.len() {
                    log.steps.push(step);
                } else {
                    return Err(gap(path, log.steps.len() + 1));
                }
            } else if i >= log.steps.len() {
                // an outcome whose start line is not there
                return Err(gap(path, n as usize));
            } else if let Some(step) = log.steps.get_mut(i) {
                step.outcome = if let Some(v) = l.get("result") {
                    step.seal = l["seal"].as_str().map(str::to_string);
                    step.result_text = result_text(line, n).map(str::to_string);
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
    pub fn all(host: &dyn Caller) -> Vec<RunLog> {
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

    fn journal(dir: &Path, lines: &[&str], tail: &[u8]) -> PathBuf {
        let path = dir.join("r1.jsonl");
        let mut text = lines.join("\n").into_bytes();
        text.push(b'\n');
        text.extend_from_slice(tail);
        std::fs::write(&path, text).unwrap();
        path
    }

    const HEAD: &str = r#"{"run":"r1","program":"p","fingerprint":"f","started":"t"}"#;

    /// A journal that skips a step (its line lost to a failed write) is not resumed: the steps
    /// after the gap would be matched to the wrong calls, and done ones run again.
    #[test]
    fn a_journal_with_a_missing_step_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let start = |n: u32| format!(r#"{{"step":{n},"tool":"t","args":"a"}}"#);
        let gap = journal(dir.path(), &[HEAD, &start(1), &start(3)], b"");
        let e = RunLog::read_path(&gap).unwrap_err().to_string();
        assert!(e.contains("call 2 is missing"), "{e}");
        let orphan = journal(
            dir.path(),
            &[HEAD, &start(1), r#"{"step":2,"result":1}"#],
            b"",
        );
        let e = RunLog::read_path(&orphan).unwrap_err().to_string();
        assert!(e.contains("call 2 is missing"), "{e}");
        let fine = journal(dir.path(), &[HEAD, &start(1), &start(2), &start(1)], b"");
        assert_eq!(RunLog::read_path(&fine).unwrap().steps.len(), 2);
    }

    /// A last line torn inside a character (a full disk) is skipped, not the whole journal.
    #[test]
    fn a_line_torn_inside_a_character_hides_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let start = r#"{"step":1,"tool":"t","args":"a"}"#;
        let path = journal(
            dir.path(),
            &[HEAD, start],
            "{\"step\":1,\"result\":\"é"
                .as_bytes()
                .split_last()
                .unwrap()
                .1,
        );
        let log = RunLog::read_path(&path).unwrap();
        assert_eq!(log.steps.len(), 1);
        assert!(
            log.steps[0].outcome.is_none(),
            "the torn outcome is unknown"
        );
    }

    /// After a write fails, the journal takes no more lines: the steps that would make them do
    /// not run, so no line ever stands after a gap.
    #[test]
    fn after_a_failed_write_no_line_is_taken() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        std::fs::write(&path, "").unwrap();
        // a handle that cannot write stands for a full disk
        let file = File::open(&path).unwrap();
        let writer = Writer::open(file, None, Keyed::new(&[1u8; 32]));
        let mut w = lock(&writer);
        w.scratch.extend_from_slice(b"{}");
        assert!(w.commit(&path, Reach::Written).is_err());
        w.scratch.extend_from_slice(b"{}");
        let e = w.commit(&path, Reach::Buffered).unwrap_err().to_string();
        assert!(e.contains("could not be written"), "{e}");
    }

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
    fn pruning_reads_few_journals_however_many_failed_runs_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..MAX_RUNS + 3 {
            let end = if i < 2 * PRUNE_LOOKS {
                "failed"
            } else {
                "done"
            };
            let text = format!("{{\"run\":\"r{i:05}\"}}\n{{\"end\":\"{end}\"}}\n");
            std::fs::write(dir.path().join(format!("r{i:05}.jsonl")), text).unwrap();
        }
        prune(dir.path());
        let left = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(left, MAX_RUNS, "the three oldest go whatever their state");
        assert!(!dir.path().join("r00002.jsonl").exists());
        assert!(dir.path().join("r00003.jsonl").exists());
        // behind the failed runs the done ones wait: the next start reads no more than before
        prune(dir.path());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), MAX_RUNS);
    }

    #[test]
    fn keyed_hashes_are_hmac_sha256() {
        // RFC 4231, test cases 1 and 2: keys shorter than 32 bytes (HMAC pads a key with
        // zeros, as the array does)
        let mut key = [0u8; 32];
        key[..20].fill(0x0b);
        let mac = Keyed::new(&key).mac(|h| h.update(b"Hi There"));
        assert_eq!(
            mac.as_str(),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        let mut key = [0u8; 32];
        key[..4].copy_from_slice(b"Jefe");
        let mac = Keyed::new(&key).mac(|h| h.update(b"what do ya want for nothing?"));
        assert_eq!(
            mac.as_str(),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    /// Seals stay the bytes journals already hold: the HMAC of `seal2`, the step's number
    /// (little-endian) and the result's text.
    #[test]
    fn a_seal_is_the_hmac_of_its_tag_step_and_text() {
        let keyed = Keyed::new(&[9u8; 32]);
        let mut message = b"seal2".to_vec();
        message.extend(7u64.to_le_bytes());
        message.extend(br#"{"ok":true}"#);
        assert_eq!(
            keyed.seal(7, br#"{"ok":true}"#),
            keyed.mac(|h| h.update(&message))
        );
        assert_eq!(
            keyed.seal(7, br#"{"ok":true}"#).as_str(),
            "da0387a236d0323ebb1832f9a2fa189a53d03fa9fac2ddd94e291a6f90ce7824",
            "the value a hand-written HMAC over sha2 gave"
        );
    }

    #[test]
    fn a_result_is_read_back_with_the_text_its_seal_covers() {
        let line = format!(
            "{{\"step\":12,\"result\":{{\"a\": \"}}\"}},\"seal\":\"{}\"}}",
            "f".repeat(64)
        );
        assert_eq!(result_text(&line, 12), Some("{\"a\": \"}\"}"));
        assert_eq!(result_text(&line, 1), None, "another step's line");
        assert_eq!(
            result_text("{\"step\":12,\"result\":1}", 12),
            None,
            "no seal"
        );
        let short = format!(
            "{{\"step\":12,\"result\":1,\"seal\":\"{}\"}}",
            "f".repeat(63)
        );
        assert_eq!(result_text(&short, 12), None);
    }

    #[test]
    fn seals_verify_and_changed_results_do_not() {
        let keyed = Keyed::new(&[5u8; 32]);
        let text = r#"{"n": 7, "a": "x"}"#;
        let seal = keyed.seal(3, text.as_bytes());
        assert!(keyed.verifies(3, seal.as_str(), text));
        assert!(!keyed.verifies(4, seal.as_str(), text), "another step");
        let changed = r#"{"n": 8, "a": "x"}"#;
        assert!(!keyed.verifies(3, seal.as_str(), changed));
        // the seal as written: lowercase hex, 64 digits
        assert!(!keyed.verifies(3, &seal.as_str().to_uppercase(), text));
        assert!(!keyed.verifies(3, &seal.as_str()[..62], text));
        assert!(!keyed.verifies(3, "", text));
    }

    #[test]
    fn other_files_seals_are_their_own() {
        let sealer = Sealer(Keyed::new(&[6u8; 32]));
        let seal = sealer.seal("index", b"entry");
        assert!(sealer.verifies("index", b"entry", &seal));
        assert!(!sealer.verifies("index", b"entry!", &seal));
        assert!(!sealer.verifies("other", b"entry", &seal), "another use");
        assert!(
            !sealer.verifies("inde", b"xentry", &seal),
            "the tag is length-framed"
        );
        assert!(!Sealer(Keyed::new(&[7u8; 32])).verifies("index", b"entry", &seal));
        // never a journal seal of the same bytes
        assert_ne!(seal, Keyed::new(&[6u8; 32]).seal(0, b"entry").as_str());
    }

    #[test]
    fn argument_hashes_are_those_of_the_canonical_text() {
        // a plain HMAC of that text, with nothing else in it
        let keyed = Keyed::new(&[3u8; 32]);
        let v: Value =
            serde_json::from_str(r#"{"b": "\u00e9\n", "a": [1.5, null, {"y": true, "x": -3}]}"#)
                .unwrap();
        let text = r#"{"a":[1.5,null,{"x":-3,"y":true}],"b":"é\n"}"#;
        assert_eq!(
            keyed.value_hash(&v, &mut Vec::new()),
            keyed.mac(|h| h.update(text.as_bytes()))
        );
    }

    #[test]
    fn hashes_left_in_lines_are_filled_in_as_made_directly() {
        let keyed = Keyed::new(&[5u8; 32]);
        let args = json!({"b": 1, "a": "x\u{0}"});
        let mut canon = Vec::new();
        canonical(&args, &mut canon);
        assert!(
            !canon.contains(&MARK),
            "JSON text never holds the mark byte"
        );
        let mut src = b"{\"step\":3,\"tool\":\"t\",\"args\":\"".to_vec();
        src.extend([MARK, MARK_ARGS]);
        src.extend((canon.len() as u32).to_le_bytes());
        src.extend(&canon);
        src.extend(b"\"}\n{\"step\":3,\"result\":");
        let text = br#"{"n":1}"#;
        src.extend(text);
        src.extend(SEAL_FIELD);
        src.extend([MARK, MARK_SEAL]);
        src.extend(3u64.to_le_bytes());
        src.extend((text.len() as u32).to_le_bytes());
        src.extend(b"\"}\n");
        let mut out = Vec::new();
        render(&keyed, &src, &mut out);
        let out = String::from_utf8(out).unwrap();
        let want = format!(
            "{{\"step\":3,\"tool\":\"t\",\"args\":\"{}\"}}\n{{\"step\":3,\"result\":{{\"n\":1}},\"seal\":\"{}\"}}\n",
            keyed.value_hash(&args, &mut Vec::new()).as_str(),
            keyed.seal(3, text).as_str()
        );
        assert_eq!(out, want);
        let second = out.lines().nth(1).unwrap();
        assert_eq!(result_text(second, 3), Some(r#"{"n":1}"#));
    }

    #[test]
    fn argument_hashes_ignore_key_order() {
        let a: Value = serde_json::from_str(r#"{"b": 1, "a": [1, {"y": 2, "x": 3}]}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a": [1, {"x": 3, "y": 2}], "b": 1}"#).unwrap();
        let key = [7u8; 32];
        let keyed = Keyed::new(&key);
        let hash = |k: &Keyed, v: &Value| k.value_hash(v, &mut Vec::new());
        assert_eq!(hash(&keyed, &a), hash(&keyed, &b));
        assert_ne!(hash(&keyed, &a), hash(&keyed, &json!({"b": 2})));
        assert_ne!(hash(&keyed, &a), hash(&Keyed::new(&[8u8; 32]), &a), "keyed");
    }
}
