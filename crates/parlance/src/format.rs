//! `Format`: what the analyzer learned about a chat template's output syntax.
//!
//! A `Format` says how an assistant turn is laid out when the model writes it: what the generation
//! prompt already opened, where reasoning starts and ends, whether content is wrapped, and how tool
//! calls are written (family, markers, JSON field names). It is plain data, serializable to JSON so
//! users can inspect, cache and override it; `tool_format` uses the family words of the corpus
//! manifest and `reasoning` is `{"start", "end"}` or `null`, so outside tools can read it.

use serde::{Deserialize, Serialize};

/// A chat template's output syntax, as found by `analyze`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Format {
    /// Where the template came from.
    pub template: String,
    /// Family of the tool-call syntax.
    pub tool_format: ToolFamily,
    /// Reasoning markers, trimmed of whitespace; `None` when the template shows no reasoning.
    pub reasoning: Option<ReasoningMarkers>,
    /// Everything known about reasoning besides its markers.
    pub reasoning_details: Option<ReasoningDetails>,
    /// How plain content is wrapped.
    pub content: ContentFormat,
    /// Text `add_generation_prompt` appends after the last message (default variables).
    pub generation_prompt: String,
    /// The end of the generation prompt that the model's output continues as if it had written it:
    /// a marker every block of the turn starts with, whose first instance the prompt already holds
    /// (functionary's `>>>`, after which the model writes a recipient: `all` for content, a function
    /// name for a call). Outputs are parsed (and constrained) as if they began with it. Empty for
    /// almost every template.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub output_prefix: String,
    /// Text the template writes after an assistant turn's output (end of turn, end of sequence).
    pub turn_end: String,
    /// How tool calls are written; `None` when the template cannot render them.
    pub tools: Option<ToolCallFormat>,
    /// Every marker found, for tokenizers and grammars.
    pub preserved_tokens: Vec<String>,
    /// Features the template does not support or the analysis could not establish, with the reason.
    pub unsupported: Vec<String>,
    /// Named workarounds the analysis applied (few, each documented and tested).
    pub workarounds: Vec<Workaround>,
    /// How the analysis knows each finding: the probe renders that showed it and a confidence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<Evidence>,
}

/// A named workaround the analysis applied to read a template (kebab-case in JSON). Each changes
/// how the template is rendered or read, so renders made for it (probes, the self-check, the
/// roundtrip simulation) apply the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workaround {
    /// Nothing renders unless the request declares tools (`tools | length` on an undefined
    /// `tools`); every probe render declares them.
    ToolsInEveryRender,
    /// Nothing renders unless message content is a list of parts (`message['content'][0]['text']`);
    /// probe contents are passed as one text part.
    ContentAsTextParts,
    /// A message with a tool call renders only when `list.append` is ignored (Kimi-K2 queues call
    /// ids for the tool responses); probes render through `ChatTemplate::with_list_append_ignored`.
    ListAppendIgnored,
    /// A message's tool calls render only when its content is `null` (DeepSeek V3, the R1-Distill
    /// templates): transformers drops null keys, so probes, the self-check and the roundtrip
    /// simulation send the OpenAI wire shape (`RenderOptions::keep_null_keys`).
    CallsWithNullContent,
    /// Nothing renders until variables the caller must pass (firefunction's `functions`) are set;
    /// they are set to `""`.
    UndeclaredVariablesSetEmpty,
    /// A generation prompt opens a tag (`<think>\n`) that no render closes, because the template
    /// cuts content at the closing tag and never renders reasoning: the closing tag is the opener's
    /// mirror, accepted only if the template demonstrably strips it.
    ReasoningEndFromStrippedMirrorTag,
    /// No render shows reasoning and the prompt opens nothing, but the template cuts assistant
    /// messages at a `</…>` literal of its source (`content.split('</think>')[-1]`), demonstrably:
    /// reasoning is `implicit`.
    ReasoningFromStrippedEndTag,
    /// A generation prompt ends with an opener whose name says thought (`<think>`), and no render
    /// shows its end or strips one: the end is taken to be the opener's mirror (`</think>`), by the
    /// name alone (open-instruct's OLMo thinker).
    ReasoningEndFromOpenerName,
    /// Calls render only from their ids, the function's name never otherwise (Kimi K2's own
    /// templates): probe calls carry ids that name their function, as the model writes them
    /// (`functions.NAME:INDEX`).
    CallIdsNameTheFunction,
    /// The template adds strings to Markup (`'…'|safe + str`), which escapes them in Jinja2:
    /// transformers renders mistral-common's calls as `[{&#34;name&#34;: …`, which no model writes.
    /// Probes render through `ChatTemplate::with_markup_add_unescaped`, so the analysis reads the
    /// syntax the template means.
    MarkupAddUnescaped,
}

