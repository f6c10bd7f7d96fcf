//! File access beneath the allowed roots, for every tool that touches files named by a caller.
//!
//! A path is first placed: relative paths land in the workspace, absolute ones must lie inside a
//! root once their existing part is resolved, and `..` is refused. Then it is *opened beneath
//! that root's open handle* (`cap-std`: every component resolved relative to the root, symlinks
//! followed only while they stay inside it), so a symlink swapped between the check and the open
//! cannot lead outside. Temp files for writes are made the same way, beside their target.
//!
//! Whatever the roots say, lmcp's own folders are never reachable: its config folder (grants,
//! secrets) and its data folder (history, saved programs), all but the file workspace. That is
//! checked on what was actually opened (its path as the kernel resolved it), not on the text of
//! the path, so no spelling or link gets around it.

use std::fs;
use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions};

use crate::error::{Error, Result};
use crate::host::Host;
use crate::store::OwnFolders;

/// The roots of one call, resolved, with lmcp's own folders marked off.
pub struct Roots {
    /// Canonical roots; the first is the workspace, where relative paths land.
    roots: Vec<PathBuf>,
    /// lmcp's own folders.
    own: OwnFolders,
    /// The workspace (canonical).
    workspace: PathBuf,
    /// Reached over the network: the workspace is the only root.
    remote: bool,
}

/// A caller's path placed inside a root.
#[derive(Debug)]
pub struct Placed {
    /// The root it lies in (canonical).
    pub root: PathBuf,
    /// The path beneath the root (no `..`, no leading `/`; empty for the root itself).
    pub rel: PathBuf,
}

impl Placed {
    /// The path for people and results: root joined with the relative part.
    pub fn shown(&self) -> PathBuf {
        self.root.join(&self.rel)
    }

    fn open_root(&self) -> Result<Dir> {
        Dir::open_ambient_dir(&self.root, ambient_authority()).map_err(|e| Error::io(&self.root, e))
    }
}

/// The error for a path that escaped its root while it was opened (a symlink swapped in).
fn escaped(shown: &Path, e: std::io::Error) -> Error {
    if e.kind() == std::io::ErrorKind::PermissionDenied || e.raw_os_error() == Some(18) {
        Error::Refused(format!(
            "{} leads outside its root (through a symlink); add its folder with `lmcp roots add \
             DIR` if it should be reachable",
            shown.display()
        ))
    } else {
        Error::io(shown, e)
    }
}

/// The prechecks of the tools that take a path (`Precheck`, run by the gate before it asks):
/// the path argument placed inside a root, or refused as the handler would refuse it. Only the
/// placing is checked; the handler still opens beneath the root (a link swapped in later
/// cannot lead out).
fn place_arg(caller: &dyn crate::gate::Caller, args: &serde_json::Value, key: &str) -> Result<()> {
    let given = args.get(key).and_then(serde_json::Value::as_str);
    let input = given.filter(|p| !p.is_empty()).unwrap_or(".");
    Roots::of(Host::of(caller))?.place(input).map(|_| ())
}

/// The precheck of tools whose `path` names a file or folder.
pub fn path_precheck(caller: &dyn crate::gate::Caller, args: &serde_json::Value) -> Result<()> {
    place_arg(caller, args, "path")
}

/// The precheck of tools whose `cwd` names the folder they run in.
pub fn cwd_precheck(caller: &dyn crate::gate::Caller, args: &serde_json::Value) -> Result<()> {
    place_arg(caller, args, "cwd")
}

impl Roots {
    /// The host's roots now (the workspace is created on first use).
    pub fn of(host: &Host) -> Result<Roots> {
        let paths = host.paths();
        let mut listed = host.roots()?;
        // a caller over the network reaches lmcp's workspace only, never the person's folders
        let remote = host.transport() == crate::registry::Transport::Remote;
        if remote {
            listed.truncate(1);
        }
        let roots: Vec<PathBuf> = listed
            .iter()
            .filter_map(|r| fs::canonicalize(r).ok())
            .collect();
        let workspace = roots
            .first()
            .cloned()
            .ok_or_else(|| Error::Refused("no file roots are set".into()))?;
        Ok(Roots {
            roots,
            own: OwnFolders::of(paths),
            workspace,
            remote,
        })
    }

    /// Whether `real` (a resolved path) is one of lmcp's own folders or inside one.
    pub fn is_protected(&self, real: &Path) -> bool {
        self.own.contains(real)
    }

