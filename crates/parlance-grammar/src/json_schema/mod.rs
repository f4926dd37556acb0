//! JSON Schema -> grammar IR, with JSON pointers kept for errors.
//!
//! Supported: `type` (also arrays of types), `properties` / `required` / `additionalProperties`
//! (allowed by default as the spec says; [`JsonSchemaOptions::strict_properties`] closes objects like
//! XGrammar), `patternProperties`, `items` / `prefixItems` / `additionalItems`, `minItems` /
//! `maxItems`, `enum` / `const`, `anyOf`, `oneOf` (when its branches are provably disjoint), `allOf`
//! (merged), `$ref` into the same document (`$defs`, `definitions`, any JSON pointer) including
//! recursion, string `minLength` / `maxLength` / `pattern` / `format`, integer and number bounds
//! (exact digit automata, for bounds with fractions too, of either sign, inclusive or exclusive), `nullable`, `uniqueItems` over items that are one of
//! at most 8 strings, `minProperties` / `maxProperties` (counted per member, within
//! `MAX_COUNTED_RULES`; refused past it, naming the keyword). Properties come in the order written.
//!
//! Numbers are exact: every `i64`/`u64` bound, `const` and `enum` value is enforced as written; a
//! number serde_json could only give as a rounded float (an integral float of magnitude 2^53 or
//! more, e.g. a 30-digit integer) is an error naming its keyword and pointer, never a nearby value.
//! Lowering is linear in the schema (objects with many properties included, see
//! `Compiler::members_in_blocks`) and counts against [`Limits::compile_time`] with the compile that
//! follows it.
//!
//! Values are compared as values, as validators do: a `const` or `enum` value is accepted in any
//! spelling of its strings (raw, short escapes, `\u` in either case for all but printable ASCII)
//! and of its numbers in positional
//! notation (`const: 1` accepts `1`, `1.0`, `1.00`), see `spellings`; string lengths count
//! characters as validators do.
//!
//! Narrowings, the whole list (the grammar rejects these valid instances, and never accepts an
//! invalid one):
//! - Properties come in the order the schema declares them, additional ones after; an `allOf`
//!   subschema's or an `anyOf`/`oneOf` branch's properties before its parent's (and where it
//!   narrows one of its parent's, in the parent's order too); a `const` or
//!   `enum` object's keys in the order the schema writes them; a `const` or `enum` string's
//!   printable ASCII characters raw (`"\u0061"` is not `"a"` there), `"`, `\\` and `/` aside.
//! - A key is read as the key it is, never as another spelling of it (`"\u0061"` would pass for
//!   another key than `"a"`). A declared name is written as the schema writes it; an additional
//!   property's key writes the character where it departs from every declared name raw or in the
//!   canonical escape (escapes only for `"`, `\\` and control characters, as serde_json,
//!   `json.dumps` and `JSON.stringify` write them); where `patternProperties` apply, the whole key
//!   is canonical.
//! - `type: integer` is integer syntax (`1.0` and `1e2` are refused), as XGrammar and llguidance
//!   do; numbers with bounds or `multipleOf` are positional (no exponent); a `const` or `enum`
//!   number is positional too, or exactly the schema's own text (`1e300`).
//! - A string under `pattern` or `format` writes its characters raw, escaped only where JSON
//!   requires it; a string with `minLength` or `maxLength` writes U+D000-U+DFFF raw (no `\uDxxx`
//!   escape, so no `\uD83D\uDE00` surrogate pair is counted as two characters).
//!
//! A keyword that would constrain the output but is not enforced is an error naming it and its JSON
//! pointer; [`JsonSchemaOptions::lenient`] turns that into an entry of [`SchemaReport::ignored`].
//! Annotations (`title`, `description`, `default`, unknown keywords, unknown `format`s, which the
//! spec defines as annotations) are ignored.

mod formats;
mod merge;
mod numbers;
mod spellings;

use crate::automaton;
use crate::grammar::{Expr, Grammar, GrammarBuilder, Origin, RuleId};
use crate::limits::Limits;
use crate::regex::{RegexMode, regex_to_expr};
use serde_json::{Map, Value};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why a schema cannot be turned into a grammar.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// A keyword that constrains the output is not supported (here, or in this combination).
    #[error("{}: unsupported keyword `{keyword}`{detail}", crate::shown::pointer(.pointer))]
    Unsupported {
        /// JSON pointer of the schema holding the keyword.
        pointer: String,
        /// The keyword.
        keyword: String,
        /// More detail, starting with `: ` when present.
        detail: String,
    },
    /// The schema is malformed.
    #[error("{}: invalid schema: {message}", crate::shown::pointer(.pointer))]
    Invalid {
        /// JSON pointer of the offending schema.
        pointer: String,
        /// What is wrong.
        message: String,
    },
    /// A limit was reached.
    #[error("{}: {what} limit reached ({got} > {max})", crate::shown::pointer(.pointer))]
    Limit {
        /// JSON pointer where it happened.
        pointer: String,
        /// Which limit.
        what: &'static str,
        /// The size reached.
        got: usize,
        /// The limit.
        max: usize,
    },
}

impl SchemaError {
    /// The compile-time limit reached, said of `pointer` (by the lowering, or by the compiler in a
    /// rule made for `pointer`).
    pub(crate) fn timeout(pointer: &str, limit: Duration) -> SchemaError {
        SchemaError::Limit {
            pointer: pointer.to_string(),
            what: "compile time (ms)",
            got: limit.as_millis() as usize + 1,
            max: limit.as_millis() as usize,
        }
    }

    /// No JSON value satisfies the schema at `pointer` (the compiler found the language of a rule
    /// made for it empty).
    pub(crate) fn unsatisfiable(pointer: &str) -> SchemaError {
        SchemaError::Invalid {
            pointer: pointer.to_string(),
            message: "no JSON value satisfies the schema (a `false` schema, an empty `type` list, constraints \
                      that exclude one another, or a `$ref` recursion with no end)"
                .into(),
        }
    }
}

/// Whitespace allowed between JSON tokens.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Whitespace {
    /// Any JSON whitespace (`[ \t\n\r]*`) between tokens, as JSON allows.
    #[default]
    Flexible,
    /// No whitespace at all (`json.dumps(v, separators=(",", ":"))`).
    Compact,
    /// Exactly these separators and no other whitespace.
    Fixed {
        /// Between items and between properties, e.g. `", "`.
        item: String,
        /// Between a key and its value, e.g. `": "`.
        key: String,
    },
}

/// Options of the JSON Schema compiler.
#[derive(Debug, Clone, Default)]
pub struct JsonSchemaOptions {
    /// Whitespace between tokens. Default: [`Whitespace::Flexible`].
    pub whitespace: Whitespace,
    /// Close objects without `additionalProperties` (and arrays without `items`) as XGrammar's strict
    /// mode does. Default: `false` (the spec: additional properties allowed).
    pub strict_properties: bool,
    /// Report unsupported keywords in [`SchemaReport::ignored`] instead of failing. Default: `false`.
    pub lenient: bool,
    /// Limits on compile time, size and nesting. Default: [`Limits::default`].
    pub limits: Limits,
}

/// What the compiler enforced and what it ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SchemaReport {
    /// Keywords that were enforced somewhere in the schema.
    pub enforced: BTreeSet<String>,
    /// `(pointer, keyword)` of constraining keywords ignored because of [`JsonSchemaOptions::lenient`].
    pub ignored: Vec<(String, String)>,
}

/// A keyword whose value must be a non-negative integer (`2.0` is one, since draft 6): `None` when
/// absent, an error naming it when it is anything else (ignoring it would change the language).
fn count_keyword(m: &Map<String, Value>, key: &str, ptr: &str) -> Result<Option<u64>, SchemaError> {
    let Some(v) = m.get(key) else { return Ok(None) };
    if let Some(n) = v.as_u64() {
        return Ok(Some(n));
    }
    match v.as_f64() {
        Some(x) if x >= 0.0 && x.fract() == 0.0 && x < 9.0e15 => Ok(Some(x as u64)),
        _ => Err(SchemaError::Invalid {
            pointer: format!("{ptr}/{key}"),
            message: "must be a non-negative integer".into(),
        }),
    }
}

/// Keywords that only annotate; ignoring them loses nothing.
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "id",
    "$comment",
    "$anchor",
    "title",
    "description",
    "default",
    "examples",
    "example",
    "readOnly",
    "writeOnly",
    "deprecated",
    "contentMediaType",
    "contentEncoding",
    "definitions",
    "$defs",
    "discriminator",
    "xml",
    "externalDocs",
];

/// Keywords that constrain and that this compiler does not implement.
const UNSUPPORTED: &[&str] = &[
    "not",
    "multipleOf",
    "minProperties",
    "maxProperties",
    "if",
    "then",
    "else",
    "contains",
    "minContains",
    "maxContains",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "$dynamicRef",
    "$recursiveRef",
    "uniqueItems",
];

/// Compiles `schema` into a grammar.
pub fn json_schema_to_grammar(
    schema: &Value,
    options: &JsonSchemaOptions,
) -> Result<(Grammar, SchemaReport), SchemaError> {
    let lowered = lower(schema, options, Instant::now() + options.limits.compile_time)?;
    Ok((lowered.grammar, lowered.report))
}

/// `options` as [`lowered_grammar`]'s cache keys them.
pub(crate) fn options_key(options: &JsonSchemaOptions) -> String {
    format!("{options:?}")
}

/// [`json_schema_to_grammar`]'s grammar through a process-wide cache keyed by the schema (as a
/// value) and the options (`options_key`, [`options_key`] of `options`): a tool's schema is
/// lowered once however many requests name it. Errors are not cached. Bounded in entries and
/// bytes; [`clear_lowered_schemas`] empties it.
pub(crate) fn lowered_grammar(
    schema: &Value,
    schema_hash: u64,
    options: &JsonSchemaOptions,
    options_key: &str,
) -> Result<Arc<Grammar>, SchemaError> {
    let hash = lookup_hash(schema_hash, options_key);
    // The schema's own size stands for the entry's: its grammar is about as large.
    let bytes = 3 * value_size(schema) + options_key.len();
    let found = Lookup { hash, options_key, bytes, same: |s: &Value| same_value(s, schema) };
    found.cached(|c| &mut c.map, || schema.clone(), || Ok(Arc::new(json_schema_to_grammar(schema, options)?.0)))
}

/// [`lowered_grammar`] for a schema given as its JSON text (a structural tag's, see
/// `structural_tag::parse_document`), cached by the text: a schema seen before is neither parsed
/// nor compared as a value again.
pub(crate) fn lowered_grammar_text(
    text: &str,
    options: &JsonSchemaOptions,
    options_key: &str,
) -> Result<Arc<Grammar>, SchemaError> {
    let hash = lookup_hash(text, options_key);
    // The text's size stands for the entry's, as the schema's does in `lowered_grammar`.
    let bytes = 4 * text.len() + options_key.len();
    let found = Lookup { hash, options_key, bytes, same: |t: &String| t == text };
    found.cached(
        |c| &mut c.texts,
        || text.to_owned(),
        || {
            // The text was read as JSON already (a raw value of the document). Found by its value
            // too: another spelling of a schema seen before is that schema's grammar (the same
            // serial, so a document that spells one schema two ways imports it once, as its value
            // would).
            let schema: Value = serde_json::from_str(text)
                .map_err(|e| SchemaError::Invalid { pointer: String::new(), message: format!("not JSON: {e}") })?;
            lowered_grammar(&schema, value_hash(&schema, &()), options, options_key)
        },
    )
}

/// The hash a key (a schema's hash, or its text) and the options are looked up under.
fn lookup_hash(key: impl Hash, options_key: &str) -> u64 {
    let mut h = crate::earley::ItemHasher::default();
    (key, options_key).hash(&mut h);
    h.finish()
}

/// A lookup in the cache of lowered schemas: the key's hash, the options, the entry's size, and
/// whether a stored key is this one.
struct Lookup<'o, F> {
    hash: u64,
    options_key: &'o str,
    bytes: usize,
    same: F,
}

impl<F> Lookup<'_, F> {
    /// The cached grammar of this key, or `lower`'s, stored under `key()` in the map `map` picks
    /// when the cache has room (errors are not cached).
    fn cached<K>(
        self,
        map: fn(&mut SchemaCache) -> &mut LoweredBy<K>,
        key: impl FnOnce() -> K,
        lower: impl FnOnce() -> Result<Arc<Grammar>, SchemaError>,
    ) -> Result<Arc<Grammar>, SchemaError>
    where
        F: Fn(&K) -> bool,
    {
        let options_key = self.options_key;
        if let Ok(mut cache) = schema_cache().lock()
            && let Some((_, _, g)) = map(&mut cache)
                .get(&self.hash)
                .and_then(|v| v.iter().find(|(k, o, _)| (self.same)(k) && o == options_key))
        {
            return Ok(g.clone());
        }
        let grammar = lower()?;
        if let Ok(mut cache) = schema_cache().lock()
            && cache.entries < SCHEMA_CACHE_ENTRIES
            && cache.bytes + self.bytes <= SCHEMA_CACHE_BYTES
        {
            cache.entries += 1;
            cache.bytes += self.bytes;
            map(&mut cache).entry(self.hash).or_default().push((key(), options_key.to_owned(), grammar.clone()));
        }
        Ok(grammar)
    }
}

