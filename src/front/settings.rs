//! The settings commands: grants, modes, roots, history, signals, types and paths.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};

use super::cli::{ConfigCommand, GrantsCommand, ModeArg, RootsCommand, SignalsCommand, Switch};
use super::door::{ask, emit, table, write_output};

use crate::config::{DESTRUCTIVE_KEY, Grant};
use crate::error::{Error, Result};
use crate::host::Host;
use crate::registry::Effect;

/// Checks a grant key: a registered tool, an effect, or `destructive`.
pub(super) fn check_grant_key(host: &Host, key: &str) -> Result<()> {
    if Effect::parse(key).is_some() || key == DESTRUCTIVE_KEY || host.registry().get(key).is_some()
    {
        return Ok(());
    }
    // every tool of another MCP server: `mcp__SERVER`
    if let Some(server) = key.strip_prefix(crate::config::UPSTREAM_PREFIX)
        && host.config().servers.contains_key(server)
    {
        return Ok(());
    }
    // A rule may come before the custom tool it is for (denying what an agent might save);
    // the look-up above loaded the library, so one that does not exist yet is said so.
    if key.starts_with("user_") && crate::registry::check_name(key).is_ok() {
        host.warn(format!(
            "there is no custom tool `{key}` yet; the rule applies once one is saved under \
             that name{}",
            host.registry().did_you_mean(key)
        ));
        return Ok(());
    }
    Err(Error::Usage(format!(
        "`{key}` is not a tool, an effect (read, write, send) or `destructive`{}",
        host.registry().did_you_mean(key)
    )))
}

pub(super) fn grants(host: &Arc<Host>, action: GrantsCommand, json: bool) -> Result<u8> {
    let set = |key: String, grant: Grant| -> Result<u8> {
        check_grant_key(host, &key)?;
        // an allow of another server's tools is pinned to their definitions as they are now
        let pins = if grant == Grant::Allow {
            crate::upstream::pins_for(host, &key)
        } else {
            Vec::new()
        };
        host.update_config(|c| {
            c.grants.insert(key.clone(), grant);
            for (tool, hash) in &pins {
                if let Some(server) = crate::config::upstream_server(tool)
                    && let Some(entry) = c.servers.get_mut(server)
                {
                    entry.pins.insert(tool.clone(), hash.clone());
                }
            }
            Ok(())
        })?;
        emit(json, &json!({"key": key, "grant": grant}), || {
            format!("{key}: {grant}")
        });
        Ok(0)
    };
    match action {
        GrantsCommand::Allow { key } => set(key, Grant::Allow),
        GrantsCommand::Ask { key } => set(key, Grant::Ask),
        GrantsCommand::Deny { key } => set(key, Grant::Deny),
        GrantsCommand::Reset { key } => {
            let removed = host.update_config(|c| match &key {
                Some(k) => Ok(c.grants.remove(k).map_or(0, |_| 1)),
                None => {
                    let n = c.grants.len();
                    c.grants.clear();
                    Ok(n)
                }
            })?;
            if let (Some(k), 0) = (&key, removed) {
                return Err(Error::Usage(format!(
                    "there is no rule for `{k}`; see `lmcp grants`"
                )));
            }
            emit(json, &json!({"removed": removed}), || {
                format!("removed {removed} rule(s)")
            });
            Ok(0)
        }
        GrantsCommand::List => {
            let config = host.config();
            let tools: Vec<Value> = host
                .registry()
                .all()
                .iter()
                .map(|t| {
                    let s = t.spec();
                    let (g, source) =
                        config.grant_for(&s.name, s.effect, s.annotations.destructive_hint);
                    json!({"tool": s.name, "grant": g, "source": source})
                })
                .collect();
            let problem = host.config_problem();
            let value = json!({"rules": config.grants, "tools": tools, "config_problem": problem});
            emit(json, &value, || {
                let mut out = problem_line(problem.as_deref());
                out.push_str("rules:\n");
                if config.grants.is_empty() {
                    out.push_str("  (none: defaults apply — read and write allow, send and destructive ask)\n");
                }
                for (k, g) in &config.grants {
                    out.push_str(&format!("  {k}: {g}\n"));
                }
                out.push('\n');
                let rows: Vec<Vec<String>> = tools
                    .iter()
                    .map(|t| {
                        vec![
                            t["tool"].as_str().unwrap_or_default().to_string(),
                            t["grant"].as_str().unwrap_or_default().to_string(),
                            t["source"].as_str().unwrap_or_default().to_string(),
                        ]
                    })
                    .collect();
                out.push_str(&table(&["TOOL", "GRANT", "FROM"], &rows));
                out
            });
            Ok(0)
        }
    }
}

