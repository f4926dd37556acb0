//! Token masks: which vocabulary entries may come next; the only walker of the token trie.
//!
//! [`MaskEntry`] keeps, for one scannable item `(rule, state)`, the tokens always accepted (all their
//! bytes are consumed inside the rule), the tokens that are uncertain (the rule may complete before the
//! token ends, so the rest depends on the context) and, implicitly, the rejected rest. Entries are
//! computed the first time an item is reached (JIT), by walking the trie with an Earley parser rooted at
//! the item, and shared across grammars through [`MaskPool`], keyed by the structural key of the rule
//! (see `CompiledGrammar::key`). At run time only uncertain tokens are checked against the full chart,
//! again by a trie-ordered walk that reuses the parser state of shared prefixes. The accepted set is
//! stored as a list, a bitset or a complement list, whichever is smallest; a state that reads `k`
//! JSON-string characters for certain (a string's inside, a `maxLength` chain, an unanchored
//! `pattern`) stores only what it accepts beyond the vocabulary's shared set of plain tokens of at
//! most `k` characters, which saves building a bitset of most of the vocabulary per state. A string's
//! inside (every such character leads back to it) does not walk the trie at all: a token that
//! begins with string characters fares as what follows them does, so the walk covers the
//! vocabulary's [`StringExits`](crate::vocab::StringExits), a few hundred distinct rests. Free
//! text (a dispatch's, and the partial matches of its triggers) walks only the tokens that can
//! leave it, from the vocabulary's [`FreeExits`](crate::vocab::FreeExits) (see
//! [`free_text_entry`]).

use crate::compile::CompiledGrammar;
use crate::earley::{Earley, Item, ROOT_ORIGIN, SetLimit, Tables};
use crate::vocab::{SIBLINGS_END, TokenVocab, Trie, TrieNode};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Tokens a scannable item accepts, in the most compact form.
#[derive(Debug)]
pub(crate) enum Accepted {
    /// These token ids (in no particular order).
    Ids(Vec<u32>),
    /// A bitset over token ids (`u32` words, like the output mask).
    Bits(Vec<u32>),
    /// Every normal (non-special) token except these ids (sorted).
    AllExcept(Vec<u32>),
    /// The tokens of at most `k` JSON-string characters (one set per vocabulary and `k`, shared by
    /// every state that reads `k` such characters for certain: a string's inside, a `maxLength`
    /// chain) and these ids.
    PlainAnd(Arc<PlainSet>, Vec<u32>),
}

/// The tokens that are JSON-string characters only, at most `k` of them, as a mask and as trie
/// positions.
#[derive(Debug)]
pub(crate) struct PlainSet {
    words: Vec<u32>,
    positions: PosBits,
}

/// The cached token classification of one scannable item.
#[derive(Debug)]
pub(crate) struct MaskEntry {
    pub(crate) accepted: Accepted,
    /// Sorted trie positions of uncertain tokens.
    pub(crate) uncertain: Vec<u32>,
}

impl MaskEntry {
    fn bytes(&self) -> usize {
        let a = match &self.accepted {
            Accepted::Ids(v) | Accepted::Bits(v) | Accepted::AllExcept(v) | Accepted::PlainAnd(_, v) => v.len(),
        };
        (a + self.uncertain.len()) * 4 + 64
    }

    /// ORs the accepted tokens into `mask`.
    pub(crate) fn or_into(&self, mask: &mut [u32], normal: &[u32]) {
        match &self.accepted {
            Accepted::Ids(ids) => {
                for &id in ids {
                    mask[id as usize / 32] |= 1 << (id % 32);
                }
            }
            Accepted::Bits(bits) => {
                for (m, b) in mask.iter_mut().zip(bits) {
                    *m |= b;
                }
            }
            Accepted::PlainAnd(plain, ids) => {
                for (m, b) in mask.iter_mut().zip(&plain.words) {
                    *m |= b;
                }
                for &id in ids {
                    mask[id as usize / 32] |= 1 << (id % 32);
                }
            }
            Accepted::AllExcept(ids) => {
                // Whole words between the excluded ids are copied as they are (a loop the compiler
                // vectorizes); only words holding an excluded id are edited.
                let mut from = 0;
                let mut i = 0;
                while let Some(&id) = ids.get(i) {
                    let w = id as usize / 32;
                    for (m, n) in mask[from..w].iter_mut().zip(&normal[from..w]) {
                        *m |= n;
                    }
                    let mut word = normal[w];
                    while let Some(&id) = ids.get(i).filter(|&&id| id as usize / 32 == w) {
                        word &= !(1 << (id % 32));
                        i += 1;
                    }
                    mask[w] |= word;
                    from = w + 1;
                }
                for (m, n) in mask[from..].iter_mut().zip(&normal[from..]) {
                    *m |= n;
                }
            }
        }
    }
}

type PoolKey = (u64, u32);
/// Entries under one hash: the full structural key (to rule out collisions) and the entry.
type PoolBucket = Vec<(Arc<[u32]>, Arc<MaskEntry>)>;

/// Cross-grammar pool of mask entries for one vocabulary, keyed by structural key and state.
#[derive(Debug, Default)]
pub(crate) struct MaskPool {
    inner: Mutex<PoolInner>,
    /// Per `k`, the tokens of at most `k` JSON-string characters. They depend on the vocabulary
    /// alone, like its trie, so [`MaskPool::clear`] keeps them: a cleared cache recompiles grammars,
    /// not the tokenizer's own tables. At most one set per `k ≤ max_plain`.
    plain: Mutex<HashMap<u32, Arc<PlainSet>>>,
}

