//! Markers in rendered text: `<…>`, `[…]` and the special-token forms `<|…|>` / `<｜…｜>`.
//!
//! Marker-aware diffs (a common prefix / suffix whose boundary never falls inside a marker: it moves
//! to the marker's start for a prefix, past its end for a suffix, so the marker lands whole on the
//! differing side), the bracketed pieces of a marker, and the whitespace a template writes around
//! one. The analysis finds markers with these; the parser, the grammar derivation and the turn API
//! cut and compare text with the same rules.

/// The whitespace `s` starts with (what a template writes after a marker, before a value).
pub(crate) fn leading_ws(s: &str) -> &str {
    &s[..s.len() - s.trim_start().len()]
}

/// The whitespace `s` ends with.
pub(crate) fn trailing_ws(s: &str) -> &str {
    &s[s.trim_end().len()..]
}

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
        if let Some(at) = prefix.rfind(open)
            && prefix[at..].find(close).is_none()
            && (open == '<' || square_inner(&prefix[at + 1..]))
        {
            cut = cut.min(at);
        }
    }
    cut
}

/// The length of the longest suffix of `suffix` that does not start inside a marker.
fn unsplit_suffix(suffix: &str) -> usize {
    let mut start = 0;
    for (open, close) in [('<', '>'), ('[', ']')] {
        if let Some(at) = suffix.find(close)
            && suffix[..at].find(open).is_none()
            && (open == '<' || square_inner(&suffix[..at]))
        {
            start = start.max(at + close.len_utf8());
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
}
