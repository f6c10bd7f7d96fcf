//! `lmcp servers ...`: the other MCP servers whose tools lmcp offers behind its gate. Adding one
//! runs its command as the person, so it asks first (twice: before the command runs, and once
//! its tools are listed, with their claimed effects); listing and showing read what the servers
//! last listed and start nothing.

use std::io::IsTerminal;
use std::sync::Arc;

use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};

use super::cli::Switch;
use super::door::{ask, emit, outln, table};
use crate::config::{Grant, Pin, Server};
use crate::error::{Error, Result};
use crate::host::Host;
use crate::text::escape_controls;
use crate::upstream::{self, names, tools};

/// `lmcp servers ...`
#[derive(Debug, Subcommand)]
pub enum ServersCommand {
    /// List the servers: state and tool count (starts none of them).
    List,
    /// Add a server that runs as a command on this machine, as you
    /// (`lmcp servers add NAME [--env K=V]... -- COMMAND [ARGS]...`), or one reached over
    /// Streamable HTTP (`lmcp servers add NAME --url URL [--header 'K: V']...`). It is started
    /// (or reached) once to list its tools, after a question; its tools are then
    /// `mcp__NAME__TOOL`, and each asks until you allow it (`lmcp grants allow
    /// mcp__NAME__TOOL`, or `mcp__NAME` for all).
    Add(AddArgs),
    /// Add the servers another MCP client already has: Claude Desktop's `mcpServers`, or VS
    /// Code's `servers` (`.vscode/mcp.json`), after one question listing them all. Their
    /// variables are kept as secrets (they often hold tokens).
    Import {
        /// Whose configuration: claude-desktop or vscode.
        #[arg(value_enum)]
        from: ImportFrom,
        /// The configuration file (default: Claude Desktop's in its usual place, or
        /// `.vscode/mcp.json` here).
        file: Option<std::path::PathBuf>,
        /// Import without asking.
        #[arg(short, long)]
        yes: bool,
    },
    /// Show a server and its tools: claimed effects, grants, and the tools not offered.
    Show {
        /// The server's name.
        name: String,
    },
    /// Start the server to list its tools again (a server says when they change while lmcp
    /// runs it; this is for one that changed while nothing ran it).
    Refresh {
        /// The server's name.
        name: String,
    },
    /// Remove a server, its grants, its secrets and its tool list.
    Remove {
        /// The server's name.
        name: String,
    },
    /// Offer a disabled server's tools again.
    Enable {
        /// The server's name.
        name: String,
    },
    /// Stop offering a server's tools (kept, with its grants).
    Disable {
        /// The server's name.
        name: String,
    },
    /// Offer a server's tools over `lmcp serve --http` too, or stop.
    Http {
        /// The server's name.
        name: String,
        /// on or off.
        #[arg(value_enum)]
        state: Switch,
    },
}

/// Whose configuration `lmcp servers import` reads.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ImportFrom {
    /// Claude Desktop's `claude_desktop_config.json` (`mcpServers`).
    ClaudeDesktop,
    /// VS Code's `mcp.json` (`servers`).
    Vscode,
}

/// What `lmcp servers add` takes.
#[derive(Debug, Args)]
pub struct AddArgs {
    /// The server's name: lowercase letters, digits and single underscores, at most 32.
    name: String,
    /// A variable for the server's process, as KEY=VALUE (repeat for more).
    #[arg(long = "env", value_name = "KEY=VALUE")]
    env: Vec<String>,
    /// A variable whose value is secret: asked for on the terminal, or read as a line from
    /// stdin, and kept readable by you only (repeat for more).
    #[arg(long = "secret-env", value_name = "KEY")]
    secret_env: Vec<String>,
    /// Also allow the tools that claim to be read-only (their claims are the server's
    /// word; each allow holds only while the tool's definition is unchanged).
    #[arg(long)]
    allow_read: bool,
    /// Offer its tools over `lmcp serve --http` too (it runs on this machine as you).
    #[arg(long)]
    http: bool,
    /// Replace a server of the same name.
    #[arg(long)]
    replace: bool,
    /// Add it without asking.
    #[arg(short, long)]
    yes: bool,
    /// The server's Streamable HTTP endpoint: https://, or http:// on loopback.
    #[arg(long, conflicts_with_all = ["command", "env", "secret_env"])]
    url: Option<String>,
    /// A header sent with every request to a --url server, as 'NAME: VALUE' (repeat for more).
    #[arg(long = "header", value_name = "NAME: VALUE", requires = "url")]
    header: Vec<String>,
    /// A header whose value is secret (a token): asked for on the terminal, or read as a line
    /// from stdin, and kept readable by you only (repeat for more).
    #[arg(long = "secret-header", value_name = "NAME", requires = "url")]
    secret_header: Vec<String>,
    /// The command that starts the server, after `--`.
    #[arg(last = true, required_unless_present = "url", value_name = "COMMAND")]
    command: Vec<String>,
}

