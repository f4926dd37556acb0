//! Fuzz target: the grammar engine on arbitrary input. Byte 0 picks the front end:
//! - even: the rest is GBNF/EBNF text; a grammar that parses must print to text that parses to the
//!   same grammar, and compile (or fail with an error) under lowered limits;
//! - odd: the rest is a JSON Schema; it compiles or fails with an error.
//!
//! A compiled grammar is then walked: masks filled over a byte vocabulary, the input's own bytes fed
//! one at a time, rollbacks. Any `Err` is fine; a panic, abort, hang (limits lowered) or a mask that
//! disagrees with `accept_bytes` is a bug.

#![no_main]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use parlance_grammar::{CompiledGrammar, Grammar, JsonSchemaOptions, Limits, Matcher, TokenVocab, json_schema_to_grammar};

/// 256 one-byte tokens plus an EOS token.
fn vocab() -> Arc<TokenVocab> {
    static VOCAB: OnceLock<Arc<TokenVocab>> = OnceLock::new();
    VOCAB
        .get_or_init(|| {
            let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
            tokens.push(b"<eos>".to_vec());
            Arc::new(TokenVocab::new(tokens, &[256], &[256]).expect("byte vocabulary"))
        })
        .clone()
}

fn limits() -> Limits {
    Limits { compile_time: Duration::from_millis(500), automaton_states: 20_000, total_states: 100_000, ..Limits::default() }
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
    } else {
        let Ok(schema) = serde_json::from_str::<serde_json::Value>(text) else { return };
        let options = JsonSchemaOptions { limits: limits(), ..JsonSchemaOptions::default() };
        let Ok((grammar, _)) = json_schema_to_grammar(&schema, &options) else { return };
        grammar
    };
    let Ok(compiled) = CompiledGrammar::with_limits(vocab(), &grammar, limits()) else { return };
    let Ok(mut matcher) = Matcher::new(Arc::new(compiled)) else { return };
    let mut mask = vec![0u32; vocab().mask_words()];
    // Walk the input's own bytes: the mask must agree with what the matcher accepts.
    let mut accepted = 0;
    for &byte in rest.iter().take(64) {
        if matcher.fill_next_token_bitmask(&mut mask).is_err() {
            return;
        }
        let allowed = mask[byte as usize / 32] >> (byte % 32) & 1 == 1;
        let took = matcher.accept_token(u32::from(byte));
        assert_eq!(allowed, took, "mask and accept disagree on byte {byte}");
        if !took {
            break;
        }
        accepted += 1;
    }
    if accepted > 0 {
        let _ = matcher.rollback(accepted / 2 + 1);
        let _ = matcher.fill_next_token_bitmask(&mut mask);
    }
});
