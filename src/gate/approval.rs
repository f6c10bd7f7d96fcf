//! What a person's yes covers: exactly the state-changing calls they were shown.
//!
//! When the gate asks about a program (a gateway such as `recipe_run` or `skill_call`, or a
//! `user_` tool), the question lists every state-changing tool the program may call, with its
//! effect and whether it is destructive. A yes records that list as an [`Approval`] on the call's
//! context; a nested call is covered only when its tool was on the list with an effect at least
//! as strong. Anything else asks again, or is refused where nobody can be asked. A per-tool `ask`
//! grant is never covered: it asks every time.

use serde::Serialize;

use crate::registry::Effect;

/// One state-changing tool a person was shown before saying yes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShownCall {
    /// The tool's name.
    pub tool: String,
    /// Its effect (write or send).
    pub effect: Effect,
    /// Whether it may destroy or overwrite data.
    pub destructive: bool,
}

impl ShownCall {
    /// "write_file (write, destructive)" for prompts.
    pub fn describe(&self) -> String {
        format!(
            "{} ({}{})",
            self.tool,
            self.effect,
            if self.destructive {
                ", destructive"
            } else {
                ""
            }
        )
    }
}

/// The calls a person approved in this call tree. Empty until someone says yes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Approval {
    shown: Vec<ShownCall>,
    /// The hosts shown (a program's `---@connect` patterns): a request to another host is not
    /// covered, whatever tool makes it.
    hosts: Vec<String>,
}

impl Approval {
    /// Whether a call of `tool` with this effect was shown and approved.
    pub fn covers(&self, tool: &str, effect: Effect, destructive: bool) -> bool {
        self.shown
            .iter()
            .any(|s| s.tool == tool && s.effect >= effect && (s.destructive || !destructive))
    }

    /// Adds what a person just said yes to.
    pub fn extend(&mut self, calls: &[ShownCall]) {
        for c in calls {
            if !self.shown.contains(c) {
                self.shown.push(c.clone());
            }
        }
    }

    /// Adds the hosts a person just said yes to.
    pub fn extend_hosts(&mut self, hosts: &[String]) {
        for h in hosts {
            if !self.hosts.contains(h) {
                self.hosts.push(h.clone());
            }
        }
    }

    /// Whether a request to `to` was among the hosts shown.
    pub fn covers_host(&self, to: &crate::config::HostPort) -> bool {
        self.hosts
            .iter()
            .any(|h| crate::config::HostPattern::parse(h).is_ok_and(|p| p.matches(to)))
    }

    /// What was approved so far.
    pub fn shown(&self) -> &[ShownCall] {
        &self.shown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(tool: &str, effect: Effect, destructive: bool) -> ShownCall {
        ShownCall {
            tool: tool.into(),
            effect,
            destructive,
        }
    }

    #[test]
    fn covers_only_what_was_shown_at_its_strength() {
        let mut a = Approval::default();
        assert!(!a.covers("write_file", Effect::Write, false));
        a.extend(&[shown("write_file", Effect::Write, false)]);
        assert!(a.covers("write_file", Effect::Write, false));
        assert!(!a.covers("write_file", Effect::Write, true));
        assert!(!a.covers("write_file", Effect::Send, false));
        assert!(!a.covers("run_command", Effect::Write, false));
    }

    #[test]
    fn covers_only_the_hosts_shown() {
        let to = |h: &str, port: u16| crate::config::HostPort {
            host: h.into(),
            port,
            default_port: port == 443,
        };
        let mut a = Approval::default();
        assert!(!a.covers_host(&to("hooks.example.org", 443)));
        a.extend_hosts(&["hooks.example.org".into(), "*.api.example.org".into()]);
        assert!(a.covers_host(&to("hooks.example.org", 443)));
        assert!(a.covers_host(&to("eu.api.example.org", 443)));
        assert!(!a.covers_host(&to("api.example.org", 443)));
        assert!(!a.covers_host(&to("evil.example.org", 443)));
    }
}
