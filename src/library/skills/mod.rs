//! Skills: installable packages of a prompt, Lua scripts, references and per-user config.
//!
//! A package is an Agent Skills folder's content (#38): `SKILL.md` (YAML front matter: `name`,
//! `description`, the format's optional `license`, `compatibility`, `allowed-tools` and
//! `metadata`, kept and shown, and lmcp's optional `version` and `config` fields; the Markdown
//! body is the prompt for an AI), `scripts/*.lua` (each with the program header) and references:
//! every other file, by its path in the folder (`reference.md`, `scripts/helper.py`), text that
//! is read and never run, capped in count and size. `allowed-tools` names another host's tools
//! and grants nothing here. It is checked whole before anything is
//! written, then stored under `DATA/skills/NAME/` by writing a temporary folder and renaming it
//! into place, so an invalid update changes nothing and a failed one leaves the old version.
//!
//! Each enabled skill's scripts are also tools named `skill__SKILL__SCRIPT` (hyphens in the
//! skill's name become `_`), so MCP clients discover them; calling one is `skill_call`. A script
//! runs in the Lua sandbox with its skill's other scripts as the only modules it can `require`,
//! `params` typed by its header, a read-only `config` table, a 300 s timeout unless its
//! `@timeout` says otherwise, and only the tools its `---@uses` lists (read tools without one).
//!
//! Config values live in `CONFIG/skills/NAME.json`; values of fields marked `secret` live apart
//! in `CONFIG/skills/NAME.secrets.json`, readable by the user only (0600). Secrets are never
//! returned by `skill_get` or `skill_list`, never printed, and the arguments of `skill_config`
//! are hidden from previews, prompts and history.

use std::time::Duration;

use crate::error::Error;

mod package;
mod storage;
mod tools;

pub use package::{
    ALLOWED_TOOLS_NOTE, ConfigField, FieldType, Package, READ_ONLY_NOTE, SkillMd, SkillScript,
    check_package, parse_skill_md, secrets_note, valid_name, what_it_becomes,
};
pub(super) use storage::load_indexed;
pub use storage::{
    Meta, Shown, get, install, installed, list, load_one, recover, reference, remove, set_config,
    set_enabled, shown, tool_name,
};
pub use tools::{call, named_files, register_tools};

/// A script's default timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// Largest script or reference accepted.
pub const MAX_FILE_BYTES: usize = 1 << 20;
/// Most references a skill has: an Agent Skills folder's every file but SKILL.md and its
/// `scripts/*.lua` becomes one, and a folder of thousands is no skill to install whole.
pub const MAX_REFERENCES: usize = 100;
/// Largest size of all of a skill's references together.
pub const MAX_REFERENCE_BYTES: usize = 8 << 20;
/// Most parts of a reference's path (`scripts/helper.py` has 2); deeper folders are refused.
pub const MAX_REFERENCE_DEPTH: usize = 4;

