//! Tests that keep the shape of the house: each rule here is one a door-by-door review kept
//! missing, so a test reads the source and fails when code goes around it.
//!
//! - **Layers stand on the ones below.** Every `crate::` path in a module, in `use` lines and
//!   inline alike, names a module of its own layer or a lower one. The one mutual pair allowed is
//!   the registry and the gate: the registry names the gate's `Pass` token (whose constructor
//!   the gate owns, so the compiler keeps every call going through the gate) and the call
//!   context a handler receives. Where a lower layer must call back up, it does so through a
//!   trait defined low and implemented above ([`crate::gate::Caller`]).
//! - **Only `program/` builds a `Program`.** Every stored program becomes one through
//!   [`crate::program::compile`].
//! - **Only the terminal writer writes.** Every byte for stdout or stderr goes through
//!   [`crate::text::terminal`], which escapes control characters in what lmcp did not write
//!   itself; no other file names a way to either stream.
//! - **Every host-memory charge point is listed.** The files that charge a run's host memory
//!   budget are exactly those its table in `src/gate/host_memory.rs` names.
//! - **One description of an argument's schema problem.** A validation error becomes words
//!   (without the offending value, with the did-you-mean for an unknown property name) only in
//!   `src/gate/hint.rs`; no other file masks a `jsonschema` error itself, so no door or check
//!   tells one without the hint (#38).
//! - **A sentence does not carry its indentation.** A string literal continued on the next line
//!   without a `\` keeps the next line's leading spaces, and a message read "describe
//!   `              `it" (#34). A text laid out line by line opens with `"\` and a newline
//!   (the REPL's help) and may indent as it likes.

use std::path::{Path, PathBuf};

