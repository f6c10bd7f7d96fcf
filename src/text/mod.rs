//! Text a person reads: strings chosen by scripts, agents or file names are shown with their
//! control characters escaped, so no prompt, preview or error can be made to lie.
//!
//! An ESC sequence inside a path could erase or rewrite the lines above an `Allow? [y/N]`
//! prompt; a newline could fake a second line; a bidirectional override could reverse what is
//! read. [`escape_controls`] shows each as an escape (`\e`, `\n`, `\x00`, `\u{202e}`) instead,
//! and [`terminal`] is the one writer to stdout and stderr, which applies it to everything.

use std::borrow::Cow;

pub mod arg_words;
pub mod terminal;

/// Whether `c` must not reach a terminal raw: C0 and C1 controls, DEL, and the Unicode format
/// characters that reorder or hide text (bidi overrides and isolates, zero-width marks).
fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            // soft hyphen, Arabic letter mark, Mongolian vowel separator
            '\u{ad}' | '\u{61c}' | '\u{180e}'
            // zero-width marks, line and paragraph separators, bidi embeddings and overrides
            | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}'
            // word joiner, invisible operators, bidi isolates, deprecated format characters
            | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206f}'
            | '\u{feff}'
            // tag characters: invisible, yet they spell text
            | '\u{e0000}'..='\u{e007f}'
        )
}

/// Whether `s` is plain printable ASCII (with newlines and tabs when `keep_lines`), so nothing
/// in it needs escaping. Eight bytes at a time: every line lmcp writes passes here, some of
/// them megabytes long (a script's `log`), and a byte-by-byte or char-by-char loop in a debug
/// build made those lines slower than the limits they are meant to reach.
fn is_plain(s: &str, keep_lines: bool) -> bool {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    let plain_byte =
        |b: u8| (0x20..0x7f).contains(&b) || (keep_lines && (b == b'\n' || b == b'\t'));
    let mut chunks = s.as_bytes().chunks_exact(8);
    for chunk in chunks.by_ref() {
        let x = u64::from_ne_bytes(chunk.try_into().expect("eight bytes"));
        // a byte below 0x20, or at or above 0x7f (0x7f + 1 and every byte from 0x80 set the
        // high bit): both exact as yes/no tests (the usual "has less than n", n <= 128)
        let low = x.wrapping_sub(ONES * 0x20) & !x & HIGHS;
        let high = (x.wrapping_add(ONES) | x) & HIGHS;
        if (low | high) != 0 && !chunk.iter().all(|&b| plain_byte(b)) {
            return false;
        }
    }
    chunks.remainder().iter().all(|&b| plain_byte(b))
}

/// `s` with every control and text-reordering character shown as an escape; borrowed when there
/// is none (the common case costs one scan).
pub fn escape_controls(s: &str) -> Cow<'_, str> {
    if is_plain(s, false) || !s.chars().any(is_unsafe) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\x1b' => out.push_str("\\e"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x100 && is_unsafe(c) => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if is_unsafe(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Like [`escape_controls`] but keeps newlines and tabs: for multi-line text a front door lays
/// out itself (pretty JSON, reports), where only what could rewrite the screen is escaped.
pub fn escape_controls_keep_lines(s: &str) -> Cow<'_, str> {
    if is_plain(s, true) || !s.chars().any(|c| is_unsafe(c) && c != '\n' && c != '\t') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for line in s.split_inclusive('\n') {
        let (body, nl) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        for part in body.split('\t').enumerate() {
            if part.0 > 0 {
                out.push('\t');
            }
            out.push_str(&escape_controls(part.1));
        }
        out.push_str(nl);
    }
    Cow::Owned(out)
}

/// What a secret is shown as.
pub const MASK: &str = "********";

/// Shortest value masked as a secret: shorter ones would mask ordinary text everywhere.
pub const MIN_SECRET_CHARS: usize = 4;

/// `s` cut to at most `max` characters, saying how long it was (a name or value echoed in an
/// error, which may be megabytes long).
pub fn clip(s: &str, max: usize) -> Cow<'_, str> {
    if s.len() <= max {
        return Cow::Borrowed(s);
    }
    let head: String = s.chars().take(max).collect();
    if head.len() == s.len() {
        return Cow::Borrowed(s);
    }
    Cow::Owned(format!("{head}… ({} bytes)", s.len()))
}

