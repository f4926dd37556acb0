//! XGrammar structural tags (the 0.2.8 JSON documents servers pass as `response_format`) → grammar IR.
//!
//! Accepts `{"type": "structural_tag", "format": …}` with typed and untyped format objects, and the
//! legacy `{"structures": [{"begin", "schema", "end"}], "triggers": […]}` shape. Free text
//! (`any_text`, `triggered_tags`, `dispatch`) lowers to [`TagDispatch`]; a tag whose trigger fires is
//! its own rule, so the dispatch automaton stays one state per trigger prefix and tool schemas are
//! compiled as separate rules. **Automatic end detection:** free text that ends where its
//! enclosing `tag` ends (the tag's content, the last element of a sequence that is the content, the
//! branches of an `or` there, and so on) never contains that end.
//!
//! Supported: `const_string`, `json_schema` (styles `json`, `qwen_xml`, `minimax_xml`, `glm_xml`, `deepseek_xml`, `deepseek_v4_1_xml`), `grammar`, `regex`, `any_text`, `sequence`,
//! `or`, `optional`, `plus`, `star`, `repeat`, `tag`, `triggered_tags`, `tags_with_separator`,
//! `dispatch`, and the token-level `token`, tags beginning or ending with a token, `token_triggered_tags`
//! and `token_dispatch` (special tokens by id or by text, through [`StructuralTagOptions::special_tokens`];
//! free text never holds a special token). `any_text.max_tokens` (a reasoning budget) becomes a
//! rule with a token budget, which the `Matcher` enforces at token boundaries (XGrammar: "mask-time
//! only"). Everything else — the other `json_schema` styles (`cohere_xml`, `kimi_k3_xml`,
//! `minimax_m3_xml`), `exclude_token`, `any_tokens`, `max_chars` / `max_whitespace_cnt` /
//! `any_order` — is an error naming the field and its JSON pointer, never silently a different
//! language.
//!
//! Two extensions, which XGrammar does not read: a `triggered_tags` tag may begin with a token
//! (`{"type": "token", …}`); it is triggered by that token beside the text triggers (parlance's
//! own grammars use it for an optional special-token call opener, Llama 3.x's `<|python_tag|>`).
//! And a `tags_with_separator` separator may be a format, not only a string (a special token
//! between messages: gpt-oss's `<|start|>assistant`, which as text no special token matches).

use crate::grammar::{Expr, Grammar, GrammarBuilder, GrammarError, MAX_SPECIAL_TOKEN_ID, RuleId, TagDispatch, Trigger};
use crate::json_schema::{JsonSchemaOptions, SchemaError, json_schema_to_grammar};
use crate::regex::regex_error;
use serde_json::Value;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

mod document;

pub(crate) use document::Node;
pub(crate) use document::parse_document;
use document::{Object, Schema};

/// How structural tags are compiled.
#[derive(Debug, Clone, Default)]
pub struct StructuralTagOptions {
    /// Options of every `json_schema` format inside (whitespace, strictness, limits). Default:
    /// [`JsonSchemaOptions::default`].
    pub json: JsonSchemaOptions,
    /// Special tokens by text, to resolve token formats that name a token by its text
    /// (`{"type": "token", "token": "<|call|>"}`), before the vocabulary's own
    /// (`CompiledGrammar::from_structural_tag`). Default: empty.
    pub special_tokens: std::collections::BTreeMap<String, u32>,
}

/// Why a structural tag cannot be turned into a grammar. Every variant names the JSON pointer of the
/// node at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StructuralTagError {
    /// The document is malformed.
    #[error("{}: invalid structural tag: {message}", crate::shown::pointer(.pointer))]
    Invalid {
        /// JSON pointer of the node.
        pointer: String,
        /// What is wrong.
        message: String,
    },
    /// A format type or field that parlance does not enforce yet.
    #[error("{}: unsupported {what}", crate::shown::pointer(.pointer))]
    Unsupported {
        /// JSON pointer of the node.
        pointer: String,
        /// What is unsupported, e.g. ``format type `token` ``.
        what: String,
    },
    /// A `json_schema` format's schema cannot be enforced.
    #[error("{}: {source}", crate::shown::pointer(.pointer))]
    Schema {
        /// JSON pointer of the `json_schema` format.
        pointer: String,
        /// The schema compiler's error (its own pointer is inside the schema).
        #[source]
        source: SchemaError,
    },
    /// A `grammar` format's text is invalid.
    #[error("{}: {source}", crate::shown::pointer(.pointer))]
    Grammar {
        /// JSON pointer of the `grammar` format.
        pointer: String,
        /// The grammar parser's error.
        #[source]
        source: GrammarError,
    },
}

/// Format objects nest at most this deep (the lowering recurses once per level).
const MAX_DEPTH: usize = 64;

/// Lowers a structural-tag document to a grammar.
pub fn structural_tag_to_grammar(doc: &Value, options: &StructuralTagOptions) -> Result<Grammar, StructuralTagError> {
    lower(&Node::from_value(doc), options, None)
}

/// [`structural_tag_to_grammar`] for the document's JSON text, as servers receive it: each
/// `json_schema` value is kept as its text and found by it among the schemas lowered before. The same
/// grammar, or the same error, as the document's value gives.
pub fn structural_tag_text_to_grammar(
    json: &str,
    options: &StructuralTagOptions,
) -> Result<Grammar, StructuralTagError> {
    let doc = parse_document(json).map_err(not_json)?;
    lower(&doc, options, None)
}

/// A document that is not JSON.
pub(crate) fn not_json(e: serde_json::Error) -> StructuralTagError {
    invalid("", format!("not JSON: {e}"))
}