#[derive(Debug, Default)]
struct PoolInner {
    map: HashMap<PoolKey, PoolBucket>,
    /// Per component shape: trie nodes whose whole subtree stays inside the component.
    components: HashMap<Vec<u32>, Arc<PosBits>>,
    /// Automaton tables numbered for structural keys, by the hash of their shallow key: see
    /// [`MaskPool::tables_number`].
    tables: HashMap<u64, Vec<NumberedTables>>,
    bytes: usize,
    len: usize,
}

/// Tables' shallow key and the number they were given.
type NumberedTables = (Arc<[u32]>, u64);

/// Numbers [`MaskPool::tables_number`] gives; never given twice in a process, so keys made before
/// a `clear` stay apart from keys made after.
static NEXT_TABLES_NUMBER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The pool stops growing (entries are still computed, just not shared) past this many bytes.
const POOL_MAX_BYTES: usize = 1 << 30;

impl MaskPool {
    pub(crate) fn len(&self) -> usize {
        self.inner.lock().map(|p| p.len).unwrap_or(0)
    }

    /// Bytes the pool holds (as its byte limit counts them).
    pub(crate) fn bytes(&self) -> usize {
        self.inner.lock().map(|p| p.bytes).unwrap_or(0)
    }

    /// Forgets every entry; grammars compiled earlier keep the entries they already looked up. The
    /// plain-token sets, which no grammar shapes, stay.
    pub(crate) fn clear(&self) {
        if let Ok(mut p) = self.inner.lock() {
            *p = PoolInner::default();
        }
    }

    fn get(&self, key: &(u64, Arc<[u32]>), state: u32) -> Option<Arc<MaskEntry>> {
        let p = self.inner.lock().ok()?;
        let v = p.map.get(&(key.0, state))?;
        v.iter().find(|(k, _)| Arc::ptr_eq(k, &key.1) || **k == *key.1).map(|(_, e)| e.clone())
    }

    fn component(&self, key: &[u32]) -> Option<Arc<PosBits>> {
        self.inner.lock().ok()?.components.get(key).cloned()
    }

    fn insert_component(&self, key: Vec<u32>, flags: Arc<PosBits>) {
        let Ok(mut p) = self.inner.lock() else { return };
        let add = flags.0.len() * 8 + key.len() * 4;
        if p.bytes + add > POOL_MAX_BYTES {
            return;
        }
        p.bytes += add;
        p.components.insert(key, flags);
    }

    /// The tokens of at most `k` JSON-string characters (computed once per `k`).
    fn plain_set(&self, vocab: &TokenVocab, k: u32) -> Arc<PlainSet> {
        if let Some(set) = self.plain.lock().ok().and_then(|p| p.get(&k).cloned()) {
            return set;
        }
        let mut words = vec![0u32; vocab.mask_words()];
        let mut positions = PosBits::new(vocab.sorted_len());
        for p in 0..vocab.sorted_len() as u32 {
            let chars = vocab.plain_at(p);
            if chars > 0 && chars <= k {
                positions.set(p);
                let id = vocab.id_at(p);
                words[id as usize / 32] |= 1 << (id % 32);
            }
        }
        let set = Arc::new(PlainSet { words, positions });
        if let Ok(mut p) = self.plain.lock() {
            p.insert(k, set.clone());
        }
        set
    }

    /// The number of the automaton tables whose shallow key is `key`: equal tables get one number,
    /// whether or not they are one object (the automaton cache shares tables between grammars, but
    /// a cleared or full cache builds them again). Structural keys name tables by it rather than
    /// encoding them for every grammar. Past the pool's byte limit, tables get a number of their own
    /// (they then miss sharing, as entries past the limit do).
    pub(crate) fn tables_number(&self, key: &(u64, Arc<[u32]>)) -> u64 {
        let fresh = || NEXT_TABLES_NUMBER.fetch_add(1, Ordering::Relaxed);
        let Ok(mut p) = self.inner.lock() else { return fresh() };
        let known = p.tables.get(&key.0).and_then(|v| v.iter().find(|(k, _)| Arc::ptr_eq(k, &key.1) || **k == *key.1));
        if let Some(&(_, n)) = known {
            return n;
        }
        let n = fresh();
        let add = key.1.len() * 4 + 32;
        if p.bytes + add <= POOL_MAX_BYTES {
            p.bytes += add;
            p.tables.entry(key.0).or_default().push((key.1.clone(), n));
        }
        n
    }

    fn insert(&self, key: &(u64, Arc<[u32]>), state: u32, entry: Arc<MaskEntry>) {
        let Ok(mut p) = self.inner.lock() else { return };
        let add = entry.bytes() + key.1.len() / 8;
        if p.bytes + add > POOL_MAX_BYTES {
            return;
        }
        p.bytes += add;
        p.len += 1;
        p.map.entry((key.0, state)).or_default().push((key.1.clone(), entry));
    }
}

/// Bitset over trie positions or trie nodes.
#[derive(Debug)]
pub(crate) struct PosBits(Vec<u64>);

impl PosBits {
    fn new(n: usize) -> PosBits {
        PosBits(vec![0; n.div_ceil(64)])
    }
    fn set(&mut self, p: u32) {
        self.0[p as usize / 64] |= 1 << (p % 64);
    }
    fn get(&self, p: u32) -> bool {
        self.0[p as usize / 64] >> (p % 64) & 1 == 1
    }

