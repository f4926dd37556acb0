//! Numeric ranges as digit automata: integers in `[lo, hi]` exactly, and decimal numbers between
//! integer bounds (inclusive or exclusive) exactly, with the fraction constrained where the bound needs it.
//!
//! Bounds are `i128`/`u128`, so that every `i64` and `u64` bound (and their negations, and one past
//! them) is exact: the digit strings are built from the bound's own decimal digits.

use crate::grammar::Expr;

fn digit_class(lo: u8, hi: u8) -> Expr {
    if lo == hi {
        Expr::literal((lo as char).to_string())
    } else {
        Expr::CharClass { negated: false, ranges: vec![(lo as char, hi as char)] }
    }
}

fn any_digits(n: usize) -> Expr {
    Expr::repeat(digit_class(b'0', b'9'), n as u32, Some(n as u32))
}

/// Digit strings (no leading zeros) of non-negative integers in `[lo, hi]`.
fn range_same_len(lo: &[u8], hi: &[u8]) -> Expr {
    // lo and hi have the same number of digits.
    if lo.is_empty() {
        return Expr::Empty;
    }
    if lo == hi {
        return Expr::literal(String::from_utf8_lossy(lo).into_owned());
    }
    let n = lo.len();
    if lo[1..].iter().all(|&d| d == b'0') && hi[1..].iter().all(|&d| d == b'9') {
        return Expr::seq(vec![digit_class(lo[0], hi[0]), any_digits(n - 1)]);
    }
    if lo[0] == hi[0] {
        return Expr::seq(vec![digit_class(lo[0], lo[0]), range_same_len(&lo[1..], &hi[1..])]);
    }
    let mut alts = Vec::new();
    // lo[0] followed by [lo[1..], 99..9]
    alts.push(Expr::seq(vec![digit_class(lo[0], lo[0]), range_same_len(&lo[1..], &vec![b'9'; n - 1])]));
    if hi[0] - lo[0] > 1 {
        alts.push(Expr::seq(vec![digit_class(lo[0] + 1, hi[0] - 1), any_digits(n - 1)]));
    }
    alts.push(Expr::seq(vec![digit_class(hi[0], hi[0]), range_same_len(&vec![b'0'; n - 1], &hi[1..])]));
    Expr::alt(alts)
}

/// Canonical decimal digits of non-negative integers in `[lo, hi]` (`hi = None`: unbounded).
pub(crate) fn uint_range(lo: u128, hi: Option<u128>) -> Expr {
    if let Some(h) = hi
        && h < lo
    {
        return nothing();
    }
    let lo_s = lo.to_string().into_bytes();
    let mut alts = Vec::new();
    match hi {
        Some(h) => {
            let hi_s = h.to_string().into_bytes();
            for len in lo_s.len()..=hi_s.len() {
                let a = if len == lo_s.len() { lo_s.clone() } else { pow10_min(len) };
                let b = if len == hi_s.len() { hi_s.clone() } else { vec![b'9'; len] };
                alts.push(range_same_len(&a, &b));
            }
        }
        None => {
            alts.push(range_same_len(&lo_s, &vec![b'9'; lo_s.len()]));
            // Any longer number.
            alts.push(Expr::seq(vec![
                digit_class(b'1', b'9'),
                any_digits(lo_s.len()),
                Expr::repeat(digit_class(b'0', b'9'), 0, None),
            ]));
        }
    }
    Expr::alt(alts)
}

fn pow10_min(len: usize) -> Vec<u8> {
    if len == 1 {
        return vec![b'0'];
    }
    let mut v = vec![b'0'; len];
    v[0] = b'1';
    v
}

/// An expression that matches nothing.
pub(crate) fn nothing() -> Expr {
    Expr::CharClass { negated: false, ranges: Vec::new() }
}

/// JSON integers in `[lo, hi]` (either side may be open).
pub(crate) fn int_range(lo: Option<i128>, hi: Option<i128>) -> Expr {
    let mut alts = Vec::new();
    // Non-negative part.
    let nlo = lo.map_or(0, |l| l.max(0)) as u128;
    match hi {
        Some(h) if h < 0 => {}
        Some(h) => alts.push(uint_range(nlo, Some(h as u128))),
        None => alts.push(uint_range(nlo, None)),
    }
    // Negative part: -m with m in [max(1, -hi), -lo].
    let mlo = hi.map_or(1, |h| if h < 0 { h.unsigned_abs() } else { 1 });
    match lo {
        Some(l) if l >= 0 => {}
        Some(l) => {
            if l.unsigned_abs() >= mlo {
                alts.push(Expr::seq(vec![Expr::literal("-"), uint_range(mlo, Some(l.unsigned_abs()))]));
            }
        }
        None => alts.push(Expr::seq(vec![Expr::literal("-"), uint_range(mlo, None)])),
    }
    if alts.is_empty() { nothing() } else { Expr::alt(alts) }
}

