//! A skill package as given: SKILL.md (YAML front matter and the prompt), scripts and
//! references, checked whole before anything is written.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{MAX_FILE_BYTES, MAX_REFERENCE_BYTES, MAX_REFERENCES, bad};

use crate::error::Result;
use crate::program::{Body, Intent, Policy, Program, Source, compile};
use crate::registry::{Kind, Registry};

/// A config field's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FieldType {
    /// Free text.
    Text,
    /// A number.
    Number,
    /// One of `values`.
    Select,
    /// On or off.
    Switch,
}

/// One config field a skill declares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigField {
    /// Shown to people.
    pub title: String,
    /// Its type.
    #[serde(rename = "type")]
    pub kind: FieldType,
    /// Whether its value is sensitive (stored apart, never shown).
    #[serde(default)]
    pub secret: bool,
    /// Whether scripts need a value.
    #[serde(default)]
    pub required: bool,
    /// The value when none is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// The choices of a select field.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<Value>,
}

impl ConfigField {
    pub(super) fn accepts(&self, v: &Value) -> bool {
        match self.kind {
            FieldType::Text => v.is_string(),
            FieldType::Number => v.is_number(),
            FieldType::Switch => v.is_boolean(),
            FieldType::Select => self.values.contains(v),
        }
    }

    /// Reads a value from command-line text.
    pub fn from_text(&self, text: &str) -> std::result::Result<Value, String> {
        let v = match self.kind {
            FieldType::Text => Value::String(text.to_string()),
            FieldType::Number => text
                .trim()
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
                .ok_or(format!("`{text}` is not a number"))?,
            FieldType::Switch => match text.trim() {
                "true" | "on" | "yes" | "1" => json!(true),
                "false" | "off" | "no" | "0" => json!(false),
                _ => return Err(format!("`{text}` is not on or off")),
            },
            FieldType::Select => self
                .values
                .iter()
                .find(|v| v.as_str() == Some(text) || v.to_string().as_str() == text)
                .cloned()
                .ok_or_else(|| {
                    format!(
                        "`{text}` is not one of {}",
                        Value::Array(self.values.clone())
                    )
                })?,
        };
        Ok(v)
    }
}

/// A parsed `SKILL.md`.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillMd {
    /// Lowercase letters, digits and hyphens, at most 64.
    pub name: String,
    /// What the skill is for.
    pub description: String,
    /// Its version, if given.
    pub version: Option<String>,
    /// Config fields, in declaration order.
    pub config: Vec<(String, ConfigField)>,
    /// The Agent Skills `license`: a license's name or the file of the package that holds it.
    /// Kept and shown, as the format asks.
    pub license: Option<String>,
    /// The Agent Skills `compatibility`: what the skill needs of its environment, as its author
    /// wrote it. Kept and shown.
    pub compatibility: Option<String>,
    /// The Agent Skills `allowed-tools`, one entry a tool (`Bash(git:*)`, `Read`). They name
    /// another host's tools, so they grant nothing here: what a script may call is its
    /// `---@uses` line, through the gate. Kept and shown with [`ALLOWED_TOOLS_NOTE`].
    pub allowed_tools: Vec<String>,
    /// The Agent Skills `metadata`: text by key, in the order written. Kept and shown.
    pub metadata: Vec<(String, String)>,
    /// The Markdown body: the prompt.
    pub prompt: String,
}

/// What is said wherever a skill's `allowed-tools` is shown: the names are another host's
/// tools, and a person reading "allowed" must not think lmcp lets the skill use them.
pub const ALLOWED_TOOLS_NOTE: &str = "allowed-tools names another host's tools (Bash, Read, ...) \
     and grants nothing in lmcp: a script may call only the tools its ---@uses line lists, \
     through the gate";

/// The front matter keys SKILL.md may have: the Agent Skills format's, then lmcp's own.
const FRONT_MATTER_KEYS: &[&str] = &[
    "name",
    "description",
    "license",
    "compatibility",
    "allowed-tools",
    "metadata",
    "version",
    "config",
];

