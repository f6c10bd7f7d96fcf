//! Arguments and tools named in advice, in the words of whoever reads it (#34).
//!
//! An error that says how to fix a call often names an argument: "pass `"replace": true` to
//! replace it". An MCP client passes exactly that; a Lua script writes `replace = true`; a
//! person at the command line types a flag (`--replace`) or, in `lmcp call`, a pair
//! (`replace=true`), and told the JSON words they were stuck. Advice also names the tool that
//! helps next with the command that calls it: "skill_list (`lmcp skill list`)", where a person
//! at the command line needs only the command. So advice is written one way, naming arguments
//! through [`arg`] and tools through [`tool`], and each door says it in its caller's words with
//! [`say`]: one rule, not a message per door.

/// How advice names an argument of the call: `` `"name": value` `` (`value` as JSON), the words
/// of the tool's own arguments (MCP). Other doors say it their way ([`say`]).
pub fn arg(name: &str, value: &str) -> String {
    format!("`\"{name}\": {value}`")
}

/// How advice names a tool that helps next: `tool (`command`)`, the tool for MCP clients and
/// Lua with the command a person types; at the command line [`say`] keeps the command only.
pub fn tool(tool: &str, command: &str) -> String {
    format!("{tool} (`{command}`)")
}

/// Whose words advice is said in: how the caller of the door in use gives arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Words<'a> {
    /// The tool's own JSON arguments (MCP clients, a recipe's JSON steps): as written.
    Json,
    /// A Lua table (`lmcp run`, the REPL, every Lua program): `` `name = value` ``.
    Lua,
    /// The command line. Each argument `flags` maps (argument, flag) is said as its flag
    /// (`` `--replace` ``, `` `--resume ID` ``); with `pairs` (`lmcp call NAME KEY=VALUE`) the
    /// others are said as pairs (`` `replace=true` ``), else as JSON (the person wrote JSON, or
    /// the subcommand has no way to give them). A tool named with its command ([`tool`]) is
    /// said as the command.
    Cli {
        /// The arguments the subcommand takes as flags, with their flags.
        flags: &'a [(&'a str, &'a str)],
        /// Whether the person typed the arguments as `KEY=VALUE` pairs.
        pairs: bool,
    },
}

impl Words<'_> {
    /// The command line, where the arguments were JSON or cannot be given: only tools are
    /// said as their commands.
    pub const COMMAND_LINE: Words<'static> = Words::Cli {
        flags: &[],
        pairs: false,
    };
}

/// `text` with every argument named by [`arg`], and every tool named by [`tool`], said in
/// `words`.
pub fn say(text: &str, words: Words<'_>) -> String {
    match words {
        Words::Json => text.to_string(),
        Words::Lua => rewrite_args(text, |name, value| Some(format!("`{name} = {value}`"))),
        Words::Cli { flags, pairs } => {
            let text = rewrite_args(text, |name, value| {
                match flags.iter().find(|(n, _)| *n == name) {
                    Some((_, flag)) if value == "true" => Some(format!("`{flag}`")),
                    Some((_, flag)) => Some(format!("`{flag} {}`", unquoted(value))),
                    None if pairs => Some(format!("`{name}={}`", unquoted(value))),
                    None => None,
                }
            });
            commands_only(&text)
        }
    }
}

/// A JSON string value as typed on a command line: without its quotes when it needs none.
fn unquoted(value: &str) -> &str {
    match value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
        Some(v) if !v.is_empty() && !v.contains(char::is_whitespace) && !v.contains('\\') => v,
        _ => value,
    }
}

