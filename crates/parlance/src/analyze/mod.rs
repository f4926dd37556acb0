//! Template analysis: find a chat template's reasoning, content and tool-call syntax by rendering
//! controlled variations of a conversation and comparing the outputs.
//!
//! The method is llama.cpp's differential analysis (seeds 000/001), reorganized around one primitive,
//! the assistant *output* of `probe`: for each probe message (content only; reasoning + content;
//! one call; two calls; ...) the exact text the model would write. Markers are the text around the
//! sentinels; the only heuristic is "does this parse as JSON". Templates that raise on a probe lose
//! that feature (reported in `Format::unsupported`), never the analysis.

mod diff;
mod probe;
mod tools;

use indexmap::IndexMap;
use serde_json::{Value as Json, json};

use crate::format::{Format, ReasoningDetails, ReasoningMarkers, ToolFamily};
use crate::template::ChatTemplate;
use diff::common_suffix;
use probe::{CONTENT, CONTENT_2, Output, Probe, REASONING, USER_2};

/// Why a template could not be analyzed at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AnalyzeError {
    /// Not even a user message followed by an assistant message renders.
    #[error("{template}: the template renders no user + assistant conversation, so it cannot be analyzed")]
    NoConversation {
        /// The template's label.
        template: String,
    },
}

/// Options of the analysis.
#[derive(Debug, Clone, Default)]
pub struct AnalyzeOptions {
    /// Template variables set on every probe render (e.g. a `bos_token` the template needs).
    pub variables: IndexMap<String, Json>,
}

impl Format {
    /// Analyzes `template` with default options.
    pub fn from_template(template: &ChatTemplate) -> Result<Format, AnalyzeError> {
        analyze(template, &AnalyzeOptions::default())
    }
}

