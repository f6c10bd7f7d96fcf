//! `lmcp hosts ...`: the hosts `http_request` may reach without asking, or never. Kept in the
//! config under `hosts`, by pattern (`crate::config::HostPattern`): `api.example.org`,
//! `example.org:8443`, `*.example.org` (its subdomains), `*` (every public host). A deny wins
//! over any allow; a host no rule names asks. Loopback, private, link-local and metadata
//! addresses stay out of reach under every allow but an exact one with `--private`.

use std::sync::Arc;

use clap::Subcommand;
use serde_json::{Value, json};

use super::door::{emit, table};
use crate::config::{Grant, HostPattern, HostRule};
use crate::error::{Error, Result};
use crate::host::Host;
use crate::text::escape_controls;

/// `lmcp hosts ...`
#[derive(Debug, Subcommand)]
pub enum HostsCommand {
    /// List the host rules.
    List,
    /// Let requests to a host run without asking: `api.example.org`, `example.org:8443`,
    /// `*.example.org` (its subdomains) or `*` (every public host). Loopback, private,
    /// link-local and metadata addresses stay out of reach unless --private names the exact
    /// host or address.
    Allow {
        /// The host pattern.
        host: String,
        /// Also reach it at a private address (loopback, the local network, link-local,
        /// metadata): only for one exact host or address, such as `127.0.0.1:8080`.
        #[arg(long)]
        private: bool,
    },
    /// Refuse every request to a host (a deny wins over any allow).
    Deny {
        /// The host pattern.
        host: String,
    },
    /// Remove the rule for a host pattern (its requests ask again).
    Remove {
        /// The host pattern, as `lmcp hosts list` shows it.
        host: String,
    },
}

pub(super) fn hosts(host: &Arc<Host>, command: HostsCommand, json: bool) -> Result<u8> {
    match command {
        HostsCommand::List => list(host, json),
        HostsCommand::Allow {
            host: pattern,
            private,
        } => set(host, &pattern, Grant::Allow, private, json),
        HostsCommand::Deny { host: pattern } => set(host, &pattern, Grant::Deny, false, json),
        HostsCommand::Remove { host: pattern } => remove(host, &pattern, json),
    }
}

fn parse(pattern: &str) -> Result<HostPattern> {
    HostPattern::parse(pattern).map_err(|m| Error::Usage(escape_controls(&m).into_owned()))
}

fn set(host: &Arc<Host>, pattern: &str, grant: Grant, private: bool, json: bool) -> Result<u8> {
    let p = parse(pattern)?;
    if private && !p.is_exact() {
        return Err(Error::Usage(format!(
            "--private reaches one exact host or address (such as `127.0.0.1:8080`), never \
             `{p}`: a pattern could reach a whole network's private addresses"
        )));
    }
    let key = p.to_string();
    host.update_config(|c| {
        c.hosts.insert(key.clone(), HostRule { grant, private });
        Ok(())
    })?;
    let blocked_literal = match &p {
        HostPattern::Exact(h, _) => {
            crate::net::literal_ip(h).and_then(|ip| crate::net::blocked(ip).map(|r| (ip, r)))
        }
        _ => None,
    };
    emit(
        json,
        &json!({"host": key, "grant": grant, "private": private}),
        || {
            let mut s = match (grant, &p) {
                (Grant::Deny, _) => format!("{key}: deny (a deny wins over any allow)\n"),
                (_, HostPattern::Any) => "*: allow (every public host; loopback, private, \
                                          link-local and metadata addresses stay blocked)\n"
                    .to_string(),
                (_, _) if private => {
                    format!("{key}: allow, private addresses included\n")
                }
                _ => format!("{key}: allow\n"),
            };
            if let (Some((ip, range)), false, Grant::Allow) = (blocked_literal, private, grant) {
                s.push_str(&format!(
                    "note: {ip} is in {range}, which stays blocked; `lmcp hosts allow {key} \
                     --private` reaches it\n"
                ));
            }
            s
        },
    );
    Ok(0)
}

fn remove(host: &Arc<Host>, pattern: &str, json: bool) -> Result<u8> {
    let key = parse(pattern)?.to_string();
    let removed = host.update_config(|c| Ok(c.hosts.remove(&key).is_some()))?;
    if !removed {
        let known: Vec<String> = host.config().hosts.keys().cloned().collect();
        return Err(Error::Usage(format!(
            "there is no rule for `{key}`; {}",
            if known.is_empty() {
                "there are no host rules".to_string()
            } else {
                format!("the rules are for: {}", known.join(", "))
            }
        )));
    }
    emit(json, &json!({"removed": key}), || {
        format!("removed the rule for `{key}`; its requests ask again\n")
    });
    Ok(0)
}

fn list(host: &Arc<Host>, json: bool) -> Result<u8> {
    let config = host.config();
    let rows: Vec<Value> = config
        .hosts
        .iter()
        .map(|(k, r)| json!({"host": k, "grant": r.grant, "private": r.private}))
        .collect();
    let value = json!({"hosts": rows});
    emit(json, &value, || {
        let mut s = if rows.is_empty() {
            "no host rules: every request asks; allow a host with `lmcp hosts allow HOST`\n"
                .to_string()
        } else {
            let cells: Vec<Vec<String>> = rows
                .iter()
                .map(|r| {
                    vec![
                        r["host"].as_str().unwrap_or_default().to_string(),
                        r["grant"].as_str().unwrap_or_default().to_string(),
                        if r["private"] == true { "yes" } else { "" }.to_string(),
                    ]
                })
                .collect();
            table(&["HOST", "GRANT", "PRIVATE"], &cells)
        };
        s.push_str(
            "A deny wins; a host no rule names asks. Loopback, private, link-local and metadata \
             addresses are reached only through an allow --private of that exact host.\n",
        );
        s
    });
    Ok(0)
}
