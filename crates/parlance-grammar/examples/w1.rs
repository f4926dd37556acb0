//! Runs the W1 workload (MaskBench JSON Schemas) the way `shared/bench/peers/run_peers.py` does:
//! single thread; TTFM = compile + matcher creation + first mask; TBM per forced token = fill mask +
//! test the token's bit + advance, plus one final fill checking EOS; pass / compile error / invalid
//! accepted counts. Prints the summary and writes a JSON result (`--out`) in the runner's shape.
//!
//! ```text
//! cargo run --release -p parlance-grammar --example w1 -- \
//!     [--workload W1.jsonl] [--tokenizer tokenizer.json] [--out r.json] [--limit N] [--stride K] \
//!     [--compact] [--lenient]
//! ```
//!
//! Tokenization: a small byte-level BPE (Llama 3 pre-tokenizer regex, `ignore_merges`), enough for
//! the compact JSON texts of W1; the `parlance` crate uses the `tokenizers` crate instead.

use parlance_grammar::{CompiledGrammar, JsonSchemaOptions, Matcher, TokenVocab, Whitespace};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

struct Bpe {
    vocab: HashMap<Vec<u8>, u32>,
    ranks: HashMap<(Vec<u8>, Vec<u8>), usize>,
    split: regex::Regex,
}

fn byte_decoder() -> HashMap<char, u8> {
    let mut bs: Vec<u32> = (b'!' as u32..=b'~' as u32).chain(0xA1..=0xAC).chain(0xAE..=0xFF).collect();
    let mut cs = bs.clone();
    let mut n = 0;
    for b in 0..256u32 {
        if !bs.contains(&b) {
            bs.push(b);
            cs.push(256 + n);
            n += 1;
        }
    }
    bs.iter().zip(&cs).map(|(&b, &c)| (char::from_u32(c).expect("valid"), b as u8)).collect()
}

impl Bpe {
    fn pieces(&self, text: &str) -> Vec<String> {
        // `\s+(?!\S)` has no equivalent in `regex`: a whitespace run followed by a non-space gives its
        // last character to the next piece.
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < text.len() {
            let Some(m) = self.split.find_at(text, pos) else { break };
            let mut end = m.end();
            let s = m.as_str();
            if s.chars().all(char::is_whitespace)
                && !s.ends_with(['\r', '\n'])
                && s.chars().count() > 1
                && text[end..].chars().next().is_some_and(|c| !c.is_whitespace())
            {
                end -= s.chars().last().map_or(0, char::len_utf8);
            }
            out.push(text[m.start()..end].to_string());
            pos = end;
        }
        out
    }

    fn encode(&self, text: &str) -> Vec<u32> {
        let mut ids = Vec::new();
        for piece in self.pieces(text) {
            let bytes = piece.as_bytes();
            if let Some(&id) = self.vocab.get(bytes) {
                ids.push(id);
                continue;
            }
            let mut parts: Vec<Vec<u8>> = bytes.iter().map(|&b| vec![b]).collect();
            loop {
                let best = (0..parts.len().saturating_sub(1))
                    .filter_map(|i| self.ranks.get(&(parts[i].clone(), parts[i + 1].clone())).map(|&r| (r, i)))
                    .min();
                let Some((_, i)) = best else { break };
                let merged = [parts[i].clone(), parts[i + 1].clone()].concat();
                parts[i] = merged;
                parts.remove(i + 1);
            }
            for p in parts {
                ids.push(*self.vocab.get(&p).unwrap_or(&0));
            }
        }
        ids
    }
}

