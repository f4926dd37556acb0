//! Masks equal brute force; rollback restores state; forced bytes.

use crate::common::{Rng, allowed, check_mask_brute_force, compile, real_vocab, synthetic_vocab};
use crate::grammar_texts::*;
use parlance_grammar::{Matcher, TokenVocab};
#[cfg(feature = "rayon")]
use parlance_grammar::{MatcherError, fill_next_token_bitmasks};
use std::sync::Arc;

/// Random walks over allowed tokens, checking every mask against brute force.
fn walk_checking(vocab: &Arc<TokenVocab>, text: &str, walks: usize, steps: usize, seed: u64) {
    let compiled = compile(vocab, text);
    let mut rng = Rng(seed);
    for w in 0..walks {
        let mut m = Matcher::new(compiled.clone()).expect("matcher");
        for step in 0..steps {
            let ok = check_mask_brute_force(&mut m, vocab, &format!("{text}\nwalk {w} step {step}"));
            let normal: Vec<u32> = ok.iter().copied().filter(|&t| !vocab.eos_ids().contains(&t)).collect();
            if normal.is_empty() {
                break;
            }
            assert!(m.accept_token(normal[rng.below(normal.len())]));
        }
    }
}

#[test]
fn masks_equal_brute_force_synthetic_vocab() {
    let vocab = synthetic_vocab();
    for (i, text) in
        [JSON, ARITH, AMBIGUOUS, UTF8, STRINGS, BOUNDED, SEARCH, DISPATCH, DISPATCH_ONCE].iter().enumerate()
    {
        walk_checking(&vocab, text, 8, 25, 7 + i as u64);
    }
}

#[test]
fn masks_equal_brute_force_llama3_vocab() {
    let Some((vocab, _)) = real_vocab("llama3_1", "<|eot_id|>") else { return };
    for (i, text) in [JSON, ARITH, BOUNDED, SEARCH, DISPATCH].iter().enumerate() {
        walk_checking(&vocab, text, 2, 6, 99 + i as u64);
    }
}

#[test]
fn rollback_after_n_accepts_restores_state() {
    let vocab = synthetic_vocab();
    let compiled = compile(&vocab, JSON);
    let mut rng = Rng(12345);
    let mut m = Matcher::new(compiled).expect("matcher");
    let mut mask = vec![0u32; vocab.mask_words()];
    let mut history: Vec<Vec<u32>> = Vec::new();
    for _ in 0..30 {
        m.fill_next_token_bitmask(&mut mask).expect("mask");
        history.push(mask.clone());
        let ok: Vec<u32> =
            (0..vocab.len() as u32).filter(|&t| allowed(&mask, t) && !vocab.eos_ids().contains(&t)).collect();
        if ok.is_empty() {
            break;
        }
        assert!(m.accept_token(ok[rng.below(ok.len())]));
    }
    let steps = m.num_steps();
    assert!(steps > 5);
    for n in [3, 1, 2] {
        let target = m.num_steps() - n;
        m.rollback(n).expect("rollback");
        assert_eq!(m.num_steps(), target);
        m.fill_next_token_bitmask(&mut mask).expect("mask");
        assert_eq!(mask, history[target], "mask after rolling back to step {target}");
    }
    assert!(m.rollback(1000).is_err());
    m.reset();
    m.fill_next_token_bitmask(&mut mask).expect("mask");
    assert_eq!(mask, history[0]);
}

