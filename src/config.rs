//! The persisted settings: grants, modes, file roots, disabled tools and limits.
//!
//! The config is one JSON file (`Paths::config_file`). It is read at start and changed only through
//! [`update`], which takes the file lock, re-reads the file (another process may have changed it),
//! applies the change and writes atomically. Unknown fields are kept (and written back as they
//! were) and reported as warnings, so a newer lmcp's settings are never lost by an older one.
//!
//! A config that cannot be read fails closed: lmcp runs on [`Config::fail_closed`] (read-only,
//! private, every grant ask) and says why everywhere, and no settings change is written over the
//! broken file until `lmcp config repair` sets it aside under a name of its own.

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::store::{self, FileLock, Paths};

/// Limits of one Lua run: the VM's memory and the output it keeps. Set in the config, read by
/// the Lua engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScriptLimits {
    /// Bytes the Lua state may allocate.
    pub memory: usize,
    /// Bytes of captured output kept.
    pub output: usize,
}

impl Default for ScriptLimits {
    fn default() -> Self {
        ScriptLimits {
            memory: 64 << 20,
            output: 1 << 20,
        }
    }
}

/// What a tool does to the world; the gate's grants and modes key on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    /// Reads only.
    Read,
    /// Changes local state (files, saved programs).
    Write,
    /// Data leaves the machine.
    Send,
}

impl Effect {
    /// The lowercase name used in config keys and output.
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Read => "read",
            Effect::Write => "write",
            Effect::Send => "send",
        }
    }

    /// Whether calls with this effect change state and so need confirmation in programs.
    pub fn changes_state(self) -> bool {
        self != Effect::Read
    }

    /// Parses `read`, `write` or `send`.
    pub fn parse(s: &str) -> Option<Effect> {
        match s {
            "read" => Some(Effect::Read),
            "write" => Some(Effect::Write),
            "send" => Some(Effect::Send),
            _ => None,
        }
    }
}

/// A policy for calls to a tool or to every tool of an effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Grant {
    /// Run without asking.
    Allow,
    /// Run only after a person says yes.
    Ask,
    /// Never run.
    Deny,
}

impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Grant::Allow => "allow",
            Grant::Ask => "ask",
            Grant::Deny => "deny",
        })
    }
}

impl FromStr for Grant {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "allow" => Ok(Grant::Allow),
            "ask" => Ok(Grant::Ask),
            "deny" => Ok(Grant::Deny),
            other => Err(Error::Usage(format!(
                "unknown grant `{other}`; use allow, ask or deny"
            ))),
        }
    }
}

/// The grant key that covers every tool with the destructive annotation.
pub const DESTRUCTIVE_KEY: &str = "destructive";

/// Host-wide switches, each persisted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Modes {
    /// Incognito: no history or run logs are written and no `send` tool runs.
    pub private: bool,
    /// Edit restrictions: no `write` or `send` tool runs.
    pub read_only: bool,
    /// This host has no terminal access: tools that need one (`run_command`) are unavailable.
    pub no_terminal: bool,
    /// Fields this lmcp does not know: kept and written back, reported as warnings.
    #[serde(flatten)]
    pub unknown: BTreeMap<String, Value>,
}

/// Limits the gate enforces on every call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Limits {
    /// How deep calls may nest (a program calling a tool that runs a program...).
    pub max_depth: u32,
    /// How many history entries are kept.
    pub history_size: usize,
    /// Memory a Lua script may use, in MiB.
    pub lua_memory_mb: u32,
    /// How long `lmcp run` lets a script run when neither `--timeout` nor its header says.
    pub lua_timeout_secs: u32,
    /// Captured output a script run may keep, in KiB (MCP and programs run as tools).
    pub lua_output_kb: u32,
    /// Largest input read from a file or stdin (`@FILE`, `-`, scripts, manifests, bundles,
    /// definitions), in MiB.
    pub input_mb: u32,
    /// Largest image imported, in megapixels (checked from its header, before decoding).
    pub image_megapixels: u32,
    /// Most memory one imported image may take decoded, in MiB.
    pub image_decode_mb: u32,
    /// Largest `http_request` response body, in MiB, counted after decompression.
    pub http_response_mb: u32,
    /// Fields this lmcp does not know: kept and written back, reported as warnings.
    #[serde(flatten)]
    pub unknown: BTreeMap<String, Value>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: 16,
            history_size: 200,
            lua_memory_mb: 64,
            lua_timeout_secs: 30,
            lua_output_kb: 1024,
            input_mb: 16,
            image_megapixels: 100,
            image_decode_mb: 512,
            http_response_mb: 8,
            unknown: BTreeMap::new(),
        }
    }
}

