//! The gate protects itself: lmcp's own folders are out of reach of the file tools whatever the
//! roots say, wide roots need a yes, and a symlink swapped during calls never leads outside.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::json;

use crate::common::{TestHost, call_yes, lmcp, lmcp_ok};

#[test]
fn a_root_of_slash_needs_a_yes_and_still_keeps_lmcp_out_of_reach() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    // something secret to find, and the config to rewrite
    lmcp_ok(h, &["grants", "deny", "run_command"]);
    std::fs::create_dir_all(h.join("config/skills")).unwrap();
    std::fs::write(
        h.join("config/skills/demo.secrets.json"),
        r#"{"token":"s3cr3t"}"#,
    )
    .unwrap();
    let out = lmcp(h, &["roots", "add", "/"]);
    // not confirmed: exit 3, like every other question left unanswered
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("root of the file system") && err.contains("--yes"),
        "{err}"
    );
    let out = lmcp(h, &["roots", "add", h.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("lmcp's own"));
    lmcp_ok(h, &["roots", "add", "/", "--yes"]);

    let secrets = h.join("config/skills/demo.secrets.json");
    let out = lmcp(
        h,
        &[
            "call",
            "read_file",
            &json!({"path": secrets}).to_string(),
            "--json",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !text.contains("s3cr3t") && text.contains("lmcp's own"),
        "{text}"
    );
    let config = h.join("config/config.json");
    let before = std::fs::read_to_string(&config).unwrap();
    let args = json!({"path": config, "content": "{}", "overwrite": true}).to_string();
    let out = lmcp(h, &["call", "write_file", &args, "--yes"]);
    assert_ne!(out.status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&config).unwrap(), before);
    let args = json!({"path": h.join("data")}).to_string();
    assert_ne!(lmcp(h, &["call", "list_dir", &args]).status.code(), Some(0));
    // the workspace, inside the data folder, stays open
    lmcp_ok(
        h,
        &[
            "call",
            "write_file",
            r#"{"path": "note.txt", "content": "x"}"#,
            "--yes",
        ],
    );
}

/// A symlink flipped between a folder inside the workspace and one outside, thousands of times
/// while reads, listings and writes go through it: none may land outside.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swapped_symlink_never_leads_outside() {
    let t = TestHost::new();
    let ws = t.home().join("data/workspace");
    let inside = ws.join("inside");
    let outside = t.home().join("outside");
    std::fs::create_dir_all(&inside).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(inside.join("f.txt"), "INSIDE").unwrap();
    std::fs::write(outside.join("f.txt"), "OUTSIDE").unwrap();
    std::fs::write(outside.join("outside-marker"), "").unwrap();
    let link = ws.join("flip");
    std::os::unix::fs::symlink(&inside, &link).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let (stop, link, inside, outside) =
            (stop.clone(), link.clone(), inside.clone(), outside.clone());
        std::thread::spawn(move || {
            let tmp = link.with_file_name("flip.new");
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let target = if n.is_multiple_of(2) {
                    &outside
                } else {
                    &inside
                };
                let _ = std::fs::remove_file(&tmp);
                if std::os::unix::fs::symlink(target, &tmp).is_ok() {
                    let _ = std::fs::rename(&tmp, &link);
                }
                n += 1;
            }
        })
    };
    let mut escapes = Vec::new();
    for i in 0..1500 {
        if let Ok(v) = call_yes(&t.host, "read_file", json!({"path": "flip/f.txt"})).await
            && v["content"] == "OUTSIDE"
        {
            escapes.push(format!("read {i}"));
        }
        if let Ok(v) = call_yes(&t.host, "list_dir", json!({"path": "flip"})).await
            && v.to_string().contains("outside-marker")
        {
            escapes.push(format!("list {i}"));
        }
        let _ = call_yes(
            &t.host,
            "write_file",
            json!({"path": format!("flip/w-{i}.txt"), "content": "x"}),
        )
        .await;
    }
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();
    let landed: Vec<String> = std::fs::read_dir(&outside)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "f.txt" && n != "outside-marker")
        .collect();
    assert!(escapes.is_empty(), "{escapes:?}");
    assert!(landed.is_empty(), "written outside: {landed:?}");
}

