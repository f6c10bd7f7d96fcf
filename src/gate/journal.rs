//! Run journals: every confirmed run of a program (`lmcp run`) gets an id and an append-only
//! journal under `DATA/runs/`, and a run that failed or was killed can be resumed without
//! repeating what it already did.
//!
//! The gate journals each state-changing leaf call a run makes (the calls a plan lists): before
//! the handler runs, a `step` line with the tool and a hash of its arguments, written and synced
//! — so a step the process died in is known to be *unknown*, never silently re-run — and after
//! it, the outcome with its result. A resumed run replays the journal: its state-changing calls
//! are matched in order, tool and argument hash; a done step returns its recorded result without
//! running; a failed step runs again; the first call that does not match stops the resume (the
//! program or its inputs changed). A step whose outcome is unknown runs again only when the tool
//! says repeating it is harmless (`idempotentHint`) or the person said `--retry-unknown`.
//!
//! Journals keep no argument values (a hash only), and results pass the run's secret masking.
//! Private mode keeps no journal.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::host::Host;
use crate::store;

/// Results larger than this are kept as a hash only; a resume cannot hand such a step's result
/// back, and says so.
const MAX_KEPT_RESULT: usize = 1 << 20;

/// Where run journals live.
pub fn runs_dir(host: &Host) -> PathBuf {
    host.paths().data_dir.join("runs")
}