const SCHEMA_CACHE_ENTRIES: usize = 8192;
const SCHEMA_CACHE_BYTES: usize = 128 << 20;

/// Lowered grammars by the hash of their key: each key (a schema, or its text), its options and
/// its grammar.
type LoweredBy<K> = HashMap<u64, Vec<(K, String, Arc<Grammar>)>>;

#[derive(Default)]
struct SchemaCache {
    map: LoweredBy<Value>,
    /// The same grammars by the schema's text ([`lowered_grammar_text`]).
    texts: LoweredBy<String>,
    entries: usize,
    bytes: usize,
}

fn schema_cache() -> &'static std::sync::Mutex<SchemaCache> {
    static CACHE: std::sync::OnceLock<std::sync::Mutex<SchemaCache>> = std::sync::OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// Empties the cache of lowered schemas ([`lowered_grammar`]).
pub(crate) fn clear_lowered_schemas() {
    if let Ok(mut cache) = schema_cache().lock() {
        *cache = SchemaCache::default();
    }
}

/// Whether two JSON values are the same, object members compared in their order (as
/// [`value_hash`] hashes them: values equal as maps in another order are never looked up as
/// equal anyway). Unlike `==`, which looks each member up by its key (a SipHash per member), a
/// walk side by side; iterative, since values nest without bound.
pub(crate) fn same_value(a: &Value, b: &Value) -> bool {
    let mut stack = vec![(a, b)];
    while let Some((a, b)) = stack.pop() {
        match (a, b) {
            (Value::Array(x), Value::Array(y)) => {
                if x.len() != y.len() {
                    return false;
                }
                stack.extend(x.iter().zip(y));
            }
            (Value::Object(x), Value::Object(y)) => {
                if x.len() != y.len() {
                    return false;
                }
                for ((kx, vx), (ky, vy)) in x.iter().zip(y) {
                    if kx != ky {
                        return false;
                    }
                    stack.push((vx, vy));
                }
            }
            (Value::Array(_) | Value::Object(_), _) | (_, Value::Array(_) | Value::Object(_)) => return false,
            (a, b) => {
                if a != b {
                    return false;
                }
            }
        }
    }
    true
}

/// A JSON value's content hash, with `salt` (what else the key holds).
pub(crate) fn value_hash(v: &Value, salt: &impl Hash) -> u64 {
    // Multiplicative, not SipHash: it only keys caches that compare the values too, and it runs
    // over every tool schema of every request.
    let mut h = crate::earley::ItemHasher::default();
    hash_value(v, &mut h);
    salt.hash(&mut h);
    h.finish()
}

/// Hashes a JSON value by its content (object members in their order, as equality compares them
/// with `preserve_order`), without serializing it; iterative, since schemas nest without bound.
fn hash_value(v: &Value, h: &mut impl Hasher) {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Null => 0u8.hash(h),
            Value::Bool(b) => (1u8, b).hash(h),
            Value::Number(n) => (2u8, n.as_f64().map(f64::to_bits), n.as_i64(), n.as_u64()).hash(h),
            Value::String(s) => (3u8, s).hash(h),
            Value::Array(a) => {
                (4u8, a.len()).hash(h);
                stack.extend(a.iter().rev());
            }
            Value::Object(o) => {
                (5u8, o.len()).hash(h);
                for (k, x) in o.iter().rev() {
                    k.hash(h);
                    stack.push(x);
                }
            }
        }
    }
}

/// Approximate bytes of a JSON value (iterative, as [`hash_value`]).
fn value_size(v: &Value) -> usize {
    let (mut stack, mut bytes) = (vec![v], 0);
    while let Some(v) = stack.pop() {
        bytes += 24;
        match v {
            Value::String(s) => bytes += s.len(),
            Value::Array(a) => stack.extend(a),
            Value::Object(o) => {
                bytes += o.keys().map(|k| k.len() + 24).sum::<usize>();
                stack.extend(o.values());
            }
            _ => {}
        }
    }
    bytes
}

/// A schema lowered to a grammar. Each rule of the grammar records the JSON pointer of the schema
/// keyword it was made for (`#/properties/a/pattern`, `#/properties`, ..., see
/// [`crate::grammar::Origin`]): errors found while compiling a rule are said of the schema, not of
/// the rule's internal name, however the grammar reaches the compiler (alone, or imported into a
/// structural tag's).
pub(crate) struct Lowered {
    pub(crate) grammar: Grammar,
    pub(crate) report: SchemaReport,
}

/// Lowers `schema` by `deadline` (the one deadline of the whole compile).
pub(crate) fn lower(schema: &Value, options: &JsonSchemaOptions, deadline: Instant) -> Result<Lowered, SchemaError> {
    let mut c = Compiler {
        root: schema,
        opts: options,
        b: Grammar::builder(),
        refs: HashMap::new(),
        pending: Vec::new(),
        any: None,
        report: SchemaReport::default(),
        depth: 0,
        deadline,
        nodes: 0,
        long_strings: HashMap::new(),
        calendar_rules: HashMap::new(),
        alternative_order: None,
        work: 0,
    };
    let root = c.declare_at("root", "#");
    let body = c.schema(schema, "#")?;
    c.b.define(root, body);
    while let Some((ptr, id)) = c.pending.pop() {
        let target = c.resolve(&ptr, &ptr)?.clone();
        let body = c.schema(&target, &ptr)?;
        c.b.define(id, body);
    }
    let grammar = c.b.build(root).map_err(|e| SchemaError::Invalid { pointer: "#".into(), message: e.to_string() })?;
    Ok(Lowered { grammar, report: c.report })
}

struct Compiler<'a> {
    root: &'a Value,
    opts: &'a JsonSchemaOptions,
    b: GrammarBuilder,
    refs: HashMap<String, RuleId>,
    pending: Vec<(String, RuleId)>,
    any: Option<RuleId>,
    report: SchemaReport,
    depth: usize,
    deadline: Instant,
    nodes: usize,
    long_strings: HashMap<(u64, Option<u64>), RuleId>,
    /// A second order of the keys for the next object lowered (see `in_either_order`).
    alternative_order: Option<Vec<String>>,
    /// The shared rule of each calendar format (see `string`).
    calendar_rules: HashMap<String, RuleId>,
    /// Steps of loops that do not visit schema nodes (members, name tries), for deadline checks.
    work: usize,
}

