//! Per-rule byte automata: every rule body becomes a DFA over byte classes and rule references.
//!
//! Construction: Thompson NFA (byte-range, rule-reference and epsilon edges; characters become UTF-8 byte
//! sequences through `regex_syntax::utf8`), subset construction over byte classes and rule symbols,
//! trimming of states that cannot reach a final state; then, for automata small enough to be shared,
//! Hopcroft minimization and canonical breadth-first numbering so that equal languages get equal
//! [`Automaton::encode`] output, the basis of the structural hash that lets grammars share token-mask
//! cache entries. Large automata built for one grammar (a whole JSON Schema) skip both: they cost
//! most of a compile and would be shared with no one.
//!
//! Sharing: an [`Automaton`] is its tables ([`Core`], reference-counted, rule references as local
//! numbers) and the grammar rule each local number stands for, so the process-wide automaton cache
//! hands a rule seen before to a new grammar without copying it; properties of the tables alone
//! (SCCs, the shallow structural key) are computed once per `Core`.

mod dispatch;

use crate::grammar::Expr;
use crate::regex::{RegexMode, regex_to_expr};
use regex_syntax::utf8::Utf8Sequences;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use crate::earley::FastMap as HashMap;

/// Marks a missing transition.
pub(crate) const DEAD: u32 = u32::MAX;

/// Why an automaton could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BuildError {
    /// A limit was exceeded: what, how many, the maximum.
    Limit(&'static str, usize, usize),
    /// The compile-time budget ran out.
    Timeout,
    /// An embedded regex was invalid or unsupported.
    Regex(String),
}

/// A deterministic automaton for one rule in one grammar (state 0 is the start state): its tables,
/// shared by every grammar whose rule has the same shape, and the grammar rule each of the tables'
/// local rule numbers stands for. Sharing makes a rule seen before cost two reference counts, not
/// a copy of its tables (128 tools of which one is new).
#[derive(Debug, Clone)]
pub(crate) struct Automaton {
    core: Arc<Core>,
    /// Grammar rule of each local rule number (`u32::MAX`: an edge dropped as unproductive).
    rules: Arc<[u32]>,
}

impl std::ops::Deref for Automaton {
    type Target = Core;
    fn deref(&self) -> &Core {
        &self.core
    }
}

impl Automaton {
    /// Wraps tables whose rule edges hold grammar rules: they are renumbered locally, in increasing
    /// order of the grammar rule (the edges stay sorted).
    fn from_core(mut core: Core) -> Automaton {
        let mut rules: Vec<u32> = core.rule_edges.iter().flatten().map(|&(r, _)| r).collect();
        rules.sort_unstable();
        rules.dedup();
        for edges in &mut core.rule_edges {
            for (r, _) in edges.iter_mut() {
                *r = rules.binary_search(r).unwrap_or_default() as u32;
            }
        }
        Automaton { core: Arc::new(core), rules: rules.into() }
    }

    /// Whether `self` and `other` use the same tables (not copies).
    #[cfg(test)]
    pub(crate) fn shares_tables(&self, other: &Automaton) -> bool {
        Arc::ptr_eq(&self.core, &other.core)
    }

    /// The grammar rule of each local rule number.
    pub(crate) fn rules(&self) -> &[u32] {
        &self.rules
    }

    /// The same tables with local rule numbers standing for `rules`.
    pub(crate) fn with_rules(&self, rules: Vec<u32>) -> Automaton {
        debug_assert_eq!(rules.len(), self.rules.len());
        Automaton { core: self.core.clone(), rules: rules.into() }
    }

    /// Rule-reference edges `(grammar rule, target)` leaving `state`.
    #[inline]
    pub(crate) fn rule_edges(&self, state: u32) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.core.rule_edges[state as usize].iter().map(|&(l, t)| (self.rules[l as usize], t))
    }

    /// Rewrites rule references through `map`; rules not in the map are dropped as dead edges
    /// (the tables are then copied, if shared, and edited). Returns whether an edge was dropped.
    pub(crate) fn remap_rules(&mut self, map: &dyn Fn(u32) -> Option<u32>) -> bool {
        let mapped: Vec<Option<u32>> = self.rules.iter().map(|&r| if r == u32::MAX { None } else { map(r) }).collect();
        let dropped = mapped.iter().any(Option::is_none);
        if dropped {
            let core = self.edit();
            for edges in &mut core.rule_edges {
                edges.retain(|&(l, _)| mapped[l as usize].is_some());
            }
            core.has_edges = core.rule_edges.iter().any(|e| !e.is_empty());
        }
        self.rules = mapped.iter().map(|m| m.unwrap_or(u32::MAX)).collect();
        dropped
    }

    /// The grammar rule each local rule number stands for (`u32::MAX`: an edge dropped).
    pub(crate) fn local_rules(&self) -> &[u32] {
        &self.rules
    }

    /// Removes states that cannot reach a final state (after rule edges to unproductive rules were
    /// dropped) and renumbers canonically. Returns `false` if the start state itself is dead.
    pub(crate) fn retrim(&mut self) -> bool {
        self.edit().retrim()
    }

    /// The tables, for editing: copied first if another grammar shares them; cached properties
    /// are forgotten.
    fn edit(&mut self) -> &mut Core {
        let core = Arc::make_mut(&mut self.core);
        core.reaches_final = OnceLock::new();
        core.sccs = OnceLock::new();
        core.shallow = OnceLock::new();
        core.byte_key = OnceLock::new();
        core
    }

    /// Approximate heap bytes.
    pub(crate) fn approx_bytes(&self) -> usize {
        self.core.approx_bytes() + self.rules.len() * 4
    }

    /// Gives the tables their shallow key from what built them (see [`Core::shallow_key`]): a key
    /// equal only for equal tables, known without encoding them. No effect once a key is set.
    pub(crate) fn preset_shallow_key(&self, key: (u64, Arc<[u32]>)) {
        let _ = self.core.shallow.set(key);
    }
}

/// The tables of a rule's automaton (see [`Automaton`]). Rule edges hold local rule numbers.
/// Properties that depend on the tables alone are computed once, for every grammar sharing them.
#[derive(Debug, Clone)]
pub(crate) struct Core {
    classes: [u8; 256],
    nclasses: usize,
    trans: Vec<u32>,
    rule_edges: Vec<Vec<(u32, u32)>>,
    finals: Vec<bool>,
    scannable: Vec<bool>,
    /// Per state, the bytes that lead back to the same state (used to accept whole trie subtrees).
    self_loop: Vec<[u64; 4]>,
    /// Per state, the bytes it can scan (a transition other than to [`DEAD`]).
    live: Vec<[u64; 4]>,
    /// Per state, whether every multi-byte UTF-8 character leads back to the same state.
    char_loop: Vec<bool>,
    /// Per state, see [`Core::is_string_body`].
    string_body: Vec<bool>,
    /// Per state, how many JSON-string characters in a row it reads for certain (see
    /// [`Core::reads_chars`]); `u32::MAX` when the run never ends.
    char_run: Vec<u32>,
    /// Built to recur across grammars ([`Finish::MinimizeUpTo`] within its bound, or
    /// [`Finish::Recurring`]): its mask entries are worth pooling.
    recurs: bool,
    /// See [`Core::has_rule_edges`].
    has_edges: bool,
    /// See [`Core::reaches_final`].
    reaches_final: OnceLock<bool>,
    /// See [`Core::sccs`].
    sccs: OnceLock<Vec<u32>>,
    /// See [`Core::shallow_key`].
    shallow: OnceLock<(u64, Arc<[u32]>)>,
    /// See [`Core::byte_key`].
    byte_key: OnceLock<(u64, Arc<[u32]>)>,
}

impl Core {
    /// Approximate heap bytes.
    fn approx_bytes(&self) -> usize {
        let edges: usize = self.rule_edges.iter().map(|e| e.len() * 8 + 24).sum();
        self.trans.len() * 4 + edges + self.len() * (3 + 32 + 4)
    }

    /// Number of states.
    pub(crate) fn len(&self) -> usize {
        self.finals.len()
    }

    /// The state reached from `state` on `byte`, or [`DEAD`].
    #[inline]
    pub(crate) fn next(&self, state: u32, byte: u8) -> u32 {
        self.trans[state as usize * self.nclasses + self.classes[byte as usize] as usize]
    }

    /// The byte transitions leaving `state`, one per byte class (targets may repeat, [`DEAD`]
    /// included).
    #[inline]
    pub(crate) fn class_targets(&self, state: u32) -> &[u32] {
        &self.trans[state as usize * self.nclasses..(state as usize + 1) * self.nclasses]
    }

    /// Rule-reference edges `(local rule, target)` leaving `state` (see [`Automaton::rule_edges`]
    /// for grammar rules).
    #[inline]
    pub(crate) fn local_edges(&self, state: u32) -> &[(u32, u32)] {
        &self.rule_edges[state as usize]
    }

    /// Whether some state has a rule-reference edge.
    #[inline]
    pub(crate) fn has_rule_edges(&self) -> bool {
        self.has_edges
    }

    /// Whether a final state can be reached from the start by bytes alone (computed once for
    /// every grammar sharing the tables).
    pub(crate) fn reaches_final(&self) -> bool {
        *self.reaches_final.get_or_init(|| self.search_final())
    }

    /// [`Core::reaches_final`], searched.
    fn search_final(&self) -> bool {
        let mut seen = vec![false; self.len()];
        let mut stack = vec![0u32];
        seen[0] = !seen.is_empty();
        while let Some(s) = stack.pop() {
            if self.finals[s as usize] {
                return true;
            }
            for_each_live(self.class_targets(s), |_, t| {
                if !std::mem::replace(&mut seen[t as usize], true) {
                    stack.push(t);
                }
            });
        }
        false
    }

    /// Whether the automaton was built to recur across grammars (see the field).
    #[inline]
    pub(crate) fn recurs(&self) -> bool {
        self.recurs
    }

    /// Whether `state` is final.
    #[inline]
    pub(crate) fn is_final(&self, state: u32) -> bool {
        self.finals[state as usize]
    }

    /// Whether `state` has at least one byte transition.
    #[inline]
    pub(crate) fn is_scannable(&self, state: u32) -> bool {
        self.scannable[state as usize]
    }

    /// The bytes `state` can scan.
    #[inline]
    pub(crate) fn live_bytes(&self, state: u32) -> &[u64; 4] {
        &self.live[state as usize]
    }

    /// Whether every byte in `bytes` loops on `state`.
    #[inline]
    pub(crate) fn loops_on_all(&self, state: u32, bytes: &[u64; 4]) -> bool {
        let l = &self.self_loop[state as usize];
        (0..4).all(|i| bytes[i] & !l[i] == 0)
    }

    /// Whether every token of a trie subtree with these bytes, all of it well-formed UTF-8 but for a
    /// possibly cut-short last character, stays alive in `state`'s character loop: its ASCII bytes
    /// loop and every multi-byte character returns to `state` (so a cut-short one ends on a live
    /// state of that loop, inside the same component).
    #[inline]
    pub(crate) fn loops_on_chars(&self, state: u32, bytes: &[u64; 4], utf8_prefix: bool) -> bool {
        let l = &self.self_loop[state as usize];
        utf8_prefix && self.char_loop[state as usize] && bytes[0] & !l[0] == 0 && bytes[1] & !l[1] == 0
    }

    /// The bytes that lead from `state` back to itself.
    #[inline]
    pub(crate) fn self_loop(&self, state: u32) -> &[u64; 4] {
        &self.self_loop[state as usize]
    }

    /// Whether every multi-byte UTF-8 character leads from `state` back to it.
    #[inline]
    pub(crate) fn char_loop(&self, state: u32) -> bool {
        self.char_loop[state as usize]
    }

