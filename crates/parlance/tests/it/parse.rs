//! The output parser against every corpus template: render-then-parse roundtrips, chunking
//! invariance (random and all two-way splits), and the peers' parse cases as a ratchet.

use std::path::Path;

use parlance::{
    AnalyzeOptions, ChatTemplate, Delta, Format, ParseOptions, ParsedMessage, Parser, analyze, rendered_cases,
};
use proptest::prelude::*;
use serde_json::{Value as Json, json};

use crate::corpus;

/// Every corpus template the analyzer handles, with its Format.
pub(crate) fn corpus_formats(corpus: &Path) -> Vec<(String, ChatTemplate, Format, AnalyzeOptions)> {
    crate::analyze::manifest_ids(corpus)
        .into_iter()
        .filter_map(|id| {
            let (template, options) = crate::analyze::corpus_template(corpus, &id);
            let format = analyze(&template, &options).ok()?;
            Some((id, template, format, options))
        })
        .collect()
}

/// Concatenates deltas into the message they describe.
fn fold(deltas: &[Delta]) -> (String, String, Vec<(String, String)>) {
    let (mut reasoning, mut content, mut calls) = (String::new(), String::new(), Vec::<(String, String)>::new());
    for delta in deltas {
        match delta {
            Delta::Reasoning { reasoning_content } => reasoning.push_str(reasoning_content),
            Delta::Content { content: c } => content.push_str(c),
            Delta::ToolCallStart { index, name, .. } => {
                assert_eq!(*index, calls.len(), "call indices are consecutive");
                calls.push((name.clone(), String::new()));
            }
            Delta::ToolCallArguments { index, arguments } => calls[*index].1.push_str(arguments),
        }
    }
    (reasoning, content, calls)
}

fn stream(parser: &Parser, chunks: &[&str]) -> (ParsedMessage, Vec<Delta>) {
    let mut stream = parser.stream();
    let mut deltas = Vec::new();
    for chunk in chunks {
        deltas.extend(stream.push(chunk));
    }
    deltas.extend(stream.finish());
    (stream.message(), deltas)
}

/// Streaming `text` in `chunks` gives the whole parse, and the deltas add up to it.
pub(crate) fn assert_chunking_invariant(parser: &Parser, text: &str, chunks: &[&str], what: &str) {
    // Unseeded parsers give each output its own call ids: compare the rest.
    let without_ids = |mut message: ParsedMessage| {
        message.tool_calls.iter_mut().filter(|c| c.id_generated).for_each(|c| c.id.clear());
        message
    };
    let whole = parser.parse(text);
    let (streamed, deltas) = stream(parser, chunks);
    let (whole, streamed) = (without_ids(whole), without_ids(streamed));
    if streamed != whole {
        panic!(
            "{what}: streamed in {chunks:?} differs from the whole parse of {text:?}:\nstreamed {streamed:?}\nwhole    {whole:?}"
        );
    }
    let (reasoning, content, calls) = fold(&deltas);
    assert_eq!(reasoning, whole.reasoning_content.clone().unwrap_or_default(), "{what}: reasoning deltas");
    assert_eq!(content, whole.content.clone().unwrap_or_default(), "{what}: content deltas");
    let whole_calls: Vec<(String, String)> =
        whole.tool_calls.iter().map(|c| (c.name.clone(), c.arguments.clone())).collect();
    assert_eq!(calls, whole_calls, "{what}: tool-call deltas");
    // Spans cover every byte, in order.
    let mut at = 0;
    for span in &whole.spans {
        assert_eq!(span.start, at, "{what}: spans leave a gap at {at} in {text:?}: {:?}", whole.spans);
        at = span.end;
    }
    assert_eq!(at, text.len(), "{what}: spans end at {at} of {} in {text:?}", text.len());
}

fn split_at_chars(text: &str, cuts: &[usize]) -> Vec<String> {
    let boundaries: Vec<usize> = text.char_indices().map(|(i, _)| i).chain([text.len()]).collect();
    let mut points: Vec<usize> = cuts.iter().map(|c| boundaries[c % boundaries.len()]).collect();
    points.sort_unstable();
    points.dedup();
    let mut chunks = Vec::new();
    let mut last = 0;
    for p in points {
        chunks.push(text[last..p].to_owned());
        last = p;
    }
    chunks.push(text[last..].to_owned());
    chunks
}

/// Structures rendered by each template and parsed back are the structures rendered.
#[test]
fn rendered_messages_parse_back_for_every_corpus_template() {
    let Some(corpus) = corpus::corpus() else { return };
    let mut checked = 0;
    let mut failures = Vec::new();
    let expected_failures = expected_roundtrip_failures();
    for (id, template, format, options) in corpus_formats(&corpus) {
        let tools = vec![
            json!({"type": "function", "function": {"name": "plnc_fn_alpha", "parameters": {"type": "object", "properties": {"plnc_arg_one": {}}}}}),
            json!({"type": "function", "function": {"name": "plnc_fn_bravo", "parameters": {"type": "object", "properties": {"plnc_arg_two": {}}}}}),
        ];
        for case in rendered_cases(&template, &format, &options) {
            let options = ParseOptions {
                tools: tools.clone(),
                generation_prompt: Some(case.prompt.clone()),
                ..ParseOptions::default()
            };
            let parser = Parser::new(&format, &options);
            // Parts the template does not render cannot come back.
            let names_rendered = case.message["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
                .all(|c| case.output.contains(c["function"]["name"].as_str().unwrap_or_default()));
            if !names_rendered {
                continue;
            }
            let parsed = parser.parse(&case.output);
            checked += 1;
            if let Err(why) = same_structure(&case.message, &case.output, &parsed) {
                failures.push(format!("{id} {}: {why} (output {:?})", case.case, case.output));
            }
            // Every rendered output also streams to the same result, byte by byte.
            let chars: Vec<String> = case.output.chars().map(String::from).collect();
            let chunks: Vec<&str> = chars.iter().map(String::as_str).collect();
            assert_chunking_invariant(&parser, &case.output, &chunks, &format!("{id} {}", case.case));
        }
    }
    let unexpected: Vec<&String> =
        failures.iter().filter(|f| !expected_failures.iter().any(|id| f.starts_with(&format!("{id} ")))).collect();
    eprintln!("{} rendered messages parsed back, {} differ", checked, failures.len());
    assert!(checked > 500, "only {checked} rendered messages");
    assert!(unexpected.is_empty(), "{} unexpected roundtrip failures:\n{}", unexpected.len(), {
        unexpected.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n")
    });
}

/// Templates whose roundtrip is known to fail: those of `self_roundtrip_failures` in
/// `tests/expected/analyze.json` (the Format itself misdescribes them).
fn expected_roundtrip_failures() -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/expected/analyze.json");
    let expected: Json = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut ids: Vec<String> = expected["self_roundtrip_failures"].as_object().unwrap().keys().cloned().collect();
    ids.extend(expected["parse_roundtrip_failures"].as_object().into_iter().flatten().map(|(k, _)| k.clone()));
    ids
}

