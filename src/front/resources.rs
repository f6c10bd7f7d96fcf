//! What `lmcp serve` offers to be read rather than called: MCP resources, listed, read and
//! watched through this one module.
//!
//! | URI                      | what                                                        |
//! |--------------------------|-------------------------------------------------------------|
//! | `lmcp://types/lmcp.lua`  | the typed tool API, exactly what `lmcp types` writes         |
//! | `lmcp://types/tools/NAME.lua` | one tool's part of it (a resource template)            |
//! | `lmcp://skills/SKILL/references/NAME` | a reference of an enabled skill, to read       |
//!
//! The types resource is what an agent in the `code` profile reads before it writes a
//! `lua_run` chunk: every tool as a typed function on `tools`, custom tools, skill tools and
//! upstream servers' tools included. Its URI is fixed and its content follows the tool set, so a
//! client that subscribed is told `notifications/resources/updated` when the text changes
//! ([`Watched`]), in both protocol generations (`resources/subscribe`, or `subscriptions/listen`
//! with `resourceSubscriptions`).
//!
//! Skills' references come and go with the skills (installed, removed, switched on or off, here
//! or by another process): [`Catalog`] notices, and each session tells its client
//! `notifications/resources/list_changed` with the prompts' `list_changed` (`front::prompts`).

use rmcp::ErrorData as McpError;
use rmcp::model::{ReadResourceResult, Resource, ResourceContents};
use sha2::{Digest, Sha256};

use crate::host::Host;

/// The typed tool API: the LuaLS/EmmyLua definitions of every tool.
pub const TYPES_URI: &str = "lmcp://types/lmcp.lua";

/// One tool's definitions: `lmcp://types/tools/NAME.lua` (listed as a resource template, not
/// one resource per tool: an agent finds names with `tool_search`).
pub const TOOL_TYPES_TEMPLATE: &str = "lmcp://types/tools/{name}.lua";
const TOOL_TYPES_PREFIX: &str = "lmcp://types/tools/";

/// Where skills' references are.
const SKILLS_PREFIX: &str = "lmcp://skills/";

/// Most resources in one `resources/list` page; the rest follow by cursor.
pub const PAGE: usize = 100;

/// The media type of Lua source (no registered type exists; this is the common one).
const LUA_MIME: &str = "text/x-lua";

/// The definitions `lmcp types` writes, for the tools registered now.
fn types_text(host: &Host) -> String {
    crate::script::types::lua_definitions(&host.registry().all())
}

/// One page of the resources there are now, in a stable order (the types, then each enabled
/// skill's references by skill and name), and the cursor of the next page if any. A cursor
/// this server did not give is refused (invalid params), naming what to do.
pub fn page(
    host: &Host,
    cursor: Option<&str>,
) -> Result<(Vec<Resource>, Option<String>), McpError> {
    let all = list(host);
    let start = match cursor {
        None => 0,
        // the cursors given are `page-N`, N a whole number of pages into a list that long
        Some(c) => c
            .strip_prefix("page-")
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| *n > 0 && n % PAGE == 0 && *n < all.len())
            .ok_or_else(|| {
                McpError::invalid_params(
                    format!(
                        "the cursor `{}` is not one this server gave (or the list has changed \
                         since): list again without a cursor",
                        crate::text::escape_controls(&crate::text::clip(c, 200))
                    ),
                    None,
                )
            })?,
    };
    let end = all.len().min(start.saturating_add(PAGE));
    let next = (end < all.len()).then(|| format!("page-{end}"));
    Ok((all.into_iter().skip(start).take(PAGE).collect(), next))
}