fn load_tokenizer(path: &str, eos: &str) -> (Arc<TokenVocab>, Bpe, u32) {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("read tokenizer")).expect("json");
    let dec = byte_decoder();
    let to_bytes = |s: &str| -> Vec<u8> { s.chars().map(|c| dec.get(&c).copied().unwrap_or(b'?')).collect() };
    let mut toks: Vec<Vec<u8>> = Vec::new();
    let mut vocab = HashMap::new();
    for (s, id) in v["model"]["vocab"].as_object().expect("vocab") {
        let id = id.as_u64().expect("id") as usize;
        if toks.len() <= id {
            toks.resize(id + 1, Vec::new());
        }
        toks[id] = to_bytes(s);
        vocab.insert(toks[id].clone(), id as u32);
    }
    let mut ranks = HashMap::new();
    for (r, m) in v["model"]["merges"].as_array().expect("merges").iter().enumerate() {
        let (a, b) = match m {
            Value::String(s) => {
                let (a, b) = s.split_once(' ').expect("pair");
                (a.to_string(), b.to_string())
            }
            Value::Array(p) => (p[0].as_str().expect("a").to_string(), p[1].as_str().expect("b").to_string()),
            _ => panic!("bad merge"),
        };
        ranks.insert((to_bytes(&a), to_bytes(&b)), r);
    }
    let mut special = Vec::new();
    let mut eos_id = None;
    for t in v["added_tokens"].as_array().expect("added") {
        let id = t["id"].as_u64().expect("id") as usize;
        if toks.len() <= id {
            toks.resize(id + 1, Vec::new());
        }
        let c = t["content"].as_str().expect("content");
        toks[id] = c.as_bytes().to_vec();
        special.push(id as u32);
        if c == eos {
            eos_id = Some(id as u32);
        }
    }
    let eos_id = eos_id.expect("eos token in added_tokens");
    let split = regex::Regex::new(
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+",
    )
    .expect("regex");
    let tv = TokenVocab::new(toks, &special, &[eos_id]).expect("vocab");
    (Arc::new(tv), Bpe { vocab, ranks, split }, eos_id)
}

fn pct(xs: &[f64], p: f64) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let k = ((p / 100.0 * (xs.len() - 1) as f64).round() as usize).min(xs.len() - 1);
    xs[k]
}

fn stats(xs: &mut [f64]) -> Value {
    xs.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    if xs.is_empty() {
        return json!({"n": 0});
    }
    let avg = xs.iter().sum::<f64>() / xs.len() as f64;
    json!({"n": xs.len(), "avg": (avg * 100.0).round() / 100.0, "p25": pct(xs, 25.0), "p50": pct(xs, 50.0),
           "p75": pct(xs, 75.0), "p90": pct(xs, 90.0), "p95": pct(xs, 95.0), "p99": pct(xs, 99.0),
           "p99.9": pct(xs, 99.9), "max": xs[xs.len() - 1]})
}

fn us(d: std::time::Duration) -> f64 {
    (d.as_nanos() as f64 / 10.0).round() / 100.0
}

