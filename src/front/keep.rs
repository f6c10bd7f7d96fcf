//! Keeping what a REPL session tried: its chunks become one Lua program, saved as a recipe or a
//! custom tool (`/save`), after `/history`, `/drop N` and `/params NAME...`.
//!
//! Each chunk that ran without error is kept in order, with the tools it called. The program
//! wraps each statement chunk in `do ... end`, a block of its own as at the prompt, and globals
//! carry from chunk to chunk as they did. The top-level `local`s the session kept
//! (`locals.rs`) outlive their chunk here too: such a chunk stands at the program's top level
//! as typed, or, when it cannot (a `return`, a top-level label, a `<close>` local), keeps its
//! block with those locals declared just before it. A chunk with a `return` runs as its own
//! function, as at the prompt, so it ends that chunk and not the program. Lines are
//! kept byte for byte (no re-indenting: a long string would change). A chunk that only showed
//! a value (`total * 100`, no tool called) does nothing in a program and is left out, unless
//! it is the last: its value is then what the program returns. The header's `---@uses` lists
//! the tools the kept chunks called, so the saved program may call those and no others (a
//! branch the session never took may need more: `/save` says so). `/params n` lifts an
//! assignment of a literal (`local n = 5`, `n = "x"`) into `---@param n integer=5`, the line
//! becoming `local n = params.n`: run without arguments, the program does what the session
//! did.

use serde_json::{Value, json};

use crate::error::{Error, Result};

/// One chunk the session ran without error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// The source as typed (lines joined).
    pub source: String,
    /// Whether it ran as an expression whose value was shown.
    pub expression: bool,
    /// Whether, as an expression, it is also a statement (a call): kept when not last.
    pub statement: bool,
    /// The tools it called, in order.
    pub tools: Vec<String>,
    /// The hosts its `http_request` calls reached, in order.
    pub hosts: Vec<String>,
}

/// A parameter lifted out of a chunk.
#[derive(Debug, Clone, PartialEq)]
struct Lifted {
    name: String,
    /// The chunk (0-based) and line (0-based) of the assignment.
    chunk: usize,
    line: usize,
    kind: &'static str,
    value: Value,
}

/// The chunks a session kept and the names marked as parameters.
#[derive(Debug, Default)]
pub struct Kept {
    chunks: Vec<Chunk>,
    params: Vec<String>,
}

impl Kept {
    /// Keeps a chunk that ran without error.
    pub fn push(&mut self, chunk: Chunk) {
        self.chunks.push(chunk);
    }

    /// The kept chunks, in order.
    pub fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    /// `/history`: the chunks, numbered from 1, with the tools each called.
    pub fn listing(&self) -> String {
        if self.chunks.is_empty() {
            return "nothing kept yet: chunks that run without error are kept for /save".into();
        }
        let mut out = String::new();
        let last = self.chunks.len() - 1;
        for (i, c) in self.chunks.iter().enumerate() {
            let mut notes = Vec::new();
            if !c.tools.is_empty() {
                notes.push(format!("calls {}", c.tools.join(", ")));
            }
            if left_out(c) && i != last {
                notes.push("shows a value: left out of a saved program".into());
            }
            let note = if notes.is_empty() {
                String::new()
            } else {
                format!("   -- {}", notes.join("; "))
            };
            let mut lines = c.source.lines();
            out.push_str(&format!(
                "[{}] {}{note}\n",
                i + 1,
                lines.next().unwrap_or("")
            ));
            for l in lines {
                out.push_str(&format!("    {l}\n"));
            }
        }
        if !self.params.is_empty() {
            out.push_str(&format!("params: {}\n", self.params.join(", ")));
        }
        out.pop();
        out
    }

    /// `/drop N...`: removes these chunks (numbered from 1, as `/history` shows them);
    /// the chunks removed and the parameters that went with them. Nothing is removed when a
    /// number is wrong.
    pub fn drop_chunks(&mut self, numbers: &[usize]) -> Result<(Vec<Chunk>, Vec<String>)> {
        let len = self.chunks.len();
        if let Some(&n) = numbers.iter().find(|&&n| n == 0 || n > len) {
            return Err(Error::Usage(match len {
                0 => "there are no chunks to drop".into(),
                _ => format!("there is no chunk {n}: /history numbers them 1 to {len}"),
            }));
        }
        let mut order = numbers.to_vec();
        order.sort_unstable();
        order.dedup();
        let mut dropped = Vec::new();
        for n in order.into_iter().rev() {
            dropped.push(self.chunks.remove(n - 1));
        }
        dropped.reverse();
        // a parameter whose assignment went with its chunk is no longer one
        let chunks = &self.chunks;
        let (kept, lost) = std::mem::take(&mut self.params)
            .into_iter()
            .partition(|p| lift(chunks, p).is_ok());
        self.params = kept;
        Ok((dropped, lost))
    }