/// Every resource there is now, in a stable order.
pub fn list(host: &Host) -> Vec<Resource> {
    let text = types_text(host);
    let mut types = Resource::new(TYPES_URI, "lmcp.lua");
    types.title = Some("lmcp's typed tool API".into());
    types.description = Some(
        "Every tool lmcp has, as a typed Lua function on `tools` (LuaLS/EmmyLua definitions): \
         its arguments, its result and its effect. Read it before writing a lua_run chunk."
            .into(),
    );
    types.mime_type = Some(LUA_MIME.into());
    types.size = Some(text.len() as u64);
    let mut all = vec![types];
    for skill in crate::library::skills::shown(host) {
        for (name, size) in &skill.references {
            let mut r = Resource::new(reference_uri(&skill.name, name), name.clone());
            r.title = Some(format!("{name} ({} skill)", skill.name));
            r.description = Some(format!(
                "A reference of the skill `{}`, to read (never run)",
                skill.name
            ));
            r.mime_type = Some(media_type(name).into());
            r.size = Some(*size as u64);
            all.push(r);
        }
    }
    all
}

/// The URI of a skill's reference: its name's path parts kept, anything but unreserved
/// characters percent-encoded.
pub fn reference_uri(skill: &str, name: &str) -> String {
    let mut out = format!("{SKILLS_PREFIX}{skill}/references/");
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The skill and reference name a reference URI names, if it is one.
fn reference_of(uri: &str) -> Option<(&str, String)> {
    let rest = uri.strip_prefix(SKILLS_PREFIX)?;
    let (skill, rest) = rest.split_once('/')?;
    let encoded = rest.strip_prefix("references/")?;
    let mut bytes = Vec::with_capacity(encoded.len());
    let mut it = encoded.bytes();
    while let Some(b) = it.next() {
        if b == b'%' {
            let hex = [it.next()?, it.next()?];
            bytes.push(u8::from_str_radix(std::str::from_utf8(&hex).ok()?, 16).ok()?);
        } else {
            bytes.push(b);
        }
    }
    Some((skill, String::from_utf8(bytes).ok()?))
}

/// A reference's media type, by its extension (every reference is UTF-8 text).
fn media_type(name: &str) -> &'static str {
    let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match ext.as_deref() {
        Some("md" | "markdown") => "text/markdown",
        Some("json") => "application/json",
        Some("yaml" | "yml") => "application/yaml",
        Some("csv") => "text/csv",
        Some("html" | "htm") => "text/html",
        Some("xml") => "application/xml",
        Some("lua") => LUA_MIME,
        Some("py") => "text/x-python",
        Some("js" | "mjs") => "text/javascript",
        Some("sh") => "text/x-shellscript",
        _ => "text/plain",
    }
}

/// The resource templates: one tool's definitions by name.
pub fn templates() -> Vec<rmcp::model::ResourceTemplate> {
    let mut t = rmcp::model::ResourceTemplate::new(TOOL_TYPES_TEMPLATE, "tool types");
    t.title = Some("One tool's typed definition".into());
    t.description = Some(
        "The part of lmcp://types/lmcp.lua for one tool: its argument and result classes and \
         its function on `tools`. Cheaper than the whole file when a chunk calls a few tools."
            .into(),
    );
    t.mime_type = Some(LUA_MIME.into());
    vec![t]
}

/// One tool's definitions, for `lmcp://types/tools/NAME.lua`, if NAME is a tool.
fn tool_types(host: &Host, uri: &str) -> Option<String> {
    let name = uri.strip_prefix(TOOL_TYPES_PREFIX)?.strip_suffix(".lua")?;
    let tool = host.registry().get(name)?;
    Some(format!(
        "---@meta\n-- `{name}` from lmcp://types/lmcp.lua, which also defines the globals (params, \
         json, log, Preview, ToolError).\n{}",
        crate::script::types::tool_definitions(&[tool])
    ))
}

/// Whether `uri` names a resource a client may subscribe to.
pub fn is_watchable(uri: &str) -> bool {
    uri == TYPES_URI
}