/// Runs `lmcp servers ...`.
pub(super) async fn servers(host: &Arc<Host>, command: ServersCommand, json: bool) -> Result<u8> {
    match command {
        ServersCommand::List => list(host, json),
        ServersCommand::Add(args) => add(host, args, json).await,
        ServersCommand::Import { from, file, yes } => {
            import(host, from, file.as_deref(), yes, json).await
        }
        ServersCommand::Show { name } => show(host, &name, json),
        ServersCommand::Refresh { name } => refresh(host, &name, json).await,
        ServersCommand::Remove { name } => remove(host, &name, json),
        ServersCommand::Enable { name } => switch(host, &name, json, |s| s.disabled = false),
        ServersCommand::Disable { name } => switch(host, &name, json, |s| s.disabled = true),
        ServersCommand::Http { name, state } => {
            let on = matches!(state, Switch::On);
            switch(host, &name, json, move |s| s.http = on)
        }
    }
}

/// The server of that name in the config, or an error naming the ones there are.
fn existing(host: &Host, name: &str) -> Result<Server> {
    let config = host.config();
    config.servers.get(name).cloned().ok_or_else(|| {
        let known: Vec<&str> = config.servers.keys().map(String::as_str).collect();
        Error::Usage(format!(
            "there is no MCP server `{}`; {}",
            escape_controls(name),
            if known.is_empty() {
                "add one with `lmcp servers add NAME -- COMMAND`".to_string()
            } else {
                format!("the servers are: {}", known.join(", "))
            }
        ))
    })
}

/// A server's state as its catalog says, without starting it.
fn state(host: &Host, name: &str, server: &Server) -> (String, usize) {
    let catalog = upstream::catalog::load(host, name);
    let tools = catalog
        .as_ref()
        .filter(|c| c.launch == upstream::catalog::launch_key(server))
        .map_or(0, |c| tools::offered(name, &c.tools).0.len());
    let running = host
        .attached::<upstream::Upstreams>()
        .and_then(|u| u.pid(name));
    let state = if server.disabled {
        "disabled".to_string()
    } else if running.is_some() {
        "running".to_string()
    } else {
        match catalog
            .as_ref()
            .and_then(|c| c.failure.as_ref().map(|f| (c, f)))
        {
            Some((c, (at, why))) if *at >= c.listed_at => format!("failed: {why}"),
            _ if catalog.is_none() => "not listed".to_string(),
            _ => "not started".to_string(),
        }
    };
    (state, tools)
}

fn list(host: &Arc<Host>, json: bool) -> Result<u8> {
    let config = host.config();
    let rows: Vec<Value> = config
        .servers
        .iter()
        .map(|(name, server)| {
            let (state, tools) = state(host, name, server);
            json!({
                "name": name,
                "state": state,
                "tools": tools,
                "command": server.command,
                "url": server.url,
                "http": server.http,
            })
        })
        .collect();
    let value = json!({"servers": rows});
    emit(json, &value, || {
        if rows.is_empty() {
            return "no MCP servers; add one with `lmcp servers add NAME -- COMMAND [ARGS]...`\n"
                .to_string();
        }
        let rows: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                vec![
                    r["name"].as_str().unwrap_or_default().to_string(),
                    r["state"].as_str().unwrap_or_default().to_string(),
                    r["tools"].to_string(),
                    command_line(
                        r["command"]
                            .as_array()
                            .map(Vec::as_slice)
                            .unwrap_or_default(),
                    ),
                ]
            })
            .collect();
        table(&["NAME", "STATE", "TOOLS", "COMMAND OR URL"], &rows)
    });
    Ok(0)
}

