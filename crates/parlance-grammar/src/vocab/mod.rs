//! `TokenVocab`: the exact bytes of every token, special tokens under bytes no text has, and a token trie.
//!
//! Built once per tokenizer from a list the caller gives and shared behind an `Arc`. Normal tokens are
//! sorted by their bytes; the trie is stored in preorder over that order, so a subtree is a contiguous
//! range of sorted positions and skipping it is one jump. Each trie node also records which bytes occur
//! below it, so a parser state that loops on all of them accepts the whole subtree at once, and how
//! many JSON-string characters its tokens hold, so a length-counting state does the same (per token
//! too, for the mask cache's shared sets of plain tokens). The vocab also owns the cross-grammar pool
//! of token-mask cache entries, since entries are only valid for one vocabulary.

use crate::mask::MaskPool;

/// Why a vocabulary could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VocabError {
    /// An id given as special or EOS is not below the vocabulary size.
    #[error("token id {id} is out of range (vocabulary size {size})")]
    IdOutOfRange {
        /// The offending id.
        id: u32,
        /// Number of tokens.
        size: usize,
    },
    /// No EOS id was given.
    #[error("no EOS token id given")]
    NoEos,
    /// A special token's id is too large for the grammar's encoding of special tokens.
    #[error("special token id {0} is above the largest supported ({max})", max = crate::grammar::MAX_SPECIAL_TOKEN_ID)]
    SpecialIdTooLarge(u32),
}

/// One trie node in preorder.
#[derive(Debug, Clone)]
pub(crate) struct TrieNode {
    /// The byte on the edge into this node (unused for the root).
    pub(crate) byte: u8,
    /// Number of bytes from the root.
    pub(crate) depth: u32,
    /// Index of the first node after this subtree.
    pub(crate) end: u32,
    /// Sorted positions: `[lo, here)` are tokens equal to this node's prefix, `[lo, hi)` the subtree.
    pub(crate) lo: u32,
    pub(crate) here: u32,
    pub(crate) hi: u32,
    /// Bytes on edges in this subtree, including this node's own byte.
    pub(crate) bytes: [u64; 4],
    /// Every token in the subtree, read from this node's byte on, is well-formed UTF-8 except that
    /// its last character may be cut short (byte-level BPE splits characters between tokens).
    pub(crate) utf8_prefix: bool,
    /// If every token in the subtree, read from this node's byte on, is JSON-string characters
    /// without escapes (bytes `0x20..=0x7F` but `"` and `\\`, multi-byte characters, the last one
    /// possibly cut short): the largest number of characters among them; otherwise 0.
    pub(crate) plain_chars: u32,
}

/// A tokenizer's vocabulary as the engine needs it.
#[derive(Debug)]
pub struct TokenVocab {
    /// Each token's text.
    tokens: Vec<Vec<u8>>,
    /// Each token's bytes for the grammar: its text, or for a special token the bytes that stand
    /// for it (`grammar::special_token_bytes`), which no text matches; empty (never allowed) for a
    /// regular token holding the byte those begin with.
    grammar_bytes: Vec<Vec<u8>>,
    special: Vec<bool>,
    /// Special tokens but EOS, by text (UTF-8 ones): resolving a token a grammar names by text.
    special_by_text: std::collections::BTreeMap<String, u32>,
    eos: Vec<u32>,
    /// Sorted position -> token id, every token but EOS and empty ones (special tokens sorted by
    /// their grammar bytes).
    sorted: Vec<u32>,
    trie: Trie,
    /// How tokens leave a JSON string's inside (see [`StringExits`]).
    string_exits: StringExits,
    /// Bitset (mask words) of the normal tokens.
    normal: Vec<u32>,
    /// Per sorted position, how many JSON-string characters the token is (as
    /// [`TrieNode::plain_chars`] counts them), or 0 if it holds anything else.
    plain: Vec<u32>,
    /// The largest entry of `plain`.
    max_plain: u32,
    /// How tokens leave free text (see [`FreeExits`]).
    free_exits: FreeExits,
    pub(crate) pool: MaskPool,
}

