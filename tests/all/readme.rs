//! The README, walked as a newcomer would: every shell block in "Getting started", "A short
//! tour" and "Images to PDF" (with their subsections) runs, line by line, in a fresh
//! `LMCP_HOME`, from a folder holding a copy of `examples/`, the README and a few photos, and each `lmcp`
//! line must exit as the text says: 0, unless its comment says `exits N`. A block meant to be
//! read, not run (a server that runs until stopped, a run id of the reader's own), is marked
//! `<!-- not run -->` on the line before it. `"ID"` in a line is the workspace id the last
//! `workspace_create` printed. Lines are run by `sh`, as the reader's shell would, with the
//! built binary first on `PATH` (#34).

use std::path::{Path, PathBuf};

/// The sections walked (each with its subsections).
const SECTIONS: [&str; 3] = ["Getting started", "A short tour", "Images to PDF"];

/// The marker of a block that is not run.
const NOT_RUN: &str = "<!-- not run -->";

/// One shell line to run: its README line number, the line, and the exit code it should have.
#[derive(Debug)]
struct Step {
    at: usize,
    line: String,
    exits: i32,
}

/// The `lmcp` lines of the shell blocks in [`SECTIONS`], in order, and the blocks marked not
/// run (their first line numbers), so a test can tell a marker that matched nothing.
fn steps(readme: &str) -> (Vec<Step>, usize) {
    let mut headings: Vec<(usize, String)> = Vec::new();
    let mut steps = Vec::new();
    let mut skipped = 0;
    let mut in_block: Option<bool> = None; // Some(run?) inside a fence
    let mut previous = "";
    for (i, line) in readme.lines().enumerate() {
        let at = i + 1;
        if let Some(run) = in_block {
            if line.starts_with("```") {
                in_block = None;
            } else if run && runs_lmcp(line) {
                steps.push(Step {
                    at,
                    line: line.to_string(),
                    exits: expected_exit(line),
                });
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix('#') {
            let level = 1 + rest.chars().take_while(|c| *c == '#').count();
            let title = rest.trim_start_matches('#').trim().to_string();
            headings.retain(|(l, _)| *l < level);
            headings.push((level, title));
        } else if line.starts_with("```") {
            let walked = headings.iter().any(|(_, t)| SECTIONS.contains(&t.as_str()));
            let shell = matches!(line.trim_start_matches('`').trim(), "sh" | "bash" | "shell");
            let marked = previous.trim() == NOT_RUN;
            if walked && shell && marked {
                skipped += 1;
            }
            in_block = Some(walked && shell && !marked);
        }
        if !line.trim().is_empty() {
            previous = line;
        }
    }
    (steps, skipped)
}

/// Whether a shell line runs lmcp: it starts with `lmcp`, or pipes into it.
fn runs_lmcp(line: &str) -> bool {
    let line = line.trim();
    line == "lmcp" || line.starts_with("lmcp ") || line.contains("| lmcp ")
}

/// The exit code a line's comment promises (`# ... exits 3`), else 0.
fn expected_exit(line: &str) -> i32 {
    let Some((_, comment)) = line.split_once(" #") else {
        return 0;
    };
    comment
        .split_once("exits ")
        .and_then(|(_, n)| n.chars().next())
        .and_then(|c| c.to_digit(10))
        .map_or(0, |d| d as i32)
}

/// Copies `from` into `to`, folders and all.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The workspace id in `output`, after `"workspace_id"`.
fn workspace_id(output: &str) -> Option<String> {
    let (_, rest) = output.split_once("\"workspace_id\"")?;
    let start = rest.find('"')? + 1;
    let len = rest[start..].find('"')?;
    Some(rest[start..start + len].to_string())
}

#[test]
fn the_readme_walks() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let (steps, skipped) = steps(&readme);
    assert!(
        steps.len() >= 20 && skipped >= 2,
        "the walk found {} lines ({skipped} blocks not run): are the sections still named {SECTIONS:?}?",
        steps.len()
    );
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let here = work.path();
    copy_tree(&root.join("examples"), &here.join("examples"));
    // the README is read from the checkout's root, where it is itself
    std::fs::copy(root.join("README.md"), here.join("README.md")).unwrap();
    let photo = root.join("tests/fixtures/baseline-444.jpg");
    std::fs::create_dir_all(here.join("photos")).unwrap();
    std::fs::copy(&photo, here.join("photo.jpg")).unwrap();
    for name in ["one.jpg", "two.jpg"] {
        std::fs::copy(&photo, here.join("photos").join(name)).unwrap();
    }
    let bin: PathBuf = crate::common::bin();
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut id: Option<String> = None;
    let mut failures = Vec::new();
    for step in &steps {
        let line = match &id {
            Some(id) => step
                .line
                .replace("\\\"ID\\\"", &format!("\\\"{id}\\\""))
                .replace("\"ID\"", &format!("\"{id}\"")),
            None => step.line.clone(),
        };
        let out = std::process::Command::new("sh")
            .args(["-c", &line])
            .current_dir(here)
            .env("PATH", &path)
            .env("LMCP_HOME", home.path())
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("XDG_DATA_HOME")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        if let Some(found) = workspace_id(&stdout) {
            id = Some(found);
        }
        let code = out.status.code().unwrap_or(-1);
        if code != step.exits {
            failures.push(format!(
                "README.md:{}: `{}` exited {code}, the text says {}\n--- stdout\n{stdout}--- stderr\n{}",
                step.at,
                step.line.trim(),
                step.exits,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn the_walk_reads_blocks_markers_and_exit_codes() {
    let text = "# T\n## Getting started\n```sh\nlmcp a   # fine\ncargo x\nlmcp b   # exits 3 here\n```\n<!-- not run -->\n```sh\nlmcp serve\n```\n```json\nlmcp no\n```\n## Other\n```sh\nlmcp c\n```\n## A short tour\n### Images to PDF\n```sh\necho x | lmcp d -\n```\n";
    let (steps, skipped) = steps(text);
    let got: Vec<(&str, i32)> = steps.iter().map(|s| (s.line.as_str(), s.exits)).collect();
    assert_eq!(
        got,
        [
            ("lmcp a   # fine", 0),
            ("lmcp b   # exits 3 here", 3),
            ("echo x | lmcp d -", 0)
        ]
    );
    assert_eq!(skipped, 1);
}
