//! XGrammar structural tags: documents lower to the language they describe, errors name the node.

use crate::common::synthetic_vocab;
use parlance_grammar::{
    CompileError, CompiledGrammar, GrammarCompiler, Matcher, StructuralTagError, StructuralTagOptions,
    structural_tag_to_grammar,
};
use serde_json::{Value, json};
use std::sync::Arc;

/// The document compiled both ways a server may hand it over: as a value, and as its text (whose
/// `json_schema` values are kept as text and looked up by it). The two must be one language.
fn compile(doc: &Value) -> [Arc<CompiledGrammar>; 2] {
    let vocab = synthetic_vocab();
    let options = StructuralTagOptions::default();
    let as_value = CompiledGrammar::from_structural_tag(vocab.clone(), doc, &options);
    let as_text = CompiledGrammar::from_structural_tag_text(vocab, &doc.to_string(), &options);
    [as_value, as_text].map(|g| Arc::new(g.unwrap_or_else(|e| panic!("{doc}: {e}"))))
}

#[track_caller]
fn check(doc: &Value, cases: &[(&str, bool)]) {
    for (way, grammar) in ["value", "text"].into_iter().zip(compile(doc)) {
        for &(text, want) in cases {
            let mut m = Matcher::new(grammar.clone()).expect("matcher");
            let got = m.accept_bytes(text.as_bytes()) && m.is_accepting();
            assert_eq!(got, want, "{text:?} under {doc} (from its {way})");
        }
    }
}

/// The document's error, the same whether it comes as a value or as text.
#[track_caller]
fn error(doc: &Value) -> StructuralTagError {
    let err = match structural_tag_to_grammar(doc, &StructuralTagOptions::default()) {
        Err(e) => e,
        Ok(g) => panic!("{doc} compiled:\n{g}"),
    };
    let from_text = CompiledGrammar::from_structural_tag_text(
        synthetic_vocab(),
        &doc.to_string(),
        &StructuralTagOptions::default(),
    );
    match from_text {
        Err(CompileError::StructuralTag(e)) => assert_eq!(e, err, "{doc}: from its text"),
        Err(e) => panic!("{doc}: from its text, another error: {e}"),
        Ok(_) => panic!("{doc}: compiled from its text"),
    }
    err
}

fn weather() -> Value {
    json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false})
}

#[test]
fn qwen3_required_single_call_with_optional_reasoning() {
    // XGrammar 0.2.8's builtin `qwen_3` style, tool_choice "required", parallel calls off
    // (`shared/reference/structural-tag.md`).
    let doc = json!({"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "optional", "content": {"type": "sequence", "elements": [
            {"type": "tag", "begin": "<think>", "content": {"type": "any_text", "excludes": ["<think>", "</think>"]}, "end": "</think>"},
            {"type": "const_string", "value": "\n\n"}]}},
        {"type": "triggered_tags", "triggers": ["<tool_call>"],
         "tags": [{"type": "tag", "begin": "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ",
                   "content": {"type": "json_schema", "json_schema": weather()}, "end": "}\n</tool_call>"}],
         "at_least_one": true, "stop_after_first": true, "excludes": ["<think>", "</think>"]}]}});
    let call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    check(
        &doc,
        &[
            (call, true),
            (&format!("<think>\nhmm\n</think>\n\n{call}"), true),
            // The call is required, alone, with no free text around it.
            ("", false),
            (&format!("Sure! {call}"), false),
            (&format!("{call}{call}"), false),
            (&format!("{call} bye"), false),
            // Arguments follow the schema; reasoning never holds its own end.
            ("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"town\": \"Paris\"}}\n</tool_call>", false),
            (&format!("<think>a</think>b</think>\n\n{call}"), false),
        ],
    );
}

#[test]
fn llama_auto_calls_among_free_text() {
    let tag = |name: &str| json!({"begin": format!("{{\"name\": \"{name}\", \"parameters\": "), "content": {"json_schema": weather()}, "end": "}"});
    // Untyped objects, as XGrammar accepts them.
    let doc = json!({"format": {"triggers": ["{\"name\": "], "tags": [tag("a"), tag("b")]}});
    check(
        &doc,
        &[
            ("just text", true),
            (
                "x {\"name\": \"a\", \"parameters\": {\"city\": \"P\"}} y {\"name\": \"b\", \"parameters\": {\"city\": \"Q\"}}",
                true,
            ),
            ("{\"name\": \"c\", \"parameters\": {\"city\": \"P\"}}", false),
            ("{\"name\": \"a\", \"parameters\": {}}", false),
            // Other JSON is free text as long as it never spells the trigger.
            ("{\"city\": 1}", true),
        ],
    );
    // The legacy shape means the same.
    let legacy = json!({"type": "structural_tag", "triggers": ["{\"name\": "], "structures": [
        {"begin": "{\"name\": \"a\", \"parameters\": ", "schema": weather(), "end": "}"}]});
    check(&legacy, &[("ok {\"name\": \"a\", \"parameters\": {\"city\": \"P\"}}", true), ("{\"name\": \"b\"", false)]);
}

