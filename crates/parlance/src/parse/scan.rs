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

/// Where `text` starts with `marker` after optional whitespace: `Full(end)` past the marker,
/// `Partial` when the text may still become the marker (it is a prefix of it), `No` when it
/// cannot. Whitespace inside the marker matches any whitespace, or none.
pub(crate) fn starts_with_marker(text: &str, marker: &str) -> Match {
    let rest = text.trim_start();
    let skipped = text.len() - rest.len();
    match match_at(rest, marker) {
        Match::Full(n) => Match::Full(skipped + n),
        other => other,
    }
}

/// How text at a position matches a marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Match {
    /// The marker, ending this many bytes into the text.
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

/// Where each marker's next occurrence lies in a buffer that only grows, so that a marker is never
/// searched twice over the same bytes: a parser that looks for several markers at every step
/// (the earliest wins) would otherwise rescan the rest of the output for each marker that is not
/// there, at each step — quadratic in the output.
#[derive(Debug, Default, Clone)]
pub(crate) struct MarkerSearch {
    entries: Vec<Searched>,
}

#[derive(Debug, Clone)]
struct Searched {
    /// The marker's address and length as last asked for: markers mostly live in the parser's
    /// setup, so this finds the entry without comparing text.
    key: (usize, usize),
    marker: String,
    /// Finds the marker up to its first whitespace (the whole marker when it has none).
    head: memchr::memmem::Finder<'static>,
    loose: bool,
    /// The search started here…
    from: usize,
    /// …and read the buffer up to here…
    upto: usize,
    /// …and found this first occurrence (`None`: none in `from..upto`).
    found: Option<(usize, usize)>,
}

impl Searched {
    fn new(marker: &str) -> Searched {
        let head_len = marker.find(|c: char| c.is_ascii_whitespace()).unwrap_or(marker.len());
        Searched {
            key: (marker.as_ptr() as usize, marker.len()),
            marker: marker.to_owned(),
            head: memchr::memmem::Finder::new(&marker.as_bytes()[..head_len]).into_owned(),
            loose: head_len < marker.len(),
            from: usize::MAX,
            upto: 0,
            found: None,
        }
    }

    /// `find_marker(text, marker)` with the prepared finder.
    fn search(&self, text: &str) -> Option<(usize, usize)> {
        if !self.loose {
            return self.head.find(text.as_bytes()).map(|at| (at, at + self.marker.len()));
        }
        // A match of the head (valid UTF-8 in valid UTF-8) starts at a character boundary.
        self.head.find_iter(text.as_bytes()).find_map(|at| match match_at(&text[at..], &self.marker) {
            Match::Full(n) => Some((at, at + n)),
            _ => None,
        })
    }
}

impl MarkerSearch {
    /// `find_marker(&buf[from..], marker)`, in `buf`'s offsets. `buf` must extend the buffer of
    /// every earlier call (append only).
    pub(crate) fn find(&mut self, buf: &str, from: usize, marker: &str) -> Option<(usize, usize)> {
        if marker.is_empty() {
            return Some((from, from));
        }
        let key = (marker.as_ptr() as usize, marker.len());
        let index = match self.entries.iter().position(|e| e.key == key) {
            Some(i) => i,
            None => match self.entries.iter().position(|e| e.marker == marker) {
                Some(i) => {
                    self.entries[i].key = key;
                    i
                }
                None => {
                    self.entries.push(Searched::new(marker));
                    self.entries.len() - 1
                }
            },
        };
        let entry = &mut self.entries[index];
        let mut start = from;
        if entry.from <= from {
            match entry.found {
                Some((at, end)) if at >= from => return Some((at, end)),
                // Consumed: nothing lies between, search on past it.
                Some(_) => {}
                // Only a match that the end of the buffer cut off may start before `upto`.
                None => start = entry.upto.saturating_sub(hold_window(marker)).max(from),
            }
        }
        while !buf.is_char_boundary(start) {
            start -= 1;
        }
        let found = entry.search(&buf[start..]).map(|(a, e)| (start + a, start + e));
        (entry.from, entry.upto, entry.found) = (from, buf.len(), found);
        found
    }
}

/// The longest text one match of `marker` may span, whole or cut off at the end of the text (its
/// whitespace runs are loose, each bounded): the most bytes `marker_hold` may hold back.
pub(crate) fn hold_window(marker: &str) -> usize {
    let runs = marker.split(|c: char| c.is_ascii_whitespace()).filter(|p| !p.is_empty()).count();
    marker.len() + MAX_LOOSE_WS * runs.max(1)
}

