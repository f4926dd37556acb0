//! Grammar IR: named rules over literals, character classes, regex terminals and rule references.
//!
//! Every front end (the EBNF/GBNF text parser in [`parse`], JSON Schema, callers building grammars by
//! hand with [`GrammarBuilder`]) lowers into [`Grammar`]; the automaton compiler is its only consumer.
//! [`Grammar`]'s `Display` prints the text syntax back, so that `parse(print(g)) == g` for grammars
//! without token budgets or kept rules (decoding and compiling hints the text syntax has no form for;
//! the printer notes them in comments) and without recorded origins (what a front end made each rule
//! for, e.g. a JSON Schema keyword's pointer, so compile errors name that instead of the rule).

mod parse;
mod print;

pub use parse::GrammarError;

use crate::earley::FastMap;
use std::sync::Arc;

/// Index of a rule inside one [`Grammar`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(pub u32);

impl RuleId {
    /// The index as `usize`, for indexing rule tables.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// One grammar expression. Literals and classes are Unicode text (matched as UTF-8 bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Expr {
    /// Matches the empty string.
    Empty,
    /// Matches exactly this text.
    Literal(String),
    /// Matches one character in (or, if `negated`, outside) the inclusive ranges.
    CharClass {
        /// Whether the class is complemented (`[^...]`); `.` is the negated empty class.
        negated: bool,
        /// Inclusive character ranges.
        ranges: Vec<(char, char)>,
    },
    /// Matches the text of another rule.
    Rule(RuleId),
    /// Matches its parts one after another.
    Seq(Vec<Expr>),
    /// Matches any one of its alternatives.
    Alt(Vec<Expr>),
    /// Matches `expr` between `min` and `max` (unbounded if `None`) times.
    Repeat {
        /// The repeated expression.
        expr: Box<Expr>,
        /// Minimum count.
        min: u32,
        /// Maximum count, `None` for unbounded.
        max: Option<u32>,
    },
    /// A regular expression in `regex-syntax` syntax, matched against the whole terminal (anchored).
    Regex(String),
    /// Strings of `base` that also match every expression in `and` and none in `not`. All parts must
    /// be regular (no rule references). Built as a product automaton; the text syntax has no form for
    /// it (the printer writes `(base & a & !b)`, which the parser does not read).
    Restrict {
        /// The language restricted.
        base: Box<Expr>,
        /// Languages intersected with it.
        and: Vec<Expr>,
        /// Languages removed from it.
        not: Vec<Expr>,
    },
    /// Free text watched for trigger strings, each starting its tag (see [`TagDispatch`]).
    TagDispatch(Box<TagDispatch>),
    /// Exactly this special token (by id): one token with no text meaning, never matched by a
    /// literal holding its text, nor produced by free text.
    Token(u32),
}

/// What a [`TagDispatch`] tag starts with.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Trigger {
    /// Text, matched where free text spells it.
    Text(String),
    /// A special token, matched where the model writes that token.
    Token(u32),
}

impl Trigger {
    /// The bytes the automata match for it.
    pub(crate) fn bytes(&self) -> Vec<u8> {
        match self {
            Trigger::Text(s) => s.as_bytes().to_vec(),
            Trigger::Token(id) => special_token_bytes(*id).to_vec(),
        }
    }
}

/// First byte of a special token's bytes in the automata: never part of UTF-8, so no text (literal,
/// class, free text) can match a special token.
pub(crate) const SPECIAL_TOKEN_BYTE: u8 = 0xFF;

/// The bytes that stand for special token `id` in grammars and in the token trie.
pub(crate) fn special_token_bytes(id: u32) -> [u8; 4] {
    [SPECIAL_TOKEN_BYTE, (id >> 16) as u8, (id >> 8) as u8, id as u8]
}

/// Largest special token id the byte encoding holds.
pub(crate) const MAX_SPECIAL_TOKEN_ID: u32 = (1 << 24) - 1;

