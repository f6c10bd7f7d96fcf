//! The one way lmcp writes to stdout and stderr. Everything a person's terminal shows passes
//! here, so the escaping of control characters is decided once, not at each door: a value, a
//! name, a description, a log line, an error or a result chosen by a script, an agent, a file's
//! author or an upstream server is shown, never obeyed.
//!
//! - [`show`] / [`show_line`]: text, with every control and text-reordering character escaped
//!   except the newlines and tabs that lay it out. lmcp's own messages go through it too: they
//!   hold no controls, so for them it costs one scan.
//! - [`json`]: JSON for scripts (`--json`) and pretty results, with the same characters written
//!   as `\uXXXX` escapes, so the text is still the same JSON value and safe on a terminal.
//! - [`clear_line`]: the one terminal control lmcp itself draws (a progress line redrawn).
//! - [`program_output`]: what the person's own `lmcp run` script or REPL chunk `print`s, written
//!   as it is (as `lua5.4` would): that program is the person's, and its output theirs.
//! - [`Tty`]: the controlling terminal (`/dev/tty`), where questions go when stdin holds
//!   something else (`lmcp run -` reads the script from it), as sudo and git ask; escaped as
//!   [`show`] escapes.
//!
//! `house_rules::only_the_terminal_writer_writes` fails on any other way to stdout or stderr in
//! `src/` (the MCP stdio transport is rmcp's, outside `src/`).

use std::io::{IsTerminal, Write};

/// Which of the process's output streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// Results: what `lmcp call`, `lmcp types` and the listings print.
    Out,
    /// Messages: errors, warnings, questions, progress, a script's `log`.
    Err,
}

/// Whether `stream` is a terminal (progress lines and questions are drawn only on one).
pub fn is_terminal(stream: Stream) -> bool {
    match stream {
        Stream::Out => std::io::stdout().is_terminal(),
        Stream::Err => std::io::stderr().is_terminal(),
    }
}

/// Writes `text` with its controls escaped (newlines and tabs kept).
///
/// A closed stdout (`lmcp types | head`) ends the process quietly with exit 0, the way ripgrep
/// does; any other failure is ignored, since there is nowhere left to report it (a report on
/// `2>/dev/full` must not turn into a crash, exit 101).
pub fn show(stream: Stream, text: &str) {
    write_raw(
        stream,
        super::escape_controls_keep_lines(text).as_bytes(),
        true,
    );
}

/// [`show`] and a newline.
pub fn show_line(stream: Stream, text: &str) {
    let shown = super::escape_controls_keep_lines(text);
    let mut bytes = Vec::with_capacity(shown.len() + 1);
    bytes.extend_from_slice(shown.as_bytes());
    bytes.push(b'\n');
    write_raw(stream, &bytes, true);
}

/// [`show_line`] to stdout that never ends the process: an error report whose exit code must
/// stand even when stdout is closed.
pub fn show_line_keeping_exit(text: &str) {
    let mut line = super::escape_controls_keep_lines(text).into_owned();
    line.push('\n');
    write_raw(Stream::Out, line.as_bytes(), false);
}

/// Rubs out the line the cursor is on and returns to its start (progress redrawn in place).
pub fn clear_line(stream: Stream) {
    write_raw(stream, b"\r\x1b[2K", true);
}

/// What the person's own program prints, as it is (see the module's doc for why). Returns
/// whether it was written.
pub fn program_output(text: &str) -> bool {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .is_ok()
}

/// The process's controlling terminal, opened for reading and writing: questions are shown
/// and answered there when stdin is taken (a script piped into `lmcp run -`). None when the
/// process has no terminal at all (a service, a pipeline under `setsid`): then nobody can be
/// asked.
#[derive(Debug)]
pub struct Tty {
    file: std::fs::File,
}

impl Tty {
    /// The controlling terminal, or `None` when there is none.
    pub fn open() -> Option<Tty> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .ok()?;
        file.is_terminal().then_some(Tty { file })
    }

    /// Writes `text` on the terminal with its controls escaped, as [`show`] does; a terminal
    /// that cannot be written is ignored (the answer read next is then no).
    pub fn show(&self, text: &str) {
        let mut file = &self.file;
        let _ = file
            .write_all(super::escape_controls_keep_lines(text).as_bytes())
            .and_then(|()| file.flush());
    }

    /// The file descriptor answers are read from (polled, one byte at a time, so a withdrawn
    /// question leaves no blocked read behind).
    #[cfg(unix)]
    pub fn fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.file.as_raw_fd()
    }
}

/// `value` as JSON text (indented when `pretty`) that is safe on a terminal: besides what JSON
/// itself escapes (C0), every character [`super::escape_controls`] would escape is written as a
/// `\uXXXX` escape. JSON's structural characters are ASCII, so those characters can only be
/// inside strings, where the escape means the same character: the value read back is unchanged.
pub fn json(value: &serde_json::Value, pretty: bool) -> String {
    let text = if pretty {
        serde_json::to_string_pretty(value)
    } else {
        serde_json::to_string(value)
    }
    .unwrap_or_default();
    if !text.chars().any(needs_json_escape) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if needs_json_escape(c) {
            // outside the Basic Multilingual Plane (tag characters), as a UTF-16 surrogate pair
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The characters JSON text leaves raw that a terminal must not see: DEL, C1, bidi and
/// zero-width marks (C0 is escaped by JSON itself, and its raw newlines are layout).
fn needs_json_escape(c: char) -> bool {
    c >= '\u{7f}' && super::is_unsafe(c)
}

fn write_raw(stream: Stream, bytes: &[u8], closed_stdout_ends: bool) {
    let written = match stream {
        Stream::Out => {
            let mut out = std::io::stdout().lock();
            out.write_all(bytes).and_then(|()| out.flush())
        }
        Stream::Err => {
            let mut err = std::io::stderr().lock();
            err.write_all(bytes).and_then(|()| err.flush())
        }
    };
    if let Err(e) = written
        && closed_stdout_ends
        && stream == Stream::Out
        && e.kind() == std::io::ErrorKind::BrokenPipe
    {
        std::process::exit(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_for_a_terminal_is_the_same_value() {
        let v = serde_json::json!({
            "name": "invoice\u{202e}txt.exe\u{9b}2J\u{7f}\u{200b}\u{2028}\u{e0041}\u{61c}",
            "ok": "日本語 ✓ 🎉\ttab",
            "nested": ["\u{1b}]52;c;aGk=\u{7}"]
        });
        for pretty in [false, true] {
            let text = json(&v, pretty);
            assert!(
                !text
                    .chars()
                    .any(|c| super::super::is_unsafe(c) && c != '\n'),
                "{text}"
            );
            assert!(
                text.contains("\\u202e") && text.contains("\\u009b"),
                "{text}"
            );
            assert!(text.contains("日本語 ✓ 🎉"), "{text}");
            let back: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(back, v);
        }
    }
}
