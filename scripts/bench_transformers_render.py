#!/usr/bin/env python3
"""Time Hugging Face transformers rendering one chat template, for comparison with parlance's bench.

This measures what `tokenizer.apply_chat_template(..., tokenize=False)` spends in the template:
`transformers.utils.chat_template_utils.render_jinja_template(conversations=[messages], tools=...,
documents=None, chat_template=text, add_generation_prompt=..., **kwargs)`. No model weights or
tokenizer files are needed. The inputs are the ones `crates/parlance/benches/render.rs` uses: a
template file and a render request (`{"messages", "tools", "kwargs", "add_generation_prompt"}`);
as transformers' callers do, message keys whose value is null are dropped first. `strftime_now` is
pinned to the bench's fixed instant (2025-03-10 09:30:00).

After a warm-up (which also fills transformers' compiled-template cache, so compiling is not timed
as part of rendering), each of `--iterations` renders is timed alone; one JSON line goes to stdout
with the median and mean in microseconds. Compiling is timed separately (`compile_*`), through
the uncached compile function, when this transformers version has it.

Install and run (from the workspace root):

    python3 -m venv .venv && .venv/bin/pip install transformers jinja2
    .venv/bin/python scripts/bench_transformers_render.py \\
        --template ../shared/corpus/templates/Qwen-Qwen3-0.6B.jinja \\
        --conversation crates/parlance/benches/data/twenty_turn_tools.json \\
        --iterations 2000

    cargo bench -p parlance --bench render     # the parlance side

`--print` writes the rendered text (nothing else) instead of timing, to compare byte for byte with
what parlance renders for the same inputs.
"""
import argparse
import datetime as _dt
import json
import statistics
import sys
import time

FIXED_NOW = _dt.datetime(2025, 3, 10, 9, 30, 0)
WARMUP = 100


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--template", required=True, help="a .jinja chat template file")
    ap.add_argument("--conversation", required=True, help="a render request JSON file")
    ap.add_argument("--iterations", type=int, default=2000, help="timed renders (default 2000)")
    ap.add_argument("--print", action="store_true", help="print the rendered text instead of timing")
    a = ap.parse_args()

    import jinja2
    import transformers
    from transformers.utils import chat_template_utils as ctu

    class _FixedDatetime(_dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return FIXED_NOW

    ctu.datetime = _FixedDatetime

    with open(a.template, encoding="utf-8") as f:
        template = f.read()
    with open(a.conversation, encoding="utf-8") as f:
        request = json.load(f)
    messages = [{k: v for k, v in m.items() if v is not None} for m in request["messages"]]
    tools = request.get("tools")
    kwargs = request.get("kwargs") or {}
    add_generation_prompt = bool(request.get("add_generation_prompt"))

    def render():
        rendered, _ = ctu.render_jinja_template(
            conversations=[messages],
            tools=tools,
            documents=None,
            chat_template=template,
            add_generation_prompt=add_generation_prompt,
            **kwargs,
        )
        return rendered[0]

    if a.print:
        sys.stdout.write(render())
        return

    for _ in range(WARMUP):
        text = render()
    render_us = []
    clock = time.perf_counter_ns
    for _ in range(a.iterations):
        start = clock()
        render()
        render_us.append((clock() - start) / 1000)

    result = {
        "renderer": f"transformers {transformers.__version__}, jinja2 {jinja2.__version__}",
        "python": sys.version.split()[0],
        "template": a.template,
        "conversation": a.conversation,
        "output_bytes": len(text.encode("utf-8")),
        "iterations": a.iterations,
        "render_median_us": round(statistics.median(render_us), 2),
        "render_mean_us": round(statistics.fmean(render_us), 2),
        "render_min_us": round(min(render_us), 2),
    }
    compile_uncached = getattr(ctu, "_cached_compile_jinja_template", None)
    if compile_uncached is not None:
        count = max(20, a.iterations // 10)
        compile_uncached(template)
        compile_us = []
        for _ in range(count):
            start = clock()
            compile_uncached(template)
            compile_us.append((clock() - start) / 1000)
        result["compile_iterations"] = count
        result["compile_median_us"] = round(statistics.median(compile_us), 2)
        result["compile_mean_us"] = round(statistics.fmean(compile_us), 2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
