//! A REPL chunk's top-level `local`s, found and rewritten so they outlive the chunk.
//!
//! At the prompt each line is its own chunk, so in plain Lua `local n = 6` is gone by the next
//! line (`lua5.4` behaves so; node and ipython do not, and people expect them). The REPL keeps
//! them as the session's: [`for_session`] turns each top-level `local` statement into a
//! declaration of session slots (`;__lmcp_local(true,"n"); n = 6`), which the session's scope
//! (`session_scope.rs`) resolves for this chunk and every later one. A later `local n` declares
//! a new slot that shadows the old one for the chunks after it, while functions made earlier
//! keep the slot they saw, as Lua's own shadowing does.
//!
//! What is kept as Lua has it:
//! - `local function f` sees itself (recursion), as the slot is declared before it is assigned;
//! - `local a, b = b, a` reads the earlier `a` and `b`: a slot starts with the value its name
//!   had, and Lua evaluates the right side before assigning;
//! - `<const>`: the chunk itself is compiled as typed first, so Lua's own check holds inside
//!   it; later chunks are refused at run time;
//! - `<close>` locals are left alone: they close when their chunk ends, as in `lua5.4`, and are
//!   not carried (nor any later local of the same name in that chunk).
//!
//! The rewrite never adds or removes a newline, so error lines point at what was typed. A
//! saved program has no session slots: [`for_program`] gives the plain-Lua form `/save` writes
//! where a chunk cannot simply stand at the program's top level.

/// One token: where it is and, for names and punctuation, its text.
#[derive(Debug, Clone, Copy)]
struct Token<'a> {
    text: &'a str,
    /// A name or keyword (else punctuation, a number, a string).
    name: bool,
    start: usize,
    end: usize,
}

/// The length of a long bracket opening at `i` (`[[`, `[==[`), as its level, if one does.
fn long_bracket(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    while b.get(j) == Some(&b'=') {
        j += 1;
    }
    (b.get(i) == Some(&b'[') && b.get(j) == Some(&b'[')).then_some(j - i - 1)
}

/// Where the long bracket of `level` that opened before `from` closes (just past it).
fn long_end(src: &str, from: usize, level: usize) -> usize {
    let close = format!("]{}]", "=".repeat(level));
    src[from..]
        .find(&close)
        .map_or(src.len(), |k| from + k + close.len())
}

/// The tokens of a Lua chunk, comments and whitespace left out. Unfinished strings and
/// comments run to the end (the chunk was compiled as typed first, so this is rare).
fn tokens(src: &str) -> Vec<Token<'_>> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'-' && b.get(i + 1) == Some(&b'-') {
            i = match long_bracket(b, i + 2) {
                Some(level) => long_end(src, i + 2, level),
                None => src[i..].find('\n').map_or(b.len(), |k| i + k),
            };
            continue;
        }
        if let Some(level) = long_bracket(b, i) {
            i = long_end(src, i + level + 2, level);
        } else if c == b'"' || c == b'\'' {
            i += 1;
            while i < b.len() && b[i] != c && b[i] != b'\n' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i = (i + 1).min(b.len());
        } else if c.is_ascii_alphabetic() || c == b'_' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Token {
                text: &src[start..i],
                name: true,
                start,
                end: i,
            });
            continue;
        } else if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit))
        {
            while i < b.len()
                && (b[i].is_ascii_alphanumeric()
                    || b[i] == b'.'
                    || (matches!(b[i], b'+' | b'-')
                        && matches!(b[i - 1], b'e' | b'E' | b'p' | b'P')))
            {
                i += 1;
            }
        } else {
            let three = ["..."];
            let two = ["==", "~=", "<=", ">=", "//", "::", "<<", ">>", ".."];
            let len = if three.iter().any(|p| src[i..].starts_with(p)) {
                3
            } else if two.iter().any(|p| src[i..].starts_with(p)) {
                2
            } else {
                // one byte, or one whole character outside ASCII
                src[i..].chars().next().map_or(1, char::len_utf8)
            };
            i += len;
        }
        out.push(Token {
            text: &src[start..i],
            name: false,
            start,
            end: i,
        });
    }
    out
}

/// A top-level `local` statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Local {
    /// Where the `local` keyword starts and ends.
    start: usize,
    keyword_end: usize,
    /// The names it declares, in order.
    pub names: Vec<String>,
    /// The names declared `<const>`.
    consts: Vec<String>,
    /// Where each attribute (`<const>`, `<close>`) is, to blank it out.
    attribs: Vec<(usize, usize)>,
    /// Where the name list ends.
    names_end: usize,
    /// Whether `=` follows (else the names start as nil).
    assigned: bool,
    /// `local function NAME`.
    function: bool,
    /// Whether a name is `<close>`: then the statement stays a real local.
    close: bool,
}

/// What a chunk declares and does at its top level.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Analysis {
    /// The top-level `local` statements, in order.
    pub locals: Vec<Local>,
    /// A `::label::` or `goto` outside any block: two such chunks side by side could clash.
    pub top_label: bool,
    /// A `return` outside any function: at the prompt it ends the chunk.
    pub returns: bool,
}

