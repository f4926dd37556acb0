//! `CompiledGrammar`: a grammar lowered to automata for one vocabulary, shared by all its matchers.
//!
//! Compilation inlines non-recursive rules (see `automaton::build`) (so most JSON Schemas become one automaton and their masks
//! need no context) except those the front end keeps apart (`GrammarBuilder::keep_rule`), builds one automaton per remaining rule (minimized when small and shared), drops references to rules
//! that can never complete (recursion without a base case), and computes nullable rules. The
//! token-mask cache entries are filled lazily per `(rule, state)` and shared across grammars through
//! the vocabulary's pool, keyed by the structural encoding of the rule and every rule it reaches.
//! Rule automata themselves are cached process-wide by the shape of the rules they reach
//! (`RuleShape`: the bodies of the rules inlined into them, the numbers of the others), so the
//! generic JSON rules every schema shares are built once, and so is a tool's tag (a rule of its
//! own in a dispatch, of any size, marked by `GrammarBuilder::cache_rule`): a request whose tools
//! were seen before builds only the new ones.

use crate::automaton::{self, Automaton, BuildError, Finish};
use crate::earley::Tables;
use crate::earley::{FastMap, ItemHasher};
use crate::grammar::{Expr, Grammar, GrammarError, RuleId};
use crate::json_schema::SchemaError;
use crate::limits::Limits;
use crate::mask::MaskEntry;
use crate::vocab::TokenVocab;
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Why a grammar or schema could not be compiled.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CompileError {
    /// The grammar text is invalid.
    #[error(transparent)]
    Grammar(#[from] GrammarError),
    /// The JSON Schema cannot be enforced.
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// The structural tag cannot be enforced.
    #[error(transparent)]
    StructuralTag(#[from] crate::structural_tag::StructuralTagError),
    /// A regex terminal is invalid or unsupported.
    #[error("rule `{rule}`: {message}")]
    Regex {
        /// The rule holding the regex.
        rule: String,
        /// What is wrong.
        message: String,
    },
    /// A size limit was exceeded.
    #[error("rule `{rule}`: {what} limit reached ({got} > {max})")]
    Limit {
        /// The rule being compiled.
        rule: String,
        /// Which limit.
        what: &'static str,
        /// The size reached.
        got: usize,
        /// The limit.
        max: usize,
    },
    /// Compilation took longer than [`Limits::compile_time`].
    #[error("compilation exceeded the time limit of {0:?}")]
    Timeout(Duration),
    /// The start rule can never match anything (e.g. recursion without a base case).
    #[error("rule `{0}` matches no string (recursion without a base case?)")]
    EmptyLanguage(String),
    /// A rule with a token budget refers to other rules (a budget bounds free text, whose end the
    /// matcher can see), or is the start rule (which nothing follows).
    #[error("rule `{0}` has a token budget but refers to other rules or is the start rule")]
    TokenBudget(String),
}

/// An automaton built with inlined callees may have at most this many states; past it, the rule is
/// rebuilt with its callees kept as rules.
const INLINE_STATES: usize = 100_000;

/// Time an inlined build may take before the rule is rebuilt with its callees kept as rules.
const INLINE_TIME: Duration = Duration::from_millis(1500);

/// The mask entry of one `(rule, state)`, filled on first use.
pub(crate) type EntrySlot = OnceLock<Arc<MaskEntry>>;

/// A grammar compiled for one vocabulary. Shared (`Arc`) by every [`crate::Matcher`] that uses it.
#[derive(Debug)]
pub struct CompiledGrammar {
    pub(crate) vocab: Arc<TokenVocab>,
    pub(crate) tables: Tables,
    pub(crate) limits: Limits,
    names: Vec<String>,
    keys: Vec<OnceLock<(u64, Arc<[u32]>)>>,
    /// Per rule, per state, the mask entry (see [`CompiledGrammar::slot`]).
    local: Vec<OnceLock<Box<[EntrySlot]>>>,
    /// Token budgets of compiled rules (`Grammar::token_budgets`): `(rule index, max tokens)`.
    pub(crate) token_budgets: Vec<(u32, u32)>,
}

impl CompiledGrammar {
    /// Compiles `grammar` for `vocab` with default [`Limits`].
    pub fn new(vocab: Arc<TokenVocab>, grammar: &Grammar) -> Result<CompiledGrammar, CompileError> {
        CompiledGrammar::with_limits(vocab, grammar, Limits::default())
    }

    /// Compiles `grammar` for `vocab` under `limits`.
    pub fn with_limits(
        vocab: Arc<TokenVocab>,
        grammar: &Grammar,
        limits: Limits,
    ) -> Result<CompiledGrammar, CompileError> {
        let deadline = Instant::now() + limits.compile_time;
        compile(vocab, grammar, limits, deadline)
    }

    /// Compiles `grammar` under `limits` by `deadline`, a deadline that started before (a JSON Schema's
    /// lowering counts against the same [`Limits::compile_time`]).
    pub(crate) fn with_deadline(
        vocab: Arc<TokenVocab>,
        grammar: &Grammar,
        limits: Limits,
        deadline: Instant,
    ) -> Result<CompiledGrammar, CompileError> {
        compile(vocab, grammar, limits, deadline)
    }

    /// The vocabulary this grammar was compiled for.
    pub fn vocab(&self) -> &Arc<TokenVocab> {
        &self.vocab
    }

    /// Approximate heap bytes of the automata (what a cache of compiled grammars counts).
    pub fn approx_bytes(&self) -> usize {
        self.tables.rules.iter().map(Automaton::approx_bytes).sum::<usize>()
            + self.names.iter().map(String::len).sum::<usize>()
    }

    /// Number of automaton states over all rules (a size measure).
    pub fn num_states(&self) -> usize {
        self.tables.rules.iter().map(|a| a.len()).sum()
    }

    /// Name of compiled rule `rule` (for diagnostics).
    #[allow(dead_code)]
    pub(crate) fn rule_name(&self, rule: u32) -> &str {
        &self.names[rule as usize]
    }

    /// Number of states of `rule`'s automaton (an upper bound on what pooling it would cost is the
    /// whole grammar, but the rule itself dominates in practice).
    pub(crate) fn pool_size(&self, rule: u32) -> usize {
        self.tables.rules[rule as usize].len()
    }

    /// Byte-transition SCC ids of `rule`'s states (computed once per shared automaton).
    pub(crate) fn sccs(&self, rule: u32) -> &[u32] {
        self.tables.rules[rule as usize].sccs()
    }

    /// The mask-entry slot of `(rule, state)`; a rule's slots are allocated when first asked for
    /// (a grammar of 128 tools touches a few).
    pub(crate) fn slot(&self, rule: u32, state: u32) -> &EntrySlot {
        let slots = self.local[rule as usize]
            .get_or_init(|| (0..self.tables.rules[rule as usize].len()).map(|_| OnceLock::new()).collect());
        &slots[state as usize]
    }

    /// The key of `rule`'s byte transitions alone (see `Core::byte_key`): what a mask entry that
    /// never reached a state with rule edges is shared under, by every grammar whatever the rules
    /// referenced.
    pub(crate) fn byte_key(&self, rule: u32) -> &(u64, Arc<[u32]>) {
        self.tables.rules[rule as usize].byte_key()
    }

    /// The structural key of `rule`: its automaton and every automaton it reaches, rules renumbered
    /// in order of first reference, so equal sub-grammars get equal keys across grammars.
    ///
    /// Automata are named by the number the vocabulary's mask pool gives their tables (equal tables,
    /// equal numbers: `MaskPool::tables_number`), not encoded again: encoding a tool's whole
    /// automaton for every grammar that holds it cost a quarter of the first masks after a cache
    /// clear.
    pub(crate) fn key(&self, rule: u32) -> &(u64, Arc<[u32]>) {
        // A rule that references none is its own automaton: the shallow key (cached with the
        // shared automaton, so a tool seen before costs no encoding) says all of it.
        let a = &self.tables.rules[rule as usize];
        if !a.has_rule_edges() {
            return a.shallow_key();
        }
        self.keys[rule as usize].get_or_init(|| {
            let mut order: Vec<u32> = vec![rule];
            let mut index: FastMap<u32, u32> = FastMap::from_iter([(rule, 0)]);
            // Apart from every shallow key, which begins with `u32::MAX - 9`.
            let mut out = vec![u32::MAX - 10];
            let mut i = 0;
            while i < order.len() {
                let r = order[i];
                let a = &self.tables.rules[r as usize];
                let number = self.vocab.pool.tables_number(a.shallow_key());
                out.extend([number as u32, (number >> 32) as u32]);
                for &x in a.local_rules() {
                    if x == u32::MAX {
                        out.push(u32::MAX);
                        continue;
                    }
                    let next = index.len() as u32;
                    out.push(*index.entry(x).or_insert_with(|| {
                        order.push(x);
                        next
                    }));
                }
                out.push(u32::MAX - 3 + self.tables.nullable[r as usize] as u32);
                i += 1;
            }
            (crate::automaton::key_hash(&out), out.into())
        })
    }
}

/// `total + more` states, or the total-states limit error naming `rule`.
fn add_states(total: usize, more: usize, rule: &str, limits: &Limits) -> Result<usize, CompileError> {
    let total = total + more;
    if total > limits.total_states {
        return Err(CompileError::Limit {
            rule: rule.to_owned(),
            what: "total automaton states",
            got: total,
            max: limits.total_states,
        });
    }
    Ok(total)
}

fn build_err(rule: &str, e: BuildError, limits: &Limits) -> CompileError {
    match e {
        BuildError::Limit(what, got, max) => CompileError::Limit { rule: rule.to_string(), what, got, max },
        BuildError::Timeout => CompileError::Timeout(limits.compile_time),
        BuildError::Regex(message) => CompileError::Regex { rule: rule.to_string(), message },
    }
}

/// `e`, found compiling grammar rule `rule`, said of what the rule was made for when its front end
/// recorded that ([`crate::grammar::Origin`]): a rule lowered from a JSON Schema names the JSON
/// pointer of its schema keyword (behind the structural tag's pointer to the schema, when it came in
/// one), never the rule's internal name. The one place compile errors meet origins.
fn said_of(g: &Grammar, rule: usize, e: CompileError) -> CompileError {
    let Some(origin) = g.origin(RuleId(rule as u32)) else { return e };
    let pointer = origin.schema.to_string();
    let source = match e {
        CompileError::Limit { what, got, max, .. } => SchemaError::Limit { pointer, what, got, max },
        CompileError::Regex { message, .. } => SchemaError::Invalid { pointer, message },
        CompileError::Timeout(limit) => SchemaError::timeout(&pointer, limit),
        CompileError::EmptyLanguage(_) => SchemaError::unsatisfiable(&pointer),
        other => return other,
    };
    match &origin.tag {
        Some(tag) => CompileError::StructuralTag(crate::structural_tag::StructuralTagError::Schema {
            pointer: tag.to_string(),
            source,
        }),
        None => CompileError::Schema(source),
    }
}

/// The error for grammar rule `rule`, whose language the automata found empty, said of the rule
/// to blame (see [`blame_empty`]).
fn empty_language(g: &Grammar, rule: usize, limits: &Limits, deadline: Instant) -> CompileError {
    let at = blame_empty(g, rule, limits, deadline);
    said_of(g, at, CompileError::EmptyLanguage(g.rules()[at].name.clone()))
}

/// The rule to blame for the empty language of `rule`: from it, down the parts that leave no string
/// (the first such part of a sequence; the one rule every alternative of an empty choice fails in),
/// to the deepest rule with a recorded origin on the way, so that an object whose required property
/// has a `false` schema is said of that schema, not of the object. Languages are judged on the IR (a
/// restriction by building its automaton, it being regular); where the IR shows no empty part,
/// `rule` itself. Runs only on the error path.
fn blame_empty(g: &Grammar, rule: usize, limits: &Limits, deadline: Instant) -> usize {
    let n = g.rules().len();
    let mut judge = Emptiness {
        g,
        productive: vec![false; n],
        restricts: FastMap::default(),
        limits,
        deadline,
        blame: vec![None; n],
        visiting: vec![false; n],
    };
    judge.solve();
    if judge.productive[rule] {
        return rule;
    }
    judge.blame_rule(rule).unwrap_or(rule)
}

/// Which rules of a grammar match some string, judged on the IR, and where the others fail (see
/// [`blame_empty`]).
struct Emptiness<'g> {
    g: &'g Grammar,
    productive: Vec<bool>,
    /// Whether each restriction met (by address in `g`) matches some string.
    restricts: FastMap<*const Expr, bool>,
    limits: &'g Limits,
    deadline: Instant,
    /// Per unproductive rule once searched, the deepest rule with an origin it fails in.
    blame: Vec<Option<Option<usize>>>,
    /// Rules on the current search path (a recursion with no end is not followed round).
    visiting: Vec<bool>,
}

impl<'g> Emptiness<'g> {
    /// Productive rules by a worklist: a rule is judged again when a rule it references becomes
    /// productive.
    fn solve(&mut self) {
        let n = self.g.rules().len();
        let mut callers: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (i, r) in self.g.rules().iter().enumerate() {
            r.expr.for_each_rule(&mut |c| callers[c.index()].push(i as u32));
        }
        let mut work: Vec<u32> = (0..n as u32).collect();
        while let Some(r) = work.pop() {
            if self.productive[r as usize] || !self.is_productive(&self.g.rules()[r as usize].expr) {
                continue;
            }
            self.productive[r as usize] = true;
            work.extend(callers[r as usize].iter().copied().filter(|&c| !self.productive[c as usize]));
        }
    }

    fn is_productive(&mut self, e: &'g Expr) -> bool {
        match e {
            Expr::CharClass { negated, ranges } => *negated || !ranges.is_empty(),
            Expr::Rule(r) => self.productive[r.index()],
            Expr::Seq(parts) => parts.iter().all(|p| self.is_productive(p)),
            Expr::Alt(parts) => parts.iter().any(|p| self.is_productive(p)),
            Expr::Repeat { expr, min, .. } => *min == 0 || self.is_productive(expr),
            Expr::Restrict { base, .. } => self.is_productive(base) && self.restriction_matches(e),
            _ => true,
        }
    }

    /// Whether a restriction (rule-free) matches some string; assumed so if its automaton cannot be
    /// built within the limits.
    fn restriction_matches(&mut self, e: &'g Expr) -> bool {
        let (limits, deadline) = (self.limits, self.deadline);
        *self.restricts.entry(e as *const Expr).or_insert_with(|| {
            let none = |_: u32| None;
            automaton::build(e, &none, &|_| None, limits.automaton_states, deadline, Finish::Once)
                .map_or(true, |a| a.len() > 0 && a.reaches_final())
        })
    }

    /// The deepest rule with an origin that unproductive `rule` fails in (itself, if none deeper
    /// has one and it has), searched once per rule.
    fn blame_rule(&mut self, rule: usize) -> Option<usize> {
        if let Some(known) = self.blame[rule] {
            return known;
        }
        if self.visiting[rule] {
            return None;
        }
        self.visiting[rule] = true;
        let deeper = self.blame_expr(&self.g.rules()[rule].expr);
        self.visiting[rule] = false;
        let at = deeper.or_else(|| self.g.origin(RuleId(rule as u32)).map(|_| rule));
        self.blame[rule] = Some(at);
        at
    }

    /// Where unproductive `e` fails: the deepest rule with an origin, if one is to blame.
    fn blame_expr(&mut self, e: &'g Expr) -> Option<usize> {
        match e {
            Expr::Rule(r) if !self.productive[r.index()] => self.blame_rule(r.index()),
            Expr::Seq(parts) => {
                let part = parts.iter().find(|p| !self.is_productive(p))?;
                self.blame_expr(part)
            }
            Expr::Alt(parts) if !parts.iter().any(|p| self.is_productive(p)) => {
                // Every alternative fails; to blame deeper, they must all fail in the same rule.
                let (first, rest) = parts.split_first()?;
                let at = self.blame_expr(first);
                rest.iter().all(|p| self.blame_expr(p) == at).then_some(at).flatten()
            }
            Expr::Repeat { expr, min, .. } if *min > 0 => self.blame_expr(expr),
            Expr::Restrict { base, .. } if !self.is_productive(base) => self.blame_expr(base),
            _ => None,
        }
    }
}

/// Rules never copied into their callers: those with long bounded repetitions (a `maxLength: 4096`
/// string: copied into every use they would make one huge automaton), with a token budget (the
/// matcher must see their items), and those the front end asked to keep
/// (`GrammarBuilder::keep_rule`).
fn rules_kept_apart(g: &Grammar) -> Vec<bool> {
    let budgeted = |r: usize| g.token_budgets().binary_search_by_key(&(r as u32), |&(id, _)| id.0).is_ok();
    let kept = |r: usize| g.kept_rules().binary_search(&crate::grammar::RuleId(r as u32)).is_ok();
    g.rules().iter().enumerate().map(|(i, r)| has_long_repeat(&r.expr) || budgeted(i) || kept(i)).collect()
}

/// Rules that can reach themselves through references.
fn recursive_rules(g: &Grammar) -> Vec<bool> {
    let n = g.rules().len();
    let succ: Vec<Vec<u32>> = g
        .rules()
        .iter()
        .map(|r| {
            let mut v = Vec::new();
            r.expr.for_each_rule(&mut |id| v.push(id.0));
            v.sort_unstable();
            v.dedup();
            v
        })
        .collect();
    let comp = crate::automaton::strongly_connected(n, |v| &succ[v]);
    let mut size = vec![0usize; n];
    for &c in &comp {
        size[c as usize] += 1;
    }
    (0..n).map(|v| size[comp[v] as usize] > 1 || succ[v].contains(&(v as u32))).collect()
}

fn compile(
    vocab: Arc<TokenVocab>,
    g: &Grammar,
    limits: Limits,
    deadline: Instant,
) -> Result<CompiledGrammar, CompileError> {
    let recursive = recursive_rules(g);
    // Build every rule that stays a rule: the start rule and whatever the automata still reference.
    // A rule is first built with its non-recursive callees inlined; if that automaton grows past the
    // inlining budget, it is rebuilt with rule-reference edges and its callees become rules.
    let start = g.start().index();
    let ids = std::cell::RefCell::new((vec![start], FastMap::from_iter([(start, 0u32)])));
    let mut rules: Vec<Automaton> = Vec::new();
    let mut total = 0usize;
    let inline_budget = limits.automaton_states.min(INLINE_STATES);
    let long = rules_kept_apart(g);
    let inline_body = |r: u32| (!recursive[r as usize] && !long[r as usize]).then(|| &g.rules()[r as usize].expr);
    let no_inline = |_: u32| None;
    let map = |r: u32| {
        let mut ids = ids.borrow_mut();
        let (kept, new_id) = &mut *ids;
        let next = kept.len() as u32;
        Some(*new_id.entry(r as usize).or_insert_with(|| {
            kept.push(r as usize);
            next
        }))
    };
    // A unit that holds only imported grammars (a tool's tag around its schema) is known by them,
    // without encoding what it reaches; those the automaton cache lacks are built ahead.
    let (mut unit_keys, ahead) = Ahead::plan(g, inline_budget, limits.automaton_states, limits.compile_threads);
    let build_unit = |rule: usize| {
        build_unit_alone(g, rule, &recursive, &long, &inline_body, inline_budget, limits.automaton_states, deadline)
    };
    let mut build_rules = |start_workers: &dyn Fn()| -> Result<(), CompileError> {
        let mut i = 0;
        while i < ids.borrow().0.len() {
            let rule = ids.borrow().0[i];
            if Instant::now() > deadline {
                return Err(said_of(g, rule, CompileError::Timeout(limits.compile_time)));
            }
            let name = &g.rules()[rule].name;
            let body = &g.rules()[rule].expr;
            let before = ids.borrow().0.len();
            let compact = unit_keys.remove(&rule).flatten();
            // The workers start when a unit is first met as a rule of its own (units copied into
            // their callers are never built alone).
            if ahead.is_job(rule) {
                start_workers();
            }
            let ahead_unit = ahead.result(rule, &build_unit);
            let attempt_deadline = deadline.min(Instant::now() + INLINE_TIME);
            if ahead_unit.is_none()
                && let Some(cached) = compact.as_deref().and_then(cached_automaton)
            {
                // Stored only without rule references: nothing to map.
                total = add_states(total, cached.len(), name, &limits).map_err(|e| said_of(g, rule, e))?;
                rules.push((*cached).clone());
                i += 1;
                continue;
            }
            // The first attempt, when a worker made it.
            let (shape, first_attempt) = match ahead_unit {
                Some(AheadUnit::Built { shape, mut a, met }) => {
                    // The references the build met, mapped in the order it met them (as a build
                    // here would have), then its tables' references, numbered by grammar rule.
                    for &r in &met {
                        map(r);
                    }
                    a.remap_rules(&map);
                    #[cfg(test)]
                    tests::BUILT_AHEAD_USED.with(|n| n.set(n.get() + 1));
                    (shape, Some(Ok(a)))
                }
                Some(AheadUnit::Failed { shape, error }) => (shape, Some(Err(error))),
                Some(AheadUnit::ShapeCached(shape)) => (Some(shape), None),
                None => (RuleShape::of(g, rule, &recursive, &long, inline_budget, limits.automaton_states), None),
            };
            if let Some(shape) = &shape
                && let Some(cached) = shape.cached()
            {
                // The shared tables, their local rules (positions in the shape) mapped to this
                // grammar's.
                let mut a = (*cached).clone();
                a.remap_rules(&|local| map(shape.rules[local as usize]));
                total = add_states(total, a.len(), name, &limits).map_err(|e| said_of(g, rule, e))?;
                rules.push(a);
                i += 1;
                continue;
            }
            let first = first_attempt.unwrap_or_else(|| {
                automaton::build(body, &map, &inline_body, inline_budget, attempt_deadline, finish_of(&shape))
            });
            let mut fell_back = false;
            let a = match first {
                Err(BuildError::Limit(..)) | Err(BuildError::Timeout) if Instant::now() < deadline => {
                    fell_back = true;
                    // Forget the rules the failed attempt referenced.
                    let mut guard = ids.borrow_mut();
                    let (kept, new_id) = &mut *guard;
                    for r in kept.drain(before..) {
                        new_id.remove(&r);
                    }
                    drop(guard);
                    automaton::build(body, &map, &no_inline, limits.automaton_states, deadline, finish_of(&shape))
                }
                other => other,
            }
            .map_err(|e| said_of(g, rule, build_err(name, e, &limits)))?;
            if let Some(shape) = shape {
                // A unit's tables follow from its shape: keyed by that, its mask entries are found
                // again without encoding a tool's whole automaton after every cache clear. Only a
                // unit (always built `Finish::Recurring`: the same shape as a plain rule is
                // minimized and keeps its encoded key, under another tag), only when it references
                // no rule (the subset construction numbers states by the grammar's rule ids, which
                // depend on the whole grammar), and only the first build (the second depends on
                // when the first gave up). These are the reasons an earlier shape-keyed pool was
                // reverted (20f71fb).
                if shape.unit && !fell_back && !a.has_rule_edges() {
                    a.preset_shallow_key(shape.table_key());
                }
                let kept = &ids.borrow().0;
                shape.store(&a, &|id| kept.get(id as usize).map(|&r| r as u32));
            }
            if let Some(key) = compact
                && !fell_back
                && !a.has_rule_edges()
            {
                keep_automaton(key, a.clone());
            }
            total = add_states(total, a.len(), name, &limits).map_err(|e| said_of(g, rule, e))?;
            rules.push(a);
            i += 1;
        }
        Ok(())
    };
    std::thread::scope(|scope| {
        // Workers take no more jobs once the calling thread is done, by an error or a panic too.
        let _stop = ahead.stop_on_drop();
        let started = std::cell::Cell::new(false);
        build_rules(&|| {
            if !started.replace(true) {
                ahead.start(scope, &build_unit);
            }
        })
    })?;
    let kept = ids.into_inner().0;
    let names: Vec<String> = kept.iter().map(|&r| g.rules()[r].name.clone()).collect();
    let productive = productive_rules(&rules);
    if !productive[0] {
        return Err(empty_language(g, kept[0], &limits, deadline));
    }
    if productive.iter().any(|p| !p) {
        for (i, a) in rules.iter_mut().enumerate() {
            if productive[i] {
                // Only tables that lost an edge change (and are copied, if shared).
                if a.remap_rules(&|r| productive[r as usize].then_some(r)) && !a.retrim() {
                    return Err(empty_language(g, kept[i], &limits, deadline));
                }
            }
        }
    }
    let token_budgets: Vec<(u32, u32)> = g
        .token_budgets()
        .iter()
        .filter_map(|&(rule, max)| kept.iter().position(|&k| k == rule.index()).map(|i| (i as u32, max)))
        .collect();
    for &(i, _) in &token_budgets {
        let a = &rules[i as usize];
        if i == 0 || a.has_rule_edges() {
            return Err(CompileError::TokenBudget(names[i as usize].clone()));
        }
    }
    let nullable = nullable_rules(&rules);
    let local = (0..rules.len()).map(|_| OnceLock::new()).collect();
    let keys = (0..rules.len()).map(|_| OnceLock::new()).collect();
    Ok(CompiledGrammar {
        vocab,
        tables: Tables { rules, nullable, start: 0 },
        limits,
        names,
        keys,
        local,
        token_budgets,
    })
}

/// How a rule's automaton is finished: only automata the shape cache can keep recur (see
/// `RuleShape`); of those, only the small shared rules are worth minimizing.
fn finish_of(shape: &Option<RuleShape>) -> Finish {
    match shape {
        Some(shape) if shape.unit => Finish::Recurring,
        Some(_) => Finish::MinimizeUpTo(SHAPE_MAX_STATES),
        None => Finish::Once,
    }
}

/// What a worker made of a unit.
enum AheadUnit {
    /// The tables, their references numbered by grammar rule, and the rules the build met, in the
    /// order it met them.
    Built { shape: Option<RuleShape>, a: Automaton, met: Vec<u32> },
    /// The first attempt failed (a limit, the inlining time): the calling thread falls back.
    Failed { shape: Option<RuleShape>, error: BuildError },
    /// The shape cache has the tables.
    ShapeCached(RuleShape),
}

/// Makes the first attempt at unit `rule` that the calling thread's loop in `compile` would, its
/// rule references numbered by grammar rule (the loop maps them to compiled rules).
#[allow(clippy::too_many_arguments)]
fn build_unit_alone<'a>(
    g: &'a Grammar,
    rule: usize,
    recursive: &[bool],
    long: &[bool],
    inline: &'a dyn Fn(u32) -> Option<&'a Expr>,
    budget: usize,
    max: usize,
    deadline: Instant,
) -> AheadUnit {
    let shape = RuleShape::of(g, rule, recursive, long, budget, max);
    match shape {
        Some(shape) if shape.cached().is_some() => return AheadUnit::ShapeCached(shape),
        _ => {}
    }
    let met = std::cell::RefCell::new(Vec::new());
    let map = |r: u32| {
        let mut met = met.borrow_mut();
        if !met.contains(&r) {
            met.push(r);
        }
        Some(r)
    };
    let attempt_deadline = deadline.min(Instant::now() + INLINE_TIME);
    match automaton::build(&g.rules()[rule].expr, &map, inline, budget, attempt_deadline, finish_of(&shape)) {
        Ok(a) => AheadUnit::Built { shape, a, met: met.into_inner() },
        Err(error) => AheadUnit::Failed { shape, error },
    }
}