    /// Whether `state` is a string's inside: every JSON-string character without an escape (see
    /// [`Core::reads_chars`]) leads back to it, passing no final state, and it is not final
    /// itself. A token that begins with such characters then fares from here as its rest does.
    #[inline]
    pub(crate) fn is_string_body(&self, state: u32) -> bool {
        self.string_body[state as usize]
    }

    /// Whether `state` reads any `chars` characters in a row, each a JSON-string character without
    /// an escape (a byte in `0x20..=0x7F` other than `"` and `\\`, or a well-formed multi-byte
    /// character), the last one possibly cut short, without dying. True of a string's inside, of a
    /// length-counting chain (`maxLength`) with that many characters left, and of the states of an
    /// unanchored `pattern` (every character keeps the search alive), where no state loops and
    /// [`Core::loops_on_chars`] cannot help.
    #[inline]
    pub(crate) fn reads_chars(&self, state: u32, chars: u32) -> bool {
        chars > 0 && self.char_run[state as usize] >= chars
    }

    /// How many JSON-string characters `state` reads for certain (see [`Core::reads_chars`]);
    /// `u32::MAX` when there is no end.
    #[inline]
    pub(crate) fn char_run(&self, state: u32) -> u32 {
        self.char_run[state as usize]
    }

    /// The states the JSON-string characters (see [`Core::reads_chars`]) lead to from `state`,
    /// into `out`; `false` if one of them, or a cut-short prefix of one, dies.
    fn char_targets(
        &self,
        state: u32,
        reps: &Utf8Reps,
        out: &mut Vec<u32>,
        cur: &mut Vec<u32>,
        next: &mut Vec<u32>,
    ) -> bool {
        out.clear();
        for &b in &reps.ascii {
            let t = self.next(state, b);
            if t == DEAD {
                return false;
            }
            push_unique(out, t);
        }
        self.multibyte_targets(state, reps, out, cur, next)
    }

    /// Adds to `out` the states the multi-byte UTF-8 characters lead to from `state`; `false` if one
    /// of them, or a cut-short prefix of one, dies.
    fn multibyte_targets(
        &self,
        state: u32,
        reps: &Utf8Reps,
        out: &mut Vec<u32>,
        cur: &mut Vec<u32>,
        next: &mut Vec<u32>,
    ) -> bool {
        for seq in &reps.sequences {
            cur.clear();
            cur.push(state);
            for bytes in seq {
                next.clear();
                for &s in cur.iter() {
                    for &b in bytes {
                        let t = self.next(s, b);
                        if t == DEAD {
                            return false;
                        }
                        push_unique(next, t);
                    }
                }
                std::mem::swap(cur, next);
            }
            for &t in cur.iter() {
                push_unique(out, t);
            }
        }
        true
    }

    /// [`Core::reads_chars`]'s run lengths: a state that some character kills reads none;
    /// any other reads one more than the least of the states its characters lead to; a state that
    /// never reaches one of the first kind reads without end. Breadth-first from the first kind
    /// over reversed character transitions.
    fn char_runs(&self, reps: &Utf8Reps) -> Vec<u32> {
        let n = self.len();
        let mut run = vec![u32::MAX; n];
        // Reversed character transitions, back to back per target.
        let mut edges: Vec<(u32, u32)> = Vec::new();
        let mut queue: Vec<u32> = Vec::new();
        let (mut out, mut cur, mut next) = (Vec::new(), Vec::new(), Vec::new());
        for s in 0..n as u32 {
            // Cheap filter first: most states (outside strings) die on some letter.
            if self.next(s, b'a') == DEAD || !self.char_targets(s, reps, &mut out, &mut cur, &mut next) {
                run[s as usize] = 0;
                queue.push(s);
                continue;
            }
            edges.extend(out.iter().map(|&t| (t, s)));
        }
        edges.sort_unstable();
        let mut i = 0;
        while i < queue.len() {
            let t = queue[i];
            let d = run[t as usize];
            let lo = edges.partition_point(|e| e.0 < t);
            for &(_, s) in edges[lo..].iter().take_while(|e| e.0 == t) {
                if run[s as usize] == u32::MAX {
                    run[s as usize] = (d + 1).min(u32::MAX - 1);
                    queue.push(s);
                }
            }
            i += 1;
        }
        run
    }

    /// Encoding of the structure: the byte classes, then per state its finality, its live class
    /// transitions as `(class, target)` and its rule edges (local rule numbers passed through
    /// `rule_index`). Equal encodings are equal automata; equal automata built from the same rule (a
    /// tool seen again) encode equally, since the classes come from the rule's byte ranges. Classes
    /// are not merged into byte ranges: keys are computed on the first mask of a rule, while the
    /// model waits.
    pub(crate) fn encode_local(&self, rule_index: &mut dyn FnMut(u32) -> u32, out: &mut Vec<u32>) {
        out.push(self.len() as u32);
        out.push(self.nclasses as u32);
        out.extend(self.classes.chunks(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])));
        for s in 0..self.len() {
            out.push(self.finals[s] as u32);
            let row = &self.trans[s * self.nclasses..(s + 1) * self.nclasses];
            for (c, &t) in row.iter().enumerate() {
                if t != DEAD {
                    out.extend([c as u32, t]);
                }
            }
            out.push(u32::MAX - 1);
            for &(r, t) in self.local_edges(s as u32) {
                out.extend([rule_index(r), t]);
            }
            out.push(u32::MAX - 2);
        }
    }

    /// Whether every multi-byte UTF-8 character read from `state` leads to `target`.
    fn string_body_at(&self, state: u32, reps: &Utf8Reps) -> bool {
        if !self.char_loop[state as usize] || self.finals[state as usize] {
            return false;
        }
        let l = &self.self_loop[state as usize];
        if !reps.ascii.iter().all(|&b| l[b as usize / 64] >> (b % 64) & 1 == 1) {
            return false;
        }
        // The states inside a multi-byte character: none may be final.
        let mut cur = Vec::new();
        let mut next = Vec::new();
        for seq in &reps.sequences {
            cur.clear();
            cur.push(state);
            for bytes in &seq[..seq.len() - 1] {
                next.clear();
                for &s in &cur {
                    for &b in bytes {
                        let t = self.next(s, b);
                        if t == DEAD || self.finals[t as usize] {
                            return false;
                        }
                        push_unique(&mut next, t);
                    }
                }
                std::mem::swap(&mut cur, &mut next);
            }
        }
        true
    }

    fn multibyte_all_reach(&self, state: u32, target: u32, reps: &Utf8Reps) -> bool {
        let mut out = Vec::new();
        self.multibyte_targets(state, reps, &mut out, &mut Vec::new(), &mut Vec::new()) && out == [target]
    }

    /// Whether every multi-byte UTF-8 character read from `state` returns to `state`.
    fn loops_on_all_multibyte(&self, state: u32, reps: &Utf8Reps) -> bool {
        if self.self_loop[state as usize][0] == 0 && self.self_loop[state as usize][1] == 0 {
            return false;
        }
        if !self.multibyte_all_reach(state, state, reps) {
            return false;
        }
        true
    }

    /// Strongly connected component of every state over byte transitions, ignoring transitions on
    /// JSON's structural bytes (iterative Tarjan). The components are the "insides" of strings,
    /// numbers and whitespace runs, whose token masks the mask cache shares between states; any
    /// choice of components is correct, this one makes them small and alike.
    pub(crate) fn sccs(&self) -> &[u32] {
        self.sccs.get_or_init(|| self.byte_sccs())
    }

    /// The structural key of the tables alone, references numbered by first use but not followed
    /// (a mask entry that never entered a referenced rule depends on nothing else), computed once
    /// for every grammar sharing the tables.
    pub(crate) fn shallow_key(&self) -> &(u64, Arc<[u32]>) {
        self.shallow.get_or_init(|| {
            let mut out = vec![u32::MAX - 9];
            let mut index: HashMap<u32, u32> = HashMap::default();
            let mut map = |x: u32| {
                let next = index.len() as u32;
                *index.entry(x).or_insert(next)
            };
            self.encode_local(&mut map, &mut out);
            (key_hash(&out), out.into())
        })
    }

    /// The structural key of the byte transitions alone: each state's rule edges reduced to whether
    /// it has any. A mask entry whose walk never reached a state with rule edges depends on nothing
    /// else, so it holds for every automaton with this key: a dispatch's free text is one entry for
    /// every tool set, whatever the number of tags (its automaton differs only in the edges of the
    /// state where a trigger completes).
    pub(crate) fn byte_key(&self) -> &(u64, Arc<[u32]>) {
        self.byte_key.get_or_init(|| {
            let mut out = vec![u32::MAX - 12, self.len() as u32, self.nclasses as u32];
            out.extend(self.classes.chunks(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])));
            for s in 0..self.len() {
                out.push(u32::from(self.finals[s]) | u32::from(!self.rule_edges[s].is_empty()) << 1);
                let row = &self.trans[s * self.nclasses..(s + 1) * self.nclasses];
                for (c, &t) in row.iter().enumerate() {
                    if t != DEAD {
                        out.extend([c as u32, t]);
                    }
                }
                out.push(u32::MAX - 1);
            }
            (key_hash(&out), out.into())
        })
    }

    /// [`Core::sccs`] if some state already asked for them.
    pub(crate) fn sccs_if_computed(&self) -> Option<&[u32]> {
        self.sccs.get().map(Vec::as_slice)
    }

    fn byte_sccs(&self) -> Vec<u32> {
        let n = self.len();
        // Classes holding a byte other than a structural one; all bytes of a class go alike.
        let mut open = vec![false; self.nclasses];
        for b in 0..=255u8 {
            if !b"\",:{}[]".contains(&b) {
                open[self.classes[b as usize] as usize] = true;
            }
        }
        // Successor lists back to back (`offsets[v]..offsets[v + 1]`), deduplicated by stamp.
        let mut offsets = Vec::with_capacity(n + 1);
        let mut targets: Vec<u32> = Vec::new();
        let mut last = vec![u32::MAX; n];
        offsets.push(0);
        for v in 0..n {
            let row = &self.trans[v * self.nclasses..(v + 1) * self.nclasses];
            for (&t, _) in row.iter().zip(&open).filter(|(_, o)| **o) {
                if t != DEAD && last[t as usize] != v as u32 {
                    last[t as usize] = v as u32;
                    targets.push(t);
                }
            }
            offsets.push(targets.len());
        }
        strongly_connected(n, |v| &targets[offsets[v]..offsets[v + 1]])
    }

    /// Canonical encoding of the component `scc` seen from `state`: states numbered breadth-first
    /// from `state`, byte transitions inside the component by number, leaving ones as "exit". `None`
    /// when the component is trivial or larger than `max`.
    pub(crate) fn component_key(&self, state: u32, sccs: &[u32], max: usize) -> Option<Vec<u32>> {
        const EXIT: u32 = u32::MAX - 1;
        let c = sccs[state as usize];
        let mut order: Vec<u32> = vec![state];
        let mut num: HashMap<u32, u32> = HashMap::from_iter([(state, 0)]);
        let mut out = Vec::new();
        let mut i = 0;
        while i < order.len() {
            if order.len() > max {
                return None;
            }
            let s = order[i];
            let mut b = 0usize;
            while b < 256 {
                let t = self.next(s, b as u8);
                let mut e = b;
                while e + 1 < 256 && self.next(s, (e + 1) as u8) == t {
                    e += 1;
                }
                let code = if t == DEAD {
                    DEAD
                } else if sccs[t as usize] != c {
                    EXIT
                } else {
                    let len = num.len() as u32;
                    *num.entry(t).or_insert_with(|| {
                        order.push(t);
                        len
                    })
                };
                out.extend([b as u32, e as u32, code]);
                b = e + 1;
            }
            out.push(u32::MAX - 2);
            i += 1;
        }
        let trivial = order.len() == 1 && !out.chunks(3).any(|x| x.len() == 3 && x[2] == 0);
        if trivial { None } else { Some(out) }
    }

    /// See [`Automaton::retrim`].
    fn retrim(&mut self) -> bool {
        let dfa = Dfa {
            classes: self.classes,
            nclasses: self.nclasses,
            trans: std::mem::take(&mut self.trans),
            rule_edges: std::mem::take(&mut self.rule_edges),
            finals: std::mem::take(&mut self.finals),
        };
        let recurs = self.recurs;
        match dfa.trim().map(|d| d.canonical()) {
            Some(d) => {
                *self = d.into_core(recurs);
                true
            }
            None => false,
        }
    }
}

