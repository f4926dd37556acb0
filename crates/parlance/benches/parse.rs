//! Output-parser speed: a 4 KB Qwen3 output (reasoning, content, two tool calls), parsed whole and
//! streamed one token-sized chunk at a time.
//!
//! `parse/whole_4kb_two_calls` reports bytes per second (`Throughput::Bytes`); the bar is
//! 200 MB/s. `parse/stream_4kb_per_chunk` streams the same text in 4-byte chunks (about a token
//! each) and reports the time per chunk (`Throughput::Elements`); the bar is 1 µs.
//! The Format comes from analyzing the corpus's `templates/Qwen-Qwen3-0.6B.jinja`.

use std::hint::black_box;

use criterion::{Criterion, Throughput};
#[path = "support/corpus.rs"]
mod support;
use support::corpus;

use parlance::{ChatTemplate, Format, ParseOptions, Parser};

/// Reasoning, content and two calls, about 4 KB, as Qwen3 writes them.
fn output() -> String {
    let reasoning = "The user wants the weather in two cities, so I will call the tool twice and compare. ".repeat(12);
    let content =
        "Here is what I found so far; let me check the forecast for both places before answering. ".repeat(24);
    let call = |city: &str| {
        format!(
            "<tool_call>\n{{\"name\": \"get_weather\", \"arguments\": {{\"city\": \"{city}\", \"unit\": \"celsius\", \"days\": 3}}}}\n</tool_call>"
        )
    };
    format!("<think>\n{reasoning}\n</think>\n\n{content}\n{}\n{}", call("Paris"), call("Tokyo"))
}

fn benches(c: &mut Criterion) {
    let Some(corpus) = corpus() else { return };
    let template = ChatTemplate::from_path(corpus.join("templates/Qwen-Qwen3-0.6B.jinja")).expect("template");
    let format = Format::from_template(&template, &Default::default()).expect("Qwen3 analyzes");
    let tools = vec![serde_json::json!({"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}, "days": {"type": "integer"}}}}})];
    let parser = Parser::new(&format, &ParseOptions { tools, ..ParseOptions::default() });
    let text = output();
    let parsed = parser.parse(&text);
    assert_eq!(parsed.tool_calls.len(), 2, "the bench output parses to two calls");
    assert!(parsed.reasoning_content.is_some() && parsed.content.is_some());

    let mut group = c.benchmark_group("parse");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("whole_4kb_two_calls", |b| b.iter(|| parser.parse(black_box(&text))));
    let chunks: Vec<&str> = text.as_bytes().chunks(4).map(|c| std::str::from_utf8(c).expect("ASCII text")).collect();
    group.throughput(Throughput::Elements(chunks.len() as u64));
    group.bench_function("stream_4kb_per_chunk", |b| {
        b.iter(|| {
            let mut stream = parser.stream();
            let mut n = 0;
            for chunk in &chunks {
                n += stream.push(black_box(chunk)).len();
            }
            n + stream.finish().len()
        })
    });
    group.finish();
}

// What `criterion_group!` + `criterion_main!` expand to, written out: the macro's `pub fn` would
// trip the workspace's `missing_docs` lint.
fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    benches(&mut criterion);
    criterion.final_summary();
}