/// Units (`GrammarBuilder::cache_rule`: a tool's tag) that the automaton cache lacks, built on
/// worker threads once the calling thread meets the first of them as a rule, while it goes on with
/// the rest. A unit's first attempt depends on nothing built before it (the rules it references are
/// numbered by grammar rule, then mapped in the order the build met them, as a build on the
/// calling thread maps them), so units build in any order, and the compiled grammar is the same
/// whatever the number of threads. A request with 50 new tools builds them on every thread
/// [`Limits::compile_threads`] allows.
struct Ahead {
    /// The units to build, by rule.
    jobs: Vec<usize>,
    /// Each unit's position in `jobs`.
    job_of: FastMap<usize, usize>,
    /// The next job no thread has taken.
    next: AtomicUsize,
    /// What each job gave, once done (taken by the calling thread).
    built: Vec<OnceLock<Mutex<Option<AheadUnit>>>>,
    /// Set when the calling thread is done (an error): workers take no more jobs.
    stopped: AtomicBool,
    /// Worker threads to start.
    workers: usize,
}

/// Fewer units than this are built by the calling thread alone: starting a thread costs about
/// as much as building one tool (measured on W2: one new tool among 50 took 0.1 ms longer with
/// a worker).
const AHEAD_MIN_JOBS: usize = 4;

