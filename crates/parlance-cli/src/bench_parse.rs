//! `parlance bench parse`: whole and streamed parsing of a template's hostile outputs
//! (`parlance::parse::hostile`) at sizes growing tenfold, as throughput and as growth (time per
//! byte at the largest size over time per byte at a tenth of it: 1 is linear, 10 quadratic).

use std::time::{Duration, Instant};

use parlance::parse::hostile::{HostileOutput, hostile_outputs};
use parlance::{Format, ParseOptions, Parser};

/// What to measure.
pub(crate) struct Request<'a> {
    pub format: &'a Format,
    pub min_bytes: usize,
    pub max_bytes: usize,
    pub chunk: usize,
    /// A generator whose parse of one size takes longer stops growing there.
    pub budget: Duration,
    pub only: Option<&'a str>,
}

/// One generator at one size.
pub(crate) struct Point {
    pub bytes: usize,
    pub whole_mb_s: f64,
    pub stream_mb_s: f64,
}

/// One generator's row.
pub(crate) struct Row {
    pub generator: String,
    pub points: Vec<Point>,
    /// Growth of time per byte from the second largest size to the largest (whole or streamed,
    /// the worse): 1 is linear, 10 quadratic.
    pub growth: f64,
    /// The size it stopped at, when one parse exceeded the budget.
    pub stopped_at: Option<usize>,
}

impl Row {
    pub(crate) fn to_json(&self) -> serde_json::Value {
        let points: Vec<_> = self
            .points
            .iter()
            .map(|p| serde_json::json!({"bytes": p.bytes, "whole_mb_s": p.whole_mb_s, "stream_mb_s": p.stream_mb_s}))
            .collect();
        serde_json::json!({"generator": self.generator, "points": points, "growth": self.growth, "stopped_at": self.stopped_at})
    }
}

pub(crate) fn run(request: &Request, mut report: impl FnMut(&Row)) -> Vec<Row> {
    let tools = vec![serde_json::json!({"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"a": {"type": "array"}, "item": {"type": "string"}}}}})];
    let parser = Parser::new(request.format, &ParseOptions { tools, ..ParseOptions::default() });
    let mut rows = Vec::new();
    for generator in hostile_outputs(request.format) {
        if request.only.is_some_and(|only| !generator.name.contains(only)) {
            continue;
        }
        let row = measure(&parser, &generator, request);
        report(&row);
        rows.push(row);
    }
    rows
}

fn measure(parser: &Parser, generator: &HostileOutput, request: &Request) -> Row {
    let mut points: Vec<Point> = Vec::new();
    let mut stopped_at = None;
    let mut bytes = request.min_bytes.max(1);
    while bytes <= request.max_bytes {
        let text = generator.text(bytes);
        let whole = timed(request.budget, || {
            std::hint::black_box(parser.parse(&text));
        });
        let stream = timed(request.budget, || {
            let mut stream = parser.stream();
            for chunk in chunks(&text, request.chunk) {
                std::hint::black_box(stream.push(chunk));
            }
            std::hint::black_box(stream.finish());
        });
        let mb_s = |t: Duration| text.len() as f64 / t.as_secs_f64().max(1e-9) / 1e6;
        points.push(Point { bytes: text.len(), whole_mb_s: mb_s(whole), stream_mb_s: mb_s(stream) });
        if whole.max(stream) > request.budget {
            stopped_at = Some(text.len());
            break;
        }
        bytes *= 10;
    }
    // From the last two sizes only: smaller outputs fit in the caches and look faster than any
    // parser linear in memory can stay.
    let growth = match points.as_slice() {
        [.., a, b] => (a.whole_mb_s / b.whole_mb_s).max(a.stream_mb_s / b.stream_mb_s),
        _ => 1.0,
    };
    Row { generator: generator.name.clone(), points, growth, stopped_at }
}

/// The fastest of runs filling at least 50 ms, and at least three: the first run of a size may
/// pay the allocator's first touch of fresh memory (mimalloc, in the CLI, commits it then; a
/// 1 MB output of stray markers measured 8 MB/s that way and 50-90 MB/s warm), which a
/// long-lived server pays once, not per output. A run past `budget` ends the timing at once.
fn timed(budget: Duration, mut f: impl FnMut()) -> Duration {
    let start = Instant::now();
    let mut best = Duration::MAX;
    for run in 1.. {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed());
        if best > budget || (run >= 3 && start.elapsed() > Duration::from_millis(50)) {
            break;
        }
    }
    best
}

/// `text` in pieces of about `size` bytes, cut at character boundaries.
pub(crate) fn chunks(text: &str, size: usize) -> impl Iterator<Item = &str> {
    let mut at = 0;
    std::iter::from_fn(move || {
        if at >= text.len() {
            return None;
        }
        let mut end = (at + size.max(1)).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        let piece = &text[at..end];
        at = end;
        Some(piece)
    })
}