pub(super) fn mode_cmd(
    host: &Arc<Host>,
    mode: Option<ModeArg>,
    state: Option<Switch>,
    json: bool,
) -> Result<u8> {
    if let (Some(mode), Some(state)) = (mode, state) {
        let on = matches!(state, Switch::On);
        host.update_config(|c| {
            match mode {
                ModeArg::Private => c.modes.private = on,
                ModeArg::ReadOnly => c.modes.read_only = on,
                ModeArg::NoTerminal => c.modes.no_terminal = on,
            }
            Ok(())
        })?;
    }
    let m = host.config().modes.clone();
    let all = [
        ("private", m.private),
        ("read-only", m.read_only),
        ("no-terminal", m.no_terminal),
    ];
    let shown: Vec<(&str, bool)> = match mode {
        Some(ModeArg::Private) => vec![all[0]],
        Some(ModeArg::ReadOnly) => vec![all[1]],
        Some(ModeArg::NoTerminal) => vec![all[2]],
        None => all.to_vec(),
    };
    let problem = host.config_problem();
    let mut value: serde_json::Map<String, Value> = shown
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    if let Some(p) = &problem {
        value.insert("config_problem".into(), json!(p));
    }
    emit(json, &Value::Object(value), || {
        let mut out = problem_line(problem.as_deref());
        for (k, v) in &shown {
            out.push_str(&format!("{k}: {}\n", if *v { "on" } else { "off" }));
        }
        out
    });
    Ok(0)
}

/// Why a root would be very wide: the file system's root, the home folder, or a folder holding
/// lmcp's own folders.
fn too_wide(host: &Host, real: &std::path::Path) -> Option<&'static str> {
    let canon = |p: &std::path::Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    if real.parent().is_none() {
        return Some("the root of the file system");
    }
    let home = crate::store::home_dir().map(|h| canon(&h));
    if home.as_deref() == Some(real) {
        return Some("your home folder");
    }
    let paths = host.paths();
    let own = [&paths.config_dir, &paths.data_dir];
    if own.iter().any(|p| canon(p).starts_with(real)) {
        return Some("a folder holding lmcp's own settings or data");
    }
    None
}

/// lmcp's own folders, for messages.
fn protected_list(host: &Host) -> String {
    let p = host.paths();
    format!("{} and {}", p.config_dir.display(), p.data_dir.display())
}

/// "config: PROBLEM" first in settings listings while the config cannot be read.
fn problem_line(problem: Option<&str>) -> String {
    problem.map_or_else(String::new, |p| format!("config: {p}\n\n"))
}

/// `lmcp config check|repair`.
pub(super) fn config_cmd(host: &Arc<Host>, action: ConfigCommand, json: bool) -> Result<u8> {
    let problem = host.config_problem();
    let path = host.paths().config_file();
    match action {
        ConfigCommand::Check => {
            // what does not stop lmcp but drops a rule the person meant: named here too
            let mut warnings = host.unknown_grant_keys();
            let unknown = host.config().unknown_fields();
            if !unknown.is_empty() {
                warnings.push(format!(
                    "fields this lmcp does not know: {}",
                    unknown.join(", ")
                ));
            }
            let ok = problem.is_none() && warnings.is_empty();
            let value = json!({"path": path, "ok": ok, "problem": problem, "warnings": warnings});
            emit(json, &value, || match &problem {
                None if warnings.is_empty() && !path.exists() => format!(
                    "{} does not exist yet: lmcp runs on the defaults (a setting saves it)",
                    path.display()
                ),
                None if warnings.is_empty() => format!("{} is fine", path.display()),
                None => format!(
                    "{} can be read, but:\n  {}",
                    path.display(),
                    warnings.join("\n  ")
                ),
                Some(p) => format!("{p}\nrepair with `lmcp config repair`"),
            });
            Ok(if ok { 0 } else { 1 })
        }
        ConfigCommand::Repair { yes } => {
            let Some(p) = problem else {
                emit(json, &json!({"path": path, "repaired": false}), || {
                    format!("{} is fine; nothing to repair", path.display())
                });
                return Ok(0);
            };
            if !json {
                errln!("{}", crate::text::escape_controls(&p));
            }
            let go = yes
                || (std::io::IsTerminal::is_terminal(&std::io::stdin())
                    && !json
                    && ask("Set it aside and start from the default settings?")?);
            if !go {
                if !json {
                    errln!("nothing was changed (pass --yes to repair)");
                }
                return Ok(3);
            }
            let aside = host.repair_config()?;
            let value = json!({"path": path, "repaired": aside.is_some(), "kept_as": aside});
            emit(json, &value, || match &aside {
                Some(a) => format!(
                    "set the broken file aside as {}; {} now holds the defaults",
                    a.display(),
                    path.display()
                ),
                None => format!("{} is fine; nothing to repair", path.display()),
            });
            Ok(0)
        }
    }
}