/// [`structural_tag_to_grammar`], tokens named by text also resolved through `vocab`.
pub(crate) fn lower<'a>(
    doc: &'a Node<'a>,
    options: &'a StructuralTagOptions,
    vocab: Option<&crate::vocab::TokenVocab>,
) -> Result<Grammar, StructuralTagError> {
    let Node::Object(top) = doc else {
        return Err(invalid("", "a structural tag is a JSON object"));
    };
    // The legacy `{"structures", "triggers"}` shape is one `triggered_tags`; errors point into
    // the converted format (its `/tags/i` is `/structures/i`).
    let converted;
    let (format, ptr) = if top.contains_key("structures") {
        converted = legacy(top)?;
        (&converted, "")
    } else {
        match top.get("type") {
            None => {}
            Some(Node::String(t)) if t == "structural_tag" => {}
            Some(other) => return Err(invalid("/type", format!("expected \"structural_tag\", got {other}"))),
        }
        (top.get("format").ok_or_else(|| invalid("", "missing `format`"))?, "/format")
    };
    let mut lower = Lowering {
        b: Grammar::builder(),
        options,
        vocab,
        depth: 0,
        schemas: HashMap::new(),
        raw_rules: HashMap::new(),
        imported: HashMap::new(),
        node_rules: HashMap::new(),
        choice_depth: 0,
        cutting: false,
        json_options_key: crate::json_schema::options_key(&options.json),
    };
    let root = lower.b.declare("root");
    let body = lower.format(format, &Ptr::root(ptr), &[])?;
    lower.b.define(root, body);
    lower.b.build(root).map_err(|source| StructuralTagError::Grammar { pointer: String::new(), source })
}

/// The legacy `{"structures", "triggers"}` shape as the `triggered_tags` format it means.
fn legacy<'a>(top: &Object<'a>) -> Result<Node<'a>, StructuralTagError> {
    let Some(Node::Array(structures)) = top.get("structures") else {
        return Err(invalid("/structures", "expected an array"));
    };
    let text = |s: &'static str| Node::String(s.into());
    let mut tags = Vec::new();
    for (i, s) in structures.iter().enumerate() {
        let ptr = format!("/structures/{i}");
        let Node::Object(s) = s else { return Err(invalid(&ptr, "expected an object")) };
        let field = |name: &str| s.get(name).ok_or_else(|| invalid(&ptr, format!("missing `{name}`")));
        // Given as a value, the schema is that value; read from text, its value, which only a text
        // nested deeper than serde_json reads (a `json_schema` property deep inside) cannot be.
        let schema = match field("schema")? {
            Node::Value(v) => Schema::Value(std::borrow::Cow::Borrowed(*v)),
            other => Schema::Value(std::borrow::Cow::Owned(
                other.to_value().map_err(|e| invalid(format!("{ptr}/schema"), e.to_string()))?,
            )),
        };
        let content = Object::from_members(vec![
            ("type".into(), text("json_schema")),
            ("json_schema".into(), Node::Schema(schema)),
        ]);
        tags.push(Node::Object(Object::from_members(vec![
            ("type".into(), text("tag")),
            ("begin".into(), field("begin")?.clone()),
            ("content".into(), Node::Object(content)),
            ("end".into(), field("end")?.clone()),
        ])));
    }
    Ok(Node::Object(Object::from_members(vec![
        ("type".into(), text("triggered_tags")),
        ("triggers".into(), top.get("triggers").cloned().unwrap_or(Node::Null)),
        ("tags".into(), Node::Array(tags)),
    ])))
}

fn invalid(pointer: impl std::fmt::Display, message: impl Into<String>) -> StructuralTagError {
    StructuralTagError::Invalid { pointer: pointer.to_string(), message: message.into() }
}

fn unsupported(pointer: impl std::fmt::Display, what: impl Into<String>) -> StructuralTagError {
    StructuralTagError::Unsupported { pointer: pointer.to_string(), what: what.into() }
}

/// A JSON pointer into the document, written out only where an error names it: a request's
/// document has thousands of nodes, and formatting each one's pointer was a tenth of its lowering.
#[derive(Clone, Copy)]
struct Ptr<'p> {
    parent: Option<&'p Ptr<'p>>,
    key: &'p str,
    index: Option<usize>,
}

impl<'p> Ptr<'p> {
    /// The pointer `at` itself (`""` or `/format`).
    fn root(at: &'p str) -> Ptr<'p> {
        Ptr { parent: None, key: at, index: None }
    }

    /// The member `key` of the node here.
    fn at(&'p self, key: &'p str) -> Ptr<'p> {
        Ptr { parent: Some(self), key, index: None }
    }

    /// Item `index` of the array in member `key` of the node here.
    fn item(&'p self, key: &'p str, index: usize) -> Ptr<'p> {
        Ptr { parent: Some(self), key, index: Some(index) }
    }
}

impl std::fmt::Display for Ptr<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(parent) = self.parent {
            write!(f, "{parent}/")?;
        }
        f.write_str(self.key)?;
        match self.index {
            Some(i) => write!(f, "/{i}"),
            None => Ok(()),
        }
    }
}

/// The format types an untyped object is tried as, in XGrammar's order, with the fields that
/// identify each.
const UNTYPED: &[(&str, &[&str])] = &[
    ("tag", &["begin", "content", "end"]),
    ("const_string", &["value"]),
    ("json_schema", &["json_schema"]),
    ("sequence", &["elements"]),
    ("triggered_tags", &["triggers", "tags"]),
    ("tags_with_separator", &["tags", "separator"]),
    ("repeat", &["content", "min", "max"]),
    ("optional", &["content"]),
    ("dispatch", &["rules"]),
    ("token_triggered_tags", &["trigger_tokens", "tags"]),
];

struct Lowering<'a> {
    b: GrammarBuilder,
    options: &'a StructuralTagOptions,
    vocab: Option<&'a crate::vocab::TokenVocab>,
    depth: usize,
    /// The rule of each `json_schema` (style `json`) lowered so far, by the schema: a document that
    /// names a tool in two places (gpt-oss: the first message and every later one) compiles its
    /// schema once. (Across documents, `json_schema::lowered_grammar` caches the lowering.)
    /// (By content hash: documents may name thousands of tools.)
    schemas: HashMap<u64, Vec<(&'a Value, RuleId)>>,
    /// The rule of each `json_schema` text lowered so far (style `json`), by the text's index (see
    /// `document::Schema::Text`).
    raw_rules: HashMap<usize, RuleId>,
    /// Lowered schemas imported, by grammar serial.
    imported: HashMap<u64, RuleId>,
    /// The rules made for document nodes so far (each `or`, each unit), by the hash of the node,
    /// the rule's name and the end strings (see [`Lowering::lowered_before`]).
    node_rules: HashMap<u64, Vec<LoweredNode<'a>>>,
    /// How many choices (`or` of two or more) enclose the format being lowered.
    choice_depth: usize,
    /// Lowering the tags of a choice that [`Lowering::cut`] cuts.
    cutting: bool,
    /// `options.json` as the key of the cross-document cache of lowered schemas (formatted once
    /// per document, not once per schema).
    json_options_key: String,
}

