//! Template analysis: find a chat template's reasoning, content and tool-call syntax by rendering
//! controlled variations of a conversation and comparing the outputs.
//!
//! The method is llama.cpp's differential analysis (seeds 000/001), reorganized around one primitive,
//! the assistant *output* of `probe`: for each probe message (content only; reasoning + content;
//! one call; two calls; ...) the exact text the model would write. Markers are the text around the
//! sentinels; the only heuristic is "does this parse as JSON". Templates that raise on a probe lose
//! that feature (reported in `Format::unsupported`), never the analysis.

pub(crate) mod diff;
pub(crate) mod probe;
mod tools;
mod verify;

pub use verify::{CaseResult, RenderedCase, rendered_cases, self_check};

use indexmap::IndexMap;
use serde_json::{Value as Json, json};

use crate::format::{
    Confidence, Evidence, Finding, Format, ReasoningDetails, ReasoningMarkers, ReasoningMode, ToolFamily, Workaround,
};
use crate::markers;
use crate::markers::common_suffix;
use crate::template::ChatTemplate;
use probe::{CONTENT, CONTENT_2, Output, Probe, REASONING};

/// Why a template could not be analyzed at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AnalyzeError {
    /// Not even a user message followed by an assistant message renders, in any input shape tried.
    #[error(
        "{template}: the template renders no user + assistant conversation, so it cannot be analyzed; tried: {}",
        tried.join("; ")
    )]
    NoConversation {
        /// The template's label.
        template: String,
        /// Each input shape tried, with the first error the template raised on it.
        tried: Vec<String>,
    },
    /// A probe render hit a render limit (fuel, memory, wall time, ...): the analysis stopped there
    /// rather than pay the limit again for every probe.
    #[error("{template}: analysis stopped: a probe render hit a limit: {message}")]
    Limit {
        /// The template's label.
        template: String,
        /// The render's error.
        message: String,
    },
}

/// Options of the analysis.
#[derive(Debug, Clone)]
pub struct AnalyzeOptions {
    /// Template variables set on every probe render (e.g. a `bos_token` the template needs).
    pub variables: IndexMap<String, Json>,
    /// Wall-clock budget of the whole analysis, its ~60 probe renders together; default 30 s (a
    /// real template needs well under a second). Where it runs out the analysis stops with
    /// [`AnalyzeError::Limit`]. It bounds each render only where
    /// [`crate::template::memory::GuardedAllocator`] is installed; without it, renders after the
    /// deadline are refused.
    pub max_wall_time: std::time::Duration,
}

impl Default for AnalyzeOptions {
    fn default() -> Self {
        AnalyzeOptions { variables: IndexMap::new(), max_wall_time: std::time::Duration::from_secs(30) }
    }
}

impl Format {
    /// Analyzes `template` ([`analyze`]).
    pub fn from_template(template: &ChatTemplate, options: &AnalyzeOptions) -> Result<Format, AnalyzeError> {
        analyze(template, options)
    }
}

/// Analyzes `template`: every marker from diffs of probe renders.
pub fn analyze(template: &ChatTemplate, options: &AnalyzeOptions) -> Result<Format, AnalyzeError> {
    let budget = crate::template::RunBudget::new(options.max_wall_time, "analysis wall-clock milliseconds");
    let probe = Probe::new(template, options.variables.clone(), budget)
        .map_err(|tried| AnalyzeError::NoConversation { template: template.label().to_owned(), tried })?;
    let format = analyze_with(template, probe.clone());
    if let Some(message) = probe.limit_hit() {
        return Err(AnalyzeError::Limit { template: template.label().to_owned(), message });
    }
    let format = format?;
    if tainted_markers(&format).is_empty() {
        return Ok(format);
    }
    // A marker holding probe text means the prompt and the history render the same turn
    // differently (the last user turn moved into a system block in the prompt): the split failed.
    // The conversation after a system message may render alike; otherwise the tainted features
    // are dropped and said so.
    if let Some(other) = probe.with_other_prefix()
        && let Ok(retried) = analyze_with(template, other)
        && tainted_markers(&retried).is_empty()
    {
        return Ok(retried);
    }
    // Or the conversation renders alike once tools are declared (the template renders it another
    // way without them).
    if let Some(with_tools) = probe.with_tools_always()
        && let Ok(mut retried) = analyze_with(template, with_tools)
        && tainted_markers(&retried).is_empty()
    {
        retried.unsupported.push(
            "without tools the prompt and the history render the turn differently; markers derived with tools declared"
                .to_owned(),
        );
        return Ok(retried);
    }
    Ok(recovered_from_tainted_markers(&format).unwrap_or_else(|| without_tainted_markers(format)))
}

/// `format` with the history's form of the last user turn cut from the front of its markers, when
/// that is all the probe text they hold: the content opener reads `[INST]question[/INST]`, the
/// turn's own text starts after the user turn's closing marker, and every tainted marker starts
/// with the same cut.
/// Or, when the content opener holds no probe text but the call markers do (they start inside
/// the user turn, which the template writes another way when it is the last one: Xinference's
/// DeepSeek V3 template adds the tool list there), the call markers are cut after the content
/// opener they hold: the turn's own text starts after its header.
fn recovered_from_tainted_markers(format: &Format) -> Option<Format> {
    let start = &format.content.start;
    let header = start.trim();
    let (cut, after_header) = match probe::after_user_turn(start) {
        Some(end) => (&start[..end], false),
        None if !header.is_empty() && tainted_markers(format).iter().all(|(what, _)| *what == "tool calls") => {
            (header, true)
        }
        None => return None,
    };
    let mut recovered = format.clone();
    let strip = |marker: &mut String| {
        if after_header {
            if let Some(at) = marker.rfind(cut)
                && holds_probe_text(&marker[..at])
            {
                *marker = marker[at + cut.len()..].trim_start().to_owned();
            }
        } else if let Some(rest) = marker.strip_prefix(cut) {
            *marker = rest.to_owned();
        }
    };
    strip(&mut recovered.content.start);
    if let Some(r) = recovered.reasoning.as_mut() {
        strip(&mut r.start);
    }
    if let Some(t) = recovered.tools.as_mut() {
        for marker in [&mut t.section_start, &mut t.call_start, &mut t.name_prefix] {
            strip(marker);
        }
    }
    if !tainted_markers(&recovered).is_empty() {
        return None;
    }
    recovered.unsupported.push(if after_header {
        format!(
            "the prompt and the history render the last user turn differently; call markers derived after the turn's header {cut:?}"
        )
    } else {
        format!(
            "the prompt and the history render the last user turn differently; markers derived after its history form {cut:?}"
        )
    });
    for item in &mut recovered.evidence {
        item.confidence = item.confidence.min(Confidence::Medium);
        item.shown_by.push_str(", after the history form of the user turn");
    }
    collect_preserved_tokens(&mut recovered);
    Some(recovered)
}

