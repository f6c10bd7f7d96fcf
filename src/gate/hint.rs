//! What a schema problem in a call's arguments says, with a did-you-mean for an unknown
//! property name (#38).
//!
//! Clients written against another host's contract send its field names: the skill contract
//! lmcp follows names its arguments `skillMd`, `skillName` and `scriptName`, where lmcp's are
//! `skill_md`, `skill` and `script` (lmcp's arguments are snake_case everywhere). Such a call
//! used to get "Additional properties are not allowed ('skillMd' was unexpected)" and nothing
//! more. The hint is worked out here, from the property names the schema itself declares at
//! the place the unknown one was found, so it holds for every tool (built in, saved, skill
//! script, another server's) and at every depth (`/steps/0`), and no tool keeps a list of
//! aliases: the call is still refused, and the message names the name to send.
//!
//! Every description of a schema problem in a tool's arguments goes through [`problem`]:
//! the gate's validation and the check of a saved program's literal arguments alike, so a test
//! in `house_rules` fails when code tells one some other way.

use serde_json::Value;

use crate::error::SchemaProblem;

/// The longest unknown name a hint is looked for: no schema declares a longer one, and
/// comparing a huge one would only take time.
const MAX_NAME: usize = 128;

/// Folds a name written in camelCase (or kebab-case) to snake_case: `skillMd` → `skill_md`,
/// `scriptName` → `script_name`, `HTTPHeaders` → `http_headers`, `plan-hash` → `plan_hash`.
/// The first step of the rule, because lmcp's argument names are snake_case.
pub fn snake_case(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::with_capacity(name.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c == '-' || c == ' ' {
            if !out.ends_with('_') {
                out.push('_');
            }
            continue;
        }
        if c.is_uppercase() {
            let prev = i.checked_sub(1).map(|j| chars[j]);
            let next = chars.get(i + 1);
            // a new word starts at an upper-case letter after a lower-case one or a digit
            // (`skillMd`), or at the last capital of a run followed by a lower-case one
            // (`HTTPHeaders`: `http_headers`)
            let starts_word = prev.is_some_and(|p| p.is_lowercase() || p.is_ascii_digit())
                || (prev.is_some_and(char::is_uppercase) && next.is_some_and(|n| n.is_lowercase()));
            if starts_word && !out.is_empty() && !out.ends_with('_') {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The property name `unknown` was probably meant to be, among `known`: fold it to snake_case,
/// then take an exact match; else the longest known name it starts or ends with
/// (`script_name` → `script`); else the known name at the smallest edit distance, if that is
/// at most 2 (`arg` → `args`). Ties go to the name first in alphabetical order, so the hint
/// never depends on the order a schema lists its properties in.
pub fn closest_property<'a>(unknown: &str, known: &[&'a str]) -> Option<&'a str> {
    if unknown.is_empty() || unknown.len() > MAX_NAME {
        return None;
    }
    let folded = snake_case(unknown);
    let mut known: Vec<&'a str> = known.iter().copied().filter(|k| !k.is_empty()).collect();
    known.sort_unstable();
    known.dedup();
    if let Some(k) = known.iter().find(|k| **k == folded) {
        return Some(k);
    }
    let affix = known
        .iter()
        .filter(|k| folded.starts_with(**k) || folded.ends_with(**k))
        .max_by(|a, b| a.len().cmp(&b.len()).then(b.cmp(a)));
    if let Some(k) = affix {
        return Some(k);
    }
    known
        .iter()
        .map(|k| (strsim::levenshtein(&folded, k), *k))
        .filter(|(d, _)| *d <= 2)
        .min_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(b.1)))
        .map(|(_, k)| k)
}

/// The schema problem one validation error of a tool's arguments is, against its input
/// `schema`: where, which rule, and what is wrong without the offending value; an unknown
/// property gets the did-you-mean of [`closest_property`] from the names the schema declares
/// there.
pub(crate) fn problem(schema: &Value, e: &jsonschema::ValidationError<'_>) -> SchemaProblem {
    let mut message = e.masked().to_string();
    if let jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected }
    | jsonschema::error::ValidationErrorKind::UnevaluatedProperties { unexpected } = e.kind()
    {
        // the names as the caller sent them, a few and clipped: a megabyte of key, or a
        // hundred thousand keys, is no message to send back
        message = unexpected_names(unexpected);
        let unexpected = &unexpected[..unexpected.len().min(MAX_NAMES)];
        let given: Vec<&str> = e
            .instance()
            .as_object()
            .map(|m| m.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let declared = declared_properties(schema, &e.schema_path().to_string());
        // a name already given is no hint: the call has it, and something else is wrong
        let known: Vec<&str> = declared
            .iter()
            .map(String::as_str)
            .filter(|k| !given.contains(k))
            .collect();
        message.push_str(&hints(unexpected, &known));
    }
    SchemaProblem {
        pointer: crate::text::clip(&e.instance_path().to_string(), 200).into_owned(),
        rule: e.kind().keyword().to_string(),
        message,
    }
}