/// Pushes `t` unless `v` holds it (the sets walked here are a handful of states).
/// Calls `f` with each live entry `(class, target)` of a transition row. Rows are mostly dead (a
/// trie of a hundred tool names has one live class per state of eighty): a chunk of them is skipped
/// by one vectorized test, since [`DEAD`] has every bit set.
#[inline]
pub(crate) fn for_each_live(row: &[u32], mut f: impl FnMut(usize, u32)) {
    const CHUNK: usize = 16;
    for (k, chunk) in row.chunks(CHUNK).enumerate() {
        if chunk.iter().fold(DEAD, |all, &t| all & t) == DEAD {
            continue;
        }
        for (j, &t) in chunk.iter().enumerate() {
            if t != DEAD {
                f(k * CHUNK + j, t);
            }
        }
    }
}

fn push_unique(v: &mut Vec<u32>, t: u32) {
    if !v.contains(&t) {
        v.push(t);
    }
}

/// Values grouped by key in one allocation: key `k`'s values are `values[start[k]..start[k + 1]]`,
/// in the order `items` yields them (a counting sort; `items` is walked twice).
fn group_by_key<T: Copy>(keys: usize, items: impl Iterator<Item = (u32, T)> + Clone, fill: T) -> (Vec<u32>, Vec<T>) {
    let mut start = vec![0u32; keys + 2];
    for (k, _) in items.clone() {
        start[k as usize + 2] += 1;
    }
    for k in 2..keys + 2 {
        start[k] += start[k - 1];
    }
    let mut values = vec![fill; start[keys + 1] as usize];
    for (k, v) in items {
        let slot = &mut start[k as usize + 1];
        values[*slot as usize] = v;
        *slot += 1;
    }
    start.pop();
    (start, values)
}

/// The byte ranges of every multi-byte UTF-8 character, as `regex_syntax::utf8` splits them
/// (computed once).
fn multibyte_sequences() -> &'static [Vec<(u8, u8)>] {
    static SEQUENCES: std::sync::OnceLock<Vec<Vec<(u8, u8)>>> = std::sync::OnceLock::new();
    SEQUENCES.get_or_init(|| {
        let lo = char::from_u32(0x80).expect("valid");
        let hi = char::from_u32(0x10FFFF).expect("valid");
        Utf8Sequences::new(lo, hi).map(|seq| seq.as_slice().iter().map(|r| (r.start, r.end)).collect()).collect()
    })
}

/// One byte per byte class, for the JSON-string ASCII characters and for each byte range of
/// [`multibyte_sequences`]: walking these instead of every byte visits each transition once.
struct Utf8Reps {
    ascii: Vec<u8>,
    sequences: Vec<Vec<Vec<u8>>>,
}

impl Utf8Reps {
    fn new(classes: &[u8; 256]) -> Utf8Reps {
        let reps = |bytes: &mut dyn Iterator<Item = u8>| {
            let mut seen = [false; 256];
            bytes.filter(|&b| !std::mem::replace(&mut seen[classes[b as usize] as usize], true)).collect()
        };
        let ascii = reps(&mut (0x20..=0x7Fu8).filter(|&b| b != b'"' && b != b'\\'));
        let sequences = multibyte_sequences()
            .iter()
            .map(|seq| seq.iter().map(|&(lo, hi)| reps(&mut (lo..=hi))).collect())
            .collect();
        Utf8Reps { ascii, sequences }
    }
}

#[derive(Clone, Copy)]
enum Label {
    Eps,
    Bytes(u8, u8),
    Rule(u32),
}

struct Nfa<'a> {
    /// Number of states.
    states: usize,
    /// Edges `(from, label, to)` in the order they were added (grouped by state in [`NfaEdges`]).
    edges: Vec<(u32, Label, u32)>,
    max_states: usize,
    deadline: Instant,
    regex_depth: usize,
    /// Bodies of rules to inline (`None`: keep a rule-reference edge).
    inline: &'a dyn Fn(u32) -> Option<&'a Expr>,
    /// Inlined rule fragments by (rule, continuation state): a rule inlined twice in front of the same
    /// continuation is built once.
    shared: HashMap<(u32, u32), u32>,
    inline_depth: usize,
    /// UTF-8 byte-range sequences per character class (merged ranges, negation applied).
    class_sequences: HashMap<Vec<(u32, u32)>, std::rc::Rc<ByteSequences>>,
}

/// A character class as UTF-8 byte-range sequences.
type ByteSequences = Vec<Vec<(u8, u8)>>;

/// Inlining nested deeper than this keeps rule-reference edges (bounded native recursion).
const INLINE_DEPTH: usize = 48;

