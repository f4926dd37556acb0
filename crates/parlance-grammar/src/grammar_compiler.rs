//! `GrammarCompiler`: compiles grammars for one vocabulary and owns the caches that make the second
//! compile cheap.
//!
//! Compiled grammars are kept by their source (a structural tag's or schema's JSON text, a grammar's
//! text) up to a byte limit, least recently used first out: the same tool set again is a lookup.
//! Below that, the token-mask pool of the vocabulary (entries shared by structurally equal rules
//! across grammars: the tool seen in another set) and the process-wide automaton cache serve the
//! parts a new grammar shares with old ones. [`GrammarCompiler::clear`] empties all three.

use crate::compile::{CompileError, CompiledGrammar, clear_shape_cache};
use crate::earley::FastMap;
use crate::grammar::Grammar;
use crate::json_schema::JsonSchemaOptions;
use crate::limits::Limits;
use crate::structural_tag::StructuralTagOptions;
use crate::vocab::TokenVocab;
use serde_json::Value;
use std::sync::{Arc, Mutex};

/// Default byte limit of the compiled-grammar cache: 256 MiB.
pub const DEFAULT_CACHE_BYTES: usize = 256 << 20;

/// Compiles grammars for one vocabulary, caching them by source. `Send + Sync`: share it.
#[derive(Debug)]
pub struct GrammarCompiler {
    vocab: Arc<TokenVocab>,
    cache: Mutex<Cache>,
}

#[derive(Debug, Default)]
struct Cache {
    /// By the hash of a grammar's source: the entries with that hash.
    /// (A multiplicative hash: sources are whole documents, and SipHash over 25 KB of tools would
    /// be most of a cache hit.)
    map: FastMap<u64, Vec<Entry>>,
    bytes: usize,
    limit: usize,
    clock: u64,
}

/// A compiled grammar and what it was compiled from: what kind of source, the options (as
/// text), the source's text.
#[derive(Debug)]
struct Entry {
    kind: &'static str,
    options: String,
    source: String,
    grammar: Arc<CompiledGrammar>,
    /// Bytes counted against the limit.
    bytes: usize,
    /// When it was last used.
    used: u64,
}

impl Entry {
    fn is(&self, kind: &str, options: &str, source: &str) -> bool {
        self.kind == kind && self.options == options && self.source == source
    }
}

/// The cache's hash of a source (its kind, options and text).
fn source_hash(kind: &str, options: &str, source: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = crate::earley::ItemHasher::default();
    (kind, options, source).hash(&mut h);
    h.finish()
}

impl GrammarCompiler {
    /// A compiler for `vocab` with the default cache limit ([`DEFAULT_CACHE_BYTES`]).
    pub fn new(vocab: Arc<TokenVocab>) -> GrammarCompiler {
        GrammarCompiler::with_cache_limit(vocab, DEFAULT_CACHE_BYTES)
    }

    /// A compiler whose compiled-grammar cache holds at most `bytes` (0 disables it).
    pub fn with_cache_limit(vocab: Arc<TokenVocab>, bytes: usize) -> GrammarCompiler {
        GrammarCompiler { vocab, cache: Mutex::new(Cache { limit: bytes, ..Cache::default() }) }
    }

    /// The vocabulary grammars are compiled for.
    pub fn vocab(&self) -> &Arc<TokenVocab> {
        &self.vocab
    }

    /// Compiles an XGrammar structural tag given as JSON text, as servers receive it (cached by
    /// that text and the options: the same text again is a hash lookup, never parsed twice).
    pub fn compile_structural_tag(
        &self,
        json: &str,
        options: &StructuralTagOptions,
    ) -> Result<Arc<CompiledGrammar>, CompileError> {
        let options_text = format!("{:?}", options.json);
        self.cached("structural_tag", &options_text, json, || {
            CompiledGrammar::from_structural_tag_text(self.vocab.clone(), json, options)
        })
    }