/// Longest `license` text.
pub const MAX_LICENSE: usize = 1024;
/// Longest `compatibility` text (as the Agent Skills format has it).
pub const MAX_COMPATIBILITY: usize = 500;

pub(super) fn yaml_to_json(y: &yaml_rust2::Yaml) -> Value {
    use yaml_rust2::Yaml;
    match y {
        Yaml::Real(r) => r
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::Null, Value::Number),
        Yaml::Integer(i) => json!(i),
        Yaml::String(s) => json!(s),
        Yaml::Boolean(b) => json!(b),
        Yaml::Array(a) => Value::Array(a.iter().map(yaml_to_json).collect()),
        Yaml::Hash(h) => Value::Object(
            h.iter()
                .map(|(k, v)| {
                    let key = match k {
                        Yaml::String(s) => s.clone(),
                        other => yaml_to_json(other).to_string(),
                    };
                    (key, yaml_to_json(v))
                })
                .collect(),
        ),
        Yaml::Null | Yaml::BadValue | Yaml::Alias(_) => Value::Null,
    }
}

/// Whether a skill name is valid: lowercase letters, digits and hyphens, 1-64 characters, no
/// hyphen first, last or twice in a row (as the Agent Skills format has it). Two hyphens would
/// also make one skill's tool names (`skill__a__b__x` for `a--b`) start like another's (`a`).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

/// Longest skill description (as the Agent Skills format has it).
pub const MAX_SKILL_DESCRIPTION: usize = 1024;

/// Largest front matter accepted, in bytes.
pub const MAX_FRONT_MATTER: usize = 64 << 10;
/// Deepest nesting of mappings and lists in the front matter.
pub const MAX_FRONT_MATTER_DEPTH: usize = 16;

/// Walks the front matter's YAML events before anything is built from them: no aliases (an
/// alias bomb expands a few hundred bytes into gigabytes), bounded size and nesting.
fn check_front_matter(front: &str) -> std::result::Result<(), String> {
    use yaml_rust2::parser::{Event, EventReceiver, Parser};
    if front.len() > MAX_FRONT_MATTER {
        return Err(format!(
            "the front matter is {} bytes; the limit is {MAX_FRONT_MATTER}",
            front.len()
        ));
    }
    #[derive(Default)]
    struct Walk {
        depth: usize,
        deepest: usize,
        aliases: usize,
    }
    impl EventReceiver for Walk {
        fn on_event(&mut self, ev: Event) {
            match ev {
                Event::Alias(_) => self.aliases += 1,
                Event::SequenceStart(..) | Event::MappingStart(..) => {
                    self.depth += 1;
                    self.deepest = self.deepest.max(self.depth);
                }
                Event::SequenceEnd | Event::MappingEnd => self.depth = self.depth.saturating_sub(1),
                _ => {}
            }
        }
    }
    let mut walk = Walk::default();
    Parser::new_from_str(front)
        .load(&mut walk, true)
        .map_err(|e| format!("the front matter is not valid YAML: {e}"))?;
    if walk.aliases > 0 {
        return Err(
            "the front matter uses YAML aliases (`*name`), which SKILL.md does not allow; write \
             the values out"
                .into(),
        );
    }
    if walk.deepest > MAX_FRONT_MATTER_DEPTH {
        return Err(format!(
            "the front matter nests {} levels deep; the limit is {MAX_FRONT_MATTER_DEPTH}",
            walk.deepest
        ));
    }
    Ok(())
}

