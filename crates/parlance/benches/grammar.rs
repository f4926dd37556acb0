//! Grammar-engine speed on real JSON Schemas with the Llama 3.1 vocabulary (W1 workload of
//! `shared/bench/workloads`), beside `parlance bench grammar`, which measures the whole workload as
//! the peers' runner does.
//!
//! `grammar/ttfm_w1_sample`: time to first mask (compile + matcher + first mask) of 20 W1 schemas
//! (without `$ref`, compiling in under 5 ms: the body of the distribution) in turn, each time with
//! its property names renamed so that no cache from an earlier iteration answers for the schema
//! itself (the process-wide caches of shared rules stay warm, as in a server). `grammar/fill_inside_string` and `grammar/fill_after_key`: filling a mask at a state
//! whose entry is cached, the steady state of decoding.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use criterion::{BatchSize, Criterion};
#[path = "support/corpus.rs"]
mod support;
use support::corpus;

use parlance_grammar::{CompiledGrammar, JsonSchemaOptions, Matcher};
use serde_json::Value;

/// Appends `_{round}` to every property name (and its `required` entry).
fn rename(v: &mut Value, round: usize) {
    match v {
        Value::Object(m) => {
            if let Some(Value::Object(props)) = m.get_mut("properties") {
                for (k, mut x) in std::mem::take(props) {
                    rename(&mut x, round);
                    props.insert(format!("{k}_{round}"), x);
                }
            }
            if let Some(Value::Array(req)) = m.get_mut("required") {
                for x in req.iter_mut() {
                    if let Value::String(s) = x {
                        *s = format!("{s}_{round}");
                    }
                }
            }
            for (k, x) in m.iter_mut() {
                if k != "properties" && k != "required" {
                    rename(x, round);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| rename(x, round)),
        _ => {}
    }
}

fn tokenizers() -> PathBuf {
    std::env::var_os("PARLANCE_TOKENIZERS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/tokenizers"))
}

fn benches(c: &mut Criterion) {
    let Some(corpus) = corpus() else { return };
    let workload = corpus.join("../bench/workloads/w1_maskbench_subset.jsonl");
    let Ok(text) = std::fs::read_to_string(&workload) else {
        eprintln!("skipping: no workload at {}", workload.display());
        return;
    };
    let Ok(tokenizer) = parlance::Tokenizer::from_path(tokenizers().join("llama3_1")) else {
        eprintln!("skipping: no llama3_1 tokenizer under {}", tokenizers().display());
        return;
    };
    let eos = tokenizer.eos_token_id().expect("llama3_1 names its EOS");
    let vocab = Arc::new(tokenizer.token_vocab(&[eos]).expect("vocab"));
    let options = JsonSchemaOptions::default();
    let schemas: Vec<Value> = text
        .lines()
        .step_by(30)
        .map(|l| serde_json::from_str::<Value>(l).expect("workload line")["schema"].clone())
        // Renaming properties would break references into them.
        .filter(|s| !s.to_string().contains("$ref"))
        // The body of the distribution (the tail is `parlance bench grammar`'s): schemas that
        // compile, and in under 5 ms.
        .filter(|s| {
            let started = std::time::Instant::now();
            CompiledGrammar::from_json_schema(vocab.clone(), s, &options).is_ok()
                && started.elapsed() < std::time::Duration::from_millis(5)
        })
        .take(20)
        .collect();
    assert!(schemas.len() >= 10, "enough W1 schemas compile");
    let mut mask = vec![0u32; vocab.mask_words()];

    let mut group = c.benchmark_group("grammar");
    let mut round = 0usize;
    group.bench_function("ttfm_w1_sample", |b| {
        b.iter_batched(
            || {
                round += 1;
                let mut s = schemas[round % schemas.len()].clone();
                rename(&mut s, round);
                s
            },
            |s| {
                let (g, _) = CompiledGrammar::from_json_schema(vocab.clone(), &s, &options).expect("compiles");
                let mut m = Matcher::new(Arc::new(g)).expect("matcher");
                m.fill_next_token_bitmask(&mut mask).expect("mask");
            },
            BatchSize::SmallInput,
        )
    });
    let schema = serde_json::json!({"type": "object", "properties": {
        "name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name", "age"]});
    let g = Arc::new(CompiledGrammar::from_json_schema(vocab.clone(), &schema, &options).expect("compiles").0);
    for (name, prefix) in
        [("fill_inside_string", "{\"name\": \"Ada Love"), ("fill_after_key", "{\"name\": \"Ada\", \"age\"")]
    {
        let mut m = Matcher::new(g.clone()).expect("matcher");
        assert!(m.accept_bytes(prefix.as_bytes()), "{prefix}");
        m.fill_next_token_bitmask(&mut mask).expect("mask");
        group.bench_function(name, |b| b.iter(|| m.fill_next_token_bitmask(black_box(&mut mask)).expect("mask")));
    }
    group.finish();
}

// What `criterion_group!` + `criterion_main!` expand to, written out: the macro's `pub fn` would
// trip the workspace's `missing_docs` lint.
fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    benches(&mut criterion);
    criterion.final_summary();
}
