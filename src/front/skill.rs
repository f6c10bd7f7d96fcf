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
    /// Install (or update) a skill from a folder holding SKILL.md, scripts/ and references/.
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

/// Reads a skill folder into `skill_install`'s arguments. `lmcp_own` are lmcp's own folders: a
/// file of the package that is a hard link to one of lmcp's files (its HTTP token, say) is
/// refused like a link leading outside.
pub fn package_args(dir: &Path, lmcp_own: &crate::store::OwnFolders) -> Result<Value> {
    let package = std::fs::canonicalize(dir).map_err(|e| Error::io(dir, e))?;
    // Every file read must be the package's own: a link leading outside it (to a key, say)
    // is refused, naming it. Sizes are checked before anything is read.
    let own = |path: &Path| -> Result<()> {
        let real = std::fs::canonicalize(path).map_err(|e| Error::io(path, e))?;
        if !real.starts_with(&package) {
            return Err(Error::Refused(format!(
                "{} links outside the package (to {}); copy the file into the package instead",
                path.display(),
                real.display()
            )));
        }
        let meta = std::fs::metadata(&real).map_err(|e| Error::io(path, e))?;
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
        let len = meta.len();
        if len > skills::MAX_FILE_BYTES as u64 {
            return Err(Error::Limit {
                what: format!("{} is {len} bytes", path.display()),
                limit: format!("{} bytes", skills::MAX_FILE_BYTES),
            });
        }
        Ok(())
    };
    let md_path = dir.join("SKILL.md");
    own(&md_path)?;
    let skill_md = std::fs::read_to_string(&md_path).map_err(|e| Error::io(&md_path, e))?;
    let read = |sub: &str, value: &str, only_lua: bool| -> Result<Vec<Value>> {
        let mut out = Vec::new();
        let path = dir.join(sub);
        if std::fs::symlink_metadata(&path).is_err() {
            return Ok(out);
        }
        own(&path)?;
        let entries = std::fs::read_dir(&path).map_err(|e| Error::io(&path, e))?;
        let mut files: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        for f in files {
            let name = f
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if only_lua && !name.ends_with(".lua") {
                continue;
            }
            own(&f)?;
            let text = std::fs::read_to_string(&f).map_err(|e| Error::io(&f, e))?;
            out.push(json!({"name": name, value: text}));
        }
        Ok(out)
    };
    Ok(
        json!({"skill_md": skill_md, "scripts": read("scripts", "code", true)?, "references": read("references", "content", false)?}),
    )
}

/// Runs `lmcp skill ...`.
pub async fn skill(host: &Arc<Host>, command: SkillCommand, json: bool) -> Result<u8> {
    match command {
        SkillCommand::List => {
            let v = gated(host, "skill_list", json!({}), false).await?;
            emit(json, &v, || {
                let list = v["skills"].as_array().cloned().unwrap_or_default();
                if list.is_empty() {
                    return "no skills installed; `lmcp skill install DIR` adds one".into();
                }
                list.iter()
                    .map(|s| {
                        format!(
                            "{:<24} {:<8} {} script(s)  {}\n",
                            s["name"].as_str().unwrap_or(""),
                            if s["enabled"] == true {
                                "enabled"
                            } else {
                                "disabled"
                            },
                            s["toolNames"].as_array().map_or(0, Vec::len),
                            s["description"].as_str().unwrap_or("")
                        )
                    })
                    .collect()
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
                let mut out = format!(
                    "{} — {}\n",
                    s["name"].as_str().unwrap_or(""),
                    s["description"].as_str().unwrap_or("")
                );
                out.push_str(&format!("scripts: {}\n", s["toolNames"]));
                out.push_str(&format!("references: {}\n", s["referenceNames"]));
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
            let args = package_args(&dir, &crate::store::OwnFolders::of(host.paths()))?;
            let scripts: Vec<(String, String)> = args["scripts"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|s| {
                    (
                        s["name"].as_str().unwrap_or("").to_string(),
                        s["code"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect();
            let refs: Vec<(String, String)> = args["references"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|s| {
                    (
                        s["name"].as_str().unwrap_or("").to_string(),
                        s["content"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect();
            let package = skills::check_package(
                host.registry(),
                args["skill_md"].as_str().unwrap_or(""),
                &scripts,
                &refs,
            )?;
            if !json {
                super::door::outln(&format!(
                    "skill `{}`: {}",
                    escape_controls(&package.md.name),
                    escape_controls(&package.md.description)
                ));
                for s in &package.scripts {
                    if s.is_module() {
                        super::door::outln(&format!(
                            "  module {:<20} required by: {}",
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
                        "  script {:<20} may call: {}{}",
                        s.name,
                        escape_controls(&calls),
                        escape_controls(&reach)
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