/// Parses `SKILL.md`: YAML front matter between `---` lines, then the prompt.
pub fn parse_skill_md(text: &str) -> Result<SkillMd> {
    let what = "SKILL.md";
    let body = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = body
        .strip_prefix("---\n")
        .or_else(|| body.strip_prefix("---\r\n"))
        .ok_or_else(|| {
            bad(
                what,
                "it must start with YAML front matter between `---` lines",
            )
        })?;
    let end = rest
        .find("\n---\n")
        .or_else(|| rest.find("\n---\r\n"))
        .map(|i| (i, 5))
        .or_else(|| rest.ends_with("\n---").then(|| (rest.len() - 4, 4)))
        .ok_or_else(|| bad(what, "the front matter has no closing `---` line"))?;
    let front = &rest[..end.0];
    // Windows line ends read as Unix ones: a prompt shown or sent has no stray `\r`
    let prompt = rest[end.0 + end.1..]
        .trim_start_matches(['\r', '\n'])
        .replace("\r\n", "\n");
    check_front_matter(front).map_err(|m| bad(what, m))?;
    let docs = yaml_rust2::YamlLoader::load_from_str(front)
        .map_err(|e| bad(what, format!("the front matter is not valid YAML: {e}")))?;
    let doc = docs.first().map(yaml_to_json).unwrap_or(Value::Null);
    let Value::Object(m) = doc else {
        return Err(bad(
            what,
            "the front matter must be a YAML mapping (name: ..., description: ...)",
        ));
    };
    for key in m.keys() {
        if !FRONT_MATTER_KEYS.contains(&key.as_str()) {
            return Err(bad(
                what,
                format!(
                    "unknown front matter key `{}`; use {}",
                    crate::text::clip(key, 64),
                    FRONT_MATTER_KEYS.join(", ")
                ),
            ));
        }
    }
    let name = m
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if !valid_name(&name) {
        return Err(bad(
            what,
            format!(
                "`name` must be lowercase letters, digits and single hyphens (not first or last), at most 64 characters; got `{name}`"
            ),
        ));
    }
    let description = m
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim()
        .to_string();
    if description.is_empty() {
        return Err(bad(
            what,
            "`description` is required: say what the skill does",
        ));
    }
    if description.chars().count() > MAX_SKILL_DESCRIPTION {
        return Err(bad(
            what,
            format!(
                "the description is {} characters; the limit is {MAX_SKILL_DESCRIPTION}",
                description.chars().count()
            ),
        ));
    }
    let version = match m.get("version") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => Some(other.to_string()),
    };
    let license = text_field(&m, "license", MAX_LICENSE)?;
    let compatibility = text_field(&m, "compatibility", MAX_COMPATIBILITY)?;
    let allowed_tools = allowed_tools(m.get("allowed-tools"))?;
    let metadata = metadata(m.get("metadata"))?;
    let mut config = Vec::new();
    match m.get("config") {
        None | Some(Value::Null) => {}
        Some(Value::Object(fields)) => {
            for (key, f) in fields {
                let at = format!("at /config/{key}");
                if !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') || key.is_empty() {
                    return Err(bad(
                        what,
                        format!("{at}: field names are letters, digits and _"),
                    ));
                }
                let Value::Object(f) = f else {
                    return Err(bad(
                        what,
                        format!("{at}: must be a mapping (title, type, ...)"),
                    ));
                };
                let kind: FieldType =
                    serde_json::from_value(f.get("type").cloned().unwrap_or(json!("text")))
                        .map_err(|_| {
                            bad(
                                what,
                                format!("{at}/type: must be text, number, select or switch"),
                            )
                        })?;
                let values: Vec<Value> = match f.get("values") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(Value::Array(a)) => a.clone(),
                    Some(_) => return Err(bad(what, format!("{at}/values: must be a list"))),
                };
                if kind == FieldType::Select && values.is_empty() {
                    return Err(bad(what, format!("{at}: a select field needs `values`")));
                }
                let field = ConfigField {
                    title: f
                        .get("title")
                        .and_then(Value::as_str)
                        .unwrap_or(key)
                        .to_string(),
                    kind,
                    secret: f.get("secret").and_then(Value::as_bool).unwrap_or(false),
                    required: f.get("required").and_then(Value::as_bool).unwrap_or(false),
                    default: f.get("default").filter(|d| !d.is_null()).cloned(),
                    values,
                };
                if let Some(d) = &field.default
                    && !field.accepts(d)
                {
                    return Err(bad(
                        what,
                        format!("{at}/default: {d} does not fit a {:?} field", field.kind),
                    ));
                }
                if field.secret && field.default.is_some() {
                    return Err(bad(
                        what,
                        format!(
                            "{at}: a secret field cannot have a default (it would be shared in the package)"
                        ),
                    ));
                }
                config.push((key.clone(), field));
            }
        }
        Some(_) => {
            return Err(bad(
                what,
                "`config` must be a mapping of field names to {title, type, ...}",
            ));
        }
    }
    Ok(SkillMd {
        name,
        description,
        version,
        config,
        license,
        compatibility,
        allowed_tools,
        metadata,
        prompt,
    })
}