#[test]
fn separators_repeats_and_dispatch() {
    let doc = json!({"format": {"type": "tags_with_separator", "separator": ",", "at_least_one": true, "tags": [
        {"begin": "<a>", "content": {"type": "regex", "pattern": "[0-9]+"}, "end": "</a>"},
        {"begin": "<b>", "content": {"type": "any_text"}, "end": ["</b>", "</B>"]}]}});
    check(
        &doc,
        &[
            ("<a>12</a>", true),
            ("<a>1</a>,<b>x y</B>,<a>3</a>", true),
            ("", false),
            ("<a>1</a><a>2</a>", false),
            ("<b>x</b>y</b>", false),
        ],
    );
    // The separator as a format (parlance's extension): a special token, then text. Its text is
    // no separator.
    let doc = json!({"format": {"type": "tags_with_separator", "at_least_one": true,
        "separator": {"type": "sequence", "elements": [{"type": "token", "token": "<special>"},
            {"type": "const_string", "value": "x"}]},
        "tags": [{"begin": "<a>", "content": {"type": "regex", "pattern": "[0-9]+"}, "end": "</a>"},
            {"begin": "<b>", "content": {"type": "const_string", "value": "b"}, "end": "</b>"}]}});
    let special = synthetic_vocab().special_token_id("<special>").expect("a special token");
    for grammar in compile(&doc) {
        let run = |pieces: &[Result<&str, u32>]| {
            let mut m = Matcher::new(grammar.clone()).expect("matcher");
            pieces.iter().all(|p| match p {
                Ok(text) => m.accept_bytes(text.as_bytes()),
                Err(token) => m.accept_token(*token),
            }) && m.is_accepting()
        };
        assert!(run(&[Ok("<a>1</a>"), Err(special), Ok("x<b>b</b>"), Err(special), Ok("x<a>22</a>")]));
        assert!(!run(&[Ok("<a>1</a><special>x<b>b</b>")]), "the token's text");
        assert!(!run(&[Ok("<a>1</a>"), Err(special), Ok("<b>b</b>")]), "the separator's text after the token");
        assert!(!run(&[Ok("<a>1</a>"), Err(special), Ok("x")]), "a separator before no tag");
    }
    let separator_error = json!({"format": {"type": "tags_with_separator", "separator": 7, "tags": [
        {"begin": "<a>", "content": {"type": "const_string", "value": "a"}, "end": "</a>"}]}});
    assert!(error(&separator_error).to_string().contains("/format/separator"), "{}", error(&separator_error));
    let doc = json!({"format": {"type": "repeat", "min": 1, "max": 2, "content": {"type": "or", "elements": [
        {"type": "const_string", "value": "x"}, {"type": "grammar", "grammar": "root ::= [0-9] \"!\""}]}}});
    check(&doc, &[("x", true), ("7!x", true), ("xxx", false), ("", false)]);
    let doc = json!({"format": {"type": "dispatch", "rules": [["@", {"type": "const_string", "value": "me"}]], "loop": false}});
    check(&doc, &[("hi @me", true), ("hi @you", false), ("hi @me @me", false)]);
}

