//! Output parsing: model text, whole or streamed, into reasoning / content / tool calls.
//!
//! One parser for every template, driven by the analyzer's [`Format`]; no per-model classes. Whole
//! text ([`parse`]) and streams ([`StreamParser`]) run the same core: `parse(text)` is
//! `push(text)` + `finish()`, and the [`ParsedMessage`] is the fold of the deltas, so streamed
//! deltas always add up to the whole parse.
//!
//! What happens to bad output (nothing is ever dropped; `spans` cover every input byte):
//! - a call marker not followed by a call (no name, JSON that never forms a call object, output
//!   cut before the name is complete): the text stays `content`, issue `unparsed-call`; so does a
//!   later call of a section that fails so, from its separator on (opener included), while the
//!   calls before it are kept; later calls are read again where a marker opens them outside a
//!   section (the call start, or a call trigger), else they stay content; a name is complete only
//!   where something ends it, so a call cut inside its name (`get` of `get_weather`) is unparsed;
//! - a call opener with nothing after it at the end of the output (`<tool_call>` then the end, or
//!   the opener cut after one of its whole tags): markup (a marker span, never content the user
//!   would see), issue `unparsed-call`;
//! - a tagged value ends at its suffix in the form the template writes it, whitespace included
//!   (`\n</parameter>`: a `</parameter>` inside a line of code stays in the value); where that
//!   never comes before a marker of the call (the call's, section's or turn's end, or the next
//!   argument's opener at a line's start), at the last bare suffix before that marker, and where
//!   there is none (the model forgot the closing tag) right before the marker, issue
//!   `malformed-arguments`: the markup is never inside the value;
//! - a call whose name was read but whose arguments are malformed JSON: the call is kept with the
//!   exact text as `arguments` (not valid JSON), `arguments_value` `None`, issue
//!   `malformed-arguments`; later calls are parsed as usual. Where a call end marker closes the
//!   arguments, they are checked as JSON as they arrive: from the first byte that cannot continue a
//!   JSON value, the arguments run as raw text to that marker (which they do not swallow);
//!   without one, to where their brackets close;
//! - a JSON call object that breaks after its arguments were read (a bracket left open, text
//!   that is not JSON): the call is kept, the broken text up to the call's end marker is markup,
//!   issue `malformed-call` where it broke; the content and calls after the marker are read as
//!   usual; an object that never closes with an end marker after it ends there the same way;
//! - JSON that breaks before a call's name was read is decided at the breaking byte, not at the
//!   end of the output, so a stream goes on with the content after it at once;
//! - output cut inside a call whose name was read (tagged and name-in-marker formats): the call is
//!   kept with what arrived (tagged arguments are closed so they stay valid JSON), issue
//!   `truncated-call`; so is a JSON call (or array of calls) cut before it closed once a call's name
//!   was read (calls before it whole, the cut one with the arguments text that arrived, empty if
//!   none); cut before any name, it is unparsed (content, `unparsed-call`). Calls of a format with
//!   no marker (bare JSON, Llama 3.x) are calls only as whole call objects: anything else is content;
//! - output cut inside reasoning: what arrived is `reasoning_content`, `truncated_reasoning` set;
//! - a call marker inside reasoning is provisional: models draft calls while they think, then
//!   close reasoning and call for real. Where the reasoning's end marker comes later, the call was
//!   reasoning text; where the output ends with reasoning still open, the call ends reasoning (as
//!   llama.cpp reads it) and is parsed, issue `unclosed-reasoning`. A stream holds the text from
//!   the marker on until it is decided;
//! - a tool name not among the request's tools, a parameter not in its schema, a value that does
//!   not fit its schema: kept, reported (`unknown-tool`, `unknown-parameter`, `value-misfit`);
//! - a second call when `parallel_tool_calls` is off: kept, reported (`parallel-calls`);
//! - text after the turn-end marker: kept as content, reported (`text-after-turn-end`);
//! - output that stops inside the turn end, after one of its whole tokens (an engine cuts at a
//!   stop token the turn end ends with: `<|close|>message<|sep|>` of
//!   `…<|sep|><|end_of_msg|>`): that text is the turn end, not content;
//! - a reasoning end marker outside reasoning (when reasoning is separated): a marker, left out of
//!   content, reported (`stray-reasoning-end`); the text around it is one piece of content;
//! - a prompt that opened reasoning followed by the content opener (a content start distinct from
//!   the reasoning markers): the model wrote no reasoning;
//! - a call's own opener (a bracketed token) without the section start that precedes it
//!   (`<|tool_call_begin|>` without `<|tool_calls_section_begin|>`), or, without a section start,
//!   the last tag of a name prefix without the whole tags before it (`<function=` of
//!   `<tool_call>\n<function=`): it opens the section.
//!
//! A tagged value that is an XML CDATA section followed by the value suffix is the section's text,
//! a string (`<![CDATA[a</param>b]]></param>` gives `a</param>b`).
//!
//! Unseparated reasoning (`separate_reasoning: false`) stays in content with its markers, but a
//! content opener right after its end is a marker (`<|END_THINKING|><|START_RESPONSE|>`); in
//! channel formats the reasoning message stays as written (header and end included) and the
//! headers of later messages are markers.
//!
//! A tagged literal string cut before its closing quote (the end of the output) is the string so
//! far, without its opening quote.
//!
//! A tagged literal string in a one-character quote (`a='x'`) ends at the quote that what may follow
//! a value follows (the value suffix, the call end and then another call or the section end, the
//! argument separator and `name=`, the end of the output): other quotes are quotes the model left
//! unescaped inside it (`command='sed -n '1,2p' f'`). Its escapes are Python's; an unknown escape
//! keeps its backslash.
//!
//! Tagged literals whose strings use a multi-character quote (Gemma 4's `[<|"|>a<|"|>,{k:…}]`,
//! keys bare) are read as JSON with those strings and keys quoted, for parameters that allow
//! arrays or objects.
//!
//! Reasoning opens at its start marker, or, for a start made of one bracketed token and a word
//! (`<|channel>thought`), at the token alone when a different word or none follows.
//!
//! Whitespace: reasoning and content are trimmed at their ends (the template writes its own
//! whitespace around markers); text around a call is content as written, the whitespace on both
//! sides of the call included (`a <call> b` gives `a  b`); tagged values lose exactly the whitespace the template writes
//! around them (`<parameter=a>\nv\n</parameter>` gives `v`). Trimmed bytes are `Whitespace` spans.