impl Limits {
    /// The script limits these settings give.
    pub fn script(&self) -> ScriptLimits {
        ScriptLimits {
            memory: (self.lua_memory_mb.max(1) as usize) << 20,
            output: (self.lua_output_kb.max(1) as usize) << 10,
        }
    }
}

/// Anonymous friction signals.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Signals {
    /// Whether anonymous signals may be sent (and queued) at all.
    pub enabled: bool,
    /// Where reports are POSTed: an https:// URL, or http:// on loopback.
    pub endpoint: Option<String>,
    /// Fields this lmcp does not know: kept and written back, reported as warnings.
    #[serde(flatten)]
    pub unknown: BTreeMap<String, Value>,
}

impl Default for Signals {
    fn default() -> Self {
        Signals {
            enabled: true,
            endpoint: None,
            unknown: BTreeMap::new(),
        }
    }
}

/// Everything in `config.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Config {
    /// Grants keyed by tool name, by effect (`read`, `write`, `send`) or by `destructive`.
    /// A key given twice is an error (JSON would keep the last silently, losing a deny).
    #[serde(deserialize_with = "unique_keys")]
    pub grants: BTreeMap<String, Grant>,
    /// Private, read-only and no-terminal modes.
    pub modes: Modes,
    /// Extra directories the file tools may use, besides the default workspace.
    pub roots: Vec<PathBuf>,
    /// Tools switched off by the user; they stay listed as unavailable.
    pub disabled_tools: Vec<String>,
    /// Limits on every call.
    pub limits: Limits,
    /// Anonymous friction signals: on or off, and where they go.
    pub signals: Signals,
    /// Other MCP servers whose tools lmcp offers behind its gate (`lmcp servers`), by name.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub servers: BTreeMap<String, Server>,
    /// The hosts `http_request` may reach without asking, or never (`lmcp hosts`), by pattern
    /// (see [`HostPattern`]).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub hosts: BTreeMap<String, HostRule>,
    /// Fields this lmcp does not know: kept and written back, reported as warnings.
    #[serde(flatten)]
    pub unknown: BTreeMap<String, Value>,
}

/// What `lmcp hosts` says of the hosts one pattern matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostRule {
    /// `allow` (requests run without asking) or `deny` (never); `ask` is what no rule means.
    pub grant: Grant,
    /// The pattern names one exact host or address, and it may be a private one (loopback,
    /// the local network, link-local, metadata addresses): `lmcp hosts allow H --private`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub private: bool,
}

/// A host and port a request goes to, as its URL says (the host lowercase, an IPv6 address
/// in brackets).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct HostPort {
    /// `api.example.org`, `127.0.0.1`, `[::1]`.
    pub host: String,
    /// The port, the scheme's default when the URL gives none.
    pub port: u16,
    /// Whether the port is the scheme's default (then it is not shown).
    #[serde(skip)]
    pub default_port: bool,
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.default_port {
            f.write_str(&self.host)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// One pattern of `hosts` (and of a program's `---@connect` lines): `*` (every public host),
/// `*.example.org` (its subdomains), `example.org`, `example.org:8443`, `127.0.0.1:8080`,
/// `[::1]:8080`. Names are ASCII (an international name in its `xn--` form), lowercase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPattern {
    /// `*`: every host (the blocked addresses stay blocked).
    Any,
    /// `*.example.org`: every subdomain of the name, not the name itself.
    Subdomains(String),
    /// One host, on any port or on one.
    Exact(String, Option<u16>),
}

