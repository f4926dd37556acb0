//! Text scanning primitives of the output parser: markers that may be cut at a chunk end, and a
//! bracket scanner that finds where a JSON value ends without parsing it.

/// The length of `text`'s leading whitespace.
pub(crate) fn leading_ws(text: &str) -> usize {
    text.len() - text.trim_start().len()
}

/// Length of the longest proper prefix of `marker` that `text` ends with: the bytes a streaming
/// parser must hold back because the next chunk may complete the marker.
pub(crate) fn partial_suffix(text: &str, marker: &str) -> usize {
    if marker.is_empty() {
        return 0;
    }
    let max = marker.len().saturating_sub(1).min(text.len());
    (1..=max)
        .rev()
        .find(|&k| marker.is_char_boundary(k) && text.is_char_boundary(text.len() - k) && text.ends_with(&marker[..k]))
        .unwrap_or(0)
}

/// Where `text` starts with `marker` after optional whitespace: `Some(Ok(end))` past the marker,
/// `Some(Err(()))` when the text may still become the marker (it is a prefix of it), `None` when
/// it cannot. Whitespace inside the marker matches any whitespace, or none.
pub(crate) fn starts_with_marker(text: &str, marker: &str) -> Option<Result<usize, ()>> {
    let rest = text.trim_start();
    let skipped = text.len() - rest.len();
    match match_at(rest, marker) {
        Match::Full(n) => Some(Ok(skipped + n)),
        Match::Partial => Some(Err(())),
        Match::No => None,
    }
}

/// How text at a position matches a marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Match {
    /// The marker, `n` bytes long in the text.
    Full(usize),
    /// The text ends while still matching.
    Partial,
    /// No match.
    No,
}

/// Longest whitespace run one whitespace run of a marker matches: bounded, so a streaming parser
/// knows how far back a marker may start.
const MAX_LOOSE_WS: usize = 32;

/// Matches `marker` at the start of `text`; a whitespace run in the marker matches any
/// whitespace run (or none) in the text, since models write the template's inner newlines loosely
/// (`</arg_key>\n<arg_value>` vs `</arg_key><arg_value>`).
pub(crate) fn match_at(text: &str, marker: &str) -> Match {
    let (t, m) = (text.as_bytes(), marker.as_bytes());
    let (mut i, mut j) = (0, 0);
    while j < m.len() {
        if m[j].is_ascii_whitespace() {
            while j < m.len() && m[j].is_ascii_whitespace() {
                j += 1;
            }
            let run = i;
            while i < t.len() && t[i].is_ascii_whitespace() {
                i += 1;
                if i - run > MAX_LOOSE_WS {
                    return Match::No;
                }
            }
            if i == t.len() && j < m.len() {
                return Match::Partial;
            }
            continue;
        }
        if i == t.len() {
            return Match::Partial;
        }
        if t[i] != m[j] {
            return Match::No;
        }
        i += 1;
        j += 1;
    }
    Match::Full(i)
}

/// The first occurrence of `marker` in `text` (inner whitespace loose): `(start, end)`.
pub(crate) fn find_marker(text: &str, marker: &str) -> Option<(usize, usize)> {
    let head_len = marker.find(|c: char| c.is_ascii_whitespace()).unwrap_or(marker.len());
    if head_len == marker.len() {
        return text.find(marker).map(|at| (at, at + marker.len()));
    }
    let head = &marker[..head_len];
    let mut from = 0;
    while let Some(i) = text[from..].find(head) {
        let at = from + i;
        if let Match::Full(n) = match_at(&text[at..], marker) {
            return Some((at, at + n));
        }
        from = at + head.len().max(1);
        while !text.is_char_boundary(from) {
            from += 1;
        }
    }
    None
}

/// Bytes at the end of `text` that may be the start of `marker` (inner whitespace loose): what a
/// streaming parser holds back until the next chunk decides.
pub(crate) fn marker_hold(text: &str, marker: &str) -> usize {
    if !marker.contains(|c: char| c.is_ascii_whitespace()) {
        return partial_suffix(text, marker);
    }
    let Some(first) = marker.chars().next() else { return 0 };
    // A loose match may be longer than the marker by its whitespace runs, each bounded.
    let runs = marker.split(|c: char| c.is_ascii_whitespace()).filter(|p| !p.is_empty()).count();
    let window = marker.len() + MAX_LOOSE_WS * runs.max(1);
    let mut start = text.len().saturating_sub(window);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let mut best = 0;
    for (i, c) in text[start..].char_indices() {
        if c == first && match_at(&text[start + i..], marker) == Match::Partial {
            best = text.len() - (start + i);
            break;
        }
    }
    best
}

/// Consumes as much of `literal`'s whitespace-only `part` as `text` starts with (templates write
/// e.g. `>\n` after a name; a model may or may not): the number of bytes matched.
pub(crate) fn leading_literal_ws(text: &str, literal_ws: &str) -> usize {
    text.bytes().zip(literal_ws.bytes()).take_while(|(a, b)| a == b).count()
}