/// The probe's sentinel texts: no derived marker may hold one.
const SENTINEL: &str = "PLNC";

/// The derived markers that hold probe text, as `(what, marker)`.
fn tainted_markers(format: &Format) -> Vec<(&'static str, String)> {
    let mut found = Vec::new();
    let mut check = |what: &'static str, marker: &str| {
        if holds_probe_text(marker) {
            found.push((what, marker.to_owned()));
        }
    };
    if let Some(r) = &format.reasoning {
        check("reasoning", &r.start);
        check("reasoning", &r.end);
    }
    check("content", &format.content.start);
    check("content", &format.content.end);
    check("turn end", &format.turn_end);
    if let Some(t) = &format.tools {
        let repeat = t.name_repeat_suffix.as_deref().unwrap_or_default();
        for marker in [
            &t.section_start,
            &t.section_end,
            &t.call_start,
            &t.call_end,
            &t.separator,
            &t.name_prefix,
            &t.name_suffix,
            repeat,
            &t.call_id_suffix,
        ] {
            check("tool calls", marker);
        }
    }
    found
}

/// Whether `marker` holds probe text: the sentinel (function and argument names are written in
/// lower case), the ids, a user turn cut after its sentinel (`user question[/INST]`), or content
/// parts printed as data.
fn holds_probe_text(marker: &str) -> bool {
    let cut_user_turn = [probe::USER, probe::USER_2]
        .iter()
        .any(|user| user.split_once(' ').is_some_and(|(_, words)| marker.contains(words)));
    marker.to_ascii_uppercase().contains(SENTINEL)
        || marker.contains(probe::ID_1)
        || marker.contains(probe::ID_2)
        || cut_user_turn
        || printed_as_data(marker)
}

/// Whether `text` holds the probe's content parts printed as data (`content | tojson` of a
/// `{"type": "thinking", …}` part), which are no markers.
fn printed_as_data(text: &str) -> bool {
    ["\"type\": \"thinking\"", "'type': 'thinking'", "\"type\":\"thinking\""].iter().any(|part| text.contains(part))
}

/// `format` without the features whose markers hold probe text, each reported in `unsupported`.
fn without_tainted_markers(mut format: Format) -> Format {
    for (what, marker) in tainted_markers(&format) {
        let why = if marker.contains(probe::FN_1) || marker.contains(probe::FN_2) {
            "a function's name where a marker was expected (the name is written again in a way the analysis does not read)"
        } else {
            "probe text (the prompt and the history render the turn differently)"
        };
        format.unsupported.push(format!("{what}: the derived marker {marker:?} holds {why}; not derived"));
        match what {
            "reasoning" => {
                format.reasoning = None;
                format.reasoning_details = None;
            }
            "tool calls" => {
                format.tools = None;
                format.tool_format = ToolFamily::Unknown;
            }
            "content" => format.content = Default::default(),
            _ => format.turn_end.clear(),
        }
    }
    collect_preserved_tokens(&mut format);
    format
}

/// Analyzes with one probe.
fn analyze_with(template: &ChatTemplate, mut probe: Probe) -> Result<Format, AnalyzeError> {
    let mut format = Format { template: template.label().to_owned(), ..Format::default() };
    let shape = probe.shape();
    if shape.tools_always {
        format.workarounds.push(Workaround::ToolsInEveryRender);
    }
    if shape.content_parts {
        format.workarounds.push(Workaround::ContentAsTextParts);
    }
    if let Some(unescaped) = probe.with_markup_add_unescaped() {
        probe = unescaped;
        format.workarounds.push(Workaround::MarkupAddUnescaped);
    }
    if let Some(lenient) = probe.with_list_append_ignored() {
        probe = lenient;
        format.workarounds.push(Workaround::ListAppendIgnored);
    }
    if let Some(lenient) = probe.with_null_content_with_calls() {
        probe = lenient;
        format.workarounds.push(Workaround::CallsWithNullContent);
    }
    if !probe.emptied.is_empty() {
        format.workarounds.push(Workaround::UndeclaredVariablesSetEmpty);
        format.unsupported.push(format!(
            "rendering without the variables {:?}: nothing renders unless they are passed; analyzed with them empty",
            probe.emptied
        ));
    }
    format.generation_prompt = probe.generation_prompt(false, &[]).unwrap_or_default();
    if let Some((marker, shown_by)) = opened_call_marker(&probe, &format.generation_prompt) {
        probe.opened.clone_from(&marker);
        format.output_prefix = marker;
        evidence(&mut format, Finding::OutputPrefix, shown_by, Confidence::Medium);
    }

    let content_only = probe.output(&json!({"role": "assistant", "content": CONTENT}), false, &[]);
    let content_only_2 = probe.output(&json!({"role": "assistant", "content": CONTENT_2}), false, &[]);
    let (Some(content_only), Some(content_only_2)) = (content_only, content_only_2) else {
        let tried = vec![format!("{}: an assistant message of plain content does not render", shape.describe())];
        return Err(AnalyzeError::NoConversation { template: template.label().to_owned(), tried });
    };
    let after_content = |output: &Output, sentinel: &str| -> Option<String> {
        let at = output.text.find(sentinel)?;
        Some(output.text[at + sentinel.len()..].to_owned())
    };
    // What follows the content in both content variants: content end marker + turn end.
    let tail_1 = after_content(&content_only, CONTENT).unwrap_or_default();
    let tail_2 = after_content(&content_only_2, CONTENT_2).unwrap_or_default();
    let shared_tail = tail_1[tail_1.len() - common_suffix(&tail_1, &tail_2)..].to_owned();

    let content_start = content_only.text.find(CONTENT).map(|at| content_only.text[..at].to_owned());
    format.content.start = content_start.unwrap_or_default();
    evidence(&mut format, Finding::Content, "two content-only messages rendered as the last turn", Confidence::High);
    analyze_reasoning(&probe, &mut format);
    // A template may write an empty reasoning block in every turn (`<think>\n\n</think>\n\n`):
    // it precedes the content and the calls, and belongs to neither.
    let mut empty_block = empty_reasoning_block(&format);
    // Reasoning that renders only next to calls may leave its empty block in every call turn
    // (Command A's `<|START_THINKING|><|END_THINKING|>` before the action): that block belongs to
    // the reasoning, not to the call section's opener.
    if empty_block.is_empty()
        && format.reasoning_details.as_ref().is_some_and(|d| d.mode == ReasoningMode::ToolsOnly)
        && let Some(markers) = &format.reasoning
    {
        let call = probe::call(probe::ID_1, probe::FN_1, json!({probe::ARG_1: probe::VALUE_1}));
        if let Some(output) = probe.output_with_calls(vec![call], &[]) {
            empty_block = empty_block_at(&output.text, markers);
        }
    }
    if let Some(details) = format.reasoning_details.as_mut() {
        details.empty_block.clone_from(&empty_block);
    }
    if let Some(rest) = format.content.start.strip_prefix(empty_block.as_str()) {
        format.content.start = rest.to_owned();
    }
    // Sets the turn end too: what every kind of turn ends with (a content wrapper is not part of it).
    tools::analyze(&probe, &mut format, &shared_tail, &empty_block);
    // Calls named after the marker the prompt leaves open address a recipient (functionary's
    // `>>>` and `<|recipient|>`): the label says so.
    let opens_calls = format.tool_format != ToolFamily::JsonNative
        && format
            .tools
            .as_ref()
            .is_some_and(|t| !format.output_prefix.is_empty() && t.name_prefix.trim() == format.output_prefix);
    if opens_calls {
        format.tool_format = ToolFamily::RecipientBased;
    }
    format.content.end = shared_tail[..shared_tail.len() - format.turn_end.len()].to_owned();
    if let Some(before) = before_calls(&probe, &format)
        && let Some(tools) = format.tools.as_mut()
    {
        tools.before_calls = before;
    }
    if let Some((opener, section_start)) = content_inside_section(&probe, &format)
        && let Some(tools) = format.tools.as_mut()
    {
        tools.content_start_with_calls = opener;
        tools.section_start = section_start;
    }
    // A template that always wraps content writes an empty wrapper before calls: it is content's,
    // not the call section's (Kimi-K3's `<|open|>response<|sep|><|close|>response`).
    let empty_content = format!("{}{}", format.content.start, format.content.end);
    if let Some(tools) = format.tools.as_mut() {
        let wrapped = !format.content.start.trim().is_empty() && !format.content.end.trim().is_empty();
        match tools.section_start.strip_prefix(empty_content.as_str()) {
            Some(rest) if wrapped && !rest.trim().is_empty() => tools.section_start = rest.to_owned(),
            _ => {}
        }
    }
    collect_preserved_tokens(&mut format);
    Ok(format)
}

