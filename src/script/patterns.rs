//! Lua 5.4 pattern matching with a step budget: `string.find`, `match`, `gmatch` and `gsub`.
//!
//! Why not Lua's own: a pattern such as `string.rep('a', 20000):find('.-.-.-b')` backtracks for
//! minutes inside one C call, where no instruction hook can stop it, so a script could outlive its
//! deadline. This is a line-by-line port of the matcher in Lua 5.4's `lstrlib.c` (same semantics,
//! same error messages), except that every few thousand steps it asks the run whether it was
//! cancelled or ran out of time, and stops with that error if so. A test compares it with the
//! C implementation on thousands of random patterns.
//!
//! Plain searches (`find` with `plain`, or a pattern without specials) use `memchr::memmem`,
//! which is linear; Lua's `lmemfind` is quadratic in the worst case.

use mlua::{Function, Lua, MultiValue, Table, Value, Variadic};

use crate::gate::Held;

/// Most captures in one pattern (`LUA_MAXCAPTURES`).
const MAX_CAPTURES: usize = 32;
/// Deepest recursion of the matcher (`MAXCCALLS`).
const MAX_MATCH_DEPTH: usize = 200;
/// Steps between two calls of the interruption check.
const CHECK_EVERY: u32 = 4096;

const CAP_UNFINISHED: isize = -1;
const CAP_POSITION: isize = -2;

/// Why matching stopped early.
#[derive(Debug)]
pub enum Stop {
    /// The pattern is malformed, or the subject needs more captures than allowed.
    Pattern(String),
    /// The run was interrupted (deadline, cancellation); the message says which.
    Interrupted(String),
}

/// Asked every few thousand steps: `Some(message)` stops the match.
pub type Interrupt<'a> = &'a dyn Fn() -> Option<String>;

type Step<T> = Result<T, Stop>;

#[derive(Clone, Copy)]
struct Capture {
    init: usize,
    len: isize,
}

struct MatchState<'a> {
    src: &'a [u8],
    pat: &'a [u8],
    level: usize,
    depth: usize,
    capture: [Capture; MAX_CAPTURES],
    steps: u32,
    interrupt: Interrupt<'a>,
}

fn err<T>(msg: impl Into<String>) -> Step<T> {
    Err(Stop::Pattern(msg.into()))
}

fn match_class(c: u8, cl: u8) -> bool {
    let res = match cl.to_ascii_lowercase() {
        b'a' => c.is_ascii_alphabetic(),
        b'c' => c.is_ascii_control(),
        b'd' => c.is_ascii_digit(),
        b'g' => c.is_ascii_graphic(),
        b'l' => c.is_ascii_lowercase(),
        b'p' => c.is_ascii_punctuation(),
        b's' => matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c),
        b'u' => c.is_ascii_uppercase(),
        b'w' => c.is_ascii_alphanumeric(),
        b'x' => c.is_ascii_hexdigit(),
        b'z' => c == 0,
        _ => return cl == c,
    };
    if cl.is_ascii_uppercase() { !res } else { res }
}

impl<'a> MatchState<'a> {
    fn new(src: &'a [u8], pat: &'a [u8], interrupt: Interrupt<'a>) -> Self {
        MatchState {
            src,
            pat,
            level: 0,
            depth: MAX_MATCH_DEPTH,
            capture: [Capture { init: 0, len: 0 }; MAX_CAPTURES],
            steps: 0,
            interrupt,
        }
    }

    /// The pattern byte at `i`, or 0 past the end (C strings end in NUL).
    fn p(&self, i: usize) -> u8 {
        self.pat.get(i).copied().unwrap_or(0)
    }

    /// The subject byte at `i`, or 0 past the end.
    fn s(&self, i: usize) -> u8 {
        self.src.get(i).copied().unwrap_or(0)
    }

    fn tick(&mut self) -> Step<()> {
        self.steps += 1;
        if self.steps >= CHECK_EVERY {
            self.steps = 0;
            if let Some(msg) = (self.interrupt)() {
                return Err(Stop::Interrupted(msg));
            }
        }
        Ok(())
    }

