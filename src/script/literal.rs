//! What a Lua source names literally, read without running it: the tools it calls by name
//! (`tools.NAME`, `tools["NAME"]`, `tools['NAME']`) and the modules it `require`s by name.
//!
//! A saved program may call only what its `---@uses` lists; a call outside it is refused at
//! run time, inside a `pcall` quietly, so a recipe that "worked" when tried lost its writes
//! once saved (#34). Reading the names at save lets the check say so then. A skill's script
//! that others `require` is a module, not a tool. Names built at run time (`tools[name]`, an
//! alias `local t = tools`) are not seen: this is advice at save, and the gate still decides
//! every call. Strings, long strings and comments are skipped as Lua's lexer skips them.

use super::sourcecheck::{long_bracket, skip_long};

/// A name the source uses literally, with its 1-based line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    /// The tool or module name.
    pub name: String,
    /// Where it is named.
    pub line: usize,
}

/// The tools `src` calls by literal name, in order of first use, each once.
pub fn tools_called(src: &str) -> Vec<Named> {
    let tokens = lex(src);
    let mut found: Vec<Named> = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        if t.kind != Kind::Name("tools".into()) || i > 0 && tokens[i - 1].is_member_op() {
            continue;
        }
        let name = match (tokens.get(i + 1), tokens.get(i + 2), tokens.get(i + 3)) {
            (Some(dot), Some(n), _) if dot.kind == Kind::Punct(b'.') => match &n.kind {
                Kind::Name(n) => Some(n.clone()),
                _ => None,
            },
            (Some(open), Some(s), Some(close))
                if open.kind == Kind::Punct(b'[') && close.kind == Kind::Punct(b']') =>
            {
                match &s.kind {
                    Kind::Str(Some(s)) => Some(s.clone()),
                    _ => None,
                }
            }
            _ => None,
        };
        if let Some(name) = name
            && !found.iter().any(|f| f.name == name)
        {
            found.push(Named { name, line: t.line });
        }
    }
    found
}

/// The modules `src` `require`s by literal name (`require("m")`, `require "m"`,
/// `require 'm'`), in order of first use, each once.
pub fn modules_required(src: &str) -> Vec<Named> {
    let tokens = lex(src);
    let mut found: Vec<Named> = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        if t.kind != Kind::Name("require".into()) || i > 0 && tokens[i - 1].is_member_op() {
            continue;
        }
        let arg = match tokens.get(i + 1) {
            Some(p) if p.kind == Kind::Punct(b'(') => tokens.get(i + 2),
            other => other,
        };
        if let Some(Token {
            kind: Kind::Str(Some(name)),
            ..
        }) = arg
            && !found.iter().any(|f| &f.name == name)
        {
            found.push(Named {
                name: name.clone(),
                line: t.line,
            });
        }
    }
    found
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// A name or keyword.
    Name(String),
    /// A short string; `None` when it has escapes (its value is not read here).
    Str(Option<String>),
    /// A long string, a number or anything else that is not looked at.
    Other,
    /// One punctuation byte.
    Punct(u8),
}

#[derive(Debug, Clone)]
struct Token {
    kind: Kind,
    line: usize,
}

impl Token {
    /// `.` or `:` before a name makes it a field (`x.tools`), not the global.
    fn is_member_op(&self) -> bool {
        matches!(self.kind, Kind::Punct(b'.' | b':'))
    }
}

fn lex(src: &str) -> Vec<Token> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1;
    while i < b.len() {
        let c = b[i];
        let at = line;
        match c {
            b'\n' => {
                line += 1;
                i += 1;
            }
            c if c.is_ascii_whitespace() => i += 1,
            b'-' if b.get(i + 1) == Some(&b'-') => {
                i += 2;
                if let Some(level) = long_bracket(b, i) {
                    i = skip_long(b, i, level, &mut line);
                } else {
                    while i < b.len() && b[i] != b'\n' {
                        i += 1;
                    }
                }
            }
            b'[' if long_bracket(b, i).is_some() => {
                let level = long_bracket(b, i).unwrap_or(0);
                i = skip_long(b, i, level, &mut line);
                out.push(Token {
                    kind: Kind::Other,
                    line: at,
                });
            }
            b'"' | b'\'' => {
                let start = i + 1;
                let mut escaped = false;
                i += 1;
                while i < b.len() && b[i] != c && b[i] != b'\n' {
                    if b[i] == b'\\' {
                        escaped = true;
                        if b.get(i + 1) == Some(&b'\n') {
                            line += 1;
                        }
                        i += 1;
                    }
                    i += 1;
                }
                let end = i.min(b.len());
                let value = (!escaped).then(|| src[start..end].to_string());
                i += 1;
                out.push(Token {
                    kind: Kind::Str(value),
                    line: at,
                });
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                out.push(Token {
                    kind: Kind::Name(src[start..i].to_string()),
                    line: at,
                });
            }
            c if c.is_ascii_digit() => {
                // a number, `1.5e3` or `0x1p4` included: its dots are not field access
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.') {
                    i += 1;
                }
                out.push(Token {
                    kind: Kind::Other,
                    line: at,
                });
            }
            b'.' if b.get(i + 1) == Some(&b'.') => {
                // `..` and `...`: not a field access
                while i < b.len() && b[i] == b'.' {
                    i += 1;
                }
                out.push(Token {
                    kind: Kind::Other,
                    line: at,
                });
            }
            c if c.is_ascii() => {
                out.push(Token {
                    kind: Kind::Punct(c),
                    line: at,
                });
                i += 1;
            }
            _ => i += 1,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(found: Vec<Named>) -> Vec<(String, usize)> {
        found.into_iter().map(|n| (n.name, n.line)).collect()
    }

    #[test]
    fn tools_named_in_all_three_forms_are_found_once_with_their_line() {
        let src = "local a = tools.calculate{expression = '1'}\n\
                   pcall(tools.write_file, {})\n\
                   tools[\"read_file\"]{path = 'x'}\n\
                   tools['list_dir']{}\n\
                   tools.write_file{}\n";
        assert_eq!(
            names(tools_called(src)),
            [
                ("calculate".into(), 1),
                ("write_file".into(), 2),
                ("read_file".into(), 3),
                ("list_dir".into(), 4)
            ]
        );
    }

    #[test]
    fn comments_strings_fields_and_computed_names_are_not_calls() {
        let src = "-- tools.write_file{}\n\
                   --[[ tools.run_command{} ]]\n\
                   local s = \"tools.write_file\"\n\
                   local l = [==[ tools.send ]==]\n\
                   local x = my.tools.write_file\n\
                   local n = 'write_file'\n\
                   tools[n]{}\n\
                   tools[\"wr\\u{69}te_file\"]{}\n";
        assert_eq!(tools_called(src), []);
    }

    #[test]
    fn requires_in_each_form() {
        let src = "local w = require(\"words\")\nlocal t = require 'tbl'\nrequire \"words\"\n\
                   local x = m.require('no')";
        assert_eq!(
            names(modules_required(src)),
            [("words".into(), 1), ("tbl".into(), 2)]
        );
    }
}