impl HostPattern {
    /// Parses a pattern as a person or a program writes it; the message says what is wrong.
    pub fn parse(text: &str) -> std::result::Result<HostPattern, String> {
        let t = text.trim();
        if t == "*" {
            return Ok(HostPattern::Any);
        }
        if t.contains("://") || t.contains('/') {
            return Err(format!(
                "`{t}` is not a host: name only the host (and a port), like `api.example.org` \
                 or `example.org:8443`"
            ));
        }
        if let Some(domain) = t.strip_prefix("*.") {
            let domain = domain.strip_suffix('.').unwrap_or(domain);
            check_host_name(domain)?;
            return Ok(HostPattern::Subdomains(domain.to_ascii_lowercase()));
        }
        if t.contains('*') {
            return Err(format!(
                "`{t}`: a `*` may only stand alone or begin the pattern (`*.example.org`)"
            ));
        }
        let (host, port) = if let Some(rest) = t.strip_prefix('[') {
            let (addr, after) = rest
                .split_once(']')
                .ok_or_else(|| format!("`{t}`: an IPv6 address needs its closing `]`"))?;
            let ip: std::net::Ipv6Addr = addr
                .parse()
                .map_err(|_| format!("`{t}`: `{addr}` is not an IPv6 address"))?;
            let port = match after {
                "" => None,
                p => Some(parse_port(t, p.strip_prefix(':').unwrap_or(p))?),
            };
            // an IPv4 address written as IPv6 is that IPv4 address (as requests are judged)
            match ip.to_ipv4_mapped() {
                Some(v4) => (v4.to_string(), port),
                None => (format!("[{ip}]"), port),
            }
        } else if t.matches(':').count() > 1 {
            return Err(format!(
                "`{t}`: write an IPv6 address in brackets (`[::1]` or `[::1]:8080`)"
            ));
        } else {
            let (h, p) = match t.split_once(':') {
                Some((h, p)) => (h, Some(parse_port(t, p)?)),
                None => (t, None),
            };
            // a fully qualified name's trailing dot names the same host
            let h = match h.strip_suffix('.') {
                Some(name) if !name.is_empty() => name,
                _ => h,
            };
            check_host_name(h)?;
            (h.to_ascii_lowercase(), p)
        };
        Ok(HostPattern::Exact(host, port))
    }

    /// Whether a request to `to` matches.
    pub fn matches(&self, to: &HostPort) -> bool {
        match self {
            HostPattern::Any => true,
            // names only: `*.2` never matches the address 192.0.2.2
            HostPattern::Subdomains(d) => {
                !is_ip_literal(&to.host)
                    && to
                        .host
                        .strip_suffix(d.as_str())
                        .is_some_and(|rest| rest.len() > 1 && rest.ends_with('.'))
            }
            HostPattern::Exact(h, port) => *h == to.host && port.is_none_or(|p| p == to.port),
        }
    }

    /// Whether it names one host (a `--private` grant must).
    pub fn is_exact(&self) -> bool {
        matches!(self, HostPattern::Exact(..))
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostPattern::Any => f.write_str("*"),
            HostPattern::Subdomains(d) => write!(f, "*.{d}"),
            HostPattern::Exact(h, None) => f.write_str(h),
            HostPattern::Exact(h, Some(p)) => write!(f, "{h}:{p}"),
        }
    }
}

/// Whether a host is an IP address (`127.0.0.1`, `[::1]`), not a name.
fn is_ip_literal(host: &str) -> bool {
    host.starts_with('[') || host.parse::<std::net::Ipv4Addr>().is_ok()
}

fn parse_port(pattern: &str, p: &str) -> std::result::Result<u16, String> {
    match p.parse::<u16>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("`{pattern}`: `{p}` is not a port (1 to 65535)")),
    }
}

/// A host name or IPv4 address as a pattern may name it: ASCII letters, digits, `-` and `.`.
fn check_host_name(h: &str) -> std::result::Result<(), String> {
    let ok = !h.is_empty()
        && h.len() <= 253
        && h.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    if ok {
        Ok(())
    } else if !h.is_ascii() {
        Err(format!(
            "`{h}` is not an ASCII host name; write an international name in its `xn--` form"
        ))
    } else {
        Err(format!(
            "`{h}` is not a host name (letters, digits, `-` and `.`)"
        ))
    }
}

/// What the `hosts` rules say of a request to one host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostDecision {
    /// A `deny` rule matches (it wins over any allow): the pattern.
    Denied(String),
    /// An `allow` rule matches; `private` when one names this exact host with `--private`.
    Allowed {
        /// A private address may be reached.
        private: bool,
    },
    /// No rule matches: a person is asked.
    Unlisted,
}

/// Another MCP server lmcp starts (a command) and calls as its client: how to reach it, and
/// what the person allowed of it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Server {
    /// The program and its arguments, for a server on stdio.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// The URL, for a server over Streamable HTTP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Variables set for the server's process, besides the person's own environment.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Names of variables whose values are secret: kept in `CONFIG/servers/NAME.secrets.json`
    /// (readable by the person only), never here.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub secret_env: Vec<String>,
    /// Headers sent to an HTTP server.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Names of headers whose values are secret (kept with the secret variables).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub secret_headers: Vec<String>,
    /// Switched off with `lmcp servers disable`: its tools are not offered.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub disabled: bool,
    /// Its tools may be called over `lmcp serve --http` (the server runs on this machine as the
    /// person, so a remote client reaches it only when the person said so).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub http: bool,
    /// The definition hash of each tool (by its lmcp name) when it was allowed: an allow
    /// applies only while the tool's definition still has this hash.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub pins: BTreeMap<String, String>,
    /// Fields this lmcp does not know: kept and written back, reported as warnings.
    #[serde(flatten)]
    pub unknown: BTreeMap<String, Value>,
}