/// The resource at `uri`, or the MCP error for a URI that names none (-32002, with the URI).
pub fn read(host: &Host, uri: &str) -> Result<ReadResourceResult, McpError> {
    if uri == TYPES_URI {
        return Ok(text_resource(types_text(host), uri, LUA_MIME));
    }
    if let Some(text) = tool_types(host, uri) {
        return Ok(text_resource(text, uri, LUA_MIME));
    }
    // a reference is read through the skill's own listing (no path is made of the URI), and
    // is at most the 1 MiB a reference may be, the bound of read_file
    if let Some((skill, name)) = reference_of(uri)
        && let Some(text) = crate::library::skills::reference(host, skill, &name)
    {
        return Ok(text_resource(text, uri, media_type(&name)));
    }
    Err(not_found(uri))
}

/// A read's answer: one text of this media type.
fn text_resource(text: String, uri: &str, mime: &str) -> ReadResourceResult {
    ReadResourceResult::new(vec![ResourceContents::text(text, uri).with_mime_type(mime)])
}

/// The error for a URI that names no resource: it says which resources there are.
pub fn not_found(uri: &str) -> McpError {
    McpError::resource_not_found(
        format!(
            "no resource `{}` here: resources/list names them ({TYPES_URI} is the typed tool \
             API; {TOOL_TYPES_PREFIX}NAME.lua one tool's part, for a tool named NAME)",
            crate::text::escape_controls(&crate::text::clip(uri, 200))
        ),
        Some(serde_json::json!({ "uri": crate::text::clip(uri, 200) })),
    )
}

/// Each installed skill's folder stamp ([`crate::library::skill_stamps`]).
type SkillStamps = Vec<(String, crate::host::Stamp)>;

/// The skills as MCP clients see them (prompts and references), watched for changes: the
/// server's library watcher looks every two seconds ([`Catalog::look`]), and every session
/// listening hears of a change once. One per host, shared by its sessions.
#[derive(Debug)]
pub struct Catalog {
    changes: tokio::sync::watch::Sender<u64>,
    /// The skills' folder stamps and the digest of what clients saw at the last look.
    seen: std::sync::Mutex<Option<(SkillStamps, u64)>>,
}

impl Catalog {
    /// The host's catalog (made at first use).
    pub fn of(host: &Host) -> std::sync::Arc<Catalog> {
        host.attached_or_insert(|| {
            std::sync::Arc::new(Catalog {
                changes: tokio::sync::watch::channel(0).0,
                seen: std::sync::Mutex::new(None),
            })
        })
    }

    /// Looks at the skills now; if what clients see changed since the last look, every
    /// subscriber hears of it. The first look only notes what there is.
    pub fn look(&self, host: &Host) {
        use std::hash::{Hash, Hasher};
        // the skills' folders first (a few stats each): only when they changed are the skills
        // read and checked again
        let stamps = crate::library::skill_stamps(host);
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.as_ref().is_some_and(|(s, _)| *s == stamps) {
            return;
        }
        let mut h = std::collections::hash_map::DefaultHasher::new();
        crate::library::skills::shown(host).hash(&mut h);
        let digest = h.finish();
        let before = seen.replace((stamps, digest));
        if before.is_some_and(|(_, b)| b != digest) {
            self.changes.send_modify(|n| *n += 1);
        }
    }

    /// A receiver that changes when the catalog does.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }
}

/// What a subscriber was last told of the watchable resources: a digest of each one's text,
/// so an update is sent when the text changed, not on every change of the tool set (a tool
/// switched off leaves the types as they were).
#[derive(Debug, Default)]
pub struct Watched {
    types: Option<[u8; 32]>,
}

impl Watched {
    /// Watching from now: the current texts are the ones the client has seen.
    pub fn now(host: &Host) -> Watched {
        let mut w = Watched::default();
        w.changed(host);
        w
    }

    /// The watchable URIs whose text changed since the last look.
    pub fn changed(&mut self, host: &Host) -> Vec<&'static str> {
        let digest: [u8; 32] = Sha256::digest(types_text(host).as_bytes()).into();
        let before = self.types.replace(digest);
        if before.is_some_and(|b| b != digest) {
            vec![TYPES_URI]
        } else {
            Vec::new()
        }
    }
}

