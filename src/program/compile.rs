//! The one compile path: every stored program becomes a [`Program`] here, and nowhere else.
//!
//! Recipes, custom tools and skill scripts keep different file formats, and `lmcp run` reads a
//! bare `.lua` file. Each library parses its own format into a neutral [`Source`] — name,
//! description, declared parameters, a body of JSON steps or Lua — and [`compile`] checks the
//! rest the same way for all of them: parameter names and types, step references in either
//! template style, step arguments against each tool's input schema, the Lua header and syntax,
//! and the tools `---@uses` lists. What differs between the kinds of program is policy, not
//! format, so it travels with the source as a [`Policy`]: the tool kinds a program may call, the
//! step limit, and what a missing `---@uses` means (any tool, each call gated on its own, for
//! the person's own script run now; read tools only for a saved program others may call).
//!
//! A problem is reported once, at its place: a JSON pointer into the stored form, or the
//! `file.lua:LINE` of the Lua it is in ([`Problem`]). Each library wraps it in its own error.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::header::{Header, ParamSpec, ParamType};
use super::interpolate::{self, Part};
use super::steps::{Placeholder, Step, Template, placeholder};
use super::{Body, LuaBody, Program};
use crate::error::Error;
use crate::registry::{Capabilities, Kind, Registry, Tool};

/// A declared parameter as the JSON formats store it (a Lua body declares its own in its
/// header). Without `required` or `default`, the source's [`Policy::unmarked_required`] says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Param {
    /// Its name (letters, digits, `_`).
    pub name: String,
    /// string, integer (int), number, boolean (bool), object (table) or array.
    #[serde(rename = "type")]
    pub kind: String,
    /// What it means.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether callers must give it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    /// The value used when a call does not give one; a parameter with a default is optional.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
}

/// One step as a library read it from its format, before it is checked.
#[derive(Debug, Clone, PartialEq)]
pub enum StepSource {
    /// A tool call; `id` is `None` where steps are known by their index (recipes).
    Call {
        /// The step's id, where the format names steps.
        id: Option<String>,
        /// The tool it calls.
        tool: String,
        /// Its arguments, in the format's template style.
        args: Template,
    },
    /// A pause of this many seconds.
    Wait(f64),
}

/// What a program does, as read from its stored form.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceBody {
    /// JSON steps, under [`Source::steps_at`].
    Steps(Vec<StepSource>),
    /// A Lua program with its leading header, under [`Source::lua_at`].
    Lua {
        /// The source.
        source: String,
        /// Modules it may `require` besides the stdlib (a skill's scripts).
        modules: Vec<(String, String)>,
        /// A skill's config values, readable as `config`.
        config: Option<Map<String, Value>>,
    },
}

/// What the person's intent with a program is: it decides what a missing `---@uses` means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intent {
    /// The person's own script, run now (`lmcp run`): without `---@uses` it may call any tool,
    /// each call gated and confirmed on its own; it is compiled now (nothing starts for a
    /// script that does not compile), and its tools are looked up when it calls them.
    RunNow,
    /// A program kept and called later, by anyone the profile shows it to: compiled and its
    /// tools looked up now, and without `---@uses` it may call read tools only.
    Save,
}

/// The rules a kind of program is compiled by: carried by the source, not by a file format.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Policy {
    /// What the program is called in messages ("recipe", "custom tool", "skill script").
    pub what: &'static str,
    /// Run now or saved.
    pub intent: Intent,
    /// Whether a Lua header's `---@name`, when given, must be the program's name or the name
    /// of the file it is kept in (a program named by its file and its header must not say two
    /// names); `false` only for the person's own script run now, which is named by its file.
    pub header_name: bool,
    /// The tool kinds its steps and `---@uses` may name.
    pub callable: &'static [Kind],
    /// Tools its JSON steps may not call although their kind is allowed, each with the reason
    /// (a Lua body that lists one in `---@uses` may call it: nested programs, whose calls
    /// join the outer plan).
    pub not_steps: &'static [(&'static str, &'static str)],
    /// Most steps.
    pub max_steps: usize,
    /// Whether a JSON parameter that says neither `required` nor `default` is required.
    pub unmarked_required: bool,
    /// The timeout when neither the source nor the header gives one (`None`: the configured
    /// Lua timeout, at run time).
    pub default_timeout: Option<Duration>,
    /// Whether compiling a saved Lua body checks the tools it calls by literal name against
    /// its capabilities ([`check_literal_calls`]). `false` for a skill's scripts, which are
    /// checked as a package: a module runs under the `---@uses` of the scripts that require
    /// it, so each script is checked with the modules it requires.
    pub check_literal_calls: bool,
}

