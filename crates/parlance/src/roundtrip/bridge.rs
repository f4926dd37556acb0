//! [`Renderer`]: a template, its `Format` and a tokenizer rendering to attributed token ids, and the
//! bridge to the next turn that never re-tokenizes what the model generated.
//!
//! The bridge keeps the previous prompt and completion ids as they are, trimmed after the stop
//! token the model sampled (or closed with the template's turn close when the completion was cut
//! off), and appends the tokens of the new messages and the generation prompt. Those come from the
//! template itself: a stand-in conversation (an opening user message, the assistant message parsed
//! from the completion, the new messages) is rendered and the text after the assistant's turn close
//! is taken. That assumes the template writes new messages the same whatever came before the last
//! assistant turn (true of turn-by-turn templates; the sessions check it against full re-renders). The join is always right after a special token, which BPE never merges across; a
//! template whose turn close is not a single token has no bridge.

use indexmap::IndexMap;
use serde_json::{Value as Json, json};

use crate::analyze::diff::{bracketed_pieces, common_prefix_angle};
use crate::format::Format;
use crate::message::Conversation;
use crate::parse::{ParseOptions, Parser};
use crate::template::{ChatTemplate, RenderOptions};
use crate::tokenizer::Tokenizer;

use super::simulate::{Args, Sim, Turn, rebuild, render_date};
use super::tokens::{RenderedTokens, attribute, message_spans};
use super::{RoundtripError, RoundtripOptions};

/// Renders conversations to [`RenderedTokens`] and bridges turns, for one template and tokenizer.
pub struct Renderer<'a> {
    template: &'a ChatTemplate,
    format: &'a Format,
    tokenizer: &'a Tokenizer,
    variables: IndexMap<String, Json>,
    /// Messages that open a stand-in conversation.
    opening: Vec<Json>,
    /// The generation prompt (an assistant turn's header).
    header: String,
    /// Markers that end an assistant turn (the stop markers and the history close).
    closes: Vec<String>,
    /// Ids the model stops on.
    stop_ids: Vec<u32>,
    /// The close the template writes after an answer in history.
    history_close: u32,
}

impl std::fmt::Debug for Renderer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Renderer").field("closes", &self.closes).field("stop_ids", &self.stop_ids).finish()
    }
}

