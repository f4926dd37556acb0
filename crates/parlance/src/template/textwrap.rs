//! Python's `textwrap.wrap` as Jinja2's `wordwrap` filter calls it (no tab expansion, whitespace
//! kept as written, whitespace dropped at line ends): the text cut into chunks (runs of whitespace,
//! words, and with `break_on_hyphens` the pieces of hyphenated words and em-dashes), then lines
//! filled greedily up to `width` characters, a word longer than a line cut (at its last hyphen that
//! fits, when breaking on hyphens).
//!
//! Characters are counted as Python counts them (code points). Whitespace is textwrap's own set
//! (`\t\n\v\f\r` and space, ASCII only); a word character is Python's `\w` and a letter a word
//! character that is not a digit, both approximated by Rust's Unicode properties.

/// textwrap's whitespace: these six ASCII characters and no other.
fn is_ws(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\u{0b}' | '\u{0c}' | '\r' | ' ')
}

/// Python's `\w`.
fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `[^\d\W]`: a word character that is not a digit.
fn is_letter(c: char) -> bool {
    is_word(c) && !c.is_numeric()
}

/// textwrap's `word_punct`: `[\w!"'&.,?]`.
fn is_word_punct(c: char) -> bool {
    is_word(c) || matches!(c, '!' | '"' | '\'' | '&' | '.' | ',' | '?')
}

/// At `at`: two or more hyphens, then a word character (an em-dash before a word).
fn em_dash_at(chars: &[char], at: usize) -> Option<usize> {
    let run = chars[at..].iter().take_while(|&&c| c == '-').count();
    (run >= 2 && chars.get(at + run).is_some_and(|&c| is_word(c))).then_some(run)
}

/// The chunks `text` splits into, as textwrap's `wordsep_re` (with hyphens) or `wordsep_simple_re`
/// finds them: every character belongs to one.
fn chunks(chars: &[char], break_on_hyphens: bool) -> Vec<&[char]> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < chars.len() {
        let len = chunk_len(chars, at, break_on_hyphens);
        out.push(&chars[at..at + len]);
        at += len;
    }
    out
}

/// The length of the chunk that starts at `at` (at least one character).
fn chunk_len(chars: &[char], at: usize, break_on_hyphens: bool) -> usize {
    let n = chars.len();
    if is_ws(chars[at]) {
        return chars[at..].iter().take_while(|&&c| is_ws(c)).count();
    }
    if !break_on_hyphens {
        return chars[at..].iter().take_while(|&&c| !is_ws(c)).count();
    }
    // An em-dash between words: after a word character or punctuation.
    if at > 0
        && is_word_punct(chars[at - 1])
        && let Some(run) = em_dash_at(chars, at)
    {
        return run;
    }
    // The shortest run of non-whitespace followed by: a hyphen that splits a hyphenated word,
    // the end of the word, or an em-dash.
    let mut end = at + 1;
    loop {
        // `end` is where the run stops; the character at `end` decides.
        let hyphen_split = chars.get(end) == Some(&'-') && {
            // After the hyphen (at `end + 1`): two letters before it, or letter-hyphen-letter-hyphen.
            let h = end + 1;
            let before = |k: usize| h.checked_sub(k).map(|i| chars[i]);
            let two_letters = before(3).is_some_and(is_letter) && before(2).is_some_and(is_letter);
            let lt_h_lt_h =
                before(4).is_some_and(is_letter) && before(3) == Some('-') && before(2).is_some_and(is_letter);
            // (Python's lookbehind reads back past the chunk's start: indices are the text's.)
            let ahead = chars.get(h).is_some_and(|&c| is_letter(c))
                && (chars.get(h + 1).is_some_and(|&c| is_letter(c))
                    || (chars.get(h + 1) == Some(&'-') && chars.get(h + 2).is_some_and(|&c| is_letter(c))));
            (two_letters || lt_h_lt_h) && ahead
        };
        if hyphen_split {
            return end + 1 - at;
        }
        if end == n || is_ws(chars[end]) {
            return end - at;
        }
        if is_word_punct(chars[end - 1]) && em_dash_at(chars, end).is_some() {
            return end - at;
        }
        end += 1;
    }
}

/// Whether a chunk is whitespace as `str.strip()` sees it (any Unicode whitespace).
fn blank(chunk: &[char]) -> bool {
    chunk.iter().all(|c| c.is_whitespace())
}