/// Whether a tool from another server is allowed with the definition it has now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pin {
    /// Its definition is the one that was allowed.
    Holds,
    /// It was allowed with another definition: the server changed it since.
    Changed,
    /// No definition was pinned for it (it is newer than the allow, or the grant was written
    /// by hand).
    Missing,
}

/// The prefix of every tool of another MCP server (`mcp__SERVER__TOOL`).
pub const UPSTREAM_PREFIX: &str = "mcp__";

/// Whether `name` may name a server: `[a-z0-9_]{1,32}`, without `__` (which separates it from
/// its tools' names) and without `_` at either end.
pub fn valid_server_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !name.contains("__")
        && !name.starts_with('_')
        && !name.ends_with('_')
}

/// The server part of an upstream tool's name, when `tool` names one.
pub fn upstream_server(tool: &str) -> Option<&str> {
    let rest = tool.strip_prefix(UPSTREAM_PREFIX)?;
    let (server, name) = rest.split_once("__")?;
    (!server.is_empty() && !name.is_empty()).then_some(server)
}

impl Config {
    /// What lmcp runs on while `config.json` cannot be read: read-only, private (nothing
    /// recorded or sent), only the workspace as a root, and every grant at ask.
    pub fn fail_closed() -> Config {
        let mut c = Config::default();
        c.modes.read_only = true;
        c.modes.private = true;
        for key in ["read", "write", "send", DESTRUCTIVE_KEY] {
            c.grants.insert(key.to_string(), Grant::Ask);
        }
        c
    }

    /// Checks what JSON alone cannot: roots are absolute, limits are in range, the endpoint is
    /// allowed. A config that fails is treated as unreadable (lmcp fails closed).
    pub fn validate(&self) -> std::result::Result<(), String> {
        if let Some(r) = self.roots.iter().find(|r| !r.is_absolute()) {
            return Err(format!(
                "the root `{}` is not an absolute path",
                r.display()
            ));
        }
        let l = &self.limits;
        for (name, value, min) in [
            ("limits.max_depth", l.max_depth as u64, 1),
            ("limits.history_size", l.history_size as u64, 1),
            ("limits.lua_memory_mb", l.lua_memory_mb as u64, 1),
            ("limits.lua_timeout_secs", l.lua_timeout_secs as u64, 1),
            ("limits.lua_output_kb", l.lua_output_kb as u64, 1),
            ("limits.input_mb", l.input_mb as u64, 1),
            ("limits.image_megapixels", l.image_megapixels as u64, 1),
            ("limits.image_decode_mb", l.image_decode_mb as u64, 1),
            ("limits.http_response_mb", l.http_response_mb as u64, 1),
        ] {
            if value < min {
                return Err(format!("{name} is {value}; it must be at least {min}"));
            }
        }
        if let Some(url) = &self.signals.endpoint {
            check_endpoint(url).map_err(|e| format!("signals.endpoint: {e}"))?;
        }
        for (pattern, rule) in &self.hosts {
            let p = HostPattern::parse(pattern).map_err(|e| format!("hosts: {e}"))?;
            if p.to_string() != *pattern {
                return Err(format!("hosts: `{pattern}` is written `{p}`"));
            }
            if rule.grant == Grant::Ask {
                return Err(format!(
                    "hosts.{pattern}: a host rule is allow or deny (no rule means ask)"
                ));
            }
            if rule.private && !(p.is_exact() && rule.grant == Grant::Allow) {
                return Err(format!(
                    "hosts.{pattern}: only an allow of one exact host may be private"
                ));
            }
        }
        for (name, server) in &self.servers {
            if !valid_server_name(name) {
                return Err(format!(
                    "servers: `{name}` is not a server name (lowercase letters, digits and single \
                     underscores, at most 32)"
                ));
            }
            if server.command.is_empty() == server.url.is_none() {
                return Err(format!(
                    "servers.{name}: give either a command or a url, not both or neither"
                ));
            }
            if let Some(url) = &server.url {
                check_endpoint(url).map_err(|e| format!("servers.{name}.url: {e}"))?;
            }
            if let Some(pin) = server
                .pins
                .keys()
                .find(|t| upstream_server(t) != Some(name))
            {
                return Err(format!(
                    "servers.{name}.pins: `{pin}` is not one of this server's tools"
                ));
            }
        }
        Ok(())
    }

