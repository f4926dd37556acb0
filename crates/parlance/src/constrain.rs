//! Constrained generation from a `Format`: the request (tools, `tool_choice`, parallel calls, the
//! reasoning state) → an XGrammar structural tag for the assistant's output, and through
//! `parlance_grammar` the grammar itself.
//!
//! One `Format`, two uses: the request is the parser's own [`ParseOptions`], and whether the prompt
//! left reasoning open is decided by the parser's rule, so grammar and parser read a turn alike.
//! Markers are written as the template writes them, trimmed; the whitespace the template puts around
//! a marker is optional whitespace in the grammar (models do and do not write it, at most 32), and a
//! call's JSON object and its JSON arguments allow JSON whitespace. Free text (content, reasoning,
//! raw string values) never contains the markers that would end or open something else (automatic
//! end detection).
//!
//! Families: JSON-native (wrapped or bare, arrays, name as key, a `function` wrapper, an id field;
//! markdown blocks, Command R's `Action:` and a fenced JSON list, are such a section),
//! name-in-markers with JSON arguments (tag + JSON, bracket-tag with call ids, special-token,
//! prefixed-indexed), tagged arguments (raw or quoted values, JSON or Python literals; with a
//! separator between them, in the schema's order, each at most once, the required ones present),
//! pythonic calls (`[f(a=1, b='x')]`: keyword arguments as literals that end themselves, strings
//! by `enum` and length), arrays and objects as nested elements (MiniMax-M3; an object without
//! `properties` is free text up to its element's end, since its members' closing tags repeat names
//! no grammar of those markers can match), the channel family (gpt-oss), and blocks whose first opener the prompt
//! already wrote (functionary's `>>>` recipients, `Format::output_prefix`). Other recipient-based
//! calls are [`ConstrainError::Unsupported`].

use serde_json::{Value as Json, json};

use crate::format::{
    ArgumentEncoding, Format, JsonCallFields, ReasoningMode, ToolCallFormat, ToolFamily, ValueEncoding,
};
use crate::markers::{leading_ws, trailing_ws};
use crate::parse::{ParseOptions, ToolChoice};

/// Why no grammar can be derived for a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConstrainError {
    /// The template's call syntax (or one of its features) is not constrained yet.
    #[error("{template}: cannot constrain {what} yet")]
    Unsupported {
        /// Where the Format came from.
        template: String,
        /// What is missing, e.g. ``the `pythonic` tool-call family``.
        what: String,
    },
    /// A Hugging Face response template cannot express this part of the Format.
    #[error("{template}: a response template cannot express {what}")]
    ResponseTemplate {
        /// Where the Format came from.
        template: String,
        /// What it cannot express, e.g. `reasoning that starts without a marker`.
        what: String,
    },
    /// The request asks for calls the template cannot write, or names a tool it does not hold.
    #[error("{0}")]
    Request(String),
    /// The derived structural tag does not compile (a tool schema the engine cannot enforce).
    #[error("{0}")]
    Grammar(#[from] parlance_grammar::StructuralTagError),
}

/// Optional whitespace, where the template writes some around a marker: bounded, so that a model
/// cannot loop on whitespace between markers, and as long as a whitespace run the parser reads
/// loosely inside a marker (32), so the indentation templates leak between calls (vLLM's DeepSeek V3
/// template: 16 spaces and a line break) is admitted.
const WS: &str = "[ \\t\\r\\n]{0,32}";

/// Whitespace inside a call's JSON object (`{"name" : "f", …}`): JSON's, unbounded, as in the
/// arguments' own JSON that follows. (Bounded, each run was a chain of 33 automaton states in every
/// tool's grammar: more than half of compiling a derived grammar for new tools.)
const JSON_WS: &str = "[ \\t\\r\\n]*";

/// How a grammar is derived besides the request.
#[derive(Debug, Clone, Default)]
pub struct ConstrainOptions {
    /// The tokenizer's special tokens (`SpecialTokens::new` over their texts, prepared once per
    /// tokenizer): markers holding them are written as token formats, since the model writes each
    /// as one token that no text matches. Default: none (every marker is text).
    pub special_tokens: SpecialTokens,
    /// The request's OpenAI `response_format`: `{"type": "text"}` (the default),
    /// `{"type": "json_object"}` or `{"type": "json_schema", "json_schema": {"schema": …}}`. A JSON
    /// format makes the content one JSON value (calls stay allowed as the request says).
    pub response_format: Option<Json>,
    /// Whether call arguments follow their tool's schema (`true`) or only the syntax of the
    /// Format's arguments (`false`: any JSON object, any tagged arguments). Default (`None`): each
    /// tool's own OpenAI `function.strict` decides, and a tool that does not say is constrained by
    /// its schema, as XGrammar's builtin styles read it (only `strict: false` skips the schema).
    pub strict: Option<bool>,
    /// The most tokens reasoning may take (a thinking budget): once spent, the reasoning block must
    /// end (`any_text.max_tokens`, enforced by the matcher at token boundaries; the structural tag
    /// carries it for XGrammar too). Default: unbounded.
    pub reasoning_budget: Option<u32>,
}

/// A tokenizer's special tokens, with the automaton that finds them in markers: built once per
/// tokenizer (a server's), not per request (Llama 3's 256 took ~0.25 ms to build). Cheap to clone.
#[derive(Clone, Default)]
pub struct SpecialTokens {
    inner: Option<std::sync::Arc<(Vec<String>, aho_corasick::AhoCorasick)>>,
}

impl SpecialTokens {
    /// The special tokens with these texts (empty ones are left out).
    pub fn new<S: Into<String>>(texts: impl IntoIterator<Item = S>) -> Result<SpecialTokens, ConstrainError> {
        let texts: Vec<String> = texts.into_iter().map(Into::into).filter(|t| !t.is_empty()).collect();
        if texts.is_empty() {
            return Ok(SpecialTokens::default());
        }
        let finder = aho_corasick::AhoCorasick::builder()
            .match_kind(aho_corasick::MatchKind::LeftmostLongest)
            .build(&texts)
            .map_err(|e| ConstrainError::Request(format!("special tokens: {e}")))?;
        Ok(SpecialTokens { inner: Some(std::sync::Arc::new((texts, finder))) })
    }

    /// The texts, in the order given.
    pub fn texts(&self) -> &[String] {
        self.inner.as_ref().map_or(&[], |inner| &inner.0)
    }
}

impl std::fmt::Debug for SpecialTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SpecialTokens").field(&self.texts().len()).finish()
    }
}

/// The request with the tools whose arguments are not held to their schema (see
/// [`ConstrainOptions::strict`]) given an open object schema instead.
fn with_strictness<'a>(request: &'a ParseOptions, strict: Option<bool>) -> std::borrow::Cow<'a, ParseOptions> {
    let loose = |tool: &Json| match strict {
        Some(strict) => !strict,
        None => tool.pointer("/function/strict").or_else(|| tool.get("strict")).and_then(Json::as_bool) == Some(false),
    };
    if !request.tools.iter().any(loose) {
        return std::borrow::Cow::Borrowed(request);
    }
    let mut request = request.clone();
    for tool in request.tools.iter_mut().filter(|t| loose(t)) {
        let function = if tool.get("function").is_some() { &mut tool["function"] } else { tool };
        if let Some(object) = function.as_object_mut() {
            object.insert("parameters".into(), json!({"type": "object"}));
        }
    }
    std::borrow::Cow::Owned(request)
}

/// The JSON Schema content must follow under a `response_format`, if any.
fn content_schema(response_format: Option<&Json>) -> Result<Option<Json>, ConstrainError> {
    let Some(format) = response_format else { return Ok(None) };
    match format.get("type").and_then(Json::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(json!({"type": "object"}))),
        Some("json_schema") => match format.pointer("/json_schema/schema") {
            Some(schema) => Ok(Some(schema.clone())),
            None => Err(ConstrainError::Request("response_format json_schema without `json_schema.schema`".into())),
        },
        _ => Err(ConstrainError::Request(format!("unknown response_format {format}"))),
    }
}

/// The structural tag (XGrammar 0.2.8 JSON) for the assistant output of a request under `format`.
pub fn structural_tag(format: &Format, request: &ParseOptions) -> Result<Json, ConstrainError> {
    structural_tag_with(format, request, &ConstrainOptions::default())
}

/// [`structural_tag`] with options (special tokens as token formats).
pub fn structural_tag_with(
    format: &Format,
    request: &ParseOptions,
    options: &ConstrainOptions,
) -> Result<Json, ConstrainError> {
    structural_tag_for(format, request, options, Target::XGrammar)
}

/// The structural tag for `target` (see [`Target`]).
fn structural_tag_for(
    format: &Format,
    request: &ParseOptions,
    options: &ConstrainOptions,
    target: Target,
) -> Result<Json, ConstrainError> {
    let content = content_schema(options.response_format.as_ref())?;
    let request = with_strictness(request, options.strict);
    let doc = text_structural_tag(format, &request, content.as_ref(), options.reasoning_budget, target)?;
    with_special_tokens(doc, &options.special_tokens)
}

