//! Real model output that deviates from what the template writes (issue 17's classes), on the
//! corpus templates of the families that show each: what the parser makes of it, whole and
//! streamed (every two-way split, character by character, seeded random chunkings), with the
//! issues it reports.

use parlance::{ParseOptions, Parser, TruncatedCalls, analyze};
use serde_json::{Value as Json, json};

use crate::corpus;
use crate::parse::assert_chunking_invariant;

/// The tools every case here calls.
fn tools() -> Vec<Json> {
    vec![
        json!({"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}),
        json!({"type": "function", "function": {"name": "run", "parameters": {"type": "object", "properties": {
            "code": {"type": "string"}}, "required": ["code"]}}}),
    ]
}

/// Parses `output` with the corpus template `id` under `options` (the tools above unless set),
/// after checking that every way of streaming it gives the whole parse. `None` without the corpus.
#[track_caller]
fn parse_checked(id: &str, output: &str, mut options: ParseOptions) -> Option<Json> {
    let corpus = corpus::corpus()?;
    let (template, analyze_options) = crate::analyze::corpus_template(&corpus, id);
    let format = analyze(&template, &analyze_options).unwrap_or_else(|e| panic!("{id}: {e}"));
    if options.tools.is_empty() {
        options.tools = tools();
    }
    let parser = Parser::new(&format, &options);
    let cuts: Vec<usize> = output.char_indices().map(|(i, _)| i).skip(1).collect();
    for &at in &cuts {
        assert_chunking_invariant(&parser, output, &[&output[..at], &output[at..]], id);
    }
    let chars: Vec<&str> = output.char_indices().map(|(i, c)| &output[i..i + c.len_utf8()]).collect();
    assert_chunking_invariant(&parser, output, &chars, id);
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..16 {
        let mut chunks = Vec::new();
        let mut last = 0;
        for &at in &cuts {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            if seed.is_multiple_of(5) {
                chunks.push(&output[last..at]);
                last = at;
            }
        }
        chunks.push(&output[last..]);
        assert_chunking_invariant(&parser, output, &chunks, id);
    }
    let message = parser.parse(output);
    Some(json!({
        "reasoning": message.reasoning_content,
        "content": message.content,
        "calls": message.tool_calls.iter().map(|c| json!([c.name, c.arguments_value])).collect::<Vec<_>>(),
        "issues": message.issues.iter().map(|i| i.kind.as_str()).collect::<Vec<_>>(),
    }))
}

fn parse(id: &str, output: &str) -> Option<Json> {
    parse_checked(id, output, ParseOptions::default())
}

/// Class 1: a tagged value whose closing tag never comes ends at the call's next marker; no
/// markup is ever inside the value.
#[test]
fn a_value_whose_closing_tag_never_comes_ends_at_the_next_marker() {
    let cases = [
        // Qwen3-Coder and Qwen3.5 XML: the next parameter, or the call's end.
        (
            "Qwen3-Coder",
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
            json!({"city": "Paris", "days": 3}),
        ),
        (
            "Qwen3-Coder",
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</function>\n</tool_call>",
            json!({"city": "Paris"}),
        ),
        (
            "Qwen3.5-4B",
            "Checking.\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=days>\n3\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
            json!({"days": 3, "city": "Paris"}),
        ),
        // GLM's `<arg_value>` without its close.
        (
            "GLM-4.6",
            "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",
            json!({"city": "Paris", "days": 3}),
        ),
        // MiniMax: the invoke's end.
        (
            "MiniMax-M2",
            "Checking.\n</think>\n\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris\n</invoke>\n</minimax:tool_call>",
            json!({"city": "Paris"}),
        ),
    ];
    for (id, output, want) in cases {
        let Some(got) = parse(id, output) else { return };
        assert_eq!(got["calls"], json!([["get_weather", want]]), "{id}: {got}");
        assert_eq!(got["content"], json!(null), "{id}: {got}");
        assert_eq!(got["issues"], json!(["malformed-arguments"]), "{id}: the missing close is reported: {got}");
    }
    // Cut at the end of the output inside the call's end: its first tag is enough.
    let output = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</function>";
    let Some(got) = parse("Qwen3-Coder", output) else { return };
    assert_eq!(got["calls"], json!([["get_weather", {"city": "Paris"}]]), "{got}");
    assert_eq!((&got["content"], &got["issues"]), (&json!(null), &json!(["malformed-arguments"])), "{got}");
}

/// Class 2: where the template writes the suffix with its whitespace (`\n</parameter>`), the
/// value ends at that form first; a bare `</parameter>` inside a line stays in the value, and is
/// the end only when the strict form never comes.
#[test]
fn a_value_ends_at_its_suffix_as_the_template_writes_it() {
    let code = "x = \"</parameter>\" + y\nprint(x)";
    let output =
        format!("<tool_call>\n<function=run>\n<parameter=code>\n{code}\n</parameter>\n</function>\n</tool_call>");
    // (Qwen3.5's prompt opens reasoning: the model closes it first.)
    for (id, before) in [("Qwen3-Coder", ""), ("Qwen3.5-4B", "Checking.\n</think>\n\n")] {
        let Some(got) = parse(id, &format!("{before}{output}")) else { return };
        assert_eq!(got["calls"], json!([["run", {"code": code}]]), "{id}: {got}");
        assert_eq!(got["issues"], json!([]), "{id}: {got}");
    }
    // Written without the newlines: the bare suffix ends each value.
    let output = "<tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter><parameter=days>3</parameter>\n</function>\n</tool_call>";
    let Some(got) = parse("Qwen3-Coder", output) else { return };
    assert_eq!(got["calls"], json!([["get_weather", {"city": "Paris", "days": 3}]]), "{got}");
    assert_eq!(got["issues"], json!([]), "{got}");
    // A bare suffix inside code, the strict one never written: the last bare one before the next
    // marker ends the value.
    let output =
        "<tool_call>\n<function=run>\n<parameter=code>\nx = \"</parameter>\"</parameter>\n</function>\n</tool_call>";
    let Some(got) = parse("Qwen3-Coder", output) else { return };
    assert_eq!(got["calls"], json!([["run", {"code": "x = \"</parameter>\""}]]), "{got}");
}

/// Class 7: a call cut inside its name is no call with a partial name: it is unparsed (content,
/// reported); a pythonic string cut before its closing quote is the string so far.
#[test]
fn a_call_cut_inside_its_name_is_unparsed() {
    let cases = [
        ("Qwen3-Coder", "<tool_call>\n<function=get"),
        ("Qwen-Qwen3-0.6B", "<tool_call>\n{\"name\": \"get"),
        ("Mistral-Small-3.2-24B-Instruct-2506", "[TOOL_CALLS]get"),
        ("Kimi-K2-Instruct", "<|tool_calls_section_begin|><|tool_call_begin|>functions.get"),
        ("vllm-tool_chat_template_llama3.2_pythonic", "[get_wea"),
    ];
    for (id, output) in cases {
        let Some(got) = parse(id, output) else { return };
        assert_eq!(got["calls"], json!([]), "{id}: {got}");
        assert_eq!(got["content"], json!(output), "{id}: {got}");
        assert_eq!(got["issues"][0], json!("unparsed-call"), "{id}: {got}");
    }
    for quote in ['\'', '"'] {
        let output = format!("[get_weather(city={quote}Par");
        let Some(got) = parse("vllm-tool_chat_template_llama3.2_pythonic", &output) else { return };
        assert_eq!(got["calls"], json!([["get_weather", {"city": "Par"}]]), "{got}");
        assert_eq!(got["issues"], json!(["truncated-call"]), "{got}");
    }
}

/// Class 9: a call opener with nothing after it at the end of the output is markup (a span and
/// an issue), never content the user would see.
#[test]
fn a_call_opener_at_the_end_of_the_output_is_not_content() {
    let cases = [
        ("Qwen-Qwen3-0.6B", "Sure.\n<tool_call>"),
        ("Qwen-Qwen3-0.6B", "Sure.\n<tool_call>\n"),
        // The opener cut after its first tag (`<tool_call>\n<function=`).
        ("Qwen3-Coder", "Sure.\n<tool_call>"),
        ("Qwen3-Coder", "Sure.\n<tool_call>\n<function="),
        ("Mistral-Small-3.2-24B-Instruct-2506", "Sure.[TOOL_CALLS]"),
        ("Kimi-K2-Instruct", "Sure.<|tool_calls_section_begin|>"),
    ];
    for (id, output) in cases {
        let Some(got) = parse(id, output) else { return };
        assert_eq!((&got["content"], &got["calls"]), (&json!("Sure."), &json!([])), "{id}: {got}");
        assert_eq!(got["issues"], json!(["unparsed-call"]), "{id}: {got}");
    }
    // Part of a tag is no opener: text.
    let Some(got) = parse("Qwen3-Coder", "a < b and <tool") else { return };
    assert_eq!((&got["content"], &got["issues"]), (&json!("a < b and <tool"), &json!([])), "{got}");
}

/// Class 3: where the template escapes argument names (Kimi K3 writes keys as XML attribute
/// values), names come back unescaped; call ids are ids or generated, never header text.
#[test]
fn escaped_names_are_read_unescaped_and_ids_are_never_header_text() {
    let tools = vec![json!({"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"a&b\"c<d>": {"type": "string"}, "city": {"type": "string"}}}}})];
    let output = "<|open|>response<|sep|>ok<|sep|><|open|>tools<|sep|><|open|>call tool=\"get_weather\" index=\"1\"<|sep|>\
        <|open|>argument key=\"a&amp;b&quot;c&lt;d&gt;\" type=\"string\"<|sep|>x<|close|>argument<|sep|>\
        <|open|>argument key=\"city\" type=\"string\"<|sep|>P&amp;Q<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools";
    let options = ParseOptions { tools: tools.clone(), ..ParseOptions::default() };
    let Some(got) = parse_checked("Kimi-K3", output, options.clone()) else { return };
    // Values are raw text: only names are escaped.
    assert_eq!(got["calls"], json!([["get_weather", {"a&b\"c<d>": "x", "city": "P&amp;Q"}]]), "{got}");
    assert_eq!((&got["content"], &got["issues"]), (&json!("ok"), &json!([])), "{got}");
    let corpus = corpus::corpus().expect("checked above");
    let (template, analyze_options) = crate::analyze::corpus_template(&corpus, "Kimi-K3");
    let format = analyze(&template, &analyze_options).expect("analyzes");
    let message = Parser::new(&format, &options).parse(output);
    assert!(message.tool_calls[0].id_generated, "{:?}", message.tool_calls[0].id);
    // Kimi K2 writes real ids (`functions.get_weather:0`): those are kept.
    let (template, analyze_options) = crate::analyze::corpus_template(&corpus, "Kimi-K2-Instruct");
    let format = analyze(&template, &analyze_options).expect("analyzes");
    let output = "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|><|tool_calls_section_end|>";
    let message = Parser::new(&format, &options).parse(output);
    assert_eq!(message.tool_calls[0].id, "functions.get_weather:0");
    // A name the template writes plainly is read as written.
    let Some(got) = parse(
        "Qwen3-Coder",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nA&amp;B\n</parameter>\n</function>\n</tool_call>",
    ) else {
        return;
    };
    assert_eq!(got["calls"], json!([["get_weather", {"city": "A&amp;B"}]]), "{got}");
}

