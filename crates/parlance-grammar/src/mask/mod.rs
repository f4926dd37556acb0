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
//! most `k` characters, which saves building a bitset of most of the vocabulary per state.

use crate::compile::CompiledGrammar;
use crate::earley::{Earley, Item, ROOT_ORIGIN, SetLimit, Tables};
use crate::vocab::TokenVocab;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Tokens a scannable item accepts, in the most compact form.
#[derive(Debug)]
pub(crate) enum Accepted {
    /// These token ids.
    Ids(Vec<u32>),
    /// A bitset over token ids (`u32` words, like the output mask).
    Bits(Vec<u32>),
    /// Every normal (non-special) token except these ids.
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
                let mut it = ids.iter().peekable();
                for (w, (m, n)) in mask.iter_mut().zip(normal).enumerate() {
                    let mut word = *n;
                    while let Some(&&id) = it.peek() {
                        if id as usize / 32 != w {
                            break;
                        }
                        word &= !(1 << (id % 32));
                        it.next();
                    }
                    *m |= word;
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
}

#[derive(Debug, Default)]
struct PoolInner {
    map: HashMap<PoolKey, PoolBucket>,
    /// Per component shape: trie nodes whose whole subtree stays inside the component.
    components: HashMap<Vec<u32>, Arc<PosBits>>,
    /// Per `k`, the tokens of at most `k` JSON-string characters.
    plain: HashMap<u32, Arc<PlainSet>>,
    bytes: usize,
    len: usize,
}

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