    /// The words covering `[lo, hi)` (not empty): index, the word, and which of its bits are inside.
    fn words_in(&self, lo: u32, hi: u32) -> impl Iterator<Item = (usize, u64, u64)> + '_ {
        let (lo, hi) = (lo as usize, hi as usize);
        (lo / 64..hi.div_ceil(64)).map(move |w| {
            let (from, to) = (lo.max(w * 64) - w * 64, hi.min(w * 64 + 64) - w * 64);
            let inside = if to - from == 64 { u64::MAX } else { ((1u64 << (to - from)) - 1) << from };
            (w, self.0[w], inside)
        })
    }

    fn any_in(&self, lo: u32, hi: u32) -> bool {
        lo < hi && self.words_in(lo, hi).any(|(_, w, inside)| w & inside != 0)
    }

    fn count_in(&self, lo: u32, hi: u32) -> usize {
        if lo >= hi {
            return 0;
        }
        self.words_in(lo, hi).map(|(_, w, inside)| (w & inside).count_ones() as usize).sum()
    }

    /// Calls `f` with every position in `[lo, hi)` whose bit is clear.
    fn each_clear_in(&self, lo: u32, hi: u32, f: &mut dyn FnMut(u32)) {
        if lo >= hi {
            return;
        }
        for (w, word, inside) in self.words_in(lo, hi) {
            let mut bits = !word & inside;
            while bits != 0 {
                f((w * 64) as u32 + bits.trailing_zeros());
                bits &= bits - 1;
            }
        }
    }
}

/// Sorted, disjoint ranges `[lo, hi)` of trie positions: what a walk accepts. Walks visit the trie
/// in preorder, so ranges arrive in increasing order and adjacent ones merge; an entry that accepts
/// a few tokens costs a few ranges, not a bitset of the whole vocabulary.
#[derive(Debug, Default)]
pub(crate) struct Ranges(Vec<(u32, u32)>);

impl Ranges {
    fn push(&mut self, lo: u32, hi: u32) {
        if lo >= hi {
            return;
        }
        match self.0.last_mut() {
            Some(last) if last.1 >= lo => {
                debug_assert!(last.0 <= lo, "walks accept positions in increasing order");
                last.1 = last.1.max(hi);
            }
            _ => self.0.push((lo, hi)),
        }
    }

    fn count(&self) -> usize {
        self.0.iter().map(|&(lo, hi)| (hi - lo) as usize).sum()
    }

    /// The ranges not covered, within `[0, n)`.
    fn gaps(&self, n: u32) -> impl Iterator<Item = (u32, u32)> + '_ {
        let mut at = 0;
        self.0.iter().map(Some).chain(std::iter::once(None)).filter_map(move |r| {
            let (lo, hi) = r.copied().unwrap_or((n, n));
            let gap = (at, lo);
            at = hi;
            (gap.0 < gap.1).then_some(gap)
        })
    }
}

/// Returns the entry of scannable item `(rule, state)`, computing and pooling it on first use.
pub(crate) fn entry(g: &CompiledGrammar, rule: u32, state: u32) -> Result<Arc<MaskEntry>, SetLimit> {
    let slot = g.slot(rule, state);
    if let Some(e) = slot.get() {
        return Ok(e.clone());
    }
    // Automata built once (whole schemas, unlikely to recur) keep their entries local and never
    // compute their (costly) structural key. Small ones are also looked up by their byte
    // transitions alone, for entries whose walk never reached a rule reference (a dispatch's free
    // text, for any tool set).
    let small = g.pool_size(rule) <= POOL_MAX_STATES && !cheaper_than_its_key(g, rule, state);
    let pooled = small && g.tables.rules[rule as usize].recurs();
    let key = pooled.then(|| g.key(rule));
    // Without references the two keys say the same (see `CompiledGrammar::key`).
    let edge_free = !g.tables.rules[rule as usize].has_rule_edges();
    let shallow = (small && !(pooled && edge_free)).then(|| g.byte_key(rule));
    let found =
        key.and_then(|k| g.vocab.pool.get(k, state)).or_else(|| shallow.and_then(|k| g.vocab.pool.get(k, state)));
    let e = match found {
        Some(e) => e,
        None => {
            let mut used_rules = false;
            let e = Arc::new(compute_entry(g, rule, state, &mut used_rules)?);
            if let Some(k) = key {
                g.vocab.pool.insert(k, state, e.clone());
            }
            if let (false, Some(k)) = (used_rules, shallow) {
                g.vocab.pool.insert(k, state, e.clone());
            }
            e
        }
    };
    Ok(slot.get_or_init(|| e).clone())
}

/// Rules whose automata (with the rules they reach) exceed this many states are not pooled.
const POOL_MAX_STATES: usize = 4_000;

/// Automata above this many states pool an entry only when its walk may be long (see
/// [`cheaper_than_its_key`]).
const KEY_COST_STATES: usize = 256;

/// Tokens a walk may reach below which an entry of a large automaton is not pooled.
const FEW_TOKENS: usize = 1_024;