pub(crate) mod channel;
pub mod hostile;
mod machine;
pub(crate) mod scan;
mod syntax;

use serde::Serialize;
use serde_json::Value as Json;

use crate::format::Format;
use machine::Machine;

/// How the request constrains tool calls (`tool_choice`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model may call tools or not.
    #[default]
    Auto,
    /// No tool calls: call syntax stays content.
    None,
    /// At least one call is expected (a response without one is reported).
    Required,
    /// This function is expected.
    Function(String),
    /// Only these functions may be called (OpenAI's `allowed_tools`: the request keeps every tool
    /// in its prompt, so the prompt's cache still hits, and limits which are called); `required`:
    /// at least one call (mode `required`), else calls are optional (mode `auto`).
    AllowedTools {
        /// The functions that may be called.
        names: Vec<String>,
        /// Whether at least one call is expected.
        required: bool,
    },
}

impl ToolChoice {
    /// Reads an OpenAI chat-completions `tool_choice`: `"auto"`, `"none"`, `"required"`,
    /// `{"type": "function", "function": {"name": …}}`, or `{"type": "allowed_tools",
    /// "allowed_tools": {"mode": "auto" | "required", "tools": [{"type": "function", "function":
    /// {"name": …}}, …]}}` (the Responses API's flat shapes, `{"type": "function", "name": …}` and
    /// `{"type": "allowed_tools", "mode", "tools"}`, too). The error names the JSON pointer of the
    /// bad node.
    pub fn from_openai(value: &Json) -> Result<Self, String> {
        let function_name = |tool: &Json, at: &str| -> Result<String, String> {
            let name = tool.pointer("/function/name").or_else(|| tool.get("name")).and_then(Json::as_str);
            match name {
                Some(name) => Ok(name.to_owned()),
                None => Err(format!("tool_choice{at}: expected a function with a `name`, found {tool}")),
            }
        };
        match value {
            Json::String(s) => match s.as_str() {
                "auto" => Ok(Self::Auto),
                "none" => Ok(Self::None),
                "required" => Ok(Self::Required),
                other => Err(format!("tool_choice: unknown value {other:?} (auto, none, required or an object)")),
            },
            Json::Object(object) => match object.get("type").and_then(Json::as_str) {
                Some("function") => Ok(Self::Function(function_name(value, "")?)),
                Some("allowed_tools") => {
                    let (body, at) = match object.get("allowed_tools") {
                        Some(inner) => (inner, "/allowed_tools"),
                        None => (value, ""),
                    };
                    let required = match body.get("mode").and_then(Json::as_str) {
                        Some("auto") | None => false,
                        Some("required") => true,
                        Some(other) => {
                            return Err(format!("tool_choice{at}/mode: unknown mode {other:?} (auto or required)"));
                        }
                    };
                    let Some(tools) = body.get("tools").and_then(Json::as_array) else {
                        return Err(format!("tool_choice{at}/tools: expected an array of tools"));
                    };
                    let names = tools
                        .iter()
                        .enumerate()
                        .map(|(i, tool)| function_name(tool, &format!("{at}/tools/{i}")))
                        .collect::<Result<_, _>>()?;
                    Ok(Self::AllowedTools { names, required })
                }
                _ => Err(format!("tool_choice/type: expected `function` or `allowed_tools`, found {value}")),
            },
            other => Err(format!("tool_choice: expected a string or an object, found {other}")),
        }
    }