/// A document node lowered to a rule of its own: what it was lowered as (the rule's name, the
/// end strings after it) and the rule.
struct LoweredNode<'a> {
    node: &'a Node<'a>,
    name: &'static str,
    end: Vec<String>,
    rule: RuleId,
}

impl<'a> Lowering<'a> {
    /// Lowers the format at `ptr`; `end` holds the enclosing tag's end strings when this format is
    /// what comes right before that end (automatic end detection).
    fn format(&mut self, v: &'a Node<'a>, ptr: &Ptr<'_>, end: &[String]) -> Result<Expr, StructuralTagError> {
        if self.depth >= MAX_DEPTH {
            return Err(invalid(ptr, format!("formats nested deeper than {MAX_DEPTH}")));
        }
        self.depth += 1;
        let result = self.format_inner(v, ptr, end);
        self.depth -= 1;
        result
    }

    fn format_inner(&mut self, v: &'a Node<'a>, ptr: &Ptr<'_>, end: &[String]) -> Result<Expr, StructuralTagError> {
        let Node::Object(o) = v else { return Err(invalid(ptr, "a format is a JSON object")) };
        let kind = match o.get("type") {
            Some(Node::String(t)) => t.as_ref(),
            Some(other) => return Err(invalid(format!("{ptr}/type"), format!("expected a string, got {other}"))),
            None => UNTYPED
                .iter()
                .find(|(_, fields)| fields.iter().all(|f| o.contains_key(f)))
                .map(|(t, _)| *t)
                .unwrap_or("any_text"),
        };
        let f = Fields { o, ptr };
        match kind {
            "const_string" => Ok(Expr::literal(f.string("value")?)),
            "json_schema" | "qwen_xml_parameter" => {
                let xml = kind == "qwen_xml_parameter";
                if self.choice_depth == 0 {
                    return self.json_schema(&f, xml);
                }
                if self.cutting {
                    // The tag's rest becomes the unit (see `Lowering::cut`): the schema's grammar
                    // as imported, when it is one.
                    let schema = self.json_schema(&f, xml)?;
                    if matches!(schema, Expr::Rule(r) if self.b.is_import_root(r)) {
                        return Ok(schema);
                    }
                    let rule = self.b.rule("choice", schema);
                    self.b.keep_rule(rule);
                    self.b.cache_rule(rule);
                    return Ok(Expr::Rule(rule));
                }
                // Inside a choice (gpt-oss: one message per tool), each schema is a unit: compiled
                // once and reused by every request with that tool, as a triggered tag's is. The
                // choice itself (the message headers) stays one automaton, so a message's start
                // is read by one item, not one per tool. The same node met again (a repeated
                // choice) is the same rule, so the choices around it stay equal.
                let key = Self::node_key(v, end, "choice");
                if let Some(rule) = self.lowered_before(key, v, end, "choice") {
                    return Ok(Expr::Rule(rule));
                }
                let schema = self.json_schema(&f, xml)?;
                let rule = self.b.rule("choice", schema);
                self.b.keep_rule(rule);
                self.b.cache_rule(rule);
                self.remember(key, v, end, "choice", rule);
                Ok(Expr::Rule(rule))
            }
            "grammar" => {
                let text = f.string("grammar")?;
                let g = Grammar::parse(text)
                    .map_err(|source| StructuralTagError::Grammar { pointer: ptr.to_string(), source })?;
                Ok(Expr::Rule(self.b.import(&g)))
            }
            "regex" => {
                let pattern = f.string("pattern")?;
                regex_syntax::Parser::new().parse(pattern).map_err(|e| {
                    let shown = crate::shown::quoted(pattern);
                    invalid(format!("{ptr}/pattern"), format!("invalid regex {shown}: {}", regex_error(&e)))
                })?;
                Ok(Expr::Regex(pattern.to_owned()))
            }
            "any_text" => {
                f.refuse(&["max_chars"])?;
                let text = free_text(Vec::new(), f.strings("excludes")?, end, true);
                match f.opt_count("max_tokens")? {
                    // A budget is the matcher's: the text is a rule of its own, bounded in tokens.
                    Some(max_tokens) => {
                        let rule = self.b.rule("budgeted-text", text);
                        self.b.set_token_budget(rule, max_tokens);
                        Ok(Expr::Rule(rule))
                    }
                    None => Ok(text),
                }
            }
            "sequence" | "or" => {
                let elements = f.array("elements")?;
                if elements.is_empty() {
                    return Err(invalid(format!("{ptr}/elements"), "expected at least one element"));
                }
                // An `or` is a rule of its own. Documents repeat a whole choice (gpt-oss: the first
                // message, then `<|start|>assistant` and the same choice again); a choice met a
                // second time is not lowered again but kept as one rule that both places
                // reference, where inlining would build its automaton, every tool's schema
                // within, twice.
                let key = (kind == "or").then(|| Self::node_key(v, end, "or"));
                if let Some(key) = key
                    && let Some(rule) = self.lowered_before(key, v, end, "or")
                {
                    self.b.keep_rule(rule);
                    return Ok(Expr::Rule(rule));
                }
                let last = elements.len() - 1;
                let mut parts = Vec::with_capacity(elements.len());
                for (i, e) in elements.iter().enumerate() {
                    let end = if kind == "or" || i == last { end } else { &[] };
                    let choice = usize::from(kind == "or" && elements.len() > 1);
                    self.choice_depth += choice;
                    // A schema inside an `or` is a unit of its own again: a tag is cut at its top
                    // level only.
                    let cutting = self.cutting;
                    self.cutting = cutting && kind != "or";
                    let part = self.format(e, &ptr.item("elements", i), end);
                    self.cutting = cutting;
                    self.choice_depth -= choice;
                    parts.push(part?);
                }
                let Some(key) = key else { return Ok(Expr::seq(parts)) };
                let rule = self.b.rule("or", Expr::alt(parts));
                self.remember(key, v, end, "or", rule);
                Ok(Expr::Rule(rule))
            }
            "optional" | "plus" | "star" => {
                let content = self.format(f.get("content")?, &ptr.at("content"), end)?;
                let (min, max) = match kind {
                    "optional" => (0, Some(1)),
                    "plus" => (1, None),
                    _ => (0, None),
                };
                Ok(Expr::repeat(content, min, max))
            }
            "repeat" => {
                let min = f.count("min")?;
                let max = match f.get("max")? {
                    Node::Number(n) if n.as_i64() == Some(-1) => None,
                    _ => Some(f.count("max")?),
                };
                if max.is_some_and(|max| max < min) {
                    return Err(invalid(ptr, "`max` is below `min`"));
                }
                let content = self.format(f.get("content")?, &ptr.at("content"), end)?;
                Ok(Expr::repeat(content, min, max))
            }
            "tag" => {
                let (begin, rest) = self.tag_with_token_begin(o, ptr)?;
                Ok(Expr::seq(vec![trigger_expr(begin), rest]))
            }
            "token" => Ok(Expr::Token(self.token(f.get("token")?, &ptr.at("token"))?)),
            "token_triggered_tags" => self.token_triggered_tags(&f, end),
            "triggered_tags" => self.triggered_tags(&f, end),
            "tags_with_separator" => {
                // A separator that is a format, not a string, is parlance's own extension (a
                // special token between the tags: gpt-oss's `<|start|>assistant`).
                let separator = match f.get("separator")? {
                    Node::String(text) => Expr::literal(text.as_ref()),
                    sep @ Node::Object(_) => self.format(sep, &ptr.at("separator"), &[])?,
                    _ => return Err(invalid(format!("{ptr}/separator"), "expected a string or a format")),
                };
                let tags = f.array("tags")?;
                // A choice among tags: each tag's schema is a unit, as in an `or`.
                let choice = usize::from(tags.len() > 1);
                self.choice_depth += choice;
                let alternatives = self.tag_alternatives(tags, ptr);
                self.choice_depth -= choice;
                let alternatives = alternatives?;
                if alternatives.is_empty() {
                    return Err(invalid(format!("{ptr}/tags"), "expected at least one tag"));
                }
                let rule = self.b.rule("tag", Expr::alt(alternatives));
                let one = Expr::Rule(rule);
                let list = if f.flag("stop_after_first")? {
                    one
                } else {
                    // Written twice below: one automaton both places refer to, not two copies.
                    self.b.keep_rule(rule);
                    let more = Expr::seq(vec![separator, one.clone()]);
                    Expr::seq(vec![one, Expr::repeat(more, 0, None)])
                };
                Ok(if f.flag("at_least_one")? { list } else { Expr::optional(list) })
            }
            "dispatch" => {
                let mut tags = Vec::new();
                for (i, rule) in f.array("rules")?.iter().enumerate() {
                    let rule_ptr = ptr.item("rules", i);
                    let rule = rule.as_array().unwrap_or_default();
                    let (Some(Node::String(trigger)), Some(format), 2) = (rule.first(), rule.get(1), rule.len()) else {
                        return Err(invalid(rule_ptr, "a dispatch rule is [trigger string, format]"));
                    };
                    if trigger.is_empty() {
                        return Err(invalid(format!("{rule_ptr}/0"), "a trigger must not be empty"));
                    }
                    let body = self.format(format, &rule_ptr.at("1"), &[])?;
                    let rule = self.b.rule("dispatch", body);
                    self.b.cache_rule(rule);
                    tags.push((Trigger::Text(trigger.to_string()), Expr::Rule(rule)));
                }
                let looping = f.opt_flag("loop")?.unwrap_or(true);
                Ok(free_text(tags, f.strings("excludes")?, end, looping))
            }
            "token_dispatch" => {
                f.refuse_nonempty("exclude_tokens")?;
                let mut tags = Vec::new();
                for (i, rule) in f.array("rules")?.iter().enumerate() {
                    let rule_ptr = ptr.item("rules", i);
                    let rule = rule.as_array().unwrap_or_default();
                    let (Some(token), Some(format), 2) = (rule.first(), rule.get(1), rule.len()) else {
                        return Err(invalid(rule_ptr, "a token_dispatch rule is [token, format]"));
                    };
                    let id = self.token(token, &rule_ptr.at("0"))?;
                    let body = self.format(format, &rule_ptr.at("1"), &[])?;
                    let rule = self.b.rule("dispatch", body);
                    self.b.cache_rule(rule);
                    tags.push((Trigger::Token(id), Expr::Rule(rule)));
                }
                let looping = f.opt_flag("loop")?.unwrap_or(true);
                Ok(free_text(tags, Vec::new(), end, looping))
            }
            "exclude_token" | "any_tokens" => Err(unsupported(
                ptr,
                format!(
                    "format type `{kind}` (free text over tokens; parlance's free text is text, special tokens only where named)"
                ),
            )),
            other => Err(invalid(format!("{ptr}/type"), format!("unknown format type `{other}`"))),
        }
    }