/// What the fraction of a decimal may be.
#[derive(Clone, Copy, PartialEq)]
enum Frac {
    Any,
    /// No fraction or only zeros.
    Zero,
    /// A fraction with a nonzero digit.
    NonZero,
}

fn frac(f: Frac) -> Expr {
    let d = || Expr::repeat(digit_class(b'0', b'9'), 0, None);
    match f {
        Frac::Any => {
            Expr::optional(Expr::seq(vec![Expr::literal("."), Expr::repeat(digit_class(b'0', b'9'), 1, None)]))
        }
        Frac::Zero => Expr::optional(Expr::seq(vec![Expr::literal("."), Expr::repeat(Expr::literal("0"), 1, None)])),
        Frac::NonZero => Expr::seq(vec![Expr::literal("."), d(), digit_class(b'1', b'9'), d()]),
    }
}

/// JSON numbers (no exponent) `x` with `lo <= x` (or `<` if `lo_excl`) and `x <= hi` (or `<`), for
/// integer bounds.
pub(crate) fn decimal_range(lo: Option<i128>, lo_excl: bool, hi: Option<i128>, hi_excl: bool) -> Expr {
    let mut alts = Vec::new();
    // Pieces: (negative?, integer-part range [a, b], fraction rule).
    let mut piece = |neg: bool, a: u128, b: Option<u128>, f: Frac| {
        if b.is_some_and(|b| b < a) {
            return;
        }
        let int = uint_range(a, b);
        let mut parts = Vec::new();
        if neg {
            parts.push(Expr::literal("-"));
        }
        parts.push(int);
        parts.push(frac(f));
        alts.push(Expr::seq(parts));
    };
    // Non-negative x = I.F, I >= 0.
    let pos_ok = hi.is_none_or(|h| h > 0 || (h == 0 && !hi_excl));
    if pos_ok {
        // Lower side.
        let (start, start_frac) = match lo {
            Some(l) if l > 0 => (l as u128, if lo_excl { Frac::NonZero } else { Frac::Any }),
            Some(0) if lo_excl => (0, Frac::NonZero),
            _ => (0, Frac::Any),
        };
        match hi {
            None => {
                if start_frac == Frac::NonZero {
                    piece(false, start, Some(start), Frac::NonZero);
                    piece(false, start + 1, None, Frac::Any);
                } else {
                    piece(false, start, None, Frac::Any);
                }
            }
            Some(h) => {
                let h = h as u128;
                // I in [start, h-1] any fraction (first one possibly nonzero only); I == h zero fraction
                // unless exclusive.
                if start < h {
                    if start_frac == Frac::NonZero {
                        piece(false, start, Some(start), Frac::NonZero);
                        if start + 1 < h {
                            piece(false, start + 1, Some(h - 1), Frac::Any);
                        }
                    } else {
                        piece(false, start, Some(h - 1), Frac::Any);
                    }
                }
                if !hi_excl && start <= h && !(start == h && start_frac == Frac::NonZero) {
                    piece(false, h, Some(h), Frac::Zero);
                }
            }
        }
    }
    // Negative x = -(I.F), I.F > 0.
    let neg_ok = lo.is_none_or(|l| l < 0);
    if neg_ok {
        // x <= hi: for hi >= 0 any negative; for hi < 0: I.F >= -hi (or > if exclusive).
        let (start, start_frac) = match hi {
            Some(h) if h < 0 => (h.unsigned_abs(), if hi_excl { Frac::NonZero } else { Frac::Any }),
            _ => (0, Frac::NonZero),
        };
        // x >= lo: I.F <= -lo (or < if exclusive).
        match lo {
            None => {
                if start_frac == Frac::NonZero {
                    piece(true, start, Some(start), Frac::NonZero);
                    piece(true, start + 1, None, Frac::Any);
                } else {
                    piece(true, start, None, Frac::Any);
                }
            }
            Some(l) => {
                let m = l.unsigned_abs();
                if start < m {
                    if start_frac == Frac::NonZero {
                        piece(true, start, Some(start), Frac::NonZero);
                        if start + 1 < m {
                            piece(true, start + 1, Some(m - 1), Frac::Any);
                        }
                    } else {
                        piece(true, start, Some(m - 1), Frac::Any);
                    }
                }
                if !lo_excl && start <= m && !(start == m && start_frac == Frac::NonZero) {
                    piece(true, m, Some(m), Frac::Zero);
                }
            }
        }
    }
    if alts.is_empty() { nothing() } else { Expr::alt(alts) }
}