/// Class 5: bare JSON calls (Llama 3.x) separated by `;` or a line break are parallel calls.
#[test]
fn bare_json_calls_separated_by_a_semicolon_or_a_line_break_are_parallel_calls() {
    let one = r#"{"name": "get_weather", "parameters": {"city": "Paris"}}"#;
    let two = r#"{"name": "run", "parameters": {"code": "x"}}"#;
    let want = json!([["get_weather", {"city": "Paris"}], ["run", {"code": "x"}]]);
    for id in ["meta-llama-Llama-3.1-8B-Instruct", "meta-llama-Llama-3.3-70B-Instruct"] {
        for between in ["; ", ";", "\n", " ;\n"] {
            let Some(got) = parse(id, &format!("{one}{between}{two}")) else { return };
            assert_eq!(got["calls"], want, "{id} {between:?}: {got}");
            assert_eq!(got["content"], json!(null), "{id} {between:?}: {got}");
        }
        // A `;` with no call after it is text.
        let Some(got) = parse(id, &format!("{one}; done")) else { return };
        assert_eq!(got["calls"], json!([["get_weather", {"city": "Paris"}]]), "{got}");
        assert_eq!(got["content"], json!("; done"), "{got}");
    }
}

/// Class 12: content keeps its inner whitespace exactly, and text around a call is content as
/// written, the whitespace on both sides of the call included; content's own ends are trimmed.
#[test]
fn content_keeps_its_whitespace_around_calls() {
    let cases = [
        (
            "Qwen-Qwen3-0.6B",
            "Hello\n\n  world\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n  After  text",
        ),
        (
            "Mistral-Small-3.2-24B-Instruct-2506",
            "Hello\n\n  world\n[TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS]{\"city\": \"Paris\"}\n  After  text",
        ),
        (
            "Qwen3-Coder",
            "Hello\n\n  world\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>\n  After  text",
        ),
    ];
    for (id, output) in cases {
        let Some(got) = parse(id, output) else { return };
        // The text before the call, the whitespace between, the text after: as written.
        assert_eq!(got["content"], json!("Hello\n\n  world\n\n  After  text"), "{id}: {got}");
        assert_eq!(got["calls"], json!([["get_weather", {"city": "Paris"}]]), "{id}: {got}");
    }
    // Nothing after the call: the whitespace before it is not content.
    let Some(got) = parse(
        "Qwen-Qwen3-0.6B",
        "Hi \n<tool_call>\n{\"name\": \"run\", \"arguments\": {\"code\": \"x\"}}\n</tool_call>\n",
    ) else {
        return;
    };
    assert_eq!(got["content"], json!("Hi"), "{got}");
    let Some(got) = parse("Qwen-Qwen3-0.6B", "<think>\n  a\n\n  b\t\n</think>\n\n  Hello  there\n") else { return };
    assert_eq!((&got["reasoning"], &got["content"]), (&json!("a\n\n  b"), &json!("Hello  there")), "{got}");
}