/// The keywords that bound a number, in the order an error names the first one present.
const NUMBER_KEYWORDS: &[&str] =
    &["minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "multipleOf", "format"];

/// Most strings an array of unique items may choose among (see `Compiler::unique_strings`): one
/// rule per subset, 2^n of them.
const UNIQUE_STRINGS: usize = 8;

/// Formats whose automata count days per month and leap years (see `formats`).
const CALENDAR_FORMATS: &[&str] = &["date", "date-time"];

/// Objects with more members than this are cut into blocks of [`MEMBERS_BLOCK`] (see
/// `Compiler::members`); below it (every W1 schema) the member chain is inlined whole.
const MEMBERS_INLINED: usize = 256;

/// Most rules an object's property count may take (members × counts kept).
const MAX_COUNTED_RULES: u64 = 4096;

/// Most extra members a property count may bound (`maxProperties` beside `additionalProperties`):
/// each bound below it is a repetition the automaton unrolls.
const MAX_COUNTED_EXTRAS: u64 = 64;

/// How many members an object must have (`minProperties`, `maxProperties`, once the bounds the
/// members keep anyway are dropped).
#[derive(Debug, Clone, Copy)]
enum PropertyCount {
    /// At least one when true; any number otherwise.
    NonEmpty(bool),
    /// From the first to the second (none: no upper bound).
    Between(u64, Option<u64>),
}

/// Members per kept rule of a cut object: within a block the automaton is quadratic, across blocks
/// the parser predicts one rule per block. Below the inlining depth of `automaton::build`.
const MEMBERS_BLOCK: usize = 32;

/// Trie nodes of excluded property names per automaton (see `Compiler::trie_not`): a few states
/// each, well below [`Limits::automaton_states`] and the compiler's inlining budget.
const KEY_TRIE_NODES: usize = 8192;

/// Automaton states per trie node of excluded property names, about (see `Compiler::key_not_in`).
const KEY_TRIE_STATES: usize = 4;

/// Upper bound on schema nodes visited (after `allOf` merging), so huge schemas end cleanly.
const MAX_NODES: usize = 200_000;

fn lit(s: &str) -> Expr {
    Expr::literal(s)
}

impl<'a> Compiler<'a> {
    /// Declares a rule made for the schema keyword at `pointer` (see [`Lowered`]). Every rule of a
    /// lowered schema is declared through here.
    fn declare_at(&mut self, name: &str, pointer: &str) -> RuleId {
        let id = self.b.declare(name);
        self.b.set_origin(id, Origin { tag: None, schema: pointer.into() });
        id
    }

    /// Declares and defines a rule made for the schema keyword at `pointer`.
    fn rule_at(&mut self, name: &str, expr: Expr, pointer: &str) -> RuleId {
        let id = self.declare_at(name, pointer);
        self.b.define(id, expr);
        id
    }

    /// The compile-time error, said of `pointer`.
    fn timeout(&self, pointer: &str) -> SchemaError {
        SchemaError::timeout(pointer, self.opts.limits.compile_time)
    }

    /// A language with no string, as a rule made for `pointer` (the schema or keyword that leaves no
    /// value): a schema it makes unsatisfiable is said of it (see `compile`'s blame).
    fn nothing_at(&mut self, pointer: &str) -> Expr {
        Expr::Rule(self.rule_at("nothing", numbers::nothing(), pointer))
    }

    /// `e` as a rule made for the first of `keywords` that `m` holds (under `ptr`), so that a limit
    /// its automaton reaches, or a language it leaves empty, is said of that keyword; `e` itself if
    /// `m` holds none of them.
    fn keyword_rule(&mut self, name: &str, e: Expr, m: &Map<String, Value>, ptr: &str, keywords: &[&str]) -> Expr {
        match keywords.iter().find(|k| m.contains_key(**k)) {
            Some(k) => Expr::Rule(self.rule_at(name, e, &format!("{ptr}/{k}"))),
            None => e,
        }
    }

    /// Counts one step of a loop that visits no schema node, checking the deadline now and then: the
    /// deadline bounds the whole lowering, not only the walk over schema nodes.
    fn tick(&mut self, pointer: &str) -> Result<(), SchemaError> {
        self.work += 1;
        if self.work.is_multiple_of(1024) && Instant::now() > self.deadline {
            return Err(self.timeout(pointer));
        }
        Ok(())
    }

    fn ws(&self) -> Expr {
        match &self.opts.whitespace {
            Whitespace::Flexible => Expr::repeat(
                Expr::CharClass { negated: false, ranges: vec![(' ', ' '), ('\t', '\n'), ('\r', '\r')] },
                0,
                None,
            ),
            _ => Expr::Empty,
        }
    }

    fn item_sep(&self) -> Expr {
        match &self.opts.whitespace {
            Whitespace::Fixed { item, .. } => lit(item),
            _ => Expr::seq(vec![self.ws(), lit(","), self.ws()]),
        }
    }

    fn key_sep(&self) -> Expr {
        match &self.opts.whitespace {
            Whitespace::Fixed { key, .. } => lit(key),
            _ => Expr::seq(vec![self.ws(), lit(":"), self.ws()]),
        }
    }

    fn open(&self, c: &str) -> Expr {
        Expr::seq(vec![lit(c), self.ws()])
    }

    fn close(&self, c: &str) -> Expr {
        Expr::seq(vec![self.ws(), lit(c)])
    }

    fn unsupported(&mut self, pointer: &str, keyword: &str, detail: &str) -> Result<(), SchemaError> {
        if self.opts.lenient {
            self.report.ignored.push((pointer.to_string(), keyword.to_string()));
            Ok(())
        } else {
            let detail = if detail.is_empty() { String::new() } else { format!(": {detail}") };
            Err(SchemaError::Unsupported { pointer: pointer.to_string(), keyword: keyword.to_string(), detail })
        }
    }

    fn enforced(&mut self, keyword: &str) {
        if !self.report.enforced.contains(keyword) {
            self.report.enforced.insert(keyword.to_string());
        }
    }

    /// What follows the backslash of a JSON escape.
    fn escape_tail(counted: bool) -> Expr {
        Expr::alt(vec![
            Expr::CharClass {
                negated: false,
                ranges: vec![
                    ('"', '"'),
                    ('\\', '\\'),
                    ('/', '/'),
                    ('b', 'b'),
                    ('f', 'f'),
                    ('n', 'n'),
                    ('r', 'r'),
                    ('t', 't'),
                ],
            },
            Expr::seq(vec![lit("u"), Self::unicode_escape_digits(counted)]),
        ])
    }

    /// What follows `\u` in one character's escape: four hex digits; in a string whose length is
    /// `counted`, none starting with `d` (a surrogate, or U+D000-U+D7FF, written raw there). A
    /// validator counts a `\uD83D\uDE00` pair as one character, so counting each `\u` as one would
    /// accept a one-emoji string under `minLength: 2`; recognising pairs (or only excluding
    /// surrogates) costs an automaton state per counted character, which made compiles of schemas
    /// with many short `minLength` strings ten times slower (W1's `Github_ultra---o44225`: 0.1 s to
    /// 1.4 s). A narrowing, listed in the module docs.
    fn unicode_escape_digits(counted: bool) -> Expr {
        let hex = || Expr::CharClass { negated: false, ranges: vec![('0', '9'), ('a', 'f'), ('A', 'F')] };
        if !counted {
            return Expr::repeat(hex(), 4, Some(4));
        }
        let first = Expr::CharClass {
            negated: false,
            ranges: vec![('0', '9'), ('a', 'c'), ('A', 'C'), ('e', 'f'), ('E', 'F')],
        };
        Expr::seq(vec![first, Expr::repeat(hex(), 3, Some(3))])
    }

    /// A JSON escape as serde_json, `json.dumps` and `JSON.stringify` write one: `\"`, `\\`, the
    /// two-character forms of the controls that have one, `\u00xx` (lowercase) for the others.
    /// None spells a character that has a spelling of its own (`\u0061`, `\/`).
    fn canonical_escape() -> Expr {
        let class = |ranges: Vec<(char, char)>| Expr::CharClass { negated: false, ranges };
        Expr::alt(vec![
            Expr::seq(vec![
                lit("\\"),
                class(vec![('"', '"'), ('\\', '\\'), ('b', 'b'), ('f', 'f'), ('n', 'n'), ('r', 'r'), ('t', 't')]),
            ]),
            Expr::seq(vec![
                lit("\\u00"),
                Expr::alt(vec![
                    Expr::seq(vec![lit("0"), class(vec![('0', '7'), ('b', 'b'), ('e', 'f')])]),
                    Expr::seq(vec![lit("1"), class(vec![('0', '9'), ('a', 'f')])]),
                ]),
            ]),
        ])
    }

    /// One character of an object key whose identity decides its schema (an additional or
    /// pattern-matched property): raw, or a [`Compiler::canonical_escape`]. Every key then has
    /// one spelling, the one names and patterns are compared with; a key escaped otherwise
    /// (`"\u0061"` for `"a"`) would pass for another key than it is.
    fn key_char() -> Expr {
        Expr::alt(vec![
            Expr::CharClass { negated: true, ranges: vec![('\0', '\u{1f}'), ('"', '"'), ('\\', '\\')] },
            Self::canonical_escape(),
        ])
    }

    /// One JSON string character (raw or escaped).
    fn json_char(&self) -> Expr {
        Self::json_char_with(false)
    }

    /// One JSON string character; `counted`: see [`Compiler::unicode_escape_digits`].
    fn json_char_with(counted: bool) -> Expr {
        Expr::alt(vec![
            Expr::CharClass { negated: true, ranges: vec![('\0', '\u{1f}'), ('"', '"'), ('\\', '\\')] },
            Expr::seq(vec![lit("\\"), Self::escape_tail(counted)]),
        ])
    }

    fn any_string(&self) -> Expr {
        Expr::seq(vec![lit("\""), Expr::repeat(self.json_char(), 0, None), lit("\"")])
    }

    fn any_number(&self) -> Expr {
        let digits = || Expr::CharClass { negated: false, ranges: vec![('0', '9')] };
        Expr::seq(vec![
            self.any_integer(),
            Expr::optional(Expr::seq(vec![lit("."), Expr::repeat(digits(), 1, None)])),
            Expr::optional(Expr::seq(vec![
                Expr::CharClass { negated: false, ranges: vec![('E', 'E'), ('e', 'e')] },
                Expr::optional(Expr::CharClass { negated: false, ranges: vec![('+', '+'), ('-', '-')] }),
                Expr::repeat(digits(), 1, None),
            ])),
        ])
    }

    fn any_integer(&self) -> Expr {
        Expr::seq(vec![
            Expr::optional(lit("-")),
            Expr::alt(vec![
                lit("0"),
                Expr::seq(vec![
                    Expr::CharClass { negated: false, ranges: vec![('1', '9')] },
                    Expr::repeat(Expr::CharClass { negated: false, ranges: vec![('0', '9')] }, 0, None),
                ]),
            ]),
        ])
    }

    /// The rule for any JSON value (recursive), created once.
    fn any_value(&mut self) -> Expr {
        if let Some(id) = self.any {
            return Expr::Rule(id);
        }
        // Shared by every schema node that allows any value: said of the whole schema.
        let value = self.declare_at("json-value", "#");
        self.any = Some(value);
        let member = Expr::seq(vec![self.any_string(), self.key_sep(), Expr::Rule(value)]);
        let object = Expr::seq(vec![
            self.open("{"),
            Expr::optional(Expr::seq(vec![
                member.clone(),
                Expr::repeat(Expr::seq(vec![self.item_sep(), member]), 0, None),
            ])),
            self.close("}"),
        ]);
        let array = Expr::seq(vec![
            self.open("["),
            Expr::optional(Expr::seq(vec![
                Expr::Rule(value),
                Expr::repeat(Expr::seq(vec![self.item_sep(), Expr::Rule(value)]), 0, None),
            ])),
            self.close("]"),
        ]);
        let object = self.rule_at("json-object", object, "#");
        let array = self.rule_at("json-array", array, "#");
        let string = self.rule_at("json-string", self.any_string(), "#");
        let number = self.rule_at("json-number", self.any_number(), "#");
        let body = Expr::alt(vec![
            Expr::Rule(object),
            Expr::Rule(array),
            Expr::Rule(string),
            Expr::Rule(number),
            lit("true"),
            lit("false"),
            lit("null"),
        ]);
        self.b.define(value, body);
        Expr::Rule(value)
    }

    /// Resolves a local `$ref` (`#`, `#/json/pointer`, percent-encoded).
    fn resolve(&self, reference: &str, pointer: &str) -> Result<&'a Value, SchemaError> {
        let Some(frag) = reference.strip_prefix('#') else {
            return Err(SchemaError::Unsupported {
                pointer: pointer.to_string(),
                keyword: "$ref".into(),
                detail: format!(": only local references (`#...`) are supported, got {reference:?}"),
            });
        };
        let frag = percent_decode(frag);
        let mut cur = self.root;
        if !frag.is_empty() {
            let Some(rest) = frag.strip_prefix('/') else {
                return Err(SchemaError::Unsupported {
                    pointer: pointer.to_string(),
                    keyword: "$ref".into(),
                    detail: format!(": anchors are not supported, got {reference:?}"),
                });
            };
            for part in rest.split('/') {
                let part = part.replace("~1", "/").replace("~0", "~");
                cur = match cur {
                    Value::Object(m) => m.get(&part),
                    Value::Array(a) => part.parse::<usize>().ok().and_then(|i| a.get(i)),
                    _ => None,
                }
                .ok_or_else(|| SchemaError::Invalid {
                    pointer: pointer.to_string(),
                    message: format!("unresolvable $ref {reference:?}"),
                })?;
            }
        }
        Ok(cur)
    }

    fn ref_rule(&mut self, reference: &str, pointer: &str) -> Result<RuleId, SchemaError> {
        // Validate now so that errors point at the referring schema.
        self.resolve(reference, pointer)?;
        let key = percent_decode(reference);
        if let Some(&id) = self.refs.get(&key) {
            return Ok(id);
        }
        let name = key.rsplit('/').next().unwrap_or("ref").to_string();
        let id = self.declare_at(if name.is_empty() || name == "#" { "ref" } else { &name }, &key);
        self.refs.insert(key.clone(), id);
        self.pending.push((key, id));
        Ok(id)
    }

    /// Follows a chain of pure `$ref`s to the schema they name.
    fn deref(&self, s: &'a Value, pointer: &str) -> Result<&'a Value, SchemaError> {
        let mut cur = s;
        for _ in 0..self.opts.limits.recursion_depth {
            match cur.get("$ref").and_then(Value::as_str) {
                Some(r)
                    if cur
                        .as_object()
                        .is_some_and(|m| m.keys().all(|k| k == "$ref" || ANNOTATIONS.contains(&k.as_str()))) =>
                {
                    cur = self.resolve(r, pointer)?;
                }
                _ => return Ok(cur),
            }
        }
        Err(SchemaError::Limit {
            pointer: pointer.to_string(),
            what: "$ref chain",
            got: self.opts.limits.recursion_depth + 1,
            max: self.opts.limits.recursion_depth,
        })
    }

    /// `merged`, the merge of `first` (a subschema or branch) and `second` (its parent), whose
    /// properties come in `first`'s order, then `second`'s. Where `first` narrows a property
    /// `second` declares, the object also takes its keys in the parent's own order (`second`'s,
    /// then `first`'s): the grammar fixes the order of keys, and an instance may follow either.
    /// The object's lowering reads that order from `alternative_order`.
    fn in_either_order(
        &mut self,
        merged: &Value,
        second: &Value,
        first: &Value,
        ptr: &str,
    ) -> Result<Expr, SchemaError> {
        fn properties(v: &Value) -> Option<&Map<String, Value>> {
            v.get("properties").and_then(Value::as_object)
        }
        if let (Some(narrowing), Some(parent)) = (properties(first), properties(second))
            && narrowing.keys().any(|k| parent.contains_key(k))
        {
            let order = parent.keys().chain(narrowing.keys().filter(|k| !parent.contains_key(*k))).cloned().collect();
            self.alternative_order = Some(order);
        }
        let expr = self.schema(merged, ptr);
        self.alternative_order = None;
        expr
    }

    fn schema(&mut self, s: &Value, ptr: &str) -> Result<Expr, SchemaError> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(SchemaError::Limit {
                pointer: ptr.to_string(),
                what: "schema nodes",
                got: self.nodes,
                max: MAX_NODES,
            });
        }
        if self.nodes.is_multiple_of(256) && Instant::now() > self.deadline {
            return Err(self.timeout(ptr));
        }
        if self.depth >= self.opts.limits.recursion_depth {
            return Err(SchemaError::Limit {
                pointer: ptr.to_string(),
                what: "nesting depth",
                got: self.depth + 1,
                max: self.opts.limits.recursion_depth,
            });
        }
        self.depth += 1;
        let r = match s {
            Value::Bool(true) => Ok(self.any_value()),
            Value::Bool(false) => Ok(self.nothing_at(ptr)),
            Value::Object(m) => self.object_schema(m, ptr),
            _ => Err(SchemaError::Invalid {
                pointer: ptr.to_string(),
                message: "a schema must be an object or a boolean".into(),
            }),
        };
        self.depth -= 1;
        r
    }

    fn object_schema(&mut self, m: &Map<String, Value>, ptr: &str) -> Result<Expr, SchemaError> {
        let constraining = |m: &Map<String, Value>, skip: &str| {
            m.keys().any(|k| k != skip && !ANNOTATIONS.contains(&k.as_str()) && is_keyword(k))
        };
        if let Some(r) = m.get("$ref") {
            let Some(r) = r.as_str() else {
                return Err(SchemaError::Invalid { pointer: ptr.to_string(), message: "$ref must be a string".into() });
            };
            self.enforced("$ref");
            if !constraining(m, "$ref") {
                return Ok(Expr::Rule(self.ref_rule(r, ptr)?));
            }
            let target = self.deref(self.resolve(r, ptr)?, ptr)?;
            let mut rest = m.clone();
            rest.remove("$ref");
            let merged = merge::merge(target, &Value::Object(rest)).or_else(|k| {
                self.unsupported(ptr, &k, "cannot combine with the sibling $ref").map(|_| target.clone())
            })?;
            return self.schema(&merged, ptr);
        }
        if let Some(rewritten) = self.dependencies_as_all_of(m, ptr)? {
            return self.schema(&rewritten, ptr);
        }
        // anyOf/oneOf before allOf: distributing the siblings (allOf included) into each branch
        // consumes one alternative level per step, so merging never loops.
        for kw in ["anyOf", "oneOf"] {
            let Some(branches) = m.get(kw) else { continue };
            let Some(branches) = branches.as_array() else {
                return Err(SchemaError::Invalid {
                    pointer: ptr.to_string(),
                    message: format!("{kw} must be an array"),
                });
            };
            let mut rewritten: Option<Vec<Value>> = None;
            if kw == "oneOf" && !self.disjoint(branches, ptr) {
                // Branches that each require properties: an instance matching branch i matches no
                // other branch j if some property j requires (and i does not) is absent. Each branch
                // becomes "branch i, an object, with one such property of every other branch absent"
                // (one alternative per choice). Sound: it only accepts instances matching exactly one
                // branch, though it may reject some where j fails for another reason.
                match self.one_of_by_required(branches, ptr)? {
                    Some(out) => rewritten = Some(out),
                    None => {
                        self.unsupported(ptr, "oneOf", "branches may overlap (only provably disjoint oneOf is exact)")?
                    }
                }
            }
            let branches: &Vec<Value> = rewritten.as_ref().unwrap_or(branches);
            self.enforced(kw);
            let mut siblings = m.clone();
            siblings.remove(kw);
            let has_siblings = constraining(&siblings, "");
            let mut alts = Vec::new();
            for (i, b) in branches.iter().enumerate() {
                let bp = format!("{ptr}/{kw}/{i}");
                if has_siblings {
                    let b = self.deref_value(b, &bp)?;
                    // The branch first, then the siblings, as `allOf` merges (subschemas first):
                    // a branch's properties come before the shared ones; and in the siblings'
                    // order too where that differs (a branch that narrows a shared property).
                    let siblings = Value::Object(siblings.clone());
                    match merge::merge(&b, &siblings) {
                        Ok(v) => alts.push(self.in_either_order(&v, &siblings, &b, &bp)?),
                        Err(k) => {
                            self.unsupported(&bp, &k, &format!("cannot be combined with the {kw} branch"))?;
                            alts.push(self.schema(&b, &bp)?);
                        }
                    }
                } else {
                    alts.push(self.schema(b, &bp)?);
                }
            }
            return Ok(Expr::alt(alts));
        }
        if let Some(all) = m.get("allOf") {
            let Some(all) = all.as_array() else {
                return Err(SchemaError::Invalid {
                    pointer: ptr.to_string(),
                    message: "allOf must be an array".into(),
                });
            };
            self.enforced("allOf");
            let mut base = m.clone();
            base.remove("allOf");
            // Subschemas first, then the siblings: properties keep the order in which they are written.
            let mut acc = Value::Bool(true);
            for (i, sub) in all.iter().enumerate() {
                let sub_ptr = format!("{ptr}/allOf/{i}");
                let sub = self.deref_value(sub, &sub_ptr)?;
                match merge::merge(&acc, &sub) {
                    Ok(v) => acc = v,
                    Err(k) => self.unsupported(&sub_ptr, &k, "cannot be merged in allOf")?,
                }
            }
            let base = Value::Object(base);
            match merge::merge(&acc, &base) {
                Ok(v) => return self.in_either_order(&v, &base, &acc, ptr),
                Err(k) => self.unsupported(ptr, &k, "cannot be merged with allOf")?,
            }
            return self.schema(&acc, ptr);
        }
        for (k, v) in m {
            if !UNSUPPORTED.contains(&k.as_str()) {
                continue;
            }
            let trivial = match k.as_str() {
                // Enforced by `array` where the items are a few strings (see `unique_strings`),
                // and trivially where at most one item is allowed.
                "uniqueItems" => {
                    v == &Value::Bool(false)
                        || m.get("maxItems").and_then(Value::as_u64).is_some_and(|n| n <= 1)
                        || self.unique_strings(m, ptr).is_some()
                }
                // Enforced by `object`; a `const` or `enum` object must keep them itself (those
                // are written as given, not through `object`).
                "minProperties" | "maxProperties" => {
                    let values =
                        m.get("const").into_iter().chain(m.get("enum").and_then(Value::as_array).into_iter().flatten());
                    let (least, most) = (
                        m.get("minProperties").and_then(Value::as_u64),
                        m.get("maxProperties").and_then(Value::as_u64),
                    );
                    values.filter_map(Value::as_object).all(|o| {
                        least.is_none_or(|lo| o.len() as u64 >= lo) && most.is_none_or(|hi| o.len() as u64 <= hi)
                    })
                }
                // Enforced by `number` (see `multiple_of`); integers are multiples of 1 already.
                "multipleOf" => v.as_f64().and_then(multiple_of).is_some(),
                _ => false,
            };
            if !trivial {
                self.unsupported(&format!("{ptr}/{k}"), k, "")?;
            }
        }
        if let Some(c) = m.get("const") {
            if let Some((at, v)) = inexact_within(c, &format!("{ptr}/const")) {
                return Err(inexact(&at, "const", v));
            }
            self.enforced("const");
            // A rule of its own, as every keyword-made language: its errors are said of `const`.
            let spellings = self.value_spellings(c);
            return Ok(Expr::Rule(self.rule_at("const", spellings, &format!("{ptr}/const"))));
        }
        let types = self.types(m, ptr)?;
        if let Some(e) = m.get("enum") {
            let Some(values) = e.as_array() else {
                return Err(SchemaError::Invalid { pointer: ptr.to_string(), message: "enum must be an array".into() });
            };
            if let Some((at, v)) = inexact_within(e, &format!("{ptr}/enum")) {
                return Err(inexact(&at, "enum", v));
            }
            self.enforced("enum");
            let mut alts: Vec<Expr> = Vec::new();
            for v in values.iter().filter(|v| types.iter().any(|t| type_matches(t, v))) {
                self.tick(ptr)?;
                alts.push(self.value_spellings(v));
            }
            if alts.is_empty() {
                return Ok(self.nothing_at(&format!("{ptr}/enum")));
            }
            // A rule of its own: a limit reached in its automaton is said of `enum`.
            return Ok(Expr::Rule(self.rule_at("enum", Expr::alt(alts), &format!("{ptr}/enum"))));
        }
        let mut alts = Vec::new();
        for t in &types {
            alts.push(match t.as_str() {
                "null" => lit("null"),
                "boolean" => Expr::alt(vec![lit("true"), lit("false")]),
                "string" => self.string(m, ptr)?,
                // Rules of their own when bounded: a range or step that leaves no number is said of
                // its keyword.
                "integer" => {
                    let e = self.integer(m, ptr)?;
                    self.keyword_rule("integer", e, m, ptr, NUMBER_KEYWORDS)
                }
                "number" => {
                    let e = self.number(m, ptr)?;
                    self.keyword_rule("number", e, m, ptr, NUMBER_KEYWORDS)
                }
                // Objects and arrays are rules: the compiler inlines them, or keeps them apart when
                // inlining would make one automaton too large.
                "object" => {
                    let e = self.object(m, ptr)?;
                    let at = keyword_pointer(m, ptr, &["properties", "patternProperties", "additionalProperties"]);
                    Expr::Rule(self.rule_at(&rule_name(ptr), e, &at))
                }
                "array" => {
                    let e = self.array(m, ptr)?;
                    let at = keyword_pointer(m, ptr, &["prefixItems", "items", "minItems", "maxItems"]);
                    Expr::Rule(self.rule_at(&rule_name(ptr), e, &at))
                }
                other => {
                    return Err(SchemaError::Invalid {
                        pointer: ptr.to_string(),
                        message: format!("unknown type {other:?}"),
                    });
                }
            });
        }
        if alts.is_empty() {
            // Only an empty `type` list (absent, it allows every type) leaves no type.
            return Ok(self.nothing_at(&keyword_pointer(m, ptr, &["type"])));
        }
        Ok(Expr::alt(alts))
    }

    /// `dependencies` / `dependentRequired` / `dependentSchemas` rewritten exactly: "if `a` is present
    /// then X" is `anyOf: [{a absent}, {a required} ∧ X]`, one such `anyOf` per dependency, under
    /// `allOf`. `None` if the schema has no dependencies.
    fn dependencies_as_all_of(&mut self, m: &Map<String, Value>, ptr: &str) -> Result<Option<Value>, SchemaError> {
        let mut deps: Vec<(String, Value)> = Vec::new();
        for kw in ["dependencies", "dependentRequired", "dependentSchemas"] {
            let Some(d) = m.get(kw) else { continue };
            let Some(d) = d.as_object() else {
                return Err(SchemaError::Invalid {
                    pointer: format!("{ptr}/{kw}"),
                    message: "must be an object".into(),
                });
            };
            self.enforced(kw);
            for (k, v) in d {
                let then = match v {
                    Value::Array(names) => serde_json::json!({"required": names}),
                    other => other.clone(),
                };
                deps.push((k.clone(), then));
            }
        }
        if deps.is_empty() {
            return Ok(None);
        }
        if deps.len() > 6 {
            self.unsupported(ptr, "dependencies", "more than 6 dependencies")?;
            return Ok(None);
        }
        let mut rest = m.clone();
        for kw in ["dependencies", "dependentRequired", "dependentSchemas"] {
            rest.remove(kw);
        }
        let mut all: Vec<Value> = rest.remove("allOf").and_then(|v| v.as_array().cloned()).unwrap_or_default();
        for (k, then) in deps {
            let present = match merge::merge(&serde_json::json!({"required": [k]}), &then) {
                Ok(v) => v,
                Err(kw) => {
                    self.unsupported(ptr, &kw, "in a dependency")?;
                    continue;
                }
            };
            all.push(serde_json::json!({"anyOf": [{"properties": {k: false}}, present]}));
        }
        rest.insert("allOf".into(), Value::Array(all));
        Ok(Some(Value::Object(rest)))
    }

    /// A subschema with a pure `$ref` replaced by its target (for merging).
    fn deref_value(&self, v: &Value, ptr: &str) -> Result<Value, SchemaError> {
        match v.get("$ref").and_then(Value::as_str) {
            Some(r) if v.as_object().is_some_and(|m| m.len() == 1) => {
                Ok(self.deref(self.resolve(r, ptr)?, ptr)?.clone())
            }
            Some(r) => {
                let target = self.deref(self.resolve(r, ptr)?, ptr)?;
                let mut rest = v.as_object().cloned().unwrap_or_default();
                rest.remove("$ref");
                merge::merge(target, &Value::Object(rest)).map_err(|k| SchemaError::Unsupported {
                    pointer: ptr.to_string(),
                    keyword: k,
                    detail: ": cannot combine with the sibling $ref".into(),
                })
            }
            None => Ok(v.clone()),
        }
    }

    /// The types this schema allows (all of them when `type` is absent), `integer` folded into
    /// `number` when both appear.
    fn types(&mut self, m: &Map<String, Value>, ptr: &str) -> Result<Vec<String>, SchemaError> {
        let mut t: Vec<String> = match m.get("type") {
            None => ["null", "boolean", "object", "array", "string", "number"].iter().map(|s| s.to_string()).collect(),
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(a)) => a.iter().filter_map(|x| x.as_str().map(String::from)).collect(),
            Some(_) => return Err(SchemaError::Invalid { pointer: ptr.to_string(), message: "bad type".into() }),
        };
        if m.contains_key("type") {
            self.enforced("type");
        }
        if m.get("nullable") == Some(&Value::Bool(true)) && !t.iter().any(|x| x == "null") {
            self.enforced("nullable");
            t.push("null".into());
        }
        if t.iter().any(|x| x == "number") {
            t.retain(|x| x != "integer");
        }
        Ok(t)
    }

    fn string(&mut self, m: &Map<String, Value>, ptr: &str) -> Result<Expr, SchemaError> {
        let min = count_keyword(m, "minLength", ptr)?;
        let max = count_keyword(m, "maxLength", ptr)?;
        let any_char = Self::json_char_with(min.is_some() || max.is_some());
        // Regular constraints on the content; more than one are intersected.
        let mut parts: Vec<Expr> = Vec::new();
        if let Some(p) = m.get("pattern").and_then(Value::as_str) {
            self.enforced("pattern");
            match json_regex(p, &any_char, false) {
                Ok(e) => parts.push(e),
                Err(e) => self.unsupported(&format!("{ptr}/pattern"), "pattern", &e)?,
            }
        }
        if let Some(f) = m.get("format").and_then(Value::as_str)
            && formats::format_regex(f).is_none()
            && formats::CHECKED_ELSEWHERE.contains(&f)
        {
            // Validators check this format, so ignoring it would accept invalid strings.
            self.unsupported(&format!("{ptr}/format"), "format", &format!("format {f:?} is not implemented"))?;
        }
        if let Some(f) = m.get("format").and_then(Value::as_str)
            && let Some(re) = formats::format_regex(f)
        {
            self.enforced("format");
            parts.push(
                json_regex(&re, &any_char, false)
                    .map_err(|e| SchemaError::Invalid { pointer: ptr.to_string(), message: e })?,
            );
        }
        let length = if min.is_some() || max.is_some() {
            self.enforced("minLength");
            let lo = min.unwrap_or(0);
            if let Some(hi) = max
                && hi < lo
            {
                return Ok(self.nothing_at(&format!("{ptr}/maxLength")));
            }
            let cap = self.opts.limits.automaton_states as u64 / 16;
            if lo.max(max.unwrap_or(0)) > cap {
                return Err(SchemaError::Limit {
                    pointer: ptr.to_string(),
                    what: "string length bound",
                    got: lo.max(max.unwrap_or(0)) as usize,
                    max: cap as usize,
                });
            }
            Some(Expr::repeat(any_char.clone(), lo as u32, max.map(|x| x as u32)))
        } else {
            None
        };
        let body = match (parts.len(), length) {
            (0, None) => Expr::repeat(any_char, 0, None),
            (0, Some(l)) if max.is_some_and(|x| x > 256) => {
                // One shared rule per long bound (see `compile`: long repetitions stay rules).
                let key = (min.unwrap_or(0), max);
                let id = match self.long_strings.get(&key) {
                    Some(&id) => id,
                    None => {
                        // Shared by every string with these bounds: said of the first.
                        let at = keyword_pointer(m, ptr, &["maxLength", "minLength"]);
                        let id = self.rule_at("string", Expr::seq(vec![lit("\""), l, lit("\"")]), &at);
                        self.long_strings.insert(key, id);
                        id
                    }
                };
                return Ok(Expr::Rule(id));
            }
            (0, Some(l)) => l,
            (1, None) => parts.pop().expect("one part"),
            (_, length) => {
                // Skip the length automaton when the pattern already implies the bounds.
                let length = length.filter(|_| {
                    let (lo, hi) = char_bounds(&parts[0]);
                    !(min.is_none_or(|n| lo >= n) && max.is_none_or(|n| hi.is_some_and(|h| h <= n)))
                });
                let mut all = parts.into_iter().chain(length);
                let base = all.next().expect("at least one part");
                let and: Vec<Expr> = all.collect();
                if and.is_empty() { base } else { Expr::Restrict { base: Box::new(base), and, not: Vec::new() } }
            }
        };
        let string = Expr::seq(vec![lit("\""), body, lit("\"")]);
        if let Some(f) = m.get("format").and_then(Value::as_str)
            && CALENDAR_FORMATS.contains(&f)
            && min.is_none()
            && max.is_none()
            && m.get("pattern").is_none()
        {
            // One rule per calendar format, kept apart: the days of each month and leap years make
            // an automaton that, copied into every date field of a large inlined object, made one
            // W1 schema's build 14 times slower.
            if let Some(&id) = self.calendar_rules.get(f) {
                return Ok(Expr::Rule(id));
            }
            let id = self.rule_at("string", string, &format!("{ptr}/format"));
            self.b.keep_rule(id);
            self.calendar_rules.insert(f.to_owned(), id);
            return Ok(Expr::Rule(id));
        }
        if m.get("pattern").is_some_and(Value::is_string) {
            // A rule of its own: a pattern whose automaton reaches a limit is said of `pattern`.
            return Ok(Expr::Rule(self.rule_at("pattern", string, &format!("{ptr}/pattern"))));
        }
        // So are a format and length bounds (nothing else constrains a string).
        Ok(self.keyword_rule("string", string, m, ptr, &["format", "maxLength", "minLength"]))
    }

    /// Bounds from `minimum` / `maximum` / exclusive forms (draft 4 booleans and draft 6 numbers),
    /// each exact (see [`exact_number`]). `None` bound = open. Errors if a bound is not a number or
    /// its exact value is unknown.
    fn bounds(&mut self, m: &Map<String, Value>, ptr: &str) -> Result<Bounds, SchemaError> {
        for k in ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"] {
            if let Some(v) = m.get(k)
                && !v.is_number()
                && !v.is_boolean()
            {
                return Err(SchemaError::Invalid { pointer: format!("{ptr}/{k}"), message: "must be a number".into() });
            }
        }
        let num = |k: &str| match m.get(k) {
            Some(v @ Value::Number(_)) => exact_number(v, &format!("{ptr}/{k}"), k).map(Some),
            _ => Ok(None),
        };
        let mut b = Bounds::default();
        if let Some(x) = num("minimum")? {
            b.lo = Some((x, m.get("exclusiveMinimum") == Some(&Value::Bool(true))));
        }
        if let Some(x) = num("maximum")? {
            b.hi = Some((x, m.get("exclusiveMaximum") == Some(&Value::Bool(true))));
        }
        // Both forms present: the tighter one wins (the exclusive one on a tie).
        if let Some(x) = num("exclusiveMinimum")?
            && b.lo.is_none_or(|(l, _)| x.cmp_exact(l).is_ge())
        {
            b.lo = Some((x, true));
        }
        if let Some(x) = num("exclusiveMaximum")?
            && b.hi.is_none_or(|(h, _)| x.cmp_exact(h).is_le())
        {
            b.hi = Some((x, true));
        }
        Ok(b)
    }

    fn integer(&mut self, m: &Map<String, Value>, ptr: &str) -> Result<Expr, SchemaError> {
        let b = self.bounds(m, ptr)?;
        // The least and greatest integers inside the bounds: a fractional bound (never integral)
        // is passed either way by the integer on its side, exclusive or not.
        let mut lo = b.lo.map(|(x, excl)| match x {
            Num::Int(a) => a + excl as i128,
            Num::Frac(f) => f.floor() as i128 + 1,
        });
        let mut hi = b.hi.map(|(x, excl)| match x {
            Num::Int(a) => a - excl as i128,
            Num::Frac(f) => f.floor() as i128,
        });
        let within = |lo: &mut Option<i128>, hi: &mut Option<i128>, min: i128, max: i128| {
            *lo = Some(lo.map_or(min, |l| l.max(min)));
            *hi = Some(hi.map_or(max, |h| h.min(max)));
        };
        match m.get("format").and_then(Value::as_str) {
            Some("int32") => within(&mut lo, &mut hi, i32::MIN.into(), i32::MAX.into()),
            Some("int64") => within(&mut lo, &mut hi, i64::MIN.into(), i64::MAX.into()),
            _ => {}
        }
        if lo.is_none() && hi.is_none() {
            return Ok(self.any_integer());
        }
        self.enforced("minimum");
        Ok(numbers::int_range(lo, hi))
    }

    fn number(&mut self, m: &Map<String, Value>, ptr: &str) -> Result<Expr, SchemaError> {
        let base = self.number_bounded(m, ptr)?;
        if let Some(v) = m.get("multipleOf")
            && !v.as_f64().is_some_and(|x| x > 0.0)
        {
            return Err(SchemaError::Invalid {
                pointer: format!("{ptr}/multipleOf"),
                message: "must be a number above 0".into(),
            });
        }
        Ok(match m.get("multipleOf").and_then(Value::as_f64).and_then(multiple_of) {
            Some(mult) => {
                self.enforced("multipleOf");
                Expr::Restrict { base: Box::new(base), and: vec![mult], not: Vec::new() }
            }
            None => base,
        })
    }

    fn number_bounded(&mut self, m: &Map<String, Value>, ptr: &str) -> Result<Expr, SchemaError> {
        let b = self.bounds(m, ptr)?;
        if b.lo.is_none() && b.hi.is_none() {
            return Ok(self.any_number());
        }
        let frac = |x: &Option<(Num, bool)>| matches!(x, Some((Num::Frac(_), _)));
        if frac(&b.lo) || frac(&b.hi) {
            // Bounds with fractions, exact in the bounds' decimal digits: each side of zero is a
            // range of magnitudes (see `numbers::magnitude_range`), an exclusive bound taken out.
            // A side's bound as an exact decimal (`Some(None)`: no bound; `None`: unreadable).
            let exact = |bound: Option<(Num, bool)>, inclusive: &str, exclusive: &str| match bound {
                None => Some(None),
                Some((_, excl)) => {
                    let key =
                        if excl && m.get(exclusive).is_some_and(Value::is_number) { exclusive } else { inclusive };
                    numbers::decimal_of(m.get(key)?).map(|d| Some((d, excl)))
                }
            };
            if let (Some(lo), Some(hi)) =
                (exact(b.lo, "minimum", "exclusiveMinimum"), exact(b.hi, "maximum", "exclusiveMaximum"))
            {
                self.enforced("minimum");
                return Ok(numbers::signed_decimal_range(lo, hi));
            }
            self.unsupported(ptr, "minimum", "a bound with more digits than a grammar keeps (38 whole, 64 fraction)")?;
            return Ok(self.any_number());
        }
        self.enforced("minimum");
        // Integers only here (fractional bounds took the branch above).
        let int = |x: Num| match x {
            Num::Int(a) => a,
            Num::Frac(f) => f.floor() as i128,
        };
        Ok(numbers::decimal_range(
            b.lo.map(|(x, _)| int(x)),
            b.lo.is_some_and(|(_, e)| e),
            b.hi.map(|(x, _)| int(x)),
            b.hi.is_some_and(|(_, e)| e),
        ))
    }

    fn object(&mut self, m: &Map<String, Value>, ptr: &str) -> Result<Expr, SchemaError> {
        let alternative_order = self.alternative_order.take();
        let empty = Map::new();
        let props = m.get("properties").and_then(Value::as_object).unwrap_or(&empty);
        let required: Vec<&str> = m
            .get("required")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        // A set: looked up once per property (a list would make this quadratic).
        let required_set: HashSet<&str> = required.iter().copied().collect();
        let patterns = m.get("patternProperties").and_then(Value::as_object).unwrap_or(&empty);
        let additional = match m.get("additionalProperties") {
            Some(v) => v.clone(),
            None if self.opts.strict_properties => Value::Bool(false),
            None => Value::Bool(true),
        };
        for k in ["properties", "required", "additionalProperties", "patternProperties"] {
            if m.contains_key(k) {
                self.enforced(k);
            }
        }
        // Pattern keys: content expressions, compiled first because declared properties whose names
        // match a pattern must satisfy that pattern's schema too. Each pattern's automaton is built
        // once, then run on every name.
        let any_char = Self::key_char();
        let mut pattern_keys: Vec<(Expr, &Value, String, Option<automaton::Automaton>)> = Vec::new();
        for (p, sub) in patterns {
            let pp = format!("{ptr}/patternProperties/{}", escape_pointer(p));
            match json_regex(p, &any_char, true) {
                Ok(k) => {
                    let trivial = *sub == Value::Bool(true) || sub.as_object().is_some_and(|o| o.is_empty());
                    // `None` (cannot be built): every name is taken to match, so merging stays safe.
                    let a =
                        if trivial || props.is_empty() { None } else { automaton::build_matcher(&k, self.deadline) };
                    pattern_keys.push((k, sub, pp, a));
                }
                Err(e) => self.unsupported(&pp, "patternProperties", &e)?,
            }
        }
        let content_of = |name: &str| {
            let quoted = compact_json(&Value::String(name.to_string()));
            quoted[1..quoted.len() - 1].to_string()
        };
        let mut names: Vec<String> = Vec::new();
        let mut members: Vec<(Expr, bool, String)> = Vec::new();
        for (name, sub) in props {
            self.tick(ptr)?;
            let mut merged: Option<Value> = None;
            for (_, psub, _, a) in &pattern_keys {
                let trivial = **psub == Value::Bool(true) || psub.as_object().is_some_and(|o| o.is_empty());
                if !trivial && a.as_ref().is_none_or(|a| a.matches(content_of(name).as_bytes())) {
                    match merge::merge(merged.as_ref().unwrap_or(sub), psub) {
                        Ok(v) => merged = Some(v),
                        Err(kw) => self.unsupported(ptr, &kw, "property schema and matching patternProperties")?,
                    }
                }
            }
            let prop_ptr = format!("{ptr}/properties/{}", escape_pointer(name));
            let value = self.schema(merged.as_ref().unwrap_or(sub), &prop_ptr)?;
            members.push((
                self.member(lit(&compact_json(&Value::String(name.clone()))), value),
                required_set.contains(name.as_str()),
                prop_ptr,
            ));
            names.push(name.clone());
        }
        let mut only_required: HashSet<&str> = HashSet::new();
        for r in &required {
            if !props.contains_key(*r) && only_required.insert(r) {
                // A required property that only additionalProperties describes.
                let value = self.schema(&additional, &format!("{ptr}/additionalProperties"))?;
                let member = self.member(lit(&compact_json(&Value::String(r.to_string()))), value);
                members.push((member, true, format!("{ptr}/required")));
                names.push(r.to_string());
            }
        }
        let mut extras: Vec<Expr> = Vec::new();
        let mut extra_ptr = format!("{ptr}/additionalProperties");
        if !pattern_keys.is_empty() {
            // The declared names as one expression: one automaton in the restrictions below, however
            // many names there are (one part per name would make every product state that long).
            let mut name_contents: Vec<Expr> = Vec::new();
            for n in &names {
                self.tick(ptr)?;
                name_contents.push(lit(&content_of(n)));
            }
            let declared = (!name_contents.is_empty()).then(|| Expr::alt(name_contents));
            let any = Expr::repeat(any_char.clone(), 0, None);
            extra_ptr = pattern_keys[0].2.clone();
            for (i, (k, sub, pp, _)) in pattern_keys.iter().enumerate() {
                // Keys matching two patterns would have to satisfy both schemas: they are left out.
                let mut not: Vec<Expr> = declared.iter().cloned().collect();
                not.extend(pattern_keys.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, (o, ..))| o.clone()));
                let key = Expr::Restrict { base: Box::new(any.clone()), and: vec![k.clone()], not };
                let value = self.schema(sub, pp)?;
                let member = self.member(Expr::seq(vec![lit("\""), key, lit("\"")]), value);
                extras.push(Expr::Rule(self.rule_at("pattern-member", member, pp)));
            }
            if additional != Value::Bool(false) {
                let mut not: Vec<Expr> = declared.into_iter().collect();
                not.extend(pattern_keys.iter().map(|(k, ..)| k.clone()));
                let key = Expr::Restrict { base: Box::new(any), and: Vec::new(), not };
                let value = self.schema(&additional, &format!("{ptr}/additionalProperties"))?;
                extras.push(self.member(Expr::seq(vec![lit("\""), key, lit("\"")]), value));
            }
        } else if additional != Value::Bool(false) {
            let key = self.key_not_in(&names, ptr)?;
            let value = self.schema(&additional, &format!("{ptr}/additionalProperties"))?;
            extras.push(self.member(key, value));
        }
        let extra = match extras.len() {
            0 => None,
            _ => Some(Expr::alt(extras)),
        };
        // `minProperties` / `maxProperties`: a bound the members already keep is dropped (required
        // members count towards the least; a closed object cannot exceed its declared members).
        let required_count = members.iter().filter(|(_, required, _)| *required).count() as u64;
        let least = count_keyword(m, "minProperties", ptr)?.unwrap_or(0);
        let most = count_keyword(m, "maxProperties", ptr)?;
        for keyword in ["minProperties", "maxProperties"].into_iter().filter(|k| m.contains_key(*k)) {
            self.enforced(keyword);
        }
        let least = if least <= required_count { 0 } else { least };
        let most = most.filter(|&h| extra.is_some() || h < members.len() as u64);
        let counts = match (least, most) {
            (0 | 1, None) => PropertyCount::NonEmpty(least == 1),
            (lo, hi) => PropertyCount::Between(lo, hi),
        };
        let extra = extra.map(|e| (e, extra_ptr));
        // The same members in a second order, where a subschema narrowed a property of its parent
        // (see `in_either_order`): each value a rule kept apart, so the two orders share the
        // values' automata instead of copying them (nested, each level would double).
        let second: Option<Vec<usize>> = alternative_order
            .and_then(|order| order.iter().map(|k| names.iter().position(|n| n == k)).collect::<Option<Vec<_>>>())
            .filter(|order| order.len() == names.len() && order.iter().enumerate().any(|(i, &j)| i != j));
        let content = match second {
            Some(order) => {
                let mut shared = Vec::with_capacity(members.len());
                for (value, required, at) in members {
                    let id = self.rule_at("member", value, &at);
                    self.b.keep_rule(id);
                    shared.push((Expr::Rule(id), required, at));
                }
                let swapped = order.iter().map(|&i| shared[i].clone()).collect();
                let first = self.members(shared, extra.clone(), counts, ptr)?;
                let second = self.members(swapped, extra, counts, ptr)?;
                Expr::alt(vec![first, second])
            }
            _ => self.members(members, extra, counts, ptr)?,
        };
        Ok(Expr::seq(vec![self.open("{"), content, self.close("}")]))
    }

    fn member(&self, key: Expr, value: Expr) -> Expr {
        Expr::seq(vec![key, self.key_sep(), value])
    }

    /// Members in order, optional ones skippable, commas only between present ones, then any number
    /// of `extra` members. Each member comes with the pointer of its schema.
    ///
    /// `after[i]` (members `i..` once something was written, each prefixed by the separator) is a rule
    /// referring to `after[i + 1]`, and the "nothing written yet" chain refers to those rules, so the
    /// grammar stays linear in the number of members; the compiler inlines the small ones. Past
    /// [`MEMBERS_INLINED`] members, see [`Compiler::members_in_blocks`].
    fn members(
        &mut self,
        members: Vec<(Expr, bool, String)>,
        extra: Option<(Expr, String)>,
        counts: PropertyCount,
        ptr: &str,
    ) -> Result<Expr, SchemaError> {
        let sep = self.item_sep();
        let n = members.len();
        let at = format!("{ptr}/properties");
        // Each member is written twice below (first, or after a separator) before the same
        // continuation; as rules, the automaton builder shares one copy (see `automaton::build`).
        let mut rules: Vec<(Expr, bool)> = Vec::with_capacity(n);
        for (m, req, member_ptr) in members {
            self.tick(ptr)?;
            rules.push((Expr::Rule(self.rule_at("member", m, &member_ptr)), req));
        }
        let members = rules;
        let extra = extra.map(|(e, extra_ptr)| Expr::Rule(self.rule_at("extra-member", e, &extra_ptr)));
        let non_empty = match counts {
            PropertyCount::NonEmpty(non_empty) => non_empty,
            PropertyCount::Between(least, most) => {
                match self.counted_members(&members, extra.clone(), least, most, ptr)? {
                    Some(counted) => return Ok(counted),
                    // Refused, and ignored by a lenient compile: the members uncounted.
                    None => least >= 1,
                }
            }
        };
        if n > MEMBERS_INLINED {
            return self.members_in_blocks(&members, extra, non_empty, ptr);
        }
        let tail = match &extra {
            Some(e) => Expr::repeat(Expr::seq(vec![sep.clone(), e.clone()]), 0, None),
            None => Expr::Empty,
        };
        let mut after: Vec<Expr> = vec![Expr::Empty; n + 1];
        after[n] = if n > 0 { Expr::Rule(self.rule_at("members", tail, &at)) } else { tail };
        for i in (1..n).rev() {
            let (m, req) = &members[i];
            let one = Expr::seq(vec![sep.clone(), m.clone()]);
            let one = if *req { one } else { Expr::optional(one) };
            after[i] = Expr::Rule(self.rule_at("members", Expr::seq(vec![one, after[i + 1].clone()]), &at));
        }
        let mut before = match &extra {
            Some(e) if non_empty => Expr::seq(vec![e.clone(), after[n].clone()]),
            Some(e) => Expr::optional(Expr::seq(vec![e.clone(), after[n].clone()])),
            None if non_empty => self.nothing_at(&format!("{ptr}/minProperties")),
            None => Expr::Empty,
        };
        for i in (0..n).rev() {
            let (m, req) = &members[i];
            let first = Expr::seq(vec![m.clone(), after[i + 1].clone()]);
            before = if *req { first } else { Expr::alt(vec![first, before]) };
        }
        Ok(before)
    }

    /// [`Compiler::members`] with between `least` and `most` members present (`minProperties`,
    /// `maxProperties`): the chain of members once per count written so far, `after[c]` being
    /// "members `i..` to come, `c` written"; with no upper bound, counts past `least` are one.
    /// Its size is the members times the counts kept, bounded ([`MAX_COUNTED_RULES`]), and extra
    /// members repeat at most [`MAX_COUNTED_EXTRAS`] times: past either bound the keyword is refused
    /// (`None` where a lenient compile ignores it).
    fn counted_members(
        &mut self,
        members: &[(Expr, bool)],
        extra: Option<Expr>,
        least: u64,
        most: Option<u64>,
        ptr: &str,
    ) -> Result<Option<Expr>, SchemaError> {
        let n = members.len();
        let at = format!("{ptr}/properties");
        let keyword = if most.is_some() { "maxProperties" } else { "minProperties" };
        let cap = most.unwrap_or(least);
        if most.is_some_and(|h| h < least) {
            return Ok(Some(self.nothing_at(&format!("{ptr}/minProperties"))));
        }
        let too_many = (n as u64 + 1).saturating_mul(cap + 1) > MAX_COUNTED_RULES
            || (extra.is_some() && cap > MAX_COUNTED_EXTRAS)
            || n > MEMBERS_INLINED;
        if too_many {
            self.unsupported(
                &format!("{ptr}/{keyword}"),
                keyword,
                "counting this many properties would make the grammar too large",
            )?;
            return Ok(None);
        }
        let (cap, sep) = (cap as usize, self.item_sep());
        let fits = |c: usize| most.is_none_or(|h| c as u64 <= h);
        // Written `c` members, counted up to `cap`.
        let count = |c: usize| c.min(cap);
        // After the declared members: extra members until the count is kept.
        let mut after: Vec<Option<Expr>> = Vec::with_capacity(cap + 1);
        for c in 0..=cap {
            let need = least.saturating_sub(c as u64) as u32;
            let tail = match &extra {
                Some(e) => {
                    let room = most.map(|h| (h - c as u64) as u32);
                    Some(Expr::repeat(Expr::seq(vec![sep.clone(), e.clone()]), need, room))
                }
                None => (need == 0).then_some(Expr::Empty),
            };
            after.push(tail.map(|t| Expr::Rule(self.rule_at("members", t, &at))));
        }
        // `after_one[i]`: members `i..` to come, one written (the first member was `i - 1`).
        let mut after_one: Vec<Option<Expr>> = vec![None; n + 1];
        after_one[n] = after[count(1)].clone().filter(|_| fits(1));
        for i in (1..n).rev() {
            let (m, required) = &members[i];
            let mut here: Vec<Option<Expr>> = Vec::with_capacity(cap + 1);
            for c in 0..=cap {
                self.tick(ptr)?;
                let take = (fits(c + 1))
                    .then(|| after[count(c + 1)].clone())
                    .flatten()
                    .map(|rest| Expr::seq(vec![sep.clone(), m.clone(), rest]));
                let skip = if *required { None } else { after[c].clone() };
                let either = match (take, skip) {
                    (Some(a), Some(b)) => Some(Expr::alt(vec![a, b])),
                    (a, b) => a.or(b),
                };
                here.push(either.map(|e| Expr::Rule(self.rule_at("members", e, &at))));
            }
            after = here;
            after_one[i] = after[count(1)].clone().filter(|_| fits(1));
        }
        // Nothing written yet: the first member present, or extra members only, or nothing.
        let mut before = match &extra {
            Some(e) => {
                let first = after_one[n].clone().map(|rest| Expr::seq(vec![e.clone(), rest]));
                match first {
                    Some(first) if least == 0 => Some(Expr::optional(first)),
                    first => first.or((least == 0).then_some(Expr::Empty)),
                }
            }
            None => (least == 0).then_some(Expr::Empty),
        };
        for i in (0..n).rev() {
            let (m, required) = &members[i];
            let first = after_one[i + 1].clone().map(|rest| Expr::seq(vec![m.clone(), rest]));
            before = match (*required, first, before) {
                (true, first, _) => first,
                (false, Some(a), Some(b)) => Some(Expr::alt(vec![a, b])),
                (false, a, b) => a.or(b),
            };
        }
        Ok(Some(before.unwrap_or_else(|| self.nothing_at(&format!("{ptr}/{keyword}")))))
    }

    /// [`Compiler::members`] for many members, the same language in automata linear in their number.
    ///
    /// Inlined whole, the member chain is one automaton whose states after a separator must remember
    /// which member came last: a copy of the trie of every later name per member, quadratic in the
    /// number of members (5,000 properties: over two million states). Here members come in blocks of
    /// [`MEMBERS_BLOCK`]; `next[x]`, a rule kept apart ([`GrammarBuilder::keep_rule`]), is "the next
    /// member is in block `x` or later (or is an extra member), any separator before it already
    /// read". Its automaton holds block `x` alone (quadratic in the block only): after a member, the
    /// separator, then a later member of the block, or `next[x + 1]`, whose automaton the parser
    /// enters. A required member is never skipped, and the object may end after member `j` only if
    /// no required member follows it.
    fn members_in_blocks(
        &mut self,
        members: &[(Expr, bool)],
        extra: Option<Expr>,
        non_empty: bool,
        ptr: &str,
    ) -> Result<Expr, SchemaError> {
        let sep = self.item_sep();
        let n = members.len();
        let at = format!("{ptr}/properties");
        let last_required = members.iter().rposition(|(_, req)| *req);
        let blocks = n.div_ceil(MEMBERS_BLOCK);
        // `next[blocks]`: only extra members are left (none: nothing can come next).
        let extras = extra.map(|e| {
            let tail = Expr::repeat(Expr::seq(vec![sep.clone(), e.clone()]), 0, None);
            let id = self.rule_at("members-extra", Expr::seq(vec![e, tail]), &at);
            self.b.keep_rule(id);
            Expr::Rule(id)
        });
        let mut next: Option<Expr> = extras;
        for block in (0..blocks).rev() {
            let range = block * MEMBERS_BLOCK..((block + 1) * MEMBERS_BLOCK).min(n);
            // `from[j]`: the next member is `j` or a later one (of this block, or past it).
            let mut from: Option<Expr> = next.clone();
            for j in range.clone().rev() {
                self.tick(ptr)?;
                let (m, req) = &members[j];
                let more = from.clone().map(|f| Expr::seq(vec![sep.clone(), f]));
                let may_end = last_required.is_none_or(|r| r <= j);
                let after = match (more, may_end) {
                    (Some(more), true) => Expr::optional(more),
                    (Some(more), false) => more,
                    (None, true) => Expr::Empty,
                    (None, false) => numbers::nothing(),
                };
                let this = Expr::seq(vec![m.clone(), after]);
                let body = match (&from, *req) {
                    (Some(skip), false) => Expr::alt(vec![this, skip.clone()]),
                    _ => this,
                };
                let id = self.rule_at(if j == range.start { "members-next" } else { "members" }, body, &at);
                if j == range.start {
                    self.b.keep_rule(id);
                }
                from = Some(Expr::Rule(id));
            }
            next = from;
        }
        let first = next.expect("more than MEMBERS_INLINED members: at least one block");
        Ok(if last_required.is_none() && !non_empty { Expr::optional(first) } else { first })
    }

    /// A JSON string (with quotes) that is none of `names`.
    fn key_not_in(&mut self, names: &[String], ptr: &str) -> Result<Expr, SchemaError> {
        if names.is_empty() {
            return Ok(self.any_string());
        }
        if names
            .iter()
            .any(|n| n.chars().count() > 256 || n.chars().any(|c| c == '"' || c == '\\' || (c as u32) < 0x20))
        {
            self.unsupported(ptr, "additionalProperties", "property names with escapes or over 256 characters")?;
            return Ok(self.any_string());
        }
        // Sorted: the names below each trie node are one run of the list.
        let mut chars: Vec<Vec<char>> = names.iter().map(|n| n.chars().collect()).collect();
        chars.sort_unstable();
        chars.dedup();
        let at = format!("{ptr}/additionalProperties");
        // Trie nodes (each name adds what it does not share with the one before it), a few automaton
        // states each: a trie the compiler would refuse is refused now, before it is built.
        let nodes: usize = chars
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let shared =
                    i.checked_sub(1).map_or(0, |p| n.iter().zip(&chars[p]).take_while(|(a, b)| a == b).count());
                n.len() - shared
            })
            .sum();
        let max = self.opts.limits.total_states / KEY_TRIE_STATES;
        if nodes > max {
            return Err(SchemaError::Limit { pointer: at, what: "trie of property names to exclude", got: nodes, max });
        }
        // Where a key leaves the trie (a character no name continues with), any characters follow:
        // one shared rule, entered from every trie node.
        // Once a character differs from every name, the key is none of them however the rest
        // is spelled; only that character must be read as what it is (`leave` below).
        let rest = Expr::seq(vec![Expr::repeat(self.json_char(), 0, None), lit("\"")]);
        let rest = Expr::Rule(self.rule_at("key-rest", rest, &at));
        // Escapes and non-ASCII characters leave the trie the same way at every depth (names are
        // ASCII, checked per depth in `trie_not`): one shared rule instead of a copy per depth.
        let leave = Expr::alt(vec![
            Self::canonical_escape(),
            Expr::CharClass { negated: false, ranges: vec![('\u{80}', '\u{10FFFF}')] },
        ]);
        let leave = Expr::Rule(self.rule_at("key-char", leave, &at));
        let (trie, _) = self.trie_not(&chars, 0, &leave, &rest, &at)?;
        Ok(Expr::seq(vec![lit("\""), trie]))
    }

    /// For sorted names sharing a prefix of `depth` characters: the rest of a key (closing quote
    /// included) that is none of them, and the number of trie nodes it spells. A subtrie of more
    /// than [`KEY_TRIE_NODES`] nodes is a rule kept apart, so that no automaton exceeds its limit
    /// however many names there are.
    fn trie_not(
        &mut self,
        names: &[Vec<char>],
        depth: usize,
        leave: &Expr,
        rest: &Expr,
        at: &str,
    ) -> Result<(Expr, usize), SchemaError> {
        self.tick(at)?;
        let mut alts = Vec::new();
        // Sorted, a name that ends here comes first; if none does, the key may end here.
        if names.first().is_none_or(|n| n.len() != depth) {
            alts.push(lit("\""));
        }
        let longer = names.iter().position(|n| n.len() > depth).map_or(&names[names.len()..], |p| &names[p..]);
        // The runs of names by their next character.
        let mut groups: Vec<(char, &[Vec<char>])> = Vec::new();
        let mut i = 0;
        while i < longer.len() {
            let c = longer[i][depth];
            let run = longer[i..].iter().take_while(|n| n[depth] == c).count();
            groups.push((c, &longer[i..i + run]));
            i += run;
        }
        let mut excluded: Vec<(char, char)> = vec![('\0', '\u{1f}'), ('"', '"'), ('\\', '\\')];
        excluded.extend(groups.iter().map(|&(c, _)| (c, c)));
        if groups.iter().all(|(c, _)| c.is_ascii()) {
            excluded.push(('\u{80}', '\u{10FFFF}'));
            let out = Expr::alt(vec![Expr::CharClass { negated: true, ranges: excluded }, leave.clone()]);
            alts.push(Expr::seq(vec![out, rest.clone()]));
        } else {
            let out = Expr::alt(vec![Expr::CharClass { negated: true, ranges: excluded }, Self::canonical_escape()]);
            alts.push(Expr::seq(vec![out, rest.clone()]));
        }
        let mut nodes = 1;
        for (c, sub) in groups {
            let (e, k) = self.trie_not(sub, depth + 1, leave, rest, at)?;
            nodes += k;
            alts.push(Expr::seq(vec![lit(&c.to_string()), e]));
        }
        let e = Expr::alt(alts);
        if nodes > KEY_TRIE_NODES && depth > 0 {
            let id = self.rule_at("key-trie", e, at);
            self.b.keep_rule(id);
            return Ok((Expr::Rule(id), 1));
        }
        Ok((e, nodes))
    }

    /// For `uniqueItems: true` over items that are one of at most [`UNIQUE_STRINGS`] strings (an
    /// `enum` of strings, with `type: string` or none, nothing else constraining, no
    /// `prefixItems`): those strings, each once. Such an array is a sequence of distinct choices,
    /// which a grammar can follow by the set of strings already written.
    fn unique_strings(&self, m: &Map<String, Value>, ptr: &str) -> Option<Vec<String>> {
        if m.get("uniqueItems") != Some(&Value::Bool(true)) || m.contains_key("prefixItems") {
            return None;
        }
        let items = self.deref_value(m.get("items")?, &format!("{ptr}/items")).ok()?;
        let items = items.as_object()?;
        let constrains = |k: &str| !ANNOTATIONS.contains(&k) && is_keyword(k);
        if items.keys().any(|k| k != "enum" && k != "type" && constrains(k))
            || items.get("type").is_some_and(|t| t != "string")
        {
            return None;
        }
        let mut values: Vec<String> = Vec::new();
        for v in items.get("enum")?.as_array()? {
            let v = v.as_str()?.to_owned();
            if !values.contains(&v) {
                values.push(v);
            }
        }
        (1..=UNIQUE_STRINGS).contains(&values.len()).then_some(values)
    }

    /// An array of distinct strings among `values` (see [`Compiler::unique_strings`]), between
    /// `min` and `max` of them: one rule per set of strings already written, each choosing the
    /// next among the others.
    fn unique_string_items(&mut self, values: &[String], min: u64, max: Option<u64>, ptr: &str) -> Expr {
        let at = format!("{ptr}/uniqueItems");
        let spellings: Vec<Expr> = values.iter().map(|v| self.value_spellings(&Value::String(v.clone()))).collect();
        let all = (1u32 << values.len()) - 1;
        let sep = self.item_sep();
        // `after[set]`: what may follow once the strings of `set` are written; built from the
        // largest sets down, so each refers only to rules already made.
        let mut after: Vec<Option<RuleId>> = vec![None; all as usize + 1];
        for set in (1..=all).rev() {
            let written = u64::from(set.count_ones());
            let mut alts = Vec::new();
            if written >= min {
                alts.push(Expr::Empty);
            }
            if max.is_none_or(|x| written < x) {
                for (i, v) in spellings.iter().enumerate().filter(|&(i, _)| set & 1 << i == 0) {
                    if let Some(next) = after[(set | 1 << i) as usize] {
                        alts.push(Expr::seq(vec![sep.clone(), v.clone(), Expr::Rule(next)]));
                    }
                }
            }
            after[set as usize] = Some(self.rule_at("unique-items", Expr::alt(alts), &at));
        }
        let mut first: Vec<Expr> = Vec::new();
        if max != Some(0) {
            for (i, v) in spellings.iter().enumerate() {
                if let Some(next) = after[1 << i] {
                    first.push(Expr::seq(vec![v.clone(), Expr::Rule(next)]));
                }
            }
        }
        if min == 0 {
            first.push(Expr::Empty);
        }
        if first.is_empty() {
            return self.nothing_at(&at);
        }
        Expr::seq(vec![self.open("["), Expr::alt(first), self.close("]")])
    }

    fn array(&mut self, m: &Map<String, Value>, ptr: &str) -> Result<Expr, SchemaError> {
        let min = count_keyword(m, "minItems", ptr)?.unwrap_or(0);
        let max = count_keyword(m, "maxItems", ptr)?;
        if let Some(values) = self.unique_strings(m, ptr) {
            for k in ["items", "minItems", "maxItems", "uniqueItems"] {
                if m.contains_key(k) {
                    self.enforced(k);
                }
            }
            return Ok(self.unique_string_items(&values, min, max, ptr));
        }
        for k in ["items", "prefixItems", "minItems", "maxItems", "additionalItems"] {
            if m.contains_key(k) {
                self.enforced(k);
            }
        }
        // The items after the prefix, and the keyword that says what they are.
        let (prefix_schemas, rest_schema, rest_keyword): (Vec<Value>, Option<Value>, &str) =
            match (m.get("prefixItems"), m.get("items")) {
                (Some(Value::Array(p)), items) => {
                    (p.clone(), Some(items.cloned().unwrap_or(Value::Bool(true))), "items")
                }
                (None, Some(Value::Array(p))) => {
                    (p.clone(), Some(m.get("additionalItems").cloned().unwrap_or(Value::Bool(true))), "additionalItems")
                }
                (_, items) => (Vec::new(), Some(items.cloned().unwrap_or(Value::Bool(true))), "items"),
            };
        let rest_schema = rest_schema.filter(|v| v != &Value::Bool(false));
        let mut prefix = Vec::new();
        for (i, p) in prefix_schemas.iter().enumerate() {
            prefix.push(self.schema(p, &format!("{ptr}/prefixItems/{i}"))?);
        }
        let rest = match &rest_schema {
            Some(s) => Some(self.schema(s, &format!("{ptr}/{rest_keyword}"))?),
            None => None,
        };
        let cap = 100_000u64;
        if min > cap || max.is_some_and(|x| x > cap && rest.is_none()) {
            return Err(SchemaError::Limit {
                pointer: ptr.to_string(),
                what: "array length bound",
                got: min as usize,
                max: cap as usize,
            });
        }
        let sep = self.item_sep();
        let k = prefix.len() as u64;
        // Items after the prefix: count in [min - k, max - k].
        let tail_min = min.saturating_sub(k);
        let tail_max = max.map(|x| x.saturating_sub(k));
        let tail = |first: bool, rest: &Expr| -> Expr {
            // `first`: nothing written before, so the first item has no separator.
            let item_sep = Expr::seq(vec![sep.clone(), rest.clone()]);
            if first {
                if tail_max == Some(0) {
                    return Expr::Empty;
                }
                let more = Expr::repeat(item_sep, tail_min.saturating_sub(1) as u32, tail_max.map(|x| (x - 1) as u32));
                let body = Expr::seq(vec![rest.clone(), more]);
                if tail_min == 0 { Expr::optional(body) } else { body }
            } else {
                Expr::repeat(item_sep, tail_min as u32, tail_max.map(|x| x as u32))
            }
        };
        let mut content = match &rest {
            Some(r) => tail(k == 0, r),
            // `false` items, yet `minItems` asks for more than the prefix.
            None if tail_min > 0 => self.nothing_at(&format!("{ptr}/{rest_keyword}")),
            None => Expr::Empty,
        };
        for i in (0..prefix.len()).rev() {
            let i64_ = i as u64;
            if max.is_some_and(|x| i64_ >= x) {
                content = Expr::Empty;
                continue;
            }
            let item = if i == 0 { prefix[i].clone() } else { Expr::seq(vec![sep.clone(), prefix[i].clone()]) };
            let body = Expr::seq(vec![item, content]);
            content = if i64_ >= min { Expr::optional(body) } else { body };
        }
        Ok(Expr::seq(vec![self.open("["), content, self.close("]")]))
    }

    /// The `oneOf` rewrite by required properties (see `object_schema`), or `None` if a branch does not
    /// require anything or the alternatives would be too many.
    fn one_of_by_required(&self, branches: &[Value], ptr: &str) -> Result<Option<Vec<Value>>, SchemaError> {
        let mut resolved = Vec::new();
        for b in branches {
            let b = self.deref_value(b, ptr)?;
            let req: Vec<String> = b
                .get("required")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect())
                .unwrap_or_default();
            if req.is_empty() || !b.is_object() {
                return Ok(None);
            }
            resolved.push((b, req));
        }
        let mut out = Vec::new();
        for (i, (b, req)) in resolved.iter().enumerate() {
            // For every other branch, the properties that may be absent to rule it out.
            let mut choices: Vec<Vec<String>> = Vec::new();
            let mut impossible = false;
            for (j, (_, other)) in resolved.iter().enumerate() {
                if j == i {
                    continue;
                }
                let c: Vec<String> = other.iter().filter(|k| !req.contains(k)).cloned().collect();
                if c.is_empty() {
                    impossible = true; // branch i implies branch j
                    break;
                }
                choices.push(c);
            }
            if impossible {
                continue;
            }
            let mut combos: Vec<Vec<String>> = vec![Vec::new()];
            for c in &choices {
                let mut next = Vec::new();
                for combo in &combos {
                    for k in c {
                        let mut x = combo.clone();
                        if !x.contains(k) {
                            x.push(k.clone());
                        }
                        next.push(x);
                    }
                }
                combos = next;
                if combos.len() > 64 {
                    return Ok(None);
                }
            }
            for forbid in combos {
                let props: Map<String, Value> = forbid.into_iter().map(|k| (k, Value::Bool(false))).collect();
                let extra = serde_json::json!({"type": "object", "properties": props});
                match merge::merge(b, &extra) {
                    Ok(v) => out.push(v),
                    Err(_) => return Ok(None),
                }
            }
        }
        Ok(Some(out))
    }

    /// Whether no instance can match two `oneOf` branches (checked by type, by `const`/`enum`, or by a
    /// required property with disjoint `const`/`enum` values).
    fn disjoint(&self, branches: &[Value], ptr: &str) -> bool {
        let resolved: Vec<Value> =
            branches.iter().map(|b| self.deref_value(b, ptr).unwrap_or(Value::Bool(true))).collect();
        for i in 0..resolved.len() {
            for j in i + 1..resolved.len() {
                if !pair_disjoint(&resolved[i], &resolved[j]) {
                    return false;
                }
            }
        }
        true
    }
}

