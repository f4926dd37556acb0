//! Parse-render roundtrip: where re-rendering a conversation breaks the prefix an inference engine
//! cached, and a token bridge that never breaks it.
//!
//! In a multi-turn session, prompt N plus the completion the model generated must be an exact
//! prefix of prompt N+1 (as text and as token ids), or the engine's prefix cache misses. The
//! checker simulates that chain for named [`Scenario`]s: render prompt N, let the "model" write its
//! turn exactly as the template renders it (or as real models deviate), parse it with parlance's
//! parser, build the next request from the parsed structure, render prompt N+1, and report the first
//! diverging byte and token with a [`Cause`]. The production [`Renderer`](crate::Renderer)'s bridge
//! avoids re-rendering altogether: it keeps the previous prompt and completion ids and appends only
//! the new messages' tokens, all derived from the template (no per-model code); the sessions here
//! check it against full re-renders.
//!
//! - `simulate.rs` — one turn of the chain (render, complete, edit, parse, rebuild, re-render).
//! - `scenarios.rs` — the named scenarios and their verdicts.
//! - `divergence.rs` — first divergence and its cause.
//! - `sessions.rs` — random multi-turn tool sessions, re-render vs bridge.

mod divergence;
mod scenarios;
mod sessions;
mod simulate;

use indexmap::IndexMap;
use serde::Serialize;
use serde_json::Value as Json;

use crate::format::Format;
use crate::template::{ChatTemplate, RenderOptions};
use crate::tokenizer::Tokenizer;

pub use divergence::{Cause, Divergence};
pub use scenarios::Scenario;
pub use sessions::BridgeSummary;

/// Options of a roundtrip run.
#[derive(Debug, Clone)]
pub struct RoundtripOptions {
    /// Template variables for every render (besides the ones a scenario sets).
    pub variables: IndexMap<String, Json>,
    /// Number of simulated bridge sessions (needs a tokenizer).
    pub sessions: usize,
    /// Seed of the random sessions and of generated call ids.
    pub seed: u64,
    /// Wall-clock budget of every render of the run together; default 60 s (a real template
    /// needs a few seconds at most). Where it runs out, the scenarios left fail with
    /// [`crate::TemplateError::Limit`] at once.
    pub max_wall_time: std::time::Duration,
}

impl Default for RoundtripOptions {
    fn default() -> RoundtripOptions {
        RoundtripOptions {
            variables: IndexMap::new(),
            sessions: 64,
            seed: 0x5eed,
            max_wall_time: std::time::Duration::from_secs(60),
        }
    }
}

/// What a scenario found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Prompt N + completion is a prefix of prompt N+1 (string, and tokens when checked).
    Ok,
    /// The prefix breaks.
    Break,
    /// The template cannot express the scenario (no reasoning, no tool calls, no parallel calls,
    /// no switch to keep reasoning); `note` says which.
    NotApplicable,
}

/// One scenario's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScenarioResult {
    /// The scenario's name (`tool_call_reasoning`, ...).
    pub scenario: &'static str,
    /// Ok, break, or not applicable.
    pub status: Status,
    /// Prompt N + completion is a prefix of prompt N+1 (`None`: not applicable).
    pub string_prefix_ok: Option<bool>,
    /// ids(prompt N) + ids(completion) is a prefix of ids(prompt N+1) (`None`: no tokenizer, or
    /// not applicable).
    pub token_prefix_ok: Option<bool>,
    /// Where the prefix breaks first.
    pub first_divergence: Option<Divergence>,
    /// Why it breaks.
    pub cause: Option<Cause>,
    /// What was simulated, or why the scenario does not apply.
    pub note: String,
}

/// The result of [`run`]: every scenario, and the bridge sessions when a tokenizer was given.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The template's label.
    pub template: String,
    /// One entry per scenario, in [`Scenario::ALL`] order.
    pub scenarios: Vec<ScenarioResult>,
    /// Re-render vs bridge over random sessions; `None` without a tokenizer or without a bridge
    /// (`bridge_error` says why).
    pub bridge: Option<BridgeSummary>,
    /// Why there is no bridge summary, if there is none.
    pub bridge_error: Option<String>,
}

/// Runs every scenario for `template` (analyzed as `format`), token-level when `tokenizer` is
/// given, and `options.sessions` bridge sessions.
pub fn run(
    template: &ChatTemplate,
    format: &Format,
    tokenizer: Option<&std::sync::Arc<Tokenizer>>,
    options: &RoundtripOptions,
) -> Report {
    let sim = simulate::Sim::new(template, format, tokenizer.map(|t| &**t), options);
    let scenarios = Scenario::ALL.iter().map(|scenario| scenarios::check(&sim, *scenario)).collect();
    let (bridge, bridge_error) = match tokenizer {
        None => (None, Some("no tokenizer: the bridge works on token ids".to_owned())),
        Some(tokenizer) if options.sessions > 0 => {
            // The harness's renders: its variables and its fixed date, as the simulation renders.
            let render_options = RenderOptions {
                add_generation_prompt: true,
                variables: sim.variables.clone(),
                now: simulate::render_date(),
                ..RenderOptions::default()
            };
            let renderer = crate::turn::Renderer::new(
                template.clone(),
                std::sync::Arc::new(format.clone()),
                tokenizer.clone(),
                render_options,
            );
            match renderer {
                Ok(renderer) => (Some(sessions::run(&sim, &renderer, options.sessions, options.seed)), None),
                Err(error) => (None, Some(error.to_string())),
            }
        }
        Some(_) => (None, Some("no sessions requested".to_owned())),
    };
    Report { template: template.label().to_owned(), scenarios, bridge, bridge_error }
}
