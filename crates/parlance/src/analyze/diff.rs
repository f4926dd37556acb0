//! String diffs for differential template analysis: common prefix / suffix that never split a marker.
//!
//! Markers are `<…>`, `[…]` and the special-token forms `<|…|>` / `<｜…｜>`; a diff boundary that
//! falls inside one moves to its start (for a prefix) or past its end (for a suffix), so the marker
//! lands whole on the differing side.

/// Length in bytes of the longest common prefix, moved back so no marker is cut.
pub(crate) fn common_prefix(a: &str, b: &str) -> usize {
    let mut n = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    while !a.is_char_boundary(n) {
        n -= 1;
    }
    // Equal texts share every marker whole, even a lone `>` (functionary's `>>>`).
    if n == a.len() && n == b.len() {
        return n;
    }
    unsplit_prefix(&a[..n])
}

/// Length in bytes of the longest common suffix, moved forward so no marker is cut.
pub(crate) fn common_suffix(a: &str, b: &str) -> usize {
    let mut n = a.bytes().rev().zip(b.bytes().rev()).take_while(|(x, y)| x == y).count();
    while !a.is_char_boundary(a.len() - n) {
        n -= 1;
    }
    if n == a.len() && n == b.len() {
        return n;
    }
    unsplit_suffix(&a[a.len() - n..])
}

/// The longest prefix of `prefix` that does not end inside an open marker.
fn unsplit_prefix(prefix: &str) -> usize {
    let mut cut = prefix.len();
    for (open, close) in [('<', '>'), ('[', ']')] {
        if let Some(at) = prefix.rfind(open) {
            if prefix[at..].find(close).is_none() && (open == '<' || square_inner(&prefix[at + 1..])) {
                cut = cut.min(at);
            }
        }
    }
    cut
}

/// The length of the longest suffix of `suffix` that does not start inside a marker.
fn unsplit_suffix(suffix: &str) -> usize {
    let mut start = 0;
    for (open, close) in [('<', '>'), ('[', ']')] {
        if let Some(at) = suffix.find(close) {
            if suffix[..at].find(open).is_none() && (open == '<' || square_inner(&suffix[..at])) {
                start = start.max(at + close.len_utf8());
            }
        }
    }
    suffix.len() - start
}

/// Whether `inner` can be the inside of a `[…]` marker (`TOOL_CALLS`, `BEGIN FINAL RESPONSE`):
/// no angle bracket or line break. Square brackets also occur unpaired inside other tokens
/// (MiniMax-M3 writes `]<]minimax[>[` before every tag); those are not `[…]` markers.
fn square_inner(inner: &str) -> bool {
    !inner.contains(['<', '>', '\n'])
}

/// Position of `needle` in `haystack` at or after `from`.
pub(crate) fn find_from(haystack: &str, needle: &str, from: usize) -> Option<usize> {
    haystack.get(from..)?.find(needle).map(|i| i + from)
}

/// JSON values (objects and arrays) that parse at top level in `text`: `(start, end, value)`.
pub(crate) fn json_values(text: &str) -> Vec<(usize, usize, serde_json::Value)> {
    let mut found = Vec::new();
    let mut i = 0;
    while i < text.len() {
        let c = text.as_bytes()[i];
        if c == b'{' || c == b'[' {
            let mut stream = serde_json::Deserializer::from_str(&text[i..]).into_iter::<serde_json::Value>();
            if let Some(Ok(value)) = stream.next() {
                let end = i + stream.byte_offset();
                found.push((i, end, value));
                i = end;
                continue;
            }
        }
        i += 1;
    }
    found
}

/// The bracketed pieces of a marker (`<…>`, `[…]`, with the special-token forms inside), in order:
/// `</arg_key>\n<arg_value>` gives `</arg_key>`, `<arg_value>`. Unclosed brackets give nothing.
pub(crate) fn bracketed_pieces(marker: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut rest = 0;
    while let Some(at) = marker[rest..].find(['<', '[']).map(|i| rest + i) {
        let close = if marker[at..].starts_with('<') { '>' } else { ']' };
        let Some(end) = marker[at + 1..].find(close).map(|i| at + 1 + i + 1) else { break };
        pieces.push(&marker[at..end]);
        rest = end;
    }
    pieces
}

/// Length in bytes of the longest common prefix, moved back so no `<…>` marker is cut. Whole renders
/// are compared with this one: `[`/`]` also occur unpaired in role markers (MiniMax's `]~b]ai`).
pub(crate) fn common_prefix_angle(a: &str, b: &str) -> usize {
    let mut n = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    while !a.is_char_boundary(n) {
        n -= 1;
    }
    match a[..n].rfind('<') {
        Some(at) if !a[at..n].contains('>') => at,
        _ => n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diffs_do_not_cut_markers() {
        let (a, b) = ("x<tool_call>A", "x<tool_response>B");
        assert_eq!(&a[..common_prefix(a, b)], "x");
        let (a, b) = ("A</think>\n", "B</answer>\n");
        assert_eq!(&a[a.len() - common_suffix(a, b)..], "\n");
        let (a, b) = ("one<|im_end|>", "two<|im_end|>");
        assert_eq!(&a[a.len() - common_suffix(a, b)..], "<|im_end|>");
    }

    #[test]
    fn json_values_are_found_with_their_spans() {
        let found = json_values("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call> [1, 2] {bad");
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].0, 12);
        assert_eq!(found[1].2, serde_json::json!([1, 2]));
    }
}
