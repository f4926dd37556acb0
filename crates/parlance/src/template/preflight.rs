//! Checks on template text before it reaches the Jinja parser.
//!
//! minijinja bounds statement and bracket nesting while parsing, but long operator chains inside one
//! tag (`{{ 1~1~1~…}}`, `{{ ----…x }}`, `{{ x.a.a.a… }}`) build expression trees whose depth grows
//! with the tag's length, and compiling or dropping them recurses once per level: a crafted template
//! of 40 KB overflows the stack (found by `fuzz/`, see `fuzz/regressions/render/stack_overflow_*`).
//! Real chat templates keep every tag short (the longest in the corpus has 210 characters of code,
//! string literals excluded), so a cap on the code size of a tag bounds the depth. The cap keeps the
//! deepest chain within half a megabyte of stack even in debug builds (about 1 KiB per level there;
//! a 2 MiB test thread overflows near 1,985 levels).

/// Most characters of code (not whitespace, not inside string literals) one tag may hold.
pub(crate) const MAX_TAG_CODE: usize = 600;

/// A tag whose code is larger than `MAX_TAG_CODE`: its 1-based line and code size.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct OversizedTag {
    pub line: usize,
    pub code: usize,
}

/// Finds the first tag (`{{ … }}` or `{% … %}`) with more than `MAX_TAG_CODE` characters of code.
pub(crate) fn find_oversized_tag(text: &str) -> Option<OversizedTag> {
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut line = 1;
    let mut in_raw = false;
    while i + 1 < bytes.len() {
        let (open, close): (&[u8], &[u8]) = match &bytes[i..i + 2] {
            b"{{" if !in_raw => (b"{{", b"}}"),
            b"{%" => (b"{%", b"%}"),
            b"{#" if !in_raw => (b"{#", b"#}"),
            [b'\n', _] => {
                line += 1;
                i += 1;
                continue;
            }
            _ => {
                i += 1;
                continue;
            }
        };
        let tag_line = line;
        let mut j = i + open.len();
        let mut code = 0usize;
        let mut word = Vec::new();
        let mut quote: Option<u8> = None;
        while j < bytes.len() {
            let b = bytes[j];
            if b == b'\n' {
                line += 1;
            }
            match quote {
                Some(q) => {
                    if b == b'\\' {
                        j += 1;
                    } else if b == q {
                        quote = None;
                    }
                }
                None if open == b"{#" => {
                    if bytes[j..].starts_with(close) {
                        break;
                    }
                }
                None => {
                    if bytes[j..].starts_with(close) {
                        break;
                    }
                    if b == b'"' || b == b'\'' {
                        quote = Some(b);
                    } else if !b.is_ascii_whitespace() {
                        code += 1;
                        if word.len() < 16 && b != b'-' && b != b'+' {
                            word.push(b);
                        }
                    }
                }
            }
            j += 1;
        }
        if code > MAX_TAG_CODE {
            return Some(OversizedTag { line: tag_line, code });
        }
        if open == b"{%" {
            // Inside `{% raw %}` only `{% endraw %}` matters.
            match word.as_slice() {
                b"raw" => in_raw = true,
                b"endraw" => in_raw = false,
                _ => {}
            }
        }
        i = (j + close.len()).min(bytes.len());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_operator_chains_are_found_and_literals_are_not_counted() {
        let chain = format!("a\n{{{{ {} }}}}", "1~".repeat(300) + "1");
        assert_eq!(find_oversized_tag(&chain), Some(OversizedTag { line: 2, code: 601 }));
        let literal = format!("{{{{ '{}' }}}}", "x".repeat(10_000));
        assert_eq!(find_oversized_tag(&literal), None);
        let raw = format!("{{% raw %}}{{{{ {} }}}}{{% endraw %}}", "-".repeat(5_000));
        assert_eq!(find_oversized_tag(&raw), None);
        let comment = format!("{{# {} #}}", "-".repeat(5_000));
        assert_eq!(find_oversized_tag(&comment), None);
    }
}
