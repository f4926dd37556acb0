//! What is fixed for one (format, request), derived once and shared by every output parsed with it.

use std::collections::HashMap;

use serde_json::Value as Json;

use super::TurnEnded;
use super::content::{ContentMarker, content_markers};
use crate::format::{Format, ReasoningMode};
use crate::parse::channel::ChannelSyntax;
use crate::parse::scan::hold_window;
use crate::parse::syntax::{Syntax, ToolSyntax};
use crate::parse::{ParseOptions, ToolChoice};

/// Everything fixed for one (format, request).
#[derive(Debug)]
pub(crate) struct Setup {
    pub(super) syntax: Syntax,
    /// Tool name → parameter schemas (`properties`), when the request gave tools.
    pub(super) schemas: HashMap<String, Option<Json>>,
    pub(super) has_tools: bool,
    pub(super) calls_enabled: bool,
    pub(super) choice: ToolChoice,
    pub(super) parallel: bool,
    pub(super) in_reasoning: bool,
    pub(super) separate_reasoning: bool,
    /// The generation prompt trimmed, when a turn may repeat it as a message header after reasoning.
    /// Empty when the format has an output prefix: every block's markers then begin with the
    /// header themselves (muse-glimmer's `<|start|>assistant to=user<|message|>`).
    pub(super) header: String,
    /// Channel formats (gpt-oss) are read message by message.
    pub(super) channel: Option<ChannelSyntax>,
    /// The reasoning opener as the prompt wrote it (with its whitespace and any reasoning text the
    /// prompt wrote after it), when the prompt opened reasoning: put back in front of unseparated
    /// reasoning.
    pub(super) opener: String,
    /// Reasoning text the prompt itself wrote after the opener (Apriel's `Here are my reasoning
    /// steps:\n`): the start of the reasoning, since the template renders the message's reasoning
    /// in its place. Empty when the opener ends the prompt.
    pub(super) prompt_reasoning: String,
    /// `Format::output_prefix` when this request's prompt ends with it: read before the output as
    /// its first bytes, though they are not the output's (spans and offsets leave them out).
    pub(super) output_prefix: String,
    /// The caller's seed of generated call ids; `None`: a fresh one for each output.
    pub(super) id_seed: Option<u64>,
    /// Calls the output ends inside are left out (`TruncatedCalls::Drop`).
    pub(super) drop_truncated: bool,
    /// The markers content looks for, with what each is, for each state content may be in:
    /// before the turn end without calls, the same with calls, after a section end that ended the
    /// turn, after the turn end.
    pub(super) content_markers: [Vec<(String, ContentMarker)>; 4],
    /// For each of those sets, the longest window a match of one of its markers may span
    /// (`hold_window`), computed once: content asks at every marker it meets.
    pub(super) content_reach: [usize; 4],
}

impl Setup {
    pub(crate) fn new(format: &Format, options: &ParseOptions) -> Setup {
        let mut syntax = Syntax::from_format(format);
        for marker in &options.stop_markers {
            let marker = marker.trim();
            if !marker.is_empty() && !syntax.turn_end.iter().any(|m| m == marker) {
                syntax.turn_end.push(marker.to_owned());
            }
        }
        let mut schemas = HashMap::new();
        for tool in &options.tools {
            let function = tool.get("function").unwrap_or(tool);
            if let Some(name) = function.get("name").and_then(Json::as_str) {
                let properties = function.get("parameters").and_then(|p| p.get("properties")).cloned();
                schemas.insert(name.to_owned(), properties);
            }
        }
        // Reasoning is open when the prompt's last start marker is not closed after it: the prompt
        // ends with the marker, or with plain text the template writes inside the block (Apriel's
        // `<|begin_assistant|>\nHere are my reasoning steps:\n`), which is then reasoning.
        let prompt = options.generation_prompt.as_deref().unwrap_or(&format.generation_prompt);
        // (opener as the prompt wrote it, the reasoning text after it)
        let open_block = syntax.reasoning.as_ref().filter(|r| !r.start.is_empty()).and_then(|r| {
            let at = prompt.rfind(r.start.as_str())?;
            let inside = &prompt[at + r.start.len()..];
            let plain = !inside.contains(['<', '[']) && (r.end.is_empty() || !inside.contains(r.end.as_str()));
            plain.then(|| (prompt[at..].to_owned(), inside.trim_start().to_owned()))
        });
        let (opener, prompt_reasoning) = match open_block {
            Some((opener, text)) => (Some(opener), text),
            None => (None, String::new()),
        };
        // Reasoning that may start without its opener (`implicit`): open unless the prompt closed
        // a block (a thinking-off prompt's `<think>\n\n</think>`).
        let implicit = format.reasoning_details.as_ref().is_some_and(|d| d.mode == ReasoningMode::Implicit)
            && !syntax.reasoning.as_ref().is_some_and(|r| crate::parse::prompt_closes_block(prompt, &r.start, &r.end));
        let in_reasoning = options.in_reasoning.unwrap_or(opener.is_some() || implicit);
        let opener = if implicit && opener.is_none() {
            // Nothing the prompt held goes back in front of unseparated reasoning.
            String::new()
        } else if in_reasoning {
            opener.or_else(|| syntax.reasoning.as_ref().map(|r| r.start.clone())).unwrap_or_default()
        } else {
            String::new()
        };
        let calls_enabled = options.tool_choice != ToolChoice::None && syntax.tools.is_some();
        let separate_reasoning = options.separate_reasoning.unwrap_or(true);
        let content_markers =
            [(TurnEnded::No, false), (TurnEnded::No, true), (TurnEnded::BySectionEnd, true), (TurnEnded::Yes, true)]
                .map(|(ended, has_calls)| {
                    content_markers(&syntax, calls_enabled, separate_reasoning, ended, has_calls)
                });
        let content_reach =
            content_markers.each_ref().map(|set| set.iter().map(|(m, _)| hold_window(m)).max().unwrap_or(0));
        Setup {
            has_tools: !options.tools.is_empty(),
            calls_enabled,
            choice: options.tool_choice.clone(),
            parallel: options.parallel_tool_calls.unwrap_or(true),
            syntax,
            schemas,
            in_reasoning,
            separate_reasoning,
            header: match format.output_prefix.is_empty() {
                true => format.generation_prompt.trim().to_owned(),
                false => String::new(),
            },
            channel: ChannelSyntax::from_format(format),
            opener,
            prompt_reasoning: if in_reasoning { prompt_reasoning } else { String::new() },
            output_prefix: if !format.output_prefix.is_empty() && prompt.ends_with(&format.output_prefix) {
                format.output_prefix.clone()
            } else {
                String::new()
            },
            id_seed: options.id_seed,
            drop_truncated: options.truncated_calls == super::super::TruncatedCalls::Drop,
            content_markers,
            content_reach,
        }
    }

    /// Whether the output starts inside reasoning (the prompt left it open).
    pub(crate) fn starts_in_reasoning(&self) -> bool {
        self.in_reasoning
    }

    pub(super) fn tools(&self) -> &ToolSyntax {
        self.syntax.tools.as_ref().expect("only reached with tool syntax")
    }
}
