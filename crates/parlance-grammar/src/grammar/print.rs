//! Prints a [`Grammar`] in the text syntax that [`super::parse`] reads, so that parsing the output gives
//! back an equal grammar.

use super::{Expr, Grammar, RuleId, Trigger};
use std::fmt::{self, Write};

impl fmt::Display for Grammar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The start rule goes first so that a grammar without `root` keeps its start rule.
        let start = self.start.index();
        let order = std::iter::once(start).chain((0..self.rules.len()).filter(|&i| i != start));
        for i in order {
            let rule = &self.rules[i];
            write!(f, "{} ::= ", rule.name)?;
            print_expr(self, &rule.expr, Context::Top, f)?;
            f.write_char('\n')?;
            if let Ok(at) = self.token_budgets.binary_search_by_key(&RuleId(i as u32), |&(r, _)| r) {
                // A decoding bound, not part of the language: the text syntax has no form for it.
                writeln!(
                    f,
                    "# {} may consume at most {} tokens (a matcher bound)",
                    rule.name, self.token_budgets[at].1
                )?;
            }
            if self.kept.binary_search(&RuleId(i as u32)).is_ok() {
                // A hint to the compiler, not part of the language (see `GrammarBuilder::keep_rule`).
                writeln!(f, "# {} is kept a rule of its own (never inlined)", rule.name)?;
            }
        }
        Ok(())
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Context {
    Top,
    Alt,
    Seq,
    Atom,
}

fn print_expr(g: &Grammar, e: &Expr, ctx: Context, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match e {
        Expr::Empty => f.write_str("\"\""),
        Expr::Literal(s) => {
            f.write_char('"')?;
            for c in s.chars() {
                escape_char(c, &['"'], f)?;
            }
            f.write_char('"')
        }
        Expr::CharClass { negated: true, ranges } if ranges.is_empty() => f.write_char('.'),
        Expr::CharClass { negated, ranges } => {
            f.write_char('[')?;
            if *negated {
                f.write_char('^')?;
            }
            for &(lo, hi) in ranges {
                escape_char(lo, &[']', '-', '^', '['], f)?;
                if hi != lo {
                    f.write_char('-')?;
                    escape_char(hi, &[']', '-', '^', '['], f)?;
                }
            }
            f.write_char(']')
        }
        Expr::Rule(r) => f.write_str(&g.rules[r.index()].name),
        Expr::Token(id) => write!(f, "<[{id}]>"),
        Expr::TagDispatch(d) => {
            let strings = |list: &[String], f: &mut fmt::Formatter<'_>| -> fmt::Result {
                f.write_char('(')?;
                for (i, s) in list.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    print_expr(g, &Expr::Literal(s.clone()), Context::Atom, f)?;
                }
                f.write_char(')')
            };
            f.write_str("TagDispatch(")?;
            for (trigger, rest) in &d.tags {
                f.write_char('(')?;
                match trigger {
                    Trigger::Text(text) => print_expr(g, &Expr::Literal(text.clone()), Context::Atom, f)?,
                    Trigger::Token(id) => write!(f, "<[{id}]>")?,
                }
                f.write_str(", ")?;
                print_expr(g, rest, Context::Top, f)?;
                f.write_str("), ")?;
            }
            write!(f, "stop_eos={}, stop_str=", d.stop_eos)?;
            strings(&d.stop_strings, f)?;
            write!(f, ", loop_after_dispatch={}, excludes=", d.loop_after_dispatch)?;
            strings(&d.excludes, f)?;
            f.write_char(')')
        }
        Expr::Restrict { base, and, not } => {
            f.write_char('(')?;
            print_expr(g, base, Context::Atom, f)?;
            for a in and {
                f.write_str(" & ")?;
                print_expr(g, a, Context::Atom, f)?;
            }
            for n in not {
                f.write_str(" & !")?;
                print_expr(g, n, Context::Atom, f)?;
            }
            f.write_char(')')
        }
        Expr::Regex(r) => {
            f.write_char('/')?;
            let mut prev_backslash = false;
            for c in r.chars() {
                if c == '/' && !prev_backslash {
                    f.write_char('\\')?;
                }
                prev_backslash = c == '\\' && !prev_backslash;
                f.write_char(c)?;
            }
            f.write_char('/')
        }
        Expr::Seq(parts) => {
            let paren = matches!(ctx, Context::Seq | Context::Atom);
            if paren {
                f.write_char('(')?;
            }
            for (i, p) in parts.iter().enumerate() {
                if i > 0 {
                    f.write_char(' ')?;
                }
                print_expr(g, p, Context::Seq, f)?;
            }
            if paren {
                f.write_char(')')?;
            }
            Ok(())
        }
        Expr::Alt(parts) => {
            let paren = ctx != Context::Top;
            if paren {
                f.write_char('(')?;
            }
            for (i, p) in parts.iter().enumerate() {
                if i > 0 {
                    f.write_str(" | ")?;
                }
                print_expr(g, p, Context::Alt, f)?;
            }
            if paren {
                f.write_char(')')?;
            }
            Ok(())
        }
        Expr::Repeat { expr, min, max } => {
            print_expr(g, expr, Context::Atom, f)?;
            match (min, max) {
                (0, Some(1)) => f.write_char('?'),
                (0, None) => f.write_char('*'),
                (1, None) => f.write_char('+'),
                (m, None) => write!(f, "{{{m},}}"),
                (m, Some(n)) if m == n => write!(f, "{{{m}}}"),
                (m, Some(n)) => write!(f, "{{{m},{n}}}"),
            }
        }
    }
}