/// `-o` writes a regular file atomically; a symlink, FIFO or missing folder is refused unless
/// asked for, and nothing outside is touched.
#[cfg(unix)]
#[test]
fn outputs_refuse_links_fifos_and_missing_folders() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let target = h.join("target.lua");
    std::fs::write(&target, "keep").unwrap();
    let link = h.join("link.lua");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let out = lmcp(h, &["types", "-o", link.to_str().unwrap()]);
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("symlink"));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    let fifo = h.join("fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let out = lmcp(h, &["types", "-o", fifo.to_str().unwrap()]);
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("FIFO"));
    let missing = h.join("no/such/dir/t.lua");
    let out = lmcp(h, &["types", "-o", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!h.join("no").exists(), "no folder made");
    // with --force the link itself is replaced by a regular file; its target is untouched
    lmcp_ok(h, &["types", "-o", link.to_str().unwrap(), "--force"]);
    assert!(std::fs::symlink_metadata(&link).unwrap().is_file());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    // a recipe export follows the same rule
    let out = lmcp(h, &["recipe", "export", "x", "-o", fifo.to_str().unwrap()]);
    assert_ne!(out.status.code(), Some(0));
}

/// A skill package whose reference links outside it is refused, naming the link; nothing is
/// copied into the store.
#[cfg(unix)]
#[test]
fn skill_install_refuses_links_leading_out_of_the_package() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let key = h.join("id_rsa");
    std::fs::write(&key, "PRIVATE KEY").unwrap();
    let pkg = h.join("pkg");
    std::fs::create_dir_all(pkg.join("references")).unwrap();
    std::fs::write(
        pkg.join("SKILL.md"),
        "---\nname: sneaky\ndescription: d\n---\nx\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(&key, pkg.join("references/notes.md")).unwrap();
    let out = lmcp(h, &["skill", "install", pkg.to_str().unwrap(), "--yes"]);
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("notes.md") && err.contains("links outside the package"),
        "{err}"
    );
    assert!(!h.join("data/skills/sneaky").exists());
    // a link inside the package is fine
    std::fs::remove_file(pkg.join("references/notes.md")).unwrap();
    std::fs::write(pkg.join("real.md"), "ok").unwrap();
    std::os::unix::fs::symlink(pkg.join("real.md"), pkg.join("references/notes.md")).unwrap();
    lmcp_ok(h, &["skill", "install", pkg.to_str().unwrap(), "--yes"]);
}

/// A secret stays secret through a reinstall that drops `secret: true`, and never comes back
/// out of a script: not in its return value, its print output, its error, or a preview.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_stay_secret() {
    let t = TestHost::new();
    let md = |secret: bool| {
        format!(
            "---\nname: vault\ndescription: d\nconfig:\n  token:\n    type: text\n    secret: {secret}\n---\nx\n"
        )
    };
    let leak = "---@param how string\n---@uses probe_write, calculate\nprint('printed ' .. config.token)\n\
                print(json.encode({v = config.token}))\n\
                if params.how == 'error' then error('failed with ' .. config.token) end\n\
                if params.how == 'tool' then tools.calculate{expression = config.token} end\n\
                tools.probe_write{text = config.token}\n\
                return {value = config.token}";
    let install = |secret: bool| json!({"skill_md": md(secret), "scripts": [{"name": "leak.lua", "code": leak}]});
    call_yes(&t.host, "skill_install", install(true))
        .await
        .unwrap();
    call_yes(
        &t.host,
        "skill_config",
        json!({"name": "vault", "values": {"token": "tok-9f8e7d"}}),
    )
    .await
    .unwrap();
    // reinstalled without `secret: true`: still not shown
    call_yes(&t.host, "skill_install", install(false))
        .await
        .unwrap();
    let got = call_yes(&t.host, "skill_get", json!({"name": "vault"}))
        .await
        .unwrap();
    assert!(!got.to_string().contains("tok-9f8e7d"), "{got}");
    // a value set again stays in the secret store
    call_yes(
        &t.host,
        "skill_config",
        json!({"name": "vault", "values": {"token": "Tok\"1a2B3c"}}),
    )
    .await
    .unwrap();
    let got = call_yes(&t.host, "skill_get", json!({"name": "vault"}))
        .await
        .unwrap();
    assert!(!got.to_string().contains("tok-1a2b3c"), "{got}");
    // return, print and (previewed) call
    let ctx = lmcp::CallContext::root(lmcp::Origin::Mcp, lmcp::ConfirmMode::Preview);
    let o = t
        .host
        .call(lmcp::CallRequest::new(
            "skill_call",
            json!({"skill": "vault", "script": "leak", "params": {"how": "ok"}}),
            ctx,
        ))
        .await;
    let text = o.to_json().to_string();
    assert!(!text.to_lowercase().contains("1a2b3c"), "{text}");
    assert!(text.contains("********"), "{text}");
    // error
    let e = call_yes(
        &t.host,
        "skill_call",
        json!({"skill": "vault", "script": "leak", "params": {"how": "error"}}),
    )
    .await
    .unwrap_err();
    assert!(!e.contains("1a2B3c") && e.contains("********"), "{e}");
    // a nested tool's error that lower-cases what it was given
    let e = call_yes(
        &t.host,
        "skill_call",
        json!({"skill": "vault", "script": "leak", "params": {"how": "tool"}}),
    )
    .await
    .unwrap_err();
    assert!(!e.to_lowercase().contains("1a2b3c"), "{e}");
}