/// One session's resource subscriptions: the URIs it asked to hear about, and what it was
/// last told of them.
#[derive(Debug, Default)]
pub struct Subscriptions {
    uris: std::collections::BTreeSet<String>,
    /// Taken at the first subscription: a session that subscribes to nothing costs nothing
    /// when the tool set changes.
    watched: Option<Watched>,
}

impl Subscriptions {
    /// Subscriptions to these URIs from now (those a client may subscribe to; others are left
    /// out, as `subscriptions/listen` leaves out what it does not accept).
    pub fn to(host: &Host, uris: &[String]) -> Subscriptions {
        let mut s = Subscriptions::default();
        for uri in uris.iter().filter(|u| is_watchable(u)) {
            let _ = s.subscribe(host, uri);
        }
        s
    }

    /// Subscribes to `uri`: an update is told when its text changes from what it is now. A URI
    /// that names no resource one can watch is refused with [`not_found`].
    pub fn subscribe(&mut self, host: &Host, uri: &str) -> Result<(), McpError> {
        if uri.starts_with(TOOL_TYPES_PREFIX) && tool_types(host, uri).is_some() {
            return Err(McpError::invalid_params(
                format!(
                    "`{}` can be read but not subscribed to: subscribe to {TYPES_URI}, which \
                     changes whenever a tool's part does",
                    crate::text::escape_controls(&crate::text::clip(uri, 200))
                ),
                None,
            ));
        }
        if !is_watchable(uri) {
            return Err(not_found(uri));
        }
        if self.watched.is_none() {
            self.watched = Some(Watched::now(host));
        }
        self.uris.insert(uri.to_string());
        Ok(())
    }

    /// Ends a subscription (one that was never made is not an error, as MCP asks).
    pub fn unsubscribe(&mut self, uri: &str) {
        self.uris.remove(uri);
    }

    /// Whether any subscription is held.
    pub fn is_empty(&self) -> bool {
        self.uris.is_empty()
    }

    /// The subscribed URIs whose text changed since the last look, to send
    /// `notifications/resources/updated` for.
    pub fn updates(&mut self, host: &Host) -> Vec<&'static str> {
        let Some(watched) = self.watched.as_mut() else {
            return Vec::new();
        };
        let mut changed = watched.changed(host);
        changed.retain(|u| self.uris.contains(*u));
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_types_resource_is_what_lmcp_types_writes() {
        let home = tempfile::tempdir().unwrap();
        let host = Host::open(crate::store::Paths::under(home.path())).unwrap();
        host.registry().load_builtins();
        let read = read(&host, TYPES_URI).unwrap();
        let ResourceContents::TextResourceContents {
            text, mime_type, ..
        } = &read.contents[0]
        else {
            panic!("text contents: {read:?}");
        };
        assert_eq!(text, &types_text(&host));
        assert!(text.contains("function tools.lua_run(args) end"));
        assert_eq!(mime_type.as_deref(), Some(LUA_MIME));
        let listed = list(&host);
        assert_eq!(listed[0].uri, TYPES_URI);
        assert_eq!(listed[0].size, Some(text.len() as u64));
    }

    #[test]
    fn one_tool_s_types_are_its_part_of_the_whole() {
        let home = tempfile::tempdir().unwrap();
        let host = Host::open(crate::store::Paths::under(home.path())).unwrap();
        host.registry().load_builtins();
        let read = read(&host, "lmcp://types/tools/read_file.lua").unwrap();
        let ResourceContents::TextResourceContents { text, .. } = &read.contents[0] else {
            panic!("text contents: {read:?}");
        };
        assert!(
            text.contains("function tools.read_file(args) end"),
            "{text}"
        );
        assert!(!text.contains("function tools.write_file"), "{text}");
        let (_, part) = text.split_once('\n').unwrap();
        let (_, part) = part.split_once('\n').unwrap();
        assert!(types_text(&host).contains(part), "a part of the whole file");
        for missing in [
            "lmcp://types/tools/no_such_tool.lua",
            "lmcp://types/tools/read_file",
            "lmcp://types/tools/.lua",
        ] {
            assert!(super::read(&host, missing).is_err(), "{missing}");
        }
    }

