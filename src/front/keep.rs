//! Keeping what a REPL session tried: its chunks become one Lua program, saved as a recipe or a
//! custom tool (`/save`), after `/history`, `/drop N` and `/params NAME...`.
//!
//! Each chunk that ran without error is kept in order, with the tools it called. The program
//! wraps each statement chunk in `do ... end`, so a `local` lasts one chunk as it did at the
//! prompt, and globals carry from chunk to chunk as they did. A chunk that only showed a value
//! (`total * 100`) does nothing in a program and is left out, unless it is the last: its value
//! is then what the program returns. The header's `---@uses` lists every tool the chunks called
//! or name as `tools.NAME`, so the saved program may call those and no others. `/params n`
//! lifts an assignment of a literal (`local n = 5`, `n = "x"`) into `---@param n integer=5`,
//! the line becoming `local n = params.n`: run without arguments, the program does what the
//! session did.

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
            if c.expression && !c.statement && i != last {
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

    /// `/drop N`: removes chunk N (from 1); the chunk removed.
    pub fn drop_chunk(&mut self, n: usize) -> Result<Chunk> {
        if n == 0 || n > self.chunks.len() {
            return Err(Error::Usage(match self.chunks.len() {
                0 => "there are no chunks to drop".into(),
                len => format!("there is no chunk {n}: /history numbers them 1 to {len}"),
            }));
        }
        let chunk = self.chunks.remove(n - 1);
        // a parameter whose assignment went with the chunk is no longer one
        let chunks = &self.chunks;
        self.params.retain(|p| lift(chunks, p).is_ok());
        Ok(chunk)
    }

    /// `/params NAME...`: marks these names as the program's parameters (replacing the
    /// marks), each checked to have an assignment of a literal to lift.
    pub fn set_params(&mut self, names: Vec<String>) -> Result<()> {
        for (i, n) in names.iter().enumerate() {
            if names[..i].contains(n) {
                return Err(Error::Usage(format!("`{n}` is named twice")));
            }
            lift(&self.chunks, n)?;
        }
        self.params = names;
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

    /// The Lua program: a header naming and describing it, its parameters and the tools it
    /// uses, then the chunks. `named` lists the tool names the chunks mention as `tools.NAME`
    /// that exist (so a branch the session did not take may still call them).
    pub fn program(&self, name: &str, description: &str, named: &[String]) -> Result<String> {
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
        let mut uses: Vec<&str> = Vec::new();
        for t in self.chunks.iter().flat_map(|c| &c.tools).chain(named) {
            if !uses.contains(&t.as_str()) {
                uses.push(t);
            }
        }
        uses.sort_unstable();
        let mut out = format!("---@name {name}\n---@description {description}\n");
        for l in &lifted {
            let default = serde_json::to_string(&l.value).unwrap_or_default();
            out.push_str(&format!(
                "---@param {} {}={default} Set to {default} in the session\n",
                l.name, l.kind
            ));
        }
        out.push_str(&format!("---@uses {}\n", uses.join(", ")));
        let last = self.chunks.len() - 1;
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
            if c.expression && i == last {
                out.push_str(&format!("\nreturn {body}\n"));
            } else if !c.expression || c.statement {
                out.push_str(&format!("\ndo\n{}\nend\n", indent_lines(&body)));
            }
        }
        Ok(out)
    }
}

fn indent_lines(body: &str) -> String {
    body.lines()
        .map(|l| {
            if l.is_empty() {
                String::new()
            } else {
                format!("  {l}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The tool names a chunk mentions as `tools.NAME` or `tools["NAME"]` / `tools['NAME']`.
pub fn mentioned_tools(source: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = source;
    while let Some(at) = rest.find("tools") {
        let before = &rest[..at];
        let after = &rest[at + "tools".len()..];
        rest = after;
        if before
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.')
        {
            continue;
        }
        let name: String = if let Some(a) = after.strip_prefix('.') {
            a.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        } else if let Some(a) = after
            .strip_prefix("[\"")
            .or_else(|| after.strip_prefix("['"))
        {
            a.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
                .collect()
        } else {
            continue;
        };
        if !name.is_empty() && !found.contains(&name) {
            found.push(name);
        }
    }
    found
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
            let t = line.trim();
            let t = t.strip_prefix("local ").map(str::trim_start).unwrap_or(t);
            let Some(rest) = t.strip_prefix(name) else {
                continue;
            };
            let Some(value) = rest.trim_start().strip_prefix('=') else {
                continue;
            };
            let value = value.trim().trim_end_matches(';').trim_end();
            if value.starts_with('=') {
                continue;
            }
            if let Some((kind, value)) = literal(value) {
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
        }
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
        k.set_params(vec!["n".into(), "word".into()]).unwrap();
        let p = k
            .program("tried", "  What I tried,\n today ", &["write_file".into()])
            .unwrap();
        let expected = "---@name tried\n---@description What I tried, today\n\
            ---@param n integer=4 Set to 4 in the session\n\
            ---@param word string=\"hi\" Set to \"hi\" in the session\n\
            ---@uses calculate, write_file\n\
            \ndo\n  local n = params.n\nend\n\
            \ndo\n  word = params.word\nend\n\
            \ndo\n  for i = 1, 3 do\n    total = (total or 0) + i\n  end\nend\n\
            \ndo\n  tools.calculate{expression = '1+1'}\nend\n\
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
        k.set_params(vec!["n".into()]).unwrap();
        let e = k
            .set_params(vec!["missing".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("no chunk sets `missing`"), "{e}");
        assert!(k.set_params(vec!["n".into(), "n".into()]).is_err());
        assert!(k.set_params(vec!["tools".into()]).is_err());
        assert_eq!(k.params, vec!["n"], "a refused /params keeps the marks");
        assert!(k.drop_chunk(0).is_err());
        assert!(k.drop_chunk(7).unwrap_err().to_string().contains("1 to 6"));
        assert_eq!(k.drop_chunk(1).unwrap().source, "local n = 4");
        assert!(k.params.is_empty(), "the parameter went with its chunk");
        let empty = Kept::default();
        assert!(empty.program("x", "y", &[]).is_err());
        assert!(session().program("x", " ", &[]).is_err());
    }

    #[test]
    fn literals_and_mentions() {
        assert_eq!(literal("5"), Some(("integer", json!(5))));
        assert_eq!(literal("-2.5"), Some(("number", json!(-2.5))));
        assert_eq!(literal("'a b'"), Some(("string", json!("a b"))));
        assert_eq!(literal("\"x\""), Some(("string", json!("x"))));
        assert_eq!(literal("false"), Some(("boolean", json!(false))));
        for no in ["x", "'a\\n'", "'a", "1 + 2", "f()", "{}", "0x10", "1e999"] {
            assert_eq!(literal(no), None, "{no}");
        }
        assert_eq!(
            mentioned_tools("x = tools.read_file{}; mytools.no{} tools['list_dir']{} t.tools.x"),
            vec!["read_file", "list_dir"]
        );
    }
}
