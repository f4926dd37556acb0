//! Analysis time per corpus template: the distribution over the corpus (min, median, p90, max).
//!
//! Each template is analyzed 5 times (the median kept), with the special tokens of its golden file.
//! Run with `cargo bench -p parlance --bench analyze`. The corpus is `$PARLANCE_CORPUS`, else
//! `../shared/corpus`; when absent the bench says so and measures nothing. It measures, never asserts.

use std::time::{Duration, Instant};

#[path = "support/corpus.rs"]
mod support;
use support::corpus;

use parlance::{AnalyzeOptions, ChatTemplate, RenderLimits, TemplateSource, analyze};

fn main() {
    // `cargo test --benches` runs this too; only measure under `cargo bench`.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let Some(corpus) = corpus() else { return };
    let mut times: Vec<(Duration, String)> = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(corpus.join("templates"))
        .expect("templates folder")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "jinja"))
        .collect();
    entries.sort();
    for path in entries {
        let id = path.file_stem().unwrap().to_string_lossy().into_owned();
        let mut options = AnalyzeOptions::default();
        if let Ok(text) = std::fs::read_to_string(corpus.join("golden").join(format!("{id}.json")))
            && let Ok(golden) = serde_json::from_str::<serde_json::Value>(&text)
        {
            for (k, v) in golden["template_variables"].as_object().into_iter().flatten() {
                options.variables.insert(k.clone(), v.clone());
            }
        }
        let text = std::fs::read_to_string(&path).expect("template text");
        let Ok(template) =
            ChatTemplate::from_source(TemplateSource::from_text(id.clone(), text), RenderLimits::default())
        else {
            continue;
        };
        let mut runs: Vec<Duration> = (0..5)
            .map(|_| {
                let started = Instant::now();
                let _ = std::hint::black_box(analyze(&template, &options));
                started.elapsed()
            })
            .collect();
        runs.sort();
        times.push((runs[2], id));
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize].0;
    println!(
        "analysis time over {} templates: min {:.2} ms, median {:.2} ms, p90 {:.2} ms, max {:.2} ms ({})",
        times.len(),
        ms(times[0].0),
        ms(at(0.5)),
        ms(at(0.9)),
        ms(times[times.len() - 1].0),
        times[times.len() - 1].1
    );
}