/// Whether computing the entry of `(rule, state)` costs less than the structural key of a large
/// automaton that pooling would need: the state reads no reference, and the tokens its first bytes
/// lead are few, so the walk can visit no more than their subtrees. gpt-oss's choice of messages,
/// one per tool, starts with a special token: every request with a new tool is a new automaton
/// of thousands of states, whose key cost ten times its first mask.
fn cheaper_than_its_key(g: &CompiledGrammar, rule: u32, state: u32) -> bool {
    let a = &g.tables.rules[rule as usize];
    if g.pool_size(rule) <= KEY_COST_STATES || !a.local_edges(state).is_empty() {
        return false;
    }
    let live = a.live_bytes(state);
    let trie = g.vocab.trie();
    let mut reach = 0;
    for &(b, n) in &trie.roots {
        if live[b as usize / 64] >> (b % 64) & 1 == 1 {
            let node = &trie.nodes[n as usize];
            reach += (node.hi - node.lo) as usize;
            if reach > FEW_TOKENS {
                return false;
            }
        }
    }
    true
}

/// Components (strongly connected byte-transition regions, such as the inside of a JSON string)
/// larger than this are not shared.
const COMPONENT_MAX: usize = 32;

/// Classifies every token for item `(rule, state)`. While the path stays on automaton states that
/// predict nothing, the walk is a plain DFA walk; below a state with rule references an Earley parser
/// rooted at that state takes over for the subtree.
///
/// Component sharing: the tokens that stay inside the start state's component depend only on the
/// component's shape, so the first walk from a component records, per trie node, whether its whole
/// subtree stays inside; walks from any state with an isomorphic component skip those subtrees.
///
/// A string's inside ([`crate::automaton::Core::is_string_body`]) walks no token trie at all
/// but the vocabulary's [`StringExits`](crate::vocab::StringExits): its plain tokens are the shared
/// set, and every other token fares as the part of it after its leading characters does.
///
/// `used_rules` is set when the walk entered a referenced rule (an Earley parser took over): the
/// entry then depends on those rules, not only on this automaton.
fn compute_entry(g: &CompiledGrammar, rule: u32, state: u32, used_rules: &mut bool) -> Result<MaskEntry, SetLimit> {
    let (tables, vocab) = (&g.tables, &*g.vocab);
    if !tables.rules[rule as usize].local_edges(state).is_empty() {
        *used_rules = true;
        let (mut accepted, mut uncertain) = (Ranges::default(), Vec::new());
        let mut parser = Earley::new(tables, Item { rule, state, origin: ROOT_ORIGIN }, g.limits.earley_set_items)?;
        // Completing before the first byte is not "uncertain": the chart's closure has already
        // advanced the parents, whose own entries cover those tokens.
        earley_walk(tables, &vocab.trie().nodes, &mut parser, 0, false, &mut accepted, &mut uncertain)?;
        return Ok(make_entry(vocab, &accepted, uncertain, None));
    }
    let a = &tables.rules[rule as usize];
    if a.is_string_body(state) {
        return string_body_entry(g, rule, state, used_rules);
    }
    if let Some(e) = free_text_entry(g, rule, state, used_rules)? {
        if CHECK_ENTRIES.load(Ordering::Relaxed) || (cfg!(debug_assertions) && g.vocab.len() <= CHECKED_VOCAB) {
            check_against_walk(g, rule, state, &e);
        }
        return Ok(e);
    }
    walk_entry(g, rule, state, used_rules)
}

/// The entry of `(rule, state)` by a walk of the whole trie (see [`compute_entry`]).
fn walk_entry(g: &CompiledGrammar, rule: u32, state: u32, used_rules: &mut bool) -> Result<MaskEntry, SetLimit> {
    let (tables, vocab) = (&g.tables, &*g.vocab);
    let a = &tables.rules[rule as usize];
    let trie = vocab.trie();
    let mut accepted = Ranges::default();
    let mut uncertain: Vec<u32> = Vec::new();
    let mut walk = DfaWalk { g, rule, accepted: &mut accepted, uncertain: &mut uncertain, used_rules };
    // Components worth sharing (a string's, a number's inside) loop; a state that reads no byte
    // back to itself (a tool name's next letter) does not make the rule compute its SCCs, which
    // cost more than its walk, but uses them once another state has.
    if a.self_loop(state).iter().all(|&w| w == 0) && a.sccs_if_computed().is_none() {
        walk.run(trie, state, None)?;
    } else {
        let sccs = g.sccs(rule);
        let key = a.component_key(state, sccs, COMPONENT_MAX);
        let flags = key.as_ref().and_then(|k| vocab.pool.component(k));
        let recording = key.is_some() && flags.is_none();
        let mut component = Component {
            sccs,
            comp: sccs[state as usize],
            flags,
            recording: recording.then(|| Recording {
                alive_in_k: PosBits::new(trie.nodes.len()),
                subtree_ok: PosBits::new(trie.nodes.len()),
                marked: Vec::new(),
            }),
        };
        walk.run(trie, state, Some(&mut component))?;
        if let (Some(rec), Some(key)) = (component.recording, key) {
            vocab.pool.insert_component(key, Arc::new(rec.flags(&trie.nodes)));
        }
    }
    // The plain tokens this state reads for certain are one shared set; the entry keeps the rest.
    let run = a.char_run(state).min(vocab.max_plain());
    let plain = (run > 0).then(|| vocab.pool.plain_set(vocab, run));
    Ok(make_entry(vocab, &accepted, uncertain, plain))
}