/// The probes' one call, its arguments as the template takes them (a JSON string where it prints
/// the wire's string, else an object).
fn one_call(tools: &crate::format::ToolCallFormat) -> Json {
    let arguments = match tools.arguments_from_string {
        true => json!(json!({probe::ARG_1: probe::VALUE_1}).to_string()),
        false => json!({probe::ARG_1: probe::VALUE_1}),
    };
    probe::call(probe::ID_1, probe::FN_1, arguments)
}

/// What a turn holding content and a call writes between the two beyond the content's own end:
/// the end of a content message and the header of the next (`<|im_end|>\n<|im_start|>assistant`),
/// when the template writes such a turn as two messages. `None` when nothing but whitespace.
fn before_calls(probe: &Probe, format: &Format) -> Option<String> {
    let tools = format.tools.as_ref()?;
    let opener = [&tools.section_start, &tools.call_start, &tools.name_prefix]
        .into_iter()
        .map(|m| m.trim())
        .find(|m| !m.is_empty())?;
    let output = probe.output_with_calls_and(vec![one_call(tools)], &[("content", json!(CONTENT))], &[])?;
    let after = output.text.find(CONTENT)? + CONTENT.len();
    let at = diff::find_from(&output.text, opener, after)?;
    let between = output.text[after..at].trim();
    let between = between.strip_prefix(format.content.end.trim()).unwrap_or(between).trim();
    let marked = !markers::bracketed_pieces(between).is_empty();
    (marked && !between.contains("PLNC") && !between.contains(probe::FN_1)).then(|| between.to_owned())
}

/// A turn with calls whose content sits inside the section start the one-call render showed
/// (the first-release Llama 4 template writes `<|python_start|>` + content + `<|python_end|>`,
/// then its calls; with no content, the empty pair): the opener before the content and the
/// section start after it, cut between two of the start's bracketed markers. `None` when content
/// precedes the section start whole, as in almost every template.
fn content_inside_section(probe: &Probe, format: &Format) -> Option<(String, String)> {
    let tools = format.tools.as_ref()?;
    let section = tools.section_start.as_str();
    if markers::bracketed_pieces(section).len() < 2
        || !format.content.start.trim().is_empty()
        || !format.content.end.trim().is_empty()
    {
        return None;
    }
    let output = probe.output_with_calls_and(vec![one_call(tools)], &[("content", json!(CONTENT))], &[])?;
    let at = output.text.find(CONTENT)?;
    let (before, after) = (output.text[..at].trim_end(), output.text[at + CONTENT.len()..].trim_start());
    (1..section.len()).filter(|&k| section.is_char_boundary(k)).find_map(|k| {
        let (opener, rest) = section.split_at(k);
        let whole = opener.trim_end().ends_with(['>', ']']) && rest.trim_start().starts_with(['<', '[']);
        (whole && before.ends_with(opener.trim()) && after.starts_with(rest.trim()))
            .then(|| (opener.trim().to_owned(), rest.trim_start().to_owned()))
    })
}

/// The marker the generation prompt ends with when the model's output continues it as the opener
/// of its first block (functionary's `<|start_header_id|>assistant<|end_header_id|>\n\n>>>`: the
/// model writes a recipient next). Shown by the renders, not guessed: the turn repeats the whole
/// prompt, a call's output starts with its name, and a second call's name follows the same marker.
fn opened_call_marker(probe: &Probe, generation_prompt: &str) -> Option<(String, &'static str)> {
    let marker = last_marker(generation_prompt)?;
    if marker.is_empty() || !generation_prompt.ends_with(marker.as_str()) {
        return None;
    }
    let content = probe.output(&json!({"role": "assistant", "content": CONTENT}), false, &[])?;
    if !content.unrepeated_prompt.is_empty() {
        return None;
    }
    let shapes = [json!({probe::ARG_1: probe::VALUE_1}), json!(json!({probe::ARG_1: probe::VALUE_1}).to_string())];
    shapes.into_iter().find_map(|arguments| {
        let second = match &arguments {
            Json::String(_) => json!(json!({probe::ARG_2: probe::VALUE_2}).to_string()),
            _ => json!({probe::ARG_2: probe::VALUE_2}),
        };
        let calls =
            vec![probe::call(probe::ID_1, probe::FN_1, arguments), probe::call(probe::ID_2, probe::FN_2, second)];
        let two = probe.output_with_calls(calls, &[])?;
        // What the output writes before the first call's name: nothing (functionary: the name
        // follows the marker), or a header's rest (muse-glimmer's ` to=` after `<|start|>assistant`).
        let lead = &two.text[..two.text.find(probe::FN_1)?];
        let (repeated, shown_by) = match lead.trim().is_empty() {
            true => (
                format!("{marker}{}", probe::FN_2),
                "the generation prompt ends with it, a call's output starts with its name and a second call's name follows it",
            ),
            false => (
                format!("{marker}{lead}{}", probe::FN_2),
                "the generation prompt ends with it, and a second call repeats it before the text that opens the first call's output",
            ),
        };
        two.text.contains(&repeated).then(|| (marker.clone(), shown_by))
    })
}

