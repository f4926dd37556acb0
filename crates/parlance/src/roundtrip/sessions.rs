//! Random multi-turn tool sessions (every other one clean: no stray whitespace, no cut-off turn),
//! run twice: the re-render path (every prompt rendered from
//! messages built from the parse) and the bridge path (every prompt bridged from the last one's
//! ids). Counts the prefix breaks of each, and checks that the bridge equals the re-render wherever
//! the re-render keeps the prefix.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value as Json, json};

use super::divergence::{Cause, common_prefix, divergence};
use super::simulate::{Edit, Sim, Turn, splitmix};
use crate::message::Conversation;
use crate::turn::Renderer;

/// Assistant turns per session.
const TURNS: usize = 3;

/// Re-render vs bridge over simulated sessions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BridgeSummary {
    /// Sessions simulated.
    pub sessions: usize,
    /// Turn transitions simulated (prompt N → prompt N+1).
    pub transitions: usize,
    /// Sessions in which the re-render path broke the token prefix at least once.
    pub rerender_breaks: usize,
    /// Transitions at which it broke.
    pub rerender_break_transitions: usize,
    /// First cause of each broken transition, counted.
    pub rerender_causes: BTreeMap<String, usize>,
    /// Sessions in which the bridge did not keep the previous prompt and completion, or failed.
    pub bridge_breaks: usize,
    /// Transitions where the re-render kept the prefix (so both paths had the same prompt) and the
    /// bridge ids were compared with the ids of the full re-render.
    pub compared: usize,
    /// Of those, how many were equal.
    pub bridge_equals_rerender: usize,
    /// Sessions ended early (not counted from there on): the template could not render a turn,
    /// or the turn could not be told apart from re-rendered history (a stop token inside it).
    pub skipped: usize,
    /// The first bridge failure or bridge/re-render difference, for diagnosis.
    pub first_problem: Option<String>,
}

/// A small deterministic random source (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = splitmix(self.0);
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<'s>(&mut self, items: &[&'s str]) -> &'s str {
        items[self.below(items.len())]
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

const THOUGHTS: [&str; 4] = [
    "The user wants the weather. I will call the tool.",
    "Let me think about this.\n\nFirst, the city; then the unit.",
    "An alarm at 7:30 with a label \"Wake up\" seems right.",
    "Nothing else is needed; answer briefly.",
];
const ANSWERS: [&str; 4] =
    ["It is sunny.", "Done: the alarm is set.", "Here is what I found:\n- 21 °C\n- sunny", "Checking now."];
const CITIES: [&str; 5] = ["Paris", "São Paulo", "New York", "Zürich", "東京"];
const SPACES: [&str; 5] = ["", "", "\n", " ", "\n\n"];

fn random_call(rng: &mut Rng, index: usize) -> Json {
    let id = format!("c{index}{:07}", rng.below(10_000_000));
    let function = if rng.chance(60) {
        json!({"name": "get_weather", "arguments": {"location": rng.pick(&CITIES), "unit": rng.pick(&["celsius", "fahrenheit"])}})
    } else {
        let snooze = [2.5, 10.0, 0.25][rng.below(3)];
        json!({"name": "set_alarm", "arguments": {
            "time": format!("{:02}:{:02}", rng.below(24), rng.below(60)),
            "label": rng.pick(&["Wake up", "Say \"hi\"", "line one\nline two"]),
            "repeat_days": rng.below(8),
            "enabled": rng.chance(50),
            "snooze_minutes": snooze
        }})
    };
    json!({"id": id, "type": "function", "function": function})
}

/// A random assistant turn; a `clean` one has no stray whitespace and no deviation from the
/// template (the sessions where re-rendering has a chance, so the bridge is compared with it).
fn random_turn(sim: &Sim, rng: &mut Rng, history: Vec<Json>, clean: bool) -> Turn {
    let mut message = json!({"role": "assistant"});
    let space = |rng: &mut Rng| if clean { "" } else { rng.pick(&SPACES) };
    if sim.reasoning {
        let thought = format!("{}{}{}", space(rng), rng.pick(&THOUGHTS), space(rng));
        message["reasoning_content"] = json!(thought);
    }
    let parallel = sim.format.tools.as_ref().is_some_and(|t| t.parallel);
    let calls = if sim.has_tools() { rng.below(if parallel { 3 } else { 2 }) } else { 0 };
    if calls == 0 || rng.chance(40) {
        message["content"] = json!(format!("{}{}", rng.pick(&ANSWERS), space(rng)));
    }
    if calls > 0 {
        message["tool_calls"] = json!((0..calls).map(|i| random_call(rng, i)).collect::<Vec<_>>());
    }
    let edit = match if clean { 100 } else { rng.below(100) } {
        0..15 => Edit::CutAt(rng.below(160)),
        15..30 => Edit::NewlineAfterReasoning,
        30..40 => Edit::TrailingSpaceInReasoning,
        _ => Edit::None,
    };
    Turn { edit, stop_returned: rng.chance(50), reasoning_written_in: true, ..Turn::new(history, message) }
}

