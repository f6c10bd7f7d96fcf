//! Where lmcp keeps its files, and the only safe ways to write them.
//!
//! This is the one module that touches the `directories` crate. [`Paths`] comes from the platform
//! conventions (`~/.config/lmcp`, `~/.local/share/lmcp` on Linux) unless `LMCP_HOME` names an
//! absolute directory, which then holds everything (`config/` and `data/` inside it); tests always
//! set it to a temporary directory.
//!
//! Writes are atomic: [`atomic_write`] writes a temporary file in the same directory, fsyncs it,
//! renames it over the target and fsyncs the directory, so a reader sees the old file or the new
//! one, never half of either. Read-modify-write cycles hold a [`FileLock`] (an advisory OS lock on
//! a `.lock` file beside the target) so two `lmcp` processes never lose each other's changes.
//! Files that do not parse are reported with their path by [`read_json`] and never silently
//! replaced: the caller decides, and [`quarantine`] moves a corrupt file aside before it is
//! rewritten so nothing is lost.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};

/// The directories lmcp uses. Build it once with [`Paths::discover`] and pass it around.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// Holds `config.json` (grants, modes, roots).
    pub config_dir: PathBuf,
    /// Holds history, libraries of programs and the default workspace.
    pub data_dir: PathBuf,
}

/// The environment variable that relocates every lmcp file under one directory.
pub const HOME_VAR: &str = "LMCP_HOME";

impl Paths {
    /// Finds the directories: `LMCP_HOME` if set (it must be absolute), else the platform's.
    pub fn discover() -> Result<Paths> {
        match std::env::var_os(HOME_VAR) {
            Some(home) if !home.is_empty() => {
                let home = PathBuf::from(home);
                if !home.is_absolute() {
                    return Err(Error::Usage(format!(
                        "{HOME_VAR} must be an absolute path, got `{}`",
                        home.display()
                    )));
                }
                Ok(Paths::under(&home))
            }
            _ => {
                let dirs = directories::ProjectDirs::from("", "", "lmcp").ok_or_else(|| {
                    Error::Usage(format!(
                        "cannot find a home directory for lmcp's files; set {HOME_VAR} to an absolute path"
                    ))
                })?;
                Ok(Paths {
                    config_dir: dirs.config_dir().to_path_buf(),
                    data_dir: dirs.data_dir().to_path_buf(),
                })
            }
        }
    }

    /// Every lmcp directory under one root, as `LMCP_HOME` lays them out.
    pub fn under(home: &Path) -> Paths {
        Paths {
            config_dir: home.join("config"),
            data_dir: home.join("data"),
        }
    }

    /// The config file: grants, modes, roots, disabled tools.
    pub fn config_file(&self) -> PathBuf {
        self.config_dir.join("config.json")
    }

    /// The call history ring (JSON lines).
    pub fn history_file(&self) -> PathBuf {
        self.data_dir.join("history.jsonl")
    }

    /// The default root for the file tools and the working folder of `run_command`.
    pub fn workspace_dir(&self) -> PathBuf {
        self.data_dir.join("workspace")
    }

    /// Friction reports waiting to be sent (emptied when signals are turned off).
    pub fn friction_outbox(&self) -> PathBuf {
        self.data_dir.join("friction").join("outbox.json")
    }
}

/// The person's home folder as the platform names it; `None` where it cannot say.
pub fn home_dir() -> Option<PathBuf> {
    directories::BaseDirs::new().map(|b| b.home_dir().to_path_buf())
}

/// lmcp's own folders (config and data, all but the workspace), known by path and by identity
/// (device and inode), so no other spelling of them — a symlink, a bind mount — gets in.
pub struct OwnFolders {
    /// The config and data folders (canonical).
    pub paths: Vec<PathBuf>,
    /// Their identities.
    pub ids: Vec<(u64, u64)>,
    /// The workspace (canonical): inside the data folder, yet open to the file tools.
    pub workspace: PathBuf,
    /// Its identity.
    pub workspace_id: Option<(u64, u64)>,
}

/// A folder's identity: device and inode (none where the platform cannot say).
pub fn identity(path: &Path) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

impl OwnFolders {
    /// lmcp's own folders under these paths.
    pub fn of(paths: &Paths) -> OwnFolders {
        let canon = |p: &Path| fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let own = [&paths.config_dir, &paths.data_dir];
        let workspace = canon(&paths.workspace_dir());
        OwnFolders {
            paths: own.iter().map(|p| canon(p)).collect(),
            ids: own.iter().filter_map(|p| identity(p)).collect(),
            workspace_id: identity(&workspace),
            workspace,
        }
    }