/// An optional front matter text of at most `max` characters (a number is taken as its text).
fn text_field(m: &serde_json::Map<String, Value>, key: &str, max: usize) -> Result<Option<String>> {
    let text = match m.get(key) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) => s.trim().to_string(),
        Some(Value::Number(n)) => n.to_string(),
        Some(_) => {
            return Err(bad(
                "SKILL.md",
                format!("`{key}` must be text, like `{key}: ...` on one line"),
            ));
        }
    };
    let chars = text.chars().count();
    if chars > max {
        return Err(bad(
            "SKILL.md",
            format!("`{key}` is {chars} characters; the limit is {max}"),
        ));
    }
    Ok((!text.is_empty()).then_some(text))
}

/// `allowed-tools` as the Agent Skills format writes it (one line, tools apart by spaces:
/// `Bash(git add:*) Read`), as Claude Code also does (apart by commas), or as a YAML list. A
/// space inside parentheses belongs to its tool.
fn allowed_tools(v: Option<&Value>) -> Result<Vec<String>> {
    let split = |line: &str| -> Vec<String> {
        let mut out = Vec::new();
        let (mut cur, mut depth) = (String::new(), 0usize);
        for c in line.chars() {
            match c {
                '(' => depth += 1,
                ')' => depth = depth.saturating_sub(1),
                _ => {}
            }
            if depth == 0 && (c.is_whitespace() || c == ',') {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            } else {
                cur.push(c);
            }
        }
        if !cur.is_empty() {
            out.push(cur);
        }
        out
    };
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(split(s)),
        Some(Value::Array(items)) => {
            let mut out = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let Some(t) = item.as_str() else {
                    return Err(bad(
                        "SKILL.md",
                        format!("at /allowed-tools/{i}: each tool is a name, like `Read`"),
                    ));
                };
                out.extend(split(t));
            }
            Ok(out)
        }
        Some(_) => Err(bad(
            "SKILL.md",
            "`allowed-tools` is a line of tool names apart by spaces (`Read Grep`) or a list",
        )),
    }
}

/// `metadata`: a mapping of text by key (the Agent Skills format's); a number or a switch is
/// kept as its text, a nested mapping or list is refused.
fn metadata(v: Option<&Value>) -> Result<Vec<(String, String)>> {
    let m = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(m)) => m,
        Some(_) => {
            return Err(bad(
                "SKILL.md",
                "`metadata` must be a mapping of text by key (author: ..., version: ...)",
            ));
        }
    };
    let mut out = Vec::new();
    for (key, value) in m {
        let text = match value {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Null => String::new(),
            Value::Array(_) | Value::Object(_) => {
                return Err(bad(
                    "SKILL.md",
                    format!(
                        "at /metadata/{}: values are text, not a list or a mapping",
                        crate::text::clip(key, 64)
                    ),
                ));
            }
        };
        out.push((key.clone(), text));
    }
    Ok(out)
}

/// A script of a package, checked.
#[derive(Debug, Clone)]
pub struct SkillScript {
    /// Its name (the file name without `.lua`).
    pub name: String,
    /// Its source.
    pub code: String,
    /// The program it is, compiled on its own (its skill's modules and config are added when
    /// it is called: [`Program::in_package`]).
    pub program: Program,
    /// The skill's other scripts that `require` it by name (`require("words")`). A script
    /// another one requires is a module: it returns a table of helpers to its requirers, is
    /// loaded only by `require`, and is not a tool (called on its own, it would return
    /// functions, which no caller can take) (#34).
    pub required_by: Vec<String>,
}

