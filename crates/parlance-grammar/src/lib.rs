//! The constrained-decoding engine of parlance: grammars, bytes and token ids, nothing of chat.
//!
//! This crate will hold the grammar IR and its front ends (EBNF/GBNF, JSON Schema, regex), the per-rule
//! byte automata, the Earley parser over them, the token vocabulary and trie, the adaptive token-mask
//! cache, TagDispatch and the `Matcher` that an inference engine drives once per decode step. It is
//! usable on its own, like llguidance or XGrammar.
//!
//! It is empty today: the engine is built in its own issue. The crate exists now so that the workspace
//! has its final shape and the dependency rule below is enforced from the start.
//!
//! **Invariant:** this crate depends on neither `parlance`, `minijinja` nor `tokenizers`; the chat layer
//! depends on it, never the other way round.
