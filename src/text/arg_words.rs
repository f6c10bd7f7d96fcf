//! Arguments named in advice, in the words of whoever reads it (#34).
//!
//! An error that says how to fix a call often names an argument: "pass `"replace": true` to
//! replace it". An MCP client passes exactly that; a person at the command line passes a flag
//! (`--replace`), and told the JSON words they were stuck. So advice names arguments one way,
//! through [`arg`], and a door whose caller gave arguments as flags rewrites them with
//! [`in_flags`]: one rule, not a message per door.

/// How advice names an argument of the call: `` `"name": value` `` (`value` as JSON), the words
/// of the tool's own arguments (MCP, Lua, `lmcp call`). A door that took it as a flag says the
/// flag instead ([`in_flags`]).
pub fn arg(name: &str, value: &str) -> String {
    format!("`\"{name}\": {value}`")
}

/// `text` with every argument named by [`arg`] that `flags` maps (argument, flag) said as the
/// flag: `` `"replace": true` `` becomes `` `--replace` ``, `` `"resume": "ID"` `` becomes
/// `` `--resume ID` ``. Arguments without a flag keep their words.
pub fn in_flags(text: &str, flags: &[(&str, &str)]) -> String {
    let mut out = text.to_string();
    for (name, flag) in flags {
        let open = format!("`\"{name}\": ");
        let mut from = 0;
        while let Some(at) = out[from..].find(&open).map(|i| i + from) {
            let value_at = at + open.len();
            let Some(end) = out[value_at..].find('`').map(|i| i + value_at) else {
                break;
            };
            let value = &out[value_at..end];
            let said = match value {
                "true" => format!("`{flag}`"),
                v => format!("`{flag} {}`", v.trim_matches('"')),
            };
            out.replace_range(at..=end, &said);
            from = at + said.len();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_replace_the_arguments_they_stand_for_and_nothing_else() {
        let text = format!(
            "it exists; pass {} (and {}); {} applies to a resumed run: give {} too",
            arg("replace", "true"),
            arg("overwrite", "true"),
            arg("retry_unknown", "true"),
            arg("resume", "\"ID\""),
        );
        let flags = [
            ("replace", "--replace"),
            ("resume", "--resume"),
            ("retry_unknown", "--retry-unknown"),
        ];
        assert_eq!(
            in_flags(&text, &flags),
            "it exists; pass `--replace` (and `\"overwrite\": true`); `--retry-unknown` applies \
             to a resumed run: give `--resume ID` too"
        );
        // the MCP words are the arguments' own
        assert!(text.starts_with("it exists; pass `\"replace\": true`"));
        assert_eq!(in_flags(&text, &[]), text);
    }

    #[test]
    fn every_mention_is_rewritten_and_a_stray_backtick_is_left_alone() {
        let text = format!(
            "{} {} `\"replace\": ",
            arg("replace", "true"),
            arg("replace", "true")
        );
        assert_eq!(
            in_flags(&text, &[("replace", "--replace")]),
            "`--replace` `--replace` `\"replace\": "
        );
    }
}