impl SkillScript {
    /// Whether it is a module of its skill (see [`SkillScript::required_by`]), not a tool.
    pub fn is_module(&self) -> bool {
        !self.required_by.is_empty()
    }
}

/// How skill scripts are compiled: `---@uses` may name leaf tools only, a script without it
/// may call read tools only, and it runs for [`super::DEFAULT_TIMEOUT`] unless its header says.
pub const POLICY: Policy = Policy {
    what: "skill script",
    intent: Intent::Save,
    header_name: true,
    callable: &[Kind::Leaf],
    not_steps: &[],
    max_steps: 0,
    unmarked_required: false,
    default_timeout: Some(super::DEFAULT_TIMEOUT),
    check_literal_calls: false,
};

/// A whole, checked package.
#[derive(Debug, Clone)]
pub struct Package {
    /// `SKILL.md`, parsed.
    pub md: SkillMd,
    /// `SKILL.md` as given.
    pub skill_md: String,
    /// The scripts.
    pub scripts: Vec<SkillScript>,
    /// The references: name and content.
    pub references: Vec<(String, String)>,
}

pub(super) fn valid_script_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 40
        && n.starts_with(|c: char| c.is_ascii_lowercase())
        && n.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Whether a reference name is a plain relative path: at most [`MAX_REFERENCE_DEPTH`] parts
/// apart by `/` (`reference.md`, `scripts/helper.py`), each of letters, digits, `.`, `_` and
/// `-`, none empty or hidden (so no `..`), at most 200 bytes in all. An Agent Skills folder's
/// files keep their place in it this way.
pub(super) fn valid_reference_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 200
        && n.split('/').count() <= super::MAX_REFERENCE_DEPTH
        && n.split('/').all(|part| {
            !part.is_empty()
                && part.len() <= 100
                && !part.starts_with('.')
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        })
}

/// The file a script in another language would be in Lua (`search.js` → `search.lua`,
/// `My-Search.ts` → `my_search.lua`), for the message that refuses it; `None` when its name
/// makes no script name.
fn lua_form(stem: &str) -> Option<String> {
    let mut name = String::new();
    for c in stem.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            name.push(c);
        } else if !name.is_empty() && !name.ends_with('_') {
            name.push('_');
        }
    }
    let name = name.trim_end_matches('_').to_string();
    valid_script_name(&name).then_some(name)
}

/// Why a script's file name is refused: scripts are Lua (a `search.js` is named in its `.lua`
/// form, as the skill contract's own example needs), and a Lua script's name is a tool's.
fn script_name_problem(skill: &str, file: &str) -> String {
    let name = file.strip_suffix(".lua").unwrap_or(file);
    if let Some((stem, ext)) = name.rsplit_once('.') {
        let ext = crate::text::clip(ext, 16);
        return match lua_form(stem) {
            Some(lua) => format!(
                "scripts are Lua, run in lmcp's sandbox, and a `.{ext}` file is never run: \
                 write it in Lua as `{lua}.lua` (it installs as `{lua}`, the tool `{}`), or \
                 send the file in `references` to keep it as text to read",
                super::tool_name(skill, &lua)
            ),
            None => format!(
                "scripts are Lua, run in lmcp's sandbox, and a `.{ext}` file is never run: \
                 write it in Lua as `NAME.lua` (lowercase letters, digits and _), or send the \
                 file in `references` to keep it as text to read"
            ),
        };
    }
    "script names are lowercase letters, digits and _ (at most 40), like `make_album` (the \
     file `make_album.lua`)"
        .to_string()
}