#[test]
fn errors_name_the_node() {
    let cases: Vec<(Value, &str)> = vec![
        (json!([1]), "a structural tag is a JSON object"),
        (json!({"type": "nope", "format": {}}), "/type"),
        (json!({"format": {"type": "blob"}}), "/format/type: invalid structural tag: unknown format type `blob`"),
        (json!({"format": {"type": "any_tokens"}}), "/format: unsupported format type `any_tokens`"),
        (
            json!({"format": {"type": "token", "token": "<nope>"}}),
            "/format/token: invalid structural tag: \"<nope>\" is not a special token",
        ),
        (
            json!({"format": {"type": "sequence", "elements": [{"type": "const_string"}]}}),
            "/format/elements/0: invalid structural tag: missing `value`",
        ),
        (
            json!({"format": {"type": "triggered_tags", "triggers": ["<a"], "tags": [{"begin": "<b>", "content": {"type": "any_text"}, "end": "</b>"}]}}),
            "/format/tags/0/begin",
        ),
        (
            json!({"format": {"type": "json_schema", "json_schema": {}, "style": "cohere_xml"}}),
            "/format: unsupported json_schema style `cohere_xml`",
        ),
        (
            json!({"format": {"type": "json_schema", "json_schema": {}, "style": "qwen_xml"}}),
            "/format/json_schema: invalid",
        ),
        (json!({"format": {"type": "json_schema", "json_schema": {"type": "string", "minLength": "x"}}}), "/format: "),
        // A schema is an object or a boolean, whether the document comes as a value or as text
        // (where the text of every `json_schema` value is kept apart, and nothing a user writes
        // passes for such a text).
        (json!({"format": {"type": "json_schema", "json_schema": "{}"}}), "/format: "),
        (json!({"format": {"type": "json_schema", "json_schema": 7}}), "/format: "),
        (json!({"format": {"type": "json_schema", "json_schema": "\u{0}parlance raw json_schema 0"}}), "/format: "),
        (json!({"format": {"type": "any_text", "max_chars": 4}}), "/format/max_chars"),
        (json!({"format": {"type": "any_text", "max_tokens": -1}}), "/format/max_tokens"),
        (json!({"format": {"type": "regex", "pattern": "("}}), "/format/pattern"),
    ];
    for (doc, want) in cases {
        let shown = error(&doc).to_string();
        assert!(shown.contains(want), "{doc}: {shown}");
    }
    // EOS is no token a grammar names: the error says so (W3 with gpt-oss's config, whose EOS is
    // `<|return|>`, failed with "not a special token" on a token the tokenizer has).
    let compiler = GrammarCompiler::new(synthetic_vocab());
    let doc = json!({"format": {"type": "sequence", "elements": [{"type": "const_string", "value": "x"},
        {"type": "token", "token": "<eos>"}]}});
    let shown =
        compiler.compile_structural_tag(&doc.to_string(), &StructuralTagOptions::default()).unwrap_err().to_string();
    assert!(shown.contains("\"<eos>\" is the vocabulary's EOS token"), "{shown}");
    let doc = json!({"format": {"type": "token", "token": "<special>"}});
    assert!(compiler.compile_structural_tag(&doc.to_string(), &StructuralTagOptions::default()).is_ok());
    // Nesting inside a schema kept as text is bounded as JSON's is elsewhere: an error, never a
    // stack overflow.
    for deep in ["[".repeat(100_000) + &"]".repeat(100_000), "{\"a\":".repeat(100_000) + "1" + &"}".repeat(100_000)] {
        let text = format!(r#"{{"format": {{"type": "json_schema", "json_schema": {deep}}}}}"#);
        let err = CompiledGrammar::from_structural_tag_text(synthetic_vocab(), &text, &StructuralTagOptions::default());
        let err = err.err().map(|e| e.to_string());
        assert!(err.as_deref().is_some_and(|e| e.contains("recursion limit")), "{err:?}");
    }
    let deep =
        (0..100).fold(json!({"type": "const_string", "value": "x"}), |c, _| json!({"type": "optional", "content": c}));
    assert!(error(&json!({ "format": deep })).to_string().contains("nested deeper"));
}

// See: issue 24 (item 6: `parlance constrain` said ``rule `pattern`: automaton states limit reached``).
#[test]
fn schema_compile_errors_lead_with_the_pointer_to_the_schema() {
    let exploding = json!({"type": "string", "pattern": "^(a|b)*a(a|b){12}$"});
    let object = json!({"type": "object", "properties": {"a": exploding, "n": {"type": "array", "items": exploding}},
        "required": ["a", "n"]});
    let call = |content: Value| {
        json!({"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<call>"],
            "tags": [{"type": "tag", "begin": "<call>", "content": content, "end": "</call>"}]}})
    };
    let mut options = StructuralTagOptions::default();
    options.json.limits.automaton_states = 3_000;
    let unsatisfiable = json!({"type": "object", "properties": {"a": {"type": []}}, "required": ["a"]});
    for (doc, want) in [
        (
            call(json!({"type": "json_schema", "json_schema": object})),
            "/format/tags/0/content: #/properties/a/pattern: automaton states limit reached",
        ),
        (
            // A non-string parameter of the XML styles is a schema of its own.
            call(json!({"type": "json_schema", "json_schema": object, "style": "qwen_xml"})),
            "/format/tags/0/content/json_schema/properties/n: #/items/pattern: automaton states limit reached",
        ),
        (
            // (A triggered tag that can never end is dropped, not an error: this one is a lone tag.)
            json!({"type": "structural_tag", "format": {"type": "tag", "begin": "<call>",
                "content": {"type": "json_schema", "json_schema": unsatisfiable}, "end": "</call>"}}),
            "/format/content: #/properties/a/type: invalid schema: no JSON value satisfies the schema",
        ),
    ] {
        // As the CLI compiles it (the grammar, then its automata), and in one step.
        let grammar = structural_tag_to_grammar(&doc, &options).expect("lowers");
        let by_grammar = CompiledGrammar::with_limits(synthetic_vocab(), &grammar, options.json.limits.clone());
        let direct = CompiledGrammar::from_structural_tag(synthetic_vocab(), &doc, &options);
        for r in [by_grammar, direct] {
            let shown = r.map(|_| ()).expect_err(want).to_string();
            assert!(shown.starts_with(want) && !shown.contains("rule `"), "{shown}");
        }
    }
}