    fn reprep(&mut self) {
        self.level = 0;
        self.depth = MAX_MATCH_DEPTH;
    }

    fn check_capture(&self, l: u8) -> Step<usize> {
        let l = l as isize - b'1' as isize;
        if l < 0 || l as usize >= self.level || self.capture[l as usize].len == CAP_UNFINISHED {
            return err(format!("invalid capture index %{}", l + 1));
        }
        Ok(l as usize)
    }

    fn capture_to_close(&self) -> Step<usize> {
        (0..self.level)
            .rev()
            .find(|&l| self.capture[l].len == CAP_UNFINISHED)
            .map_or_else(|| err("invalid pattern capture"), Ok)
    }

    fn class_end(&self, mut p: usize) -> Step<usize> {
        let c = self.p(p);
        p += 1;
        match c {
            b'%' => {
                if p >= self.pat.len() {
                    return err("malformed pattern (ends with '%')");
                }
                Ok(p + 1)
            }
            b'[' => {
                if self.p(p) == b'^' {
                    p += 1;
                }
                loop {
                    if p >= self.pat.len() {
                        return err("malformed pattern (missing ']')");
                    }
                    let cc = self.p(p);
                    p += 1;
                    if cc == b'%' && p < self.pat.len() {
                        p += 1;
                    }
                    if self.p(p) == b']' {
                        break;
                    }
                }
                Ok(p + 1)
            }
            _ => Ok(p),
        }
    }

    /// `p` points at `[`, `ec` at the closing `]`.
    fn match_bracket_class(&self, c: u8, mut p: usize, ec: usize) -> bool {
        let mut sig = true;
        if self.p(p + 1) == b'^' {
            sig = false;
            p += 1;
        }
        loop {
            p += 1;
            if p >= ec {
                break;
            }
            if self.p(p) == b'%' {
                p += 1;
                if match_class(c, self.p(p)) {
                    return sig;
                }
            } else if self.p(p + 1) == b'-' && p + 2 < ec {
                p += 2;
                if self.p(p - 2) <= c && c <= self.p(p) {
                    return sig;
                }
            } else if self.p(p) == c {
                return sig;
            }
        }
        !sig
    }

    fn single_match(&self, s: usize, p: usize, ep: usize) -> bool {
        if s >= self.src.len() {
            return false;
        }
        let c = self.src[s];
        match self.p(p) {
            b'.' => true,
            b'%' => match_class(c, self.p(p + 1)),
            b'[' => self.match_bracket_class(c, p, ep - 1),
            pc => pc == c,
        }
    }

    fn match_balance(&mut self, s: usize, p: usize) -> Step<Option<usize>> {
        if p + 1 >= self.pat.len() {
            return err("malformed pattern (missing arguments to '%b')");
        }
        if s >= self.src.len() || self.src[s] != self.p(p) {
            return Ok(None);
        }
        let (b, e) = (self.p(p), self.p(p + 1));
        let mut cont = 1;
        let mut s = s + 1;
        while s < self.src.len() {
            self.tick()?;
            let c = self.src[s];
            if c == e {
                cont -= 1;
                if cont == 0 {
                    return Ok(Some(s + 1));
                }
            } else if c == b {
                cont += 1;
            }
            s += 1;
        }
        Ok(None)
    }

    fn max_expand(&mut self, s: usize, p: usize, ep: usize) -> Step<Option<usize>> {
        let mut i = 0usize;
        while self.single_match(s + i, p, ep) {
            self.tick()?;
            i += 1;
        }
        loop {
            self.tick()?;
            if let Some(res) = self.do_match(s + i, ep + 1)? {
                return Ok(Some(res));
            }
            if i == 0 {
                return Ok(None);
            }
            i -= 1;
        }
    }

    fn min_expand(&mut self, mut s: usize, p: usize, ep: usize) -> Step<Option<usize>> {
        loop {
            self.tick()?;
            if let Some(res) = self.do_match(s, ep + 1)? {
                return Ok(Some(res));
            } else if self.single_match(s, p, ep) {
                s += 1;
            } else {
                return Ok(None);
            }
        }
    }

