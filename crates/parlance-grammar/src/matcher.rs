//! `Matcher`: one sequence's position in a grammar, driven once per decode step.
//!
//! `fill_next_token_bitmask` writes which tokens may come next, `accept_token` / `accept_string` /
//! `accept_bytes` advance, `validate_tokens` checks a speculative draft without advancing, `fork` copies,
//! `rollback(n)` undoes the last `n` accepted steps (the chart keeps a set per byte and a boundary per
//! step), `forced_bytes` gives the bytes the grammar forces (jump-forward decoding).
//! [`fill_next_token_bitmasks`] fills a batch of matchers' masks in parallel (feature `rayon`).

use crate::compile::CompiledGrammar;
use crate::earley::{Earley, Item, ROOT_ORIGIN, SetLimit};
use crate::mask::{check_candidates, entry};
use std::sync::Arc;

/// Why a matcher operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MatcherError {
    /// An Earley set grew past [`crate::Limits::earley_set_items`].
    #[error("Earley set size limit reached (more than {0} items)")]
    SetLimit(usize),
    /// The mask slice is shorter than the vocabulary needs.
    #[error("mask has {got} words, the vocabulary needs {need}")]
    MaskTooShort {
        /// Words given.
        got: usize,
        /// Words needed.
        need: usize,
    },
    /// `rollback` asked for more steps than were accepted.
    #[error("cannot roll back {asked} steps, only {have} were accepted")]
    RollbackTooFar {
        /// Steps asked.
        asked: usize,
        /// Steps available.
        have: usize,
    },
}

impl From<SetLimit> for MatcherError {
    fn from(e: SetLimit) -> Self {
        MatcherError::SetLimit(e.0)
    }
}

/// Per-sequence matching state over a shared [`CompiledGrammar`].
#[derive(Debug, Clone)]
pub struct Matcher {
    grammar: Arc<CompiledGrammar>,
    parser: Earley,
    /// Number of chart sets before each accepted step; `None` marks the step that accepted EOS.
    steps: Vec<Option<usize>>,
    terminated: bool,
    candidates: Vec<u32>,
    scratch: Vec<u64>,
}

impl Matcher {
    /// A matcher at the start of `grammar`.
    pub fn new(grammar: Arc<CompiledGrammar>) -> Result<Matcher, MatcherError> {
        let parser = Earley::new(
            &grammar.tables,
            Item { rule: grammar.tables.start, state: 0, origin: ROOT_ORIGIN },
            grammar.limits.earley_set_items,
        )?;
        let mut matcher = Matcher {
            grammar,
            parser,
            steps: Vec::new(),
            terminated: false,
            candidates: Vec::new(),
            scratch: Vec::new(),
        };
        matcher.end_spent_budgets();
        Ok(matcher)
    }

    /// Ends every rule whose token budget is spent (`GrammarBuilder::set_token_budget`) and that may
    /// end here: its items are dropped from a copy of the last set, so only what follows it is
    /// allowed. Tokens are counted from the set where the rule began (the item's origin) by the
    /// steps taken since, so rollback needs no state of its own.
    fn end_spent_budgets(&mut self) {
        let g = &*self.grammar;
        if g.token_budgets.is_empty() {
            return;
        }
        let mut spent: Vec<(u32, u32)> = Vec::new();
        for it in self.parser.last() {
            let Some(&(_, max)) = g.token_budgets.iter().find(|&&(rule, _)| rule == it.rule) else { continue };
            if it.origin == ROOT_ORIGIN || !g.tables.rules[it.rule as usize].is_final(it.state) {
                continue;
            }
            // Steps that began at or after the rule's first set.
            let first = self.steps.partition_point(|s| matches!(s, Some(n) if n - 1 < it.origin as usize));
            if self.steps.len() - first >= max as usize && !spent.contains(&(it.rule, it.origin)) {
                spent.push((it.rule, it.origin));
            }
        }
        if !spent.is_empty() {
            self.parser.push_without(|it| spent.contains(&(it.rule, it.origin)));
        }
    }

    /// The grammar this matcher follows.
    pub fn grammar(&self) -> &Arc<CompiledGrammar> {
        &self.grammar
    }

