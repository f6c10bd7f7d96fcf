//! What `Cargo.toml` cannot express: the prelude's bytecode, and link settings for the binary.
//!
//! The runtime's prelude (`lua/prelude.lua`) runs in every Lua state lmcp makes. Compiling its
//! text took about 0.8 ms of every one-line `lmcp run`; loading the same function as bytecode
//! takes under 0.1 ms. So the prelude is compiled here, by the same vendored Lua the binary links
//! (`mlua-sys`, the version `Cargo.lock` holds for both), and dumped with its debug information
//! (error lines still say `prelude:LINE`) to `$OUT_DIR/prelude.luac`. A syntax error in the
//! prelude fails the build, naming the line. Building for another target writes an empty file:
//! bytecode is only loadable by a VM with the same number sizes, so the runtime then compiles
//! the text as before.
//!
//! On Linux with glibc, the binary's relative relocations are packed (`-z pack-relative-relocs`,
//! DT_RELR) when the C toolchain and the C library support it. The binary is position
//! independent (ASLR), so the loader patches some 32,000 pointers at every start; packed, their
//! table shrinks from ~770 KiB to ~10 KiB and is no longer read page by page. This takes about
//! 0.3 ms off every `lmcp` command (`benches/startup_library.sh`). The flag is tried on a small
//! C program first, linked and run: a toolchain that refuses it, or a C library older than
//! glibc 2.36 that cannot load the result, keeps the usual table.

use std::ffi::{CStr, c_int, c_void};
use std::path::Path;
use std::process::{Command, Stdio};

use mlua_sys as lua;

const PACK: &str = "-Wl,-z,pack-relative-relocs";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let native = var("HOST") == var("TARGET");
    let out = std::path::PathBuf::from(var("OUT_DIR"));
    println!("cargo:rerun-if-changed=lua/prelude.lua");
    let bytecode = if native {
        let source = std::fs::read("lua/prelude.lua").expect("lua/prelude.lua is readable");
        match compile(&source, c"=prelude") {
            Ok(code) => code,
            Err(message) => panic!("lua/prelude.lua does not compile: {message}"),
        }
    } else {
        Vec::new()
    };
    std::fs::write(out.join("prelude.luac"), bytecode).expect("OUT_DIR is writable");
    if var("CARGO_CFG_TARGET_OS") == "linux"
        && var("CARGO_CFG_TARGET_ENV") == "gnu"
        && native
        && packs(&out)
    {
        println!("cargo:rustc-link-arg-bins={PACK}");
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

/// Compiles Lua source text and dumps the function as bytecode, with its debug information;
/// the compiler's message on a syntax error.
fn compile(source: &[u8], name: &CStr) -> Result<Vec<u8>, String> {
    unsafe extern "C-unwind" fn collect(
        _: *mut lua::lua_State,
        bytes: *const c_void,
        len: usize,
        into: *mut c_void,
    ) -> c_int {
        if len > 0 {
            // SAFETY: `into` is the Vec passed to lua_dump below; Lua hands `len` bytes at `bytes`
            unsafe {
                let into = &mut *(into as *mut Vec<u8>);
                into.extend_from_slice(std::slice::from_raw_parts(bytes as *const u8, len));
            }
        }
        0
    }
    // SAFETY: a fresh state used on this thread only; the stack holds at most the function or
    // the error message, and the state is closed on every path.
    unsafe {
        let state = lua::luaL_newstate();
        if state.is_null() {
            return Err("no memory for a Lua state".into());
        }
        let status = lua::luaL_loadbufferx(
            state,
            source.as_ptr().cast(),
            source.len(),
            name.as_ptr(),
            c"t".as_ptr(),
        );
        let result = if status == lua::LUA_OK {
            let mut code = Vec::new();
            lua::lua_dump(state, collect, (&mut code as *mut Vec<u8>).cast(), 0);
            Ok(code)
        } else {
            let mut len = 0;
            let text = lua::lua_tolstring(state, -1, &mut len);
            Err(if text.is_null() {
                format!("status {status}")
            } else {
                String::from_utf8_lossy(std::slice::from_raw_parts(text.cast(), len)).into_owned()
            })
        };
        lua::lua_close(state);
        result
    }
}