fn same_structure(message: &Json, output: &str, parsed: &ParsedMessage) -> Result<(), String> {
    let text = |v: &Json| {
        let text = v.as_str().unwrap_or_default().trim().to_owned();
        if output.contains(&text) { text } else { String::new() }
    };
    let content = text(&message["content"]);
    let got_content = parsed.content.clone().unwrap_or_default();
    if got_content.trim() != content {
        return Err(format!("content {got_content:?}, rendered {content:?}"));
    }
    let reasoning = text(&message["reasoning"]);
    let got_reasoning = parsed.reasoning_content.clone().unwrap_or_default();
    if got_reasoning.trim() != reasoning {
        return Err(format!("reasoning {got_reasoning:?}, rendered {reasoning:?}"));
    }
    let empty = Vec::new();
    let calls = message["tool_calls"].as_array().unwrap_or(&empty);
    if calls.len() != parsed.tool_calls.len() {
        return Err(format!("{} calls, rendered {}", parsed.tool_calls.len(), calls.len()));
    }
    for (call, got) in calls.iter().zip(&parsed.tool_calls) {
        if call["function"]["name"] != got.name.as_str() {
            return Err(format!("name {:?}, rendered {}", got.name, call["function"]["name"]));
        }
        if got.arguments_value.as_ref() != Some(&call["function"]["arguments"]) {
            return Err(format!("arguments {:?}, rendered {}", got.arguments, call["function"]["arguments"]));
        }
    }
    Ok(())
}

/// Two-way splits at every character of the peers' inputs, under a few formats.
#[test]
fn every_two_way_split_of_peer_inputs_streams_like_the_whole() {
    let Some(corpus) = corpus::corpus() else { return };
    let formats = corpus_formats(&corpus);
    let wanted = [
        "Qwen-Qwen3-0.6B",
        "Qwen3-Coder",
        "deepseek-ai-DeepSeek-V3.1",
        "MiniMax-M2",
        "GLM-4.6",
        "mistralai-Mistral-Nemo-Instruct-2407",
        "LFM2.5-8B-A1B",
        "moonshotai-Kimi-K2",
        "meta-llama-Llama-3.1-8B-Instruct",
        "openai-gpt-oss-120b",
        "Kimi-K3",
        "MiniMax-M3",
        "google-gemma-4-31B-it",
        "Kimi-K2-Instruct",
    ];
    let dir = corpus.join("parse");
    let mut inputs = Vec::new();
    for name in ["llama.cpp.jsonl", "sglang.jsonl", "vllm.jsonl"] {
        for line in std::fs::read_to_string(dir.join(name)).unwrap().lines().filter(|l| !l.trim().is_empty()) {
            let case: Json = serde_json::from_str(line).unwrap();
            inputs.push(case["input"].as_str().unwrap_or_default().to_owned());
        }
    }
    inputs.sort();
    inputs.dedup();
    let mut splits = 0;
    for (id, _, format, _) in formats.iter().filter(|(id, ..)| wanted.contains(&id.as_str())) {
        let parser = Parser::new(format, &ParseOptions::default());
        for input in inputs.iter().filter(|i| i.len() < 400) {
            for (at, _) in input.char_indices().skip(1) {
                assert_chunking_invariant(&parser, input, &[&input[..at], &input[at..]], id);
                splits += 1;
            }
        }
    }
    assert!(splits > 10_000, "only {splits} splits");
}

/// Parses `output` under the corpus template `id` (default options, `tools`), checks that every
/// two-way split streams like the whole, and returns the message as JSON.
#[track_caller]
fn parse_under(id: &str, output: &str, tools: Json) -> Option<Json> {
    let options = ParseOptions { tools: tools.as_array().cloned().unwrap_or_default(), ..ParseOptions::default() };
    parse_with(id, output, options)
}

#[track_caller]
fn parse_with(id: &str, output: &str, options: ParseOptions) -> Option<Json> {
    let corpus = corpus::corpus()?;
    let (template, analyze_options) = crate::analyze::corpus_template(&corpus, id);
    let format = analyze(&template, &analyze_options).unwrap();
    let parser = Parser::new(&format, &options);
    for (at, _) in output.char_indices().skip(1) {
        assert_chunking_invariant(&parser, output, &[&output[..at], &output[at..]], id);
    }
    let message = parser.parse(output);
    Some(json!({
        "reasoning": message.reasoning_content,
        "content": message.content,
        "calls": message.tool_calls.iter().map(|c| json!([c.name, c.arguments_value])).collect::<Vec<_>>(),
        "issues": message.issues.iter().map(|i| i.kind).collect::<Vec<_>>(),
    }))
}

// See: issue 4 (peer cases of Kimi-K3, Gemma 4 and MiniMax-M3).
#[test]
fn turn_end_cut_at_a_stop_token_is_not_content() {
    // Kimi-K3's turn ends `<|close|>message<|sep|><|end_of_msg|>`; engines stop at the last token.
    let Some(got) = parse_under(
        "Kimi-K3",
        "R<|close|>think<|sep|><|open|>response<|sep|>Hi<|close|>response<|sep|><|close|>message<|sep|>",
        json!(null),
    ) else {
        return;
    };
    assert_eq!((&got["reasoning"], &got["content"]), (&json!("R"), &json!("Hi")), "{got}");
    // A lone `<` at the end is no whole token: it stays content.
    let got = parse_under("Kimi-K3", "<|open|>response<|sep|>a <", json!(null)).unwrap();
    assert_eq!(got["content"], json!("a <"), "{got}");
}

#[test]
fn content_opener_right_after_an_opened_reasoning_means_no_reasoning() {
    let Some(got) = parse_under("Kimi-K3", "<|open|>response<|sep|>Hello<|close|>response<|sep|>", json!(null)) else {
        return;
    };
    assert_eq!((&got["reasoning"], &got["content"]), (&json!(null), &json!("Hello")), "{got}");
}

#[test]
fn stray_reasoning_end_is_a_marker_and_a_bare_start_token_opens_reasoning() {
    let Some(got) = parse_under("google-gemma-4-31B-it", "Hello<channel|> world", json!(null)) else { return };
    assert_eq!(got["content"], json!("Hello world"), "{got}");
    assert_eq!(got["issues"], json!(["stray-reasoning-end"]), "{got}");
    // `<|channel>thought` is the start; the token alone opens reasoning too, the word does not.
    let got = parse_under("google-gemma-4-31B-it", "<|channel>thinking hard<channel|>Done", json!(null)).unwrap();
    assert_eq!((&got["reasoning"], &got["content"]), (&json!("thinking hard"), &json!("Done")), "{got}");
    let got = parse_under("google-gemma-4-31B-it", "<|channel>thought\nplan<channel|>Done", json!(null)).unwrap();
    assert_eq!(got["reasoning"], json!("plan"), "{got}");
}