fn bad(what: &str, message: impl Into<String>) -> Error {
    Error::Definition {
        tool: what.to_string(),
        message: message.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_windows_skill_md_has_no_stray_carriage_returns() {
        let s = parse_skill_md(
            "---\r\nname: crlf\r\ndescription: Windows.\r\n---\r\n# Title\r\nLine two.\r\n",
        )
        .unwrap();
        assert_eq!(s.prompt, "# Title\nLine two.\n");
    }

    #[test]
    fn skill_md_parses_and_explains() {
        let md = "---\nname: photo-album\ndescription: Turn photos into a PDF album.\nversion: 1.2\nconfig:\n  api_key:\n    title: API key\n    type: text\n    secret: true\n    required: true\n  size:\n    type: select\n    values: [small, large]\n    default: small\n---\n# Album\nUse make_album.\n";
        let s = parse_skill_md(md).unwrap();
        assert_eq!(s.name, "photo-album");
        assert_eq!(s.version.as_deref(), Some("1.2"));
        assert_eq!(s.prompt, "# Album\nUse make_album.\n");
        assert_eq!(s.config.len(), 2);
        assert!(s.config[0].1.secret && s.config[0].1.required);
        assert_eq!(s.config[1].1.default, Some(json!("small")));
        for (bad_md, what) in [
            ("no front matter", "must start with YAML"),
            ("---\nname: x\n", "no closing"),
            (
                "---\nname: Bad_Name\ndescription: d\n---\n",
                "lowercase letters",
            ),
            ("---\nname: a--b\ndescription: d\n---\n", "single hyphens"),
            ("---\nname: ok\n---\n", "`description` is required"),
            (
                "---\nname: ok\ndescription: d\nauthor: me\n---\n",
                "unknown front matter key `author`",
            ),
            (
                "---\nname: ok\ndescription: d\nconfig:\n  k:\n    type: colour\n---\n",
                "text, number, select or switch",
            ),
            (
                "---\nname: ok\ndescription: d\nconfig:\n  k:\n    type: select\n---\n",
                "needs `values`",
            ),
            (
                "---\nname: ok\ndescription: d\nconfig:\n  k:\n    secret: true\n    default: x\n---\n",
                "cannot have a default",
            ),
            ("---\nname: [\n---\n", "not valid YAML"),
        ] {
            let e = parse_skill_md(bad_md).unwrap_err().to_string();
            assert!(e.contains(what), "{bad_md:?}: {e}");
        }
    }

    /// The Agent Skills fields are kept as written (#38): allowed-tools as a line apart by
    /// spaces (a space inside parentheses is its tool's), by commas, or as a list; metadata as
    /// text by key; each refused, by name, when it is not what the format says.
    #[test]
    fn agent_skills_fields_parse_and_explain() {
        let md = "---\nname: a\ndescription: d\nlicense: Apache-2.0\ncompatibility: Needs python3\nallowed-tools: Bash(git add:*) Read\nmetadata:\n  author: me\n  version: 1.5\n  beta: true\n---\nP\n";
        let s = parse_skill_md(md).unwrap();
        assert_eq!(s.license.as_deref(), Some("Apache-2.0"));
        assert_eq!(s.compatibility.as_deref(), Some("Needs python3"));
        assert_eq!(s.allowed_tools, ["Bash(git add:*)", "Read"]);
        assert_eq!(
            s.metadata,
            [
                ("author".to_string(), "me".to_string()),
                ("version".to_string(), "1.5".to_string()),
                ("beta".to_string(), "true".to_string())
            ]
        );
        let tools = |line: &str| {
            parse_skill_md(&format!(
                "---\nname: a\ndescription: d\nallowed-tools: {line}\n---\n"
            ))
            .map(|s| s.allowed_tools)
        };
        assert_eq!(tools("Read, Grep,Glob").unwrap(), ["Read", "Grep", "Glob"]);
        assert_eq!(
            tools("[Read, \"Bash(ls -la)\"]").unwrap(),
            ["Read", "Bash(ls -la)"]
        );
        let none = parse_skill_md("---\nname: a\ndescription: d\n---\n").unwrap();
        assert!(
            none.license.is_none() && none.allowed_tools.is_empty() && none.metadata.is_empty()
        );
        for (front, what) in [
            (
                "allowed-tools: {a: b}",
                "`allowed-tools` is a line of tool names",
            ),
            (
                "allowed-tools: [1]",
                "at /allowed-tools/0: each tool is a name",
            ),
            (
                "metadata: [a, b]",
                "`metadata` must be a mapping of text by key",
            ),
            (
                "metadata:\n  deep:\n    x: 1",
                "at /metadata/deep: values are text",
            ),
            ("license: [MIT]", "`license` must be text"),
            (
                &format!("compatibility: {}", "x".repeat(501)),
                "`compatibility` is 501 characters; the limit is 500",
            ),
            (
                "homepage: x",
                "unknown front matter key `homepage`; use name, description, license, compatibility, allowed-tools, metadata, version, config",
            ),
        ] {
            let e = parse_skill_md(&format!("---\nname: a\ndescription: d\n{front}\n---\n"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(what), "{front:?}: {e}");
        }
    }

    #[test]
    fn tool_names_fit_mcp() {
        assert_eq!(
            tool_name("photo-album", "make_album"),
            "skill__photo_album__make_album"
        );
        crate::registry::check_name(&tool_name("a-b-c", "x1")).unwrap();
    }
}