/// Most unknown names an error repeats, and how much of each.
const MAX_NAMES: usize = 5;
const MAX_NAME_CHARS: usize = 64;

/// "Additional properties are not allowed ('a', 'b' were unexpected)", at most [`MAX_NAMES`]
/// names of at most [`MAX_NAME_CHARS`] characters each, and how many more there were.
fn unexpected_names(unexpected: &[String]) -> String {
    let shown: Vec<String> = unexpected
        .iter()
        .take(MAX_NAMES)
        .map(|u| format!("'{}'", crate::text::clip(u, MAX_NAME_CHARS)))
        .collect();
    let more = unexpected.len().saturating_sub(MAX_NAMES);
    format!(
        "Additional properties are not allowed ({}{} {} unexpected)",
        shown.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        },
        if unexpected.len() == 1 { "was" } else { "were" }
    )
}

/// "; did you mean `skill_md`? (lmcp's arguments are snake_case)" for the unknown names that
/// have a likely meaning, or "" when none has.
fn hints(unexpected: &[String], known: &[&str]) -> String {
    let found: Vec<(&str, &str)> = unexpected
        .iter()
        .filter_map(|u| closest_property(u, known).map(|k| (u.as_str(), k)))
        .collect();
    if found.is_empty() {
        return String::new();
    }
    let camel = found
        .iter()
        .any(|(u, _)| u.chars().any(|c| c.is_uppercase() || c == '-'));
    let said = if let [(_, k)] = found.as_slice()
        && unexpected.len() == 1
    {
        format!("`{k}`")
    } else {
        found
            .iter()
            .map(|(u, k)| format!("`{k}` for '{}'", crate::text::clip(u, 40)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "; did you mean {said}?{}",
        if camel {
            " (lmcp's arguments are snake_case)"
        } else {
            ""
        }
    )
}

/// The property names the schema object holding the keyword at `keyword_path` declares: its
/// `properties`, and those of the `allOf`/`anyOf`/`oneOf` members beside it. A `$ref` on the
/// way (`#/...` within the same schema) is followed; a path that leads nowhere yields none.
fn declared_properties(root: &Value, keyword_path: &str) -> Vec<String> {
    let mut segments: Vec<String> = keyword_path
        .split('/')
        .skip(1)
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect();
    // the keyword itself (`additionalProperties`): its parent is the schema object
    segments.pop();
    let mut node = root;
    for seg in &segments {
        let next = if seg == "$ref" {
            node.get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix('#'))
                .and_then(|p| root.pointer(p))
        } else {
            match node {
                Value::Object(m) => m.get(seg.as_str()),
                Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
                _ => None,
            }
        };
        match next {
            Some(n) => node = n,
            None => return Vec::new(),
        }
    }
    let mut names: Vec<String> = Vec::new();
    let mut add = |schema: &Value| {
        for k in schema["properties"]
            .as_object()
            .into_iter()
            .flat_map(|m| m.keys())
        {
            if !names.contains(k) {
                names.push(k.clone());
            }
        }
    };
    add(node);
    for group in ["allOf", "anyOf", "oneOf"] {
        for member in node[group].as_array().into_iter().flatten() {
            add(member);
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn camel_case_folds_to_snake_case() {
        for (given, folded) in [
            ("skillMd", "skill_md"),
            ("scriptName", "script_name"),
            ("skillName", "skill_name"),
            ("HTTPHeaders", "http_headers"),
            ("planHash2", "plan_hash2"),
            ("max2Bytes", "max2_bytes"),
            ("plan-hash", "plan_hash"),
            ("already_snake", "already_snake"),
            ("X", "x"),
            ("", ""),
        ] {
            assert_eq!(snake_case(given), folded, "{given}");
        }
    }

    /// Each step of the rule, in its order, and what has no hint.
    #[test]
    fn the_rule_folds_then_matches_then_affixes_then_edits() {
        let install = ["skill_md", "scripts", "references"];
        let call = ["skill", "script", "params"];
        for (unknown, known, hint) in [
            // 1. fold, then an exact match
            ("skillMd", &install[..], Some("skill_md")),
            ("skill-md", &install[..], Some("skill_md")),
            // 2. a name the unknown one starts or ends with (the longest)
            ("scriptName", &call[..], Some("script")),
            ("skillName", &call[..], Some("skill")),
            ("script_name", &call[..], Some("script")),
            ("the_params", &call[..], Some("params")),
            // 3. edit distance at most 2
            ("arg", &["tool", "args"][..], Some("args")),
            ("refrences", &install[..], Some("references")),
            ("skilMD", &install[..], Some("skill_md")),
            // nothing close
            ("colour", &call[..], None),
            ("sk", &call[..], None),
            ("", &call[..], None),
            ("skillMd", &[][..], None),
        ] {
            assert_eq!(
                closest_property(unknown, known),
                hint,
                "{unknown} in {known:?}"
            );
        }
        // the longest affix wins: `skill_name_full` starts with `skill` and with `skill_name`
        assert_eq!(
            closest_property("skillNameFull", &["skill", "skill_name"]),
            Some("skill_name")
        );
        // ties go alphabetically, whatever the schema's order
        assert_eq!(closest_property("ab", &["ax", "ay"]), Some("ax"));
        assert_eq!(closest_property("ab", &["ay", "ax"]), Some("ax"));
        let long = "a".repeat(MAX_NAME + 1);
        assert_eq!(closest_property(&long, &["a"]), None);
    }

    #[test]
    fn a_flood_of_unknown_names_is_told_briefly() {
        let schema = json!({"type": "object", "properties": {"skill_md": {"type": "string"}},
            "additionalProperties": false});
        let mut args = serde_json::Map::new();
        for i in 0..10_000 {
            args.insert(format!("k{i}"), json!(1));
        }
        args.insert("x".repeat(1 << 20), json!(1));
        let p = problems(schema.clone(), Value::Object(args));
        let text: String = p.iter().map(|p| p.to_string()).collect();
        assert!(text.len() < 2_000, "{} bytes", text.len());
        assert!(text.contains("and 9996 more were unexpected"), "{text}");
        let p = problems(schema, json!({"skillMd": "x"}));
        assert_eq!(
            p[0].message,
            "Additional properties are not allowed ('skillMd' was unexpected); did you mean \
             `skill_md`? (lmcp's arguments are snake_case)"
        );
    }

    fn problems(schema: Value, args: Value) -> Vec<SchemaProblem> {
        let v = jsonschema::validator_for(&schema).unwrap();
        v.iter_errors(&args).map(|e| problem(&schema, &e)).collect()
    }

    /// The names come from where the unknown one was found: the top level, an array's items,
    /// a `$ref`'d definition, a member of `allOf`.
    #[test]
    fn hints_come_from_the_schema_at_the_place() {
        let step = json!({"type": "object", "properties": {"tool": {"type": "string"}, "args": {"type": "object"}}, "additionalProperties": false});
        let schema = json!({"type": "object", "properties": {"steps": {"type": "array", "items": step}}, "additionalProperties": false});
        let p = problems(schema, json!({"steps": [{"tool": "x", "arg": {}}]}));
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].pointer, "/steps/0");
        assert!(
            p[0].message.ends_with("; did you mean `args`?"),
            "{}",
            p[0].message
        );

        let by_ref = json!({
            "type": "object",
            "$defs": {"step": {"type": "object", "properties": {"tool": {}, "args": {}}, "additionalProperties": false}},
            "properties": {"steps": {"type": "array", "items": {"$ref": "#/$defs/step"}}},
            "additionalProperties": false
        });
        let p = problems(by_ref, json!({"steps": [{"toolName": "x"}]}));
        assert!(
            p[0].message
                .ends_with("; did you mean `tool`? (lmcp's arguments are snake_case)"),
            "{p:?}"
        );

        let all_of = json!({"allOf": [{"properties": {"skill_md": {}}}, {"properties": {"scripts": {}}}], "unevaluatedProperties": false});
        let p = problems(all_of, json!({"skillMd": "x"}));
        assert_eq!(p[0].rule, "unevaluatedProperties");
        assert!(p[0].message.contains("did you mean `skill_md`?"), "{p:?}");

        // two unknown names: each hint says which it is for; one without a hint is left out
        let flat = json!({"type": "object", "properties": {"skill": {}, "script": {}}, "additionalProperties": false});
        let p = problems(
            flat.clone(),
            json!({"skillName": "a", "scriptName": "b", "zzz": 1}),
        );
        assert!(
            p[0].message.ends_with(
                "; did you mean `skill` for 'skillName', `script` for 'scriptName'? (lmcp's arguments are snake_case)"
            ),
            "{p:?}"
        );
        // a name the call already gives is not offered again
        let p = problems(flat.clone(), json!({"skill": "a", "skillName": "b"}));
        assert!(!p[0].message.contains("did you mean"), "{p:?}");
        // nothing close: the message is the validator's alone
        let p = problems(flat, json!({"colour": 1}));
        assert_eq!(
            p[0].message,
            "Additional properties are not allowed ('colour' was unexpected)"
        );
    }
}
