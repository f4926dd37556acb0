// Temporary profiling harness (not committed): 128 tools, one new per request.
use parlance_grammar::{GrammarCompiler, Matcher, StructuralTagOptions};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Instant;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let reps: usize = args[1].parse()?;
    let ntools: usize = args.get(2).map(|s| s.parse().unwrap()).unwrap_or(128);
    let w3env = std::env::var("W3").is_ok();
    let tok = parlance::Tokenizer::from_path(std::path::Path::new(if w3env {
        "/work/shared/tokenizers/gptoss"
    } else {
        "/work/shared/tokenizers/llama3_1"
    }))?;
    let eos = if w3env { tok.token_to_id("<|endoftext|>").unwrap() } else { tok.eos_token_id().unwrap() };
    let vocab = Arc::new(tok.token_vocab(&[eos])?);
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string("/work/shared/bench/workloads/w2_toolcall_llama.json")?)?;
    let base = doc["tools"].as_array().unwrap();
    let w3 = std::env::var("W3").is_ok();
    let token = |t: &str| format!(r#"{{"type":"token","token":{}}}"#, json!(t));
    let text = |t: &str| format!(r#"{{"type":"const_string","value":{}}}"#, json!(t));
    let seq = |parts: Vec<String>| format!(r#"{{"type":"sequence","elements":[{}]}}"#, parts.join(","));
    let message = |channel: &str, body: String, end: &str| {
        format!(
            r#"{{"type":"tag","begin":{},"content":{},"end":{}}}"#,
            token("<|channel|>"),
            seq(vec![text(channel), body]),
            token(end)
        )
    };
    let tag = |name: &str, params: &Value| {
        if w3 {
            let header = format!("commentary to=functions.{} ", name);
            let body = seq(vec![
                token("<|constrain|>"),
                text("json"),
                token("<|message|>"),
                format!(r#"{{"type":"json_schema","json_schema":{}}}"#, params),
            ]);
            return message(&header, body, "<|call|>");
        }
        format!(
            r#"{{"type":"tag","begin":{},"content":{{"type":"json_schema","json_schema":{}}},"end":"}}"}}"#,
            json!(format!("{{\"name\": \"{name}\", \"parameters\": ")),
            params
        )
    };
    let mut tags: Vec<String> = (0..ntools - 1)
        .map(|i| {
            let t = &base[i % base.len()];
            tag(&format!("{}_{}", t["function"]["name"].as_str().unwrap(), i), &t["function"]["parameters"])
        })
        .collect();
    let st = |tags: &[String]| {
        if w3 {
            let any = r#"{"type":"any_text"}"#;
            let mut messages = vec![
                message("analysis", seq(vec![token("<|message|>"), any.to_owned()]), "<|end|>"),
                message("final", seq(vec![token("<|message|>"), any.to_owned()]), "<|return|>"),
            ];
            messages.extend(tags.iter().cloned());
            let one = format!(r#"{{"type":"or","elements":[{}]}}"#, messages.join(","));
            let next = seq(vec![token("<|start|>"), text("assistant"), one.clone()]);
            return format!(
                r#"{{"type":"structural_tag","format":{}}}"#,
                seq(vec![one, format!(r#"{{"type":"star","content":{next}}}"#)])
            );
        }
        format!(
            r#"{{"type":"structural_tag","format":{{"type":"triggered_tags","triggers":["{{\"name\": "],"tags":[{}]}}}}"#,
            tags.join(",")
        )
    };
    let compiler = GrammarCompiler::new(vocab.clone());
    let mut mask = vec![0u32; vocab.mask_words()];
    let mut opts = StructuralTagOptions::default();
    for (t, id) in vocab.special_tokens() {
        opts.special_tokens.insert(t.to_owned(), id);
    }
    let g = compiler.compile_structural_tag(&st(&tags), &opts)?;
    Matcher::new(g)?.fill_next_token_bitmask(&mut mask)?;
    tags.push(String::new());
    let mut times = Vec::new();
    for r in 0..reps {
        let mut p = base[r % base.len()]["function"]["parameters"].clone();
        p["properties"][format!("extra_{r}")] = json!({"type": "string"});
        *tags.last_mut().unwrap() = tag(&format!("fresh_{r}"), &p);
        let doc = st(&tags);
        if std::env::var("PHASES").is_ok() {
            let t0 = Instant::now();
            let v: Value = serde_json::from_str(&doc)?;
            let t1 = Instant::now();
            let gr = parlance_grammar::structural_tag_to_grammar(&v, &opts)?;
            let t2 = Instant::now();
            let rules = gr.rules().len();
            drop(gr);
            let t3 = Instant::now();
            if r % 20 == 0 {
                eprintln!(
                    "parse {:?} lower {:?} drop {:?} rules {rules} bytes {}",
                    t1 - t0,
                    t2 - t1,
                    t3 - t2,
                    doc.len()
                );
            }
        }
        let s = Instant::now();
        let g = compiler.compile_structural_tag(&doc, &opts)?;
        let c = s.elapsed();
        Matcher::new(g)?.fill_next_token_bitmask(&mut mask)?;
        times.push((s.elapsed().as_secs_f64() * 1e6, c.as_secs_f64() * 1e6));
    }
    times.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
    let n = times.len();
    println!(
        "one-new {ntools} tools: p50 ttfm {:.0} us (compile {:.0}) p90 {:.0}",
        times[n / 2].0,
        times[n / 2].1,
        times[n * 9 / 10].0
    );
    Ok(())
}
