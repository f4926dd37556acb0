//! The named roundtrip scenarios (seed 002's, and a few more) and their verdicts.

use serde_json::{Value as Json, json};

use super::divergence::{Cause, common_prefix, divergence, token_divergence};
use super::simulate::{Args, Edit, FollowUp, Sim, Turn};
use super::{ScenarioResult, Status};

/// A roundtrip scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// Reasoning, then a tool call; the tool result follows.
    ToolCallReasoning,
    /// A call with string, integer, boolean and number arguments.
    MultiParam,
    /// Reasoning and an answer, then a user message; default template variables.
    HistoryReasoningDefault,
    /// The same with the template's switch to keep reasoning in history (`preserve_thinking`,
    /// `clear_thinking=false`, ...).
    HistoryReasoningPreserved,
    /// A call whose arguments the client passes back as the JSON string the API returned.
    ArgsAsString,
    /// The same call with arguments passed back as an object.
    ArgsAsObject,
    /// The model writes one more newline after the reasoning end marker than the template.
    NewlinesAfterReasoning,
    /// The model's reasoning ends in whitespace before the end marker.
    TrailingWsInReasoning,
    /// Output cut inside reasoning (max_tokens); the client asks to continue.
    TruncatedReasoning,
    /// A call whose arguments are not closed.
    MalformedToolCall,
    /// Two calls in one turn; the engine assigns its own ids.
    ParallelEngineIds,
    /// The engine does not return the stop marker with the text.
    StopTokenNotReturned,
    /// A final answer ended by the model's stop marker, then a user message: does history write
    /// the same marker?
    FinalAnswerStopToken,
}

impl Scenario {
    /// Every scenario, in report order.
    pub const ALL: [Scenario; 13] = [
        Scenario::ToolCallReasoning,
        Scenario::MultiParam,
        Scenario::HistoryReasoningDefault,
        Scenario::HistoryReasoningPreserved,
        Scenario::ArgsAsString,
        Scenario::ArgsAsObject,
        Scenario::NewlinesAfterReasoning,
        Scenario::TrailingWsInReasoning,
        Scenario::TruncatedReasoning,
        Scenario::MalformedToolCall,
        Scenario::ParallelEngineIds,
        Scenario::StopTokenNotReturned,
        Scenario::FinalAnswerStopToken,
    ];

    /// The scenario's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::ToolCallReasoning => "tool_call_reasoning",
            Scenario::MultiParam => "multi_param",
            Scenario::HistoryReasoningDefault => "history_reasoning_default",
            Scenario::HistoryReasoningPreserved => "history_reasoning_preserved",
            Scenario::ArgsAsString => "args_as_string",
            Scenario::ArgsAsObject => "args_as_object",
            Scenario::NewlinesAfterReasoning => "newlines_after_reasoning",
            Scenario::TrailingWsInReasoning => "trailing_ws_in_reasoning",
            Scenario::TruncatedReasoning => "truncated_reasoning",
            Scenario::MalformedToolCall => "malformed_tool_call",
            Scenario::ParallelEngineIds => "parallel_engine_ids",
            Scenario::StopTokenNotReturned => "stop_token_not_returned",
            Scenario::FinalAnswerStopToken => "final_answer_stop_token",
        }
    }

    /// The scenario named `name`.
    pub fn from_name(name: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|s| s.name() == name)
    }
}

const REASONING: &str = "The user wants the weather in Paris. I should call get_weather with the city.";
const ANSWER: &str = "It is sunny in Paris, 21 degrees.";
/// Ids of nine alphanumeric characters: Mistral templates refuse any other shape.
const ID_1: &str = "a1B2c3D4e";
const ID_2: &str = "f5G6h7I8j";

fn weather(id: &str, city: &str) -> Json {
    json!({"id": id, "type": "function", "function": {"name": "get_weather", "arguments": {"location": city, "unit": "celsius"}}})
}

fn alarm() -> Json {
    json!({"id": ID_1, "type": "function", "function": {"name": "set_alarm", "arguments": {
        "time": "07:30", "label": "Wake up", "repeat_days": 5, "enabled": true, "snooze_minutes": 2.5
    }}})
}

/// Switches that keep reasoning of earlier turns, and the value that keeps it.
const KEEP_REASONING: [(&str, bool); 6] = [
    ("preserve_thinking", true),
    ("preserved_thinking", true),
    ("keep_past_thinking", true),
    ("clear_thinking", false),
    ("drop_thinking", false),
    ("truncate_history_thinking", false),
];

fn not_applicable(scenario: Scenario, why: &str) -> ScenarioResult {
    ScenarioResult {
        scenario: scenario.name(),
        status: Status::NotApplicable,
        string_prefix_ok: None,
        token_prefix_ok: None,
        first_divergence: None,
        cause: None,
        note: why.to_owned(),
    }
}