/// Fraction digits `F` (after the point) with `0.F >= 0.D`; `D` non-empty.
fn frac_ge(d: &[u8]) -> Expr {
    let mut alts = Vec::new();
    for i in 0..d.len() {
        if d[i] < b'9' {
            alts.push(Expr::seq(vec![
                Expr::literal(String::from_utf8_lossy(&d[..i]).into_owned()),
                digit_class(d[i] + 1, b'9'),
                Expr::repeat(digit_class(b'0', b'9'), 0, None),
            ]));
        }
    }
    alts.push(Expr::seq(vec![
        Expr::literal(String::from_utf8_lossy(d).into_owned()),
        Expr::repeat(digit_class(b'0', b'9'), 0, None),
    ]));
    Expr::seq(vec![Expr::literal("."), Expr::alt(alts)])
}

/// An optional fraction `F` with `0.F <= 0.D`; `D` non-empty.
fn frac_le(d: &[u8]) -> Expr {
    let mut alts = Vec::new();
    for i in 0..d.len() {
        if d[i] > b'0' {
            alts.push(Expr::seq(vec![
                Expr::literal(String::from_utf8_lossy(&d[..i]).into_owned()),
                digit_class(b'0', d[i] - 1),
                Expr::repeat(digit_class(b'0', b'9'), 0, None),
            ]));
        }
    }
    for i in 1..=d.len() {
        alts.push(Expr::seq(vec![
            Expr::literal(String::from_utf8_lossy(&d[..i]).into_owned()),
            Expr::repeat(Expr::literal("0"), 0, None),
        ]));
    }
    Expr::optional(Expr::seq(vec![Expr::literal("."), Expr::alt(alts)]))
}

/// Non-negative-bounded decimals `lo <= x <= hi` where a bound may have a fraction: the values with
/// the bound's integer part and a fraction beyond it, plus the integer-bounded range in between.
/// `None` when both bounds share their integer part (a two-sided fraction constraint).
pub(crate) fn fractional_range(lo: Option<(u128, String)>, hi: Option<(u128, String)>) -> Option<Expr> {
    if let (Some((l, _)), Some((h, _))) = (&lo, &hi)
        && l > h
    {
        // The pieces below each hold to one bound only: with the bounds crossed, nothing is left.
        return Some(nothing());
    }
    let mut alts = Vec::new();
    let lo_int = match &lo {
        Some((i, f)) if !f.is_empty() => {
            if hi.as_ref().is_some_and(|(h, _)| h == i) {
                return None;
            }
            alts.push(Expr::seq(vec![uint_range(*i, Some(*i)), frac_ge(f.as_bytes())]));
            Some(i + 1)
        }
        Some((i, _)) => Some(*i),
        None => None,
    };
    let hi_int = match &hi {
        Some((i, f)) if !f.is_empty() => {
            alts.push(Expr::seq(vec![uint_range(*i, Some(*i)), frac_le(f.as_bytes())]));
            // Below the bound's integer part any fraction; at it, handled by the alternative above.
            Some((*i, true))
        }
        Some((i, _)) => Some((*i, false)),
        None => None,
    };
    let lo_i = lo_int.map(|x| x as i128);
    let middle = match hi_int {
        Some((h, true)) => decimal_range(lo_i, false, Some(h as i128), true),
        Some((h, false)) => decimal_range(lo_i, false, Some(h as i128), false),
        None => decimal_range(lo_i, false, None, false),
    };
    alts.push(middle);
    Some(Expr::alt(alts))
}

/// An exact decimal: negative, integer part, fraction digits (no trailing zeros).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Decimal {
    pub negative: bool,
    pub int: u128,
    pub frac: String,
}

impl Decimal {
    fn is_zero(&self) -> bool {
        self.int == 0 && self.frac.is_empty()
    }

