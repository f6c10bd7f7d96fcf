//! Programs: what recipes, custom tools and skill scripts have in common.
//!
//! A program is data — JSON steps or Lua source — plus a [`header::Header`] (name, description,
//! typed parameters, timeout, the tools it uses). One header format and one parameter type
//! system serve every library of programs.

pub mod header;
pub mod interpolate;
pub mod steps;