/// Class 4: markers the template writes that models leave out or add, derived from the template:
/// Mistral Small 3.2's `[CALL_ID]` (always written, often omitted) and Llama 3.x's `<|python_tag|>`
/// (written before built-in tool calls, which models also put before JSON calls).
#[test]
fn optional_markers_are_accepted_when_present_and_not_required() {
    let id = "Mistral-Small-3.2-24B-Instruct-2506";
    let Some(got) = parse(id, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}") else { return };
    assert_eq!((&got["calls"], &got["issues"]), (&json!([["get_weather", {"city": "Paris"}]]), &json!([])), "{got}");
    let output =
        "[TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]run[ARGS]{\"code\": \"x\"}";
    let Some(got) = parse(id, output) else { return };
    assert_eq!(got["calls"], json!([["get_weather", {"city": "Paris"}], ["run", {"code": "x"}]]), "{got}");
    for id in ["meta-llama-Llama-3.1-8B-Instruct", "meta-llama-Llama-3.3-70B-Instruct"] {
        let call = r#"{"name": "get_weather", "parameters": {"city": "Paris"}}"#;
        let Some(got) = parse(id, &format!("<|python_tag|>{call}")) else { return };
        assert_eq!(
            (&got["calls"], &got["content"]),
            (&json!([["get_weather", {"city": "Paris"}]]), &json!(null)),
            "{got}"
        );
        let two = format!(
            "Some intro. <|python_tag|>{call}<|python_tag|>{{\"name\": \"run\", \"parameters\": {{\"code\": \"x\"}}}}"
        );
        let Some(got) = parse(id, &two) else { return };
        assert_eq!(got["calls"], json!([["get_weather", {"city": "Paris"}], ["run", {"code": "x"}]]), "{got}");
        assert_eq!(got["content"], json!("Some intro."), "{got}");
        // A built-in tool's call is no JSON call: it stays as written, reported.
        let Some(got) = parse(id, "<|python_tag|>brave_search.call(query=\"x\")") else { return };
        assert_eq!(got["content"], json!("<|python_tag|>brave_search.call(query=\"x\")"), "{got}");
        assert_eq!(got["issues"], json!(["unparsed-call"]), "{got}");
    }
    // Llama 3.2's template has no such variant: the token is text there.
    let Some(got) = parse("meta-llama-Llama-3.2-3B-Instruct", "<|python_tag|>{\"name\": \"run\", \"parameters\": {}}")
    else {
        return;
    };
    assert_eq!(got["calls"], json!([]), "{got}");
}