fn escape_char(c: char, extra: &[char], f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match c {
        '\\' => f.write_str("\\\\"),
        '\n' => f.write_str("\\n"),
        '\r' => f.write_str("\\r"),
        '\t' => f.write_str("\\t"),
        c if extra.contains(&c) => write!(f, "\\{c}"),
        c if (c as u32) < 0x20 || c as u32 == 0x7f => write!(f, "\\x{:02X}", c as u32),
        c if c.is_control() || c.is_whitespace() && c != ' ' => {
            if (c as u32) <= 0xFFFF {
                write!(f, "\\u{:04X}", c as u32)
            } else {
                write!(f, "\\U{:08X}", c as u32)
            }
        }
        c => f.write_char(c),
    }
}

#[cfg(test)]
mod tests {
    use crate::grammar::{Grammar, GrammarError};

    #[track_caller]
    fn roundtrip(text: &str) {
        let g = Grammar::parse(text).expect("parses");
        let printed = g.to_string();
        let again = Grammar::parse(&printed).unwrap_or_else(|e| panic!("reparse of {printed:?}: {e}"));
        assert_eq!(g, again, "printed:\n{printed}");
    }

    #[test]
    fn text_syntax_roundtrips() {
        roundtrip(r#"root ::= "a" | "b" c  c ::= [a-z0-9_]+ ("x" | "y")? "z"{2,5}"#);
        roundtrip(
            "root ::= (a b) (c | (d | e))* \"\" a{3} a{2,}\na ::= [^\\]\\-\\n\\x01\\u00e9] .\nb ::= \"q\\\"\\\\\" \nc ::= /[0-9]+\\/x/\nd ::= \"\"\ne ::= a**",
        );
        roundtrip("root ::= \"é\\u2028\\U0001F600\" # comment\n  | [\\u0100-\\uFFFF]");
        roundtrip(
            "root ::= TagDispatch((\"<tool_call>\", call), (<[7]>, \"x\" <[12]>), (\"<f=\", \"x>\" | \"y>\"), stop_eos=false, \
             stop_str=(\"</s>\"), loop_after_dispatch=false, excludes=(\"<think>\", \"</think>\"))\ncall ::= \"{}\"",
        );
        roundtrip("root ::= TagDispatch() \"x\"");
    }

    #[test]
    fn start_rule_is_root_or_first() {
        let g = Grammar::parse("a ::= b\nb ::= \"x\"").expect("parses");
        assert_eq!(g.rules()[g.start().index()].name, "a");
        let g = Grammar::parse("a ::= \"y\"\nroot ::= a").expect("parses");
        assert_eq!(g.rules()[g.start().index()].name, "root");
    }

    #[test]
    fn errors_name_line_and_column() {
        let e = Grammar::parse("root ::= a\n  a ::= \"x\" )").unwrap_err();
        assert_eq!(e, GrammarError::Syntax { line: 2, column: 13, message: "unexpected `)`".into() });
        let e = Grammar::parse("root ::= missing").unwrap_err();
        assert!(matches!(e, GrammarError::UndefinedRule { ref name, line: 1, column: 10 } if name == "missing"), "{e}");
        let e = Grammar::parse("root ::= \"abc").unwrap_err();
        assert!(matches!(e, GrammarError::Syntax { line: 1, .. }), "{e}");
        let e = Grammar::parse("root ::= [z-a]").unwrap_err();
        assert!(e.to_string().contains("out of order"), "{e}");
        let deep = format!("root ::= {}\"a\"{}", "(".repeat(1000), ")".repeat(1000));
        assert!(Grammar::parse(&deep).is_err());
    }
}