    /// Forgets every entry; grammars compiled earlier keep the entries they already looked up.
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
        if let Some(set) = self.inner.lock().ok().and_then(|p| p.plain.get(&k).cloned()) {
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
        if let Ok(mut p) = self.inner.lock() {
            let add = set.words.len() * 4 + set.positions.0.len() * 8;
            if p.bytes + add <= POOL_MAX_BYTES {
                p.bytes += add;
                p.plain.insert(k, set.clone());
            }
        }
        set
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
    fn set_range(&mut self, lo: u32, hi: u32) {
        let (mut lo, hi) = (lo as usize, hi as usize);
        while lo < hi && lo % 64 != 0 {
            self.0[lo / 64] |= 1 << (lo % 64);
            lo += 1;
        }
        while lo + 64 <= hi {
            self.0[lo / 64] = u64::MAX;
            lo += 64;
        }
        while lo < hi {
            self.0[lo / 64] |= 1 << (lo % 64);
            lo += 1;
        }
    }
    fn set(&mut self, p: u32) {
        self.0[p as usize / 64] |= 1 << (p % 64);
    }
    fn get(&self, p: u32) -> bool {
        self.0[p as usize / 64] >> (p % 64) & 1 == 1
    }
}

/// Returns the entry of scannable item `(rule, state)`, computing and pooling it on first use.
pub(crate) fn entry(g: &CompiledGrammar, rule: u32, state: u32) -> Result<Arc<MaskEntry>, SetLimit> {
    let slot = &g.local[rule as usize][state as usize];
    if let Some(e) = slot.get() {
        return Ok(e.clone());
    }
    // Large and unminimized automata are whole schemas, unlikely to recur: their entries stay local
    // and their (costly) structural key is never computed. Small ones are also looked up by their
    // own automaton alone, for entries that never depended on the rules they reference.
    let small = g.pool_size(rule) <= POOL_MAX_STATES;
    let pooled = small && g.tables.rules[rule as usize].is_minimal();
    let key = pooled.then(|| g.key(rule));
    let shallow = small.then(|| g.shallow_key(rule));
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
/// `used_rules` is set when the walk entered a referenced rule (an Earley parser took over): the
/// entry then depends on those rules, not only on this automaton.
fn compute_entry(g: &CompiledGrammar, rule: u32, state: u32, used_rules: &mut bool) -> Result<MaskEntry, SetLimit> {
    let (tables, vocab) = (&g.tables, &*g.vocab);
    let max_items = g.limits.earley_set_items;
    let a = &tables.rules[rule as usize];
    let nodes = vocab.nodes();
    let mut accepted = PosBits::new(vocab.sorted_len());
    let mut uncertain: Vec<u32> = Vec::new();
    if !a.rule_edges(state).is_empty() {
        *used_rules = true;
        let mut parser = Earley::new(tables, Item { rule, state, origin: ROOT_ORIGIN }, max_items)?;
        // Completing before the first byte is not "uncertain": the chart's closure has already
        // advanced the parents, whose own entries cover those tokens.
        earley_walk(tables, vocab, &mut parser, 0, false, &mut accepted, &mut uncertain)?;
        return Ok(make_entry(vocab, &accepted, uncertain, None));
    }
    let sccs = g.sccs(rule);
    let comp = sccs[state as usize];
    let key = a.component_key(state, sccs, COMPONENT_MAX);
    let flags = key.as_ref().and_then(|k| vocab.pool.component(k));
    let recording = key.is_some() && flags.is_none();
    let n = if recording { nodes.len() } else { 0 };
    let (mut alive_in_k, mut subtree_ok) = (PosBits::new(n), PosBits::new(n));
    // Nodes either set is marked on, in walk (pre)order: only these can be flagged.
    let mut marked: Vec<u32> = Vec::new();
    let mut states = vec![state];
    // See above: completion before the first byte is covered by the parents' entries.
    let mut done = vec![false];
    let mut in_k = vec![true];
    let mut i = 1;
    while i < nodes.len() {
        let node = &nodes[i];
        let d = node.depth as usize;
        states.truncate(d);
        done.truncate(d);
        in_k.truncate(d);
        let t = states[d - 1];
        if in_k[d - 1] && flags.as_ref().is_some_and(|f| f.get(i as u32)) {
            accepted.set_range(node.lo, node.hi);
            i = node.end as usize;
            continue;
        }
        if a.loops_on_all(t, &node.bytes) || a.loops_on_chars(t, &node.bytes, node.utf8_prefix) {
            accepted.set_range(node.lo, node.hi);
            if recording && in_k[d - 1] {
                subtree_ok.set(i as u32);
                marked.push(i as u32);
            }
            i = node.end as usize;
            continue;
        }
        // A run of string characters long enough for every token below (a counting chain may
        // leave the component, so the subtree is not flagged: flags stay conservative).
        if a.reads_chars(t, node.plain_chars) {
            accepted.set_range(node.lo, node.hi);
            i = node.end as usize;
            continue;
        }
        let u = a.next(t, node.byte);
        if u == crate::automaton::DEAD {
            if done[d - 1] {
                uncertain.extend(node.lo..node.hi);
            }
            i = node.end as usize;
            continue;
        }
        accepted.set_range(node.lo, node.here);
        if !a.rule_edges(u).is_empty() {
            *used_rules = true;
            let mut parser = Earley::new(tables, Item { rule, state: u, origin: ROOT_ORIGIN }, max_items)?;
            let done0 = done[d - 1] || parser.root_done(0);
            earley_walk(tables, vocab, &mut parser, i, done0, &mut accepted, &mut uncertain)?;
            i = node.end as usize;
            continue;
        }
        let ink = in_k[d - 1] && sccs[u as usize] == comp;
        if recording && ink {
            alive_in_k.set(i as u32);
            marked.push(i as u32);
        }
        states.push(u);
        done.push(done[d - 1] || a.is_final(u));
        in_k.push(ink);
        i += 1;
    }
    if recording && let Some(key) = key {
        // flag(n): the whole subtree of n stays inside the component.
        let mut flag = PosBits::new(nodes.len());
        // Children before parents (preorder, reversed); a node nothing marked has no flag.
        for &j in marked.iter().rev() {
            let j = j as usize;
            let ok = subtree_ok.get(j as u32)
                || (alive_in_k.get(j as u32) && {
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
        vocab.pool.insert_component(key, Arc::new(flag));
    }
    // The plain tokens this state reads for certain are one shared set; the entry keeps the rest.
    let run = a.char_run(state).min(vocab.max_plain());
    let plain = (run > 0).then(|| vocab.pool.plain_set(vocab, run));
    Ok(make_entry(vocab, &accepted, uncertain, plain))
}

/// Earley walk over the subtree of trie node `top` (the whole trie for node 0); `parser` is positioned
/// after `top`'s bytes. `done0`: the root item completed at or before `top`.
fn earley_walk(
    tables: &Tables,
    vocab: &TokenVocab,
    parser: &mut Earley,
    top: usize,
    done0: bool,
    accepted: &mut PosBits,
    uncertain: &mut Vec<u32>,
) -> Result<(), SetLimit> {
    let nodes = vocab.nodes();
    let base = nodes[top].depth as usize;
    let end = nodes[top].end as usize;
    // done[k]: the root item completed somewhere on the current path, at or before relative depth k.
    let mut done: Vec<bool> = vec![done0];
    let mut i = top + 1;
    while i < end {
        let node = &nodes[i];
        let depth = node.depth as usize - base;
        parser.truncate(depth);
        done.truncate(depth);
        let set = parser.last();
        if set.iter().any(|it| {
            let a = &tables.rules[it.rule as usize];
            a.loops_on_all(it.state, &node.bytes)
                || a.loops_on_chars(it.state, &node.bytes, node.utf8_prefix)
                || a.reads_chars(it.state, node.plain_chars)
        }) {
            // One item of this set reads every token below and stays alive: the whole subtree is
            // accepted.
            accepted.set_range(node.lo, node.hi);
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
        accepted.set_range(node.lo, node.here);
        i += 1;
    }
    Ok(())
}

fn make_entry(vocab: &TokenVocab, accepted: &PosBits, uncertain: Vec<u32>, plain: Option<Arc<PlainSet>>) -> MaskEntry {
    let n = vocab.sorted_len();
    let small = vocab.len() / 48;
    // Calls `f` with the id at every position of `words` whose bit equals `want`.
    let each = |words: &[u64], want: bool, f: &mut dyn FnMut(u32)| {
        for (w, &word) in words.iter().enumerate() {
            let mut bits = if want { word } else { !word };
            while bits != 0 {
                let p = w * 64 + bits.trailing_zeros() as usize;
                if p >= n {
                    break;
                }
                f(vocab.id_at(p as u32));
                bits &= bits - 1;
            }
        }
    };
    let sorted_ids = |words: &[u64], want: bool| {
        let mut out = Vec::new();
        each(words, want, &mut |id| out.push(id));
        out.sort_unstable();
        out
    };
    let count = |words: &[u64]| words.iter().map(|w| w.count_ones() as usize).sum::<usize>();
    // The walk accepts every plain token the state reads for certain; checked all the same, since a
    // mask must never allow a token the walk rejected.
    if let Some(plain) = plain
        && plain.positions.0.iter().zip(&accepted.0).all(|(p, a)| p & !a == 0)
    {
        let rest: Vec<u64> = accepted.0.iter().zip(&plain.positions.0).map(|(a, p)| a & !p).collect();
        if count(&rest) <= small {
            return MaskEntry { accepted: Accepted::PlainAnd(plain, sorted_ids(&rest, true)), uncertain };
        }
    }
    let total = count(&accepted.0);
    let accepted = if total <= small {
        Accepted::Ids(sorted_ids(&accepted.0, true))
    } else if n - total <= small {
        Accepted::AllExcept(sorted_ids(&accepted.0, false))
    } else {
        let mut bits = vec![0u32; vocab.mask_words()];
        each(&accepted.0, true, &mut |id| bits[id as usize / 32] |= 1 << (id % 32));
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