/// Who reads the structural tag: XGrammar (and servers that pass it on) reads its documented
/// format only; parlance's engine also reads `triggered_tags` whose tags begin with a special
/// token beside text triggers, which the optional call opener needs (Llama 3.x's
/// `<|python_tag|>` before a bare JSON call that may also come without it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    XGrammar,
    Parlance,
}

/// Free text, bounded in tokens when a budget is given.
fn reasoning_text(excludes: &[&str], budget: Option<u32>) -> Json {
    let mut text = node("any_text", [("excludes", json!(excludes))]);
    if let Some(max) = budget {
        text["max_tokens"] = json!(max);
    }
    text
}

fn text_structural_tag(
    format: &Format,
    request: &ParseOptions,
    content: Option<&Json>,
    budget: Option<u32>,
    target: Target,
) -> Result<Json, ConstrainError> {
    if let Some(channels) = crate::parse::channel::ChannelSyntax::from_format(format) {
        let messages = channel_messages(format, request, &channels, content, budget)?;
        return Ok(node("structural_tag", [("format", messages)]));
    }
    let reasoning = format.reasoning.as_ref().filter(|r| !r.end.trim().is_empty());
    let prompt = request.generation_prompt.as_deref().unwrap_or(&format.generation_prompt);
    if !format.output_prefix.is_empty() && prompt.ends_with(&format.output_prefix) {
        let reasoning = reasoning.filter(|_| request.in_reasoning != Some(false));
        return Ok(node("structural_tag", [("format", opened_blocks(format, request, content, reasoning, budget)?)]));
    }
    // Free text never opens or closes reasoning.
    let excludes: Vec<String> = reasoning
        .map(|r| [r.start.trim(), r.end.trim()].into_iter().filter(|m| !m.is_empty()).map(str::to_owned).collect())
        .unwrap_or_default();
    let mut parts = Vec::new();
    if let Some(r) = reasoning {
        let (start, end) = (r.start.trim(), r.end.trim());
        let mode = format.reasoning_details.as_ref().map_or(ReasoningMode::Tag, |d| d.mode);
        // After reasoning, the turn may open a new message with the prompt's header (Solar's
        // `<|end|><|begin|>assistant<|content|>`), as the parser reads it.
        let header = format.generation_prompt.trim();
        let header = (!header.is_empty() && !crate::markers::bracketed_pieces(header).is_empty()).then_some(header);
        let block = |begin: &str| {
            let content = reasoning_text(&[start], budget);
            let mut block = vec![tag(begin, content, end), regex(WS)];
            if let Some(header) = header {
                block.extend([optional(cs(header)), regex(WS)]);
            }
            seq(block)
        };
        // A prompt that closes the block (a thinking-off prompt), or a request that says reasoning
        // is off, leaves no reasoning to write.
        let closed = crate::parse::prompt_closes_block(prompt, start, end);
        let off = closed || request.in_reasoning == Some(false);
        // The empty block a template writes in turns without reasoning (`</think>`,
        // `<think></think>`) may open the output, as the parser reads it.
        let empty = format.reasoning_details.as_ref().map_or("", |d| d.empty_block.trim());
        let empty_block = (!empty.is_empty()).then(|| seq(vec![cs(empty), regex(WS)]));
        parts.push(regex(WS));
        if crate::parse::prompt_opens_reasoning(format, request) {
            // The model may still write the opener the prompt wrote (reasoning that may start
            // implicitly; R1-style models that repeat `<think>`), as the parser reads it.
            let mut reasoning = Vec::new();
            if !start.is_empty() {
                reasoning.push(optional(cs(start)));
            }
            reasoning.push(block(""));
            // Or it answers at once with the content opener (a content start of its own): no
            // reasoning, as the parser reads it (Kimi K3's `<|open|>response<|sep|>`).
            let content_start = format.content.start.trim();
            if !content_start.is_empty() && content_start != start && content_start != end {
                parts.push(or(vec![seq(reasoning), cs(content_start)]));
            } else {
                parts.extend(reasoning);
            }
        } else if off {
            parts.extend(empty_block.map(optional));
        } else if mode == ReasoningMode::Delimiter || start.is_empty() {
            parts.push(optional(block("")));
        } else {
            let open = block(start);
            parts.push(optional(match empty_block {
                Some(empty) => or(vec![open, empty]),
                None => open,
            }));
        }
    }
    parts.push(body(format, request, &excludes, content, target)?);
    Ok(node("structural_tag", [("format", seq(parts))]))
}

/// The grammar of [`structural_tag`], lowered by the engine.
pub fn grammar(format: &Format, request: &ParseOptions) -> Result<parlance_grammar::Grammar, ConstrainError> {
    let doc = structural_tag_for(format, request, &ConstrainOptions::default(), Target::Parlance)?;
    Ok(parlance_grammar::structural_tag_to_grammar(&doc, &parlance_grammar::StructuralTagOptions::default())?)
}

/// The grammar of a request for one vocabulary: markers holding its special tokens name them.
pub fn grammar_for(
    format: &Format,
    request: &ParseOptions,
    vocab: &parlance_grammar::TokenVocab,
) -> Result<parlance_grammar::Grammar, ConstrainError> {
    grammar_with(format, request, vocab, &ConstrainOptions::default())
}

/// [`grammar_for`] with options (a `response_format`); the special tokens are the vocabulary's.
pub fn grammar_with(
    format: &Format,
    request: &ParseOptions,
    vocab: &parlance_grammar::TokenVocab,
    options: &ConstrainOptions,
) -> Result<parlance_grammar::Grammar, ConstrainError> {
    let special: Vec<(String, u32)> = vocab.special_tokens().map(|(t, id)| (t.to_owned(), id)).collect();
    let options = ConstrainOptions {
        special_tokens: SpecialTokens::new(special.iter().map(|(t, _)| t.clone()))?,
        response_format: options.response_format.clone(),
        strict: options.strict,
        reasoning_budget: options.reasoning_budget,
    };
    let doc = structural_tag_for(format, request, &options, Target::Parlance)?;
    let options =
        parlance_grammar::StructuralTagOptions { special_tokens: special.into_iter().collect(), ..Default::default() };
    Ok(parlance_grammar::structural_tag_to_grammar(&doc, &options)?)
}

/// The channel family (gpt-oss's Harmony): messages, each a header, a body and its end; later
/// messages repeat the turn header. Reasoning (analysis) messages may come first; the turn ends
/// with a final message or a call, as the request allows. A call's header is accepted as the
/// template writes it (recipient first: ` to=functions.f<|channel|>commentary json<|message|>`) and
/// as models write it (`<|channel|>commentary to=functions.f <|constrain|>json<|message|>`; the
/// `<|constrain|>` marker is Harmony's own and no template renders it, so it is named here).
fn channel_messages(
    format: &Format,
    request: &ParseOptions,
    syntax: &crate::parse::channel::ChannelSyntax,
    content: Option<&Json>,
    budget: Option<u32>,
) -> Result<Json, ConstrainError> {
    let tools = format.tools.as_ref().expect("a channel syntax has tools");
    let reasoning = format.reasoning.as_ref().expect("a channel syntax has reasoning");
    // Each analysis message has the budget (a turn may write several, between calls).
    let analysis = tag(reasoning.start.trim(), reasoning_text(&[], budget), reasoning.end.trim());
    let content_end = format.content.end.trim();
    let final_body = match content {
        Some(content) => seq(vec![regex(WS), schema(content), regex(WS)]),
        None => node("any_text", [("excludes", json!(syntax.ends))]),
    };
    let channel = |name: &str| cs(&format!("{}{name}", syntax.channel));
    // The output format a header may name, as gpt-oss writes it: ` json`, ` <|constrain|>json`,
    // `<|constrain|>json` (never glued to a name as plain text: `fjson` would read as a name).
    let json_hint =
        optional(or(vec![seq(vec![cs(" "), optional(cs("<|constrain|>")), cs("json")]), cs("<|constrain|>json")]));
    // The final channel's name, from the content's opener (`<|channel|>final<|message|>`).
    let final_name = format
        .content
        .start
        .trim()
        .strip_prefix(syntax.channel.as_str())
        .and_then(|rest| rest.strip_suffix(syntax.message.as_str()))
        .filter(|name| !name.is_empty() && !name.contains(char::is_whitespace));
    let final_message = match final_name {
        Some(name) => {
            seq(vec![channel(name), json_hint.clone(), cs(&syntax.message), final_body, optional(cs(content_end))])
        }
        // Content alone without a channel (gpt-oss's early templates): after reasoning the same
        // templates name Harmony's final channel.
        None if format.content.start.trim() == syntax.message => {
            seq(vec![optional(channel("final")), cs(&syntax.message), final_body, optional(cs(content_end))])
        }
        None => seq(vec![cs(format.content.start.trim()), final_body, optional(cs(content_end))]),
    };
    let chosen = chosen_tools(request)?;
    // The call channel's name, as the template writes it after the recipient (`commentary`).
    let call_channel = tools
        .name_suffix
        .trim()
        .strip_prefix(syntax.channel.as_str())
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or("commentary")
        .trim_end_matches(syntax.message.as_str())
        .to_owned();
    // Text to the user on the call channel (a preamble before calls), ended like reasoning.
    let preamble_body = node("any_text", [("excludes", json!(syntax.ends))]);
    let preamble = |end: Json| seq(vec![channel(&call_channel), cs(&syntax.message), preamble_body.clone(), end]);
    // gpt-oss writes calls on the analysis channel too, and the recipient in the role header (as
    // the template does) or after the channel.
    let call_channels = or(vec![channel(&call_channel), channel(&syntax.reasoning_channel)]);
    let mut calls = Vec::new();
    for tool in chosen {
        let (name, parameters) = name_and_parameters(tool)?;
        let arguments = seq(vec![regex(WS), schema(&parameters), regex(WS)]);
        let recipient = format!("{}{name}", syntax.recipient);
        let in_role_header =
            seq(vec![cs(&format!(" {recipient}")), call_channels.clone(), json_hint.clone(), cs(&syntax.message)]);
        let after_channel =
            seq(vec![call_channels.clone(), cs(&format!(" {recipient}")), json_hint.clone(), cs(&syntax.message)]);
        calls.push(seq(vec![or(vec![in_role_header, after_channel]), arguments, cs(tools.call_end.trim())]));
    }
    let mut last = Vec::new();
    let end = cs(reasoning.end.trim());
    if calls.is_empty() || !request.tool_choice.requires_call() {
        last.extend([final_message, analysis.clone(), preamble(optional(end.clone()))]);
    }
    last.extend(calls);
    let header = cs(&syntax.turn_header);
    let earlier = or(vec![analysis, preamble(end)]);
    Ok(seq(vec![star(seq(vec![earlier, header])), or(last)]))
}

