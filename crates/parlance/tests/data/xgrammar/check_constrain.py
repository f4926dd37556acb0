#!/usr/bin/env python3
"""XGrammar's verdict on the structural tags parlance derives from chat templates (issue: the emitted
structural tag, compiled by XGrammar, accepts what the template writes).

`tests/it/constrain.rs` checks, for every tool-capable corpus and outside template, that parlance's
grammar accepts the template's own renders (and that `tool_choice: none` refuses their calls). With
`PARLANCE_DUMP_STRUCTURAL_TAGS=DIR` it also writes each checked structural tag and output to
`DIR/corpus.jsonl` and `DIR/outside.jsonl`. This script compiles each document with xgrammar 0.2.8
(byte level: `accept_string`, then the stop token) and reports where XGrammar disagrees.

    mkdir -p /tmp/st && PARLANCE_DUMP_STRUCTURAL_TAGS=/tmp/st \\
        cargo test --release -p parlance --test it -- corpus_grammars outside_grammars
    /tmp/xg/bin/python crates/parlance/tests/data/xgrammar/check_constrain.py /tmp/st/*.jsonl
"""
import collections
import json
import os
import sys

import xgrammar as xgr
from transformers import PreTrainedTokenizerFast

here = os.path.dirname(os.path.abspath(__file__))
tokenizers = os.environ.get("PARLANCE_TOKENIZERS", os.path.normpath(os.path.join(here, "../../../../../../shared/tokenizers")))
path = os.path.join(tokenizers, "llama3_1", "tokenizer.json")
hf = PreTrainedTokenizerFast(tokenizer_file=path, eos_token="<|eot_id|>")
eos = hf.convert_tokens_to_ids("<|eot_id|>")
info = xgr.TokenizerInfo.from_huggingface(hf, vocab_size=len(hf), stop_token_ids=[eos])
compiler = xgr.GrammarCompiler(info, max_threads=1)

totals = collections.Counter()
problems = collections.defaultdict(list)
for file in sys.argv[1:]:
    for line in open(file):
        r = json.loads(line)
        totals["records"] += 1
        try:
            compiled = compiler.compile_structural_tag(json.dumps(r["doc"]))
        except Exception as e:  # noqa: BLE001 -- reported per template
            problems[r["template"]].append(f"{r['case']}: XGrammar does not compile it: {str(e)[:300]}")
            continue
        m = xgr.GrammarMatcher(compiled)
        accepted = m.accept_string(r["output"]) and m.accept_token(eos)
        if accepted == r["accept"]:
            totals["agree"] += 1
        else:
            want = "accept" if r["accept"] else "refuse"
            problems[r["template"]].append(f"{r['case']}: parlance must {want} {r['output'][:200]!r}; XGrammar does not")
for template, items in sorted(problems.items()):
    print(f"{template}: {len(items)}")
    for item in items[:3]:
        print("   ", item)
print(f"{totals['agree']} of {totals['records']} checks agree; {len(problems)} templates with a difference")
