//! Link settings for the `lmcp` binary that `Cargo.toml` cannot express.
//!
//! On Linux with glibc, the binary's relative relocations are packed (`-z pack-relative-relocs`,
//! DT_RELR) when the C toolchain and the C library support it. The binary is position
//! independent (ASLR), so the loader patches some 32,000 pointers at every start; packed, their
//! table shrinks from ~770 KiB to ~10 KiB and is no longer read page by page. This takes about
//! 0.3 ms off every `lmcp` command (`benches/startup_library.sh`). The flag is tried on a small
//! C program first, linked and run: a toolchain that refuses it, or a C library older than
//! glibc 2.36 that cannot load the result, keeps the usual table.

use std::path::Path;
use std::process::{Command, Stdio};

const PACK: &str = "-Wl,-z,pack-relative-relocs";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let native = var("HOST") == var("TARGET");
    if var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ENV") == "gnu" && native {
        let out = std::path::PathBuf::from(var("OUT_DIR"));
        if packs(&out) {
            println!("cargo:rustc-link-arg-bins={PACK}");
        }
    }
}

/// Whether a C program linked with [`PACK`] builds and runs here.
fn packs(out: &Path) -> bool {
    let source = out.join("relr_probe.c");
    let program = out.join("relr_probe");
    // a pointer in writable data of a position-independent program: a relative relocation
    let text = "static int x; int *p = &x; int main(void) { return p == &x ? 0 : 1; }\n";
    if std::fs::write(&source, text).is_err() {
        return false;
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let linked = Command::new(cc)
        .args(["-pie", "-fPIE", PACK, "-o"])
        .arg(&program)
        .arg(&source)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    linked && Command::new(&program).status().is_ok_and(|s| s.success())
}