#[test]
fn reasoning_text_the_prompt_wrote_after_the_opener_starts_the_reasoning() {
    // Apriel 1.6's prompt ends `<|begin_assistant|>\nHere are my reasoning steps:\n`; its rendered
    // turn writes the message's reasoning right after `<|begin_assistant|>\n`. So the reasoning
    // that renders back to prompt + output starts with the prompt's sentence.
    let id = "Apriel-1.6-15b-Thinker-fixed";
    let output = "I'm\nthinking\n[BEGIN FINAL RESPONSE]\nHello";
    let Some(got) = parse_under(id, output, json!(null)) else { return };
    assert_eq!(got["reasoning"], json!("Here are my reasoning steps:\nI'm\nthinking"), "{got}");
    assert_eq!(got["content"], json!("Hello"), "{got}");
    let corpus = corpus::corpus().unwrap();
    let (template, analyze_options) = crate::analyze::corpus_template(&corpus, id);
    let format = analyze(&template, &analyze_options).unwrap();
    let prompt_of = |messages: Json, add_generation_prompt| {
        let request = json!({"messages": messages});
        let conversation: parlance::Conversation = serde_json::from_value(request).unwrap();
        let options = parlance::RenderOptions { add_generation_prompt, ..parlance::RenderOptions::default() };
        template.render(&conversation, &options).unwrap()
    };
    let user = json!({"role": "user", "content": "Hi"});
    let prompt = prompt_of(json!([user]), true);
    let message = Parser::new(&format, &ParseOptions::default()).parse(output);
    let rendered = prompt_of(
        json!([user, {"role": "assistant", "reasoning_content": message.reasoning_content, "content": message.content}]),
        false,
    );
    assert!(rendered.starts_with(&prompt), "the parsed message re-renders the prompt:\n{prompt:?}\n{rendered:?}");
    // A prompt that closes the block after its text does not open reasoning.
    let options = ParseOptions {
        generation_prompt: Some("<|begin_assistant|>\nSteps:\n[BEGIN FINAL RESPONSE]\n".into()),
        ..ParseOptions::default()
    };
    let got = parse_with(id, "Hello", options).unwrap();
    assert_eq!((&got["reasoning"], &got["content"]), (&json!(null), &json!("Hello")), "{got}");
}