    /// The short form (a command line's, Python's): `auto`, `none`, `required`, else a function's name.
    pub fn from_name(name: &str) -> Self {
        match name {
            "auto" => Self::Auto,
            "none" => Self::None,
            "required" => Self::Required,
            function => Self::Function(function.to_owned()),
        }
    }

    /// Whether the request expects at least one call.
    pub fn requires_call(&self) -> bool {
        match self {
            Self::Auto | Self::None => false,
            Self::Required | Self::Function(_) => true,
            Self::AllowedTools { required, .. } => *required,
        }
    }

    /// Whether the request lets the model call `name` (among its tools).
    pub fn allows(&self, name: &str) -> bool {
        match self {
            Self::None => false,
            Self::Auto | Self::Required => true,
            Self::Function(chosen) => chosen == name,
            Self::AllowedTools { names, .. } => names.iter().any(|n| n == name),
        }
    }
}

/// Whether `prompt` closes a reasoning block after its last `start` (a thinking-off prompt's
/// `<think>\n\n</think>`): no reasoning follows.
pub(crate) fn prompt_closes_block(prompt: &str, start: &str, end: &str) -> bool {
    !start.is_empty() && prompt.rfind(start).is_some_and(|at| prompt[at..].contains(end))
}

/// Whether the output of a request starts inside reasoning, by the parser's own rule (the prompt
/// ends inside an opened block, or `ParseOptions::in_reasoning` says so): the grammar of
/// `constrain` starts where the parser starts.
pub(crate) fn prompt_opens_reasoning(format: &Format, options: &ParseOptions) -> bool {
    machine::Setup::new(format, options).starts_in_reasoning()
}