/// Forces `tokens`; returns (all allowed and EOS allowed, failure, step times, mask times).
fn force(
    m: &mut Matcher,
    tokens: &[u32],
    eos: u32,
    mask: &mut [u32],
    timed: bool,
) -> (bool, Value, Vec<f64>, Vec<f64>) {
    let (mut steps, mut masks) = (Vec::new(), Vec::new());
    let bit = |mask: &[u32], t: u32| mask[t as usize / 32] >> (t % 32) & 1 == 1;
    for (i, &t) in tokens.iter().enumerate() {
        let a = Instant::now();
        let filled = m.fill_next_token_bitmask(mask);
        let b = Instant::now();
        let mut fail = Value::Null;
        if let Err(e) = filled {
            fail = json!(["error", e.to_string(), i]);
        } else if !bit(mask, t) {
            fail = json!(["masked_out", i]);
        } else if !m.accept_token(t) {
            fail = json!(["advance_refused", i]);
        }
        let c = Instant::now();
        if timed {
            masks.push(us(b - a));
            steps.push(us(c - a));
        }
        if !fail.is_null() {
            return (false, fail, steps, masks);
        }
    }
    let a = Instant::now();
    let ok = m.fill_next_token_bitmask(mask).is_ok() && bit(mask, eos);
    let b = Instant::now();
    if timed {
        masks.push(us(b - a));
        steps.push(us(b - a));
    }
    (ok, if ok { Value::Null } else { json!(["eos_not_allowed", tokens.len()]) }, steps, masks)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let flag = |name: &str| args.iter().any(|a| a == name);
    let workload = arg("--workload").unwrap_or("/work/shared/bench/workloads/w1_maskbench_subset.jsonl".into());
    let tokenizer = arg("--tokenizer").unwrap_or("/work/shared/tokenizers/llama3_1/tokenizer.json".into());
    let eos = arg("--eos").unwrap_or("<|eot_id|>".into());
    let limit: usize = arg("--limit").map_or(usize::MAX, |s| s.parse().expect("--limit N"));
    let stride: usize = arg("--stride").map_or(1, |s| s.parse().expect("--stride K"));
    let only = arg("--id");
    let mut options = JsonSchemaOptions::default();
    if flag("--compact") {
        options.whitespace = Whitespace::Compact;
    }
    options.lenient = flag("--lenient");

    let t = Instant::now();
    let (vocab, bpe, eos_id) = load_tokenizer(&tokenizer, &eos);
    eprintln!("vocab: {} tokens, loaded in {:.0} ms", vocab.len(), t.elapsed().as_secs_f64() * 1e3);
    let text = std::fs::read_to_string(&workload).expect("read workload");
    let rows: Vec<Value> =
        text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).expect("row")).collect();
    let mut items = Vec::new();
    let mut mask = vec![0u32; vocab.mask_words()];
    let wall = Instant::now();
    for (n, row) in rows.iter().enumerate().step_by(stride).take(limit) {
        let id = row["id"].as_str().unwrap_or("?");
        if only.as_deref().is_some_and(|o| o != id) {
            continue;
        }
        let mut res = json!({"id": id, "split": row["split"], "index": n});
        let t0 = Instant::now();
        let compiled = CompiledGrammar::from_json_schema(vocab.clone(), &row["schema"], &options);
        let t1 = Instant::now();
        let compiled = match compiled {
            Ok((g, _)) => Arc::new(g),
            Err(e) => {
                res["compile_error"] = json!(e.to_string());
                eprintln!("[{n}] {id}: compile error: {e}");
                items.push(res);
                continue;
            }
        };
        let first = Matcher::new(compiled.clone()).and_then(|mut m| m.fill_next_token_bitmask(&mut mask));
        let t2 = Instant::now();
        if let Err(e) = first {
            res["compile_error"] = json!(format!("first mask: {e}"));
            items.push(res);
            continue;
        }
        if only.is_some() {
            eprintln!("states {} compile {:?} first mask {:?}", compiled.num_states(), t1 - t0, t2 - t1);
        }
        res["compile_us"] = json!(us(t1 - t0));
        res["ttfm_us"] = json!(us(t2 - t0));
        let (mut valid, mut step_us, mut mask_us) = (Vec::new(), Vec::new(), Vec::new());
        for v in row["valid"].as_array().into_iter().flatten() {
            let toks = bpe.encode(v.as_str().unwrap_or(""));
            let mut m = Matcher::new(compiled.clone()).expect("matcher");
            let (ok, fail, st, mk) = force(&mut m, &toks, eos_id, &mut mask, true);
            step_us.extend(st);
            mask_us.extend(mk);
            if !ok {
                eprintln!(
                    "[{n}] {id}: valid instance failed: {fail} {}",
                    v.as_str().unwrap_or("").chars().take(300).collect::<String>()
                );
            }
            valid.push(json!({"ok": ok, "ntok": toks.len(), "fail": fail}));
        }
        let invalid = row["invalid"].as_array().cloned().unwrap_or_default();
        let mut accepted = 0;
        for v in &invalid {
            let toks = bpe.encode(v.as_str().unwrap_or(""));
            let mut m = Matcher::new(compiled.clone()).expect("matcher");
            let (ok, ..) = force(&mut m, &toks, eos_id, &mut mask, false);
            if ok {
                eprintln!("[{n}] {id}: INVALID ACCEPTED: {}", v.as_str().unwrap_or(""));
                accepted += 1;
            }
        }
        res["valid"] = json!(valid);
        res["step_us"] = json!(step_us);
        res["mask_us"] = json!(mask_us);
        res["invalid_total"] = json!(invalid.len());
        res["invalid_accepted"] = json!(accepted);
        items.push(res);
        if items.len() % 50 == 0 {
            eprintln!("{} items, {:.1} s", items.len(), wall.elapsed().as_secs_f64());
        }
    }
    // Summary, as `summarize_items` in run_peers.py.
    let (mut step, mut maskt, mut ttfm, mut comp) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut n_valid, mut n_pass, mut ce, mut inval, mut inval_total, mut items_pass) = (0, 0, 0, 0, 0, 0);
    type Split = (usize, usize, usize, Vec<f64>, Vec<f64>);
    let mut per_split: std::collections::BTreeMap<String, Split> = Default::default();
    for r in &items {
        let sp = per_split.entry(r["split"].as_str().unwrap_or("?").to_string()).or_default();
        sp.0 += 1;
        if r.get("compile_error").is_some() {
            ce += 1;
            sp.2 += 1;
            continue;
        }
        sp.3.push(r["ttfm_us"].as_f64().unwrap_or(0.0));
        sp.4.extend(r["step_us"].as_array().into_iter().flatten().filter_map(Value::as_f64));
        step.extend(r["step_us"].as_array().into_iter().flatten().filter_map(Value::as_f64));
        maskt.extend(r["mask_us"].as_array().into_iter().flatten().filter_map(Value::as_f64));
        ttfm.push(r["ttfm_us"].as_f64().unwrap_or(0.0));
        comp.push(r["compile_us"].as_f64().unwrap_or(0.0));
        let vs = r["valid"].as_array().cloned().unwrap_or_default();
        n_valid += vs.len();
        let passed = vs.iter().filter(|v| v["ok"] == json!(true)).count();
        n_pass += passed;
        if !vs.is_empty() && passed == vs.len() {
            items_pass += 1;
            sp.1 += 1;
        }
        inval += r["invalid_accepted"].as_u64().unwrap_or(0);
        inval_total += r["invalid_total"].as_u64().unwrap_or(0);
    }
    let tokens = step.len();
    let summary = json!({
        "items": items.len(), "tbm_us": stats(&mut step), "mask_only_us": stats(&mut maskt),
        "ttfm_us": stats(&mut ttfm), "compile_us": stats(&mut comp), "tokens": tokens,
        "valid_instances": n_valid, "valid_passed": n_pass, "items_all_valid_passed": items_pass,
        "compile_errors": ce, "timeouts": 0, "crashes": 0, "invalid_instances": inval_total,
        "invalidation_errors": inval,
        "per_split": per_split
            .iter_mut()
            .map(|(k, v)| {
                v.3.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
                v.4.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
                let avg = if v.4.is_empty() { f64::NAN } else { v.4.iter().sum::<f64>() / v.4.len() as f64 };
                (k.clone(), json!({"items": v.0, "pass": v.1, "compile_errors": v.2, "timeouts": 0,
                    "ttfm_p50_us": pct(&v.3, 50.0), "tbm_avg_us": (avg * 100.0).round() / 100.0,
                    "tbm_p99_us": pct(&v.4, 99.0)}))
            })
            .collect::<serde_json::Map<_, _>>(),
    });
    println!("{}", serde_json::to_string_pretty(&summary).expect("json"));
    eprintln!("wall {:.1} s, pool entries {}", wall.elapsed().as_secs_f64(), vocab.cached_mask_entries());
    if let Some(out) = arg("--out") {
        let meta = json!({"engine": "parlance-grammar", "workload": "w1", "tokenizer": tokenizer,
                          "config": if flag("--compact") { "compact" } else { "default" }, "threads": 1});
        let doc = json!({"meta": meta, "summary": summary, "items": items});
        std::fs::write(&out, serde_json::to_string(&doc).expect("json")).expect("write --out");
    }
}