    /// Writes the allowed next tokens into `mask` (bit `id % 32` of word `id / 32`). EOS is allowed
    /// exactly when the input so far is complete; after termination nothing is allowed.
    pub fn fill_next_token_bitmask(&mut self, mask: &mut [u32]) -> Result<(), MatcherError> {
        let g = &*self.grammar;
        let vocab = &*g.vocab;
        let need = vocab.mask_words();
        if mask.len() < need {
            return Err(MatcherError::MaskTooShort { got: mask.len(), need });
        }
        mask.fill(0);
        if self.terminated {
            return Ok(());
        }
        let mask = &mut mask[..need];
        self.candidates.clear();
        let mut seen: Vec<(u32, u32)> = Vec::new();
        let mut uncertain: Vec<Arc<crate::mask::MaskEntry>> = Vec::new();
        for it in self.parser.last() {
            let a = &g.tables.rules[it.rule as usize];
            if !a.is_scannable(it.state) {
                continue;
            }
            let is_root = it.origin == ROOT_ORIGIN;
            if !is_root && seen.contains(&(it.rule, it.state)) {
                continue;
            }
            let e = entry(g, it.rule, it.state)?;
            e.or_into(mask, vocab.normal_mask());
            // The root item has no parent: tokens that need one are rejected outright.
            if !is_root && !e.uncertain.is_empty() {
                seen.push((it.rule, it.state));
                uncertain.push(e);
            }
        }
        if !uncertain.is_empty() {
            // Union of the (sorted) uncertain lists: a single list is used as is; several are merged
            // through a bitset over trie positions, which also sorts and deduplicates them.
            let accepted = |p: u32| {
                let id = vocab.id_at(p);
                mask[id as usize / 32] >> (id % 32) & 1 == 1
            };
            if uncertain.len() == 1 {
                self.candidates.extend(uncertain[0].uncertain.iter().copied().filter(|&p| !accepted(p)));
            } else {
                self.scratch.clear();
                self.scratch.resize(vocab.sorted_len().div_ceil(64), 0);
                for e in &uncertain {
                    for &p in &e.uncertain {
                        self.scratch[p as usize / 64] |= 1 << (p % 64);
                    }
                }
                for (w, &word) in self.scratch.iter().enumerate() {
                    let mut bits = word;
                    while bits != 0 {
                        let p = (w * 64) as u32 + bits.trailing_zeros();
                        bits &= bits - 1;
                        if !accepted(p) {
                            self.candidates.push(p);
                        }
                    }
                }
            }
            check_candidates(&g.tables, vocab, &mut self.parser, &self.candidates, mask)?;
        }
        if self.parser.is_accepting() {
            for &id in vocab.eos_ids() {
                mask[id as usize / 32] |= 1 << (id % 32);
            }
        }
        Ok(())
    }

    /// Advances by token `id`. Returns `false` (state unchanged) if the grammar does not allow it. EOS
    /// is accepted when the input is complete and terminates the matcher.
    pub fn accept_token(&mut self, id: u32) -> bool {
        if self.terminated {
            return false;
        }
        let grammar = self.grammar.clone();
        let vocab = &grammar.vocab;
        if vocab.eos_ids().contains(&id) {
            if self.parser.is_accepting() {
                self.terminated = true;
                self.steps.push(None);
                return true;
            }
            return false;
        }
        let bytes = vocab.grammar_bytes(id);
        if bytes.is_empty() {
            return false;
        }
        self.push(bytes)
    }

    /// Advances by text (one step for [`Matcher::rollback`]), as XGrammar's `accept_string`. Text never
    /// matches a special token, even one spelled the same. Returns `false` (state unchanged) if the
    /// grammar does not allow it.
    pub fn accept_string(&mut self, text: &str) -> bool {
        self.accept_bytes(text.as_bytes())
    }

    /// How many of `draft`'s tokens, from the first, the grammar accepts in a row, without advancing
    /// (speculative decoding's check, vLLM's `validate_tokens`).
    pub fn validate_tokens(&mut self, draft: &[u32]) -> usize {
        let mut accepted = 0;
        for &id in draft {
            if !self.accept_token(id) {
                break;
            }
            accepted += 1;
        }
        self.rollback(accepted).expect("rolling back the steps just taken");
        accepted
    }

    /// An independent copy at the same position (a beam, a parallel sample), sharing the grammar.
    pub fn fork(&self) -> Matcher {
        self.clone()
    }