/// `text` with each `` `"name": value` `` that `said` has words for replaced by them.
fn rewrite_args(text: &str, said: impl Fn(&str, &str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("`\"") {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        let parsed = from[2..].split_once("\": ").and_then(|(name, tail)| {
            let name_ok =
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            let end = tail.find('`')?;
            name_ok.then(|| (name, &tail[..end], 2 + name.len() + 3 + end + 1))
        });
        match parsed.and_then(|(name, value, len)| said(name, value).map(|s| (s, len))) {
            Some((words, len)) => {
                out.push_str(&words);
                rest = &from[len..];
            }
            None => {
                out.push_str(&from[..2]);
                rest = &from[2..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// `text` with each tool named with its command ([`tool`]: `skill_list (`lmcp skill list`)`)
/// said as the command alone (`` `lmcp skill list` ``).
fn commands_only(text: &str) -> String {
    const OPEN: &str = " (`lmcp ";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(OPEN) {
        let (before, from) = rest.split_at(at);
        let name_len = before
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '/'))
            .count();
        let close = from[OPEN.len()..].find("`)").map(|i| OPEN.len() + i);
        match close {
            // a tool's name has `_` (`skill_list`) or is a method (`tools/list`): a word of
            // prose before a command in parentheses (`scripts (`lmcp run`)`) is left alone
            Some(close)
                if before[before.len() - name_len..].contains(['_', '/'])
                    && !from[3..close].contains('`') =>
            {
                out.push_str(&before[..before.len() - name_len]);
                out.push_str(&from[2..close + 1]);
                rest = &from[close + 2..];
            }
            _ => {
                out.push_str(before);
                out.push_str(OPEN);
                rest = &from[OPEN.len()..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn advice() -> String {
        format!(
            "it exists; pass {} (and {}); {} applies to a resumed run: give {} too",
            arg("replace", "true"),
            arg("overwrite", "true"),
            arg("retry_unknown", "true"),
            arg("resume", "\"ID\""),
        )
    }

    const FLAGS: [(&str, &str); 3] = [
        ("replace", "--replace"),
        ("resume", "--resume"),
        ("retry_unknown", "--retry-unknown"),
    ];

    #[test]
    fn flags_replace_the_arguments_they_stand_for_and_nothing_else() {
        let text = advice();
        let flags = Words::Cli {
            flags: &FLAGS,
            pairs: false,
        };
        assert_eq!(
            say(&text, flags),
            "it exists; pass `--replace` (and `\"overwrite\": true`); `--retry-unknown` applies \
             to a resumed run: give `--resume ID` too"
        );
        // the MCP words are the arguments' own
        assert!(text.starts_with("it exists; pass `\"replace\": true`"));
        assert_eq!(say(&text, Words::Json), text);
        assert_eq!(say(&text, Words::COMMAND_LINE), text);
    }

    #[test]
    fn each_door_says_arguments_its_way() {
        let text = advice();
        assert_eq!(
            say(
                &text,
                Words::Cli {
                    flags: &[],
                    pairs: true
                }
            ),
            "it exists; pass `replace=true` (and `overwrite=true`); `retry_unknown=true` \
             applies to a resumed run: give `resume=ID` too"
        );
        assert_eq!(
            say(&text, Words::Lua),
            "it exists; pass `replace = true` (and `overwrite = true`); `retry_unknown = true` \
             applies to a resumed run: give `resume = \"ID\"` too"
        );
        // a flag wins over a pair; a value with a space keeps its quotes
        let spaced = arg("name", "\"a b\"");
        assert_eq!(
            say(
                &format!("{} {spaced}", arg("replace", "true")),
                Words::Cli {
                    flags: &FLAGS,
                    pairs: true
                }
            ),
            "`--replace` `name=\"a b\"`"
        );
    }

    #[test]
    fn every_mention_is_rewritten_and_a_stray_backtick_is_left_alone() {
        let text = format!(
            "{} {} `\"replace\": ",
            arg("replace", "true"),
            arg("replace", "true")
        );
        let flags = Words::Cli {
            flags: &[("replace", "--replace")],
            pairs: false,
        };
        assert_eq!(say(&text, flags), "`--replace` `--replace` `\"replace\": ");
        assert_eq!(say("`\"a b\": 1` `\"`", Words::Lua), "`\"a b\": 1` `\"`");
    }

    #[test]
    fn tools_are_said_as_their_commands_on_the_command_line() {
        let text = format!(
            "there is no skill `x`; {} lists them; {} lists the tools; scripts (`lmcp run`)",
            tool("skill_list", "lmcp skill list"),
            tool("tools/list", "lmcp tools"),
        );
        assert_eq!(
            say(&text, Words::COMMAND_LINE),
            "there is no skill `x`; `lmcp skill list` lists them; `lmcp tools` lists the tools; \
             scripts (`lmcp run`)"
        );
        assert_eq!(say(&text, Words::Json), text);
        assert_eq!(say(&text, Words::Lua), text);
    }
}