impl Analysis {
    /// The statements the session carries, in order: all but `<close>` ones and those that
    /// redeclare a name a `<close>` statement of this chunk declared before them.
    pub fn carried(&self) -> Vec<&Local> {
        let mut real: Vec<&str> = Vec::new();
        let mut out = Vec::new();
        for l in &self.locals {
            if l.close || l.names.iter().any(|n| real.contains(&n.as_str())) {
                real.extend(l.names.iter().map(String::as_str));
            } else {
                out.push(l);
            }
        }
        out
    }

    /// The names the session carries from the chunk, each once, in order.
    pub fn carried_names(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for n in self.carried().into_iter().flat_map(|l| l.names.iter()) {
            if !out.contains(n) {
                out.push(n.clone());
            }
        }
        out
    }

    /// Whether the chunk can stand as it is at a program's top level and mean what it meant at
    /// the prompt: no `return`, no top-level label, no `<close>` local (which would close at
    /// the program's end, not the chunk's).
    pub fn stands_alone(&self) -> bool {
        !self.returns && !self.top_label && self.locals.iter().all(|l| !l.close)
    }
}

/// The blocks a token may open, for finding the top level and function bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    Function,
    Other,
}

/// Finds a chunk's top-level `local` statements, labels and returns.
pub fn analyse(src: &str) -> Analysis {
    let toks = tokens(src);
    let mut out = Analysis::default();
    let mut blocks: Vec<Block> = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let t = toks[i];
        if t.name {
            match t.text {
                "function" => blocks.push(Block::Function),
                "do" | "if" | "repeat" => blocks.push(Block::Other),
                "end" | "until" => {
                    blocks.pop();
                }
                "return" if !blocks.contains(&Block::Function) => out.returns = true,
                "goto" if blocks.is_empty() => out.top_label = true,
                "local" if blocks.is_empty() => {
                    if let Some((local, next)) = local_at(&toks, i) {
                        out.locals.push(local);
                        i = next;
                        continue;
                    }
                }
                _ => {}
            }
        } else if t.text == "::" && blocks.is_empty() {
            out.top_label = true;
        }
        i += 1;
    }
    out
}

/// The `local` statement whose keyword is token `i`, and the token after its name list (the
/// `function` keyword itself for `local function`, so its block is counted).
fn local_at(toks: &[Token<'_>], i: usize) -> Option<(Local, usize)> {
    let keyword = toks[i];
    let mut local = Local {
        start: keyword.start,
        keyword_end: keyword.end,
        names: Vec::new(),
        consts: Vec::new(),
        attribs: Vec::new(),
        names_end: keyword.end,
        assigned: false,
        function: false,
        close: false,
    };
    let next = toks.get(i + 1)?;
    if next.name && next.text == "function" {
        let name = toks.get(i + 2).filter(|t| t.name)?;
        local.function = true;
        local.names.push(name.text.to_string());
        local.names_end = name.end;
        return Some((local, i + 1));
    }
    let mut j = i + 1;
    loop {
        let name = toks.get(j).filter(|t| t.name)?;
        local.names.push(name.text.to_string());
        local.names_end = name.end;
        j += 1;
        if toks.get(j).is_some_and(|t| t.text == "<") {
            let attrib = toks.get(j + 1).filter(|t| t.name)?;
            let close = toks.get(j + 2).filter(|t| t.text == ">")?;
            match attrib.text {
                "const" => local.consts.push(name.text.to_string()),
                "close" => local.close = true,
                _ => return None,
            }
            local.attribs.push((toks[j].start, close.end));
            local.names_end = close.end;
            j += 3;
        }
        if toks.get(j).is_some_and(|t| t.text == ",") {
            j += 1;
            continue;
        }
        break;
    }
    local.assigned = toks.get(j).is_some_and(|t| t.text == "=");
    Some((local, j))
}

/// `src[from..to]` with the attributes in it blanked (newlines kept).
fn without_attribs(src: &str, local: &Local, from: usize, to: usize) -> String {
    let mut out = String::new();
    let mut pos = from;
    for &(a, b) in &local.attribs {
        out.push_str(&src[pos..a]);
        out.extend(
            src[a..b]
                .chars()
                .map(|c| if c == '\n' { '\n' } else { ' ' }),
        );
        pos = b;
    }
    out.push_str(&src[pos..to]);
    out
}

/// Only the newlines of `text`: what is left of a span taken out, so lines stay where they were.
fn newlines(text: &str) -> String {
    text.chars().filter(|&c| c == '\n').collect()
}

fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(",")
}

/// The chunk with its carried top-level `local` statements turned into session-slot
/// declarations (see the module's doc); the same text when it declares none.
pub fn for_session(src: &str) -> String {
    let analysis = analyse(src);
    let mut out = String::new();
    let mut pos = 0;
    for l in analysis.carried() {
        out.push_str(&src[pos..l.start]);
        out.push_str(&format!(
            ";__lmcp_local({},{});",
            l.assigned || l.function,
            quoted(&l.names)
        ));
        if !l.consts.is_empty() {
            out.push_str(&format!("__lmcp_const({});", quoted(&l.consts)));
        }
        if l.function || l.assigned {
            // `function f ...` and `a, b = ...` now assign the slots
            out.push_str(&without_attribs(src, l, l.keyword_end, l.names_end));
        } else {
            out.push_str(&newlines(&src[l.keyword_end..l.names_end]));
        }
        pos = l.names_end;
    }
    out.push_str(&src[pos..]);
    out
}

