//! Saving over what is on disk: a file that cannot be used (corrupt, a folder, an unknown
//! format, a program that belongs in another file) is never lost, is set aside only when the
//! new program compiled and is written, and can be cleared by the name of its file.

use serde_json::json;

use crate::common::{TestHost, call_yes, json_out, lmcp, lmcp_ok};

fn names(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// A `replace` over a corrupt custom tool whose new definition does not compile leaves the old
/// file where it was, sets nothing aside and claims no save; one that compiles sets it aside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_replace_keeps_the_corrupt_file() {
    let t = TestHost::new();
    let tools = t.home().join("data/tools");
    std::fs::create_dir_all(&tools).unwrap();
    std::fs::write(tools.join("user_q.json"), "{ broken").unwrap();
    let bad = json!({"name": "user_q", "description": "d", "replace": true,
        "steps": [{"id": "a", "tool": "nosuch", "arguments": {}}]});
    let e = call_yes(&t.host, "custom_tool_create", bad)
        .await
        .unwrap_err();
    assert!(e.contains("no tool `nosuch`"), "{e}");
    assert_eq!(names(&tools), vec!["user_q.json"]);
    assert_eq!(
        std::fs::read_to_string(tools.join("user_q.json")).unwrap(),
        "{ broken"
    );
    // without replace, the error says that replace sets it aside
    let good = json!({"name": "user_q", "description": "d", "lua": "return 1"});
    let e = call_yes(&t.host, "custom_tool_create", good.clone())
        .await
        .unwrap_err();
    assert!(e.contains("user_q.json") && e.contains("replace"), "{e}");
    let mut with = good;
    with["replace"] = json!(true);
    call_yes(&t.host, "custom_tool_create", with).await.unwrap();
    let now = names(&tools);
    assert!(
        now.iter().any(|n| n.starts_with("user_q.json.corrupt-")),
        "{now:?}"
    );
}

/// A save refused before its file is touched leaves no lock file behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_save_leaves_no_lock_file() {
    let t = TestHost::new();
    let steps: Vec<_> = (0..101)
        .map(|i| json!({"id": format!("s{i}"), "tool": "calculate", "arguments": {"expression": "1"}}))
        .collect();
    let def = json!({"name": "user_c101", "description": "d", "steps": steps});
    let e = call_yes(&t.host, "custom_tool_create", def)
        .await
        .unwrap_err();
    assert!(e.contains("more than the 100"), "{e}");
    let tools = t.home().join("data/tools");
    assert!(!tools.join(".user_c101.json.lock").exists());
}

/// A recipe file whose stored name is not its file's is reported at listing ("the file name
/// must match"), and delete and replace by the file's name clear it.
#[test]
fn a_misfiled_recipe_is_reported_and_cleared_by_its_file_name() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    lmcp(h, &["recipe", "list"]);
    let recipes = h.join("data/recipes");
    std::fs::create_dir_all(&recipes).unwrap();
    let misfiled = json!({"format": 1, "manifest": {"name": "Other",
        "steps": [{"tool": "calculate", "args": {"expression": "1"}}]},
        "created": "2026-01-01T00:00:00Z", "updated": "2026-01-01T00:00:00Z"});
    std::fs::write(recipes.join("zzz.json"), misfiled.to_string()).unwrap();
    let v = json_out(&lmcp(h, &["recipe", "list", "--json"]));
    assert_eq!(v["recipes"], json!([]), "{v}");
    let why = v["unreadable"][0].as_str().unwrap();
    assert!(
        why.contains("zzz.json") && why.contains("file name must match"),
        "{why}"
    );
    lmcp_ok(h, &["recipe", "delete", "zzz", "--yes"]);
    assert!(!recipes.join("zzz.json").exists());
    // replace by the file's name sets it aside and saves
    std::fs::write(recipes.join("zzz.json"), misfiled.to_string()).unwrap();
    let file = h.join("zzz.json");
    std::fs::write(
        &file,
        json!({"name": "zzz", "steps": [{"tool": "calculate", "args": {"expression": "2"}}]})
            .to_string(),
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let out = lmcp(h, &["recipe", "save", f]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--replace"));
    lmcp_ok(h, &["recipe", "save", f, "--replace"]);
    lmcp_ok(h, &["recipe", "run", "zzz"]);
    assert!(
        names(&recipes)
            .iter()
            .any(|n| n.starts_with("zzz.json.corrupt-"))
    );
}

/// A folder in place of a recipe file is unusable like a corrupt file: `--replace` sets it
/// aside.
#[test]
fn a_folder_in_place_of_a_recipe_is_set_aside_on_replace() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    lmcp(h, &["recipe", "list"]);
    let recipes = h.join("data/recipes");
    std::fs::create_dir_all(recipes.join("dir.json")).unwrap();
    let file = h.join("dir.json");
    std::fs::write(
        &file,
        json!({"name": "dir", "steps": [{"tool": "calculate", "args": {"expression": "1"}}]})
            .to_string(),
    )
    .unwrap();
    let out = lmcp(h, &["recipe", "save", file.to_str().unwrap()]);
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("folder"));
    lmcp_ok(h, &["recipe", "save", file.to_str().unwrap(), "--replace"]);
    assert!(recipes.join("dir.json").is_file());
    assert!(
        names(&recipes)
            .iter()
            .any(|n| n.starts_with("dir.json.corrupt-"))
    );
}

/// A recipe of a format this lmcp does not read is refused, as a custom tool's is: it does not
/// run, and replace sets it aside instead of writing over it.
#[test]
fn a_recipe_of_an_unknown_format_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    lmcp(h, &["recipe", "list"]);
    let recipes = h.join("data/recipes");
    std::fs::create_dir_all(&recipes).unwrap();
    let stored = json!({"format": 99, "manifest": {"name": "f",
        "steps": [{"tool": "calculate", "args": {"expression": "1"}}]},
        "created": "2026-01-01T00:00:00Z", "updated": "2026-01-01T00:00:00Z"});
    std::fs::write(recipes.join("f.json"), stored.to_string()).unwrap();
    let out = lmcp(h, &["recipe", "run", "f"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("format 99"));
    let v = json_out(&lmcp(h, &["recipe", "list", "--json"]));
    assert!(
        v["unreadable"][0].as_str().unwrap().contains("format 99"),
        "{v}"
    );
    let file = h.join("f.json");
    std::fs::write(
        &file,
        json!({"name": "f", "steps": [{"tool": "calculate", "args": {"expression": "1"}}]})
            .to_string(),
    )
    .unwrap();
    lmcp_ok(h, &["recipe", "save", file.to_str().unwrap(), "--replace"]);
    let kept: Vec<String> = names(&recipes)
        .into_iter()
        .filter(|n| n.starts_with("f.json.corrupt-"))
        .collect();
    assert_eq!(kept.len(), 1);
    let old = std::fs::read_to_string(recipes.join(&kept[0])).unwrap();
    assert!(old.contains("99"));
}