impl<'a> Nfa<'a> {
    fn new(max_states: usize, deadline: Instant, inline: &'a dyn Fn(u32) -> Option<&'a Expr>) -> Nfa<'a> {
        Nfa {
            states: 0,
            edges: Vec::new(),
            max_states,
            deadline,
            regex_depth: 0,
            inline,
            shared: HashMap::default(),
            inline_depth: 0,
            class_sequences: HashMap::default(),
        }
    }

    /// The subset construction of the NFA from `start` to the final state `end`, trimmed;
    /// `None` when nothing reaches `end`.
    fn dfa(&self, start: u32, end: u32) -> Result<Option<Dfa>, BuildError> {
        let edges = NfaEdges::new(self.states, &self.edges);
        let dfa = determinize(&edges, start, end, self.max_states, self.deadline)?;
        // A subset of NFA states that all reach the end reaches a final state: trimming the DFA
        // is needed only when some NFA state cannot (a reference to a rule that never matches,
        // an empty class).
        Ok(if self.all_reach(end) { Some(dfa) } else { dfa.trim() })
    }
    fn new_state(&mut self) -> Result<u32, BuildError> {
        if self.states >= self.max_states {
            return Err(BuildError::Limit("automaton states", self.states + 1, self.max_states));
        }
        if self.states.is_multiple_of(4096) && Instant::now() > self.deadline {
            return Err(BuildError::Timeout);
        }
        self.states += 1;
        Ok(self.states as u32 - 1)
    }

    /// Whether every state can reach `end`.
    fn all_reach(&self, end: u32) -> bool {
        let (start, preds) = group_by_key(self.states, self.edges.iter().map(|&(from, _, to)| (to, from)), 0);
        let mut live = vec![false; self.states];
        live[end as usize] = true;
        let mut stack = vec![end];
        let mut count = 1;
        while let Some(t) = stack.pop() {
            for &p in &preds[start[t as usize] as usize..start[t as usize + 1] as usize] {
                if !live[p as usize] {
                    live[p as usize] = true;
                    count += 1;
                    stack.push(p);
                }
            }
        }
        count == self.states
    }

    fn edge(&mut self, from: u32, label: Label, to: u32) {
        self.edges.push((from, label, to));
    }

    /// Splices the product automaton of `base ∩ and ∖ not` in from `from`; returns its end state.
    fn restrict(&mut self, from: u32, base: &Expr, and: &[Expr], not: &[Expr]) -> Result<u32, BuildError> {
        let no_rules = |_: u32| -> Option<u32> { None };
        let part = |e: &Expr, nfa: &Nfa<'_>| -> Result<Automaton, BuildError> {
            let mut refs = false;
            e.for_each_rule(&mut |_| refs = true);
            if refs {
                return Err(BuildError::Regex("rule references inside a restriction".into()));
            }
            build(e, &no_rules, &|_| None, nfa.max_states, nfa.deadline, Finish::MinimizeUpTo(usize::MAX))
        };
        let mut parts = vec![part(base, self)?];
        for e in and {
            parts.push(part(e, self)?);
        }
        let n_and = parts.len();
        for e in not {
            parts.push(part(e, self)?);
        }
        let accepting = |t: &[u32]| {
            t[..n_and].iter().zip(&parts).all(|(&s, a)| a.is_final(s))
                && t[n_and..].iter().zip(&parts[n_and..]).all(|(&s, a)| s == DEAD || !a.is_final(s))
        };
        let start: Vec<u32> = vec![0; parts.len()];
        let mut ids: HashMap<Vec<u32>, u32> = HashMap::default();
        let mut tuples = vec![start.clone()];
        ids.insert(start, 0);
        let mut trans: Vec<Vec<(u8, u8, u32)>> = Vec::new();
        let mut i = 0;
        while i < tuples.len() {
            if tuples.len() > self.max_states {
                return Err(BuildError::Limit("automaton states", tuples.len(), self.max_states));
            }
            let t = tuples[i].clone();
            let mut row: Vec<(u8, u8, u32)> = Vec::new();
            for b in 0..=255u8 {
                let next: Vec<u32> =
                    t.iter().zip(&parts).map(|(&s, a)| if s == DEAD { DEAD } else { a.next(s, b) }).collect();
                if next[..n_and].contains(&DEAD) {
                    continue;
                }
                let len = tuples.len() as u32;
                let id = *ids.entry(next.clone()).or_insert_with(|| {
                    tuples.push(next);
                    len
                });
                match row.last_mut() {
                    Some(last) if last.2 == id && last.1 as u32 + 1 == b as u32 => last.1 = b,
                    _ => row.push((b, b, id)),
                }
            }
            trans.push(row);
            i += 1;
        }
        let end = self.new_state()?;
        let base_state = self.states as u32;
        for _ in 0..tuples.len() {
            self.new_state()?;
        }
        self.edge(from, Label::Eps, base_state);
        for (i, row) in trans.iter().enumerate() {
            let s = base_state + i as u32;
            for &(lo, hi, t) in row {
                self.edge(s, Label::Bytes(lo, hi), base_state + t);
            }
            if accepting(&tuples[i]) {
                self.edge(s, Label::Eps, end);
            }
        }
        Ok(end)
    }

    fn chars(&mut self, from: u32, negated: bool, ranges: &[(char, char)]) -> Result<u32, BuildError> {
        let mut rs: Vec<(u32, u32)> = ranges.iter().map(|&(a, b)| (a as u32, b as u32)).collect();
        rs.sort_unstable();
        let mut merged: Vec<(u32, u32)> = Vec::new();
        for (a, b) in rs {
            match merged.last_mut() {
                Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        if negated {
            let mut comp = Vec::new();
            let mut next = 0u32;
            for (a, b) in merged {
                if a > next {
                    comp.push((next, a - 1));
                }
                next = b + 1;
            }
            if next <= 0x10FFFF {
                comp.push((next, 0x10FFFF));
            }
            merged = comp;
        }
        let end = self.new_state()?;
        // The UTF-8 byte sequences of a class, computed once per class and automaton (a JSON
        // Schema repeats the string-character class in every string).
        let sequences = match self.class_sequences.get(&merged) {
            Some(seqs) => seqs.clone(),
            None => {
                let mut seqs: Vec<Vec<(u8, u8)>> = Vec::new();
                for &(a, b) in &merged {
                    // Surrogates are not characters; clip them out so `char::from_u32` always succeeds.
                    let pieces = [(a, b.min(0xD7FF)), (a.max(0xE000), b)];
                    for (a, b) in pieces {
                        let (Some(a), Some(b)) = (char::from_u32(a), char::from_u32(b)) else { continue };
                        if a > b {
                            continue;
                        }
                        seqs.extend(
                            Utf8Sequences::new(a, b)
                                .map(|seq| seq.as_slice().iter().map(|r| (r.start, r.end)).collect()),
                        );
                    }
                }
                let seqs = std::rc::Rc::new(seqs);
                self.class_sequences.insert(merged, seqs.clone());
                seqs
            }
        };
        let mut suffixes: HashMap<&[(u8, u8)], u32> = HashMap::default();
        for ranges in sequences.iter() {
            // Sequences share their continuation-byte suffixes (`[80-BF]` tails): one state
            // per distinct suffix keeps classes small.
            let mut cur = from;
            for i in 0..ranges.len() {
                let (lo, hi) = ranges[i];
                let to = if i + 1 == ranges.len() {
                    end
                } else if let Some(&t) = suffixes.get(&ranges[i + 1..]) {
                    self.edge(cur, Label::Bytes(lo, hi), t);
                    break;
                } else {
                    let t = self.new_state()?;
                    suffixes.insert(&ranges[i + 1..], t);
                    t
                };
                self.edge(cur, Label::Bytes(lo, hi), to);
                cur = to;
            }
        }
        Ok(end)
    }

    /// Builds `e` from `from` and returns its end state.
    fn build(&mut self, e: &Expr, from: u32, rule_map: &dyn Fn(u32) -> Option<u32>) -> Result<u32, BuildError> {
        let end = self.new_state()?;
        let start = self.build_to(e, end, rule_map)?;
        self.edge(from, Label::Eps, start);
        Ok(end)
    }

    /// Builds `e` followed by the continuation state `k` and returns its start state. Callers only
    /// ever add edges *into* the returned state, so one fragment can be entered from many places:
    /// sequences are built back to front, and an inlined rule is built once per continuation (the
    /// `shared` map). The same rule before the same continuation (an object's member written first
    /// or after a comma, an array's first or next item) is therefore one set of NFA states, which
    /// keeps subset construction from copying nested objects once per path that reaches them.
    fn build_to(&mut self, e: &Expr, k: u32, rule_map: &dyn Fn(u32) -> Option<u32>) -> Result<u32, BuildError> {
        match e {
            Expr::Empty => Ok(k),
            Expr::Seq(parts) => {
                let mut next = k;
                for p in parts.iter().rev() {
                    next = self.build_to(p, next, rule_map)?;
                }
                Ok(next)
            }
            Expr::Alt(parts) => {
                let s = self.new_state()?;
                for p in parts {
                    let t = self.build_to(p, k, rule_map)?;
                    self.edge(s, Label::Eps, t);
                }
                Ok(s)
            }
            Expr::Literal(text) => {
                // Built back to front, the last byte straight into `k`.
                let mut next = k;
                for &b in text.as_bytes().iter().rev() {
                    let s = self.new_state()?;
                    self.edge(s, Label::Bytes(b, b), next);
                    next = s;
                }
                Ok(next)
            }
            Expr::Rule(r) if self.inline_depth < INLINE_DEPTH => match (self.inline)(r.0) {
                Some(body) => {
                    if let Some(&start) = self.shared.get(&(r.0, k)) {
                        return Ok(start);
                    }
                    self.inline_depth += 1;
                    let start = self.build_to(body, k, rule_map);
                    self.inline_depth -= 1;
                    let start = start?;
                    self.shared.insert((r.0, k), start);
                    Ok(start)
                }
                None => self.build_leaf(e, k, rule_map),
            },
            Expr::Repeat { expr, min, max } => {
                // The optional or looping part first (it is what follows the mandatory copies).
                let mut next = match max {
                    None => {
                        // A hub that either leaves to `k` or reads one more copy back to itself.
                        let hub = self.new_state()?;
                        self.edge(hub, Label::Eps, k);
                        let body = self.build_to(expr, hub, rule_map)?;
                        self.edge(hub, Label::Eps, body);
                        hub
                    }
                    Some(max) => {
                        let mut next = k;
                        for _ in *min..*max {
                            let s = self.new_state()?;
                            self.edge(s, Label::Eps, k);
                            let body = self.build_to(expr, next, rule_map)?;
                            self.edge(s, Label::Eps, body);
                            next = s;
                        }
                        next
                    }
                };
                for _ in 0..*min {
                    next = self.build_to(expr, next, rule_map)?;
                }
                Ok(next)
            }
            _ => self.build_leaf(e, k, rule_map),
        }
    }

    /// A fresh start state, `e` built from it by [`Nfa::build_plain`], its end joined to `k`.
    fn build_leaf(&mut self, e: &Expr, k: u32, rule_map: &dyn Fn(u32) -> Option<u32>) -> Result<u32, BuildError> {
        let s = self.new_state()?;
        let end = self.build_plain(e, s, rule_map)?;
        self.edge(end, Label::Eps, k);
        Ok(s)
    }

    /// Builds the leaf `e` (composites go through [`Nfa::build_to`]) starting at `from`; returns the
    /// end state.
    fn build_plain(&mut self, e: &Expr, from: u32, rule_map: &dyn Fn(u32) -> Option<u32>) -> Result<u32, BuildError> {
        match e {
            Expr::CharClass { negated, ranges } => self.chars(from, *negated, ranges),
            Expr::Rule(r) if self.inline_depth >= INLINE_DEPTH || (self.inline)(r.0).is_none() => {
                let to = self.new_state()?;
                // A rule that can never match leaves `to` unreachable.
                if let Some(id) = rule_map(r.0) {
                    self.edge(from, Label::Rule(id), to);
                }
                Ok(to)
            }
            Expr::Restrict { base, and, not } => self.restrict(from, base, and, not),
            Expr::TagDispatch(d) => self.dispatch(from, d, rule_map),
            Expr::Token(id) => {
                let mut at = from;
                for b in crate::grammar::special_token_bytes(*id) {
                    let to = self.new_state()?;
                    self.edge(at, Label::Bytes(b, b), to);
                    at = to;
                }
                Ok(at)
            }
            Expr::Regex(pattern) => {
                if self.regex_depth > 4 {
                    return Err(BuildError::Regex("regex nested in regex".into()));
                }
                let inner = regex_to_expr(pattern, RegexMode::Terminal).map_err(BuildError::Regex)?;
                self.regex_depth += 1;
                let r = self.build(&inner, from, rule_map);
                self.regex_depth -= 1;
                r
            }
            Expr::Empty | Expr::Literal(_) | Expr::Rule(_) | Expr::Seq(_) | Expr::Alt(_) | Expr::Repeat { .. } => {
                self.build(e, from, rule_map)
            }
        }
    }
}

struct Dfa {
    classes: [u8; 256],
    nclasses: usize,
    trans: Vec<u32>,
    rule_edges: Vec<Vec<(u32, u32)>>,
    finals: Vec<bool>,
}

/// What [`build`] does with the automaton the subset construction gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Finish {
    /// Minimize and number canonically when at most this many states: a small shared rule, where
    /// equal languages (and rule references) must give equal [`Automaton::encode`] output. Larger
    /// ones are kept as built, like [`Finish::Once`].
    MinimizeUpTo(usize),
    /// Keep as built, and pool its mask entries: a unit whose expression recurs across grammars (a
    /// tool's tag) builds to the same automaton each time, the subset construction being
    /// deterministic, and minimizing it would cost more than the few states it saves.
    Recurring,
    /// Keep as built, entries not pooled: built once, for one grammar.
    Once,
}

/// Builds the automaton of `expr`, finished as `finish` says. `rule_map` maps grammar rule ids to
/// automaton rule ids (`None`: the reference can never match).
pub(crate) fn build<'a>(
    expr: &Expr,
    rule_map: &dyn Fn(u32) -> Option<u32>,
    inline: &'a dyn Fn(u32) -> Option<&'a Expr>,
    max_states: usize,
    deadline: Instant,
    finish: Finish,
) -> Result<Automaton, BuildError> {
    let grafted = match Choice::of(expr, rule_map, inline) {
        Some(choice) => choice.dfa(rule_map, inline, max_states, deadline)?,
        None => None,
    };
    let dfa = match grafted {
        Some(dfa) => dfa,
        None => {
            let mut nfa = Nfa::new(max_states, deadline, inline);
            let start = nfa.new_state()?;
            let end = nfa.build(expr, start, rule_map)?;
            nfa.dfa(start, end)?
        }
    };
    let Some(dfa) = dfa else { return Ok(empty_automaton()) };
    // Minimization pays off where automata are shared (equal languages, equal encodings); a large
    // automaton built once for one grammar is used as the subset construction leaves it.
    let minimize_up_to = match finish {
        Finish::MinimizeUpTo(n) => n,
        Finish::Recurring => return Ok(built(dfa.into_core(true))),
        Finish::Once => return Ok(built(dfa.into_core(false))),
    };
    if dfa.len() > minimize_up_to {
        return Ok(built(dfa.into_core(false)));
    }
    Ok(built(dfa.minimize(deadline)?.canonical().into_core(true)))
}

/// Wraps the tables `build` made. Every state of them reaches a final state, by bytes and rule
/// edges (the subset construction's states are sets of NFA states that all reach the end, or the
/// DFA is trimmed; a choice's trie leads to its tails): without rule edges, the start reaches a
/// final state by bytes, which a grammar's productivity check would otherwise search for in every
/// new tool's automaton.
fn built(core: Core) -> Automaton {
    if !core.has_edges && core.len() > 0 {
        debug_assert!(core.search_final(), "built tables reach a final state");
        let _ = core.reaches_final.set(true);
    }
    Automaton::from_core(core)
}

/// A symbol on the way into a [`Choice`]'s alternative: a byte, or a reference to a rule (its
/// automaton rule id).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Symbol {
    Byte(u8),
    Rule(u32),
}

/// A choice among many alternatives that each begin with a fixed string of symbols (literals,
/// special tokens, rule references) and may go on with anything (the tail): gpt-oss's messages,
/// one per tool, `<|channel|>commentary to=functions.NAME …` then the tool's schema. Its DFA is
/// the trie of the beginnings with each tail's own DFA grafted where its beginning ends, which
/// the subset construction would reach too, at thousands of instructions per trie state.
struct Choice<'e> {
    /// Per alternative, its beginning and what follows it (empty: nothing).
    alternatives: Vec<(Vec<Symbol>, Vec<&'e Expr>)>,
}

/// Alternatives a choice needs before it is built as a trie (fewer are cheap either way).
const CHOICE_MIN_ALTERNATIVES: usize = 16;