    /// Whether `real` (a resolved path) is one of lmcp's own folders or inside one, by path or
    /// by the identity of any folder it lies in; the workspace is not.
    pub fn contains(&self, real: &Path) -> bool {
        if real.starts_with(&self.workspace) {
            return false;
        }
        if self.paths.iter().any(|p| real.starts_with(p)) {
            return true;
        }
        for folder in real.ancestors() {
            let Some(id) = identity(folder) else { continue };
            if Some(id) == self.workspace_id {
                return false;
            }
            if self.ids.contains(&id) {
                return true;
            }
        }
        false
    }

    /// Whether the file with this identity (device, inode) is one of lmcp's own: a file in its
    /// config or data folders, outside the workspace. For a file with more than one name (a hard
    /// link), whose path shows only the name it was opened by. Walks those folders, so it is
    /// asked only of such files; a folder that cannot be read counts as holding it (fail closed).
    pub fn holds_file(&self, id: (u64, u64)) -> bool {
        let mut stack: Vec<PathBuf> = self.paths.clone();
        let mut seen = 0usize;
        while let Some(dir) = stack.pop() {
            if dir.starts_with(&self.workspace) {
                continue;
            }
            let Ok(entries) = fs::read_dir(&dir) else {
                if dir.exists() {
                    return true;
                }
                continue;
            };
            for entry in entries.flatten() {
                seen += 1;
                // a bound on the walk: past it, the answer is yes (refuse), not a long scan
                if seen > MAX_OWN_FILES {
                    return true;
                }
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let path = entry.path();
                if kind.is_dir() {
                    stack.push(path);
                } else if kind.is_file() && identity(&path) == Some(id) {
                    return true;
                }
            }
        }
        false
    }
}

/// The most entries [`OwnFolders::holds_file`] looks through before it answers yes.
const MAX_OWN_FILES: usize = 100_000;

/// Creates a directory and its parents, naming the path on failure.
pub fn ensure_dir(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))
}

/// The current time as saved records carry it: RFC 3339, UTC, whole seconds.
pub fn timestamp() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Writes `bytes` to `path` atomically: temp file in the same directory, fsync, rename, fsync dir.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<()> {
    atomic_write_with(path, &[bytes], false)
}

/// Like [`atomic_write`], with the content given in parts (written one after another), so large
/// pieces need not be joined in memory first.
pub fn atomic_write_parts(path: &Path, parts: &[&[u8]]) -> Result<()> {
    atomic_write_with(path, parts, false)
}

/// Like [`atomic_write`], for files only the user may read (0600 from the first byte on Unix).
pub fn atomic_write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    atomic_write_with(path, &[bytes], true)
}

/// Copies `from` to `to` atomically (the kernel copies; same temp, fsync and rename as
/// [`atomic_write`]), so a large file is never read into memory.
pub fn atomic_copy(from: &Path, to: &Path) -> Result<()> {
    let dir = parent_of(to);
    ensure_dir(dir)?;
    let tmp = temp_path(dir, &file_name_of(to));
    let copied = fs::copy(from, &tmp)
        .map_err(|e| Error::io(from, e))
        .and_then(|_| {
            File::open(&tmp)
                .and_then(|f| sync_file(&f))
                .map_err(|e| Error::io(&tmp, e))
        });
    if let Err(e) = copied {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    commit(&tmp, to, Durability::Synced)
}

/// Writes a new, uniquely named temporary file in `dir` with `parts` and syncs it, for the caller
/// to rename into place (then [`sync_dir`]) or remove.
pub fn write_temp(dir: &Path, parts: &[&[u8]]) -> Result<PathBuf> {
    write_temp_as(dir, parts, Durability::Synced)
}

/// [`write_temp`], syncing the file only when `durability` asks for it.
pub fn write_temp_as(dir: &Path, parts: &[&[u8]], durability: Durability) -> Result<PathBuf> {
    // the folder must exist: one removed meanwhile (a workspace deleted) is not made again
    write_temp_file(dir, "new", parts, false, durability)
}

/// Whether a write waits for the disk. Everything lmcp keeps is [`Durability::Synced`]; only
/// files that are thrown away when the command that made them ends (a scratch workspace that
/// `lmcp pdf -o` imports into, builds from and removes) may skip it: a crash loses nothing
/// anyone keeps, and the waits were a third of that command's time (#39).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// The file and the renames that place it reach the disk before the write returns.
    Synced,
    /// The kernel writes the file back when it likes; a crash may lose it.
    Unsynced,
}

