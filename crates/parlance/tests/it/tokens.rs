//! Token ids of rendered prompts equal transformers' `apply_chat_template(tokenize=True)`.
//!
//! `tests/expected/token_ids.json` was written by `scripts/golden_token_ids.py` with transformers
//! itself (template from each tokenizer folder's `tokenizer_config.json`, tokenized by the Python
//! `tokenizers` library), so it checks both the render and the special-token handling.

use std::path::Path;

use parlance::{ChatTemplate, RenderRequest, Tokenizer};
use serde_json::Value as Json;

use crate::corpus;

#[test]
fn rendered_prompt_ids_match_transformers() {
    let (Some(corpus), Some(tokenizers)) = (corpus::corpus(), corpus::tokenizers()) else { return };
    let expected_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/expected/token_ids.json");
    let expected: Json = serde_json::from_str(&std::fs::read_to_string(expected_path).unwrap()).unwrap();
    let now =
        chrono::NaiveDateTime::parse_from_str(expected["fixed_date"].as_str().unwrap(), "%Y-%m-%dT%H:%M:%S").unwrap();
    let mut failures = Vec::new();
    let mut compared = 0;
    let mut loaded: std::collections::HashMap<String, (ChatTemplate, Tokenizer)> = Default::default();
    for case in expected["cases"].as_array().unwrap() {
        let name = case["tokenizer"].as_str().unwrap();
        let fixture = case["fixture"].as_str().unwrap();
        let (template, tokenizer) = loaded.entry(name.to_owned()).or_insert_with(|| {
            let folder = tokenizers.join(name);
            // A model folder: template and special tokens from its tokenizer_config.json.
            let template = ChatTemplate::from_path(&folder).expect("tokenizer folder holds a chat template");
            (template, Tokenizer::from_path(&folder).expect("tokenizer.json loads"))
        });
        let request = RenderRequest::from_path(&corpus.join("conversations").join(format!("{fixture}.json"))).unwrap();
        let (conversation, mut options) = request.into_parts().unwrap();
        options.now = Some(now);
        let ours = template.render(&conversation, &options).map(|text| tokenizer.encode_rendered(&text).unwrap());
        match (ours, case.get("ids")) {
            (Ok(ids), Some(want)) => {
                let want: Vec<u32> = serde_json::from_value(want.clone()).unwrap();
                compared += 1;
                if ids != want {
                    let at = ids.iter().zip(&want).take_while(|(a, b)| a == b).count();
                    failures.push(format!("{name}/{fixture}: first differing id at {at}"));
                }
            }
            (Err(_), None) => {}
            (Ok(_), None) => failures.push(format!("{name}/{fixture}: rendered where transformers raised")),
            (Err(e), Some(_)) => failures.push(format!("{name}/{fixture}: {e}")),
        }
    }
    assert!(compared >= 20, "only {compared} cases compared");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn special_tokens_in_text_become_single_ids() {
    let Some(tokenizers) = corpus::tokenizers() else { return };
    let tokenizer = Tokenizer::from_path(tokenizers.join("qwen3")).unwrap();
    let im_start = tokenizer.token_to_id("<|im_start|>").expect("Qwen3 has <|im_start|>");
    let im_end = tokenizer.token_to_id("<|im_end|>").expect("Qwen3 has <|im_end|>");
    let ids = tokenizer.encode_rendered("<|im_start|>user\nhi<|im_end|>").unwrap();
    assert_eq!(ids.first(), Some(&im_start));
    assert_eq!(ids.last(), Some(&im_end));
    assert_eq!(tokenizer.decode(&ids).unwrap(), "<|im_start|>user\nhi<|im_end|>");
}

/// Token bytes for constrained decoding: the bytes of the ids of a text are the text, for every
/// shared tokenizer (byte-level BPE and SentencePiece-style alike), and special tokens are marked.
#[test]
fn token_vocab_bytes_spell_the_encoded_text() {
    let Some(tokenizers) = corpus::tokenizers() else { return };
    let text = "Hello wörld! {\"a\": [1, 2.5, null]}\n\tçà 東京 🎉 <tag>";
    let mut checked = 0;
    for entry in std::fs::read_dir(&tokenizers).unwrap() {
        let folder = entry.unwrap().path();
        if !folder.join("tokenizer.json").is_file() {
            continue;
        }
        let tokenizer = Tokenizer::from_path(&folder).unwrap();
        let vocab = tokenizer.token_vocab(&[]).unwrap();
        assert_eq!(vocab.len(), tokenizer.vocab_size(), "{}", folder.display());
        let ids = tokenizer.encode_rendered(text).unwrap();
        let bytes: Vec<u8> = ids.iter().flat_map(|&id| vocab.token_bytes(id).to_vec()).collect();
        assert_eq!(String::from_utf8_lossy(&bytes), text, "{}", folder.display());
        checked += 1;
    }
    assert!(checked >= 3, "only {checked} tokenizers");
}

/// A tokenizer that names no `eos_token` (a bare `tokenizer.json`) ends generation at its special
/// turn-end tokens, as XGrammar detects stop tokens; a configured EOS wins.
#[test]
fn tokenizers_without_an_eos_token_end_at_their_turn_end_tokens() {
    let Some(tokenizers) = corpus::tokenizers() else { return };
    let cases = [("qwen3", vec!["<|endoftext|>", "<|im_end|>"]), ("llama3_1", vec!["<|end_of_text|>", "<|eot_id|>"])];
    for (folder, want) in cases {
        let json = std::fs::read_to_string(tokenizers.join(folder).join("tokenizer.json")).unwrap();
        let bare = Tokenizer::from_json(&json, None).unwrap();
        let mut want: Vec<u32> = want.iter().map(|t| bare.token_to_id(t).unwrap()).collect();
        want.sort_unstable();
        assert_eq!(bare.token_vocab(&[]).unwrap().eos_ids(), want.as_slice(), "{folder}");
        let configured = Tokenizer::from_path(tokenizers.join(folder)).unwrap();
        let eos = configured.eos_token_id().unwrap();
        assert_eq!(configured.token_vocab(&[]).unwrap().eos_ids(), &[eos], "{folder}");
    }
}