impl TokenVocab {
    /// Builds a vocabulary. `tokens[id]` is the exact byte string of token `id` (empty for tokens that
    /// never appear in text); `special_ids` are control tokens (allowed only where a grammar names the
    /// token, `Expr::Token`; their text never matches a literal); `eos_ids` end generation.
    pub fn new(tokens: Vec<Vec<u8>>, special_ids: &[u32], eos_ids: &[u32]) -> Result<TokenVocab, VocabError> {
        let size = tokens.len();
        if eos_ids.is_empty() {
            return Err(VocabError::NoEos);
        }
        let mut special = vec![false; size];
        for &id in special_ids.iter().chain(eos_ids) {
            *special.get_mut(id as usize).ok_or(VocabError::IdOutOfRange { id, size })? = true;
        }
        // Special tokens (EOS apart) are in the trie under their own bytes: a grammar allows one
        // only where it names it. Those bytes begin with 0xFF, which no UTF-8 text holds; a regular
        // token holding it (byte-level vocabularies have the raw byte: Llama 3's `ÿ`) could only
        // ever begin to spell a special token, so no grammar allows it.
        let mut grammar_bytes = tokens.clone();
        for (id, bytes) in grammar_bytes.iter_mut().enumerate() {
            if !special[id] && bytes.contains(&crate::grammar::SPECIAL_TOKEN_BYTE) {
                bytes.clear();
            }
        }
        for &id in special_ids {
            if !eos_ids.contains(&id) {
                if id > crate::grammar::MAX_SPECIAL_TOKEN_ID {
                    return Err(VocabError::SpecialIdTooLarge(id));
                }
                grammar_bytes[id as usize] = crate::grammar::special_token_bytes(id).to_vec();
            }
        }
        let mut sorted: Vec<u32> =
            (0..size as u32).filter(|&i| !eos_ids.contains(&i) && !grammar_bytes[i as usize].is_empty()).collect();
        sorted.sort_by(|&a, &b| grammar_bytes[a as usize].cmp(&grammar_bytes[b as usize]).then(a.cmp(&b)));
        let trie = Trie::new(&grammar_bytes, &sorted);
        let mut normal = vec![0u32; size.div_ceil(32)];
        for &id in &sorted {
            normal[id as usize / 32] |= 1 << (id % 32);
        }
        let plain: Vec<u32> = sorted.iter().map(|&id| plain_chars(&grammar_bytes[id as usize])).collect();
        let max_plain = plain.iter().copied().max().unwrap_or(0);
        let string_exits = StringExits::new(&grammar_bytes, &sorted, &plain);
        let special_by_text = special_ids
            .iter()
            .filter(|id| !eos_ids.contains(id))
            .filter_map(|&id| std::str::from_utf8(&tokens[id as usize]).ok().map(|text| (text.to_owned(), id)))
            .collect();
        Ok(TokenVocab {
            special_by_text,
            tokens,
            grammar_bytes,
            special,
            eos: eos_ids.to_vec(),
            sorted,
            trie,
            string_exits,
            free_exits: FreeExits::default(),
            normal,
            plain,
            max_plain,
            pool: MaskPool::default(),
        })
    }

    /// Number of token ids (the mask covers this many bits).
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether the vocabulary has no tokens.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Number of `u32` words a bitmask over this vocabulary needs.
    pub fn mask_words(&self) -> usize {
        self.tokens.len().div_ceil(32)
    }