/// The entry of a string's inside: the shared set of plain tokens (every one returns to the state),
/// and of the others, what their rests after the leading characters give (`tails`), or the tokens
/// themselves when they lead with something else (`heads`). Leading characters pass no final state
/// (`is_string_body`), so nothing is uncertain before the rest begins.
fn string_body_entry(g: &CompiledGrammar, rule: u32, state: u32, used_rules: &mut bool) -> Result<MaskEntry, SetLimit> {
    let vocab = &*g.vocab;
    let exits = vocab.string_exits();
    let (mut rest, mut uncertain) = (Vec::new(), Vec::new());
    for group in [&exits.heads, &exits.tails] {
        let (mut accepted, mut unsure) = (Ranges::default(), Vec::new());
        DfaWalk { g, rule, accepted: &mut accepted, uncertain: &mut unsure, used_rules }.run(
            &group.trie,
            state,
            None,
        )?;
        rest.extend(accepted.0.iter().flat_map(|&(lo, hi)| lo..hi).flat_map(|q| group.members(q)));
        uncertain.extend(unsure.iter().flat_map(|&q| group.members(q)));
    }
    uncertain.sort_unstable();
    let plain = vocab.pool.plain_set(vocab, vocab.max_plain());
    let ids: Vec<u32> = rest.iter().map(|&p| vocab.id_at(p)).collect();
    let accepted = if ids.len() <= list_limit(vocab) {
        Accepted::PlainAnd(plain, ids)
    } else {
        let mut bits = plain.words.clone();
        for id in ids {
            bits[id as usize / 32] |= 1 << (id % 32);
        }
        Accepted::Bits(bits)
    };
    Ok(MaskEntry { accepted, uncertain })
}

/// Most bytes a free-text state may stop at, or treat differently from its text, for
/// [`free_text_entry`].
const FREE_TEXT_MAX_BYTES: usize = 8;

/// The entry of a state in free text, if it is one: a text state `r` (the state most ASCII bytes
/// lead `state` to) reads every character back to itself but a few ASCII bytes `X`, and `state`
/// goes where `r` goes on all but a few first bytes `F` (`r` itself, or a partial match of a
/// trigger: `{"na`). A regular token (see [`crate::vocab::FreeExits`]) that holds no byte of `X`
/// and does not begin with one of `F` is then accepted and ends in `r`, whatever it is; only the
/// tokens holding a byte of `X`, the irregular ones and those beginning with `F` are walked, a few
/// thousand of the vocabulary's, where a walk of the whole trie visits thousands of scattered
/// nodes (~0.5 ms a state after a cache clear, per trigger prefix).
fn free_text_entry(
    g: &CompiledGrammar,
    rule: u32,
    state: u32,
    used_rules: &mut bool,
) -> Result<Option<MaskEntry>, SetLimit> {
    let vocab = &*g.vocab;
    let a = &g.tables.rules[rule as usize];
    // The text state: where most printable ASCII bytes lead.
    let mut counts: Vec<(u32, u32)> = Vec::new();
    for b in 0x20u8..0x7F {
        let t = a.next(state, b);
        match counts.iter_mut().find(|(s, _)| *s == t) {
            Some(c) => c.1 += 1,
            None => counts.push((t, 1)),
        }
    }
    let Some(&(text, n)) = counts.iter().max_by_key(|c| c.1) else { return Ok(None) };
    if text == crate::automaton::DEAD || n < 64 || !a.char_loop(text) || !a.local_edges(text).is_empty() {
        return Ok(None);
    }
    let has = |set: &[u64; 4], b: u8| set[b as usize / 64] >> (b % 64) & 1 == 1;
    let stops: Vec<u8> = (0..0x80u8).filter(|&b| !has(a.self_loop(text), b)).collect();
    let mut first = [0u64; 4];
    let mut firsts = 0;
    for b in 0..=255u8 {
        let differs = if b < 0x80 { a.next(state, b) != text } else { a.next(state, b) != a.next(text, b) };
        if differs {
            first[b as usize / 64] |= 1 << (b % 64);
            firsts += 1;
        }
    }
    if stops.len() > FREE_TEXT_MAX_BYTES || firsts > FREE_TEXT_MAX_BYTES {
        return Ok(None);
    }
    let mut groups = vec![vocab.irregular_tokens()];
    for &b in &stops {
        match vocab.tokens_holding(b) {
            Some(group) => groups.push(group),
            None => return Ok(None),
        }
    }
    // Walked: every token of the groups, and the subtrees of the first bytes in `F` (whole ranges
    // of trie positions: a space's subtree holds half the vocabulary).
    let trie = vocab.trie();
    let ranges: Vec<(u32, u32)> = trie
        .roots
        .iter()
        .filter(|&&(b, _)| has(&first, b))
        .map(|&(_, n)| (trie.nodes[n as usize].lo, trie.nodes[n as usize].hi))
        .collect();
    let in_ranges = |p: u32| ranges.iter().any(|&(lo, hi)| lo <= p && p < hi);
    // A token fares the same in every group that holds it (the same bytes walked from the same
    // state), so each group's verdicts stand alone: what a group's walk leaves out is rejected,
    // and a token two groups hold is rejected twice at most (deduplicated below). No list of every
    // walked token is built or sorted: that cost more than the walks (thousands of tokens hold `{`).
    let (mut rejected, mut uncertain) = (Vec::new(), Vec::new());
    for group in groups {
        let (mut acc, mut unsure) = (Ranges::default(), Vec::new());
        DfaWalk { g, rule, accepted: &mut acc, uncertain: &mut unsure, used_rules }.run(&group.trie, state, None)?;
        // A token under a first byte of `F` is the subtree walk's (it fares the same either way).
        for (lo, hi) in acc.gaps(group.len()) {
            for q in lo..hi {
                rejected.extend(group.members(q).iter().filter(|&&p| !in_ranges(p)).map(|&p| vocab.id_at(p)));
            }
        }
        uncertain.extend(unsure.iter().flat_map(|&q| group.members(q)).filter(|&&p| !in_ranges(p)));
    }
    let mut under_first = Ranges::default();
    if !ranges.is_empty() {
        let mut unsure = Vec::new();
        DfaWalk { g, rule, accepted: &mut under_first, uncertain: &mut unsure, used_rules }
            .run_under(trie, state, None, &first)?;
        uncertain.extend(unsure);
    }
    uncertain.sort_unstable();
    uncertain.dedup();
    // Under `F`: the positions of each range the subtree walk did not accept.
    // (Accepted ranges are merged when adjacent: one may run on into the next subtree.)
    let mut left_out: Vec<(u32, u32)> = Vec::new();
    let mut at = 0;
    for &(lo, hi) in &ranges {
        let mut from = lo;
        while let Some(&(a_lo, a_hi)) = under_first.0.get(at) {
            if a_lo >= hi {
                break;
            }
            if a_hi > from {
                left_out.push((from, a_lo.max(from)));
                from = a_hi.min(hi);
            }
            if a_hi > hi {
                break;
            }
            at += 1;
        }
        left_out.push((from, hi));
    }
    let left_out_count: usize = left_out.iter().map(|&(lo, hi)| (hi - lo) as usize).sum();
    let accepted = if rejected.len() + left_out_count <= list_limit(vocab) {
        rejected.extend(left_out.iter().flat_map(|&(lo, hi)| lo..hi).map(|p| vocab.id_at(p)));
        rejected.sort_unstable();
        rejected.dedup();
        Accepted::AllExcept(rejected)
    } else {
        let mut bits = vocab.normal_mask().to_vec();
        let clear = |bits: &mut [u32], id: u32| bits[id as usize / 32] &= !(1 << (id % 32));
        for &(b, n) in trie.roots.iter().filter(|&&(b, _)| has(&first, b)) {
            let (lo, hi) = (trie.nodes[n as usize].lo, trie.nodes[n as usize].hi);
            let rejected_here: usize =
                left_out.iter().map(|&(l, h)| (h.min(hi).saturating_sub(l.max(lo))) as usize).sum();
            let accepted_here = (hi - lo) as usize - rejected_here;
            if accepted_here < rejected_here / 8 {
                // Most of the subtree is rejected: clear all of it, then set back what was not.
                for (w, led) in bits.iter_mut().zip(vocab.ids_led_by(b)) {
                    *w &= !led;
                }
                for &(a_lo, a_hi) in &under_first.0 {
                    for p in a_lo.max(lo)..a_hi.min(hi) {
                        let id = vocab.id_at(p);
                        bits[id as usize / 32] |= 1 << (id % 32);
                    }
                }
            } else {
                for &(l, h) in &left_out {
                    for p in l.max(lo)..h.min(hi) {
                        clear(&mut bits, vocab.id_at(p));
                    }
                }
            }
        }
        for id in rejected {
            clear(&mut bits, id);
        }
        Accepted::Bits(bits)
    };
    Ok(Some(MaskEntry { accepted, uncertain }))
}