    /// The fields this lmcp does not know, as `modes.x`-style paths, for warnings.
    pub fn unknown_fields(&self) -> Vec<String> {
        let mut out: Vec<String> = self.unknown.keys().cloned().collect();
        for (section, map) in [
            ("modes", &self.modes.unknown),
            ("limits", &self.limits.unknown),
            ("signals", &self.signals.unknown),
        ] {
            out.extend(map.keys().map(|k| format!("{section}.{k}")));
        }
        for (name, server) in &self.servers {
            out.extend(server.unknown.keys().map(|k| format!("servers.{name}.{k}")));
        }
        out
    }

    /// The grant that applies to a tool, and where it came from (for people and `grants list`).
    ///
    /// A `deny` at any level (the tool's name, its server, its effect, destructive) wins.
    /// Otherwise a rule for the tool's name decides; then, for another server's tool
    /// (`mcp__SERVER__TOOL`), the rule for its server (`mcp__SERVER`); else the rule for its
    /// effect (built-in defaults: read and write allow, send ask) and, for a destructive tool,
    /// the `destructive` rule (default ask): the stricter of the two. Another server's tool that
    /// no rule names asks whatever its effect: its annotations are the server's claims, and
    /// they never allow anything.
    pub fn grant_for<'a>(
        &self,
        tool: &'a str,
        effect: Effect,
        destructive: bool,
    ) -> (Grant, GrantSource<'a>) {
        let by_effect = self
            .grants
            .get(effect.as_str())
            .copied()
            .unwrap_or(match effect {
                Effect::Read | Effect::Write => Grant::Allow,
                Effect::Send => Grant::Ask,
            });
        let by_effect = (by_effect, GrantSource::Effect(effect));
        let by_destructive = destructive.then(|| {
            (
                self.grants
                    .get(DESTRUCTIVE_KEY)
                    .copied()
                    .unwrap_or(Grant::Ask),
                GrantSource::Destructive,
            )
        });
        let by_tool = self.grants.get(tool).map(|g| (*g, GrantSource::Tool(tool)));
        let server = upstream_server(tool);
        let by_server = server.and_then(|s| {
            let key = &tool[..UPSTREAM_PREFIX.len() + s.len()];
            self.grants.get(key).map(|g| (*g, GrantSource::Server(key)))
        });
        // A deny at any level wins over everything.
        for rule in [by_tool, by_server, Some(by_effect), by_destructive] {
            if let Some((Grant::Deny, source)) = rule {
                return (Grant::Deny, source);
            }
        }
        // Otherwise a rule for the tool's name decides, then its server's; else the stricter
        // of its effect's and, for a destructive tool, the destructive rule.
        if let Some(rule) = by_tool.or(by_server) {
            return rule;
        }
        let rule = match by_destructive {
            Some(d) if d.0 >= by_effect.0 => d,
            _ => by_effect,
        };
        if server.is_some() {
            // no rule names it: it asks (a deny was returned above)
            return (Grant::Ask, GrantSource::Upstream);
        }
        rule
    }

    /// What the `hosts` rules say of a request to `to`: a deny wins, then an allow; an allow
    /// reaches a private address only when a `--private` rule names this exact host.
    pub fn host_decision(&self, to: &HostPort) -> HostDecision {
        let mut allowed = false;
        let mut private = false;
        for (pattern, rule) in &self.hosts {
            let Ok(p) = HostPattern::parse(pattern) else {
                continue;
            };
            if !p.matches(to) {
                continue;
            }
            match rule.grant {
                Grant::Deny => return HostDecision::Denied(pattern.clone()),
                Grant::Allow => {
                    allowed = true;
                    private |= rule.private && p.is_exact();
                }
                Grant::Ask => {}
            }
        }
        if allowed {
            HostDecision::Allowed { private }
        } else {
            HostDecision::Unlisted
        }
    }

    /// Whether the allow of an upstream tool covers the definition it has now (`hash`): an
    /// allow is pinned to the definition the person saw when they gave it.
    pub fn pin(&self, tool: &str, hash: &str) -> Pin {
        let pinned = upstream_server(tool)
            .and_then(|s| self.servers.get(s))
            .and_then(|s| s.pins.get(tool));
        match pinned {
            Some(p) if p == hash => Pin::Holds,
            Some(_) => Pin::Changed,
            None => Pin::Missing,
        }
    }
}