/// Content, then calls as the request allows them.
fn body(
    format: &Format,
    request: &ParseOptions,
    excludes: &[String],
    content: Option<&Json>,
    target: Target,
) -> Result<Json, ConstrainError> {
    let wrapper = content_wrapper(format);
    // Free text, with the content's wrapper where the template writes one.
    let free_text = |excludes: &[String]| match &wrapper {
        Some((start, wrapped)) => node(
            "triggered_tags",
            [
                ("triggers", json!([start])),
                ("tags", json!([wrapped])),
                ("excludes", json!(excludes)),
                ("at_least_one", Json::Bool(false)),
                ("stop_after_first", Json::Bool(false)),
            ],
        ),
        None => node("any_text", [("excludes", json!(excludes))]),
    };
    // Beside the calls, unless a call must come first: the wrapped content as a tag of its own.
    let add_wrapper = |triggers: &mut Vec<String>, tags: &mut Vec<Json>, at_least_one: bool| {
        if let Some((start, wrapped)) = wrapper.as_ref().filter(|_| !at_least_one) {
            triggers.push(start.clone());
            tags.push(wrapped.clone());
        }
    };
    let text = match content {
        Some(content) => seq(vec![schema(content), regex(WS)]),
        None => free_text(excludes),
    };
    let tools = match (&format.tools, &request.tool_choice) {
        (Some(_), ToolChoice::None) if content.is_some() => return Ok(text),
        // No call may start: free text never writes a call's opening marker.
        (Some(tools), ToolChoice::None) => {
            let mut excludes = excludes.to_vec();
            excludes.extend(call_openers(tools));
            return Ok(free_text(&excludes));
        }
        (None, ToolChoice::None) => return Ok(text),
        (None, _) if request.tools.is_empty() => return Ok(text),
        (None, _) => {
            return Err(ConstrainError::Request(format!("{}: the template renders no tool calls", format.template)));
        }
        (Some(_), _) if request.tools.is_empty() => return Ok(text),
        (Some(tools), _) => tools,
    };
    let unsupported =
        |what: &str| ConstrainError::Unsupported { template: format.template.clone(), what: what.to_owned() };
    match format.tool_format {
        ToolFamily::Channel | ToolFamily::RecipientBased | ToolFamily::Unknown => {
            let family = serde_json::to_value(format.tool_format).ok().and_then(|v| v.as_str().map(str::to_owned));
            return Err(unsupported(&format!("the `{}` tool-call family", family.unwrap_or_default())));
        }
        _ => {}
    }
    let chosen = chosen_tools(request)?;
    let single = matches!(request.tool_choice, ToolChoice::Function(_))
        || !request.parallel_tool_calls.unwrap_or(true)
        || !tools.parallel;
    let required = request.tool_choice.requires_call();
    let calls = chosen.iter().map(|t| call(format, tools, t)).collect::<Result<Vec<_>, _>>()?;
    let section_start = tools.section_start.trim();
    let json_array = tools.json.as_ref().is_some_and(|j| j.array);
    // The calls as the request allows them; `at_least_one`: whether a call must come.
    let dispatch = |at_least_one: bool| -> Json {
        if !section_start.is_empty() || json_array {
            // One section holding the calls: the section's start is the trigger. A section end
            // that carries the turn's end (`</TOOLCALL><SPECIAL_12>`) leaves that to the engine's
            // stop token.
            let section_end = tools.section_end.trim();
            let turn_end = format.turn_end.trim();
            let section_end = match section_end.strip_suffix(turn_end) {
                Some(rest) if !turn_end.is_empty() && !rest.trim().is_empty() => rest.trim(),
                _ => section_end,
            };
            let (open, close, separator) = if json_array {
                (format!("{section_start}["), format!("]{section_end}"), ",".to_owned())
            } else {
                (section_start.to_owned(), section_end.to_owned(), tools.separator.trim().to_owned())
            };
            // XGrammar refuses a tag whose content repeats without an end string (a section that
            // runs to the end of the turn, Llama 4's `<|python_start|><|python_end|>`): there, one
            // call per section.
            let one_per_section = single || (target == Target::XGrammar && close.is_empty());
            let list = calls_list(&calls, &separator, one_per_section);
            let section = if tools.section_end_only_after_several && target == Target::Parlance && !close.is_empty() {
                // The end is optional (the template writes it only after several calls): the
                // section's content ends with it or without it. (Not for XGrammar, which refuses
                // a tag whose content repeats without an end string.)
                tag(&open, seq(vec![regex(WS), list, regex(WS), optional(cs(&close))]), "")
            } else {
                tag_loose_end(&open, seq(vec![regex(WS), list, regex(WS)]), &close)
            };
            let (mut triggers, mut tags) = (vec![open], vec![section]);
            add_wrapper(&mut triggers, &mut tags, at_least_one);
            // After a section, text may follow (`[f(a=1)] Here is the forecast:`, read as
            // content), and, where calls may be parallel, another section; one call, one section.
            node(
                "triggered_tags",
                [
                    ("triggers", json!(triggers)),
                    ("tags", Json::Array(tags)),
                    ("excludes", json!(excludes)),
                    ("at_least_one", Json::Bool(at_least_one)),
                    ("stop_after_first", Json::Bool(single)),
                ],
            )
        } else {
            let opener = tools.optional_call_opener.trim();
            let opener = (target == Target::Parlance && tools.json.is_some() && !opener.is_empty()).then_some(opener);
            let triggers: Vec<String> = {
                let mut t: Vec<String> =
                    calls.iter().map(|c| c.trigger.clone()).chain(opener.map(str::to_owned)).collect();
                t.sort();
                t.dedup();
                t
            };
            let mut tags: Vec<Json> = calls.iter().map(|c| c.tag.clone()).collect();
            if let Some(opener) = opener {
                // The optional opener, then one of the calls as a section writes it.
                let one = or(calls.iter().map(|c| c.in_section.clone().unwrap_or_else(|| c.tag.clone())).collect());
                tags.push(tag(opener, seq(vec![regex(WS), one]), ""));
            }
            let mut triggers = triggers;
            add_wrapper(&mut triggers, &mut tags, at_least_one);
            node(
                "triggered_tags",
                [
                    ("triggers", json!(triggers)),
                    ("tags", Json::Array(tags)),
                    ("excludes", json!(excludes)),
                    ("at_least_one", Json::Bool(at_least_one)),
                    ("stop_after_first", Json::Bool(single)),
                ],
            )
        }
    };
    // Whitespace may trail the last call before the turn ends. A turn with calls may open its
    // content with the template's opener for that (Llama 4's `<|python_start|>`, closed by the
    // section start); the parser reads it as a marker wherever it opens the output.
    let opener = tools.content_start_with_calls.trim();
    let calls = |at_least_one: bool| match opener {
        "" => seq(vec![dispatch(at_least_one), regex(WS)]),
        opener => seq(vec![optional(cs(opener)), dispatch(at_least_one), regex(WS)]),
    };
    Ok(match content {
        // JSON content or calls (calls with no free text around them).
        Some(_) if !required => or(vec![text, calls(true)]),
        _ => calls(required),
    })
}