    #[test]
    fn only_the_cursors_given_are_taken() {
        let home = tempfile::tempdir().unwrap();
        let host = Host::open(crate::store::Paths::under(home.path())).unwrap();
        host.registry().load_builtins();
        let (first, next) = page(&host, None).unwrap();
        assert_eq!(first.len(), 1, "the types alone");
        assert_eq!(next, None);
        for bad in [
            "0",
            "1",
            "+1",
            "page-0",
            "page-1",
            "page-100",
            "page-+100",
            "page-١٠٠",
        ] {
            assert!(page(&host, Some(bad)).is_err(), "{bad}");
        }
        let mut s = Subscriptions::default();
        let e = s
            .subscribe(&host, "lmcp://types/tools/read_file.lua")
            .unwrap_err();
        assert!(
            e.message.contains("can be read but not subscribed to"),
            "{e:?}"
        );
    }

    #[test]
    fn an_unknown_uri_is_not_found_and_says_what_there_is() {
        let home = tempfile::tempdir().unwrap();
        let host = Host::open(crate::store::Paths::under(home.path())).unwrap();
        let e = read(&host, "lmcp://types/other\u{1b}[31m.lua").unwrap_err();
        assert_eq!(e.code, rmcp::model::ErrorCode::RESOURCE_NOT_FOUND);
        assert!(e.message.contains(TYPES_URI), "{}", e.message);
        assert!(!e.message.contains('\u{1b}'), "escaped: {}", e.message);
    }

    #[test]
    fn an_update_is_told_only_when_the_text_changed() {
        let home = tempfile::tempdir().unwrap();
        let host = Host::open(crate::store::Paths::under(home.path())).unwrap();
        host.registry().load_builtins();
        let mut watched = Watched::now(&host);
        assert!(watched.changed(&host).is_empty(), "nothing changed yet");
        host.registry().announce_change();
        assert!(
            watched.changed(&host).is_empty(),
            "a change that leaves the text"
        );
        let def = serde_json::from_value(serde_json::json!({"name": "user_twice",
            "description": "Doubles x.", "lua": "---@param x number\nreturn params.x * 2"}))
        .unwrap();
        crate::library::custom_tools::save(&host, def, false).unwrap();
        assert_eq!(watched.changed(&host), vec![TYPES_URI]);
        assert!(watched.changed(&host).is_empty(), "told once");
    }

    #[test]
    fn a_session_hears_only_of_what_it_subscribed_to() {
        let home = tempfile::tempdir().unwrap();
        let host = Host::open(crate::store::Paths::under(home.path())).unwrap();
        host.registry().load_builtins();
        let mut none = Subscriptions::to(&host, &["lmcp://types/nope.lua".to_string()]);
        assert!(none.is_empty(), "an unknown URI is not subscribed to");
        let mut some = Subscriptions::to(&host, &[TYPES_URI.to_string()]);
        let mut gone = Subscriptions::default();
        gone.subscribe(&host, TYPES_URI).unwrap();
        gone.unsubscribe(TYPES_URI);
        assert!(gone.subscribe(&host, "file:///etc/passwd").is_err());
        let def = serde_json::from_value(serde_json::json!({"name": "user_thrice",
            "description": "Triples x.", "lua": "---@param x number\nreturn params.x * 3"}))
        .unwrap();
        crate::library::custom_tools::save(&host, def, false).unwrap();
        assert_eq!(some.updates(&host), vec![TYPES_URI]);
        assert!(none.updates(&host).is_empty());
        assert!(gone.updates(&host).is_empty());
    }
}