#[test]
fn the_compiler_caches_by_document_text() {
    let compiler = GrammarCompiler::new(synthetic_vocab());
    let doc = r#"{"format": {"type": "const_string", "value": "hi"}}"#;
    let options = StructuralTagOptions::default();
    let first = compiler.compile_structural_tag(doc, &options).expect("compiles");
    let again = compiler.compile_structural_tag(doc, &options).expect("compiles");
    assert!(Arc::ptr_eq(&first, &again), "the same text again is the cached grammar");
    assert!(compiler.cache_bytes() > 0);
    compiler.clear();
    let fresh = compiler.compile_structural_tag(doc, &options).expect("compiles");
    assert!(!Arc::ptr_eq(&first, &fresh), "clear() forgets it");
    assert!(matches!(compiler.compile_structural_tag("{", &options), Err(CompileError::StructuralTag(_))));
    let tiny = GrammarCompiler::with_cache_limit(synthetic_vocab(), 0);
    let a = tiny.compile_structural_tag(doc, &options).expect("compiles");
    let b = tiny.compile_structural_tag(doc, &options).expect("compiles");
    assert!(!Arc::ptr_eq(&a, &b), "a zero limit caches nothing");
    // The same text under other options is another grammar.
    let mut strict = StructuralTagOptions::default();
    strict.json.strict_properties = !options.json.strict_properties;
    let other = compiler.compile_structural_tag(doc, &strict).expect("compiles");
    assert!(!Arc::ptr_eq(&fresh, &other), "options are part of the key");
    assert!(Arc::ptr_eq(&fresh, &compiler.compile_structural_tag(doc, &options).expect("compiles")));
    // A limit that holds one grammar keeps the one used last.
    let probe = GrammarCompiler::new(synthetic_vocab());
    probe.compile_structural_tag(doc, &options).expect("compiles");
    let bytes = probe.cache_bytes();
    let one = GrammarCompiler::with_cache_limit(synthetic_vocab(), bytes + bytes / 2);
    let doc_b = r#"{"format": {"type": "const_string", "value": "ho"}}"#;
    let a = one.compile_structural_tag(doc, &options).expect("compiles");
    let b = one.compile_structural_tag(doc_b, &options).expect("compiles");
    assert!(Arc::ptr_eq(&b, &one.compile_structural_tag(doc_b, &options).expect("compiles")), "b is kept");
    assert!(!Arc::ptr_eq(&a, &one.compile_structural_tag(doc, &options).expect("compiles")), "a made room for b");
}

