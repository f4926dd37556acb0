//! Earley parser over per-rule byte automata, one Earley set per input byte.
//!
//! After Earley (1970), with items `(rule, automaton state, origin)` instead of dotted productions, as in
//! XGrammar 2 (§3.4). Predict follows rule-reference edges, scan follows byte edges, complete advances
//! the items of the origin set that wait on the finished rule. Nullable rules are advanced over at
//! prediction time (Aycock & Horspool, 2002), so completion never needs to revisit the set being built.
//! Left recursion and ambiguity are safe because items are deduplicated per set. The chart is a stack of
//! sets: [`Earley::truncate`] rolls back to any earlier byte position.
//!
//! **Invariant:** this module never sees token ids.

use crate::automaton::{Automaton, DEAD};
use std::hash::{BuildHasherDefault, Hasher};

/// Origin of the root item: completing it means the whole parse (or, for a cache computation, the
/// starting item) is complete; it has no parent to advance.
pub(crate) const ROOT_ORIGIN: u32 = u32::MAX;

/// One Earley item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Item {
    pub(crate) rule: u32,
    pub(crate) state: u32,
    pub(crate) origin: u32,
}

/// The automata of a compiled grammar, as the parser needs them.
#[derive(Debug)]
pub(crate) struct Tables {
    pub(crate) rules: Vec<Automaton>,
    pub(crate) nullable: Vec<bool>,
    pub(crate) start: u32,
}

/// A set grew past the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SetLimit(pub(crate) usize);

/// A small multiplicative hasher for items (SipHash would dominate the parse time).
#[derive(Default)]
pub(crate) struct ItemHasher(u64);

/// A map hashed with [`ItemHasher`]: the crate's maps key by numbers, rule encodings, names and
/// schemas on hot or per-request paths, where SipHash cost a sixth of compiling a grammar of 128
/// tools. (Unseeded: a crafted key set can collide; every such path runs under a deadline.)
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<ItemHasher>>;

impl Hasher for ItemHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Eight bytes per step: automaton subsets and columns (`[u32]` keys) hash through here.
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let v = u64::from_le_bytes(c.try_into().expect("eight bytes"));
            self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ b as u64).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = (self.0.rotate_left(5) ^ v as u64).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

type ItemSet = std::collections::HashSet<Item, BuildHasherDefault<ItemHasher>>;

/// Sets up to this size are deduplicated by linear scan.
const LINEAR_DEDUP: usize = 24;

/// The chart: a stack of Earley sets.
#[derive(Debug, Clone)]
pub(crate) struct Earley {
    items: Vec<Item>,
    starts: Vec<u32>,
    root_done: Vec<bool>,
    seen: ItemSet,
    max_items: usize,
}

impl Earley {
    /// A chart whose first set holds `root` and its closure.
    pub(crate) fn new(tables: &Tables, root: Item, max_items: usize) -> Result<Earley, SetLimit> {
        let mut e =
            Earley { items: vec![root], starts: vec![0], root_done: vec![false], seen: ItemSet::default(), max_items };
        e.seen.clear();
        e.closure(tables, 0)?;
        Ok(e)
    }

