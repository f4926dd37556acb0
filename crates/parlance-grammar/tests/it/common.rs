//! Shared helpers: a synthetic vocabulary, a real one read from `tokenizer.json`, a tiny RNG.

use parlance_grammar::{CompiledGrammar, Grammar, Matcher, TokenVocab};
use std::path::PathBuf;
use std::sync::Arc;

/// A deterministic xorshift generator (tests must be reproducible).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Every printable ASCII byte, a few multi-byte and UTF-8-splitting tokens, and EOS (the last id).
pub fn synthetic_vocab() -> Arc<TokenVocab> {
    let mut toks: Vec<Vec<u8>> = (0x20u8..0x7f).map(|b| vec![b]).collect();
    for s in [
        "{\"", "\":", "\",\"", "\"}", "true", "false", "null", "12", "0.5", "abc", "ab", "a\"", "\"a", "[1,", "],",
        "\n", "  ", "\t", "e+", "-1", "\\n", "\\\"", "\\u00", "é", "€", "+1", "1+", "aa", "aaa", "xyz", "\"\"", "{}",
        "[]", ",\"", "\":\"", "\"b\":", "1}", "}]", "é\"", "2024-", "-01", "T12:", "00:00Z", "@x.com",
    ] {
        toks.push(s.as_bytes().to_vec());
    }
    toks.push(vec![0xC3]);
    toks.push(vec![0xA9]);
    toks.push(vec![0xE2, 0x82]);
    toks.push(Vec::new()); // an unused id
    toks.push(b"<special>".to_vec());
    toks.push(b"<eos>".to_vec());
    let n = toks.len() as u32;
    Arc::new(TokenVocab::new(toks, &[n - 2], &[n - 1]).expect("valid vocab"))
}

/// GPT-2 byte-level alphabet: unicode char -> byte.
fn byte_decoder() -> std::collections::HashMap<char, u8> {
    let mut bs: Vec<u32> = (b'!' as u32..=b'~' as u32).chain(0xA1..=0xAC).chain(0xAE..=0xFF).collect();
    let mut cs = bs.clone();
    let mut n = 0;
    for b in 0..256u32 {
        if !bs.contains(&b) {
            bs.push(b);
            cs.push(256 + n);
            n += 1;
        }
    }
    bs.iter().zip(&cs).map(|(&b, &c)| (char::from_u32(c).expect("valid"), b as u8)).collect()
}

/// Directory of real tokenizers, or `None` (with a message) if absent.
pub fn tokenizers_dir() -> Option<PathBuf> {
    let dir = std::env::var("PARLANCE_TOKENIZERS")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/tokenizers"));
    if dir.is_dir() {
        Some(dir)
    } else if std::env::var_os("PARLANCE_TOKENIZERS").is_some() {
        panic!("PARLANCE_TOKENIZERS is set to {}, which is not a folder", dir.display());
    } else {
        eprintln!("skipping: tokenizers not found at {}", dir.display());
        None
    }
}

/// Reads a byte-level BPE `tokenizer.json` (Llama 3 style); returns the vocab and the EOS id.
pub fn real_vocab(name: &str, eos: &str) -> Option<(Arc<TokenVocab>, Vec<Vec<u8>>)> {
    let path = tokenizers_dir()?.join(name).join("tokenizer.json");
    let text = std::fs::read_to_string(&path).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).expect("tokenizer.json is JSON");
    let dec = byte_decoder();
    let mut toks: Vec<Vec<u8>> = Vec::new();
    let mut special = Vec::new();
    for (s, id) in v["model"]["vocab"].as_object().expect("vocab map") {
        let id = id.as_u64().expect("id") as usize;
        if toks.len() <= id {
            toks.resize(id + 1, Vec::new());
        }
        toks[id] = s.chars().map(|c| dec.get(&c).copied().unwrap_or(b'?')).collect();
    }
    let mut eos_id = None;
    for t in v["added_tokens"].as_array().expect("added tokens") {
        let id = t["id"].as_u64().expect("id") as usize;
        if toks.len() <= id {
            toks.resize(id + 1, Vec::new());
        }
        let content = t["content"].as_str().expect("content");
        toks[id] = content.as_bytes().to_vec();
        special.push(id as u32);
        if content == eos {
            eos_id = Some(id as u32);
        }
    }
    let vocab = TokenVocab::new(toks.clone(), &special, &[eos_id.expect("eos present")]).expect("valid");
    Some((Arc::new(vocab), toks))
}

pub fn compile(vocab: &Arc<TokenVocab>, text: &str) -> Arc<CompiledGrammar> {
    let g = Grammar::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    Arc::new(CompiledGrammar::new(vocab.clone(), &g).unwrap_or_else(|e| panic!("{text}: {e}")))
}

/// Whether the mask allows `id`.
pub fn allowed(mask: &[u32], id: u32) -> bool {
    mask[id as usize / 32] >> (id % 32) & 1 == 1
}

/// Checks the current mask of `m` against trying every token on a clone; returns the allowed ids.
#[track_caller]
pub fn check_mask_brute_force(m: &mut Matcher, vocab: &TokenVocab, context: &str) -> Vec<u32> {
    let mut mask = vec![0u32; vocab.mask_words()];
    m.fill_next_token_bitmask(&mut mask).expect("mask");
    let mut ok = Vec::new();
    for id in 0..vocab.len() as u32 {
        let mut c = m.clone();
        let brute = c.accept_token(id);
        assert_eq!(
            allowed(&mask, id),
            brute,
            "{context}: token {id} {:?}: mask says {}, accept_token says {brute}",
            String::from_utf8_lossy(vocab.token_bytes(id)),
            allowed(&mask, id)
        );
        if brute {
            ok.push(id);
        }
    }
    ok
}
