//! Runs the Lua-side tests in `tests/lua/*_test.lua` in the sandbox, against the real tools.

use std::time::Duration;

use lmcp::ConfirmMode;

use crate::common::{TestHost, run_lua};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lua_test_files_pass() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lua");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with("_test.lua"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 4,
        "expected the stdlib tests in {}",
        dir.display()
    );
    for file in files {
        let t = TestHost::new();
        let source = std::fs::read_to_string(&file).unwrap();
        match run_lua(
            &t.host,
            &source,
            ConfirmMode::Preview,
            Duration::from_secs(30),
        )
        .await
        {
            Ok(o) => {
                assert!(
                    o.output.contains(" passed, 0 failed"),
                    "{}:\n{}",
                    file.display(),
                    o.output
                );
            }
            Err(e) => panic!("{}: {e}", file.display()),
        }
    }
}