#[test]
fn broken_json_is_decided_where_it_breaks() {
    let Some(corpus) = corpus::corpus() else { return };
    let (template, analyze_options) = crate::analyze::corpus_template(&corpus, "Qwen-Qwen3-0.6B");
    let format = analyze(&template, &analyze_options).unwrap();
    let parser = Parser::new(&format, &ParseOptions::default());
    // Before the name: the call is content as soon as the JSON breaks, not when the output ends.
    let mut stream = parser.stream();
    let deltas = stream.push("<tool_call>\n{broken json");
    let content: String = deltas
        .iter()
        .filter_map(|d| match d {
            Delta::Content { content } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert!(content.starts_with("<tool_call>\n{broken"), "{deltas:?}");
    // After the name: the broken arguments end at the call's end marker, which they do not
    // swallow, and the calls after them parse.
    let text = "<tool_call>\n{\"name\": \"f\", \"arguments\": {broken json\n</tool_call>\nMore\n\
                <tool_call>\n{\"name\": \"g\", \"arguments\": {\"a\": 1}}\n</tool_call>";
    let message = parser.parse(text);
    let calls: Vec<(&str, &str)> = message.tool_calls.iter().map(|c| (c.name.as_str(), c.arguments.as_str())).collect();
    assert_eq!(calls, [("f", "{broken json"), ("g", "{\"a\": 1}")], "{message:?}");
    assert_eq!(message.content.as_deref(), Some("More"), "{message:?}");
    assert!(message.issues.iter().any(|i| i.kind == "malformed-arguments"), "{message:?}");
    for (at, _) in text.char_indices().skip(1) {
        assert_chunking_invariant(&parser, text, &[&text[..at], &text[at..]], "broken arguments");
    }
}

// See: issue 19, item 5 (`shared/repro/brokentail.txt`, `parse_json_tail_depth_512.txt`).
#[test]
fn a_call_object_broken_after_its_arguments_ends_at_its_end_marker() {
    let (Some(corpus), Some(repro)) = (corpus::corpus(), corpus::repro()) else { return };
    let good = "<tool_call>\n{\"name\": \"g\", \"arguments\": {\"b\": 2}}\n</tool_call>";
    // Ways an object can break after its arguments: a bracket left open, a key that is not a
    // string, text that is not JSON, a string never closed, the repro's 512-deep tail.
    let deep = std::fs::read_to_string(repro.join("parse_json_tail_depth_512.txt")).unwrap();
    let deep_tail = deep.split_once("\"arguments\": {}").unwrap().1.split("\n</tool_call>").next().unwrap().to_owned();
    let tails =
        [", \"tags\": [\"x\"", ", \"tags\": {\"x\": [1", ", [[[", ", \"id\": 7 oops", ", \"note\": \"open", &deep_tail];
    for id in ["Qwen-Qwen3-0.6B", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use"] {
        let (template, analyze_options) = crate::analyze::corpus_template(&corpus, id);
        let format = analyze(&template, &analyze_options).unwrap();
        let parser = Parser::new(&format, &ParseOptions::default());
        for tail in &tails {
            let text = format!(
                "<tool_call>\n{{\"name\": \"f\", \"arguments\": {{\"a\": 1}}{tail}\n</tool_call>\nLet me also check.\n{good}"
            );
            let message = parser.parse(&text);
            let calls: Vec<(&str, &str)> =
                message.tool_calls.iter().map(|c| (c.name.as_str(), c.arguments.as_str())).collect();
            assert_eq!(calls, [("f", "{\"a\": 1}"), ("g", "{\"b\": 2}")], "{id} {tail:.40}: {message:?}");
            assert_eq!(message.content.as_deref(), Some("Let me also check."), "{id} {tail:.40}");
            let kinds: Vec<&str> = message.issues.iter().map(|i| i.kind.as_str()).collect();
            assert_eq!(kinds, ["malformed-call"], "{id} {tail:.40}");
            // The issue points into the tail, where the object broke.
            let at = message.issues[0].at;
            assert!(at > text.find("{\"a\": 1}").unwrap() && at <= text.find("</tool_call>").unwrap(), "{id}: at {at}");
            let chunkings: Vec<Vec<&str>> = [1, 7, 64]
                .iter()
                .map(|&n| text.as_bytes().chunks(n).map(|c| std::str::from_utf8(c).unwrap()).collect())
                .collect();
            for chunks in &chunkings {
                assert_chunking_invariant(&parser, &text, chunks, id);
            }
        }
        // Cut inside the object with no end marker after it, the output did end there.
        let cut = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}, \"tags\": [\"x\"";
        let message = parser.parse(cut);
        assert_eq!(message.tool_calls.len(), 1, "{id}");
        assert!(message.issues.iter().any(|i| i.kind == "truncated-call"), "{id}: {message:?}");
    }
    let text = std::fs::read_to_string(repro.join("brokentail.txt")).unwrap();
    let (template, analyze_options) = crate::analyze::corpus_template(&corpus, "Qwen-Qwen3-0.6B");
    let parser = Parser::new(&analyze(&template, &analyze_options).unwrap(), &ParseOptions::default());
    let message = parser.parse(&text);
    assert_eq!(message.tool_calls.len(), 2, "{message:?}");
    assert_eq!(message.content.as_deref(), Some("Let me also check the time."));
}

// See: issue 19 (call ids unique per response unless seeded).
#[test]
fn generated_call_ids_differ_per_output_unless_seeded() {
    let Some(corpus) = corpus::corpus() else { return };
    let (template, analyze_options) = crate::analyze::corpus_template(&corpus, "Qwen-Qwen3-0.6B");
    let format = analyze(&template, &analyze_options).unwrap();
    let text = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n\
                <tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>";
    let ids = |parser: &Parser| -> Vec<String> { parser.parse(text).tool_calls.into_iter().map(|c| c.id).collect() };
    let unseeded = Parser::new(&format, &ParseOptions::default());
    let (first, second) = (ids(&unseeded), ids(&unseeded));
    assert_eq!(first.len(), 2);
    assert_ne!(first[0], first[1], "two calls of one output share an id");
    assert!(first.iter().all(|id| !second.contains(id)), "two outputs share ids: {first:?} {second:?}");
    let mut streamed = unseeded.stream();
    streamed.push(text);
    streamed.finish();
    assert!(streamed.message().tool_calls.iter().all(|c| !first.contains(&c.id)), "a stream reuses ids");
    let seeded = Parser::new(&format, &ParseOptions { id_seed: Some(42), ..ParseOptions::default() });
    assert_eq!(ids(&seeded), ids(&seeded), "a seed gives the same ids every time");
    assert_ne!(
        ids(&seeded),
        ids(&Parser::new(&format, &ParseOptions { id_seed: Some(43), ..ParseOptions::default() }))
    );
}

// See: issue 24, item 2 (an output dense with stray markers streamed one allocation per piece).
#[test]
fn text_between_stray_markers_streams_as_one_delta_per_push() {
    let Some(corpus) = corpus::corpus() else { return };
    let (template, analyze_options) = crate::analyze::corpus_template(&corpus, "Qwen-Qwen3-0.6B");
    let parser = Parser::new(&analyze(&template, &analyze_options).unwrap(), &ParseOptions::default());
    let text = "abc </think> ".repeat(1000) + "end";
    let chunks: Vec<&str> = vec![&text[..6500], &text[6500..]];
    assert_chunking_invariant(&parser, &text, &chunks, "stray reasoning ends");
    let mut stream = parser.stream();
    let first = stream.push(chunks[0]);
    assert_eq!(first.len(), 1, "{} deltas for one push of text and stray markers", first.len());
    assert!(matches!(&first[0], Delta::Content { content } if content.starts_with("abc  abc ")), "{first:?}");
    stream.push(chunks[1]);
    stream.finish();
    let message = stream.message();
    assert_eq!(message.issues.iter().filter(|i| i.kind == "stray-reasoning-end").count(), 1000);
    assert_eq!(message.content.as_deref(), Some(text.replace("</think>", "").as_str()));
}

// See: issue 24, item 5 (no lost digits in tagged arguments).
#[test]
fn tagged_numbers_keep_every_digit_the_model_wrote() {
    let Some(corpus) = corpus::corpus() else { return };
    let tools = vec![json!({"type": "function", "function": {"name": "f", "parameters": {"type": "object",
        "properties": {"n": {"type": "integer"}, "x": {"type": "number"}, "v": {"type": "array"}}}}})];
    let big = "123456789012345678901234567890";
    let outputs = [
        (
            "Qwen3-Coder",
            format!(
                "<tool_call>\n<function=f>\n<parameter=n>\n{big}\n</parameter>\n<parameter=x>\n1.10\n</parameter>\n\
                 <parameter=v>\n[{big}, 2e3]\n</parameter>\n</function>\n</tool_call>"
            ),
        ),
        (
            "GLM-4.6",
            format!(
                "<tool_call>f\n<arg_key>n</arg_key>\n<arg_value>{big}</arg_value>\n<arg_key>x</arg_key>\n\
                 <arg_value>1.10</arg_value>\n<arg_key>v</arg_key>\n<arg_value>[{big}, 2e3]</arg_value>\n</tool_call>"
            ),
        ),
    ];
    for (id, output) in outputs {
        let (template, analyze_options) = crate::analyze::corpus_template(&corpus, id);
        let format = analyze(&template, &analyze_options).unwrap();
        let parser = Parser::new(&format, &ParseOptions { tools: tools.clone(), ..ParseOptions::default() });
        let message = parser.parse(&output);
        assert_eq!(message.tool_calls.len(), 1, "{id}: {message:?}");
        let arguments = &message.tool_calls[0].arguments;
        assert_eq!(arguments, &format!("{{\"n\": {big}, \"x\": 1.10, \"v\": [{big},2e3]}}"), "{id}");
        assert!(message.issues.is_empty(), "{id}: {:?}", message.issues);
        assert_chunking_invariant(
            &parser,
            &output,
            &output.as_bytes().chunks(5).map(|c| std::str::from_utf8(c).unwrap()).collect::<Vec<_>>(),
            id,
        );
    }
}

#[test]
fn a_call_opener_without_its_section_start_opens_the_section() {
    // Kimi-K2's calls sit in `<|tool_calls_section_begin|>`…; a model may leave it out.
    let output = "Sure.<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{\"a\": 1}<|tool_call_end|>";
    let Some(got) = parse_under("Kimi-K2-Instruct", output, json!(null)) else { return };
    assert_eq!((&got["content"], &got["calls"]), (&json!("Sure."), &json!([["f", {"a": 1}]])), "{got}");
    // Not followed by a call: the opener is content.
    let got = parse_under("Kimi-K2-Instruct", "a <|tool_call_begin|> b", json!(null)).unwrap();
    assert_eq!(got["content"], json!("a <|tool_call_begin|> b"), "{got}");
}

#[test]
fn the_last_tag_of_a_name_prefix_opens_a_call_without_the_tags_before_it() {
    // Qwen3-Coder writes `<tool_call>\n<function=name>` per call; a model may leave out the first tag.
    let output = "Let me call it.\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>";
    let Some(got) = parse_under("Qwen3-Coder", output, json!(null)) else { return };
    assert_eq!((&got["content"], &got["calls"]), (&json!("Let me call it."), &json!([["f", {"a": 1}]])), "{got}");
    // Prose that only looks like the tag stays content.
    let got = parse_under("Qwen3-Coder", "the <function= tag is used. Done", json!(null)).unwrap();
    assert_eq!((&got["content"], &got["calls"]), (&json!("the <function= tag is used. Done"), &json!([])), "{got}");
}

#[test]
fn cdata_values_hold_the_value_suffix_verbatim() {
    let output = "<function name=\"f\"><param name=\"m\"><![CDATA[<a>x</a> </param>]]></param></function>";
    let Some(got) = parse_under("openbmb-MiniCPM5-1B", output, json!(null)) else { return };
    assert_eq!(got["calls"], json!([["f", {"m": "<a>x</a> </param>"}]]), "{got}");
    // Text after the CDATA section: the value is the text as written.
    let output = "<function name=\"f\"><param name=\"m\"><![CDATA[x]]>y</param></function>";
    let got = parse_under("openbmb-MiniCPM5-1B", output, json!(null)).unwrap();
    assert_eq!(got["calls"], json!([["f", {"m": "<![CDATA[x]]>y"}]]), "{got}");
}

#[test]
fn a_literal_string_ends_at_the_quote_the_next_marker_follows() {
    // LFM2.5 writes `[f(a='x', b=1)]`; models leave quotes inside strings unescaped.
    let output = "<|tool_call_start|>[bash(command='sed -n '360,450p' f.py', n=2)]<|tool_call_end|>";
    let Some(got) = parse_under("LFM2.5-8B-A1B", output, json!(null)) else { return };
    assert_eq!(got["calls"], json!([["bash", {"command": "sed -n '360,450p' f.py", "n": 2}]]), "{got}");
    // A quote followed by the call end but not by what follows a call is inside the string; an
    // unknown escape keeps its backslash, as in Python.
    let output = "<|tool_call_start|>[bash(command='python -c \"f(x='\\,')\"')]<|tool_call_end|>";
    let got = parse_under("LFM2.5-8B-A1B", output, json!(null)).unwrap();
    assert_eq!(got["calls"], json!([["bash", {"command": "python -c \"f(x='\\,')\""}]]), "{got}");
    // Well-formed strings and parallel calls read as before.
    let output = "<|tool_call_start|>[f(a='it\\'s', b='x'), g(c='y')]<|tool_call_end|>";
    let got = parse_under("LFM2.5-8B-A1B", output, json!(null)).unwrap();
    assert_eq!(got["calls"], json!([["f", {"a": "it's", "b": "x"}], ["g", {"c": "y"}]]), "{got}");
}

#[test]
fn json_calls_cut_after_their_name_are_kept() {
    // Cohere2MoE writes `<|START_ACTION|>[{"tool_call_id": …, "tool_name": …, "parameters": …}]`;
    // output cut inside the array keeps the whole calls and the cut one whose name was read.
    let output = "r<|END_THINKING|><|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"f\", ";
    let Some(got) = parse_under("Cohere2MoE", output, json!(null)) else { return };
    assert_eq!((&got["content"], &got["calls"]), (&json!(null), &json!([["f", null]])), "{got}");
    assert!(got["issues"].as_array().unwrap().contains(&json!("truncated-call")), "{got}");
    let output = "r<|END_THINKING|><|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"a\", \"parameters\": {\"x\": 1}}, \
                  {\"tool_call_id\": \"1\", \"tool_name\": \"b\", \"parameters\": {\"y\": ";
    let got = parse_under("Cohere2MoE", output, json!(null)).unwrap();
    assert_eq!(got["calls"], json!([["a", {"x": 1}], ["b", null]]), "{got}");
    // Cut before a name was read: the text stays content.
    let output = "r<|END_THINKING|><|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_na";
    let got = parse_under("Cohere2MoE", output, json!(null)).unwrap();
    assert_eq!((&got["calls"], &got["issues"]), (&json!([]), &json!(["unparsed-call"])), "{got}");
}

#[test]
fn bare_json_is_a_call_only_as_a_whole_call_object() {
    // Llama 3.1 writes a call as a bare `{"name": …, "parameters": …}`: no marker says it is one.
    let output = "{\"name\": \"f\", \"parameters\": {\"a\": 1}}";
    let Some(got) = parse_under("meta-llama-Llama-3.1-8B-Instruct", output, json!(null)) else { return };
    assert_eq!((&got["content"], &got["calls"]), (&json!(null), &json!([["f", {"a": 1}]])), "{got}");
    for output in ["{\"name\": \"f\", \"parameters\": {bad json}", "{\"name\": \"f\", \"parameters\": {\"a\":"] {
        let got = parse_under("meta-llama-Llama-3.1-8B-Instruct", output, json!(null)).unwrap();
        assert_eq!((&got["content"], &got["calls"]), (&json!(output), &json!([])), "{got}");
    }
}

#[test]
fn content_opener_after_unseparated_reasoning_is_a_marker() {
    let output = "<|START_THINKING|>hm<|END_THINKING|><|START_RESPONSE|>Hi<|END_RESPONSE|>";
    let options = ParseOptions { separate_reasoning: Some(false), ..ParseOptions::default() };
    let Some(got) = parse_with("CohereForAI-c4ai-command-r7b-12-2024-tool_use", output, options) else { return };
    assert_eq!(got["content"], json!("<|START_THINKING|>hm<|END_THINKING|>Hi"), "{got}");
}

#[test]
fn unseparated_channel_reasoning_stays_as_written_and_later_headers_are_markers() {
    let output = "<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>final<|message|>Hi";
    let options = ParseOptions { separate_reasoning: Some(false), ..ParseOptions::default() };
    let Some(got) = parse_with("openai-gpt-oss-120b", output, options) else { return };
    assert_eq!(
        (&got["reasoning"], &got["content"]),
        (&json!(null), &json!("<|channel|>analysis<|message|>hm<|end|>Hi")),
        "{got}"
    );
}

#[test]
fn literals_with_multi_character_quotes_read_by_schema() {
    let tools = json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
        "todos": {"type": "array"}, "note": {"type": "string"}
    }}}}]);
    let output = "<|tool_call>call:f{todos:[<|\"|>a, b<|\"|>,{k:<|\"|>c<|\"|>}],note:<|\"|>[x]<|\"|>}<tool_call|>";
    let Some(got) = parse_under("google-gemma-4-31B-it", output, tools) else { return };
    assert_eq!(got["calls"], json!([["f", {"todos": ["a, b", {"k": "c"}], "note": "[x]"}]]), "{got}");
}

