//! Each server's tool list as it last gave it, so listings never start a server: kept in
//! `DATA/servers/NAME.tools.json` and sealed with the installation's key like the library
//! index's entries (a list edited behind lmcp's back is not trusted, and the server is asked
//! again when next needed).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::Server;
use crate::error::Result;
use crate::gate::journal::Sealer;
use crate::host::Host;
use crate::store;

/// The seal's tag (see `gate::journal::Sealer`).
const SEAL_TAG: &str = "upstream-catalog-1";

/// What lmcp last learned of one server.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Catalog {
    /// How the server was reached when it listed these (see [`launch_key`]): a server added
    /// again with another command is listed again.
    pub launch: String,
    /// When it listed them (unix milliseconds).
    pub listed_at: i64,
    /// Its tool definitions, as it gave them.
    pub tools: Vec<Value>,
    /// Why it last failed to start or list, and when (unix milliseconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<(i64, String)>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    seal: String,
}

/// The folder of servers' tool lists and logs.
pub fn folder(host: &Host) -> PathBuf {
    host.paths().data_dir.join("servers")
}

/// Where a server's stderr is logged.
pub fn log_path(host: &Host, server: &str) -> PathBuf {
    folder(host).join(format!("{server}.log"))
}

fn path(host: &Host, server: &str) -> PathBuf {
    folder(host).join(format!("{server}.tools.json"))
}

/// What identifies how a server is reached: its command or URL, and its variables' and
/// headers' names (not their values).
pub fn launch_key(server: &Server) -> String {
    let key = serde_json::json!({
        "command": server.command,
        "url": server.url,
        "env": server.env,
        "secret_env": server.secret_env,
        "headers": server.headers,
        "secret_headers": server.secret_headers,
    });
    super::trust::hash_of(&key)
}

fn sealed_text(server: &str, c: &Catalog) -> Vec<u8> {
    serde_json::to_vec(&(server, &c.launch, c.listed_at, &c.tools, &c.failure)).unwrap_or_default()
}

impl Catalog {
    /// A catalog of these tools, listed now.
    pub fn listed(launch: String, tools: Vec<Value>) -> Catalog {
        Catalog {
            launch,
            listed_at: chrono::Utc::now().timestamp_millis(),
            tools,
            failure: None,
            seal: String::new(),
        }
    }
}

/// The server's catalog, when one was stored and its seal verifies; `None` otherwise (a broken
/// seal is said as a warning).
pub fn load(host: &Host, server: &str) -> Option<Catalog> {
    let file = path(host, server);
    let catalog: Catalog = match store::read_json(&file) {
        Ok(Some(c)) => c,
        Ok(None) => return None,
        Err(e) => {
            host.warn(format!(
                "the tool list of the MCP server `{server}` is unreadable: {e}"
            ));
            return None;
        }
    };
    let sealer = Sealer::of(host).ok()?;
    if !sealer.verifies(SEAL_TAG, &sealed_text(server, &catalog), &catalog.seal) {
        host.warn(format!(
            "{} was changed outside lmcp, so its tools are not offered until the server lists \
             them again (`lmcp servers refresh {server}`)",
            file.display()
        ));
        return None;
    }
    Some(catalog)
}

/// Stores a server's catalog, sealed, atomically.
pub fn store(host: &Host, server: &str, catalog: &Catalog) -> Result<()> {
    let mut sealed = catalog.clone();
    sealed.seal = Sealer::of(host)?.seal(SEAL_TAG, &sealed_text(server, catalog));
    store::ensure_dir(&folder(host))?;
    // readable by the person only: what a server said (its failure included) is theirs
    let mut text = serde_json::to_vec_pretty(&sealed).unwrap_or_default();
    text.push(b'\n');
    store::atomic_write_private(&path(host, server), &text)
}

/// Forgets a server's catalog and logs.
pub fn remove(host: &Host, server: &str) {
    let dir = folder(host);
    for name in [
        format!("{server}.tools.json"),
        format!("{server}.log"),
        format!("{server}.log.1"),
    ] {
        let _ = std::fs::remove_file(dir.join(name));
    }
}