    /// The key under which `node`, lowered as a rule `name` before `end`, is remembered.
    fn node_key(node: &Node<'_>, end: &[String], name: &str) -> u64 {
        let mut h = crate::earley::ItemHasher::default();
        node.hash_into(&mut h);
        (name, end).hash(&mut h);
        h.finish()
    }

    /// The rule an equal node got when it was lowered the same way before (its lowering depends
    /// on nothing else: the options are the document's, and what a choice's elements become does
    /// not depend on what encloses the choice).
    fn lowered_before(&self, key: u64, node: &Node<'_>, end: &[String], name: &str) -> Option<RuleId> {
        self.node_rules.get(&key)?.iter().find(|n| n.name == name && n.end == end && n.node.same(node)).map(|n| n.rule)
    }

    /// Remembers the rule `node` was lowered to as a rule `name` before `end`, under `key`.
    fn remember(&mut self, key: u64, node: &'a Node<'a>, end: &[String], name: &'static str, rule: RuleId) {
        self.node_rules.entry(key).or_default().push(LoweredNode { node, name, end: end.to_vec(), rule });
    }

    fn json_schema(&mut self, f: &Fields<'a, '_>, xml: bool) -> Result<Expr, StructuralTagError> {
        let style = if xml { "qwen_xml" } else { f.opt_string("style")?.unwrap_or("json") };
        let xml_style = XmlStyle::named(style);
        if style != "json" && xml_style.is_none() {
            return Err(unsupported(
                f.ptr,
                format!(
                    "json_schema style `{style}` (`json`, `qwen_xml`, `minimax_xml`, `glm_xml`, `deepseek_xml` and `deepseek_v4_1_xml` are implemented)"
                ),
            ));
        }
        f.refuse(&["max_whitespace_cnt"])?;
        if f.opt_flag("any_order")?.unwrap_or(false) {
            return Err(unsupported(format!("{}/any_order", f.ptr), "`any_order: true`"));
        }
        if !f.strings("excludes")?.is_empty() {
            return Err(unsupported(format!("{}/excludes", f.ptr), "`excludes` on a json_schema format"));
        }
        let schema = match f.get("json_schema")? {
            Node::Schema(Schema::Text(index, text)) => {
                if let Some(xml_style) = xml_style {
                    let schema: Value = serde_json::from_str(text)
                        .map_err(|e| invalid(format!("{}/json_schema", f.ptr), e.to_string()))?;
                    return self.xml_parameters(&schema, &format!("{}/json_schema", f.ptr), xml_style);
                }
                if let Some(&rule) = self.raw_rules.get(index) {
                    return Ok(Expr::Rule(rule));
                }
                let g = crate::json_schema::lowered_grammar_text(text, &self.options.json, &self.json_options_key)
                    .map_err(|source| StructuralTagError::Schema { pointer: f.ptr.to_string(), source })?;
                // Another spelling of a schema imported already is that schema's grammar (found by
                // its value): imported once, as from the document as a value.
                let rule = match self.imported.get(&g.serial()) {
                    Some(&rule) => rule,
                    None => {
                        let rule = self.b.import_within(&g, Some(&f.ptr.to_string()));
                        self.imported.insert(g.serial(), rule);
                        rule
                    }
                };
                self.raw_rules.insert(*index, rule);
                return Ok(Expr::Rule(rule));
            }
            Node::Schema(Schema::Value(schema)) => schema.as_ref(),
            // Both readers keep every `json_schema` member as a schema.
            _ => return Err(invalid(format!("{}/json_schema", f.ptr), "expected a JSON Schema")),
        };
        if let Some(xml_style) = xml_style {
            return self.xml_parameters(schema, &format!("{}/json_schema", f.ptr), xml_style);
        }
        let hash = crate::json_schema::value_hash(schema, &());
        if let Some(&(_, rule)) =
            self.schemas.get(&hash).and_then(|v| v.iter().find(|(s, _)| crate::json_schema::same_value(s, schema)))
        {
            return Ok(Expr::Rule(rule));
        }
        let g = crate::json_schema::lowered_grammar(schema, hash, &self.options.json, &self.json_options_key)
            .map_err(|source| StructuralTagError::Schema { pointer: f.ptr.to_string(), source })?;
        // Errors in its rules name this format's pointer, then the pointer into the schema.
        let rule = self.b.import_within(&g, Some(&f.ptr.to_string()));
        self.schemas.entry(hash).or_default().push((schema, rule));
        Ok(Expr::Rule(rule))
    }

