//! `lmcp skill ...`: install, inspect, configure and call skills from the command line. Every
//! action is a call of the matching `skill_*` tool through the gate.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Subcommand;
use serde_json::{Map, Value, json};

use super::door::{ask, emit};
use crate::error::{Error, Result};
use crate::host::Host;
use crate::library::skills;
use crate::text::escape_controls;

/// `lmcp skill ...`
#[derive(Debug, Subcommand)]
pub enum SkillCommand {
    /// List the installed skills.
    List,
    /// Show a skill: prompt, config (secrets masked), scripts and references.
    Show {
        /// The skill's name.
        #[arg(add = clap_complete::ArgValueCandidates::new(super::complete::skills))]
        name: String,
    },
    /// Install (or update) a skill from a folder as the Agent Skills format lays it out: SKILL.md,
    /// scripts/*.lua (tools) and any other files (references: only read, never run).
    Install {
        /// The folder.
        dir: PathBuf,
        /// Install without asking after showing what its scripts call.
        #[arg(short, long)]
        yes: bool,
    },
    /// Remove a skill (asks first; --yes to confirm up front).
    Remove {
        /// The skill's name.
        #[arg(add = clap_complete::ArgValueCandidates::new(super::complete::skills))]
        name: String,
        /// Confirm without asking.
        #[arg(short, long)]
        yes: bool,
    },
    /// Run one of a skill's scripts.
    Call {
        /// The skill's name.
        #[arg(add = clap_complete::ArgValueCandidates::new(super::complete::skills))]
        skill: String,
        /// The script's name.
        script: String,
        /// Params as a JSON object.
        params: Option<String>,
        /// Run state-changing calls without asking.
        #[arg(short, long)]
        yes: bool,
    },
    /// Set config values: KEY=VALUE... (secret values are never shown again).
    Config {
        /// The skill's name.
        #[arg(add = clap_complete::ArgValueCandidates::new(super::complete::skills))]
        name: String,
        /// Values as KEY=VALUE.
        values: Vec<String>,
        /// Answer yes to a grant that asks.
        #[arg(short, long)]
        yes: bool,
    },
    /// Turn a skill on.
    Enable {
        /// The skill's name.
        #[arg(add = clap_complete::ArgValueCandidates::new(super::complete::skills))]
        name: String,
        /// Answer yes to a grant that asks.
        #[arg(short, long)]
        yes: bool,
    },
    /// Turn a skill off.
    Disable {
        /// The skill's name.
        #[arg(add = clap_complete::ArgValueCandidates::new(super::complete::skills))]
        name: String,
        /// Answer yes to a grant that asks.
        #[arg(short, long)]
        yes: bool,
    },
}

async fn gated(host: &Arc<Host>, tool: &str, args: Value, yes: bool) -> Result<Value> {
    super::door::gated(host, tool, args, yes, false)
        .await
        .into_result()
}

/// Reads a skill folder into `skill_install`'s arguments, as an Agent Skills folder is laid
/// out (#38): `SKILL.md`; `scripts/*.lua` become `scripts` (tools, or modules of them); every
/// other file becomes a reference named by its path in the folder (`reference.md`,
/// `scripts/helper.py`, `assets/form.txt`; a file under `references/` by its path there), to be
/// read and never run. Hidden files and folders (`.git`, `.DS_Store`) are left out, and
/// returned second, by path, for the install question to name. The walk stops at the first file over a
/// cap (count, size of one, size of all, depth) with an error naming it and the cap, so a huge
/// folder is never read whole. `lmcp_own` are lmcp's own folders: a file of the package that is
/// a hard link to one of lmcp's files (its HTTP token, say) is refused like a link leading
/// outside.
pub fn package_args(
    dir: &Path,
    lmcp_own: &crate::store::OwnFolders,
) -> Result<(Value, Vec<String>)> {
    let package = std::fs::canonicalize(dir).map_err(|e| Error::io(dir, e))?;
    let mut found = Found::default();
    let md_path = dir.join("SKILL.md");
    let skill_md = text_of(&md_path, own_bytes(&package, &md_path, lmcp_own)?)?;
    walk(&package, dir, "", lmcp_own, &mut found)?;
    let files = |list: Vec<(String, String)>, value: &str| -> Vec<Value> {
        list.into_iter()
            .map(|(name, text)| json!({"name": name, value: text}))
            .collect()
    };
    let args = json!({
        "skill_md": skill_md,
        "scripts": files(found.scripts, "code"),
        "references": files(found.references, "content"),
    });
    Ok((args, found.left_out))
}