#[test]
fn closing_tags_that_name_the_argument_and_nested_values_parse_by_schema() {
    let tools = json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
        "n": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "point": {"type": "object", "properties": {"x": {"type": "number"}}},
        "text": {"type": "string"}
    }}}}]);
    let ns = "]<]minimax[>[";
    let output = format!(
        "</mm:think>{ns}<tool_call>\n{ns}<invoke name=\"f\">{ns}<n>7{ns}</n>{ns}<tags>{ns}<item>a{ns}</item>{ns}<item>7{ns}</item>{ns}</tags>\
         {ns}<point>{ns}<x>1.5{ns}</x>{ns}</point>{ns}<text>{ns}<b>raw{ns}</b>{ns}</text>{ns}</invoke>\n{ns}</tool_call>"
    );
    let Some(got) = parse_under("MiniMax-M3", &output, tools) else { return };
    let want = json!({"n": 7, "tags": ["a", "7"], "point": {"x": 1.5}, "text": format!("{ns}<b>raw{ns}</b>")});
    assert_eq!(got["calls"], json!([["f", want]]), "{got}");
    assert_eq!(got["content"], json!(null), "{got}");
}

/// A call that fails before its name is complete, after a call that parsed (Qwen3's peer case
/// `prime-qwen3-4`): its whole text, opener included, is content, it is reported, and the calls
/// around it are kept; whole and byte by byte.
#[test]
fn a_broken_call_after_a_good_one_is_content_and_the_good_calls_are_kept() {
    let output = "pre\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{broken\n</tool_call>\n\
                  <tool_call>\n{\"name\": \"c\", \"arguments\": {\"x\": 1}}\n</tool_call>";
    let Some(corpus) = corpus::corpus() else { return };
    for id in ["Qwen-Qwen3-0.6B", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use"] {
        let got = parse_under(id, output, json!(null)).unwrap();
        // Text around the good call is joined as written: `pre`, the line break before the call,
        // then the broken call from the line break before it.
        assert_eq!(got["content"], json!("pre\n\n<tool_call>\n{broken\n</tool_call>"), "{id}: {got}");
        assert_eq!(got["calls"], json!([["a", {}], ["c", {"x": 1}]]), "{id}: {got}");
        assert_eq!(got["issues"], json!(["unparsed-call"]), "{id}: {got}");
        // Byte by byte.
        let (template, analyze_options) = crate::analyze::corpus_template(&corpus, id);
        let parser = Parser::new(&analyze(&template, &analyze_options).unwrap(), &ParseOptions::default());
        let chars: Vec<String> = output.chars().map(String::from).collect();
        let chunks: Vec<&str> = chars.iter().map(String::as_str).collect();
        assert_chunking_invariant(&parser, output, &chunks, id);
        let (streamed, _) = stream(&parser, &chunks);
        assert!(streamed.content.unwrap().contains("<tool_call>\n{broken\n</tool_call>"), "{id}");
        assert_eq!(streamed.issues.len(), 1, "{id}: {:?}", streamed.issues);
        assert_eq!(streamed.issues[0].at, output.find("<tool_call>\n{broken").unwrap(), "{id}");
        assert_eq!(streamed.tool_calls.len(), 2, "{id}");
    }
    // Section-marker and name-in-marker formats: the broken call's opener stays with its text.
    let cases = [
        (
            "deepseek-ai-DeepSeek-V3.1",
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>a<｜tool▁sep｜>{}<｜tool▁call▁end｜>\
             <｜tool▁call▁begin｜><｜tool▁sep｜>{}<｜tool▁call▁end｜>\
             <｜tool▁call▁begin｜>c<｜tool▁sep｜>{\"x\": 1}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
            "<｜tool▁call▁begin｜><｜tool▁sep｜>{}<｜tool▁call▁end｜>",
        ),
        (
            "moonshotai-Kimi-K2",
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.a:0<|tool_call_argument_begin|>{}<|tool_call_end|>\
             <|tool_call_begin|>functions.:1<|tool_call_argument_begin|>{}<|tool_call_end|>\
             <|tool_call_begin|>functions.c:2<|tool_call_argument_begin|>{\"x\": 1}<|tool_call_end|><|tool_calls_section_end|>",
            "<|tool_call_begin|>functions.:1<|tool_call_argument_begin|>{}<|tool_call_end|>",
        ),
        (
            "Qwen3-Coder",
            "<tool_call>\n<function=a>\n</function>\n</tool_call>\n<tool_call>\n<function=\n</function>\n</tool_call>\n\
             <tool_call>\n<function=c>\n<parameter=x>\n1\n</parameter>\n</function>\n</tool_call>",
            "<tool_call>\n<function=\n</function>\n</tool_call>",
        ),
        (
            "GLM-4.6",
            "<tool_call>a\n</tool_call>\n<tool_call>\n</tool_call>\n<tool_call>c\n<arg_key>x</arg_key>\n<arg_value>1</arg_value>\n</tool_call>",
            "<tool_call>\n</tool_call>",
        ),
    ];
    for (id, output, content) in cases {
        let got = parse_under(id, output, json!(null)).unwrap();
        assert_eq!(got["content"], json!(content), "{id}: {got}");
        assert_eq!(got["calls"], json!([["a", {}], ["c", {"x": 1}]]), "{id}: {got}");
        assert_eq!(got["issues"], json!(["unparsed-call"]), "{id}: {got}");
    }
    // A list format: the separator before the broken call is its text too.
    let output = "<|tool_call_start|>[a(), (broken]<|tool_call_end|>";
    let got = parse_under("LFM2.5-8B-A1B", output, json!(null)).unwrap();
    assert_eq!(got["content"], json!(", (broken]<|tool_call_end|>"), "{got}");
    assert_eq!((&got["calls"], &got["issues"]), (&json!([["a", {}]]), &json!(["unparsed-call"])), "{got}");
}

/// Formats where a call broken after a good one leaves the later calls of its section content.
const LATER_CALLS_CONTENT: [&str; 7] = [
    "MiniMax-M2",
    "unsloth-MiniMax-M2",
    "MiniMax-M3",
    "deepseek-ai-DeepSeek-V3.2",
    "deepseek-ai-DeepSeek-V4",
    "deepseek-ai-DeepSeek-V4-Flash-0731",
    "upstage-Solar-Open-100B",
];

/// Every corpus format whose calls open with a marker: a call broken before its name (the
/// opener, `!!`, the call end) inserted before the second of two rendered calls is content as
/// written and reported, both calls are kept, and byte-by-byte streaming gives the same.
#[test]
fn a_broken_call_between_rendered_calls_loses_no_text() {
    let Some(corpus) = corpus::corpus() else { return };
    let (mut checked, mut failures) = (0, Vec::new());
    for (id, template, format, options) in corpus_formats(&corpus) {
        let Some(tools) = format.tools.as_ref() else { continue };
        let opener =
            if tools.call_start.trim().is_empty() { tools.name_prefix.trim() } else { tools.call_start.trim() };
        if opener.is_empty() {
            continue;
        }
        let Some(case) = rendered_cases(&template, &format, &options).into_iter().find(|c| c.case == "parallel_calls")
        else {
            continue;
        };
        let parser = Parser::new(
            &format,
            &ParseOptions { generation_prompt: Some(case.prompt.clone()), ..ParseOptions::default() },
        );
        let names = |m: &ParsedMessage| m.tool_calls.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
        let good = parser.parse(&case.output);
        let Some(second) = case.output.match_indices(opener).nth(1).map(|(at, _)| at) else { continue };
        if good.tool_calls.len() != 2 || !good.issues.is_empty() {
            continue;
        }
        let broken = format!("{}{}!!{}", tools.call_start, tools.name_prefix, tools.call_end);
        let output = format!("{}{broken}{}{}", &case.output[..second], tools.separator, &case.output[second..]);
        checked += 1;
        let chars: Vec<String> = output.chars().map(String::from).collect();
        let chunks: Vec<&str> = chars.iter().map(String::as_str).collect();
        assert_chunking_invariant(&parser, &output, &chunks, &id);
        let got = parser.parse(&output);
        let content = got.content.clone().unwrap_or_default();
        // Known limit: where only the section start opens calls (no call trigger), the calls after
        // the broken one are content too (not lost, not calls); Solar's id before the name makes
        // the next call's opener content and reports it too.
        let later_calls_content = LATER_CALLS_CONTENT.contains(&id.as_str());
        let calls_kept = if later_calls_content {
            names(&got)[..] == names(&good)[..1] && content.contains(&names(&good)[1])
                || id == "upstage-Solar-Open-100B" && names(&got) == names(&good)
        } else {
            names(&got) == names(&good)
        };
        let issues: Vec<&str> = got.issues.iter().map(|i| i.kind.as_str()).collect();
        let reported = issues == ["unparsed-call"]
            || later_calls_content && !issues.is_empty() && issues.iter().all(|k| *k == "unparsed-call");
        if !calls_kept || !content.contains(broken.trim()) || !reported {
            failures.push(format!(
                "{id}: {output:?} gave content {content:?}, calls {:?}, issues {:?}",
                names(&got),
                got.issues
            ));
        }
    }
    eprintln!("{checked} formats checked, {} failed", failures.len());
    assert!(checked >= 20, "only {checked} formats checked");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Random chunkings of rendered outputs (with random noise appended) stream like the whole.
    #[test]
    fn random_chunkings_stream_like_the_whole(
        template_pick in 0usize..1000,
        case_pick in 0usize..1000,
        cuts in proptest::collection::vec(0usize..10_000, 0..12),
        noise in "[a-z<>/ \n{}\":,\\[\\]=|]{0,12}",
    ) {
        let Some(formats) = shared_formats() else { return Ok(()) };
        let (template, format, options) = &formats[template_pick % formats.len()];
        let cases = rendered_cases(template, format, options);
        prop_assume!(!cases.is_empty());
        let text = format!("{}{noise}", cases[case_pick % cases.len()].output);
        let chunks = split_at_chars(&text, &cuts);
        let chunks: Vec<&str> = chunks.iter().map(String::as_str).collect();
        let parser = Parser::new(format, &ParseOptions::default());
        assert_chunking_invariant(&parser, &text, &chunks, &format.template);
    }
}

fn shared_formats() -> Option<&'static Vec<(ChatTemplate, Format, AnalyzeOptions)>> {
    static FORMATS: std::sync::OnceLock<Option<Vec<(ChatTemplate, Format, AnalyzeOptions)>>> =
        std::sync::OnceLock::new();
    FORMATS
        .get_or_init(|| {
            let corpus = corpus::corpus()?;
            Some(corpus_formats(&corpus).into_iter().map(|(_, t, f, o)| (t, f, o)).collect())
        })
        .as_ref()
}

/// Replays the `parse` fuzz target's minimized findings (`fuzz/regressions/parse`)
/// with the target's decoding (byte 1 the chunk size, byte 2 the reasoning flags; the rest is the
/// output) under every Format of `fuzz/formats/`, not only the one byte 0 picks: the pick depends
/// on how many Formats the target had when the finding was made.
#[test]
fn parse_fuzz_inputs_replay() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut paths: Vec<_> = std::fs::read_dir(fuzz.join("formats")).unwrap().map(|e| e.unwrap().path()).collect();
    paths.sort();
    let formats: Vec<Format> =
        paths.iter().map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()).collect();
    assert!(formats.len() >= 15, "only {} fuzz formats", formats.len());
    let mut replayed = 0;
    for dir in ["regressions/parse"] {
        for entry in std::fs::read_dir(fuzz.join(dir)).unwrap() {
            let data = std::fs::read(entry.unwrap().path()).unwrap();
            if data.len() < 3 {
                continue;
            }
            let Ok(text) = std::str::from_utf8(&data[3..]) else { continue };
            // As the fuzz target sets them.
            let options = ParseOptions {
                in_reasoning: if data[2] & 4 == 4 { None } else { Some(data[2] & 1 == 1) },
                separate_reasoning: Some(data[2] & 2 == 0),
                tools: vec![json!({"type": "function", "function": {"name": "get_weather",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}})],
                ..ParseOptions::default()
            };
            let size = (data[1] % 17) as usize;
            let chunks: Vec<String> = match text.chars().count().checked_div(size) {
                None => vec![text.to_owned()],
                Some(n) => split_at_chars(text, &(1..=n).map(|k| k * size).collect::<Vec<_>>()),
            };
            let chunks: Vec<&str> = chunks.iter().map(String::as_str).collect();
            for format in &formats {
                assert_chunking_invariant(&Parser::new(format, &options), text, &chunks, dir);
            }
            replayed += 1;
        }
    }
    assert!(replayed >= 10, "replayed only {replayed} inputs");
}