/// The output of a template whose every block opens with `Format::output_prefix` and whose prompt
/// already wrote the first one (functionary: `>>>all\n` + text, `>>>name\n` + arguments): the first
/// block without its opener, then blocks triggered by it. A reasoning block, when its start opens
/// with the prefix too (muse-glimmer's `<|start|>assistant to=self<|message|>`), may come first.
fn opened_blocks(
    format: &Format,
    request: &ParseOptions,
    content: Option<&Json>,
    reasoning: Option<&crate::format::ReasoningMarkers>,
    budget: Option<u32>,
) -> Result<Json, ConstrainError> {
    let prefix = format.output_prefix.as_str();
    let unsupported = |what: &str| ConstrainError::Unsupported { template: format.template.clone(), what: what.into() };
    let mode = format.reasoning_details.as_ref().map_or(ReasoningMode::Tag, |d| d.mode);
    let reasoning_first = match reasoning {
        None => None,
        Some(r) => match r.start.trim().strip_prefix(prefix) {
            Some(start) if mode == ReasoningMode::Tag && !start.trim().is_empty() => {
                Some(tag(start, reasoning_text(&[r.start.trim(), prefix], budget), r.end.trim()))
            }
            _ => return Err(unsupported("reasoning that does not open with the block the prompt opened")),
        },
    };
    // The opener as written (`>>>all\n`): the recipient's line break is what the parser waits for.
    let opener = format.content.start.as_str();
    let Some(content_opener) = opener.strip_prefix(prefix).filter(|rest| !rest.trim().is_empty()) else {
        return Err(unsupported("a prompt-opened block whose content does not open with the same marker"));
    };
    if content.is_some() {
        return Err(unsupported("a response format with a prompt-opened block"));
    }
    let excludes = vec![prefix.to_owned()];
    let tools = match (&format.tools, &request.tool_choice) {
        (Some(tools), choice) if *choice != ToolChoice::None && !request.tools.is_empty() => Some(tools),
        (None, choice) if *choice != ToolChoice::None && !request.tools.is_empty() => {
            return Err(ConstrainError::Request(format!("{}: the template renders no tool calls", format.template)));
        }
        _ => None,
    };
    let Some(tools) = tools else {
        let any = node("any_text", [("excludes", json!(excludes))]);
        let text = seq(vec![cs(content_opener), any.clone()]);
        return Ok(match reasoning_first {
            // Reasoning, then the content block with its opener.
            Some(r) => or(vec![seq(vec![r, regex(WS), cs(opener.trim()), any]), text]),
            None => text,
        });
    };
    if tools.json.is_some() || !tools.call_start.trim().is_empty() || !tools.section_start.trim().is_empty() {
        return Err(unsupported("a prompt-opened block around JSON calls or call sections"));
    }
    let calls = chosen_tools(request)?.into_iter().map(|t| call(format, tools, t)).collect::<Result<Vec<_>, _>>()?;
    // The same call tag without the opener the prompt holds.
    let without_opener = |tag: &Json| {
        let mut tag = tag.clone();
        let begin = tag["begin"].as_str().unwrap_or_default();
        tag["begin"] = json!(begin.strip_prefix(prefix).unwrap_or(begin));
        tag
    };
    let required = request.tool_choice.requires_call();
    let single = matches!(request.tool_choice, ToolChoice::Function(_))
        || !request.parallel_tool_calls.unwrap_or(true)
        || !tools.parallel;
    let text = node("any_text", [("excludes", json!(excludes))]);
    let mut first: Vec<Json> = calls.iter().map(|c| without_opener(&c.tag)).collect();
    // After reasoning, the first block with its opener.
    let mut after_reasoning: Vec<Json> = calls.iter().map(|c| c.tag.clone()).collect();
    if !required {
        first.push(seq(vec![cs(content_opener), text.clone()]));
        after_reasoning.push(tag(opener, text.clone(), ""));
    }
    // Then more blocks, each opened by the prefix: content blocks always, calls while more may come.
    let mut next = vec![tag(opener, text, "")];
    if !single {
        next.extend(calls.into_iter().map(|c| c.tag));
    }
    let mut next = or(next);
    // Blocks after the first may be written after a separator (functionary v2 repeats the
    // `<|from|>assistant` header before each).
    let separator = tools.separator.trim();
    if !separator.is_empty() {
        next = seq(vec![regex(WS), optional(cs(separator)), regex(WS), next]);
    }
    let opened = seq(vec![or(first), star(next.clone())]);
    Ok(match reasoning_first {
        Some(r) => or(vec![seq(vec![r, regex(WS), or(after_reasoning), star(next)]), opened]),
        None => opened,
    })
}

/// The content's wrapper (Solar Open's `<|content|>…<|end|>`, Command R7B's
/// `<|START_RESPONSE|>…<|END_RESPONSE|>`) as a tag free text may hold, and its trigger: a wrapper
/// end that also ends reasoning is never free text, so the wrapped content is a tag of its own.
fn content_wrapper(format: &Format) -> Option<(String, Json)> {
    let (start, end) = (format.content.start.trim(), format.content.end.trim());
    let wrapped = !start.is_empty() && !end.is_empty() && format.output_prefix.is_empty();
    wrapped.then(|| (start.to_owned(), tag(start, json!({"type": "any_text"}), end)))
}

/// The markers a call (or its section) opens with; bare JSON calls open with `{"`.
fn call_openers(tools: &ToolCallFormat) -> Vec<String> {
    let first = [tools.section_start.trim(), tools.call_start.trim(), tools.name_prefix.trim()]
        .into_iter()
        .find(|m| !m.is_empty())
        .map(str::to_owned);
    match (first, &tools.json) {
        (Some(marker), _) => vec![marker],
        (None, Some(fields)) if fields.array => vec!["[{".to_owned()],
        (None, Some(_)) => vec!["{\"".to_owned()],
        (None, None) => Vec::new(),
    }
}

/// One call's tag and the trigger its begin starts with.
struct Call {
    trigger: String,
    tag: Json,
    /// For a bare JSON call, the object as written inside a section, where no trigger is needed and
    /// JSON whitespace may follow its `{` (`{ "arguments": …`).
    in_section: Option<Json>,
}

/// Calls separated by `separator` (whitespace around it optional), one or many, inside a section.
fn calls_list(calls: &[Call], separator: &str, single: bool) -> Json {
    let calls: Vec<Json> = calls.iter().map(|c| c.in_section.clone().unwrap_or_else(|| c.tag.clone())).collect();
    let one = or(calls);
    if single {
        return one;
    }
    let next = seq(vec![regex(WS), cs(separator), regex(WS), one.clone()]);
    seq(vec![one, star(next)])
}

fn call(format: &Format, tools: &ToolCallFormat, tool: &Json) -> Result<Call, ConstrainError> {
    let (name, parameters) = name_and_parameters(tool)?;
    let unsupported = |what: String| ConstrainError::Unsupported { template: format.template.clone(), what };
    let call_end = tools.call_end.trim();
    if let Some(fields) = &tools.json {
        // The whole call is a JSON object, maybe after a call marker.
        let object = json_call(fields, name, &parameters);
        let start = tools.call_start.trim();
        if !start.is_empty() {
            let content = seq(vec![regex(WS), object, regex(WS)]);
            return Ok(Call { trigger: start.to_owned(), tag: tag(start, content, call_end), in_section: None });
        }
        // Bare JSON: the object's opening up to its first key is the trigger.
        let first = first_call_key(fields, name);
        let trigger = format!("{{{}", json!(first));
        let after_key = json_after_first_key(fields, name, &parameters);
        let content = if call_end.is_empty() { after_key } else { seq(vec![after_key, regex(WS)]) };
        let in_section = if call_end.is_empty() { object } else { seq(vec![object, regex(WS), cs(call_end)]) };
        return Ok(Call {
            trigger: trigger.clone(),
            tag: tag(&trigger, content, call_end),
            in_section: Some(in_section),
        });
    }
    // The name sits in markers; arguments follow.
    let opener = format!("{}{}", tools.call_start, tools.name_prefix);
    let opener = opener.trim_start();
    // Calls without a marker of their own open inside a section (pythonic `[f(a=1), g()]`): the
    // section's start is the trigger, the call begins with its name.
    if opener.is_empty() && tools.section_start.trim().is_empty() {
        return Err(unsupported("calls without an opening marker".into()));
    }
    let trigger = if tools.call_start.trim().is_empty() {
        opener.trim_end().to_owned()
    } else {
        tools.call_start.trim().to_owned()
    };
    let mut begin = format!("{opener}{name}");
    let mut content = Vec::new();
    let suffix = tools.name_suffix.as_str();
    if tools.indexed_name_suffix {
        let at = suffix.find(|c: char| c.is_ascii_digit()).unwrap_or(suffix.len());
        let digits = suffix[at..].find(|c: char| !c.is_ascii_digit()).map_or(suffix.len(), |n| at + n);
        begin.push_str(&suffix[..at]);
        content.push(regex("[0-9]+"));
        // Models put a space between the index and the marker after it (Kimi K2's
        // `functions.f:0 <|tool_call_argument_begin|>`), as the parser allows.
        let rest = suffix[digits..].trim();
        if !rest.is_empty() {
            content.push(regex(WS));
            content.push(cs(rest));
        }
    } else if let Some(again) = &tools.name_repeat_suffix {
        // The name written a second time, as the template writes it.
        begin.push_str(suffix);
        begin.push_str(name);
        begin.push_str(again.trim_end());
    } else if tools.call_id_suffix.is_empty() {
        begin.push_str(suffix.trim_end());
    }
    if !tools.call_id_suffix.is_empty() {
        let id = seq(vec![regex("[A-Za-z0-9]+"), cs(tools.call_id_suffix.trim_end())]);
        if tools.indexed_name_suffix {
            content.push(id);
        } else {
            // The id and its marker, which models leave out (Mistral Small 3.2's `[CALL_ID]`), as
            // the parser allows.
            let with_id = seq(vec![cs(suffix.trim_end()), id]);
            content.push(or(vec![with_id, cs(tools.call_id_suffix.trim_end())]));
        }
    }
    content.push(regex(WS));
    match tools.arguments {
        ArgumentEncoding::Json => content.push(schema(&parameters)),
        ArgumentEncoding::Tagged => content.push(tagged_arguments(format, tools, &parameters)?),
    }
    content.push(regex(WS));
    if tools.call_id_before_name {
        // The id between the call's opener and its name prefix (Solar Open): the tag begins at the
        // opener, every tool's alike, and the name follows the id.
        let start = tools.call_start.trim();
        let Some(rest) = begin.strip_prefix(start).filter(|_| !start.is_empty()) else {
            return Err(unsupported("call ids before the name without a call opener".into()));
        };
        content.splice(0..0, [regex(WS), regex(CALL_ID), regex(WS), cs(rest.trim_start())]);
        begin = start.to_owned();
    }
    Ok(Call { trigger, tag: tag_loose_end(&begin, seq(content), call_end), in_section: None })
}