#[test]
fn eos_terminates_and_rolls_back() {
    let vocab = synthetic_vocab();
    let eos = vocab.eos_ids()[0];
    let mut m = Matcher::new(compile(&vocab, r#"root ::= "ab" | "abc""#)).expect("matcher");
    assert!(!m.accept_token(eos));
    assert!(m.accept_bytes(b"ab"));
    assert!(m.is_accepting() && !m.is_terminated());
    assert!(m.accept_token(eos));
    assert!(m.is_terminated());
    let mut mask = vec![0u32; vocab.mask_words()];
    m.fill_next_token_bitmask(&mut mask).expect("mask");
    assert!(mask.iter().all(|&w| w == 0), "nothing after EOS");
    m.rollback(1).expect("rollback");
    assert!(!m.is_terminated());
    assert!(m.accept_bytes(b"c"));
}

#[test]
fn forced_bytes_follow_the_only_path() {
    let vocab = synthetic_vocab();
    let mut m = Matcher::new(compile(&vocab, r#"root ::= "{\"name\": " ("1" | "2") "}""#)).expect("matcher");
    assert_eq!(m.forced_bytes(), b"{\"name\": ");
    assert!(m.accept_bytes(b"{\"name\": 1"));
    assert_eq!(m.forced_bytes(), b"}");
    assert!(m.accept_bytes(b"}"));
    assert!(m.forced_bytes().is_empty());
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// Any walk of allowed tokens, rolled back by any amount, gives back the masks seen on the way.
    #[test]
    fn rollback_restores_masks_for_any_walk(choices in proptest::collection::vec(0usize..1000, 1..20), back in 0usize..20) {
        let vocab = synthetic_vocab();
        let compiled = compile(&vocab, JSON);
        let mut m = Matcher::new(compiled).expect("matcher");
        let mut mask = vec![0u32; vocab.mask_words()];
        let mut history = Vec::new();
        for c in choices {
            m.fill_next_token_bitmask(&mut mask).expect("mask");
            history.push(mask.clone());
            let ok: Vec<u32> =
                (0..vocab.len() as u32).filter(|&t| allowed(&mask, t) && !vocab.eos_ids().contains(&t)).collect();
            if ok.is_empty() {
                break;
            }
            proptest::prop_assert!(m.accept_token(ok[c % ok.len()]));
        }
        if history.len() == m.num_steps() {
            m.fill_next_token_bitmask(&mut mask).expect("mask");
            history.push(mask.clone());
        }
        let back = back.min(m.num_steps());
        let target = m.num_steps() - back;
        m.rollback(back).expect("rollback");
        m.fill_next_token_bitmask(&mut mask).expect("mask");
        proptest::prop_assert_eq!(&mask, &history[target]);
    }
}

#[cfg(feature = "rayon")]
#[test]
fn batch_fill_equals_one_by_one() {
    let vocab = synthetic_vocab();
    let words = vocab.mask_words();
    let mut matchers = Vec::new();
    for (i, text) in [JSON, ARITH, STRINGS, BOUNDED].iter().enumerate() {
        let mut m = Matcher::new(compile(&vocab, text)).expect("matcher");
        // Advance each a different number of steps so the batch holds different states.
        let mut rng = Rng(3 + i as u64);
        let mut mask = vec![0u32; words];
        for _ in 0..i * 2 {
            m.fill_next_token_bitmask(&mut mask).expect("mask");
            let ok: Vec<u32> =
                (0..vocab.len() as u32).filter(|&t| allowed(&mask, t) && !vocab.eos_ids().contains(&t)).collect();
            if ok.is_empty() {
                break;
            }
            assert!(m.accept_token(ok[rng.below(ok.len())]));
        }
        matchers.push(m);
    }
    let mut expected = Vec::new();
    for m in &matchers {
        let mut mask = vec![0u32; words];
        m.clone().fill_next_token_bitmask(&mut mask).expect("mask");
        expected.extend(mask);
    }
    let mut batch = vec![u32::MAX; words * matchers.len()];
    let results = fill_next_token_bitmasks(&mut matchers, &mut batch);
    assert_eq!(results.len(), matchers.len());
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_eq!(batch, expected);
    // Too little room: every matcher reports it, none panics.
    let mut short = vec![0u32; matchers.len() - 1];
    let results = fill_next_token_bitmasks(&mut matchers, &mut short);
    assert!(results.iter().all(|r| matches!(r, Err(MatcherError::MaskTooShort { .. }))), "{results:?}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(32))]

    /// `validate_tokens` counts what accepting one by one accepts, and leaves the matcher as it was.
    #[test]
    fn validate_tokens_agrees_with_accepting_one_by_one(draft in proptest::collection::vec(0u32..110, 0..12)) {
        let vocab = synthetic_vocab();
        let compiled = compile(&vocab, DISPATCH);
        let mut m = Matcher::new(compiled).expect("matcher");
        let accepted = m.accept_string("x {\"");
        proptest::prop_assert!(accepted);
        let mut before = vec![0u32; vocab.mask_words()];
        m.fill_next_token_bitmask(&mut before).expect("mask");
        let draft: Vec<u32> = draft.into_iter().map(|t| t % vocab.len() as u32).collect();
        let n = m.validate_tokens(&draft);
        let mut after = vec![0u32; vocab.mask_words()];
        m.fill_next_token_bitmask(&mut after).expect("mask");
        proptest::prop_assert_eq!(&before, &after);
        let mut one_by_one = m.fork();
        let expected = draft.iter().take_while(|&&t| one_by_one.accept_token(t)).count();
        proptest::prop_assert_eq!(n, expected);
        proptest::prop_assert_eq!(m.num_steps(), 1);
    }
}

/// Inside JSON strings the mask cache classifies tokens by their rest after the leading string
/// characters (`StringExits`); check it against brute force at every byte of tool calls whose
/// strings hold quotes, escapes, multi-byte characters and characters cut short, on a real
/// vocabulary cut down to the tokens that matter there (every token holding a quote, a backslash, a
/// control byte, a brace, a colon or a comma, or a byte above ASCII; and one in 16 of the others).
#[test]
fn masks_inside_strings_equal_brute_force_llama3_vocab() {
    let Some((_, toks)) = real_vocab("llama3_1", "<|eot_id|>") else { return };
    let keep = |(i, t): &(usize, &Vec<u8>)| {
        i % 16 == 0 || t.iter().any(|&b| !(0x20..0x80).contains(&b) || b"\"\\{}:,".contains(&b))
    };
    let mut kept: Vec<Vec<u8>> = toks.iter().enumerate().filter(keep).map(|(_, t)| t.clone()).collect();
    kept.push(b"<eos>".to_vec());
    let eos = kept.len() as u32 - 1;
    let vocab = Arc::new(TokenVocab::new(kept, &[], &[eos]).expect("vocab"));
    let schema = serde_json::json!({"type": "object", "properties": {
        "location": {"type": "string"},
        "note": {"type": "string", "maxLength": 12},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer"}},
        "required": ["location"], "additionalProperties": false});
    let tag = |name: &str| {
        serde_json::json!({"type": "tag", "begin": format!("{{\"name\": \"{name}\", \"parameters\": "),
            "content": {"type": "json_schema", "json_schema": schema}, "end": "}"})
    };
    let doc = serde_json::json!({"type": "structural_tag", "format": {"type": "triggered_tags",
        "triggers": ["{\"name\": "], "tags": [tag("get_weather"), tag("get_time")]}});
    let grammar = Arc::new(
        parlance_grammar::CompiledGrammar::from_structural_tag(vocab.clone(), &doc, &Default::default())
            .expect("compiles"),
    );
    let text = "Let me check. {\"name\": \"get_weather\", \"parameters\": {\"location\": \"Z\u{fc}rich \\\"Alt\\\" \u{6771}\u{4eac}\\u00e9\", \"note\": \"a\\nb \u{20ac}\", \"unit\": \"celsius\", \"days\": 3}} Done.";
    let bytes = text.as_bytes();
    let start = text.find("{\"location").expect("arguments");
    for cut in start..bytes.len() {
        let mut m = Matcher::new(grammar.clone()).expect("matcher");
        assert!(m.accept_bytes(&bytes[..cut]), "prefix of {cut} bytes accepted");
        check_mask_brute_force(&mut m, &vocab, &format!("after {:?}", String::from_utf8_lossy(&bytes[..cut])));
    }
}