thread_local! {
    /// The syncs (file or folder) this thread has asked for, counted for [`syncs_on_this_thread`].
    static SYNCS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many fsyncs the calling thread has made through this module: lets a test show that a
/// scratch write waits for no disk while a kept one does (a counter on the thread, so tests
/// running side by side do not mix their counts).
pub fn syncs_on_this_thread() -> u64 {
    SYNCS.with(std::cell::Cell::get)
}

/// `file.sync_all()`, counted.
fn sync_file(file: &File) -> std::io::Result<()> {
    SYNCS.with(|n| n.set(n.get() + 1));
    file.sync_all()
}

/// Makes renames in a directory durable (best effort: some platforms cannot open directories).
pub fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = sync_file(&d);
    }
}

/// [`sync_dir`] when `durability` asks for it.
pub fn sync_dir_as(dir: &Path, durability: Durability) {
    if durability == Durability::Synced {
        sync_dir(dir);
    }
}

/// Moves `from` to `to`, replacing `to` atomically: a rename where both are on one file system
/// (then the directory is synced), else [`atomic_copy`] and removing `from`.
pub fn atomic_move(from: &Path, to: &Path) -> Result<()> {
    let dir = parent_of(to);
    ensure_dir(dir)?;
    if fs::rename(from, to).is_ok() {
        sync_dir(dir);
        return Ok(());
    }
    atomic_copy(from, to)?;
    let _ = fs::remove_file(from);
    Ok(())
}

fn atomic_write_with(path: &Path, parts: &[&[u8]], private: bool) -> Result<()> {
    atomic_write_as(path, parts, private, Durability::Synced)
}

fn atomic_write_as(
    path: &Path,
    parts: &[&[u8]],
    private: bool,
    durability: Durability,
) -> Result<()> {
    let dir = parent_of(path);
    ensure_dir(dir)?;
    let tmp = write_temp_file(dir, &file_name_of(path), parts, private, durability)?;
    commit(&tmp, path, durability)
}

/// The directory a path is in (`.` for a bare file name).
fn parent_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

fn file_name_of(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A temporary name in `dir` no other writer (thread or process) uses.
/// Whether a file name is one of lmcp's temporary files (`.NAME.PID.N.tmp`, `.lmcp-tmp-ID`).
pub fn is_temp_name(name: &str) -> bool {
    if name.starts_with(".lmcp-tmp-") {
        return true;
    }
    // `.NAME.PID.N.tmp`: the two parts before `tmp` are numbers
    let Some(rest) = name.strip_prefix('.').and_then(|r| r.strip_suffix(".tmp")) else {
        return false;
    };
    let mut parts = rest.rsplitn(3, '.');
    let (n, pid, base) = (parts.next(), parts.next(), parts.next());
    let digits =
        |p: Option<&str>| p.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    digits(n) && digits(pid) && base.is_some_and(|b| !b.is_empty())
}

/// Removes lmcp's temporary files older than `age` directly in `dirs` (writes a kill cut short
/// leave them behind); younger ones may belong to a write in progress in another process.
pub fn sweep_temp_files(dirs: &[PathBuf], age: std::time::Duration) {
    let now = std::time::SystemTime::now();
    for dir in dirs {
        let Ok(entries) = fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if !is_temp_name(&name.to_string_lossy()) {
                continue;
            }
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| now.duration_since(t).ok())
                .is_some_and(|d| d > age);
            if old {
                let _ = fs::remove_file(entry.path());
            }
        }
    }
}

fn temp_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!(".{name}.{}.{}.tmp", std::process::id(), unique()))
}

/// Creates a temporary file in `dir` (0600 from the first byte when `private`, on Unix), writes
/// `parts` and syncs it; on failure it is removed.
fn write_temp_file(
    dir: &Path,
    name: &str,
    parts: &[&[u8]],
    private: bool,
    durability: Durability,
) -> Result<PathBuf> {
    let tmp = temp_path(dir, name);
    let written = (|| {
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        if private {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        #[cfg(not(unix))]
        let _ = private;
        let mut f = options.open(&tmp)?;
        for part in parts {
            f.write_all(part)?;
        }
        match durability {
            Durability::Synced => sync_file(&f),
            Durability::Unsynced => Ok(()),
        }
    })();
    match written {
        Ok(()) => Ok(tmp),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(Error::io(&tmp, e))
        }
    }
}

/// Renames a synced temporary file over `path` and syncs the directory, so the rename is
/// durable; on failure the temporary file is removed and `path` is untouched.
fn commit(tmp: &Path, path: &Path, durability: Durability) -> Result<()> {
    if let Err(e) = fs::rename(tmp, path) {
        let _ = fs::remove_file(tmp);
        return Err(Error::io(path, e));
    }
    sync_dir_as(parent_of(path), durability);
    Ok(())
}

