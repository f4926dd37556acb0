//! Render and compile time of a chat template: Qwen3 over a 20-turn tool-calling conversation.
//!
//! `render/qwen3_20_turn_tools` renders `benches/data/twenty_turn_tools.json` (system prompt, two
//! tools, 20 user rounds, 25 tool calls, some reasoning) through the corpus's
//! `templates/Qwen-Qwen3-0.6B.jinja`, with `now` fixed so every iteration does the same work.
//! `compile/qwen3` measures `ChatTemplate::from_path` on the same file: read, parse, compile.
//! `scripts/bench_transformers_render.py` times the same render in Hugging Face transformers.
//!
//! The corpus is `$PARLANCE_CORPUS`, else `../shared/corpus` beside the workspace; when it is absent
//! the bench says so and measures nothing.

use std::hint::black_box;
use std::path::Path;

use criterion::Criterion;
#[path = "support/corpus.rs"]
mod support;
use support::corpus;

use parlance::{ChatTemplate, RenderRequest};

const TEMPLATE: &str = "templates/Qwen-Qwen3-0.6B.jinja";

fn benches(c: &mut Criterion) {
    let Some(corpus) = corpus() else { return };
    let template_path = corpus.join(TEMPLATE);
    let template = ChatTemplate::from_path(&template_path).expect("the corpus's Qwen3 template compiles");
    let request_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/data/twenty_turn_tools.json");
    let request = RenderRequest::from_path(&request_path).expect("the bench conversation is a valid request");
    let (conversation, mut options) = request.into_parts().expect("the bench conversation has valid options");
    // A fixed clock: what `strftime_now` sees must not vary between iterations.
    options.now = chrono::NaiveDate::from_ymd_opt(2025, 3, 10).and_then(|d| d.and_hms_opt(9, 30, 0));

    c.bench_function("render/qwen3_20_turn_tools", |b| {
        b.iter(|| template.render(black_box(&conversation), black_box(&options)))
    });
    c.bench_function("compile/qwen3", |b| b.iter(|| ChatTemplate::from_path(black_box(&template_path))));
}

// What `criterion_group!` + `criterion_main!` expand to, written out: the macro's `pub fn` would
// trip the workspace's `missing_docs` lint.
fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    benches(&mut criterion);
    criterion.final_summary();
}
