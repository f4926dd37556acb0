//! The turn API a server or an RL trainer holds: [`Renderer`] — a chat template, its `Format` and a
//! tokenizer, owned and shared — renders conversations to token ids attributed to their messages,
//! with the caller's options, and bridges a model's completion to the next prompt without
//! re-tokenizing what the model generated. With [`Renderer::to_assistant_message`] between them (the
//! parsed completion as the message a client sends back, reasoning also under the template's own
//! key where it reads one), the loop of a serving or training stack is:
//!
//! render → generate → parse → `to_assistant_message` (+ tool results) → `bridge` → generate → …
//!
//! - `tokens.rs` — [`RenderedTokens`]: ids with the message each token came from, and the loss mask.
//! - `stops.rs` — which markers a model stops on, and where in a rendered turn it does.
//!
//! The bridge keeps the previous prompt and completion ids as they are, trimmed after the stop
//! token the model sampled (or closed with the template's turn close when the completion was cut
//! off), and appends the tokens of the new messages and the generation prompt. Those come from the
//! template itself: a stand-in conversation (an opening user message, the assistant message parsed
//! from the completion, the new messages) is rendered and the text after the assistant's turn close
//! is taken. That assumes the template writes new messages the same whatever came before the last
//! assistant turn (true of turn-by-turn templates; the roundtrip sessions check it against full
//! re-renders). The join is always right after a special token, which BPE never merges across; a
//! template whose turn close is not a single token has no bridge.

mod stops;
mod tokens;

use std::sync::Arc;

use serde_json::{Value as Json, json};

use crate::analyze::probe::split_output;
use crate::format::{Format, Workaround};
use crate::markers::{bracketed_pieces, common_prefix_angle};
use crate::message::Conversation;
use crate::message::{null_content_beside_calls, wire_message};
use crate::parse::{ArgumentsAs, ParseOptions, ParsedMessage, Parser};
use crate::template::{ChatTemplate, RenderOptions, TemplateError};
use crate::tokenizer::{Tokenizer, TokenizerError};

pub(crate) use stops::{is_stop_marker, stop_in};
pub use tokens::RenderedTokens;
pub(crate) use tokens::{attribute, message_spans};

/// Why a render or a bridge could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TurnError {
    /// The template raised (or exceeded a limit) on a conversation.
    #[error("rendering {what}: {source}")]
    Render {
        /// Which conversation.
        what: String,
        /// The template's error.
        source: TemplateError,
    },
    /// The tokenizer failed.
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
    /// `new_messages` holds an assistant message: its tokens were sampled by the model and must
    /// come from `prev_completion_ids`, never from a re-render.
    #[error("new_messages[{index}] is an assistant message; the bridge appends only messages the model did not write")]
    AssistantInNewMessages {
        /// Its position in `new_messages`.
        index: usize,
    },
    /// The template makes a bridge impossible.
    #[error("no bridge for this template: {reason}")]
    NoBridge {
        /// Why.
        reason: String,
    },
}

/// Renders conversations to [`RenderedTokens`] and bridges turns, for one template, its `Format`
/// and a tokenizer. Cheap to clone (the template, Format and tokenizer are shared), `Send + Sync`:
/// build one per model and hold it.
#[derive(Clone)]
pub struct Renderer {
    template: ChatTemplate,
    format: Arc<Format>,
    tokenizer: Arc<Tokenizer>,
    /// The caller's options, used as given by [`Renderer::render`].
    options: RenderOptions,
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

impl std::fmt::Debug for Renderer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Renderer")
            .field("template", &self.template.label())
            .field("closes", &self.closes)
            .field("stop_ids", &self.stop_ids)
            .finish()
    }
}