/// Debug builds check every free-text entry against the walk of the whole trie it stands for, on
/// vocabularies up to this size (a walk of a real one in a debug build takes tens of milliseconds;
/// tests turn the check on for those with [`check_mask_entries`]).
const CHECKED_VOCAB: usize = 20_000;

static CHECK_ENTRIES: AtomicBool = AtomicBool::new(false);

/// For tests: while on, every mask entry computed by a shortcut (free text) is also computed by a
/// walk of the whole token trie, and a difference panics. Off by default; process-wide.
#[doc(hidden)]
pub fn check_mask_entries(on: bool) {
    CHECK_ENTRIES.store(on, Ordering::Relaxed);
}

/// Panics if `e` differs from the entry a walk of the whole trie gives.
fn check_against_walk(g: &CompiledGrammar, rule: u32, state: u32, e: &MaskEntry) {
    let mut used = false;
    let Ok(walked) = walk_entry(g, rule, state, &mut used) else { return };
    let normal = g.vocab.normal_mask();
    let (mut fast, mut slow) = (vec![0u32; normal.len()], vec![0u32; normal.len()]);
    e.or_into(&mut fast, normal);
    walked.or_into(&mut slow, normal);
    assert!(fast == slow, "free-text entry of rule {rule} state {state} differs from the walk");
    assert_eq!(e.uncertain, walked.uncertain, "free-text uncertain tokens of rule {rule} state {state}");
}

/// Component sharing during one walk over the vocabulary's trie (see [`compute_entry`]).
struct Component<'a> {
    sccs: &'a [u32],
    /// The start state's component.
    comp: u32,
    /// Recorded flags of an isomorphic component: nodes whose subtree stays inside.
    flags: Option<Arc<PosBits>>,
    /// Set when this walk records the flags.
    recording: Option<Recording>,
}

struct Recording {
    alive_in_k: PosBits,
    subtree_ok: PosBits,
    /// Nodes either set is marked on, in walk (pre)order: only these can be flagged.
    marked: Vec<u32>,
}

