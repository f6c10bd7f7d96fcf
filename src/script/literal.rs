//! What a Lua source names literally, read without running it: the tools it calls by name
//! and the modules it `require`s by name.
//!
//! A saved program may call only what its `---@uses` lists; a call outside it is refused at
//! run time, inside a `pcall` quietly, so a recipe that "worked" when tried lost its writes
//! once saved (#34). Reading the names at save lets the check say so then. A skill's script
//! that others `require` is a module, not a tool.
//!
//! A tool is named literally when the global `tools` (also as `_ENV.tools`, `_G.tools` or in
//! parentheses) is indexed by a name or a string constant: `tools.NAME`, `tools["NAME"]`,
//! `tools[ [[NAME]] ]`, `tools[("NAME")]`, with Lua's escapes in the string decoded
//! (`"\119rite_file"` is `write_file`). A reference only compared or tested
//! (`tools.NAME ~= nil`, `if tools.NAME then`) is no call. A chunk that declares its own
//! `tools` (or `_ENV`) as a local, a parameter or a loop variable names no tool at all: its
//! `tools` may be anything. Names built at run time (`tools[name]`, an alias
//! `local t = tools`) are not seen: this is advice at save, and the gate still decides every
//! call. Comments are skipped as Lua's lexer skips them.

use super::sourcecheck::{long_bracket, skip_long};

/// A name the source uses literally, with its 1-based line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    /// The tool or module name.
    pub name: String,
    /// Where it is named.
    pub line: usize,
}

/// The tools `src` calls by literal name, in order of first use, each once (see the module
/// doc for what counts). Nothing when the chunk declares a `tools` of its own.
pub fn tools_called(src: &str) -> Vec<Named> {
    let tokens = lex(src);
    if declares_its_own_tools(&tokens) {
        return Vec::new();
    }
    let mut found: Vec<Named> = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        if !t.is_name("tools") {
            continue;
        }
        let Some((start, end)) = global_tools(&tokens, i) else {
            continue;
        };
        let Some((name, after)) = literal_key(&tokens, end) else {
            continue;
        };
        if only_tested(&tokens, start, after) {
            continue;
        }
        if !found.iter().any(|f| f.name == name) {
            found.push(Named { name, line: t.line });
        }
    }
    found
}

