//! Skills as MCP prompts: each enabled skill is a prompt named after it, whose text is its
//! SKILL.md body, so a client can offer it as a slash command a person picks.
//!
//! The prompt takes no arguments. Where the skill has script tools, a last line names them by
//! their MCP names, so the model that reads the prompt knows what to call. Installing,
//! removing, enabling or disabling a skill changes the list: [`super::resources::Catalog`]
//! notices, and sessions send `notifications/prompts/list_changed`.
//!
//! A skill's text was written by someone else: it is data, with terminal controls escaped as
//! everywhere lmcp shows text.

use rmcp::ErrorData as McpError;
use rmcp::model::{GetPromptResult, Prompt, PromptMessage, Role};

use crate::host::Host;
use crate::library::skills::{Shown, shown};
use crate::text::{escape_controls, escape_controls_keep_lines};

/// Every enabled skill's prompt, sorted by name.
pub fn list(host: &Host) -> Vec<Prompt> {
    shown(host)
        .into_iter()
        .map(|s| {
            let mut p = Prompt::new(
                &s.name,
                Some(escape_controls(&s.description).into_owned()),
                None,
            );
            p.title = Some(format!("{} (skill)", s.name));
            p
        })
        .collect()
}

/// The prompt of the enabled skill `name`, or invalid params naming what to do.
pub fn get(host: &Host, name: &str) -> Result<GetPromptResult, McpError> {
    let Some(skill) = shown(host).into_iter().find(|s| s.name == name) else {
        return Err(McpError::invalid_params(
            format!(
                "no prompt `{}` here: prompts/list names them (one per enabled skill; \
                 `lmcp skill enable NAME` turns a disabled one on)",
                escape_controls(&crate::text::clip(name, 200))
            ),
            None,
        ));
    };
    let mut result =
        GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text_of(&skill))]);
    result.description = Some(escape_controls(&skill.description).into_owned());
    Ok(result)
}

/// SKILL.md's body, and a line naming the skill's tools.
fn text_of(skill: &Shown) -> String {
    let mut text = escape_controls_keep_lines(skill.prompt.trim_end()).into_owned();
    if !skill.tools.is_empty() {
        text.push_str(&format!(
            "\n\nThis skill's tools (MCP names): {}.",
            skill.tools.join(", ")
        ));
    }
    if !skill.references.is_empty() {
        let uris: Vec<String> = skill
            .references
            .iter()
            .map(|(n, _)| super::resources::reference_uri(&skill.name, n))
            .collect();
        text.push_str(&format!(
            "\nIts references (MCP resources, to read): {}.",
            uris.join(", ")
        ));
    }
    text
}