    /// Advances by raw bytes (one step for [`Matcher::rollback`]). Returns `false` (state unchanged) if
    /// the grammar does not allow them. Bytes never spell a special token: the byte 0xFF, which no
    /// UTF-8 text holds and the grammar's special-token bytes begin with, is refused.
    pub fn accept_bytes(&mut self, bytes: &[u8]) -> bool {
        if self.terminated || bytes.contains(&crate::grammar::SPECIAL_TOKEN_BYTE) {
            return false;
        }
        self.push(bytes)
    }

    fn push(&mut self, bytes: &[u8]) -> bool {
        let before = self.parser.len();
        let g = &*self.grammar;
        match self.parser.push_bytes(&g.tables, bytes) {
            Ok(true) => {
                self.steps.push(Some(before));
                self.end_spent_budgets();
                true
            }
            _ => false,
        }
    }

    /// Undoes the last `n` accepted steps (tokens, byte strings or the terminating EOS).
    pub fn rollback(&mut self, n: usize) -> Result<(), MatcherError> {
        if n > self.steps.len() {
            return Err(MatcherError::RollbackTooFar { asked: n, have: self.steps.len() });
        }
        for _ in 0..n {
            match self.steps.pop().expect("checked length") {
                None => self.terminated = false,
                Some(len) => self.parser.truncate(len),
            }
        }
        Ok(())
    }

    /// Number of steps that [`Matcher::rollback`] can undo.
    pub fn num_steps(&self) -> usize {
        self.steps.len()
    }

    /// Whether the input so far is a complete match (EOS would be allowed).
    pub fn is_accepting(&self) -> bool {
        self.parser.is_accepting()
    }

    /// Whether EOS has been accepted.
    pub fn is_terminated(&self) -> bool {
        self.terminated
    }

    /// The bytes the grammar forces next (for jump-forward decoding): the longest string such that
    /// at every position exactly one byte is possible and the input is not yet complete. Does not
    /// advance the matcher.
    pub fn forced_bytes(&mut self) -> Vec<u8> {
        let g = &*self.grammar;
        let base = self.parser.len();
        let mut out = Vec::new();
        if self.terminated {
            return out;
        }
        while out.len() < g.limits.forced_bytes && !self.parser.is_accepting() {
            let mut only = None;
            let mut count = 0;
            for b in 0..=255u8 {
                let len = self.parser.len();
                if let Ok(true) = self.parser.push_byte(&g.tables, b) {
                    self.parser.truncate(len);
                    count += 1;
                    only = Some(b);
                    if count > 1 {
                        break;
                    }
                }
            }
            match (count, only) {
                // A forced special token is not text to jump over: stop before it.
                (1, Some(b))
                    if b != crate::grammar::SPECIAL_TOKEN_BYTE
                        && matches!(self.parser.push_byte(&g.tables, b), Ok(true)) =>
                {
                    out.push(b)
                }
                _ => break,
            }
        }
        self.parser.truncate(base);
        out
    }

    /// Returns to the start of the grammar.
    pub fn reset(&mut self) {
        self.parser.truncate(1);
        self.steps.clear();
        self.terminated = false;
        self.end_spent_budgets();
    }
}

/// Fills the masks of many matchers (one per sequence of a batch) in parallel on rayon's global
/// pool. `masks` holds `matchers.len()` masks back to back, each `masks.len() / matchers.len()`
/// words long (at least [`crate::TokenVocab::mask_words`] of the matcher's vocabulary). Returns one
/// result per matcher, in order; a failed fill leaves the others unaffected.
#[cfg(feature = "rayon")]
pub fn fill_next_token_bitmasks(matchers: &mut [Matcher], masks: &mut [u32]) -> Vec<Result<(), MatcherError>> {
    use rayon::prelude::*;
    let n = matchers.len();
    if n == 0 {
        return Vec::new();
    }
    let words = masks.len() / n;
    if words == 0 {
        return matchers
            .iter()
            .map(|m| Err(MatcherError::MaskTooShort { got: 0, need: m.grammar.vocab.mask_words() }))
            .collect();
    }
    matchers.par_iter_mut().zip(masks.par_chunks_mut(words)).map(|(m, mask)| m.fill_next_token_bitmask(mask)).collect()
}