    fn magnitude(&self) -> (u128, String) {
        (self.int, self.frac.clone())
    }

    /// Every positional spelling of this magnitude (`2`, `2.0`, `2.50`…), sign left out.
    fn magnitude_spellings(&self) -> Expr {
        let int = Expr::literal(self.int.to_string());
        let zeros = Expr::repeat(Expr::literal("0"), 0, None);
        if self.frac.is_empty() {
            Expr::seq(vec![int, Expr::optional(Expr::seq(vec![Expr::literal("."), Expr::literal("0"), zeros]))])
        } else {
            Expr::seq(vec![int, Expr::literal(format!(".{}", self.frac)), zeros])
        }
    }
}

/// The exact decimal a JSON number (a schema's bound) is written as: serde_json's shortest text,
/// exponent applied. `None` past 38 integer or 64 fraction digits.
pub(crate) fn decimal_of(v: &serde_json::Value) -> Option<Decimal> {
    let text = v.as_number()?.to_string();
    let (negative, text) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.as_str()),
    };
    let (mantissa, exponent) = match text.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i32>().ok()?),
        None => (text, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits: String = format!("{int}{frac}");
    // The point sits after `point` digits of `digits`.
    let point = int.len() as i64 + i64::from(exponent);
    if !(-64..=38).contains(&point) || digits.len() > 128 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (int, frac) = if point <= 0 {
        (String::new(), format!("{}{digits}", "0".repeat((-point) as usize)))
    } else if point as usize >= digits.len() {
        (format!("{digits}{}", "0".repeat(point as usize - digits.len())), String::new())
    } else {
        (digits[..point as usize].to_string(), digits[point as usize..].to_string())
    };
    let frac = frac.trim_end_matches('0').to_string();
    if frac.len() > 64 {
        return None;
    }
    let int = int.trim_start_matches('0');
    let int = if int.is_empty() { 0 } else { int.parse::<u128>().ok()? };
    let negative = negative && !(int == 0 && frac.is_empty());
    Some(Decimal { negative, int, frac })
}

/// Non-negative positional decimals between two magnitudes, each `(value, exclusive)` (`None`: no
/// bound on that side): the one-sided ranges intersected, an exclusive bound's spellings taken out.
fn magnitude_range(lower: Option<(&Decimal, bool)>, upper: Option<(&Decimal, bool)>) -> Expr {
    let mut and = Vec::new();
    let mut not = Vec::new();
    for (bound, is_lower) in [(lower, true), (upper, false)] {
        let Some((d, exclusive)) = bound else { continue };
        let one_side = if is_lower {
            fractional_range(Some(d.magnitude()), None)
        } else {
            fractional_range(None, Some(d.magnitude()))
        };
        and.extend(one_side);
        if exclusive {
            not.push(d.magnitude_spellings());
        }
    }
    let base = decimal_range(Some(0), false, None, false);
    Expr::Restrict { base: Box::new(base), and, not }
}