    fn start_capture(&mut self, s: usize, p: usize, what: isize) -> Step<Option<usize>> {
        let level = self.level;
        if level >= MAX_CAPTURES {
            return err("too many captures");
        }
        self.capture[level] = Capture { init: s, len: what };
        self.level = level + 1;
        let res = self.do_match(s, p)?;
        if res.is_none() {
            self.level -= 1;
        }
        Ok(res)
    }

    fn end_capture(&mut self, s: usize, p: usize) -> Step<Option<usize>> {
        let l = self.capture_to_close()?;
        self.capture[l].len = (s - self.capture[l].init) as isize;
        let res = self.do_match(s, p)?;
        if res.is_none() {
            self.capture[l].len = CAP_UNFINISHED;
        }
        Ok(res)
    }

    fn match_capture(&self, s: usize, l: u8) -> Step<Option<usize>> {
        let l = self.check_capture(l)?;
        let cap = self.capture[l];
        let len = cap.len as usize;
        if self.src.len() - s >= len && self.src[cap.init..cap.init + len] == self.src[s..s + len] {
            Ok(Some(s + len))
        } else {
            Ok(None)
        }
    }

    fn do_match(&mut self, s: usize, p: usize) -> Step<Option<usize>> {
        if self.depth == 0 {
            return err("pattern too complex");
        }
        self.depth -= 1;
        let r = self.match_body(s, p);
        self.depth += 1;
        r
    }

    fn match_body(&mut self, mut s: usize, mut p: usize) -> Step<Option<usize>> {
        loop {
            self.tick()?;
            if p >= self.pat.len() {
                return Ok(Some(s));
            }
            match self.p(p) {
                b'(' => {
                    return if self.p(p + 1) == b')' {
                        self.start_capture(s, p + 2, CAP_POSITION)
                    } else {
                        self.start_capture(s, p + 1, CAP_UNFINISHED)
                    };
                }
                b')' => return self.end_capture(s, p + 1),
                b'$' if p + 1 == self.pat.len() => {
                    return Ok(if s == self.src.len() { Some(s) } else { None });
                }
                b'%' if self.p(p + 1) == b'b' => match self.match_balance(s, p + 2)? {
                    Some(ns) => {
                        s = ns;
                        p += 4;
                        continue;
                    }
                    None => return Ok(None),
                },
                b'%' if self.p(p + 1) == b'f' => {
                    p += 2;
                    if self.p(p) != b'[' {
                        return err("missing '[' after '%f' in pattern");
                    }
                    let ep = self.class_end(p)?;
                    let previous = if s == 0 { 0 } else { self.s(s - 1) };
                    let current = self.s(s);
                    if !self.match_bracket_class(previous, p, ep - 1)
                        && self.match_bracket_class(current, p, ep - 1)
                    {
                        p = ep;
                        continue;
                    }
                    return Ok(None);
                }
                b'%' if self.p(p + 1).is_ascii_digit() => {
                    match self.match_capture(s, self.p(p + 1))? {
                        Some(ns) => {
                            s = ns;
                            p += 2;
                            continue;
                        }
                        None => return Ok(None),
                    }
                }
                _ => {
                    let ep = self.class_end(p)?;
                    let epc = self.p(ep);
                    if !self.single_match(s, p, ep) {
                        if epc == b'*' || epc == b'?' || epc == b'-' {
                            p = ep + 1;
                            continue;
                        }
                        return Ok(None);
                    }
                    match epc {
                        b'?' => {
                            if let Some(res) = self.do_match(s + 1, ep + 1)? {
                                return Ok(Some(res));
                            }
                            p = ep + 1;
                            continue;
                        }
                        b'+' => return self.max_expand(s + 1, p, ep),
                        b'*' => return self.max_expand(s, p, ep),
                        b'-' => return self.min_expand(s, p, ep),
                        _ => {
                            s += 1;
                            p = ep;
                            continue;
                        }
                    }
                }
            }
        }
    }

