//! XGrammar structural tags: documents lower to the language they describe, errors name the node.

use crate::common::synthetic_vocab;
use parlance_grammar::{
    CompileError, CompiledGrammar, GrammarCompiler, Matcher, StructuralTagError, StructuralTagOptions,
    structural_tag_to_grammar,
};
use serde_json::{Value, json};
use std::sync::Arc;

fn compile(doc: &Value) -> Arc<CompiledGrammar> {
    let vocab = synthetic_vocab();
    Arc::new(
        CompiledGrammar::from_structural_tag(vocab, doc, &StructuralTagOptions::default())
            .unwrap_or_else(|e| panic!("{doc}: {e}")),
    )
}

#[track_caller]
fn check(doc: &Value, cases: &[(&str, bool)]) {
    let grammar = compile(doc);
    for &(text, want) in cases {
        let mut m = Matcher::new(grammar.clone()).expect("matcher");
        let got = m.accept_bytes(text.as_bytes()) && m.is_accepting();
        assert_eq!(got, want, "{text:?} under {doc}");
    }
}

#[track_caller]
fn error(doc: &Value) -> StructuralTagError {
    match structural_tag_to_grammar(doc, &StructuralTagOptions::default()) {
        Err(e) => e,
        Ok(g) => panic!("{doc} compiled:\n{g}"),
    }
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
            json!({"format": {"type": "json_schema", "json_schema": {}, "style": "minimax_xml"}}),
            "/format: unsupported json_schema style `minimax_xml`",
        ),
        (
            json!({"format": {"type": "json_schema", "json_schema": {}, "style": "qwen_xml"}}),
            "/format/json_schema: invalid",
        ),
        (json!({"format": {"type": "json_schema", "json_schema": {"type": "string", "minLength": "x"}}}), "/format: "),
        (json!({"format": {"type": "any_text", "max_tokens": 4}}), "/format/max_tokens"),
        (json!({"format": {"type": "regex", "pattern": "("}}), "/format/pattern"),
    ];
    for (doc, want) in cases {
        let shown = error(&doc).to_string();
        assert!(shown.contains(want), "{doc}: {shown}");
    }
    let deep =
        (0..100).fold(json!({"type": "const_string", "value": "x"}), |c, _| json!({"type": "optional", "content": c}));
    assert!(error(&json!({ "format": deep })).to_string().contains("nested deeper"));
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