/// Threads one compile uses at most, whatever [`Limits::compile_threads`] says.
const MAX_COMPILE_THREADS: usize = 64;

/// A worker's stack: deep enough for what the calling thread's loop would do in its place.
const WORKER_STACK: usize = 8 << 20;

impl Ahead {
    /// Every unit's compact key (see [`compact_key`]), and the units to build ahead: those whose
    /// key the automaton cache lacks (one per key), when more than one thread may work.
    fn plan(g: &Grammar, budget: usize, max: usize, threads: usize) -> (FastMap<usize, Option<Vec<u32>>>, Ahead) {
        let mut keys = FastMap::default();
        let mut jobs = Vec::new();
        let mut planned: std::collections::HashSet<&[u32], BuildHasherDefault<ItemHasher>> = Default::default();
        for unit in g.cached_rules() {
            keys.insert(unit.index(), compact_key(g, unit.index(), budget, max));
        }
        if threads > 1 {
            for unit in g.cached_rules() {
                if let Some(key) = keys[&unit.index()].as_deref()
                    && cached_automaton(key).is_none()
                    && planned.insert(key)
                {
                    jobs.push(unit.index());
                }
            }
        }
        if jobs.len() < AHEAD_MIN_JOBS {
            jobs.clear();
        }
        let ahead = Ahead {
            job_of: jobs.iter().enumerate().map(|(j, &r)| (r, j)).collect(),
            next: AtomicUsize::new(0),
            built: jobs.iter().map(|_| OnceLock::new()).collect(),
            stopped: AtomicBool::new(false),
            workers: threads.min(MAX_COMPILE_THREADS).saturating_sub(1).min(jobs.len() / 2),
            jobs,
        };
        (keys, ahead)
    }