pub(super) fn roots(host: &Arc<Host>, action: RootsCommand, json: bool) -> Result<u8> {
    match action {
        RootsCommand::List => {
            let roots = host.roots()?;
            let value = json!(
                roots
                    .iter()
                    .map(|r| r.display().to_string())
                    .collect::<Vec<_>>()
            );
            emit(json, &value, || {
                roots
                    .iter()
                    .enumerate()
                    .map(|(i, r)| {
                        let tag = if i == 0 {
                            "  (workspace; relative paths land here)"
                        } else {
                            ""
                        };
                        format!("{}{tag}\n", r.display())
                    })
                    .collect()
            });
        }
        RootsCommand::Add { dir, yes } => {
            let real = std::fs::canonicalize(&dir).map_err(|e| {
                Error::Usage(format!("cannot add {} as a root: {e}", dir.display()))
            })?;
            if !real.is_dir() {
                return Err(Error::Usage(format!("{} is not a folder", dir.display())));
            }
            if let Some(why) = too_wide(host, &real)
                && !yes
            {
                return Err(Error::NeedsConfirmation {
                    tool: "roots add".into(),
                    reason: format!(
                        "{} is {why}. The file tools could then reach everything under it, \
                         except lmcp's own settings and data ({}), which stay protected. Add it \
                         with --yes if that is what you want, or add a narrower folder",
                        real.display(),
                        protected_list(host)
                    ),
                });
            }
            let added = host.update_config(|c| {
                if c.roots.contains(&real) {
                    return Ok(false);
                }
                c.roots.push(real.clone());
                Ok(true)
            })?;
            let d = real.display().to_string();
            emit(json, &json!({"root": d, "added": added}), || {
                if added {
                    format!("added {d}")
                } else {
                    format!("{d} is already a root")
                }
            });
        }
        RootsCommand::Remove { dir } => {
            let real = std::fs::canonicalize(&dir).unwrap_or(dir.clone());
            let removed = host.update_config(|c| {
                let before = c.roots.len();
                c.roots.retain(|r| r != &real && r != &dir);
                Ok(before != c.roots.len())
            })?;
            if !removed {
                return Err(Error::Usage(format!(
                    "{} is not a root; `lmcp roots` lists them",
                    dir.display()
                )));
            }
            emit(
                json,
                &json!({"removed": real.display().to_string()}),
                || format!("removed {}", real.display()),
            );
        }
    }
    Ok(0)
}

pub(super) fn history(host: &Arc<Host>, count: usize, json: bool) -> Result<u8> {
    let recent = host.history().recent(count)?;
    if recent.skipped > 0 {
        let files: Vec<String> = recent
            .damaged
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        host.warn(format!(
            "skipped {} unreadable line(s) in {}",
            recent.skipped,
            files.join(" and ")
        ));
    }
    for path in &recent.not_files {
        host.warn(format!(
            "skipped {}: it is not a file (move it away; lmcp makes it again)",
            path.display()
        ));
    }
    let value = serde_json::to_value(&recent.entries).unwrap_or_default();
    emit(json, &value, || {
        let rows: Vec<Vec<String>> = recent
            .entries
            .iter()
            .map(|e| {
                let when = chrono::DateTime::from_timestamp_millis(e.at_ms)
                    .map(|t| {
                        t.with_timezone(&chrono::Local)
                            .format("%Y-%m-%d %H:%M:%S")
                            .to_string()
                    })
                    .unwrap_or_default();
                let args: Vec<String> = e
                    .args
                    .iter()
                    .map(|a| format!("{}:{}[{}]", a.name, a.kind, a.size))
                    .collect();
                vec![
                    when,
                    e.tool.clone(),
                    e.origin.clone(),
                    e.outcome.clone(),
                    format!("{:.1}ms", e.duration_ms),
                    args.join(" "),
                ]
            })
            .collect();
        table(
            &["WHEN", "TOOL", "ORIGIN", "OUTCOME", "TOOK", "ARGS"],
            &rows,
        )
    });
    Ok(0)
}

