//! Limits that bound the time and memory any grammar, schema or input can take.
//!
//! Every limit has a documented default; exceeding one is a clear error naming the limit, never a hang
//! or an abort.

use std::time::Duration;

/// Resource limits for compiling grammars and running matchers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock budget for compiling one grammar or schema, a JSON Schema's lowering to a grammar
    /// included. Default: 10 s.
    pub compile_time: Duration,
    /// Maximum states of one rule's automaton (before and after determinisation). Default: 200,000.
    pub automaton_states: usize,
    /// Maximum states over all automata of one grammar. Default: 2,000,000.
    pub total_states: usize,
    /// Maximum items in one Earley set. Default: 100,000.
    pub earley_set_items: usize,
    /// Maximum nesting depth of schemas, `$ref` chains and grammar expressions. Default: 32.
    pub recursion_depth: usize,
    /// Maximum number of bytes [`crate::Matcher::forced_bytes`] returns. Default: 1,024.
    pub forced_bytes: usize,
    /// Threads one compilation may use, the calling thread included: the tools of a structural tag
    /// that no earlier grammar built are built side by side. 1: the calling thread alone. Default:
    /// the machine's available parallelism, at most 8 (XGrammar's `max_threads`); at most 64 are
    /// used.
    pub compile_threads: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            compile_time: Duration::from_secs(10),
            automaton_states: 200_000,
            total_states: 2_000_000,
            earley_set_items: 100_000,
            recursion_depth: 32,
            forced_bytes: 1024,
            compile_threads: default_compile_threads(),
        }
    }
}

/// The machine's parallelism, at most 8, asked once (it reads the cgroup's files: tens of
/// microseconds, and every compile's default limits would ask).
fn default_compile_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(8)))
}