#[derive(Default)]
struct Bounds {
    lo: Option<(Num, bool)>,
    hi: Option<(Num, bool)>,
}

/// A numeric bound known exactly: an integer, or a non-integral `f64` (below 2^52, so its floor is
/// exact).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Num {
    Int(i128),
    Frac(f64),
}

impl Num {
    /// Exact order (an `f64` comparison would round integers beyond 2^53).
    fn cmp_exact(self, other: Num) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => a.cmp(&b),
            (Num::Frac(a), Num::Frac(b)) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
            // `b` is not an integer: `a < b` exactly when `a <= floor(b)`.
            (Num::Int(a), Num::Frac(b)) => {
                if a <= b.floor() as i128 {
                    Ordering::Less
                } else {
                    Ordering::Greater
                }
            }
            (Num::Frac(_), Num::Int(_)) => other.cmp_exact(self).reverse(),
        }
    }
}

/// 2^53: integers of this magnitude or more are not all representable as `f64`.
const F64_EXACT_INTEGERS: f64 = 9_007_199_254_740_992.0;

/// The exact value of a number in the schema (`keyword` at `pointer`). serde_json (without
/// `arbitrary_precision`) gives integers that fit as `i64`/`u64`, exact, and every other number as
/// the nearest `f64`: an integral `f64` of magnitude 2^53 or more may stand for any of many
/// integers written in the schema (`123456789012345678901234567890` arrives rounded), so its exact
/// value is unknown and enforcing the rounded one would be a different language: an error. Smaller
/// `f64`s are taken as written (a literal with more significant digits than an `f64` holds is rounded
/// before it reaches us, and cannot be told apart; shortest round-trip forms are exact).
fn exact_number(v: &Value, pointer: &str, keyword: &str) -> Result<Num, SchemaError> {
    if let Some(i) = v.as_i64() {
        return Ok(Num::Int(i.into()));
    }
    if let Some(u) = v.as_u64() {
        return Ok(Num::Int(u.into()));
    }
    let x = v.as_f64().unwrap_or(f64::NAN);
    if x.is_finite() && x.fract() == 0.0 && x.abs() < F64_EXACT_INTEGERS {
        return Ok(Num::Int(x as i128));
    }
    if x.is_finite() && x.fract() != 0.0 {
        return Ok(Num::Frac(x));
    }
    Err(inexact(pointer, keyword, v))
}

