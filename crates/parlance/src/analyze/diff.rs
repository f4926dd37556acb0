//! JSON values found in probe renders (where each starts and ends, in time linear in the text), and
//! searching from an offset. The marker-aware diffs the analysis is built on are in
//! [`crate::markers`].

use crate::values::{JsonEnd, JsonScan};

/// Position of `needle` in `haystack` at or after `from`.
pub(crate) fn find_from(haystack: &str, needle: &str, from: usize) -> Option<usize> {
    haystack.get(from..)?.find(needle).map(|i| i + from)
}

/// JSON values (objects and arrays) that parse at top level in `text`, leftmost first, each
/// after the last: `(start, end, value)`. Found lazily, in time linear in the text in practice:
/// a scan from an opening bracket that fails decides every bracket it read outside strings (a
/// bracket it saw close is a value; one still open where the scan failed fails there too, as the
/// same bytes follow it), so only brackets that a failed scan read inside strings are scanned again.
pub(crate) fn json_values(text: &str) -> JsonValues<'_> {
    JsonValues { text, pos: 0, decided: std::collections::HashMap::new() }
}

/// The iterator [`json_values`] returns.
pub(crate) struct JsonValues<'t> {
    text: &'t str,
    pos: usize,
    /// Brackets a failed scan decided: `Some(end)` for a value ending there, `None` for none.
    decided: std::collections::HashMap<usize, Option<usize>>,
}

impl JsonValues<'_> {
    /// Where the value opening at `start` ends, if one does.
    fn value_end(&mut self, start: usize) -> Option<usize> {
        if let Some(&end) = self.decided.get(&start) {
            return end;
        }
        let mut scan = JsonEnd::strict();
        let failed_at = match scan.scan(&self.text[start..], true) {
            JsonScan::End(n) => return Some(start + n),
            JsonScan::Invalid(at) => start + at,
            JsonScan::More => self.text.len(),
        };
        self.decide_inner(start, failed_at);
        None
    }

    /// Records what the failed scan from `start` (which read valid JSON up to `failed_at`) says
    /// of the brackets it read outside strings.
    fn decide_inner(&mut self, start: usize, failed_at: usize) {
        let bytes = &self.text.as_bytes()[..failed_at];
        let (mut open, mut in_string, mut escaped) = (Vec::new(), false, false);
        for (i, &b) in bytes.iter().enumerate().skip(start + 1) {
            if in_string {
                match b {
                    _ if escaped => escaped = false,
                    b'\\' => escaped = true,
                    b'"' => in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => in_string = true,
                b'{' | b'[' => open.push(i),
                b'}' | b']' => {
                    if let Some(at) = open.pop() {
                        self.decided.insert(at, Some(i + 1));
                    }
                }
                _ => {}
            }
        }
        // Still open where the scan failed: the same bytes make a scan from them fail there too,
        // unless the failure was the scanner's depth bound, which a deeper start reaches later:
        // then only those already nested deeper than serde reads (no value) are decided.
        let depth_bound = open.len() + 1 >= SCANNER_DEPTH;
        let deepest = open.len();
        for (level, at) in open.into_iter().enumerate() {
            if !depth_bound || deepest - level > SERDE_DEPTH {
                self.decided.insert(at, None);
            }
        }
    }
}

/// Nesting at which the strict scanner gives up (its `MAX_DEPTH`, with a margin).
const SCANNER_DEPTH: usize = 500;
/// Nesting beyond which serde_json reads no value (its recursion limit is 128).
const SERDE_DEPTH: usize = 130;

impl Iterator for JsonValues<'_> {
    type Item = (usize, usize, serde_json::Value);

    fn next(&mut self) -> Option<Self::Item> {
        while let Some(at) = memchr::memchr2(b'{', b'[', &self.text.as_bytes()[self.pos.min(self.text.len())..]) {
            let start = self.pos + at;
            self.pos = start + 1;
            let Some(end) = self.value_end(start) else { continue };
            // The scanner lets raw control characters through strings; a value is what serde reads.
            if let Ok(value) = serde_json::from_str::<serde_json::Value>(&self.text[start..end]) {
                self.pos = end;
                return Some((start, end, value));
            }
        }
        self.pos = self.text.len();
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_values_are_found_linearly_with_their_spans() {
        // Brackets that never close, nested, flat, inside strings: each found value is what serde
        // reads at the leftmost bracket that opens one.
        let cases = [
            "[1, {\"a\": 1} x [2] \"[3]\" {\"b\": [\"{\"]}",
            "\"[1]\" {\"s\": \"{\\\"x\\\": 1}\"} [[[[1]]",
            "{\"a\": [1, {\"b\": 2}, [3, 4]] ]  {\"c\"",
        ];
        for text in cases {
            let mut naive = Vec::new();
            let mut i = 0;
            while i < text.len() {
                if text[i..].starts_with(['{', '[']) {
                    let mut stream = serde_json::Deserializer::from_str(&text[i..]).into_iter::<serde_json::Value>();
                    if let Some(Ok(value)) = stream.next() {
                        naive.push((i, i + stream.byte_offset(), value));
                        i += stream.byte_offset();
                        continue;
                    }
                }
                i += 1;
            }
            assert_eq!(json_values(text).collect::<Vec<_>>(), naive, "{text}");
        }
        // 200,000 brackets that never close, nested and flat: a scan from each would read them all.
        for unit in ["[{\"name\": ", "[1, ", "{\"k\": \"[", "] [", "[\"]", "] "] {
            let text = format!("{}[1]", unit.repeat(200_000));
            let started = std::time::Instant::now();
            let found: Vec<_> = json_values(&text).collect();
            assert!(started.elapsed() < std::time::Duration::from_secs(3), "{unit:?}: {:?}", started.elapsed());
            assert!(!found.is_empty(), "{unit:?}");
        }
    }

    #[test]
    fn json_values_are_found_with_their_spans() {
        let found: Vec<_> =
            json_values("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call> [1, 2] {bad").collect();
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].0, 12);
        assert_eq!(found[1].2, serde_json::json!([1, 2]));
    }
}