impl<'e> Choice<'e> {
    fn of<'a>(
        e: &'e Expr,
        rule_map: &dyn Fn(u32) -> Option<u32>,
        inline: &'a dyn Fn(u32) -> Option<&'a Expr>,
    ) -> Option<Choice<'e>> {
        let Expr::Alt(parts) = e else { return None };
        if parts.len() < CHOICE_MIN_ALTERNATIVES {
            return None;
        }
        let mut alternatives = Vec::with_capacity(parts.len());
        for part in parts {
            fn flatten<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
                match e {
                    Expr::Seq(items) => items.iter().for_each(|i| flatten(i, out)),
                    other => out.push(other),
                }
            }
            let mut items = Vec::new();
            flatten(part, &mut items);
            let mut beginning = Vec::new();
            let mut dead = false;
            let mut at = 0;
            while at < items.len() {
                match items[at] {
                    Expr::Empty => {}
                    Expr::Literal(text) => beginning.extend(text.bytes().map(Symbol::Byte)),
                    Expr::Token(id) => {
                        beginning.extend(crate::grammar::special_token_bytes(*id).into_iter().map(Symbol::Byte));
                    }
                    Expr::Rule(r) if inline(r.0).is_none() => match rule_map(r.0) {
                        Some(id) => beginning.push(Symbol::Rule(id)),
                        None => dead = true,
                    },
                    _ => break,
                }
                at += 1;
            }
            // A reference that can never match: the alternative matches nothing.
            if !dead {
                alternatives.push((beginning, items[at..].to_vec()));
            }
        }
        Some(Choice { alternatives })
    }

    /// The DFA (`Some(None)` when the language is empty), or `None` when a tail begins where
    /// another alternative's string goes on, ends, or another tail begins: grafting it there
    /// would take a subset construction after all, which then builds the whole choice.
    fn dfa<'a>(
        self,
        rule_map: &dyn Fn(u32) -> Option<u32>,
        inline: &'a dyn Fn(u32) -> Option<&'a Expr>,
        max_states: usize,
        deadline: Instant,
    ) -> Result<Option<Option<Dfa>>, BuildError> {
        // The trie of the beginnings, built from them in sorted order: nodes numbered depth first,
        // each node's children in symbol order, its edges one flat list (a vector per node was
        // a third of the build for gpt-oss's 130 messages).
        let mut order: Vec<usize> = (0..self.alternatives.len()).collect();
        order.sort_unstable_by(|&a, &b| self.alternatives[a].0.cmp(&self.alternatives[b].0));
        let mut edges: Vec<(u32, Symbol, u32)> = Vec::new();
        let mut nodes = 1usize;
        let mut ends: Vec<u32> = vec![0; self.alternatives.len()];
        // The nodes along the previous beginning, the root first.
        let mut path: Vec<u32> = vec![0];
        let mut previous: &[Symbol] = &[];
        for &alt in &order {
            let beginning = &self.alternatives[alt].0;
            let shared = beginning.iter().zip(previous).take_while(|(a, b)| a == b).count();
            path.truncate(shared + 1);
            for &symbol in &beginning[shared..] {
                if nodes >= max_states {
                    return Err(BuildError::Limit("automaton states", nodes + 1, max_states));
                }
                let child = nodes as u32;
                nodes += 1;
                edges.push((*path.last().unwrap_or(&0), symbol, child));
                path.push(child);
            }
            ends[alt] = *path.last().unwrap_or(&0);
            previous = beginning;
        }
        let mut has_children = vec![false; nodes];
        for &(from, _, _) in &edges {
            has_children[from as usize] = true;
        }
        if Instant::now() > deadline {
            return Err(BuildError::Timeout);
        }
        // Each tail where its beginning ends: that node must lead nowhere else (checked before
        // any tail is built).
        let mut finals = vec![false; nodes];
        let mut grafts: Vec<u32> = Vec::new();
        for ((_, tail), &node) in self.alternatives.iter().zip(&ends) {
            match tail.is_empty() {
                true => finals[node as usize] = true,
                false => grafts.push(node),
            }
        }
        grafts.sort_unstable();
        let alone = grafts.windows(2).all(|w| w[0] != w[1])
            && grafts.iter().all(|&node| !has_children[node as usize] && !finals[node as usize]);
        if !alone {
            return Ok(None);
        }
        let mut tails: Vec<(u32, Dfa)> = Vec::new();
        // A tail that matches nothing leaves its beginning leading nowhere: trim then.
        let mut dead_end = false;
        for ((_, tail), &node) in self.alternatives.iter().zip(&ends) {
            if tail.is_empty() {
                continue;
            }
            let mut nfa = Nfa::new(max_states, deadline, inline);
            let start = nfa.new_state()?;
            let mut next = nfa.new_state()?;
            let end = next;
            for part in tail.iter().rev() {
                next = nfa.build_to(part, next, rule_map)?;
            }
            nfa.edge(start, Label::Eps, next);
            match nfa.dfa(start, end)? {
                Some(dfa) => tails.push((node, dfa)),
                None => dead_end = true,
            }
        }

        // Byte classes: each byte of a beginning a class of its own and every other byte one
        // class (not one per gap between them: a trie of a hundred tool names has eighty classes
        // that way, half of them bytes no name holds), split further as each tail's classes are.
        let mut used = [false; 256];
        for &(_, symbol, _) in &edges {
            if let Symbol::Byte(b) = symbol {
                used[b as usize] = true;
            }
        }
        let mut classes = [0u8; 256];
        let mut nclasses = refine_classes(&mut classes, |b| if used[b] { b as u16 + 1 } else { 0 });
        for (_, tail) in &tails {
            nclasses = refine_classes(&mut classes, |b| u16::from(tail.classes[b]));
        }
        let mut reps = vec![0u8; nclasses];
        for b in (0..256).rev() {
            reps[classes[b] as usize] = b as u8;
        }
        // Tail states after their first, which is the trie node it is grafted on.
        let total = nodes + tails.iter().map(|(_, t)| t.len() - 1).sum::<usize>();
        if total > max_states {
            return Err(BuildError::Limit("automaton states", total, max_states));
        }
        let mut trans = vec![DEAD; total * nclasses];
        let mut rule_edges: Vec<Vec<(u32, u32)>> = vec![Vec::new(); total];
        finals.resize(total, false);
        // A node's children come in symbol order, so its rule edges are sorted as they come.
        for &(s, symbol, t) in &edges {
            match symbol {
                Symbol::Byte(b) => trans[s as usize * nclasses + classes[b as usize] as usize] = t,
                Symbol::Rule(r) => rule_edges[s as usize].push((r, t)),
            }
        }
        let mut offset = nodes as u32;
        for (node, tail) in &tails {
            let state = |t: u32| match t {
                DEAD => DEAD,
                0 => *node,
                t => offset + t - 1,
            };
            for s in 0..tail.len() as u32 {
                let at = state(s) as usize;
                for (g, &b) in reps.iter().enumerate() {
                    trans[at * nclasses + g] =
                        state(tail.trans[s as usize * tail.nclasses + tail.classes[b as usize] as usize]);
                }
                rule_edges[at] = tail.rule_edges[s as usize].iter().map(|&(r, t)| (r, state(t))).collect();
                finals[at] = tail.finals[s as usize];
            }
            offset += tail.len() as u32 - 1;
        }
        let dfa = Dfa { classes, nclasses, trans, rule_edges, finals };
        Ok(Some(match dead_end || !dfa.finals.contains(&true) {
            false => Some(dfa),
            true => dfa.trim(),
        }))
    }
}

/// The automaton of the rule-free expression `e`, to test many texts with [`Core::matches`]
/// (`None` if it cannot be built within the limit and `deadline`).
pub(crate) fn build_matcher(e: &Expr, deadline: Instant) -> Option<Automaton> {
    build(e, &|_| None, &|_| None, 100_000, deadline, Finish::MinimizeUpTo(usize::MAX)).ok()
}

impl Core {
    /// Whether this automaton, built from a rule-free expression, matches `text` exactly.
    pub(crate) fn matches(&self, text: &[u8]) -> bool {
        let mut s = 0;
        for &b in text {
            s = self.next(s, b);
            if s == DEAD {
                return false;
            }
        }
        self.is_final(s)
    }
}

/// An automaton whose language is empty (a rule that can never match).
fn empty_automaton() -> Automaton {
    Automaton::from_core(
        Dfa { classes: [0; 256], nclasses: 1, trans: vec![DEAD], rule_edges: vec![Vec::new()], finals: vec![false] }
            .into_core(true),
    )
}

/// NFA edges grouped by source state (`start[s]..start[s + 1]`), one allocation for all.
struct NfaEdges {
    start: Vec<u32>,
    edges: Vec<(Label, u32)>,
}

impl NfaEdges {
    fn new(states: usize, edges: &[(u32, Label, u32)]) -> NfaEdges {
        let (start, edges) =
            group_by_key(states, edges.iter().map(|&(from, label, to)| (from, (label, to))), (Label::Eps, 0));
        NfaEdges { start, edges }
    }

    fn len(&self) -> usize {
        self.start.len() - 1
    }

    #[inline]
    fn of(&self, state: u32) -> &[(Label, u32)] {
        &self.edges[self.start[state as usize] as usize..self.start[state as usize + 1] as usize]
    }
}

fn closure(edges: &NfaEdges, set: &mut Vec<u32>, mark: &mut [u32], stamp: u32) {
    let mut i = 0;
    for &s in set.iter() {
        mark[s as usize] = stamp;
    }
    while i < set.len() {
        let s = set[i];
        for &(l, t) in edges.of(s) {
            if matches!(l, Label::Eps) && mark[t as usize] != stamp {
                mark[t as usize] = stamp;
                set.push(t);
            }
        }
        i += 1;
    }
    set.sort_unstable();
}

/// Byte classes cut at `boundary` (a class starts at each byte marked; 0 and 256 are): each byte's
/// class, and each class's first byte.
fn byte_classes(boundary: &[bool; 257]) -> ([u8; 256], Vec<u8>) {
    let mut classes = [0u8; 256];
    let mut reps = Vec::new();
    let mut c: i32 = -1;
    for b in 0..256 {
        if boundary[b] {
            c += 1;
            reps.push(b as u8);
        }
        classes[b] = c as u8;
    }
    (classes, reps)
}

/// Splits `classes` (a partition of the bytes into numbered classes) so that bytes that `part`
/// tells apart are apart, numbering the classes by their first byte; returns their number.
fn refine_classes(classes: &mut [u8; 256], part: impl Fn(usize) -> u16) -> usize {
    let mut ids: HashMap<(u8, u16), u8> = HashMap::default();
    for (b, class) in classes.iter_mut().enumerate() {
        let next = ids.len();
        // At most 256 classes: a class per byte, so `next` fits a byte.
        *class = *ids.entry((*class, part(b))).or_insert(next as u8);
    }
    ids.len()
}

