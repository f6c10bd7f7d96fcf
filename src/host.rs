//! The host: config, store, registry and gate in one value, and [`Host::call`], the one way in.
//!
//! Every front door builds one `Arc<Host>` and turns its input into [`CallRequest`]s. The host
//! re-reads `config.json` when another process changed it (a stat per call), so a long-running
//! REPL or MCP server follows `lmcp grants ...` typed in another terminal at once.
//!
//! Problems that must not stop the host (a history write that failed, unknown config fields)
//! become warnings, kept until a front door takes them with [`Host::take_warnings`] and shows
//! them. A config that cannot be read is more than a warning: the host fails closed
//! ([`Config::fail_closed`]) and [`Host::config_problem`] says why, for every door to show.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use crate::config::{self, Config};
use crate::error::Result;
use crate::gate::{CallRequest, Caller, History, Outcome};
use crate::registry::{Availability, Invocation, Profile, Registry, Tool, Transport};
use crate::store::{self, Paths};

/// A file's (or a folder's files') stamps: a change to any shows.
pub type Stamp = Vec<FileStamp>;

/// One file as a stamp sees it: its modification time and size, and (on unix) its change time
/// and inode. The change time is the kernel's: `touch -r` can put a modification time back, but
/// any write or rename moves the change time on, so a file edited to its old size and time
/// still shows as changed.
pub type FileStamp = (SystemTime, u64, i64, i64, u64);

/// The stamp of one file from its metadata.
pub fn file_stamp_of(meta: &std::fs::Metadata) -> FileStamp {
    let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        (
            modified,
            meta.len(),
            meta.ctime(),
            meta.ctime_nsec(),
            meta.ino(),
        )
    }
    #[cfg(not(unix))]
    {
        (modified, meta.len(), 0, 0, 0)
    }
}

/// What the program stores (custom tool files, skill folders) looked like when a long-running
/// server last synced its registry with them; the library keeps it up to date.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Seen {
    /// Each custom tool file's stamp, by path.
    pub custom_tools: std::collections::BTreeMap<String, Stamp>,
    /// Each skill folder's stamp, by skill name.
    pub skills: std::collections::BTreeMap<String, Stamp>,
}

/// Settings for [`Host::open_with`].
#[derive(Debug, Clone, Default)]
pub struct HostOptions {
    /// How callers reach this host (decides whether local-file tools are available).
    pub transport: Transport,
}

/// The config in memory and the file stamp it was read from.
struct LoadedConfig {
    config: Arc<Config>,
    stamp: Option<(SystemTime, u64)>,
    /// Why the file could not be read, while the host runs failed closed.
    problem: Option<String>,
}

/// The config a load gives: the file's, or failed closed with the reason; unknown fields warned.
fn loaded(paths: &Paths, warn: &mut Vec<String>) -> (Config, Option<String>) {
    match config::load(paths) {
        Ok(c) => {
            let unknown = c.unknown_fields();
            if !unknown.is_empty() {
                warn.push(format!(
                    "{} has fields this lmcp does not know ({}); they are kept as they are",
                    paths.config_file().display(),
                    unknown.join(", ")
                ));
            }
            (c, None)
        }
        // Unparsable or unreadable: either way the policy is unknown, so nothing is allowed.
        Err(e) => (
            Config::fail_closed(),
            Some(format!(
                "{e}; lmcp runs read-only and private with every grant at ask until it is fixed \
                 (see `lmcp config repair`)"
            )),
        ),
    }
}

/// Config, store paths, registry, history and gate.
pub struct Host {
    paths: Paths,
    config: RwLock<LoadedConfig>,
    registry: Registry,
    history: History,
    transport: Transport,
    warnings: Mutex<Vec<String>>,
    /// What a long-running server last saw of the program stores (`None` until it starts
    /// watching them): its own writes update it, so only other processes' changes reload.
    library_seen: Mutex<Option<Seen>>,
    /// The order a front door wants imports into a workspace to take their asset ids in.
    import_order: ImportOrder,
    /// When the config file was last looked at, in microseconds since `opened`: the gate reads
    /// the config on every call, and a `stat` per call was a tenth of a call's cost.
    config_checked: std::sync::atomic::AtomicU64,
    opened: std::time::Instant,
    /// What the tool sources above the host keep per host (the connections to other MCP
    /// servers), by type: the host names none of them.
    attached: Mutex<Vec<Arc<dyn std::any::Any + Send + Sync>>>,
}

/// How long the config read from the file is used before the file is looked at again: what
/// another process changes (`lmcp grants` beside a running server) applies within this time.
/// This process's own changes apply at once.
pub const CONFIG_RECHECK: std::time::Duration = std::time::Duration::from_millis(20);