    fn refuse_protected(&self, real: &Path, input: &str) -> Result<()> {
        if self.is_protected(real) {
            return Err(Error::Refused(format!(
                "`{input}` is inside lmcp's own settings or data, which the file tools never \
                 reach, whatever the roots say; use `lmcp` commands to change settings"
            )));
        }
        Ok(())
    }

    /// Places a caller's path inside a root, by its resolved location; refused when outside
    /// every root, when it holds `..`, or when it is in lmcp's own folders.
    pub fn place(&self, input: &str) -> Result<Placed> {
        let given = Path::new(input);
        if given.components().any(|c| c == Component::ParentDir) {
            return Err(Error::Refused(format!(
                "`{input}` contains `..`; give a path inside an allowed root (see `lmcp roots`)"
            )));
        }
        let candidate = if given.is_absolute() {
            given.to_path_buf()
        } else {
            self.workspace.join(given)
        };
        let real = canonical_prefix(&candidate)?;
        self.refuse_protected(&real, input)?;
        // the deepest root holding it, so a root inside another is used as itself
        let root = self
            .roots
            .iter()
            .filter(|r| real.starts_with(r))
            .max_by_key(|r| r.components().count())
            .ok_or_else(|| {
                Error::Refused(if self.remote {
                    format!(
                        "`{input}` is outside the lmcp workspace, the only folder the file tools \
                         reach over HTTP; use a path inside it, or run lmcp over stdio or the \
                         command line for the other roots"
                    )
                } else {
                    format!(
                        "`{input}` is outside the allowed roots (through a symlink or an \
                         absolute path); add its folder with `lmcp roots add DIR` if it should \
                         be reachable"
                    )
                })
            })?;
        let rel = real
            .strip_prefix(root)
            .map(Path::to_path_buf)
            .unwrap_or_default();
        Ok(Placed {
            root: root.clone(),
            rel,
        })
    }