fn determinize(
    edges: &NfaEdges,
    start: u32,
    end: u32,
    max_states: usize,
    deadline: Instant,
) -> Result<Dfa, BuildError> {
    // Byte classes: bytes that no range boundary separates behave alike.
    let mut boundary = [false; 257];
    boundary[0] = true;
    boundary[256] = true;
    for &(l, _) in &edges.edges {
        if let Label::Bytes(a, b) = l {
            boundary[a as usize] = true;
            boundary[b as usize + 1] = true;
        }
    }
    let (classes, reps) = byte_classes(&boundary);
    let nclasses = reps.len();
    let mut mark = vec![0u32; edges.len()];
    let mut stamp = 1u32;
    // Subsets are keyed by their important states only (those with byte or rule edges, and the end
    // state): subsets that differ only in pure-epsilon states behave the same, and merging them here
    // is what keeps automata small without a minimization pass.
    let important: Vec<bool> = (0..edges.len() as u32)
        .map(|i| i == end || edges.of(i).iter().any(|(l, _)| !matches!(l, Label::Eps)))
        .collect();
    let mut init = vec![start];
    closure(edges, &mut init, &mut mark, stamp);
    init.retain(|&s| important[s as usize]);
    let mut ids = SetIndex::default();
    // The same kernel (targets before the epsilon closure) recurs from many states: its state is
    // remembered so the closure is computed once.
    let mut kernel_ids = SetIndex::default();
    // Kernels and subsets of one NFA state (most of them: a literal's chain, a trie of tool names)
    // are found by that state, without hashing or copying a vector.
    let mut single_kernel = vec![DEAD; edges.len()];
    let mut single_set = vec![DEAD; edges.len()];
    // Each DFA state's subset, back to back.
    let mut sets = Sets::default();
    sets.push(&init);
    match init[..] {
        [one] => single_set[one as usize] = 0,
        _ => ids.insert(&init, 0),
    }
    // Rows for about as many states as the NFA has (most automata here have fewer), so that
    // growing the table rarely copies it; the excess is given back at the end.
    let mut trans: Vec<u32> = Vec::with_capacity(edges.len().min(1 << 14) * nclasses);
    let mut rule_edges: Vec<Vec<(u32, u32)>> = Vec::new();
    let mut finals = Vec::new();
    // Byte edges of the current subset as class ranges, and the class boundaries between which
    // the set of targets stays the same.
    let mut ranges: Vec<(u16, u16, u32)> = Vec::new();
    let mut cuts: Vec<u16> = Vec::new();
    let mut kernel: Vec<u32> = Vec::new();
    let mut by_rule: Vec<(u32, u32)> = Vec::new();
    let mut buf: Vec<u32> = Vec::new();
    let mut i = 0;
    while i < sets.len() {
        if i % 1024 == 0 && Instant::now() > deadline {
            return Err(BuildError::Timeout);
        }
        finals.push(sets.get(i).binary_search(&end).is_ok());
        ranges.clear();
        by_rule.clear();
        for &s in sets.get(i) {
            for &(l, t) in edges.of(s) {
                match l {
                    Label::Eps => {}
                    Label::Bytes(a, b) => ranges.push((classes[a as usize] as u16, classes[b as usize] as u16, t)),
                    Label::Rule(r) => by_rule.push((r, t)),
                }
            }
        }
        let mut target_of = |kernel: &mut Vec<u32>, sets: &mut Sets| -> Result<u32, BuildError> {
            kernel.sort_unstable();
            kernel.dedup();
            let known = match kernel[..] {
                [one] => Some(single_kernel[one as usize]).filter(|&id| id != DEAD),
                _ => kernel_ids.get(kernel),
            };
            if let Some(id) = known {
                return Ok(id);
            }
            stamp += 1;
            buf.clear();
            buf.extend_from_slice(kernel);
            closure(edges, &mut buf, &mut mark, stamp);
            buf.retain(|&s| important[s as usize]);
            let found = match buf[..] {
                [one] => Some(single_set[one as usize]).filter(|&id| id != DEAD),
                _ => ids.get(&buf),
            };
            let id = match found {
                Some(id) => id,
                None => {
                    if sets.len() >= max_states {
                        return Err(BuildError::Limit("automaton states", sets.len() + 1, max_states));
                    }
                    let id = sets.len() as u32;
                    match buf[..] {
                        [one] => single_set[one as usize] = id,
                        _ => ids.insert(&buf, id),
                    }
                    sets.push(&buf);
                    id
                }
            };
            match kernel[..] {
                [one] => single_kernel[one as usize] = id,
                _ => kernel_ids.insert(kernel, id),
            }
            Ok(id)
        };
        cuts.clear();
        cuts.extend([0, nclasses as u16]);
        for &(lo, hi, _) in &ranges {
            cuts.extend([lo, hi + 1]);
        }
        cuts.sort_unstable();
        cuts.dedup();
        for w in cuts.windows(2) {
            let (c0, c1) = (w[0], w[1]);
            if c0 as usize >= nclasses {
                break;
            }
            kernel.clear();
            kernel.extend(ranges.iter().filter(|r| r.0 <= c0 && c0 <= r.1).map(|r| r.2));
            let t = if kernel.is_empty() { DEAD } else { target_of(&mut kernel, &mut sets)? };
            trans.extend(std::iter::repeat_n(t, (c1 - c0) as usize));
        }
        by_rule.sort_unstable();
        let mut redges = Vec::new();
        let mut j = 0;
        while j < by_rule.len() {
            let r = by_rule[j].0;
            kernel.clear();
            while j < by_rule.len() && by_rule[j].0 == r {
                kernel.push(by_rule[j].1);
                j += 1;
            }
            let t = target_of(&mut kernel, &mut sets)?;
            redges.push((r, t));
        }
        rule_edges.push(redges);
        i += 1;
    }
    trans.shrink_to_fit();
    Ok(Dfa { classes, nclasses, trans, rule_edges, finals })
}

/// Sets of NFA states back to back, numbered in the order pushed (a vector per set was most of
/// the subset construction's allocations).
struct Sets {
    data: Vec<u32>,
    /// Where each set starts in `data`, then where the last ends.
    starts: Vec<u32>,
}

impl Default for Sets {
    fn default() -> Sets {
        Sets { data: Vec::new(), starts: vec![0] }
    }
}

impl Sets {
    fn push(&mut self, set: &[u32]) {
        self.data.extend_from_slice(set);
        self.starts.push(self.data.len() as u32);
    }

    fn len(&self) -> usize {
        self.starts.len() - 1
    }

    fn get(&self, i: usize) -> &[u32] {
        &self.data[self.starts[i] as usize..self.starts[i + 1] as usize]
    }
}

/// Sets of NFA states and the DFA state each stands for, found by content without a vector per
/// key: the contents back to back, indexed by [`key_hash`] (a set whose hash another set has
/// already, rare, is kept in a map by content).
#[derive(Default)]
struct SetIndex {
    data: Vec<u32>,
    /// `(start in data, length, DFA state)` of each set indexed by hash.
    entries: Vec<(u32, u32, u32)>,
    by_hash: HashMap<u64, u32>,
    collided: HashMap<Vec<u32>, u32>,
}

impl SetIndex {
    fn get(&self, set: &[u32]) -> Option<u32> {
        let &e = self.by_hash.get(&key_hash(set))?;
        let (start, len, state) = self.entries[e as usize];
        match &self.data[start as usize..(start + len) as usize] == set {
            true => Some(state),
            false => self.collided.get(set).copied(),
        }
    }

    fn insert(&mut self, set: &[u32], state: u32) {
        match self.by_hash.entry(key_hash(set)) {
            std::collections::hash_map::Entry::Occupied(_) => {
                self.collided.insert(set.to_vec(), state);
            }
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(self.entries.len() as u32);
                self.entries.push((self.data.len() as u32, set.len() as u32, state));
                self.data.extend_from_slice(set);
            }
        }
    }
}

/// A partition of `0..n` into blocks for Hopcroft's refinement: the elements in one array,
/// grouped by block, with a block's marked elements moved to its front so that splitting off the
/// marked ones costs as many steps as there are.
struct Partition {
    elems: Vec<u32>,
    /// Position of each element in `elems`.
    pos: Vec<u32>,
    /// Block of each element.
    block: Vec<u32>,
    /// Per block, its range in `elems` and how many of its elements (at the front) are marked.
    starts: Vec<u32>,
    ends: Vec<u32>,
    marked: Vec<u32>,
}

impl Partition {
    /// Two blocks, those `second` says no and those it says yes (one, if either is empty).
    fn new(n: usize, second: impl Fn(usize) -> bool) -> Partition {
        let mut elems: Vec<u32> = (0..n as u32).filter(|&s| !second(s as usize)).collect();
        let cut = elems.len();
        elems.extend((0..n as u32).filter(|&s| second(s as usize)));
        let mut pos = vec![0u32; n];
        for (i, &s) in elems.iter().enumerate() {
            pos[s as usize] = i as u32;
        }
        let (starts, ends) = if cut == 0 || cut == n {
            (vec![0], vec![n as u32])
        } else {
            (vec![0, cut as u32], vec![cut as u32, n as u32])
        };
        let block = elems.iter().enumerate().fold(vec![0u32; n], |mut block, (i, &s)| {
            block[s as usize] = u32::from(starts.len() == 2 && i >= cut);
            block
        });
        let marked = vec![0; starts.len()];
        Partition { elems, pos, block, starts, ends, marked }
    }

    fn len(&self) -> usize {
        self.starts.len()
    }

    fn size(&self, b: usize) -> usize {
        (self.ends[b] - self.starts[b]) as usize
    }

    fn members(&self, b: usize) -> &[u32] {
        &self.elems[self.starts[b] as usize..self.ends[b] as usize]
    }

    /// Marks `s` (once); true when it is the first mark in its block.
    fn mark(&mut self, s: u32) -> bool {
        let b = self.block[s as usize] as usize;
        let at = self.pos[s as usize];
        let front = self.starts[b] + self.marked[b];
        if at < front {
            return false;
        }
        let other = self.elems[front as usize];
        self.elems.swap(at as usize, front as usize);
        self.pos[other as usize] = at;
        self.pos[s as usize] = front;
        self.marked[b] += 1;
        self.marked[b] == 1
    }

    /// Splits block `y`'s marked elements off into a new block and returns it; `None` (marks
    /// cleared) when all of `y` is marked.
    fn split_marked(&mut self, y: usize) -> Option<usize> {
        let m = std::mem::take(&mut self.marked[y]);
        if m as usize == self.size(y) {
            return None;
        }
        let z = self.starts.len();
        let start = self.starts[y];
        self.starts.push(start);
        self.ends.push(start + m);
        self.marked.push(0);
        self.starts[y] = start + m;
        for &s in &self.elems[start as usize..(start + m) as usize] {
            self.block[s as usize] = z as u32;
        }
        Some(z)
    }
}

impl Dfa {
    fn len(&self) -> usize {
        self.finals.len()
    }

    /// Drops states that cannot reach a final state. `None` if the start state is among them.
    fn trim(mut self) -> Option<Dfa> {
        let n = self.len();
        let nc = self.nclasses;
        // Predecessors back to back per target (`start[t]..start[t + 1]`).
        let dfa = &self;
        let edges = (0..n).flat_map(|s| {
            let bytes = dfa.trans[s * nc..(s + 1) * nc].iter().copied();
            bytes.chain(dfa.rule_edges[s].iter().map(|e| e.1)).filter(|&t| t != DEAD).map(move |t| (t, s as u32))
        });
        let (start, preds) = group_by_key(n, edges, 0);
        let mut live = self.finals.clone();
        let mut stack: Vec<u32> = (0..n as u32).filter(|&s| live[s as usize]).collect();
        while let Some(s) = stack.pop() {
            for &p in &preds[start[s as usize] as usize..start[s as usize + 1] as usize] {
                if !live[p as usize] {
                    live[p as usize] = true;
                    stack.push(p);
                }
            }
        }
        if !live[0] {
            return None;
        }
        for s in 0..n {
            for t in &mut self.trans[s * nc..(s + 1) * nc] {
                if *t != DEAD && !live[*t as usize] {
                    *t = DEAD;
                }
            }
            self.rule_edges[s].retain(|&(_, t)| live[t as usize]);
        }
        Some(self)
    }

