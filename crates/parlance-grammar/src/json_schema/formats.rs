//! String `format`s as regular expressions over the string's content (RFC 3339 dates and times,
//! RFC 4122 UUIDs, dotted-quad IPv4, RFC 4291 IPv6, a practical e-mail and URI syntax).
//!
//! Each regex is written to accept only strings that the format defines; none of them contains a
//! character that JSON would have to escape.

/// RFC 3339 `full-date`: days as the month has them, February 29 in leap years only (a year divisible
/// by 4 and not by 100, or by 400: its last two digits a nonzero multiple of 4, or `00` after a
/// multiple of 4).
const DATE: &str = concat!(
    r"([0-9]{4}-(0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])",
    r"|[0-9]{4}-(0[469]|11)-(0[1-9]|[12][0-9]|30)",
    r"|[0-9]{4}-02-(0[1-9]|1[0-9]|2[0-8])",
    r"|([0-9]{2}(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)-02-29)"
);
const TIME: &str = r"([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
const IPV4_PART: &str = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";

/// Formats that common validators (Python and Rust `jsonschema`) assert but this module does not
/// implement: ignoring them would accept strings those validators reject, so they are errors. Any
/// other unknown format is an annotation, as the specification says.
pub(crate) const CHECKED_ELSEWHERE: &[&str] = &[
    "uri-template",
    "iri",
    "iri-reference",
    "idn-email",
    "idn-hostname",
    "json-pointer",
    "relative-json-pointer",
    "regex",
    "color",
    "duration",
];

/// The anchored regex for `format`, or `None` if the format is unknown.
pub(crate) fn format_regex(format: &str) -> Option<String> {
    let ipv4 = format!(r"{IPV4_PART}(\.{IPV4_PART}){{3}}");
    let h16 = "[0-9a-fA-F]{1,4}";
    let ipv6 = [
        format!("({h16}:){{7}}{h16}"),
        format!("({h16}:){{1,7}}:"),
        format!("({h16}:){{1,6}}:{h16}"),
        format!("({h16}:){{1,5}}(:{h16}){{1,2}}"),
        format!("({h16}:){{1,4}}(:{h16}){{1,3}}"),
        format!("({h16}:){{1,3}}(:{h16}){{1,4}}"),
        format!("({h16}:){{1,2}}(:{h16}){{1,5}}"),
        format!("{h16}:(:{h16}){{1,6}}"),
        format!(":((:{h16}){{1,7}}|:)"),
        format!("({h16}:){{6}}{ipv4}"),
        format!("::(ffff(:0{{1,4}})?:)?{ipv4}"),
        format!("({h16}:){{1,4}}:{ipv4}"),
    ]
    .join("|");
    Some(match format {
        "date" => format!("^{DATE}$"),
        "time" => format!("^{TIME}$"),
        "date-time" => format!("^{DATE}[Tt ]{TIME}$"),
        "uuid" => "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$".into(),
        "ipv4" => format!("^{ipv4}$"),
        "ipv6" => format!("^({ipv6})$"),
        "email" => {
            r"^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$".into()
        }
        "hostname" => {
            r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$".into()
        }
        // RFC 3986 URI: scheme ":" then URI characters (percent-encoded or unreserved/reserved).
        "uri" => r"^[A-Za-z][A-Za-z0-9+.-]*:([A-Za-z0-9\-._~!$&'()*+,;=:@/?#\[\]]|%[0-9A-Fa-f]{2})*$".into(),
        "uri-reference" => r"^([A-Za-z0-9\-._~!$&'()*+,;=:@/?#\[\]]|%[0-9A-Fa-f]{2})*$".into(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_match_examples() {
        let cases: &[(&str, &[&str], &[&str])] = &[
            (
                "date-time",
                &["2024-01-31T12:00:00Z", "2024-01-31T12:00:00.5+02:00"],
                &["2024-13-01T00:00:00Z", "2024-01-31"],
            ),
            (
                "date",
                &["1999-12-31", "2024-02-29", "2000-02-29", "1600-02-29", "0000-02-29", "1999-04-30", "2023-02-28"],
                &["1999-1-31", "2024-02-30", "2023-02-29", "1900-02-29", "2100-02-29", "2024-04-31", "2024-11-31"],
            ),
            ("date-time", &["2024-02-29T00:00:00Z"], &["2023-02-29T00:00:00Z", "2024-06-31T00:00:00Z"]),
            ("uuid", &["123e4567-e89b-12d3-a456-426614174000"], &["123e4567e89b12d3a456426614174000"]),
            ("ipv4", &["192.168.0.1"], &["256.1.1.1", "1.2.3"]),
            ("ipv6", &["::1", "2001:db8::8a2e:370:7334", "::ffff:1.2.3.4"], &["1:2:3", "12345::"]),
            ("email", &["a.b@example.com"], &["a@", "@b.com", "a b@c.d"]),
            ("uri", &["https://example.com/a?b=c#d"], &["example.com", "http://a b"]),
        ];
        for (f, good, bad) in cases {
            let re = regex_full(&format_regex(f).expect("known"));
            for s in *good {
                assert!(re(s), "{f} should accept {s}");
            }
            for s in *bad {
                assert!(!re(s), "{f} should reject {s}");
            }
        }
        assert!(format_regex("color").is_none());
    }

    /// A whole-string matcher built with this crate's own automata (no `regex` dependency).
    fn regex_full(pattern: &str) -> impl Fn(&str) -> bool + use<> {
        use crate::grammar::{Expr, Grammar};
        use crate::vocab::TokenVocab;
        use crate::{CompiledGrammar, Matcher};
        use std::sync::Arc;
        let vocab = Arc::new(TokenVocab::new(vec![b"x".to_vec()], &[], &[0]).expect("vocab"));
        let g = CompiledGrammar::new(vocab, &Grammar::from_expr(Expr::Regex(pattern.to_string()))).expect("compiles");
        let g = Arc::new(g);
        move |s: &str| {
            let mut m = Matcher::new(g.clone()).expect("matcher");
            m.accept_bytes(s.as_bytes()) && m.is_accepting()
        }
    }
}