    /// The XML parameter styles (Qwen3-Coder's `<parameter=NAME>VALUE</parameter>` and its kin, see
    /// [`XmlStyle`]): an object schema's properties, in the schema's order, each at most once and
    /// the required ones present, whitespace between them. A string value is raw text up to its
    /// closing tag; any other value is JSON valid for the property's schema, whitespace around it.
    /// Parameters the schema does not name are not written (a schema that allows them is not
    /// narrowed silently: a non-`false` `additionalProperties` is refused).
    fn xml_parameters(&mut self, schema: &Value, ptr: &str, style: XmlStyle) -> Result<Expr, StructuralTagError> {
        let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
            return Err(invalid(ptr, format!("the {} style takes an object schema with `properties`", style.name())));
        };
        if schema.get("additionalProperties").is_some_and(|a| a != &Value::Bool(false)) {
            return Err(unsupported(
                format!("{ptr}/additionalProperties"),
                format!("additional properties in the {} style", style.name()),
            ));
        }
        let required: Vec<&str> =
            schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        let ws = || {
            Expr::repeat(
                Expr::CharClass { negated: false, ranges: vec![(' ', ' '), ('\t', '\n'), ('\r', '\r')] },
                0,
                None,
            )
        };
        let close = style.close();
        let mut parts = vec![ws()];
        for (key, property) in properties {
            let raw = property.get("type").and_then(Value::as_str) == Some("string")
                && property.get("enum").is_none()
                && property.get("const").is_none();
            let value = if raw {
                // Raw text that never holds the closing tag.
                free_text(Vec::new(), Vec::new(), std::slice::from_ref(&close), true)
            } else {
                let at = format!("{ptr}/properties/{key}");
                let (g, _) = json_schema_to_grammar(property, &self.options.json)
                    .map_err(|source| StructuralTagError::Schema { pointer: at.clone(), source })?;
                Expr::seq(vec![ws(), Expr::Rule(self.b.import_within(&g, Some(&at))), ws()])
            };
            let mut parameter = style.open(key, raw, ws);
            parameter.extend([value, Expr::literal(close.clone()), ws()]);
            let parameter = Expr::seq(parameter);
            parts.push(if required.contains(&key.as_str()) { parameter } else { Expr::optional(parameter) });
        }
        Ok(Expr::Rule(self.b.rule(style.name(), Expr::seq(parts))))
    }

    /// A special token named by id or text (a `token` format's `token`, a tag's token begin or end).
    fn token(&self, v: &Node<'_>, ptr: &Ptr<'_>) -> Result<u32, StructuralTagError> {
        match v {
            Node::Number(n) => n
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .filter(|&n| n <= MAX_SPECIAL_TOKEN_ID)
                .ok_or_else(|| invalid(ptr, "expected a token id")),
            Node::String(text) => self
                .options
                .special_tokens
                .get(text.as_ref())
                .copied()
                .or_else(|| self.vocab.and_then(|v| v.special_token_id(text)))
                .ok_or_else(|| {
                    // EOS ends generation where the grammar may end; it is no token a grammar
                    // names (Harmony's `<|return|>` is both, when the tokenizer config says so).
                    let eos = self.vocab.is_some_and(|v| v.eos_ids().iter().any(|&id| v.token_bytes(id) == text.as_bytes()));
                    let why = if eos {
                        format!("{text:?} is the vocabulary's EOS token, which ends generation and is never matched inside a grammar; choose another EOS (the CLI's `--eos`)")
                    } else {
                        format!("{text:?} is not a special token of the vocabulary")
                    };
                    invalid(ptr, why)
                }),
            _ => Err(invalid(ptr, "expected a token id or a special token's text")),
        }
    }

    /// A tag's `begin` or `end` given as `{"type": "token", "token": …}`.
    fn token_object(&self, o: &Object<'_>, ptr: &Ptr<'_>) -> Result<u32, StructuralTagError> {
        if o.get("type").and_then(Node::as_str).is_some_and(|t| t != "token") {
            return Err(invalid(format!("{ptr}/type"), "expected a `token`"));
        }
        let token = o.get("token").ok_or_else(|| invalid(ptr, "missing `token`"))?;
        self.token(token, &ptr.at("token"))
    }

    /// A tag whose begin may be a token: `(begin, rest)`.
    fn tag_with_token_begin(
        &mut self,
        o: &'a Object<'a>,
        ptr: &Ptr<'_>,
    ) -> Result<(Trigger, Expr), StructuralTagError> {
        if let Some(Node::Object(begin)) = o.get("begin") {
            let id = self.token_object(begin, &ptr.at("begin"))?;
            let (_, rest) = self.tag_after(o, ptr, true)?;
            return Ok((Trigger::Token(id), rest));
        }
        let (begin, rest) = self.tag(o, ptr)?;
        Ok((Trigger::Text(begin), rest))
    }

    /// A `tag` object: its `begin`, and the rest (content, then one of its ends).
    fn tag(&mut self, o: &'a Object<'a>, ptr: &Ptr<'_>) -> Result<(String, Expr), StructuralTagError> {
        self.tag_after(o, ptr, false)
    }

    /// [`Lowering::tag`]; with `token_begin` the begin is a token the caller has read, and the
    /// text begin returned is empty.
    fn tag_after(
        &mut self,
        o: &'a Object<'a>,
        ptr: &Ptr<'_>,
        token_begin: bool,
    ) -> Result<(String, Expr), StructuralTagError> {
        let f = Fields { o, ptr };
        if let Some(Node::String(t)) = o.get("type")
            && t != "tag"
        {
            return Err(invalid(format!("{ptr}/type"), format!("expected a `tag`, got `{t}`")));
        }
        let begin = match f.get("begin")? {
            _ if token_begin => String::new(),
            Node::String(s) => s.to_string(),
            Node::Object(_) => {
                return Err(unsupported(format!("{ptr}/begin"), "token `begin` (token-level formats)"));
            }
            _ => return Err(invalid(format!("{ptr}/begin"), "expected a string")),
        };
        if let Node::Object(end) = f.get("end")? {
            let id = self.token_object(end, &ptr.at("end"))?;
            let content = self.format(f.get("content")?, &ptr.at("content"), &[])?;
            return Ok((begin, Expr::seq(vec![content, Expr::Token(id)])));
        }
        let ends: Vec<String> = match f.get("end")? {
            Node::String(s) => vec![s.to_string()],
            Node::Array(list) => list
                .iter()
                .enumerate()
                .map(|(i, e)| {
                    e.as_str().map(str::to_owned).ok_or_else(|| invalid(format!("{ptr}/end/{i}"), "expected a string"))
                })
                .collect::<Result<_, _>>()?,
            _ => return Err(invalid(format!("{ptr}/end"), "expected a string or an array of strings")),
        };
        if ends.is_empty() {
            return Err(invalid(format!("{ptr}/end"), "expected at least one end"));
        }
        let detected: Vec<String> = ends.iter().filter(|e| !e.is_empty()).cloned().collect();
        let content = self.format(f.get("content")?, &ptr.at("content"), &detected)?;
        let end = Expr::alt(ends.into_iter().map(Expr::literal).collect());
        Ok((begin, Expr::seq(vec![content, end])))
    }

    /// Each tag of `tags` (at `{ptr}/tags/i`) as the expression that matches it, its begin first.
    fn tag_alternatives(&mut self, tags: &'a [Node<'a>], ptr: &Ptr<'_>) -> Result<Vec<Expr>, StructuralTagError> {
        // Every choice is cut (see `Lowering::cut`), so that a request with a few of the tools
        // finds the units a request with all of them built.
        let cutting = std::mem::replace(&mut self.cutting, tags.len() > 1);
        let alternatives = tags.iter().enumerate().map(|(i, t)| {
            let tag_ptr = ptr.item("tags", i);
            let Node::Object(t) = t else { return Err(invalid(tag_ptr, "a tag is a JSON object")) };
            let (begin, rest) = self.tag_with_token_begin(t, &tag_ptr)?;
            let alternative = Expr::seq(vec![trigger_expr(begin), rest]);
            Ok(if self.cutting { self.cut(alternative) } else { alternative })
        });
        let alternatives = alternatives.collect();
        self.cutting = cutting;
        alternatives
    }

    /// A tag of a choice (gpt-oss: one message per tool) cut after its first literal (the header
    /// that names the tool), when a schema's grammar follows: the rest, up to the tag's end, is a
    /// unit (`GrammarBuilder::cache_rule`) that refers to nothing but the imported schema. The
    /// tags' choice is then the trie of their headers, not of headers and every marker after them
    /// (a 128-tool request rebuilt 3,644 trie states, most of them the same 17 markers per tool),
    /// and the unit is known across requests by its schema.
    fn cut(&mut self, alternative: Expr) -> Expr {
        fn flatten(e: Expr, out: &mut Vec<Expr>) {
            match e {
                Expr::Seq(items) => items.into_iter().for_each(|i| flatten(i, out)),
                other => out.push(other),
            }
        }
        let mut items = Vec::new();
        flatten(alternative, &mut items);
        let schema = items.iter().position(|e| matches!(e, Expr::Rule(r) if self.b.is_import_root(*r)));
        let header = items.iter().position(|e| matches!(e, Expr::Literal(_)));
        let (Some(schema), Some(header)) = (schema, header) else { return Expr::seq(items) };
        if header >= schema {
            return Expr::seq(items);
        }
        let mut head = items;
        let rest = head.split_off(header + 1);
        let unit = self.b.rule("message", Expr::seq(rest));
        self.b.keep_rule(unit);
        self.b.cache_rule(unit);
        head.push(Expr::Rule(unit));
        Expr::seq(head)
    }

    fn token_triggered_tags(&mut self, f: &Fields<'a, '_>, end: &[String]) -> Result<Expr, StructuralTagError> {
        let ptr = f.ptr;
        f.refuse_nonempty("exclude_tokens")?;
        let triggers: Vec<u32> = f
            .array("trigger_tokens")?
            .iter()
            .enumerate()
            .map(|(i, t)| self.token(t, &ptr.item("trigger_tokens", i)))
            .collect::<Result<_, _>>()?;
        let (mut tags, mut first) = (Vec::new(), Vec::new());
        for (i, t) in f.array("tags")?.iter().enumerate() {
            let tag_ptr = ptr.item("tags", i);
            let Node::Object(t) = t else { return Err(invalid(tag_ptr, "a tag is a JSON object")) };
            let (Trigger::Token(id), rest) = self.tag_with_token_begin(t, &tag_ptr)? else {
                return Err(invalid(format!("{tag_ptr}/begin"), "a token_triggered_tags tag begins with a token"));
            };
            if !triggers.contains(&id) {
                return Err(invalid(format!("{tag_ptr}/begin"), format!("token {id} is not among the trigger tokens")));
            }
            let rule = self.b.rule("tag", rest);
            self.b.cache_rule(rule);
            first.push(Expr::seq(vec![Expr::Token(id), Expr::Rule(rule)]));
            tags.push((Trigger::Token(id), Expr::Rule(rule)));
        }
        if tags.is_empty() {
            return Err(invalid(format!("{ptr}/tags"), "expected at least one tag"));
        }
        let once = f.flag("stop_after_first")?;
        let dispatch = free_text(tags, Vec::new(), end, !once);
        Ok(match (f.flag("at_least_one")?, once) {
            (false, _) => dispatch,
            (true, true) => Expr::alt(first),
            (true, false) => Expr::seq(vec![Expr::alt(first), dispatch]),
        })
    }

    fn triggered_tags(&mut self, f: &Fields<'a, '_>, end: &[String]) -> Result<Expr, StructuralTagError> {
        let ptr = f.ptr;
        let triggers = f.strings("triggers")?;
        if triggers.is_empty() {
            return Err(invalid(format!("{ptr}/triggers"), "expected at least one trigger"));
        }
        for (i, t) in triggers.iter().enumerate() {
            if t.is_empty() {
                return Err(invalid(format!("{ptr}/triggers/{i}"), "a trigger must not be empty"));
            }
            if let Some(j) = triggers.iter().position(|u| u != t && u.starts_with(t.as_str())) {
                return Err(invalid(
                    format!("{ptr}/triggers/{i}"),
                    format!("trigger {t:?} is a prefix of trigger {j}"),
                ));
            }
        }
        let mut tags = Vec::new();
        let mut first = Vec::new();
        for (i, t) in f.array("tags")?.iter().enumerate() {
            let tag_ptr = ptr.item("tags", i);
            let Node::Object(t) = t else { return Err(invalid(tag_ptr, "a tag is a JSON object")) };
            if let Some(Node::Object(_)) = t.get("begin") {
                // A tag that begins with a special token is triggered by that token, beside the
                // text triggers (a parlance extension of XGrammar's `triggered_tags`).
                let (trigger, rest) = self.tag_with_token_begin(t, &tag_ptr)?;
                let rule = self.b.rule("tag", rest);
                self.b.cache_rule(rule);
                first.push(Expr::seq(vec![trigger_expr(trigger.clone()), Expr::Rule(rule)]));
                tags.push((trigger, Expr::Rule(rule)));
                continue;
            }
            let (begin, rest) = self.tag(t, &tag_ptr)?;
            let Some(trigger) = triggers.iter().find(|t| begin.starts_with(t.as_str())) else {
                return Err(invalid(format!("{tag_ptr}/begin"), format!("begin {begin:?} starts with no trigger")));
            };
            let after = Expr::seq(vec![Expr::literal(&begin[trigger.len()..]), rest]);
            let rule = self.b.rule("tag", after);
            self.b.cache_rule(rule);
            first.push(Expr::seq(vec![Expr::literal(trigger.clone()), Expr::Rule(rule)]));
            tags.push((Trigger::Text(trigger.clone()), Expr::Rule(rule)));
        }
        if tags.is_empty() {
            return Err(invalid(format!("{ptr}/tags"), "expected at least one tag"));
        }
        let once = f.flag("stop_after_first")?;
        let dispatch = free_text(tags, f.strings("excludes")?, end, !once);
        Ok(match (f.flag("at_least_one")?, once) {
            (false, _) => dispatch,
            (true, true) => Expr::alt(first),
            (true, false) => Expr::seq(vec![Expr::alt(first), dispatch]),
        })
    }
}