/// A call id a model writes where the template writes one (the parser reads such names).
const CALL_ID: &str = "[A-Za-z0-9_.:-]{1,64}";

/// The markers of arrays and objects written as nested elements with the argument markers
/// (MiniMax-M3: `]<]minimax[>[<k>v]<]minimax[>[</k>` a member, `<item>` an array item).
struct NestedTags<'a> {
    open: &'a str,
    open_end: &'a str,
    close: &'a str,
    close_end: &'a str,
    item: &'a str,
}

/// Deepest schema nesting written as elements; deeper values are JSON (a recursive schema ends).
const NESTED_DEPTH: usize = 8;

/// A value of `schema` as nested elements, as the parser reads them (`values::tagged::nested`):
/// an object's members in the schema's order, each at most once, the required ones present (a
/// template omits null members); an array's items as `item` elements, as many as the schema
/// allows; strings raw to their element's end; other scalars as JSON. Arrays and objects may also
/// be written as JSON, which the parser reads too.
fn nested_value(tags: &NestedTags<'_>, schema_value: &Json, depth: usize) -> Json {
    let element = |name: &str, sub: &Json| {
        let begin = format!("{}{name}{}", tags.open, tags.open_end);
        let end = format!("{}{name}{}", tags.close, tags.close_end);
        seq(vec![tag(&begin, nested_value(tags, sub, depth + 1), &end), regex(WS)])
    };
    let any = json!({});
    match schema_value.get("type").and_then(Json::as_str) {
        Some("object") if depth < NESTED_DEPTH => {
            // An open object's members may have any names, which a closing tag repeats: no
            // grammar of these markers holds that, so its text is free up to the element's end
            // (a narrowing of strict mode, listed in the module docs).
            let Some(properties) = schema_value.get("properties").and_then(Json::as_object).filter(|p| !p.is_empty())
            else {
                return json!({"type": "any_text"});
            };
            let required: Vec<&str> = schema_value
                .get("required")
                .and_then(Json::as_array)
                .into_iter()
                .flatten()
                .filter_map(Json::as_str)
                .collect();
            let members = properties
                .iter()
                .map(|(name, sub)| {
                    let member = element(name, sub);
                    if required.contains(&name.as_str()) { member } else { optional(member) }
                })
                .collect();
            or(vec![seq(vec![regex(WS), seq(members)]), schema(schema_value)])
        }
        Some("array") if depth < NESTED_DEPTH => {
            let items = schema_value.get("items").filter(|i| i.is_object()).unwrap_or(&any);
            let bound = |key: &str| schema_value.get(key).and_then(Json::as_i64);
            let (min, max) = (bound("minItems").unwrap_or(0), bound("maxItems").unwrap_or(-1));
            let repeated =
                node("repeat", [("min", json!(min)), ("max", json!(max)), ("content", element(tags.item, items))]);
            or(vec![seq(vec![regex(WS), repeated]), schema(schema_value)])
        }
        Some("string") => match string_choices(schema_value) {
            Some(choices) => or(choices.iter().map(|c| cs(c)).collect()),
            None => json!({"type": "any_text"}),
        },
        Some("integer" | "number" | "boolean" | "null" | "array" | "object") => schema(schema_value),
        // Untyped (or several types): whatever is written up to the element's end.
        _ => json!({"type": "any_text"}),
    }
}

/// The members of a call object (key, value grammar) in the order the template writes them.
fn call_members(fields: &JsonCallFields, name: &str, parameters: &Json) -> Vec<(String, Json)> {
    let arguments = if fields.arguments_as_string { schema(&json!({"type": "string"})) } else { schema(parameters) };
    let mut members = if fields.name.is_empty() {
        vec![(name.to_owned(), arguments)]
    } else {
        vec![(fields.name.clone(), cs(&json!(name).to_string())), (fields.arguments.clone(), arguments)]
    };
    if let Some(id) = &fields.id {
        members.push((id.clone(), regex("\"[A-Za-z0-9_-]*\"")));
    }
    if !fields.key_order.is_empty() {
        members.sort_by_key(|(key, _)| fields.key_order.iter().position(|k| k == key).unwrap_or(usize::MAX));
    }
    members
}