    fn is_job(&self, rule: usize) -> bool {
        self.job_of.contains_key(&rule)
    }

    /// Starts the workers (as many as the system gives, up to the plan's).
    fn start<'scope, F>(&'scope self, scope: &'scope std::thread::Scope<'scope, '_>, build: &'scope F)
    where
        F: Fn(usize) -> AheadUnit + Sync,
    {
        for _ in 0..self.workers {
            let worker = std::thread::Builder::new().name("parlance-compile".into()).stack_size(WORKER_STACK);
            if worker.spawn_scoped(scope, || self.work(build)).is_err() {
                break; // the calling thread does what is left
            }
        }
    }

    /// Takes and builds jobs until none is left.
    fn work(&self, build: &(dyn Fn(usize) -> AheadUnit + Sync)) {
        while !self.stopped.load(Ordering::Relaxed) {
            let j = self.next.fetch_add(1, Ordering::Relaxed);
            let Some(&rule) = self.jobs.get(j) else { return };
            // A panic is the calling thread's to meet (it builds the unit again): a job must be
            // done, or that thread would wait for it forever.
            let unit = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| build(rule))).ok();
            let _ = self.built[j].set(Mutex::new(unit));
        }
    }

    /// What was built ahead for `rule`, if it is a job (the calling thread helps with the jobs not
    /// yet taken, then waits for this one).
    fn result(&self, rule: usize, build: &(dyn Fn(usize) -> AheadUnit + Sync)) -> Option<AheadUnit> {
        let &j = self.job_of.get(&rule)?;
        self.work(build);
        self.built[j].wait().lock().ok()?.take()
    }

    /// A guard that stops the workers when dropped.
    fn stop_on_drop(&self) -> impl Drop + '_ {
        struct Stop<'a>(&'a AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        Stop(&self.stopped)
    }
}

/// A rule's automaton depends only on the rules it reaches (bodies, and whether each is inlined) and
/// the size budgets; `RuleShape` is that, encoded with rules numbered by first reference, so that
/// the generic rules every JSON Schema shares (any value, object, array) are built once per process.
/// Cached automata number their rule references by that local order; a grammar maps them back to
/// its own rules.
struct RuleShape {
    key: Vec<u32>,
    /// Whether the rule is a unit (`GrammarBuilder::cache_rule`).
    unit: bool,
    /// Grammar rule of each local number.
    rules: Vec<u32>,
}

/// Process-wide automata by [`RuleShape`] key.
type ShapeCache = std::sync::Mutex<ShapeEntries>;

#[derive(Default)]
struct ShapeEntries {
    map: FastMap<Vec<u32>, Arc<Automaton>>,
    /// Keys and automata, approximately.
    bytes: usize,
}

/// Empties the process-wide automaton cache (see [`RuleShape`]).
pub(crate) fn clear_shape_cache() {
    if let Ok(mut cache) = shape_cache().lock() {
        *cache = ShapeEntries::default();
    }
}

fn shape_cache() -> &'static ShapeCache {
    static CACHE: OnceLock<ShapeCache> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// Up to this many rules a shape finds a rule's position by scanning.
const SCAN_RULES: usize = 32;

/// Only rules reaching at most this many rules, with keys at most this long, are cached (whole
/// schemas are unique: encoding them would be wasted work)...
const SHAPE_MAX_RULES: usize = 16;
const SHAPE_MAX_KEY: usize = 4096;
/// ...but units (`GrammarBuilder::cache_rule`: a tool's tag), which recur across grammars.
const UNIT_MAX_RULES: usize = 1024;
const UNIT_MAX_KEY: usize = 1 << 18;
/// Automata larger than this, and entries past this count or this many bytes in all, are not
/// cached.
const SHAPE_MAX_STATES: usize = 4096;
const SHAPE_MAX_ENTRIES: usize = 4096;
const SHAPE_MAX_BYTES: usize = 256 << 20;