/// Template variables set on one probe render.
type Variables<'a> = &'a [(&'a str, Json)];

/// Reasoning: R1 (with vs without reasoning), R2 (thinking switched on / off), history.
fn analyze_reasoning(probe: &Probe, format: &mut Format) {
    let field = json!({"role": "assistant", "reasoning_content": REASONING, "content": CONTENT});
    // Some templates take reasoning as a content block instead (`{"type": "thinking", ...}`).
    let block = json!({"role": "assistant", "content": [
        {"type": "thinking", "thinking": REASONING},
        {"type": "text", "text": CONTENT}
    ]});
    // Others read `message.reasoning` (Solar Open); as input it also fills the other two names.
    let reasoning_field = json!({"role": "assistant", "reasoning": REASONING, "content": CONTENT});
    let mut attempts: Vec<(Json, Variables, String, Option<String>)> = vec![
        (field.clone(), &[], "a message's `reasoning_content`, rendered as the last turn".into(), None),
        (
            field.clone(),
            &[("enable_thinking", json!(true))],
            "a message's `reasoning_content` with `enable_thinking=true`".into(),
            None,
        ),
        (
            field.clone(),
            &[("thinking", json!(true))],
            "a message's `reasoning_content` with `thinking=true`".into(),
            None,
        ),
        (block.clone(), &[], "a message's `thinking` content block".into(), None),
        (reasoning_field, &[], "a message's `reasoning` field".into(), None),
    ];
    // Last, a key of the template's own (MiniCPM3's `message.thought`): tried only after every
    // standard name, so a template reading those is never described by another key.
    let own_fields = reasoning_field_candidates(probe);
    for name in &own_fields {
        let mut message = json!({"role": "assistant", "content": CONTENT});
        message[name.as_str()] = json!(REASONING);
        attempts.push((
            message,
            &[],
            format!("a message's `{name}` field, a key the template reads"),
            Some(name.clone()),
        ));
    }
    // Content blocks count only where the template reads them as blocks: a text-only block list must
    // render exactly as the plain string (templates that print the list as a value do not).
    let text_block = json!({"role": "assistant", "content": [{"type": "text", "text": CONTENT}]});
    let plain = json!({"role": "assistant", "content": CONTENT});
    let reads_blocks = match (probe.output(&text_block, false, &[]), probe.output(&plain, false, &[])) {
        (Some(a), Some(b)) => a.text == b.text,
        _ => false,
    };
    for (message, extra, shown_by, own_field) in &attempts {
        let (message, extra) = (message, *extra);
        if *message == block && !reads_blocks {
            continue;
        }
        let Some(output) = probe.output(message, false, extra) else { continue };
        let Some(r) = output.text.find(REASONING) else { continue };
        let Some(c) = diff::find_from(&output.text, CONTENT, r) else { continue };
        let start_literal = output.text[..r].to_owned();
        let mut end_literal = output.text[r + REASONING.len()..c].to_owned();
        // A template that prints the message's parts as data shows no markers.
        if printed_as_data(&start_literal) || printed_as_data(&end_literal) {
            continue;
        }
        // A content wrapper opened right after the reasoning belongs to the content.
        let content_start = format.content.start.trim();
        if !content_start.is_empty() && end_literal.trim_end().ends_with(content_start) {
            let cut = end_literal.trim_end().len() - content_start.len();
            // Unless the "wrapper" is the reasoning end itself (a forced-open block closed at once).
            if !end_literal[..cut].trim().is_empty() {
                end_literal.truncate(cut);
            }
        }
        // Content after reasoning may come as a new message of the same turn (gpt-oss channels):
        // its header, the generation prompt's opening, is not part of the reasoning end.
        // So is what the new message's header goes on with (`<|channel|>final` of gpt-oss's early
        // templates, whose content alone has no channel).
        let header = output.generation_prompt.trim();
        if !header.is_empty()
            && let Some(cut) = end_literal.find(header)
            && !end_literal[..cut].trim().is_empty()
        {
            end_literal.truncate(cut);
        }
        // A prompt with thinking switched off may open the content itself where thinking on opens
        // the reasoning (Kimi-K3: `<|open|>response<|sep|>` for `<|open|>think<|sep|>`): that
        // opener, glued to the reasoning end in every render, is the content's.
        if let Some(opener) = content_opener_with_thinking_off(probe, &output.generation_prompt)
            && end_literal.trim_end().ends_with(opener.as_str())
        {
            let cut = end_literal.trim_end().len() - opener.len();
            if !end_literal[..cut].trim().is_empty() {
                end_literal.truncate(cut);
            }
        }
        let (mode, start) = if !start_literal.trim().is_empty() {
            (ReasoningMode::Tag, start_literal.trim().to_owned())
        } else {
            // The marker the turn's output starts after: the end of the part of the generation prompt
            // the turn repeats (a prompt with thinking off may go on to close the block).
            let repeated = output.generation_prompt.len() - output.unrepeated_prompt.len();
            // The prompt's opener that the turn leaves out, when it is one marker (`<think>` of
            // `<｜Assistant｜><think>`, which a rendered turn writes as `<｜Assistant｜>R</think>`).
            let unrepeated = output.unrepeated_prompt.trim();
            // Not when it closes the block (a thinking-off prompt's empty block ends with the end).
            let closes = unrepeated.starts_with("</") || unrepeated == end_literal.trim();
            let opener = (markers_in(unrepeated) == [unrepeated] && !closes).then(|| unrepeated.to_owned());
            match opener.or_else(|| last_marker(&output.generation_prompt[..repeated])) {
                Some(marker) => (ReasoningMode::ForcedOpen, marker),
                None => (ReasoningMode::Delimiter, String::new()),
            }
        };
        let end = end_literal.trim().to_owned();
        if end.is_empty() {
            format.unsupported.push("reasoning: rendered without an end marker".into());
            return;
        }
        let kept_in_history = kept_in_history(probe, message, extra);
        let (thinking_off, thinking_on) = thinking_prompts(probe, &format.generation_prompt);
        format.reasoning = Some(ReasoningMarkers { start: start.clone(), end });
        format.reasoning_details = Some(ReasoningDetails {
            mode,
            start_literal: if mode == ReasoningMode::Tag { start_literal } else { String::new() },
            end_literal,
            kept_in_history,
            generation_prompt_thinking_off: thinking_off,
            generation_prompt_thinking_on: thinking_on,
            empty_block: String::new(),
            field: own_field.clone(),
        });
        evidence(format, Finding::Reasoning, shown_by, Confidence::High);
        return;
    }
    // R3: reasoning rendered only next to tool calls, from the standard key, else from one of the
    // template's own (Command A's `tool_plan`, written only in call turns).
    let keys = std::iter::once(None).chain(own_fields.iter().map(|name| Some(name.as_str())));
    for key in keys {
        let name = key.unwrap_or("reasoning_content");
        // One render says whether a key of the template's own shows at all beside a call; only
        // then are the turn and whole-render diffs worth their renders.
        if key.is_some() && !shows_beside_a_call(probe, name) {
            continue;
        }
        let Some((start, end)) = reasoning_with_calls(probe, name).or_else(|| reasoning_by_insertion(probe, name))
        else {
            continue;
        };
        set_reasoning(probe, format, ReasoningMode::ToolsOnly, start, end, &[]);
        if let Some(details) = format.reasoning_details.as_mut() {
            details.field = key.map(str::to_owned);
        }
        let shown_by = match key {
            None => "reasoning rendered next to a tool call only".to_owned(),
            Some(name) => {
                format!("a message's `{name}` field (a key the template reads), rendered next to a tool call only")
            }
        };
        evidence(format, Finding::Reasoning, &shown_by, Confidence::Medium);
        return;
    }
    // R2: a message's reasoning never renders, but switching thinking on and off changes the
    // generation prompt: the difference holds the markers.
    for var in ["enable_thinking", "thinking"] {
        let on = probe.generation_prompt(false, &[(var, json!(true))]);
        let off = probe.generation_prompt(false, &[(var, json!(false))]);
        let (Some(on), Some(off)) = (on, off) else { continue };
        if let Some((mode, start, end)) = switched_markers(&on, &off) {
            set_reasoning(probe, format, mode, start, end, &[(var, json!(true))]);
            let shown_by = format!("generation prompts with `{var}` switched on and off");
            evidence(format, Finding::Reasoning, &shown_by, Confidence::Medium);
            return;
        }
        // A template that writes the thinking-off block after every conversation, whether or not
        // a generation prompt is asked for (Hunyuan-A13B): the whole renders differ by an empty block.
        let on = probe.render(&[], false, true, &[(var, json!(true))]);
        let off = probe.render(&[], false, true, &[(var, json!(false))]);
        if let (Some(on), Some(off)) = (on, off)
            && let Some((ReasoningMode::Tag, start, end)) = switched_markers(&on, &off)
        {
            set_reasoning(probe, format, ReasoningMode::Tag, start, end, &[(var, json!(true))]);
            let shown_by = format!("whole renders with `{var}` switched on and off (an empty block when off)");
            evidence(format, Finding::Reasoning, &shown_by, Confidence::Medium);
            return;
        }
    }
    // The switch as a flag in the system prompt (`/no_think`, `/think`: Nemotron, SmolLM3): the
    // thinking-off prompt writes an empty block the thinking-on prompt does not.
    let soft = |flag: &str| probe.with_system(&format!("PLNC system prompt {flag}")).generation_prompt(false, &[]);
    if let (Some(on), Some(off)) = (soft("/think"), soft("/no_think"))
        && let Some((ReasoningMode::Tag, start, end)) = switched_markers(&on, &off)
    {
        set_reasoning(probe, format, ReasoningMode::Tag, start, end, &[]);
        let shown_by = "generation prompts after a system prompt saying `/think` and `/no_think`";
        evidence(format, Finding::Reasoning, shown_by, Confidence::Medium);
        return;
    }
    // Or a keyword of the template's own that the system prompt must hold (`ENABLE_THINKING`):
    // thinking is off without it.
    for flag in thinking_keywords(probe) {
        if let (Some(on), Some(off)) = (soft(&flag), soft(""))
            && let Some((ReasoningMode::Tag, start, end)) = switched_markers(&on, &off)
        {
            set_reasoning(probe, format, ReasoningMode::Tag, start, end, &[]);
            let shown_by = format!("generation prompts after a system prompt with and without `{flag}`");
            evidence(format, Finding::Reasoning, &shown_by, Confidence::Medium);
            return;
        }
    }
    // Guesses confirmed by renders, in order: (finder, workaround, mode, evidence).
    type Finder = fn(&Probe) -> Option<(String, String)>;
    let guesses: [(Finder, Workaround, ReasoningMode, &str); 3] = [
        (
            stripped_mirror_tag,
            Workaround::ReasoningEndFromStrippedMirrorTag,
            ReasoningMode::ForcedOpen,
            "the prompt's opener, and content cut at its mirror closing tag in renders",
        ),
        (
            stripped_end_tag,
            Workaround::ReasoningFromStrippedEndTag,
            ReasoningMode::Implicit,
            "content cut at a closing tag of the template's source in renders; no opener shown",
        ),
        (
            thought_opener,
            Workaround::ReasoningEndFromOpenerName,
            ReasoningMode::ForcedOpen,
            "the prompt ends with an opener named for thought; its end is that opener's mirror",
        ),
    ];
    for (find, workaround, mode, shown_by) in guesses {
        if let Some((start, end)) = find(probe) {
            format.workarounds.push(workaround);
            set_reasoning(probe, format, mode, start, end, &[]);
            evidence(format, Finding::Reasoning, shown_by, Confidence::Low);
            return;
        }
    }
}

/// Message keys the template's source reads (`message.thought`, `msg['tool_plan']`) that may carry
/// reasoning: every `.name` / `['name']` access that is not a standard message key, a tool-call key or
/// a string or mapping method, in source order, at most 16 (each costs a probe render or two).
fn reasoning_field_candidates(probe: &Probe) -> Vec<String> {
    // Keys whose meaning is known (a standard name of reasoning renders aliased already), and the
    // methods templates call: none can be a reasoning field of the template's own.
    const KNOWN: &[&str] = &[
        "role",
        "content",
        "name",
        "tool_calls",
        "tool_call_id",
        "id",
        "type",
        "function",
        "arguments",
        "reasoning_content",
        "reasoning",
        "thinking",
        "text",
        "parameters",
        "properties",
        "required",
        "description",
        "items",
        "keys",
        "values",
        "get",
        "split",
        "rsplit",
        "strip",
        "lstrip",
        "rstrip",
        "startswith",
        "endswith",
        "replace",
        "lower",
        "upper",
        "title",
        "capitalize",
        "format",
        "join",
        "append",
        "update",
        "pop",
        "count",
        "find",
        "index",
        "length",
        "first",
        "last",
        "tools",
        "messages",
    ];
    const THOUGHT_WORDS: &[&str] =
        &["think", "thought", "reason", "reflect", "analy", "rationale", "plan", "scratch", "monologue", "cot"];
    let source: String = probe.template_sources().join("\n");
    let mut found: Vec<String> = Vec::new();
    let bytes = source.as_bytes();
    let mut at = 0;
    while at < bytes.len() && found.len() < 16 {
        // `.name` after an identifier, or `['name']` / `["name"]`.
        let start = match bytes[at] {
            b'.' if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') => at + 1,
            b'[' if matches!(bytes.get(at + 1), Some(b'\'' | b'"')) => at + 2,
            _ => {
                at += 1;
                continue;
            }
        };
        let len = bytes[start..].iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'_').count();
        at = start + len;
        if len < 3 || !bytes[start].is_ascii_alphabetic() {
            continue;
        }
        let name = &source[start..start + len];
        // Only names that say thought: a key of the template's own that it wraps in markers may
        // hold anything (open-instruct's OLMo writes `function_calls` in `<function_calls>`).
        let lower = name.to_ascii_lowercase();
        let says_thought = THOUGHT_WORDS.iter().any(|w| lower.contains(w));
        if says_thought && !KNOWN.contains(&name) && !found.iter().any(|f| f == name) {
            found.push(name.to_owned());
        }
    }
    found
}

/// Records how `finding` is known.
pub(crate) fn evidence(format: &mut Format, finding: Finding, shown_by: &str, confidence: Confidence) {
    format.evidence.push(Evidence { finding, shown_by: shown_by.to_owned(), confidence });
}

/// The reasoning markers a thinking switch shows: `on` and `off` are the same text rendered with
/// thinking switched on and off. `tag` when only the off text holds markers, exactly a start and an
/// end (an empty block: `<think>\n\n</think>`); `forced-open` when the on text ends with the
/// opener the off text closes.
fn switched_markers(on: &str, off: &str) -> Option<(ReasoningMode, String, String)> {
    if on == off {
        return None;
    }
    let shared = markers::common_prefix(on, off);
    let (on_rest, off_rest) = (&on[shared..], &off[shared..]);
    let off_markers = markers_in(off_rest);
    match (markers_in(on_rest).is_empty(), off_markers.as_slice()) {
        (true, [start, end]) => {
            // In an empty block everything before the end is the opener's: a word glued to the
            // start marker (`<|channel>thought\n<channel|>`) is part of it, not reasoning.
            let from = off_rest.find(start.as_str())?;
            let between = off_rest[from + start.len()..].split(end.as_str()).next().unwrap_or_default().trim();
            let word = !between.is_empty()
                && between.len() <= 24
                && between.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '-');
            let start = if word { format!("{start}{between}") } else { start.clone() };
            Some((ReasoningMode::Tag, start, end.clone()))
        }
        (_, [.., end]) => last_marker(on).map(|start| (ReasoningMode::ForcedOpen, start, end.clone())),
        _ => None,
    }
}

