//! Shell completion of the names installed here: tools after `lmcp call` and `lmcp tool show`,
//! recipes after `lmcp recipe run`, skills after `lmcp skill show|call|...`.
//!
//! clap_complete's dynamic completion does the work: the script `lmcp completions SHELL` prints
//! registers lmcp itself as the completer, so each Tab runs `COMPLETE=SHELL lmcp -- WORDS...`,
//! which [`respond`] answers from the same clap definition as everything else (subcommands,
//! flags, values), and for the name arguments from the home lmcp would use (`LMCP_HOME`), so a
//! recipe saved a moment ago completes at once. A home that cannot be opened completes no names
//! rather than printing anything a shell would take as a candidate.

use std::sync::Arc;

use clap_complete::CompletionCandidate;

use crate::host::Host;

/// The variable that turns a run of lmcp into a completion request.
const VAR: &str = "COMPLETE";

/// Answers a completion request and ends the process, when this run is one (`COMPLETE` set);
/// returns at once otherwise. Called first thing in `main`, before any thread starts (clap
/// clears the variable, so nothing lmcp runs next completes too).
pub fn respond() {
    if std::env::var_os(VAR).is_none() {
        return;
    }
    clap_complete::CompleteEnv::with_factory(super::docs::definition)
        .var(VAR)
        .complete();
}

/// The script that registers lmcp's completion with `shell` (what `lmcp completions SHELL`
/// prints): it calls this binary, by the name it was started with, on each Tab.
pub fn registration(shell: clap_complete::Shell) -> Vec<u8> {
    let shells = clap_complete::env::Shells::builtins();
    let name = shell.to_string();
    let mut out = Vec::new();
    let Some(completer) = shells.completer(&name) else {
        return out;
    };
    // the name lmcp was started by, made absolute when it is a path (as clap does), so a
    // script sourced from a build folder calls that build
    let started = std::env::args_os().next().unwrap_or_else(|| "lmcp".into());
    let mut path = std::path::PathBuf::from(started);
    if path.components().count() > 1
        && let Ok(dir) = std::env::current_dir()
    {
        path = dir.join(path);
    }
    // writing into memory cannot fail
    let _ = completer.write_registration(VAR, "lmcp", "lmcp", &path.to_string_lossy(), &mut out);
    out
}

/// The host the names come from, quietly: its warnings are for commands, not for Tab.
fn host() -> Option<Arc<Host>> {
    let paths = crate::store::Paths::discover().ok()?;
    Host::open(paths).ok()
}

fn candidates(mut names: Vec<String>) -> Vec<CompletionCandidate> {
    names.sort();
    names.dedup();
    names.into_iter().map(CompletionCandidate::new).collect()
}

/// Every tool's name: built-in, custom, from skills and upstream servers.
pub fn tools() -> Vec<CompletionCandidate> {
    let Some(host) = host() else {
        return Vec::new();
    };
    candidates(
        host.registry()
            .all()
            .iter()
            .map(|t| t.spec().name.clone())
            .collect(),
    )
}

/// Every saved recipe's name.
pub fn recipes() -> Vec<CompletionCandidate> {
    let Some(host) = host() else {
        return Vec::new();
    };
    let (list, _unreadable) = crate::library::recipes::list(&host);
    candidates(
        list.iter()
            .filter_map(|r| r["name"].as_str().map(str::to_string))
            .collect(),
    )
}

/// Every installed skill's name.
pub fn skills() -> Vec<CompletionCandidate> {
    let Some(host) = host() else {
        return Vec::new();
    };
    candidates(
        crate::library::skills::installed(&host)
            .into_iter()
            .map(|(name, _)| name)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the dynamic engine offers for `line` (the last word is the one being completed).
    fn complete(line: &[&str]) -> Vec<String> {
        let mut cmd = super::super::docs::definition();
        let args: Vec<std::ffi::OsString> = line.iter().map(Into::into).collect();
        let index = args.len() - 1;
        clap_complete::engine::complete(&mut cmd, args, index, None)
            .unwrap()
            .iter()
            .map(|c| c.get_value().to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn subcommands_and_flags_still_complete() {
        assert!(complete(&["lmcp", "rec"]).contains(&"recipe".to_string()));
        assert!(complete(&["lmcp", "run", "--ye"]).contains(&"--yes".to_string()));
    }

    #[test]
    fn every_shell_gets_a_registration_calling_lmcp() {
        for shell in [
            clap_complete::Shell::Bash,
            clap_complete::Shell::Zsh,
            clap_complete::Shell::Fish,
            clap_complete::Shell::PowerShell,
            clap_complete::Shell::Elvish,
        ] {
            let script = String::from_utf8(registration(shell)).unwrap();
            assert!(script.contains("COMPLETE"), "{shell}: {script}");
        }
    }
}