/// Checks a package against the tools registered now; nothing is written.
pub fn check_package(
    registry: &Registry,
    skill_md: &str,
    scripts: &[(String, String)],
    references: &[(String, String)],
) -> Result<Package> {
    let md = parse_skill_md(skill_md)?;
    let mut checked = Vec::new();
    for (i, (file, code)) in scripts.iter().enumerate() {
        let name = file.strip_suffix(".lua").unwrap_or(file);
        let at = format!("at /scripts/{i} (`{}`)", crate::text::clip(file, 100));
        if !valid_script_name(name) {
            return Err(bad(
                &md.name,
                format!("{at}: {}", script_name_problem(&md.name, file)),
            ));
        }
        if checked.iter().any(|s: &SkillScript| s.name == name) {
            return Err(bad(
                &md.name,
                format!("{at}: two scripts are named `{name}`"),
            ));
        }
        if code.len() > MAX_FILE_BYTES {
            return Err(bad(&md.name, format!("{at}: larger than 1 MiB")));
        }
        let source = Source::lua_file(
            &super::tool_name(&md.name, name),
            &format!("{name}.lua"),
            code.clone(),
            POLICY,
        );
        let program = compile(source, registry).map_err(|p| bad(&md.name, format!("{at}: {p}")))?;
        checked.push(SkillScript {
            name: name.to_string(),
            code: code.clone(),
            program,
            required_by: Vec::new(),
        });
    }
    mark_modules(&md.name, &mut checked)?;
    check_calls(registry, &md.name, &checked)?;
    let mut refs: Vec<(String, String)> = Vec::new();
    let mut total = 0usize;
    for (i, (name, content)) in references.iter().enumerate() {
        if !valid_reference_name(name) {
            return Err(bad(
                &md.name,
                format!(
                    "at /references/{i}: `{}` is not a plain file name or relative path (parts of \
                     letters, digits, . _ - apart by /, none hidden, at most {} deep)",
                    crate::text::clip(name, 100),
                    super::MAX_REFERENCE_DEPTH
                ),
            ));
        }
        let at = format!("at /references/{i} (`{name}`)");
        if i >= MAX_REFERENCES {
            return Err(bad(
                &md.name,
                format!(
                    "{at}: a skill has at most {MAX_REFERENCES} references; leave out the files \
                     it does not need"
                ),
            ));
        }
        if content.len() > MAX_FILE_BYTES {
            return Err(bad(
                &md.name,
                format!(
                    "{at}: it is {} bytes; the limit is {MAX_FILE_BYTES} bytes (1 MiB) a file",
                    content.len()
                ),
            ));
        }
        total += content.len();
        if total > MAX_REFERENCE_BYTES {
            return Err(bad(
                &md.name,
                format!(
                    "{at}: with it the references come to {total} bytes; the limit is \
                     {MAX_REFERENCE_BYTES} bytes (8 MiB) for all of a skill's references"
                ),
            ));
        }
        if refs.iter().any(|(n, _)| n == name) {
            return Err(bad(
                &md.name,
                format!("at /references/{i}: two references are named `{name}`"),
            ));
        }
        refs.push((name.clone(), content.clone()));
    }
    // Each script but a module becomes a tool: its name must fit, and must not be another
    // skill's already.
    for (i, script) in checked.iter().enumerate() {
        if script.is_module() {
            continue;
        }
        let tool = super::tool_name(&md.name, &script.name);
        if crate::registry::check_name(&tool).is_err() {
            return Err(bad(
                &md.name,
                format!(
                    "at /scripts/{i}: its tool name `{tool}` is longer than 64 characters; \
                     shorten the skill's or the script's name"
                ),
            ));
        }
        if let Some(other) = registry.get(&tool)
            && !other.spec().title.starts_with(&format!("{} / ", md.name))
        {
            return Err(bad(
                &md.name,
                format!(
                    "at /scripts/{i}: its tool name `{tool}` is already the tool of `{}`; \
                     rename the skill or the script",
                    other.spec().title
                ),
            ));
        }
    }
    Ok(Package {
        md,
        skill_md: skill_md.to_string(),
        scripts: checked,
        references: refs,
    })
}