/// The mask entries of a tool's arguments are computed once per vocabulary, whatever other tools a
/// request holds: the second request walks the same arguments without computing an entry, and gets
/// the same masks; after `clear()` they are computed again.
#[test]
fn a_tools_argument_masks_are_shared_by_requests_with_other_tools() {
    // A fresh vocabulary: its pool is this test's alone.
    let vocab = synthetic_vocab();
    let compiler = GrammarCompiler::new(vocab.clone());
    let tool = |name: &str, schema: Value| json!({"begin": format!("<t>{name} "), "content": {"type": "json_schema", "json_schema": schema}, "end": "</t>"});
    let weather = json!({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city", "days"], "additionalProperties": false});
    let doc = |other: Value| {
        json!({"format": {"type": "triggered_tags", "triggers": ["<t>"], "tags": [tool("get_weather", weather.clone()), other]}})
            .to_string()
    };
    // Up to the last value: past it the request's own dispatch state comes into the mask.
    let arguments = r#"{"city": "Paris", "days": 1"#;
    let walk = |doc: &str| -> (Vec<Vec<u32>>, usize) {
        let grammar = compiler.compile_structural_tag(doc, &StructuralTagOptions::default()).expect("compiles");
        let mut m = Matcher::new(grammar).expect("matcher");
        assert!(m.accept_bytes(b"Sure. <t>get_weather "));
        let before = vocab.cached_mask_entries();
        let mut masks = Vec::new();
        for b in arguments.bytes() {
            let mut mask = vec![0u32; vocab.mask_words()];
            m.fill_next_token_bitmask(&mut mask).expect("mask");
            masks.push(mask);
            assert!(m.accept_bytes(&[b]));
        }
        (masks, vocab.cached_mask_entries() - before)
    };
    let (first, computed) =
        walk(&doc(tool("get_time", json!({"type": "object", "properties": {"tz": {"type": "string"}}}))));
    assert!(computed > 0, "the first request computes the arguments' entries");
    let (second, again) =
        walk(&doc(tool("get_stock", json!({"type": "object", "properties": {"n": {"type": "number"}}}))));
    assert_eq!(again, 0, "another request with the tool computes none of them");
    assert_eq!(first, second);
    // The automata are built again after a clear, but the pool went with them: nothing to find.
    compiler.clear();
    let (third, recomputed) = walk(&doc(tool("get_news", json!({"type": "object"}))));
    assert!(recomputed > 0 && third == first);
}

#[test]
fn token_formats_resolve_special_tokens_by_text() {
    let vocab = synthetic_vocab();
    let special = vocab.special_token_id("<special>").unwrap();
    let doc = json!({"format": {"type": "token_triggered_tags", "trigger_tokens": ["<special>"],
        "tags": [{"begin": {"type": "token", "token": "<special>"}, "content": {"type": "const_string", "value": "12"},
                  "end": {"type": "token", "token": special}}], "at_least_one": true}});
    let grammar =
        Arc::new(CompiledGrammar::from_structural_tag(vocab.clone(), &doc, &StructuralTagOptions::default()).unwrap());
    let mut m = Matcher::new(grammar.clone()).unwrap();
    assert!(m.accept_token(special) && m.accept_bytes(b"12") && m.accept_token(special) && m.is_accepting());
    assert!(m.accept_bytes(b" then text") && m.is_accepting());
    // Its text is not the token.
    let mut m = Matcher::new(grammar).unwrap();
    assert!(!m.accept_bytes(b"<special>12<special>"));
}

#[test]
fn qwen3_coder_calls_in_the_qwen_xml_style() {
    // XGrammar 0.2.8's builtin `qwen_3_coder` style (`shared/reference/structural-tag.md`).
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
        "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]});
    let doc = json!({"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<tool_call>\n<function="],
        "tags": [{"type": "tag", "begin": "<tool_call>\n<function=get_weather>\n",
                  "content": {"type": "json_schema", "json_schema": schema, "style": "qwen_xml"},
                  "end": "\n</function>\n</tool_call>"}],
        "excludes": ["<think>", "</think>"]}});
    let call = |params: &str| format!("<tool_call>\n<function=get_weather>\n{params}\n</function>\n</tool_call>");
    check(
        &doc,
        &[
            (&call("<parameter=city>\nNew York, NY\n</parameter>"), true),
            (
                &call(
                    "<parameter=city>\nParis <b>x</b>\n</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter=unit>\n\"c\"\n</parameter>",
                ),
                true,
            ),
            (&format!("Let me check. {}", call("<parameter=city>Oslo</parameter>")), true),
            // The required parameter, the order, the value types.
            (&call("<parameter=days>\n3\n</parameter>"), false),
            (&call("<parameter=days>\n3\n</parameter>\n<parameter=city>\nOslo\n</parameter>"), false),
            (&call("<parameter=city>\nOslo\n</parameter>\n<parameter=days>\nthree\n</parameter>"), false),
            (&call("<parameter=city>\nOslo\n</parameter>\n<parameter=wind>\n3\n</parameter>"), false),
        ],
    );
}

#[test]
fn the_other_xml_parameter_styles() {
    // XGrammar 0.2.8's styles as its documentation spells them: MiniMax, GLM and DeepSeek's.
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"]});
    let styled = |style: &str| json!({"format": {"type": "json_schema", "json_schema": schema, "style": style}});
    check(
        &styled("minimax_xml"),
        &[
            ("<parameter name=\"city\">Oslo</parameter>\n<parameter name=\"days\">3</parameter>\n", true),
            ("<parameter name=\"city\">Oslo</parameter>", true),
            ("<parameter=city>Oslo</parameter>", false),
            ("<parameter name=\"city\">Oslo</parameter><parameter name=\"days\">three</parameter>", false),
        ],
    );
    check(
        &styled("glm_xml"),
        &[
            (
                "<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n<arg_key>days</arg_key><arg_value>3</arg_value>",
                true,
            ),
            ("<arg_key>days</arg_key><arg_value>3</arg_value>", false),
        ],
    );
    check(
        &styled("deepseek_xml"),
        &[
            (
                "<｜DSML｜parameter name=\"city\" string=\"true\">Oslo</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>",
                true,
            ),
            ("<｜DSML｜parameter name=\"city\" string=\"false\">Oslo</｜DSML｜parameter>", false),
            ("<｜DSML｜ parameter name=\"city\" string=\"true\">Oslo</｜DSML｜ parameter>", false),
        ],
    );
    check(
        &styled("deepseek_v4_1_xml"),
        &[
            ("<｜DSML｜ parameter name=\"city\" string=\"true\">Oslo</｜DSML｜ parameter>", true),
            ("<｜DSML｜parameter name=\"city\" string=\"true\">Oslo</｜DSML｜parameter>", false),
        ],
    );
}

