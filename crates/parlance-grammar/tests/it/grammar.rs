//! Strings generated from a grammar are accepted; near misses are rejected.

use crate::common::{Rng, compile, synthetic_vocab};
use parlance_grammar::{Expr, Grammar, Matcher};

/// A random string of the language; past `depth` the first alternative (the base case) is taken.
fn generate(g: &Grammar, e: &Expr, rng: &mut Rng, depth: usize, out: &mut String) {
    match e {
        Expr::Empty => {}
        Expr::Literal(s) => out.push_str(s),
        Expr::CharClass { negated: false, ranges } => {
            let (lo, hi) = ranges[rng.below(ranges.len())];
            let c = char::from_u32(lo as u32 + rng.below((hi as u32 - lo as u32 + 1) as usize) as u32);
            out.push(c.unwrap_or(lo));
        }
        Expr::CharClass { negated: true, ranges } => {
            let pool = ['a', 'Z', '5', 'é', '€', '😀', ' ', '"'];
            let ok: Vec<char> =
                pool.iter().copied().filter(|c| !ranges.iter().any(|&(lo, hi)| lo <= *c && *c <= hi)).collect();
            out.push(ok[rng.below(ok.len())]);
        }
        Expr::Rule(r) => generate(g, &g.rules()[r.index()].expr, rng, depth + 1, out),
        Expr::Seq(p) => p.iter().for_each(|x| generate(g, x, rng, depth, out)),
        Expr::Alt(p) => {
            let i = if depth > 6 { 0 } else { rng.below(p.len()) };
            generate(g, &p[i], rng, depth, out)
        }
        Expr::Repeat { expr, min, max } => {
            let max = if depth > 6 { *min } else { max.unwrap_or(min + 3) };
            let n = *min + rng.below((max - min + 1) as usize) as u32;
            for _ in 0..n {
                generate(g, expr, rng, depth + 1, out);
            }
        }
        Expr::TagDispatch(d) => {
            out.push_str("free text ");
            if !d.tags.is_empty() && depth <= 6 {
                let (trigger, rest) = &d.tags[rng.below(d.tags.len())];
                if let parlance_grammar::Trigger::Text(text) = trigger {
                    out.push_str(text);
                    generate(g, rest, rng, depth + 1, out);
                }
            }
            if !d.stop_eos && (d.loop_after_dispatch || d.tags.is_empty()) {
                out.push_str(&d.stop_strings[0]);
            }
        }
        _ => panic!("generator does not expand regexes or restrictions"),
    }
}

const GRAMMARS: &[&str] = &[
    r#"root ::= value
value ::= "null" | object | array | string | number | "true"
object ::= "{" ( string ":" value ( "," string ":" value )* )? "}"
array ::= "[" ( value ( "," value )* )? "]"
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ["\\nt] )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )?"#,
    r#"expr ::= term | expr "+" term | expr "*" term
term ::= [0-9]+ | "(" expr ")""#,
    r#"s ::= "" | s s | "a" | "(" s ")""#,
    r#"root ::= ([a-c]{2,4} "-"){1,3} [^a-z]? x{0,2}
x ::= "é" | "€" | "\u00e9\x41""#,
];

#[test]
fn generated_strings_are_accepted() {
    let vocab = synthetic_vocab();
    let mut rng = Rng(0x9e3779b97f4a7c15);
    for text in GRAMMARS {
        let g = Grammar::parse(text).expect("parses");
        let compiled = compile(&vocab, text);
        for _ in 0..60 {
            let mut s = String::new();
            generate(&g, &g.rules()[g.start().index()].expr, &mut rng, 0, &mut s);
            let mut m = Matcher::new(compiled.clone()).expect("matcher");
            assert!(m.accept_bytes(s.as_bytes()), "{text}\nrejected {s:?}");
            assert!(m.is_accepting(), "{text}\nincomplete {s:?}");
        }
    }
}

#[test]
fn near_misses_are_rejected() {
    let vocab = synthetic_vocab();
    let cases: &[(&str, &[&str], &[&str])] = &[
        (GRAMMARS[0], &[r#"{"a":[1,2.5,{"b":null}]}"#, "-0.25", r#""x\n""#], &[r#"{"a"}"#, "01", "[1,]", r#""\x""#]),
        (GRAMMARS[1], &["1+2*3", "((1))", "(1+2)*3"], &["1+", "(1", "+1", "1++2"]),
        (GRAMMARS[2], &["", "aaa", "(a)(())a"], &["(", "a)", "b"]),
        (r"root ::= /[a-f]+\d{2}(x|yz)?/", &["abc12", "f00yz"], &["abc1", "g12", "ab12y"]),
    ];
    for (text, good, bad) in cases {
        let compiled = compile(&vocab, text);
        for s in *good {
            let mut m = Matcher::new(compiled.clone()).expect("matcher");
            assert!(m.accept_bytes(s.as_bytes()) && m.is_accepting(), "{text}\nshould accept {s:?}");
        }
        for s in *bad {
            let mut m = Matcher::new(compiled.clone()).expect("matcher");
            assert!(!(m.accept_bytes(s.as_bytes()) && m.is_accepting()), "{text}\nshould reject {s:?}");
        }
    }
}

#[test]
fn recursion_without_base_case_is_an_error() {
    let vocab = synthetic_vocab();
    let g = Grammar::parse(r#"root ::= "a" root"#).expect("parses");
    let e = parlance_grammar::CompiledGrammar::new(vocab.clone(), &g).unwrap_err();
    assert!(e.to_string().contains("matches no string"), "{e}");
    // An unproductive alternative is dropped, the rest still works.
    let compiled = compile(&vocab, "root ::= \"b\" | \"a\" x\nx ::= \"c\" x");
    let mut m = Matcher::new(compiled).expect("matcher");
    assert!(!m.accept_bytes(b"a"));
    assert!(m.accept_bytes(b"b") && m.is_accepting());
}

#[test]
fn size_limits_are_errors_not_hangs() {
    let vocab = synthetic_vocab();
    let g = Grammar::parse("root ::= ([a-z]{1000}){1000}").expect("parses");
    let e = parlance_grammar::CompiledGrammar::new(vocab, &g).unwrap_err();
    assert!(e.to_string().contains("limit"), "{e}");
}