/// Class 11: a call the output ends inside is kept (the default) or dropped; dropped, it stays in
/// the spans and its issue in the issues, and a stream never shows it.
#[test]
fn truncated_calls_are_kept_or_dropped_as_asked() {
    let cases = [
        (
            "Qwen-Qwen3-0.6B",
            "Hi\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"run\", \"arguments\": {\"code\": \"x",
        ),
        (
            "Qwen3-Coder",
            "Hi\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=run>\n<parameter=code>\nx",
        ),
        (
            "Kimi-K2-Instruct",
            "Hi<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|><|tool_call_begin|>functions.run:1<|tool_call_argument_begin|>{\"code\": \"x",
        ),
        (
            "openai-gpt-oss-120b",
            "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|><|start|>assistant<|channel|>commentary to=functions.run <|constrain|>json<|message|>{\"code\": \"x",
        ),
    ];
    for (id, output) in cases {
        let Some(kept) = parse(id, output) else { return };
        assert_eq!(kept["calls"].as_array().map(Vec::len), Some(2), "{id}: {kept}");
        assert_eq!(kept["calls"][1][0], json!("run"), "{id}: {kept}");
        assert!(kept["issues"].as_array().unwrap().contains(&json!("truncated-call")), "{id}: {kept}");
        let drop = ParseOptions { truncated_calls: TruncatedCalls::Drop, ..ParseOptions::default() };
        let Some(dropped) = parse_checked(id, output, drop) else { return };
        assert_eq!(dropped["calls"], json!([["get_weather", {"city": "Paris"}]]), "{id}: {dropped}");
        assert_eq!(dropped["issues"], kept["issues"], "{id}: the issue stays");
        assert_eq!(dropped["content"], kept["content"], "{id}: the call's text does not become content");
    }
    // A whole call is never dropped.
    let drop = ParseOptions { truncated_calls: TruncatedCalls::Drop, ..ParseOptions::default() };
    let whole = "<tool_call>\n{\"name\": \"run\", \"arguments\": {\"code\": \"x\"}}\n</tool_call>";
    let Some(got) = parse_checked("Qwen-Qwen3-0.6B", whole, drop) else { return };
    assert_eq!(got["calls"], json!([["run", {"code": "x"}]]), "{got}");
}

