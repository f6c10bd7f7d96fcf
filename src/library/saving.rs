//! Saving one program file: the one way recipes and custom tools write theirs.
//!
//! A save holds the file's lock from the moment it reads what is there until it has written
//! (and, for a tool, registered) the new version, so two saves of one name never interleave.
//!
//! A file that cannot be used — it does not parse, it is a folder, it is of a format this lmcp
//! does not read, or it holds a program that belongs in another file — is never written over.
//! Without `replace` the save fails, names the file, and says that `replace` sets it aside.
//! With `replace` it is set aside under a name of its own, but only in [`Saving::write`], with
//! the new version in hand: the caller compiles first, and a new program that does not compile
//! leaves the old file where it was. The person is told it was kept aside only once the new
//! version is written.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};
use crate::host::Host;
use crate::store::{self, FileLock};

/// A save in progress: the file's lock, and what the file held when the save began.
pub struct Saving<T> {
    _lock: FileLock,
    path: PathBuf,
    /// The stored program the new one replaces, if the file held a usable one.
    pub existing: Option<T>,
    /// Why the file there cannot be used, when it cannot (it is set aside on write).
    unusable: Option<String>,
}

impl<T: DeserializeOwned> Saving<T> {
    /// Locks `path` and reads it. `fits` says why a stored value that parsed still cannot be
    /// used here (an unknown format, a name that is not this file's); such a file, like one
    /// that does not parse or is not a file at all, is unusable: without `replace` this fails
    /// naming it, with `replace` it is set aside when the new version is written.
    pub fn begin(
        path: &Path,
        replace: bool,
        fits: impl Fn(&T) -> std::result::Result<(), String>,
    ) -> Result<Saving<T>> {
        let lock = FileLock::acquire(path)?;
        let (existing, unusable) = match read(path) {
            Ok(Some(v)) => match fits(&v) {
                Ok(()) => (Some(v), None),
                Err(why) => (None, Some(why)),
            },
            Ok(None) => (None, None),
            Err(why) => (None, Some(why)),
        };
        if let Some(why) = &unusable
            && !replace
        {
            return Err(Error::Corrupt {
                path: path.to_path_buf(),
                message: format!(
                    "{why}; to save over it, pass {}, which keeps it aside under a name of its own",
                    crate::text::arg_words::arg("replace", "true")
                ),
            });
        }
        Ok(Saving {
            _lock: lock,
            path: path.to_path_buf(),
            existing,
            unusable,
        })
    }

    /// Writes the new version atomically, first setting aside an unusable file that was there
    /// (and saying where, once the new version is written). The lock is held until the
    /// `Saving` is dropped. `what` names the program in that message ("recipe", "definition").
    pub fn write(&self, host: &Host, value: &impl Serialize, what: &str) -> Result<()> {
        let aside = match &self.unusable {
            Some(_) => Some(store::quarantine(&self.path)?),
            None => None,
        };
        store::write_json(&self.path, value)?;
        if let (Some(aside), Some(why)) = (aside, &self.unusable) {
            host.warn(format!(
                "{} could not be used ({why}); kept it as {} and saved the new {what}",
                self.path.display(),
                aside.display()
            ));
        }
        Ok(())
    }
}

/// What the file holds: `Ok(None)` when there is none; `Err` with why it cannot be used when it
/// is not a regular file or does not parse. An error reading it is the I/O error, said.
fn read<T: DeserializeOwned>(path: &Path) -> std::result::Result<Option<T>, String> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Ok(m) if m.is_dir() => return Err("it is a folder, not a file".into()),
        Ok(m) if !m.is_file() => return Err("it is not a regular file".into()),
        _ => {}
    }
    match store::read_json(path) {
        Ok(v) => Ok(v),
        Err(Error::Corrupt { message, .. }) => Err(format!("it does not parse: {message}")),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn never(_: &u32) -> std::result::Result<(), String> {
        Ok(())
    }

    #[test]
    fn an_unusable_file_is_named_and_left_alone_without_replace() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.json");
        std::fs::write(&path, "{ broken").unwrap();
        let Err(e) = Saving::<u32>::begin(&path, false, never) else {
            panic!("a corrupt file was accepted")
        };
        let m = e.to_string();
        assert!(m.contains("x.json") && m.contains("replace"), "{m}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{ broken");
        // a folder in its place is unusable the same way
        let folder = dir.path().join("d.json");
        std::fs::create_dir(&folder).unwrap();
        let Err(e) = Saving::<u32>::begin(&folder, false, never) else {
            panic!("a folder was accepted")
        };
        assert!(e.to_string().contains("folder"), "{e}");
        // a value that parses but does not fit
        std::fs::write(&path, "99").unwrap();
        let Err(e) = Saving::<u32>::begin(&path, false, |v| Err(format!("format {v}"))) else {
            panic!("an unfit value was accepted")
        };
        assert!(e.to_string().contains("format 99"), "{e}");
    }

    #[test]
    fn beginning_with_replace_moves_nothing_until_the_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.json");
        std::fs::write(&path, "{ broken").unwrap();
        let saving = Saving::<u32>::begin(&path, true, never).unwrap();
        assert!(saving.existing.is_none());
        drop(saving);
        // the save was given up (say the new program did not compile): the file is as it was
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{ broken");
        let names = |d: &Path| -> Vec<String> {
            std::fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.'))
                .collect()
        };
        assert_eq!(names(dir.path()), vec!["x.json".to_string()]);
    }
}