impl Recording {
    /// flag(n): the whole subtree of n stays inside the component.
    fn flags(&self, nodes: &[TrieNode]) -> PosBits {
        let mut flag = PosBits::new(nodes.len());
        // Children before parents (preorder, reversed); a node nothing marked has no flag.
        for &j in self.marked.iter().rev() {
            let j = j as usize;
            let ok = self.subtree_ok.get(j as u32)
                || (self.alive_in_k.get(j as u32) && {
                    let mut c = j + 1;
                    let mut all = true;
                    while c < nodes[j].end as usize {
                        if !flag.get(c as u32) {
                            all = false;
                            break;
                        }
                        c = nodes[c].end as usize;
                    }
                    all
                });
            if ok {
                flag.set(j as u32);
            }
        }
        flag
    }
}

/// A walk of one trie from one state of `rule`'s automaton, collecting accepted and uncertain
/// positions of that trie.
struct DfaWalk<'a> {
    g: &'a CompiledGrammar,
    rule: u32,
    accepted: &'a mut Ranges,
    uncertain: &'a mut Vec<u32>,
    used_rules: &'a mut bool,
}

impl DfaWalk<'_> {
    fn run(&mut self, trie: &Trie, state: u32, component: Option<&mut Component<'_>>) -> Result<(), SetLimit> {
        self.run_under(trie, state, component, &[u64::MAX; 4])
    }

    /// [`DfaWalk::run`] over the subtrees of the root's children whose byte is in `first`.
    fn run_under(
        &mut self,
        trie: &Trie,
        state: u32,
        mut component: Option<&mut Component<'_>>,
        first: &[u64; 4],
    ) -> Result<(), SetLimit> {
        let skip = |b: u8| first[b as usize / 64] >> (b % 64) & 1 == 0;
        let (g, rule) = (self.g, self.rule);
        let tables = &g.tables;
        let a = &tables.rules[rule as usize];
        let nodes = &trie.nodes;
        let mut states = vec![state];
        // See `compute_entry`: completion before the first byte is covered by the parents' entries.
        let mut done = vec![false];
        // Whether the path so far stayed in the start state's component.
        let mut in_k = vec![true];
        let mut i = 1;
        'nodes: while i < nodes.len() {
            // Most children die at once: skip them by their bytes in the compact sibling list,
            // without touching their nodes (a dead child is uncertain only once its parent's path
            // completed the item, see `done`).
            let d = nodes[i].depth as usize;
            if !done[d - 1] {
                let t = states[d - 1];
                let mut k = trie.sibling_at[i] as usize;
                loop {
                    let (b, n) = trie.siblings[k];
                    if n & SIBLINGS_END != 0 {
                        // Every later sibling dies: on after the parent's subtree.
                        i = (n & !SIBLINGS_END) as usize;
                        continue 'nodes;
                    }
                    if !(d == 1 && skip(b)) && a.next(t, b) != crate::automaton::DEAD {
                        i = n as usize;
                        break;
                    }
                    k += 1;
                }
            }
            let node = &nodes[i];
            let d = node.depth as usize;
            states.truncate(d);
            done.truncate(d);
            in_k.truncate(d);
            let t = states[d - 1];
            if let Some(c) = component.as_deref()
                && in_k[d - 1]
                && c.flags.as_ref().is_some_and(|f| f.get(i as u32))
            {
                self.accepted.push(node.lo, node.hi);
                i = node.end as usize;
                continue;
            }
            if a.loops_on_all(t, &node.bytes) || a.loops_on_chars(t, &node.bytes, node.utf8_prefix) {
                self.accepted.push(node.lo, node.hi);
                if let Some(rec) = component.as_deref_mut().and_then(|c| c.recording.as_mut())
                    && in_k[d - 1]
                {
                    rec.subtree_ok.set(i as u32);
                    rec.marked.push(i as u32);
                }
                i = node.end as usize;
                continue;
            }
            // A run of string characters long enough for every token below (a counting chain may
            // leave the component, so the subtree is not flagged: flags stay conservative).
            if a.reads_chars(t, node.plain_chars) {
                self.accepted.push(node.lo, node.hi);
                i = node.end as usize;
                continue;
            }
            let u = a.next(t, node.byte);
            if u == crate::automaton::DEAD {
                if done[d - 1] {
                    self.uncertain.extend(node.lo..node.hi);
                }
                i = node.end as usize;
                continue;
            }
            self.accepted.push(node.lo, node.here);
            if !a.local_edges(u).is_empty() {
                *self.used_rules = true;
                let item = Item { rule, state: u, origin: ROOT_ORIGIN };
                let mut parser = Earley::new(tables, item, g.limits.earley_set_items)?;
                let done0 = done[d - 1] || parser.root_done(0);
                earley_walk(tables, nodes, &mut parser, i, done0, self.accepted, self.uncertain)?;
                i = node.end as usize;
                continue;
            }
            let ink = match component.as_deref_mut() {
                Some(c) => {
                    let ink = in_k[d - 1] && c.sccs[u as usize] == c.comp;
                    if let Some(rec) = c.recording.as_mut()
                        && ink
                    {
                        rec.alive_in_k.set(i as u32);
                        rec.marked.push(i as u32);
                    }
                    ink
                }
                None => false,
            };
            states.push(u);
            done.push(done[d - 1] || a.is_final(u));
            in_k.push(ink);
            i += 1;
        }
        Ok(())
    }
}