/// A hash of a JSON value that does not depend on the order of object keys.
pub fn value_hash(v: &Value) -> String {
    fn canonical(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push(':');
                    canonical(&m[k], out);
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    canonical(x, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut text = String::new();
    canonical(v, &mut text);
    format!("{:x}", Sha256::digest(text.as_bytes()))
}

/// A step as an earlier run recorded it.
#[derive(Debug, Clone)]
struct Recorded {
    tool: String,
    args: String,
    outcome: Option<Done>,
}

#[derive(Debug, Clone)]
enum Done {
    Result(Value),
    /// Done, but its result was too large to keep.
    TooLarge,
    Failed,
}

/// What the gate does with a state-changing call of a journaled run.
pub(crate) enum Step {
    /// Done in the run being resumed: this is its result; the handler does not run.
    Replay(Value),
    /// Run it, as step `n`.
    Run(u64),
    /// The resume stops here, for this reason.
    Refuse(String),
}

/// One run's journal.
#[derive(Debug)]
pub struct Journal {
    id: String,
    path: PathBuf,
    file: Mutex<File>,
    state: Mutex<Cursor>,
    retry_unknown: bool,
}

#[derive(Debug, Default)]
struct Cursor {
    /// The next state-changing call's number (from 1).
    next: u64,
    /// The steps of the run being resumed, by number.
    replay: Vec<Recorded>,
}

fn new_id() -> String {
    let now = chrono::Utc::now().format("%Y%m%d-%H%M%S");
    let tail = uuid::Uuid::new_v4().simple().to_string();
    format!("{now}-{}", &tail[..6])
}

fn line(file: &mut File, path: &Path, v: &Value, sync: bool) -> Result<()> {
    let mut text = v.to_string();
    text.push('\n');
    file.write_all(text.as_bytes())
        .and_then(|()| if sync { file.sync_data() } else { Ok(()) })
        .map_err(|e| Error::io(path, e))
}

impl Journal {
    /// Starts the journal of a new run of `program` (`fingerprint`: a hash of its source).
    pub fn start(host: &Host, program: &str, fingerprint: &str) -> Result<Journal> {
        let dir = runs_dir(host);
        store::ensure_dir(&dir)?;
        let id = new_id();
        let path = dir.join(format!("{id}.jsonl"));
        let mut file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        let header = json!({"run": id, "program": program, "fingerprint": fingerprint, "started": store::timestamp()});
        line(&mut file, &path, &header, true)?;
        store::sync_dir(&dir);
        Ok(Journal {
            id,
            path,
            file: Mutex::new(file),
            state: Mutex::new(Cursor {
                next: 1,
                replay: Vec::new(),
            }),
            retry_unknown: false,
        })
    }

    /// Opens run `id` to resume it: refused when it ran another program, or `fingerprint`
    /// (the program's source now) differs from the one it ran.
    pub fn resume(
        host: &Host,
        id: &str,
        program: &str,
        fingerprint: &str,
        retry_unknown: bool,
    ) -> Result<Journal> {
        let log = RunLog::read(host, id)?;
        if log.program != program {
            return Err(Error::Refused(format!(
                "run {id} ran `{}`, not `{program}`; `lmcp runs` lists the runs",
                log.program
            )));
        }
        if log.fingerprint != fingerprint {
            return Err(Error::Refused(format!(
                "`{program}` changed since run {id}, so its steps cannot be matched; run it \
                 anew (without --resume)"
            )));
        }
        let mut file = OpenOptions::new()
            .append(true)
            .open(&log.path)
            .map_err(|e| Error::io(&log.path, e))?;
        line(
            &mut file,
            &log.path,
            &json!({"resumed": store::timestamp()}),
            true,
        )?;
        Ok(Journal {
            id: id.to_string(),
            path: log.path,
            file: Mutex::new(file),
            state: Mutex::new(Cursor {
                next: 1,
                replay: log.steps,
            }),
            retry_unknown,
        })
    }

    /// The run's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Decides the next state-changing call: replayed, run, or the end of the resume.
    pub(crate) fn step(&self, tool: &str, args: &Value, idempotent: bool) -> Step {
        let mut cursor = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let n = cursor.next;
        cursor.next += 1;
        let Some(recorded) = cursor.replay.get(n as usize - 1) else {
            return Step::Run(n);
        };
        let hash = value_hash(args);
        if recorded.tool != tool || recorded.args != hash {
            return Step::Refuse(format!(
                "the resume of run {} stopped at step {n}: the run called `{}` there, and now \
                 `{tool}`{} — the program or its inputs changed; run it anew (without --resume)",
                self.id,
                recorded.tool,
                if recorded.tool == tool {
                    " with other arguments"
                } else {
                    ""
                }
            ));
        }
        match &recorded.outcome {
            Some(Done::Result(v)) => Step::Replay(v.clone()),
            Some(Done::TooLarge) => Step::Refuse(format!(
                "the resume of run {} stopped at step {n} (`{tool}`): it was done, but its \
                 result was too large to keep, so it cannot be handed back",
                self.id
            )),
            Some(Done::Failed) => Step::Run(n),
            None if idempotent || self.retry_unknown => Step::Run(n),
            None => Step::Refuse(format!(
                "step {n} of run {} (`{tool}`) may or may not have happened: the run ended \
                 during it. Check, then resume with --retry-unknown to run it again",
                self.id
            )),
        }
    }

    /// Records that step `n` is about to run (synced first: a step that was running when the
    /// process died is then known to be unknown).
    pub(crate) fn started(&self, n: u64, tool: &str, args: &Value) -> Result<()> {
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        let entry =
            json!({"step": n, "tool": tool, "args": value_hash(args), "at": store::timestamp()});
        line(&mut file, &self.path, &entry, true)
    }

    /// Records step `n`'s outcome: its result (masked) or that it failed.
    pub(crate) fn finished(
        &self,
        n: u64,
        result: std::result::Result<&Value, &Error>,
        secrets: &[String],
    ) {
        let entry = match result {
            Ok(v) => {
                let v = crate::text::redact_json(v, secrets);
                let text = v.to_string();
                if text.len() > MAX_KEPT_RESULT {
                    json!({"step": n, "result_hash": format!("{:x}", Sha256::digest(text.as_bytes()))})
                } else {
                    json!({"step": n, "result": v})
                }
            }
            Err(e) => json!({"step": n, "failed": crate::text::redact(&e.to_string(), secrets)}),
        };
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        // not synced: an outcome lost in a crash leaves the step unknown, the careful side
        let _ = line(&mut file, &self.path, &entry, false);
    }

    /// Records how the run ended.
    pub fn end(&self, outcome: &str) {
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        let _ = line(
            &mut file,
            &self.path,
            &json!({"end": outcome, "at": store::timestamp()}),
            true,
        );
    }
}

/// A run journal as read back: for `lmcp runs` and for resuming.
#[derive(Debug)]
pub struct RunLog {
    /// The run's id.
    pub id: String,
    /// The program it ran.
    pub program: String,
    fingerprint: String,
    /// When it started.
    pub started: String,
    /// done, failed, or `unfinished` (killed, or still running).
    pub state: String,
    /// How many times it was resumed.
    pub resumed: usize,
    steps: Vec<Recorded>,
    path: PathBuf,
}

impl RunLog {
    /// Reads run `id`'s journal; a torn last line (a kill mid-write) is ignored.
    pub fn read(host: &Host, id: &str) -> Result<RunLog> {
        let ok = !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        let path = runs_dir(host).join(format!("{id}.jsonl"));
        if !ok || !path.is_file() {
            return Err(Error::Refused(format!(
                "there is no run `{id}`; `lmcp runs` lists the runs"
            )));
        }
        RunLog::read_path(&path)
    }

    fn read_path(path: &Path) -> Result<RunLog> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let mut lines = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok());
        let header = lines.next().ok_or_else(|| Error::Corrupt {
            path: path.to_path_buf(),
            message: "the journal has no header".into(),
        })?;
        let field = |k: &str| header[k].as_str().unwrap_or_default().to_string();
        let mut log = RunLog {
            id: field("run"),
            program: field("program"),
            fingerprint: field("fingerprint"),
            started: field("started"),
            state: "unfinished".into(),
            resumed: 0,
            steps: Vec::new(),
            path: path.to_path_buf(),
        };
        for l in lines {
            if let Some(end) = l["end"].as_str() {
                log.state = end.to_string();
                continue;
            }
            if l.get("resumed").is_some() {
                log.resumed += 1;
                log.state = "unfinished".into();
                continue;
            }
            let Some(n) = l["step"].as_u64().filter(|n| *n >= 1) else {
                continue;
            };
            let i = n as usize - 1;
            if let Some(tool) = l["tool"].as_str() {
                let step = Recorded {
                    tool: tool.to_string(),
                    args: l["args"].as_str().unwrap_or_default().to_string(),
                    outcome: None,
                };
                // a resume writes the steps it runs again under the same numbers
                if i < log.steps.len() {
                    log.steps[i] = step;
                } else if i == log.steps.len() {
                    log.steps.push(step);
                }
            } else if let Some(step) = log.steps.get_mut(i) {
                step.outcome = if let Some(v) = l.get("result") {
                    Some(Done::Result(v.clone()))
                } else if l.get("result_hash").is_some() {
                    Some(Done::TooLarge)
                } else {
                    l.get("failed").map(|_| Done::Failed)
                };
            }
        }
        Ok(log)
    }

    /// Every run, newest first.
    pub fn all(host: &Host) -> Vec<RunLog> {
        let Ok(entries) = std::fs::read_dir(runs_dir(host)) else {
            return Vec::new();
        };
        let mut runs: Vec<RunLog> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .filter_map(|p| RunLog::read_path(&p).ok())
            .collect();
        runs.sort_by(|a, b| b.started.cmp(&a.started).then(b.id.cmp(&a.id)));
        runs
    }

    /// The run for `lmcp runs`: id, program, started, state, its steps and the last one.
    pub fn to_json(&self, with_steps: bool) -> Value {
        let step = |(i, s): (usize, &Recorded)| {
            let outcome = match &s.outcome {
                Some(Done::Result(_) | Done::TooLarge) => "done",
                Some(Done::Failed) => "failed",
                None => "unknown",
            };
            json!({"step": i + 1, "tool": s.tool, "outcome": outcome})
        };
        let mut v = json!({
            "run": self.id,
            "program": self.program,
            "started": self.started,
            "state": self.state,
            "resumed": self.resumed,
            "steps": self.steps.len(),
            "last_step": self.steps.iter().enumerate().next_back().map(step),
        });
        if with_steps {
            v["step_list"] = Value::Array(self.steps.iter().enumerate().map(step).collect());
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argument_hashes_ignore_key_order() {
        let a: Value = serde_json::from_str(r#"{"b": 1, "a": [1, {"y": 2, "x": 3}]}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a": [1, {"x": 3, "y": 2}], "b": 1}"#).unwrap();
        assert_eq!(value_hash(&a), value_hash(&b));
        assert_ne!(value_hash(&a), value_hash(&json!({"b": 2})));
    }
}
