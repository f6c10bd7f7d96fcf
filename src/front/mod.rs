//! The front doors. Each is thin: it turns its input into [`CallRequest`](crate::CallRequest)s
//! for [`Host::call`](crate::Host::call) and renders the [`Outcome`](crate::Outcome)s.
//!
//! | file               | door                                                                  |
//! |--------------------|-----------------------------------------------------------------------|
//! | `cli.rs`           | the command line (clap): its definition and dispatch                  |
//! | `door.rs`          | what the doors share: gated call, who answers, progress, output       |
//! | `docs.rs`          | text generated from the code: help, man page, completions, tool lists |
//! | `complete.rs`      | shell completion: the installed tool, recipe and skill names          |
//! | `tool_cmd.rs`      | `lmcp tools`, `lmcp tool ...`, `lmcp call`                            |
//! | `call_args.rs`     | what `lmcp call` takes: KEY=VALUE typed by the schema, or JSON        |
//! | `settings.rs`      | grants, modes, roots, history, signals, types, paths                  |
//! | `pdf.rs`           | `lmcp pdf IMAGES...`: a scratch workspace and one build               |
//! | `recipe.rs`        | `lmcp recipe ...` and `lmcp run FILE.json`: plans, runs, bundles      |
//! | `run.rs`           | `lmcp run FILE.lua`: a script through the Lua engine                  |
//! | `run_question.rs`  | the one question `lmcp run` asks on a terminal, from its scope        |
//! | `repl.rs`          | `lmcp repl`: Lua with completion, history and `/` commands            |
//! | `keep.rs`          | the REPL's `/save`: what a session tried, kept as a recipe or tool    |
//! | `locals.rs`        | the REPL's top-level `local`s found and rewritten to outlive a line   |
//! | `session_scope.rs` | the REPL's session slots, where those locals live between lines       |
//! | `skill.rs`         | `lmcp skill ...`: install, show, configure and call skills            |
//! | `servers.rs`       | `lmcp servers ...`: other MCP servers, their tools behind the gate    |
//! | `hosts.rs`         | `lmcp hosts ...`: the hosts `http_request` may reach, or never       |
//! | `mcp.rs`           | `lmcp serve`: the MCP server (rmcp, stdio, both protocol eras)        |
//! | `resources.rs`     | what `lmcp serve` offers to read: the typed API, skills' references   |
//! | `prompts.rs`       | skills as MCP prompts: SKILL.md's body, the skill's tools named       |
//! | `lines.rs`         | the line filter before rmcp: parse errors (-32700), line bound        |
//! | `http.rs`          | `lmcp serve --http`: the same server over Streamable HTTP             |
//! | `http_sessions.rs` | the HTTP sessions: bounded where made, closed when idle               |

pub mod call_args;
pub mod cli;
pub mod complete;
pub mod docs;
pub mod door;
pub mod hosts;
pub mod http;
pub mod http_sessions;
pub mod keep;
pub mod lines;
pub mod locals;
pub mod mcp;
pub mod pdf;
pub mod prompts;
pub mod recipe;
pub mod repl;
pub mod resources;
pub mod run;
pub mod run_question;
pub mod servers;
pub mod session_scope;
pub mod settings;
pub mod skill;
pub mod tool_cmd;
