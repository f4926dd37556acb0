//! [`RenderedTokens`]: token ids with the message each token came from, and the loss mask of the
//! tokens a model generated.
//!
//! A message's bytes in a render are found from the message itself, walking the text in order: a
//! user, system or tool message is its content; an assistant message is everything from the end of
//! its header (the generation prompt) to the turn close after the last of its parts (reasoning,
//! content, call names). Every other byte is the template's (`-1`). A token belongs to the first
//! message owning one of its bytes.

use serde::Serialize;
use serde_json::Value as Json;

use crate::analyze::diff::find_from;

/// Token ids of a render, each with the index of the message it came from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RenderedTokens {
    /// The token ids.
    pub ids: Vec<u32>,
    /// For each id, the index of its message in the conversation, or `-1` for text the template
    /// adds (headers, separators, the generation prompt).
    pub message_indices: Vec<i32>,
    /// Number of messages the ids cover.
    pub message_count: usize,
}

impl RenderedTokens {
    /// Ids with no attribution (every index `-1`), covering `message_count` messages: for callers
    /// that kept only the ids of a prompt.
    pub fn unattributed(ids: Vec<u32>, message_count: usize) -> RenderedTokens {
        let message_indices = vec![-1; ids.len()];
        RenderedTokens { ids, message_indices, message_count }
    }

    /// The loss mask of a training sample: `true` for the tokens of assistant messages (what the
    /// model generated), `false` for everything the template or other roles added. `messages` are
    /// the conversation's messages.
    pub fn assistant_mask(&self, messages: &[Json]) -> Vec<bool> {
        self.message_indices
            .iter()
            .map(|&i| usize::try_from(i).ok().and_then(|i| messages.get(i)).is_some_and(|m| m["role"] == "assistant"))
            .collect()
    }
}

/// Trimmed text of a message's content: a string, or the text parts of a list.
fn content_texts(message: &Json) -> Vec<&str> {
    match &message["content"] {
        Json::String(text) => vec![text.trim()],
        Json::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).map(str::trim).collect(),
        _ => Vec::new(),
    }
    .into_iter()
    .filter(|t| !t.is_empty())
    .collect()
}

/// Where `needle` is at or after `from`, as a range.
fn locate(text: &str, needle: &str, from: usize) -> Option<(usize, usize)> {
    find_from(text, needle, from).map(|at| (at, at + needle.len()))
}

/// The byte span of each message of `messages` in `text` (their render), from byte `from` on.
/// `header` is the generation prompt (an assistant turn's header); `closes` are the markers that
/// can end an assistant turn.
pub(crate) fn message_spans(
    text: &str,
    messages: &[Json],
    header: &str,
    closes: &[String],
    from: usize,
) -> Vec<Option<(usize, usize)>> {
    // History may write less of the header than the generation prompt (`<think>\n` left out with
    // the reasoning): the longest prefix of it, cut after a newline or a marker, that is there.
    let trimmed = header.trim();
    let mut headers: Vec<&str> = vec![header, trimmed];
    headers.extend(
        trimmed
            .char_indices()
            .rev()
            .filter(|(_, c)| *c == '\n' || *c == '>')
            .map(|(i, c)| trimmed[..i + c.len_utf8()].trim_end()),
    );
    headers.retain(|h| !h.is_empty());
    let mut cursor = from;
    let mut spans = Vec::with_capacity(messages.len());
    for (i, message) in messages.iter().enumerate() {
        if message["role"] == "assistant" {
            // The next message's content bounds this turn (pieces of it that history drops may
            // occur later in the text).
            let limit = messages
                .get(i + 1)
                .filter(|m| m["role"] != "assistant")
                .and_then(|m| content_texts(m).first().and_then(|t| locate(text, t, cursor)))
                .map_or(text.len(), |(at, _)| at);
            let window = &text[..limit];
            let start = headers.iter().find_map(|h| locate(window, h, cursor)).map_or(cursor, |(_, end)| end);
            let mut pieces: Vec<&str> = content_texts(message);
            if let Some(reasoning) = message["reasoning_content"].as_str().map(str::trim).filter(|r| !r.is_empty()) {
                pieces.push(reasoning);
            }
            for call in message["tool_calls"].as_array().into_iter().flatten() {
                if let Some(name) = call["function"]["name"].as_str().filter(|n| !n.is_empty()) {
                    pieces.push(name);
                }
            }
            let last =
                pieces.iter().filter_map(|p| locate(window, p, start)).map(|(_, end)| end).max().unwrap_or(start);
            let end = closes.iter().filter_map(|c| locate(window, c, last)).min().map_or(last, |(_, end)| end);
            spans.push(Some((start, end)));
            cursor = end;
        } else {
            let texts = content_texts(message);
            let first = texts.first().and_then(|t| locate(text, t, cursor));
            let span = first.map(|(start, mut end)| {
                for t in &texts[1..] {
                    if let Some((_, e)) = locate(text, t, end) {
                        end = e;
                    }
                }
                (start, end)
            });
            if let Some((_, end)) = span {
                cursor = end;
            }
            spans.push(span);
        }
    }
    spans
}

/// Message index of each token: the first message owning a byte of the token's range.
pub(crate) fn attribute(
    offsets: &[(usize, usize)],
    spans: &[Option<(usize, usize)>],
    index_base: i32,
    shift: usize,
) -> Vec<i32> {
    offsets
        .iter()
        .map(|&(s, e)| {
            let (s, e) = (s + shift, e + shift);
            spans
                .iter()
                .position(|span| span.is_some_and(|(a, b)| s < b && a < e.max(s + 1)))
                .map_or(-1, |i| index_base + i as i32)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn spans_follow_messages_in_order() {
        let text = "<s>U:hi</s><s>A:hi there</s>\n<s>U:bye</s><s>A:";
        let messages = [
            json!({"role": "user", "content": "hi"}),
            json!({"role": "assistant", "content": "hi there"}),
            json!({"role": "user", "content": "bye"}),
        ];
        let spans = message_spans(text, &messages, "<s>A:", &["</s>".to_owned()], 0);
        let got: Vec<&str> = spans.iter().map(|s| s.map_or("", |(a, b)| &text[a..b])).collect();
        assert_eq!(got, ["hi", "hi there</s>", "bye"]);
        let offsets = [(0, 3), (3, 5), (5, 7), (22, 28), (28, 29)];
        assert_eq!(attribute(&offsets, &spans, 0, 0), [-1, -1, 0, 1, -1]);
    }

    #[test]
    fn mask_marks_assistant_tokens() {
        let tokens = RenderedTokens { ids: vec![1, 2, 3, 4], message_indices: vec![-1, 0, 1, -1], message_count: 2 };
        let messages = [json!({"role": "user", "content": "x"}), json!({"role": "assistant", "content": "y"})];
        assert_eq!(tokens.assistant_mask(&messages), [false, false, true, false]);
    }
}
