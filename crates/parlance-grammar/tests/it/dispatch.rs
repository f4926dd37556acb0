//! TagDispatch: which texts a dispatch accepts (free text, triggers, excludes, stop strings, loops),
//! byte by byte and through a real vocabulary.

use crate::common::{compile, real_vocab, synthetic_vocab};
use crate::grammar_texts::{DISPATCH, DISPATCH_ONCE};
use parlance_grammar::{Matcher, TokenVocab};
use std::sync::Arc;

/// Whether `text` is accepted whole by `grammar`.
fn accepts(vocab: &Arc<TokenVocab>, grammar: &str, text: &str) -> bool {
    let mut m = Matcher::new(compile(vocab, grammar)).expect("matcher");
    m.accept_bytes(text.as_bytes()) && m.is_accepting()
}

#[track_caller]
fn check(grammar: &str, cases: &[(&str, bool)]) {
    let vocab = synthetic_vocab();
    for &(text, want) in cases {
        assert_eq!(accepts(&vocab, grammar, text), want, "{text:?} under\n{grammar}");
    }
}

#[test]
fn free_text_ends_where_a_trigger_completes() {
    check(
        DISPATCH,
        &[
            ("", true),
            ("hello, world é €", true),
            // A trigger must go on as one of its tags.
            ("say {\"a\":true} done", true),
            ("say {\"b\":true}", false),
            ("abc12;", true),
            ("x abx y", true),
            ("x aby", false),
            // Several tags in a row, free text between and after them.
            ("{\"a\":12}abc1;[1,note],\n tail", true),
            // Excluded strings, in free text and in the nested free text.
            ("one xyz", false),
            ("[1,a{\"],\n", false),
            ("[1,xyz],\n", true),
            // A nested dispatch's stop string is required before its tag's end.
            ("[1,note\n", false),
            // Free text is valid UTF-8.
            ("caf\u{e9}", true),
        ],
    );
    let vocab = synthetic_vocab();
    let mut m = Matcher::new(compile(&vocab, DISPATCH)).expect("matcher");
    assert!(!m.accept_bytes(&[b'a', 0xC3]) || !m.is_accepting(), "a cut character is not an end");
    assert!(!Matcher::new(compile(&vocab, DISPATCH)).unwrap().accept_bytes(&[0xFF]), "0xFF is never UTF-8");
}

#[test]
fn stop_strings_and_single_dispatch() {
    check(
        DISPATCH_ONCE,
        &[
            ("hi\n!", true),
            ("hi!", false),
            ("aab7!", true),
            ("x aab7!", true),
            // After the first tag the dispatch is over: no more free text, no second tag.
            ("aab7 more\n!", false),
            ("aab7aab8!", false),
            ("aax", false),
        ],
    );
}

#[test]
fn the_earliest_trigger_decides() {
    // `aba` overlaps itself: in `ababa…` it completes at the third byte, and its tag starts there.
    let g = r#"root ::= TagDispatch(("aba", "X"))"#;
    check(g, &[("abaX", true), ("ababaX", false), ("abX", true), ("zabaX", true)]);
    // Of two patterns completing at one byte, a trigger wins over an excluded suffix of it.
    let g = r#"root ::= TagDispatch(("<call>", "!"), excludes=("call>"))"#;
    check(g, &[("<call>!", true), ("a call>", false)]);
}

#[test]
fn free_text_masks_cost_what_a_plain_step_costs() {
    let Some((vocab, _)) = real_vocab("llama3_1", "<|eot_id|>") else { return };
    let g = r#"root ::= TagDispatch(("<tool_call>", call), excludes=("<think>"))
call ::= "{\"name\": \"f\"}</tool_call>""#;
    let mut m = Matcher::new(compile(&vocab, g)).expect("matcher");
    let mut mask = vec![0u32; vocab.mask_words()];
    m.fill_next_token_bitmask(&mut mask).expect("mask");
    let allowed = mask.iter().map(|w| w.count_ones() as usize).sum::<usize>();
    // Nearly all of the vocabulary is free text; only tokens holding an excluded string or a
    // broken character sequence are out.
    assert!(allowed > vocab.len() * 9 / 10, "{allowed} of {}", vocab.len());
    let text = "Let me check the weather for you. ".repeat(20);
    assert!(m.accept_bytes(text.as_bytes()));
    let start = std::time::Instant::now();
    for _ in 0..100 {
        m.fill_next_token_bitmask(&mut mask).expect("mask");
    }
    let per_mask = start.elapsed() / 100;
    assert!(m.accept_bytes(b"<tool_call>{\"name\": \"f\"}</tool_call> ok"));
    assert!(m.is_accepting());
    eprintln!("free-text mask after 700 bytes: {per_mask:?}");
}

/// The synthetic vocabulary's special token `<special>` and a plain one.
fn special_and_plain(vocab: &TokenVocab, plain: &str) -> (u32, u32) {
    let special = vocab.special_token_id("<special>").expect("the synthetic vocab has <special>");
    let plain = (0..vocab.len() as u32).find(|&id| vocab.token_bytes(id) == plain.as_bytes()).expect("plain token");
    (special, plain)
}