    /// Hopcroft's partition refinement (Hopcroft 1971), over byte classes and rule symbols, with an
    /// implicit dead state making the automaton complete.
    // Parallel tables indexed by block and symbol: index loops on purpose.
    #[allow(clippy::needless_range_loop)]
    fn minimize(self, deadline: Instant) -> Result<Dfa, BuildError> {
        let n = self.len();
        if n <= 1 {
            return Ok(self);
        }
        let dead = n as u32;
        let mut rules: Vec<u32> = self.rule_edges.iter().flatten().map(|&(r, _)| r).collect();
        rules.sort_unstable();
        rules.dedup();
        let nsym = self.nclasses + rules.len();
        let delta = |s: usize, a: usize| -> u32 {
            if s == n {
                return dead;
            }
            if a < self.nclasses {
                let t = self.trans[s * self.nclasses + a];
                if t == DEAD { dead } else { t }
            } else {
                let r = rules[a - self.nclasses];
                self.rule_edges[s].iter().find(|e| e.0 == r).map_or(dead, |e| e.1)
            }
        };
        // Inverse transitions grouped by target, sorted by symbol. Transitions into the dead state are
        // left out: the block holding it is never used as a splitter (below), which keeps the work
        // proportional to the real transitions.
        let total = n + 1;
        let mut pred_start = vec![0u32; total + 1];
        let mut count = |t: u32| pred_start[t as usize + 1] += 1;
        for s in 0..n {
            for a in 0..nsym {
                let t = delta(s, a);
                if t != dead {
                    count(t);
                }
            }
        }
        for t in 0..total {
            pred_start[t + 1] += pred_start[t];
        }
        let mut fill: Vec<u32> = pred_start[..total].to_vec();
        let mut pred: Vec<(u32, u32)> = vec![(0, 0); pred_start[total] as usize];
        // Filling symbol by symbol keeps each target's list sorted by symbol.
        for a in 0..nsym {
            for s in 0..n {
                let t = delta(s, a);
                if t != dead {
                    pred[fill[t as usize] as usize] = (a as u32, s as u32);
                    fill[t as usize] += 1;
                }
            }
        }
        if Instant::now() > deadline {
            return Err(BuildError::Timeout);
        }
        // The partition as one array of states, each block a range of it (`Partition`), so a split
        // costs the states it moves, not the block it splits.
        let mut part = Partition::new(total, |s| s >= n || !self.finals[s]);
        let nblocks0 = part.len();
        // in_work[block * nsym + symbol]
        let mut in_work: Vec<bool> = vec![false; nblocks0 * nsym];
        let mut work: Vec<(u32, u32)> = Vec::new();
        let preds_of = |t: u32| &pred[pred_start[t as usize] as usize..pred_start[t as usize + 1] as usize];
        // Hopcroft may start from either initial block and push either half of a split; always
        // choosing the side without the dead state is what lets its transitions be ignored.
        let first = (0..nblocks0).find(|&b| part.block[n] as usize != b);
        if let Some(first) = first {
            // Only symbols that enter the block can split anything (as below for split halves).
            let mut enters = vec![false; nsym];
            for &t in part.members(first) {
                for &(c, _) in preds_of(t) {
                    enters[c as usize] = true;
                }
            }
            for a in (0..nsym).filter(|&a| enters[a]) {
                work.push((first as u32, a as u32));
                in_work[first * nsym + a] = true;
            }
        }
        let mut touched: Vec<u32> = Vec::new();
        let mut sources: Vec<u32> = Vec::new();
        let mut sym_seen: Vec<u32> = vec![0; nsym];
        let mut stamp = 0u32;
        let mut incoming: Vec<u32> = Vec::new();
        let mut rounds = 0usize;
        while let Some((b, a)) = work.pop() {
            in_work[b as usize * nsym + a as usize] = false;
            rounds += 1;
            if rounds.is_multiple_of(4096) && Instant::now() > deadline {
                return Err(BuildError::Timeout);
            }
            let a = a as usize;
            // States with an `a`-transition into block b (each once: the automaton is deterministic),
            // gathered before marking, which reorders blocks.
            sources.clear();
            for &t in part.members(b as usize) {
                let list = preds_of(t);
                let lo = list.partition_point(|p| (p.0 as usize) < a);
                let hi = list.partition_point(|p| (p.0 as usize) <= a);
                sources.extend(list[lo..hi].iter().map(|&(_, s)| s));
            }
            for &s in &sources {
                if part.mark(s) {
                    touched.push(part.block[s as usize]);
                }
            }
            for &y in &touched {
                let y = y as usize;
                // Split y into (y \ X) kept as y and (y ∩ X) as a new block.
                let Some(z) = part.split_marked(y) else { continue };
                in_work.extend(std::iter::repeat_n(false, nsym));
                let dead_block = part.block[n] as usize;
                let small = if dead_block == z {
                    y
                } else if dead_block == y || part.size(z) <= part.size(y) {
                    z
                } else {
                    y
                };
                // Symbols with a transition into the smaller half: only those can split anything,
                // so the others are never queued (most states are entered on one or two symbols).
                stamp += 1;
                incoming.clear();
                for &t in part.members(small) {
                    for &(c, _) in preds_of(t) {
                        if sym_seen[c as usize] != stamp {
                            sym_seen[c as usize] = stamp;
                            incoming.push(c);
                        }
                    }
                }
                for c in 0..nsym {
                    if in_work[y * nsym + c] {
                        in_work[z * nsym + c] = true;
                        work.push((z as u32, c as u32));
                    }
                }
                for &c in &incoming {
                    let c = c as usize;
                    if !(in_work[small * nsym + c] || small == z && in_work[y * nsym + c]) {
                        in_work[small * nsym + c] = true;
                        work.push((small as u32, c as u32));
                    }
                }
            }
            touched.clear();
        }
        let block = part.block;
        let count_all = part.starts.len();
        if count_all == total {
            return Ok(self);
        }
        // Renumber live blocks (drop the dead state's block), start state first.
        let dead_block = block[n];
        let mut new_id = vec![u32::MAX; count_all];
        let mut next = 0u32;
        new_id[block[0] as usize] = next;
        next += 1;
        for s in 1..n {
            let b = block[s] as usize;
            if new_id[b] == u32::MAX && b as u32 != dead_block {
                new_id[b] = next;
                next += 1;
            }
        }
        let count = next as usize;
        let map = |t: u32| -> u32 {
            if t == DEAD || block[t as usize] == dead_block { DEAD } else { new_id[block[t as usize] as usize] }
        };
        let mut trans = vec![DEAD; count * self.nclasses];
        let mut rule_edges = vec![Vec::new(); count];
        let mut finals = vec![false; count];
        for s in 0..n {
            let b = new_id[block[s] as usize];
            if b == u32::MAX {
                continue;
            }
            let b = b as usize;
            finals[b] = self.finals[s];
            for c in 0..self.nclasses {
                trans[b * self.nclasses + c] = map(self.trans[s * self.nclasses + c]);
            }
            rule_edges[b] = self.rule_edges[s].iter().map(|&(r, t)| (r, map(t))).filter(|e| e.1 != DEAD).collect();
        }
        Ok(Dfa { classes: self.classes, nclasses: self.nclasses, trans, rule_edges, finals })
    }

    /// Breadth-first renumbering from the start state (bytes in order, then rule edges), dropping
    /// unreachable states, with byte classes recomputed from the transitions actually used.
    fn canonical(self) -> Dfa {
        let n = self.len();
        let mut order = vec![DEAD; n];
        let mut queue = vec![0u32];
        order[0] = 0;
        let mut i = 0;
        while i < queue.len() {
            let s = queue[i] as usize;
            for c in 0..self.nclasses {
                let t = self.trans[s * self.nclasses + c];
                if t != DEAD && order[t as usize] == DEAD {
                    order[t as usize] = queue.len() as u32;
                    queue.push(t);
                }
            }
            for &(_, t) in &self.rule_edges[s] {
                if order[t as usize] == DEAD {
                    order[t as usize] = queue.len() as u32;
                    queue.push(t);
                }
            }
            i += 1;
        }
        let m = queue.len();
        // Recompute byte classes: bytes with identical columns over the kept states. Columns sit
        // back to back (`columns[c * m..(c + 1) * m]`, old class c), compared in place.
        let mut columns = vec![DEAD; self.nclasses * m];
        for (i, &s) in queue.iter().enumerate() {
            for (c, &t) in self.trans[s as usize * self.nclasses..(s as usize + 1) * self.nclasses].iter().enumerate() {
                columns[c * m + i] = if t == DEAD { DEAD } else { order[t as usize] };
            }
        }
        let mut col_ids: HashMap<&[u32], u8> = HashMap::default();
        let mut kept: Vec<usize> = Vec::new();
        let mut old_to_new = vec![0u8; self.nclasses];
        for (c, new) in old_to_new.iter_mut().enumerate() {
            let next = kept.len() as u8;
            *new = *col_ids.entry(&columns[c * m..(c + 1) * m]).or_insert_with(|| {
                kept.push(c);
                next
            });
        }
        let mut classes = [0u8; 256];
        for (b, class) in classes.iter_mut().enumerate() {
            *class = old_to_new[self.classes[b] as usize];
        }
        let nclasses = kept.len();
        let mut trans = vec![DEAD; m * nclasses];
        for (c, &old) in kept.iter().enumerate() {
            for (s, &t) in columns[old * m..(old + 1) * m].iter().enumerate() {
                trans[s * nclasses + c] = t;
            }
        }
        let mut rule_edges = Vec::with_capacity(m);
        let mut finals = Vec::with_capacity(m);
        for &s in &queue {
            let mut es: Vec<(u32, u32)> =
                self.rule_edges[s as usize].iter().map(|&(r, t)| (r, order[t as usize])).collect();
            es.sort_unstable();
            rule_edges.push(es);
            finals.push(self.finals[s as usize]);
        }
        Dfa { classes, nclasses, trans, rule_edges, finals }
    }

    fn into_core(self, recurs: bool) -> Core {
        let n = self.len();
        let mut scannable = vec![false; n];
        let mut self_loop = vec![[0u64; 4]; n];
        let mut live = vec![[0u64; 4]; n];
        let mut class_bytes = vec![[0u64; 4]; self.nclasses];
        for b in 0..256usize {
            class_bytes[self.classes[b] as usize][b / 64] |= 1 << (b % 64);
        }
        for s in 0..n {
            for_each_live(&self.trans[s * self.nclasses..(s + 1) * self.nclasses], |c, t| {
                scannable[s] = true;
                for (l, b) in live[s].iter_mut().zip(class_bytes[c]) {
                    *l |= b;
                }
                if t as usize == s {
                    for (l, b) in self_loop[s].iter_mut().zip(class_bytes[c]) {
                        *l |= b;
                    }
                }
            });
        }
        let mut a = Core {
            classes: self.classes,
            nclasses: self.nclasses,
            trans: self.trans,
            rule_edges: self.rule_edges,
            finals: self.finals,
            scannable,
            self_loop,
            live,
            char_loop: Vec::new(),
            string_body: Vec::new(),
            char_run: Vec::new(),
            recurs,
            has_edges: false,
            reaches_final: OnceLock::new(),
            sccs: OnceLock::new(),
            shallow: OnceLock::new(),
            byte_key: OnceLock::new(),
        };
        a.has_edges = a.rule_edges.iter().any(|e| !e.is_empty());
        let reps = Utf8Reps::new(&a.classes);
        a.char_loop = (0..n as u32).map(|s| a.loops_on_all_multibyte(s, &reps)).collect();
        a.string_body = (0..n as u32).map(|s| a.string_body_at(s, &reps)).collect();
        a.char_run = a.char_runs(&reps);
        a
    }
}

/// The strongly connected component of every node of a graph given by successor lists, numbered
/// in the order Tarjan's algorithm closes them. Iterative: graphs come from untrusted input, so no
/// recursion on their shape.
pub(crate) fn strongly_connected<'a>(n: usize, succ: impl Fn(usize) -> &'a [u32]) -> Vec<u32> {
    let mut index = vec![u32::MAX; n];
    let mut low = vec![0u32; n];
    let mut on_stack = vec![false; n];
    let mut comp = vec![u32::MAX; n];
    let mut stack = Vec::new();
    let mut next = 0u32;
    let mut ncomp = 0u32;
    for root in 0..n {
        if index[root] != u32::MAX {
            continue;
        }
        let mut call: Vec<(usize, usize)> = vec![(root, 0)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut ci)) = call.last_mut() {
            let next_succ = succ(v);
            if *ci < next_succ.len() {
                let w = next_succ[*ci] as usize;
                *ci += 1;
                if index[w] == u32::MAX {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    call.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                call.pop();
                if let Some(&(p, _)) = call.last() {
                    low[p] = low[p].min(low[v]);
                }
                if low[v] == index[v] {
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        comp[w] = ncomp;
                        if w == v {
                            break;
                        }
                    }
                    ncomp += 1;
                }
            }
        }
    }
    comp
}

