//! Text generated from the code, so it cannot drift from it: every command's help, the manual
//! page, shell completions, the README's tool table and the MCP tool lists.
//!
//! Each has one source — the clap definition in [`super::cli`] or the registry — as helix
//! generates its command docs from one list. The committed copies (`docs/cli.md`, `docs/lmcp.1`,
//! `docs/mcp/*.json`, the table in `README.md`) are checked by `tests/all/docs.rs`, and refreshed
//! with `BLESS=1 cargo test --test all docs::`.

use std::sync::Arc;

use clap::CommandFactory;
use serde_json::Value;

use crate::host::Host;
use crate::registry::{Kind, Profile};

/// The width help is rendered at in the generated reference (and when stdout is no terminal).
pub const HELP_WIDTH: usize = 100;

/// The environment variables lmcp reads: (name, what it does).
pub const ENVIRONMENT: &[(&str, &str)] = &[
    (
        "LMCP_HOME",
        "Keep everything (settings, history, saved programs, workspace) under this absolute folder \
         instead of the platform's folders.",
    ),
    (
        "LMCP_OUTPUT_SCHEMAS",
        "With 1, lmcp serve lists each tool's output schema in tools/list.",
    ),
];

/// The exit codes, stable across versions: (code, meaning).
pub const EXIT_STATUS: &[(&str, &str)] = &[
    ("0", "Done, or previewed."),
    ("1", "The tool failed (including a time or memory limit)."),
    ("2", "Bad usage, an unknown tool or invalid arguments."),
    ("3", "Denied, unavailable, or not confirmed."),
];

/// The files lmcp keeps: (where, what).
pub const FILES: &[(&str, &str)] = &[
    (
        "config.json",
        "Grants, modes, roots and limits, in the config folder (lmcp paths shows it).",
    ),
    (
        "history.jsonl, history.1.jsonl",
        "The most recent calls, shapes only, in the data folder: the current turn of the ring \
         and the one before.",
    ),
    (
        "recipes/, tools/, skills/",
        "Saved recipes, custom tools and installed skills, in the data folder (a skill's config \
         values under skills/ in the config folder).",
    ),
    (
        "workspace/, workspaces/",
        "The file tools' default folder, and the image workspaces of build_image_pdf, in the \
         data folder.",
    ),
];

/// The notes under the main command's long help: environment, exit status, files.
fn notes() -> String {
    let block = |title: &str, rows: &[(&str, &str)]| {
        let mut out = format!("{title}:\n");
        for (name, what) in rows {
            out.push_str(&format!("  {name}\n          {what}\n"));
        }
        out
    };
    [
        block("Environment", ENVIRONMENT),
        block("Exit status", EXIT_STATUS),
        block("Files", FILES),
    ]
    .join("\n")
}

/// The command-line definition the binary parses with: the derive's, plus the notes.
pub fn definition() -> clap::Command {
    super::cli::Cli::command().after_long_help(notes())
}

/// The whole command-line definition, built, so every subcommand knows its full name
/// (`lmcp tool show`).
pub fn command() -> clap::Command {
    let mut cmd = definition();
    cmd.build();
    cmd
}

/// The completion script for `shell`: it asks lmcp itself on each Tab (see
/// [`super::complete`]), so installed tool, recipe and skill names complete too.
pub fn completions(shell: clap_complete::Shell) -> Vec<u8> {
    super::complete::registration(shell)
}

/// The manual pages, in roff, as (file name, text): `lmcp.1` first, then one page per
/// subcommand (`lmcp-tool-show.1`), which the pages above them list by name.
pub fn man_pages() -> Vec<(String, Vec<u8>)> {
    fn add(cmd: &clap::Command, pages: &mut Vec<(String, Vec<u8>)>) {
        let man = clap_mangen::Man::new(cmd.clone());
        let mut text = Vec::new();
        // Rendering into memory cannot fail.
        let _ = man.render(&mut text);
        pages.push((man.get_filename(), text));
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            add(sub, pages);
        }
    }
    let mut cmd = super::cli::Cli::command().disable_help_subcommand(true);
    cmd.build();
    let mut pages = Vec::new();
    add(&cmd, &mut pages);
    pages[0].1 = root_page(cmd);
    pages
}