pub(super) fn types(
    host: &Arc<Host>,
    output: Option<PathBuf>,
    config: bool,
    force: bool,
    json: bool,
) -> Result<u8> {
    let text = crate::script::types::lua_definitions(&host.registry().all());
    let Some(path) = output else {
        if json {
            emit(true, &json!({"definitions": text}), String::new);
        } else {
            super::door::out(&text);
        }
        return Ok(0);
    };
    let mut written = Vec::new();
    // A folder: one that exists, a path ending in `/`, or a new name without an extension.
    let folder = path.is_dir()
        || path.to_string_lossy().ends_with('/')
        || (std::fs::symlink_metadata(&path).is_err() && path.extension().is_none());
    let library = if !folder {
        write_output(host, &path, text.as_bytes(), force)?;
        written.push(path.display().to_string());
        match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        }
    } else {
        // never a folder made inside lmcp's own: check the nearest one that exists
        let existing = path
            .ancestors()
            .map(|a| {
                if a.as_os_str().is_empty() {
                    std::path::Path::new(".")
                } else {
                    a
                }
            })
            .find(|a| a.is_dir())
            .unwrap_or(std::path::Path::new("."));
        super::door::refuse_own_folders(host, existing, &path)?;
        std::fs::create_dir_all(&path).map_err(|e| Error::io(&path, e))?;
        let mut files = vec![("lmcp.lua".to_string(), text.clone())];
        for (name, source) in crate::script::STDLIB_MODULES {
            files.push((format!("{name}.lua"), source.to_string()));
        }
        for (name, body) in files {
            let file = path.join(name);
            write_output(host, &file, body.as_bytes(), force)?;
            written.push(file.display().to_string());
        }
        path.clone()
    };
    if config {
        let library = library.display().to_string();
        for (name, body) in crate::script::types::editor_configs(&library) {
            let file = PathBuf::from(name);
            match std::fs::read_to_string(&file) {
                Ok(existing) if existing != body && !force => {
                    return Err(Error::Refused(format!(
                        "{name} exists with other settings; merge these into it, or pass \
                         --force to replace it:\n{body}"
                    )));
                }
                _ => {}
            }
            write_output(host, &file, body.as_bytes(), force)?;
            written.push(name.to_string());
        }
    }
    emit(json, &json!({"written": written}), || {
        written.iter().map(|w| format!("wrote {w}\n")).collect()
    });
    Ok(0)
}

/// Removes the friction reports waiting to be sent; how many there were (`None`: the outbox
/// could not be read, and went all the same). Front doors reach no tool module (a test keeps
/// it so), so the outbox is read here as what it is on disk: a JSON array.
fn discard_waiting(host: &Host) -> Result<Option<usize>> {
    let outbox = host.paths().friction_outbox();
    let _lock = crate::store::FileLock::acquire(&outbox)?;
    let count = crate::store::read_json::<Vec<Value>>(&outbox)
        .ok()
        .map(|q| q.map_or(0, |q| q.len()));
    match std::fs::remove_file(&outbox) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(&outbox, e)),
        _ => Ok(count),
    }
}

pub(super) fn signals(host: &Arc<Host>, action: SignalsCommand, json: bool) -> Result<u8> {
    let mut discarded = None;
    match action {
        SignalsCommand::On | SignalsCommand::Off => {
            let on = matches!(action, SignalsCommand::On);
            host.update_config(|c| {
                c.signals.enabled = on;
                Ok(())
            })?;
            if !on {
                // off keeps nothing: the reports waiting to be sent go too, and the person is
                // told how many
                discarded = Some(discard_waiting(host)?);
            }
        }
        SignalsCommand::Endpoint { url, clear } => {
            if let Some(u) = &url {
                crate::config::check_endpoint(u)?;
            } else if !clear {
                return Err(Error::Usage(
                    "give a URL, or --clear to remove the endpoint".into(),
                ));
            }
            host.update_config(|c| {
                c.signals.endpoint = url.clone();
                Ok(())
            })?;
        }
        SignalsCommand::Status => {}
    }
    let s = host.config().signals.clone();
    let mut value = json!({"enabled": s.enabled, "endpoint": s.endpoint});
    if let Some(n) = discarded {
        value["discarded"] = json!(n);
    }
    emit(json, &value, || {
        format!(
            "anonymous signals: {}\nendpoint: {}\n{}",
            if s.enabled { "on" } else { "off" },
            s.endpoint
                .as_deref()
                .unwrap_or("(none: reports wait in the outbox)"),
            match discarded {
                Some(Some(1)) => "discarded 1 waiting report\n".to_string(),
                Some(Some(n)) => format!("discarded {n} waiting reports\n"),
                Some(None) =>
                    "discarded the waiting reports (the outbox could not be read)\n".into(),
                None => String::new(),
            }
        )
    });
    Ok(0)
}

pub(super) fn paths(host: &Arc<Host>, json: bool) -> Result<u8> {
    let p = host.paths();
    let entries = [
        ("config_dir", p.config_dir.clone()),
        ("data_dir", p.data_dir.clone()),
        ("config_file", p.config_file()),
        ("history_file", p.history_file()),
        ("workspace", p.workspace_dir()),
    ];
    let value = Value::Object(
        entries
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v.display().to_string())))
            .collect(),
    );
    emit(json, &value, || {
        entries
            .iter()
            .map(|(k, v)| format!("{k:<13} {}\n", v.display()))
            .collect()
    });
    Ok(0)
}