/// What [`walk`] found in a skill folder.
#[derive(Default)]
struct Found {
    /// `scripts/*.lua`: (file name, code).
    scripts: Vec<(String, String)>,
    /// Every other file: (name, text).
    references: Vec<(String, String)>,
    /// Bytes of the references so far.
    total: usize,
    /// Hidden entries left out, by path.
    left_out: Vec<String>,
}

/// Walks `folder` (at `rel` in the package, `""` for its top), sorting each folder's entries,
/// into `found`.
fn walk(
    package: &Path,
    folder: &Path,
    rel: &str,
    lmcp_own: &crate::store::OwnFolders,
    found: &mut Found,
) -> Result<()> {
    let entries = std::fs::read_dir(folder).map_err(|e| Error::io(folder, e))?;
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for path in paths {
        let file = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = format!("{rel}{file}");
        if file.starts_with('.') {
            found.left_out.push(name);
            continue;
        }
        if rel.is_empty() && file == "SKILL.md" {
            continue;
        }
        let meta = std::fs::symlink_metadata(&path).map_err(|e| Error::io(&path, e))?;
        if meta.is_dir() {
            // the parts a reference's name would have for a file in this folder (the
            // `references/` folder itself is no part of it)
            let inside = name.strip_prefix("references").unwrap_or(&name);
            let parts = inside.split('/').filter(|p| !p.is_empty()).count() + 1;
            let holds_any = std::fs::read_dir(&path).is_ok_and(|mut e| e.next().is_some());
            if parts > skills::MAX_REFERENCE_DEPTH && holds_any {
                return Err(Error::Limit {
                    what: format!(
                        "{} is too deep: a file in it would be a reference of {parts} parts",
                        path.display()
                    ),
                    limit: format!(
                        "{} parts to a reference's path, like `assets/forms/a.txt`",
                        skills::MAX_REFERENCE_DEPTH
                    ),
                });
            }
            if parts > skills::MAX_REFERENCE_DEPTH {
                continue;
            }
            walk(package, &path, &format!("{name}/"), lmcp_own, found)?;
            continue;
        }
        if meta.file_type().is_symlink() && std::fs::metadata(&path).is_ok_and(|m| m.is_dir()) {
            return Err(Error::Refused(format!(
                "{} is a link to a folder; copy the folder into the package instead",
                path.display()
            )));
        }
        if rel == "scripts/" && file.ends_with(".lua") {
            let code = text_of(&path, own_bytes(package, &path, lmcp_own)?)?;
            found.scripts.push((file, code));
            continue;
        }
        if found.references.len() >= skills::MAX_REFERENCES {
            return Err(Error::Limit {
                what: format!(
                    "{} would be reference number {} of the skill (every file but SKILL.md and \
                     scripts/*.lua is one)",
                    path.display(),
                    found.references.len() + 1
                ),
                limit: format!(
                    "{} references; leave out the files the skill does not need",
                    skills::MAX_REFERENCES
                ),
            });
        }
        let text = text_of(&path, own_bytes(package, &path, lmcp_own)?)?;
        found.total += text.len();
        if found.total > skills::MAX_REFERENCE_BYTES {
            return Err(Error::Limit {
                what: format!(
                    "with {} the skill's references come to {} bytes",
                    path.display(),
                    found.total
                ),
                limit: format!("{} bytes for all references", skills::MAX_REFERENCE_BYTES),
            });
        }
        let name = name
            .strip_prefix("references/")
            .unwrap_or(&name)
            .to_string();
        found.references.push((name, text));
    }
    Ok(())
}