impl Host {
    /// The host on these paths and this registry, before any tool source is attached to it
    /// ([`Host::open`] attaches them). Temp files that writes a kill cut short left behind are
    /// swept from the folders lmcp writes most.
    pub fn new(paths: Paths, options: HostOptions, registry: Registry) -> Host {
        let mut warnings = Vec::new();
        let stamp = stamp_of(&paths.config_file());
        let (config, problem) = loaded(&paths, &mut warnings);
        let history = History::new(paths.history_file(), config.limits.history_size);
        let host = Host {
            history,
            config: RwLock::new(LoadedConfig {
                config: Arc::new(config),
                stamp,
                problem,
            }),
            registry,
            transport: options.transport,
            warnings: Mutex::new(warnings),
            library_seen: Mutex::new(None),
            import_order: ImportOrder::default(),
            config_checked: std::sync::atomic::AtomicU64::new(0),
            opened: std::time::Instant::now(),
            attached: Mutex::default(),
            paths,
        };
        store::sweep_temp_files(
            &[
                host.paths.workspace_dir(),
                host.paths.data_dir.clone(),
                host.paths.config_dir.clone(),
            ],
            std::time::Duration::from_secs(600),
        );
        host
    }

    /// Runs one call through the gate. This is the only way any tool runs.
    pub async fn call(self: &Arc<Self>, request: CallRequest) -> Outcome {
        self.caller().call(request).await
    }

    /// This host as the layers below it see it: the gate, the runners and the Lua bridge.
    pub fn caller(self: &Arc<Self>) -> Arc<dyn Caller> {
        Arc::clone(self) as Arc<dyn Caller>
    }

    /// The host behind a caller. Every caller is a host: the trait only keeps the layers below
    /// from naming this type.
    pub fn of(caller: &dyn Caller) -> &Host {
        caller
            .as_any()
            .downcast_ref::<Host>()
            .expect("every Caller is a Host")
    }

    /// The shared host behind a caller (see [`Host::of`]).
    pub fn shared(caller: &Arc<dyn Caller>) -> Arc<Host> {
        Arc::clone(caller)
            .into_any()
            .downcast::<Host>()
            .unwrap_or_else(|_| unreachable!("every Caller is a Host"))
    }

    /// What the library watcher last saw of the program stores (see [`crate::library::sync`]).
    pub(crate) fn library_seen(&self) -> std::sync::MutexGuard<'_, Option<Seen>> {
        self.library_seen.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The registry (specs are public; handlers are not).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The store's paths.
    pub fn paths(&self) -> &Paths {
        &self.paths
    }

    /// The order imports running side by side take their asset ids in, when one was asked for.
    pub fn import_order(&self) -> &ImportOrder {
        &self.import_order
    }

    /// The call history ring.
    pub fn history(&self) -> &History {
        &self.history
    }

    /// How callers reach this host.
    pub fn transport(&self) -> Transport {
        self.transport
    }

    /// The current config, re-read first if the file changed since it was last read. Shared,
    /// not copied: the gate reads it on every call.
    pub fn config(&self) -> Arc<Config> {
        use std::sync::atomic::Ordering;
        let since_open = self.opened.elapsed().as_micros() as u64;
        let checked = self.config_checked.load(Ordering::Relaxed);
        if since_open.saturating_sub(checked) < CONFIG_RECHECK.as_micros() as u64 {
            let loaded = self.config.read().unwrap_or_else(|p| p.into_inner());
            return Arc::clone(&loaded.config);
        }
        self.config_checked
            .store(since_open.max(1), Ordering::Relaxed);
        let path = self.paths.config_file();
        let now = stamp_of(&path);
        {
            let loaded = self.config.read().unwrap_or_else(|p| p.into_inner());
            if loaded.stamp == now {
                return Arc::clone(&loaded.config);
            }
        }
        let mut current = self.config.write().unwrap_or_else(|p| p.into_inner());
        let mut warnings = Vec::new();
        let (c, problem) = loaded(&self.paths, &mut warnings);
        current.config = Arc::new(c);
        current.problem = problem;
        current.stamp = now;
        let config = Arc::clone(&current.config);
        drop(current);
        for w in warnings {
            self.warn(w);
        }
        config
    }

    /// Why `config.json` could not be read, while lmcp runs failed closed; every front door shows
    /// it, and every refused call carries it.
    pub fn config_problem(&self) -> Option<String> {
        self.config();
        self.config
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .problem
            .clone()
    }