/// Free text (valid UTF-8) watched by an Aho-Corasick automaton of trigger strings, as XGrammar 2's
/// TagDispatch: where a trigger completes, free text stops and that trigger's tags take over (the
/// trigger's own bytes are the start of the tag); after the tag, free text again (`loop_after_dispatch`)
/// or the end. The first pattern to complete decides, so free text never contains a trigger, an
/// excluded string or a stop string. Free text is one automaton state per trigger prefix, never a
/// per-byte alternative: its masks cost what an unconstrained step costs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagDispatch {
    /// `(trigger, rest)`: after `trigger`, `rest` must follow (the tag's remaining begin, content and
    /// end). Several tags may share a trigger; then any of their `rest`s may follow it.
    pub tags: Vec<(Trigger, Expr)>,
    /// Strings free text may not contain.
    pub excludes: Vec<String>,
    /// Strings that end the dispatch where they complete (they are part of the output).
    pub stop_strings: Vec<String>,
    /// Whether the dispatch may end anywhere in free text (at a character boundary); without it, it
    /// ends only at a stop string or after a tag that does not loop.
    pub stop_eos: bool,
    /// After a tag, free text again; without it, the dispatch ends after its first tag.
    pub loop_after_dispatch: bool,
}

impl Expr {
    /// A literal expression, or [`Expr::Empty`] for the empty string.
    pub fn literal(text: impl Into<String>) -> Expr {
        let text = text.into();
        if text.is_empty() { Expr::Empty } else { Expr::Literal(text) }
    }

    /// A sequence, flattened to its single element or to [`Expr::Empty`] where possible.
    pub fn seq(mut parts: Vec<Expr>) -> Expr {
        parts.retain(|p| *p != Expr::Empty);
        match parts.len() {
            0 => Expr::Empty,
            1 => parts.pop().expect("one element"),
            _ => Expr::Seq(parts),
        }
    }

    /// An alternation, flattened to its single element where possible.
    pub fn alt(mut parts: Vec<Expr>) -> Expr {
        if parts.len() == 1 { parts.pop().expect("one element") } else { Expr::Alt(parts) }
    }

    /// `expr{min,max}`.
    pub fn repeat(expr: Expr, min: u32, max: Option<u32>) -> Expr {
        Expr::Repeat { expr: Box::new(expr), min, max }
    }

    /// `expr?`.
    pub fn optional(expr: Expr) -> Expr {
        Expr::repeat(expr, 0, Some(1))
    }

    /// The same expression with every rule reference passed through `f`.
    pub fn map_rules(&self, f: &dyn Fn(RuleId) -> RuleId) -> Expr {
        let all = |parts: &[Expr]| parts.iter().map(|e| e.map_rules(f)).collect::<Vec<_>>();
        match self {
            Expr::Rule(r) => Expr::Rule(f(*r)),
            Expr::Seq(p) => Expr::Seq(all(p)),
            Expr::Alt(p) => Expr::Alt(all(p)),
            Expr::Repeat { expr, min, max } => Expr::Repeat { expr: Box::new(expr.map_rules(f)), min: *min, max: *max },
            Expr::Restrict { base, and, not } => {
                Expr::Restrict { base: Box::new(base.map_rules(f)), and: all(and), not: all(not) }
            }
            Expr::TagDispatch(d) => Expr::TagDispatch(Box::new(TagDispatch {
                tags: d.tags.iter().map(|(t, e)| (t.clone(), e.map_rules(f))).collect(),
                ..(**d).clone()
            })),
            other => other.clone(),
        }
    }

    /// Calls `f` on every rule this expression references.
    pub(crate) fn for_each_rule(&self, f: &mut impl FnMut(RuleId)) {
        match self {
            Expr::Rule(r) => f(*r),
            Expr::Seq(p) | Expr::Alt(p) => p.iter().for_each(|e| e.for_each_rule(f)),
            Expr::Repeat { expr, .. } => expr.for_each_rule(f),
            Expr::Restrict { base, and, not } => {
                base.for_each_rule(f);
                and.iter().chain(not).for_each(|e| e.for_each_rule(f));
            }
            Expr::TagDispatch(d) => d.tags.iter().for_each(|(_, e)| e.for_each_rule(f)),
            _ => {}
        }
    }
}

/// What a rule was made for, recorded by the front end that lowered it, so that compile errors
/// (a limit reached, an empty language, a bad regex, the time limit) are said of the input, never of
/// the rule's internal name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Origin {
    /// JSON pointer, into a structural tag, of the `json_schema` format whose schema the rule was
    /// lowered from (`/format/content`); `None` for a schema compiled on its own.
    pub(crate) tag: Option<Arc<str>>,
    /// JSON pointer, into the schema, of the keyword (or subschema) the rule was made for
    /// (`#/properties/a/pattern`).
    pub(crate) schema: Arc<str>,
}

/// A named rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Rule name, as written in the text syntax (`[A-Za-z0-9_-]+`).
    pub name: String,
    /// The rule's body.
    pub expr: Expr,
}