/// The main page: clap_mangen's sections, then ENVIRONMENT, EXIT STATUS and FILES.
fn root_page(cmd: clap::Command) -> Vec<u8> {
    use clap_mangen::roff::{Roff, bold, roman};
    let man = clap_mangen::Man::new(cmd);
    let mut out = Vec::new();
    // Rendering into memory cannot fail.
    let _ = man.render_title(&mut out);
    let _ = man.render_name_section(&mut out);
    let _ = man.render_synopsis_section(&mut out);
    let _ = man.render_description_section(&mut out);
    let _ = man.render_options_section(&mut out);
    let _ = man.render_subcommands_section(&mut out);
    let mut roff = Roff::default();
    for (title, rows) in [
        ("ENVIRONMENT", ENVIRONMENT),
        ("EXIT STATUS", EXIT_STATUS),
        ("FILES", FILES),
    ] {
        roff.control("SH", [title]);
        for (name, what) in rows {
            roff.control("TP", []);
            roff.text([bold(*name)]);
            roff.text([roman(*what)]);
        }
    }
    let _ = roff.to_writer(&mut out);
    let _ = man.render_version_section(&mut out);
    out
}

/// `lmcp man`: the main page to stdout, or every page written into `dir`.
pub fn man(dir: Option<&std::path::Path>, json: bool) -> crate::error::Result<u8> {
    let pages = man_pages();
    let Some(dir) = dir else {
        super::door::out(&String::from_utf8_lossy(&pages[0].1));
        return Ok(0);
    };
    std::fs::create_dir_all(dir).map_err(|e| crate::error::Error::io(dir, e))?;
    let mut written = Vec::new();
    for (name, text) in &pages {
        let path = dir.join(name);
        crate::store::atomic_write(&path, text)?;
        written.push(path.display().to_string());
    }
    let value = serde_json::json!({ "written": written });
    super::door::emit(json, &value, || {
        format!(
            "wrote {} manual pages into {}",
            written.len(),
            dir.display()
        )
    });
    Ok(0)
}

/// Every command's `--help`, as Markdown (`docs/cli.md`): exactly what `lmcp ... --help` prints
/// when stdout is no terminal.
pub fn help_reference() -> String {
    let mut out = String::from(
        "# lmcp command reference\n\n\
         Every command's `--help`, generated from the command-line definition \
         (`BLESS=1 cargo test --test all docs::` refreshes it; do not edit by hand).\n",
    );
    add_help(&command(), &mut Vec::new(), &mut out);
    out
}

fn add_help(cmd: &clap::Command, path: &mut Vec<String>, out: &mut String) {
    let mut argv = vec!["lmcp".to_string()];
    argv.extend(path.iter().cloned());
    argv.push("--help".into());
    // clap's own --help path, so the text is what the binary prints
    let help = match definition()
        .term_width(HELP_WIDTH)
        .try_get_matches_from(&argv)
    {
        Err(e) => e.render().to_string(),
        Ok(_) => String::new(),
    };
    out.push_str(&format!(
        "\n## `{}`\n\n```text\n{}\n```\n",
        argv[..argv.len() - 1].join(" "),
        help.trim_end()
    ));
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        path.push(sub.get_name().to_string());
        add_help(sub, path, out);
        path.pop();
    }
}

/// The README's table of built-in tools: name, effect, profile, and the first sentence of the
/// description.
pub fn tool_table(host: &Host) -> String {
    let mut rows = vec![
        "| tool | effect | profile | what it does |".to_string(),
        "|---|---|---|---|".to_string(),
    ];
    for (tool, _) in host.tools(Profile::Full) {
        let s = tool.spec();
        if s.kind == Kind::Workflow {
            continue;
        }
        let mut effect = s.effect.to_string();
        if s.annotations.destructive_hint {
            effect.push_str(", destructive");
        }
        if s.annotations.open_world_hint {
            effect.push_str(", open world");
        }
        rows.push(format!(
            "| `{}` | {effect} | {} | {} |",
            s.name,
            s.profile,
            first_sentence(&s.description).replace('|', "\\|")
        ));
    }
    rows.join("\n") + "\n"
}

/// The description up to its first sentence end (or line end).
fn first_sentence(description: &str) -> &str {
    let line = description.lines().next().unwrap_or("").trim();
    match line.find(". ") {
        Some(i) => &line[..=i],
        None => line,
    }
}

/// What `tools/list` answers a client under `profile` (by default, without output schemas).
pub fn tools_list(host: &Arc<Host>, profile: Profile) -> Value {
    Value::Array(
        super::mcp::McpServer::new(Arc::clone(host), profile)
            .with_output_schemas(false)
            .tools(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_sentences() {
        assert_eq!(first_sentence("Read a file. Up to 1 MiB."), "Read a file.");
        assert_eq!(first_sentence("One line\nmore"), "One line");
        assert_eq!(first_sentence("v1.2 is fine"), "v1.2 is fine");
    }

    #[test]
    fn every_command_has_a_help_section() {
        let text = help_reference();
        for name in [
            "`lmcp`",
            "`lmcp tool show`",
            "`lmcp recipe run`",
            "`lmcp completions`",
        ] {
            assert!(text.contains(&format!("## {name}")), "{name}");
        }
        assert!(!text.contains("## `lmcp help`"));
    }
}
