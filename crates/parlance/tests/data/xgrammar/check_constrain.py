#!/usr/bin/env python3
"""The artifacts parlance derives from chat templates, checked by their consumers: XGrammar compiles
each structural tag and must accept what the template writes (and refuse its calls under
`tool_choice: none`); transformers' `parse_response` with the emitted `response_template` must give
back the message parlance's parser reads in the same output.

`tests/it/constrain.rs` checks, for every tool-capable corpus and outside template, that parlance's
grammar accepts the template's own renders (and that `tool_choice: none` refuses their calls). With
`PARLANCE_DUMP_STRUCTURAL_TAGS=DIR` it also writes each checked structural tag and output to
`DIR/corpus.jsonl` and `DIR/outside.jsonl`, with each rendered message, its prompt and the
template's response template. This script compiles each document with xgrammar 0.2.8 (byte level:
`accept_string`, then the stop token), runs `parse_response` (transformers 5.24) on each output, and
reports where either disagrees.

    mkdir -p /tmp/st && PARLANCE_DUMP_STRUCTURAL_TAGS=/tmp/st \\
        cargo test --release -p parlance --test it -- corpus_grammars outside_grammars
    /tmp/xg/bin/python crates/parlance/tests/data/xgrammar/check_constrain.py /tmp/st/*.jsonl

The same variable makes `parlance-eval`'s `peer_outputs_are_admitted_by_the_derived_grammar` write
`DIR/peer.jsonl`: the peers' real outputs parlance's grammar admits, each with its structural tag
(`cargo test --release -p parlance-eval --test parse_eval admitted`).
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

from transformers.utils.chat_parsing.response_parser import parse_response


def same_message(got, want):
    """Content, reasoning and calls (names, arguments as JSON values) equal; whitespace at the ends of
    texts and empty texts aside."""
    def text(m, key):
        return (m.get(key) or "").strip()
    def calls(m):
        out = []
        for c in m.get("tool_calls") or []:
            f = c.get("function", c)
            args = f.get("arguments")
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except ValueError:
                    pass
            out.append((f.get("name"), args))
        return out
    return all(text(got, k) == text(want, k) for k in ("content", "reasoning_content")) and calls(got) == calls(want)


totals = collections.Counter()
problems = collections.defaultdict(list)
unsupported = collections.Counter()
for file in sys.argv[1:]:
    for line in open(file):
        r = json.loads(line)
        if "message" in r:
            if "response_template" not in r:
                unsupported[r["response_template_error"].split(": ", 1)[-1]] += 1
                continue
            totals["messages"] += 1
            try:
                got = parse_response(r["output"], r["response_template"], prefix=r["prompt"], tools=r["tools"])
            except Exception as e:  # noqa: BLE001 -- reported per template
                problems[r["template"]].append(f"{r['case']}: parse_response raised {type(e).__name__}: {str(e)[:200]}")
                continue
            # The reference is parlance's own parse of the output (a template may drop what the
            # message held, e.g. content next to calls).
            if same_message(got, r["parsed"]):
                totals["messages_agree"] += 1
            else:
                problems[r["template"]].append(f"{r['case']}: parse_response gave {json.dumps(got)[:300]} for {r['output'][:200]!r}")
            continue
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
print(f"XGrammar: {totals['agree']} of {totals['records']} structural-tag checks agree")
print(f"parse_response: {totals['messages_agree']} of {totals['messages']} messages given back; "
      f"{sum(unsupported.values())} renders of templates without a response template:")
for what, n in unsupported.most_common():
    print(f"    {n:4}  {what}")
print(f"{len(problems)} templates with a difference")
