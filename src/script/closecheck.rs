//! Refuses to-be-closed variables (`local x <close> = ...`) before a chunk is compiled.
//!
//! Why: when the limit hook raises its error, Lua 5.4 unwinds the stack with hooks switched off
//! (they are restored only when a `pcall` catches the error), and every `__close` metamethod on
//! the way runs during that unwinding. A `__close` that loops would therefore run forever, out of
//! the hook's reach. Without `<close>` variables no `__close` metamethod is ever called, so the
//! sandbox refuses the attribute. This is a small Lua lexer (strings, long strings and comments
//! skipped) that finds the tokens `<` `close` `>` in a row.

/// The 1-based line of the first `<close>` attribute in `src`, if any.
pub fn find_close_attribute(src: &str) -> Option<usize> {
    let b = src.as_bytes();
    let mut i = 0;
    let mut line = 1;
    // The last two significant tokens: `<` and `close`.
    let mut prev: [&[u8]; 2] = [b"", b""];
    let push = |prev: &mut [&[u8]; 2], tok: &'static [u8]| {
        prev[0] = prev[1];
        prev[1] = tok;
    };
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
                continue;
            }
            b'[' if long_bracket(b, i).is_some() => {
                let level = long_bracket(b, i).unwrap_or(0);
                i = skip_long(b, i, level, &mut line);
                push(&mut prev, b"string");
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
                push(&mut prev, b"string");
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                push(
                    &mut prev,
                    if &b[start..i] == b"close" {
                        b"close"
                    } else {
                        b"name"
                    },
                );
            }
            c if c.is_ascii_digit() => {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.') {
                    i += 1;
                }
                push(&mut prev, b"number");
            }
            b'<' => {
                i += 1;
                if matches!(b.get(i), Some(b'<' | b'=')) {
                    i += 1;
                    push(&mut prev, b"op");
                } else {
                    push(&mut prev, b"<");
                }
            }
            b'>' => {
                if prev == [b"<" as &[u8], b"close"] {
                    return Some(line);
                }
                i += 1;
                push(&mut prev, b"op");
            }
            _ => {
                i += 1;
                push(&mut prev, b"op");
            }
        }
    }
    None
}

/// The level of a long bracket `[==[` starting at `i`, if one starts there.
fn long_bracket(b: &[u8], i: usize) -> Option<usize> {
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
fn skip_long(b: &[u8], i: usize, level: usize, line: &mut usize) -> usize {
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
    fn finds_the_attribute_and_nothing_else() {
        assert_eq!(find_close_attribute("local x <close> = f()"), Some(1));
        assert_eq!(
            find_close_attribute("\n\nlocal a, b < close > = 1"),
            Some(3)
        );
        assert_eq!(find_close_attribute("local x <const> = 1"), None);
        assert_eq!(find_close_attribute("print('<close>')"), None);
        assert_eq!(find_close_attribute("-- local x <close>\nprint(1)"), None);
        assert_eq!(
            find_close_attribute("--[[ <close> ]] x = [==[<close>]==]"),
            None
        );
        assert_eq!(
            find_close_attribute("local close = 1 return 2 < close"),
            None
        );
        assert_eq!(find_close_attribute("x = a <= close"), None);
        assert_eq!(find_close_attribute("s = \"\\\"<close>\""), None);
    }
}
