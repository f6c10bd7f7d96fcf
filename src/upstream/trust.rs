//! What lmcp believes of another server's tool: its annotations are the server's claims, and
//! they only ever lower trust. They decide how the tool is shown and previewed, never what it
//! may do without a person's yes (every upstream tool asks until it is allowed by name or by
//! server, and that allow is pinned to the definition's hash).

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::registry::{Annotations, Effect};

/// The effect and annotations a tool's claims give it:
/// - `readOnlyHint: true` → read (unless it also claims `destructiveHint: true`);
/// - `destructiveHint: false` → write, not destructive;
/// - anything else, no annotations included → send and destructive.
///
/// `openWorldHint` is kept (default: open world), and `idempotentHint` too (default: not
/// idempotent), which decides whether a resumed run may repeat a call whose outcome is unknown.
pub fn effect_of(annotations: Option<&Value>) -> (Effect, Annotations) {
    let claim = |key: &str| {
        annotations
            .and_then(|a| a.get(key))
            .and_then(Value::as_bool)
    };
    let open_world = claim("openWorldHint").unwrap_or(true);
    let idempotent = claim("idempotentHint").unwrap_or(false);
    // a server that says its tool destroys is believed, whatever else it says
    if claim("readOnlyHint") == Some(true) && claim("destructiveHint") != Some(true) {
        return (
            Effect::Read,
            Annotations {
                read_only_hint: true,
                destructive_hint: false,
                idempotent_hint: true,
                open_world_hint: open_world,
            },
        );
    }
    if claim("destructiveHint") == Some(false) {
        return (
            Effect::Write,
            Annotations::changing(false, idempotent, open_world),
        );
    }
    (
        Effect::Send,
        Annotations::changing(true, idempotent, open_world),
    )
}

/// The hash a grant is pinned to: SHA-256 of the canonical JSON of everything the person was
/// shown or the model reads of the tool (name, title, description, schemas, annotations), as
/// 64 hex digits. A server that changes any of it gets its tool asked about again.
pub fn definition_hash(definition: &Value) -> String {
    let shown = serde_json::json!({
        "name": definition.get("name"),
        "title": definition.get("title"),
        "description": definition.get("description"),
        "inputSchema": definition.get("inputSchema"),
        "outputSchema": definition.get("outputSchema"),
        "annotations": definition.get("annotations"),
    });
    hash_of(&shown)
}

/// SHA-256 of a value's canonical JSON (keys sorted), as 64 hex digits.
pub fn hash_of(value: &Value) -> String {
    let digest = Sha256::digest(crate::gate::journal::canonical_json(value));
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push(char::from_digit(u32::from(b >> 4), 16).unwrap_or('0'));
        out.push(char::from_digit(u32::from(b & 15), 16).unwrap_or('0'));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn annotations_only_lower_trust() {
        let (e, a) = effect_of(Some(&json!({"readOnlyHint": true, "openWorldHint": false})));
        assert_eq!(e, Effect::Read);
        assert!(a.read_only_hint && !a.open_world_hint && !a.destructive_hint);
        let (e, a) = effect_of(Some(
            &json!({"destructiveHint": false, "idempotentHint": true}),
        ));
        assert_eq!(e, Effect::Write);
        assert!(!a.destructive_hint && a.idempotent_hint && a.open_world_hint);
        for claims in [
            None,
            Some(json!({})),
            Some(json!({"readOnlyHint": "yes"})),
            Some(json!({"readOnlyHint": false})),
            // a read that says it destroys is believed on the second count
            Some(json!({"readOnlyHint": true, "destructiveHint": true})),
        ] {
            let (e, a) = effect_of(claims.as_ref());
            assert_eq!(e, Effect::Send, "{claims:?}");
            assert!(a.destructive_hint && !a.read_only_hint && a.open_world_hint);
        }
    }

    #[test]
    fn the_hash_covers_what_was_shown_and_not_key_order() {
        let a = json!({"name": "t", "description": "d", "inputSchema": {"type": "object", "properties": {}}});
        let b = json!({"inputSchema": {"properties": {}, "type": "object"}, "description": "d", "name": "t", "icons": []});
        assert_eq!(definition_hash(&a), definition_hash(&b));
        let c = json!({"name": "t", "description": "d!", "inputSchema": {"type": "object", "properties": {}}});
        assert_ne!(definition_hash(&a), definition_hash(&c));
        assert_eq!(definition_hash(&a).len(), 64);
    }
}