    /// Number of sets (bytes consumed + 1).
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.starts.len()
    }

    /// The items of set `k`.
    #[inline]
    pub(crate) fn set(&self, k: usize) -> &[Item] {
        let end = self.starts.get(k + 1).map_or(self.items.len(), |&e| e as usize);
        &self.items[self.starts[k] as usize..end]
    }

    /// The items of the last set.
    #[inline]
    pub(crate) fn last(&self) -> &[Item] {
        self.set(self.len() - 1)
    }

    /// The bytes some item of the last set can scan: any other byte fails [`Earley::push_byte`].
    pub(crate) fn live_bytes(&self, tables: &Tables) -> [u64; 4] {
        let mut live = [0u64; 4];
        for it in self.last() {
            for (l, b) in live.iter_mut().zip(tables.rules[it.rule as usize].live_bytes(it.state)) {
                *l |= b;
            }
        }
        live
    }

    /// Whether the root item is complete in set `k`.
    #[inline]
    pub(crate) fn root_done(&self, k: usize) -> bool {
        self.root_done[k]
    }

    /// Whether the root item is complete after the last byte.
    #[inline]
    pub(crate) fn is_accepting(&self) -> bool {
        self.root_done[self.len() - 1]
    }

    /// Drops sets so that `len` remain.
    #[inline]
    pub(crate) fn truncate(&mut self, len: usize) {
        if len < self.starts.len() {
            self.items.truncate(self.starts[len] as usize);
            self.starts.truncate(len);
            self.root_done.truncate(len);
        }
    }

    #[inline]
    fn add(&mut self, set_start: usize, item: Item) {
        let set = &self.items[set_start..];
        if set.len() < LINEAR_DEDUP {
            if set.contains(&item) {
                return;
            }
            if set.len() + 1 == LINEAR_DEDUP {
                self.seen.clear();
                self.seen.extend(set.iter().copied());
                self.seen.insert(item);
            }
        } else if !self.seen.insert(item) {
            return;
        }
        self.items.push(item);
    }

    /// Scans `byte`; on success a new set is on the stack. Returns `Ok(false)` (and leaves the chart
    /// unchanged) if no item can scan it.
    pub(crate) fn push_byte(&mut self, tables: &Tables, byte: u8) -> Result<bool, SetLimit> {
        let k = self.len() - 1;
        let (lo, hi) = (self.starts[k] as usize, self.items.len());
        let new_start = hi;
        for i in lo..hi {
            let it = self.items[i];
            let t = tables.rules[it.rule as usize].next(it.state, byte);
            if t != DEAD {
                self.add(new_start, Item { rule: it.rule, state: t, origin: it.origin });
            }
        }
        if self.items.len() == new_start {
            return Ok(false);
        }
        self.starts.push(new_start as u32);
        self.root_done.push(false);
        if let Err(e) = self.closure(tables, k + 1) {
            self.truncate(k + 1);
            return Err(e);
        }
        Ok(true)
    }

    /// Pushes a copy of the last set without the items `drop` names, consuming no byte: a rule cut
    /// short where it may end (a token budget spent). The copy keeps what the dropped items had
    /// already completed, so the chart stays closed.
    pub(crate) fn push_without(&mut self, drop: impl Fn(&Item) -> bool) {
        let k = self.len() - 1;
        let (lo, hi) = (self.starts[k] as usize, self.items.len());
        self.starts.push(hi as u32);
        self.root_done.push(self.root_done[k]);
        for i in lo..hi {
            let it = self.items[i];
            if !drop(&it) {
                self.items.push(it);
            }
        }
    }

    /// Pushes all of `bytes`; on failure the chart is restored and `Ok(false)` returned.
    pub(crate) fn push_bytes(&mut self, tables: &Tables, bytes: &[u8]) -> Result<bool, SetLimit> {
        let len = self.len();
        for &b in bytes {
            match self.push_byte(tables, b) {
                Ok(true) => {}
                other => {
                    self.truncate(len);
                    return other;
                }
            }
        }
        Ok(true)
    }

    fn closure(&mut self, tables: &Tables, k: usize) -> Result<(), SetLimit> {
        let set_start = self.starts[k] as usize;
        // Completion and prediction append to the set being iterated; index loop on purpose.
        let mut i = set_start;
        while i < self.items.len() {
            if self.items.len() - set_start > self.max_items {
                return Err(SetLimit(self.max_items));
            }
            let it = self.items[i];
            let a = &tables.rules[it.rule as usize];
            for (r, t) in a.rule_edges(it.state) {
                self.add(set_start, Item { rule: r, state: 0, origin: k as u32 });
                if tables.nullable[r as usize] {
                    self.add(set_start, Item { rule: it.rule, state: t, origin: it.origin });
                }
            }
            if a.is_final(it.state) {
                if it.origin == ROOT_ORIGIN {
                    self.root_done[k] = true;
                } else if (it.origin as usize) < k {
                    let o = it.origin as usize;
                    let (olo, ohi) = (self.starts[o] as usize, self.starts[o + 1] as usize);
                    for j in olo..ohi {
                        let p = self.items[j];
                        for (r, t) in tables.rules[p.rule as usize].rule_edges(p.state) {
                            if r == it.rule {
                                self.add(set_start, Item { rule: p.rule, state: t, origin: p.origin });
                            }
                        }
                    }
                }
            }
            i += 1;
        }
        Ok(())
    }
}