/// A trigger as the expression that matches it.
fn trigger_expr(trigger: Trigger) -> Expr {
    match trigger {
        Trigger::Text(text) => Expr::literal(text),
        Trigger::Token(id) => Expr::Token(id),
    }
}

/// Free text with `tags`, never containing `excludes` nor the enclosing end.
fn free_text(tags: Vec<(Trigger, Expr)>, mut excludes: Vec<String>, end: &[String], looping: bool) -> Expr {
    for e in end {
        if !excludes.contains(e) {
            excludes.push(e.clone());
        }
    }
    Expr::TagDispatch(Box::new(TagDispatch {
        tags,
        excludes,
        stop_strings: Vec::new(),
        stop_eos: true,
        loop_after_dispatch: looping,
    }))
}

/// Typed access to a format object's fields, errors naming their pointer.
struct Fields<'a, 'p> {
    o: &'a Object<'a>,
    ptr: &'p Ptr<'p>,
}

impl<'a> Fields<'a, '_> {
    fn at(&self, name: &str) -> String {
        format!("{}/{name}", self.ptr)
    }

    fn get(&self, name: &str) -> Result<&'a Node<'a>, StructuralTagError> {
        self.o.get(name).ok_or_else(|| invalid(self.ptr, format!("missing `{name}`")))
    }

    fn string(&self, name: &str) -> Result<&'a str, StructuralTagError> {
        self.get(name)?.as_str().ok_or_else(|| invalid(self.at(name), "expected a string"))
    }

    fn opt_string(&self, name: &str) -> Result<Option<&'a str>, StructuralTagError> {
        match self.o.get(name) {
            None | Some(Node::Null) => Ok(None),
            Some(Node::String(s)) => Ok(Some(s.as_ref())),
            Some(_) => Err(invalid(self.at(name), "expected a string")),
        }
    }

    fn array(&self, name: &str) -> Result<&'a [Node<'a>], StructuralTagError> {
        self.get(name)?.as_array().ok_or_else(|| invalid(self.at(name), "expected an array"))
    }

    /// A list of strings; absent or null is empty.
    fn strings(&self, name: &str) -> Result<Vec<String>, StructuralTagError> {
        match self.o.get(name) {
            None | Some(Node::Null) => Ok(Vec::new()),
            Some(Node::Array(list)) => list
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    v.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| invalid(format!("{}/{i}", self.at(name)), "expected a string"))
                })
                .collect(),
            Some(_) => Err(invalid(self.at(name), "expected an array of strings")),
        }
    }

    fn opt_flag(&self, name: &str) -> Result<Option<bool>, StructuralTagError> {
        match self.o.get(name) {
            None | Some(Node::Null) => Ok(None),
            Some(Node::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(invalid(self.at(name), "expected true or false")),
        }
    }

    /// An optional count (`0 ..= 2³¹ − 1`, as XGrammar bounds them).
    fn opt_count(&self, name: &str) -> Result<Option<u32>, StructuralTagError> {
        match self.o.get(name) {
            None | Some(Node::Null) => Ok(None),
            Some(Node::Number(n)) => n
                .as_u64()
                .filter(|&n| n <= i32::MAX as u64)
                .map(|n| Some(n as u32))
                .ok_or_else(|| invalid(self.at(name), "expected a count from 0 to 2147483647")),
            Some(_) => Err(invalid(self.at(name), "expected a count from 0 to 2147483647")),
        }
    }

    fn flag(&self, name: &str) -> Result<bool, StructuralTagError> {
        Ok(self.opt_flag(name)?.unwrap_or(false))
    }

    fn count(&self, name: &str) -> Result<u32, StructuralTagError> {
        self.get(name)?
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| invalid(self.at(name), "expected a non-negative integer"))
    }

    /// A token list that would narrow free text in a way not enforced: an error when not empty.
    fn refuse_nonempty(&self, name: &str) -> Result<(), StructuralTagError> {
        match self.o.get(name) {
            None | Some(Node::Null) => Ok(()),
            Some(Node::Array(list)) if list.is_empty() => Ok(()),
            Some(_) => Err(unsupported(
                self.at(name),
                format!("`{name}` (free text holds no special token anyway; excluding other tokens is not enforced)"),
            )),
        }
    }

    /// Fields that would change the language in ways not enforced: an error when set.
    fn refuse(&self, names: &[&str]) -> Result<(), StructuralTagError> {
        for name in names {
            if self.o.get(name).is_some_and(|v| !v.is_null()) {
                return Err(unsupported(self.at(name), format!("`{name}`")));
            }
        }
        Ok(())
    }
}

