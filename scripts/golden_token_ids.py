#!/usr/bin/env python3
"""Write the reference token ids that `tests/it/tokens.rs` compares parlance against.

For each tokenizer folder (Qwen3, Llama 3.1) under the shared tokenizers directory and each
conversation fixture of the corpus, this calls transformers' own
`tokenizer.apply_chat_template(messages, tools=..., tokenize=True, add_generation_prompt=..., **kwargs)`
with `strftime_now` pinned to the corpus's fixed date, and records the ids (or the error).

    python3 -m venv .venv && .venv/bin/pip install transformers jinja2
    .venv/bin/python scripts/golden_token_ids.py --shared ../shared \
        > crates/parlance/tests/expected/token_ids.json
"""
import argparse, datetime as _dt, json, os, sys

FIXED_DATE = _dt.datetime(2025, 1, 15, 12, 0, 0)
TOKENIZERS = ["qwen3", "llama3_1"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared"))
    a = ap.parse_args()
    import transformers
    from transformers import AutoTokenizer
    from transformers.utils import chat_template_utils as ctu

    class _FixedDatetime(_dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return FIXED_DATE

    ctu.datetime = _FixedDatetime
    cdir = os.path.join(a.shared, "corpus", "conversations")
    out = {"renderer": f"transformers {transformers.__version__}", "fixed_date": FIXED_DATE.isoformat(), "cases": []}
    for name in TOKENIZERS:
        tok = AutoTokenizer.from_pretrained(os.path.join(a.shared, "tokenizers", name))
        for fn in sorted(os.listdir(cdir)):
            fx = json.load(open(os.path.join(cdir, fn), encoding="utf-8"))
            messages = [{k: v for k, v in m.items() if v is not None} for m in fx["messages"]]
            case = {"tokenizer": name, "fixture": fn[:-5]}
            try:
                ids = tok.apply_chat_template(
                    messages,
                    tools=fx.get("tools"),
                    tokenize=True,
                    return_dict=False,
                    add_generation_prompt=bool(fx.get("add_generation_prompt")),
                    **(fx.get("kwargs") or {}),
                )
                case["ids"] = list(ids)
            except Exception as e:
                case["error"] = f"{type(e).__name__}: {e}"
            out["cases"].append(case)
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