/// `textwrap.wrap(text, width, expand_tabs=False, replace_whitespace=False, break_long_words,
/// break_on_hyphens)`; `width` is at least 1.
pub(crate) fn wrap(text: &str, width: usize, break_long_words: bool, break_on_hyphens: bool) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    // Reversed, as textwrap keeps them: the next chunk is the last.
    let mut pending: Vec<Vec<char>> =
        chunks(&chars, break_on_hyphens).into_iter().rev().map(<[char]>::to_vec).collect();
    let mut lines: Vec<String> = Vec::new();
    while !pending.is_empty() {
        let mut line: Vec<Vec<char>> = Vec::new();
        let mut len = 0;
        // Whitespace does not begin a line (but the first).
        if !lines.is_empty() && pending.last().is_some_and(|c| blank(c)) {
            pending.pop();
        }
        while let Some(next) = pending.last() {
            if len + next.len() > width {
                break;
            }
            len += next.len();
            line.push(pending.pop().unwrap_or_default());
        }
        if pending.last().is_some_and(|c| c.len() > width) {
            long_word(&mut pending, &mut line, len, width, break_long_words, break_on_hyphens);
        }
        // Nor ends one.
        if line.last().is_some_and(|c| blank(c)) {
            line.pop();
        }
        if !line.is_empty() {
            lines.push(line.concat().into_iter().collect());
        }
    }
    lines
}

/// textwrap's `_handle_long_word`: a chunk longer than a whole line is cut to what is left of the
/// line (at its last hyphen that fits, when breaking on hyphens), or, when words are not broken,
/// put whole on a line of its own.
fn long_word(
    pending: &mut Vec<Vec<char>>,
    line: &mut Vec<Vec<char>>,
    len: usize,
    width: usize,
    break_long_words: bool,
    break_on_hyphens: bool,
) {
    let space_left = width - len;
    let Some(chunk) = pending.last_mut() else { return };
    if break_long_words {
        let mut end = space_left;
        if break_on_hyphens && chunk.len() > space_left {
            // `chunk.rfind('-', 0, space_left)`, kept when something other than hyphens is before it.
            if let Some(hyphen) = chunk[..space_left.min(chunk.len())].iter().rposition(|&c| c == '-')
                && hyphen > 0
                && chunk[..hyphen].iter().any(|&c| c != '-')
            {
                end = hyphen + 1;
            }
        }
        let end = end.min(chunk.len());
        line.push(chunk[..end].to_vec());
        chunk.drain(..end);
    } else if line.is_empty() {
        line.extend(pending.pop());
    }
}

#[cfg(test)]
mod tests {
    use super::wrap;

    #[test]
    fn lines_fill_greedily_and_drop_whitespace_at_their_ends() {
        assert_eq!(wrap("The quick brown fox jumps", 10, true, true), ["The quick", "brown fox", "jumps"]);
        assert_eq!(wrap("  lead", 10, true, true), ["  lead"]);
        assert!(wrap("   ", 5, true, true).is_empty());
    }

    proptest::proptest! {
        /// Any text, any width: wrapping ends, drops nothing but whitespace, and keeps every line
        /// within the width (or, when long words are not broken, a line longer than it holds one
        /// chunk that had no room anywhere).
        #[test]
        fn wrapping_keeps_every_word_and_the_width(
            text in "[a-c1é漢 \\-\t\n\u{a0}.,!]{0,60}",
            width in 1usize..12,
            break_long_words: bool,
            break_on_hyphens: bool,
        ) {
            let lines = wrap(&text, width, break_long_words, break_on_hyphens);
            let kept: String = lines.concat().chars().filter(|c| !c.is_whitespace()).collect();
            let given: String = text.chars().filter(|c| !c.is_whitespace()).collect();
            proptest::prop_assert_eq!(kept, given);
            for line in &lines {
                let long = line.chars().count() > width;
                // One chunk: no textwrap whitespace inside (a no-break space is not one).
                proptest::prop_assert!(!long || (!break_long_words && !line.contains(super::is_ws)), "{line:?}");
            }
        }
    }

    #[test]
    fn long_words_break_at_a_hyphen_that_fits() {
        assert_eq!(wrap("abcdefghij", 4, true, true), ["abcd", "efgh", "ij"]);
        assert_eq!(wrap("abcdefghij", 4, false, true), ["abcdefghij"]);
        assert_eq!(wrap("well-known-thing", 6, true, true), ["well-", "known-", "thing"]);
    }
}