/// Earley walk over the subtree of trie node `top` (the whole trie for node 0); `parser` is positioned
/// after `top`'s bytes. `done0`: the root item completed at or before `top`.
fn earley_walk(
    tables: &Tables,
    nodes: &[TrieNode],
    parser: &mut Earley,
    top: usize,
    done0: bool,
    accepted: &mut Ranges,
    uncertain: &mut Vec<u32>,
) -> Result<(), SetLimit> {
    let base = nodes[top].depth as usize;
    let end = nodes[top].end as usize;
    // done[k]: the root item completed somewhere on the current path, at or before relative depth k.
    let mut done: Vec<bool> = vec![done0];
    // live[k]: the bytes some item of the set at relative depth k can scan. A child whose byte is
    // not among them fails without an Earley step (most children of a wide node, the root's above
    // all, where a dispatch's trigger has just completed).
    let mut live: Vec<[u64; 4]> = vec![parser.live_bytes(tables)];
    let mut i = top + 1;
    while i < end {
        let node = &nodes[i];
        let depth = node.depth as usize - base;
        parser.truncate(depth);
        done.truncate(depth);
        live.truncate(depth);
        let byte = node.byte as usize;
        if live[depth - 1][byte / 64] >> (byte % 64) & 1 == 0 {
            if done[depth - 1] {
                uncertain.extend(node.lo..node.hi);
            }
            i = node.end as usize;
            continue;
        }
        let set = parser.last();
        if set.iter().any(|it| {
            let a = &tables.rules[it.rule as usize];
            a.loops_on_all(it.state, &node.bytes)
                || a.loops_on_chars(it.state, &node.bytes, node.utf8_prefix)
                || a.reads_chars(it.state, node.plain_chars)
        }) {
            // One item of this set reads every token below and stays alive: the whole subtree is
            // accepted.
            accepted.push(node.lo, node.hi);
            i = node.end as usize;
            continue;
        }
        if !parser.push_byte(tables, node.byte)? {
            if done[depth - 1] {
                uncertain.extend(node.lo..node.hi);
            }
            i = node.end as usize;
            continue;
        }
        done.push(done[depth - 1] || parser.root_done(depth));
        live.push(parser.live_bytes(tables));
        accepted.push(node.lo, node.here);
        i += 1;
    }
    Ok(())
}

/// The most ids an entry keeps as a list (of accepted tokens, or of the ones left out) rather than a
/// bitset: where the list stops being smaller.
fn list_limit(vocab: &TokenVocab) -> usize {
    vocab.len() / 48
}

fn make_entry(vocab: &TokenVocab, accepted: &Ranges, uncertain: Vec<u32>, plain: Option<Arc<PlainSet>>) -> MaskEntry {
    let n = vocab.sorted_len() as u32;
    let small = list_limit(vocab);
    // The ids at the positions of `ranges` (in trie order: only `AllExcept` needs them sorted).
    let ids_of = |ranges: &mut dyn Iterator<Item = (u32, u32)>| -> Vec<u32> {
        ranges.flat_map(|(lo, hi)| lo..hi).map(|p| vocab.id_at(p)).collect()
    };
    // The walk accepts every plain token the state reads for certain; checked all the same, since a
    // mask must never allow a token the walk rejected.
    if let Some(plain) = plain
        && accepted.gaps(n).all(|(lo, hi)| !plain.positions.any_in(lo, hi))
    {
        let rest =
            accepted.count() - accepted.0.iter().map(|&(lo, hi)| plain.positions.count_in(lo, hi)).sum::<usize>();
        if rest <= small {
            let mut ids = Vec::with_capacity(rest);
            for &(lo, hi) in &accepted.0 {
                plain.positions.each_clear_in(lo, hi, &mut |p| ids.push(vocab.id_at(p)));
            }
            return MaskEntry { accepted: Accepted::PlainAnd(plain, ids), uncertain };
        }
    }
    let total = accepted.count();
    let accepted = if total <= small {
        Accepted::Ids(ids_of(&mut accepted.0.iter().copied()))
    } else if n as usize - total <= small {
        let mut ids = ids_of(&mut accepted.gaps(n));
        ids.sort_unstable();
        Accepted::AllExcept(ids)
    } else {
        let mut bits = vec![0u32; vocab.mask_words()];
        for p in accepted.0.iter().flat_map(|&(lo, hi)| lo..hi) {
            let id = vocab.id_at(p);
            bits[id as usize / 32] |= 1 << (id % 32);
        }
        Accepted::Bits(bits)
    };
    MaskEntry { accepted, uncertain }
}

/// Checks each candidate (sorted trie positions) against the full chart; sets the bits of those that
/// can be consumed. Shared prefixes are pushed once; a failed prefix skips every token that has it.
pub(crate) fn check_candidates(
    tables: &Tables,
    vocab: &TokenVocab,
    parser: &mut Earley,
    candidates: &[u32],
    mask: &mut [u32],
) -> Result<(), SetLimit> {
    let base = parser.len();
    let mut prev: &[u8] = &[];
    // Length of a prefix known to fail, if any.
    let mut failed: Option<usize> = None;
    for &pos in candidates {
        let tok = vocab.bytes_at(pos);
        let lcp = prev.iter().zip(tok).take_while(|(a, b)| a == b).count();
        if let Some(f) = failed {
            if lcp >= f {
                continue;
            }
            failed = None;
        }
        let keep = lcp.min(parser.len() - base);
        parser.truncate(base + keep);
        let mut ok = true;
        for (j, &b) in tok.iter().enumerate().skip(keep) {
            if !parser.push_byte(tables, b)? {
                failed = Some(j + 1);
                ok = false;
                break;
            }
        }
        if ok {
            let id = vocab.id_at(pos);
            mask[id as usize / 32] |= 1 << (id % 32);
        }
        prev = tok;
    }
    parser.truncate(base);
    Ok(())
}
