//! Saving one program file: the one way recipes and custom tools write theirs.
//!
//! A save holds the file's lock from the moment it reads what is there until it has written
//! (and, for a tool, registered) the new version, so two saves of one name never interleave. A
//! file that cannot be read is never written over: with `replace` it is kept aside under a name
//! of its own and the person is told; without, the save fails and names it.

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
    /// The stored program the new one replaces, if the file held one.
    pub existing: Option<T>,
}

impl<T: DeserializeOwned> Saving<T> {
    /// Locks `path` and reads it. `what` names the program in the warning ("recipe",
    /// "definition") when a broken file is kept aside.
    pub fn begin(host: &Host, path: &Path, replace: bool, what: &str) -> Result<Saving<T>> {
        let lock = FileLock::acquire(path)?;
        let existing = match store::read_json(path) {
            Ok(s) => s,
            Err(Error::Corrupt { .. }) if replace => {
                let aside = store::quarantine(path)?;
                host.warn(format!(
                    "{} could not be read; kept it as {} and saved the new {what}",
                    path.display(),
                    aside.display()
                ));
                None
            }
            Err(e) => return Err(e),
        };
        Ok(Saving {
            _lock: lock,
            path: path.to_path_buf(),
            existing,
        })
    }

    /// Writes the new version atomically; the lock is held until the `Saving` is dropped.
    pub fn write(&self, value: &impl Serialize) -> Result<()> {
        store::write_json(&self.path, value)
    }
}