/// What the parser knows about the request besides the `Format`.
#[derive(Debug, Clone, Default)]
pub struct ParseOptions {
    /// The request's tools, OpenAI-shaped (`{"type": "function", "function": {"name", "parameters"}}`);
    /// their JSON Schemas convert tagged argument values.
    pub tools: Vec<Json>,
    /// The request's `tool_choice`.
    pub tool_choice: ToolChoice,
    /// The request's `parallel_tool_calls` (default `true`, as in OpenAI's API).
    pub parallel_tool_calls: Option<bool>,
    /// Whether the prompt ended inside reasoning. `None`: decided from `generation_prompt`
    /// (reasoning is open when its last reasoning start marker is not closed after it: the prompt
    /// ends with the marker, or with plain text written inside the block, which then starts the
    /// reasoning, as the template renders a message's reasoning in its place).
    pub in_reasoning: Option<bool>,
    /// The generation prompt the request was rendered with, when not the Format's default (e.g.
    /// the Format's `generation_prompt_thinking_on` for a request with thinking switched on).
    pub generation_prompt: Option<String>,
    /// Separate reasoning from content (default `true`). When `false`, reasoning stays in
    /// `content` as written, with its markers (and the opener the prompt held, if any), as
    /// llama.cpp's `reasoning_format: none` and SGLang's `separate_reasoning: false` do.
    pub separate_reasoning: Option<bool>,
    /// Markers that end the turn besides the Format's turn end (the tokenizer's EOS, e.g. `</s>`,
    /// when the engine returns it): text after one is reported.
    pub stop_markers: Vec<String>,
    /// Seed of generated call ids (used when the model writes none). `None` (the default): each
    /// output (each `parse`, each `stream`) draws its own, so responses do not share ids, as
    /// OpenAI's do not. `Some(seed)`: ids are a function of the seed and the call index, the same
    /// on every parse (reproducible re-renders, tests that compare two parses).
    pub id_seed: Option<u64>,
    /// What becomes of a call the output ends inside ([`TruncatedCalls`]; default: kept).
    pub truncated_calls: TruncatedCalls,
}

/// What becomes of a call the output ends inside (issue `truncated-call` either way).
///
/// Kept by default: a client streaming the answer has already shown the call's deltas, a
/// client that repairs or re-asks needs what arrived, and the issue says it is incomplete. An
/// agent that executes calls should drop them: a cut call must not run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TruncatedCalls {
    /// In `tool_calls`, with the arguments that arrived (tagged arguments closed so they stay
    /// JSON).
    #[default]
    Keep,
    /// Left out of `tool_calls` (and a stream holds each call's deltas until the call is whole);
    /// its text stays in `spans`, its issue in `issues`: nothing is lost.
    Drop,
}

impl ParseOptions {
    /// The reasoning state a request's thinking switch gives under `format` (`None`: the template's
    /// default prompt): the generation prompt the template writes with thinking on or off, and, for
    /// thinking off where the prompt does not change, output that does not start inside reasoning.
    pub fn with_thinking(mut self, format: &Format, thinking: Option<bool>) -> Self {
        let details = format.reasoning_details.as_ref();
        self.generation_prompt = match thinking {
            Some(true) => details.and_then(|d| d.generation_prompt_thinking_on.clone()),
            Some(false) => details.and_then(|d| d.generation_prompt_thinking_off.clone()),
            None => None,
        };
        if thinking == Some(false) && self.generation_prompt.is_none() {
            self.in_reasoning = Some(false);
        }
        self
    }
}

/// One tool call of a parsed message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParsedToolCall {
    /// Position of the call in the response.
    pub index: usize,
    /// The model's own id, or a generated one.
    pub id: String,
    /// Whether `id` was generated.
    pub id_generated: bool,
    /// Function name.
    pub name: String,
    /// Arguments as JSON text: for JSON formats exactly the text the model wrote (a Python literal,
    /// where the template prints arguments so, as the JSON it stands for); for tagged formats the
    /// JSON object built from the values.
    pub arguments: String,
    /// `arguments` parsed, when it is valid JSON.
    pub arguments_value: Option<Json>,
}

/// What a byte range of the input is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SpanKind {
    /// Reasoning text.
    Reasoning,
    /// Content text.
    Content,
    /// A marker of the format (`<think>`, `<tool_call>`, ...).
    Marker,
    /// Whitespace trimmed at a boundary.
    Whitespace,
    /// A tool call's name.
    ToolName,
    /// A tool call's id.
    ToolId,
    /// A tool call's arguments (JSON), or an argument's name or value (tagged).
    ToolArguments,
}

/// A byte range of the input and what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Span {
    /// What the bytes are.
    pub kind: SpanKind,
    /// Start offset (bytes).
    pub start: usize,
    /// End offset (bytes, exclusive).
    pub end: usize,
}

