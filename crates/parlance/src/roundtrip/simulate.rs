//! One turn of the chain an agent runs: prompt N → the model's completion → parse → next request →
//! prompt N+1.
//!
//! The "model" writes its turn exactly as the template renders that assistant message as the last
//! one (the text the template was trained to produce), cut after the stop marker the model samples
//! last; an [`Edit`] then makes it deviate as real models do. Everything after that is what an
//! engine and a client do: the engine may drop the stop marker, parlance's parser reads the text,
//! the client builds the assistant message from the parsed structure and adds tool results or a
//! user message.

use indexmap::IndexMap;
use serde_json::{Value as Json, json};

use crate::analyze::probe::split_output;
use crate::format::{Format, Workaround};
use crate::message::Conversation;
use crate::message::{null_content_beside_calls, wire_message};
use crate::parse::{ArgumentsAs, ParseOptions, ParsedMessage, Parser};
use crate::template::{ChatTemplate, RenderOptions, TemplateError};
use crate::tokenizer::Tokenizer;

use super::RoundtripOptions;

/// How the model's text deviates from the template's rendering of its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Edit {
    /// Exactly as the template renders it.
    None,
    /// One more `\n` right after the reasoning end marker.
    NewlineAfterReasoning,
    /// `" \n"` right before the reasoning end marker (reasoning ends in whitespace).
    TrailingSpaceInReasoning,
    /// Cut in the middle of the reasoning, before its end marker (max_tokens reached).
    TruncateReasoning,
    /// The last call's arguments lose their closing `}` (JSON) or value end marker (tagged).
    BreakArguments,
    /// Cut after this many bytes (moved back to a character boundary); no stop marker.
    CutAt(usize),
}

/// How the client passes tool-call arguments back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Args {
    /// A JSON object (what vLLM hands templates; what transformers documents).
    Object,
    /// The JSON text the API returned (OpenAI's shape).
    String,
}

/// What follows the assistant turn in the next request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FollowUp {
    /// One tool result per parsed call (a user message when nothing was called).
    ToolResults,
    /// A user message.
    User(String),
}

/// Why a turn cannot be simulated.
#[derive(Debug)]
pub(crate) enum Unsimulable {
    /// The template raised on the turn itself.
    Raised(TemplateError),
    /// The template writes no reasoning for this turn even as the last message, so the model's
    /// own text (which has reasoning) cannot be read off a render.
    NoReasoning,
    /// The scenario's edit finds nothing to change in this format.
    EditImpossible,
}

impl From<TemplateError> for Unsimulable {
    fn from(error: TemplateError) -> Unsimulable {
        Unsimulable::Raised(error)
    }
}

impl std::fmt::Display for Unsimulable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unsimulable::Raised(error) => write!(f, "the template raised on the turn itself: {error}"),
            Unsimulable::NoReasoning => {
                f.write_str("the template writes no reasoning in this turn even as the last message")
            }
            Unsimulable::EditImpossible => f.write_str("the edit finds nothing to change in this format"),
        }
    }
}

/// One simulated turn.
#[derive(Debug, Clone)]
pub(crate) struct Turn {
    /// Messages before the assistant turn.
    pub history: Vec<Json>,
    /// What the model "means" to write.
    pub assistant: Json,
    /// How its text deviates from the template's.
    pub edit: Edit,
    /// How arguments are passed back.
    pub args: Args,
    /// The engine replaces call ids with its own.
    pub engine_ids: bool,
    /// The engine returns the stop marker with the text.
    pub stop_returned: bool,
    /// What the client sends next.
    pub follow_up: FollowUp,
    /// Template variables of this scenario (e.g. `preserve_thinking`).
    pub variables: Vec<(String, Json)>,
    /// When the template writes no reasoning for the turn, write the model's in with the Format's
    /// markers (reasoning scenarios, sessions); otherwise the model's text has none.
    pub reasoning_written_in: bool,
}

