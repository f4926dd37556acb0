//! Hugging Face tokenizers: rendered prompts to token ids. The only module that uses `tokenizers`.
//!
//! A rendered chat template is tokenized the way transformers tokenizes it in
//! `apply_chat_template(tokenize=True)`: no extra special tokens are added (the template wrote
//! them), and special tokens written in the text are each recognized as their single id.

use std::path::{Path, PathBuf};

/// Why a tokenizer could not be loaded or used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenizerError {
    /// `tokenizer.json` could not be read or parsed.
    #[error("{path}: cannot load tokenizer: {message}")]
    Load {
        /// The file.
        path: PathBuf,
        /// The library's message.
        message: String,
    },
    /// Encoding or decoding failed.
    #[error("tokenizer: {0}")]
    Encode(String),
}

/// A token's byte range `(start, end)` in the encoded text.
pub type ByteRange = (usize, usize);

/// Special tokens that end a model's turn, taken as the ids that end generation when a tokenizer
/// names no `eos_token` (a bare `tokenizer.json`, a transformers tokenizer built without its config).
/// Not `<|end|>`: gpt-oss ends each message of a turn with it.
pub const END_TOKENS: &[&str] = &[
    "</s>",
    "<eos>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|im_end|>",
    "<|return|>",
    "<|call|>",
    "<end_of_turn>",
    "<\u{ff5c}end\u{2581}of\u{2581}sentence\u{ff5c}>",
];

/// A Hugging Face tokenizer loaded from `tokenizer.json`; build once, share (`&self`).
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    /// `eos_token` of the `tokenizer_config.json` beside `tokenizer.json`, if there is one.
    eos_token: Option<String>,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer").field("vocab_size", &self.vocab_size()).finish()
    }
}

impl Tokenizer {
    /// Loads `tokenizer.json` (or the `tokenizer.json` inside a model folder).
    pub fn from_path(path: impl AsRef<Path>) -> Result<Tokenizer, TokenizerError> {
        let mut path = path.as_ref().to_owned();
        if path.is_dir() {
            path.push("tokenizer.json");
        }
        let inner = tokenizers::Tokenizer::from_file(&path)
            .map_err(|e| TokenizerError::Load { path: path.clone(), message: e.to_string() })?;
        let config = path.with_file_name("tokenizer_config.json");
        let eos_token = std::fs::read_to_string(config)
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .and_then(|config| match &config["eos_token"] {
                serde_json::Value::String(token) => Some(token.clone()),
                other => other["content"].as_str().map(str::to_owned),
            });
        Ok(Tokenizer { inner, eos_token })
    }

    /// A tokenizer from the text of a `tokenizer.json` (what `tokenizers.Tokenizer.to_str()` gives),
    /// with the `eos_token` its configuration names, if known.
    pub fn from_json(json: &str, eos_token: Option<String>) -> Result<Tokenizer, TokenizerError> {
        let inner: tokenizers::Tokenizer = json.parse().map_err(|e: tokenizers::Error| TokenizerError::Load {
            path: "<tokenizer JSON>".into(),
            message: e.to_string(),
        })?;
        Ok(Tokenizer { inner, eos_token })
    }