/// Every byte a token of its own, and an EOS: token budgets count bytes.
fn byte_vocab() -> Arc<parlance_grammar::TokenVocab> {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    tokens.push(b"<eos>".to_vec());
    Arc::new(parlance_grammar::TokenVocab::new(tokens, &[], &[256]).unwrap())
}

/// The mask, checked against accepting each token on a fork; returns the allowed ids.
fn mask_checked(m: &mut Matcher, vocab: &parlance_grammar::TokenVocab) -> Vec<u32> {
    let mut mask = vec![0u32; vocab.mask_words()];
    m.fill_next_token_bitmask(&mut mask).unwrap();
    let allowed: Vec<u32> = (0..vocab.len() as u32).filter(|&t| mask[t as usize / 32] >> (t % 32) & 1 == 1).collect();
    for t in 0..vocab.len() as u32 {
        assert_eq!(m.fork().accept_token(t), allowed.contains(&t), "token {t}: mask and accept disagree");
    }
    allowed
}

#[test]
fn a_token_budget_ends_free_text_where_it_may_end() {
    let vocab = byte_vocab();
    let doc = |max: u32| {
        json!({"format": {"type": "sequence", "elements": [
            {"type": "tag", "begin": "<think>", "content": {"type": "any_text", "max_tokens": max}, "end": "</think>"},
            {"type": "const_string", "value": "ok"}]}})
    };
    let grammar = |max: u32| {
        Arc::new(
            CompiledGrammar::from_structural_tag(vocab.clone(), &doc(max), &StructuralTagOptions::default()).unwrap(),
        )
    };
    let bytes = |m: &mut Matcher, text: &[u8]| text.iter().all(|&b| m.accept_token(b as u32));

    let mut m = Matcher::new(grammar(3)).unwrap();
    assert!(bytes(&mut m, b"<think>ab"));
    let allowed = mask_checked(&mut m, &vocab);
    assert!(allowed.len() > 150, "two tokens of three: any text, not {allowed:?}");
    assert!(bytes(&mut m, b"c"));
    assert_eq!(mask_checked(&mut m, &vocab), vec![b'<' as u32], "budget spent: only the end");
    assert!(!m.fork().accept_token(b'd' as u32));
    // Rollback gives the token back.
    m.rollback(1).unwrap();
    assert!(m.fork().accept_token(b'd' as u32));
    assert!(bytes(&mut m, b"c</think>ok"));
    assert!(m.is_accepting());
    // An end marker begun before the budget ran out may be finished (or `</` was text, and the end
    // comes after it).
    let mut m = Matcher::new(grammar(3)).unwrap();
    assert!(bytes(&mut m, b"<think>a</"));
    assert_eq!(mask_checked(&mut m, &vocab), vec![b'<' as u32, b't' as u32]);
    // Inside a character the text cannot end: the budget ends it at the character's end.
    let mut m = Matcher::new(grammar(2)).unwrap();
    assert!(bytes(&mut m, b"<think>a\xc3"));
    assert!(mask_checked(&mut m, &vocab).contains(&0xa9));
    assert!(bytes(&mut m, b"\xa9"));
    assert_eq!(mask_checked(&mut m, &vocab), vec![b'<' as u32]);
    // A budget of 0: no text at all; reset keeps it.
    let mut m = Matcher::new(grammar(0)).unwrap();
    assert!(bytes(&mut m, b"<think>"));
    assert_eq!(mask_checked(&mut m, &vocab), vec![b'<' as u32]);
    m.reset();
    assert!(bytes(&mut m, b"<think></think>ok") && m.is_accepting());
    // The text syntax notes the bound.
    let text = structural_tag_to_grammar(&doc(3), &StructuralTagOptions::default()).unwrap().to_string();
    assert!(text.contains("at most 3 tokens"), "{text}");
}

#[test]
fn a_token_budget_on_the_start_rule_or_around_rules_is_refused() {
    // `inner` is recursive, so it stays a rule that `outer` refers to.
    let mut b = parlance_grammar::Grammar::builder();
    let inner = b.declare("inner");
    b.define(
        inner,
        parlance_grammar::Expr::alt(vec![
            parlance_grammar::Expr::literal("x"),
            parlance_grammar::Expr::seq(vec![
                parlance_grammar::Expr::literal("y"),
                parlance_grammar::Expr::Rule(inner),
            ]),
        ]),
    );
    let outer = b.rule("outer", parlance_grammar::Expr::repeat(parlance_grammar::Expr::Rule(inner), 0, None));
    let root = b.rule(
        "root",
        parlance_grammar::Expr::seq(vec![parlance_grammar::Expr::Rule(outer), parlance_grammar::Expr::literal(".")]),
    );
    b.set_token_budget(outer, 2);
    let g = b.build(root).unwrap();
    let Err(error) = CompiledGrammar::new(byte_vocab(), &g) else { panic!("a budget around a rule compiled") };
    assert!(matches!(&error, CompileError::TokenBudget(rule) if rule == "outer"), "{error}");
}

