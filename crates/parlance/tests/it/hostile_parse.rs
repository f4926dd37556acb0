//! Hostile model output (`parlance::parse::hostile`: each Format's own markers repeated, cut
//! short, opened and never closed, nested) parses in time linear in its length, whole and
//! streamed, and streaming gives the whole parse.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use parlance::parse::hostile::hostile_outputs;
use parlance::{ParseOptions, Parser};

use crate::corpus;
use crate::parse::{assert_chunking_invariant, corpus_formats};

fn options() -> ParseOptions {
    let tools = vec![serde_json::json!({"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"a": {"type": "array"}, "item": {"type": "string"}}}}})];
    ParseOptions { tools, ..ParseOptions::default() }
}

/// `text` in chunks of `size` bytes (at character boundaries).
fn chunks(text: &str, size: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < text.len() {
        let mut end = (at + size).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        out.push(&text[at..end]);
        at = end;
    }
    out
}

/// The fastest of three runs: whole parse plus a stream in 64-byte chunks.
fn cost(parser: &Parser, text: &str) -> Duration {
    let pieces = chunks(text, 64);
    (0..3)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(parser.parse(text));
            let mut stream = parser.stream();
            for piece in &pieces {
                std::hint::black_box(stream.push(piece));
            }
            std::hint::black_box(stream.finish());
            start.elapsed()
        })
        .min()
        .unwrap_or_default()
}

/// Every generator of every corpus Format (each distinct text once): eight times the output costs
/// at most thirty-two times the time (a parse that rescans the rest of the output per marker costs
/// sixty-four; the margin is for a loaded machine), and small outputs stream as they parse whole.
#[test]
fn hostile_outputs_parse_in_linear_time() {
    let Some(corpus) = corpus::corpus() else { return };
    let (mut seen, mut checked, mut slow) = (HashSet::new(), 0, Vec::new());
    for (id, _, format, _) in corpus_formats(&corpus) {
        let parser = Parser::new(&format, &options());
        for generator in hostile_outputs(&format) {
            if !seen.insert((generator.prefix.clone(), generator.unit.clone(), generator.closer.clone())) {
                continue;
            }
            checked += 1;
            let small = generator.text(600);
            assert_chunking_invariant(&parser, &small, &chunks(&small, 7), &format!("{id}, {}", generator.name));
            let (short, long) = (generator.text(16_000), generator.text(128_000));
            let (t_short, t_long) = (cost(&parser, &short), cost(&parser, &long));
            // A floor for the short run: below it, timer and cache noise decide the ratio.
            let ratio = t_long.as_secs_f64() / t_short.as_secs_f64().max(0.002);
            if ratio > 32.0 {
                slow.push(format!("{id}, {}: {t_short:?} for 16 KB, {t_long:?} for 128 KB", generator.name));
            }
        }
    }
    eprintln!("{checked} hostile generators checked");
    assert!(checked >= 100, "only {checked} generators");
    assert!(slow.is_empty(), "superlinear parsing:\n{}", slow.join("\n"));
}

/// The inputs the linear-parsing issue names, at sizes that took seconds when each marker
/// rescanned the rest of the output: each now parses, whole and streamed, well within a second
/// even in a debug build.
#[test]
fn stray_markers_by_the_ten_thousand_parse_quickly() {
    let Some(corpus) = corpus::corpus() else { return };
    let cases = [
        ("Qwen-Qwen3-0.6B", "</think> x ".repeat(40_000)),
        ("Qwen-Qwen3-0.6B", "</think> <tool_call> ".repeat(20_000)),
        ("Qwen-Qwen3-0.6B", "<tool_call>\n{\"name\": \"f\", ".repeat(20_000)),
        ("moonshotai-Kimi-K2", "<|tool_calls_section_begin|> x ".repeat(20_000)),
    ];
    for (id, text) in cases {
        let (template, options) = crate::analyze::corpus_template(&corpus, id);
        let format = parlance::analyze(&template, &options).expect("corpus template analyzes");
        let parser = Parser::new(&format, &self::options());
        let took = cost(&parser, &text);
        assert!(took < Duration::from_secs(3), "{id}: {} bytes took {took:?}", text.len());
    }
}