    /// Capture `i` of the match `s..e` as a Lua value (a string or a position).
    fn capture_value(&self, lua: &Lua, i: usize, s: usize, e: usize) -> mlua::Result<Value> {
        if i >= self.level {
            if i != 0 {
                return Err(mlua::Error::runtime(format!(
                    "invalid capture index %{}",
                    i + 1
                )));
            }
            return Ok(Value::String(lua.create_string(&self.src[s..e])?));
        }
        let cap = self.capture[i];
        match cap.len {
            CAP_UNFINISHED => Err(mlua::Error::runtime("unfinished capture")),
            CAP_POSITION => Ok(Value::Integer(cap.init as i64 + 1)),
            len => Ok(Value::String(
                lua.create_string(&self.src[cap.init..cap.init + len as usize])?,
            )),
        }
    }

    /// All captures (or the whole match when there are none and `whole` is given).
    fn captures(&self, lua: &Lua, whole: Option<(usize, usize)>) -> mlua::Result<Vec<Value>> {
        let n = if self.level == 0 && whole.is_some() {
            1
        } else {
            self.level
        };
        let (s, e) = whole.unwrap_or((0, 0));
        (0..n).map(|i| self.capture_value(lua, i, s, e)).collect()
    }
}

fn no_specials(p: &[u8]) -> bool {
    !p.iter().any(|c| b"^$*+?.([%-".contains(c))
}

/// Lua's `posrelatI`: a 1-based start position from a possibly negative index.
fn start_index(init: Option<i64>, len: usize) -> usize {
    let pos = init.unwrap_or(1);
    let len = len as i64;
    let p = if pos > 0 {
        pos
    } else if pos == 0 || pos < -len {
        1
    } else {
        len + pos + 1
    };
    (p - 1) as usize
}

fn to_lua_error(stop: Stop) -> mlua::Error {
    match stop {
        Stop::Pattern(m) | Stop::Interrupted(m) => mlua::Error::runtime(m),
    }
}

/// `string.find` (`find = true`) and `string.match` (`find = false`).
pub fn find_aux(
    lua: &Lua,
    s: &[u8],
    p: &[u8],
    init: Option<i64>,
    plain: bool,
    find: bool,
    interrupt: Interrupt<'_>,
) -> mlua::Result<MultiValue> {
    let init = start_index(init, s.len());
    if init > s.len() {
        return Ok(MultiValue::from_vec(vec![Value::Nil]));
    }
    if find && (plain || no_specials(p)) {
        return Ok(match memchr::memmem::find(&s[init..], p) {
            Some(at) => {
                let start = init + at;
                MultiValue::from_vec(vec![
                    Value::Integer(start as i64 + 1),
                    Value::Integer((start + p.len()) as i64),
                ])
            }
            None => MultiValue::from_vec(vec![Value::Nil]),
        });
    }
    let (anchor, p) = match p.first() {
        Some(b'^') => (true, &p[1..]),
        _ => (false, p),
    };
    let mut ms = MatchState::new(s, p, interrupt);
    let mut s1 = init;
    loop {
        ms.reprep();
        if let Some(e) = ms.do_match(s1, 0).map_err(to_lua_error)? {
            return Ok(MultiValue::from_vec(if find {
                let mut v = vec![Value::Integer(s1 as i64 + 1), Value::Integer(e as i64)];
                v.extend(ms.captures(lua, None)?);
                v
            } else {
                ms.captures(lua, Some((s1, e)))?
            }));
        }
        s1 += 1;
        if anchor || s1 > s.len() {
            break;
        }
    }
    Ok(MultiValue::from_vec(vec![Value::Nil]))
}

