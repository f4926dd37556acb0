//! Integration tests of the `parlance` crate; corpus-backed tests skip when the corpus is absent.

mod analyze;
mod constrain;
mod corpus;
mod deviations;
mod fuzz_regressions;
mod golden;
mod hostile_parse;
mod limits;
mod loading;
mod nesting;
mod outside;
mod parse;
mod roundtrip;
mod tokens;
mod xgrammar;

// Render memory limits are enforceable only under the guard; install it as the CLI does.
#[global_allocator]
static ALLOC: parlance::template::memory::GuardedAllocator = parlance::template::memory::GuardedAllocator;