    /// Checks a regular file with more than one name (hard links). Its path shows the name it
    /// was opened by, not where else it lives: over HTTP, where the workspace is the only root,
    /// another name may be anywhere, so it is refused; anywhere, one of lmcp's own files (the
    /// HTTP token, the config) is refused whatever name it is reached by.
    fn check_links(&self, meta: &fs::Metadata, input: &str) -> Result<()> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            if !meta.is_file() || meta.nlink() <= 1 {
                return Ok(());
            }
            if self.remote {
                return Err(Error::Refused(format!(
                    "`{input}` has {} names (hard links), so it may be a file outside the \
                     workspace; over HTTP only files with one name are read. Copy it instead \
                     of linking it",
                    meta.nlink()
                )));
            }
            if self.own.holds_file((meta.dev(), meta.ino())) {
                return Err(Error::Refused(format!(
                    "`{input}` is a hard link to a file in lmcp's own settings or data, which \
                     the file tools never reach, whatever the roots say"
                )));
            }
        }
        #[cfg(not(unix))]
        let _ = (meta, input);
        Ok(())
    }

    /// Checks, on the opened handle itself, that it is not in lmcp's own folders.
    fn check_opened(&self, handle: &impl AsOpened, input: &str) -> Result<()> {
        match handle.real_path() {
            Some(real) => self.refuse_protected(&real, input),
            None => Ok(()),
        }
    }

    /// Opens a file for reading, beneath its root; at most `max` bytes, refused if larger.
    pub fn read(&self, input: &str, max: u64) -> Result<(PathBuf, Vec<u8>)> {
        let placed = self.place(input)?;
        let shown = placed.shown();
        if placed.rel.as_os_str().is_empty() {
            return Err(Error::Refused(format!(
                "{} is a folder; use list_dir to see what it holds",
                shown.display()
            )));
        }
        // Non-blocking: opening a FIFO to read waits for a writer, forever if none comes; the
        // kind is checked right after (a regular file ignores the flag).
        let mut options = OpenOptions::new();
        options.read(true);
        #[cfg(unix)]
        {
            use cap_std::fs::OpenOptionsExt;
            options.custom_flags(libc::O_NONBLOCK);
        }
        let file = placed
            .open_root()?
            .open_with(&placed.rel, &options)
            .map_err(|e| escaped(&shown, e))?;
        self.check_opened(&file, input)?;
        let file = file.into_std();
        let meta = file.metadata().map_err(|e| Error::io(&shown, e))?;
        self.check_links(&meta, input)?;
        if meta.is_dir() {
            return Err(Error::Refused(format!(
                "{} is a folder; use list_dir to see what it holds",
                shown.display()
            )));
        }
        if !meta.is_file() {
            return Err(Error::Refused(format!(
                "{} is not a regular file",
                shown.display()
            )));
        }
        if meta.len() > max {
            return Err(Error::Limit {
                what: format!("{} is {} bytes", shown.display(), meta.len()),
                limit: format!("{max} bytes"),
            });
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        // `take` bounds a file that grows while it is read
        file.take(max + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| Error::io(&shown, e))?;
        if bytes.len() as u64 > max {
            return Err(Error::Limit {
                what: format!("{} grew past the limit while it was read", shown.display()),
                limit: format!("{max} bytes"),
            });
        }
        Ok((shown, bytes))
    }

    /// Opens a folder beneath its root, for listing.
    pub fn open_dir(&self, input: &str) -> Result<(PathBuf, Dir)> {
        let placed = self.place(input)?;
        let shown = placed.shown();
        let root = placed.open_root()?;
        let dir = if placed.rel.as_os_str().is_empty() {
            root
        } else {
            root.open_dir(&placed.rel).map_err(|e| escaped(&shown, e))?
        };
        self.check_opened(&dir, input)?;
        Ok((shown, dir))
    }

    /// Writes a file atomically beneath its root: a temp file beside it, synced, renamed over
    /// it, the folder synced; parent folders are created beneath the root. Refuses a folder,
    /// and an existing file unless `overwrite`. Returns the path and whether a file was replaced.
    pub fn write(&self, input: &str, bytes: &[u8], overwrite: bool) -> Result<(PathBuf, bool)> {
        if input.ends_with('/') || input.ends_with(std::path::MAIN_SEPARATOR) {
            return Err(Error::Refused(format!(
                "`{input}` ends with `/`, which names a folder; give a file name"
            )));
        }
        let placed = self.place(input)?;
        let shown = placed.shown();
        let name = match placed.rel.file_name() {
            Some(n) => n.to_os_string(),
            None => {
                return Err(Error::Refused(format!("{} is a folder", shown.display())));
            }
        };
        let root = placed.open_root()?;
        let parent_rel = placed.rel.parent().unwrap_or(Path::new(""));
        let parent = if parent_rel.as_os_str().is_empty() {
            root
        } else {
            root.create_dir_all(parent_rel)
                .map_err(|e| escaped(&shown, e))?;
            root.open_dir(parent_rel).map_err(|e| escaped(&shown, e))?
        };
        self.check_opened(&parent, input)?;
        let replaced = match parent.symlink_metadata(&name) {
            Ok(m) if m.is_dir() => {
                return Err(Error::Refused(format!("{} is a folder", shown.display())));
            }
            Ok(_) => true,
            Err(_) => false,
        };
        if replaced && !overwrite {
            return Err(Error::Refused(format!(
                "{} exists; pass {} to replace it",
                shown.display(),
                crate::text::arg_words::arg("overwrite", "true")
            )));
        }
        // short whatever the name's length (a 255-byte name still gets a temp file)
        let temp = format!(".lmcp-tmp-{}", uuid::Uuid::new_v4().simple());
        let written = (|| -> std::io::Result<()> {
            let mut f = parent.open_with(&temp, OpenOptions::new().write(true).create_new(true))?;
            f.write_all(bytes)?;
            f.sync_all()?;
            parent.rename(&temp, &parent, &name)
        })();
        if let Err(e) = written {
            let _ = parent.remove_file(&temp);
            return Err(Error::io(&shown, e));
        }
        if let Ok(d) = parent.try_clone() {
            let _ = d.into_std_file().sync_all();
        }
        Ok((shown, replaced))
    }
}

/// A handle whose resolved path can be asked of the kernel.
trait AsOpened {
    /// Where the handle really is, when the platform can say.
    fn real_path(&self) -> Option<PathBuf>;
}

#[cfg(target_os = "linux")]
fn fd_path(fd: std::os::fd::RawFd) -> Option<PathBuf> {
    fs::read_link(format!("/proc/self/fd/{fd}")).ok()
}

impl AsOpened for cap_std::fs::File {
    fn real_path(&self) -> Option<PathBuf> {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            fd_path(self.as_raw_fd())
        }
        #[cfg(not(target_os = "linux"))]
        {
            None
        }
    }
}