impl<'a> Renderer<'a> {
    /// A renderer for `template` (analyzed as `format`) and `tokenizer`, with template `variables`.
    /// Fails when the template makes a bridge impossible (no turn close, or one that is not a
    /// single token).
    pub fn new(
        template: &'a ChatTemplate,
        format: &'a Format,
        tokenizer: &'a Tokenizer,
        variables: IndexMap<String, Json>,
    ) -> Result<Renderer<'a>, RoundtripError> {
        let options = RoundtripOptions { variables: variables.clone(), ..RoundtripOptions::default() };
        let sim = Sim::new(template, format, Some(tokenizer), &options);
        let single_token = |marker: &str| {
            let id = tokenizer.token_to_id(marker)?;
            (tokenizer.encode_rendered(marker).ok()? == [id]).then_some(id)
        };
        // The stop markers: what ends a final answer and a tool-call turn when the model writes
        // them, and the tokenizer's EOS.
        let answer = json!({"role": "assistant", "content": "It is sunny."});
        let call = json!({"role": "assistant", "tool_calls": [{"id": "a1B2c3D4e", "type": "function",
            "function": {"name": "get_weather", "arguments": {"location": "Paris"}}}]});
        let mut stops: Vec<String> = Vec::new();
        for assistant in [answer.clone(), call] {
            let turn = Turn::new(sim.opening.clone(), assistant);
            if let Some(stop) = sim.turn(&turn).ok().and_then(|o| o.stop) {
                if !stops.contains(&stop) {
                    stops.push(stop);
                }
            }
        }
        let mut stop_ids: Vec<u32> = stops.iter().filter_map(|s| single_token(s)).collect();
        stop_ids.extend(tokenizer.eos_token_id());
        // The history close: the first stop-shaped single token after an answer followed by a user
        // message.
        let mut history = sim.opening.clone();
        history.push(answer);
        history.push(json!({"role": "user", "content": "Thanks."}));
        let rendered = sim.render(&history, true, false, &[]).map_err(|source| RoundtripError::Render {
            what: "an answer followed by a user message".to_owned(),
            source,
        })?;
        let after = rendered.find("It is sunny.").map(|at| at + "It is sunny.".len()).ok_or_else(|| {
            RoundtripError::NoBridge { reason: "an assistant answer does not appear in history".to_owned() }
        })?;
        let close =
            bracketed_pieces(&rendered[after..]).into_iter().find(|piece| sim.is_stop_marker(piece)).ok_or_else(
                || RoundtripError::NoBridge { reason: "no marker closes an assistant turn in history".to_owned() },
            )?;
        let history_close = single_token(close).ok_or_else(|| RoundtripError::NoBridge {
            reason: format!(
                "the turn close {close:?} is not a single token, so tokens after it could merge across the join"
            ),
        })?;
        if stop_ids.is_empty() {
            return Err(RoundtripError::NoBridge { reason: "the model's stop token could not be found".to_owned() });
        }
        let mut closes = stops;
        if !closes.iter().any(|c| c == close) {
            closes.push(close.to_owned());
        }
        let header = sim.generation_prompt(&sim.opening, &[]).unwrap_or_default();
        Ok(Renderer {
            template,
            format,
            tokenizer,
            variables: sim.variables.clone(),
            opening: sim.opening.clone(),
            header,
            closes,
            stop_ids,
            history_close,
        })
    }

    /// The ids the model stops on (trimming points of a completion).
    pub fn stop_token_ids(&self) -> &[u32] {
        &self.stop_ids
    }

    /// The turn close the template writes after an answer in history (the bridge appends the
    /// close the template writes after the cut-off turn's kind, this one for an answer).
    pub fn turn_close_id(&self) -> u32 {
        self.history_close
    }

    fn render_text(
        &self,
        messages: &[Json],
        tools: Option<&[Json]>,
        add_generation_prompt: bool,
    ) -> Result<String, RoundtripError> {
        let conversation =
            Conversation { messages: messages.to_vec(), tools: tools.map(<[Json]>::to_vec), documents: None };
        let options = RenderOptions {
            add_generation_prompt,
            variables: self.variables.clone(),
            now: render_date(),
            ..RenderOptions::default()
        };
        self.template.render(&conversation, &options).map_err(|source| RoundtripError::Render {
            what: format!("a conversation of {} messages", messages.len()),
            source,
        })
    }

    /// `messages` rendered and tokenized, each token attributed to its message.
    pub fn render(
        &self,
        messages: &[Json],
        tools: Option<&[Json]>,
        add_generation_prompt: bool,
    ) -> Result<RenderedTokens, RoundtripError> {
        let text = self.render_text(messages, tools, add_generation_prompt)?;
        let (ids, offsets) = self.tokenizer.encode_with_offsets(&text)?;
        let spans = message_spans(&text, messages, &self.header, &self.closes, 0);
        Ok(RenderedTokens { message_indices: attribute(&offsets, &spans, 0, 0), ids, message_count: messages.len() })
    }

    /// The next prompt's tokens without re-rendering the previous turn: `prev_prompt` and
    /// `prev_completion_ids` kept as they are (trimmed after the first stop token, or, when there is
    /// none, closed with the close the template writes after such a turn), then the tokens of `new_messages` and the
    /// generation prompt as the template writes them.
    pub fn bridge(
        &self,
        prev_prompt: &RenderedTokens,
        prev_completion_ids: &[u32],
        new_messages: &[Json],
        tools: Option<&[Json]>,
    ) -> Result<RenderedTokens, RoundtripError> {
        if let Some(index) = new_messages.iter().position(|m| m["role"] == "assistant") {
            return Err(RoundtripError::AssistantInNewMessages { index });
        }
        let assistant_index = prev_prompt.message_count as i32;
        let stop = prev_completion_ids.iter().position(|id| self.stop_ids.contains(id));
        let kept = stop.map_or(prev_completion_ids, |at| &prev_completion_ids[..=at]);
        let mut ids = prev_prompt.ids.clone();
        let mut message_indices = prev_prompt.message_indices.clone();
        ids.extend_from_slice(kept);
        message_indices.extend(std::iter::repeat_n(assistant_index, kept.len()));
        // The assistant message as the client would send it back, to render the new messages in
        // the context they expect (tool results after the calls they answer).
        let text = self.tokenizer.decode(stop.map_or(kept, |at| &kept[..at]))?;
        let parse_options = ParseOptions {
            tools: tools.map(<[Json]>::to_vec).unwrap_or_default(),
            generation_prompt: Some(self.header.clone()),
            ..ParseOptions::default()
        };
        let parsed = Parser::new(self.format, &parse_options).parse(&text);
        let assistant = rebuild(&parsed, Args::Object, None);
        let mut stand_in: Vec<Json> = self.opening.clone();
        stand_in.push(assistant);
        stand_in.extend(new_messages.iter().cloned());
        let rendered = match self.render_text(&stand_in, tools, true) {
            Err(_) if stand_in[self.opening.len()]["content"].is_null() => {
                stand_in[self.opening.len()]["content"] = json!("");
                self.render_text(&stand_in, tools, true)?
            }
            other => other?,
        };
        let opening = self.render_text(&self.opening, tools, false)?;
        let turn_start = common_prefix_angle(&opening, &rendered);
        let spans = message_spans(&rendered, &stand_in[self.opening.len()..], &self.header, &self.closes, turn_start);
        let Some((_, close_end)) = spans[0] else {
            return Err(RoundtripError::NoBridge {
                reason: "the assistant turn was not found in the stand-in render".to_owned(),
            });
        };
        let Some(close) = self.closes.iter().find(|c| rendered[..close_end].ends_with(c.as_str())) else {
            return Err(RoundtripError::NoBridge {
                reason: "the template writes no turn close after this assistant message".to_owned(),
            });
        };
        if stop.is_none() {
            // Cut off before its stop: closed as the template closes this kind of turn in history
            // (gpt-oss: `<|call|>` after a call, `<|end|>` otherwise).
            let Some(id) = self.tokenizer.token_to_id(close) else {
                return Err(RoundtripError::NoBridge {
                    reason: format!("the turn close {close:?} the template writes here is not a single token"),
                });
            };
            ids.push(id);
            message_indices.push(-1);
        }
        let suffix = &rendered[close_end..];
        let (suffix_ids, offsets) = self.tokenizer.encode_with_offsets(suffix)?;
        let new_spans: Vec<_> = spans[1..].iter().map(|s| s.filter(|(a, _)| *a >= close_end)).collect();
        message_indices.extend(attribute(&offsets, &new_spans, assistant_index + 1, close_end));
        ids.extend(suffix_ids);
        Ok(RenderedTokens { ids, message_indices, message_count: prev_prompt.message_count + 1 + new_messages.len() })
    }
}