#[test]
fn special_tokens_match_only_where_named() {
    let vocab = synthetic_vocab();
    let (special, a) = special_and_plain(&vocab, "a");
    let named = compile(&vocab, &format!("root ::= \"a\" <[{special}]> \"a\""));
    let mut m = Matcher::new(named.clone()).unwrap();
    assert!(m.accept_token(a) && m.accept_token(special) && m.accept_token(a) && m.is_accepting());
    // Its text is not the token: neither as bytes under the token's grammar ...
    let mut m = Matcher::new(named).unwrap();
    assert!(!m.accept_bytes(b"a<special>a"));
    // ... nor the token under a grammar of its text, nor in free text.
    let mut m = Matcher::new(compile(&vocab, r#"root ::= "a<special>a""#)).unwrap();
    assert!(m.accept_token(a) && !m.accept_token(special));
    let mut m = Matcher::new(compile(&vocab, r#"root ::= TagDispatch(("ab", "c"))"#)).unwrap();
    assert!(m.accept_token(a) && !m.accept_token(special));
}

#[test]
fn token_triggers_dispatch_and_masks_equal_brute_force() {
    let vocab = synthetic_vocab();
    let (special, a) = special_and_plain(&vocab, "a");
    let grammar =
        format!(r#"root ::= TagDispatch((<[{special}]>, "12" <[{special}]>), ("ab", "c"), excludes=("xyz"))"#);
    let compiled = compile(&vocab, &grammar);
    let mut m = Matcher::new(compiled.clone()).unwrap();
    for id in [a, special] {
        assert!(m.accept_token(id), "token {id}");
    }
    assert!(!m.is_accepting(), "inside the tag");
    assert!(m.accept_bytes(b"12"));
    assert!(m.accept_token(special) && m.is_accepting());
    // Random walks: every mask equals trying each token, special ones included.
    let mut rng = crate::common::Rng(5);
    for walk in 0..6 {
        let mut m = Matcher::new(compiled.clone()).unwrap();
        for step in 0..20 {
            let ok = crate::common::check_mask_brute_force(&mut m, &vocab, &format!("walk {walk} step {step}"));
            let ok: Vec<u32> = ok.into_iter().filter(|t| !vocab.eos_ids().contains(t)).collect();
            if ok.is_empty() {
                break;
            }
            // Prefer the special token now and then, to walk through the tags.
            let pick = if ok.contains(&special) && rng.below(3) == 0 { special } else { ok[rng.below(ok.len())] };
            assert!(m.accept_token(pick));
        }
    }
}

#[test]
fn free_text_masks_are_shared_by_grammars_with_other_tags() {
    // A fresh vocabulary: its pool starts empty.
    let vocab = synthetic_vocab();
    let mut mask = vec![0u32; vocab.mask_words()];
    let mut first_mask = |tag_body: &str| {
        let g = compile(&vocab, &format!("root ::= TagDispatch((\"<t>\", tool))\ntool ::= {tag_body}"));
        Matcher::new(g).unwrap().fill_next_token_bitmask(&mut mask).unwrap();
        (vocab.cached_mask_entries(), mask.clone())
    };
    let (after_first, mask_a) = first_mask(r#""{\"a\": 1}</t>""#);
    assert!(after_first > 0);
    // Another tool set, same triggers: the free-text entry is found, not computed again.
    let (after_second, mask_b) = first_mask(r#""{\"b\": [true]}</t>""#);
    assert_eq!(after_second, after_first, "the start state's entry is shared");
    assert_eq!(mask_a, mask_b);
    // More tags behind the same trigger (a request with more tools): the dispatch's automaton has
    // more rule edges where the trigger completes, and its free text is still the same entry.
    let g = compile(
        &vocab,
        "root ::= TagDispatch((\"<t>\", one), (\"<t>\", two), (\"<t>\", three))\none ::= \"1</t>\"\ntwo ::= \"2</t>\"\nthree ::= \"3</t>\"",
    );
    Matcher::new(g).unwrap().fill_next_token_bitmask(&mut mask).unwrap();
    assert_eq!(vocab.cached_mask_entries(), after_first, "shared whatever the number of tags");
    assert_eq!(mask, mask_a);
}

#[test]
fn free_text_entries_equal_a_walk_of_the_whole_trie_on_a_real_vocabulary() {
    // The free-text shortcut walks only the tokens holding a byte the text stops at; with the check
    // on, every entry it gives is computed again by a walk of the whole trie, and a difference
    // panics. Llama 3's vocabulary has broken UTF-8 pieces, multi-byte words and special tokens.
    let Some((vocab, _)) = real_vocab("llama3_1", "<|eot_id|>") else { return };
    parlance_grammar::check_mask_entries(true);
    // `{"m` beside `{"n`: after `{"` two neighbouring first bytes go their own ways.
    let g = r#"root ::= TagDispatch(("{\"name\": ", call), ("{\"mode\": ", call), ("<tool_call>", call), excludes=("</s>", "\t"))
call ::= "\"f\", \"parameters\": {\"a\": " [0-9]+ "}}" ("</tool_call>")?"#;
    let mut m = Matcher::new(compile(&vocab, g)).expect("matcher");
    let mut mask = vec![0u32; vocab.mask_words()];
    // Every state of the trigger prefixes, then text after a call.
    let text = "Sure. {\"name\": \"f\", \"parameters\": {\"a\": 12}} then <tool_call>\"f\", \"parameters\": {\"a\": 3}}</tool_call> é {\"mo {\"na {\"name\"";
    for (i, c) in text.char_indices() {
        m.fill_next_token_bitmask(&mut mask).expect("mask");
        assert!(m.accept_bytes(&text.as_bytes()[i..i + c.len_utf8()]), "at byte {i} of {text:?}");
    }
    m.fill_next_token_bitmask(&mut mask).expect("mask");
    parlance_grammar::check_mask_entries(false);
}
