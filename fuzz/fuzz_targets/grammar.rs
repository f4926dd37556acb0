//! Fuzz target: the grammar engine on arbitrary input. Byte 0 picks the front end:
//! - even: the rest is GBNF/EBNF text; a grammar that parses must print to text that parses to the
//!   same grammar, and compile (or fail with an error) under lowered limits;
//! - odd, bit 1 clear (`0x01`, `0x05`, …): the rest is a JSON Schema; it compiles or fails with an error;
//! - odd, bit 1 set (`0x03`, `0x07`, …): the rest is an XGrammar structural tag (special tokens
//!   `<|call|>` and `<|start|>` resolve by text); it lowers and compiles or fails with an error,
//!   lowered from its text (schemas kept as text) to the same grammar or the same error.
//!
//! A compiled grammar is then walked: masks filled over a byte vocabulary, the input's own bytes fed
//! one at a time, rollbacks. Any `Err` is fine; a panic, abort, hang (limits lowered) or a mask that
//! disagrees with `accept_bytes` is a bug.

#![no_main]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use parlance_grammar::{
    CompiledGrammar, Grammar, JsonSchemaOptions, Limits, Matcher, StructuralTagOptions, TokenVocab,
    json_schema_to_grammar, structural_tag_text_to_grammar, structural_tag_to_grammar,
};

/// Multi-byte tokens (ids from 259 on): JSON punctuation glued to string characters, escapes,
/// multi-byte and cut-short characters, so that masks inside strings (where the mask cache walks
/// the rest of a token after its leading string characters) meet tokens that leave the string.
const MULTI: &[&[u8]] = &[
    b"a\"", b"ab\",", b"\"}", b"\",\"", b"\":", b"{\"", b"\"a", b"\\n", b"\\\"", b"\\u00", b"a\\", b"\xC3\xA9\"",
    b"\xE2\x82\xAC", b"x\xC3", b"\xA9\"", b" \"", b"\"\n", b"1,", b"12}", b"a\n", b"<|c", b"{\"name\": ", b"ab", b"\"\"",
    b"true}", b"-1", b"], ", b"\t\"",
];

/// 256 one-byte tokens, an EOS token, two special tokens (257 `<|call|>`, 258 `<|start|>`) and
/// [`MULTI`].
fn vocab() -> Arc<TokenVocab> {
    static VOCAB: OnceLock<Arc<TokenVocab>> = OnceLock::new();
    VOCAB
        .get_or_init(|| {
            let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
            tokens.extend([b"<eos>".to_vec(), b"<|call|>".to_vec(), b"<|start|>".to_vec()]);
            tokens.extend(MULTI.iter().map(|t| t.to_vec()));
            Arc::new(TokenVocab::new(tokens, &[256, 257, 258], &[256]).expect("byte vocabulary"))
        })
        .clone()
}

fn limits() -> Limits {
    Limits {
        compile_time: Duration::from_millis(500),
        automaton_states: 20_000,
        total_states: 100_000,
        ..Limits::default()
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let grammar = if mode % 2 == 0 {
        let Ok(grammar) = Grammar::parse(text) else { return };
        let printed = grammar.to_string();
        let again = Grammar::parse(&printed).expect("printed grammar parses");
        assert_eq!(again.to_string(), printed, "print/parse is not a fixed point");
        grammar
    } else if mode & 2 == 0 {
        let Ok(schema) = serde_json::from_str::<serde_json::Value>(text) else { return };
        let options = JsonSchemaOptions { limits: limits(), ..JsonSchemaOptions::default() };
        let Ok((grammar, _)) = json_schema_to_grammar(&schema, &options) else { return };
        grammar
    } else {
        let Ok(doc) = serde_json::from_str::<serde_json::Value>(text) else { return };
        let json = JsonSchemaOptions { limits: limits(), ..JsonSchemaOptions::default() };
        let special_tokens = [("<|call|>".to_owned(), 257), ("<|start|>".to_owned(), 258)].into_iter().collect();
        let options = StructuralTagOptions { json, special_tokens };
        // From its text (schemas kept as text), the same grammar or the same error.
        let as_value = structural_tag_to_grammar(&doc, &options);
        let from_text = structural_tag_text_to_grammar(text, &options);
        match (&as_value, &from_text) {
            (Ok(a), Ok(b)) => assert_eq!(a.to_string(), b.to_string(), "from its text, another grammar"),
            (Err(a), Err(b)) => assert_eq!(a, b, "from its text, another error"),
            _ => panic!("from its text: {from_text:?}, as a value: {as_value:?}"),
        }
        let Ok(grammar) = as_value else { return };
        // The lowered grammar prints to text that parses back to the same rules (parsing numbers
        // rules by first mention, so their order may differ: compared as sets of rule lines; the
        // compiler's hints, kept rules and token budgets, are comments the text does not carry).
        let printed = grammar.to_string();
        let again = Grammar::parse(&printed).expect("printed structural-tag grammar parses").to_string();
        let lines = |text: &str| {
            let mut lines: Vec<String> = text.lines().filter(|l| !l.starts_with('#')).map(str::to_owned).collect();
            lines.sort();
            lines
        };
        assert_eq!(lines(&again), lines(&printed), "print/parse changed a rule");
        grammar
    };
    let Ok(compiled) = CompiledGrammar::with_limits(vocab(), &grammar, limits()) else { return };
    let Ok(mut matcher) = Matcher::new(Arc::new(compiled)) else { return };
    let mut mask = vec![0u32; vocab().mask_words()];
    // Walk the input's own bytes (0xFE, 0xFF standing for the special tokens): the mask must agree
    // with what the matcher accepts, and a validated draft with accepting one by one.
    let ids: Vec<u32> = rest
        .iter()
        .take(64)
        .map(|&b| match b {
            0xFE => 257,
            0xFF => 258,
            b => u32::from(b),
        })
        .collect();
    let valid = matcher.validate_tokens(&ids);
    let mut accepted = 0;
    for &token in &ids {
        if matcher.fill_next_token_bitmask(&mut mask).is_err() {
            return;
        }
        let allowed = |t: u32| mask[t as usize / 32] >> (t % 32) & 1 == 1;
        // Every multi-byte token against accepting it on a copy.
        for t in 259..259 + MULTI.len() as u32 {
            assert_eq!(allowed(t), matcher.clone().accept_token(t), "mask and accept disagree on token {t}");
        }
        let allowed = allowed(token);
        let took = matcher.accept_token(token);
        assert_eq!(allowed, took, "mask and accept disagree on token {token}");
        if !took {
            break;
        }
        accepted += 1;
    }
    assert_eq!(valid, accepted, "validate_tokens and accepting one by one disagree");
    if accepted > 0 {
        let _ = matcher.rollback(accepted / 2 + 1);
        let _ = matcher.fill_next_token_bitmask(&mut mask);
    }
});