    /// `/params NAME...`: marks these names as parameters too, each checked to have an
    /// assignment of a literal to lift that no later line sets again. `/params clear` unmarks
    /// them all. Nothing changes when a name is refused.
    pub fn add_params(&mut self, names: Vec<String>) -> Result<()> {
        if names == ["clear"] {
            self.params.clear();
            return Ok(());
        }
        let mut all = self.params.clone();
        for n in names {
            if all.contains(&n) {
                continue;
            }
            lift(&self.chunks, &n)?;
            all.push(n);
        }
        self.params = all;
        Ok(())
    }

    /// The names marked as parameters, with what each was lifted from.
    pub fn params_listing(&self) -> String {
        if self.params.is_empty() {
            return "no parameters: /params NAME... lifts `local NAME = <literal>` (or `NAME = \
                    <literal>`) into a parameter whose default is that literal"
                .into();
        }
        self.params
            .iter()
            .filter_map(|p| lift(&self.chunks, p).ok())
            .map(|l| format!("{} {}={} (chunk {})", l.name, l.kind, l.value, l.chunk + 1))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The Lua program: a header naming and describing it, its parameters and the tools its
    /// chunks called, then the chunks.
    pub fn program(&self, name: &str, description: &str) -> Result<String> {
        if self.chunks.is_empty() {
            return Err(Error::Usage(
                "nothing to save: no chunk has run without error in this session".into(),
            ));
        }
        let description = description.split_whitespace().collect::<Vec<_>>().join(" ");
        if description.is_empty() {
            return Err(Error::Usage("a saved program needs a description".into()));
        }
        let lifted: Vec<Lifted> = self
            .params
            .iter()
            .map(|p| lift(&self.chunks, p))
            .collect::<Result<_>>()?;
        let last = self.chunks.len() - 1;
        let emitted = |i: usize, c: &Chunk| i == last || !left_out(c);
        let mut uses: Vec<&str> = Vec::new();
        for (i, c) in self.chunks.iter().enumerate() {
            for t in c.tools.iter().filter(|_| emitted(i, c)) {
                if !uses.contains(&t.as_str()) {
                    uses.push(t);
                }
            }
        }
        uses.sort_unstable();
        let mut hosts: Vec<&str> = Vec::new();
        for (i, c) in self.chunks.iter().enumerate() {
            for h in c.hosts.iter().filter(|_| emitted(i, c)) {
                if !hosts.contains(&h.as_str()) {
                    hosts.push(h);
                }
            }
        }
        hosts.sort_unstable();
        let mut out = format!("---@name {name}\n---@description {description}\n");
        for l in &lifted {
            let default = serde_json::to_string(&l.value).unwrap_or_default();
            out.push_str(&format!(
                "---@param {} {}={default} Set to {default} in the session\n",
                l.name, l.kind
            ));
        }
        out.push_str(&format!("---@uses {}\n", uses.join(", ")));
        for h in hosts {
            out.push_str(&format!("---@connect {h}\n"));
        }
        for (i, c) in self.chunks.iter().enumerate() {
            let mut lines: Vec<String> = c.source.lines().map(str::to_string).collect();
            for l in lifted.iter().filter(|l| l.chunk == i) {
                let line = &lines[l.line];
                let indent = &line[..line.len() - line.trim_start().len()];
                let local = if line.trim_start().starts_with("local") {
                    "local "
                } else {
                    ""
                };
                lines[l.line] = format!("{indent}{local}{} = params.{}", l.name, l.name);
            }
            let body = lines.join("\n");
            let analysis = super::locals::analyse(&body);
            let carried = !analysis.carried_names().is_empty();
            let block = if c.expression && i == last {
                format!("return {body}")
            } else if c.expression && !c.statement && !c.tools.is_empty() {
                // a value shown, but the tools it called did something: the call stays
                format!("do\nlocal _ = {body}\nend")
            } else if left_out(c) {
                continue;
            } else if carried && analysis.stands_alone() {
                // its top-level locals outlived the line at the prompt: here too
                not_a_call(body)
            } else if analysis.returns {
                // a chunk runs as a function at the prompt: its return ends it, not the program
                let (declare, body) = match super::locals::for_program(&body) {
                    Some((declare, body)) => (format!("{declare}\n"), body),
                    None => (String::new(), body),
                };
                let run = format!("{declare};(function(...)\n{body}\nend)(...)");
                if i == last {
                    format!("{declare}return (function(...)\n{body}\nend)(...)")
                } else {
                    run
                }
            } else if let Some((declare, body)) = super::locals::for_program(&body) {
                // a label or a `<close>` local keeps the block; the locals it carried are
                // declared before it
                format!("{declare}\ndo\n{body}\nend")
            } else {
                format!("do\n{body}\nend")
            };
            out.push('\n');
            out.push_str(&block);
            out.push('\n');
        }
        Ok(out)
    }
}

/// Whether a chunk is left out of a program (unless last): it only showed a value, calling no
/// tool.
fn left_out(c: &Chunk) -> bool {
    c.expression && !c.statement && c.tools.is_empty()
}

/// A chunk set at a program's top level as it is, with a `;` before it when it starts with `(`,
/// so it is not read as a call on the end of the chunk before it.
fn not_a_call(body: String) -> String {
    if body.trim_start().starts_with('(') {
        format!(";{body}")
    } else {
        body
    }
}

/// Finds the first `local NAME = <literal>` or `NAME = <literal>` line (alone on its line).
fn lift(chunks: &[Chunk], name: &str) -> Result<Lifted> {
    let ident = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ident || name == "params" || name == "tools" {
        return Err(Error::Usage(format!(
            "`{name}` cannot be a parameter: name a variable the session set, like /params count"
        )));
    }
    for (ci, c) in chunks.iter().enumerate() {
        for (li, line) in c.source.lines().enumerate() {
            let Some(value) = assigned(line, name) else {
                continue;
            };
            if let Some((kind, value)) = literal(value.trim_end_matches(';').trim_end()) {
                if let Some(again) = set_again(chunks, name, ci, li) {
                    return Err(Error::Usage(format!(
                        "`{name}` is set again in chunk {again}, so a parameter would change \
                         nothing after it; /drop that chunk or lift another name"
                    )));
                }
                return Ok(Lifted {
                    name: name.to_string(),
                    chunk: ci,
                    line: li,
                    kind,
                    value,
                });
            }
        }
    }
    Err(Error::Usage(format!(
        "no chunk sets `{name}` to a literal on a line of its own (`local {name} = 5`, \
         `{name} = \"text\"`, `{name} = true`); /history shows the chunks"
    )))
}

/// What a line that assigns `name` (`[local] NAME = VALUE`) gives it, trimmed; `""` for one
/// of several names assigned at once (`NAME, other = ...`). `None` when the line does not
/// start by assigning `name`.
fn assigned<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let t = line.trim();
    let t = t.strip_prefix("local ").map(str::trim_start).unwrap_or(t);
    let rest = t.strip_prefix(name)?.trim_start();
    if rest.starts_with(',') {
        return Some("");
    }
    rest.strip_prefix('=')
        .filter(|v| !v.starts_with('='))
        .map(str::trim)
}