/// Which rule gave a tool its grant, said as "grant for `NAME`", "grant for write tools" or
/// "grant for destructive tools". Made as words only when shown: the gate asks on every call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantSource<'a> {
    /// The rule for the tool's own name.
    Tool(&'a str),
    /// The rule (or the default) for the tool's effect.
    Effect(Effect),
    /// The rule (or the default) for destructive tools.
    Destructive,
    /// The rule for every tool of another MCP server (`mcp__SERVER`).
    Server(&'a str),
    /// No rule names another server's tool: it asks until it is allowed.
    Upstream,
}

impl std::fmt::Display for GrantSource<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GrantSource::Tool(name) => write!(f, "grant for `{name}`"),
            GrantSource::Effect(effect) => write!(f, "grant for {} tools", effect.as_str()),
            GrantSource::Destructive => f.write_str("grant for destructive tools"),
            GrantSource::Server(key) => write!(f, "grant for `{key}` (all its tools)"),
            GrantSource::Upstream => f.write_str(
                "default for other servers' tools (they ask until allowed by name or by server)",
            ),
        }
    }
}

impl Serialize for GrantSource<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Loads the config. A missing file is the default config; one that cannot be parsed is an error
/// naming it, on which the host fails closed ([`Config::fail_closed`]) without touching the file.
pub fn load(paths: &Paths) -> Result<Config> {
    let path = paths.config_file();
    let corrupt = |message: String| Error::Corrupt {
        path: path.clone(),
        message,
    };
    // Only a regular file of sane size is read: a FIFO or device would block every command, a
    // link to nothing is not "no config", and a huge file is not a config anyone wrote.
    match fs::symlink_metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Config::default()),
        Err(e) => return Err(Error::io(&path, e)),
        Ok(_) => {}
    }
    let meta = fs::metadata(&path)
        .map_err(|e| corrupt(format!("it is a link that leads nowhere readable ({e})")))?;
    if !meta.is_file() {
        return Err(corrupt("it is not a regular file".into()));
    }
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(corrupt(format!(
            "it is {} bytes; the limit is {MAX_CONFIG_BYTES}",
            meta.len()
        )));
    }
    let text = fs::read_to_string(&path).map_err(|e| corrupt(e.to_string()))?;
    let config: Config = serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?;
    config.validate().map_err(corrupt)?;
    Ok(config)
}

/// Reads a map, refusing a key given twice.
fn unique_keys<'de, D>(d: D) -> std::result::Result<BTreeMap<String, Grant>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct Visit;
    impl<'de> serde::de::Visitor<'de> for Visit {
        type Value = BTreeMap<String, Grant>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a map of grants")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> std::result::Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some((k, v)) = map.next_entry::<String, Grant>()? {
                if out.insert(k.clone(), v).is_some() {
                    return Err(serde::de::Error::custom(format!(
                        "the grant `{k}` is given twice"
                    )));
                }
            }
            Ok(out)
        }
    }
    d.deserialize_map(Visit)
}

/// Largest `config.json` read.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Changes the config under the file lock: re-read, apply `change`, write atomically. A file
/// that cannot be read is refused, never written over: `lmcp config repair` sets it aside first.
pub fn update<T>(
    paths: &Paths,
    change: impl FnOnce(&mut Config) -> Result<T>,
) -> Result<(Config, T)> {
    let path = paths.config_file();
    let _lock = FileLock::acquire(&path)?;
    let mut config = match load(paths) {
        Ok(c) => c,
        Err(Error::Corrupt { path, message }) => {
            return Err(Error::Refused(format!(
                "{} cannot be read ({message}), so lmcp runs read-only with every grant at ask \
                 and changes nothing in it. Fix it by hand, or run `lmcp config repair` to set it \
                 aside and start from the defaults",
                path.display()
            )));
        }
        Err(e) => return Err(e),
    };
    let out = change(&mut config)?;
    store::write_json(&path, &config)?;
    Ok((config, out))
}

