//! Where prompt N + completion stops being a prefix of prompt N+1, and why.
//!
//! The cause is read off what the diverging byte of the completion is (the parser's spans say
//! whether it is reasoning, whitespace, a call id, arguments or a marker) and how the two texts go
//! on from there: whitespace that differs but text that continues alike, reasoning that the next
//! prompt no longer holds, a JSON string where an object was, Python literals where JSON ones were.

use serde::Serialize;

use crate::format::Format;
use crate::parse::SpanKind;

use super::simulate::Outcome;

/// Bytes of context shown on each side of a divergence.
const CONTEXT: usize = 40;

/// The first place where the prefix breaks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Divergence {
    /// Byte offset (in prompt N+1, equal to the offset in prompt N + completion).
    pub byte: usize,
    /// Token index, when tokens were compared and differ.
    pub token: Option<usize>,
    /// Up to 40 bytes before it (the same in both).
    pub before: String,
    /// Up to 40 bytes of prompt N + completion from there.
    pub expected: String,
    /// Up to 40 bytes of prompt N+1 from there.
    pub actual: String,
}

/// Why a prefix breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cause {
    /// The next prompt leaves out reasoning the model wrote.
    ReasoningDropped,
    /// Whitespace the model wrote is changed (stripped, added, normalized).
    WhitespaceNormalized,
    /// Arguments are re-serialized JSON (spacing, key order, escaping).
    JsonReserialized,
    /// Arguments passed as a JSON string are encoded again (`"{\"a\": 1}"`).
    ArgumentsDoubleEncoded,
    /// A call id differs (engine-assigned ids, ids the template makes up).
    IdChanged,
    /// A boolean, null or number is written differently (`True` for `true`, `1.0` for `1`).
    ValueReformatted,
    /// The text is a prefix, the tokens are not: BPE merged differently across a boundary.
    BpeBoundary,
    /// The stop marker the model sampled is not what the template writes at that place.
    StopToken,
    /// The generation prompt of prompt N is not repeated when the turn is in history.
    PromptNotRepeated,
    /// A marker of the turn is written differently in history.
    MarkupChanged,
    /// Content or a tool name differs.
    ContentChanged,
    /// Messages before the turn render differently once the turn is added.
    HistoryChanged,
    /// The template raised on the next request.
    TemplateRaised,
}

/// Length of the longest common prefix, at a character boundary of both.
pub(crate) fn common_prefix(a: &str, b: &str) -> usize {
    let mut n = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    while !a.is_char_boundary(n) {
        n -= 1;
    }
    n
}

fn clip_after(text: &str, at: usize) -> String {
    let mut end = (at + CONTEXT).min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[at..end].to_owned()
}

fn clip_before(text: &str, at: usize) -> String {
    let mut start = at.saturating_sub(CONTEXT);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..at].to_owned()
}

/// The divergence of `actual` from `expected` at byte `at`.
pub(crate) fn divergence(expected: &str, actual: &str, at: usize, token: Option<usize>) -> Divergence {
    Divergence {
        byte: at,
        token,
        before: clip_before(expected, at),
        expected: clip_after(expected, at),
        actual: clip_after(actual, at),
    }
}

/// Index of the first differing token of `expected` (ids of prompt N + ids of the completion) in
/// `actual` (ids of prompt N+1); `None` when `expected` is a prefix.
pub(crate) fn token_divergence(expected: &[u32], actual: &[u32]) -> Option<usize> {
    let same = expected.iter().zip(actual).take_while(|(a, b)| a == b).count();
    (same < expected.len()).then_some(same)
}