impl Workaround {
    /// The workaround's name as in JSON (`calls-with-null-content`).
    pub fn as_str(self) -> &'static str {
        match self {
            Workaround::ToolsInEveryRender => "tools-in-every-render",
            Workaround::ContentAsTextParts => "content-as-text-parts",
            Workaround::ListAppendIgnored => "list-append-ignored",
            Workaround::CallsWithNullContent => "calls-with-null-content",
            Workaround::UndeclaredVariablesSetEmpty => "undeclared-variables-set-empty",
            Workaround::ReasoningEndFromStrippedMirrorTag => "reasoning-end-from-stripped-mirror-tag",
            Workaround::ReasoningFromStrippedEndTag => "reasoning-from-stripped-end-tag",
            Workaround::ReasoningEndFromOpenerName => "reasoning-end-from-opener-name",
            Workaround::CallIdsNameTheFunction => "call-ids-name-the-function",
            Workaround::MarkupAddUnescaped => "markup-add-unescaped",
        }
    }
}

impl Format {
    /// Whether the analysis applied `workaround`.
    pub fn has_workaround(&self, workaround: Workaround) -> bool {
        self.workarounds.contains(&workaround)
    }
}

/// How the analysis knows one of its findings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// What was found.
    pub finding: Finding,
    /// The probe renders that showed it, in words.
    pub shown_by: String,
    /// How much the finding can be trusted.
    pub confidence: Confidence,
}

/// A finding of the analysis that evidence is given for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Finding {
    /// The reasoning markers and mode.
    Reasoning,
    /// The content wrapper and the turn end.
    Content,
    /// The tool-call family and markers.
    ToolCalls,
    /// `Format::output_prefix`.
    OutputPrefix,
}

/// How much a finding can be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Confidence {
    /// Guessed from one kind of evidence and confirmed by renders (a closing tag the template
    /// strips, with its mirror as the opener).
    Low,
    /// Read off renders other than a message's own (thinking switches, history, string
    /// arguments, one call where two did not render).
    Medium,
    /// Read off renders of the message itself, in the shape callers pass it.
    High,
}

/// Reasoning start and end markers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReasoningMarkers {
    /// e.g. `<think>`.
    pub start: String,
    /// e.g. `</think>`.
    pub end: String,
}

/// How reasoning appears in a turn.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReasoningDetails {
    /// `tag` (start and end markers in the output), `forced-open` (the generation prompt opens
    /// reasoning, so the model writes only its end; a prompt that closes the block instead, as a
    /// thinking-off prompt does, means no reasoning follows), `implicit` (the prompt opens nothing,
    /// yet the model reasons first and may leave out the start marker, as DeepSeek-R1-style models
    /// do: output begins inside reasoning, which lasts to the end marker — or to the end of the
    /// output, as servers' R1 parsers read it; override with `ParseOptions::in_reasoning` for a
    /// model that does not reason), `delimiter` (no start marker; reasoning ends at the end
    /// marker), `tools-only` (reasoning renders only next to tool calls).
    pub mode: ReasoningMode,
    /// The start marker exactly as rendered (with its whitespace).
    pub start_literal: String,
    /// What the template writes between the reasoning and the content.
    pub end_literal: String,
    /// Whether reasoning of earlier assistant turns is rendered in later prompts.
    pub kept_in_history: bool,
    /// Generation prompt when thinking is switched off (`enable_thinking=false`), if it differs.
    pub generation_prompt_thinking_off: Option<String>,
    /// Generation prompt when thinking is switched on (`enable_thinking=true` or `thinking=true`), if
    /// it differs: templates whose default closes reasoning open it only then.
    #[serde(default)]
    pub generation_prompt_thinking_on: Option<String>,
    /// The empty reasoning block the template writes in turns without reasoning, if any.
    pub empty_block: String,
    /// The message key the template reads reasoning from when it is none of the standard names
    /// (`reasoning_content`, `reasoning`, `thinking`, which renders alias): MiniCPM3's `thought`,
    /// Command A's `tool_plan`. A caller rendering history puts past reasoning there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// How reasoning starts (see [`ReasoningDetails::mode`]); kebab-case in JSON.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReasoningMode {
    /// Start and end markers in the output.
    #[default]
    Tag,
    /// The generation prompt opens reasoning; the model writes only its end.
    ForcedOpen,
    /// The prompt opens nothing, yet output starts inside reasoning (DeepSeek-R1-style).
    Implicit,
    /// No start marker; reasoning ends at the end marker.
    Delimiter,
    /// Reasoning renders only next to tool calls.
    ToolsOnly,
}

