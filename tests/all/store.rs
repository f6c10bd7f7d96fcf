//! Two `lmcp` processes writing the store at once leave valid files and lose no change.

use std::process::{Command, Stdio};

use crate::common;

#[test]
fn two_processes_writing_at_once_lose_nothing() {
    let home = tempfile::tempdir().unwrap();
    let script = |tag: &str| {
        // Each process adds 15 grants and makes 15 calls, one after another.
        let mut s = String::new();
        for i in 0..15 {
            s.push_str(&format!(
                "\"$LMCP\" grants allow user_{tag}_{i} >/dev/null || exit 1\n\
                 \"$LMCP\" call calculate '{{\"expression\": \"{i}+1\"}}' >/dev/null || exit 1\n"
            ));
        }
        s
    };
    let spawn = |tag: &str| {
        Command::new("sh")
            .arg("-c")
            .arg(script(tag))
            .env("LMCP", common::bin())
            .env("LMCP_HOME", home.path())
            .stdout(Stdio::null())
            .spawn()
            .unwrap()
    };
    let (mut a, mut b) = (spawn("a"), spawn("b"));
    assert!(a.wait().unwrap().success());
    assert!(b.wait().unwrap().success());

    let config: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(home.path().join("config/config.json")).unwrap(),
    )
    .expect("config.json is valid JSON");
    let grants = config["grants"].as_object().unwrap();
    for tag in ["a", "b"] {
        for i in 0..15 {
            assert_eq!(
                grants[&format!("user_{tag}_{i}")],
                "allow",
                "lost user_{tag}_{i}"
            );
        }
    }
    let history = std::fs::read_to_string(home.path().join("data/history.jsonl")).unwrap();
    let lines: Vec<&str> = history.lines().collect();
    assert_eq!(lines.len(), 30);
    for line in lines {
        serde_json::from_str::<serde_json::Value>(line).expect("every history line is whole");
    }
    let leftovers: Vec<String> = std::fs::read_dir(home.path().join("config"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