/// A program in neutral form: what each library makes of its stored format.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    /// Its name: the tool's, the recipe's, or the script file's.
    pub name: String,
    /// The chunk name of a Lua body in messages (`name.lua`, never a host path).
    pub chunk: String,
    /// What it does; a Lua body's `---@description` is used when this is empty.
    pub description: String,
    /// Parameters declared in the JSON form (a Lua body may declare them in its header
    /// instead, not in both).
    pub params: Vec<Param>,
    /// The JSON pointer of `params` in the stored form.
    pub params_at: String,
    /// The body.
    pub body: SourceBody,
    /// The JSON pointer of the steps in the stored form.
    pub steps_at: String,
    /// The key of a step's arguments in the stored form (`args`, `arguments`).
    pub args_key: &'static str,
    /// The JSON pointer of a Lua body in the stored form ("" when the file is the body).
    pub lua_at: String,
    /// A timeout given outside the body (the command line's `--timeout`), over the header's.
    pub timeout: Option<Duration>,
    /// The rules it is compiled by.
    pub policy: Policy,
}

impl Source {
    /// A Lua file that is the whole program (a skill script, a person's script, a bench): no
    /// JSON around it, so every problem is placed in the Lua.
    pub fn lua_file(name: &str, chunk: &str, text: String, policy: Policy) -> Source {
        Source {
            name: name.to_string(),
            chunk: chunk.to_string(),
            description: String::new(),
            params: Vec::new(),
            params_at: String::new(),
            body: SourceBody::Lua {
                source: text,
                modules: Vec::new(),
                config: None,
            },
            steps_at: String::new(),
            args_key: "",
            lua_at: String::new(),
            timeout: None,
            policy,
        }
    }
}

/// Where a problem is: a JSON pointer into the stored form, or a line of Lua.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A JSON pointer ("" for the whole).
    Pointer(String),
    /// `file.lua:LINE`.
    Line {
        /// The chunk name.
        chunk: String,
        /// The 1-based line.
        line: usize,
    },
}