/// Class 8: a call inside open reasoning is provisional: reasoning text if the reasoning's end
/// follows (a drafted call, no phantom duplicate), a call if the output ends with reasoning open.
#[test]
fn a_call_inside_reasoning_is_decided_by_what_follows() {
    let draft = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    let real = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>";
    let output = format!("<think>\nI could call {draft} maybe.\n</think>\n\n{real}");
    let Some(got) = parse("Qwen-Qwen3-0.6B", &output) else { return };
    assert_eq!(got["reasoning"], json!(format!("I could call {draft} maybe.")), "{got}");
    assert_eq!((&got["calls"], &got["issues"]), (&json!([["get_weather", {"city": "Rome"}]]), &json!([])), "{got}");
    // Never closed: the call ends reasoning.
    let Some(got) = parse("Qwen-Qwen3-0.6B", &format!("<think>\nLet me call\n{draft}")) else { return };
    assert_eq!(got["reasoning"], json!("Let me call"), "{got}");
    assert_eq!(got["calls"], json!([["get_weather", {"city": "Paris"}]]), "{got}");
    assert_eq!(got["issues"], json!(["unclosed-reasoning"]), "{got}");
    // The same in a tagged family whose prompt opens reasoning.
    let coder = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>";
    let Some(got) = parse("Qwen3.5-4B", &format!("Maybe {coder} then.\n</think>\n\nDone.")) else { return };
    assert_eq!(got["reasoning"], json!(format!("Maybe {coder} then.")), "{got}");
    assert_eq!((&got["calls"], &got["content"]), (&json!([]), &json!("Done.")), "{got}");
}