impl ReasoningMode {
    /// The mode's name as in JSON (`forced-open`).
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningMode::Tag => "tag",
            ReasoningMode::ForcedOpen => "forced-open",
            ReasoningMode::Implicit => "implicit",
            ReasoningMode::Delimiter => "delimiter",
            ReasoningMode::ToolsOnly => "tools-only",
        }
    }
}

impl std::fmt::Display for ReasoningMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How content is wrapped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContentFormat {
    /// Text before the content in a content-only turn.
    pub start: String,
    /// Text after the content (before `turn_end`) in a content-only turn.
    pub end: String,
}

/// Tool-call family, in the words of the corpus manifest.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolFamily {
    /// No tool calls can be rendered.
    #[default]
    None,
    /// The whole call is JSON: `{"name": …, "arguments": {…}}`, maybe in markers or an array.
    JsonNative,
    /// Name in markers, arguments a JSON object: `<function=f>{…}</function>`.
    TagJson,
    /// Name and each argument in markers: `<function=f><parameter=a>v</parameter>`.
    TagTagged,
    /// `[TOOL_CALLS]name[ARGS]{…}`.
    BracketTag,
    /// `functions.name:0` with an index per call.
    PrefixedIndexed,
    /// `>>>name` recipient lines.
    RecipientBased,
    /// A fenced code block after a keyword.
    MarkdownBlock,
    /// Channel-based (gpt-oss): `to=functions.name<|channel|>…`.
    Channel,
    /// Special-token delimited (DeepSeek, Kimi style).
    SpecialToken,
    /// Python calls: `[f(a=1), g(b=2)]`.
    Pythonic,
    /// Calls render, but the analysis could not classify them.
    Unknown,
}