/// The turn a scenario simulates, with a note on what it is; `Err` says why it does not apply.
fn turn_of(sim: &Sim, scenario: Scenario) -> Result<(Turn, String), String> {
    let reasoning = sim.reasoning;
    let tools = sim.has_tools();
    let need = |ok: bool, what: &str| if ok { Ok(()) } else { Err(format!("the template renders no {what}")) };
    if !reasoning && sim.format.reasoning.is_some() {
        let reasoning_scenario = matches!(
            scenario,
            Scenario::ToolCallReasoning
                | Scenario::HistoryReasoningDefault
                | Scenario::HistoryReasoningPreserved
                | Scenario::NewlinesAfterReasoning
                | Scenario::TrailingWsInReasoning
                | Scenario::TruncatedReasoning
        );
        if reasoning_scenario {
            return Err("the generation prompt closes reasoning and no known switch opens it".to_owned());
        }
    }
    let base = Turn::new(sim.opening.clone(), json!({"role": "assistant", "content": ANSWER}));
    let with_reasoning = |mut message: Json| {
        if reasoning {
            message["reasoning_content"] = json!(REASONING);
        }
        message
    };
    let calls = |calls: Vec<Json>| with_reasoning(json!({"role": "assistant", "tool_calls": calls}));
    let answer_then_user = Turn {
        assistant: with_reasoning(json!({"role": "assistant", "content": ANSWER})),
        follow_up: FollowUp::User("And tomorrow?".to_owned()),
        ..base.clone()
    };
    // Reasoning scenarios: the model reasons even where the template writes none.
    let reasoning_base = Turn { reasoning_written_in: true, ..base.clone() };
    let reasoning_answer = Turn { reasoning_written_in: true, ..answer_then_user.clone() };
    Ok(match scenario {
        Scenario::ToolCallReasoning => {
            need(reasoning, "reasoning")?;
            need(tools, "tool calls")?;
            (
                Turn { assistant: calls(vec![weather(ID_1, "Paris")]), ..base },
                "reasoning + get_weather call, arguments passed back as an object, tool result".to_owned(),
            )
        }
        Scenario::MultiParam => {
            need(tools, "tool calls")?;
            (
                Turn { assistant: calls(vec![alarm()]), ..base },
                "set_alarm with string, integer, boolean and number arguments".to_owned(),
            )
        }
        Scenario::HistoryReasoningDefault => {
            need(reasoning, "reasoning")?;
            (reasoning_answer, "reasoning + answer, then a user message; default variables".to_owned())
        }
        Scenario::HistoryReasoningPreserved => {
            need(reasoning, "reasoning")?;
            if sim.format.reasoning_details.as_ref().is_some_and(|d| d.kept_in_history) {
                (
                    reasoning_answer,
                    "reasoning + answer, then a user message; the template keeps reasoning by default".to_owned(),
                )
            } else {
                let sources: String = sim.template.names().filter_map(|n| sim.template.source(n)).collect();
                let (name, value) =
                    KEEP_REASONING.iter().find(|(name, _)| sources.contains(name)).ok_or_else(|| {
                        "the template drops reasoning from history and has no switch to keep it".to_owned()
                    })?;
                let turn = Turn { variables: vec![((*name).to_owned(), json!(value))], ..reasoning_answer };
                (turn, format!("reasoning + answer, then a user message; {name}={value}"))
            }
        }
        Scenario::ArgsAsString | Scenario::ArgsAsObject => {
            need(tools, "tool calls")?;
            let args = if scenario == Scenario::ArgsAsString { Args::String } else { Args::Object };
            let turn = Turn { assistant: calls(vec![weather(ID_1, "Paris")]), args, ..base };
            let how = if args == Args::String { "the JSON string the API returned" } else { "an object" };
            (turn, format!("get_weather call, arguments passed back as {how}"))
        }
        Scenario::NewlinesAfterReasoning | Scenario::TrailingWsInReasoning => {
            need(reasoning, "reasoning")?;
            let (edit, what) = if scenario == Scenario::NewlinesAfterReasoning {
                (Edit::NewlineAfterReasoning, "one more \\n after the reasoning end marker")
            } else {
                (Edit::TrailingSpaceInReasoning, "reasoning ends in \" \\n\" before its end marker")
            };
            let turn = if tools {
                Turn { assistant: calls(vec![weather(ID_1, "Paris")]), edit, ..reasoning_base }
            } else {
                Turn { edit, ..reasoning_answer }
            };
            (turn, format!("the model writes {what}"))
        }
        Scenario::TruncatedReasoning => {
            need(reasoning, "reasoning")?;
            let turn = Turn {
                edit: Edit::TruncateReasoning,
                follow_up: FollowUp::User("Please continue.".to_owned()),
                ..reasoning_answer
            };
            (
                turn,
                "output cut in the middle of the reasoning (no end marker, no stop marker), then a user message"
                    .to_owned(),
            )
        }
        Scenario::MalformedToolCall => {
            need(tools, "tool calls")?;
            let turn = Turn { assistant: calls(vec![weather(ID_1, "Paris")]), edit: Edit::BreakArguments, ..base };
            (turn, "the call's arguments are not closed".to_owned())
        }
        Scenario::ParallelEngineIds => {
            need(tools, "tool calls")?;
            need(sim.format.tools.as_ref().is_some_and(|t| t.parallel), "parallel tool calls")?;
            let turn = Turn {
                assistant: calls(vec![weather(ID_1, "Paris"), weather(ID_2, "London")]),
                engine_ids: true,
                ..base
            };
            (turn, "two calls; the engine replaces call ids with its own (chatcmpl-tool-…)".to_owned())
        }
        Scenario::StopTokenNotReturned => {
            let turn = if tools {
                Turn { assistant: calls(vec![weather(ID_1, "Paris")]), stop_returned: false, ..base }
            } else {
                Turn { stop_returned: false, ..answer_then_user }
            };
            (turn, "the engine returns the text without the stop marker the model sampled".to_owned())
        }
        Scenario::FinalAnswerStopToken => {
            let turn = Turn { assistant: json!({"role": "assistant", "content": ANSWER}), ..answer_then_user };
            (turn, "a final answer (no reasoning) with its stop marker, then a user message".to_owned())
        }
    })
}