/// The modules `src` `require`s by literal name (`require("m")`, `require "m"`,
/// `require 'm'`, `require [[m]]`, `pcall(require, "m")`), in order of first use, each once.
pub fn modules_required(src: &str) -> Vec<Named> {
    let tokens = lex(src);
    let mut found: Vec<Named> = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        if !t.is_name("require") || i > 0 && tokens[i - 1].is_member_op() {
            continue;
        }
        let protected = i >= 2
            && tokens[i - 1].is_punct(b'(')
            && tokens[i - 2].is_name("pcall")
            && !(i >= 3 && tokens[i - 3].is_member_op());
        let arg = if protected {
            match tokens.get(i + 1) {
                Some(comma) if comma.is_punct(b',') => tokens.get(i + 2),
                _ => None,
            }
        } else {
            match tokens.get(i + 1) {
                Some(p) if p.is_punct(b'(') => tokens.get(i + 2),
                other => other,
            }
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

/// Lua's reserved words: a `(` after one of them opens a parenthesized expression, not a call.
const KEYWORDS: &[&str] = &[
    "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if", "in",
    "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while",
];

/// Whether the chunk binds a name `tools` (or `_ENV`) of its own: `local tools`, `local a,
/// tools`, `local function tools`, a function parameter or a `for` variable. Its `tools.NAME`
/// may then be anything, so nothing is reported for the chunk.
fn declares_its_own_tools(tokens: &[Token]) -> bool {
    let own = |t: &Token| t.is_name("tools") || t.is_name("_ENV");
    for (i, t) in tokens.iter().enumerate() {
        let names_from = if t.is_name("local") {
            match tokens.get(i + 1) {
                Some(f) if f.is_name("function") => {
                    if tokens.get(i + 2).is_some_and(own) {
                        return true;
                    }
                    continue;
                }
                _ => i + 1,
            }
        } else if t.is_name("for") {
            i + 1
        } else if t.is_name("function") {
            // the parameter list: the first `(` after the (possibly dotted) name
            match tokens[i + 1..].iter().position(|t| t.is_punct(b'(')) {
                Some(p) => i + 1 + p + 1,
                None => continue,
            }
        } else {
            continue;
        };
        // a list of names, each perhaps with an attribute (`<const>`), separated by commas
        let mut j = names_from;
        while let Some(n) = tokens.get(j) {
            if own(n) {
                return true;
            }
            if !matches!(n.kind, Kind::Name(_)) {
                break;
            }
            j += 1;
            if tokens.get(j).is_some_and(|t| t.is_punct(b'<')) {
                j += 3;
            }
            match tokens.get(j) {
                Some(c) if c.is_punct(b',') => j += 1,
                _ => break,
            }
        }
    }
    false
}

/// The token range `[start, end)` of the global `tools` expression whose `tools` is token `i`:
/// `tools`, `_ENV.tools` or `_G.tools`, inside any number of grouping parentheses. `None`
/// when token `i` is a field of something else (`x.tools`).
fn global_tools(tokens: &[Token], i: usize) -> Option<(usize, usize)> {
    let mut start = i;
    if i > 0 && tokens[i - 1].is_member_op() {
        let env = i >= 2
            && tokens[i - 1].is_punct(b'.')
            && (tokens[i - 2].is_name("_ENV") || tokens[i - 2].is_name("_G"))
            && !(i >= 3 && tokens[i - 3].is_member_op());
        if !env {
            return None;
        }
        start = i - 2;
    }
    let mut end = i + 1;
    while start > 0
        && tokens[start - 1].is_punct(b'(')
        && tokens.get(end).is_some_and(|t| t.is_punct(b')'))
        && groups(tokens, start - 1)
    {
        start -= 1;
        end += 1;
    }
    Some((start, end))
}

/// Whether the `(` at `open` groups an expression rather than calling what precedes it.
fn groups(tokens: &[Token], open: usize) -> bool {
    let Some(before) = open.checked_sub(1).map(|b| &tokens[b]) else {
        return true;
    };
    match &before.kind {
        Kind::Name(n) => KEYWORDS.contains(&n.as_str()),
        Kind::Str(_) => false,
        Kind::Punct(c) => !matches!(c, b')' | b']' | b'}'),
        Kind::Other => true,
    }
}

/// The tool name a literal key at `at` gives (`.NAME`, `:NAME`, `[ "NAME" ]` with any
/// grouping parentheses around the string), and the index after the key.
fn literal_key(tokens: &[Token], at: usize) -> Option<(String, usize)> {
    let t = tokens.get(at)?;
    if t.is_punct(b'.') || t.is_punct(b':') {
        return match &tokens.get(at + 1)?.kind {
            Kind::Name(n) => Some((n.clone(), at + 2)),
            _ => None,
        };
    }
    if !t.is_punct(b'[') {
        return None;
    }
    let mut j = at + 1;
    let mut parens = 0;
    while tokens.get(j)?.is_punct(b'(') {
        parens += 1;
        j += 1;
    }
    let Kind::Str(Some(name)) = &tokens.get(j)?.kind else {
        return None;
    };
    j += 1;
    for _ in 0..parens {
        if !tokens.get(j)?.is_punct(b')') {
            return None;
        }
        j += 1;
    }
    tokens.get(j)?.is_punct(b']').then(|| (name.clone(), j + 1))
}

/// Whether the reference `tokens[start..after]` is only compared, tested or assigned to,
/// never called: `tools.NAME == nil`, `nil ~= tools.NAME`, `not tools.NAME`,
/// `if tools.NAME then`, `tools.NAME and ...`, `tools.NAME = f`.
fn only_tested(tokens: &[Token], start: usize, after: usize) -> bool {
    let next = tokens.get(after);
    let next2 = tokens.get(after + 1);
    let compared_after = match next {
        Some(n) if n.is_punct(b'=') => true,
        Some(n) if n.is_punct(b'~') => next2.is_some_and(|t| t.is_punct(b'=')),
        Some(n) => n.is_name("then") || n.is_name("and"),
        None => false,
    };
    let prev = start.checked_sub(1).map(|p| &tokens[p]);
    let prev2 = start.checked_sub(2).map(|p| &tokens[p]);
    let compared_before = match prev {
        Some(p) if p.is_punct(b'=') => prev2.is_some_and(|t| t.is_punct(b'=') || t.is_punct(b'~')),
        Some(p) => p.is_name("not"),
        None => false,
    };
    compared_after || compared_before
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// A name or keyword.
    Name(String),
    /// A string constant, short or long, its escapes decoded; `None` when it has an escape
    /// Lua refuses or is not UTF-8 (no tool or module is named so).
    Str(Option<String>),
    /// A number or anything else that is not looked at.
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

    fn is_punct(&self, c: u8) -> bool {
        self.kind == Kind::Punct(c)
    }

    fn is_name(&self, name: &str) -> bool {
        matches!(&self.kind, Kind::Name(n) if n == name)
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
                let end = skip_long(b, i, level, &mut line);
                out.push(Token {
                    kind: Kind::Str(long_string(b, i, level, end)),
                    line: at,
                });
                i = end;
            }
            b'"' | b'\'' => {
                let (value, end) = short_string(b, i);
                line += b[i..end].iter().filter(|c| **c == b'\n').count();
                i = end;
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

/// The text of the long string opened at `open` (level `level`) and ending before `end`: as
/// Lua reads it, without a newline right after the opening bracket.
fn long_string(b: &[u8], open: usize, level: usize, end: usize) -> Option<String> {
    let from = open + level + 2;
    let to = end.checked_sub(level + 2).filter(|t| *t >= from)?;
    let mut body = &b[from..to];
    for first in [&b"\r\n"[..], b"\n\r", b"\n", b"\r"] {
        if let Some(rest) = body.strip_prefix(first) {
            body = rest;
            break;
        }
    }
    String::from_utf8(body.to_vec()).ok()
}

/// The value of the short string opened at `open` with its escapes decoded as Lua decodes them,
/// and the index after it. `None` for an escape Lua refuses, a string that is not UTF-8 or one
/// not closed on its line.
fn short_string(b: &[u8], open: usize) -> (Option<String>, usize) {
    let quote = b[open];
    let mut out = Vec::new();
    let mut ok = true;
    let mut i = open + 1;
    let hex = |c: u8| (c as char).to_digit(16);
    while i < b.len() {
        let c = b[i];
        if c == quote {
            let value = String::from_utf8(out).ok().filter(|_| ok);
            return (value, i + 1);
        }
        if c == b'\n' || c == b'\r' {
            break;
        }
        i += 1;
        if c != b'\\' {
            out.push(c);
            continue;
        }
        let Some(&e) = b.get(i) else { break };
        i += 1;
        match e {
            b'a' => out.push(0x07),
            b'b' => out.push(0x08),
            b'f' => out.push(0x0c),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'v' => out.push(0x0b),
            b'\\' | b'"' | b'\'' => out.push(e),
            b'\n' | b'\r' => {
                out.push(b'\n');
                if b.get(i)
                    .is_some_and(|n| (*n == b'\n' || *n == b'\r') && *n != e)
                {
                    i += 1;
                }
            }
            b'x' => match (
                b.get(i).and_then(|c| hex(*c)),
                b.get(i + 1).and_then(|c| hex(*c)),
            ) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 2;
                }
                _ => ok = false,
            },
            b'z' => {
                while b.get(i).is_some_and(u8::is_ascii_whitespace) {
                    i += 1;
                }
            }
            b'0'..=b'9' => {
                let mut value = u32::from(e - b'0');
                for _ in 0..2 {
                    match b.get(i) {
                        Some(d) if d.is_ascii_digit() => {
                            value = value * 10 + u32::from(d - b'0');
                            i += 1;
                        }
                        _ => break,
                    }
                }
                match u8::try_from(value) {
                    Ok(v) => out.push(v),
                    Err(_) => ok = false,
                }
            }
            b'u' if b.get(i) == Some(&b'{') => {
                let mut value: u32 = 0;
                let mut digits = 0;
                i += 1;
                while let Some(d) = b.get(i).and_then(|c| hex(*c)) {
                    value = value.saturating_mul(16).saturating_add(d);
                    digits += 1;
                    i += 1;
                }
                match char::from_u32(value) {
                    Some(ch) if digits > 0 && b.get(i) == Some(&b'}') => {
                        let mut buf = [0; 4];
                        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        i += 1;
                    }
                    _ => ok = false,
                }
            }
            _ => ok = false,
        }
    }
    (None, i)
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
                   tools[\"wr\\q\"]{}\n";
        assert_eq!(tools_called(src), []);
    }

    /// Every spelling Lua reads as `tools.write_file` is one (#34): each of these saved without
    /// `---@uses` and was refused at every run.
    #[test]
    fn every_literal_spelling_of_a_name_is_found() {
        let spellings = [
            "tools[ [[write_file]] ]{}",
            "tools[ [==[write_file]==] ]{}",
            "tools[ [[\nwrite_file]] ]{}",
            "tools[\"\\119rite_file\"]{}",
            "tools[\"\\x77rite_file\"]{}",
            "tools[\"\\u{77}rite_file\"]{}",
            "tools['write_\\z\n      file']{}",
            "_ENV.tools.write_file{}",
            "_G.tools.write_file{}",
            "(tools).write_file{}",
            "((_ENV.tools))[\"write_file\"]{}",
            "tools[(\"write_file\")]{}",
            "local f = tools.write_file\nf{}",
            "pcall(tools.write_file, {})",
            "return (tools).write_file or 1",
        ];
        for src in spellings {
            assert_eq!(
                names(tools_called(src)),
                [("write_file".into(), 1)],
                "{src}"
            );
        }
    }

    /// A `tools` that is not the global, and a reference that is never called, name no call.
    #[test]
    fn shadowed_tools_and_mere_tests_are_not_calls() {
        let not_calls = [
            "local tools = {write_file = function() return 7 end}\nreturn tools.write_file()",
            "local a, tools <const> = 1, {}\nreturn tools.write_file{}",
            "local function tools() end\ntools.write_file{}",
            "local function f(x, tools) return tools.write_file{} end",
            "return function(tools) return tools.write_file{} end",
            "for _, tools in ipairs(t) do tools.write_file{} end",
            "local _ENV = {tools = {}}\ntools.write_file{}",
            "return tools.write_file ~= nil",
            "return tools.write_file == nil",
            "return nil ~= tools.write_file",
            "if tools.write_file then return 1 end",
            "return not tools.write_file",
            "return tools.write_file and 1",
            "x.tools.write_file{}",
            "f(tools).write_file{}",
            "f\"s\"(tools).write_file{}",
            "tools[ [[write_file]] .. 'x' ]{}",
        ];
        for src in not_calls {
            assert_eq!(tools_called(src), [], "{src}");
        }
        // a test and then a call: the call counts
        assert_eq!(
            names(tools_called(
                "if tools.write_file then\n  tools.write_file{}\nend"
            )),
            [("write_file".into(), 2)]
        );
        // another local than `tools` shadows nothing
        assert_eq!(
            names(tools_called("local t = tools\ntools.calculate{}")),
            [("calculate".into(), 2)]
        );
    }

    #[test]
    fn escapes_decode_as_lua_decodes_them() {
        let s = |src: &str| short_string(src.as_bytes(), 0).0;
        assert_eq!(
            s(r#""a\tb\65\x41\u{e9}\"""#).as_deref(),
            Some("a\tbAA\u{e9}\"")
        );
        assert_eq!(s("'a\\z  \n  b'").as_deref(), Some("ab"));
        assert_eq!(s("'a\\\nb'").as_deref(), Some("a\nb"));
        assert_eq!(s(r#""\256""#), None, "past a byte");
        assert_eq!(s(r#""\q""#), None, "no such escape");
        assert_eq!(s(r#""\xg1""#), None);
        assert_eq!(s(r#""\255""#), None, "not UTF-8");
        assert_eq!(s("\"open\n\""), None, "not closed on its line");
    }

    #[test]
    fn requires_in_each_form() {
        let src = "local w = require(\"words\")\nlocal t = require 'tbl'\nrequire \"words\"\n\
                   local x = m.require('no')\nlocal ok, p = pcall(require, \"plain\")\n\
                   local ok2, q = pcall(require, 'quoted')\nlocal l = require [[long]]\n\
                   local n = x.pcall(require, 'not')\nlocal o = pcall(require)";
        assert_eq!(
            names(modules_required(src)),
            [
                ("words".into(), 1),
                ("tbl".into(), 2),
                ("plain".into(), 5),
                ("quoted".into(), 6),
                ("long".into(), 7)
            ]
        );
    }
}
