//! Refuses Lua source that Lua's own compiler would take far too long over, before it is
//! compiled: compiling is one C call the limit hook cannot interrupt.
//!
//! Two shapes make Lua 5.4's parser quadratic: a long run of `and`/`or` operators in one
//! expression (each operator walks the jump list built so far: 150,000 of them take about 40 s)
//! and many `goto`s (each is matched against the labels in scope). Neither is written by hand
//! at these sizes, so a chunk with more than [`MAX_LOGIC_CHAIN`] operators in one expression or
//! more than [`MAX_GOTOS`] `goto`s is refused with the line and how to fix it. This is a small
//! Lua lexer: strings, long strings and comments are skipped; an expression ends at a keyword
//! that starts or ends a statement, at `=`, `,` or `;`, and brackets nest.

/// Most `and`/`or` operators in one expression (compiling 500 takes well under a millisecond).
pub const MAX_LOGIC_CHAIN: usize = 500;
/// Most `goto` statements in one chunk.
pub const MAX_GOTOS: usize = 2_000;

/// Why `src` is refused, naming `chunk` and the line; `None` when it is fine to compile.
pub fn refuse_slow_source(src: &str, chunk: &str) -> Option<String> {
    let b = src.as_bytes();
    let mut i = 0;
    let mut line = 1;
    // `and`/`or` operators in the current expression, per bracket depth
    let mut chains: Vec<usize> = vec![0];
    let mut gotos = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            b'\n' => {
                line += 1;
                i += 1;
            }
            b' ' | b'\t' | b'\r' | 0x0b | 0x0c => i += 1,
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
            }
            b'"' | b'\'' => {
                i += 1;
                while i < b.len() && b[i] != c {
                    if b[i] == b'\\' {
                        if b.get(i + 1) == Some(&b'\n') {
                            line += 1;
                        }
                        i += 1;
                    } else if b[i] == b'\n' {
                        line += 1;
                    }
                    i += 1;
                }
                i += 1;
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                let depth = chains.len() - 1;
                match &b[start..i] {
                    b"and" | b"or" => {
                        chains[depth] += 1;
                        if chains[depth] > MAX_LOGIC_CHAIN {
                            return Some(format!(
                                "{chunk}:{line}: an expression with more than {MAX_LOGIC_CHAIN} \
                                 `and`/`or` operators would take Lua too long to compile; \
                                 split it (into a loop over a table, say)"
                            ));
                        }
                    }
                    b"goto" => {
                        gotos += 1;
                        if gotos > MAX_GOTOS {
                            return Some(format!(
                                "{chunk}:{line}: more than {MAX_GOTOS} `goto` statements would \
                                 take Lua too long to compile; use loops or functions"
                            ));
                        }
                    }
                    b"then" | b"do" | b"end" | b"else" | b"elseif" | b"local" | b"return"
                    | b"function" | b"if" | b"while" | b"for" | b"repeat" | b"until" | b"in"
                    | b"break" => chains[depth] = 0,
                    _ => {}
                }
            }
            b'(' | b'[' | b'{' => {
                chains.push(0);
                i += 1;
            }
            b')' | b']' | b'}' => {
                if chains.len() > 1 {
                    chains.pop();
                }
                i += 1;
            }
            b'=' | b',' | b';' => {
                // `==` compares inside an expression; `=` ends one
                if c == b'=' && b.get(i + 1) == Some(&b'=') {
                    i += 2;
                } else {
                    let depth = chains.len() - 1;
                    chains[depth] = 0;
                    i += 1;
                }
            }
            b'<' | b'>' | b'~' if b.get(i + 1) == Some(&b'=') => i += 2,
            _ => i += 1,
        }
    }
    None
}

/// The level of a long bracket `[==[` starting at `i`, if one starts there.
pub(super) fn long_bracket(b: &[u8], i: usize) -> Option<usize> {
    if b.get(i) != Some(&b'[') {
        return None;
    }
    let mut j = i + 1;
    while b.get(j) == Some(&b'=') {
        j += 1;
    }
    (b.get(j) == Some(&b'[')).then_some(j - i - 1)
}

/// Skips a long string or comment opened at `i`; returns the index after its close.
pub(super) fn skip_long(b: &[u8], i: usize, level: usize, line: &mut usize) -> usize {
    let mut j = i + level + 2;
    while j < b.len() {
        if b[j] == b'\n' {
            *line += 1;
        }
        if b[j] == b']'
            && b[j + 1..].iter().take(level).all(|c| *c == b'=')
            && b.get(j + 1 + level) == Some(&b']')
        {
            return j + level + 2;
        }
        j += 1;
    }
    b.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_logic_chains_are_refused_with_their_line() {
        let chain = |n: usize| format!("local a = 1\nreturn {}a", "a and ".repeat(n));
        assert_eq!(refuse_slow_source(&chain(MAX_LOGIC_CHAIN), "t.lua"), None);
        let e = refuse_slow_source(&chain(MAX_LOGIC_CHAIN + 1), "t.lua").unwrap();
        assert!(e.starts_with("t.lua:2:") && e.contains("split it"), "{e}");
        let mixed = format!("return {}1", "x or y and ".repeat(MAX_LOGIC_CHAIN));
        assert!(refuse_slow_source(&mixed, "t").is_some());
    }

    #[test]
    fn separate_expressions_and_skipped_text_do_not_count() {
        // many short expressions, in statements, arguments and table fields
        let statements = "local x = a and b or c\n".repeat(5_000);
        assert_eq!(refuse_slow_source(&statements, "t"), None);
        let args = format!("f({})", "a and b, ".repeat(5_000));
        assert_eq!(refuse_slow_source(&args, "t"), None);
        let fields = format!("t = {{{}}}", "a or b; ".repeat(5_000));
        assert_eq!(refuse_slow_source(&fields, "t"), None);
        // inside strings and comments they are text
        let text = format!(
            "s = '{}' --[[ {} ]] -- {}",
            "and ".repeat(5_000),
            "or ".repeat(5_000),
            "and ".repeat(5_000)
        );
        assert_eq!(refuse_slow_source(&text, "t"), None);
        // a parenthesized part is its own expression
        let grouped = format!("return {}1", "(a and b) and ".repeat(400));
        assert_eq!(refuse_slow_source(&grouped, "t"), None);
        assert_eq!(
            refuse_slow_source("return a == b and c ~= d and e <= f", "t"),
            None
        );
    }

    #[test]
    fn many_gotos_are_refused() {
        let ok = "goto done ::done::\n".repeat(MAX_GOTOS);
        assert_eq!(refuse_slow_source(&ok, "t"), None);
        let many = "do goto l ::l:: end\n".repeat(MAX_GOTOS + 1);
        assert!(refuse_slow_source(&many, "t").unwrap().contains("`goto`"));
    }
}