fn stripped_end_tag(probe: &Probe) -> Option<(String, String)> {
    let source: String = probe.template_sources().join("\n");
    let mut candidates: Vec<&str> = Vec::new();
    let mut rest = source.as_str();
    while let Some(at) = rest.find("</") {
        let tail = &rest[at..];
        let end = tail.find('>').filter(|&e| e > 2 && e <= 40);
        if let Some(end) = end {
            let tag = &tail[..=end];
            let name = &tag[2..tag.len() - 1];
            if name.chars().all(|c| c.is_alphanumeric() || c == '_' || c == ':' || c == '-')
                && !candidates.contains(&tag)
            {
                candidates.push(tag);
            }
        }
        rest = &rest[at + 2..];
    }
    let plain = json!({"role": "assistant", "content": CONTENT});
    let output = probe.output(&plain, false, &[])?;
    let history_plain = probe.render_as_history(&plain, false, &[]);
    candidates.into_iter().take(16).find_map(|closer| {
        let with = json!({"role": "assistant", "content": format!("{REASONING}{closer}{CONTENT}")});
        let last = probe.output(&with, false, &[]).is_some_and(|o| o.text.trim() == output.text.trim());
        let history = last || (history_plain.is_some() && probe.render_as_history(&with, false, &[]) == history_plain);
        // Or only turns before the last assistant turn are cut (LFM2.5: `loop.index0 !=
        // ns.last_assistant_index`).
        let later = |first: &Json| {
            let next =
                [json!({"role": "user", "content": probe::USER_2}), json!({"role": "assistant", "content": CONTENT_2})];
            probe.render(&[first.clone(), next[0].clone(), next[1].clone()], false, false, &[])
        };
        let history = history || later(&plain).is_some_and(|p| later(&with).is_some_and(|w| w == p));
        let opener = format!("<{}", &closer[2..]);
        history.then_some((opener, closer.to_owned()))
    })
}

