//! parlance against XGrammar itself, on XGrammar's own builtin structural tags.
//!
//! `tests/data/xgrammar/styles.json` is written by `tests/data/xgrammar/generate.py` with xgrammar
//! 0.2.8: for every registered model style and four requests, the document, token walks sampled
//! under XGrammar's masks with the Llama 3.1 vocabulary (with XGrammar's mask at some steps), and
//! strings (the walks' texts and mutations) with XGrammar's verdicts. Here parlance compiles each
//! document and must agree: byte level (does `accept_string` take the text, may the grammar end
//! there) and token level (the same tokens accepted, the same masks), with XGrammar's strict
//! reading of unstated `additionalProperties` (`JsonSchemaOptions::strict_properties`; parlance's
//! default is the spec's). Tokens XGrammar admits in free text that parlance refuses by design
//! (special tokens, bytes that cannot continue valid UTF-8) are set aside. `tests/expected/xgrammar.json`
//! lists the documents parlance does not compile or where it disagrees, each with who is right (a
//! ratchet: an unlisted difference fails, a listed case that now agrees is reported).

use std::collections::BTreeMap;
use std::sync::Arc;

use parlance_grammar::{CompiledGrammar, Matcher, StructuralTagOptions, TokenVocab};
use serde_json::Value as Json;

use crate::corpus;