#[test]
fn a_choice_met_again_is_one_rule_only_where_it_means_the_same() {
    let int = json!({"type": "integer"});
    let choice = |schema: &Value| {
        json!({"type": "or", "elements": [
            {"type": "json_schema", "json_schema": schema},
            {"type": "any_text"},
        ]})
    };
    let tag = |name: &str, content: Value| json!({"type": "tag", "begin": format!("<{name}>"), "content": content, "end": format!("</{name}>")});
    // The same choice in two tags: each any_text stops at its own tag's end, so the two are not one
    // rule though the nodes are equal.
    let doc = json!({"format": {"type": "sequence", "elements": [tag("a", choice(&int)), tag("b", choice(&int))]}});
    check(&doc, &[("<a>1</a><b>2</b>", true), ("<a>q</a><b>r</a>z</b>", true), ("<a>q</b>z</a><b>r</b>", true)]);
    // Two choices that differ in one schema keep their own schemas.
    let doc = json!({"format": {"type": "sequence", "elements": [
        {"type": "or", "elements": [{"type": "json_schema", "json_schema": int}, {"type": "const_string", "value": "n"}]},
        {"type": "const_string", "value": ";"},
        {"type": "or", "elements": [{"type": "json_schema", "json_schema": {"type": "string"}}, {"type": "const_string", "value": "n"}]},
    ]}});
    check(&doc, &[("1;\"s\"", true), ("n;n", true), ("\"s\";1", false), ("1;1", false)]);
    // A choice written twice, as gpt-oss documents do (the first message and every later one), is
    // lowered once: one `or` rule, one unit per schema, whichever place the text goes through.
    let message = choice(&weather());
    let twice = json!({"format": {"type": "sequence", "elements": [
        message, {"type": "const_string", "value": "|"}, message,
    ]}});
    let once = json!({"format": message});
    let rules = |doc: &Value| {
        let g = structural_tag_to_grammar(doc, &StructuralTagOptions::default()).expect("lowers");
        g.rules().iter().filter(|r| r.name.starts_with("or") || r.name.starts_with("choice")).count()
    };
    assert_eq!(rules(&twice), rules(&once));
    check(&twice, &[(r#"{"city": "Oslo"}|hi"#, true), (r#"hi|{"city": "Oslo"}"#, true), ("hi", false)]);
}

/// Pooling a mask entry needs its automaton's structural key, which costs in proportion to the
/// automaton. A choice of 40 messages each opened by a special token (gpt-oss's, one per tool) is an
/// automaton that every request with a new tool builds anew, and its first mask admits that token
/// alone: it is computed without pooling, and it is right. Free text watched by a large dispatch
/// reaches the whole vocabulary: its entry is still pooled, for the next tool set.
#[test]
fn a_large_automatons_entry_is_pooled_only_when_its_walk_may_be_long() {
    let Some((vocab, _)) = crate::common::real_vocab("llama3_1", "<|eot_id|>") else { return };
    let header = vocab.special_token_id("<|start_header_id|>").expect("a special token");
    let options = StructuralTagOptions::default();
    let mut mask = vec![0u32; vocab.mask_words()];
    let allowed = |mask: &[u32]| -> Vec<u32> {
        (0..vocab.len() as u32).filter(|&t| mask[t as usize / 32] >> (t % 32) & 1 == 1).collect()
    };
    let messages: Vec<Value> = (0..40)
        .map(|i| {
            json!({"begin": {"type": "token", "token": "<|start_header_id|>"},
                "content": {"type": "const_string", "value": format!("message {}", format!("{i:02}").repeat(12))},
                "end": "."})
        })
        .collect();
    let doc =
        json!({"format": {"type": "tags_with_separator", "tags": messages, "separator": "\n", "at_least_one": true}});
    let grammar = Arc::new(CompiledGrammar::from_structural_tag(vocab.clone(), &doc, &options).expect("compiles"));
    let before = vocab.cached_mask_entries();
    let mut m = Matcher::new(grammar).expect("matcher");
    m.fill_next_token_bitmask(&mut mask).expect("mask");
    assert_eq!(allowed(&mask), vec![header]);
    assert_eq!(vocab.cached_mask_entries(), before, "the special token's entry is not pooled");
    assert!(m.accept_token(header) && m.accept_bytes(format!("message {}.", "17".repeat(12)).as_bytes()));
    assert!(m.is_accepting());

    let tags: Vec<Value> = (0..40)
        .map(|i| json!({"begin": format!("<call name=\"tool_number_{i}_of_a_long_list\">"), "content": {"type": "const_string", "value": "{}"}, "end": "</call>"}))
        .collect();
    let doc = json!({"format": {"type": "triggered_tags", "triggers": ["<call"], "tags": tags}});
    let grammar = Arc::new(CompiledGrammar::from_structural_tag(vocab.clone(), &doc, &options).expect("compiles"));
    let before = vocab.cached_mask_entries();
    Matcher::new(grammar).expect("matcher").fill_next_token_bitmask(&mut mask).expect("mask");
    assert!(allowed(&mask).len() > vocab.len() / 2, "free text admits most tokens");
    assert!(vocab.cached_mask_entries() > before, "the free text's entry is pooled");
}

/// A grammar reads a special token as bytes that begin with 0xFF, which no UTF-8 text holds. A
/// byte-level vocabulary has a token for the raw byte 0xFF (Llama 3's `ÿ`) and for every byte after
/// it: neither those tokens nor raw bytes may spell a special token.
#[test]
fn raw_bytes_never_spell_a_special_token() {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    tokens.push(vec![b'a', 0xFF]);
    tokens.push(b"<tool>".to_vec());
    tokens.push(b"<eos>".to_vec());
    let n = tokens.len() as u32;
    let (tool, eos) = (n - 2, n - 1);
    let vocab = Arc::new(parlance_grammar::TokenVocab::new(tokens, &[tool], &[eos]).expect("vocab"));
    let doc = json!({"format": {"type": "sequence", "elements": [{"type": "const_string", "value": "a"}, {"type": "token", "token": "<tool>"}]}});
    let grammar =
        Arc::new(CompiledGrammar::from_structural_tag(vocab.clone(), &doc, &StructuralTagOptions::default()).unwrap());
    let mut m = Matcher::new(grammar).expect("matcher");
    assert_eq!(crate::common::check_mask_brute_force(&mut m, &vocab, "start"), vec![u32::from(b'a')]);
    assert!(!m.accept_token(n - 3), "`a` then the raw byte 0xFF");
    assert!(m.accept_token(u32::from(b'a')));
    assert_eq!(crate::common::check_mask_brute_force(&mut m, &vocab, "before the token"), vec![tool]);
    assert!(!m.accept_token(0xFF), "the raw byte 0xFF");
    // The special token's own grammar bytes, given as bytes: 0xFF, then its id in three bytes.
    let spelled = [0xFF, (tool >> 16) as u8, (tool >> 8) as u8, tool as u8];
    assert!(!m.accept_bytes(&spelled));
    assert!(m.accept_token(tool) && m.is_accepting());
}

/// An error shows the node it got as compact JSON, the same from the text and from the value, a
/// `json_schema` member inside it included (read from text, it is kept as its text). A legacy
/// `schema` given as a value is that value, whole however deep, not a copy cut short.
#[test]
fn errors_show_what_they_got_alike_and_legacy_schemas_stay_whole() {
    let got = error(&json!({"type": {"json_schema": 1, "a": [true]}, "format": {}}));
    assert!(got.to_string().contains(r#"{"json_schema":1,"a":[true]}"#), "{got}");
    let mut deep = json!("x");
    for _ in 0..600 {
        deep = json!([deep]);
    }
    let text = deep.to_string();
    let legacy =
        |schema: Value| json!({"structures": [{"begin": "<a>", "schema": schema, "end": "</a>"}], "triggers": ["<a>"]});
    let as_format = |schema: Value| {
        json!({"format": {"type": "triggered_tags", "triggers": ["<a>"],
            "tags": [{"begin": "<a>", "content": {"type": "json_schema", "json_schema": schema}, "end": "</a>"}]}})
    };
    // The same verdict as the schema given as a format, whatever it is (a schema this deep may be
    // past the schema compiler's own limits); never another schema.
    let options = StructuralTagOptions::default();
    let whole = structural_tag_to_grammar(&as_format(json!({"const": deep.clone()})), &options);
    let old = structural_tag_to_grammar(&legacy(json!({"const": deep.clone()})), &options);
    match (whole, old) {
        (Ok(a), Ok(b)) => assert_eq!(a.to_string(), b.to_string()),
        (Err(a), Err(b)) => assert_eq!(a.to_string().replace("/format", ""), b.to_string(), "{text:.40}"),
        (a, b) => panic!("as a format {:?}, legacy {:?}", a.map(|_| ()), b.map(|_| ())),
    }
}
