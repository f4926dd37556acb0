//! Input text shown in error messages: control characters escaped, length bounded.
//!
//! Errors name where in a schema or structural tag they happened and quote the text at fault (a
//! pattern); both come from the request, so an error never carries a raw newline or escape sequence
//! of it, nor all of a long one.

use std::borrow::Cow;

/// Characters of a pointer shown whole; a longer one keeps its start and its end (the keyword).
const POINTER_CHARS: usize = 160;

/// Characters of quoted text shown before it is cut.
const QUOTED_CHARS: usize = 80;

/// A JSON pointer as an error shows it: control characters escaped (`\n`, `\u{1b}`), and past
/// [`POINTER_CHARS`] its middle left out.
pub(crate) fn pointer(p: &str) -> Cow<'_, str> {
    let count = p.chars().count();
    if count <= POINTER_CHARS && !p.chars().any(char::is_control) {
        return Cow::Borrowed(p);
    }
    let escaped = |s: &mut String, c: char| {
        if c.is_control() { s.extend(c.escape_default()) } else { s.push(c) }
    };
    let mut out = String::new();
    if count <= POINTER_CHARS {
        p.chars().for_each(|c| escaped(&mut out, c));
    } else {
        let half = POINTER_CHARS / 2;
        p.chars().take(half).for_each(|c| escaped(&mut out, c));
        out.push('…');
        p.chars().skip(count - half).for_each(|c| escaped(&mut out, c));
    }
    Cow::Owned(out)
}

/// `text` in double quotes with Rust's escapes, cut after [`QUOTED_CHARS`] characters (the cut
/// marked `…` and the whole length given).
pub(crate) fn quoted(text: &str) -> String {
    let count = text.chars().count();
    if count <= QUOTED_CHARS {
        return format!("{text:?}");
    }
    let head: String = text.chars().take(QUOTED_CHARS).collect();
    format!("{:?}… ({count} characters)", head)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_are_escaped_and_bounded() {
        assert_eq!(pointer("#/properties/a"), "#/properties/a");
        assert_eq!(pointer("#/properties/a\nb\u{1b}"), "#/properties/a\\nb\\u{1b}");
        let long = format!("#/properties/{}/pattern", "x".repeat(1000));
        let shown = pointer(&long);
        assert!(shown.starts_with("#/properties/xx") && shown.ends_with("xx/pattern"), "{shown}");
        assert!(shown.chars().count() <= POINTER_CHARS + 1, "{shown}");
    }

    #[test]
    fn quoted_text_is_escaped_and_bounded() {
        assert_eq!(quoted("(a\n"), "\"(a\\n\"");
        let shown = quoted(&"y".repeat(500));
        assert!(shown.ends_with("\"… (500 characters)") && shown.chars().count() < 110, "{shown}");
    }
}
