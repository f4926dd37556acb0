//! Fuzz target: parse arbitrary model output under the Formats in `fuzz/formats/` (analyzer
//! output for fifteen corpus templates — one per tool-call family, plus code-fenced JSON calls, a
//! prompt that writes reasoning text, a prompt that opens the call syntax (`output_prefix`) and
//! implicit reasoning — and three outside templates: calls that follow content as a second
//! message, and arguments that may be Python literals), whole and streamed.
//!
//! Input: byte 0 picks the Format, byte 1 the chunk size (1–16 bytes, 0 for one chunk), byte 2
//! flags (bit 0: prompt ended inside reasoning; bit 1: reasoning not separated; bit 2: the Format
//! decides whether the prompt ended inside reasoning, bit 0 ignored; bit 3: the output starts
//! with one of the Format's hostile outputs, `parlance::parse::hostile`), the rest is the
//! output (UTF-8, else ignored). Checked: no panic; spans cover every byte in order; streaming
//! gives the whole parse; the deltas add up to it.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use parlance::{Delta, Format, ParseOptions, Parser};

const FORMATS: [&str; 19] = [
    include_str!("../formats/Qwen-Qwen3-0.6B.json"),
    include_str!("../formats/Qwen3-Coder.json"),
    include_str!("../formats/deepseek-ai-DeepSeek-V3.1.json"),
    include_str!("../formats/Mistral-Small-3.2-24B-Instruct-2506.json"),
    include_str!("../formats/LFM2.5-8B-A1B.json"),
    include_str!("../formats/moonshotai-Kimi-K2.json"),
    include_str!("../formats/GLM-4.6.json"),
    include_str!("../formats/MiniMax-M2.json"),
    include_str!("../formats/google-gemma-4-31B-it.json"),
    include_str!("../formats/meta-llama-Llama-3.1-8B-Instruct.json"),
    include_str!("../formats/openai-gpt-oss-120b.json"),
    include_str!("../formats/lenml-deepseek_v3.json"),
    include_str!("../formats/Apriel-1.6-15b-Thinker-fixed.json"),
    include_str!("../formats/meetkai-functionary-medium-v3.2.json"),
    include_str!("../formats/LFM2.5-Instruct.json"),
    include_str!("../formats/vllm-hyperclovax-seed-think-14b.json"),
    include_str!("../formats/llama-cpp-ochafik-apriel-1.5-15b-thinker.json"),
    include_str!("../formats/ovms-gpt-oss.json"),
    include_str!("../formats/axolotl-llama4.json"),
];

fn formats() -> &'static Vec<Format> {
    static PARSED: OnceLock<Vec<Format>> = OnceLock::new();
    PARSED.get_or_init(|| FORMATS.iter().map(|f| serde_json::from_str(f).expect("format JSON")).collect())
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let format = &formats()[data[0] as usize % FORMATS.len()];
    let Ok(rest) = std::str::from_utf8(&data[3..]) else { return };
    // Bit 3: a hostile output of the Format (its markers repeated, cut short, nested) before the
    // rest; the rest's first char picks the generator, its second the size in KiB (up to 64).
    let hostile: String;
    let text = if data[2] & 8 == 8 {
        let mut chars = rest.chars();
        let (Some(pick), Some(size)) = (chars.next(), chars.next()) else { return };
        let generators = parlance::parse::hostile::hostile_outputs(format);
        let Some(generator) = generators.get(pick as usize % generators.len().max(1)) else { return };
        hostile = generator.text((size as usize % 64 + 1) * 1024) + chars.as_str();
        hostile.as_str()
    } else {
        rest
    };
    let options = ParseOptions {
        in_reasoning: if data[2] & 4 == 4 { None } else { Some(data[2] & 1 == 1) },
        separate_reasoning: Some(data[2] & 2 == 0),
        tools: vec![serde_json::json!({"type": "function", "function": {"name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}})],
        id_seed: Some(0),
        ..ParseOptions::default()
    };
    let parser = Parser::new(format, &options);
    let whole = parser.parse(text);
    let mut at = 0;
    for span in &whole.spans {
        assert_eq!(span.start, at, "spans leave a gap");
        at = span.end;
    }
    assert_eq!(at, text.len(), "spans stop short of the end");

    let size = (data[1] % 17) as usize;
    let mut stream = parser.stream();
    let mut deltas = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut cut = if size == 0 { rest.len() } else { size.min(rest.len()) };
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        deltas.extend(stream.push(&rest[..cut]));
        rest = &rest[cut..];
    }
    deltas.extend(stream.finish());
    let streamed = stream.message();
    assert_eq!(streamed.content, whole.content, "streamed content");
    assert_eq!(streamed.reasoning_content, whole.reasoning_content, "streamed reasoning");
    assert_eq!(streamed.tool_calls, whole.tool_calls, "streamed calls");
    assert_eq!(streamed.issues, whole.issues, "streamed issues");
    assert_eq!(streamed.spans, whole.spans, "streamed spans");
    assert_eq!(streamed, whole, "streaming differs from the whole parse");
    let (mut reasoning, mut content, mut calls) = (String::new(), String::new(), Vec::<String>::new());
    for delta in deltas {
        match delta {
            Delta::Reasoning { reasoning_content } => reasoning.push_str(&reasoning_content),
            Delta::Content { content: c } => content.push_str(&c),
            Delta::ToolCallStart { .. } => calls.push(String::new()),
            Delta::ToolCallArguments { index, arguments } => calls[index].push_str(&arguments),
        }
    }
    assert_eq!(reasoning, whole.reasoning_content.unwrap_or_default());
    assert_eq!(content, whole.content.unwrap_or_default());
    assert_eq!(calls, whole.tool_calls.iter().map(|c| c.arguments.clone()).collect::<Vec<_>>());
});