    /// The bytes of token `id` (empty for unknown ids).
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        self.tokens.get(id as usize).map_or(&[][..], |t| t.as_slice())
    }

    /// The bytes a grammar matches for token `id`: its text, or for a special token the bytes that
    /// stand for it.
    pub(crate) fn grammar_bytes(&self, id: u32) -> &[u8] {
        self.grammar_bytes.get(id as usize).map_or(&[][..], |t| t.as_slice())
    }

    /// The id of the special token whose text is `text`, if there is one.
    pub fn special_token_id(&self, text: &str) -> Option<u32> {
        self.special_by_text.get(text).copied()
    }

    /// Every special token but EOS: its text and id, sorted by text.
    pub fn special_tokens(&self) -> impl Iterator<Item = (&str, u32)> {
        self.special_by_text.iter().map(|(text, &id)| (text.as_str(), id))
    }

    /// Whether `id` is a special (control) token.
    pub fn is_special(&self, id: u32) -> bool {
        self.special.get(id as usize).copied().unwrap_or(false)
    }

    /// The EOS token ids.
    pub fn eos_ids(&self) -> &[u32] {
        &self.eos
    }

    /// Number of cached token-mask entries in this vocabulary's cross-grammar pool.
    pub fn cached_mask_entries(&self) -> usize {
        self.pool.len()
    }

    pub(crate) fn normal_mask(&self) -> &[u32] {
        &self.normal
    }

    pub(crate) fn trie(&self) -> &Trie {
        &self.trie
    }

    pub(crate) fn string_exits(&self) -> &StringExits {
        &self.string_exits
    }

    /// The regular tokens that hold ASCII byte `b` (see [`FreeExits`]), built on first use; `None`
    /// when too many do for the index to pay.
    pub(crate) fn tokens_holding(&self, b: u8) -> Option<&Grouped> {
        self.free_exits.holding[b as usize & 0x7F]
            .get_or_init(|| {
                let entries: Vec<(Vec<u8>, u32)> = (0..self.sorted.len() as u32)
                    .filter_map(|p| {
                        let bytes = self.bytes_at(p);
                        (bytes.contains(&b) && utf8_prefix(bytes) && !self.special[self.sorted[p as usize] as usize])
                            .then(|| (bytes.to_vec(), p))
                    })
                    .take(self.sorted.len() / FREE_EXITS_SHARE + 1)
                    .collect();
                (entries.len() <= self.sorted.len() / FREE_EXITS_SHARE).then(|| Grouped::new(entries))
            })
            .as_ref()
    }

    /// The ids of the tokens whose first byte is `b`, as a mask (bit `id % 32` of word `id / 32`),
    /// built on first use. A free-text state that a trigger's first byte leaves (a space before
    /// `"name"`) rejects most of that byte's subtree, half the vocabulary for a space: clearing
    /// the subtree word by word costs far less than clearing its tokens one by one.
    pub(crate) fn ids_led_by(&self, b: u8) -> &[u32] {
        self.free_exits.led_by[b as usize].get_or_init(|| {
            let mut bits = vec![0u32; self.mask_words()];
            if let Some(&(_, n)) = self.trie.roots.iter().find(|&&(r, _)| r == b) {
                let node = &self.trie.nodes[n as usize];
                for p in node.lo..node.hi {
                    let id = self.sorted[p as usize];
                    bits[id as usize / 32] |= 1 << (id % 32);
                }
            }
            bits.into()
        })
    }

    /// The irregular tokens (see [`FreeExits`]), built on first use.
    pub(crate) fn irregular_tokens(&self) -> &Grouped {
        self.free_exits.irregular.get_or_init(|| {
            Grouped::new(
                (0..self.sorted.len() as u32)
                    .filter(|&p| !utf8_prefix(self.bytes_at(p)) || self.special[self.sorted[p as usize] as usize])
                    .map(|p| (self.bytes_at(p).to_vec(), p))
                    .collect(),
            )
        })
    }

    pub(crate) fn sorted_len(&self) -> usize {
        self.sorted.len()
    }

    #[inline]
    pub(crate) fn id_at(&self, pos: u32) -> u32 {
        self.sorted[pos as usize]
    }

    /// The JSON-string characters of the token at sorted position `pos` (0: not only those).
    #[inline]
    pub(crate) fn plain_at(&self, pos: u32) -> u32 {
        self.plain[pos as usize]
    }

    /// The most JSON-string characters of any token.
    pub(crate) fn max_plain(&self) -> u32 {
        self.max_plain
    }

    #[inline]
    pub(crate) fn bytes_at(&self, pos: u32) -> &[u8] {
        &self.grammar_bytes[self.sorted[pos as usize] as usize]
    }
}