impl Turn {
    /// `assistant` after `history`, written exactly as the template writes it, arguments passed
    /// back as an object, the stop marker returned, tool results next.
    pub(crate) fn new(history: Vec<Json>, assistant: Json) -> Turn {
        Turn {
            history,
            assistant,
            edit: Edit::None,
            args: Args::Object,
            engine_ids: false,
            stop_returned: true,
            follow_up: FollowUp::ToolResults,
            variables: Vec::new(),
            reasoning_written_in: false,
        }
    }
}

/// What happened in one turn.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// The template wrote no reasoning for the turn, so the model's reasoning was written in with
    /// the Format's markers.
    pub reasoning_written: bool,
    /// Prompt N (history with the generation prompt).
    pub prompt: String,
    /// Byte offset in `prompt` where the generation prompt starts.
    pub generation_prompt_at: usize,
    /// What the model generated (with its stop marker, if it got that far).
    pub completion: String,
    /// The stop marker at the end of `completion`.
    pub stop: Option<String>,
    /// What the engine returned (the completion, maybe without its stop marker).
    pub returned: String,
    /// The parse of `returned`.
    pub parsed: ParsedMessage,
    /// Messages of the next request after the history: the rebuilt assistant message, then the
    /// follow-up.
    pub new_messages: Vec<Json>,
    /// Prompt N+1, or the template's error.
    pub next_prompt: Result<String, TemplateError>,
}

impl Outcome {
    /// The text the engine has seen: prompt N and the completion as the check counts it.
    pub(crate) fn seen(&self, stop_returned: bool) -> String {
        let completion = if stop_returned { &self.completion } else { &self.returned };
        format!("{}{}", self.prompt, completion)
    }
}

/// The template under study, with everything a turn needs.
pub(crate) struct Sim<'a> {
    pub template: &'a ChatTemplate,
    pub format: &'a Format,
    pub tokenizer: Option<&'a Tokenizer>,
    /// Variables of every render: the caller's, plus a thinking switch when the template's default
    /// prompt closes reasoning.
    pub variables: IndexMap<String, Json>,
    /// The tools every request declares.
    pub tools: Vec<Json>,
    /// Whether the model can reason: the template has reasoning and the prompt in use does not
    /// close it (a default that closes it and no switch the analyzer knows to open it: no).
    pub reasoning: bool,
    /// The first messages of every conversation (a user message, after a system one if the
    /// template needs it).
    pub opening: Vec<Json>,
    /// Parser of the model's text (the request's tools, the generation prompt in use).
    pub parser: Parser,
    /// Seed of engine-assigned and generated ids.
    pub seed: u64,
    /// The first render that hit a render limit (name, line, which, value): every later render
    /// fails the same way at once, so a template too expensive to render costs one budget, not one
    /// per scenario.
    pub limit_hit: std::sync::Mutex<Option<(String, usize, &'static str, u64)>>,
    /// The whole run's wall-clock budget, shared by every render.
    pub budget: crate::template::RunBudget,
}

/// Date of every render (templates print today's date).
pub(crate) fn render_date() -> Option<chrono::NaiveDateTime> {
    chrono::NaiveDate::from_ymd_opt(2025, 1, 15).and_then(|d| d.and_hms_opt(12, 0, 0))
}

/// The tools every simulated request declares.
pub(crate) fn tools() -> Vec<Json> {
    vec![
        json!({"type": "function", "function": {
            "name": "get_weather",
            "description": "Current weather in a city.",
            "parameters": {"type": "object", "properties": {
                "location": {"type": "string", "description": "City name."},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit."}
            }, "required": ["location"]}
        }}),
        json!({"type": "function", "function": {
            "name": "set_alarm",
            "description": "Set an alarm.",
            "parameters": {"type": "object", "properties": {
                "time": {"type": "string", "description": "HH:MM."},
                "label": {"type": "string", "description": "Shown when it rings."},
                "repeat_days": {"type": "integer", "description": "Days to repeat."},
                "enabled": {"type": "boolean", "description": "Whether it is on."},
                "snooze_minutes": {"type": "number", "description": "Snooze length."}
            }, "required": ["time"]}
        }}),
    ]
}