/// A context-free grammar: rules plus the start rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grammar {
    rules: Vec<Rule>,
    start: RuleId,
    /// Rules that may consume at most this many tokens each time they are entered (XGrammar's
    /// `any_text.max_tokens`: a reasoning budget), sorted by rule. A bound on decoding, enforced by
    /// the `Matcher` at token boundaries, not part of the language: the text syntax does not carry
    /// it (the printer notes it in a comment).
    token_budgets: Vec<(RuleId, u32)>,
    /// Rules the compiler keeps as rules of their own, never copied into their callers (see
    /// [`GrammarBuilder::keep_rule`]), sorted. A hint on how to build automata, not part of the
    /// language: the text syntax does not carry it.
    kept: Vec<RuleId>,
    /// Rules worth caching across grammars whatever their size (see [`GrammarBuilder::cache_rule`]),
    /// sorted. A hint, like `kept`.
    units: Vec<RuleId>,
    /// Per rule (indexed by [`RuleId`], shorter when the last rules have none), what it was made for.
    /// Diagnostics only, not part of the language: the text syntax does not carry it.
    origins: Vec<Option<Origin>>,
    /// Grammars copied in whole by [`GrammarBuilder::import`], sorted by root: what lets the
    /// compiler know a tool's tag by the schema grammar it holds instead of by encoding it. A
    /// hint, like `units`.
    imports: Vec<Import>,
    /// This grammar's identity (see [`Serial`]).
    serial: Serial,
}

/// A grammar's identity: unique to each grammar built, parsed or made, so that a cache may know a
/// grammar it has seen by this number alone (grammars are immutable once built). Not part of the
/// content: equal grammars compare equal whatever their serials.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Serial(pub(crate) u64);

impl Serial {
    fn next() -> Serial {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Serial(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }
}

impl PartialEq for Serial {
    fn eq(&self, _: &Serial) -> bool {
        true
    }
}

impl Eq for Serial {}

/// A grammar copied into another whole: its rules are `first..first + len` there (the copy's
/// order), its start rule `root`, and nothing outside them refers into them but through `root`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Import {
    pub(crate) root: RuleId,
    pub(crate) first: u32,
    pub(crate) len: u32,
    /// The copied grammar's serial.
    pub(crate) serial: Serial,
}

impl Grammar {
    /// Parses the EBNF/GBNF text syntax. The start rule is `root` if defined, else the first rule.
    pub fn parse(text: &str) -> Result<Grammar, GrammarError> {
        parse::parse(text)
    }

    /// A grammar with one rule, `root ::= expr`.
    pub fn from_expr(expr: Expr) -> Grammar {
        Grammar {
            rules: vec![Rule { name: "root".into(), expr }],
            start: RuleId(0),
            token_budgets: Vec::new(),
            kept: Vec::new(),
            units: Vec::new(),
            origins: Vec::new(),
            imports: Vec::new(),
            serial: Serial::next(),
        }
    }

    /// A grammar matching exactly the regular expression `pattern` (anchored at both ends).
    pub fn from_regex(pattern: &str) -> Grammar {
        Grammar::from_expr(Expr::Regex(pattern.to_string()))
    }

    /// Starts building a grammar rule by rule.
    pub fn builder() -> GrammarBuilder {
        GrammarBuilder::default()
    }

    /// The rules, indexed by [`RuleId`].
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The start rule.
    pub fn start(&self) -> RuleId {
        self.start
    }

    /// The rule with this name, if any.
    pub fn rule_by_name(&self, name: &str) -> Option<RuleId> {
        self.rules.iter().position(|r| r.name == name).map(|i| RuleId(i as u32))
    }

    /// The rules with a token budget (see [`GrammarBuilder::set_token_budget`]), sorted by rule.
    pub fn token_budgets(&self) -> &[(RuleId, u32)] {
        &self.token_budgets
    }

    /// The rules the compiler keeps apart (see [`GrammarBuilder::keep_rule`]), sorted.
    pub fn kept_rules(&self) -> &[RuleId] {
        &self.kept
    }

    /// The rules whose automata are cached across grammars whatever their size (see
    /// [`GrammarBuilder::cache_rule`]), sorted.
    pub fn cached_rules(&self) -> &[RuleId] {
        &self.units
    }

    /// The whole grammar imported with `root` as its start, if any (see [`Import`]).
    /// This grammar's identity (see [`Serial`]).
    pub(crate) fn serial(&self) -> u64 {
        self.serial.0
    }