/// The tool the renderer's own probe calls.
fn probe_tool() -> Json {
    json!({"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city.",
        "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}}})
}

impl Renderer {
    /// A renderer for `template` (analyzed as `format`) and `tokenizer`, rendering with `options`
    /// (its variables, date, template choice; `add_generation_prompt` applies to
    /// [`Renderer::render`], the bridge always ends with the generation prompt). The stop ids and
    /// the turn close are learned from a few renders of the template with these options. Fails
    /// when the template makes a bridge impossible (no turn close, or one that is not a single
    /// token).
    pub fn new(
        template: ChatTemplate,
        format: Arc<Format>,
        tokenizer: Arc<Tokenizer>,
        options: RenderOptions,
    ) -> Result<Renderer, TurnError> {
        let mut renderer = Renderer {
            template,
            format,
            tokenizer,
            options,
            opening: Vec::new(),
            header: String::new(),
            closes: Vec::new(),
            stop_ids: Vec::new(),
            history_close: 0,
        };
        let tools = [probe_tool()];
        let user = json!({"role": "user", "content": "What's the weather in Paris?"});
        let openings =
            [vec![user.clone()], vec![json!({"role": "system", "content": "You are a helpful assistant."}), user]];
        renderer.opening = openings
            .iter()
            .find(|o| renderer.render_text(o, Some(&tools), true).is_ok())
            .unwrap_or(&openings[0])
            .clone();
        let (template, format, tokenizer) = (&renderer.template, &*renderer.format, &*renderer.tokenizer);
        let single_token = |marker: &str| {
            let id = tokenizer.token_to_id(marker)?;
            (tokenizer.encode_rendered(marker).ok()? == [id]).then_some(id)
        };
        let closed = renderer.render_text(&renderer.opening, Some(&tools), false)?;
        let prompt = renderer.render_text(&renderer.opening, Some(&tools), true)?;
        // The stop markers: what ends a final answer and a tool-call turn when the model writes
        // them, and the tokenizer's EOS.
        let answer = json!({"role": "assistant", "content": "It is sunny."});
        let call = json!({"role": "assistant", "tool_calls": [{"id": "a1B2c3D4e", "type": "function",
            "function": {"name": "get_weather", "arguments": {"location": "Paris"}}}]});
        let mut stops: Vec<String> = Vec::new();
        for (assistant, part) in [(&answer, "It is sunny."), (&call, "get_weather")] {
            if assistant.get("tool_calls").is_some() && format.tools.is_none() {
                continue;
            }
            let mut with_turn = renderer.opening.clone();
            with_turn.push(wire_message(format, assistant));
            let full = renderer.render_text(&with_turn, Some(&tools), false).or_else(|error| {
                // Templates differ on an absent `content` next to calls; try it empty.
                let last = with_turn.last_mut().expect("the turn was pushed");
                if last.get("content").is_none() {
                    last["content"] = json!("");
                    renderer.render_text(&with_turn, Some(&tools), false)
                } else {
                    Err(error)
                }
            });
            let Ok(full) = full else { continue };
            let output = split_output(&closed, &prompt, &full);
            let after = output.text.find(part).map_or(0, |at| at + part.len());
            if let Some((start, end)) = stop_in(template, format, &output.text, after) {
                let stop = output.text[start..end].to_owned();
                if !stops.contains(&stop) {
                    stops.push(stop);
                }
            }
        }
        let mut stop_ids: Vec<u32> = stops.iter().filter_map(|s| single_token(s)).collect();
        stop_ids.extend(tokenizer.eos_token_id());
        // The history close: the first stop-shaped single token after an answer followed by a user
        // message.
        let mut history = renderer.opening.clone();
        history.push(answer);
        history.push(json!({"role": "user", "content": "Thanks."}));
        let rendered = renderer.render_text(&history, Some(&tools), false)?;
        let after = rendered.find("It is sunny.").map(|at| at + "It is sunny.".len()).ok_or_else(|| {
            TurnError::NoBridge { reason: "an assistant answer does not appear in history".to_owned() }
        })?;
        let close = bracketed_pieces(&rendered[after..])
            .into_iter()
            .find(|piece| is_stop_marker(template, format, piece))
            .ok_or_else(|| TurnError::NoBridge {
                reason: "no marker closes an assistant turn in history".to_owned(),
            })?;
        let history_close = single_token(close).ok_or_else(|| TurnError::NoBridge {
            reason: format!(
                "the turn close {close:?} is not a single token, so tokens after it could merge across the join"
            ),
        })?;
        if stop_ids.is_empty() {
            return Err(TurnError::NoBridge { reason: "the model's stop token could not be found".to_owned() });
        }
        let mut closes = stops;
        if !closes.iter().any(|c| c == close) {
            closes.push(close.to_owned());
        }
        renderer.header = split_output(&closed, &prompt, &prompt).generation_prompt;
        renderer.closes = closes;
        renderer.stop_ids = stop_ids;
        renderer.history_close = history_close;
        Ok(renderer)
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

    /// The options every render uses.
    pub fn options(&self) -> &RenderOptions {
        &self.options
    }

    /// The same renderer with `add_generation_prompt` set for [`Renderer::render`] (nothing it
    /// learned depends on it).
    pub fn with_generation_prompt(&self, add_generation_prompt: bool) -> Renderer {
        let mut renderer = self.clone();
        renderer.options.add_generation_prompt = add_generation_prompt;
        renderer
    }

    /// The template's `Format`.
    pub fn format(&self) -> &Format {
        &self.format
    }

    /// `messages` rendered with the renderer's options, and `add_generation_prompt` as given; calls
    /// rendered beside `content: null` only where the Format says the template needs it.
    fn render_text(
        &self,
        messages: &[Json],
        tools: Option<&[Json]>,
        add_generation_prompt: bool,
    ) -> Result<String, TurnError> {
        let mut messages = messages.to_vec();
        let keep_null_keys =
            self.options.keep_null_keys || self.format.has_workaround(Workaround::CallsWithNullContent);
        if keep_null_keys && !self.options.keep_null_keys {
            null_content_beside_calls(&mut messages);
        }
        let what = format!("a conversation of {} messages", messages.len());
        let conversation = Conversation { messages, tools: tools.map(<[Json]>::to_vec), documents: None };
        let options = RenderOptions { add_generation_prompt, keep_null_keys, ..self.options.clone() };
        self.template.render(&conversation, &options).map_err(|source| TurnError::Render { what, source })
    }

    /// `conversation` rendered with the renderer's options and tokenized, each token attributed to
    /// its message: the ids equal `tokenizer.encode_rendered(template.render(conversation, options))`.
    pub fn render(&self, conversation: &Conversation) -> Result<RenderedTokens, TurnError> {
        let text = self.template.render(conversation, &self.options).map_err(|source| TurnError::Render {
            what: format!("a conversation of {} messages", conversation.messages.len()),
            source,
        })?;
        let (ids, offsets) = self.tokenizer.encode_with_offsets(&text)?;
        let messages = &conversation.messages;
        let spans = message_spans(&text, messages, &self.header, &self.closes, 0);
        Ok(RenderedTokens { message_indices: attribute(&offsets, &spans, 0, 0), ids, message_count: messages.len() })
    }

    /// The next prompt's tokens without re-rendering the previous turn: `prev_prompt` and
    /// The assistant message a client sends back for `parsed`, to render in the next request:
    /// [`ParsedMessage::to_assistant_message`], and, where the template reads past reasoning from a
    /// key of its own ([`crate::format::ReasoningDetails::field`]: MiniCPM3's `thought`, Command A's
    /// `tool_plan`), the reasoning under that key too, so that the next render writes it back where
    /// the model wrote it (`reasoning_content` alone would be dropped from the history).
    pub fn to_assistant_message(&self, parsed: &ParsedMessage, arguments: ArgumentsAs) -> Json {
        let mut message = parsed.to_assistant_message(arguments);
        let field = self.format.reasoning_details.as_ref().and_then(|d| d.field.as_deref());
        if let (Some(field), Some(reasoning)) = (field, &parsed.reasoning_content) {
            message[field] = Json::from(reasoning.as_str());
        }
        message
    }

    /// `prev_completion_ids` kept as they are (trimmed after the first stop token, or, when there is
    /// none, closed with the close the template writes after such a turn), then the tokens of
    /// `new_messages` (tool results, a user message: never an assistant message) and the
    /// generation prompt as the template writes them.
    pub fn bridge(
        &self,
        prev_prompt: &RenderedTokens,
        prev_completion_ids: &[u32],
        new_messages: &[Json],
        tools: Option<&[Json]>,
    ) -> Result<RenderedTokens, TurnError> {
        if let Some(index) = new_messages.iter().position(|m| m["role"] == "assistant") {
            return Err(TurnError::AssistantInNewMessages { index });
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
        let parsed = Parser::new(&self.format, &parse_options).parse(&text);
        let mut stand_in: Vec<Json> = self.opening.clone();
        stand_in.push(self.to_assistant_message(&parsed, ArgumentsAs::Object));
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
            return Err(TurnError::NoBridge {
                reason: "the assistant turn was not found in the stand-in render".to_owned(),
            });
        };
        let Some(close) = self.closes.iter().find(|c| rendered[..close_end].ends_with(c.as_str())) else {
            return Err(TurnError::NoBridge {
                reason: "the template writes no turn close after this assistant message".to_owned(),
            });
        };
        if stop.is_none() {
            // Cut off before its stop: closed as the template closes this kind of turn in history
            // (gpt-oss: `<|call|>` after a call, `<|end|>` otherwise).
            let Some(id) = self.tokenizer.token_to_id(close) else {
                return Err(TurnError::NoBridge {
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