/// A trie in preorder (see [`TrieNode`]) over strings sorted by their bytes, its root's children
/// listed apart: a walk skips the first bytes a state refuses without touching their nodes, which
/// lie spread over the whole trie.
#[derive(Debug)]
pub(crate) struct Trie {
    pub(crate) nodes: Vec<TrieNode>,
    /// `(byte, node index)` of the root's children, in order.
    pub(crate) roots: Vec<(u8, u32)>,
    /// Every node's children as `(byte, node index)`, in order, one parent's list after another,
    /// each list closed by `(0, SIBLINGS_END | e)` where `e` is the index after the parent's
    /// subtree. A walk skips the children a state has no transition for by reading this compact
    /// list, not the children's nodes, which lie a whole subtree apart.
    pub(crate) siblings: Vec<(u8, u32)>,
    /// Where each node's own entry in `siblings` is (0 for the root).
    pub(crate) sibling_at: Vec<u32>,
}

/// Marks the entry closing a list of `Trie::siblings`.
pub(crate) const SIBLINGS_END: u32 = 1 << 31;

impl Trie {
    /// The trie of `strings[sorted[0]], strings[sorted[1]], ...` (already sorted by bytes).
    fn new(strings: &[Vec<u8>], sorted: &[u32]) -> Trie {
        let nodes = build_trie(strings, sorted);
        let mut roots = Vec::new();
        let mut c = 1;
        while c < nodes.len() {
            roots.push((nodes[c].byte, c as u32));
            c = nodes[c].end as usize;
        }
        let mut siblings = Vec::with_capacity(nodes.len() * 2);
        let mut sibling_at = vec![0u32; nodes.len()];
        for p in 0..nodes.len() {
            let end = if p == 0 { nodes.len() } else { nodes[p].end as usize };
            if p + 1 >= end {
                continue;
            }
            let mut c = p + 1;
            while c < end {
                sibling_at[c] = siblings.len() as u32;
                siblings.push((nodes[c].byte, c as u32));
                c = nodes[c].end as usize;
            }
            siblings.push((0, SIBLINGS_END | end as u32));
        }
        Trie { nodes, roots, siblings, sibling_at }
    }
}

/// Distinct strings, each standing for a group of vocabulary tokens: a trie over the strings and,
/// per string (its position in the trie), the sorted positions of its tokens in the vocabulary.
#[derive(Debug)]
pub(crate) struct Grouped {
    pub(crate) trie: Trie,
    starts: Vec<u32>,
    members: Vec<u32>,
}

impl Grouped {
    fn new(mut entries: Vec<(Vec<u8>, u32)>) -> Grouped {
        entries.sort_unstable();
        let (mut strings, mut starts, mut members) = (Vec::<Vec<u8>>::new(), Vec::new(), Vec::new());
        for (bytes, pos) in entries {
            if strings.last() != Some(&bytes) {
                starts.push(members.len() as u32);
                strings.push(bytes);
            }
            members.push(pos);
        }
        starts.push(members.len() as u32);
        let order: Vec<u32> = (0..strings.len() as u32).collect();
        Grouped { trie: Trie::new(&strings, &order), starts, members }
    }

    /// How many distinct strings the group holds (its trie's positions).
    pub(crate) fn len(&self) -> u32 {
        (self.starts.len() - 1) as u32
    }

    /// The vocabulary positions of the tokens string `q` stands for.
    pub(crate) fn members(&self, q: u32) -> &[u32] {
        &self.members[self.starts[q as usize] as usize..self.starts[q as usize + 1] as usize]
    }
}

/// The tokens that are not JSON-string characters only, split for a string's inside (a state every
/// such character leads back to): a token that begins with `k >= 1` whole characters returns to
/// that state after them and fares as the rest of it does, so `tails` holds that rest, once for
/// every token with the same rest (~800 strings for ~3,000 tokens in Llama 3's vocabulary, where
/// the full trie has ~7,000 nodes above them); `heads` holds the tokens that begin with anything
/// else (a quote, a backslash, a control byte, a broken character, a special token).
#[derive(Debug)]
pub(crate) struct StringExits {
    pub(crate) tails: Grouped,
    pub(crate) heads: Grouped,
}