/// `text` as a regular expression matching it literally: the syntax characters backslashed, which
/// regex-syntax (parlance), ECMAScript (XGrammar) and Python's `re` (transformers) all read alike.
pub(crate) fn escape_regex(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\^$.|?*+()[]{}".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A sequence whose literal text and whitespace between nodes are merged into one `regex` node:
/// JSON punctuation, keys and optional whitespace would otherwise be a node each, and a request's
/// structural tag is built (and compiled) per request. Only for text that holds no special token
/// (the special-token rewrite reads `const_string` nodes).
#[derive(Default)]
struct Syntax {
    parts: Vec<Json>,
    pending: String,
}

impl Syntax {
    /// Literal text.
    fn text(mut self, text: &str) -> Self {
        self.pending.push_str(&escape_regex(text));
        self
    }

    /// JSON whitespace (`JSON_WS`).
    fn ws(mut self) -> Self {
        self.pending.push_str(JSON_WS);
        self
    }

    /// A node: merged when it is literal text or a regex, else kept.
    fn node(mut self, node: Json) -> Self {
        match node["type"].as_str() {
            Some("const_string") => self.text(node["value"].as_str().unwrap_or_default()),
            Some("regex") => {
                self.pending.push_str(&format!("(?:{})", node["pattern"].as_str().unwrap_or_default()));
                self
            }
            _ => {
                self.flush();
                self.parts.push(node);
                self
            }
        }
    }

    fn flush(&mut self) {
        if !self.pending.is_empty() {
            self.parts.push(regex(&std::mem::take(&mut self.pending)));
        }
    }

    fn build(mut self) -> Json {
        self.flush();
        seq(self.parts)
    }
}

/// `{"KEY": VALUE, …}` with JSON whitespace.
fn json_object(members: Vec<(String, Json)>) -> Json {
    let mut syntax = Syntax::default().text("{").ws();
    for (i, (key, value)) in members.into_iter().enumerate() {
        if i > 0 {
            syntax = syntax.ws().text(",").ws();
        }
        syntax = syntax.text(&json!(key).to_string()).ws().text(":").ws().node(value);
    }
    syntax.ws().text("}").build()
}

/// `{"name": "NAME", "arguments": ARGS}` with JSON whitespace, as the fields say.
fn json_call(fields: &JsonCallFields, name: &str, parameters: &Json) -> Json {
    let inner = json_object(call_members(fields, name, parameters));
    match &fields.function {
        Some(wrapper) => json_object(vec![(wrapper.clone(), inner)]),
        None => inner,
    }
}

/// The first key of a call object as written (`name`, a `function` wrapper, the name itself).
fn first_call_key(fields: &JsonCallFields, name: &str) -> String {
    match &fields.function {
        Some(wrapper) => wrapper.clone(),
        None => call_members(fields, name, &json!({})).swap_remove(0).0,
    }
}

/// A bare JSON call after its trigger (`{"name"`): the rest of the object (behind a `function`
/// wrapper, the call object it holds).
fn json_after_first_key(fields: &JsonCallFields, name: &str, parameters: &Json) -> Json {
    let mut syntax = Syntax::default().ws().text(":").ws();
    if fields.function.is_some() {
        syntax = syntax.node(json_call(&JsonCallFields { function: None, ..fields.clone() }, name, parameters));
    } else {
        let mut members = call_members(fields, name, parameters).into_iter();
        if let Some((_, value)) = members.next() {
            syntax = syntax.node(value);
        }
        for (key, value) in members {
            syntax = syntax.ws().text(",").ws().text(&json!(key).to_string()).ws().text(":").ws().node(value);
        }
    }
    syntax.ws().text("}").build()
}

/// Arguments written one marker pair each: in the schema's order, each at most once and the required
/// ones present; where a separator goes between them, in any order (neither enforced).
fn tagged_arguments(format: &Format, tools: &ToolCallFormat, parameters: &Json) -> Result<Json, ConstrainError> {
    let properties = parameters.get("properties").and_then(Json::as_object).cloned().unwrap_or_default();
    let python = tools.value_encoding == ValueEncoding::Python;
    let prefix = tools.arg_name_prefix.trim_start();
    let value_end = tools.arg_value_suffix.trim_end();
    // A pythonic template that prints strings bare (`"%s" | format(v)`, vLLM's Llama 3.2) writes
    // calls no parser can split; models write Python's literals, strings quoted.
    let quote = match tools.string_quote.as_str() {
        "" if python && prefix.is_empty() && value_end.is_empty() => "'",
        quote => quote,
    };
    let required: Vec<&str> =
        parameters.get("required").and_then(Json::as_array).into_iter().flatten().filter_map(Json::as_str).collect();
    // Per property, in the schema's order: its tag (one per name suffix the value may take).
    let mut args: Vec<(bool, Vec<Json>)> = Vec::new();
    for (name, property) in &properties {
        // The name as the template writes it (escaped where it escapes names).
        let key = tools.name_escape.escape(name);
        let mut variants = Vec::new();
        // A string that may be null is written as a string (raw, where the encoding has no
        // quote): `["string", "null"]`, an `anyOf` of a string and null.
        let typ = match property.get("type").and_then(Json::as_str) {
            Some(typ) => typ,
            None if may_be_string(property) => "string",
            None => "",
        };
        let end = match &tools.arg_value_suffix_after_name {
            Some(after) => format!("{}{key}{}", tools.arg_value_suffix.trim_start(), after.trim_end()),
            None => value_end.trim_start().to_owned(),
        };
        // A non-string value where values print with Python's `str`: templates that print scalars
        // so print containers with `tojson` (Qwen3-Coder), and models write JSON scalars too
        // (`true`), so between value markers a JSON value of the schema is as good; where the
        // literal ends itself (a pythonic call) only Python's spelling is.
        let python_value = || {
            if value_end.is_empty() {
                python_literal(typ, property)
            } else {
                or(vec![python_literal(typ, property), schema(property)])
            }
        };
        let nested = match (&tools.nested_item_name, &tools.arg_value_suffix_after_name) {
            (Some(item), Some(after)) if matches!(typ, "array" | "object") => Some(NestedTags {
                open: prefix,
                open_end: tools.arg_name_suffix.trim_end(),
                close: tools.arg_value_suffix.trim_start(),
                close_end: after.trim_end(),
                item,
            }),
            _ => None,
        };
        let value = if let Some(tags) = nested {
            nested_value(&tags, property, 0)
        } else if typ == "string" && quote.is_empty() {
            // Raw text up to the value's end marker (automatic end detection), or one of the
            // schema's strings.
            match string_choices(property) {
                // Around the choice, the whitespace the template writes there, or none: the
                // parser takes exactly that off a raw value (`<parameter=unit>\nC\n</parameter>`).
                Some(choices) => {
                    let around = |ws: &str| if ws.is_empty() { cs("") } else { optional(cs(ws)) };
                    let (lead, trail) = (trailing_ws(&tools.arg_name_suffix), leading_ws(&tools.arg_value_suffix));
                    seq(vec![around(lead), or(choices.iter().map(|c| cs(c)).collect()), around(trail)])
                }
                None => json!({"type": "any_text"}),
            }
        } else if python && quote.chars().count() == 1 {
            // Python literals (`str()` of the value, `repr` inside containers): strings in
            // either quote with escapes, containers of literals.
            if typ == "string" { python_string(property) } else { python_value() }
        } else if typ == "string" {
            seq(vec![cs(quote), node("any_text", [("excludes", json!([quote]))]), cs(quote)])
        } else if python {
            python_value()
        } else if quote.chars().count() > 1 && !matches!(typ, "integer" | "number" | "boolean") {
            // Gemma 4's literals: strings in its own quote inside containers, keys bare, `None`;
            // or the schema's JSON, which templates that quote only top-level strings write for
            // containers (FunctionGemma: `<escape>v<escape>`, but `[1, "two"]` by `tojson`).
            or(vec![quoted_literal(typ, quote), schema(property)])
        } else {
            schema(property)
        };
        let mut suffixes = vec![tools.arg_name_suffix.trim_end().to_owned()];
        if typ != "string" {
            suffixes.extend(tools.arg_name_suffixes_typed.iter().map(|s| s.trim_end().to_owned()));
        }
        for suffix in suffixes {
            // The name's suffix is a loose marker (`</arg_key>\n<arg_value>`): its first piece
            // closes the tag's begin, the others open the content.
            let pieces = marker_pieces(&suffix);
            let glued = pieces.first().is_none_or(|first| suffix.starts_with(first));
            let (begin, mut content) = match pieces.split_first() {
                Some((first, rest)) if glued => (format!("{prefix}{key}{first}"), loose_rest(rest)),
                _ => (format!("{prefix}{key}"), loose_rest(&pieces)),
            };
            // Without an end marker the value ends itself (a literal): no tag to close, and no
            // whitespace before it (the parser reads a literal from the marker on).
            if end.is_empty() {
                content.extend([value.clone(), regex(WS)]);
                variants.push(seq([vec![cs(&begin)], content].concat()));
                continue;
            }
            if typ == "string" && quote.is_empty() {
                // Raw text from right after the marker, as templates write it.
                content.push(value.clone());
            } else {
                content.extend([regex(WS), value.clone(), regex(WS)]);
            }
            variants.push(tag(&begin, seq(content), &end));
        }
        args.push((required.contains(&name.as_str()), variants));
    }
    let open = parameters.get("additionalProperties") != Some(&Json::Bool(false));
    if args.is_empty() && !open {
        return Ok(cs(""));
    }
    let separator = tools.arg_separator.trim();
    let alternatives = or;
    if args.is_empty() && prefix.is_empty() && value_end.is_empty() && python && quote.chars().count() == 1 {
        // An open schema of keyword arguments (`a=1, b='x'`): any names, literal values.
        let one = seq(vec![
            regex("[A-Za-z_][A-Za-z0-9_]*"),
            cs(tools.arg_name_suffix.trim()),
            regex(WS),
            python_literal("", &json!({})),
        ]);
        let next = seq(vec![regex(WS), cs(separator), regex(WS), one.clone()]);
        return Ok(optional(seq(vec![one, star(next)])));
    }
    // Without a name prefix or a value end, each value must end itself: quoted strings, JSON or
    // Python literals.
    if prefix.is_empty() && (args.is_empty() || value_end.is_empty() && quote.is_empty()) {
        return Err(ConstrainError::Unsupported {
            template: format.template.clone(),
            what: "tagged arguments without a name prefix".into(),
        });
    }
    if args.is_empty() {
        // An open schema (no properties, or a tool not held to its schema): any names, each value
        // raw text up to its end marker, in any number.
        if tools.arg_value_suffix_after_name.is_some() {
            return Err(ConstrainError::Unsupported {
                template: format.template.clone(),
                what: "arguments of an open schema where the value's end repeats the name".into(),
            });
        }
        let name_then_value = seq(vec![
            regex("[A-Za-z_][A-Za-z0-9_.-]*"),
            cs(tools.arg_name_suffix.trim_end()),
            json!({"type": "any_text"}),
        ]);
        let one = seq(vec![tag(prefix, name_then_value, value_end.trim_start()), regex(WS)]);
        let next = if separator.is_empty() { one.clone() } else { seq(vec![cs(separator), regex(WS), one.clone()]) };
        return Ok(optional(seq(vec![one, star(next)])));
    }
    if separator.is_empty() {
        let args: Vec<(bool, Json)> = args
            .into_iter()
            .map(|(required, variants)| (required, seq(vec![alternatives(variants), regex(WS)])))
            .collect();
        // Models write arguments in any order (the template writes them in the order given):
        // with few properties, any order, each at most once, the required ones present...
        if args.len() <= ANY_ORDER_MAX {
            return Ok(any_order(&args, 0));
        }
        // ...with more (the orders multiply), in the schema's order.
        let parts = args.into_iter().map(|(required, arg)| if required { arg } else { optional(arg) }).collect();
        return Ok(seq(parts));
    }
    // With a separator between them: in the schema's order, each at most once, the required ones
    // present, a separator before every argument but the first written.
    let args: Vec<(bool, Json)> =
        args.into_iter().map(|(required, variants)| (required, alternatives(variants))).collect();
    let sep = seq(vec![regex(WS), cs(separator), regex(WS)]);
    // After an argument was written: each later one with its separator.
    let after = |from: usize| {
        let parts = args[from..]
            .iter()
            .map(|(required, arg)| {
                let part = seq(vec![sep.clone(), arg.clone()]);
                if *required { part } else { optional(part) }
            })
            .collect::<Vec<_>>();
        if parts.is_empty() { cs("") } else { seq(parts) }
    };
    // Before any: the first one written is argument `i`, every optional one before it left out.
    let mut firsts = Vec::new();
    for (i, (required, arg)) in args.iter().enumerate() {
        firsts.push(seq(vec![arg.clone(), after(i + 1)]));
        if *required {
            return Ok(or(firsts));
        }
    }
    Ok(optional(or(firsts)))
}

/// Tagged arguments are admitted in any order up to this many properties (the grammar grows with
/// the number of orders: 65 argument sequences for 4).
const ANY_ORDER_MAX: usize = 4;

/// Arguments in any order after those in `written` (a bit set): each at most once, the required
/// ones present.
fn any_order(args: &[(bool, Json)], written: u32) -> Json {
    let next: Vec<Json> = (0..args.len())
        .filter(|i| written & (1 << i) == 0)
        .map(|i| seq(vec![args[i].1.clone(), any_order(args, written | (1 << i))]))
        .collect();
    let done = args.iter().enumerate().all(|(i, (required, _))| !required || written & (1 << i) != 0);
    match (next.is_empty(), done) {
        (true, _) => cs(""),
        (false, true) => optional(or(next)),
        (false, false) => or(next),
    }
}

/// Whether a schema without a single `type` is a string that may be null (a type list or `anyOf` /
/// `oneOf` branches of `string` and `null` only), or an enum of strings that read as no literal.
fn may_be_string(schema: &Json) -> bool {
    // Only a string or nothing (`["string", "null"]`, an `anyOf` of a string and null): the parser
    // keeps such raw text as the string (a `null` written raw reads as null). A union with other
    // types keeps its schema: the parser would read `3` or `[1]` as those types.
    let string_or_null = |t: &Json| t == "string" || t == "null";
    if let Some(types) = schema.get("type").and_then(Json::as_array) {
        return types.iter().any(|t| t == "string") && types.iter().all(string_or_null);
    }
    let branches: Vec<&Json> =
        ["anyOf", "oneOf"].iter().filter_map(|k| schema.get(*k).and_then(Json::as_array)).flatten().collect();
    let branch_type = |b: &&Json| b.get("type").cloned().unwrap_or(Json::Null);
    let union = !branches.is_empty()
        && branches.iter().any(|b| branch_type(b) == "string")
        && branches.iter().all(|b| string_or_null(&branch_type(b)));
    // An untyped enum of strings none of which reads as a literal (`"celsius"`, not `"1"`): the
    // parser keeps each as the string it is.
    let literal = |v: &str| serde_json::from_str::<Json>(v).is_ok() || matches!(v, "True" | "False" | "None");
    union || string_choices(schema).is_some_and(|c| !c.iter().any(|v| literal(v)))
}

/// The strings a schema's `enum` (or `const`) allows, when every value it allows is one.
fn string_choices(schema: &Json) -> Option<Vec<&str>> {
    let values: Vec<&Json> = match (schema.get("enum").and_then(Json::as_array), schema.get("const")) {
        (Some(values), _) => values.iter().collect(),
        (None, Some(value)) => vec![value],
        (None, None) => return None,
    };
    let strings: Option<Vec<&str>> = values.iter().map(|v| v.as_str()).collect();
    strings.filter(|s| !s.is_empty())
}

/// A Python string literal the schema's string keywords allow: one of its `enum` values (in
/// single quotes, as `repr` writes them), else any string in either quote, its escapes those that
/// stand for one character (`\\ \' \" \n \r \t`), of `minLength`..`maxLength` characters
/// (`pattern` and `format` are not enforced).
fn python_string(property: &Json) -> Json {
    if let Some(values) = property.get("enum").and_then(Json::as_array) {
        let quoted: Vec<Json> = values
            .iter()
            .filter_map(Json::as_str)
            .map(|v| cs(&format!("'{}'", v.replace('\\', "\\\\").replace('\'', "\\'").replace('\n', "\\n"))))
            .collect();
        if !quoted.is_empty() {
            return or(quoted);
        }
    }
    let bound = |key: &str| property.get(key).and_then(Json::as_u64);
    let count = match (bound("minLength"), bound("maxLength")) {
        (None, None) => "*".to_owned(),
        (min, None) => format!("{{{},}}", min.unwrap_or(0)),
        (min, Some(max)) => format!("{{{},{max}}}", min.unwrap_or(0)),
    };
    or(["'", "\""].into_iter().map(|q| regex(&format!(r#"{q}(?:[^{q}\\\n]|\\[\\'"nrt]){count}{q}"#))).collect())
}

/// A literal whose strings are delimited by a multi-character quote (Gemma 4's
/// `[1,<|"|>two<|"|>]`, `{k:<|"|>v<|"|>}`, keys bare), as the parser reads it (`requote`): strings
/// never hold the quote, numbers and booleans as JSON, null as `None` (Jinja's spelling) or
/// `null`, but only `null` inside a container (the parser reads a container holding `None` as
/// text); container items are not held to the schema.
fn quoted_literal(typ: &str, quote: &str) -> Json {
    if typ == "null" {
        return or(vec![cs("None"), cs("null")]);
    }
    let string = |c: char| match c {
        '"' | '\\' => format!("\"\\{c}\""),
        c => format!("\"{c}\""),
    };
    let class = |c: char| match c {
        ']' | '\\' | '^' | '-' | '[' => format!("\\{c}"),
        '\n' => "\\n".to_owned(),
        c => c.to_string(),
    };
    // Text without the quote: the states of matching it (k of its characters seen), none reaching
    // the whole; any character outside it returns to the start.
    let q: Vec<char> = quote.chars().collect();
    let mut alphabet: Vec<char> = q.clone();
    alphabet.sort_unstable();
    alphabet.dedup();
    let quoted: String = q.iter().map(|&c| string(c)).collect::<Vec<_>>().join(" ");
    let mut strings = format!("str ::= {quoted} b0 {quoted}\n");
    for k in 0..q.len() {
        let mut alternatives = vec!["\"\"".to_owned()];
        for &c in &alphabet {
            let mut seen: Vec<char> = q[..k].to_vec();
            seen.push(c);
            let next = (0..=seen.len().min(q.len())).rev().find(|&l| seen.ends_with(&q[..l])).unwrap_or(0);
            if next < q.len() {
                alternatives.push(format!("{} b{next}", string(c)));
            }
        }
        let others: String = alphabet.iter().map(|&c| class(c)).collect();
        alternatives.push(format!("[^{others}] b0"));
        strings.push_str(&format!("b{k} ::= {}\n", alternatives.join(" | ")));
    }
    literal_grammar(typ, &strings, r#""true" | "false" | "null""#, false)
}

/// A Python literal (a value as the template's `str()`/`repr` writes it) whose JSON reading the
/// parser checks against `property`: numbers by the schema, `True`/`False`/`None`, strings in
/// either quote with the escapes that stand for one character, lists, tuples and dicts of literals
/// (their items not held to the schema: a documented narrowing of the check, not of the syntax).
fn python_literal(typ: &str, property: &Json) -> Json {
    match typ {
        "integer" | "number" => schema(property),
        "boolean" => or(vec![cs("True"), cs("False")]),
        "null" => cs("None"),
        _ => {
            let strings = r#"str ::= "'" ([^'\\\n] | "\\" [\\'"nrt])* "'" | "\"" ([^"\\\n] | "\\" [\\'"nrt])* "\""
"#;
            literal_grammar(typ, strings, r#""True" | "False" | "None""#, true)
        }
    }
}

/// An EBNF `grammar` node for one literal of JSON type `typ` (any literal when untyped): `strings`
/// defines the rule `str`; `scalars` are the spellings of booleans and null; Python literals
/// also have tuples and any literal as a dict key, the others bare names or strings as keys.
fn literal_grammar(typ: &str, strings: &str, scalars: &str, python: bool) -> Json {
    let start = match typ {
        "string" => "str",
        "array" if python => "list | tuple",
        "array" => "list",
        "object" => "dict",
        _ => "value",
    };
    // Python allows a trailing comma; JSON, which the others are read as, does not.
    let (tuple, key, trailing) =
        if python { (" | tuple", "value", " (ws \",\")?") } else { ("", "[A-Za-z_] [A-Za-z0-9_]* | str", "") };
    let grammar = format!(
        "root ::= {start}\nvalue ::= str | num | {scalars} | list | dict{tuple}\n{strings}\
         num ::= \"-\"? [0-9]+ (\".\" [0-9]+)? ([eE] [+-]? [0-9]+)?\nws ::= [ \\t\\n]*\n\
         items ::= value (ws \",\" ws value)*{trailing}\nlist ::= \"[\" ws items? ws \"]\"\n\
         tuple ::= \"(\" ws items? ws \")\"\nkey ::= {key}\n\
         dict ::= \"{{\" ws (key ws \":\" ws value (ws \",\" ws key ws \":\" ws value)*)? ws \"}}\"\n"
    );
    node("grammar", [("grammar", Json::from(grammar))])
}

/// The tools a call may name: the named one, none under `none`, else all.
fn chosen_tools(request: &ParseOptions) -> Result<Vec<&Json>, ConstrainError> {
    Ok(match &request.tool_choice {
        ToolChoice::None => Vec::new(),
        ToolChoice::Function(name) => {
            let tool = request.tools.iter().find(|t| tool_name(t) == Some(name.as_str()));
            vec![tool.ok_or_else(|| {
                ConstrainError::Request(format!("tool_choice names `{name}`, which is not among the tools"))
            })?]
        }
        ToolChoice::AllowedTools { names, .. } => {
            if let Some(missing) =
                names.iter().find(|n| !request.tools.iter().any(|t| tool_name(t) == Some(n.as_str())))
            {
                return Err(ConstrainError::Request(format!(
                    "tool_choice allows `{missing}`, which is not among the tools"
                )));
            }
            if names.is_empty() && request.tool_choice.requires_call() {
                return Err(ConstrainError::Request("tool_choice requires a call but allows no tool".into()));
            }
            request.tools.iter().filter(|t| tool_name(t).is_some_and(|n| request.tool_choice.allows(n))).collect()
        }
        ToolChoice::Auto | ToolChoice::Required => request.tools.iter().collect(),
    })
}

/// A tool's name and its parameters' schema (an object of anything when it has none).
fn name_and_parameters(tool: &Json) -> Result<(&str, std::borrow::Cow<'_, Json>), ConstrainError> {
    let name = tool_name(tool).ok_or_else(|| ConstrainError::Request(format!("a tool without a name: {tool}")))?;
    let parameters = match tool.get("function").unwrap_or(tool).get("parameters") {
        Some(parameters) => std::borrow::Cow::Borrowed(parameters),
        None => std::borrow::Cow::Owned(json!({"type": "object"})),
    };
    Ok((name, parameters))
}

fn tool_name(tool: &Json) -> Option<&str> {
    tool.get("function").unwrap_or(tool).get("name").and_then(Json::as_str)
}

/// A structural-tag node `{"type": kind, …fields}`, its parts moved in (`json!` copies every
/// `Value` it is given, and nodes nest: building a document with it was quadratic in its depth).
fn node<const N: usize>(kind: &str, fields: [(&str, Json); N]) -> Json {
    let mut map = serde_json::Map::with_capacity(N + 1);
    map.insert("type".into(), Json::from(kind));
    for (key, value) in fields {
        map.insert(key.into(), value);
    }
    Json::Object(map)
}

fn or(elements: Vec<Json>) -> Json {
    node("or", [("elements", Json::Array(elements))])
}

/// The pieces of a marker as models vary it: `text` split at whitespace runs and between two
/// markers written back to back (`</arg_key><arg_value>`), empty pieces left out. Models write the
/// whitespace a template puts between such markers or leave it out, and add some where it puts
/// none (GLM's `</arg_key>\n<arg_value>`); the parser reads them alike.
fn marker_pieces(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    for word in text.split_whitespace() {
        let mut from = 0;
        for (at, _) in word.match_indices("><") {
            pieces.push(&word[from..=at]);
            from = at + 1;
        }
        pieces.push(&word[from..]);
    }
    pieces
}

/// `pieces` with optional whitespace before each (the rest of a loose marker, see [`marker_pieces`]).
fn loose_rest(pieces: &[&str]) -> Vec<Json> {
    pieces.iter().flat_map(|p| [regex(WS), cs(p)]).collect()
}

/// A tag whose end is a loose marker (see [`marker_pieces`]): all but the end's last piece close
/// the content (each after optional whitespace), the last piece is the tag's end. `content` ends
/// with whatever whitespace it allows before the end.
fn tag_loose_end(begin: &str, content: Json, end: &str) -> Json {
    let pieces = marker_pieces(end);
    match pieces.split_last() {
        Some((last, before)) if !before.is_empty() => {
            let mut parts = vec![content];
            parts.extend(loose_rest(before));
            parts.push(regex(WS));
            tag(begin, seq(parts), last)
        }
        _ => tag(begin, content, end.trim()),
    }
}

fn star(content: Json) -> Json {
    node("star", [("content", content)])
}

fn cs(value: &str) -> Json {
    node("const_string", [("value", Json::from(value))])
}

fn regex(pattern: &str) -> Json {
    node("regex", [("pattern", Json::from(pattern))])
}

fn schema(schema: &Json) -> Json {
    node("json_schema", [("json_schema", schema.clone())])
}

fn tag(begin: &str, content: Json, end: &str) -> Json {
    node("tag", [("begin", Json::from(begin)), ("content", content), ("end", Json::from(end))])
}

fn optional(content: Json) -> Json {
    node("optional", [("content", content)])
}

fn seq(mut parts: Vec<Json>) -> Json {
    if parts.len() == 1 { parts.remove(0) } else { node("sequence", [("elements", Json::Array(parts))]) }
}

/// Rewrites a structural tag so that markers holding a tokenizer's special tokens name those
/// tokens (`{"type": "token"}`, token begins and ends, `token_triggered_tags`) instead of their text:
/// the model writes a special token as one token, which no text matches.
fn with_special_tokens(doc: Json, special: &SpecialTokens) -> Result<Json, ConstrainError> {
    let Some(inner) = &special.inner else { return Ok(doc) };
    Ok(Rewriter { finder: &inner.1, special: &inner.0 }.format(doc))
}

/// A marker's text cut into text and special-token pieces.
#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Text(String),
    Token(String),
}

impl Piece {
    fn format(&self) -> Json {
        match self {
            Piece::Text(t) => cs(t),
            Piece::Token(t) => json!({"type": "token", "token": t}),
        }
    }

    /// As a tag's `begin` or `end`: a string or a token object.
    fn marker(&self) -> Json {
        match self {
            Piece::Text(t) => json!(t),
            Piece::Token(t) => json!({"type": "token", "token": t}),
        }
    }
}

struct Rewriter<'a> {
    finder: &'a aho_corasick::AhoCorasick,
    special: &'a [String],
}

impl Rewriter<'_> {
    fn pieces(&self, text: &str) -> Vec<Piece> {
        let mut out = Vec::new();
        let mut at = 0;
        for m in self.finder.find_iter(text) {
            if m.start() > at {
                out.push(Piece::Text(text[at..m.start()].to_owned()));
            }
            out.push(Piece::Token(self.special[m.pattern().as_usize()].clone()));
            at = m.end();
        }
        if at < text.len() || out.is_empty() {
            out.push(Piece::Text(text[at..].to_owned()));
        }
        out
    }

    fn format(&self, mut doc: Json) -> Json {
        let Some(kind) = doc.get("type").and_then(Json::as_str).map(str::to_owned) else { return doc };
        match kind.as_str() {
            "structural_tag" => {
                if let Some(f) = doc.get_mut("format") {
                    *f = self.format(f.take());
                }
                doc
            }
            "const_string" => {
                let value = doc["value"].as_str().unwrap_or_default().to_owned();
                seq(self.pieces(&value).iter().map(Piece::format).collect())
            }
            "any_text" | "triggered_tags" => {
                // Free text never holds a special token: excluding one is moot, and a text exclude
                // that contains one could never complete.
                if let Some(Json::Array(excludes)) = doc.get_mut("excludes") {
                    excludes
                        .retain(|e| e.as_str().is_some_and(|e| matches!(self.pieces(e).as_slice(), [Piece::Text(_)])));
                }
                if kind == "triggered_tags" { self.triggered_tags(doc) } else { doc }
            }
            "sequence" | "or" => {
                if let Some(Json::Array(elements)) = doc.get_mut("elements") {
                    for e in elements.iter_mut() {
                        *e = self.format(e.take());
                    }
                }
                doc
            }
            "optional" | "star" | "plus" | "repeat" => {
                if let Some(c) = doc.get_mut("content") {
                    *c = self.format(c.take());
                }
                doc
            }
            "tag" => self.tag(doc),
            _ => doc,
        }
    }

    /// A tag whose begin and end are one piece each; other pieces move into the content.
    fn tag(&self, mut doc: Json) -> Json {
        let begin = self.pieces(doc["begin"].as_str().unwrap_or_default());
        let end = self.pieces(doc["end"].as_str().unwrap_or_default());
        let content = self.format(doc["content"].take());
        let mut parts: Vec<Json> = begin[1..].iter().map(Piece::format).collect();
        parts.push(content);
        parts.extend(end[..end.len() - 1].iter().map(Piece::format));
        node("tag", [("begin", begin[0].marker()), ("content", seq(parts)), ("end", end[end.len() - 1].marker())])
    }

    /// Triggers that are special tokens make `token_triggered_tags`; text triggers stay.
    fn triggered_tags(&self, mut doc: Json) -> Json {
        let tags: Vec<Json> = match doc["tags"].take() {
            Json::Array(tags) => tags.into_iter().map(|t| self.tag(t)).collect(),
            _ => Vec::new(),
        };
        let triggers: Vec<Vec<Piece>> =
            doc["triggers"].as_array().into_iter().flatten().filter_map(Json::as_str).map(|t| self.pieces(t)).collect();
        let firsts: Vec<&Piece> = triggers.iter().filter_map(|t| t.first()).collect();
        if firsts.iter().any(|p| matches!(p, Piece::Text(_))) {
            // Text triggers stay; a tag beginning with a token (the optional call opener beside
            // text-triggered calls, see `Target`) is triggered by its token.
            doc["triggers"] =
                Json::Array(firsts.iter().filter(|p| matches!(p, Piece::Text(_))).map(|p| p.marker()).collect());
            doc["tags"] = Json::Array(tags);
            return doc;
        }
        // A token trigger is the whole begin token; the text after it is the tag's content.
        let trigger_tokens: Vec<Json> =
            firsts.iter().filter_map(|p| if let Piece::Token(t) = p { Some(json!(t)) } else { None }).collect();
        node(
            "token_triggered_tags",
            [
                ("trigger_tokens", Json::Array(trigger_tokens)),
                ("tags", Json::Array(tags)),
                ("at_least_one", doc["at_least_one"].take()),
                ("stop_after_first", doc["stop_after_first"].take()),
            ],
        )
    }
}
