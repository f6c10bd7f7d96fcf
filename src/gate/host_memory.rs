//! The host memory one run may hold: a budget beside the Lua VM's own limit, for the buffers a
//! program makes lmcp build in Rust, where the VM's allocator does not see them.
//!
//! A run's Lua state cannot grow past `limits.lua_memory_mb`, but a program also sizes buffers
//! on the host side: arguments a recipe interpolates, the string `string.gsub` builds, the
//! previews and plan entries a run keeps, the JSON a table becomes, the output it captures.
//! Each was once a way to make lmcp hold gigabytes from a few lines. Every such buffer is
//! charged here, while it lives, to the budget of the run it belongs to; a nested run charges
//! its parent's (the budget travels in the [`CallContext`](super::CallContext)). Past the
//! budget, the run fails with [`Error::Limit`] naming it.
//!
//! The charge points, and why each exists. A test in `tests/all/memory.rs` drives them with
//! hostile programs in a child process and bounds its peak RSS; `house_rules` fails when a file
//! charges this budget without a row here, or a row names a file that charges nothing.
//!
//! | file | what is held, and for how long |
//! |---|---|
//! | `src/program/interpolate.rs` | a step's arguments as `${...}` fills them in, as they grow, until the step's call returns (a parameter embedded 65,536 times) |
//! | `src/program/steps.rs` | a custom tool step's arguments as `$input`/`$step` fill them in (an input copied into every step) |
//! | `src/program/run.rs` | each step's arguments and result as the run keeps them for later steps and its report, until it ends |
//! | `src/gate/mod.rs` | each plan entry (the call's arguments), once per plan level that keeps it, while the plan lives |
//! | `src/script/vm.rs` | each preview a Lua run keeps (a loop of unconfirmed writes) and its captured output, until the run hands them over |
//! | `src/script/bridge.rs` | a tool call's arguments as JSON, until the call returns |
//! | `src/script/convert.rs` | the JSON a Lua table becomes, as it grows (a subtable mentioned many times is a copy each time) |
//! | `src/script/api.rs` | `json.encode`'s text as serde writes it, and the hold `gsub` builds on, until Lua has copied them |
//! | `src/tools/http.rs` | an `http_request` response body as it arrives, until the call returns it (a server that sends more than the run may hold) |
//! | `src/script/patterns.rs` | the string `gsub` builds, as it grows (a replacement of 4,096 `%0`s) |
//!
//! What Lua itself allocates (`string.rep`, `string.format`, `table.concat`, tables) is the VM's
//! limit's, not this budget's.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::Error;

/// One run's budget of host memory, shared by every call nested in it.
#[derive(Debug)]
pub struct HostMemory {
    limit: usize,
    used: AtomicUsize,
    /// The Lua states alive in the run's call tree.
    lua_states: AtomicUsize,
}

impl HostMemory {
    /// A budget of `limit` bytes (a run's is the same size as its Lua memory limit).
    pub fn new(limit: usize) -> Arc<HostMemory> {
        Arc::new(HostMemory {
            limit,
            used: AtomicUsize::new(0),
            lua_states: AtomicUsize::new(0),
        })
    }

    /// The budget, in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The bytes held now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// An empty hold, to grow as a buffer grows.
    pub fn hold_nothing(self: &Arc<Self>) -> Held {
        Held {
            memory: Arc::clone(self),
            bytes: 0,
        }
    }

    /// Holds `bytes` until the returned [`Held`] is dropped; fails, holding nothing, when that
    /// would pass the budget. `what` names the buffer in the error.
    pub fn hold(self: &Arc<Self>, bytes: usize, what: &str) -> Result<Held, Error> {
        let mut held = self.hold_nothing();
        held.grow(bytes, what)?;
        Ok(held)
    }

    fn take(&self, bytes: usize, what: &str) -> Result<(), Error> {
        let mut now = self.used.load(Ordering::Relaxed);
        loop {
            let next = now.saturating_add(bytes);
            if next > self.limit {
                return Err(self.exceeded(what));
            }
            match self
                .used
                .compare_exchange_weak(now, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Ok(()),
                Err(seen) => now = seen,
            }
        }
    }

    /// The Lua memory a new Lua state in this run may use, at most `limit` (the configured one).
    /// The run's first state gets all of it. A state made while another lives (a Lua program
    /// nested in a Lua program) draws on the run's host memory instead, half of what is left,
    /// held until the state goes: so a program nested fifteen deep cannot make fifteen times
    /// the Lua limit, and the deeper a program is, the less it may take.
    pub fn lua_state(self: &Arc<Self>, limit: usize) -> Result<LuaShare, Error> {
        let before = self.lua_states.fetch_add(1, Ordering::Relaxed);
        let mut share = LuaShare {
            memory: Arc::clone(self),
            held: None,
            limit,
        };
        if before == 0 {
            return Ok(share);
        }
        let room = self.limit.saturating_sub(self.used()) / 2;
        let wanted = limit.min(room);
        if wanted < MIN_NESTED_LUA {
            // `share` drops here and gives its count back
            return Err(self.exceeded("a nested program's Lua state"));
        }
        share.held = Some(self.hold(wanted, "a nested program's Lua state")?);
        share.limit = wanted;
        Ok(share)
    }