    /// Changes the config on disk (under the lock, atomically) and in memory.
    pub fn update_config<T>(&self, change: impl FnOnce(&mut Config) -> Result<T>) -> Result<T> {
        let (config, out) = config::update(&self.paths, change)?;
        let mut loaded = self.config.write().unwrap_or_else(|p| p.into_inner());
        loaded.config = Arc::new(config);
        loaded.stamp = stamp_of(&self.paths.config_file());
        loaded.problem = None;
        Ok(out)
    }

    /// `lmcp config repair`: sets a broken config aside and starts from the defaults; where it
    /// went, or `None` when the config was fine.
    pub fn repair_config(&self) -> Result<Option<PathBuf>> {
        let aside = config::repair(&self.paths)?;
        let mut loaded = self.config.write().unwrap_or_else(|p| p.into_inner());
        if aside.is_some() {
            loaded.config = Arc::new(Config::default());
            loaded.problem = None;
        }
        loaded.stamp = stamp_of(&self.paths.config_file());
        Ok(aside)
    }

    /// The directories the file tools may use: the workspace (created on first use) and the
    /// roots added with `lmcp roots add`.
    pub fn roots(&self) -> Result<Vec<PathBuf>> {
        let ws = self.paths.workspace_dir();
        store::ensure_dir(&ws)?;
        let mut roots = vec![ws];
        roots.extend(self.config().roots.iter().cloned());
        Ok(roots)
    }

    /// Every tool the profile lists, sorted by name, each with its availability here and now.
    pub fn tools(&self, profile: Profile) -> Vec<(Arc<Tool>, Availability)> {
        self.registry
            .in_profile(profile, &self.config(), self.transport)
    }

    /// Grant keys in the config that name nothing here — no tool, effect or `destructive`, and
    /// not the name a saved tool would have — each as a warning with the closest name: a typo
    /// would otherwise drop the rule the person meant (a `deny` among them).
    pub fn unknown_grant_keys(&self) -> Vec<String> {
        let config = self.config();
        config
            .grants
            .iter()
            .filter(|(key, _)| {
                crate::registry::Effect::parse(key).is_none()
                    && key.as_str() != config::DESTRUCTIVE_KEY
                    && self.registry.get(key).is_none()
                    && !key.starts_with("user_")
                    && !key.starts_with("skill__")
                    && !key.strip_prefix(config::UPSTREAM_PREFIX).is_some_and(|k| {
                        config
                            .servers
                            .contains_key(k.split("__").next().unwrap_or(k))
                    })
            })
            .map(|(key, grant)| {
                let mut names: Vec<String> = self.registry.closest(key);
                names.extend(["read", "write", "send", config::DESTRUCTIVE_KEY].map(String::from));
                let hint = names
                    .iter()
                    .map(|n| (strsim::jaro_winkler(key, n), n))
                    .filter(|(score, _)| *score > 0.8)
                    .max_by(|a, b| a.0.total_cmp(&b.0))
                    .map(|(_, n)| format!("; did you mean `{n}`?"))
                    .unwrap_or_default();
                format!(
                    "{} has the grant `{key}: {grant}`, but `{key}` is no tool, effect or \
                     `destructive`, so it applies to nothing{hint}",
                    self.paths.config_file().display()
                )
            })
            .collect()
    }

    /// Keeps `value` with this host for the layers above it, one value per type (a second of
    /// the same type replaces the first).
    pub fn attach<T: std::any::Any + Send + Sync>(&self, value: Arc<T>) {
        let mut attached = self.attached.lock().unwrap_or_else(|p| p.into_inner());
        attached.retain(|a| !a.is::<T>());
        attached.push(value);
    }

    /// The value of type `T` attached to this host, made by `make` and attached if there is
    /// none yet (one lock: two first users get the same value).
    pub fn attached_or_insert<T: std::any::Any + Send + Sync>(
        &self,
        make: impl FnOnce() -> Arc<T>,
    ) -> Arc<T> {
        let mut attached = self.attached.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(found) = attached
            .iter()
            .find_map(|a| Arc::clone(a).downcast::<T>().ok())
        {
            return found;
        }
        let made = make();
        attached.push(Arc::clone(&made) as Arc<dyn std::any::Any + Send + Sync>);
        made
    }

    /// The value of type `T` attached to this host, if any.
    pub fn attached<T: std::any::Any + Send + Sync>(&self) -> Option<Arc<T>> {
        self.attached
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find_map(|a| Arc::clone(a).downcast::<T>().ok())
    }

    /// Records a problem that should be shown to a person but must not stop anything.
    pub fn warn(&self, message: String) {
        self.warnings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(message);
    }