/// Class 6: Gemma 4's literals: objects with no quoted string inside, keys with spaces, nesting,
/// read as JSON where the schema allows objects and arrays.
#[test]
fn gemma_literals_read_as_json_where_the_schema_allows() {
    let tools = vec![json!({"type": "function", "function": {"name": "find", "parameters": {"type": "object",
        "properties": {"filters": {"type": "object"}, "tags": {"type": "array"}, "q": {"type": "string"}}}}})];
    let options = ParseOptions { tools, ..ParseOptions::default() };
    let q = "<|\"|>";
    let cases = [
        ("{filters:{open_now:true}}".to_owned(), json!({"filters": {"open_now": true}})),
        (
            "{filters:{open now:true,price range:{min:1,max:3}},tags:[1,2]}".to_owned(),
            json!({"filters": {"open now": true, "price range": {"min": 1, "max": 3}}, "tags": [1, 2]}),
        ),
        (
            format!("{{filters:{{kind:{q}cafe{q},open_now:true}},tags:[{q}a{q},{{k:[1,{{z:null}}]}}],q:{q}x, y{q}}}"),
            json!({"filters": {"kind": "cafe", "open_now": true}, "tags": ["a", {"k": [1, {"z": null}]}], "q": "x, y"}),
        ),
    ];
    for (arguments, want) in cases {
        let output = format!("<|tool_call>call:find{arguments}<tool_call|>");
        let Some(got) = parse_checked("google-gemma-4-31B-it", &output, options.clone()) else { return };
        assert_eq!((&got["calls"], &got["issues"]), (&json!([["find", want]]), &json!([])), "{got}");
    }
}

/// Class 6, numbers: where strings are quoted (pythonic calls), a bare integer with leading zeros
/// is the number it spells (LFM2's `set_date(month=07)`), with or without a schema; where values
/// are raw text it stays text unless the schema wants a number.
#[test]
fn bare_integers_with_leading_zeros_are_numbers_where_strings_are_quoted() {
    let tools = vec![json!({"type": "function", "function": {"name": "set_date", "parameters": {"type": "object",
        "properties": {"month": {"type": "integer"}, "day": {}}}}})];
    let options = ParseOptions { tools, ..ParseOptions::default() };
    let output = "<|tool_call_start|>[set_date(month=07, day=05)]<|tool_call_end|>";
    let Some(got) = parse_checked("LFM2.5-8B-A1B", output, options) else { return };
    assert_eq!(got["calls"], json!([["set_date", {"month": 7, "day": 5}]]), "{got}");
    let output = "<tool_call>\n<function=run>\n<parameter=code>\n07\n</parameter>\n</function>\n</tool_call>";
    let Some(got) = parse("Qwen3-Coder", output) else { return };
    assert_eq!(got["calls"], json!([["run", {"code": "07"}]]), "{got}");
}

