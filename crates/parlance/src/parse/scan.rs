//! Text scanning primitives of the output parser: markers that may be cut at a chunk end (where a JSON
//! value ends is `crate::values::JsonEnd`'s).

/// The length of `text`'s leading whitespace.
pub(crate) fn leading_ws(text: &str) -> usize {
    text.len() - text.trim_start().len()
}

/// Length of the longest proper prefix of `marker` that `text` ends with: the bytes a streaming
/// parser must hold back because the next chunk may complete the marker.
pub(crate) fn partial_suffix(text: &str, marker: &str) -> usize {
    let Some(&first) = marker.as_bytes().first() else { return 0 };
    let max = marker.len().saturating_sub(1).min(text.len());
    let tail = &text.as_bytes()[text.len() - max..];
    // Only where the marker's first byte is can a prefix of it start: left to right is longest
    // first. (Every length tried in turn cost a comparison each, per marker, per streamed chunk.)
    memchr::memchr_iter(first, tail)
        .map(|i| max - i)
        .find(|&k| {
            marker.is_char_boundary(k)
                && text.is_char_boundary(text.len() - k)
                && tail[max - k..] == marker.as_bytes()[..k]
        })
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
    // memchr's one-off search, not `str::find`: most searches here are short, and `str::find`
    // prepares a two-way searcher for its needle on every call (the most of a search of a few
    // dozen bytes). A match of valid UTF-8 in valid UTF-8 starts at a character boundary.
    if head_len == marker.len() {
        return memchr::memmem::find(text.as_bytes(), marker.as_bytes()).map(|at| (at, at + marker.len()));
    }
    let head = &marker[..head_len];
    let mut from = 0;
    while let Some(i) = memchr::memmem::find(&text.as_bytes()[from..], head.as_bytes()) {
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
    /// `hold_window(marker)`.
    window: usize,
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
            window: hold_window(marker),
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
                // Nothing was there and nothing came since.
                None if entry.upto == buf.len() => return None,
                // Only a match that the end of the buffer cut off may start before `upto`.
                None => start = entry.upto.saturating_sub(entry.window).max(from),
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
    // Runs of non-whitespace, counted on bytes (whitespace here is ASCII).
    let mut runs = 0;
    let mut in_run = false;
    for &b in marker.as_bytes() {
        let word = !b.is_ascii_whitespace();
        runs += usize::from(word && !in_run);
        in_run = word;
    }
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

        /// The held suffix is the longest proper prefix of the marker the text ends with, at
        /// character boundaries, as its definition says (tried length by length here).
        #[test]
        fn partial_suffix_is_the_longest_held_prefix(text in "(<|/|t|h|é|｜|x)*", marker in "(<|/|t|h|é|｜|x)*") {
            let by_definition = (1..marker.len().min(text.len() + 1))
                .rev()
                .find(|&k| marker.is_char_boundary(k) && text.is_char_boundary(text.len() - k) && text.ends_with(&marker[..k]))
                .unwrap_or(0);
            prop_assert_eq!(partial_suffix(&text, &marker), by_definition);
        }

        /// The window counts the marker's runs of non-whitespace, as splitting it says.
        #[test]
        fn hold_window_counts_word_runs(marker in "(<|a|é| |\n|\t)*") {
            let runs = marker.split(|c: char| c.is_ascii_whitespace()).filter(|p| !p.is_empty()).count();
            prop_assert_eq!(hold_window(&marker), marker.len() + MAX_LOOSE_WS * runs.max(1));
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
}