impl RuleShape {
    fn of(g: &Grammar, rule: usize, recursive: &[bool], long: &[bool], budget: usize, max: usize) -> Option<RuleShape> {
        // Whole schemas are unique: only small rules are worth encoding, and the rules the front
        // end marked as recurring units (a tool's tag: a request whose tools were all seen before
        // builds none of them again), whatever their size.
        let unit = g.cached_rules().binary_search(&crate::grammar::RuleId(rule as u32)).is_ok();
        let (max_rules, max_key) = if unit { (UNIT_MAX_RULES, UNIT_MAX_KEY) } else { (SHAPE_MAX_RULES, SHAPE_MAX_KEY) };
        let mut rules: Vec<u32> = vec![rule as u32];
        // Each rule's position in `rules`, once there are many (a unit may reach hundreds of rules,
        // referenced thousands of times: a scan per reference would be quadratic; for a few rules
        // the scan is cheaper).
        let mut position: FastMap<u32, u32> = FastMap::default();
        let mut key: Vec<u32> = vec![budget as u32, max as u32];
        let mut i = 0;
        while i < rules.len() {
            let r = rules[i] as usize;
            key.push(u32::MAX - 1);
            key.push(recursive[r] as u32 | (long[r] as u32) << 1);
            let mut local = |x: u32| {
                if rules.len() <= SCAN_RULES {
                    if let Some(p) = rules.iter().position(|&y| y == x) {
                        return p as u32;
                    }
                    rules.push(x);
                    if rules.len() > SCAN_RULES {
                        position.extend(rules.iter().enumerate().map(|(p, &y)| (y, p as u32)));
                    }
                    return rules.len() as u32 - 1;
                }
                *position.entry(x).or_insert_with(|| {
                    rules.push(x);
                    rules.len() as u32 - 1
                })
            };
            encode_expr(&g.rules()[r].expr, &mut local, &mut key, max_key);
            if rules.len() > max_rules || key.len() > max_key {
                return None;
            }
            i += 1;
        }
        Some(RuleShape { key, unit, rules })
    }

    /// A structural key of the tables this shape builds when they reference no rule (see
    /// `Automaton::preset_shallow_key`): the shape itself, under a tag no encoding of tables
    /// starts with. Such a shape builds equal tables every time (the subset construction is
    /// deterministic; with references its state numbers follow the grammar's rule ids).
    fn table_key(&self) -> (u64, Arc<[u32]>) {
        let mut key = Vec::with_capacity(self.key.len() + 1);
        key.push(u32::MAX - 11);
        key.extend_from_slice(&self.key);
        (automaton::key_hash(&key), key.into())
    }

    fn cached(&self) -> Option<Arc<Automaton>> {
        cached_automaton(&self.key)
    }

    /// Caches `a`, whose rule references are compiled ids (`grammar_rule` maps them back).
    fn store(&self, a: &Automaton, grammar_rule: &dyn Fn(u32) -> Option<u32>) {
        // Every reference must be one of the shape's rules, or the entry would differ.
        let Some(positions) = a
            .rules()
            .iter()
            .map(|&id| grammar_rule(id).and_then(|r| self.rules.iter().position(|&x| x == r)).map(|p| p as u32))
            .collect::<Option<Vec<u32>>>()
        else {
            return;
        };
        keep_automaton(self.key.clone(), a.with_rules(positions));
    }
}

/// The process-wide cache's automaton under `key` (a shape's, or a unit's `compact_key`).
fn cached_automaton(key: &[u32]) -> Option<Arc<Automaton>> {
    shape_cache().lock().ok()?.map.get(key).cloned()
}

/// Keeps `a` under `key` in the process-wide cache, when it is small enough and the cache has
/// room.
fn keep_automaton(key: Vec<u32>, a: Automaton) {
    if a.len() > SHAPE_MAX_STATES {
        return;
    }
    let Ok(mut cache) = shape_cache().lock() else { return };
    let bytes = key.len() * 4 + a.approx_bytes();
    // Another grammar may have kept equal tables under this key meanwhile: counted once.
    if cache.map.len() < SHAPE_MAX_ENTRIES && cache.bytes + bytes <= SHAPE_MAX_BYTES && !cache.map.contains_key(&key) {
        cache.bytes += bytes;
        cache.map.insert(key, Arc::new(a));
    }
}

/// The key of a unit whose body refers to no rule but roots of imported grammars (a tool's tag:
/// its begin and end around its schema's grammar): the body's encoding, then each import's serial
/// and extent. An import's rules are the copy of a grammar that never changes, so its serial
/// stands for everything the unit reaches: equal keys build equal automata (the flags of each
/// rule reached, and so what is inlined, follow from the copied grammar too). Apart from every
/// shape key by its first number. `None` for any other rule.
fn compact_key(g: &Grammar, rule: usize, budget: usize, max: usize) -> Option<Vec<u32>> {
    let mut imports: Vec<&crate::grammar::Import> = Vec::new();
    let mut closed = true;
    let mut key = vec![u32::MAX - 12, budget as u32, max as u32];
    encode_expr(
        &g.rules()[rule].expr,
        &mut |r| match g.import_rooted_at(RuleId(r)) {
            Some(import) => match imports.iter().position(|i| i.root == import.root) {
                Some(at) => at as u32,
                None => {
                    imports.push(import);
                    imports.len() as u32 - 1
                }
            },
            None => {
                closed = false;
                0
            }
        },
        &mut key,
        SHAPE_MAX_KEY,
    );
    if !closed || key.len() > SHAPE_MAX_KEY {
        return None;
    }
    for import in imports {
        let serial = import.serial.0;
        key.extend([serial as u32, (serial >> 32) as u32, import.root.0 - import.first, import.len]);
    }
    Some(key)
}

/// A canonical encoding of `e`, rule references through `local`.
fn encode_expr(e: &Expr, local: &mut dyn FnMut(u32) -> u32, out: &mut Vec<u32>, limit: usize) {
    const END: u32 = u32::MAX;
    if out.len() > limit {
        return; // too long to be cached: the caller gives up
    }
    match e {
        Expr::Empty => out.push(0),
        Expr::Literal(s) => {
            out.extend([1, s.len() as u32]);
            out.extend(s.bytes().map(u32::from));
        }
        Expr::CharClass { negated, ranges } => {
            out.extend([2, *negated as u32, ranges.len() as u32]);
            for &(a, b) in ranges {
                out.extend([a as u32, b as u32]);
            }
        }
        Expr::Rule(r) => out.extend([3, local(r.0)]),
        Expr::Seq(p) | Expr::Alt(p) => {
            out.push(if matches!(e, Expr::Seq(_)) { 4 } else { 5 });
            for x in p {
                encode_expr(x, local, out, limit);
            }
            out.push(END);
        }
        Expr::Repeat { expr, min, max } => {
            out.extend([6, *min, max.map_or(u32::MAX, |m| m)]);
            encode_expr(expr, local, out, limit);
        }
        Expr::Regex(s) => {
            out.extend([7, s.len() as u32]);
            out.extend(s.bytes().map(u32::from));
        }
        Expr::Restrict { base, and, not } => {
            out.extend([8, and.len() as u32, not.len() as u32]);
            encode_expr(base, local, out, limit);
            for x in and.iter().chain(not) {
                encode_expr(x, local, out, limit);
            }
        }
        Expr::Token(id) => out.extend([10, *id]),
        Expr::TagDispatch(d) => {
            let strings = |list: &[String], out: &mut Vec<u32>| {
                out.push(list.len() as u32);
                for s in list {
                    out.push(s.len() as u32);
                    out.extend(s.bytes().map(u32::from));
                }
            };
            out.extend([9, d.stop_eos as u32, d.loop_after_dispatch as u32, d.tags.len() as u32]);
            for (trigger, rest) in &d.tags {
                match trigger {
                    crate::grammar::Trigger::Text(text) => strings(std::slice::from_ref(text), out),
                    crate::grammar::Trigger::Token(id) => out.extend([u32::MAX - 2, *id]),
                }
                encode_expr(rest, local, out, limit);
            }
            strings(&d.excludes, out);
            strings(&d.stop_strings, out);
        }
    }
}

/// Whether `e` holds a bounded repetition with more than [`LONG_REPEAT`] copies.
fn has_long_repeat(e: &Expr) -> bool {
    match e {
        Expr::Repeat { expr, min, max } => max.unwrap_or(*min) > LONG_REPEAT || has_long_repeat(expr),
        Expr::Seq(p) | Expr::Alt(p) => p.iter().any(has_long_repeat),
        Expr::Restrict { base, and, not } => has_long_repeat(base) || and.iter().chain(not).any(has_long_repeat),
        Expr::TagDispatch(d) => d.tags.iter().any(|(_, e)| has_long_repeat(e)),
        _ => false,
    }
}

/// See [`has_long_repeat`].
const LONG_REPEAT: u32 = 256;

/// Rules with at least one complete derivation.
fn productive_rules(rules: &[Automaton]) -> Vec<bool> {
    rules_reaching_final(rules, true)
}

/// Rules that match the empty string.
fn nullable_rules(rules: &[Automaton]) -> Vec<bool> {
    rules_reaching_final(rules, false)
}