/// The forms a secret takes when text is built from it without meaning to reveal it: as it is,
/// JSON- or Lua-`%q`-escaped (`json.encode`, error messages quoting it), lower and upper case (a
/// tool that normalises what it was given). Deliberate encodings are beyond exact matching.
pub fn secret_forms(secret: &str) -> Vec<String> {
    let mut forms = vec![secret.to_string()];
    let json = serde_json::to_string(secret).unwrap_or_default();
    let escaped = json
        .strip_prefix('"')
        .and_then(|j| j.strip_suffix('"'))
        .unwrap_or(&json);
    for form in [
        escaped.to_string(),
        secret.to_lowercase(),
        secret.to_uppercase(),
    ] {
        if !forms.contains(&form) {
            forms.push(form);
        }
    }
    forms
}

/// `s` with every occurrence of each secret replaced by [`MASK`].
pub fn redact<'a>(s: &'a str, secrets: &[String]) -> Cow<'a, str> {
    let mut out = Cow::Borrowed(s);
    for secret in secrets
        .iter()
        .filter(|x| x.chars().count() >= MIN_SECRET_CHARS)
    {
        if out.contains(secret.as_str()) {
            out = Cow::Owned(out.replace(secret.as_str(), MASK));
        }
    }
    out
}

/// A JSON value with every string (and object key) redacted by [`redact`].
pub fn redact_json(v: &serde_json::Value, secrets: &[String]) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::String(s) => Value::String(redact(s, secrets).into_owned()),
        Value::Array(a) => Value::Array(a.iter().map(|x| redact_json(x, secrets)).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| (redact(k, secrets).into_owned(), redact_json(x, secrets)))
                .collect(),
        ),
        Value::Number(n) if secrets.iter().any(|x| *x == n.to_string()) => {
            Value::String(MASK.into())
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_shown_not_obeyed() {
        assert!(matches!(escape_controls("a.txt"), Cow::Borrowed(_)));
        assert_eq!(
            escape_controls("a\x1b[2K\x1b[1A\u{7}\0b\nc"),
            "a\\e[2K\\e[1A\\x07\\x00b\\nc"
        );
        assert_eq!(escape_controls("x\u{202e}y\u{9b}"), "x\\u{202e}y\\x9b");
        assert_eq!(escape_controls("é ✓"), "é ✓");
        assert_eq!(
            escape_controls("a\u{61c}b\u{2060}c\u{ad}d\u{e0041}e"),
            "a\\u{61c}b\\u{2060}c\\xadd\\u{e0041}e"
        );
    }

    #[test]
    fn plain_text_is_found_eight_bytes_at_a_time() {
        for (text, plain, plain_with_lines) in [
            ("", true, true),
            ("hello, world: 0123456789 ~", true, true),
            ("a line\nand\ta tab, longer than eight", false, true),
            ("sixteen bytes ok\x1b", false, false),
            ("ends with DEL \x7f", false, false),
            ("0123456\x1f89abcdef", false, false),
            ("caf\u{e9} is not ASCII", false, false),
            ("\u{9b}", false, false),
        ] {
            assert_eq!(is_plain(text, false), plain, "{text:?}");
            assert_eq!(is_plain(text, true), plain_with_lines, "{text:?}");
        }
        for b in 0u8..=0x7f {
            let text = format!("abcdefg{}hijklmnop", b as char);
            let want = (0x20..0x7f).contains(&b);
            assert_eq!(is_plain(&text, false), want, "byte {b:#x}");
        }
    }

    #[test]
    fn layout_keeps_its_lines() {
        assert_eq!(
            escape_controls_keep_lines("a\n\tb\x1b[2J\n"),
            "a\n\tb\\e[2J\n"
        );
    }

    #[test]
    fn a_secret_has_its_escaped_and_cased_forms() {
        let forms = secret_forms("ab\"cD\\ef");
        assert!(forms.contains(&"ab\\\"cD\\\\ef".to_string()), "{forms:?}");
        assert!(forms.contains(&"ab\"cd\\ef".to_string()));
        assert!(forms.contains(&"AB\"CD\\EF".to_string()));
    }

    #[test]
    fn secrets_are_masked_wherever_they_appear() {
        let secrets = vec!["s3cr3t-token".to_string(), "ab".to_string()];
        assert_eq!(redact("x s3cr3t-token y", &secrets), "x ******** y");
        assert_eq!(
            redact("ab stays", &secrets),
            "ab stays",
            "too short to mask"
        );
        let v = serde_json::json!({"k": ["pre s3cr3t-token", {"s3cr3t-token": 1}]});
        assert_eq!(
            redact_json(&v, &secrets).to_string(),
            r#"{"k":["pre ********",{"********":1}]}"#
        );
    }
}