/// How an XML parameter style writes one parameter: its opening (the name, and for the DeepSeek
/// styles whether the value is a raw string) and its closing tag, as XGrammar 0.2.8 names them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum XmlStyle {
    /// `qwen_xml`: `<parameter=KEY>VALUE</parameter>`.
    Qwen,
    /// `minimax_xml`: `<parameter name="KEY">VALUE</parameter>`.
    MiniMax,
    /// `glm_xml`: `<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>`.
    Glm,
    /// `deepseek_xml` (V3.2): `<｜DSML｜parameter name="KEY" string="true|false">VALUE</｜DSML｜parameter>`.
    DeepSeek,
    /// `deepseek_v4_1_xml`: as DeepSeek's, with a space after the DSML token.
    DeepSeekV41,
}

/// DeepSeek's markup token, as the DeepSeek styles write it.
const DSML: &str = "\u{ff5c}DSML\u{ff5c}";

impl XmlStyle {
    fn named(style: &str) -> Option<XmlStyle> {
        Some(match style {
            "qwen_xml" => XmlStyle::Qwen,
            "minimax_xml" => XmlStyle::MiniMax,
            "glm_xml" => XmlStyle::Glm,
            "deepseek_xml" => XmlStyle::DeepSeek,
            "deepseek_v4_1_xml" => XmlStyle::DeepSeekV41,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            XmlStyle::Qwen => "qwen_xml",
            XmlStyle::MiniMax => "minimax_xml",
            XmlStyle::Glm => "glm_xml",
            XmlStyle::DeepSeek => "deepseek_xml",
            XmlStyle::DeepSeekV41 => "deepseek_v4_1_xml",
        }
    }

    fn close(self) -> String {
        match self {
            XmlStyle::Qwen | XmlStyle::MiniMax => "</parameter>".to_owned(),
            XmlStyle::Glm => "</arg_value>".to_owned(),
            XmlStyle::DeepSeek => format!("</{DSML}parameter>"),
            XmlStyle::DeepSeekV41 => format!("</{DSML} parameter>"),
        }
    }

    /// The parts before a parameter's value (`raw`: the value is a raw string); whitespace goes
    /// between GLM's key and value tags.
    fn open(self, key: &str, raw: bool, ws: impl Fn() -> Expr) -> Vec<Expr> {
        match self {
            XmlStyle::Qwen => vec![Expr::literal(format!("<parameter={key}>"))],
            XmlStyle::MiniMax => vec![Expr::literal(format!("<parameter name=\"{key}\">"))],
            XmlStyle::Glm => {
                vec![Expr::literal(format!("<arg_key>{key}</arg_key>")), ws(), Expr::literal("<arg_value>")]
            }
            XmlStyle::DeepSeek | XmlStyle::DeepSeekV41 => {
                let space = if self == XmlStyle::DeepSeek { "" } else { " " };
                vec![Expr::literal(format!("<{DSML}{space}parameter name=\"{key}\" string=\"{raw}\">"))]
            }
        }
    }
}