/// Markers and field names of tool calls.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallFormat {
    /// Opens the tool-call section (once before all calls), e.g. `<tool_call>` or `[TOOL_CALLS]`.
    pub section_start: String,
    /// Closes the section.
    pub section_end: String,
    /// Opens each call, when calls are individually wrapped.
    pub call_start: String,
    /// Closes each call.
    pub call_end: String,
    /// Between two calls.
    pub separator: String,
    /// Between content and the first call, where a turn with both is written as two messages: the
    /// content message's end and the next one's header (`<|im_end|>\n<|im_start|>assistant`,
    /// functionary's `<|from|>assistant`), trimmed. Empty for almost every template.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub before_calls: String,
    /// Opens the content of a turn that holds calls, `section_start` closing it (the first-release
    /// Llama 4 template writes `<|python_start|>` + content + `<|python_end|>` + calls, the pair
    /// empty when there is no content). A turn without calls writes its content bare. Empty for
    /// almost every template.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub content_start_with_calls: String,
    /// Before the function name (non-JSON families).
    pub name_prefix: String,
    /// After the function name (non-JSON families).
    pub name_suffix: String,
    /// Arguments: `json` (an object) or `tagged` (one marker pair per argument).
    pub arguments: ArgumentEncoding,
    /// Tagged arguments: before each argument name.
    pub arg_name_prefix: String,
    /// Tagged arguments: after each argument name.
    pub arg_name_suffix: String,
    /// Tagged arguments: after each argument value.
    pub arg_value_suffix: String,
    /// Tagged arguments whose closing tag repeats the argument's name (MiniMax-M3's
    /// `<city>Paris]<]minimax[>[</city>`): what follows the name, `arg_value_suffix` being what
    /// precedes it. `None` when the value suffix is the same for every argument.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arg_value_suffix_after_name: Option<String>,
    /// Tagged arguments: the element name of array items when arrays and objects are written as
    /// nested tags with the argument markers (`<tags><item>a</item></tags>`, objects as
    /// `<number><real>1.5</real></number>`); `None` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested_item_name: Option<String>,
    /// Tagged arguments: between one argument's value suffix and the next argument's name prefix.
    pub arg_separator: String,
    /// Tagged arguments: other name suffixes, for non-string values whose type the template marks
    /// (`string="false"`, `type="boolean"`); empty when every value uses `arg_name_suffix`.
    pub arg_name_suffixes_typed: Vec<String>,
    /// Tagged arguments: how non-string values are written, `json` (`true`, `null`) or `python`
    /// (`True`, `None`, `['a']`, as a template printing the value writes them). JSON arguments:
    /// `python` when the template prints an arguments mapping with Python's `str()`
    /// (`{'city': 'Paris'}`; the wire's JSON string it prints as JSON), so its own history holds
    /// Python literals: the parser reads them as well as JSON and gives JSON arguments (a stream
    /// holds each call's arguments until they end), and a grammar writes JSON, as models do.
    /// Otherwise `""`.
    pub value_encoding: ValueEncoding,
    /// Tagged arguments: the quote around string values when they are written as literals
    /// (`"` in `a="x"`, `'` for Python reprs, `<|"|>` for Gemma 4); non-string values are then bare
    /// literals that end at the next separator. Empty when values are raw text between markers.
    pub string_quote: String,
    /// Bare JSON calls: a special token the template writes before a call only in another of its
    /// variants (Llama 3.x's `<|python_tag|>`, before built-in tool calls), which models also
    /// write before JSON calls: accepted there, never required. Empty when there is none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub optional_call_opener: String,
    /// Tagged arguments: how the template writes argument names inside its markers; escaped names
    /// (`key="a&amp;b"`) are read back unescaped and a grammar writes them escaped.
    #[serde(default, skip_serializing_if = "NameEscape::is_none")]
    pub name_escape: NameEscape,
    /// Non-JSON families: the name suffix carries the call's index (`index="1"`, `:0`), which
    /// changes from call to call; its digits are not part of the marker.
    pub indexed_name_suffix: bool,
    /// Non-JSON families whose call writes the function's name twice, in a header and again in
    /// the body (muse-glimmer's `<|start|>assistant to=f<|message|>…<atem:invoke name="f">`):
    /// `name_suffix` ends where the name is written again, and this follows the second writing.
    /// Both writings name the same function. `None` when the name is written once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_repeat_suffix: Option<String>,
    /// Non-JSON families: the call's id is written before its name, after the call's opening
    /// marker, and the name prefix ends it (Solar Open's
    /// `<|tool_call:begin|>ID<|tool_call:name|>NAME<|tool_call:args|>`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub call_id_before_name: bool,
    /// The template writes `section_end` only after two or more calls (the DeepSeek V3 and R1
    /// templates close the section in the branch of the second call): a one-call section may end
    /// with the turn, unclosed, as such templates write it and models trained on them do.
    #[serde(default, skip_serializing_if = "is_false")]
    pub section_end_only_after_several: bool,
    /// Non-JSON families: text between the call id and the arguments, when the id is rendered after
    /// the name (`[CALL_ID]id[ARGS]`: `name_suffix` is `[CALL_ID]`, this is `[ARGS]`).
    pub call_id_suffix: String,
    /// The template writes the arguments as JSON only when a message hands them over as a JSON
    /// string (the OpenAI wire shape): it prints the value itself (`'"arguments": ' +
    /// arguments|string`), so an object raises or comes out as Python's repr. Callers rendering
    /// for this template pass arguments as strings.
    #[serde(default, skip_serializing_if = "is_false")]
    pub arguments_from_string: bool,
    /// JSON families: the fields of the call object.
    pub json: Option<JsonCallFields>,
    /// Whether two calls in one turn render.
    pub parallel: bool,
}

/// How a call's arguments are written (see [`ToolCallFormat::arguments`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ArgumentEncoding {
    /// One JSON object.
    #[default]
    Json,
    /// One marker pair per argument.
    Tagged,
}

