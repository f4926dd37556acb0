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

/// A Hugging Face tokenizer loaded from `tokenizer.json`; build once, share (`&self`).
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
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
        Ok(Tokenizer { inner })
    }

    /// Token ids of a rendered prompt: special tokens in the text become their single ids, and no
    /// BOS/EOS is added (the template wrote whatever it wanted).
    pub fn encode_rendered(&self, text: &str) -> Result<Vec<u32>, TokenizerError> {
        let encoding = self.inner.encode(text, false).map_err(|e| TokenizerError::Encode(e.to_string()))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Text of `ids`, special tokens included.
    pub fn decode(&self, ids: &[u32]) -> Result<String, TokenizerError> {
        self.inner.decode(ids, false).map_err(|e| TokenizerError::Encode(e.to_string()))
    }

    /// The id of a token written exactly as `token` (e.g. `<|im_end|>`), if the vocabulary has it.
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// Number of ids, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }
}
