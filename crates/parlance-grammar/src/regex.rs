//! Regular expressions (grammar terminals, JSON Schema `pattern`) lowered into the grammar IR.
//!
//! `regex-syntax` parses the pattern into its HIR; this module translates the HIR into [`Expr`] nodes
//! (literals, Unicode classes, repetitions), which the automaton compiler turns into UTF-8 byte edges.
//! In JSON-string mode every character becomes its escaped form inside a JSON string literal and the
//! pattern is a search (unanchored unless it says `^` / `$`), as JSON Schema specifies.

use crate::grammar::Expr;
use regex_syntax::hir::{Class, Hir, HirKind, Look};

/// How a pattern is embedded.
pub(crate) enum RegexMode<'a> {
    /// A grammar terminal: the whole terminal matches the pattern; `^`/`$` at the ends are no-ops.
    Terminal,
    /// JSON Schema `pattern` on a string's content: characters are JSON-escaped; unanchored ends match
    /// any characters (`any_char` is the expression of one JSON string character).
    JsonString { any_char: &'a Expr },
}

/// Nesting depth passed to `regex-syntax`, so hostile patterns fail cleanly instead of overflowing.
const NEST_LIMIT: u32 = 100;

/// ECMA-262 (JSON Schema's dialect) `\d` and `\w` are ASCII-only; `regex-syntax` makes them Unicode.
fn ecma_to_rust(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('d') => out.push_str("[0-9]"),
            Some('D') => out.push_str("[^0-9]"),
            Some('w') => out.push_str("[A-Za-z0-9_]"),
            Some('W') => out.push_str("[^A-Za-z0-9_]"),
            Some(n) => {
                out.push('\\');
                out.push(n);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// Translates `pattern` into a grammar expression.
pub(crate) fn regex_to_expr(pattern: &str, mode: RegexMode<'_>) -> Result<Expr, String> {
    let source = match mode {
        RegexMode::Terminal => pattern.to_string(),
        RegexMode::JsonString { .. } => ecma_to_rust(pattern),
    };
    let hir = regex_syntax::ParserBuilder::new()
        .nest_limit(NEST_LIMIT)
        .build()
        .parse(&source)
        .map_err(|e| format!("invalid regex {}: {}", crate::shown::quoted(pattern), regex_error(&e)))?;
    let json = matches!(mode, RegexMode::JsonString { .. });
    let any = match mode {
        RegexMode::JsonString { any_char } => Some(any_char),
        RegexMode::Terminal => None,
    };
    top(&hir, json, any)
}

/// What is wrong with a regex, in one line: regex-syntax's own message quotes the whole pattern over
/// several lines (its raw control characters included).
pub(crate) fn regex_error(e: &regex_syntax::Error) -> String {
    match e {
        regex_syntax::Error::Parse(e) => e.kind().to_string(),
        regex_syntax::Error::Translate(e) => e.kind().to_string(),
        other => crate::shown::quoted(&other.to_string()),
    }
}

fn top(hir: &Hir, json: bool, any: Option<&Expr>) -> Result<Expr, String> {
    match hir.kind() {
        HirKind::Alternation(alts) => {
            Ok(Expr::alt(alts.iter().map(|h| branch(h, json, any)).collect::<Result<Vec<_>, _>>()?))
        }
        HirKind::Capture(c) => top(&c.sub, json, any),
        _ => branch(hir, json, any),
    }
}

fn branch(hir: &Hir, json: bool, any: Option<&Expr>) -> Result<Expr, String> {
    // Groups inside the top-level sequence are inlined so that `(^abc$)` and `^(a)(b)$` show their
    // anchors at the ends.
    let mut parts: Vec<&Hir> = Vec::new();
    let mut stack = vec![hir];
    while let Some(h) = stack.pop() {
        match h.kind() {
            HirKind::Concat(ps) => stack.extend(ps.iter().rev()),
            HirKind::Capture(c) if matches!(c.sub.kind(), HirKind::Concat(_) | HirKind::Look(_)) => stack.push(&c.sub),
            _ => parts.push(h),
        }
    }
    let is_start = |h: &Hir| matches!(h.kind(), HirKind::Look(Look::Start));
    let is_end = |h: &Hir| matches!(h.kind(), HirKind::Look(Look::End));
    let mut anchored_start = false;
    while parts.first().is_some_and(|h| is_start(h)) {
        parts.remove(0);
        anchored_start = true;
    }
    let mut anchored_end = false;
    while parts.last().is_some_and(|h| is_end(h)) {
        parts.pop();
        anchored_end = true;
    }
    // `^(?:$|a$)`: an alternation whose every branch starts (ends) with the anchor.
    let mut owned: Vec<Hir> = parts.iter().map(|h| (*h).clone()).collect();
    if !anchored_start
        && let Some(first) = owned.first()
        && let Some(stripped) = strip_look(first, Look::Start)
    {
        owned[0] = stripped;
        anchored_start = true;
    }
    if !anchored_end
        && let Some(last) = owned.last()
        && let Some(stripped) = strip_look(last, Look::End)
    {
        let n = owned.len();
        owned[n - 1] = stripped;
        anchored_end = true;
    }
    let parts: Vec<&Hir> = owned.iter().collect();
    let mut out = Vec::with_capacity(parts.len() + 2);
    if let Some(any) = any
        && !anchored_start
    {
        out.push(Expr::repeat(any.clone(), 0, None));
    }
    for p in parts {
        out.push(convert(p, json)?);
    }
    if let Some(any) = any
        && !anchored_end
    {
        out.push(Expr::repeat(any.clone(), 0, None));
    }
    Ok(Expr::seq(out))
}

/// `h` without the anchor `look` at its start (`Look::Start`) or end (`Look::End`), if every path
/// through it has the anchor there.
fn strip_look(h: &Hir, look: Look) -> Option<Hir> {
    match h.kind() {
        HirKind::Look(l) if *l == look => Some(Hir::empty()),
        HirKind::Concat(ps) if !ps.is_empty() => {
            let mut ps = ps.clone();
            let i = if look == Look::Start { 0 } else { ps.len() - 1 };
            ps[i] = strip_look(&ps[i], look)?;
            Some(Hir::concat(ps))
        }
        HirKind::Alternation(ps) => {
            Some(Hir::alternation(ps.iter().map(|p| strip_look(p, look)).collect::<Option<Vec<_>>>()?))
        }
        HirKind::Capture(c) => strip_look(&c.sub, look),
        _ => None,
    }
}

/// The text of `c` inside a JSON string literal, as `json.dumps` writes it.
pub(crate) fn json_escape_char(c: char) -> String {
    match c {
        '"' => "\\\"".into(),
        '\\' => "\\\\".into(),
        '\n' => "\\n".into(),
        '\r' => "\\r".into(),
        '\t' => "\\t".into(),
        '\u{8}' => "\\b".into(),
        '\u{c}' => "\\f".into(),
        c if (c as u32) < 0x20 => format!("\\u{:04x}", c as u32),
        c => c.to_string(),
    }
}

/// A class of characters, written as they appear inside a JSON string literal.
pub(crate) fn json_class(ranges: &[(char, char)]) -> Expr {
    let mut raw = Vec::new();
    let mut escaped = Vec::new();
    for &(lo, hi) in ranges {
        let (lo, hi) = (lo as u32, hi as u32);
        // Characters below 0x20, '"' and '\\' must be escaped; everything else stays raw.
        let mut start = lo;
        for special in (0..0x20).chain([0x22, 0x5c]) {
            if special < start || special > hi {
                continue;
            }
            if special > start {
                raw.push((start, special - 1));
            }
            escaped.push(Expr::literal(json_escape_char(char::from_u32(special).expect("ascii"))));
            start = special + 1;
        }
        if start <= hi {
            raw.push((start, hi));
        }
    }
    let mut alts: Vec<Expr> = Vec::new();
    if !raw.is_empty() {
        let ranges = raw.into_iter().filter_map(|(a, b)| Some((char::from_u32(a)?, char::from_u32(b)?))).collect();
        alts.push(Expr::CharClass { negated: false, ranges });
    }
    alts.extend(escaped);
    match alts.len() {
        0 => Expr::CharClass { negated: false, ranges: Vec::new() },
        _ => Expr::alt(alts),
    }
}

fn convert(hir: &Hir, json: bool) -> Result<Expr, String> {
    Ok(match hir.kind() {
        HirKind::Empty => Expr::Empty,
        HirKind::Literal(lit) => {
            let text = std::str::from_utf8(&lit.0).map_err(|_| "regex literal is not UTF-8".to_string())?;
            if json {
                Expr::literal(text.chars().map(json_escape_char).collect::<String>())
            } else {
                Expr::literal(text)
            }
        }
        HirKind::Class(Class::Unicode(cls)) => {
            let ranges: Vec<(char, char)> = cls.ranges().iter().map(|r| (r.start(), r.end())).collect();
            if json { json_class(&ranges) } else { Expr::CharClass { negated: false, ranges } }
        }
        HirKind::Class(Class::Bytes(cls)) => {
            if cls.ranges().iter().any(|r| r.end() >= 0x80) {
                return Err("byte classes beyond ASCII are not supported".into());
            }
            let ranges: Vec<(char, char)> = cls.ranges().iter().map(|r| (r.start() as char, r.end() as char)).collect();
            if json { json_class(&ranges) } else { Expr::CharClass { negated: false, ranges } }
        }
        HirKind::Look(look) => return Err(format!("regex assertion {look:?} is only supported at the ends")),
        HirKind::Repetition(rep) => Expr::repeat(convert(&rep.sub, json)?, rep.min, rep.max),
        HirKind::Capture(cap) => convert(&cap.sub, json)?,
        HirKind::Concat(parts) => Expr::seq(parts.iter().map(|h| convert(h, json)).collect::<Result<_, _>>()?),
        HirKind::Alternation(parts) => Expr::alt(parts.iter().map(|h| convert(h, json)).collect::<Result<_, _>>()?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ecma_classes_are_ascii() {
        assert_eq!(ecma_to_rust(r"\d+\\d[\w]"), r"[0-9]+\\d[[A-Za-z0-9_]]");
    }

    #[test]
    fn json_class_escapes_quote_and_backslash() {
        let e = json_class(&[('!', '#'), ('\\', '\\')]);
        let Expr::Alt(parts) = e else { panic!("expected alternation") };
        assert_eq!(parts[0], Expr::CharClass { negated: false, ranges: vec![('!', '!'), ('#', '#')] });
        assert_eq!(parts[1], Expr::literal("\\\""));
        assert_eq!(parts[2], Expr::literal("\\\\"));
    }

    #[test]
    fn anchors_common_to_all_branches_are_stripped() {
        let any = Expr::CharClass { negated: true, ranges: Vec::new() };
        let e = regex_to_expr(r"^$|^\d{1,2}(?:\.\d)?$", RegexMode::JsonString { any_char: &any });
        assert!(e.is_ok(), "{e:?}");
        assert!(regex_to_expr("^(?:a$|b)", RegexMode::JsonString { any_char: &any }).is_err());
    }

    #[test]
    fn inner_anchor_is_an_error() {
        assert!(regex_to_expr("a^b", RegexMode::Terminal).is_err());
        assert!(regex_to_expr("^ab$", RegexMode::Terminal).is_ok());
        assert!(regex_to_expr("(", RegexMode::Terminal).is_err());
    }
}
