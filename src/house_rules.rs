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