/// For a saved program, a chunk that cannot stand at the top level as typed (it returns, or
/// holds a label or a `<close>` local) but declares locals later chunks use: the names to
/// declare before its block (`local a, b = a, b`, so each starts as the value its name had,
/// as a session slot does) and the chunk with those `local` keywords taken out. `None` when
/// it carries no locals.
pub fn for_program(src: &str) -> Option<(String, String)> {
    let analysis = analyse(src);
    let names = analysis.carried_names();
    if names.is_empty() {
        return None;
    }
    let mut body = String::new();
    let mut pos = 0;
    for l in analysis.carried() {
        body.push_str(&src[pos..l.start]);
        let rest = src[l.keyword_end..].trim_start_matches([' ', '\t']);
        let from = src.len() - rest.len();
        body.push_str(&newlines(&src[l.keyword_end..from]));
        body.push_str(&without_attribs(src, l, from, l.names_end));
        if !l.function && !l.assigned {
            body.push_str(" = nil");
        }
        pos = l.names_end;
    }
    body.push_str(&src[pos..]);
    let list = names.join(", ");
    Some((format!("local {list} = {list}"), body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_level_locals_become_session_slots() {
        assert_eq!(
            for_session("local n = 6"),
            ";__lmcp_local(true,\"n\"); n = 6"
        );
        assert_eq!(
            for_session("local a, b = b, a"),
            ";__lmcp_local(true,\"a\",\"b\"); a, b = b, a"
        );
        assert_eq!(
            for_session("local function f(x) return x end"),
            ";__lmcp_local(true,\"f\"); function f(x) return x end"
        );
        // no value: the slots start as nil, and nothing is left to parse as a statement
        assert_eq!(
            for_session("local a,\n b print(a)"),
            ";__lmcp_local(false,\"a\",\"b\");\n print(a)"
        );
        assert_eq!(
            for_session("local k <const> = 1"),
            ";__lmcp_local(true,\"k\");__lmcp_const(\"k\"); k         = 1"
        );
        // nested locals, strings, comments and fields are not top-level statements
        let nested = "do local x = 1 end\nfunction g() local y = 2 end\n\
                      s = 'local z = 3' -- local w = 4\nt = {[ [[local v]] ] = 1}\n\
                      if x then local u = 5 end repeat local r = 1 until r";
        assert_eq!(for_session(nested), nested);
        // after a nested block closes, the top level resumes
        assert_eq!(
            for_session("for i = 1, 2 do end local m = 1"),
            "for i = 1, 2 do end ;__lmcp_local(true,\"m\"); m = 1"
        );
        // `<close>` stays a real local, and so does a later local of its name
        let close = "local h <close> = x\nlocal h = 1\nlocal other = 2";
        assert_eq!(
            for_session(close),
            "local h <close> = x\nlocal h = 1\n;__lmcp_local(true,\"other\"); other = 2"
        );
    }

    #[test]
    fn the_rewrite_keeps_every_line_where_it_was() {
        for src in [
            "local a,\n  b\n= 1,\n 2\nprint(a)",
            "local x <const>\n= 1",
            "local\nfunction\nf() end",
            "local p\n(print)('x')",
        ] {
            let out = for_session(src);
            assert_eq!(
                out.lines().count(),
                src.lines().count(),
                "{src:?} -> {out:?}"
            );
            let lua = mlua::Lua::new();
            assert!(lua.load(&out).into_function().is_ok(), "{out}");
        }
        // a declaration right before a parenthesis is not a call
        assert!(for_session("local p\n(print)('x')").contains("\");\n(print)"));
    }

    #[test]
    fn returns_labels_and_closes_are_found() {
        let a = analyse("local function f() return 1 end x = f()");
        assert!(!a.returns && a.stands_alone());
        assert!(analyse("if x then return 1 end").returns);
        assert!(analyse("::top:: goto top").top_label);
        assert!(!analyse("while true do ::again:: end").top_label);
        assert!(!analyse("local c <close> = nil").stands_alone());
        assert_eq!(
            analyse("local a, b = 1 local a = 2").carried_names(),
            vec!["a", "b"]
        );
    }

    #[test]
    fn a_program_declares_what_a_returning_chunk_keeps() {
        assert_eq!(for_program("x = 1"), None);
        let (declare, body) = for_program("local x = 5\nlocal y\nif x then return x end").unwrap();
        assert_eq!(declare, "local x, y = x, y");
        assert_eq!(body, "x = 5\ny = nil\nif x then return x end");
        let (_, body) = for_program("local function f() end local k <const> = 1").unwrap();
        assert_eq!(body, "function f() end k         = 1");
    }
}