/// Where a JSON value that starts at the beginning of the scanned text ends, found by tracking
/// brackets and strings only: validity is checked later by a real JSON parser.
#[derive(Debug, Clone, Default)]
pub(crate) struct JsonEnd {
    /// Bytes scanned so far.
    pos: usize,
    depth: u32,
    in_string: bool,
    escape: bool,
    started: bool,
    /// The value is a bare scalar (number, literal), which ends at the first delimiter.
    scalar: bool,
}

/// The outcome of feeding text to `JsonEnd`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JsonScan {
    /// The value ends at this byte offset (exclusive) of the whole scanned text.
    End(usize),
    /// More text is needed.
    More,
    /// The text cannot start a JSON value here (offset of the offending byte).
    Invalid(usize),
}

/// Deepest nesting a scanned value may have: deeper input is reported invalid, not followed.
const MAX_DEPTH: u32 = 512;

impl JsonEnd {
    /// Continues scanning `text` (the whole value text so far; only the new part is looked at).
    pub(crate) fn scan(&mut self, text: &str, eof: bool) -> JsonScan {
        let bytes = text.as_bytes();
        while self.pos < bytes.len() {
            let b = bytes[self.pos];
            let at = self.pos;
            self.pos += 1;
            if !self.started {
                match b {
                    b' ' | b'\t' | b'\n' | b'\r' => continue,
                    b'{' | b'[' => self.depth = 1,
                    b'"' => self.in_string = true,
                    b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => self.scalar = true,
                    _ => return JsonScan::Invalid(at),
                }
                self.started = true;
                continue;
            }
            if self.scalar {
                if matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r' | b'<' | b'[') {
                    self.pos = at;
                    return JsonScan::End(at);
                }
                continue;
            }
            if self.in_string {
                if self.escape {
                    self.escape = false;
                } else if b == b'\\' {
                    self.escape = true;
                } else if b == b'"' {
                    self.in_string = false;
                    if self.depth == 0 {
                        return JsonScan::End(self.pos);
                    }
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => {
                    self.depth += 1;
                    if self.depth > MAX_DEPTH {
                        return JsonScan::Invalid(at);
                    }
                }
                b'}' | b']' => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        return JsonScan::End(self.pos);
                    }
                }
                _ => {}
            }
        }
        if eof && self.scalar { JsonScan::End(self.pos) } else { JsonScan::More }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_suffix_holds_only_marker_prefixes() {
        assert_eq!(partial_suffix("abc</th", "</think>"), 4);
        assert_eq!(partial_suffix("abc<", "</think>"), 1);
        assert_eq!(partial_suffix("abc", "</think>"), 0);
        // A whole marker is found, not held.
        assert_eq!(partial_suffix("</think>", "</think>"), 0);
        // Multi-byte markers are held at character boundaries only.
        assert_eq!(partial_suffix("x<｜tool", "<｜tool▁calls｜>"), "<｜tool".len());
    }

    #[test]
    fn markers_match_with_loose_inner_whitespace() {
        assert_eq!(match_at("</arg_key><arg_value>x", "</arg_key>\n<arg_value>"), Match::Full(21));
        assert_eq!(match_at("</arg_key>\n\n<arg_value>x", "</arg_key>\n<arg_value>"), Match::Full(23));
        assert_eq!(match_at("</arg_key>\n", "</arg_key>\n<arg_value>"), Match::Partial);
        assert_eq!(match_at("</arg_key>x", "</arg_key>\n<arg_value>"), Match::No);
        assert_eq!(find_marker("a </function> </tool_call> b", "</function>\n</tool_call>"), Some((2, 26)));
        assert_eq!(marker_hold("text </function>\n", "</function>\n</tool_call>"), 12);
        assert_eq!(marker_hold("text </func", "</function>\n</tool_call>"), 6);
        assert_eq!(marker_hold("text", "</function>\n</tool_call>"), 0);
    }

    #[test]
    fn json_end_finds_the_end_of_nested_values_and_strings() {
        let text = r#"{"a": "}\"", "b": [1, {"c": 2}]} tail"#;
        assert_eq!(JsonEnd::default().scan(text, false), JsonScan::End(text.len() - 5));
        let mut scan = JsonEnd::default();
        assert_eq!(scan.scan(r#"{"a": "x"#, false), JsonScan::More);
        assert_eq!(scan.scan(r#"{"a": "x"} "#, false), JsonScan::End(10));
        assert_eq!(JsonEnd::default().scan("  hello", false), JsonScan::Invalid(2));
        assert_eq!(JsonEnd::default().scan("42", false), JsonScan::More);
        assert_eq!(JsonEnd::default().scan("42", true), JsonScan::End(2));
        assert_eq!(JsonEnd::default().scan(&"[".repeat(600), false), JsonScan::Invalid(512));
    }
}
