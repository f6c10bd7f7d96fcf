//! Plans: the state-changing calls a program run made or previewed, in order, and their hash.
//!
//! A program runner attaches a [`Plan`] to the context it runs in; the gate records into it every
//! state-changing leaf call that it previews or runs, however deeply nested (a nested program's
//! plan also feeds its parents'), so a plan shows what nested recipes and skill scripts would do
//! too. A confirmed run of an approved plan carries the approved entries as *expected*: each
//! state-changing call must be the next one approved, or the gate refuses it and the run stops.
//! What was hashed is what runs.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The state-changing calls of one program run.
#[derive(Debug, Default)]
pub struct Plan {
    entries: Mutex<Vec<Value>>,
    expected: Option<Vec<Value>>,
    cursor: Mutex<usize>,
    parent: Option<Arc<Plan>>,
    /// Why nested programs of a plan failed (even when the program caught the error).
    failures: Mutex<Vec<String>>,
    /// The host memory its entries hold, given back when the plan goes.
    held: Mutex<Vec<super::Held>>,
}

impl Plan {
    /// A plan to record into, nested in `parent` (whose plan it also feeds).
    pub fn new(parent: Option<Arc<Plan>>) -> Arc<Plan> {
        Arc::new(Plan {
            parent,
            ..Plan::default()
        })
    }

    /// A plan that only accepts the calls of `expected`, in order (a confirmed run of an
    /// approved plan).
    pub fn expecting(parent: Option<Arc<Plan>>, expected: Vec<Value>) -> Arc<Plan> {
        Arc::new(Plan {
            parent,
            expected: Some(expected),
            ..Plan::default()
        })
    }

    /// Records a call of `tool` with `args`: `previewed` when it was previewed rather than run
    /// (every call of a plan; in a real run, the calls of a nested plan), `unresolved` when its
    /// arguments could not be known in a plan (they need a previewed step's result). Fails,
    /// recording nothing, when an approved plan in the chain expected another call here.
    pub fn record(
        &self,
        tool: &str,
        args: &Value,
        previewed: bool,
        unresolved: bool,
    ) -> Result<(), String> {
        let mut entry = json!({"tool": tool, "args": args});
        if previewed {
            entry["previewed"] = json!(true);
        }
        if unresolved {
            entry["unresolved"] = json!(true);
        }
        let mut level = Some(self);
        while let Some(p) = level {
            p.check(&entry)?;
            level = p.parent.as_deref();
        }
        let mut level = Some(self);
        while let Some(p) = level {
            p.push(entry.clone());
            level = p.parent.as_deref();
        }
        Ok(())
    }

    /// How many plans keep an entry recorded here: this one and each parent.
    pub fn levels(&self) -> usize {
        let mut n = 0;
        let mut level = Some(self);
        while let Some(p) = level {
            n += 1;
            level = p.parent.as_deref();
        }
        n
    }

    /// Keeps `held` (what an entry costs) for as long as this plan lives.
    pub fn keep(&self, held: super::Held) {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(held);
    }

    fn check(&self, entry: &Value) -> Result<(), String> {
        let Some(expected) = &self.expected else {
            return Ok(());
        };
        let at = *self.cursor.lock().unwrap_or_else(|p| p.into_inner());
        let Some(want) = expected.get(at) else {
            return Err(format!(
                "the approved plan had {} state-changing call(s) and this would be one more ({})",
                expected.len(),
                entry["tool"].as_str().unwrap_or("?")
            ));
        };
        let same_tool = want["tool"] == entry["tool"];
        let same_args = want["unresolved"] == json!(true) || want["args"] == entry["args"];
        if same_tool && same_args {
            Ok(())
        } else {
            Err(format!(
                "call {} of the approved plan was {} with {}, but the run would make {} with {}",
                at + 1,
                want["tool"].as_str().unwrap_or("?"),
                crate::gate::shorten(&want["args"]),
                entry["tool"].as_str().unwrap_or("?"),
                crate::gate::shorten(&entry["args"]),
            ))
        }
    }

    fn push(&self, entry: Value) {
        if self.expected.is_some() {
            *self.cursor.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        }
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(entry);
    }

    /// Notes that a program in this plan's tree failed, here and in every parent: a plan with a
    /// failure inside it has no hash, even if a script caught the error.
    pub fn note_failure(&self, why: &str) {
        let mut level = Some(self);
        while let Some(p) = level {
            p.failures
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(why.to_string());
            level = p.parent.as_deref();
        }
    }

    /// The first failure noted in this plan's tree, if any.
    pub fn first_failure(&self) -> Option<String> {
        self.failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .first()
            .cloned()
    }

    /// The calls recorded so far.
    pub fn entries(&self) -> Vec<Value> {
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The hash of the calls recorded so far.
    pub fn hash(&self) -> String {
        plan_hash(&self.entries.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// The hash that identifies a plan: its state-changing calls with their arguments, in order.
pub fn plan_hash(entries: &[Value]) -> String {
    let bytes = serde_json::to_vec(entries).unwrap_or_default();
    format!("{:x}", Sha256::digest(bytes))
}

/// The hash of a plan whose program may reach `hosts` (its `---@connect` lines, or its steps'
/// literal hosts): the hosts are part of what was shown, so a program that names another host
/// has another hash even before any request is made. Without hosts, [`plan_hash`].
pub fn plan_hash_reaching(entries: &[Value], hosts: &[String]) -> String {
    if hosts.is_empty() {
        return plan_hash(entries);
    }
    let bytes = serde_json::to_vec(&json!({"hosts": hosts, "calls": entries})).unwrap_or_default();
    format!("{:x}", Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_plans_feed_their_parents() {
        let outer = Plan::new(None);
        let inner = Plan::new(Some(outer.clone()));
        inner
            .record("write_file", &json!({"path": "a"}), false, false)
            .unwrap();
        assert_eq!(outer.entries().len(), 1);
        assert_eq!(outer.hash(), inner.hash());
    }

    #[test]
    fn an_expected_plan_refuses_other_calls() {
        let approved = vec![
            json!({"tool": "write_file", "args": {"path": "a"}}),
            json!({"tool": "write_file", "args": {"x": 1}, "previewed": true, "unresolved": true}),
        ];
        let p = Plan::expecting(None, approved);
        assert!(
            p.record("write_file", &json!({"path": "b"}), false, false)
                .is_err()
        );
        p.record("write_file", &json!({"path": "a"}), false, false)
            .unwrap();
        p.record("write_file", &json!({"path": "zz"}), false, false)
            .unwrap();
        let e = p
            .record("write_file", &json!({}), false, false)
            .unwrap_err();
        assert!(e.contains("one more"), "{e}");
    }
}