fn inexact(pointer: &str, keyword: &str, v: &Value) -> SchemaError {
    SchemaError::Unsupported {
        pointer: pointer.to_string(),
        keyword: keyword.to_string(),
        detail: format!(
            ": {v} arrived as a float of magnitude 2^53 or more (an integer beyond 64 bits, or one \
             written with an exponent or a fraction), so its exact value is unknown"
        ),
    }
}

/// The pointer (under `pointer`) of the first number in `v` whose exact value is unknown (see
/// [`exact_number`]): `const` and `enum` values are matched as written, so a rounded one would
/// match a different value.
fn inexact_within<'v>(v: &'v Value, pointer: &str) -> Option<(String, &'v Value)> {
    match v {
        Value::Number(n) => {
            let rounded = n.as_i64().is_none()
                && n.as_u64().is_none()
                && n.as_f64().is_some_and(|x| x.fract() == 0.0 && x.abs() >= F64_EXACT_INTEGERS);
            rounded.then(|| (pointer.to_string(), v))
        }
        Value::Array(a) => a.iter().enumerate().find_map(|(i, x)| inexact_within(x, &format!("{pointer}/{i}"))),
        Value::Object(m) => m.iter().find_map(|(k, x)| inexact_within(x, &format!("{pointer}/{}", escape_pointer(k)))),
        _ => None,
    }
}