/// Why `actual` (prompt N+1) leaves `expected` (prompt N + completion) at byte `at`.
pub(crate) fn cause(outcome: &Outcome, format: &Format, expected: &str, actual: &str, at: usize) -> Cause {
    let prompt = outcome.prompt.len();
    if at < prompt {
        if at < outcome.generation_prompt_at {
            return Cause::HistoryChanged;
        }
        // The prompt's reasoning opener is what history leaves out: the reasoning went with it.
        let start = format.reasoning.as_ref().map_or("", |r| r.start.trim());
        let region = &expected[outcome.generation_prompt_at..prompt];
        let dropped = !start.is_empty()
            && region.find(start).is_some_and(|i| at < outcome.generation_prompt_at + i + start.len());
        return if dropped && outcome.parsed.reasoning_content.is_some() {
            Cause::ReasoningDropped
        } else {
            Cause::PromptNotRepeated
        };
    }
    let (e, a) = (&expected[at..], &actual[at..]);
    if let Some(reasoning) = outcome.parsed.reasoning_content.as_deref().map(str::trim).filter(|r| !r.is_empty())
        && e.contains(reasoning)
        && !a.contains(reasoning)
    {
        return Cause::ReasoningDropped;
    }
    // An empty reasoning block (or one whose text was found elsewhere) that history leaves out.
    if let Some(start) = format.reasoning.as_ref().map(|r| r.start.trim()).filter(|s| !s.is_empty())
        && e.starts_with(start)
        && !a.starts_with(start)
    {
        return Cause::ReasoningDropped;
    }
    // A closing marker of the call the model left out (`</parameter>`), which history writes.
    if let Some(tools) = &format.tools {
        let (e, a) = (e.trim_start(), a.trim_start());
        let markers = [&tools.arg_value_suffix, &tools.call_end, &tools.section_end];
        if markers.iter().map(|m| m.trim()).any(|m| !m.is_empty() && a.starts_with(m) && !e.starts_with(m)) {
            return Cause::MarkupChanged;
        }
    }
    let starts_blank = |s: &str| s.starts_with(char::is_whitespace);
    if starts_blank(e) || starts_blank(a) {
        let (e, a) = (e.trim_start(), a.trim_start());
        if common_prefix(e, a) >= e.len().min(12) {
            return Cause::WhitespaceNormalized;
        }
    }
    let offset = at - prompt;
    let stop_at =
        outcome.stop.as_ref().map_or(outcome.completion.len(), |s| outcome.completion.len().saturating_sub(s.len()));
    // In the stop marker, and history writes another marker there (not text before the same one).
    let replaced =
        outcome.stop.as_ref().is_none_or(|stop| !a.chars().take(CONTEXT).collect::<String>().contains(stop.as_str()));
    if (offset >= outcome.returned.len() || offset >= stop_at) && replaced {
        return Cause::StopToken;
    }
    // Right after a call's arguments counts as the arguments: a repaired or re-serialized value
    // ends where the model's did not.
    let spans = &outcome.parsed.spans;
    let after_arguments = spans.iter().any(|s| s.end == offset && s.kind == SpanKind::ToolArguments);
    let kind = if after_arguments {
        Some(SpanKind::ToolArguments)
    } else {
        spans.iter().find(|s| s.start <= offset && offset < s.end).map(|s| s.kind)
    };
    match kind {
        Some(SpanKind::Whitespace) => Cause::WhitespaceNormalized,
        Some(SpanKind::ToolId) => Cause::IdChanged,
        Some(SpanKind::ToolArguments) => {
            let head: String = a.chars().take(CONTEXT).collect();
            let literal = |s: &str, words: &[&str]| words.iter().any(|w| s.starts_with(w));
            if head.contains("\\\"") || a.starts_with("\"{") {
                Cause::ArgumentsDoubleEncoded
            } else if literal(e, &["true", "false", "null"])
                || literal(a, &["True", "False", "None"])
                || e.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '.')
            {
                Cause::ValueReformatted
            } else {
                Cause::JsonReserialized
            }
        }
        Some(SpanKind::Marker) => Cause::MarkupChanged,
        Some(SpanKind::Reasoning) => Cause::ReasoningDropped,
        _ => Cause::ContentChanged,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_stop_at_character_boundaries() {
        assert_eq!(common_prefix("aé", "aè"), 1);
        assert_eq!(common_prefix("abc", "abd"), 2);
        assert_eq!(token_divergence(&[1, 2], &[1, 2, 3]), None);
        assert_eq!(token_divergence(&[1, 2, 4], &[1, 2, 3]), Some(2));
        assert_eq!(token_divergence(&[1, 2, 3], &[1, 2]), Some(2));
    }

    #[test]
    fn context_is_clipped_on_both_sides() {
        let expected = format!("{}X{}", "a".repeat(50), "b".repeat(50));
        let actual = format!("{}Y{}", "a".repeat(50), "c".repeat(50));
        let d = divergence(&expected, &actual, 50, None);
        assert_eq!(d.before, "a".repeat(40));
        assert_eq!(d.expected, format!("X{}", "b".repeat(39)));
        assert_eq!(d.actual, format!("Y{}", "c".repeat(39)));
    }
}