/// String literals of the template's source that name a thinking switch (`'ENABLE_THINKING'`):
/// short, one line, holding `think`, and not saying off (`no`, `disable`); at most 8.
fn thinking_keywords(probe: &Probe) -> Vec<String> {
    let source: String = probe.template_sources().join("\n");
    let mut found: Vec<String> = Vec::new();
    for quote in ['\'', '"'] {
        let mut pieces = source.split(quote);
        pieces.next();
        // Every other piece is inside quotes (escapes aside: a wrong cut only costs a probe).
        while let (Some(inside), _) = (pieces.next(), pieces.next()) {
            let lower = inside.to_ascii_lowercase();
            let off = lower.contains("no") || lower.contains("disable") || lower.contains("off");
            let word = !inside.is_empty() && inside.len() <= 32 && !inside.contains(char::is_whitespace);
            if word && lower.contains("think") && !off && !found.iter().any(|f| f == inside) && found.len() < 8 {
                found.push(inside.to_owned());
            }
        }
    }
    found
}

/// The opener a generation prompt ends with when its name says thought (`<think>`, `<thinking>`,
/// `<reasoning>`), with its mirror as the end: the last guess, for templates that never show the
/// end (history written as given).
fn thought_opener(probe: &Probe) -> Option<(String, String)> {
    let prompt = probe.generation_prompt(false, &[])?;
    let opener = last_marker(&prompt)?;
    if !prompt.trim_end().ends_with(&opener) {
        return None;
    }
    let name = opener.strip_prefix('<')?.strip_suffix('>')?;
    let thought = ["think", "thinking", "thought", "thoughts", "reasoning", "reflection"];
    thought.contains(&name.to_ascii_lowercase().as_str()).then(|| (opener.clone(), format!("</{name}>")))
}