// See: issue 25, class 1 (the generation prompt already opens the call syntax).
#[test]
fn output_after_a_prompt_that_opened_the_recipient_is_read_from_its_first_byte() {
    // functionary v3.2's prompt ends `>>>`: the model writes a recipient first.
    let id = "meetkai-functionary-medium-v3.2";
    let Some(got) = parse_under(id, "get_weather\n{\"city\": \"Paris\"}", json!(null)) else { return };
    assert_eq!(got["calls"], json!([["get_weather", {"city": "Paris"}]]), "{got}");
    assert_eq!(got["content"], json!(null), "{got}");
    let got = parse_under(id, "all\nIt is sunny.", json!(null)).unwrap();
    assert_eq!((&got["content"], &got["calls"]), (&json!("It is sunny."), &json!([])), "{got}");
    // Content, then a call; a call, then content (the content opener ends the calls).
    let got = parse_under(id, "all\nLet me look.>>>get_weather\n{\"city\": \"Paris\"}", json!(null)).unwrap();
    assert_eq!((&got["content"], got["calls"].as_array().unwrap().len()), (&json!("Let me look."), 1), "{got}");
    let got = parse_under(id, "get_weather\n{\"city\": \"Paris\"}>>>all\nDone.", json!(null)).unwrap();
    assert_eq!((&got["content"], got["calls"].as_array().unwrap().len()), (&json!("Done."), 1), "{got}");
    assert_eq!(got["issues"], json!([]), "{got}");
    // Spans are offsets in the output itself: the `>>>` the prompt holds is not among them.
    let corpus = corpus::corpus().unwrap();
    let (template, options) = crate::analyze::corpus_template(&corpus, id);
    let format = analyze(&template, &options).unwrap();
    assert_eq!(format.output_prefix, ">>>");
    let output = "all\nHi";
    let message = Parser::new(&format, &ParseOptions::default()).parse(output);
    assert_eq!(message.spans.first().map(|s| s.start), Some(0));
    assert_eq!(message.spans.last().map(|s| s.end), Some(output.len()));
    // A prompt that does not end with the prefix (a caller's own) reads the output as written.
    let options = ParseOptions {
        generation_prompt: Some("<|start_header_id|>assistant<|end_header_id|>\n\n".into()),
        ..ParseOptions::default()
    };
    let message = Parser::new(&format, &options).parse(">>>get_weather\n{}");
    assert_eq!(message.tool_calls.len(), 1, "{message:?}");
}

