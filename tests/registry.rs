//! Walks the registry: every tool is fully described, and results meet declared output schemas.

mod common;

use common::TestHost;
use lmcp::registry::{Effect, Profile};
use lmcp::{CallContext, CallRequest, ConfirmMode, Host, Origin};
use serde_json::json;

#[test]
fn every_tool_is_fully_described() {
    let dir = tempfile::tempdir().unwrap();
    let host = Host::open(lmcp::store::Paths::under(dir.path())).unwrap();
    let tools = host.registry().all();
    assert!(tools.len() >= 6);
    for tool in tools {
        tool.check().unwrap_or_else(|e| panic!("{e}"));
        let s = tool.spec();
        assert!(
            !s.description.trim().is_empty(),
            "{}: no description",
            s.name
        );
        assert!(!s.title.trim().is_empty(), "{}: no title", s.name);
        assert_eq!(s.input_schema["type"], "object", "{}", s.name);
        assert!(
            jsonschema::meta::is_valid(&s.input_schema),
            "{}: bad input schema",
            s.name
        );
        if let Some(o) = &s.output_schema {
            assert!(
                jsonschema::meta::is_valid(o),
                "{}: bad output schema",
                s.name
            );
        }
        let a = serde_json::to_value(s.annotations).unwrap();
        for key in [
            "readOnlyHint",
            "destructiveHint",
            "idempotentHint",
            "openWorldHint",
        ] {
            assert!(a[key].is_boolean(), "{}: annotation {key} not set", s.name);
        }
        assert_eq!(
            s.annotations.read_only_hint,
            s.effect == Effect::Read,
            "{}",
            s.name
        );
        assert!(matches!(
            s.effect,
            Effect::Read | Effect::Write | Effect::Send
        ));
    }
}

#[test]
fn core_is_a_subset_of_full() {
    let t = TestHost::new();
    let core: Vec<String> = t
        .host
        .tools(Profile::Core)
        .iter()
        .map(|(t, _)| t.spec().name.clone())
        .collect();
    let full: Vec<String> = t
        .host
        .tools(Profile::Full)
        .iter()
        .map(|(t, _)| t.spec().name.clone())
        .collect();
    assert!(core.iter().all(|n| full.contains(n)));
    assert!(
        full.contains(&"run_command".to_string()) && !core.contains(&"run_command".to_string())
    );
    let mut sorted = full.clone();
    sorted.sort();
    assert_eq!(
        full, sorted,
        "tool lists are in a deterministic (sorted) order"
    );
}

#[tokio::test]
async fn results_meet_their_output_schemas() {
    let t = TestHost::new();
    let calls = [
        ("calculate", json!({"expression": "2^10 / 3"})),
        ("get_datetime", json!({})),
        ("write_file", json!({"path": "d/x.txt", "content": "héllo"})),
        ("read_file", json!({"path": "d/x.txt"})),
        ("list_dir", json!({"path": "d"})),
        ("list_dir", json!({})),
        ("run_command", json!({"program": "echo", "args": ["hi"]})),
    ];
    for (name, args) in calls {
        let ctx = CallContext::root(Origin::Cli, ConfirmMode::Confirmed)
            .with_confirmer(std::sync::Arc::new(lmcp::gate::AlwaysYes));
        let result = t
            .host
            .call(CallRequest::new(name, args, ctx))
            .await
            .into_result();
        let result = result.unwrap_or_else(|e| panic!("{name}: {e}"));
        let tool = t.host.registry().get(name).unwrap();
        let schema = tool
            .spec()
            .output_schema
            .as_ref()
            .expect("built-ins declare outputs");
        let v = jsonschema::validator_for(schema).unwrap();
        let errors: Vec<String> = v.iter_errors(&result).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{name}: {errors:?} in {result}");
    }
}

/// Front doors reach tools only through the gate: nothing under `src/front/` names a tool
/// module (`crate::tools`), so no handler or tool function can be called around the gate.
#[test]
fn front_doors_import_nothing_from_the_tools() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/front");
    let mut offenders = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, line) in text.lines().enumerate() {
            if line.contains("crate::tools") || line.contains("lmcp::tools") {
                offenders.push(format!("{}:{}: {line}", path.display(), i + 1));
            }
        }
    }
    assert!(offenders.is_empty(), "\n{}", offenders.join("\n"));
}