/// A command as a person would type it, words with spaces or quotes quoted.
fn command_line(words: &[Value]) -> String {
    words
        .iter()
        .map(|w| {
            let w = w.as_str().unwrap_or_default();
            if !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:@+,".contains(c))
            {
                w.to_string()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The rows of a server's tools: lmcp name, claimed effect, grant (with the pin said).
fn tool_rows(host: &Host, name: &str, definitions: &[Value]) -> (Vec<Value>, Vec<tools::Refused>) {
    let config = host.config();
    let (offered, refused) = tools::offered(name, definitions);
    let rows = offered
        .iter()
        .map(|o| {
            let s = &o.spec;
            let (mut grant, source) =
                config.grant_for(&s.name, s.effect, s.annotations.destructive_hint);
            let mut note = source.to_string();
            if grant == Grant::Allow
                && let Some(hash) = &s.definition
            {
                match config.pin(&s.name, hash) {
                    Pin::Holds => {}
                    Pin::Changed => {
                        grant = Grant::Ask;
                        note = "changed since it was allowed".into();
                    }
                    Pin::Missing => {
                        grant = Grant::Ask;
                        note = "not among the tools allowed".into();
                    }
                }
            }
            json!({
                "tool": s.name,
                "upstream": o.upstream,
                "effect": s.effect,
                "destructive": s.annotations.destructive_hint,
                "grant": grant,
                "why": note,
                "description": s.description,
            })
        })
        .collect();
    (rows, refused)
}

fn effect_words(row: &Value) -> String {
    let effect = row["effect"].as_str().unwrap_or_default();
    if row["destructive"] == true {
        format!("{effect}, destructive")
    } else {
        effect.to_string()
    }
}

fn show(host: &Arc<Host>, name: &str, json: bool) -> Result<u8> {
    let server = existing(host, name)?;
    let (state, _) = state(host, name, &server);
    let catalog = upstream::catalog::load(host, name)
        .filter(|c| c.launch == upstream::catalog::launch_key(&server));
    let definitions = catalog
        .as_ref()
        .map(|c| c.tools.clone())
        .unwrap_or_default();
    let (rows, refused) = tool_rows(host, name, &definitions);
    let value = json!({
        "name": name,
        "state": state,
        "command": server.command,
        "url": server.url,
        "headers": server.headers.keys().collect::<Vec<_>>(),
        "secret_headers": server.secret_headers,
        "env": server.env.keys().collect::<Vec<_>>(),
        "secret_env": server.secret_env,
        "http": server.http,
        "disabled": server.disabled,
        "log": upstream::catalog::log_path(host, name),
        "tools": rows,
        "refused": refused.iter().map(|r| json!({"tool": r.upstream, "reason": r.reason})).collect::<Vec<_>>(),
    });
    emit(json, &value, || {
        let mut out = match &server.url {
            Some(url) => format!("{name}: {state}\n  url: {}\n", escape_controls(url)),
            None => format!(
                "{name}: {state}\n  command: {}\n",
                command_line(&server.command.iter().map(|c| json!(c)).collect::<Vec<_>>())
            ),
        };
        if let Some(names) = named(&server.headers, &server.secret_headers) {
            out.push_str(&format!("  headers: {names}\n"));
        }
        if let Some(names) = named(&server.env, &server.secret_env) {
            out.push_str(&format!("  env: {names}\n"));
        }
        out.push_str(&format!(
            "  over HTTP: {}\n  log: {}\n\n",
            if server.http {
                "offered"
            } else {
                "not offered"
            },
            upstream::catalog::log_path(host, name).display()
        ));
        if catalog.is_none() {
            out.push_str(&format!(
                "its tools are not listed yet: `lmcp servers refresh {name}` starts it to list them\n"
            ));
        } else {
            let table_rows: Vec<Vec<String>> = rows
                .iter()
                .map(|r| {
                    vec![
                        r["tool"].as_str().unwrap_or_default().to_string(),
                        effect_words(r),
                        r["grant"].as_str().unwrap_or_default().to_string(),
                        r["why"].as_str().unwrap_or_default().to_string(),
                    ]
                })
                .collect();
            out.push_str(&table(&["TOOL", "CLAIMS", "GRANT", "FROM"], &table_rows));
        }
        for r in &refused {
            out.push_str(&format!("not offered: `{}`: {}\n", r.upstream, r.reason));
        }
        out
    });
    Ok(0)
}

async fn add(host: &Arc<Host>, r: AddArgs, json: bool) -> Result<u8> {
    names::check_server(&r.name)?;
    let name = r.name.clone();
    if host.config().servers.contains_key(&name) && !r.replace {
        return Err(Error::Usage(format!(
            "there is already an MCP server `{name}`; pass --replace to replace it, or pick \
             another name"
        )));
    }
    let mut server = Server {
        command: r.command.clone(),
        url: r.url.clone(),
        http: r.http,
        ..Server::default()
    };
    if let Some(url) = &r.url {
        crate::config::check_endpoint(url)?;
    }
    for h in &r.header {
        let (k, v) = h.split_once(':').ok_or_else(|| {
            Error::Usage(format!(
                "--header takes 'NAME: VALUE'; `{}` has no `:`",
                escape_controls(h)
            ))
        })?;
        check_header_name(k.trim())?;
        server
            .headers
            .insert(k.trim().to_string(), v.trim().to_string());
    }
    for k in &r.secret_header {
        check_header_name(k)?;
    }
    server.secret_headers = r.secret_header.clone();
    for pair in &r.env {
        let (k, v) = pair.split_once('=').ok_or_else(|| {
            Error::Usage(format!(
                "--env takes KEY=VALUE; `{}` has no `=`",
                escape_controls(pair)
            ))
        })?;
        check_env_name(k)?;
        server.env.insert(k.to_string(), v.to_string());
    }
    for k in &r.secret_env {
        check_env_name(k)?;
        if server.env.contains_key(k) {
            return Err(Error::Usage(format!(
                "`{k}` is given both with --env and --secret-env; give it once"
            )));
        }
    }
    server.secret_env = r.secret_env.clone();
    let asking = !r.yes && std::io::stdin().is_terminal() && !json;
    let shown_command = command_line(&r.command.iter().map(|c| json!(c)).collect::<Vec<_>>());
    if let (false, Some(url)) = (json, &r.url) {
        outln(&format!(
            "the MCP server `{name}` is reached at {}{}; what its tools are given is sent there",
            escape_controls(url),
            named(&server.headers, &server.secret_headers)
                .map(|names| format!(", with the headers {names}"))
                .unwrap_or_default()
        ));
    } else if !json {
        outln(&format!(
            "the MCP server `{name}` runs this command on this machine, as you, whenever one of \
             its tools is needed:\n  {shown_command}"
        ));
        if let Some(names) = named(&server.env, &server.secret_env) {
            outln(&format!("  with the variables {names}"));
        }
    }
    let first = if r.url.is_some() {
        "Connect to it now to list its tools?"
    } else {
        "Start it now to list its tools?"
    };
    if !(r.yes || (asking && ask(first)?)) {
        if !json {
            outln("not added (pass --yes to add it without asking)");
        }
        return Ok(3);
    }
    // secret values: asked for (or read from stdin) before the server starts, since it needs them
    let mut secrets = Map::new();
    for k in &server.secret_env {
        secrets.insert(k.clone(), Value::String(read_secret(k)?));
    }
    for k in &server.secret_headers {
        secrets.insert(
            upstream::secret_header_key(k),
            Value::String(read_secret(&format!("the header {k}"))?),
        );
    }
    let previous_secrets = upstream::secrets(host, &name).ok();
    if !secrets.is_empty() {
        upstream::store_secrets(host, &name, &secrets)?;
    }
    let definitions = match upstream::list_once(host, &name, &server).await {
        Ok(d) => d,
        Err(e) => {
            forget_new(host, &name, previous_secrets.as_ref());
            return Err(e);
        }
    };
    let (offered, refused) = tools::offered(&name, &definitions);
    let reads: Vec<&tools::Offered> = offered
        .iter()
        .filter(|o| o.spec.effect == crate::registry::Effect::Read)
        .collect();
    if !json {
        let rows: Vec<Vec<String>> = offered
            .iter()
            .map(|o| {
                let effect = if o.spec.annotations.destructive_hint {
                    format!("{}, destructive", o.spec.effect)
                } else {
                    o.spec.effect.to_string()
                };
                vec![o.spec.name.clone(), effect]
            })
            .collect();
        outln(&format!(
            "it lists {} tool(s), with the effects they claim (claims only lower trust: every \
             tool asks until you allow it):",
            offered.len()
        ));
        super::door::out(&table(&["TOOL", "CLAIMS"], &rows));
        for r in &refused {
            outln(&format!("  not offered: `{}`: {}", r.upstream, r.reason));
        }
        if r.allow_read && !reads.is_empty() {
            outln(&format!(
                "--allow-read: the {} tool(s) that claim to be read-only will run without asking, \
                 while their definitions stay as they are now",
                reads.len()
            ));
        }
    }
    let question = if r.allow_read && !reads.is_empty() {
        format!(
            "Add `{name}`, and allow its {} read-only tool(s)?",
            reads.len()
        )
    } else {
        format!("Add `{name}`?")
    };
    if !(r.yes || (asking && ask(&question)?)) {
        forget_new(host, &name, previous_secrets.as_ref());
        if !json {
            outln("not added");
        }
        return Ok(3);
    }
    let allowed: Vec<(String, String)> = if r.allow_read {
        reads
            .iter()
            .map(|o| {
                (
                    o.spec.name.clone(),
                    o.spec.definition.clone().unwrap_or_default(),
                )
            })
            .collect()
    } else {
        Vec::new()
    };
    host.update_config(|c| {
        // a replaced server's grants and pins go with it
        if r.replace {
            forget_grants(c, &name);
        }
        for (tool, hash) in &allowed {
            c.grants.insert(tool.clone(), Grant::Allow);
            server.pins.insert(tool.clone(), hash.clone());
        }
        c.servers.insert(name.clone(), server.clone());
        Ok(())
    })?;
    upstream::register(host, &name, &definitions);
    let value = json!({
        "added": name,
        "tools": offered.iter().map(|o| o.spec.name.clone()).collect::<Vec<_>>(),
        "allowed": allowed.iter().map(|(t, _)| t.clone()).collect::<Vec<_>>(),
        "refused": refused.iter().map(|r| json!({"tool": r.upstream, "reason": r.reason})).collect::<Vec<_>>(),
    });
    emit(json, &value, || {
        format!(
            "added `{name}`: {} tool(s), {} allowed; call them as mcp__{name}__TOOL, and allow \
             more with `lmcp grants allow mcp__{name}__TOOL` (or `mcp__{name}` for all)\n",
            offered.len(),
            allowed.len()
        )
    });
    Ok(0)
}

/// Undoes what an add that did not finish left: the tool list and, for a new server, the
/// secrets (a replaced server's old secrets are put back).
fn forget_new(host: &Host, name: &str, previous_secrets: Option<&Map<String, Value>>) {
    if host.config().servers.contains_key(name) {
        if let Some(old) = previous_secrets
            && let Err(e) = upstream::store_secrets(host, name, old)
        {
            host.warn(format!("could not put back the secrets of `{name}`: {e}"));
        }
        return;
    }
    upstream::catalog::remove(host, name);
    let _ = std::fs::remove_file(upstream::secrets_path(host, name));
}

/// Removes every grant of a server's tools (its own key and each tool's).
fn forget_grants(c: &mut crate::config::Config, name: &str) {
    let server_key = names::server_key(name);
    c.grants
        .retain(|k, _| k != &server_key && names::server_of(k) != Some(name));
}

fn check_header_name(k: &str) -> Result<()> {
    if http::HeaderName::from_bytes(k.as_bytes()).is_ok() {
        Ok(())
    } else {
        Err(Error::Usage(format!(
            "`{}` is not a header name",
            escape_controls(k)
        )))
    }
}

fn check_env_name(k: &str) -> Result<()> {
    let ok = !k.is_empty()
        && !k.starts_with(|c: char| c.is_ascii_digit())
        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(Error::Usage(format!(
            "`{}` is not a variable name: use letters, digits and _, not starting with a digit",
            escape_controls(k)
        )))
    }
}

/// A secret's value: asked for on the terminal (not echoed... as typed: terminals echo), or one
/// line read from stdin when it is not a terminal.
fn read_secret(key: &str) -> Result<String> {
    let mut line = String::new();
    if std::io::stdin().is_terminal() {
        crate::text::terminal::show(
            crate::text::terminal::Stream::Err,
            &format!("value of {key} (kept readable by you only): "),
        );
    }
    std::io::stdin()
        .read_line(&mut line)
        .map_err(|e| Error::Usage(format!("cannot read the value of {key}: {e}")))?;
    let value = line.trim_end_matches(['\n', '\r']).to_string();
    if value.is_empty() {
        return Err(Error::Usage(format!(
            "no value for the secret {key}: type it, or give it as a line on stdin"
        )));
    }
    Ok(value)
}

async fn refresh(host: &Arc<Host>, name: &str, json: bool) -> Result<u8> {
    let server = existing(host, name)?;
    let before = upstream::catalog::load(host, name)
        .map(|c| c.tools)
        .unwrap_or_default();
    let definitions = upstream::list_once(host, name, &server).await?;
    if !server.disabled {
        upstream::register(host, name, &definitions);
    }
    let hashes = |defs: &[Value]| -> std::collections::BTreeMap<String, String> {
        defs.iter()
            .filter_map(|d| {
                Some((
                    d.get("name")?.as_str()?.to_string(),
                    upstream::trust::definition_hash(d),
                ))
            })
            .collect()
    };
    let (old, new) = (hashes(&before), hashes(&definitions));
    let added: Vec<&String> = new.keys().filter(|k| !old.contains_key(*k)).collect();
    let gone: Vec<&String> = old.keys().filter(|k| !new.contains_key(*k)).collect();
    let changed: Vec<&String> = new
        .iter()
        .filter(|(k, h)| old.get(*k).is_some_and(|o| o != *h))
        .map(|(k, _)| k)
        .collect();
    let value = json!({"server": name, "tools": new.len(), "added": added, "removed": gone, "changed": changed});
    emit(json, &value, || {
        let mut out = format!("`{name}` lists {} tool(s)", new.len());
        for (what, list) in [("new", &added), ("gone", &gone), ("changed", &changed)] {
            if !list.is_empty() {
                let names: Vec<String> = list
                    .iter()
                    .map(|s| escape_controls(s).into_owned())
                    .collect();
                out.push_str(&format!("; {what}: {}", names.join(", ")));
            }
        }
        out.push('\n');
        out
    });
    Ok(0)
}

fn remove(host: &Arc<Host>, name: &str, json: bool) -> Result<u8> {
    existing(host, name)?;
    host.update_config(|c| {
        c.servers.remove(name);
        forget_grants(c, name);
        Ok(())
    })?;
    upstream::unregister(host, name);
    upstream::catalog::remove(host, name);
    let _ = std::fs::remove_file(upstream::secrets_path(host, name));
    emit(json, &json!({"removed": name}), || {
        format!("removed `{name}`, its grants, secrets and tool list\n")
    });
    Ok(0)
}

fn switch(
    host: &Arc<Host>,
    name: &str,
    json: bool,
    change: impl FnOnce(&mut Server),
) -> Result<u8> {
    existing(host, name)?;
    let server = host.update_config(|c| {
        let s = c
            .servers
            .get_mut(name)
            .ok_or_else(|| Error::Usage(format!("there is no MCP server `{name}`")))?;
        change(s);
        Ok(s.clone())
    })?;
    if server.disabled {
        upstream::unregister(host, name);
    } else if let Some(c) = upstream::catalog::load(host, name) {
        upstream::register(host, name, &c.tools);
    }
    host.registry().announce_change();
    emit(
        json,
        &json!({"server": name, "enabled": !server.disabled, "http": server.http}),
        || {
            format!(
                "`{name}`: {}, {} over HTTP\n",
                if server.disabled {
                    "disabled"
                } else {
                    "enabled"
                },
                if server.http {
                    "offered"
                } else {
                    "not offered"
                }
            )
        },
    );
    Ok(0)
}

/// The usual place of a client's configuration.
fn default_import_file(from: ImportFrom) -> Result<std::path::PathBuf> {
    match from {
        ImportFrom::Vscode => Ok(std::path::PathBuf::from(".vscode/mcp.json")),
        ImportFrom::ClaudeDesktop => directories::BaseDirs::new()
            .map(|d| {
                d.config_dir()
                    .join("Claude")
                    .join("claude_desktop_config.json")
            })
            .ok_or_else(|| {
                Error::Usage(
                    "cannot tell where Claude Desktop keeps its configuration here; give the file"
                        .into(),
                )
            }),
    }
}

/// A name from another client's configuration as an lmcp server name: lowercase, every other
/// character `_`, no `__`, at most 32 characters; `None` when nothing is left.
fn import_name(name: &str) -> Option<String> {
    let mut out = String::new();
    for c in name.chars().flat_map(char::to_lowercase) {
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() {
            c
        } else {
            '_'
        };
        if c == '_' && (out.is_empty() || out.ends_with('_')) {
            continue;
        }
        out.push(c);
    }
    out.truncate(names::MAX_SERVER_NAME);
    let out = out.trim_end_matches('_').to_string();
    crate::config::valid_server_name(&out).then_some(out)
}

/// One server found in another client's configuration: what lmcp would add, or why not.
struct Found {
    /// Its name there.
    original: String,
    /// Its name here, and its entry with its variables' values (kept as secrets).
    added: std::result::Result<(String, Server, Map<String, Value>), String>,
}

/// The names of a server's variables or headers, the secret ones marked, for people; `None`
/// when it has none.
fn named(plain: &std::collections::BTreeMap<String, String>, secret: &[String]) -> Option<String> {
    let mut names: Vec<String> = plain.keys().cloned().collect();
    names.extend(secret.iter().map(|k| format!("{k} (secret)")));
    (!names.is_empty()).then(|| names.join(", "))
}

/// An imported entry's `field` (its `env` or `headers`): every value a string that is not a
/// VS Code input, every name checked, each kept as a secret under `key_of(name)`.
fn imported_secrets(
    entry: &Value,
    field: &str,
    what: &str,
    check: fn(&str) -> Result<()>,
    key_of: fn(&str) -> String,
) -> std::result::Result<Map<String, Value>, String> {
    let mut secrets = Map::new();
    for (k, v) in entry
        .get(field)
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let v = v
            .as_str()
            .ok_or(format!("the {what} {k} is not a string"))?;
        if v.contains("${input:") {
            return Err(format!(
                "its {what} {k} asks VS Code for an input, which only VS Code can fill in"
            ));
        }
        check(k).map_err(|e| e.to_string())?;
        secrets.insert(key_of(k), Value::String(v.to_string()));
    }
    Ok(secrets)
}

/// The servers of a client's configuration.
fn found_servers(from: ImportFrom, config: &Value, taken: &[String]) -> Vec<Found> {
    let key = match from {
        ImportFrom::ClaudeDesktop => "mcpServers",
        ImportFrom::Vscode => "servers",
    };
    let entries = config
        .get(key)
        .or_else(|| config.get("mcp").and_then(|m| m.get(key)))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut used: Vec<String> = Vec::new();
    entries
        .into_iter()
        .map(|(original, entry)| {
            let added = (|| {
                let name = import_name(&original)
                    .ok_or("its name has no letters or digits to make an lmcp name from")?;
                if taken.contains(&name) {
                    return Err(format!("the name `{name}` is taken here"));
                }
                if used.contains(&name) {
                    return Err(format!(
                        "another server in the file also becomes `{name}` here; add one of them \
                         with `lmcp servers add`"
                    ));
                }
                for unsupported in ["envFile", "cwd"] {
                    if entry.get(unsupported).is_some() {
                        return Err(format!(
                            "it sets `{unsupported}`, which lmcp does not take; add it with `lmcp servers add`"
                        ));
                    }
                }
                if entry.get("url").is_some() && entry.get("command").is_some() {
                    return Err("it gives both a command and a url".into());
                }
                if let Some(url) = entry.get("url") {
                    let url = url.as_str().ok_or("its url is not a string")?;
                    if entry.get("type").and_then(Value::as_str) == Some("sse") {
                        return Err("it speaks the old HTTP+SSE transport; lmcp speaks Streamable HTTP".into());
                    }
                    crate::config::check_endpoint(url).map_err(|e| e.to_string())?;
                    if url.contains("${input:") {
                        return Err("its url asks VS Code for an input, which only VS Code can fill in".into());
                    }
                    let secrets = imported_secrets(
                        &entry,
                        "headers",
                        "header",
                        check_header_name,
                        upstream::secret_header_key,
                    )?;
                    let server = Server {
                        url: Some(url.to_string()),
                        secret_headers: entry
                            .get("headers")
                            .and_then(Value::as_object)
                            .map(|h| h.keys().cloned().collect())
                            .unwrap_or_default(),
                        ..Server::default()
                    };
                    used.push(name.clone());
                    return Ok((name, server, secrets));
                }
                let command = entry
                    .get("command")
                    .and_then(Value::as_str)
                    .filter(|c| !c.is_empty())
                    .ok_or("it has no command")?;
                let mut words = vec![command.to_string()];
                let args = match entry.get("args") {
                    None | Some(Value::Null) => &[][..],
                    Some(Value::Array(a)) => a.as_slice(),
                    Some(_) => return Err("its args are not a list of strings".into()),
                };
                for a in args {
                    words.push(a.as_str().ok_or("an argument is not a string")?.to_string());
                }
                if words.iter().any(|w| w.contains("${input:")) {
                    return Err("it asks VS Code for an input (`${input:...}`), which only VS Code can fill in; add it with `lmcp servers add`".into());
                }
                let secrets =
                    imported_secrets(&entry, "env", "variable", check_env_name, str::to_string)?;
                let server = Server {
                    command: words,
                    secret_env: secrets.keys().cloned().collect(),
                    ..Server::default()
                };
                used.push(name.clone());
                Ok((name, server, secrets))
            })();
            Found { original, added }
        })
        .collect()
}

async fn import(
    host: &Arc<Host>,
    from: ImportFrom,
    file: Option<&std::path::Path>,
    yes: bool,
    json: bool,
) -> Result<u8> {
    let path = match file {
        Some(p) => p.to_path_buf(),
        None => default_import_file(from)?,
    };
    let text = super::door::read_input(&path)?;
    let config: Value = serde_json::from_str(&text)
        .map_err(|e| Error::Usage(format!("{} is not JSON: {e}", path.display())))?;
    let taken: Vec<String> = host.config().servers.keys().cloned().collect();
    let found = found_servers(from, &config, &taken);
    if found.is_empty() {
        return Err(Error::Usage(format!(
            "{} names no MCP servers",
            path.display()
        )));
    }
    if !json {
        outln(&format!(
            "{} names {} server(s); each runs its command on this machine, as you, or is reached \
             at its URL, whenever one of its tools is needed (their variables and headers are \
             kept as secrets):",
            path.display(),
            found.len()
        ));
        for f in &found {
            match &f.added {
                Ok((name, server, _)) => outln(&format!(
                    "  {name}: {}",
                    match &server.url {
                        Some(url) => escape_controls(url).into_owned(),
                        None => command_line(
                            &server.command.iter().map(|c| json!(c)).collect::<Vec<_>>()
                        ),
                    }
                )),
                Err(why) => outln(&format!(
                    "  skipped `{}`: {why}",
                    escape_controls(&f.original)
                )),
            }
        }
    }
    let adding: Vec<&(String, Server, Map<String, Value>)> =
        found.iter().filter_map(|f| f.added.as_ref().ok()).collect();
    if adding.is_empty() {
        return Err(Error::Usage("none of them can be added here".into()));
    }
    let asking = !yes && std::io::stdin().is_terminal() && !json;
    let question = format!(
        "Add these {} server(s) and start each to list its tools?",
        adding.len()
    );
    if !(yes || (asking && ask(&question)?)) {
        if !json {
            outln("nothing imported (pass --yes to import without asking)");
        }
        return Ok(3);
    }
    let mut report = Vec::new();
    for (name, server, secrets) in adding {
        if !secrets.is_empty() {
            upstream::store_secrets(host, name, secrets)?;
        }
        host.update_config(|c| {
            c.servers.insert(name.clone(), server.clone());
            Ok(())
        })?;
        let listed = upstream::list_once(host, name, server).await;
        let entry = match &listed {
            Ok(definitions) => {
                upstream::register(host, name, definitions);
                json!({"server": name, "tools": tools::offered(name, definitions).0.len()})
            }
            Err(e) => json!({"server": name, "error": e.to_string()}),
        };
        report.push(entry);
    }
    let skipped: Vec<Value> = found
        .iter()
        .filter_map(|f| {
            f.added
                .as_ref()
                .err()
                .map(|why| json!({"server": f.original, "reason": why}))
        })
        .collect();
    let value = json!({"imported": report, "skipped": skipped});
    emit(json, &value, || {
        let mut out = String::new();
        for r in &report {
            match r.get("error") {
                Some(e) => out.push_str(&format!(
                    "added `{}`, which could not list its tools: {}\n",
                    r["server"].as_str().unwrap_or_default(),
                    e.as_str().unwrap_or_default()
                )),
                None => out.push_str(&format!(
                    "added `{}`: {} tool(s)\n",
                    r["server"].as_str().unwrap_or_default(),
                    r["tools"]
                )),
            }
        }
        out.push_str("each tool asks until you allow it: `lmcp grants allow mcp__SERVER` allows a whole server\n");
        out
    });
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imported_names_become_server_names() {
        assert_eq!(import_name("GitHub").as_deref(), Some("github"));
        assert_eq!(import_name("my-server.v2").as_deref(), Some("my_server_v2"));
        assert_eq!(import_name("--a--b--").as_deref(), Some("a_b"));
        assert_eq!(import_name("ä"), None);
        assert_eq!(import_name(&"x".repeat(40)).map(|n| n.len()), Some(32));
    }

    #[test]
    fn what_cannot_be_imported_is_said_and_the_rest_kept() {
        let config = json!({"mcpServers": {
            "Files": {"command": "npx", "args": ["-y", "server"], "env": {"TOKEN": "t"}},
            "remote": {"url": "https://example.org/mcp"},
            "asks": {"command": "x", "args": ["${input:key}"]},
            "files": {"command": "again"},
            "taken": {"command": "y"},
            "stringargs": {"command": "z", "args": "--read-only"},
            "both": {"command": "z", "url": "https://example.org/mcp"},
            "cwd": {"command": "z", "cwd": "/tmp"}
        }});
        let found = found_servers(ImportFrom::ClaudeDesktop, &config, &["taken".into()]);
        let by = |n: &str| found.iter().find(|f| f.original == n).unwrap();
        let (name, server, secrets) = by("Files").added.as_ref().unwrap();
        assert_eq!(name, "files");
        assert_eq!(server.command, vec!["npx", "-y", "server"]);
        assert_eq!(server.secret_env, vec!["TOKEN"]);
        assert!(server.env.is_empty(), "imported values are kept as secrets");
        assert_eq!(secrets["TOKEN"], "t");
        let (_, remote, _) = by("remote").added.as_ref().unwrap();
        assert_eq!(remote.url.as_deref(), Some("https://example.org/mcp"));
        assert!(by("asks").added.as_ref().unwrap_err().contains("input"));
        assert!(
            by("files")
                .added
                .as_ref()
                .unwrap_err()
                .contains("also becomes")
        );
        assert!(
            by("stringargs")
                .added
                .as_ref()
                .unwrap_err()
                .contains("not a list")
        );
        assert!(by("both").added.as_ref().unwrap_err().contains("both"));
        assert!(by("cwd").added.as_ref().unwrap_err().contains("cwd"));
        assert!(by("taken").added.as_ref().unwrap_err().contains("taken"));
        // VS Code's own key
        let vs = json!({"servers": {"a": {"type": "stdio", "command": "a"}}});
        assert!(found_servers(ImportFrom::Vscode, &vs, &[])[0].added.is_ok());
    }
}