    /// Takes the warnings gathered so far.
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *self.warnings.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// The modification time and length of a file, to notice changes cheaply.
fn stamp_of(path: &std::path::Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// Imports into one workspace that run side by side take asset ids as they finish. `lmcp pdf`
/// imports a person's files in parallel yet wants asset ids in the order the files were given
/// (the manifest lists them per page): it names the paths in that order ([`ImportOrder::expect`])
/// and each import, its file read and prepared, waits for the imports before it to commit
/// theirs ([`ImportTurn::wait`]) — the slow part still runs in parallel. An import that fails
/// gives up its place, so none waits for it. Imports of paths not named wait for nothing.
#[derive(Default)]
pub struct ImportOrder {
    /// Per workspace, the paths whose imports have not yet committed or failed, in order.
    queues: Mutex<std::collections::HashMap<String, std::collections::VecDeque<String>>>,
    turned: std::sync::Condvar,
}

/// While it lives, imports into `workspace` commit in the order given to
/// [`ImportOrder::expect`].
pub struct ExpectedImports<'a> {
    order: &'a ImportOrder,
    workspace: String,
}

/// An import's place in its workspace's order (if it has one); dropping it gives the place up.
pub struct ImportTurn<'a> {
    order: &'a ImportOrder,
    workspace: String,
    path: String,
}

impl ImportOrder {
    fn queues(
        &self,
    ) -> std::sync::MutexGuard<
        '_,
        std::collections::HashMap<String, std::collections::VecDeque<String>>,
    > {
        self.queues.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Asks that imports of these paths (as `asset_import` is given them) into `workspace`
    /// commit in this order.
    pub fn expect(&self, workspace: &str, paths: Vec<String>) -> ExpectedImports<'_> {
        self.queues().insert(workspace.to_string(), paths.into());
        ExpectedImports {
            order: self,
            workspace: workspace.to_string(),
        }
    }

    /// The place of an import of `path` into `workspace`: take it before the slow work.
    pub fn turn(&self, workspace: &str, path: &str) -> ImportTurn<'_> {
        ImportTurn {
            order: self,
            workspace: workspace.to_string(),
            path: path.to_string(),
        }
    }
}

impl ImportTurn<'_> {
    /// Waits until every import named before this one has committed or failed.
    pub fn wait(&self) {
        let mut queues = self.order.queues();
        loop {
            let first = queues
                .get(&self.workspace)
                .and_then(|q| q.contains(&self.path).then(|| q.front().cloned()).flatten());
            match first {
                Some(first) if first != self.path => {
                    queues = self
                        .order
                        .turned
                        .wait(queues)
                        .unwrap_or_else(|p| p.into_inner());
                }
                _ => return,
            }
        }
    }
}

impl Drop for ImportTurn<'_> {
    fn drop(&mut self) {
        if let Some(q) = self.order.queues().get_mut(&self.workspace) {
            q.retain(|p| p != &self.path);
        }
        self.order.turned.notify_all();
    }
}

impl Drop for ExpectedImports<'_> {
    fn drop(&mut self) {
        self.order.queues().remove(&self.workspace);
        self.order.turned.notify_all();
    }
}

impl Caller for Host {
    fn registry(&self) -> &Registry {
        Host::registry(self)
    }
    fn config(&self) -> Arc<Config> {
        Host::config(self)
    }
    fn config_problem(&self) -> Option<String> {
        Host::config_problem(self)
    }
    fn history(&self) -> &History {
        Host::history(self)
    }
    fn transport(&self) -> Transport {
        Host::transport(self)
    }
    fn paths(&self) -> &Paths {
        Host::paths(self)
    }
    fn warn(&self, message: String) {
        Host::warn(self, message)
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn into_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync> {
        self
    }
}

impl Invocation {
    /// The host the call runs in, for the tools and libraries that stand above it.
    pub fn host(&self) -> Arc<Host> {
        Host::shared(&self.caller)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imports_commit_in_the_expected_order_and_a_failed_one_gives_its_place_up() {
        let order = ImportOrder::default();
        let committed = Mutex::new(Vec::new());
        let _expected = order.expect("ws", ["a", "b", "c", "d"].map(String::from).to_vec());
        std::thread::scope(|s| {
            // started last-first, with the later ones ready sooner
            for (i, path) in ["d", "c", "b", "a"].into_iter().enumerate() {
                let (order, committed) = (&order, &committed);
                s.spawn(move || {
                    let turn = order.turn("ws", path);
                    std::thread::sleep(std::time::Duration::from_millis(5 * i as u64));
                    if path == "b" {
                        return; // failed: its turn is dropped unused
                    }
                    turn.wait();
                    committed.lock().unwrap().push(path);
                });
            }
        });
        assert_eq!(*committed.lock().unwrap(), ["a", "c", "d"]);
        // a path not named waits for nothing
        order.turn("ws", "other").wait();
        order.turn("elsewhere", "a").wait();
    }
}