/// Why a source does not compile, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Where.
    pub at: Location,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl Problem {
    fn at(pointer: impl Into<String>, message: impl Into<String>) -> Problem {
        Problem {
            at: Location::Pointer(pointer.into()),
            message: message.into(),
        }
    }

    /// The JSON pointer of the problem in the stored form: a problem in Lua is at `lua_at`.
    pub fn pointer<'a>(&'a self, lua_at: &'a str) -> &'a str {
        match &self.at {
            Location::Pointer(p) => p,
            Location::Line { .. } => lua_at,
        }
    }

    /// The message with the Lua place in front of it, when it is in Lua.
    pub fn located_message(&self) -> String {
        match &self.at {
            Location::Pointer(_) => self.message.clone(),
            Location::Line { chunk, line } => format!("{chunk}:{line}: {}", self.message),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.at {
            Location::Pointer(p) if p.is_empty() => f.write_str(&self.message),
            Location::Pointer(p) => write!(f, "at {p}: {}", self.message),
            Location::Line { chunk, line } => write!(f, "{chunk}:{line}: {}", self.message),
        }
    }
}

/// Compiles a source against the tools registered now: the one way a [`Program`] is made.
pub fn compile(mut source: Source, registry: &Registry) -> Result<Program, Problem> {
    check_description(&source.description).map_err(|m| Problem::at("/description", m))?;
    if let Some(t) = source.timeout {
        check_timeout(t.as_secs_f64(), f64::INFINITY).map_err(|m| Problem::at("", m))?;
    }
    if let SourceBody::Lua {
        source: text,
        modules,
        ..
    } = &mut source.body
    {
        *text = lua_text(text);
        for (_, module) in modules.iter_mut() {
            *module = lua_text(module);
        }
    }
    let declared = check_params(&source)?;
    match &source.body {
        SourceBody::Steps(steps) => compile_steps(&source, declared, steps, registry),
        SourceBody::Lua {
            source: text,
            modules,
            config,
        } => compile_lua_body(&source, declared, text, modules, config, registry),
    }
}

/// The declared parameters, checked: identifiers, no duplicates, known types, defaults of
/// their type.
fn check_params(source: &Source) -> Result<Vec<ParamSpec>, Problem> {
    if source.params.len() > MAX_PARAMS {
        return Err(Problem::at(
            source.params_at.clone(),
            format!(
                "{} parameters are declared; a program takes at most {MAX_PARAMS}: pass a table \
                 or an object as one parameter instead",
                source.params.len()
            ),
        ));
    }
    let mut names = std::collections::HashSet::new();
    let mut out: Vec<ParamSpec> = Vec::with_capacity(source.params.len());
    for (i, p) in source.params.iter().enumerate() {
        let at = format!("{}/{i}", source.params_at);
        if !is_identifier(&p.name) {
            return Err(Problem::at(
                format!("{at}/name"),
                format!(
                    "`{}` is not a valid parameter name (letters, digits, _)",
                    p.name
                ),
            ));
        }
        if !names.insert(p.name.as_str()) {
            return Err(Problem::at(
                format!("{at}/name"),
                format!("parameter `{}` is declared twice", p.name),
            ));
        }
        let kind = ParamType::parse(&p.kind).ok_or_else(|| {
            Problem::at(
                format!("{at}/type"),
                format!("unknown type `{}`; {}", p.kind, ParamType::NAMES),
            )
        })?;
        let mut default = None;
        if let Some(d) = &p.default {
            default = Some(kind.coerce(d).map_err(|m| {
                Problem::at(
                    format!("{at}/default"),
                    format!("the default {d} is not {}: {m}", kind.with_article()),
                )
            })?);
            if p.required == Some(true) {
                return Err(Problem::at(
                    format!("{at}/required"),
                    "a parameter with a default is optional; drop `required` or the default",
                ));
            }
        }
        out.push(ParamSpec {
            name: p.name.clone(),
            kind,
            required: p
                .required
                .unwrap_or(p.default.is_none() && source.policy.unmarked_required),
            default,
            description: p.description.clone().unwrap_or_default(),
        });
    }
    Ok(out)
}

fn compile_steps(
    source: &Source,
    params: Vec<ParamSpec>,
    steps: &[StepSource],
    registry: &Registry,
) -> Result<Program, Problem> {
    let policy = &source.policy;
    let steps_at = &source.steps_at;
    if steps.is_empty() {
        return Err(Problem::at(
            steps_at.clone(),
            "`steps` must not be empty; give at least one step",
        ));
    }
    if steps.len() > policy.max_steps {
        return Err(Problem::at(
            steps_at.clone(),
            format!(
                "{} steps is more than the {} allowed",
                steps.len(),
                policy.max_steps
            ),
        ));
    }
    let mut body: Vec<Step> = Vec::with_capacity(steps.len());
    let mut tools: Vec<String> = Vec::new();
    let mut connect: Vec<String> = Vec::new();
    let mut ids: std::collections::HashSet<&str> = std::collections::HashSet::new();
    // the result of a JSON program is its last call's: typed by that tool's output schema
    let mut returns = None;
    for (i, step) in steps.iter().enumerate() {
        let at = format!("{steps_at}/{i}");
        let (id, tool_name, template) = match step {
            StepSource::Wait(secs) => {
                if !(*secs > 0.0 && *secs <= MAX_WAIT_SECS) {
                    return Err(Problem::at(
                        format!("{at}/wait"),
                        format!(
                            "a wait must be more than 0 and at most {MAX_WAIT_SECS} seconds, got {secs}"
                        ),
                    ));
                }
                body.push(Step::Wait(Duration::from_secs_f64(*secs)));
                continue;
            }
            StepSource::Call { id, tool, args } => (id, tool, args),
        };
        let id = match id {
            Some(id) => {
                if !is_identifier(id) {
                    return Err(Problem::at(
                        format!("{at}/id"),
                        format!("`{id}` must be a letter or `_`, then letters, digits or `_`"),
                    ));
                }
                if !ids.insert(id) {
                    return Err(Problem::at(
                        format!("{at}/id"),
                        format!("the id `{id}` is used twice; step ids must be unique"),
                    ));
                }
                id.clone()
            }
            None => i.to_string(),
        };
        let tool = callable_tool(registry, tool_name, policy, "step")
            .map_err(|m| Problem::at(format!("{at}/tool"), m))?;
        let args_at = format!("{at}/{}", source.args_key);
        let (instance, refs) =
            sample_args(template, &params).map_err(|m| Problem::at(args_at.clone(), m))?;
        for (pointer, r) in &refs {
            check_reference(
                r,
                &params,
                &body,
                steps,
                i,
                &id,
                source.params_at.trim_start_matches('/'),
            )
            .map_err(|m| Problem::at(format!("{args_at}{pointer}"), m))?;
            optional_in_text(r, &params)
                .map_err(|m| Problem::at(format!("{args_at}{pointer}"), m))?;
        }
        // Check what can already be seen: literals, and exact params by their type.
        check_args(&tool, &instance, &refs, &params)
            .map_err(|(pointer, m)| Problem::at(format!("{args_at}{pointer}"), m))?;
        if tool.spec().reaches.is_some() {
            let host =
                literal_host(template).map_err(|m| Problem::at(format!("{args_at}/url"), m))?;
            if !connect.contains(&host) {
                connect.push(host);
            }
        }
        if !tools.contains(tool_name) {
            tools.push(tool_name.clone());
        }
        returns = tool.spec().output_schema.clone();
        body.push(Step::Call {
            id,
            tool: tool_name.clone(),
            args: template.clone(),
        });
    }
    Ok(Program {
        name: source.name.clone(),
        description: source.description.clone(),
        params,
        capabilities: Capabilities::Tools(tools),
        connect,
        timeout: source.timeout.or(policy.default_timeout),
        body: Body::Steps(body),
        returns,
    })
}

/// The host a JSON step's request reaches, from its `url` argument: the scheme and the host
/// (with its port) must be literal, so the program's hosts are known when it is saved and shown
/// before it runs. A parameter or an earlier step's result may fill the path or the query
/// (`https://api.example.org/items/${id}`), never the host: text after a literal host without
/// a `/`, `?` or `#` could still change it (`https://example.org${evil}`).
fn literal_host(template: &Template) -> std::result::Result<String, String> {
    const WHY: &str = "a request's scheme and host must be literal, so the hosts a program \
                       reaches are known before it runs: write them in the URL and let a \
                       parameter fill only the path or the query (`https://api.example.org/\
                       items/${id}`)";
    let literal: String = match template {
        Template::Interpolated(v) => match v.get("url") {
            Some(Value::String(s)) => {
                let parts = interpolate::parse(s)?;
                let all_text = parts.iter().all(|p| matches!(p, Part::Text(_)));
                let mut prefix = String::new();
                for part in &parts {
                    match part {
                        Part::Text(t) => prefix.push_str(t),
                        _ => break,
                    }
                }
                if all_text {
                    prefix
                } else {
                    authority_prefix(&prefix).ok_or(WHY)?
                }
            }
            _ => return Err(WHY.into()),
        },
        Template::Placeholders(v) => match v.get("url") {
            Some(Value::String(s)) => s.clone(),
            _ => return Err(WHY.into()),
        },
    };
    let (_, to) = crate::net::target(&literal)?;
    Ok(to.to_string())
}

/// The `scheme://host[:port]` a URL's literal beginning holds, when the host is closed by a
/// `/`, `?` or `#` within it.
fn authority_prefix(prefix: &str) -> Option<String> {
    let after = prefix.find("://")? + 3;
    let end = prefix[after..].find(['/', '?', '#'])? + after;
    Some(prefix[..end].to_string())
}

/// Checks one reference in the arguments of step `i` (whose id is `id`): a parameter must be
/// declared, a step read must be an earlier step that has a result.
fn check_reference(
    r: &ArgRef,
    params: &[ParamSpec],
    earlier: &[Step],
    steps: &[StepSource],
    i: usize,
    id: &str,
    params_key: &str,
) -> Result<(), String> {
    match r {
        ArgRef::Text(Part::Param(p), _) | ArgRef::Placeholder(Placeholder::Input(p))
            if !params.iter().any(|q| &q.name == p) =>
        {
            let declared: Vec<&str> = params.iter().map(|q| q.name.as_str()).collect();
            let declared = if declared.is_empty() {
                "none are declared".to_string()
            } else {
                format!("declared: {}", declared.join(", "))
            };
            Err(match r {
                ArgRef::Text(..) => format!(
                    "`${{{p}}}` is not a declared param ({declared}); add it to `{params_key}`"
                ),
                _ => format!(
                    "uses input `{p}`, which is not declared ({declared}); add it to `{params_key}`"
                ),
            })
        }
        ArgRef::Text(Part::Step { index, text, .. }, _) => {
            if *index >= i {
                let before = if i == 0 {
                    "the first step has no earlier step".to_string()
                } else {
                    format!("a step can read only earlier steps (0 to {})", i - 1)
                };
                return Err(format!("`${{{text}}}` reads step {index}, but {before}"));
            }
            if matches!(earlier[*index], Step::Wait(_)) {
                return Err(format!(
                    "`${{{text}}}` reads step {index}, which is a wait and has no result"
                ));
            }
            Ok(())
        }
        ArgRef::Placeholder(Placeholder::Step { id: read, text, .. }) => {
            if read == id {
                return Err("refers to its own step; refer to an earlier one".to_string());
            }
            let done = earlier
                .iter()
                .any(|s| matches!(s, Step::Call { id: e, .. } if e == read));
            if !done {
                let later = steps[i..]
                    .iter()
                    .any(|s| matches!(s, StepSource::Call { id: Some(l), .. } if l == read));
                let why = if later {
                    "a later step; references must point backward"
                } else {
                    "no step"
                };
                return Err(format!("reads `{read}` ({text}), which is {why}"));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The one rule for an optional parameter without a default, in both template styles: a
/// whole argument that is only it is left out when it is not given; inside longer text nothing
/// could be left out, so it is refused here rather than failing every run without it.
fn optional_in_text(r: &ArgRef, params: &[ParamSpec]) -> std::result::Result<(), String> {
    let ArgRef::Text(Part::Param(name), false) = r else {
        return Ok(());
    };
    if params
        .iter()
        .any(|p| &p.name == name && !p.required && p.default.is_none())
    {
        return Err(format!(
            "`${{{name}}}` is inside text, but `{name}` is optional without a default, so a run \
             without it could not fill the text; give `{name}` a default, make it required, or \
             make the whole argument \"${{{name}}}\" (left out when not given)"
        ));
    }
    Ok(())
}

fn compile_lua_body(
    source: &Source,
    declared: Vec<ParamSpec>,
    text: &str,
    modules: &[(String, String)],
    config: &Option<Map<String, Value>>,
    registry: &Registry,
) -> Result<Program, Problem> {
    let chunk = &source.chunk;
    let policy = &source.policy;
    let header = Header::parse(text, chunk).map_err(|e| match e {
        Error::Header {
            chunk,
            line,
            message,
        } => Problem {
            at: Location::Line { chunk, line },
            message,
        },
        other => Problem::at(source.lua_at.clone(), other.to_string()),
    })?;
    if policy.header_name
        && let Some(h) = &header.name
        && !names_this(h, source)
    {
        return Err(Problem {
            at: Location::Line {
                chunk: chunk.clone(),
                line: header.name_line.unwrap_or(1),
            },
            message: format!(
                "the Lua header says `---@name {h}`, but the {what} is named `{}`; make them the \
                 same (or drop `---@name`)",
                source.name,
                what = policy.what.rsplit(' ').next().unwrap_or(policy.what)
            ),
        });
    }
    if !header.params.is_empty() && !declared.is_empty() {
        return Err(Problem::at(
            source.params_at.clone(),
            "declare the parameters once: in the JSON form or in the Lua header",
        ));
    }
    let params = if declared.is_empty() {
        header.params.clone()
    } else {
        declared
    };
    let capabilities = match (&header.uses, policy.intent) {
        (Some(list), Intent::Save) => {
            let line = header.uses_line.unwrap_or(1);
            for tool in list {
                callable_tool(registry, tool, policy, "program").map_err(|m| Problem {
                    at: Location::Line {
                        chunk: chunk.clone(),
                        line,
                    },
                    message: format!("@uses lists `{tool}`: {m}"),
                })?;
            }
            Capabilities::Tools(list.clone())
        }
        (Some(list), Intent::RunNow) => Capabilities::Tools(list.clone()),
        (None, Intent::Save) => Capabilities::ReadOnly,
        (None, Intent::RunNow) => Capabilities::Unrestricted,
    };
    // Compiled now for every intent: a script that does not compile is refused before
    // anything about its run (a journal, a question) begins.
    compile_lua(text, chunk).map_err(|m| Problem::at(source.lua_at.clone(), m))?;
    if policy.intent == Intent::Save && policy.check_literal_calls {
        check_literal_calls(
            &Runs {
                chunk,
                text,
                capabilities: &capabilities,
            },
            &[],
            policy,
            registry,
        )?;
    }
    let description = if source.description.is_empty() {
        header.description.clone().unwrap_or_default()
    } else {
        source.description.clone()
    };
    Ok(Program {
        name: source.name.clone(),
        description,
        params,
        capabilities,
        connect: header.connect.clone(),
        timeout: source.timeout.or(header.timeout).or(policy.default_timeout),
        body: Body::Lua(LuaBody {
            source: text.to_string(),
            chunk: chunk.clone(),
            modules: modules.to_vec(),
            config: config.clone(),
        }),
        returns: header.returns.clone(),
    })
}

/// A saved Lua program as [`check_literal_calls`] reads it: its chunk name, its text and what
/// it may call.
#[derive(Debug, Clone, Copy)]
pub struct Runs<'a> {
    /// Its chunk name (`main.lua`).
    pub chunk: &'a str,
    /// Its source.
    pub text: &'a str,
    /// What it may call: its `---@uses` list ([`Capabilities::Tools`]), or read tools only.
    pub capabilities: &'a Capabilities,
}

/// Refuses a saved Lua program that calls by literal name (`tools.NAME`, `tools["NAME"]`,
/// see [`crate::script::literal`]) a tool its capabilities do not allow: every run would have
/// that call refused, and inside a `pcall` the refusal is only a warning, so the program
/// "works" and loses its writes (#34). With a `---@uses` line the program may call exactly
/// what it lists, so every tool missing from it is named, read tools too; without one it may
/// call read tools, and only the state-changing ones are. `modules` are the (chunk, text) of
/// the modules the program `require`s (a skill's scripts): a module runs under the
/// `---@uses` of the script that requires it, so its calls are judged by that script's, and
/// the message says whose line to extend. The message names the tools and the whole
/// `---@uses` line that allows them (with the tools the program already names, read ones
/// too, since a `---@uses` list is exact). Names built at run time are not seen; the gate
/// still decides every call.
pub fn check_literal_calls(
    program: &Runs<'_>,
    modules: &[(&str, &str)],
    policy: &Policy,
    registry: &Registry,
) -> Result<(), Problem> {
    use crate::script::literal::{Named, tools_called};
    let capabilities = program.capabilities;
    let uses = match capabilities {
        Capabilities::Tools(list) => Some(list),
        _ => None,
    };
    // (chunk, module text or None for the program's own, the call, the tool)
    let mut called: Vec<(&str, Option<&str>, Named, Arc<Tool>)> = Vec::new();
    let texts = std::iter::once((program.chunk, program.text, false))
        .chain(modules.iter().map(|(c, t)| (*c, *t, true)));
    for (chunk, text, module) in texts {
        for n in tools_called(text) {
            if let Some(t) = registry.get(&n.name) {
                called.push((chunk, module.then_some(text), n, t));
            }
        }
    }
    let missing: Vec<&(&str, Option<&str>, Named, Arc<Tool>)> = called
        .iter()
        .filter(|(_, _, _, t)| {
            !capabilities.allows(t.spec()) && (uses.is_some() || t.spec().effect.changes_state())
        })
        .collect();
    let Some((at_chunk, _, first, _)) = missing.first() else {
        return Ok(());
    };
    let mut line: Vec<String> = uses.cloned().unwrap_or_default();
    for (_, _, n, t) in &called {
        let needed = uses.is_none() || !capabilities.allows(t.spec());
        if needed && !line.contains(&n.name) {
            line.push(n.name.clone());
        }
    }
    let mut names: Vec<String> = Vec::new();
    for (_, _, n, t) in &missing {
        let said = format!("`{}` ({})", n.name, t.spec().effect);
        if !names.contains(&said) {
            names.push(said);
        }
    }
    let (it, them) = if names.len() == 1 {
        ("it", "the call")
    } else {
        ("they", "those calls")
    };
    let line = line.join(", ");
    let by_module = missing.iter().any(|(_, m, _, _)| m.is_some());
    let why = match (uses, by_module) {
        (None, false) => format!(
            "without `---@uses` a saved {} may call read tools only, so {them} would be refused \
             at every run; add `---@uses {line}` to its header",
            policy.what
        ),
        (Some(_), false) => format!(
            "its `---@uses` does not list {it}, so {them} would be refused at every run; make \
             the line `---@uses {line}`"
        ),
        // A module's calls are its requirer's: name the script whose line to extend.
        (uses, true) => {
            let main = program.chunk;
            let modules: Vec<&str> = missing
                .iter()
                .filter(|(_, m, _, _)| m.is_some())
                .map(|(c, _, _, _)| *c)
                .fold(Vec::new(), |mut v, c| {
                    if !v.contains(&c) {
                        v.push(c);
                    }
                    v
                });
            let (module, runs) = if modules.len() == 1 {
                (format!("{} is a module", modules[0]), "it runs")
            } else {
                (
                    format!("{} are modules", and_list_str(&modules)),
                    "they run",
                )
            };
            let own = missing
                .iter()
                .filter_map(|(c, m, _, _)| m.map(|text| (c, text)))
                .any(|(c, text)| Header::parse(text, c).is_ok_and(|h| h.uses.is_some()));
            let own = if own {
                " (a module's own `---@uses` does not count)"
            } else {
                ""
            };
            match uses {
                None => format!(
                    "{module} {main} requires, so {runs} under {main}'s `---@uses`; without one \
                     {main} may call read tools only, and {them} would be refused at every run; \
                     add `---@uses {line}` to {main}'s header{own}"
                ),
                Some(_) => format!(
                    "{module} {main} requires, so {runs} under {main}'s `---@uses`, which does \
                     not list {it}, and {them} would be refused at every run; make {main}'s line \
                     `---@uses {line}`{own}"
                ),
            }
        }
    };
    Err(Problem {
        at: Location::Line {
            chunk: at_chunk.to_string(),
            line: first.line,
        },
        message: format!("calls {}: {why}", and_list(&names)),
    })
}

/// [`and_list`] of borrowed text.
fn and_list_str(items: &[&str]) -> String {
    and_list(&items.iter().map(|s| s.to_string()).collect::<Vec<_>>())
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// Longest wait step, in seconds.
pub const MAX_WAIT_SECS: f64 = 3600.0;

/// Most parameters a program declares. Far above any real one; past it a save is refused
/// before any check whose cost grows with the count (a header of 100,000 params once kept a
/// save busy for more than 20 s).
pub const MAX_PARAMS: usize = 256;

/// Most tool names one program's `---@uses` lists (each looked up and shown in its question).
pub const MAX_USES: usize = 1000;

/// Shortest timeout, in seconds (1 ms): a shorter one rounds to nothing, and every call of
/// the program would time out.
pub const MIN_TIMEOUT_SECS: f64 = 0.001;

/// A timeout of `secs` seconds, if it is at least [`MIN_TIMEOUT_SECS`] and at most `max`: the
/// one check for a header's `---@timeout` and every `--timeout`. The message names both bounds.
pub fn check_timeout(secs: f64, max: f64) -> std::result::Result<Duration, String> {
    if !(MIN_TIMEOUT_SECS..=max).contains(&secs) {
        let most = if max.is_finite() {
            format!(" and at most {max} seconds")
        } else {
            String::new()
        };
        return Err(format!(
            "a timeout must be at least {MIN_TIMEOUT_SECS} seconds (1 ms){most}, got {secs:?}"
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Lua source as the compiler takes it: without a leading UTF-8 byte order mark, and with a
/// `#!` first line (a script run as a command) emptied, so line numbers stay right.
pub fn lua_text(text: &str) -> String {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.starts_with("#!") {
        let rest = text.find('\n').map_or("", |i| &text[i..]);
        return rest.to_string();
    }
    text.to_string()
}

/// Whether a header's `---@name` names this program: its name, or the file it is kept in
/// (a skill script's, a recipe's slug), compared in one Unicode spelling (NFC).
fn names_this(header_name: &str, source: &Source) -> bool {
    use unicode_normalization::UnicodeNormalization;
    let h: String = header_name.nfc().collect();
    let name: String = source.name.nfc().collect();
    h == name || source.chunk.strip_suffix(".lua") == Some(h.as_str())
}

/// A tool a program of `policy` may call: registered, of an allowed kind, not excluded. The
/// message says why not; `place` is "step" or "program" for its wording.
fn callable_tool(
    registry: &Registry,
    name: &str,
    policy: &Policy,
    place: &str,
) -> Result<Arc<Tool>, String> {
    let t = registry.get(name).ok_or_else(|| {
        let hint = match registry.did_you_mean(name) {
            h if h.is_empty() => format!(
                "; {} lists them",
                crate::text::arg_words::tool("tools/list", "lmcp tools")
            ),
            h => h,
        };
        format!("there is no tool `{name}`{hint}")
    })?;
    let who = if place == "step" {
        format!("a {} step", policy.what)
    } else {
        format!("a {}", policy.what)
    };
    if place == "step"
        && let Some((_, why)) = policy.not_steps.iter().find(|(n, _)| *n == name)
    {
        return Err(format!("{who} cannot call `{name}`: {why}"));
    }
    let kind = t.spec().kind;
    if !policy.callable.contains(&kind) {
        let allowed: Vec<String> = policy.callable.iter().map(|k| k.to_string()).collect();
        let article = if kind.to_string().starts_with(['a', 'e', 'i', 'o', 'u']) {
            "an"
        } else {
            "a"
        };
        return Err(format!(
            "{who} cannot call `{name}`: it is {article} {kind} tool; {}s can only call {} tools",
            if place == "step" { "step" } else { "program" },
            or_list(&allowed)
        ));
    }
    Ok(t)
}

/// `a`, `a or b`, `a, b or c`: a list for a sentence.
fn or_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

/// Longest description of a program or a tool (it is sent with every tool list).
pub const MAX_DESCRIPTION: usize = 2000;

/// Refuses a description longer than [`MAX_DESCRIPTION`] characters, naming the limit.
pub fn check_description(text: &str) -> std::result::Result<(), String> {
    let n = text.chars().count();
    if n > MAX_DESCRIPTION {
        return Err(format!(
            "the description is {n} characters; the limit is {MAX_DESCRIPTION} (it goes out with \
             every tool list)"
        ));
    }
    Ok(())
}

/// Longest parameter name or step id.
pub const MAX_IDENTIFIER: usize = 64;

/// Parameter names and step ids: a letter or `_`, then letters, digits and `_`, at most 64.
pub fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_IDENTIFIER
        && s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Compiles Lua source without running it. The error names the place as `chunk:LINE`.
pub fn compile_lua(source: &str, chunk: &str) -> std::result::Result<(), String> {
    if let Some(refused) = crate::script::refuse_slow_source(source, chunk) {
        return Err(refused);
    }
    let lua = mlua::Lua::new_with(mlua::StdLib::NONE, mlua::LuaOptions::new())
        .map_err(|e| e.to_string())?;
    lua.load(source)
        .set_name(format!("={chunk}"))
        .set_mode(mlua::chunk::ChunkMode::Text)
        .into_function()
        .map(|_| ())
        .map_err(|e| format!("the program does not compile: {e}"))
}

/// A reference in a step's arguments.
#[derive(Debug, Clone, PartialEq)]
pub enum ArgRef {
    /// `${...}` inside a string (recipes), and whether it is the whole string.
    Text(Part, bool),
    /// `{"$input": ...}` or `{"$step": ...}` (custom tools).
    Placeholder(Placeholder),
}

impl ArgRef {
    /// The parameter an exact reference names: its value arrives with the parameter's type.
    fn exact_param(&self) -> Option<&str> {
        match self {
            ArgRef::Text(Part::Param(p), true) => Some(p),
            ArgRef::Placeholder(Placeholder::Input(n)) => Some(n),
            _ => None,
        }
    }
}

/// A step's arguments with each reference replaced by a sample of what it will hold (a value of
/// the parameter's type for an exact parameter reference, text where a reference sits inside
/// text, null for a step's result), and every reference with its JSON pointer. A malformed
/// reference is an error naming its pointer.
pub fn sample_args(
    template: &Template,
    params: &[ParamSpec],
) -> std::result::Result<(Value, Vec<(String, ArgRef)>), String> {
    let mut refs = Vec::new();
    let instance = match template {
        Template::Interpolated(v) => {
            let mut found = Vec::new();
            interpolate::references(v, "", &mut found)?;
            refs = found
                .into_iter()
                .map(|(p, part, exact)| (p, ArgRef::Text(part, exact)))
                .collect();
            sample_text(v, params)
        }
        Template::Placeholders(v) => sample_placeholders(v, params, "", &mut refs)?,
    };
    Ok((instance, refs))
}

fn sample_of(params: &[ParamSpec], name: &str) -> Value {
    params
        .iter()
        .find(|q| q.name == name)
        .map_or(Value::Null, |q| q.kind.sample())
}

fn sample_text(v: &Value, params: &[ParamSpec]) -> Value {
    match v {
        Value::String(s) => match interpolate::parse(s) {
            Ok(parts) if parts.len() == 1 => match &parts[0] {
                Part::Param(p) => sample_of(params, p),
                Part::Step { .. } => Value::Null,
                Part::Text(t) => Value::String(t.clone()),
            },
            _ => Value::String("x".into()),
        },
        Value::Array(a) => Value::Array(a.iter().map(|x| sample_text(x, params)).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| (k.clone(), sample_text(x, params)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn sample_placeholders(
    v: &Value,
    params: &[ParamSpec],
    pointer: &str,
    found: &mut Vec<(String, ArgRef)>,
) -> std::result::Result<Value, String> {
    if let Some(p) =
        placeholder(v).map_err(|m| format!("at {}: {m}", interpolate::display(pointer)))?
    {
        let sample = match &p {
            Placeholder::Input(name) => sample_of(params, name),
            Placeholder::Step { .. } => Value::Null,
        };
        found.push((pointer.to_string(), ArgRef::Placeholder(p)));
        return Ok(sample);
    }
    Ok(match v {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, x) in m {
                let ptr = format!("{pointer}/{}", k.replace('~', "~0").replace('/', "~1"));
                out.insert(k.clone(), sample_placeholders(x, params, &ptr, found)?);
            }
            Value::Object(out)
        }
        Value::Array(a) => {
            let mut out = Vec::new();
            for (i, x) in a.iter().enumerate() {
                out.push(sample_placeholders(
                    x,
                    params,
                    &format!("{pointer}/{i}"),
                    found,
                )?);
            }
            Value::Array(out)
        }
        other => other.clone(),
    })
}

/// Checks sampled arguments against the tool's input schema before anything runs. What only
/// the run can know (a step's result, text built from references) is left to the run; a
/// literal that breaks the schema, an exact parameter of the wrong type, and an optional
/// parameter without a default where the tool requires the argument are refused. The error is
/// `(pointer into the arguments, message)`.
pub fn check_args(
    tool: &Tool,
    instance: &Value,
    refs: &[(String, ArgRef)],
    params: &[ParamSpec],
) -> std::result::Result<(), (String, String)> {
    let spec = tool.spec();
    let name = &spec.name;
    let validator = tool
        .validator()
        .map_err(|e| (String::new(), e.to_string()))?;
    for e in validator.iter_errors(instance) {
        let pointer = e.instance_path().to_string();
        let keyword = e.kind().keyword();
        let under = refs
            .iter()
            .find(|(p, _)| pointer == *p || pointer.starts_with(&format!("{p}/")));
        match under {
            None => {
                return Err((
                    pointer,
                    format!(
                        "{} (rule `{keyword}`) for `{name}`; {} shows its input schema",
                        crate::gate::schema_problem(&spec.input_schema, &e).message,
                        crate::text::arg_words::tool(
                            "tools/list",
                            &format!("lmcp tool show {name}")
                        )
                    ),
                ));
            }
            Some((p, r)) if *p == pointer && keyword == "type" && r.exact_param().is_some() => {
                let input = r.exact_param().unwrap_or("?");
                let given = params
                    .iter()
                    .find(|q| q.name == input)
                    .map_or("?", |q| q.kind.json_type());
                let key = pointer.trim_start_matches('/');
                let expected = match &spec.input_schema["properties"][key]["type"] {
                    Value::String(t) => format!("a {t}"),
                    Value::Null => "another type".to_string(),
                    other => format!("one of {other}"),
                };
                return Err((
                    pointer.clone(),
                    format!(
                        "takes input `{input}`, a {given}, but `{name}` expects {expected} there"
                    ),
                ));
            }
            // A constraint on a value only the run knows.
            Some(_) => {}
        }
    }
    let required: Vec<&str> = spec
        .input_schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for (pointer, r) in refs {
        let Some(input) = r.exact_param() else {
            continue;
        };
        let key = pointer.trim_start_matches('/');
        let optional = params
            .iter()
            .any(|q| q.name == input && !q.required && q.default.is_none());
        if optional && !key.contains('/') && required.contains(&key) {
            return Err((
                pointer.clone(),
                format!(
                    "`{name}` requires `{key}`, but it takes the optional input `{input}`; make \
                     `{input}` required or give a literal"
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_read_as_sentences() {
        let l = |v: &[&str]| or_list(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(l(&["leaf"]), "leaf");
        assert_eq!(
            l(&["leaf", "workflow", "gateway"]),
            "leaf, workflow or gateway"
        );
    }

    #[test]
    fn lua_text_drops_a_bom_and_a_shebang_keeping_lines() {
        assert_eq!(lua_text("\u{feff}return 1"), "return 1");
        assert_eq!(lua_text("#!/usr/bin/env lmcp\nreturn 1"), "\nreturn 1");
        assert_eq!(lua_text("\u{feff}#!x"), "");
        assert_eq!(lua_text("return '#!'"), "return '#!'");
    }

    #[test]
    fn timeouts_under_a_millisecond_are_refused() {
        assert!(check_timeout(0.001, 10.0).is_ok());
        for bad in [0.0, 1e-12, 0.0009, -1.0, f64::NAN, 11.0] {
            let e = check_timeout(bad, 10.0).unwrap_err();
            assert!(
                e.contains("at least 0.001 seconds (1 ms) and at most 10"),
                "{e}"
            );
        }
    }

    #[test]
    fn identifiers() {
        for ok in ["a", "_x", "step_2", "A1"] {
            assert!(is_identifier(ok), "{ok}");
        }
        for bad in ["", "1a", "a-b", "a b", "é", &"x".repeat(65)] {
            assert!(!is_identifier(bad), "{bad}");
        }
    }

    #[test]
    fn compile_errors_name_the_chunk_and_line() {
        assert!(compile_lua("return 1", "t.lua").is_ok());
        assert!(compile_lua("local x <close> = nil", "t.lua").is_ok());
        let e = compile_lua("\nlocal x <close> = 1 +", "t.lua").unwrap_err();
        assert!(e.contains("t.lua:2:"), "{e}");
        let e = compile_lua("return return", "t.lua").unwrap_err();
        assert!(e.contains("t.lua:1:"), "{e}");
    }
}