/// Serializes `value` as pretty JSON (with a final newline) and writes it atomically.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    write_json_as(path, value, Durability::Synced)
}

/// [`write_json`], syncing only when `durability` asks for it.
pub fn write_json_as<T: Serialize>(path: &Path, value: &T, durability: Durability) -> Result<()> {
    let mut text = serde_json::to_vec_pretty(value).map_err(|e| Error::Corrupt {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    text.push(b'\n');
    atomic_write_as(path, &[&text], false, durability)
}

/// The bytes of the plain file at `path`, at most `max` of them: a link, a FIFO, a device or
/// a folder there is an error naming it, and so is a file over `max` (checked on the opened
/// file). lmcp's own stores are written by lmcp only; this is how they are read back when
/// something else may have been put in their place, so a planted FIFO cannot hang a reader
/// and a planted link cannot lead one outside.
pub fn read_plain(path: &Path, max: usize) -> Result<Vec<u8>> {
    use std::io::Read;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // a FIFO opens at once instead of waiting for a writer; a link is not followed
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW);
    }
    let file = options.open(path).map_err(|e| {
        #[cfg(unix)]
        if e.raw_os_error() == Some(libc::ELOOP) {
            return Error::Refused(format!(
                "{} is a link, where lmcp keeps a plain file: something other than lmcp put it \
                 there",
                path.display()
            ));
        }
        Error::io(path, e)
    })?;
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    if !meta.is_file() {
        return Err(Error::Refused(format!(
            "{} is not a plain file",
            path.display()
        )));
    }
    if meta.len() > max as u64 {
        return Err(Error::Limit {
            what: format!("{} is {} bytes", path.display(), meta.len()),
            limit: format!("{max} bytes"),
        });
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(path, e))?;
    if bytes.len() > max {
        return Err(Error::Limit {
            what: format!("{} grew past {max} bytes as it was read", path.display()),
            limit: format!("{max} bytes"),
        });
    }
    Ok(bytes)
}

/// [`read_plain`], as UTF-8 text (an error names the file otherwise).
pub fn read_plain_text(path: &Path, max: usize) -> Result<String> {
    String::from_utf8(read_plain(path, max)?)
        .map_err(|_| Error::Refused(format!("{} is not UTF-8 text", path.display())))
}

/// Reads a JSON file. `Ok(None)` when it does not exist; [`Error::Corrupt`] (with the path, line
/// and column) when it does not parse; [`Error::Io`] when it cannot be read.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<Option<T>> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(path, e)),
    };
    parse_json(path, &bytes)
}

/// [`read_json`] of a file in one of lmcp's own stores, read with [`read_plain`]: a link or a
/// FIFO put in its place is an error, not followed or waited on.
pub fn read_plain_json<T: DeserializeOwned>(path: &Path, max: usize) -> Result<Option<T>> {
    if fs::symlink_metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
        return Ok(None);
    }
    parse_json(path, &read_plain(path, max)?)
}

fn parse_json<T: DeserializeOwned>(path: &Path, bytes: &[u8]) -> Result<Option<T>> {
    serde_json::from_slice(bytes)
        .map(Some)
        .map_err(|e| Error::Corrupt {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
}

/// Moves a corrupt file aside (`NAME.corrupt-TIME-RANDOM`, a name of its own) so nothing ever
/// writes over it.
/// Returns where it went.
pub fn quarantine(path: &Path) -> Result<PathBuf> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // A time and a random part: two files set aside in the same second never share a name,
    // and the hard link below never replaces anything.
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S");
    let unique = uuid::Uuid::new_v4().simple().to_string();
    // A time and a random part: two files set aside in the same second never share a name, so
    // the rename never replaces anything. A folder or FIFO in the file's place moves the same way.
    let aside = path.with_file_name(format!("{name}.corrupt-{stamp}-{}", &unique[..8]));
    fs::rename(path, &aside).map_err(|e| Error::io(path, e))?;
    Ok(aside)
}

/// The lock file guarding `target`: `.NAME.lock` beside it.
pub fn lock_path(target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    target.with_file_name(format!(".{name}.lock"))
}

/// An open lock file that can be locked many times; for writers that lock on every write (the
/// history ring) and should not reopen the file each time.
#[derive(Debug)]
pub struct LockFile {
    file: File,
    path: PathBuf,
}

impl LockFile {
    /// Opens the lock file guarding `target` if it exists and may be opened; for readers,
    /// which neither make one (nothing was ever written) nor fail without one (a read-only
    /// folder).
    pub fn existing(target: &Path) -> Option<LockFile> {
        let path = lock_path(target);
        let file = OpenOptions::new().write(true).open(&path).ok()?;
        Some(LockFile { file, path })
    }

    /// Opens (creating if needed) the lock file guarding `target`.
    pub fn open(target: &Path) -> Result<LockFile> {
        let path = lock_path(target);
        if let Some(dir) = path.parent() {
            ensure_dir(dir)?;
        }
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        Ok(LockFile { file, path })
    }

    /// Blocks until the lock is ours; it is released when the guard drops.
    pub fn lock(&self) -> Result<LockGuard<'_>> {
        self.file.lock().map_err(|e| Error::io(&self.path, e))?;
        Ok(LockGuard { file: &self.file })
    }
}