/// Class 10, found by the property test below: JSON arguments broken by an end marker lose the
/// whitespace before it however the output is chunked (a stream used to keep it).
#[test]
fn broken_json_arguments_end_the_same_in_every_chunking() {
    let output = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \n<｜tool▁calls▁end｜>true}<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
    let Some(got) = parse("deepseek-ai-DeepSeek-V3.1", output) else { return };
    assert_eq!(got["calls"], json!([["get_weather", null]]), "{got}");
    let corpus = corpus::corpus().expect("checked above");
    let (template, options) = crate::analyze::corpus_template(&corpus, "deepseek-ai-DeepSeek-V3.1");
    let parser = Parser::new(&analyze(&template, &options).expect("analyzes"), &ParseOptions::default());
    assert_eq!(parser.parse(output).tool_calls[0].arguments, "{\"city\":");
}

/// Class 10: streaming is split-invariant on broken output too. The template's own calls of each
/// family, mutated (characters deleted, JSON and marker pieces and multi-byte characters
/// inserted, the output cut), stream in random chunks (cutting inside markers and characters
/// alike) exactly as they parse whole.
mod split_invariance {
    use super::*;
    use proptest::prelude::*;
    use std::sync::OnceLock;

    const FAMILIES: &[&str] = &[
        "Qwen-Qwen3-0.6B",
        "Qwen3-Coder",
        "GLM-4.6",
        "MiniMax-M2",
        "Kimi-K2-Instruct",
        "Kimi-K3",
        "deepseek-ai-DeepSeek-V3.1",
        "Mistral-Small-3.2-24B-Instruct-2506",
        "meta-llama-Llama-3.1-8B-Instruct",
        "openai-gpt-oss-120b",
        "google-gemma-4-31B-it",
        "vllm-tool_chat_template_llama3.2_pythonic",
        "NousResearch-Hermes-3-Llama-3.1-8B-tool_use",
    ];

    /// A family's parser, the outputs of its rendered call cases, and its markers.
    type Family = (Parser, Vec<String>, Vec<String>);