// See: issue 25, class 2 (reasoning known only from how history is treated).
#[test]
fn implicit_reasoning_starts_the_output_with_or_without_its_opener() {
    // LFM2.5-Instruct cuts `</think>` out of past turns and its prompt opens nothing.
    let id = "LFM2.5-Instruct";
    let Some(got) = parse_under(id, "Let me think.</think>The answer.", json!(null)) else { return };
    assert_eq!((&got["reasoning"], &got["content"]), (&json!("Let me think."), &json!("The answer.")), "{got}");
    let got = parse_under(id, "<think>\nLet me think.\n</think>\n\nThe answer.", json!(null)).unwrap();
    assert_eq!((&got["reasoning"], &got["content"]), (&json!("Let me think."), &json!("The answer.")), "{got}");
    // A caller whose model does not reason says so.
    let options = ParseOptions { in_reasoning: Some(false), ..ParseOptions::default() };
    let got = parse_with(id, "The answer.", options).unwrap();
    assert_eq!((&got["reasoning"], &got["content"]), (&json!(null), &json!("The answer.")), "{got}");
}

// See: issue 25 (outside set). A turn with content and calls written as two messages: the second
// message's header is a marker, whole or streamed at any split.
#[test]
fn a_message_header_between_content_and_calls_is_a_marker() {
    let cases = [
        (
            "more",
            "functionary-v2",
            "all\n<|content|>Let me check.\n<|from|>assistant\n<|recipient|>get_weather\n<|content|>{\"city\": \"Paris\"}",
        ),
        (
            "serving",
            "vllm-hyperclovax-seed-think-14b",
            "Let me check.<|im_end|>\n<|im_start|>assistant -> tool/function_call\n[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]",
        ),
    ];
    for (folder, id, output) in cases {
        let (dir, entry) = crate::outside::outside_entries()
            .into_iter()
            .find(|(dir, entry)| dir.ends_with(folder) && entry["id"] == id)
            .unwrap();
        let (template, options) = crate::outside::outside_template(&dir, &entry);
        let format = analyze(&template, &options).unwrap();
        let parser = Parser::new(&format, &ParseOptions::default());
        let message = parser.parse(output);
        assert_eq!(message.content.as_deref(), Some("Let me check."), "{id}: {message:?}");
        assert_eq!(message.tool_calls.len(), 1, "{id}: {message:?}");
        assert!(message.issues.is_empty(), "{id}: {message:?}");
        for (at, _) in output.char_indices().skip(1) {
            assert_chunking_invariant(&parser, output, &[&output[..at], &output[at..]], id);
        }
    }
}