/// A tool's result, as the client sends it back.
pub(crate) fn tool_result(name: &str) -> String {
    match name {
        "get_weather" => r#"{"temperature": 21, "condition": "sunny"}"#.to_owned(),
        "set_alarm" => r#"{"ok": true}"#.to_owned(),
        _ => r#"{"error": "unknown tool"}"#.to_owned(),
    }
}

impl<'a> Sim<'a> {
    pub(crate) fn new(
        template: &'a ChatTemplate,
        format: &'a Format,
        tokenizer: Option<&'a Tokenizer>,
        options: &RoundtripOptions,
    ) -> Sim<'a> {
        let mut variables = options.variables.clone();
        if format.has_workaround(Workaround::UndeclaredVariablesSetEmpty) {
            for var in template.undeclared_variables() {
                variables.entry(var).or_insert(json!(""));
            }
        }
        let tools = tools();
        let user = json!({"role": "user", "content": "What's the weather in Paris? Also set an alarm."});
        let openings =
            [vec![user.clone()], vec![json!({"role": "system", "content": "You are a helpful assistant."}), user]];
        let mut sim = Sim {
            template,
            format,
            tokenizer,
            variables,
            tools,
            reasoning: false,
            opening: openings[0].clone(),
            parser: Parser::new(format, &ParseOptions::default()),
            seed: options.seed,
            limit_hit: std::sync::Mutex::new(None),
            budget: crate::template::RunBudget::new(options.max_wall_time, "roundtrip wall-clock milliseconds"),
        };
        if let Some(opening) = openings.iter().find(|o| sim.render(o, true, true, &[]).is_ok()) {
            sim.opening = opening.clone();
        }
        // Templates whose default prompt closes reasoning open it only when asked: reasoning
        // scenarios need it open, as a thinking request has it.
        if let Some(on) = format.reasoning_details.as_ref().and_then(|d| d.generation_prompt_thinking_on.clone()) {
            let caller_set = ["enable_thinking", "thinking"].iter().any(|v| options.variables.contains_key(*v));
            for var in ["enable_thinking", "thinking"].into_iter().filter(|_| !caller_set) {
                let extra = [(var.to_owned(), json!(true))];
                if sim.generation_prompt(&sim.opening, &extra).is_some_and(|p| p == on) {
                    sim.variables.insert(var.to_owned(), json!(true));
                    break;
                }
            }
        }
        let generation_prompt = sim.generation_prompt(&sim.opening, &[]);
        let closed_by_prompt = |end: &str| {
            let end = end.trim();
            !end.is_empty() && generation_prompt.as_deref().is_some_and(|p| p.trim_end().ends_with(end))
        };
        sim.reasoning = format.reasoning.as_ref().is_some_and(|r| !closed_by_prompt(&r.end));
        let parse_options = ParseOptions {
            tools: sim.tools.clone(),
            generation_prompt,
            id_seed: Some(options.seed),
            ..ParseOptions::default()
        };
        sim.parser = Parser::new(format, &parse_options);
        sim
    }

    /// Renders `messages`; `extra` variables override the simulation's.
    pub(crate) fn render(
        &self,
        messages: &[Json],
        with_tools: bool,
        add_generation_prompt: bool,
        extra: &[(String, Json)],
    ) -> Result<String, TemplateError> {
        let mut messages = messages.to_vec();
        // The template renders calls only beside `content: null`, which transformers drops: the
        // simulation sends the OpenAI wire shape, with the null kept, or no call would render.
        let keep_null_keys = self.format.has_workaround(Workaround::CallsWithNullContent);
        if keep_null_keys {
            null_content_beside_calls(&mut messages);
        }
        let conversation = Conversation { messages, tools: with_tools.then(|| self.tools.clone()), documents: None };
        let mut variables = self.variables.clone();
        for (name, value) in extra {
            variables.insert(name.clone(), value.clone());
        }
        let options = RenderOptions {
            add_generation_prompt,
            variables,
            now: render_date(),
            keep_null_keys,
            budget: Some(self.budget),
            ..RenderOptions::default()
        };
        let hit = self.limit_hit.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some((name, line, what, limit)) = hit {
            return Err(TemplateError::Limit { name, line, what, limit });
        }
        let rendered = self.template.render(&conversation, &options);
        if let Err(TemplateError::Limit { name, line, what, limit }) = &rendered {
            let mut hit = self.limit_hit.lock().unwrap_or_else(|e| e.into_inner());
            hit.get_or_insert_with(|| (name.clone(), *line, what, *limit));
        }
        rendered
    }

    /// What `add_generation_prompt` appends after `messages`.
    pub(crate) fn generation_prompt(&self, messages: &[Json], extra: &[(String, Json)]) -> Option<String> {
        let closed = self.render(messages, true, false, extra).ok()?;
        let open = self.render(messages, true, true, extra).ok()?;
        Some(split_output(&closed, &open, &open).generation_prompt)
    }

    /// Whether the template renders tool calls at all.
    pub(crate) fn has_tools(&self) -> bool {
        self.format.tools.is_some()
    }

    /// Where the model stops in `text` (see `turn::stop_in`).
    pub(crate) fn stop_in(&self, text: &str, after: usize) -> Option<(usize, usize)> {
        crate::turn::stop_in(self.template, self.format, text, after)
    }

    /// Runs one turn.
    pub(crate) fn turn(&self, turn: &Turn) -> Result<Outcome, Unsimulable> {
        let closed = self.render(&turn.history, true, false, &turn.variables)?;
        let prompt = self.render(&turn.history, true, true, &turn.variables)?;
        let mut with_turn = turn.history.clone();
        // The model writes what the template writes from arguments as the wire's JSON string when
        // that is what the template prints (`arguments_from_string`); an object would raise.
        let written = wire_message(self.format, &turn.assistant);
        with_turn.push(written.clone());
        let full = self.render(&with_turn, true, false, &turn.variables).or_else(|error| {
            // Templates differ on an absent `content` next to calls; try it empty.
            if written.get("content").is_none() {
                let mut assistant = written.clone();
                assistant["content"] = json!("");
                *with_turn.last_mut().expect("the turn was pushed") = assistant;
                self.render(&with_turn, true, false, &turn.variables)
            } else {
                Err(error)
            }
        })?;
        let output = split_output(&closed, &prompt, &full);
        let generation_prompt_at = prompt.len() - output.generation_prompt.len();
        // The turn's parts: the model does not stop before it has written them.
        let a = &turn.assistant;
        let mut parts: Vec<&str> =
            a["content"].as_str().into_iter().chain(a["reasoning_content"].as_str()).map(str::trim).collect();
        for call in a["tool_calls"].as_array().into_iter().flatten() {
            parts.extend(call["function"]["name"].as_str());
        }
        let after = parts
            .iter()
            .filter(|p| !p.is_empty())
            .filter_map(|p| output.text.find(p).map(|at| at + p.len()))
            .max()
            .unwrap_or(0);
        let (mut completion, mut stop) = match self.stop_in(&output.text, after) {
            Some((start, end)) => {
                // The model stops at the first stop marker it writes after its parts.
                let marker = &output.text[start..end];
                let first = output.text[after.min(start)..].find(marker).map_or(start, |at| after.min(start) + at);
                (output.text[..first + marker.len()].to_owned(), Some(marker.to_owned()))
            }
            None => (output.text.trim_end().to_owned(), None),
        };
        let mut reasoning_written = false;
        if let Some(reasoning) = turn.assistant["reasoning_content"].as_str().filter(|_| turn.reasoning_written_in)
            && !completion.contains(reasoning.trim())
        {
            // The template does not write this turn's reasoning even as the last message; the
            // model does, with the Format's markers.
            completion = self.with_reasoning(&completion, reasoning.trim(), &prompt).ok_or(Unsimulable::NoReasoning)?;
            reasoning_written = true;
        }
        let unedited = completion.clone();
        self.edit(&mut completion, &mut stop, turn.edit);
        if turn.edit != Edit::None && completion == unedited {
            return Err(Unsimulable::EditImpossible);
        }
        let returned = match (&stop, turn.stop_returned) {
            (Some(marker), false) => completion.strip_suffix(marker.as_str()).unwrap_or(&completion).to_owned(),
            _ => completion.clone(),
        };
        let parsed = self.parser.parse(&returned);
        let assistant = self.rebuild(&parsed, turn.args, turn.engine_ids);
        let mut new_messages = vec![assistant];
        match &turn.follow_up {
            FollowUp::ToolResults if !parsed.tool_calls.is_empty() => {
                let calls = new_messages[0]["tool_calls"].as_array().cloned().unwrap_or_default();
                for call in calls {
                    let name = call["function"]["name"].as_str().unwrap_or_default();
                    new_messages.push(json!({
                        "role": "tool", "tool_call_id": call["id"], "name": name, "content": tool_result(name)
                    }));
                }
            }
            FollowUp::ToolResults => new_messages.push(json!({"role": "user", "content": "Please go on."})),
            FollowUp::User(text) => new_messages.push(json!({"role": "user", "content": text})),
        }
        let next_prompt = self.render_next(&turn.history, &mut new_messages, &turn.variables);
        Ok(Outcome {
            reasoning_written,
            prompt,
            generation_prompt_at,
            completion,
            stop,
            returned,
            parsed,
            new_messages,
            next_prompt,
        })
    }

    /// Renders `history + new_messages` with the generation prompt; a rebuilt assistant message
    /// without content is retried with empty content when the template raises.
    pub(crate) fn render_next(
        &self,
        history: &[Json],
        new_messages: &mut [Json],
        extra: &[(String, Json)],
    ) -> Result<String, TemplateError> {
        let all = |new: &[Json]| history.iter().chain(new).cloned().collect::<Vec<_>>();
        match self.render(&all(new_messages), true, true, extra) {
            Err(error) if new_messages.first().is_some_and(|m| m.get("content").is_none_or(Json::is_null)) => {
                let mut retry = new_messages.to_vec();
                retry[0]["content"] = json!("");
                let rendered = self.render(&all(&retry), true, true, extra).map_err(|_| error)?;
                new_messages[0]["content"] = json!("");
                Ok(rendered)
            }
            other => other,
        }
    }

    /// `completion` with `reasoning` written in as a model writes it: inside an empty block the
    /// template wrote, before a lone end marker (the prompt opened reasoning), or as a whole block
    /// in front. `None` without reasoning markers.
    fn with_reasoning(&self, completion: &str, reasoning: &str, prompt: &str) -> Option<String> {
        let markers = self.format.reasoning.as_ref()?;
        let details = self.format.reasoning_details.as_ref();
        let (start, end) = (markers.start.trim(), markers.end.trim());
        if end.is_empty() {
            return None;
        }
        let end_literal = details.map_or(end, |d| d.end_literal.as_str());
        let before_end = &end_literal[..end_literal.find(end).unwrap_or(0)];
        let lead = completion.len() - completion.trim_start().len();
        if completion[lead..].starts_with(end) {
            return Some(format!("{}{reasoning}{before_end}{}", &completion[..lead], &completion[lead..]));
        }
        if let Some(at) = (!start.is_empty()).then(|| completion.find(start)).flatten() {
            let inner = at + start.len();
            if let Some(close) =
                completion[inner..].find(end).filter(|i| completion[inner..inner + i].trim().is_empty())
            {
                let after_start = details.map_or("", |d| {
                    d.start_literal.get(d.start_literal.find(start).map_or(0, |i| i + start.len())..).unwrap_or("")
                });
                return Some(format!(
                    "{}{after_start}{reasoning}{before_end}{}",
                    &completion[..inner],
                    &completion[inner + close..]
                ));
            }
        }
        if !start.is_empty() && prompt.trim_end().ends_with(start) {
            return Some(format!("{reasoning}{end_literal}{completion}"));
        }
        let start_literal = details.map_or(start, |d| d.start_literal.as_str());
        Some(format!("{start_literal}{reasoning}{end_literal}{completion}"))
    }

    /// Applies `edit` to the model's text.
    fn edit(&self, completion: &mut String, stop: &mut Option<String>, edit: Edit) {
        let reasoning_end = self.format.reasoning.as_ref().map(|r| r.end.as_str()).filter(|e| !e.is_empty());
        match edit {
            Edit::None => {}
            Edit::NewlineAfterReasoning => {
                if let Some(at) = reasoning_end.and_then(|end| completion.find(end).map(|at| at + end.len())) {
                    completion.insert(at, '\n');
                }
            }
            Edit::TrailingSpaceInReasoning => {
                if let Some(at) = reasoning_end.and_then(|end| completion.find(end)) {
                    completion.insert_str(at, " \n");
                }
            }
            Edit::TruncateReasoning => {
                let start = self.format.reasoning.as_ref().map(|r| r.start.as_str()).unwrap_or_default();
                let from = match completion.find(start).filter(|_| !start.is_empty()) {
                    Some(at) => at + start.len(),
                    None => 0,
                };
                let to = reasoning_end.and_then(|end| completion[from..].find(end).map(|i| from + i));
                if let Some(to) = to {
                    let mut cut = from + (to - from) / 2;
                    while !completion.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    completion.truncate(cut);
                    *stop = None;
                }
            }
            Edit::BreakArguments => {
                let parsed = self.parser.parse(completion);
                let Some(span) = parsed.spans.iter().rev().find(|s| s.kind == crate::parse::SpanKind::ToolArguments)
                else {
                    return;
                };
                let value_end = self.format.tools.as_ref().map(|t| t.arg_value_suffix.trim()).unwrap_or_default();
                if completion[..span.end].ends_with('}') {
                    completion.remove(span.end - 1);
                } else if let Some(at) =
                    (!value_end.is_empty()).then(|| completion[span.end..].find(value_end)).flatten()
                {
                    completion.replace_range(span.end + at..span.end + at + value_end.len(), "");
                }
            }
            Edit::CutAt(n) => {
                let mut cut = n.min(completion.len());
                while !completion.is_char_boundary(cut) {
                    cut -= 1;
                }
                if cut < completion.len() {
                    completion.truncate(cut);
                    *stop = None;
                }
            }
        }
    }

    /// The assistant message a client builds from the parse.
    pub(crate) fn rebuild(&self, parsed: &ParsedMessage, args: Args, engine_ids: bool) -> Json {
        rebuild(parsed, args, engine_ids.then_some(self.seed))
    }
}

/// The assistant message a client builds from a parse; `engine_seed`: ids are replaced by
/// engine-assigned ones.
pub(crate) fn rebuild(parsed: &ParsedMessage, args: Args, engine_seed: Option<u64>) -> Json {
    let arguments = match args {
        Args::Object => ArgumentsAs::Object,
        Args::String => ArgumentsAs::String,
    };
    let mut message = parsed.to_assistant_message(arguments);
    if let (Some(seed), Some(calls)) = (engine_seed, message.get_mut("tool_calls").and_then(Json::as_array_mut)) {
        for (index, call) in calls.iter_mut().enumerate() {
            call["id"] = json!(engine_id(seed, index));
        }
    }
    message
}

/// An id as an engine assigns it (vLLM's shape: `chatcmpl-tool-` and 32 hex digits).
pub(crate) fn engine_id(seed: u64, index: usize) -> String {
    let mut x = seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xA5A5_5A5A;
    let mut hex = String::from("chatcmpl-tool-");
    for _ in 0..2 {
        x = splitmix(x);
        hex.push_str(&format!("{x:016x}"));
    }
    hex
}

/// One step of SplitMix64.
pub(crate) fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