/// `string.gmatch`: an iterator function over the matches.
pub fn gmatch(
    lua: &Lua,
    s: mlua::LuaString,
    p: mlua::LuaString,
    init: Option<i64>,
    interrupt: std::sync::Arc<dyn Fn() -> Option<String> + Send + Sync>,
) -> mlua::Result<Function> {
    let len = s.as_bytes().len();
    let mut pos = start_index(init, len);
    if pos > len {
        pos = len + 1;
    }
    let mut last_match: Option<usize> = None;
    lua.create_function_mut(move |lua, ()| {
        let (src, pat) = (s.as_bytes(), p.as_bytes());
        let check = || interrupt();
        let mut ms = MatchState::new(&src, &pat, &check);
        while pos <= src.len() {
            ms.reprep();
            if let Some(e) = ms.do_match(pos, 0).map_err(to_lua_error)?
                && Some(e) != last_match
            {
                let start = pos;
                pos = e;
                last_match = Some(e);
                return Ok(MultiValue::from_vec(ms.captures(lua, Some((start, e)))?));
            }
            pos += 1;
        }
        Ok(MultiValue::from_vec(vec![Value::Nil]))
    })
}

/// The replacement argument of `string.gsub`.
pub enum Replacement {
    /// A string with `%0`–`%9` and `%%`.
    Text(Vec<u8>),
    /// A table indexed by the first capture.
    Table(Table),
    /// A function called with the captures.
    Function(Function),
}

/// `string.gsub`: the new string and the number of matches.
pub fn gsub(
    lua: &Lua,
    src: &[u8],
    p: &[u8],
    repl: &Replacement,
    max_n: Option<i64>,
    interrupt: Interrupt<'_>,
    held: &mut Held,
) -> mlua::Result<(mlua::LuaString, i64)> {
    let (anchor, p) = match p.first() {
        Some(b'^') => (true, &p[1..]),
        _ => (false, p),
    };
    let max_n = max_n.unwrap_or(src.len() as i64 + 1);
    let mut ms = MatchState::new(src, p, interrupt);
    grow(held, src.len())?;
    let mut out: Vec<u8> = Vec::with_capacity(src.len());
    let mut s = 0usize;
    let mut last_match: Option<usize> = None;
    let mut n = 0i64;
    while n < max_n {
        ms.reprep();
        let m = ms.do_match(s, 0).map_err(to_lua_error)?;
        match m {
            Some(e) if Some(e) != last_match => {
                n += 1;
                add_value(lua, &ms, &mut out, s, e, repl, held)?;
                s = e;
                last_match = Some(e);
            }
            _ if s < src.len() => {
                out.push(src[s]);
                grow(held, out.len())?;
                s += 1;
            }
            _ => break,
        }
        if anchor {
            break;
        }
    }
    out.extend_from_slice(&src[s.min(src.len())..]);
    Ok((lua.create_string(&out)?, n))
}

/// Holds `len` bytes of `gsub`'s result on the run's host memory (cheap below what is held).
fn grow(held: &mut Held, len: usize) -> mlua::Result<()> {
    held.cover(len, "the string gsub builds")
        .map_err(|e| mlua::Error::runtime(e.to_string()))
}

/// Adds one match's replacement. Only the table and function cases run Lua, which may call
/// `gsub` again (recursion bounded by Lua's C-call limit): they live in this small frame, and
/// the text cases in frames of their own, so each level of such a recursion costs little stack
/// (a debug build's frames hold every temporary of every branch).
fn add_value(
    lua: &Lua,
    ms: &MatchState<'_>,
    out: &mut Vec<u8>,
    s: usize,
    e: usize,
    repl: &Replacement,
    held: &mut Held,
) -> mlua::Result<()> {
    let value = match repl {
        Replacement::Text(news) => return add_text(lua, ms, out, s, e, news, held),
        Replacement::Table(t) => t.get::<Value>(ms.capture_value(lua, 0, s, e)?)?,
        Replacement::Function(f) => {
            f.call::<Value>(Variadic::from_iter(ms.captures(lua, Some((s, e)))?))?
        }
    };
    add_lua_value(ms, out, s, e, value, held)
}