impl AsOpened for Dir {
    fn real_path(&self) -> Option<PathBuf> {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            fd_path(self.as_raw_fd())
        }
        #[cfg(not(target_os = "linux"))]
        {
            None
        }
    }
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
    use crate::store::identity;

    /// Roots for tests: `ws` first, and `own` as lmcp's own folder.
    fn roots(list: &[&Path], own: &Path) -> Roots {
        let canon = |p: &Path| fs::canonicalize(p).unwrap();
        Roots {
            roots: list.iter().map(|p| canon(p)).collect(),
            own: OwnFolders {
                paths: vec![canon(own)],
                ids: identity(own).into_iter().collect(),
                workspace: canon(list[0]),
                workspace_id: identity(list[0]),
            },
            workspace: canon(list[0]),
            remote: false,
        }
    }

    #[test]
    fn confinement() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        let outside = dir.path().join("outside");
        let own = dir.path().join("own");
        for d in [&root, &outside, &own] {
            fs::create_dir_all(d).unwrap();
        }
        fs::write(outside.join("secret"), "s").unwrap();
        let r = roots(&[&root], &own);
        let real_root = fs::canonicalize(&root).unwrap();

        assert_eq!(
            r.place("a/b.txt").unwrap().shown(),
            real_root.join("a/b.txt")
        );
        assert_eq!(r.place(".").unwrap().shown(), real_root);
        assert!(
            r.place("../outside/secret")
                .unwrap_err()
                .to_string()
                .contains("..")
        );
        let abs = outside.join("secret");
        assert!(
            r.place(abs.to_str().unwrap())
                .unwrap_err()
                .to_string()
                .contains("outside")
        );
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
            assert!(r.place("link/secret").is_err());
            assert!(r.write("link/new.txt", b"x", false).is_err());
            std::os::unix::fs::symlink(dir.path().join("nowhere"), root.join("dangling")).unwrap();
            assert!(r.place("dangling").is_err());
        }
        let r = roots(&[&root, &outside], &own);
        assert_eq!(r.read(abs.to_str().unwrap(), 10).unwrap().1, b"s");
    }

    #[test]
    fn writes_are_atomic_and_refuse_what_they_should() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        let own = dir.path().join("own");
        fs::create_dir_all(&root).unwrap();
        fs::create_dir_all(&own).unwrap();
        let r = roots(&[&root], &own);
        let (p, replaced) = r.write("a/b/c.txt", b"one", false).unwrap();
        assert!(!replaced && p.ends_with("a/b/c.txt"));
        assert!(
            r.write("a/b/c.txt", b"two", false)
                .unwrap_err()
                .to_string()
                .contains("overwrite")
        );
        assert!(r.write("a/b/c.txt", b"two", true).unwrap().1);
        assert_eq!(r.read("a/b/c.txt", 10).unwrap().1, b"two");
        assert!(
            r.write("a", b"x", true)
                .unwrap_err()
                .to_string()
                .contains("folder")
        );
        assert!(r.read("a/b/c.txt", 2).is_err(), "over the limit");
        assert!(
            r.write("a/new/", b"x", false)
                .unwrap_err()
                .to_string()
                .contains("folder")
        );
        let long = "n".repeat(250);
        r.write(&long, b"long name", false).unwrap();
        // no temp file is left behind
        let names: Vec<String> = fs::read_dir(root.join("a/b"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["c.txt"]);
        assert!(!root.join("a/new").exists());
    }

    #[test]
    fn lmcp_own_folders_are_never_reached_even_from_a_root_above_them() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path();
        let data = top.join("data");
        let ws = data.join("workspace");
        fs::create_dir_all(&ws).unwrap();
        fs::write(data.join("history.jsonl"), "h").unwrap();
        let canon = |p: &Path| fs::canonicalize(p).unwrap();
        let r = Roots {
            roots: vec![canon(&ws), canon(top)],
            own: OwnFolders {
                paths: vec![canon(&data)],
                ids: identity(&data).into_iter().collect(),
                workspace: canon(&ws),
                workspace_id: identity(&ws),
            },
            workspace: canon(&ws),
            remote: false,
        };
        let history = data.join("history.jsonl");
        let e = r
            .read(history.to_str().unwrap(), 100)
            .unwrap_err()
            .to_string();
        assert!(e.contains("lmcp's own"), "{e}");
        assert!(r.write(history.to_str().unwrap(), b"x", true).is_err());
        assert!(r.open_dir(data.to_str().unwrap()).is_err());
        // the workspace inside the data folder stays open
        r.write("note.txt", b"n", false).unwrap();
        // a symlink in another root pointing into lmcp's data is refused on what was opened
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(&data, top.join("sneaky")).unwrap();
            let via = top.join("sneaky/history.jsonl");
            assert!(r.read(via.to_str().unwrap(), 100).is_err());
        }
    }
}
