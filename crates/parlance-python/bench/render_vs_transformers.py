"""Rendering from Python: `ChatTemplate.apply_chat_template` against transformers' own render (the call
`apply_chat_template(..., tokenize=False)` makes: `render_jinja_template`, its compiled-template cache
warm), per template and conversation; outputs checked identical first; rounds interleaved, the ratio
taken per round and its median kept (the machine is shared and noisy).

    PYTHON crates/parlance-python/bench/render_vs_transformers.py ../shared/corpus

PYTHON is a venv with parlance and transformers installed (`scripts/test-python.sh` builds one under
`target/pyenv`; transformers is not in it: `pip install transformers`).
"""

import datetime
import json
import statistics
import sys
import time
from pathlib import Path

import parlance
from transformers.utils.chat_template_utils import render_jinja_template

TEMPLATES = [
    "Qwen-Qwen3-0.6B", "Qwen3-Coder", "meta-llama-Llama-3.1-8B-Instruct", "openai-gpt-oss-120b",
    "deepseek-ai-DeepSeek-V3.1", "Mistral-Small-3.2-24B-Instruct-2506", "GLM-4.6", "Kimi-K2-Instruct",
    "google-gemma-4-31B-it", "ibm-granite-granite-4.0", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use",
    "HuggingFaceTB-SmolLM3-3B",
]
CONVERSATIONS = ["01_system_user_simple", "05_tool_call_roundtrip"]


def per_call(fn, n):
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


def main(corpus: Path):
    manifest = {t["id"]: t for t in json.loads((corpus / "templates" / "manifest.json").read_text())}
    rows = []
    for template_id in TEMPLATES:
        entry = manifest.get(template_id)
        if entry is None:
            continue
        source = (corpus / "templates" / f"{template_id}.jinja").read_text()
        special = {k: v for k, v in (entry.get("special_tokens") or {}).items() if isinstance(v, str)}
        template = parlance.ChatTemplate.from_string(source)
        for name in CONVERSATIONS:
            fixture = json.loads((corpus / "conversations" / f"{name}.json").read_text())
            messages, tools = fixture["messages"], fixture.get("tools")
            # The clock pinned on both sides (`strftime_now` in dated templates).
            now = datetime.datetime(2026, 11, 26, 12, 0)

            def ours():
                return template.apply_chat_template(
                    messages, tools=tools, add_generation_prompt=True, strftime_now=now, **special
                )

            def theirs():
                return render_jinja_template(
                    conversations=[messages], tools=tools, chat_template=source, add_generation_prompt=True,
                    strftime_now=now.strftime, **special
                )[0][0]

            try:
                expected = theirs()
            except Exception as error:  # the template raises under transformers: nothing to compare
                print(f"{template_id} {name}: transformers raises ({type(error).__name__})", file=sys.stderr)
                continue
            if ours() != expected:
                print(f"{template_id} {name}: outputs differ, not timed", file=sys.stderr)
                continue
            n = max(20, int(20000 / max(len(expected), 1)))
            ratios, our_times = [], []
            for _ in range(7):
                a, b = per_call(ours, n), per_call(theirs, n)
                ratios.append(b / a)
                our_times.append(a)
            rows.append((template_id, name, statistics.median(our_times), statistics.median(ratios)))
            print(f"{template_id:45} {name:24} parlance {rows[-1][2]:8.1f} us  transformers/parlance {rows[-1][3]:5.1f}x")
    ratios = sorted(r[3] for r in rows)
    if ratios:
        print(f"{len(rows)} pairs: ratio min {ratios[0]:.1f}x, median {statistics.median(ratios):.1f}x, max {ratios[-1]:.1f}x")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/corpus"))