fn is_keyword(k: &str) -> bool {
    const KNOWN: &[&str] = &[
        "type",
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "items",
        "prefixItems",
        "additionalItems",
        "minItems",
        "maxItems",
        "enum",
        "const",
        "anyOf",
        "oneOf",
        "allOf",
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "nullable",
        "dependencies",
        "dependentRequired",
        "dependentSchemas",
    ];
    KNOWN.contains(&k) || UNSUPPORTED.contains(&k)
}

fn type_set(v: &Value) -> Option<Vec<&'static str>> {
    let all = ["null", "boolean", "object", "array", "string", "integer", "number"];
    if let Some(c) = v.get("const") {
        return Some(vec![value_type(c)]);
    }
    if let Some(e) = v.get("enum").and_then(Value::as_array) {
        return Some(e.iter().map(value_type).collect());
    }
    let t = v.get("type")?;
    let names: Vec<&str> = match t {
        Value::String(s) => vec![s.as_str()],
        Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
        _ => return None,
    };
    let mut out: Vec<&'static str> = all.iter().copied().filter(|x| names.contains(x)).collect();
    if out.contains(&"number") {
        out.push("integer");
    }
    if v.get("nullable") == Some(&Value::Bool(true)) {
        out.push("null");
    }
    Some(out)
}

