//! Where a JSON value ends in streamed text, found without parsing it: the bracket scanner the
//! parser uses to cut a call's arguments out of model output, and the analyzer to find argument
//! values in renders.

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
    /// Python literals are read too (see [`JsonEnd::python`]).
    python: bool,
    /// The quote of the string being scanned.
    quote: u8,
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

    /// The same scanner, reading Python literals as well when `python` (`{'a': True, 'b': None}`,
    /// as Python's `str()` prints a mapping): strings in either quote with Python's escapes, and
    /// `True` / `False` / `None` besides JSON's literals.
    pub(crate) fn python(mut self, python: bool) -> JsonEnd {
        self.python = python;
        if let Some(strict) = self.strict.as_mut() {
            strict.python = python;
        }
        self
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
                    b'"' => (self.in_string, self.quote) = (true, b),
                    b'\'' if self.python => (self.in_string, self.quote) = (true, b),
                    b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => self.scalar = true,
                    b'T' | b'F' | b'N' if self.python => self.scalar = true,
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
                } else if b == self.quote {
                    self.in_string = false;
                    if self.depth == 0 {
                        return JsonScan::End(self.pos);
                    }
                }
                continue;
            }
            match b {
                b'"' => (self.in_string, self.quote) = (true, b),
                b'\'' if self.python => (self.in_string, self.quote) = (true, b),
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
    /// Inside a string (`key`: an object key) that `quote` closes; `escape`: after a backslash;
    /// `hex`: `\u` digits still to come.
    Str { key: bool, quote: u8, escape: bool, hex: u8 },
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
    /// Python literals are read too.
    python: bool,
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
            Expect::KeyOrClose | Expect::Key if b == b'"' || (self.python && b == b'\'') => {
                self.expect = Expect::Str { key: true, quote: b, escape: false, hex: 0 };
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
            // Python keeps an escape it does not know as written: any byte may follow a backslash.
            Expect::Str { key, quote, escape: true, .. } if self.python => {
                self.expect = Expect::Str { key, quote, escape: false, hex: 0 };
                Step::Next
            }
            Expect::Str { key, quote, escape: true, .. } => match b {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {
                    self.expect = Expect::Str { key, quote, escape: false, hex: 0 };
                    Step::Next
                }
                b'u' => {
                    self.expect = Expect::Str { key, quote, escape: false, hex: 4 };
                    Step::Next
                }
                _ => Step::Invalid,
            },
            Expect::Str { key, quote, hex: hex @ 1.., .. } => {
                if !b.is_ascii_hexdigit() {
                    return Step::Invalid;
                }
                self.expect = Expect::Str { key, quote, escape: false, hex: hex - 1 };
                Step::Next
            }
            Expect::Str { key, quote, .. } => {
                match b {
                    b'\\' => self.expect = Expect::Str { key, quote, escape: true, hex: 0 },
                    _ if b == quote && key => self.expect = Expect::Colon,
                    _ if b == quote => return self.value_done(),
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
            b'"' => Expect::Str { key: false, quote: b, escape: false, hex: 0 },
            b'\'' if self.python => Expect::Str { key: false, quote: b, escape: false, hex: 0 },
            b'-' => Expect::Number(Num::Minus),
            b'0' => Expect::Number(Num::Zero),
            b'1'..=b'9' => Expect::Number(Num::Int),
            b't' => Expect::Literal(b"true", 1),
            b'f' => Expect::Literal(b"false", 1),
            b'n' => Expect::Literal(b"null", 1),
            b'T' if self.python => Expect::Literal(b"True", 1),
            b'F' if self.python => Expect::Literal(b"False", 1),
            b'N' if self.python => Expect::Literal(b"None", 1),
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

    #[test]
    fn python_mode_reads_python_literals_and_json_alike() {
        let values = [
            r#"{'a': 'x\'y"}', "b": [True, False, None], 'c': {'d': -1.5}}"#,
            r#"{"a": "\u00e9", "b": null}"#,
            r"'\x41\n'",
            "['}', \"]\"]",
        ];
        for value in values {
            let text = format!("{value} tail");
            for mut scan in [JsonEnd::strict().python(true), JsonEnd::default().python(true)] {
                let ends: Vec<JsonScan> = (1..=text.len()).map(|n| scan.scan(&text[..n], false)).collect();
                assert_eq!(ends.iter().find(|e| **e != JsonScan::More), Some(&JsonScan::End(value.len())), "{value}");
            }
        }
        let strict = |text: &str| JsonEnd::strict().python(true).scan(text, false);
        assert_eq!(strict("{'a': Tru }"), JsonScan::Invalid(9));
        assert_eq!(strict("{'a' 1}"), JsonScan::Invalid(5));
        assert_eq!(strict("{'a': 1, }"), JsonScan::Invalid(9));
        assert_eq!(strict("{'a': 'x"), JsonScan::More);
        // A top-level literal ends at a delimiter, as JSON's do.
        assert_eq!(JsonEnd::default().python(true).scan("None ", false), JsonScan::End(4));
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