fn stripped_mirror_tag(probe: &Probe) -> Option<(String, String)> {
    let output = probe.output(&json!({"role": "assistant", "content": CONTENT}), false, &[])?;
    // The tag the prompt leaves open: in the part the turn does not repeat, or, when the turn
    // repeats the whole prompt (it writes the tag before the content it was given), the prompt's.
    let opener = last_marker(&output.unrepeated_prompt).or_else(|| last_marker(&output.generation_prompt))?;
    let name = opener.strip_prefix('<')?.strip_suffix('>')?;
    if name.is_empty() || name.starts_with('/') || !name.chars().all(|c| c.is_alphanumeric() || c == '_' || c == ':') {
        return None;
    }
    let closer = format!("</{name}>");
    let with = json!({"role": "assistant", "content": format!("{REASONING}{closer}{CONTENT}")});
    let stripped = probe.output(&with, false, &[])?;
    if stripped.text.trim() == output.text.trim() {
        return Some((opener, closer));
    }
    // Or the template strips it from the turns of the history only (the last turn is written as
    // given, NVIDIA-Nemotron-Nano-v2): the turn followed by a user message renders as without it.
    let plain = json!({"role": "assistant", "content": CONTENT});
    let history_with = probe.render_as_history(&with, false, &[])?;
    let history_plain = probe.render_as_history(&plain, false, &[])?;
    (history_with == history_plain).then_some((opener, closer))
}

/// The markers a generation prompt with thinking switched off ends with in place of the ones
/// `prompt` (thinking on) ends with, when they differ: `<|open|>response<|sep|>` where thinking on
/// ends `<|open|>think<|sep|>`. `None` when no switch changes the prompt or the difference is not
/// made of whole markers.
fn content_opener_with_thinking_off(probe: &Probe, prompt: &str) -> Option<String> {
    ["enable_thinking", "thinking"].into_iter().find_map(|var| {
        let off = probe.generation_prompt(false, &[(var, json!(false))])?;
        let mut shared = markers::common_prefix_angle(prompt, &off);
        // A word glued to the marker before it (`<|open|>` + `response`) goes with that marker.
        if !off[shared..].starts_with(['<', '[']) {
            shared = off[..shared].rfind(['<', '[']).unwrap_or(shared);
        }
        let rest = off[shared..].trim();
        let whole_markers = (rest.starts_with('<') || rest.starts_with('['))
            && (rest.ends_with('>') || rest.ends_with(']'))
            && !markers::bracketed_pieces(rest).is_empty();
        (whole_markers && !prompt.trim_end().ends_with(rest)).then(|| rest.to_owned())
    })
}

/// Generation prompts with thinking switched off and on, where they differ from `default`.
/// Templates whose default turns thinking off (`{%- if not enable_thinking %}</think>`) open
/// reasoning only when asked; the parser needs that prompt to know where output starts.
fn thinking_prompts(probe: &Probe, default: &str) -> (Option<String>, Option<String>) {
    let off = probe.generation_prompt(false, &[("enable_thinking", json!(false))]).filter(|p| p != default);
    let on = [("enable_thinking", json!(true)), ("thinking", json!(true))]
        .into_iter()
        .filter_map(|(name, value)| probe.generation_prompt(false, &[(name, value)]))
        .find(|p| p != default);
    (off, on)
}

/// Whether the reasoning of `message` (holding `REASONING`) still renders once a user message
/// follows it.
fn kept_in_history(probe: &Probe, message: &Json, extra: &[(&str, Json)]) -> bool {
    probe.render_as_history(message, true, extra).is_some_and(|t| t.contains(REASONING))
}

/// Records reasoning found without a rendered message's reasoning (R2, R3).
fn set_reasoning(
    probe: &Probe,
    format: &mut Format,
    mode: ReasoningMode,
    start: String,
    end: String,
    extra: &[(&str, Json)],
) {
    let message = json!({"role": "assistant", "reasoning_content": REASONING, "content": CONTENT});
    let kept_in_history = kept_in_history(probe, &message, extra);
    let (thinking_off, thinking_on) = thinking_prompts(probe, &format.generation_prompt);
    format.reasoning = Some(ReasoningMarkers { start, end: end.clone() });
    format.reasoning_details = Some(ReasoningDetails {
        mode,
        kept_in_history,
        end_literal: end,
        generation_prompt_thinking_off: thinking_off,
        generation_prompt_thinking_on: thinking_on,
        ..ReasoningDetails::default()
    });
}

/// Whether a call turn carrying `REASONING` under `key` renders it anywhere.
fn shows_beside_a_call(probe: &Probe, key: &str) -> bool {
    let call = probe::call(probe::ID_1, probe::FN_1, json!({probe::ARG_1: probe::VALUE_1}));
    let mut message = json!({"role": "assistant", "content": "", "tool_calls": [call]});
    message[key] = json!(REASONING);
    probe.render(&[message], true, false, &[]).is_some_and(|text| text.contains(REASONING))
}

/// R3: reasoning next to a tool call; markers are the text around it that a call alone lacks.
fn reasoning_with_calls(probe: &Probe, key: &str) -> Option<(String, String)> {
    let arguments = json!({probe::ARG_1: probe::VALUE_1});
    let calls = || vec![probe::call(probe::ID_1, probe::FN_1, arguments.clone())];
    let with = probe.output_with_calls_and(calls(), &[(key, json!(REASONING))], &[])?;
    // Checked before the second render: most keys tried never show the reasoning.
    let r = with.text.find(REASONING)?;
    let without = probe.output_with_calls(calls(), &[])?;
    let name = diff::find_from(&with.text, probe::FN_1, r)?;
    let plain_name = without.text.find(probe::FN_1)?;
    // Text before the reasoning and between it and the call, minus what a call alone has there.
    let lead = markers::common_prefix(&with.text[..r], &without.text[..plain_name]);
    let mut start = with.text[lead..r].trim().to_owned();
    if start.is_empty() {
        // A call alone writes an empty block too (`<|START_THINKING|><|END_THINKING|>`): the opener is
        // the marker right before the reasoning.
        start = last_marker(&with.text[..r]).unwrap_or_default();
    }
    let between = &with.text[r + REASONING.len()..name];
    let call_lead = markers::common_suffix(between, &without.text[..plain_name]);
    let end = between[..between.len() - call_lead].trim().to_owned();
    (!start.is_empty() && !end.is_empty()).then_some((start, end))
}