fn value_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn values_of(v: &Value) -> Option<Vec<&Value>> {
    if let Some(c) = v.get("const") {
        return Some(vec![c]);
    }
    v.get("enum").and_then(Value::as_array).map(|a| a.iter().collect())
}

fn pair_disjoint(a: &Value, b: &Value) -> bool {
    if let (Some(ta), Some(tb)) = (type_set(a), type_set(b)) {
        let overlap = ta.iter().any(|x| tb.contains(x) || (*x == "integer" && tb.contains(&"number")));
        if !overlap {
            return true;
        }
    }
    if let (Some(va), Some(vb)) = (values_of(a), values_of(b)) {
        return !va.iter().any(|x| vb.contains(x));
    }
    let only = |v: &Value, t: &str| type_set(v).is_some_and(|ts| ts.iter().all(|x| *x == t));
    // Strings with disjoint length ranges.
    if only(a, "string") && only(b, "string") {
        let range = |v: &Value| {
            (v.get("minLength").and_then(Value::as_u64).unwrap_or(0), v.get("maxLength").and_then(Value::as_u64))
        };
        let ((alo, ahi), (blo, bhi)) = (range(a), range(b));
        if ahi.is_some_and(|h| h < blo) || bhi.is_some_and(|h| h < alo) {
            return true;
        }
    }
    // Objects where one requires a property that the other, closed, does not allow.
    if only(a, "object") && only(b, "object") {
        let forbids = |closed: &Value, open: &Value| {
            closed.get("additionalProperties") == Some(&Value::Bool(false))
                && closed.get("patternProperties").is_none()
                && open.get("required").and_then(Value::as_array).is_some_and(|r| {
                    r.iter()
                        .filter_map(Value::as_str)
                        .any(|k| closed.get("properties").and_then(|p| p.get(k)).is_none())
                })
        };
        if forbids(a, b) || forbids(b, a) {
            return true;
        }
    }
    // Objects told apart by a property both require, with disjoint const/enum values.
    let req = |v: &Value| -> Vec<String> {
        v.get("required")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect())
            .unwrap_or_default()
    };
    let (ra, rb) = (req(a), req(b));
    for k in ra.iter().filter(|k| rb.contains(k)) {
        let (pa, pb) = (&a["properties"][k.as_str()], &b["properties"][k.as_str()]);
        if let (Some(va), Some(vb)) = (values_of(pa), values_of(pb))
            && !va.iter().any(|x| vb.contains(x))
        {
            return true;
        }
    }
    false
}