/// Sets a broken config aside under a name of its own and writes the defaults; the new name, or
/// `None` when the config was fine (nothing is changed then).
pub fn repair(paths: &Paths) -> Result<Option<PathBuf>> {
    let path = paths.config_file();
    let _lock = FileLock::acquire(&path)?;
    match load(paths) {
        Ok(_) => Ok(None),
        Err(Error::Corrupt { .. }) => {
            let aside = store::quarantine(&path)?;
            store::write_json(&path, &Config::default())?;
            Ok(Some(aside))
        }
        Err(e) => Err(e),
    }
}

/// Checks an endpoint: HTTPS anywhere, plain HTTP only on loopback.
pub fn check_endpoint(url: &str) -> Result<()> {
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("https://") && url.len() > "https://".len() {
        return Ok(());
    }
    if let Some(rest) = lower.strip_prefix("http://") {
        let host = rest.split(['/', '?']).next().unwrap_or("");
        let host = if host.starts_with('[') {
            host.split(']')
                .next()
                .map(|h| format!("{h}]"))
                .unwrap_or_default()
        } else {
            host.split(':').next().unwrap_or("").to_string()
        };
        let loopback_ip = host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback());
        if matches!(host.as_str(), "localhost" | "[::1]") || loopback_ip {
            return Ok(());
        }
    }
    Err(Error::Usage(format!(
        "`{url}` is not allowed: use an https:// URL, or http:// only on loopback (127.0.0.1, localhost, [::1])"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grant_defaults_follow_the_contract() {
        let c = Config::default();
        assert_eq!(c.grant_for("t", Effect::Read, false).0, Grant::Allow);
        assert_eq!(c.grant_for("t", Effect::Write, false).0, Grant::Allow);
        assert_eq!(c.grant_for("t", Effect::Send, false).0, Grant::Ask);
        assert_eq!(c.grant_for("t", Effect::Write, true).0, Grant::Ask);
    }

    #[test]
    fn tool_rule_beats_the_stricter_of_destructive_and_effect() {
        let mut c = Config::default();
        c.grants.insert("write".into(), Grant::Deny);
        c.grants.insert(DESTRUCTIVE_KEY.into(), Grant::Allow);
        assert_eq!(c.grant_for("w", Effect::Write, false).0, Grant::Deny);
        // `deny write` stops destructive writes too, whatever the destructive rule says
        assert_eq!(c.grant_for("w", Effect::Write, true).0, Grant::Deny);
        // a send stays ask (its default) even when destructive tools are allowed
        assert_eq!(c.grant_for("s", Effect::Send, true).0, Grant::Ask);
        c.grants.insert("write".into(), Grant::Allow);
        c.grants.insert(DESTRUCTIVE_KEY.into(), Grant::Ask);
        assert_eq!(c.grant_for("w", Effect::Write, true).0, Grant::Ask);
        c.grants.insert("w".into(), Grant::Allow);
        let (g, why) = c.grant_for("w", Effect::Write, true);
        assert_eq!(g, Grant::Allow);
        assert_eq!(why.to_string(), "grant for `w`");
        assert_eq!(serde_json::json!(why), serde_json::json!("grant for `w`"));
        // but a deny at the effect or destructive level beats a tool's allow
        c.grants.insert("write".into(), Grant::Deny);
        let (g, why) = c.grant_for("w", Effect::Write, true);
        assert_eq!(g, Grant::Deny);
        assert_eq!(why.to_string(), "grant for write tools");
        c.grants.insert("write".into(), Grant::Allow);
        c.grants.insert(DESTRUCTIVE_KEY.into(), Grant::Deny);
        assert_eq!(c.grant_for("w", Effect::Write, true).0, Grant::Deny);
        assert_eq!(c.grant_for("w", Effect::Write, false).0, Grant::Allow);
    }

    #[test]
    fn a_corrupt_file_is_never_written_over_and_repair_sets_it_aside() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::under(dir.path());
        std::fs::create_dir_all(&paths.config_dir).unwrap();
        std::fs::write(paths.config_file(), "{broken").unwrap();
        assert!(matches!(load(&paths), Err(Error::Corrupt { .. })));
        let e = update(&paths, |c| {
            c.modes.private = true;
            Ok(())
        })
        .unwrap_err();
        assert!(e.to_string().contains("lmcp config repair"), "{e}");
        assert_eq!(
            std::fs::read_to_string(paths.config_file()).unwrap(),
            "{broken"
        );
        let aside = repair(&paths).unwrap().unwrap();
        assert_eq!(std::fs::read_to_string(&aside).unwrap(), "{broken");
        assert_eq!(load(&paths).unwrap(), Config::default());
        assert_eq!(repair(&paths).unwrap(), None, "a good config is left alone");
        // a second broken file gets a name of its own
        std::fs::write(paths.config_file(), "{broken again").unwrap();
        let second = repair(&paths).unwrap().unwrap();
        assert_ne!(second, aside);
        assert_eq!(std::fs::read_to_string(&aside).unwrap(), "{broken");
    }

    #[test]
    fn a_server_url_by_hand_meets_the_same_rule_as_one_added() {
        for url in ["http://192.0.2.1:9/mcp", "file:///etc/passwd"] {
            let c: Config = serde_json::from_value(serde_json::json!({
                "servers": {"s": {"url": url}}
            }))
            .unwrap();
            let e = c.validate().unwrap_err();
            assert!(e.contains("servers.s.url"), "{e}");
        }
    }

    #[test]
    fn unknown_fields_are_kept_and_named() {
        let c: Config =
            serde_json::from_str(r#"{"grantz": {}, "modes": {"read_only": true, "fast": 1}}"#)
                .unwrap();
        assert!(c.modes.read_only);
        assert_eq!(c.unknown_fields(), vec!["grantz", "modes.fast"]);
        let back = serde_json::to_value(&c).unwrap();
        assert_eq!(back["modes"]["fast"], 1);
        assert!(back.get("grantz").is_some());
    }

    #[test]
    fn host_patterns_parse_match_and_deny_wins() {
        let to = |host: &str, port: u16| HostPort {
            host: host.into(),
            port,
            default_port: port == 443,
        };
        for (text, shown) in [
            ("*", "*"),
            ("*.Example.org", "*.example.org"),
            ("API.example.org", "api.example.org"),
            ("example.org:8443", "example.org:8443"),
            ("127.0.0.1:8080", "127.0.0.1:8080"),
            ("[0:0::1]:8080", "[::1]:8080"),
        ] {
            assert_eq!(HostPattern::parse(text).unwrap().to_string(), shown);
        }
        for bad in [
            "",
            "a.*.org",
            "https://a.org",
            "a.org/x",
            "a.org:0",
            "::1",
            "é.org",
            "a..b",
        ] {
            assert!(HostPattern::parse(bad).is_err(), "{bad}");
        }
        let sub = HostPattern::parse("*.example.org").unwrap();
        assert!(sub.matches(&to("a.example.org", 443)));
        assert!(sub.matches(&to("a.b.example.org", 443)));
        assert!(!sub.matches(&to("example.org", 443)));
        assert!(!sub.matches(&to("badexample.org", 443)));
        let port = HostPattern::parse("example.org:8443").unwrap();
        assert!(port.matches(&to("example.org", 8443)));
        assert!(!port.matches(&to("example.org", 443)));

        let mut c = Config::default();
        assert_eq!(c.host_decision(&to("a.org", 443)), HostDecision::Unlisted);
        let rule = |grant, private| HostRule { grant, private };
        c.hosts.insert("*".into(), rule(Grant::Allow, false));
        c.hosts.insert("evil.org".into(), rule(Grant::Deny, false));
        c.hosts
            .insert("127.0.0.1:8080".into(), rule(Grant::Allow, true));
        assert!(c.validate().is_ok());
        assert_eq!(
            c.host_decision(&to("a.org", 443)),
            HostDecision::Allowed { private: false }
        );
        assert_eq!(
            c.host_decision(&to("evil.org", 443)),
            HostDecision::Denied("evil.org".into())
        );
        assert_eq!(
            c.host_decision(&to("127.0.0.1", 8080)),
            HostDecision::Allowed { private: true }
        );
        assert_eq!(
            c.host_decision(&to("127.0.0.1", 8081)),
            HostDecision::Allowed { private: false }
        );
        // a config that says what lmcp would not write fails to load (and lmcp fails closed)
        for (key, r) in [
            ("*.a.org", rule(Grant::Allow, true)),
            ("a.org", rule(Grant::Ask, false)),
            ("A.org", rule(Grant::Allow, false)),
            ("http://a.org", rule(Grant::Allow, false)),
        ] {
            let mut bad = Config::default();
            bad.hosts.insert(key.into(), r);
            assert!(bad.validate().is_err(), "{key}");
        }
    }

    #[test]
    fn failing_closed_is_read_only_private_and_asks() {
        let c = Config::fail_closed();
        assert!(c.modes.read_only && c.modes.private);
        for e in [Effect::Read, Effect::Write, Effect::Send] {
            assert_eq!(c.grant_for("t", e, false).0, Grant::Ask);
        }
    }
}