/// How tagged argument values that are not strings are written (see
/// [`ToolCallFormat::value_encoding`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ValueEncoding {
    /// Not tagged arguments: no value encoding (`""` in JSON).
    #[default]
    #[serde(rename = "")]
    Unset,
    /// As JSON: `true`, `null`, `[1]`.
    Json,
    /// As Python's `str()`: `True`, `None`, `['a']`.
    Python,
}

/// How a template writes argument names inside its markers ([`ToolCallFormat::name_escape`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NameEscape {
    /// As they are.
    #[default]
    None,
    /// As XML attribute values: `&`, `"`, `<`, `>` and `'` as entities (Kimi K3's
    /// `key="a&amp;b"`).
    XmlEntities,
}

impl NameEscape {
    fn is_none(&self) -> bool {
        *self == NameEscape::None
    }

    /// `name` as the template writes it.
    pub fn escape(self, name: &str) -> std::borrow::Cow<'_, str> {
        match self {
            NameEscape::XmlEntities if name.contains(['&', '"', '<', '>', '\'']) => name
                .replace('&', "&amp;")
                .replace('"', "&quot;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
                .replace('\'', "&#39;")
                .into(),
            _ => name.into(),
        }
    }

    /// The name that `written` stands for: entities resolved (named ones of XML, decimal and
    /// hexadecimal character references); an unknown or broken one stays as written.
    pub fn unescape(self, written: &str) -> std::borrow::Cow<'_, str> {
        if self == NameEscape::None || !written.contains('&') {
            return written.into();
        }
        let mut out = String::with_capacity(written.len());
        let mut rest = written;
        while let Some(at) = rest.find('&') {
            out.push_str(&rest[..at]);
            rest = &rest[at..];
            let entity = rest[1..].find(';').filter(|&n| n <= 10).map(|n| &rest[1..1 + n]);
            let resolved = entity.and_then(|e| match e {
                "amp" => Some('&'),
                "quot" => Some('"'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "apos" => Some('\''),
                _ => {
                    let code = match e.strip_prefix("#x").or_else(|| e.strip_prefix("#X")) {
                        Some(hex) => u32::from_str_radix(hex, 16).ok(),
                        None => e.strip_prefix('#').and_then(|dec| dec.parse().ok()),
                    };
                    code.and_then(char::from_u32)
                }
            });
            match (entity, resolved) {
                (Some(e), Some(c)) => {
                    out.push(c);
                    rest = &rest[e.len() + 2..];
                }
                _ => {
                    out.push('&');
                    rest = &rest[1..];
                }
            }
        }
        out.push_str(rest);
        out.into()
    }
}

/// Field names of a JSON tool call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JsonCallFields {
    /// Key of the function name (`name`); empty when the name is the key itself.
    pub name: String,
    /// Key of the arguments (`arguments`, `parameters`).
    pub arguments: String,
    /// Key of an enclosing object holding name and arguments (`function`), if any.
    pub function: Option<String>,
    /// Key of the call id, if rendered.
    pub id: Option<String>,
    /// Calls are written as a JSON array.
    pub array: bool,
    /// Arguments are a JSON string holding the object, not the object.
    pub arguments_as_string: bool,
    /// The call object's keys in the order the template writes them, when that is not name,
    /// arguments, id (Hermes' vLLM template writes `{"arguments": …, "name": …}`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub key_order: Vec<String>,
}