fn type_matches(t: &str, v: &Value) -> bool {
    match (t, v) {
        ("null", Value::Null) | ("boolean", Value::Bool(_)) | ("string", Value::String(_)) => true,
        ("array", Value::Array(_)) | ("object", Value::Object(_)) => true,
        ("number", Value::Number(_)) => true,
        ("integer", Value::Number(n)) => n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0),
        _ => false,
    }
}

/// `json.dumps(v, separators=(",", ":"), ensure_ascii=False)`.
fn compact_json(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// `regex_to_expr` in JSON-string mode, memoized process-wide: formats and common patterns recur
/// across schemas, and parsing them is a visible part of compile time. Bounded: patterns up to
/// [`REGEX_CACHE_PATTERN_BYTES`] long, at most [`REGEX_CACHE_ENTRIES`] of them (a stranger's
/// schemas may each bring a new one); [`clear_regex_cache`] empties it.
fn json_regex(pattern: &str, any_char: &Expr, key: bool) -> Result<Expr, String> {
    let cacheable = pattern.len() <= REGEX_CACHE_PATTERN_BYTES;
    let cache_key = (key, pattern.to_string());
    if cacheable && let Some(hit) = regex_cache().lock().ok().and_then(|c| c.get(&cache_key).cloned()) {
        return hit;
    }
    let r = regex_to_expr(pattern, RegexMode::JsonString { any_char });
    if cacheable && let Ok(mut c) = regex_cache().lock() {
        if c.len() >= REGEX_CACHE_ENTRIES {
            c.clear();
        }
        c.insert(cache_key, r.clone());
    }
    r
}

/// Longest pattern [`json_regex`] keeps.
const REGEX_CACHE_PATTERN_BYTES: usize = 1024;
/// Most patterns [`json_regex`] keeps.
const REGEX_CACHE_ENTRIES: usize = 4096;

type RegexCache = HashMap<(bool, String), Result<Expr, String>>;

fn regex_cache() -> &'static std::sync::Mutex<RegexCache> {
    static CACHE: std::sync::OnceLock<std::sync::Mutex<RegexCache>> = std::sync::OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// Empties the cache of parsed patterns ([`json_regex`]).
pub(crate) fn clear_regex_cache() {
    if let Ok(mut c) = regex_cache().lock() {
        c.clear();
    }
}

/// JSON numbers (no exponent) that are multiples of `k`, for `k` = 1 or a power of ten below 1 (at
/// most that many fraction digits, trailing zeros aside). `None` for other steps.
fn multiple_of(k: f64) -> Option<Expr> {
    // Exactly the `f64` that `1e-n` parses to: a tolerance would take 1.0000000001 for 1.
    let n = (0..=9).find(|&n| format!("1e-{n}").parse::<f64>().is_ok_and(|p| p == k))?;
    let digits = |min: u32, max: Option<u32>| {
        Expr::repeat(Expr::CharClass { negated: false, ranges: vec![('0', '9')] }, min, max)
    };
    let int = Expr::seq(vec![
        Expr::optional(lit("-")),
        Expr::alt(vec![
            lit("0"),
            Expr::seq(vec![Expr::CharClass { negated: false, ranges: vec![('1', '9')] }, digits(0, None)]),
        ]),
    ]);
    let frac = if n == 0 {
        Expr::seq(vec![lit("."), Expr::repeat(lit("0"), 1, None)])
    } else {
        Expr::seq(vec![lit("."), digits(1, Some(n as u32)), Expr::repeat(lit("0"), 0, None)])
    };
    Some(Expr::seq(vec![int, Expr::optional(frac)]))
}

/// The pointer of the first of `keywords` that `m` holds, else `ptr` itself.
fn keyword_pointer(m: &Map<String, Value>, ptr: &str, keywords: &[&str]) -> String {
    keywords.iter().find(|k| m.contains_key(**k)).map_or_else(|| ptr.to_string(), |k| format!("{ptr}/{k}"))
}

/// A rule name from the last segment of a JSON pointer.
fn rule_name(ptr: &str) -> String {
    let last = ptr.rsplit('/').next().unwrap_or("");
    if last.is_empty() || last == "#" { "value".into() } else { last.chars().take(40).collect() }
}

fn escape_pointer(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("zz"), 16)
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Minimum and maximum number of characters a string-content expression spells (escapes count as
/// one character; `None` = unbounded).
fn char_bounds(e: &Expr) -> (u64, Option<u64>) {
    match e {
        Expr::Empty => (0, Some(0)),
        Expr::Literal(s) => {
            // An escape sequence spells one character.
            let n = if s.starts_with('\\') { 1 } else { s.chars().count() as u64 };
            (n, Some(n))
        }
        Expr::CharClass { .. } => (1, Some(1)),
        Expr::Regex(_) | Expr::Rule(_) | Expr::TagDispatch(_) | Expr::Token(_) => (0, None),
        Expr::Restrict { base, .. } => char_bounds(base),
        Expr::Seq(p) => {
            p.iter().map(char_bounds).fold((0, Some(0)), |(a, b), (c, d)| (a + c, b.zip(d).map(|(x, y)| x + y)))
        }
        Expr::Alt(p) => {
            let bs: Vec<_> = p.iter().map(char_bounds).collect();
            let lo = bs.iter().map(|b| b.0).min().unwrap_or(0);
            let hi = bs.iter().try_fold(0u64, |acc, b| b.1.map(|h| acc.max(h)));
            (lo, hi)
        }
        Expr::Repeat { expr, min, max } => {
            let (lo, hi) = char_bounds(expr);
            (lo * *min as u64, hi.zip(*max).map(|(h, m)| h * m as u64).or(if hi == Some(0) { Some(0) } else { None }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsed_patterns_are_kept_only_when_short_and_cleared_with_the_compiler() {
        let any = Compiler::json_char_with(false);
        let long = format!("^{}$", "ab".repeat(REGEX_CACHE_PATTERN_BYTES));
        assert!(json_regex(&long, &any, false).is_ok());
        let kept = |p: &str| regex_cache().lock().is_ok_and(|c| c.contains_key(&(false, p.to_string())));
        assert!(!kept(&long), "a long pattern is parsed, not kept");
        let short = "^kept-then-cleared-[0-9]$";
        assert!(json_regex(short, &any, false).is_ok());
        assert!(kept(short));
        clear_regex_cache();
        assert!(!kept(short));
    }
}