/// The layers, lowest first; a module may name its own layer and those before it.
const LAYERS: &[&[&str]] = &[
    &["text"],
    &["error"],
    &["store"],
    &["config"],
    &["net"],
    &["registry", "gate"],
    &["script"],
    &["program"],
    &["host"],
    &["tools"],
    &["library"],
    &["upstream"],
    &["open"],
    &["front"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("src/ is readable").flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a file of `src/` belongs to (`None` for the crate root files).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel
        .components()
        .next()?
        .as_os_str()
        .to_string_lossy()
        .into_owned();
    let name = first.trim_end_matches(".rs").to_string();
    (!matches!(name.as_str(), "lib" | "main" | "house_rules")).then_some(name)
}

/// Every top-level module a file's code names through `crate::` (comments left out).
fn named_modules(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                // `use crate::{a::X, b}`: each item's first segment
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    let seg: String = item
                        .trim()
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    if !seg.is_empty() {
                        out.push(seg);
                    }
                }
            } else {
                let seg: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !seg.is_empty() {
                    out.push(seg);
                }
            }
        }
    }
    out
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn layers_stand_on_the_ones_below() {
    let src = src_dir();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut upward = Vec::new();
    for file in &files {
        let Some(module) = module_of(&src, file) else {
            continue;
        };
        let own = layer_of(&module)
            .unwrap_or_else(|| panic!("{module} is in no layer: add it to LAYERS"));
        let text = std::fs::read_to_string(file).expect("readable");
        for named in named_modules(&text) {
            if named == module {
                continue;
            }
            // macros and the crate's re-exports at its root
            let Some(theirs) = layer_of(&named) else {
                continue;
            };
            if theirs > own {
                upward.push(format!(
                    "{} ({module}) names crate::{named}, a layer above it",
                    file.strip_prefix(&src).unwrap_or(file).display()
                ));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports that run back up:\n{}",
        upward.join("\n")
    );
}

#[test]
fn the_layer_reader_sees_inline_and_grouped_paths() {
    let names = named_modules(
        "use crate::{gate::Pass, store};\nlet x = crate::host::Host::of(c); // crate::front\n",
    );
    assert_eq!(names, ["gate", "store", "host"]);
}

/// Whether a line of code (its comment left out) turns a `jsonschema` error into words.
fn tells_a_schema_error(line: &str) -> bool {
    let code = line.split("//").next().unwrap_or("");
    code.contains(".masked()") || code.contains(".masked_with(")
}

#[test]
fn only_the_gate_hint_tells_a_schema_problem() {
    let src = src_dir();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut around = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap_or(file);
        if rel == Path::new("gate/hint.rs") || rel == Path::new("house_rules.rs") {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("readable");
        for (i, line) in text.lines().enumerate() {
            if tells_a_schema_error(line) {
                around.push(format!("{}:{}", rel.display(), i + 1));
            }
        }
    }
    assert!(
        around.is_empty(),
        "schema errors told outside src/gate/hint.rs (use crate::gate::schema_problem):\n{}",
        around.join("\n")
    );
    assert!(tells_a_schema_error("let m = e.masked().to_string();"));
    assert!(!tells_a_schema_error("// e.masked() in a comment"));
}

#[test]
fn only_program_builds_a_program() {
    let src = src_dir();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut builders = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap_or(file);
        if rel.starts_with("program") || rel == Path::new("house_rules.rs") {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("readable");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if code.contains("Program {") || code.contains("LuaBody {") {
                builders.push(format!("{}:{}: {}", rel.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        builders.is_empty(),
        "a Program is built outside program/ (use program::compile):\n{}",
        builders.join("\n")
    );
}

/// The ways code reaches stdout or stderr without the terminal writer, as they appear in code.
const OUTPUT_WAYS: &[&str] = &[
    "println!",
    "eprintln!",
    "print!",
    "eprint!",
    "dbg!",
    "stdout()",
    "stderr()",
    "io::stdout",
    "io::stderr",
    "Stdout",
    "Stderr",
    "libc::write",
    "from_raw_fd",
    "/dev/tty",
    "/dev/stdout",
    "/dev/stderr",
    // a library's own printer (clap's `Error::print`, `Error::exit`)
    ".print()",
    ".exit()",
];

/// The files allowed to name them: the writer itself, and this file, which lists them.
const OUTPUT_WRITERS: &[&str] = &["text/terminal.rs", "house_rules.rs"];

/// Each way to stdout or stderr a line of code names (comments left out). A way counts only
/// where no identifier character comes before it, so `eprint!` is not also `print!`.
fn output_ways(line: &str) -> Vec<&'static str> {
    let code = line.split("//").next().unwrap_or("");
    let mut found = Vec::new();
    for way in OUTPUT_WAYS {
        let mut from = 0;
        while let Some(i) = code[from..].find(way) {
            let at = from + i;
            let before = code[..at].chars().next_back();
            if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                found.push(*way);
                break;
            }
            from = at + way.len();
        }
    }
    found
}

#[test]
fn only_the_terminal_writer_writes() {
    let src = src_dir();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut raw = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&src).expect("under src/");
        let rel = rel.to_string_lossy().replace('\\', "/");
        if OUTPUT_WRITERS.contains(&rel.as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("readable");
        for (n, line) in text.lines().enumerate() {
            for way in output_ways(line) {
                raw.push(format!("src/{rel}:{}: {way}", n + 1));
            }
        }
    }
    assert!(
        raw.is_empty(),
        "stdout and stderr are written only through text::terminal (show, json, clear_line, \
         program_output), which escapes what lmcp did not write itself; these go around it:\n{}",
        raw.join("\n")
    );
}

#[test]
fn the_output_scan_sees_each_way_once() {
    assert_eq!(output_ways(r#"    println!("{x}");"#), ["println!"]);
    assert_eq!(output_ways("eprint!(\"a\")"), ["eprint!"]);
    assert_eq!(
        output_ways("let mut o = std::io::stdout().lock();"),
        ["stdout()", "io::stdout"]
    );
    assert_eq!(
        output_ways("let e = io::stderr();"),
        ["stderr()", "io::stderr"]
    );
    assert_eq!(output_ways("w: &mut Stdout,"), ["Stdout"]);
    assert!(output_ways("outln!(\"x\"); // println! in a comment").is_empty());
    assert!(output_ways("let stdout_lines = 3;").is_empty());
}

/// Whether a line of code charges a run's host memory.
fn charges_host_memory(line: &str) -> bool {
    let code = line.split("//").next().unwrap_or("");
    [
        "hold_nothing()",
        ".hold(",
        "charge(held",
        ".cover(",
        "to_json_held(",
    ]
    .iter()
    .any(|way| code.contains(way))
}

#[test]
fn every_host_memory_charge_point_is_listed() {
    let src = src_dir();
    let doc = std::fs::read_to_string(src.join("gate/host_memory.rs")).expect("readable");
    let listed: std::collections::BTreeSet<String> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("//! | `src/"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_string)
        .collect();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut charging = std::collections::BTreeSet::new();
    for file in &files {
        let rel = file
            .strip_prefix(&src)
            .expect("under src/")
            .to_string_lossy()
            .replace('\\', "/");
        if rel == "gate/host_memory.rs" || rel == "house_rules.rs" {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("readable");
        // a file's own tests may charge a budget of their own
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        if code.lines().any(charges_host_memory) {
            charging.insert(rel);
        }
    }
    assert!(listed.len() >= 5, "the table was read: {listed:?}");
    assert_eq!(
        charging, listed,
        "the charge points in src/ and the table in src/gate/host_memory.rs differ: list each \
         file that charges a run's host memory there, with what it holds and why"
    );
}

/// The 1-based lines of `text` (Rust source) where a string literal goes on to a next line that
/// starts with six spaces or more without a `\` before the line break (the spaces are in the
/// string), or holds ten spaces between two words (such a line joined back). Raw strings, and strings that open with `"\` and a newline, are laid out as they
/// show and are not read.
fn indented_continuations(text: &str) -> Vec<usize> {
    let b = text.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    let line_at = |at: usize| b[..at].iter().filter(|c| **c == b'\n').count() + 1;
    let word_before =
        |at: usize| at > 0 && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_');
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i = text[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
            }
            b'\'' => {
                // a char literal ('a', '\n', '\u{1F600}', '"'), or a lifetime
                let close = if b.get(i + 1) == Some(&b'\\') {
                    text[i + 2..].find('\'').map(|e| i + 2 + e)
                } else {
                    text[i + 1..].chars().next().and_then(|c| {
                        let after = i + 1 + c.len_utf8();
                        (b.get(after) == Some(&b'\'')).then_some(after)
                    })
                };
                i = close.map_or(i + 1, |c| c + 1);
            }
            b'r' if !word_before(i) || (i > 0 && b[i - 1] == b'b' && !word_before(i - 1)) => {
                let mut j = i + 1;
                while b.get(j) == Some(&b'#') {
                    j += 1;
                }
                if b.get(j) == Some(&b'"') {
                    let close = format!("\"{}", "#".repeat(j - i - 1));
                    i = text[j + 1..]
                        .find(&close)
                        .map_or(b.len(), |e| j + 1 + e + close.len());
                } else {
                    i += 1;
                }
            }
            b'"' => {
                let block = text[i + 1..].starts_with("\\\n");
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    if b[j] == b'\\' {
                        j += 2;
                        continue;
                    }
                    let spaces = b[j + 1..].iter().take_while(|c| **c == b' ').count();
                    // a line break then 6 spaces, or a line joined back with them: 10 spaces
                    // between two words of a sentence (a table's columns end at a `{}`)
                    let carried = match b[j] {
                        b'\n' => spaces >= 6,
                        c => {
                            c.is_ascii_lowercase()
                                && spaces >= 10
                                && b.get(j + 1 + spaces).is_some_and(u8::is_ascii_lowercase)
                        }
                    };
                    if carried && !block && !found.contains(&line_at(j)) {
                        found.push(line_at(j));
                    }
                    j += 1;
                }
                i = j + 1;
            }
            _ => i += 1,
        }
    }
    found
}

#[test]
fn no_string_carries_the_indentation_of_its_next_line() {
    let src = src_dir();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut carried = Vec::new();
    for file in files.iter().filter(|f| !f.ends_with("house_rules.rs")) {
        let text = std::fs::read_to_string(file).expect("readable");
        for line in indented_continuations(&text) {
            carried.push(format!(
                "{}:{line}",
                file.strip_prefix(&src).unwrap_or(file).display()
            ));
        }
    }
    assert!(
        carried.is_empty(),
        "strings that go on to an indented line without `\\` (the spaces are in the text):\n{}",
        carried.join("\n")
    );
}

#[test]
fn the_continuation_scan_sees_strings_only() {
    let bad = "let a = \"one and\n            two\";\nlet b = 1;";
    assert_eq!(indented_continuations(bad), [1]);
    let joined = "let b = 1;\nlet a = \"describe              it\";";
    assert_eq!(indented_continuations(joined), [2]);
    let fine = [
        "let a = \"one and \\\n            two\";",
        "let a = r#\"one\n            two\"#;",
        "let a = br\"one\n            two\";",
        "const H: &str = \"\\\nUse:\n  /help\n                 this text\";",
        "// \"a comment\n            x",
        "let c = '\"'; let d = \"x\";\n            let e = 1;",
        "fn f<'a>(x: &'a str) -> char { '\\'' }\nlet s = \"\n  short\";",
    ];
    for src in fine {
        assert_eq!(indented_continuations(src), Vec::<usize>::new(), "{src}");
    }
}