    /// The error for a buffer that would pass the budget.
    pub fn exceeded(&self, what: &str) -> Error {
        Error::Limit {
            what: format!("{what} would pass the run's host memory"),
            limit: format!(
                "{} MiB of host memory per run, the size of limits.lua_memory_mb",
                self.limit >> 20
            ),
        }
    }
}

/// The least Lua memory a nested program's state is made with; with less room left, nesting
/// deeper fails at once, naming the limit.
const MIN_NESTED_LUA: usize = 1 << 20;

/// A Lua state's place in its run: how much memory it may use, and what it holds of the run's
/// host memory (none for the run's first state). Kept as long as the state lives.
#[derive(Debug)]
pub struct LuaShare {
    memory: Arc<HostMemory>,
    held: Option<Held>,
    limit: usize,
}

impl LuaShare {
    /// The memory limit to set on the state.
    pub fn limit(&self) -> usize {
        self.limit
    }
}

impl Drop for LuaShare {
    fn drop(&mut self) {
        self.held = None;
        self.memory.lua_states.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Bytes held on a [`HostMemory`] budget; given back when dropped.
#[derive(Debug)]
pub struct Held {
    memory: Arc<HostMemory>,
    bytes: usize,
}

impl Held {
    /// Holds `more` bytes besides; fails, holding no more, past the budget.
    pub fn grow(&mut self, more: usize, what: &str) -> Result<(), Error> {
        self.memory.take(more, what)?;
        self.bytes += more;
        Ok(())
    }

    /// Holds at least `total` bytes in all (a buffer that grew to `total`), taking the rest
    /// in steps of at least 64 KiB so that a buffer growing a byte at a time checks rarely.
    pub fn cover(&mut self, total: usize, what: &str) -> Result<(), Error> {
        if total <= self.bytes {
            return Ok(());
        }
        let want = total - self.bytes;
        let step = want.max(64 << 10);
        if step > want && self.memory.take(step, what).is_ok() {
            self.bytes += step;
            return Ok(());
        }
        self.grow(want, what)
    }

    /// Moves what `other` holds into this hold.
    pub fn absorb(&mut self, mut other: Held) {
        self.bytes += std::mem::take(&mut other.bytes);
    }

    /// The bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.memory.used.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// What one JSON value costs beside its text: the size of a `serde_json::Value` and a map
/// entry's or a vector slot's share, rounded up.
pub const JSON_VALUE_COST: usize = 48;

/// What a JSON value costs in memory, about: its strings' bytes and a fixed cost per value
/// (the enum, a map entry or a vector slot). Cheap to compute; counted once per value held.
pub fn json_cost(value: &serde_json::Value) -> usize {
    use serde_json::Value;
    const PER_VALUE: usize = JSON_VALUE_COST;
    match value {
        Value::String(s) => PER_VALUE + s.len(),
        Value::Array(a) => PER_VALUE + a.iter().map(json_cost).sum::<usize>(),
        Value::Object(m) => {
            PER_VALUE
                + m.iter()
                    .map(|(k, v)| k.len() + PER_VALUE + json_cost(v))
                    .sum::<usize>()
        }
        _ => PER_VALUE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_are_given_back_and_the_budget_is_shared() {
        let m = HostMemory::new(1000);
        let a = m.hold(600, "a").unwrap();
        let e = m.hold(500, "the second buffer").unwrap_err().to_string();
        assert!(
            e.contains("the second buffer") && e.contains("limits.lua_memory_mb"),
            "{e}"
        );
        assert_eq!(m.used(), 600, "a failed hold holds nothing");
        drop(a);
        assert_eq!(m.used(), 0);
        let mut b = m.hold_nothing();
        b.cover(10, "b").unwrap();
        assert!(b.bytes() >= 10 && m.used() == b.bytes());
        let mut c = m.hold_nothing();
        assert!(c.cover(2000, "c").is_err());
        let mut d = m.hold(5, "d").unwrap();
        d.absorb(b);
        drop(d);
        assert_eq!(m.used(), 0);
    }

    #[test]
    fn nested_lua_states_draw_on_the_run() {
        let m = HostMemory::new(64 << 20);
        let first = m.lua_state(64 << 20).unwrap();
        assert_eq!(
            first.limit(),
            64 << 20,
            "the first state gets the whole limit"
        );
        assert_eq!(m.used(), 0);
        let second = m.lua_state(64 << 20).unwrap();
        assert_eq!(second.limit(), 32 << 20, "half of what is left");
        let third = m.lua_state(64 << 20).unwrap();
        assert_eq!(third.limit(), 16 << 20);
        let mut deeper = Vec::new();
        let e = loop {
            match m.lua_state(64 << 20) {
                Ok(s) => deeper.push(s),
                Err(e) => break e,
            }
        };
        assert!(e.to_string().contains("nested program"), "{e}");
        assert!(deeper.len() < 6, "bounded: {}", deeper.len());
        drop((deeper, third, second));
        assert_eq!(m.used(), 0);
        drop(first);
        assert_eq!(m.lua_state(8).unwrap().limit(), 8, "first again");
    }

    #[test]
    fn json_costs_grow_with_their_text() {
        let small = json_cost(&serde_json::json!({"a": "x"}));
        let big = json_cost(&serde_json::json!({"a": "x".repeat(1000)}));
        assert_eq!(big - small, 999);
    }
}