/// A replacement string, with `%0`–`%9` and `%%`.
#[inline(never)]
fn add_text(
    lua: &Lua,
    ms: &MatchState<'_>,
    out: &mut Vec<u8>,
    s: usize,
    e: usize,
    news: &[u8],
    held: &mut Held,
) -> mlua::Result<()> {
    let mut i = 0;
    while i < news.len() {
        let c = news[i];
        i += 1;
        if c != b'%' {
            out.push(c);
            continue;
        }
        let d = news.get(i).copied().unwrap_or(0);
        i += 1;
        if d == b'%' {
            out.push(b'%');
        } else if d == b'0' {
            grow(held, out.len() + (e - s))?;
            out.extend_from_slice(&ms.src[s..e]);
        } else if d.is_ascii_digit() {
            match ms.capture_value(lua, (d - b'1') as usize, s, e)? {
                Value::String(st) => {
                    grow(held, out.len() + st.as_bytes().len())?;
                    out.extend_from_slice(&st.as_bytes())
                }
                Value::Integer(pos) => out.extend_from_slice(pos.to_string().as_bytes()),
                _ => {}
            }
        } else {
            return Err(mlua::Error::runtime(
                "invalid use of '%' in replacement string",
            ));
        }
    }
    grow(held, out.len())
}

/// What a table or function replacement gave: the match kept (nil, false), or a string or a
/// number in its place.
#[inline(never)]
fn add_lua_value(
    ms: &MatchState<'_>,
    out: &mut Vec<u8>,
    s: usize,
    e: usize,
    value: Value,
    held: &mut Held,
) -> mlua::Result<()> {
    grow(held, out.len() + (e - s))?;
    match value {
        Value::Nil | Value::Boolean(false) => out.extend_from_slice(&ms.src[s..e]),
        Value::String(st) => {
            grow(held, out.len() + st.as_bytes().len())?;
            out.extend_from_slice(&st.as_bytes())
        }
        Value::Integer(i) => out.extend_from_slice(i.to_string().as_bytes()),
        Value::Number(f) => out.extend_from_slice(lua_number_string(f).as_bytes()),
        other => {
            return Err(mlua::Error::runtime(format!(
                "invalid replacement value (a {})",
                other.type_name()
            )));
        }
    }
    Ok(())
}