#[test]
fn tool_choice_reads_openai_shapes_and_the_parser_reports_calls_it_does_not_allow() {
    use parlance::parse::ToolChoice;
    assert_eq!(ToolChoice::from_openai(&json!("required")), Ok(ToolChoice::Required));
    assert_eq!(
        ToolChoice::from_openai(&json!({"type": "function", "function": {"name": "f"}})),
        Ok(ToolChoice::Function("f".into()))
    );
    let chat = json!({"type": "allowed_tools", "allowed_tools": {"mode": "required",
        "tools": [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "g"}}]}});
    let responses = json!({"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "f"}, {"type": "function", "name": "g"}]});
    let both = ToolChoice::AllowedTools { names: vec!["f".into(), "g".into()], required: true };
    assert_eq!(ToolChoice::from_openai(&chat), Ok(both.clone()));
    assert_eq!(ToolChoice::from_openai(&responses), Ok(both));
    let bad = json!({"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": [{"type": "function", "function": {}}]}});
    let error = ToolChoice::from_openai(&bad).unwrap_err();
    assert!(error.contains("tool_choice/allowed_tools/tools/0"), "{error}");
    assert!(ToolChoice::from_openai(&json!("sometimes")).unwrap_err().contains("sometimes"));

    let Some(corpus) = crate::corpus::corpus() else { return };
    let (template, options) = crate::analyze::corpus_template(&corpus, "Qwen-Qwen3-0.6B");
    let format = parlance::analyze(&template, &options).unwrap();
    let tool = |name: &str| json!({"type": "function", "function": {"name": name, "parameters": {"type": "object"}}});
    let call = |name: &str| format!("<tool_call>\n{{\"name\": \"{name}\", \"arguments\": {{}}}}\n</tool_call>");
    let request = |choice: ToolChoice| parlance::ParseOptions {
        tools: vec![tool("f"), tool("g")],
        tool_choice: choice,
        ..Default::default()
    };
    let kinds = |choice: ToolChoice, text: &str| -> Vec<&'static str> {
        parlance::Parser::new(&format, &request(choice)).parse(text).issues.iter().map(|i| i.kind.as_str()).collect()
    };
    let only_g = ToolChoice::AllowedTools { names: vec!["g".into()], required: true };
    assert_eq!(kinds(only_g.clone(), &call("g")), Vec::<&str>::new());
    assert_eq!(kinds(only_g.clone(), &call("f")), vec!["disallowed-tool"]);
    assert_eq!(kinds(only_g, "no call"), vec!["missing-call"]);
    assert_eq!(kinds(ToolChoice::Function("g".into()), &call("f")), vec!["disallowed-tool", "missing-call"]);
    assert_eq!(kinds(ToolChoice::Auto, &call("h")), vec!["unknown-tool"]);
}

#[test]
fn a_call_inside_unclosed_reasoning_ends_it_and_is_reported() {
    let Some(corpus) = crate::corpus::corpus() else { return };
    let (template, options) = crate::analyze::corpus_template(&corpus, "Qwen-Qwen3-0.6B");
    let format = parlance::analyze(&template, &options).unwrap();
    let tools = vec![json!({"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}})];
    let request = parlance::ParseOptions { tools, ..Default::default() };
    let text = "<think>\nI should call f.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
    let message = parlance::Parser::new(&format, &request).parse(text);
    assert_eq!(message.reasoning_content.as_deref(), Some("I should call f."));
    assert_eq!(message.tool_calls.len(), 1);
    assert_eq!(message.issues.iter().map(|i| i.kind).collect::<Vec<_>>(), [parlance::IssueKind::UnclosedReasoning]);
    assert_eq!(serde_json::to_value(&message.issues[0]).unwrap()["kind"], "unclosed-reasoning");
}

/// Solar Open writes each call's id before its name (`<|tool_call:begin|>ID<|tool_call:name|>`):
/// the ids are the model's, read whole and across every two-way split; a stray opener without a
/// name prefix after it is content.
#[test]
fn call_ids_written_before_the_name_are_the_calls_ids() {
    let Some(corpus) = corpus::corpus() else { return };
    let (template, options) = crate::analyze::corpus_template(&corpus, "upstage-Solar-Open-100B");
    let format = analyze(&template, &options).unwrap();
    let parser = Parser::new(&format, &ParseOptions::default());
    let output = "<|think|>hmm<|end|><|begin|>assistant<|tool_calls|><|tool_call:begin|>abc123<|tool_call:name|>\
                  get_weather<|tool_call:args|>{\"city\": \"Paris\"}<|tool_call:end|><|tool_call:begin|>xyz_9\
                  <|tool_call:name|>get_time<|tool_call:args|>{}<|tool_call:end|><|calls|>";
    for (at, _) in output.char_indices().skip(1) {
        assert_chunking_invariant(&parser, output, &[&output[..at], &output[at..]], "solar");
    }
    let message = parser.parse(output);
    let calls: Vec<(&str, &str, bool)> =
        message.tool_calls.iter().map(|c| (c.id.as_str(), c.name.as_str(), c.id_generated)).collect();
    assert_eq!(calls, [("abc123", "get_weather", false), ("xyz_9", "get_time", false)]);
    assert_eq!(message.reasoning_content.as_deref(), Some("hmm"));
    assert!(message.issues.is_empty(), "{:?}", message.issues);
    let stray = "<|begin|>assistant<|content|>See <|tool_call:begin|> here<|end|>";
    let message = parser.parse(stray);
    assert!(message.tool_calls.is_empty());
    assert!(
        message.content.as_deref().is_some_and(|c| c.contains("<|tool_call:begin|> here")),
        "{:?}",
        message.content
    );
}