impl StringExits {
    fn new(strings: &[Vec<u8>], sorted: &[u32], plain: &[u32]) -> StringExits {
        let (mut tails, mut heads) = (Vec::new(), Vec::new());
        for (p, &id) in sorted.iter().enumerate() {
            if plain[p] > 0 {
                continue;
            }
            let bytes = &strings[id as usize];
            match plain_prefix(bytes) {
                0 => heads.push((bytes.clone(), p as u32)),
                k => tails.push((bytes[k..].to_vec(), p as u32)),
            }
        }
        StringExits { tails: Grouped::new(tails), heads: Grouped::new(heads) }
    }
}

/// How tokens leave free text, for the states of a text that reads any character but a few ASCII
/// bytes (a `TagDispatch` watching for `{"name": `, the partial matches of its triggers): a
/// regular token (well-formed UTF-8 but for a cut-short last character, not special) holding none
/// of those bytes stays in the text, so only the tokens holding one of them, and the irregular
/// ones, need a walk. Per ASCII byte, the regular tokens that hold it (whole, grouped as
/// [`Grouped`] strings); the index is built for a byte the first time a state asks for it, and
/// only where at most one token in [`FREE_EXITS_SHARE`] holds the byte (a space or a letter is
/// in too many tokens: states that stop at one walk the trie as any other).
#[derive(Debug)]
pub(crate) struct FreeExits {
    holding: [std::sync::OnceLock<Option<Grouped>>; 128],
    irregular: std::sync::OnceLock<Grouped>,
    /// Per first byte, the ids of the tokens it leads, as a mask (see [`TokenVocab::ids_led_by`]).
    led_by: [std::sync::OnceLock<Box<[u32]>>; 256],
}

impl Default for FreeExits {
    fn default() -> FreeExits {
        FreeExits {
            holding: std::array::from_fn(|_| std::sync::OnceLock::new()),
            irregular: std::sync::OnceLock::new(),
            led_by: std::array::from_fn(|_| std::sync::OnceLock::new()),
        }
    }
}

/// See [`FreeExits`].
pub(crate) const FREE_EXITS_SHARE: usize = 16;

/// Length in bytes of the longest prefix of `bytes` made of whole JSON-string characters without
/// escapes (bytes `0x20..=0x7F` but `"` and `\\`, well-formed multi-byte characters).
fn plain_prefix(bytes: &[u8]) -> usize {
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let len = match b {
            b'"' | b'\\' | 0..0x20 => return i,
            0x20..0x80 => 1,
            0xC0..0xE0 => 2,
            0xE0..0xF0 => 3,
            0xF0..0xF8 => 4,
            _ => return i,
        };
        match bytes.get(i..i + len) {
            Some(c) if std::str::from_utf8(c).is_ok() => i += len,
            _ => return i,
        }
    }
    i
}

/// Whether `bytes` is well-formed UTF-8 but for a cut-short last character (`error_len() == None`:
/// the input ended inside a character).
fn utf8_prefix(bytes: &[u8]) -> bool {
    match std::str::from_utf8(bytes) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none(),
    }
}

/// How many JSON-string characters without escapes `bytes` is (see [`TrieNode::plain_chars`]), or 0.
fn plain_chars(bytes: &[u8]) -> u32 {
    if !utf8_prefix(bytes) || bytes.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\') {
        return 0;
    }
    // Characters (a cut-short one included) start with a non-continuation byte.
    bytes.iter().filter(|&&b| b & 0xC0 != 0x80).count() as u32
}