/// A package file's bytes, once it is known to be the package's own: a link leading outside
/// it (to a key, say) is refused, naming it, as is a hard link to one of lmcp's own files.
/// The size is checked on the opened file before anything is read.
fn own_bytes(package: &Path, path: &Path, lmcp_own: &crate::store::OwnFolders) -> Result<Vec<u8>> {
    use std::io::Read;
    let real = std::fs::canonicalize(path).map_err(|e| Error::io(path, e))?;
    if !real.starts_with(package) {
        return Err(Error::Refused(format!(
            "{} links outside the package (to {}); copy the file into the package instead",
            path.display(),
            real.display()
        )));
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // a FIFO opens at once (and is then refused) instead of waiting for a writer
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(&real).map_err(|e| Error::io(path, e))?;
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if meta.is_file() && meta.nlink() > 1 && lmcp_own.holds_file((meta.dev(), meta.ino())) {
            return Err(Error::Refused(format!(
                "{} is a hard link to one of lmcp's own files (settings or data), which no \
                 package may carry; copy the file you meant into the package instead",
                path.display()
            )));
        }
    }
    #[cfg(not(unix))]
    let _ = lmcp_own;
    if !meta.is_file() {
        return Err(Error::Refused(format!(
            "{} is not a plain file; a skill carries files only",
            path.display()
        )));
    }
    let len = meta.len();
    if len > skills::MAX_FILE_BYTES as u64 {
        return Err(Error::Limit {
            what: format!("{} is {len} bytes", path.display()),
            limit: format!("{} bytes a file", skills::MAX_FILE_BYTES),
        });
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(skills::MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(path, e))?;
    if bytes.len() > skills::MAX_FILE_BYTES {
        return Err(Error::Limit {
            what: format!(
                "{} grew past {} bytes as it was read",
                path.display(),
                skills::MAX_FILE_BYTES
            ),
            limit: format!("{} bytes a file", skills::MAX_FILE_BYTES),
        });
    }
    Ok(bytes)
}

/// A package file's text: a skill's files are text (its scripts Lua, its references to read),
/// and one that is not UTF-8 is refused by name rather than installed half-read.
fn text_of(path: &Path, bytes: Vec<u8>) -> Result<String> {
    String::from_utf8(bytes).map_err(|_| {
        Error::Refused(format!(
            "{} is not UTF-8 text: a skill's files are text (Lua scripts, and references to \
             read), so lmcp installs no other kind; leave it out of the folder",
            path.display()
        ))
    })
}

/// Runs `lmcp skill ...`.
pub async fn skill(host: &Arc<Host>, command: SkillCommand, json: bool) -> Result<u8> {
    match command {
        SkillCommand::List => {
            let v = gated(host, "skill_list", json!({}), false).await?;
            let installed = crate::library::skills::installed(host);
            emit(json, &v, || {
                let list = v["skills"].as_array().cloned().unwrap_or_default();
                if list.is_empty() && installed.is_empty() {
                    return "no skills installed; `lmcp skill install DIR` adds one".into();
                }
                // a skill that fails its checks is left out of the list, not forgotten
                let unread: Vec<&str> = installed
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .filter(|n| !list.iter().any(|s| s["name"] == *n))
                    .collect();
                let mut out = String::new();
                for name in unread {
                    out.push_str(&format!(
                        "{:<24} unreadable: `lmcp skill show {name}` says why; installing it \
                         again repairs it\n",
                        crate::text::escape_controls(name)
                    ));
                }
                for s in &list {
                    out.push_str(&format!(
                        "{:<24} {:<8} {} script(s)  {}\n",
                        s["name"].as_str().unwrap_or(""),
                        if s["enabled"] == true {
                            "enabled"
                        } else {
                            "disabled"
                        },
                        s["toolNames"].as_array().map_or(0, Vec::len),
                        s["description"].as_str().unwrap_or("")
                    ));
                }
                out
            });
            Ok(0)
        }
        SkillCommand::Show { name } => {
            let v = gated(host, "skill_get", json!({"name": name}), false).await?;
            if v["skill"].is_null() {
                return Err(Error::Refused(format!(
                    "there is no skill `{name}`; `lmcp skill list` lists them"
                )));
            }
            let s = v["skill"].clone();
            emit(json, &s, || {
                let line = |v: &Value| escape_controls(v.as_str().unwrap_or("")).into_owned();
                let mut out = format!("{} — {}\n", line(&s["name"]), line(&s["description"]));
                for key in ["license", "compatibility", "version"] {
                    if s[key].is_string() {
                        out.push_str(&format!("{key}: {}\n", line(&s[key])));
                    }
                }
                for (k, v) in s["metadata"].as_object().into_iter().flatten() {
                    out.push_str(&format!("metadata {}: {}\n", escape_controls(k), line(v)));
                }
                if let Some(tools) = s["allowed_tools"].as_array() {
                    let names: Vec<String> = tools.iter().map(line).collect();
                    out.push_str(&format!(
                        "allowed-tools: {} — {}\n",
                        names.join(" "),
                        line(&s["allowed_tools_note"])
                    ));
                }
                out.push_str(&format!("scripts: {}\n", s["toolNames"]));
                out.push_str(&format!("references: {}\n", s["referenceNames"]));
                if s["references_note"].is_string() {
                    out.push_str(&format!("  ({})\n", line(&s["references_note"])));
                }
                for (k, f) in s["config"].as_object().into_iter().flatten() {
                    let value = &s["values"][k];
                    let shown = if f["secret"] == true {
                        if value["set"] == true {
                            "********".to_string()
                        } else {
                            "(not set)".to_string()
                        }
                    } else if value.is_null() {
                        "(not set)".to_string()
                    } else {
                        value.to_string()
                    };
                    out.push_str(&format!("config {k}: {shown}\n"));
                }
                out.push_str(&format!("\n{}", s["prompt"].as_str().unwrap_or("")));
                out
            });
            Ok(0)
        }
        SkillCommand::Install { dir, yes } => {
            let (args, left_out) = package_args(&dir, &crate::store::OwnFolders::of(host.paths()))?;
            let scripts = skills::named_files(&args, "scripts", "code");
            let refs = skills::named_files(&args, "references", "content");
            let package = skills::check_package(
                host.registry(),
                args["skill_md"].as_str().unwrap_or(""),
                &scripts,
                &refs,
            )?;
            if !json {
                // the install question: what becomes a tool, what is only read (#38)
                let md = &package.md;
                super::door::outln(&format!(
                    "skill `{}`: {}",
                    escape_controls(&md.name),
                    escape_controls(&md.description)
                ));
                if let Some(l) = &md.license {
                    super::door::outln(&format!("  license: {}", escape_controls(l)));
                }
                for s in &package.scripts {
                    if s.is_module() {
                        super::door::outln(&format!(
                            "  module {:<20} required by: {} (not a tool)",
                            s.name,
                            s.required_by.join(", ")
                        ));
                        continue;
                    }
                    // the one wording of what a program may call ("no tools" for an empty
                    // `---@uses`)
                    let calls = s.program.capabilities.describe();
                    let reach = if s.program.connect.is_empty() {
                        String::new()
                    } else {
                        format!("; may reach: {}", s.program.connect.join(", "))
                    };
                    super::door::outln(&format!(
                        "  script {:<20} becomes the tool {}; may call: {}{}",
                        s.name,
                        skills::tool_name(&md.name, &s.name),
                        escape_controls(&calls),
                        escape_controls(&reach)
                    ));
                }
                if !package.references.is_empty() {
                    let names: Vec<&str> =
                        package.references.iter().map(|(n, _)| n.as_str()).collect();
                    super::door::outln(&format!(
                        "  only read, never run: {} ({})",
                        names.join(", "),
                        skills::READ_ONLY_NOTE
                    ));
                }
                if !md.allowed_tools.is_empty() {
                    super::door::outln(&format!(
                        "  allowed-tools: {} — {}",
                        escape_controls(&md.allowed_tools.join(" ")),
                        skills::ALLOWED_TOOLS_NOTE
                    ));
                }
                if !left_out.is_empty() {
                    super::door::outln(&format!(
                        "  left out (hidden): {}",
                        escape_controls(&left_out.join(", "))
                    ));
                }
                if let Some(note) = skills::secrets_note(&package.md, &scripts) {
                    super::door::outln(&format!("  {note}"));
                }
            }
            let go = yes || (std::io::stdin().is_terminal() && !json && ask("Install it?")?);
            if !go {
                if !json {
                    super::door::outln("not installed (pass --yes to install it)");
                }
                return Ok(3);
            }
            // The person said yes to what the scripts call; a grant that asks still asks.
            let v = gated(host, "skill_install", args, yes).await?;
            emit(json, &v, || {
                format!(
                    "{} `{}`",
                    if v["updated"] == true {
                        "updated"
                    } else {
                        "installed"
                    },
                    v["name"].as_str().unwrap_or("")
                )
            });
            Ok(0)
        }
        SkillCommand::Remove { name, yes } => {
            let v = gated(host, "skill_remove", json!({"name": name}), yes).await?;
            if v["removed"] != true {
                return Err(Error::Refused(format!("there is no skill `{name}`")));
            }
            emit(json, &v, || format!("removed `{name}`"));
            Ok(0)
        }
        SkillCommand::Call {
            skill,
            script,
            params,
            yes,
        } => {
            let params: Value = match params {
                Some(p) => serde_json::from_str(&p)
                    .map_err(|e| Error::Usage(format!("the params are not valid JSON: {e}")))?,
                None => json!({}),
            };
            let v = gated(
                host,
                "skill_call",
                json!({"skill": skill, "script": script, "params": params}),
                yes,
            )
            .await?;
            emit(json, &v, || {
                let mut out = v["output"].as_str().unwrap_or("").to_string();
                out.push_str(&crate::text::terminal::json(&v["result"], true));
                out
            });
            Ok(0)
        }
        SkillCommand::Config { name, values, yes } => {
            let record = gated(host, "skill_get", json!({"name": name}), false).await?;
            if record["skill"].is_null() {
                return Err(Error::Refused(format!("there is no skill `{name}`")));
            }
            let mut given = Map::new();
            for pair in &values {
                let (k, v) = pair.split_once('=').ok_or_else(|| {
                    Error::Usage(format!(
                        "give KEY=VALUE, got `{}`",
                        pair.split('=').next().unwrap_or("")
                    ))
                })?;
                let field: skills::ConfigField =
                    serde_json::from_value(record["skill"]["config"][k].clone())
                        .map_err(|_| Error::Usage(format!("`{name}` has no config field `{k}`")))?;
                given.insert(
                    k.to_string(),
                    field.from_text(v).map_err(|e| {
                        Error::Usage(format!(
                            "{k}: {}",
                            if field.secret {
                                "the value does not fit".to_string()
                            } else {
                                e
                            }
                        ))
                    })?,
                );
            }
            let secret_keys: Vec<&str> = given
                .keys()
                .filter(|k| record["skill"]["config"][k.as_str()]["secret"] == true)
                .map(String::as_str)
                .collect();
            if !json && !secret_keys.is_empty() {
                let readers: Vec<String> = record["skill"]["scripts"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|s| {
                        let may = match &s["may_call"] {
                            Value::String(t) => t.clone(),
                            other => other.to_string(),
                        };
                        let reach = match s["may_reach"].as_array() {
                            Some(hosts) => format!(
                                " and reach {}",
                                hosts
                                    .iter()
                                    .filter_map(Value::as_str)
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                            None => String::new(),
                        };
                        format!(
                            "{} (may call {may}{reach})",
                            s["name"].as_str().unwrap_or("?")
                        )
                    })
                    .collect();
                errln!(
                    "{} secret: lmcp never shows it again, but every script of `{name}` reads it \
                     and is trusted with it — one that may write or send can pass it on: {}",
                    secret_keys.join(", "),
                    if readers.is_empty() {
                        "no script yet".to_string()
                    } else {
                        readers.join("; ")
                    }
                );
            }
            let v = gated(
                host,
                "skill_config",
                json!({"name": name, "values": given}),
                yes,
            )
            .await?;
            emit(json, &v, || {
                format!(
                    "set {}",
                    v["set"]
                        .as_array()
                        .map(|a| a
                            .iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join(", "))
                        .unwrap_or_default()
                )
            });
            Ok(0)
        }
        SkillCommand::Enable { name, yes } => {
            let v = gated(
                host,
                "skill_enable",
                json!({"name": name, "enabled": true}),
                yes,
            )
            .await?;
            emit(json, &v, || format!("`{name}` is enabled"));
            Ok(0)
        }
        SkillCommand::Disable { name, yes } => {
            let v = gated(
                host,
                "skill_enable",
                json!({"name": name, "enabled": false}),
                yes,
            )
            .await?;
            emit(json, &v, || format!("`{name}` is disabled"));
            Ok(0)
        }
    }
}