    /// Compiles a JSON Schema (cached by its JSON text and the options).
    pub fn compile_json_schema(
        &self,
        schema: &Value,
        options: &JsonSchemaOptions,
    ) -> Result<Arc<CompiledGrammar>, CompileError> {
        let (options_text, source) = (format!("{options:?}"), schema.to_string());
        self.cached("json_schema", &options_text, &source, || {
            CompiledGrammar::from_json_schema(self.vocab.clone(), schema, options).map(|(g, _)| g)
        })
    }

    /// Compiles a grammar (cached by its printed text) under default [`Limits`].
    pub fn compile_grammar(&self, grammar: &Grammar) -> Result<Arc<CompiledGrammar>, CompileError> {
        self.compile_grammar_with(grammar, &Limits::default())
    }

    /// Compiles a grammar under `limits` (cached by its printed text and the limits).
    pub fn compile_grammar_with(
        &self,
        grammar: &Grammar,
        limits: &Limits,
    ) -> Result<Arc<CompiledGrammar>, CompileError> {
        let (options_text, source) = (format!("{limits:?}"), grammar.to_string());
        self.cached("grammar", &options_text, &source, || {
            CompiledGrammar::with_limits(self.vocab.clone(), grammar, limits.clone())
        })
    }

    /// Bytes held by the compiled-grammar cache and the vocabulary's mask pool.
    pub fn cache_bytes(&self) -> usize {
        self.cache.lock().map(|c| c.bytes).unwrap_or(0) + self.vocab.pool.bytes()
    }

    /// Empties every cache: compiled grammars, the vocabulary's mask pool (not its plain-token
    /// sets, which depend on the vocabulary alone), the automaton cache, the lowered schemas and
    /// the parsed patterns. Grammars handed out earlier stay valid.
    pub fn clear(&self) {
        if let Ok(mut c) = self.cache.lock() {
            c.map.clear();
            c.bytes = 0;
        }
        self.vocab.pool.clear();
        clear_shape_cache();
        crate::json_schema::clear_lowered_schemas();
        crate::json_schema::clear_regex_cache();
    }

    fn cached(
        &self,
        kind: &'static str,
        options: &str,
        source: &str,
        compile: impl FnOnce() -> Result<CompiledGrammar, CompileError>,
    ) -> Result<Arc<CompiledGrammar>, CompileError> {
        let hash = source_hash(kind, options, source);
        if let Ok(mut c) = self.cache.lock() {
            c.clock += 1;
            let now = c.clock;
            if let Some(entry) = c.map.get_mut(&hash).and_then(|v| v.iter_mut().find(|e| e.is(kind, options, source))) {
                entry.used = now;
                return Ok(entry.grammar.clone());
            }
        }
        // Compiled outside the lock: other requests go on meanwhile.
        let grammar = Arc::new(compile()?);
        let bytes = grammar.approx_bytes() + options.len() + source.len();
        if let Ok(mut c) = self.cache.lock()
            && bytes <= c.limit
        {
            while c.bytes + bytes > c.limit {
                let oldest =
                    c.map.iter().flat_map(|(&h, v)| v.iter().enumerate().map(move |(i, e)| (e.used, h, i))).min();
                let Some((_, h, i)) = oldest else { break };
                if let Some(v) = c.map.get_mut(&h) {
                    let freed = v.swap_remove(i).bytes;
                    if v.is_empty() {
                        c.map.remove(&h);
                    }
                    c.bytes -= freed;
                }
            }
            let now = c.clock;
            let entries = c.map.entry(hash).or_default();
            // Another request may have compiled the same source meanwhile: one entry.
            if entries.iter().any(|e| e.is(kind, options, source)) {
                return Ok(grammar);
            }
            let (options, source) = (options.to_owned(), source.to_owned());
            entries.push(Entry { kind, options, source, grammar: grammar.clone(), bytes, used: now });
            c.bytes += bytes;
        }
        Ok(grammar)
    }
}
