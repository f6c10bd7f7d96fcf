//! The Lua modules scripts may `require`, embedded in the binary from `stdlib/`.

/// Every stdlib module: its name and its source.
pub const STDLIB_MODULES: &[(&str, &str)] = &[
    ("inspect", include_str!("../../stdlib/inspect.lua")),
    ("retry", include_str!("../../stdlib/retry.lua")),
    ("tbl", include_str!("../../stdlib/tbl.lua")),
    ("test", include_str!("../../stdlib/test.lua")),
];

/// The source of a module a script may require: a stdlib module, or one of `extra` (a skill's
/// own scripts). Returns the source and its chunk name, or the error message.
pub fn module_source(name: &str, extra: &[(String, String)]) -> Result<(String, String), String> {
    if let Some((n, src)) = extra.iter().find(|(n, _)| n == name) {
        return Ok((src.clone(), format!("={n}.lua")));
    }
    if let Some((n, src)) = STDLIB_MODULES.iter().find(|(n, _)| *n == name) {
        return Ok((src.to_string(), format!("=stdlib/{n}.lua")));
    }
    let mut known: Vec<&str> = STDLIB_MODULES.iter().map(|(n, _)| *n).collect();
    known.extend(extra.iter().map(|(n, _)| n.as_str()));
    Err(format!(
        "module '{name}' not found: scripts can require only these modules: {}",
        known.join(", ")
    ))
}