/// How Lua 5.4 prints a float: `%.14g`, plus `.0` when that looks like an integer.
pub fn lua_number_string(f: f64) -> String {
    if f.is_nan() {
        return if f.is_sign_negative() {
            "-nan".into()
        } else {
            "nan".into()
        };
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0.0".into()
        } else {
            "0.0".into()
        };
    }
    const PRECISION: i32 = 14;
    let exp = format!("{:.*e}", (PRECISION - 1) as usize, f);
    let (mantissa, e) = exp.split_once('e').unwrap_or((&exp, "0"));
    let e: i32 = e.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    let text = if !(-4..PRECISION).contains(&e) {
        format!(
            "{}e{}{:02}",
            trim(mantissa),
            if e < 0 { '-' } else { '+' },
            e.abs()
        )
    } else {
        trim(&format!("{:.*}", (PRECISION - 1 - e).max(0) as usize, f))
    };
    if text.contains(['.', 'e', 'n', 'i']) {
        text
    } else {
        text + ".0"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hold on a budget no test reaches.
    fn room() -> Held {
        crate::gate::HostMemory::new(1 << 30).hold_nothing()
    }
    use mlua::{Lua, StdLib};

    fn never() -> Option<String> {
        None
    }

    /// Runs our `find`/`match`/`gsub`/`gmatch` and the C ones on the same inputs.
    fn compare(lua: &Lua, subject: &str, pattern: &str) {
        let c_find: Function = lua
            .load("return function(s, p) return {pcall(string.find, s, p)} end")
            .eval()
            .unwrap();
        let c_match: Function = lua
            .load("return function(s, p) return {pcall(string.match, s, p)} end")
            .eval()
            .unwrap();
        let c_gsub: Function = lua
            .load("return function(s, p) return {pcall(string.gsub, s, p, '<%0>')} end")
            .eval()
            .unwrap();
        let c_gmatch: Function = lua
            .load("return function(s, p) local ok, r = pcall(function() local t = {} for a, b in string.gmatch(s, p) do t[#t+1] = tostring(a) .. '|' .. tostring(b) end return table.concat(t, ',') end) return {ok, r} end")
            .eval()
            .unwrap();
        let show = |t: Table| -> String {
            let v: Vec<String> = t
                .sequence_values::<Value>()
                .map(|v| format!("{:?}", v.unwrap()))
                .collect();
            v.join(" ")
        };
        let c = |f: &Function| show(f.call::<Table>((subject, pattern)).unwrap());
        // A table built from results stops at the first nil; so do our strings.
        let trim = |s: String| s.split(" Nil").next().unwrap_or_default().to_string();
        let values = |mv: mlua::Result<MultiValue>| match mv {
            Ok(mv) => {
                let mut v = vec![format!("{:?}", Value::Boolean(true))];
                v.extend(mv.iter().map(|x| format!("{x:?}")));
                trim(v.join(" "))
            }
            Err(_) => "error".into(),
        };
        // Errors must agree too: C's pcall gives false, ours an Err.
        let same = |ours: String, theirs: String, what: &str| {
            if theirs.starts_with("Boolean(false)") {
                assert_eq!(ours, "error", "{what} {subject:?} {pattern:?}");
            } else {
                assert_eq!(ours, theirs, "{what} {subject:?} {pattern:?}");
            }
        };
        let find = find_aux(
            lua,
            subject.as_bytes(),
            pattern.as_bytes(),
            None,
            false,
            true,
            &never,
        );
        same(values(find), c(&c_find), "find");
        let matched = find_aux(
            lua,
            subject.as_bytes(),
            pattern.as_bytes(),
            None,
            false,
            false,
            &never,
        );
        same(values(matched), c(&c_match), "match");
        let g = gsub(
            lua,
            subject.as_bytes(),
            pattern.as_bytes(),
            &Replacement::Text(b"<%0>".to_vec()),
            None,
            &never,
            &mut room(),
        );
        let ours_g = match g {
            Ok((g, n)) => format!(
                "{:?} {:?} {:?}",
                Value::Boolean(true),
                Value::String(g),
                Value::Integer(n)
            ),
            Err(_) => "error".into(),
        };
        same(ours_g, c(&c_gsub), "gsub");
        let it = gmatch(
            lua,
            lua.create_string(subject).unwrap(),
            lua.create_string(pattern).unwrap(),
            None,
            std::sync::Arc::new(never),
        )
        .unwrap();
        let mut parts = Vec::new();
        let ours_gm = loop {
            let r: MultiValue = match it.call(()) {
                Ok(r) => r,
                Err(_) => break "error".to_string(),
            };
            let a = r.iter().next().cloned().unwrap_or(Value::Nil);
            if a.is_nil() {
                let joined = lua.create_string(parts.join(",")).unwrap();
                break format!("{:?} {:?}", Value::Boolean(true), Value::String(joined));
            }
            let b = r.iter().nth(1).cloned().unwrap_or(Value::Nil);
            let ts = |v: &Value| match v {
                Value::String(s) => s.to_str().unwrap().to_string(),
                Value::Integer(i) => i.to_string(),
                Value::Nil => "nil".into(),
                other => format!("{other:?}"),
            };
            parts.push(format!("{}|{}", ts(&a), ts(&b)));
        };
        same(ours_gm, c(&c_gmatch), "gmatch");
    }

    #[test]
    fn agrees_with_lua_on_known_cases() {
        let lua = Lua::new_with(StdLib::STRING | StdLib::TABLE, mlua::LuaOptions::new()).unwrap();
        let cases = [
            ("hello world", "o w"),
            ("hello world", "(h)(e)"),
            ("hello world", "()ll()"),
            ("hello world", "^h"),
            ("hello world", "d$"),
            ("hello world", "%a+"),
            ("  x = 10  ", "(%w+)%s*=%s*(%w+)"),
            ("THE (quick) fox", "%((%a+)%)"),
            ("f(a(b)c)d", "%b()"),
            ("THE (quick) fox", "%f[%a]%a+"),
            ("hello", "(l)%1"),
            ("key=val; k2=v2", "(%w+)=(%w+)"),
            ("abc", ""),
            ("abc", ".-"),
            ("abc", "a*"),
            ("aaa", "a-b"),
            ("a.b", "%."),
            ("[x]", "[%[%]]"),
            ("a-b", "[a-]"),
            ("abc123", "[^%d]+"),
            ("abc", "[b-"),
            ("abc", "%"),
            ("abc", "(()"),
            ("abc", "%1"),
            ("x", "%f"),
            ("", "^$"),
            ("\0a\0", "%z"),
            ("caf\u{e9}", "[\u{80}-\u{ff}]+"),
        ];
        for (s, p) in cases {
            compare(&lua, s, p);
        }
    }

    #[test]
    fn agrees_with_lua_on_random_patterns() {
        let lua = Lua::new_with(StdLib::STRING | StdLib::TABLE, mlua::LuaOptions::new()).unwrap();
        let atoms = [
            "a", "b", ".", "%a", "%d", "[ab]", "[^a]", "%s", "(", ")", "()", "%b()", "%f[%w]", "x",
            "%1", "^", "$", "[a-c]",
        ];
        let quants = ["", "", "*", "+", "-", "?"];
        let subjects = ["aab", "ab12 ba", "(a(b)a)", "xxa", "", "b a b", "a1b2c3"];
        let mut seed = 0x2545F4914F6CDD1Du64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        for _ in 0..3000 {
            let len = 1 + next(4);
            let mut p = String::new();
            for _ in 0..len {
                p.push_str(atoms[next(atoms.len())]);
                p.push_str(quants[next(quants.len())]);
            }
            let s = subjects[next(subjects.len())];
            compare(&lua, s, &p);
        }
    }

    #[test]
    fn a_backtracking_bomb_is_interrupted() {
        let lua = Lua::new();
        let subject = "a".repeat(20000);
        let calls = std::cell::Cell::new(0u32);
        let stop = || {
            calls.set(calls.get() + 1);
            if calls.get() > 50 {
                Some("time limit reached".to_string())
            } else {
                None
            }
        };
        let e = find_aux(
            &lua,
            subject.as_bytes(),
            b".-.-.-b",
            None,
            false,
            true,
            &stop,
        )
        .unwrap_err();
        assert!(e.to_string().contains("time limit reached"), "{e}");
    }

    #[test]
    fn floats_print_like_lua() {
        assert_eq!(lua_number_string(1.5), "1.5");
        assert_eq!(lua_number_string(3.0), "3.0");
        assert_eq!(lua_number_string(0.1), "0.1");
        assert_eq!(lua_number_string(1e100), "1e+100");
        assert_eq!(lua_number_string(1.0 / 3.0), "0.33333333333333");
        assert_eq!(
            lua_number_string(123456789012345678.0),
            "1.2345678901235e+17"
        );
        assert_eq!(lua_number_string(0.00001), "1e-05");
    }

    #[test]
    fn plain_find_is_linear() {
        let lua = Lua::new();
        let hay = "a".repeat(1_000_000);
        let needle = format!("{}b", "a".repeat(500_000));
        let r = find_aux(
            &lua,
            hay.as_bytes(),
            needle.as_bytes(),
            None,
            true,
            true,
            &never,
        )
        .unwrap();
        assert!(r.iter().next().unwrap().is_nil());
    }

    #[test]
    fn gsub_with_table_and_function() {
        let lua = Lua::new();
        let t = lua.create_table().unwrap();
        t.set("name", "lmcp").unwrap();
        let (s, n) = gsub(
            &lua,
            b"hi $name $x",
            b"%$(%w+)",
            &Replacement::Table(t),
            None,
            &never,
            &mut room(),
        )
        .unwrap();
        assert_eq!(s.to_str().unwrap(), "hi lmcp $x");
        assert_eq!(n, 2);
        let f: Function = lua
            .load("return function(w) return w:upper() end")
            .eval()
            .unwrap();
        let (s, n) = gsub(
            &lua,
            b"a b c",
            b"%a",
            &Replacement::Function(f),
            Some(2),
            &never,
            &mut room(),
        )
        .unwrap();
        assert_eq!(
            (s.to_str().unwrap().to_string(), n),
            ("A B c".to_string(), 2)
        );
    }
}