    pub(crate) fn import_rooted_at(&self, root: RuleId) -> Option<&Import> {
        self.imports.binary_search_by_key(&root, |i| i.root).ok().map(|at| &self.imports[at])
    }

    /// What `rule` was made for, if its front end said (see [`Origin`]).
    pub(crate) fn origin(&self, rule: RuleId) -> Option<&Origin> {
        self.origins.get(rule.index()).and_then(Option::as_ref)
    }
}

/// Builds a [`Grammar`] from rules declared first and defined later (so they may refer to each other).
#[derive(Debug, Default)]
pub struct GrammarBuilder {
    rules: Vec<Rule>,
    defined: Vec<bool>,
    /// (A grammar of 128 tools declares thousands of names: SipHash was a tenth of lowering it.)
    names: FastMap<String, u32>,
    /// Per base name, the next numeric suffix to try: declaring stays linear however many rules
    /// share a name (every tool schema has a `root`).
    next_suffix: FastMap<String, u32>,
    token_budgets: Vec<(RuleId, u32)>,
    kept: Vec<RuleId>,
    units: Vec<RuleId>,
    origins: Vec<Option<Origin>>,
    imports: Vec<Import>,
}

impl GrammarBuilder {
    /// Declares a rule named like `name` (made unique with a numeric suffix) and returns its id.
    pub fn declare(&mut self, name: &str) -> RuleId {
        // Two allocations when the name is free or taken (this runs for every rule of every tool
        // schema a document imports).
        let base: std::borrow::Cow<'_, str> = if name.is_empty() {
            "r".into()
        } else if name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
            name.into()
        } else {
            name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '-' }).collect::<String>().into()
        };
        let unique = if !self.names.contains_key(base.as_ref()) {
            base.into_owned()
        } else {
            let n = match self.next_suffix.get_mut(base.as_ref()) {
                Some(n) => n,
                None => self.next_suffix.entry(base.to_string()).or_insert(1),
            };
            loop {
                *n += 1;
                let unique = format!("{base}-{n}");
                if !self.names.contains_key(&unique) {
                    break unique;
                }
            }
        };
        let id = RuleId(self.rules.len() as u32);
        self.names.insert(unique.clone(), id.0);
        self.rules.push(Rule { name: unique, expr: Expr::Empty });
        self.defined.push(false);
        id
    }

    /// Copies every rule of `grammar` in (names made unique, references renumbered) and returns the
    /// id its start rule has here.
    pub fn import(&mut self, grammar: &Grammar) -> RuleId {
        self.import_within(grammar, None)
    }

    /// [`GrammarBuilder::import`] of a grammar lowered from the schema at `tag` (a JSON pointer into
    /// a structural tag): errors in its rules name `tag`, then the pointer into the schema.
    pub(crate) fn import_within(&mut self, grammar: &Grammar, tag: Option<&str>) -> RuleId {
        let ids: Vec<RuleId> = grammar.rules.iter().map(|r| self.declare(&r.name)).collect();
        let tag: Option<Arc<str>> = tag.map(Arc::from);
        for (i, origin) in grammar.origins.iter().enumerate() {
            if let Some(origin) = origin {
                let tag = origin.tag.clone().or_else(|| tag.clone());
                self.set_origin(ids[i], Origin { tag, schema: origin.schema.clone() });
            }
        }
        for (rule, &id) in grammar.rules.iter().zip(&ids) {
            self.define(id, rule.expr.map_rules(&|r| ids[r.index()]));
        }
        for &(rule, max_tokens) in &grammar.token_budgets {
            self.set_token_budget(ids[rule.index()], max_tokens);
        }
        for &rule in &grammar.kept {
            self.keep_rule(ids[rule.index()]);
        }
        for &rule in &grammar.units {
            self.cache_rule(ids[rule.index()]);
        }
        let root = ids[grammar.start.index()];
        // The copy's rules are declared in a row, and only they refer into it (through its root):
        // closed, as `Import` says. (The builder's callers define no imported rule again.)
        if let (Some(first), Some(last)) = (ids.first(), ids.last())
            && last.0 - first.0 + 1 == ids.len() as u32
        {
            let import = Import { root, first: first.0, len: ids.len() as u32, serial: grammar.serial };
            let at = self.imports.partition_point(|i| i.root < root);
            self.imports.insert(at, import);
        }
        root
    }

    /// Bounds the tokens `rule` may consume each time it is entered (a reasoning budget; XGrammar's
    /// `any_text.max_tokens`). The `Matcher` counts the tokens accepted since the rule began; once
    /// they reach the budget, and the rule may end there, the rule ends: only what follows it is
    /// allowed (a budget of 0 ends it where it starts). Where the rule cannot end at that token
    /// boundary (inside a character, or where its language needs more), it ends at the first
    /// boundary where it can. The rule stays a rule of its own in the compiled grammar (never
    /// inlined), since the matcher must see where it is.
    pub fn set_token_budget(&mut self, rule: RuleId, max_tokens: u32) {
        self.forget_import_of(rule);
        match self.token_budgets.binary_search_by_key(&rule, |&(r, _)| r) {
            Ok(at) => self.token_budgets[at].1 = max_tokens,
            Err(at) => self.token_budgets.insert(at, (rule, max_tokens)),
        }
    }

    /// Keeps `rule` a rule of its own in the compiled grammar: its callers refer to its automaton
    /// instead of copying it in. The language is unchanged; what changes is where the compiler cuts
    /// automata. For a front end whose rules, inlined, would be copied into many automata (a long
    /// chain of optional object members, each link reaching all the links after it).
    pub fn keep_rule(&mut self, rule: RuleId) {
        self.forget_import_of(rule);
        if let Err(at) = self.kept.binary_search(&rule) {
            self.kept.insert(at, rule);
        }
    }

    /// Marks `rule` as a unit that recurs across grammars (a tool's tag in a dispatch): the compiler
    /// caches its automaton process-wide by its shape whatever its size, so that a request whose
    /// tools were all seen before builds none of them again. Other rules but small ones are not
    /// worth the encoding. The language is unchanged.
    pub fn cache_rule(&mut self, rule: RuleId) {
        if let Err(at) = self.units.binary_search(&rule) {
            self.units.insert(at, rule);
        }
    }

    /// Records what `rule` was made for (see [`Origin`]).
    pub(crate) fn set_origin(&mut self, rule: RuleId, origin: Origin) {
        if self.origins.len() <= rule.index() {
            self.origins.resize(rule.index() + 1, None);
        }
        self.origins[rule.index()] = Some(origin);
    }

    /// Sets the body of a declared rule.
    pub fn define(&mut self, id: RuleId, expr: Expr) {
        self.rules[id.index()].expr = expr;
        self.defined[id.index()] = true;
        self.forget_import_of(id);
    }

    /// A rule of an imported grammar changed after the import: the copy is that grammar no more.
    /// Whether `rule` is the root of a grammar imported whole (see [`GrammarBuilder::import`]).
    pub(crate) fn is_import_root(&self, rule: RuleId) -> bool {
        self.imports.binary_search_by_key(&rule, |i| i.root).is_ok()
    }

    fn forget_import_of(&mut self, id: RuleId) {
        // Imports are appended in declaration order: sorted by `first` as by `root`.
        let at = self.imports.partition_point(|i| i.first + i.len <= id.0);
        if self.imports.get(at).is_some_and(|i| i.first <= id.0) {
            self.imports.remove(at);
        }
    }

    /// Declares and defines a rule in one step.
    pub fn rule(&mut self, name: &str, expr: Expr) -> RuleId {
        let id = self.declare(name);
        self.define(id, expr);
        id
    }

    /// Whether the rule has been defined yet.
    pub fn is_defined(&self, id: RuleId) -> bool {
        self.defined.get(id.index()).copied().unwrap_or(false)
    }

    /// Finishes the grammar with `start` as its start rule.
    pub fn build(self, start: RuleId) -> Result<Grammar, GrammarError> {
        if let Some(i) = self.defined.iter().position(|d| !d) {
            return Err(GrammarError::UndefinedRule { name: self.rules[i].name.clone(), line: 0, column: 0 });
        }
        if start.index() >= self.rules.len() {
            return Err(GrammarError::Empty);
        }
        Ok(Grammar {
            rules: self.rules,
            start,
            token_budgets: self.token_budgets,
            kept: self.kept,
            units: self.units,
            origins: self.origins,
            imports: self.imports,
            serial: Serial::next(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_makes_names_unique() {
        let mut b = Grammar::builder();
        let a = b.rule("value", Expr::literal("a"));
        let c = b.rule("value", Expr::Rule(a));
        let g = b.build(c).expect("valid");
        assert_eq!(g.rules()[0].name, "value");
        assert_eq!(g.rules()[1].name, "value-2");
    }

    #[test]
    fn undefined_rule_is_an_error() {
        let mut b = Grammar::builder();
        let a = b.declare("a");
        assert!(b.build(a).is_err());
    }
}
