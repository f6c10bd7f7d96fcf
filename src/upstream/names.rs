//! Names: a server's name as people give it, and its tools' names as lmcp registers them
//! (`mcp__SERVER__TOOL`, as Claude Code names them), so every name is a Lua identifier.

use crate::error::{Error, Result};

/// Longest server name.
pub const MAX_SERVER_NAME: usize = 32;

pub use crate::config::{UPSTREAM_PREFIX as PREFIX, upstream_server as server_of};

/// Checks a server name: `[a-z0-9_]{1,32}` without `__` (which separates it from the tool's
/// name) and not ending in `_` (which would make `__` with the separator).
pub fn check_server(name: &str) -> Result<()> {
    let bad = |why: &str| {
        Err(Error::Usage(format!(
            "the server name `{}` {why}; use 1 to {MAX_SERVER_NAME} lowercase letters, digits \
             and single underscores, such as `files` or `git_hub`",
            crate::text::escape_controls(name)
        )))
    };
    if name.is_empty() || name.len() > MAX_SERVER_NAME {
        return bad("is not 1 to 32 characters long");
    }
    if !crate::config::valid_server_name(name) {
        return bad("has characters other than a-z, 0-9 and single underscores inside");
    }
    Ok(())
}

/// The lmcp name of a server's tool: every character outside `[A-Za-z0-9_]` becomes `_`.
pub fn tool_name(server: &str, tool: &str) -> String {
    let mut out = String::with_capacity(PREFIX.len() + server.len() + 2 + tool.len());
    out.push_str(PREFIX);
    out.push_str(server);
    out.push_str("__");
    out.extend(tool.chars().map(|c| {
        if c.is_ascii_alphanumeric() || c == '_' {
            c
        } else {
            '_'
        }
    }));
    out
}

/// The grant key that covers every tool of a server (`mcp__SERVER`).
pub fn server_key(server: &str) -> String {
    format!("{PREFIX}{server}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_are_checked() {
        for good in ["files", "git_hub", "a", "x1", &"a".repeat(32)] {
            assert!(check_server(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "Files",
            "a__b",
            "a_",
            "_a",
            "a-b",
            "a b",
            &"a".repeat(33),
            "ä",
        ] {
            let e = check_server(bad).unwrap_err().to_string();
            assert!(e.contains("lowercase letters"), "{bad}: {e}");
        }
    }

    #[test]
    fn tool_names_become_lua_identifiers() {
        assert_eq!(
            tool_name("files", "read-text.file"),
            "mcp__files__read_text_file"
        );
        assert_eq!(tool_name("s", "héllo wörld"), "mcp__s__h_llo_w_rld");
        assert_eq!(server_of("mcp__files__read_text_file"), Some("files"));
        assert_eq!(server_of("mcp__files"), None);
        assert_eq!(server_of("read_file"), None);
    }
}