/// Bytes at the end of `text` that may be the start of `marker` (inner whitespace loose): what a
/// streaming parser holds back until the next chunk decides.
pub(crate) fn marker_hold(text: &str, marker: &str) -> usize {
    if !marker.contains(|c: char| c.is_ascii_whitespace()) {
        return partial_suffix(text, marker);
    }
    let Some(first) = marker.chars().next() else { return 0 };
    // A loose match may be longer than the marker by its whitespace runs, each bounded.
    let window = hold_window(marker);
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
/// brackets and strings only: validity is checked later by a real JSON parser. A strict scanner
/// (`JsonEnd::strict`) also checks the JSON grammar as it goes and reports the first byte that
/// cannot continue a value, so broken JSON is decided when it breaks, not when the output ends.
#[derive(Debug, Clone, Default)]
pub(crate) struct JsonEnd {
    /// Bytes scanned so far.
    pos: usize,
    strict: Option<Box<Strict>>,
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
    /// A scanner that checks the JSON grammar (RFC 8259, except that control characters are let
    /// through inside strings, as models write raw line breaks there).
    pub(crate) fn strict() -> JsonEnd {
        JsonEnd { strict: Some(Box::default()), ..JsonEnd::default() }
    }

    /// Continues scanning `text` (the whole value text so far; only the new part is looked at).
    pub(crate) fn scan(&mut self, text: &str, eof: bool) -> JsonScan {
        if let Some(strict) = self.strict.as_mut() {
            return strict.scan(text.as_bytes(), &mut self.pos, eof);
        }
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

/// What the strict scanner expects next.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Expect {
    /// A value (the start, or after `:` / `,` in an array).
    #[default]
    Value,
    /// A value or `]` (right after `[`).
    ValueOrClose,
    /// A key or `}` (right after `{`).
    KeyOrClose,
    /// A key (after `,` in an object).
    Key,
    /// `:` after a key.
    Colon,
    /// `,` or the container's close after a value; at the top level, the value has ended.
    AfterValue,
    /// Inside a string (`key`: an object key); `escape`: after a backslash; `hex`: `\u` digits
    /// still to come.
    Str { key: bool, escape: bool, hex: u8 },
    /// Inside a number, in the state of its grammar.
    Number(Num),
    /// Inside `true` / `false` / `null`: the literal and how many bytes matched.
    Literal(&'static [u8], usize),
}

/// States of the JSON number grammar `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Num {
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    Exp,
    ExpSign,
    ExpDigits,
}

impl Num {
    fn next(self, b: u8) -> Option<Num> {
        use Num::*;
        Some(match (self, b) {
            (Minus, b'0') => Zero,
            (Minus, b'1'..=b'9') | (Int, b'0'..=b'9') => Int,
            (Zero | Int, b'.') => Dot,
            (Dot | Frac, b'0'..=b'9') => Frac,
            (Zero | Int | Frac, b'e' | b'E') => Exp,
            (Exp, b'+' | b'-') => ExpSign,
            (Exp | ExpSign | ExpDigits, b'0'..=b'9') => ExpDigits,
            _ => return None,
        })
    }

    fn complete(self) -> bool {
        matches!(self, Num::Zero | Num::Int | Num::Frac | Num::ExpDigits)
    }
}

/// The strict scanner's state: what comes next and the open containers (`{` / `[`).
#[derive(Debug, Clone, Default)]
struct Strict {
    expect: Expect,
    stack: Vec<u8>,
}

impl Strict {
    fn scan(&mut self, bytes: &[u8], pos: &mut usize, eof: bool) -> JsonScan {
        while *pos < bytes.len() {
            let b = bytes[*pos];
            let at = *pos;
            match self.step(b) {
                Step::Next => *pos += 1,
                Step::Again => {}
                Step::End => return JsonScan::End(at + 1),
                Step::EndBefore => return JsonScan::End(at),
                Step::Invalid => return JsonScan::Invalid(at),
            }
        }
        // A top-level number ends with the text.
        match self.expect {
            Expect::Number(num) if eof && self.stack.is_empty() && num.complete() => JsonScan::End(*pos),
            _ => JsonScan::More,
        }
    }

    /// Feeds one byte.
    fn step(&mut self, b: u8) -> Step {
        let ws = matches!(b, b' ' | b'\t' | b'\n' | b'\r');
        match self.expect {
            Expect::Value | Expect::ValueOrClose if ws => Step::Next,
            Expect::ValueOrClose if b == b']' => self.close(),
            Expect::Value | Expect::ValueOrClose => self.value(b),
            Expect::KeyOrClose | Expect::Key | Expect::Colon | Expect::AfterValue if ws => Step::Next,
            Expect::KeyOrClose if b == b'}' => self.close(),
            Expect::KeyOrClose | Expect::Key if b == b'"' => {
                self.expect = Expect::Str { key: true, escape: false, hex: 0 };
                Step::Next
            }
            Expect::Colon if b == b':' => {
                self.expect = Expect::Value;
                Step::Next
            }
            Expect::AfterValue => match (self.stack.last(), b) {
                (Some(b'{'), b',') => {
                    self.expect = Expect::Key;
                    Step::Next
                }
                (Some(b'['), b',') => {
                    self.expect = Expect::Value;
                    Step::Next
                }
                (Some(b'{'), b'}') | (Some(b'['), b']') => self.close(),
                _ => Step::Invalid,
            },
            Expect::Str { key, escape: true, .. } => match b {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {
                    self.expect = Expect::Str { key, escape: false, hex: 0 };
                    Step::Next
                }
                b'u' => {
                    self.expect = Expect::Str { key, escape: false, hex: 4 };
                    Step::Next
                }
                _ => Step::Invalid,
            },
            Expect::Str { key, hex: hex @ 1.., .. } => {
                if !b.is_ascii_hexdigit() {
                    return Step::Invalid;
                }
                self.expect = Expect::Str { key, escape: false, hex: hex - 1 };
                Step::Next
            }
            Expect::Str { key, .. } => {
                match b {
                    b'\\' => self.expect = Expect::Str { key, escape: true, hex: 0 },
                    b'"' if key => self.expect = Expect::Colon,
                    b'"' => return self.value_done(),
                    _ => {}
                }
                Step::Next
            }
            Expect::Number(num) => match num.next(b) {
                Some(next) => {
                    self.expect = Expect::Number(next);
                    Step::Next
                }
                None if num.complete() => {
                    if self.stack.is_empty() {
                        return Step::EndBefore;
                    }
                    self.expect = Expect::AfterValue;
                    Step::Again
                }
                None => Step::Invalid,
            },
            Expect::Literal(word, matched) => {
                if word.get(matched) != Some(&b) {
                    return Step::Invalid;
                }
                if matched + 1 == word.len() {
                    return self.value_done();
                }
                self.expect = Expect::Literal(word, matched + 1);
                Step::Next
            }
            Expect::KeyOrClose | Expect::Key | Expect::Colon => Step::Invalid,
        }
    }

    /// The first byte of a value.
    fn value(&mut self, b: u8) -> Step {
        self.expect = match b {
            b'{' | b'[' => {
                if self.stack.len() >= MAX_DEPTH as usize {
                    return Step::Invalid;
                }
                self.stack.push(b);
                if b == b'{' { Expect::KeyOrClose } else { Expect::ValueOrClose }
            }
            b'"' => Expect::Str { key: false, escape: false, hex: 0 },
            b'-' => Expect::Number(Num::Minus),
            b'0' => Expect::Number(Num::Zero),
            b'1'..=b'9' => Expect::Number(Num::Int),
            b't' => Expect::Literal(b"true", 1),
            b'f' => Expect::Literal(b"false", 1),
            b'n' => Expect::Literal(b"null", 1),
            _ => return Step::Invalid,
        };
        Step::Next
    }

    /// The innermost container closes with the current byte.
    fn close(&mut self) -> Step {
        self.stack.pop();
        self.value_done()
    }

    /// A value ends with the current byte.
    fn value_done(&mut self) -> Step {
        self.expect = Expect::AfterValue;
        if self.stack.is_empty() { Step::End } else { Step::Next }
    }
}

/// What one byte did to the strict scanner.
enum Step {
    /// Consumed; go on.
    Next,
    /// Not consumed; feed it again in the new state.
    Again,
    /// Consumed; the value ends after it.
    End,
    /// Not consumed; the value ended before it.
    EndBefore,
    /// Cannot continue a JSON value.
    Invalid,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Remembered searches answer as a fresh search would, however the buffer grows and
        /// wherever the searches start (forward, and sometimes back).
        #[test]
        fn marker_search_answers_as_a_fresh_search(
            pieces in proptest::collection::vec("(<a>|<a|a>| |\n|x|</b \n c>|</b|c>|é)*", 1..12),
            froms in proptest::collection::vec(0usize..64, 1..12),
        ) {
            let markers = ["<a>", "</b c>", "a", "é<a>"];
            let mut search = MarkerSearch::default();
            let mut buf = String::new();
            for (piece, step) in pieces.iter().zip(froms.iter().cycle()) {
                buf.push_str(piece);
                let mut from = (*step * buf.len() / 64).min(buf.len());
                while !buf.is_char_boundary(from) {
                    from -= 1;
                }
                for marker in markers {
                    let fresh = find_marker(&buf[from..], marker).map(|(a, e)| (from + a, from + e));
                    prop_assert_eq!(search.find(&buf, from, marker), fresh, "{} in {:?} from {}", marker, buf, from);
                }
            }
        }
    }

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

    #[test]
    fn strict_json_end_agrees_with_serde_on_whole_values() {
        let values = [
            r#"{"a": "}\"", "b": [1, {"c": 2.5e-3}], "d": null, "e": true, "f": false}"#,
            r#"[]"#,
            r#"{}"#,
            r#""\u00e9\n""#,
            r#"[-0, 10, 1.0, 1E+2, "x"]"#,
            r#"{"k": {"k": [[], {}]}}"#,
        ];
        for value in values {
            assert!(serde_json::from_str::<serde_json::Value>(value).is_ok(), "{value}");
            let text = format!("{value} tail");
            assert_eq!(JsonEnd::strict().scan(&text, false), JsonScan::End(value.len()), "{value}");
            // Streamed byte by byte, the same end.
            let mut scan = JsonEnd::strict();
            let ends: Vec<JsonScan> = (1..=text.len()).map(|n| scan.scan(&text[..n], false)).collect();
            assert_eq!(ends.iter().find(|e| **e != JsonScan::More), Some(&JsonScan::End(value.len())), "{value}");
        }
    }

    #[test]
    fn strict_json_end_reports_the_first_byte_that_breaks_the_value() {
        let cases = [
            ("{broken json\n</tool_call>", 1),
            (r#"{"a": True}"#, 6),
            (r#"{'a': 1}"#, 1),
            (r#"[1, 2,]"#, 6),
            (r#"{"a" 1}"#, 5),
            (r#"{"a": 01}"#, 7),
            (r#"{"a": "\x"}"#, 8),
            (r#"{"a": 1]"#, 7),
            (r#"{"a": nul }"#, 9),
            ("hello", 0),
        ];
        for (text, at) in cases {
            assert!(serde_json::from_str::<serde_json::Value>(text).is_err(), "{text}");
            assert_eq!(JsonEnd::strict().scan(text, false), JsonScan::Invalid(at), "{text}");
        }
        // A prefix of a value wants more; a top-level number ends with the text or a non-digit.
        assert_eq!(JsonEnd::strict().scan(r#"{"a": [1, "x"#, false), JsonScan::More);
        assert_eq!(JsonEnd::strict().scan("42", false), JsonScan::More);
        assert_eq!(JsonEnd::strict().scan("42", true), JsonScan::End(2));
        assert_eq!(JsonEnd::strict().scan("42}", false), JsonScan::End(2));
        assert_eq!(JsonEnd::strict().scan(&"[".repeat(600), false), JsonScan::Invalid(512));
        // Raw control characters inside strings pass (models write raw line breaks).
        assert_eq!(JsonEnd::strict().scan("\"a\nb\"", false), JsonScan::End(5));
    }

    proptest::proptest! {
        /// On text from JSON's own alphabet: where the strict scanner ends a value, serde reads
        /// one; where serde reads a whole text as a value, the scanner ends it there; and where
        /// it reports a break, no continuation makes the text before it plus that byte JSON.
        #[test]
        fn strict_json_end_matches_serde(text in "[{}\\[\\]\",: a1.e+\\-tnul0]{0,24}") {
            let whole = serde_json::from_str::<serde_json::Value>(&text).is_ok() && text.trim() == text;
            match JsonEnd::strict().scan(&text, true) {
                JsonScan::End(n) => {
                    proptest::prop_assert!(serde_json::from_str::<serde_json::Value>(&text[..n]).is_ok(), "{text:?} end {n}");
                    if whole {
                        proptest::prop_assert_eq!(n, text.len());
                    }
                }
                JsonScan::Invalid(at) => {
                    proptest::prop_assert!(!whole, "{text:?} invalid at {at}");
                    // Nothing after the breaking byte can repair it.
                    for tail in ["", "}", "]", "\"}", "]}", "0}", "\":0}"] {
                        let fixed = format!("{}{tail}", &text[..=at]);
                        proptest::prop_assert!(serde_json::from_str::<serde_json::Value>(&fixed).is_err(), "{fixed:?}");
                    }
                }
                JsonScan::More => proptest::prop_assert!(!whole, "{text:?} wants more"),
            }
        }
    }
}