/// JSON numbers (positional) between `lo` and `hi`, each `(value, exclusive)`, exact for bounds
/// with fractions and either sign: zero and above, and below zero as `-` and a magnitude.
pub(crate) fn signed_decimal_range(lo: Option<(Decimal, bool)>, hi: Option<(Decimal, bool)>) -> Expr {
    let mut alts = Vec::new();
    let below_zero = |d: &Decimal| d.negative && !d.is_zero();
    // Zero and above: when the upper bound allows it.
    let upper_reaches = hi.as_ref().is_none_or(|(d, excl)| !(below_zero(d) || (d.is_zero() && *excl)));
    if upper_reaches {
        let lower = lo.as_ref().filter(|(d, _)| !below_zero(d)).map(|(d, e)| (d, *e));
        let upper = hi.as_ref().map(|(d, e)| (d, *e));
        alts.push(magnitude_range(lower, upper));
    }
    // Below zero: when the lower bound allows it; magnitudes from the upper bound's (or above 0)
    // to the lower bound's.
    let lower_reaches = lo.as_ref().is_none_or(|(d, _)| below_zero(d));
    if lower_reaches {
        let zero = Decimal::default();
        let least = match &hi {
            Some((d, excl)) if below_zero(d) => (d, *excl),
            _ => (&zero, true),
        };
        let most = lo.as_ref().map(|(d, e)| (d, *e));
        alts.push(Expr::seq(vec![Expr::literal("-"), magnitude_range(Some(least), most)]));
    }
    if alts.is_empty() { nothing() } else { Expr::alt(alts) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::Grammar;
    use crate::vocab::TokenVocab;
    use crate::{CompiledGrammar, Matcher};
    use std::sync::Arc;

    /// A non-negative decimal bound split into integer part and fraction digits (no trailing zeros).
    fn split_decimal(text: &str) -> Option<(u128, String)> {
        let d = decimal_of(&text.parse::<serde_json::Value>().ok()?)?;
        (!d.negative).then_some((d.int, d.frac))
    }

    fn matcher_for(e: Expr) -> Matcher {
        let vocab = Arc::new(TokenVocab::new(vec![b"x".to_vec()], &[], &[0]).expect("vocab"));
        let g = CompiledGrammar::new(vocab, &Grammar::from_expr(e)).expect("compiles");
        Matcher::new(Arc::new(g)).expect("matcher")
    }

    fn accepts(m: &Matcher, s: &str) -> bool {
        let mut m = m.clone();
        m.accept_bytes(s.as_bytes()) && m.is_accepting()
    }

    #[test]
    fn integer_ranges_are_exact() {
        let vocab = Arc::new(TokenVocab::new(vec![b"x".to_vec()], &[], &[0]).expect("vocab"));
        let empty = CompiledGrammar::new(vocab, &Grammar::from_expr(int_range(Some(10), Some(9))));
        assert!(empty.is_err(), "an empty range matches nothing");
        for (lo, hi) in [(Some(-15), Some(123)), (Some(7), None), (None, Some(-3)), (Some(0), Some(0))] {
            let m = matcher_for(int_range(lo, hi));
            for x in -300i128..300 {
                let want = lo.is_none_or(|l| x >= l) && hi.is_none_or(|h| x <= h);
                assert_eq!(accepts(&m, &x.to_string()), want, "{x} in {lo:?}..={hi:?}");
            }
            assert!(!accepts(&m, "007") && !accepts(&m, "-0") && !accepts(&m, "1.0"));
        }
    }

    #[test]
    fn fractional_bounds_are_exact() {
        let samples =
            ["-1.5", "-1", "0", "0.2", "0.25", "0.3", "0.5", "1", "1.49", "1.5", "1.50", "1.51", "2", "2.0", "2.7"];
        for (lo, hi) in [(Some("0.25"), None), (None, Some("1.5")), (Some("0.25"), Some("2")), (Some("1"), Some("1.5"))]
        {
            let e = fractional_range(lo.and_then(split_decimal), hi.and_then(split_decimal)).expect("supported");
            let m = matcher_for(e);
            for x in samples {
                let v: f64 = x.parse().expect("number");
                let want = lo.is_none_or(|l| v >= l.parse::<f64>().expect("bound"))
                    && hi.is_none_or(|h| v <= h.parse::<f64>().expect("bound"));
                assert_eq!(accepts(&m, x), want, "{x} in {lo:?}..={hi:?}");
            }
        }
        assert!(fractional_range(split_decimal("1.2"), split_decimal("1.5")).is_none());
        let crossed = matcher_for(Expr::alt(vec![
            fractional_range(split_decimal("5.5"), split_decimal("3")).expect("supported"),
            Expr::literal("x"),
        ]));
        assert!(["3", "5", "5.5", "6"].iter().all(|x| !accepts(&crossed, x)), "5.5 <= x <= 3 is empty");
    }

    #[test]
    fn decimal_ranges_are_exact() {
        let samples = [
            "0", "0.0", "0.5", "1", "1.5", "2", "2.0", "2.25", "3", "-0.5", "-1", "-1.0", "-1.5", "-2", "-2.5", "10.1",
        ];
        for (lo, le, hi, he) in [
            (Some(0), false, None, false),
            (Some(0), true, Some(2), false),
            (Some(-1), false, Some(2), true),
            (None, false, Some(-1), true),
            (Some(-2), true, None, false),
        ] {
            let m = matcher_for(decimal_range(lo, le, hi, he));
            for s in samples {
                let x: f64 = s.parse().expect("number");
                let want = lo.is_none_or(|l| if le { x > l as f64 } else { x >= l as f64 })
                    && hi.is_none_or(|h| if he { x < h as f64 } else { x <= h as f64 });
                assert_eq!(accepts(&m, s), want, "{s} with {lo:?}{le} {hi:?}{he}");
            }
        }
    }
}