    /// Per family: its parser, the outputs of its rendered call cases, and its markers' pieces.
    fn families() -> &'static [Family] {
        static FAMILIES_READY: OnceLock<Vec<Family>> = OnceLock::new();
        FAMILIES_READY.get_or_init(|| {
            let Some(corpus) = corpus::corpus() else { return Vec::new() };
            FAMILIES
                .iter()
                .filter_map(|id| {
                    let (template, options) = crate::analyze::corpus_template(&corpus, id);
                    let format = analyze(&template, &options).ok()?;
                    let outputs: Vec<String> = parlance::rendered_cases(&template, &format, &options)
                        .into_iter()
                        .filter(|c| c.message.get("tool_calls").is_some())
                        .map(|c| c.output)
                        .collect();
                    let tools = format.tools.as_ref()?;
                    let reasoning = format.reasoning.as_ref();
                    let pieces: Vec<String> = [
                        &tools.section_start,
                        &tools.call_start,
                        &tools.name_prefix,
                        &tools.name_suffix,
                        &tools.arg_name_prefix,
                        &tools.arg_value_suffix,
                        &tools.call_end,
                        &tools.section_end,
                        &format.turn_end,
                    ]
                    .into_iter()
                    .chain(reasoning.map(|r| &r.start))
                    .chain(reasoning.map(|r| &r.end))
                    .filter(|m| !m.trim().is_empty())
                    .map(|m| m.trim().to_owned())
                    .collect();
                    let options = ParseOptions { tools: super::tools(), id_seed: Some(1), ..ParseOptions::default() };
                    (!outputs.is_empty()).then(|| (Parser::new(&format, &options), outputs, pieces))
                })
                .collect()
        })
    }

    const INSERTS: &[&str] = &["}", "{", "\"", "\n", ",", "]", "[", ":", "\\", "é", "😀", " ", "</", "<", ">", "null"];

    fn char_boundary(text: &str, at: usize) -> usize {
        let mut at = at % (text.len() + 1);
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        at
    }

    proptest! {
        // 400 cases a run; `PROPTEST_CASES` for a longer hunt.
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::with_cases(
            std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(400)) })]
        #[test]
        fn broken_outputs_stream_as_they_parse_whole(
            family in any::<prop::sample::Index>(),
            case in any::<prop::sample::Index>(),
            edits in prop::collection::vec((0u8..4, any::<u16>(), any::<prop::sample::Index>()), 1..7),
            cuts in prop::collection::vec(any::<u16>(), 1..12),
        ) {
            let families = families();
            if families.is_empty() {
                return Ok(());
            }
            let (parser, outputs, pieces) = &families[family.index(families.len())];
            let mut text = outputs[case.index(outputs.len())].clone();
            for (kind, at, which) in edits {
                let at = char_boundary(&text, at as usize);
                match kind {
                    0 => {
                        if let Some(c) = text[at..].chars().next() {
                            text.replace_range(at..at + c.len_utf8(), "");
                        }
                    }
                    1 => text.insert_str(at, INSERTS[which.index(INSERTS.len())]),
                    2 if !pieces.is_empty() => text.insert_str(at, &pieces[which.index(pieces.len())]),
                    _ => text.truncate(at),
                }
            }
            let mut points: Vec<usize> = cuts.iter().map(|&c| char_boundary(&text, c as usize)).collect();
            points.sort_unstable();
            points.dedup();
            let mut chunks = Vec::new();
            let mut last = 0;
            for p in points {
                chunks.push(&text[last..p]);
                last = p;
            }
            chunks.push(&text[last..]);
            assert_chunking_invariant(parser, &text, &chunks, "mutated family output");
        }
    }
}

/// Class 11 in formats whose calls are whole JSON objects or arrays (Mistral Nemo's
/// `[TOOL_CALLS][{…}, {…}]`): only the cut call is dropped, never one before it, and a stream
/// shows neither its start nor its arguments.
#[test]
fn dropping_a_cut_call_of_a_json_array_keeps_the_whole_ones() {
    let drop = || ParseOptions { truncated_calls: TruncatedCalls::Drop, ..ParseOptions::default() };
    let id = "mistralai-Mistral-Nemo-Instruct-2407";
    let first = r#"{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "a1B2c3D4e"}"#;
    for cut in [r#"{"name": "run", "arguments": {"code": "#, r#"{"na"#, ""] {
        let output = format!("[TOOL_CALLS][{first}, {cut}");
        let Some(got) = parse_checked(id, &output, drop()) else { return };
        assert_eq!(got["calls"], json!([["get_weather", {"city": "Paris"}]]), "{cut:?}: {got}");
        assert!(got["issues"].as_array().unwrap().contains(&json!("truncated-call")), "{cut:?}: {got}");
    }
}

/// Class 1 in MiniCPM5's CDATA values: a section holds the closing tag's text; streamed in any
/// chunking (the section's close is looked for once, not from its start on every chunk).
#[test]
fn a_cdata_value_holds_its_closing_tag() {
    let value = "a</param>b ]] > c";
    let output = format!("<function name=\"run\"><param name=\"code\"><![CDATA[{value}]]></param></function>");
    let Some(got) = parse("openbmb-MiniCPM5-1B", &output) else { return };
    assert_eq!((&got["calls"], &got["issues"]), (&json!([["run", {"code": value}]]), &json!([])), "{got}");
    // Text after the section before the closing tag: no CDATA value, the raw text up to the tag.
    let output = "<function name=\"run\"><param name=\"code\"><![CDATA[a]]> tail</param></function>";
    let Some(got) = parse("openbmb-MiniCPM5-1B", output) else { return };
    assert_eq!(got["calls"], json!([["run", {"code": "<![CDATA[a]]> tail"}]]), "{got}");
}
