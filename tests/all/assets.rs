//! Workspaces and image assets: create, import (decoding, confinement, stable ids), list, get.

use serde_json::json;

use crate::common::{TestHost, call_yes};

fn write_png(path: &std::path::Path, w: u32, h: u32) {
    let img = image::RgbaImage::from_fn(w, h, |x, y| {
        image::Rgba([(x * 7) as u8, (y * 5) as u8, 90, 200])
    });
    img.save(path).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_list_and_get() {
    let t = TestHost::new();
    let ws_dir = t.home().join("data/workspace");
    std::fs::create_dir_all(&ws_dir).unwrap();
    write_png(&ws_dir.join("a.png"), 40, 30);
    image::RgbImage::from_pixel(20, 10, image::Rgb([10, 200, 30]))
        .save(ws_dir.join("b.jpg"))
        .unwrap();
    std::fs::write(ws_dir.join("not-an-image.png"), b"\x89PNG\r\n\x1a\nbroken").unwrap();
    std::fs::write(ws_dir.join("text.txt"), b"hello").unwrap();
    let photo = std::fs::read(ws_dir.join("b.jpg")).unwrap();
    std::fs::write(ws_dir.join("cut.jpg"), &photo[..photo.len() * 2 / 3]).unwrap();

    let id = call_yes(&t.host, "workspace_create", json!({"name": "album"}))
        .await
        .unwrap()["workspace_id"]
        .as_str()
        .unwrap()
        .to_string();
    let a = call_yes(
        &t.host,
        "asset_import",
        json!({"workspace_id": id, "path": "a.png"}),
    )
    .await
    .unwrap();
    assert_eq!(a["asset_id"], 1);
    assert_eq!(
        (
            a["media_type"].as_str().unwrap(),
            a["width"].as_u64().unwrap(),
            a["height"].as_u64().unwrap()
        ),
        ("image/png", 40, 30)
    );
    assert_eq!(a["sha256"].as_str().unwrap().len(), 64);
    let b = call_yes(
        &t.host,
        "asset_import",
        json!({"workspace_id": id, "path": "b.jpg"}),
    )
    .await
    .unwrap();
    assert_eq!(
        (
            b["asset_id"].as_u64().unwrap(),
            b["media_type"].as_str().unwrap()
        ),
        (2, "image/jpeg")
    );
    // refusals
    let e = call_yes(
        &t.host,
        "asset_import",
        json!({"workspace_id": id, "path": "not-an-image.png"}),
    )
    .await
    .unwrap_err();
    assert!(e.contains("does not decode as an image"), "{e}");
    // A JPEG cut short is refused now, not found out when the PDF shows half a photo.
    let e = call_yes(
        &t.host,
        "asset_import",
        json!({"workspace_id": id, "path": "cut.jpg"}),
    )
    .await
    .unwrap_err();
    assert!(
        e.contains("does not decode as an image") && e.contains("cut short"),
        "{e}"
    );
    let e = call_yes(
        &t.host,
        "asset_import",
        json!({"workspace_id": id, "path": "text.txt"}),
    )
    .await
    .unwrap_err();
    assert!(e.contains("not an image"), "{e}");
    let e = call_yes(
        &t.host,
        "asset_import",
        json!({"workspace_id": id, "path": "/etc/hostname"}),
    )
    .await
    .unwrap_err();
    assert!(e.contains("outside the allowed roots"), "{e}");
    let e = call_yes(
        &t.host,
        "asset_import",
        json!({"workspace_id": "00000000-0000-0000-0000-000000000000", "path": "a.png"}),
    )
    .await
    .unwrap_err();
    assert!(e.contains("no workspace"), "{e}");
    let e = call_yes(
        &t.host,
        "asset_import",
        json!({"workspace_id": "../../etc", "path": "a.png"}),
    )
    .await
    .unwrap_err();
    assert!(e.contains("pattern"), "{e}");
    // ids keep counting after failures; list and get agree
    let c = call_yes(
        &t.host,
        "asset_import",
        json!({"workspace_id": id, "path": "a.png"}),
    )
    .await
    .unwrap();
    assert_eq!(c["asset_id"], 3);
    let list = call_yes(&t.host, "asset_list", json!({"workspace_id": id}))
        .await
        .unwrap();
    assert_eq!(list["assets"].as_array().unwrap().len(), 3);
    let got = call_yes(
        &t.host,
        "asset_get",
        json!({"workspace_id": id, "asset_id": 2}),
    )
    .await
    .unwrap();
    assert_eq!(got, b);
    assert!(
        call_yes(
            &t.host,
            "asset_get",
            json!({"workspace_id": id, "asset_id": 9})
        )
        .await
        .unwrap_err()
        .contains("no asset 9")
    );
    let wss = call_yes(&t.host, "workspace_list", json!({}))
        .await
        .unwrap();
    assert_eq!(wss["workspaces"][0]["asset_count"], 3);
    // the stored copy is byte for byte the source
    let (asset, path) = lmcp::tools::assets::asset(&t.host, &id, 2).unwrap();
    assert_eq!(
        std::fs::read(path).unwrap(),
        std::fs::read(ws_dir.join("b.jpg")).unwrap()
    );
    assert_eq!(asset.asset_id, 2);
}

#[test]
fn importing_local_files_needs_the_local_transport() {
    let dir = tempfile::tempdir().unwrap();
    let options = lmcp::HostOptions {
        transport: lmcp::registry::Transport::Remote,
    };
    let host = lmcp::Host::open_with(lmcp::store::Paths::under(dir.path()), options).unwrap();
    let tool = host.registry().get("asset_import").unwrap();
    let a = tool.spec().availability(&host.config(), host.transport());
    assert!(matches!(
        a,
        lmcp::registry::Availability::Unavailable {
            reason: lmcp::registry::UnavailableReason::NeedsStdioTransport,
            ..
        }
    ));
}

/// Imports side by side each get their own id, every file lands under it, and no temporary file
/// is left behind (files are staged outside the lock and renamed under it).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn imports_side_by_side_get_distinct_ids_and_leave_no_temp_files() {
    let t = TestHost::new();
    let ws_dir = t.home().join("data/workspace");
    std::fs::create_dir_all(&ws_dir).unwrap();
    for i in 0..6 {
        write_png(&ws_dir.join(format!("p{i}.png")), 20 + i, 10);
    }
    let id = call_yes(&t.host, "workspace_create", json!({"name": "many"}))
        .await
        .unwrap()["workspace_id"]
        .as_str()
        .unwrap()
        .to_string();
    let host = std::sync::Arc::new(t);
    let mut running = Vec::new();
    for i in 0..6 {
        let (h, id) = (host.clone(), id.clone());
        running.push(tokio::spawn(async move {
            let args = json!({"workspace_id": id, "path": format!("p{i}.png")});
            let a = call_yes(&h.host, "asset_import", args).await.unwrap();
            (
                i,
                a["asset_id"].as_u64().unwrap(),
                a["width"].as_u64().unwrap(),
            )
        }));
    }
    let mut ids = Vec::new();
    for r in running {
        let (i, asset_id, width) = r.await.unwrap();
        assert_eq!(width, 20 + i as u64, "the asset is the file imported");
        ids.push(asset_id);
    }
    ids.sort();
    assert_eq!(ids, [1, 2, 3, 4, 5, 6]);
    let assets_dir = lmcp::tools::assets::workspace_dir(&host.host, &id)
        .unwrap()
        .join("assets");
    let mut names: Vec<String> = std::fs::read_dir(&assets_dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(names.iter().all(|n| !n.starts_with('.')), "{names:?}");
    for n in 1..=6 {
        for ending in ["png", "prepared", "thumb"] {
            assert!(
                names.contains(&format!("{n}.{ending}")),
                "{n}.{ending} in {names:?}"
            );
        }
    }
    let listed = call_yes(&host.host, "asset_list", json!({"workspace_id": id}))
        .await
        .unwrap();
    assert_eq!(listed["assets"].as_array().unwrap().len(), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_is_deleted_through_the_gate_whole() {
    let t = TestHost::new();
    let ws = call_yes(
        &t.host,
        "workspace_create",
        serde_json::json!({"name": "scratch"}),
    )
    .await
    .unwrap();
    let id = ws["workspace_id"].as_str().unwrap().to_string();
    let args = serde_json::json!({"workspace_id": id});
    // destructive: under the default grant a person must say yes
    let ctx = lmcp::CallContext::root(lmcp::Origin::Cli, lmcp::ConfirmMode::Confirmed);
    let o = t
        .host
        .call(lmcp::CallRequest::new(
            "workspace_delete",
            args.clone(),
            ctx,
        ))
        .await;
    assert_eq!(o.class(), "needs_confirmation");
    call_yes(&t.host, "workspace_delete", args.clone())
        .await
        .unwrap();
    let list = call_yes(&t.host, "workspace_list", serde_json::json!({}))
        .await
        .unwrap();
    assert_eq!(list["workspaces"], serde_json::json!([]));
    let e = call_yes(&t.host, "workspace_delete", args)
        .await
        .unwrap_err();
    assert!(e.contains("there is no workspace"), "{e}");
}

/// A relative path the workspace lacks but the current folder has: from the command line the
/// error says so, with `lmcp roots add DIR`, the full path and `lmcp pdf`; other doors get the
/// plain error, and the path rules stay (relative paths are the workspace's) (#34). The test
/// runs from the crate root, where `tests/fixtures/baseline-444.jpg` is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relative_path_found_only_here_is_explained_to_the_cli() {
    let t = TestHost::new();
    let id = call_yes(&t.host, "workspace_create", json!({"name": "here"}))
        .await
        .unwrap()["workspace_id"]
        .as_str()
        .unwrap()
        .to_string();
    let here = std::env::current_dir().unwrap();
    let path = "tests/fixtures/baseline-444.jpg";
    assert!(here.join(path).is_file(), "run from the crate root");
    let args = json!({"workspace_id": id, "path": path});
    let cli = call_yes(&t.host, "asset_import", args.clone())
        .await
        .unwrap_err();
    assert!(
        cli.contains("a relative path is read from the lmcp workspace")
            && cli.contains(&format!("`lmcp roots add {}`", here.display()))
            && cli.contains(&here.join(path).display().to_string())
            && cli.contains("`lmcp pdf` takes paths from the current folder"),
        "{cli}"
    );
    let ctx = crate::common::confirmed(lmcp::Origin::Mcp);
    let mcp = t
        .host
        .call(lmcp::CallRequest::new("asset_import", args, ctx))
        .await
        .into_result()
        .unwrap_err()
        .to_string();
    assert!(
        mcp.contains("No such file") && !mcp.contains("lmcp roots add"),
        "{mcp}"
    );
    // once this folder is a root, the full path is all it takes
    t.host
        .update_config(|c| {
            c.roots.push(here.clone());
            Ok(())
        })
        .unwrap();
    let cli = call_yes(
        &t.host,
        "asset_import",
        json!({"workspace_id": id, "path": path}),
    )
    .await
    .unwrap_err();
    assert!(
        cli.contains("give its full path") && !cli.contains("roots add"),
        "{cli}"
    );
    let full = here.join(path).display().to_string();
    call_yes(
        &t.host,
        "asset_import",
        json!({"workspace_id": id, "path": full}),
    )
    .await
    .unwrap();
}

/// A scratch workspace's import waits for no disk, a kept workspace's does (the copy, its
/// folder, the index): #39, where the syncs were a third of `lmcp pdf -o`'s time. Counted on
/// this thread, where `import` runs when called directly; both imports are whole all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scratch_workspace_imports_without_syncing_and_a_kept_one_syncs() {
    let t = TestHost::new();
    let ws_dir = t.home().join("data/workspace");
    std::fs::create_dir_all(&ws_dir).unwrap();
    image::RgbImage::from_pixel(20, 10, image::Rgb([10, 200, 30]))
        .save(ws_dir.join("b.jpg"))
        .unwrap();
    let mut syncs = Vec::new();
    for scratch in [false, true] {
        let id = call_yes(
            &t.host,
            "workspace_create",
            json!({"name": "s", "scratch": scratch}),
        )
        .await
        .unwrap()["workspace_id"]
            .as_str()
            .unwrap()
            .to_string();
        let before = lmcp::store::syncs_on_this_thread();
        let a = lmcp::tools::assets::import(&t.host, &id, "b.jpg", &crate::common::ctx()).unwrap();
        syncs.push(lmcp::store::syncs_on_this_thread() - before);
        let (stored, path) = lmcp::tools::assets::asset(&t.host, &id, a.asset_id).unwrap();
        assert_eq!(std::fs::metadata(path).unwrap().len(), stored.bytes);
        assert_eq!(stored.sha256, a.sha256);
    }
    assert!(syncs[0] >= 5, "a kept workspace's import syncs: {syncs:?}");
    assert_eq!(
        syncs[1], 0,
        "a scratch workspace's import waits for no disk"
    );
}
