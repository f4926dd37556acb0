//! The spellings of one JSON value, for `const` and `enum`: JSON Schema compares instances with
//! them as values, so `1`, `1.0` and `1.00` all equal `const: 1`, and `"é"` equals `"\u00e9"`.
//!
//! What is spelled: every string character raw (where JSON allows it), as its short escape, or as
//! `\u` with hex digits in either case (a surrogate pair for characters beyond the BMP), except
//! that printable ASCII other than `"`, `\` and `/` is raw only; every number in positional
//! notation with any number of trailing fraction zeros (`1`, `1.0`, `1.50`), and as the schema's
//! own text; whitespace between tokens as the options say. Narrowings, listed in the module docs:
//! printable ASCII raw, an object's keys in the order the schema writes them, and numbers not in
//! exponent form unless the schema writes them so (the spellings of one number with exponents are
//! not a regular language: `1` is `10e-1`, `100e-2`, …).

use super::{Compiler, lit};
use crate::grammar::Expr;
use serde_json::Value;

/// Positional spellings longer than this (`1e300` has 301 digits) are not offered; the schema's
/// own text still is.
const POSITIONAL_DIGITS: usize = 64;

impl Compiler<'_> {
    /// Every spelling of `v` this module admits (see the module docs).
    pub(super) fn value_spellings(&self, v: &Value) -> Expr {
        match v {
            Value::Null | Value::Bool(_) => lit(&v.to_string()),
            Value::Number(_) => number_spellings(&v.to_string()),
            Value::String(s) => string_spellings(s),
            Value::Array(items) => {
                if items.is_empty() {
                    return Expr::seq(vec![self.open("["), lit("]")]);
                }
                let mut parts = vec![self.open("[")];
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        parts.push(self.item_sep());
                    }
                    parts.push(self.value_spellings(item));
                }
                parts.push(self.close("]"));
                Expr::seq(parts)
            }
            Value::Object(members) => {
                if members.is_empty() {
                    return Expr::seq(vec![self.open("{"), lit("}")]);
                }
                let mut parts = vec![self.open("{")];
                for (i, (key, value)) in members.iter().enumerate() {
                    if i > 0 {
                        parts.push(self.item_sep());
                    }
                    parts.push(string_spellings(key));
                    parts.push(self.key_sep());
                    parts.push(self.value_spellings(value));
                }
                parts.push(self.close("}"));
                Expr::seq(parts)
            }
        }
    }
}

/// A JSON string whose content is `s`, each character in any of its spellings.
pub(super) fn string_spellings(s: &str) -> Expr {
    let mut parts = vec![lit("\"")];
    for c in s.chars() {
        parts.push(char_spellings(c));
    }
    parts.push(lit("\""));
    Expr::seq(parts)
}

fn char_spellings(c: char) -> Expr {
    let mut alts = Vec::with_capacity(3);
    match c {
        '"' => alts.push(lit("\\\"")),
        '\\' => alts.push(lit("\\\\")),
        '/' => {
            alts.push(lit("/"));
            alts.push(lit("\\/"));
        }
        '\u{8}' => alts.push(lit("\\b")),
        '\u{c}' => alts.push(lit("\\f")),
        '\n' => alts.push(lit("\\n")),
        '\r' => alts.push(lit("\\r")),
        '\t' => alts.push(lit("\\t")),
        c if c < ' ' => {}
        // Printable ASCII raw only: `\u0061` for `a` is valid JSON that no model writes, and the
        // escape branch on every character made enum automata (tool schemas' `unit: [celsius,
        // fahrenheit]`) a fifth slower to build.
        c if c.is_ascii() => return lit(c.encode_utf8(&mut [0; 4])),
        c => alts.push(lit(c.encode_utf8(&mut [0; 4]))),
    }
    let mut units = [0u16; 2];
    let mut escape = Vec::new();
    for unit in c.encode_utf16(&mut units).iter() {
        escape.push(lit("\\u"));
        for shift in [12, 8, 4, 0] {
            escape.push(hex_digit(((unit >> shift) & 0xf) as u8));
        }
    }
    alts.push(Expr::seq(escape));
    Expr::alt(alts)
}

/// One hex digit, either case.
fn hex_digit(d: u8) -> Expr {
    let c = char::from_digit(d.into(), 16).expect("a hex digit");
    if c.is_ascii_digit() {
        lit(c.encode_utf8(&mut [0; 4]))
    } else {
        let u = c.to_ascii_uppercase();
        Expr::CharClass { negated: false, ranges: vec![(c, c), (u, u)] }
    }
}

/// The spellings of the number serde_json writes as `text`: the text itself, and the positional
/// form of its value with any number of trailing fraction zeros.
fn number_spellings(text: &str) -> Expr {
    let Some(positional) = positional(text) else { return lit(text) };
    let (int, frac) = positional.split_once('.').unwrap_or((&positional, ""));
    let zeros = Expr::repeat(lit("0"), 0, None);
    let form = if frac.is_empty() {
        Expr::seq(vec![lit(int), Expr::optional(Expr::seq(vec![lit("."), Expr::repeat(lit("0"), 1, None)]))])
    } else {
        Expr::seq(vec![lit(int), lit("."), lit(frac), zeros])
    };
    if positional == text { form } else { Expr::alt(vec![lit(text), form]) }
}

/// `text` (a JSON number) in positional notation without trailing fraction zeros: `1e-7` is
/// `0.0000001`, `1.5e2` is `150`, `2.0` is `2`. `None` when that is longer than
/// [`POSITIONAL_DIGITS`] or `text` is not a JSON number.
fn positional(text: &str) -> Option<String> {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(i) => (&rest[..i], rest[i + 1..].parse::<i64>().ok()?),
        None => (rest, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    // value = 0.digits × 10^point
    let digits = format!("{int}{frac}");
    let point = int.len() as i64 + exponent;
    let lead = digits.bytes().take_while(|&b| b == b'0').count();
    let digits = digits[lead..].trim_end_matches('0');
    let point = point - lead as i64;
    if digits.is_empty() {
        return Some(if negative { "-0".into() } else { "0".into() });
    }
    let width = point.max(1).unsigned_abs() as usize + digits.len() + point.min(0).unsigned_abs() as usize;
    if width > POSITIONAL_DIGITS {
        return None;
    }
    let mut out = String::with_capacity(width + 2);
    if negative {
        out.push('-');
    }
    if point <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', point.unsigned_abs() as usize));
        out.push_str(digits);
    } else {
        let p = point as usize;
        if p >= digits.len() {
            out.push_str(digits);
            out.extend(std::iter::repeat_n('0', p - digits.len()));
        } else {
            out.push_str(&digits[..p]);
            out.push('.');
            out.push_str(&digits[p..]);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::positional;

    #[test]
    fn positional_forms() {
        for (text, want) in [
            ("1", Some("1")),
            ("1.0", Some("1")),
            ("-2.50", Some("-2.5")),
            ("1e-7", Some("0.0000001")),
            ("1.5e2", Some("150")),
            ("1.25E1", Some("12.5")),
            ("0.0", Some("0")),
            ("-0", Some("-0")),
            ("0.001", Some("0.001")),
            ("120", Some("120")),
            ("1e300", None),
            ("x", None),
        ] {
            assert_eq!(positional(text).as_deref(), want, "{text}");
        }
    }
}