/// What kind of [`Issue`] the parser reports (kebab-case in JSON). Every byte is still in the
/// message: an issue says where the output left the Format or the request, not that text was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum IssueKind {
    /// A call opener whose call could not be read (its name or object broken): the text is content.
    UnparsedCall,
    /// A call whose arguments are not valid in the Format's encoding: kept as written.
    MalformedArguments,
    /// The output ended inside a call: the call is kept with what was written.
    TruncatedCall,
    /// A call object broken after its arguments were read (a bracket never closed, text that is
    /// not JSON): the call is kept, the broken text up to the call's end marker is markup.
    MalformedCall,
    /// The output ended inside reasoning.
    TruncatedReasoning,
    /// A call began while reasoning was open: reasoning ends there.
    UnclosedReasoning,
    /// A reasoning end marker outside reasoning: left out of content.
    StrayReasoningEnd,
    /// A call to a function the request does not declare: kept.
    UnknownTool,
    /// A call the request's `tool_choice` does not allow (another function, or one outside
    /// `allowed_tools`): kept.
    DisallowedTool,
    /// An argument the tool's schema does not name: kept.
    UnknownParameter,
    /// A tagged value that does not fit its parameter's schema: kept as text.
    ValueMisfit,
    /// More than one call where the request or the template allows one: kept.
    ParallelCalls,
    /// `tool_choice` required a call (or a named one) and none came.
    MissingCall,
    /// A message addressed to a recipient that is not a function (channel family): kept as content.
    UnknownRecipient,
    /// Text after the turn's end marker: kept as content.
    TextAfterTurnEnd,
}

impl IssueKind {
    /// The kind's name as in JSON (`malformed-arguments`).
    pub fn as_str(self) -> &'static str {
        match self {
            IssueKind::UnparsedCall => "unparsed-call",
            IssueKind::MalformedArguments => "malformed-arguments",
            IssueKind::TruncatedCall => "truncated-call",
            IssueKind::MalformedCall => "malformed-call",
            IssueKind::TruncatedReasoning => "truncated-reasoning",
            IssueKind::UnclosedReasoning => "unclosed-reasoning",
            IssueKind::StrayReasoningEnd => "stray-reasoning-end",
            IssueKind::UnknownTool => "unknown-tool",
            IssueKind::DisallowedTool => "disallowed-tool",
            IssueKind::UnknownParameter => "unknown-parameter",
            IssueKind::ValueMisfit => "value-misfit",
            IssueKind::ParallelCalls => "parallel-calls",
            IssueKind::MissingCall => "missing-call",
            IssueKind::UnknownRecipient => "unknown-recipient",
            IssueKind::TextAfterTurnEnd => "text-after-turn-end",
        }
    }
}

impl std::fmt::Display for IssueKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for IssueKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// Something about the output that did not go as the format and request say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Issue {
    /// What went wrong.
    pub kind: IssueKind,
    /// Byte offset in the input where it was found.
    pub at: usize,
    /// Details (most are fixed texts, borrowed: an output may hold many issues).
    pub message: std::borrow::Cow<'static, str>,
}

/// A parsed assistant message.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ParsedMessage {
    /// Reasoning, if any.
    pub reasoning_content: Option<String>,
    /// Content, if any (`None` when empty).
    pub content: Option<String>,
    /// Tool calls, in order.
    pub tool_calls: Vec<ParsedToolCall>,
    /// The output ended inside reasoning.
    pub truncated_reasoning: bool,
    /// What went wrong, if anything.
    pub issues: Vec<Issue>,
    /// Every input byte, in order, with what it is.
    pub spans: Vec<Span>,
}

/// How [`ParsedMessage::to_assistant_message`] writes call arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgumentsAs {
    /// A JSON object (what vLLM hands templates, what transformers documents), when the arguments
    /// parsed as one; otherwise the text the model wrote.
    Object,
    /// The JSON text (OpenAI's wire shape).
    String,
}