    /// Token ids of a rendered prompt: special tokens in the text become their single ids, and no
    /// BOS/EOS is added (the template wrote whatever it wanted).
    pub fn encode_rendered(&self, text: &str) -> Result<Vec<u32>, TokenizerError> {
        let encoding = self.inner.encode(text, false).map_err(|e| TokenizerError::Encode(e.to_string()))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Like [`Tokenizer::encode_rendered`], with each token's byte range in `text` (ranges may be
    /// trimmed of leading spaces by the tokenizer's post-processor; never outside `text`).
    pub fn encode_with_offsets(&self, text: &str) -> Result<(Vec<u32>, Vec<ByteRange>), TokenizerError> {
        let encoding = self.inner.encode(text, false).map_err(|e| TokenizerError::Encode(e.to_string()))?;
        let offsets = encoding.get_offsets().iter().map(|&(s, e)| (s.min(text.len()), e.min(text.len()))).collect();
        Ok((encoding.get_ids().to_vec(), offsets))
    }

    /// Text of `ids`, special tokens included.
    pub fn decode(&self, ids: &[u32]) -> Result<String, TokenizerError> {
        self.inner.decode(ids, false).map_err(|e| TokenizerError::Encode(e.to_string()))
    }

    /// The id of a token written exactly as `token` (e.g. `<|im_end|>`), if the vocabulary has it.
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// The exact bytes of every token, for constrained decoding (`parlance_grammar::TokenVocab`):
    /// byte-level BPE tokens are mapped back through GPT-2's byte-to-character table; otherwise
    /// (SentencePiece-style) `<0xNN>` byte-fallback tokens are that byte and `▁` is a space. Special
    /// (added, `special: true`) tokens are kept apart; `eos_ids` are the ids that end generation
    /// (empty: the `eos_token` of the `tokenizer_config.json` beside the tokenizer; without one, the
    /// special tokens among [`END_TOKENS`], as XGrammar detects stop tokens).
    pub fn token_vocab(&self, eos_ids: &[u32]) -> Result<parlance_grammar::TokenVocab, TokenizerError> {
        let config_eos: Vec<u32> = match self.eos_token_id() {
            Some(id) => vec![id],
            None => {
                let added = self.inner.get_added_tokens_decoder();
                let mut found: Vec<u32> = added
                    .iter()
                    .filter(|(_, t)| t.special && END_TOKENS.contains(&t.content.as_str()))
                    .map(|(&id, _)| id)
                    .collect();
                found.sort_unstable();
                found
            }
        };
        let eos_ids = if eos_ids.is_empty() { config_eos.as_slice() } else { eos_ids };
        let byte_level = self
            .inner
            .get_decoder()
            .and_then(|d| serde_json::to_string(d).ok())
            .is_some_and(|json| json.contains("\"ByteLevel\""));
        let byte_of = byte_decoder();
        let size = self.inner.get_vocab_size(true);
        let mut tokens = vec![Vec::new(); size];
        for (token, id) in self.inner.get_vocab(true) {
            let Some(slot) = tokens.get_mut(id as usize) else { continue };
            *slot = if byte_level {
                token.chars().map(|c| byte_of.get(&c).copied().unwrap_or(b'?')).collect()
            } else if let Some(hex) = token.strip_prefix("<0x").and_then(|t| t.strip_suffix('>')) {
                u8::from_str_radix(hex, 16).map_or_else(|_| token.clone().into_bytes(), |b| vec![b])
            } else {
                token.replace('\u{2581}', " ").into_bytes()
            };
        }
        let mut special = Vec::new();
        for (id, added) in self.inner.get_added_tokens_decoder() {
            if let Some(slot) = tokens.get_mut(id as usize) {
                *slot = added.content.clone().into_bytes();
                if added.special {
                    special.push(id);
                }
            }
        }
        parlance_grammar::TokenVocab::new(tokens, &special, eos_ids).map_err(|e| TokenizerError::Encode(e.to_string()))
    }

    /// The id of the `eos_token` named by the `tokenizer_config.json` beside the tokenizer.
    pub fn eos_token_id(&self) -> Option<u32> {
        self.eos_token.as_deref().and_then(|token| self.token_to_id(token))
    }

    /// Number of ids, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }
}

/// GPT-2's byte-level alphabet, reversed: the printable character that stands for each byte.
fn byte_decoder() -> std::collections::HashMap<char, u8> {
    let mut bytes: Vec<u32> = (u32::from(b'!')..=u32::from(b'~')).chain(0xA1..=0xAC).chain(0xAE..=0xFF).collect();
    let mut chars = bytes.clone();
    let mut next = 0;
    for b in 0..256u32 {
        if !bytes.contains(&b) {
            bytes.push(b);
            chars.push(256 + next);
            next += 1;
        }
    }
    bytes.iter().zip(&chars).filter_map(|(&b, &c)| Some((char::from_u32(c)?, u8::try_from(b).ok()?))).collect()
}