fn build_trie(tokens: &[Vec<u8>], sorted: &[u32]) -> Vec<TrieNode> {
    let bytes_of = |p: usize| tokens[sorted[p] as usize].as_slice();
    let mut nodes = Vec::new();
    // Explicit stack instead of recursion: token length is input-controlled.
    enum Task {
        Enter { lo: usize, hi: usize, depth: usize, byte: u8 },
        Exit { node: usize },
    }
    let mut stack = vec![Task::Enter { lo: 0, hi: sorted.len(), depth: 0, byte: 0 }];
    while let Some(task) = stack.pop() {
        match task {
            Task::Enter { lo, hi, depth, byte } => {
                let mut here = lo;
                while here < hi && bytes_of(here).len() == depth {
                    here += 1;
                }
                let node = nodes.len();
                let mut own = [0u64; 4];
                if depth > 0 {
                    own[byte as usize / 64] |= 1 << (byte % 64);
                }
                nodes.push(TrieNode {
                    byte,
                    depth: depth as u32,
                    end: 0,
                    lo: lo as u32,
                    here: here as u32,
                    hi: hi as u32,
                    bytes: own,
                    utf8_prefix: true,
                    plain_chars: 0,
                });
                stack.push(Task::Exit { node });
                // Children in reverse so that they are entered in byte order.
                let mut children = Vec::new();
                let mut i = here;
                while i < hi {
                    let b = bytes_of(i)[depth];
                    let mut j = i + 1;
                    while j < hi && bytes_of(j)[depth] == b {
                        j += 1;
                    }
                    children.push(Task::Enter { lo: i, hi: j, depth: depth + 1, byte: b });
                    i = j;
                }
                stack.extend(children.into_iter().rev());
            }
            Task::Exit { node } => {
                nodes[node].end = nodes.len() as u32;
            }
        }
    }
    // Whether each token is well-formed UTF-8 from byte k on, but for a cut-short last character,
    // and how many plain string characters it is from there, for every k.
    for n in nodes.iter_mut().skip(1) {
        let k = n.depth as usize - 1;
        n.utf8_prefix = (n.lo..n.hi).all(|p| utf8_prefix(&bytes_of(p as usize)[k..]));
        n.plain_chars = if n.utf8_prefix {
            // 0 as soon as one tail is not plain characters only.
            let mut max = 0u32;
            for p in n.lo..n.hi {
                match plain_chars(&bytes_of(p as usize)[k..]) {
                    0 => {
                        max = 0;
                        break;
                    }
                    chars => max = max.max(chars),
                }
            }
            max
        } else {
            0
        };
    }
    // Bytes below each node, bottom-up: a node's subtree is `node+1..end`.
    for n in (0..nodes.len()).rev() {
        let mut c = n + 1;
        let end = nodes[n].end as usize;
        let mut acc = nodes[n].bytes;
        while c < end {
            for (a, b) in acc.iter_mut().zip(nodes[c].bytes) {
                *a |= b;
            }
            c = nodes[c].end as usize;
        }
        nodes[n].bytes = acc;
    }
    nodes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trie_is_preorder_with_contiguous_subtrees() {
        let toks: Vec<Vec<u8>> =
            ["ab", "a", "b", "abc", "", "ab", "<eos>"].iter().map(|s| s.as_bytes().to_vec()).collect();
        let v = TokenVocab::new(toks, &[], &[6]).expect("valid");
        assert_eq!(v.sorted_len(), 5);
        let n = &v.trie().nodes;
        // root, a, ab, abc, b
        assert_eq!(n.len(), 5);
        assert_eq!((n[1].byte, n[1].lo, n[1].here, n[1].hi, n[1].end), (b'a', 0, 1, 4, 4));
        assert_eq!((n[2].depth, n[2].here - n[2].lo), (2, 2), "two tokens spell `ab`");
        assert_eq!(n[0].end as usize, n.len());
        assert_ne!(n[1].bytes[1] & (1 << (b'c' - 64)), 0, "`c` occurs below `a`");
        assert!(v.is_special(6) && v.sorted.iter().all(|&id| id != 6));
    }

    #[test]
    fn cut_short_last_characters_count_as_utf8_prefixes() {
        // "é" is C3 A9: a token ending after C3 is a prefix of text, one starting with A9 is not.
        let toks: Vec<Vec<u8>> = vec![b"a\xC3".to_vec(), b"\xA9b".to_vec(), b"<eos>".to_vec()];
        let v = TokenVocab::new(toks, &[], &[2]).expect("valid");
        let node = |first: u8| v.trie().nodes.iter().find(|n| n.depth == 1 && n.byte == first).expect("node");
        assert!(node(b'a').utf8_prefix);
        assert!(!node(0xA9).utf8_prefix);
    }

    #[test]
    fn out_of_range_ids_are_errors() {
        assert!(TokenVocab::new(vec![b"a".to_vec()], &[], &[3]).is_err());
        assert!(TokenVocab::new(vec![b"a".to_vec()], &[], &[]).is_err());
    }
}
