//! What the layers below the host need of it, as a trait the host implements.
//!
//! The gate, the registry's handlers, the program runners and the Lua bridge all make calls
//! and read settings, and all of them stand below `host`: they name [`Caller`], never the host
//! type. A handler that needs the host itself (the built-in tools and the libraries stand above
//! it) gets it back through [`Caller::as_any`], with `Host::of`.

use std::any::Any;
use std::future::Future;
use std::sync::Arc;

use super::{CallRequest, History, Outcome};
use crate::config::Config;
use crate::registry::{Registry, Transport};
use crate::store::Paths;

/// The house a call runs in: its registry, settings, history and paths.
pub trait Caller: Send + Sync + 'static {
    /// The registry (specs are public; handlers are not).
    fn registry(&self) -> &Registry;
    /// The current config (re-read when another process changed it).
    fn config(&self) -> Arc<Config>;
    /// Why the config could not be read, while the host runs failed closed.
    fn config_problem(&self) -> Option<String>;
    /// The call history ring.
    fn history(&self) -> &History;
    /// How callers reach this host.
    fn transport(&self) -> Transport;
    /// The store's paths.
    fn paths(&self) -> &Paths;
    /// Keeps a problem that must not stop the call, for a front door to show.
    fn warn(&self, message: String);
    /// The implementing value, for the layers above that know its type.
    fn as_any(&self) -> &dyn Any;
    /// The same, shared.
    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
}

impl dyn Caller {
    /// Runs one call through the gate: the only way any tool runs.
    pub fn call(self: &Arc<Self>, request: CallRequest) -> impl Future<Output = Outcome> + Send {
        let caller = Arc::clone(self);
        async move { super::call(&caller, request).await }
    }
}
