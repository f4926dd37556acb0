//! [`TagDispatch`] as an NFA fragment: the Aho-Corasick DFA of its patterns (triggers, stop strings,
//! excludes; the `aho-corasick` crate, earliest-match semantics) times a UTF-8 validity automaton.
//!
//! Each pair (Aho-Corasick state, UTF-8 state) where no pattern has completed is one free-text
//! state; its byte edges are the two automata's transitions. Where a pattern completes, free text
//! ends: a trigger leads into its tags (their `rest`, built after the trigger's bytes), a stop
//! string to the end, an excluded string nowhere. So free text costs one state per pattern prefix
//! and UTF-8 position, whatever its length, and its masks are those of a few looping states.

use super::{BuildError, Label, Nfa};
use crate::grammar::{Expr, SPECIAL_TOKEN_BYTE, TagDispatch, Trigger};
use aho_corasick::automaton::{Automaton as _, StateID};
use aho_corasick::{Anchored, MatchKind, dfa::DFA};
// (The trie of a dispatch over 128 tools' begins is rebuilt per grammar.)
use crate::earley::FastMap as HashMap;

/// What completing a pattern does, in priority order when several complete at one byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Completes {
    /// Trigger `i` of the deduplicated trigger list: its tags follow.
    Trigger(usize),
    /// A stop string: the dispatch ends.
    Stop,
    /// An excluded string: free text may not contain it.
    Excluded,
}

/// UTF-8 validity: 0 is a character boundary; the others wait for continuation bytes.
fn utf8_next(state: u8, b: u8) -> Option<u8> {
    match (state, b) {
        (0, 0x00..=0x7F) => Some(0),
        (0, 0xC2..=0xDF) => Some(1),
        (0, 0xE0) => Some(2),
        (0, 0xE1..=0xEC | 0xEE..=0xEF) => Some(3),
        (0, 0xED) => Some(4),
        (0, 0xF0) => Some(5),
        (0, 0xF1..=0xF3) => Some(6),
        (0, 0xF4) => Some(7),
        (1, 0x80..=0xBF) => Some(0),
        (2, 0xA0..=0xBF) | (3, 0x80..=0xBF) | (4, 0x80..=0x9F) => Some(1),
        (5, 0x90..=0xBF) | (6, 0x80..=0xBF) | (7, 0x80..=0x8F) => Some(3),
        _ => None,
    }
}