fn data() -> Json {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/xgrammar/styles.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn expected() -> BTreeMap<String, String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/expected/xgrammar.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Every byte a token of its own, and an EOS: the byte-level check.
fn byte_vocab() -> Arc<TokenVocab> {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    tokens.push(b"<eos>".to_vec());
    Arc::new(TokenVocab::new(tokens, &[], &[256]).unwrap())
}

/// The allowed ids of a stored mask: `[start, end)` runs, flattened.
fn from_runs(runs: &Json) -> Vec<u32> {
    let runs: Vec<u32> = runs.as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
    runs.chunks(2).flat_map(|r| r[0]..r[1]).collect()
}

fn allowed(matcher: &mut Matcher, vocab_size: usize) -> Vec<u32> {
    let mut mask = vec![0u32; vocab_size.div_ceil(32)];
    matcher.fill_next_token_bitmask(&mut mask).unwrap();
    (0..vocab_size as u32).filter(|&t| mask[t as usize / 32] >> (t % 32) & 1 == 1).collect()
}

/// What parlance says differently from XGrammar on one case, if anything.
fn differences(
    case: &Json,
    text_vocab: &Arc<TokenVocab>,
    vocab: &Arc<TokenVocab>,
    tokenizer: &parlance::Tokenizer,
) -> Vec<String> {
    let doc = &case["doc"];
    let mut out = Vec::new();
    // XGrammar closes objects whose schema does not say `additionalProperties` (its strict mode);
    // parlance follows JSON Schema by default (allowed) and has the same mode as an option.
    let mut options = StructuralTagOptions::default();
    options.json.strict_properties = true;
    let bytes = match CompiledGrammar::from_structural_tag(text_vocab.clone(), doc, &options) {
        Ok(compiled) => Arc::new(compiled),
        Err(e) => return vec![format!("does not compile: {e}")],
    };
    for s in case["strings"].as_array().unwrap() {
        let text = s["text"].as_str().unwrap();
        let mut matcher = Matcher::new(bytes.clone()).unwrap();
        let accepted = matcher.accept_string(text);
        let complete = accepted && matcher.is_accepting();
        let (want_accepted, want_complete) = (s["accepted"].as_bool().unwrap(), s["complete"].as_bool().unwrap());
        if (accepted, complete) != (want_accepted, want_complete) {
            out.push(format!(
                "string {text:?}: parlance accepted {accepted} complete {complete}, XGrammar {want_accepted} {want_complete}"
            ));
        }
    }
    let tokens = match CompiledGrammar::from_structural_tag(vocab.clone(), doc, &options) {
        Ok(compiled) => Arc::new(compiled),
        Err(e) => return vec![format!("does not compile for the vocabulary: {e}")],
    };
    let decode = |ids: &[u32]| tokenizer.decode(ids).unwrap_or_default();
    // XGrammar admits, in free text, tokens that parlance refuses by design: special tokens (a
    // grammar allows one only where it names it) and bytes that cannot continue valid UTF-8 (the
    // output must decode). Those differences are counted apart, not failed.
    let by_design = |before: &[u8], t: u32| {
        if vocab.is_special(t) && !vocab.eos_ids().contains(&t) {
            return true;
        }
        let mut text = before.to_vec();
        text.extend_from_slice(vocab.token_bytes(t));
        std::str::from_utf8(&text).is_err_and(|e| e.error_len().is_some())
    };
    for walk in case["walks"].as_array().unwrap() {
        let ids: Vec<u32> = walk["tokens"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
        let masks = walk["masks"].as_array().unwrap();
        let mut matcher = Matcher::new(tokens.clone()).unwrap();
        let mut before: Vec<u8> = Vec::new();
        for step in 0..=ids.len() {
            if let Some(mask) = masks.iter().find(|m| m["after"].as_u64() == Some(step as u64)) {
                let mut want = from_runs(&mask["runs"]);
                want.retain(|&t| !by_design(&before, t));
                let got = allowed(&mut matcher, vocab.len());
                if got != want {
                    let only_ours: Vec<u32> = got.iter().copied().filter(|t| want.binary_search(t).is_err()).collect();
                    let only_theirs: Vec<u32> =
                        want.iter().copied().filter(|t| got.binary_search(t).is_err()).collect();
                    let show = |ids: &[u32]| {
                        ids.iter().take(4).map(|&t| format!("{:?}", decode(&[t]))).collect::<Vec<_>>().join(" ")
                    };
                    out.push(format!(
                        "mask after {:?}: {} allowed by parlance only ({}), {} by XGrammar only ({})",
                        decode(&ids[..step]),
                        only_ours.len(),
                        show(&only_ours),
                        only_theirs.len(),
                        show(&only_theirs)
                    ));
                }
            }
            if step == ids.len() {
                break;
            }
            if by_design(&before, ids[step]) {
                // XGrammar's walk went where parlance does not: the rest is not comparable.
                break;
            }
            if !matcher.accept_token(ids[step]) {
                out.push(format!(
                    "token {step} {:?} refused after {:?}",
                    decode(&ids[step..=step]),
                    decode(&ids[..step])
                ));
                break;
            }
            before.extend_from_slice(vocab.token_bytes(ids[step]));
        }
    }
    out
}

#[test]
fn xgrammar_builtin_styles_compile_and_agree_with_xgrammar() {
    let Some(tokenizers) = corpus::tokenizers() else { return };
    let data = data();
    let tokenizer = parlance::Tokenizer::from_path(tokenizers.join(data["tokenizer"].as_str().unwrap())).unwrap();
    let eos = data["eos"].as_u64().unwrap() as u32;
    let vocab = Arc::new(tokenizer.token_vocab(&[eos]).unwrap());
    let text_vocab = byte_vocab();
    let expected = expected();
    let (mut unexpected, mut now_agree, mut agree) = (Vec::new(), Vec::new(), 0);
    let cases = data["cases"].as_array().unwrap();
    for case in cases.iter().filter(|c| c.get("doc").is_some() && c.get("xgrammar_error").is_none()) {
        let id = case["id"].as_str().unwrap();
        let diffs = differences(case, &text_vocab, &vocab, &tokenizer);
        match (diffs.is_empty(), expected.contains_key(id)) {
            (true, true) => now_agree.push(id.to_owned()),
            (true, false) => agree += 1,
            (false, true) => {}
            (false, false) => unexpected.push(format!("{id}:\n  {}", diffs[..diffs.len().min(6)].join("\n  "))),
        }
        if std::env::var_os("PARLANCE_XGRAMMAR_VERBOSE").is_some() && !diffs.is_empty() {
            eprintln!("{id}:\n  {}", diffs[..diffs.len().min(6)].join("\n  "));
        }
    }
    let compared = cases.iter().filter(|c| !expected.contains_key(c["id"].as_str().unwrap()));
    let (strings, masks) = compared.fold((0, 0), |(s, m), c| {
        let walks = c["walks"].as_array().map_or(0, |w| w.iter().map(|w| w["masks"].as_array().unwrap().len()).sum());
        (s + c["strings"].as_array().map_or(0, Vec::len), m + walks)
    });
    eprintln!(
        "XGrammar builtin styles: {agree} of {} documents agree ({strings} strings, {masks} masks); {} listed",
        cases.len(),
        expected.len()
    );
    assert!(unexpected.is_empty(), "parlance and XGrammar differ:\n{}", unexpected.join("\n"));
    assert!(now_agree.is_empty(), "listed in tests/expected/xgrammar.json but now agree: {now_agree:?}");
    assert!(agree + expected.len() >= 60, "too few documents checked: {agree}");
}