/// Analyzes `template`: every marker from diffs of probe renders.
pub fn analyze(template: &ChatTemplate, options: &AnalyzeOptions) -> Result<Format, AnalyzeError> {
    let probe = Probe::new(template, options.variables.clone())
        .ok_or_else(|| AnalyzeError::NoConversation { template: template.label().to_owned() })?;
    let mut format = Format { template: template.label().to_owned(), ..Format::default() };
    format.generation_prompt = probe.generation_prompt(false, &[]).unwrap_or_default();

    let content_only = probe.output(&json!({"role": "assistant", "content": CONTENT}), false, &[]);
    let content_only_2 = probe.output(&json!({"role": "assistant", "content": CONTENT_2}), false, &[]);
    let (Some(content_only), Some(content_only_2)) = (content_only, content_only_2) else {
        return Err(AnalyzeError::NoConversation { template: template.label().to_owned() });
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
    analyze_reasoning(&probe, &mut format);
    // A template may write an empty reasoning block in every turn (`<think>\n\n</think>\n\n`):
    // it precedes the content and the calls, and belongs to neither.
    let empty_block = empty_reasoning_block(&format);
    if let Some(details) = format.reasoning_details.as_mut() {
        details.empty_block.clone_from(&empty_block);
    }
    if let Some(rest) = format.content.start.strip_prefix(empty_block.as_str()) {
        format.content.start = rest.to_owned();
    }
    // Sets the turn end too: what every kind of turn ends with (a content wrapper is not part of it).
    tools::analyze(&probe, &mut format, &shared_tail, &empty_block);
    format.content.end = shared_tail[..shared_tail.len() - format.turn_end.len()].to_owned();
    collect_preserved_tokens(&mut format);
    Ok(format)
}

/// Reasoning: R1 (with vs without reasoning), R2 (thinking switched on / off), history.
fn analyze_reasoning(probe: &Probe<'_>, format: &mut Format) {
    let message = json!({"role": "assistant", "reasoning_content": REASONING, "content": CONTENT});
    let attempts: [&[(&str, Json)]; 3] = [&[], &[("enable_thinking", json!(true))], &[("thinking", json!(true))]];
    for extra in attempts {
        let Some(output) = probe.output(&message, false, extra) else { continue };
        let Some(r) = output.text.find(REASONING) else { continue };
        let Some(c) = diff::find_from(&output.text, CONTENT, r) else { continue };
        let start_literal = output.text[..r].to_owned();
        let mut end_literal = output.text[r + REASONING.len()..c].to_owned();
        // A content wrapper opened right after the reasoning belongs to the content.
        let content_start = format.content.start.trim();
        if !content_start.is_empty() && end_literal.trim_end().ends_with(content_start) {
            let cut = end_literal.trim_end().len() - content_start.len();
            end_literal.truncate(cut);
        }
        let (mode, start) = if !start_literal.trim().is_empty() {
            ("tag", start_literal.trim().to_owned())
        } else {
            // Prefer what the prompt opened that the turn does not repeat (`<think>\n`).
            let opened = last_marker(&output.unrepeated_prompt).or_else(|| last_marker(&output.generation_prompt));
            match opened {
                Some(marker) => ("forced-open", marker),
                None => ("delimiter", String::new()),
            }
        };
        let end = end_literal.trim().to_owned();
        if end.is_empty() {
            format.unsupported.push("reasoning: rendered without an end marker".into());
            return;
        }
        let history = [
            json!({"role": "assistant", "reasoning_content": REASONING, "content": CONTENT}),
            json!({"role": "user", "content": USER_2}),
        ];
        let kept_in_history = probe.render(&history, false, true, extra).is_some_and(|t| t.contains(REASONING));
        let off = probe.generation_prompt(false, &[("enable_thinking", json!(false))]);
        let thinking_off = off.filter(|p| *p != format.generation_prompt);
        format.reasoning = Some(ReasoningMarkers { start: start.clone(), end });
        format.reasoning_details = Some(ReasoningDetails {
            mode: mode.to_owned(),
            start_literal: if mode == "tag" { start_literal } else { String::new() },
            end_literal,
            kept_in_history,
            generation_prompt_thinking_off: thinking_off,
            empty_block: String::new(),
        });
        return;
    }
    // Reasoning not rendered in a turn; a generation prompt that differs with thinking off may still
    // show the markers (an empty reasoning block written for the model).
    if let Some(off) = probe.generation_prompt(false, &[("enable_thinking", json!(false))]) {
        if off != format.generation_prompt {
            format.unsupported.push(format!(
                "reasoning: the template never renders a message's reasoning; with thinking off the generation prompt is {off:?}"
            ));
        }
    }
}

/// The empty reasoning block a content-only turn starts with, if any (as rendered).
fn empty_reasoning_block(format: &Format) -> String {
    let Some(markers) = &format.reasoning else { return String::new() };
    let lead = &format.content.start;
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

/// The marker a text ends with (`<think>`, `[THINK]`, `<|channel|>analysis<|message|>` ends in
/// `<|message|>`), or its last line when it ends in plain text.
fn last_marker(text: &str) -> Option<String> {
    let trimmed = text.trim_end();
    let (open, close) = match trimmed.chars().last()? {
        '>' => ('<', '>'),
        ']' => ('[', ']'),
        _ => {
            let line = trimmed.rsplit('\n').next()?.trim();
            return (!line.is_empty()).then(|| line.to_owned());
        }
    };
    let _ = close;
    let at = trimmed.rfind(open)?;
    Some(trimmed[at..].to_owned())
}

/// Every marker, trimmed, deduplicated, in order of discovery.
fn collect_preserved_tokens(format: &mut Format) {
    let mut tokens: Vec<String> = Vec::new();
    let mut add = |marker: &str| {
        let marker = marker.trim();
        if !marker.is_empty() && !tokens.iter().any(|t| t == marker) {
            tokens.push(marker.to_owned());
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
        ] {
            add(marker);
        }
    }
    format.preserved_tokens = tokens;
    if format.tools.is_none() && format.tool_format == ToolFamily::None {
        format.unsupported.push("tool calls: the template renders none of the probe calls".into());
    }
}
