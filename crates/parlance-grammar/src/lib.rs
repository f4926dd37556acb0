//! The constrained-decoding engine of parlance: grammars, bytes and token ids, nothing of chat.
//!
//! Front ends lower into the grammar IR ([`Grammar`]): the EBNF/GBNF text syntax, regex terminals, JSON
//! Schema ([`json_schema_to_grammar`]) and XGrammar structural tags ([`structural_tag_to_grammar`]).
//! [`CompiledGrammar`] turns the rules into minimized byte automata for one [`TokenVocab`]; a [`Matcher`] runs an Earley parser over them per sequence and fills
//! token bitmasks from the adaptive token-mask cache (accepted / rejected / uncertain tokens per
//! scannable state, computed just in time and shared across grammars by structural key).
//!
//! Where to start reading: `matcher.rs`, then `mask/`, `earley/`, `automaton/`.
//!
//! **Invariant:** this crate depends on neither `parlance`, `minijinja` nor `tokenizers`; the chat layer
//! depends on it, never the other way round.
//! **Invariant:** `earley` never sees token ids; `mask` is the only module that walks the token trie.

mod automaton;
mod compile;
mod earley;
mod grammar;
mod grammar_compiler;
mod json_schema;
mod limits;
mod mask;
mod matcher;
mod regex;
mod shown;
mod structural_tag;
mod vocab;

pub use compile::{CompileError, CompiledGrammar};
pub use grammar::{Expr, Grammar, GrammarBuilder, GrammarError, Rule, RuleId, TagDispatch, Trigger};
pub use grammar_compiler::{DEFAULT_CACHE_BYTES, GrammarCompiler};
pub use json_schema::{JsonSchemaOptions, SchemaError, SchemaReport, Whitespace, json_schema_to_grammar};
pub use limits::Limits;
pub use mask::check_mask_entries;
#[cfg(feature = "rayon")]
pub use matcher::fill_next_token_bitmasks;
pub use matcher::{Matcher, MatcherError};
pub use structural_tag::{
    StructuralTagError, StructuralTagOptions, structural_tag_text_to_grammar, structural_tag_to_grammar,
};
pub use vocab::{TokenVocab, VocabError};

impl CompiledGrammar {
    /// Compiles a JSON Schema for `vocab`; also returns which keywords were enforced (and, in lenient
    /// mode, which were ignored).
    pub fn from_json_schema(
        vocab: std::sync::Arc<TokenVocab>,
        schema: &serde_json::Value,
        options: &JsonSchemaOptions,
    ) -> Result<(CompiledGrammar, SchemaReport), CompileError> {
        // One deadline for lowering and compiling: `Limits::compile_time` bounds the whole compile.
        let deadline = std::time::Instant::now() + options.limits.compile_time;
        let lowered = json_schema::lower(schema, options, deadline)?;
        // Errors in the compile are said of the schema keyword each rule was made for (the
        // grammar's origins), never of an internal rule.
        let g = CompiledGrammar::with_deadline(vocab, &lowered.grammar, options.limits.clone(), deadline)?;
        Ok((g, lowered.report))
    }

    /// Compiles an XGrammar structural tag (see [`structural_tag_to_grammar`]) for `vocab`.
    pub fn from_structural_tag(
        vocab: std::sync::Arc<TokenVocab>,
        doc: &serde_json::Value,
        options: &StructuralTagOptions,
    ) -> Result<CompiledGrammar, CompileError> {
        let grammar = structural_tag::lower(&structural_tag::Node::from_value(doc), options, Some(&vocab))?;
        CompiledGrammar::with_limits(vocab, &grammar, options.json.limits.clone())
    }

    /// [`CompiledGrammar::from_structural_tag`] for the document's JSON text, as servers receive
    /// it: its schemas are kept as text, so those seen before cost a lookup (no value tree).
    pub fn from_structural_tag_text(
        vocab: std::sync::Arc<TokenVocab>,
        json: &str,
        options: &StructuralTagOptions,
    ) -> Result<CompiledGrammar, CompileError> {
        let doc = structural_tag::parse_document(json).map_err(structural_tag::not_json)?;
        let grammar = structural_tag::lower(&doc, options, Some(&vocab))?;
        CompiledGrammar::with_limits(vocab, &grammar, options.json.limits.clone())
    }
}