/// Marks the scripts other scripts of the skill `require` by name as modules. A module takes no
/// `---@param`: its requirers call its functions, and no caller gives it params; one that
/// declares them was meant as a tool, so the skill is refused rather than guessed about.
fn mark_modules(skill: &str, scripts: &mut [SkillScript]) -> Result<()> {
    let requires: Vec<(String, Vec<String>)> = scripts
        .iter()
        .map(|s| {
            let wanted = crate::script::literal::modules_required(&s.code)
                .into_iter()
                .map(|n| n.name)
                .collect();
            (s.name.clone(), wanted)
        })
        .collect();
    for (i, script) in scripts.iter_mut().enumerate() {
        script.required_by = requires
            .iter()
            .filter(|(by, wanted)| *by != script.name && wanted.contains(&script.name))
            .map(|(by, _)| by.clone())
            .collect();
        if script.is_module() && !script.program.params.is_empty() {
            return Err(bad(
                skill,
                format!(
                    "at /scripts/{i} (`{}.lua`): {} `require`s it, so it is a module (a table of \
                     helpers), not a tool, and takes no `---@param`; drop its params, or move \
                     what the others need into a module of its own",
                    script.name,
                    script.required_by.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// Refuses a package one of whose scripts, or a module it requires (at any depth), calls a
/// tool by literal name that the script's `---@uses` does not allow: a module runs under the
/// `---@uses` of the script that requires it, so each script must cover what its modules call
/// (#34). A module is not checked on its own: its own `---@uses` means nothing when it runs, and
/// asking for one there installed skills whose scripts were refused at every run.
fn check_calls(registry: &Registry, skill: &str, scripts: &[SkillScript]) -> Result<()> {
    for script in scripts.iter().filter(|s| !s.is_module()) {
        let Body::Lua(body) = &script.program.body else {
            continue;
        };
        // the modules it reaches, in the order they are first required
        let mut reached: Vec<usize> = Vec::new();
        let mut next = vec![script.code.as_str()];
        while let Some(code) = next.pop() {
            for wanted in crate::script::literal::modules_required(code) {
                if let Some(j) = scripts.iter().position(|m| m.name == wanted.name)
                    && scripts[j].name != script.name
                    && !reached.contains(&j)
                {
                    reached.push(j);
                    next.push(&scripts[j].code);
                }
            }
        }
        let chunks: Vec<(String, String)> = reached
            .iter()
            .map(|j| {
                let m = &scripts[*j];
                (
                    format!("{}.lua", m.name),
                    crate::program::compile::lua_text(&m.code),
                )
            })
            .collect();
        let modules: Vec<(&str, &str)> = chunks
            .iter()
            .map(|(c, t)| (c.as_str(), t.as_str()))
            .collect();
        let runs = crate::program::compile::Runs {
            chunk: &body.chunk,
            text: &body.source,
            capabilities: &script.program.capabilities,
        };
        crate::program::compile::check_literal_calls(&runs, &modules, &POLICY, registry).map_err(
            |p| {
                let at = match &p.at {
                    crate::program::compile::Location::Line { chunk, .. } => chunk.clone(),
                    crate::program::compile::Location::Pointer(_) => body.chunk.clone(),
                };
                let i = scripts
                    .iter()
                    .position(|s| format!("{}.lua", s.name) == at)
                    .unwrap_or(0);
                bad(skill, format!("at /scripts/{i} (`{at}`): {p}"))
            },
        )?;
    }
    Ok(())
}

/// What is said of a skill's references wherever they are listed: an Agent Skills folder may
/// carry scripts in other languages (`scripts/helper.py`), and a person must know they are not
/// run here.
pub const READ_ONLY_NOTE: &str = "references are text to read; lmcp never runs one, whatever \
     its language: only scripts/*.lua become tools";

/// At most this many names are listed in one part of the install question.
const LISTED: usize = 12;

/// `a, b, c and 4 more`: names for a question, clipped.
fn listed(names: &[&str]) -> String {
    let mut shown: Vec<String> = names
        .iter()
        .take(LISTED)
        .map(|n| crate::text::clip(n, 100).into_owned())
        .collect();
    if names.len() > LISTED {
        shown.push(format!("and {} more", names.len() - LISTED));
    }
    shown.join(", ")
}

/// The install question's account of what a package becomes (#38): the scripts that become
/// tools, those that are modules of others, and the files that are only read. It is worked out
/// from the package as given (`scripts` are (file name, code)), so it can be said before the
/// package is checked, in the gate's question as on the command line.
pub fn what_it_becomes(scripts: &[(String, String)], references: &[String]) -> String {
    let names: Vec<(String, Vec<String>)> = scripts
        .iter()
        .map(|(file, code)| {
            let required = crate::script::literal::modules_required(code)
                .into_iter()
                .map(|m| m.name)
                .collect();
            (
                file.strip_suffix(".lua").unwrap_or(file).to_string(),
                required,
            )
        })
        .collect();
    let is_module = |n: &str| {
        names
            .iter()
            .any(|(by, wants)| by != n && wants.iter().any(|w| w == n))
    };
    let tools: Vec<&str> = names
        .iter()
        .map(|(n, _)| n.as_str())
        .filter(|n| !is_module(n))
        .collect();
    let modules: Vec<&str> = names
        .iter()
        .map(|(n, _)| n.as_str())
        .filter(|n| is_module(n))
        .collect();
    let mut parts = vec![if tools.is_empty() {
        "no tools".to_string()
    } else {
        format!("tools (Lua scripts): {}", listed(&tools))
    }];
    if !modules.is_empty() {
        parts.push(format!("modules of those tools: {}", listed(&modules)));
    }
    if !references.is_empty() {
        let refs: Vec<&str> = references.iter().map(String::as_str).collect();
        parts.push(format!("only read, never run: {}", listed(&refs)));
    }
    parts.join("; ")
}

/// What a person is told before a skill gets secrets: lmcp never shows a stored secret, but a
/// skill's scripts are trusted with their own, so the note names the secrets, the scripts that
/// read them (every one: config is the skill's) and what each may call, by its `---@uses` as
/// written. `None` when the skill declares no secret. `scripts` are (name, code).
pub fn secrets_note(md: &SkillMd, scripts: &[(String, String)]) -> Option<String> {
    let secrets: Vec<&str> = md
        .config
        .iter()
        .filter(|(_, f)| f.secret)
        .map(|(k, _)| k.as_str())
        .collect();
    if secrets.is_empty() {
        return None;
    }
    let each: Vec<String> = scripts
        .iter()
        .map(|(name, code)| {
            let name = name.strip_suffix(".lua").unwrap_or(name);
            let uses = declared_uses(code);
            // the hosts its requests may reach: where a secret may be sent
            let hosts = crate::program::Header::parse(code, name)
                .map(|h| h.connect)
                .unwrap_or_default();
            let reach = if hosts.is_empty() {
                String::new()
            } else {
                format!(" and reach {}", hosts.join(", "))
            };
            if uses.is_empty() {
                format!("{name} (read tools only{reach})")
            } else {
                format!("{name} (may call {}{reach})", uses.join(", "))
            }
        })
        .collect();
    let readers = if each.is_empty() {
        "no script yet".to_string()
    } else {
        each.join("; ")
    };
    Some(format!(
        "secrets {}: lmcp never shows them, but every script of the skill reads them and is \
         trusted with them — one that may write or send can pass them on: {readers}",
        secrets.join(", ")
    ))
}

/// The tool names a script's header lists in `---@uses` lines, as written (the header ends at
/// its first line that is not a comment).
fn declared_uses(code: &str) -> Vec<String> {
    let mut uses = Vec::new();
    for line in code.lines() {
        let line = line.trim_start_matches('\u{feff}').trim();
        if line.is_empty() || line.starts_with("#!") {
            continue;
        }
        if !line.starts_with("--") {
            break;
        }
        if let Some(list) = line.strip_prefix("---@uses") {
            for name in list
                .split([',', ' '])
                .map(str::trim)
                .filter(|s| !s.is_empty())
            {
                if !uses.iter().any(|u| u == name) && uses.len() < 64 {
                    uses.push(name.to_string());
                }
            }
        }
    }
    uses
}