/// A held lock on a [`LockFile`].
#[derive(Debug)]
pub struct LockGuard<'a> {
    file: &'a File,
}

impl Drop for LockGuard<'_> {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

/// An exclusive advisory lock on `.TARGET.lock`, held until dropped. Every read-modify-write of a
/// shared file takes one, so concurrent `lmcp` processes serialize instead of losing updates.
#[derive(Debug)]
pub struct FileLock {
    lock: LockFile,
}

impl FileLock {
    /// Blocks until the lock guarding `target` is ours.
    pub fn acquire(target: &Path) -> Result<FileLock> {
        let lock = LockFile::open(target)?;
        lock.file.lock().map_err(|e| Error::io(&lock.path, e))?;
        Ok(FileLock { lock })
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        let _ = self.lock.file.unlock();
    }
}

/// Whether two metadata describe the same file (so a held handle still names the path's file).
pub fn same_file(a: &fs::Metadata, b: &fs::Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        a.dev() == b.dev() && a.ino() == b.ino()
    }
    #[cfg(not(unix))]
    {
        let _ = (a, b);
        false
    }
}

/// A process-local counter so temp names never collide between threads.
fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_are_recognised_and_user_files_are_not() {
        assert!(is_temp_name(".lmcp-tmp-0123abcd"));
        assert!(is_temp_name(".config.json.4242.7.tmp"));
        assert!(!is_temp_name(".notes.tmp"));
        assert!(!is_temp_name("draft.1.2.tmp"));
        assert!(!is_temp_name(".a.b.tmp"));
    }

    #[test]
    fn atomic_move_renames_over_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let from = dir.path().join("a.bin");
        let to = dir.path().join("out/b.bin");
        fs::write(&from, b"new").unwrap();
        fs::create_dir_all(dir.path().join("out")).unwrap();
        fs::write(&to, b"old").unwrap();
        atomic_move(&from, &to).unwrap();
        assert_eq!(fs::read(&to).unwrap(), b"new");
        assert!(!from.exists());
        let e = atomic_move(&from, &to).unwrap_err();
        assert!(e.to_string().contains("a.bin"), "{e}");
        assert_eq!(
            fs::read(&to).unwrap(),
            b"new",
            "a failed move leaves the target"
        );
    }

    #[test]
    fn atomic_copy_copies_and_leaves_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let from = dir.path().join("a.bin");
        fs::write(&from, b"payload").unwrap();
        let to = dir.path().join("out/b.bin");
        atomic_copy(&from, &to).unwrap();
        assert_eq!(fs::read(&to).unwrap(), b"payload");
        let e = atomic_copy(&dir.path().join("missing"), &to).unwrap_err();
        assert!(e.to_string().contains("missing"), "{e}");
        assert_eq!(
            fs::read(&to).unwrap(),
            b"payload",
            "a failed copy leaves the old file"
        );
        let names: Vec<_> = fs::read_dir(dir.path().join("out"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[test]
    fn atomic_write_replaces_whole_file_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/a.json");
        atomic_write(&p, b"one").unwrap();
        atomic_write(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = fs::read_dir(p.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["a.json"]);
    }

    #[test]
    fn read_json_reports_corrupt_file_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.json");
        assert!(read_json::<serde_json::Value>(&p).unwrap().is_none());
        fs::write(&p, "{ nope").unwrap();
        let err = read_json::<serde_json::Value>(&p).unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }));
        assert!(err.to_string().contains("c.json"), "{err}");
        let aside = quarantine(&p).unwrap();
        assert!(!p.exists() && aside.exists());
    }

    #[test]
    fn lmcp_home_lays_out_config_and_data() {
        let p = Paths::under(Path::new("/x"));
        assert_eq!(p.config_file(), Path::new("/x/config/config.json"));
        assert_eq!(p.history_file(), Path::new("/x/data/history.jsonl"));
    }
}