/// The chunk (from 1) of a later line that assigns `name` again, after chunk `ci` line `li`.
fn set_again(chunks: &[Chunk], name: &str, ci: usize, li: usize) -> Option<usize> {
    for (cj, c) in chunks.iter().enumerate().skip(ci) {
        for (lj, line) in c.source.lines().enumerate() {
            if cj == ci && lj <= li {
                continue;
            }
            if assigned(line, name).is_some() {
                return Some(cj + 1);
            }
        }
    }
    None
}

/// A Lua literal a parameter's default can be: a number, a plain quoted string (no escapes),
/// `true` or `false`; its header type and JSON value.
fn literal(text: &str) -> Option<(&'static str, Value)> {
    match text {
        "true" => return Some(("boolean", json!(true))),
        "false" => return Some(("boolean", json!(false))),
        _ => {}
    }
    for q in ['"', '\''] {
        if let Some(inner) = text
            .strip_prefix(q)
            .and_then(|t| t.strip_suffix(q))
            .filter(|i| !i.contains(q) && !i.contains('\\'))
        {
            return Some(("string", json!(inner)));
        }
    }
    let plain = |t: &str| {
        !t.is_empty()
            && t.chars()
                .all(|c| c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E'))
    };
    if !plain(text) {
        return None;
    }
    if let Ok(i) = text.parse::<i64>() {
        return Some(("integer", json!(i)));
    }
    let f = text.parse::<f64>().ok().filter(|f| f.is_finite())?;
    Some(("number", json!(f)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(source: &str, expression: bool, statement: bool, tools: &[&str]) -> Chunk {
        Chunk {
            source: source.into(),
            expression,
            statement,
            tools: tools.iter().map(|t| t.to_string()).collect(),
            hosts: Vec::new(),
        }
    }

    #[test]
    fn the_hosts_a_session_reached_are_its_connect_lines() {
        let mut k = Kept::default();
        let mut c = chunk(
            "tools.http_request{url = u}",
            false,
            false,
            &["http_request"],
        );
        c.hosts = vec!["b.example.org".into(), "a.example.org:8443".into()];
        k.push(c);
        let p = k.program("web", "Reaches two hosts").unwrap();
        assert!(
            p.contains(
                "---@uses http_request\n---@connect a.example.org:8443\n---@connect b.example.org\n"
            ),
            "{p}"
        );
    }

    fn session() -> Kept {
        let mut k = Kept::default();
        k.push(chunk("local n = 4", false, false, &[]));
        k.push(chunk("word = 'hi'", false, false, &[]));
        k.push(chunk("total", true, false, &[]));
        k.push(chunk(
            "for i = 1, 3 do\n  total = (total or 0) + i\nend",
            false,
            false,
            &[],
        ));
        k.push(chunk(
            "tools.calculate{expression = '1+1'}",
            true,
            true,
            &["calculate"],
        ));
        k.push(chunk(
            "tools.calculate{expression = word .. total}",
            true,
            true,
            &["calculate"],
        ));
        k
    }

    #[test]
    fn chunks_become_one_program_with_header_and_blocks() {
        let mut k = session();
        k.add_params(vec!["n".into()]).unwrap();
        k.add_params(vec!["word".into(), "n".into()]).unwrap();
        let p = k.program("tried", "  What I tried,\n today ").unwrap();
        let expected = "---@name tried\n---@description What I tried, today\n\
            ---@param n integer=4 Set to 4 in the session\n\
            ---@param word string=\"hi\" Set to \"hi\" in the session\n\
            ---@uses calculate\n\
            \nlocal n = params.n\n\
            \ndo\nword = params.word\nend\n\
            \ndo\nfor i = 1, 3 do\n  total = (total or 0) + i\nend\nend\n\
            \ndo\ntools.calculate{expression = '1+1'}\nend\n\
            \nreturn tools.calculate{expression = word .. total}\n";
        assert_eq!(p, expected);
        let h = crate::program::header::Header::parse(&p, "t.lua").unwrap();
        assert_eq!(h.params.len(), 2);
        assert!(
            !h.params[0].required,
            "a lifted parameter defaults to the session's value"
        );
    }

    #[test]
    fn returns_long_strings_and_values_with_effects_keep_their_meaning() {
        let mut k = Kept::default();
        k.push(chunk("return 42", false, false, &[]));
        k.push(chunk("q = [[a\nb]]", false, false, &[]));
        k.push(chunk(
            "tools.workspace_create{name = 's'}.name",
            true,
            false,
            &["workspace_create"],
        ));
        k.push(chunk("1 + 1", true, false, &[]));
        k.push(chunk("if q then return #q end", false, false, &[]));
        let p = k.program("r", "d").unwrap();
        assert!(p.contains("---@uses workspace_create\n"), "{p}");
        assert!(
            p.contains("\n;(function(...)\nreturn 42\nend)(...)\n"),
            "{p}"
        );
        assert!(
            p.contains("\ndo\nq = [[a\nb]]\nend\n"),
            "lines kept byte for byte: {p}"
        );
        assert!(p.contains("\ndo\nlocal _ = tools.workspace_create{name = 's'}.name\nend\n"));
        assert!(
            !p.contains("1 + 1"),
            "a value shown, nothing done: left out"
        );
        assert!(
            p.ends_with("\nreturn (function(...)\nif q then return #q end\nend)(...)\n"),
            "{p}"
        );
        // and Lua agrees: the first return ends only its chunk
        let lua = mlua::Lua::new();
        lua.globals()
            .set("tools", lua.create_table().unwrap())
            .unwrap();
        let body = p.replace("local _ = tools.workspace_create{name = 's'}.name", "");
        assert_eq!(lua.load(&body).eval::<i64>().unwrap(), 3);
        // a tool called only in a left-out chunk is not granted
        let mut k = Kept::default();
        k.push(chunk(
            "tools.calculate{expression = '1'}.value > 0",
            true,
            false,
            &[],
        ));
        k.push(chunk("x = 1", false, false, &[]));
        assert!(k.program("r", "d").unwrap().contains("---@uses \n"));
    }

    /// The locals the session kept mean the same in the program: a chunk's own, a function's,
    /// one set in a chunk that returned, one shadowed, one in a chunk with a label.
    #[test]
    fn kept_locals_mean_in_the_program_what_they_meant_at_the_prompt() {
        let mut k = Kept::default();
        k.push(chunk("local n = 6", false, false, &[]));
        k.push(chunk(
            "local function twice(x) return x * 2 end",
            false,
            false,
            &[],
        ));
        k.push(chunk(
            "local y = twice(n) if y > 100 then return 'big' end",
            false,
            false,
            &[],
        ));
        k.push(chunk("local n = n + 1", false, false, &[]));
        k.push(chunk("(print)('side effect')", false, false, &[]));
        k.push(chunk("::again:: local z = y + n", false, false, &[]));
        k.push(chunk("z", true, false, &[]));
        let p = k.program("p", "d").unwrap();
        assert!(p.contains("\nlocal n = 6\n\nlocal function twice"), "{p}");
        assert!(
            p.contains("\nlocal y = y\n;(function(...)\ny = twice(n) if"),
            "{p}"
        );
        assert!(
            p.contains("\nlocal z = z\ndo\n::again:: z = y + n\nend\n"),
            "{p}"
        );
        let lua = mlua::Lua::new();
        assert_eq!(lua.load(&p).eval::<i64>().unwrap(), 19, "{p}");
    }

    #[test]
    fn history_drop_and_params_say_what_is_wrong() {
        let mut k = session();
        let listing = k.listing();
        assert!(
            listing.contains("[3] total   -- shows a value"),
            "{listing}"
        );
        assert!(listing.contains("[5] tools.calculate{expression = '1+1'}   -- calls calculate"));
        assert!(
            listing.contains("[4] for i = 1, 3 do\n      total"),
            "{listing}"
        );
        k.add_params(vec!["n".into()]).unwrap();
        let e = k
            .add_params(vec!["missing".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("no chunk sets `missing`"), "{e}");
        assert!(k.add_params(vec!["word".into(), "tools".into()]).is_err());
        assert_eq!(k.params, vec!["n"], "a refused /params changes nothing");
        assert!(k.drop_chunks(&[0]).is_err());
        let e = k.drop_chunks(&[2, 7]).unwrap_err().to_string();
        assert!(e.contains("no chunk 7") && e.contains("1 to 6"), "{e}");
        assert_eq!(k.chunks.len(), 6, "a wrong number drops nothing");
        let (dropped, lost) = k.drop_chunks(&[3, 1, 3]).unwrap();
        assert_eq!(dropped.len(), 2);
        assert_eq!(dropped[0].source, "local n = 4");
        assert_eq!(lost, vec!["n"], "the parameter went with its chunk");
        assert_eq!(k.chunks[0].source, "word = 'hi'");
        k.add_params(vec!["word".into()]).unwrap();
        k.add_params(vec!["clear".into()]).unwrap();
        assert!(k.params.is_empty());
        // a name set again later would make the parameter do nothing
        let mut k = Kept::default();
        k.push(chunk("cnt = 1", false, false, &[]));
        k.push(chunk("print(cnt)\ncnt = 2", false, false, &[]));
        let e = k.add_params(vec!["cnt".into()]).unwrap_err().to_string();
        assert!(e.contains("set again in chunk 2"), "{e}");
        let empty = Kept::default();
        assert!(empty.program("x", "y").is_err());
        assert!(session().program("x", " ").is_err());
    }

    #[test]
    fn literals() {
        assert_eq!(literal("5"), Some(("integer", json!(5))));
        assert_eq!(literal("-2.5"), Some(("number", json!(-2.5))));
        assert_eq!(literal("'a b'"), Some(("string", json!("a b"))));
        assert_eq!(literal("\"x\""), Some(("string", json!("x"))));
        assert_eq!(literal("false"), Some(("boolean", json!(false))));
        for no in ["x", "'a\\n'", "'a", "1 + 2", "f()", "{}", "0x10", "1e999"] {
            assert_eq!(literal(no), None, "{no}");
        }
    }
}