/// Runs `scenario` on the simulated template.
pub(crate) fn check(sim: &Sim, scenario: Scenario) -> ScenarioResult {
    let (turn, note) = match turn_of(sim, scenario) {
        Ok(turn) => turn,
        Err(why) => return not_applicable(scenario, &why),
    };
    let outcome = match sim.turn(&turn) {
        Ok(outcome) => outcome,
        Err(why) => return not_applicable(scenario, &why.to_string()),
    };
    let expected = outcome.seen(turn.stop_returned);
    let note = if outcome.reasoning_written {
        format!(
            "{note}; the template writes no reasoning for this turn, so the model's is written with the Format's markers"
        )
    } else {
        note
    };
    let mut result = ScenarioResult {
        scenario: scenario.name(),
        status: Status::Ok,
        string_prefix_ok: Some(true),
        token_prefix_ok: None,
        first_divergence: None,
        cause: None,
        note,
    };
    let actual = match &outcome.next_prompt {
        Ok(actual) => actual,
        Err(error) => {
            result.status = Status::Break;
            result.string_prefix_ok = Some(false);
            result.cause = Some(Cause::TemplateRaised);
            result.note = format!("{}; next request: {error}", result.note);
            return result;
        }
    };
    if !actual.starts_with(&expected) {
        let at = common_prefix(&expected, actual);
        result.string_prefix_ok = Some(false);
        result.cause = Some(super::divergence::cause(&outcome, sim.format, &expected, actual, at));
        result.first_divergence = Some(divergence(&expected, actual, at, None));
    }
    if let Some(tokenizer) = sim.tokenizer {
        let completion = &expected[outcome.prompt.len()..];
        let ids = tokenizer
            .encode_rendered(&outcome.prompt)
            .and_then(|mut ids| {
                tokenizer.encode_rendered(completion).map(|more| {
                    ids.extend(more);
                    ids
                })
            })
            .and_then(|ids| tokenizer.encode_with_offsets(actual).map(|next| (ids, next)));
        match ids {
            Ok((ids, (next, offsets))) => {
                let token = token_divergence(&ids, &next);
                result.token_prefix_ok = Some(token.is_none());
                if let Some(token) = token {
                    match &mut result.first_divergence {
                        Some(divergence) => divergence.token = Some(token),
                        None => {
                            let at = offsets.get(token).map_or(actual.len(), |o| o.0);
                            let at = (0..=at)
                                .rev()
                                .find(|&i| expected.is_char_boundary(i) && actual.is_char_boundary(i))
                                .unwrap_or(0);
                            result.cause = Some(Cause::BpeBoundary);
                            result.first_divergence =
                                Some(divergence(&expected, actual, at.min(expected.len()), Some(token)));
                        }
                    }
                }
            }
            Err(error) => result.note = format!("{}; tokens not compared: {error}", result.note),
        }
    }
    if result.string_prefix_ok == Some(false) || result.token_prefix_ok == Some(false) {
        result.status = Status::Break;
    }
    result
}