impl Format {
    /// A readable summary: family, modes, every marker, what is unsupported.
    pub fn summary(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let family = serde_json::to_value(self.tool_format).ok().and_then(|v| v.as_str().map(str::to_owned));
        let _ = writeln!(out, "template:          {}", self.template);
        let _ = writeln!(out, "tool format:       {}", family.unwrap_or_default());
        match (&self.reasoning, &self.reasoning_details) {
            (Some(markers), Some(details)) => {
                let _ = writeln!(
                    out,
                    "reasoning:         {:?} ... {:?} ({}, history {})",
                    markers.start,
                    markers.end,
                    details.mode,
                    if details.kept_in_history { "kept" } else { "dropped" }
                );
            }
            _ => {
                let _ = writeln!(out, "reasoning:         none");
            }
        }
        let _ = writeln!(out, "generation prompt: {:?}", self.generation_prompt);
        if !self.output_prefix.is_empty() {
            let _ = writeln!(
                out,
                "output continues: {:?} (the prompt's end, read as the output's first bytes)",
                self.output_prefix
            );
        }
        let _ = writeln!(out, "turn end:          {:?}", self.turn_end);
        let _ = writeln!(out, "content:           {:?} ... {:?}", self.content.start, self.content.end);
        if let Some(tools) = &self.tools {
            let arguments = match tools.arguments {
                ArgumentEncoding::Json => "json",
                ArgumentEncoding::Tagged => "tagged",
            };
            let _ = writeln!(out, "tool calls:        arguments {arguments}, parallel {}", tools.parallel);
            for (name, marker) in [
                ("section start", &tools.section_start),
                ("section end", &tools.section_end),
                ("call start", &tools.call_start),
                ("call end", &tools.call_end),
                ("separator", &tools.separator),
                ("name prefix", &tools.name_prefix),
                ("name suffix", &tools.name_suffix),
                ("arg name prefix", &tools.arg_name_prefix),
                ("arg name suffix", &tools.arg_name_suffix),
                ("arg value suffix", &tools.arg_value_suffix),
            ] {
                let named = name == "arg value suffix" && tools.arg_value_suffix_after_name.is_some();
                if !marker.is_empty() && !named {
                    let _ = writeln!(out, "  {name:<17}{marker:?}");
                }
            }
            if !tools.content_start_with_calls.is_empty() {
                let _ = writeln!(
                    out,
                    "  content opener   {:?} before the content of a turn with calls, closed by the section start",
                    tools.content_start_with_calls
                );
            }
            if let Some(after) = &tools.name_repeat_suffix {
                let _ = writeln!(out, "  name again       the name once more, then {after:?}");
            }
            if !tools.call_id_suffix.is_empty() {
                let _ = writeln!(out, "  call id          the id, then {:?}", tools.call_id_suffix);
            }
            if tools.call_id_before_name {
                let _ = writeln!(out, "  call id          before the name prefix");
            }
            if tools.section_end_only_after_several {
                let _ = writeln!(out, "  section end      written only after two or more calls");
            }
            if let Some(after) = &tools.arg_value_suffix_after_name {
                let _ = writeln!(out, "  arg value suffix {:?} + argument name + {after:?}", tools.arg_value_suffix);
            }
            if let Some(item) = &tools.nested_item_name {
                let _ =
                    writeln!(out, "  nested values    arrays and objects as nested tags, array items named {item:?}");
            }
            if let Some(json) = &tools.json {
                let _ = writeln!(out, "  json fields      {json:?}");
            }
        }
        for item in &self.unsupported {
            let _ = writeln!(out, "unsupported:       {item}");
        }
        for item in &self.workarounds {
            let _ = writeln!(out, "workaround:        {}", item.as_str());
        }
        for item in &self.evidence {
            let finding = serde_json::to_value(item.finding).ok().and_then(|v| v.as_str().map(str::to_owned));
            let confidence = serde_json::to_value(item.confidence).ok().and_then(|v| v.as_str().map(str::to_owned));
            let _ = writeln!(
                out,
                "evidence:          {} ({} confidence): {}",
                finding.unwrap_or_default(),
                confidence.unwrap_or_default(),
                item.shown_by
            );
        }
        out
    }
}

fn is_false(value: &bool) -> bool {
    !*value
}

#[cfg(test)]
mod name_escape_tests {
    use super::NameEscape;

    #[test]
    fn xml_entities_round_trip_and_broken_ones_stay_as_written() {
        let x = NameEscape::XmlEntities;
        for name in ["plain", "a&b\"c<d>'e", "&amp;", "ünï&cödé", ""] {
            assert_eq!(x.unescape(&x.escape(name)), name, "{name}");
        }
        assert_eq!(x.escape("a&b\"c"), "a&amp;b&quot;c");
        assert_eq!(x.unescape("&#65;&#x42;&apos;"), "AB'");
        for broken in ["a & b", "&unknown;", "&#xZZ;", "&#1114112;", "&", "&amp", "&averyveryverylongname;"] {
            assert_eq!(x.unescape(broken), broken, "{broken}");
        }
        assert_eq!(NameEscape::None.unescape("a&amp;b"), "a&amp;b");
        assert_eq!(NameEscape::None.escape("a&b"), "a&b");
    }
}