/// R3 on whole renders: the text a call turn gains when it carries reasoning, found by a marker-safe
/// prefix/suffix diff of the two whole conversations. For templates whose turn output cannot be cut
/// against the generation prompt (Command-R7B prints its trailing prompt even without
/// `add_generation_prompt`; Gemma 4 shows reasoning only in calls after the last user message).
fn reasoning_by_insertion(probe: &Probe, key: &str) -> Option<(String, String)> {
    let arguments = json!({probe::ARG_1: probe::VALUE_1});
    let call =
        json!({"role": "assistant", "content": "", "tool_calls": [probe::call(probe::ID_1, probe::FN_1, arguments)]});
    let mut with_reasoning = call.clone();
    with_reasoning[key] = json!(REASONING);
    let with = probe.render(&[with_reasoning], true, false, &[])?;
    let without = probe.render(&[call], true, false, &[])?;
    let lead = markers::common_prefix(&with, &without);
    let tail = markers::common_suffix(&with[lead..], &without[lead.min(without.len())..]);
    let inserted = &with[lead..with.len() - tail];
    let r = inserted.find(REASONING)?;
    let (mut start, mut end) = (inserted[..r].trim().to_owned(), inserted[r + REASONING.len()..].trim().to_owned());
    if start.is_empty() && end.is_empty() {
        // Reasoning filled an empty block the call turn always has (`<|START_THINKING|><|END_THINKING|>`):
        // the markers are those around the insertion, written next to each other without it.
        start = last_marker(&with[..lead]).unwrap_or_default();
        end = markers_in(&with[with.len() - tail..]).into_iter().next().unwrap_or_default();
        if !without.contains(&format!("{start}{end}")) {
            return None;
        }
    }
    (!start.is_empty() && !end.is_empty() && !inserted.contains(probe::FN_1)).then_some((start, end))
}

/// The markers (`<…>`, `[…]`) in a text, in order.
fn markers_in(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(open_at) = rest.find(['<', '[']) {
        let close = if rest[open_at..].starts_with('<') { '>' } else { ']' };
        let Some(len) = rest[open_at..].find(close) else { break };
        found.push(rest[open_at..open_at + len + 1].to_owned());
        rest = &rest[open_at + len + 1..];
    }
    found
}

/// The empty reasoning block a content-only turn starts with, if any (as rendered).
fn empty_reasoning_block(format: &Format) -> String {
    let Some(markers) = &format.reasoning else { return String::new() };
    let lead = &format.content.start;
    if lead.trim_start().starts_with(markers.end.as_str()) {
        // The prompt opened the block, or the template writes the end alone when there is no
        // reasoning (MiniMax-M3's `</mm:think>`): an empty block is just the end.
        let end_at = lead.find(markers.end.as_str()).unwrap_or(0) + markers.end.len();
        let trailing = lead[end_at..].len() - lead[end_at..].trim_start().len();
        return lead[..end_at + trailing].to_owned();
    }
    let Some(start_at) = lead.find(markers.start.as_str()) else { return String::new() };
    if !lead[..start_at].trim().is_empty() {
        return String::new();
    }
    let after_start = start_at + markers.start.len();
    let Some(end_at) = diff::find_from(lead, &markers.end, after_start) else { return String::new() };
    if !lead[after_start..end_at].trim().is_empty() {
        return String::new();
    }
    let block_end = end_at + markers.end.len();
    let trailing = lead[block_end..].len() - lead[block_end..].trim_start().len();
    lead[..block_end + trailing].to_owned()
}

/// The empty reasoning block (start, whitespace, end, and the whitespace after it) `text` starts
/// with, if any.
fn empty_block_at(text: &str, markers: &ReasoningMarkers) -> String {
    let Some(body) = text.trim_start().strip_prefix(markers.start.as_str()) else { return String::new() };
    let Some(rest) = body.trim_start().strip_prefix(markers.end.as_str()) else { return String::new() };
    let trailing = rest.len() - rest.trim_start().len();
    text[..text.len() - rest.len() + trailing].to_owned()
}

/// The marker a text ends with: its last `<…>` / `[…]` marker, extended back over a word glued to
/// it and the marker before that word (`<|open|>think<|sep|>`); a marker followed by a word
/// (`<|channel>thought`); or, for plain-text openers (`Here are my reasoning steps:`), the last line.
fn last_marker(text: &str) -> Option<String> {
    let t = text.trim_end();
    let line_start = t.rfind('\n').map_or(0, |i| i + 1);
    let line = &t[line_start..];
    if line.trim().is_empty() {
        return None;
    }
    let marker_start = |s: &str| -> Option<usize> {
        let close = s.chars().last()?;
        let open = match close {
            '>' => '<',
            ']' => '[',
            _ => return None,
        };
        s.rfind(open)
    };
    let word_start = |s: &str| s.trim_end_matches(|c: char| c.is_alphanumeric() || c == '_').len();
    let mut start = match marker_start(line) {
        Some(m) => {
            // `<|open|>think<|sep|>`: a glued word and the marker before it belong to the opener.
            let w = word_start(&line[..m]);
            if w < m { marker_start(&line[..w]).unwrap_or(m) } else { m }
        }
        None => {
            // `<|channel>thought`: a word glued after a marker.
            let w = word_start(line);
            match marker_start(&line[..w]) {
                Some(m) if w < line.len() => m,
                _ => return Some(line.trim().to_owned()),
            }
        }
    };
    while !line.is_char_boundary(start) {
        start -= 1;
    }
    Some(line[start..].trim().to_owned())
}

/// Every marker, trimmed, deduplicated, in order of discovery.
fn collect_preserved_tokens(format: &mut Format) {
    let mut tokens: Vec<String> = Vec::new();
    // A marker may join several tokens and text (`</arg_key>\n<arg_value>`, `[CALL_ID]`): keep its
    // bracketed pieces; a marker without any is kept whole unless it is a lone punctuation mark.
    let mut add = |marker: &str| {
        let marker = marker.trim();
        let pieces = markers::bracketed_pieces(marker);
        let pieces = if pieces.is_empty() { vec![marker] } else { pieces };
        for piece in pieces {
            let lone_punctuation = piece.chars().count() == 1 && !piece.chars().all(char::is_alphanumeric);
            if !piece.is_empty() && !lone_punctuation && !tokens.iter().any(|t| t == piece) {
                tokens.push(piece.to_owned());
            }
        }
    };
    if let Some(reasoning) = &format.reasoning {
        add(&reasoning.start);
        add(&reasoning.end);
    }
    add(&format.content.start);
    add(&format.content.end);
    if let Some(tools) = &format.tools {
        for marker in [
            &tools.section_start,
            &tools.section_end,
            &tools.call_start,
            &tools.call_end,
            &tools.name_prefix,
            &tools.name_suffix,
            &tools.arg_name_prefix,
            &tools.arg_name_suffix,
            &tools.arg_value_suffix,
            &tools.string_quote,
            &tools.call_id_suffix,
        ] {
            add(marker);
        }
        for marker in &tools.arg_name_suffixes_typed {
            add(marker);
        }
    }
    format.preserved_tokens = tokens;
    let said = format.unsupported.iter().any(|u| u.starts_with("tool calls:"));
    if format.tools.is_none() && format.tool_format == ToolFamily::None && !said {
        format.unsupported.push("tool calls: the template renders none of the probe calls".into());
    }
}