impl ParsedMessage {
    /// The assistant message a client sends back in the next request (OpenAI-shaped: `role`,
    /// `content` — `null` when there was none —, `reasoning_content` when there was reasoning,
    /// `tool_calls` with their ids), to render or bridge the next turn. A template that reads past
    /// reasoning from a key of its own wants it there too: [`crate::Renderer::to_assistant_message`].
    pub fn to_assistant_message(&self, arguments: ArgumentsAs) -> Json {
        let mut message = serde_json::json!({"role": "assistant", "content": self.content});
        if let Some(reasoning) = &self.reasoning_content {
            message["reasoning_content"] = Json::from(reasoning.as_str());
        }
        if !self.tool_calls.is_empty() {
            let calls: Vec<Json> = self
                .tool_calls
                .iter()
                .map(|call| {
                    let value = match (&call.arguments_value, arguments) {
                        (Some(value @ Json::Object(_)), ArgumentsAs::Object) => value.clone(),
                        _ => Json::from(call.arguments.as_str()),
                    };
                    serde_json::json!({"id": call.id, "type": "function",
                        "function": {"name": call.name, "arguments": value}})
                })
                .collect();
            message["tool_calls"] = Json::Array(calls);
        }
        message
    }
}

/// A streamed piece of the message, shaped like an OpenAI chat-completions delta.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Delta {
    /// More reasoning text.
    Reasoning {
        /// The text.
        reasoning_content: String,
    },
    /// More content text.
    Content {
        /// The text.
        content: String,
    },
    /// A tool call starts: its index, id and complete name.
    ToolCallStart {
        /// Call index.
        index: usize,
        /// Call id.
        id: String,
        /// Function name.
        name: String,
    },
    /// More argument text of a call (JSON text; fragments concatenate to `arguments`).
    ToolCallArguments {
        /// Call index.
        index: usize,
        /// The fragment.
        arguments: String,
    },
}

impl Delta {
    /// The delta as OpenAI's `choices[0].delta` object.
    pub fn to_openai(&self) -> Json {
        use serde_json::json;
        match self {
            Delta::Reasoning { reasoning_content } => json!({"reasoning_content": reasoning_content}),
            Delta::Content { content } => json!({"content": content}),
            Delta::ToolCallStart { index, id, name } => json!({"tool_calls": [{
                "index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}
            }]}),
            Delta::ToolCallArguments { index, arguments } => {
                json!({"tool_calls": [{"index": index, "function": {"arguments": arguments}}]})
            }
        }
    }
}

/// A parser built once per (format, request): cheap to clone, parses any number of outputs.
#[derive(Debug, Clone)]
pub struct Parser {
    inner: std::sync::Arc<machine::Setup>,
}

impl Parser {
    /// A parser for outputs of `format` under `options`.
    pub fn new(format: &Format, options: &ParseOptions) -> Parser {
        Parser { inner: std::sync::Arc::new(machine::Setup::new(format, options)) }
    }

    /// Parses a whole output.
    pub fn parse(&self, text: &str) -> ParsedMessage {
        Machine::parse_whole(self.inner.clone(), text)
    }

    /// A streaming parser for one output.
    pub fn stream(&self) -> StreamParser {
        StreamParser { machine: Machine::new(self.inner.clone()) }
    }
}

/// Parses a whole output of `format`.
pub fn parse(format: &Format, options: &ParseOptions, text: &str) -> ParsedMessage {
    Parser::new(format, options).parse(text)
}

/// Parses one output chunk by chunk: a partial marker at a chunk end is held back only until it is
/// decided; names are emitted once complete; argument fragments add up to the final `arguments`.
#[derive(Debug)]
pub struct StreamParser {
    machine: Machine,
}

impl StreamParser {
    /// A stream parser for outputs of `format` under `options`.
    pub fn new(format: &Format, options: &ParseOptions) -> StreamParser {
        Parser::new(format, options).stream()
    }

    /// Feeds a chunk; returns the deltas it decided.
    pub fn push(&mut self, chunk: &str) -> Vec<Delta> {
        self.machine.push(chunk);
        self.machine.take_deltas()
    }

    /// Ends the output; returns the last deltas.
    pub fn finish(&mut self) -> Vec<Delta> {
        self.machine.finish();
        self.machine.take_deltas()
    }

    /// The message so far (complete after `finish`).
    pub fn message(&self) -> ParsedMessage {
        self.machine.message()
    }
}