/// The hash of a structural key: a multiply-rotate over its words, two at a time (keys run to tens
/// of thousands of words and are hashed while the model waits; lookups compare whole keys, so a
/// collision costs a comparison, never a wrong mask).
pub(crate) fn key_hash(words: &[u32]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h = words.len() as u64;
    let mut pairs = words.chunks_exact(2);
    for p in &mut pairs {
        h = (h.rotate_left(5) ^ (u64::from(p[0]) | u64::from(p[1]) << 32)).wrapping_mul(K);
    }
    for &w in pairs.remainder() {
        h = (h.rotate_left(5) ^ u64::from(w)).wrapping_mul(K);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::Grammar;
    use std::time::Duration;

    fn automaton(text: &str) -> Automaton {
        let g = Grammar::parse(text).expect("parses");
        let deadline = Instant::now() + Duration::from_secs(5);
        build(&g.rules()[0].expr, &|r| Some(r), &|_| None, 100_000, deadline, Finish::MinimizeUpTo(usize::MAX))
            .expect("builds")
    }

    fn matches(a: &Automaton, s: &[u8]) -> bool {
        let mut st = 0;
        for &b in s {
            st = a.next(st, b);
            if st == DEAD {
                return false;
            }
        }
        a.is_final(st)
    }

    /// The number of Myhill–Nerode classes of `a`'s live states (Moore's refinement from
    /// final / non-final over bytes `a`..=`c`, a dead sink added): what a minimal automaton has.
    fn moore_classes(a: &Automaton) -> usize {
        let n = a.len();
        let next = |s: usize, b: u8| if s == n { n } else { a.next(s as u32, b).min(n as u32) as usize };
        let mut class: Vec<usize> = (0..=n).map(|s| usize::from(s < n && a.is_final(s as u32))).collect();
        loop {
            let mut ids: HashMap<Vec<usize>, usize> = HashMap::default();
            let refined: Vec<usize> = (0..=n)
                .map(|s| {
                    let sig = [class[s], class[next(s, b'a')], class[next(s, b'b')], class[next(s, b'c')]].to_vec();
                    let len = ids.len();
                    *ids.entry(sig).or_insert(len)
                })
                .collect();
            let done = ids.len() == class.iter().collect::<std::collections::HashSet<_>>().len();
            class = refined;
            if done {
                break;
            }
        }
        // The dead sink's class holds no live state of a trimmed automaton.
        class[..n].iter().filter(|&&c| c != class[n]).collect::<std::collections::HashSet<_>>().len()
    }

    #[test]
    fn a_choice_grafted_on_its_trie_is_the_language_of_the_subset_construction() {
        // Random choices of 16 to 40 alternatives: a beginning of literals, special tokens and
        // rule references, then maybe a tail (a loop, a class, an alternation), some rules never
        // matching. Built as a choice (trie and grafted tails, or the fallback) and through the
        // subset construction (the same choice inside a sequence), minimized: the same automaton.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        let rule_map = |r: u32| (r != 3).then_some(r);
        let class = || Expr::CharClass { negated: false, ranges: vec![('a', 'c')] };
        let (mut grafted, mut fell_back) = (0, 0);
        for _ in 0..300 {
            let unique = next(3) != 0;
            let alternatives: Vec<Expr> = (0..16 + next(25))
                .map(|i| {
                    let mut parts: Vec<Expr> = (0..1 + next(4))
                        .map(|_| match next(6) {
                            0 => Expr::Token(crate::grammar::MAX_SPECIAL_TOKEN_ID - next(3) as u32),
                            1 => Expr::Rule(crate::grammar::RuleId(next(4) as u32)),
                            _ => Expr::literal(["a", "ab", "b", "ca", "abc", "c"][next(6) as usize]),
                        })
                        .collect();
                    // A name of its own (a tool's), so that most tails stand alone.
                    if unique {
                        parts.push(Expr::literal(format!("{i};")));
                    }
                    match next(5) {
                        0 => parts.push(Expr::repeat(class(), 0, None)),
                        1 => parts.extend([class(), Expr::literal("!")]),
                        2 => parts
                            .push(Expr::alt(vec![Expr::literal("x"), Expr::repeat(Expr::literal("y"), 1, Some(3))])),
                        _ => {}
                    }
                    Expr::Seq(parts)
                })
                .collect();
            let choice = Expr::Alt(alternatives);
            let finish = Finish::MinimizeUpTo(usize::MAX);
            let by_choice = build(&choice, &rule_map, &|_| None, 100_000, deadline, finish).expect("builds");
            let plain = Expr::Seq(vec![choice.clone(), Expr::Empty]);
            let by_subsets = build(&plain, &rule_map, &|_| None, 100_000, deadline, finish).expect("builds");
            assert_eq!(by_choice.shallow_key().1, by_subsets.shallow_key().1, "{choice:?}");
            let Some(c) = Choice::of(&choice, &rule_map, &|_| None) else { panic!("a choice") };
            match c.dfa(&rule_map, &|_| None, 100_000, deadline).expect("builds") {
                Some(_) => grafted += 1,
                None => fell_back += 1,
            }
        }
        assert!(grafted > 30 && fell_back > 30, "both ways exercised: {grafted} grafted, {fell_back} fell back");
    }

    #[test]
    fn minimization_reaches_the_myhill_nerode_count_and_keeps_the_language() {
        // Random expressions over a, b, c: the minimized automaton has exactly as many states as
        // Moore's refinement finds classes in the unminimized one, and accepts the same strings.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = |k: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % k
        };
        fn expr(rand: &mut dyn FnMut(u64) -> u64, depth: u32) -> String {
            let atoms = ["\"a\"", "\"b\"", "\"c\"", "[ab]", "[a-c]", "\"ab\"", "\"ca\""];
            if depth == 0 || rand(3) == 0 {
                return atoms[rand(atoms.len() as u64) as usize].to_owned();
            }
            match rand(5) {
                0 => format!("({} | {})", expr(rand, depth - 1), expr(rand, depth - 1)),
                1 => format!("({})*", expr(rand, depth - 1)),
                2 => format!("({})?", expr(rand, depth - 1)),
                3 => format!("({}){{1,3}}", expr(rand, depth - 1)),
                _ => format!("{} {}", expr(rand, depth - 1), expr(rand, depth - 1)),
            }
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        for case in 0..300 {
            let text = format!("root ::= {}", expr(&mut rand, 4));
            let g = Grammar::parse(&text).expect("parses");
            let e = &g.rules()[0].expr;
            let min =
                build(e, &|r| Some(r), &|_| None, 100_000, deadline, Finish::MinimizeUpTo(usize::MAX)).expect("builds");
            let raw = build(e, &|r| Some(r), &|_| None, 100_000, deadline, Finish::Once).expect("builds");
            assert_eq!(min.len(), moore_classes(&raw), "case {case}: {text}");
            let mut words = vec![Vec::new()];
            for len in 1..=6 {
                let last: Vec<Vec<u8>> = words.iter().filter(|w: &&Vec<u8>| w.len() == len - 1).cloned().collect();
                for w in last {
                    for b in [b'a', b'b', b'c'] {
                        words.push([w.as_slice(), &[b]].concat());
                    }
                }
            }
            for w in &words {
                assert_eq!(
                    matches(&min, w),
                    matches(&raw, w),
                    "case {case}: {text} on {:?}",
                    String::from_utf8_lossy(w)
                );
            }
        }
    }

    #[test]
    fn literal_alternatives_are_minimized() {
        let a = automaton(r#"root ::= "ab" | "cb" | "a" "b""#);
        assert_eq!(a.len(), 3);
        assert!(matches(&a, b"ab") && matches(&a, b"cb") && !matches(&a, b"a") && !matches(&a, b"bb"));
    }

    #[test]
    fn utf8_classes_and_negation() {
        let a = automaton("root ::= [^a\\u00e9]");
        assert!(matches(&a, "b".as_bytes()));
        assert!(matches(&a, "€".as_bytes()));
        assert!(matches(&a, "😀".as_bytes()));
        assert!(!matches(&a, "é".as_bytes()));
        assert!(!matches(&a, b"a"));
        assert!(!matches(&a, &[0xC3]));
        assert!(!matches(&a, &[0xED, 0xA0, 0x80]), "surrogates are not characters");
    }

    #[test]
    fn character_runs_of_strings_chains_and_searches() {
        // After the opening quote: a string's inside reads without end; a chain with 3 characters
        // left reads 3; a search for "ab" reads without end whatever it has seen (every character
        // keeps it alive), though no state loops on every character.
        let plain = r#"[^"\\\x00-\x1f]"#;
        let inside = automaton(&format!("root ::= \"\\\"\" {plain}* \"\\\"\""));
        let chain = automaton(&format!("root ::= \"\\\"\" {plain}{{0,3}} \"\\\"\""));
        let search = automaton(&format!("root ::= \"\\\"\" {plain}* \"ab\" {plain}* \"\\\"\""));
        let after_quote = |a: &Automaton| a.next(0, b'"');
        assert_eq!(inside.char_run(0), 0, "the quote itself is not a string character");
        assert_eq!(inside.char_run(after_quote(&inside)), u32::MAX);
        assert_eq!(chain.char_run(after_quote(&chain)), 3);
        assert_eq!(chain.char_run(chain.next(after_quote(&chain), b'x')), 2);
        let s = after_quote(&search);
        assert_eq!(search.char_run(s), u32::MAX);
        assert_ne!(search.next(s, b'a'), s, "seeing `a` moves the search on");
        assert_eq!(search.char_run(search.next(s, b'a')), u32::MAX);
        assert!(search.reads_chars(search.next(s, b'a'), 1000));
    }

    #[test]
    fn bounded_repetition_counts() {
        let a = automaton("root ::= \"x\"{2,4} \"y\"{3,} [0-9]{0,2}");
        assert!(matches(&a, b"xxyyy") && matches(&a, b"xxxxyyyyy12"));
        assert!(
            !matches(&a, b"xyyy") && !matches(&a, b"xxxxxyyy") && !matches(&a, b"xxyy") && !matches(&a, b"xxyyy123")
        );
    }

    #[test]
    fn regex_terminal() {
        let a = automaton(r"root ::= /[a-c]+(x|yz)?\d/");
        assert!(matches(&a, b"abyz7") && matches(&a, b"c1"));
        assert!(!matches(&a, b"yz7") && !matches(&a, b"ab"));
    }

    #[test]
    fn minimization_merges_states_entered_on_different_symbols() {
        // Copies of `x [0-9]+ "}"` reached on `a`, `b` and `c` must merge into one (4 + start + end).
        let (a, b) = (
            automaton(r#"root ::= "a" "x" [0-9]+ "}" | "b" "x" [0-9]+ "}" | "c" "x" [0-9]+ "}""#),
            automaton(r#"root ::= [a-c] "x" [0-9] [0-9]* "}""#),
        );
        assert_eq!(a.len(), 5);
        assert_eq!(a.shallow_key(), b.shallow_key());
    }

    #[test]
    fn equal_languages_encode_equally() {
        let (a, b) = (automaton(r#"root ::= "a"+ | "b""#), automaton(r#"root ::= "b" | "a" "a"*"#));
        assert_eq!(a.shallow_key(), b.shallow_key());
    }
}