/// Rules whose automaton reaches a final state through byte edges (if `use_bytes`) and edges of
/// rules already known to qualify. One search per automaton, resumed where a rule edge waited for its
/// rule: linear in the automata, however the rules are ordered (a chain of rules each needing the
/// next would otherwise take one pass over every automaton per link).
fn rules_reaching_final(rules: &[Automaton], use_bytes: bool) -> Vec<bool> {
    let mut done = vec![false; rules.len()];
    // A rule without references qualifies by its own tables (answered once per shared automaton,
    // not searched again by every grammar holding it).
    let mut seen: Vec<Vec<bool>> =
        rules.iter().map(|a| if a.has_rule_edges() { vec![false; a.len()] } else { Vec::new() }).collect();
    // Per rule, the (caller, target state) edges waiting for it to qualify.
    let mut waiting: Vec<Vec<(u32, u32)>> = vec![Vec::new(); rules.len()];
    let mut stack: Vec<(u32, u32)> = Vec::new();
    for (i, a) in rules.iter().enumerate() {
        if !a.has_rule_edges() {
            done[i] = a.len() > 0 && if use_bytes { a.reaches_final() } else { a.is_final(0) };
        } else if a.len() > 0 {
            seen[i][0] = true;
            stack.push((i as u32, 0));
        }
    }
    while let Some((i, s)) = stack.pop() {
        let (iu, a) = (i as usize, &rules[i as usize]);
        if done[iu] {
            continue;
        }
        if a.is_final(s) {
            done[iu] = true;
            for (caller, t) in std::mem::take(&mut waiting[iu]) {
                if !done[caller as usize] && !std::mem::replace(&mut seen[caller as usize][t as usize], true) {
                    stack.push((caller, t));
                }
            }
            continue;
        }
        if use_bytes {
            automaton::for_each_live(a.class_targets(s), |_, t| {
                if !std::mem::replace(&mut seen[iu][t as usize], true) {
                    stack.push((i, t));
                }
            });
        }
        for (r, t) in a.rule_edges(s) {
            if seen[iu][t as usize] {
                continue;
            }
            if done[r as usize] {
                seen[iu][t as usize] = true;
                stack.push((i, t));
            } else {
                waiting[r as usize].push((i, t));
            }
        }
    }
    done
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::matcher::Matcher;

    thread_local! {
        /// Units built ahead whose tables a compile on this thread used.
        pub(crate) static BUILT_AHEAD_USED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// One vocabulary (one mask pool) for the tests that need grammars to share entries.
    fn vocab_shared() -> Arc<TokenVocab> {
        static VOCAB: OnceLock<Arc<TokenVocab>> = OnceLock::new();
        VOCAB.get_or_init(vocab).clone()
    }

    fn vocab() -> Arc<TokenVocab> {
        let mut toks: Vec<Vec<u8>> = (0x20u8..0x7f).map(|b| vec![b]).collect();
        toks.push(b"<eos>".to_vec());
        let eos = toks.len() as u32 - 1;
        Arc::new(TokenVocab::new(toks, &[], &[eos]).expect("valid"))
    }

    /// The compiled rules whose name starts with `prefix`.
    fn rules_named(g: &CompiledGrammar, prefix: &str) -> Vec<usize> {
        (0..g.names.len()).filter(|&i| g.names[i].starts_with(prefix)).collect()
    }

    fn accepts(g: &Arc<CompiledGrammar>, text: &str) -> bool {
        let mut m = Matcher::new(g.clone()).expect("matcher");
        m.accept_bytes(text.as_bytes()) && m.is_accepting()
    }

    #[test]
    fn unshared_automata_skip_minimization_and_keep_exact_masks() {
        // The root reaches more rules than a shape can hold: it is built once for this grammar,
        // not minimized, and its mask entries are not pooled; masks must still be exact.
        let mut text = String::from("root ::= \"{\" f0");
        for i in 0..SHAPE_MAX_RULES + 2 {
            text.push_str(&format!(" (\",\" f{})?", i + 1));
        }
        text.push_str(" \"}\"\n");
        for i in 0..SHAPE_MAX_RULES + 3 {
            text.push_str(&format!("f{i} ::= \"k{i}:\" ([a-c] | \"x\" [0-9]+ | \"yy\")\n"));
        }
        let g = Arc::new(CompiledGrammar::new(vocab(), &Grammar::parse(&text).expect("parses")).expect("compiles"));
        assert_eq!(g.tables.rules.len(), 1, "everything inlined");
        assert!(!g.tables.rules[0].recurs());
        let vocab = g.vocab.clone();
        let mut words = vec![0u32; vocab.mask_words()];
        let mut m = Matcher::new(g.clone()).expect("matcher");
        let mut state = 0x5eedu64;
        for step in 0..40 {
            m.fill_next_token_bitmask(&mut words).expect("mask");
            let mut allowed = Vec::new();
            for id in 0..vocab.len() as u32 {
                let brute = m.clone().accept_token(id);
                assert_eq!(words[id as usize / 32] >> (id % 32) & 1 == 1, brute, "step {step}, token {id}");
                if brute && !vocab.eos_ids().contains(&id) {
                    allowed.push(id);
                }
            }
            if allowed.is_empty() {
                break;
            }
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            assert!(m.accept_token(allowed[(state >> 33) as usize % allowed.len()]));
        }
        assert!(accepts(&g, "{k0:a,k3:x12,k18:yy}"));
        assert!(!accepts(&g, "{k0:a,k3:x,k18:yy}"));
    }

    #[test]
    fn rules_of_equal_shape_reuse_one_automaton_across_grammars() {
        // `list` recurses (stays a rule, with references to `item`); the two grammars number their
        // rules differently, so the cached copy must be mapped back to each grammar's own rules.
        let a =
            Grammar::parse("root ::= \"<\" list \">\"\nlist ::= item (\",\" list)?\nitem ::= [a-c] | \"(\" list \")\"")
                .expect("parses");
        let b = Grammar::parse(
            "root ::= \"[\" other \"|\" list \"]\"\nother ::= \"z\"+\nlist ::= item (\",\" list)?\nitem ::= [a-c] | \"(\" list \")\"",
        )
        .expect("parses");
        let list_b = b.rules().iter().position(|r| r.name == "list").expect("list");
        let recursive = recursive_rules(&b);
        let long = vec![false; b.rules().len()];
        let limits = Limits::default();
        let budget = limits.automaton_states.min(INLINE_STATES);
        let shape = RuleShape::of(&b, list_b, &recursive, &long, budget, limits.automaton_states).expect("small");
        let ga = Arc::new(CompiledGrammar::new(vocab(), &a).expect("compiles"));
        assert!(shape.cached().is_some(), "compiling `a` cached `list`");
        let gb = Arc::new(CompiledGrammar::new(vocab(), &b).expect("compiles"));
        for (g, good, bad) in [(&ga, "<a,(b,c)>", "<a,(b,)>"), (&gb, "[zz|a,(b,(c))]", "[z|a,(z)]")] {
            assert!(accepts(g, good), "{good}");
            assert!(!accepts(g, bad), "{bad}");
        }
        // `b` took the cached tables themselves, not a copy.
        let list = gb.names.iter().position(|n| n == "list").expect("list is a rule");
        assert!(gb.tables.rules[list].shares_tables(&shape.cached().expect("cached")));
        // A grammar with a rule that never completes drops the edges to it, and copies only the
        // tables that had one.
        let c = Grammar::parse(
            "root ::= \"{\" list \"}\" | dead\ndead ::= \"d\" dead\nlist ::= item (\",\" list)?\nitem ::= [a-c] | \"(\" list \")\"",
        )
        .expect("parses");
        let gc = Arc::new(CompiledGrammar::new(vocab(), &c).expect("compiles"));
        let list = gc.names.iter().position(|n| n == "list").expect("list is a rule");
        assert!(gc.tables.rules[list].shares_tables(&shape.cached().expect("cached")));
        assert!(accepts(&gc, "{a,(b)}") && !accepts(&gc, "dd"));
    }

    #[test]
    fn a_unit_with_references_is_keyed_by_its_tables_not_its_shape() {
        // `u ::= a "x" | b "y"` with `a` and `b` recursive (kept as references): the subset
        // construction numbers u's states by the grammar's rule ids, which differ between a
        // grammar that meets `a` first and one that meets `b` first. Built twice (the automaton
        // cache emptied in between, the mask pool not), the second grammar's masks must be its own.
        let grammar = |b_first: bool| {
            let mut g = Grammar::builder();
            let root = g.declare("root");
            let (a, b) = if b_first {
                let b = g.declare("b");
                (g.declare("a"), b)
            } else {
                let a = g.declare("a");
                (a, g.declare("b"))
            };
            g.define(a, Expr::alt(vec![Expr::seq(vec![Expr::literal("a"), Expr::Rule(a)]), Expr::literal("")]));
            g.define(b, Expr::alt(vec![Expr::seq(vec![Expr::literal("b"), Expr::Rule(b)]), Expr::literal("")]));
            let u = g.rule(
                "u",
                Expr::alt(vec![
                    Expr::seq(vec![Expr::Rule(a), Expr::literal("x")]),
                    Expr::seq(vec![Expr::Rule(b), Expr::literal("y")]),
                ]),
            );
            g.keep_rule(u);
            g.cache_rule(u);
            let head = if b_first { Expr::seq(vec![Expr::Rule(b), Expr::literal("-")]) } else { Expr::Empty };
            g.define(root, Expr::seq(vec![head, Expr::Rule(u)]));
            Arc::new(CompiledGrammar::new(vocab_shared(), &g.build(root).expect("grammar")).expect("compiles"))
        };
        // The next characters the mask allows after `prefix` (the test vocabulary's tokens are
        // single printable characters).
        let allowed = |g: &Arc<CompiledGrammar>, prefix: &str| -> String {
            let mut m = Matcher::new(g.clone()).expect("matcher");
            assert!(m.accept_bytes(prefix.as_bytes()), "{prefix}");
            let mut mask = vec![0u32; g.vocab.mask_words()];
            m.fill_next_token_bitmask(&mut mask).expect("mask");
            (0x20u8..0x7f)
                .filter(|&b| mask[(b - 0x20) as usize / 32] >> ((b - 0x20) % 32) & 1 == 1)
                .map(char::from)
                .collect()
        };
        let first = grammar(false);
        assert_eq!(allowed(&first, "a"), "ax");
        assert_eq!(allowed(&first, "b"), "by");
        clear_shape_cache();
        let second = grammar(true);
        assert_eq!(allowed(&second, "b-a"), "ax");
        assert_eq!(allowed(&second, "b-b"), "by");
        for (text, ok) in [("b-bby", true), ("b-y", true), ("b-x", true), ("b-bbx", false), ("-aay", false)] {
            assert_eq!(accepts(&second, text), ok, "{text}");
        }
    }

    #[test]
    fn a_unit_around_imported_grammars_is_known_by_their_serials() {
        // A tool's tag holds its schema's grammar, imported whole: a second grammar with the same
        // tag finds the tag's automaton by the import's serial, without encoding what it reaches;
        // a grammar that changed an imported rule after importing it is not taken for it.
        let schema = Grammar::parse("root ::= \"{\" item (\",\" item)* \"}\"\nitem ::= [a-c]").expect("parses");
        let build = |schema: &Grammar, other: &str, change: bool| -> (Grammar, usize) {
            let mut b = Grammar::builder();
            let imported = b.import(schema);
            if change {
                b.define(RuleId(imported.0 + 1), Expr::literal("z"));
            }
            let body = Expr::seq(vec![Expr::literal("<t>"), Expr::Rule(imported), Expr::literal("</t>")]);
            let unit = b.rule("tag", body);
            b.cache_rule(unit);
            b.keep_rule(unit);
            let root = b.rule("root", Expr::alt(vec![Expr::Rule(unit), Expr::literal(other)]));
            (b.build(root).expect("builds"), unit.index())
        };
        let limits = Limits::default();
        let budget = limits.automaton_states.min(INLINE_STATES);
        let key = |g: &Grammar, unit: usize| compact_key(g, unit, budget, limits.automaton_states);
        let cached = |k: &Vec<u32>| shape_cache().lock().expect("lock").map.get(k).cloned();
        let unit_tables = |g: &CompiledGrammar| g.names.iter().position(|n| n == "tag").expect("the tag is a rule");
        let (a, unit_a) = build(&schema, "x", false);
        let ga = Arc::new(CompiledGrammar::new(vocab(), &a).expect("compiles"));
        let key_a = key(&a, unit_a).expect("a unit of imports");
        let entry = cached(&key_a).expect("compiling `a` cached the tag by its imports");
        let (b, unit_b) = build(&schema, "y", false);
        assert_eq!(key(&b, unit_b).as_ref(), Some(&key_a), "the same tag around the same import");
        let gb = Arc::new(CompiledGrammar::new(vocab(), &b).expect("compiles"));
        assert!(gb.tables.rules[unit_tables(&gb)].shares_tables(&entry), "`b` took the cached tables");
        for g in [&ga, &gb] {
            assert!(accepts(g, "<t>{a,b}</t>") && !accepts(g, "<t>{z}</t>"));
        }
        // Changed after the import: no longer that import, so not that automaton.
        let (c, unit_c) = build(&schema, "y", true);
        assert_eq!(key(&c, unit_c), None);
        let gc = Arc::new(CompiledGrammar::new(vocab(), &c).expect("compiles"));
        assert!(accepts(&gc, "<t>{z,z}</t>") && !accepts(&gc, "<t>{a}</t>"));
        // The same text parsed again is another grammar: another key (equal content, no sharing
        // by content here; the shape cache may still find it by encoding).
        let again = Grammar::parse("root ::= \"{\" item (\",\" item)* \"}\"\nitem ::= [a-c]").expect("parses");
        let (d, unit_d) = build(&again, "x", false);
        assert_ne!(key(&d, unit_d), Some(key_a));
        assert!(accepts(&Arc::new(CompiledGrammar::new(vocab(), &d).expect("compiles")), "<t>{c}</t>"));
    }

    #[test]
    fn schemas_inside_a_choice_are_units_shared_by_the_next_request() {
        // gpt-oss's shape: a choice of messages, one per tool. A request with one more tool takes
        // the other tool's schema automaton as it is; the masks stay exact.
        let message = |name: &str, schema: &str| {
            format!(
                r#"{{"type":"tag","begin":"<{name}>","content":{{"type":"json_schema","json_schema":{schema}}},"end":"</m>"}}"#
            )
        };
        let a_tool = message("a", r#"{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}"#);
        let b_tool = message("b", r#"{"type":"object","properties":{"y":{"enum":["p","q"]}},"required":["y"]}"#);
        let doc = |elements: &[&String]| {
            let one = format!(
                r#"{{"type":"or","elements":[{}]}}"#,
                elements.iter().map(|e| e.as_str()).collect::<Vec<_>>().join(",")
            );
            let doc = format!(r#"{{"type":"structural_tag","format":{one}}}"#);
            serde_json::from_str::<serde_json::Value>(&doc).expect("JSON")
        };
        let options = crate::StructuralTagOptions::default();
        let compile = |d: &serde_json::Value| {
            Arc::new(CompiledGrammar::from_structural_tag(vocab(), d, &options).expect("compiles"))
        };
        let first = compile(&doc(&[&a_tool, &message("c", r#"{"type":"string"}"#)]));
        let second = compile(&doc(&[&a_tool, &b_tool]));
        let units = |g: &CompiledGrammar| rules_named(g, "choice");
        assert_eq!(units(&first).len(), 2, "one unit per schema: {:?}", first.names);
        assert_eq!(units(&second).len(), 2, "{:?}", second.names);
        let shared = units(&second)
            .iter()
            .any(|&i| units(&first).iter().any(|&j| second.tables.rules[i].shares_tables(&first.tables.rules[j])));
        assert!(shared, "the `a` schema's automaton is reused, not rebuilt");
        for (text, ok) in [
            (r#"<a>{"x": 5}</m>"#, true),
            (r#"<b>{"y": "q"}</m>"#, true),
            (r#"<a>{"y": "q"}</m>"#, false),
            (r#"<b>{"y": "r"}</m>"#, false),
            (r#"<c>"s"</m>"#, false),
        ] {
            assert_eq!(accepts(&second, text), ok, "{text}");
        }
    }

    #[test]
    fn units_built_ahead_are_the_units_built_in_order() {
        // Tools no other test has, every one new: with four threads, workers build them. The
        // grammar must be the one a single thread builds: the same rules in the same order, the
        // same tables, the same language. (The single-thread compile runs under another state
        // limit, which is part of every cache key: it builds everything again.)
        let tag = |i: usize| {
            format!(
                r#"{{"type":"tag","begin":"<ahead{i}>","content":{{"type":"json_schema","json_schema":{{"type":"object","properties":{{"ahead_{i}":{{"type":"integer"}},"b":{{"enum":["p{i}","q"]}}}},"required":["ahead_{i}"]}}}},"end":"</a>"}}"#
            )
        };
        let tags: Vec<String> = (0..24).map(tag).collect();
        let text = format!(
            r#"{{"type":"structural_tag","format":{{"type":"triggered_tags","triggers":["<ahead"],"tags":[{}]}}}}"#,
            tags.join(",")
        );
        let doc = crate::structural_tag::parse_document(&text).expect("JSON");
        let g = crate::structural_tag::lower(&doc, &crate::StructuralTagOptions::default(), None).expect("lowers");
        let ahead_limits = Limits { compile_threads: 4, automaton_states: 199_999, ..Limits::default() };
        let alone_limits = Limits { compile_threads: 1, automaton_states: 199_998, ..Limits::default() };
        let budget = ahead_limits.automaton_states.min(INLINE_STATES);
        let (_, ahead) = Ahead::plan(&g, budget, ahead_limits.automaton_states, 4);
        assert_eq!(ahead.jobs.len(), 24, "every tool's unit is new: {:?}", ahead.jobs);
        assert_eq!(ahead.workers, 3);
        let (_, alone) = Ahead::plan(&g, budget, ahead_limits.automaton_states, 1);
        assert!(alone.jobs.is_empty(), "one thread builds nothing ahead");

        BUILT_AHEAD_USED.with(|n| n.set(0));
        let with_workers = Arc::new(CompiledGrammar::with_limits(vocab(), &g, ahead_limits).expect("compiles"));
        assert_eq!(BUILT_AHEAD_USED.with(|n| n.get()), 24, "every unit's tables came from a worker");
        let alone = Arc::new(CompiledGrammar::with_limits(vocab(), &g, alone_limits).expect("compiles"));
        assert_eq!(BUILT_AHEAD_USED.with(|n| n.get()), 24, "one thread builds nothing ahead");
        assert_eq!(with_workers.names, alone.names, "the same rules, in the same order");
        let encoded = |a: &Automaton| {
            let mut out = Vec::new();
            a.encode_local(&mut |r| r, &mut out);
            (out, a.rules().to_vec())
        };
        let mut references = 0;
        for (i, name) in alone.names.iter().enumerate() {
            let (got, want) = (&with_workers.tables.rules[i], &alone.tables.rules[i]);
            assert_eq!(got.len(), want.len(), "rule {name}");
            references += got.rules().len();
            // Tables with references may number their states by the references' order, which
            // differs (grammar rules against compiled rules); the others are equal.
            if !got.has_rule_edges() {
                assert_eq!(encoded(got), encoded(want), "rule {name}");
            }
        }
        // Objects admit more properties (any JSON value: a recursive rule): references to map.
        assert!(references >= 24, "{references}");
        for (text, ok) in [
            (r#"<ahead3>{"ahead_3": 5}</a>"#, true),
            (r#"<ahead3>{"ahead_3": 5, "b": "p3"}</a>"#, true),
            (r#"<ahead17>{"ahead_17": -2, "b": "q", "x": [1, {"y": null}]}</a>"#, true),
            (r#"<ahead3>{"ahead_3": 5, "b": "p4"}</a>"#, false),
            (r#"<ahead3>{"ahead_4": 5}</a>"#, false),
        ] {
            assert_eq!(accepts(&with_workers, text), ok, "{text}");
            assert_eq!(accepts(&alone, text), ok, "{text}");
        }
    }

    #[test]
    fn units_built_ahead_map_their_references_as_a_build_in_order_does() {
        // Each unit meets its references in another order than they were declared in, one of them
        // (`c`) behind an empty class, which its tables drop. A build on the calling thread maps the
        // rules as it meets them, `c` included; a worker's must be mapped the same way, or the
        // grammar (its rules, their order, what can fail to compile) would depend on the threads.
        let recursive = |c: &str| Grammar::parse(&format!("root ::= \"{c}\" root | \"{c}\"")).expect("parses");
        let mut b = Grammar::builder();
        let (a, bb, c) = (b.import(&recursive("a")), b.import(&recursive("b")), b.import(&recursive("c")));
        let nothing = Expr::CharClass { negated: false, ranges: Vec::new() };
        let units: Vec<RuleId> = (0..6)
            .map(|i| {
                let body = Expr::seq(vec![
                    Expr::literal(format!("mapped{i}")),
                    Expr::Rule(bb),
                    Expr::Rule(a),
                    Expr::alt(vec![Expr::literal("."), Expr::seq(vec![nothing.clone(), Expr::Rule(c)])]),
                ]);
                let u = b.rule("unit", body);
                b.keep_rule(u);
                b.cache_rule(u);
                u
            })
            .collect();
        let root = b.rule("root", Expr::alt(units.iter().map(|&u| Expr::Rule(u)).collect()));
        let g = b.build(root).expect("builds");
        BUILT_AHEAD_USED.with(|n| n.set(0));
        let ahead_limits = Limits { compile_threads: 4, automaton_states: 199_997, ..Limits::default() };
        let with_workers = CompiledGrammar::with_limits(vocab(), &g, ahead_limits).expect("compiles");
        assert_eq!(BUILT_AHEAD_USED.with(|n| n.get()), 6, "every unit came from a worker");
        let alone_limits = Limits { compile_threads: 1, automaton_states: 199_996, ..Limits::default() };
        let alone = CompiledGrammar::with_limits(vocab(), &g, alone_limits).expect("compiles");
        assert_eq!(with_workers.names, alone.names);
        // Sequences are built from their end: `c` is met first, then `a`, then `b` (the imports'
        // roots are `root`, `root-2`, `root-3`; the grammar's own is `root-4`). `c` is a rule
        // although no table refers to it.
        let referenced: Vec<&str> = alone.names[7..].iter().map(String::as_str).collect();
        assert_eq!(referenced, ["root-3", "root", "root-2"], "{:?}", alone.names);
    }

    #[test]
    fn a_choice_of_tags_is_cut_after_each_header_into_units_the_next_request_shares() {
        // gpt-oss's shape, `tags_with_separator` of messages: each tag's rest after its header (the
        // markers, the schema, the end) is a unit; the choice is the trie of the headers. A
        // request with one more tool takes the other tools' units as they are.
        let tag = |i: usize| {
            format!(
                r#"{{"type":"tag","begin":"<m>","content":{{"type":"sequence","elements":[{{"type":"const_string","value":"to=cut{i} "}},{{"type":"const_string","value":"<json>"}},{{"type":"json_schema","json_schema":{{"type":"object","properties":{{"cut_{i}":{{"type":"integer"}}}},"required":["cut_{i}"],"additionalProperties":false}}}}]}},"end":"</m>"}}"#
            )
        };
        let doc = |n: usize| {
            let tags: Vec<String> = (0..n).map(tag).collect();
            format!(
                r#"{{"type":"structural_tag","format":{{"type":"tags_with_separator","tags":[{}],"separator":"|","at_least_one":true}}}}"#,
                tags.join(",")
            )
        };
        let options = crate::StructuralTagOptions::default();
        let compile = |text: &str| {
            Arc::new(CompiledGrammar::from_structural_tag_text(vocab(), text, &options).expect("compiles"))
        };
        let (first, second) = (compile(&doc(20)), compile(&doc(21)));
        let units = |g: &CompiledGrammar| rules_named(g, "message");
        assert_eq!(units(&first).len(), 20, "{:?}", first.names);
        assert_eq!(units(&second).len(), 21, "{:?}", second.names);
        let shared = units(&second)
            .iter()
            .filter(|&&i| units(&first).iter().any(|&j| second.tables.rules[i].shares_tables(&first.tables.rules[j])))
            .count();
        assert_eq!(shared, 20, "every unit of the first request is reused");
        for (text, ok) in [
            (r#"<m>to=cut3 <json>{"cut_3": 5}</m>"#, true),
            (r#"<m>to=cut20 <json>{"cut_20": 5}</m>|<m>to=cut0 <json>{"cut_0": -1}</m>"#, true),
            (r#"<m>to=cut3 <json>{"cut_4": 5}</m>"#, false),
            (r#"<m>to=cut3 {"cut_3": 5}</m>"#, false),
            (r#"<m>to=cut3 <json>{"cut_3": 5}"#, false),
        ] {
            assert_eq!(accepts(&second, text), ok, "{text}");
        }
        assert!(!accepts(&first, r#"<m>to=cut20 <json>{"cut_20": 5}</m>"#));
    }

    #[test]
    fn a_schema_spelled_two_ways_is_one_import_from_text_as_from_value() {
        // Found by the grammar fuzz target: from its text, the second spelling (a space before a
        // colon) was lowered and imported again, so the text gave another grammar than the value.
        let text = r#"{"type":"structural_tag","format":{"type":"triggered_tags","triggers":["<f"],"tags":[
            {"begin":"<f0>","content":{"type":"json_schema","json_schema":{"type":"object","properties":{"spelled":{"type":"integer"}}}},"end":"</f>"},
            {"begin":"<f1>","content":{"type":"json_schema","json_schema":{"type" :"object","properties":{"spelled":{"type":"integer"}}}},"end":"</f>"}]}}"#;
        let options = crate::StructuralTagOptions::default();
        let value: serde_json::Value = serde_json::from_str(text).expect("JSON");
        let from_value = crate::structural_tag::structural_tag_to_grammar(&value, &options).expect("lowers");
        let from_text = crate::structural_tag::structural_tag_text_to_grammar(text, &options).expect("lowers");
        assert_eq!(from_text.to_string(), from_value.to_string());
        assert_eq!(from_text.to_string().matches("spelled").count(), 1, "{from_text}");
    }
}