/// `grants deny write` stops write_file and run_command too, `--yes` or not.
#[test]
fn deny_write_wins_over_the_destructive_rule() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    lmcp_ok(h, &["grants", "deny", "write"]);
    let out = lmcp(
        h,
        &[
            "call",
            "write_file",
            r#"{"path": "a.txt", "content": "x"}"#,
            "--yes",
        ],
    );
    assert_eq!(out.status.code(), Some(3));
    assert!(!h.join("data/workspace/a.txt").exists());
    let out = lmcp(
        h,
        &["call", "run_command", r#"{"program": "true"}"#, "--yes"],
    );
    assert_eq!(out.status.code(), Some(3));
}

/// A bind mount of lmcp's config folder inside a root is still lmcp's config folder: the file
/// tools know it by identity (device and inode), not by spelling. Needs root to mount; CI runs
/// as root.
#[cfg(target_os = "linux")]
#[test]
fn a_bind_mount_of_lmcp_config_is_still_out_of_reach() {
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    lmcp_ok(h, &["grants", "deny", "run_command"]);
    let outside = tempfile::tempdir().unwrap();
    let bind = outside.path().join("bind");
    std::fs::create_dir_all(&bind).unwrap();
    let mounted = std::process::Command::new("mount")
        .arg("--bind")
        .arg(h.join("config"))
        .arg(&bind)
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        // Not root (a developer's machine): the identity check is covered by unit tests there.
        eprintln!("skipping the bind mount: `mount --bind` needs root");
        return;
    }
    let _guard = Unmount(bind.clone());
    lmcp_ok(h, &["roots", "add", outside.path().to_str().unwrap()]);
    let config = bind.join("config.json");
    let out = lmcp(
        h,
        &["call", "read_file", &json!({"path": config}).to_string()],
    );
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("lmcp's own"));
    let args = json!({"path": config, "content": "{}", "overwrite": true}).to_string();
    assert_ne!(
        lmcp(h, &["call", "write_file", &args, "--yes"])
            .status
            .code(),
        Some(0)
    );
    let args = json!({"program": "true", "cwd": bind}).to_string();
    assert_ne!(
        lmcp(h, &["call", "run_command", &args, "--yes"])
            .status
            .code(),
        Some(0)
    );
    // and an -o output never lands on lmcp's own files either
    let out = lmcp(h, &["types", "-o", config.to_str().unwrap(), "--force"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("lmcp's own"));
}

/// A FIFO in the roots is never opened to wait for a writer: read_file and asset_import refuse
/// it at once (they waited forever, and cancelling did nothing), and list_dir shows it as
/// `other`, not `file`.
#[test]
fn a_fifo_is_refused_at_once() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let workspace = h.join("data/workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    assert!(
        std::process::Command::new("mkfifo")
            .arg(workspace.join("pipe"))
            .status()
            .unwrap()
            .success()
    );
    let started = std::time::Instant::now();
    let out = lmcp(h, &["call", "read_file", r#"{"path": "pipe"}"#]);
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a regular file"));
    let out = lmcp_ok(h, &["call", "list_dir", "{}", "--json"]);
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        listed.contains(r#"{"kind":"other","name":"pipe""#)
            || listed.contains(r#""name":"pipe","kind":"other""#),
        "{listed}"
    );
    let started = std::time::Instant::now();
    let ws = lmcp_ok(
        h,
        &[
            "call",
            "workspace_create",
            r#"{"name": "w"}"#,
            "--json",
            "--yes",
        ],
    );
    let ws: serde_json::Value = serde_json::from_slice(&ws.stdout).unwrap();
    let id = ws["result"]["workspace_id"].as_str().unwrap().to_string();
    let args = format!(r#"{{"workspace_id": "{id}", "path": "pipe"}}"#);
    let out = lmcp(h, &["call", "asset_import", &args, "--yes"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}