/// Runs `sessions` random sessions through both paths.
pub(crate) fn run(sim: &Sim, renderer: &Renderer, sessions: usize, seed: u64) -> BridgeSummary {
    let mut summary = BridgeSummary { sessions, ..BridgeSummary::default() };
    let Some(tokenizer) = sim.tokenizer else { return summary };
    let mut rng = Rng(seed);
    let tools = Some(sim.tools.as_slice());
    for session in 0..sessions {
        let mut history = sim.opening.clone();
        let opening = Conversation { messages: history.clone(), tools: tools.map(<[Json]>::to_vec), documents: None };
        let Ok(mut bridged) = renderer.render(&opening) else {
            summary.skipped += 1;
            continue;
        };
        let (mut rerender_broke, mut bridge_broke) = (false, false);
        for _ in 0..TURNS {
            let mut turn = random_turn(sim, &mut rng, history.clone(), session % 2 == 0);
            // Some templates refuse content next to reasoning and calls (gpt-oss): the model then
            // writes no content.
            let outcome = match sim.turn(&turn) {
                Err(_) if turn.assistant.get("tool_calls").is_some() && turn.assistant.get("content").is_some() => {
                    turn.assistant.as_object_mut().map(|m| m.remove("content"));
                    sim.turn(&turn)
                }
                other => other,
            };
            let Ok(outcome) = outcome else { break };
            summary.transitions += 1;
            let Ok(next) = &outcome.next_prompt else {
                rerender_broke = true;
                summary.rerender_break_transitions += 1;
                *summary.rerender_causes.entry(name(Cause::TemplateRaised)).or_default() += 1;
                break;
            };
            let seen = outcome.seen(turn.stop_returned);
            let encode = |text: &str| tokenizer.encode_rendered(text).unwrap_or_default();
            let mut expected = encode(&outcome.prompt);
            let returned_ids = encode(&seen[outcome.prompt.len()..]);
            expected.extend_from_slice(&returned_ids);
            // A turn that holds a stop token before its end cannot come from a model (a template
            // that re-renders earlier turns once one is added leaves them in the diffed turn).
            let stops = renderer.stop_token_ids();
            if returned_ids.iter().rev().skip(1).any(|id| stops.contains(id)) {
                summary.skipped += 1;
                summary.transitions -= 1;
                break;
            }
            let next_ids = encode(next);
            let kept = next_ids.starts_with(&expected);
            if !kept {
                summary.rerender_break_transitions += 1;
                let cause = if next.starts_with(&seen) {
                    Cause::BpeBoundary
                } else {
                    super::divergence::cause(&outcome, sim.format, &seen, next, common_prefix(&seen, next))
                };
                *summary.rerender_causes.entry(name(cause)).or_default() += 1;
            }
            match renderer.bridge(&bridged, &returned_ids, &outcome.new_messages[1..], tools) {
                Err(error) => {
                    bridge_broke = true;
                    summary.first_problem.get_or_insert_with(|| format!("session {session}: bridge failed: {error}"));
                    break;
                }
                Ok(tokens) => {
                    let mut held = bridged.ids.clone();
                    held.extend_from_slice(&returned_ids);
                    if !tokens.ids.starts_with(&held) {
                        bridge_broke = true;
                        summary
                            .first_problem
                            .get_or_insert_with(|| format!("session {session}: bridge lost the prefix"));
                    }
                    if !rerender_broke && kept {
                        summary.compared += 1;
                        if tokens.ids == next_ids {
                            summary.bridge_equals_rerender += 1;
                        } else {
                            let bridge_text = tokenizer.decode(&tokens.ids).unwrap_or_default();
                            let at = common_prefix(next, &bridge_text);
                            let d = divergence(next, &bridge_text, at, None);
                            summary.first_problem.get_or_insert_with(|| {
                                format!(
                                    "session {session}: bridge differs from the re-render at byte {at}: {:?} | re-render {:?} | bridge {:?}",
                                    d.before, d.expected, d.actual
                                )
                            });
                        }
                    }
                    bridged = tokens;
                }
            }
            rerender_broke |= !kept;
            history.extend(outcome.new_messages.iter().cloned());
        }
        summary.rerender_breaks += usize::from(rerender_broke);
        summary.bridge_breaks += usize::from(bridge_broke);
    }
    summary
}

fn name(cause: Cause) -> String {
    serde_json::to_value(cause).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}