impl Nfa<'_> {
    /// Builds `d` from `from`; returns its end state.
    pub(super) fn dispatch(
        &mut self,
        from: u32,
        d: &TagDispatch,
        rule_map: &dyn Fn(u32) -> Option<u32>,
    ) -> Result<u32, BuildError> {
        let mut triggers: Vec<&Trigger> = Vec::new();
        for (trigger, _) in &d.tags {
            if !triggers.contains(&trigger) {
                triggers.push(trigger);
            }
        }
        // Text triggers go into the Aho-Corasick automaton; token triggers are read from any
        // character boundary (a special token interrupts whatever text pattern was under way).
        let mut patterns: Vec<Vec<u8>> = Vec::new();
        let mut outcome: Vec<Completes> = Vec::new();
        for (i, t) in triggers.iter().enumerate() {
            if let Trigger::Text(text) = t {
                patterns.push(text.as_bytes().to_vec());
                outcome.push(Completes::Trigger(i));
            }
        }
        for s in &d.stop_strings {
            patterns.push(s.as_bytes().to_vec());
            outcome.push(Completes::Stop);
        }
        for s in &d.excludes {
            patterns.push(s.as_bytes().to_vec());
            outcome.push(Completes::Excluded);
        }
        if patterns.iter().any(|p| p.is_empty())
            || triggers.iter().any(|t| matches!(t, Trigger::Text(s) if s.is_empty()))
        {
            return Err(BuildError::Regex("a TagDispatch trigger, stop string or exclude is empty".into()));
        }
        let end = self.new_state()?;
        // After a tag: free text again, or the end.
        let after_tag = if d.loop_after_dispatch { self.new_state()? } else { end };
        // Where each trigger leads: its tags' `rest`s, in parallel.
        let mut trigger_states = Vec::with_capacity(triggers.len());
        for trigger in &triggers {
            let s = self.new_state()?;
            for (t, rest) in &d.tags {
                if t != *trigger {
                    continue;
                }
                match rest {
                    // Kept a rule: a dispatch's tags (whole tool schemas) are not copied into it.
                    Expr::Rule(r) => {
                        if let Some(id) = rule_map(r.0) {
                            let to = self.new_state()?;
                            self.edge(s, Label::Rule(id), to);
                            self.edge(to, Label::Eps, after_tag);
                        }
                    }
                    rest => {
                        let start = self.build_to(rest, after_tag, rule_map)?;
                        self.edge(s, Label::Eps, start);
                    }
                }
            }
            trigger_states.push(s);
        }
        let ac = if patterns.is_empty() {
            None
        } else {
            let built = DFA::builder().match_kind(MatchKind::Standard).build(&patterns);
            Some(built.map_err(|e| BuildError::Regex(format!("TagDispatch patterns: {e}")))?)
        };
        // The special-token bytes of the token triggers, a trie shared by every boundary state.
        let token_start = if triggers.iter().any(|t| matches!(t, Trigger::Token(_))) {
            let start = self.new_state()?;
            let mut children: HashMap<(u32, u8), u32> = HashMap::default();
            for (i, t) in triggers.iter().enumerate() {
                let Trigger::Token(_) = t else { continue };
                let bytes = t.bytes();
                let mut at = start;
                for (k, &b) in bytes.iter().enumerate().skip(1) {
                    if k + 1 == bytes.len() {
                        self.edge(at, Label::Bytes(b, b), trigger_states[i]);
                    } else if let Some(&next) = children.get(&(at, b)) {
                        at = next;
                    } else {
                        let next = self.new_state()?;
                        self.edge(at, Label::Bytes(b, b), next);
                        children.insert((at, b), next);
                        at = next;
                    }
                }
            }
            Some(start)
        } else {
            None
        };
        // Free-text states by (Aho-Corasick state, UTF-8 state), explored breadth first.
        let ac_start = match &ac {
            Some(ac) => ac.start_state(Anchored::No).map_err(|e| BuildError::Regex(e.to_string()))?,
            None => StateID::ZERO,
        };
        let mut ids: HashMap<(StateID, u8), u32> = HashMap::default();
        let first = self.new_state()?;
        ids.insert((ac_start, 0), first);
        self.edge(from, Label::Eps, first);
        if d.loop_after_dispatch {
            self.edge(after_tag, Label::Eps, first);
        }
        let mut queue = vec![(ac_start, 0u8, first)];
        while let Some((sid, utf8, state)) = queue.pop() {
            if utf8 == 0 && d.stop_eos {
                self.edge(state, Label::Eps, end);
            }
            if let (0, Some(tokens)) = (utf8, token_start) {
                self.edge(state, Label::Bytes(SPECIAL_TOKEN_BYTE, SPECIAL_TOKEN_BYTE), tokens);
            }
            // Consecutive bytes with one target become one range edge.
            let mut run: Option<(u8, u8, u32)> = None;
            for b in 0..=255u8 {
                let target = match utf8_next(utf8, b) {
                    None => None,
                    Some(u) => {
                        let (next, completes) = match &ac {
                            None => (StateID::ZERO, None),
                            Some(ac) => {
                                let next = ac.next_state(Anchored::No, sid, b);
                                let completes = ac.is_match(next).then(|| {
                                    (0..ac.match_len(next))
                                        .map(|i| outcome[ac.match_pattern(next, i).as_usize()])
                                        .min()
                                        .expect("a match state has a pattern")
                                });
                                (next, completes)
                            }
                        };
                        match completes {
                            Some(Completes::Trigger(i)) => Some(trigger_states[i]),
                            Some(Completes::Stop) => Some(end),
                            Some(Completes::Excluded) => None,
                            None => Some(match ids.get(&(next, u)) {
                                Some(&s) => s,
                                None => {
                                    let s = self.new_state()?;
                                    ids.insert((next, u), s);
                                    queue.push((next, u, s));
                                    s
                                }
                            }),
                        }
                    }
                };
                run = match (run, target) {
                    (Some((lo, _, t)), Some(u)) if t == u => Some((lo, b, t)),
                    (prev, target) => {
                        if let Some((lo, hi, t)) = prev {
                            self.edge(state, Label::Bytes(lo, hi), t);
                        }
                        target.map(|t| (b, b, t))
                    }
                };
            }
            if let Some((lo, hi, t)) = run {
                self.edge(state, Label::Bytes(lo, hi), t);
            }
        }
        Ok(end)
    }
}
