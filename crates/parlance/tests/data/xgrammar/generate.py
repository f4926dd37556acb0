#!/usr/bin/env python3
"""Regenerates styles.json: XGrammar's own verdicts on its builtin structural tags, the test data of
`crates/parlance/tests/it/xgrammar.rs` (parlance must compile each document and agree with XGrammar).

For every model style registered in xgrammar 0.2.8 (`get_model_structural_tag`), a fixed tool set and
four requests (tool_choice auto with reasoning on, auto with reasoning off, required without parallel
calls, a named function), the script records:
  * the document (`StructuralTag.model_dump(mode="json")`);
  * token walks with the Llama 3.1 vocabulary (`../shared/tokenizers/llama3_1`), sampled under
    XGrammar's own masks (seeded), with XGrammar's mask at some steps (sorted allowed-id runs);
  * strings: the walks' texts and mutations of them (a character inserted, deleted or replaced),
    each with XGrammar's verdict: whether `accept_string` takes it, and whether the grammar may end
    there (the stop token is then accepted).

Run (needs xgrammar 0.2.8, which needs torch; CPU is enough):
    python3 -m venv /tmp/xg && /tmp/xg/bin/pip install xgrammar==0.2.8 transformers tokenizers
    /tmp/xg/bin/python crates/parlance/tests/data/xgrammar/generate.py [--tokenizers ../shared/tokenizers]
"""
import argparse
import json
import os
import random

import xgrammar as xgr
from xgrammar import builtin_structural_tag as builtin

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
        "required": ["city"]}}},
    {"type": "function", "function": {"name": "add", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "number"}}, "required": ["a", "b"]}}},
    {"type": "function", "function": {"name": "search", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["query"]}}},
]

REQUESTS = [
    ("auto-reasoning", dict(tool_choice="auto", reasoning=True)),
    ("auto-no-reasoning", dict(tool_choice="auto", reasoning=False)),
    ("required-single", dict(tool_choice="required", reasoning=False, parallel_tool_calls=False)),
    ("named-add", dict(tool_choice={"type": "function", "function": {"name": "add"}}, reasoning=True)),
]

WALKS = 6
MAX_TOKENS = 160
FINISH_AFTER = 24
MASK_STEPS = (0, 3, 9, 20)
# Characters that tend to close what is open (strings, objects, tags): preferred when finishing.
CLOSERS = set('"}]>')


def runs(allowed):
    """Sorted ids as [start, end) runs, flattened."""
    out = []
    for t in allowed:
        if out and out[-1] == t:
            out[-1] = t + 1
        else:
            out.extend([t, t + 1])
    return out


def allowed_ids(mask_row, vocab_size):
    ids = []
    for word_index, word in enumerate(mask_row.tolist()):
        word &= 0xFFFFFFFF
        while word:
            low = word & -word
            t = word_index * 32 + low.bit_length() - 1
            if t < vocab_size:
                ids.append(t)
            word ^= low
    return ids


def end_markers(node):
    """The string ends of every tag in a document (what closes reasoning, calls and sections)."""
    if isinstance(node, dict):
        end = node.get("end")
        if node.get("type") == "tag" or "begin" in node:
            for e in (end if isinstance(end, list) else [end]):
                if isinstance(e, str) and e:
                    yield e
        for value in node.values():
            yield from end_markers(value)
    elif isinstance(node, list):
        for value in node:
            yield from end_markers(value)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokenizers", default=os.path.normpath(os.path.join(here, "../../../../../../shared/tokenizers")))
    parser.add_argument("--out", default=os.path.join(here, "styles.json"))
    args = parser.parse_args()

    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast
    path = os.path.join(args.tokenizers, "llama3_1", "tokenizer.json")
    tk = Tokenizer.from_file(path)
    config = json.load(open(os.path.join(args.tokenizers, "llama3_1", "tokenizer_config.json")))
    eos = config["eos_token"]
    eos = eos["content"] if isinstance(eos, dict) else eos
    eos_id = tk.token_to_id(eos)
    vocab_size = tk.get_vocab_size(with_added_tokens=True)
    hf = PreTrainedTokenizerFast(tokenizer_file=path, eos_token=eos)
    info = xgr.TokenizerInfo.from_huggingface(hf, vocab_size=vocab_size, stop_token_ids=[eos_id])
    compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
    mask = xgr.allocate_token_bitmask(1, info.vocab_size)
    decoded = [tk.decode([t]) for t in range(vocab_size)]

    def verdict(compiled, text):
        m = xgr.GrammarMatcher(compiled)
        ok = m.accept_string(text)
        return {"text": text, "accepted": bool(ok), "complete": bool(ok and m.accept_token(eos_id))}

    styles = sorted(k for k in builtin._structural_tag_registry if k != "my_model")
    out = {"xgrammar": "0.2.8", "tokenizer": "llama3_1", "eos": eos_id, "tools": TOOLS, "cases": []}
    for style in styles:
        for request_name, request in REQUESTS:
            case = {"id": f"{style}/{request_name}", "style": style, "request": request}
            try:
                doc = xgr.get_model_structural_tag(style, tools=TOOLS, **request)
                case["doc"] = doc.model_dump(mode="json")
                compiled = compiler.compile_structural_tag(doc)
            except Exception as e:  # noqa: BLE001 -- recorded: parlance need not compile what XGrammar refuses
                case["xgrammar_error"] = f"{type(e).__name__}: {e}"[:500]
                out["cases"].append(case)
                continue
            rng = random.Random(f"{style}/{request_name}")
            markers = sorted(set(end_markers(case["doc"])))
            walks, strings = [], []
            for _ in range(WALKS):
                m = xgr.GrammarMatcher(compiled)
                tokens, masks, ended = [], [], False
                for step in range(MAX_TOKENS):
                    m.fill_next_token_bitmask(mask)
                    allowed = allowed_ids(mask.numpy()[0], vocab_size)
                    if step in MASK_STEPS and len(walks) < 3:
                        masks.append({"after": len(tokens), "runs": runs(allowed)})
                    if not allowed:
                        break
                    if eos_id in allowed and (step >= FINISH_AFTER or rng.random() < 0.05):
                        ended = True
                        break
                    # Whitespace is most of what JSON and XML styles allow between their parts;
                    # sampled uniformly, walks would rarely leave it.
                    pick = [t for t in allowed if decoded[t].strip()] if rng.random() < 0.9 else []
                    pick = pick or allowed
                    if step >= FINISH_AFTER and rng.random() < 0.5:
                        # Close something: write one of the document's end markers where it fits.
                        closed = False
                        for marker in rng.sample(markers, len(markers)):
                            ids = tk.encode(marker, add_special_tokens=False).ids
                            probe = m.fork()
                            if ids and all(probe.accept_token(t) for t in ids):
                                for t in ids:
                                    assert m.accept_token(t)
                                tokens.extend(ids)
                                closed = True
                                break
                        if closed:
                            continue
                    if step >= FINISH_AFTER:
                        try:
                            forced = m.find_jump_forward_string()
                        except UnicodeDecodeError:
                            forced = ""
                        closing = [t for t in allowed if decoded[t] and (decoded[t] in CLOSERS or (forced and forced.startswith(decoded[t])))]
                        short = [t for t in pick if len(decoded[t]) == 1]
                        pick = closing if closing and rng.random() < 0.7 else (short or pick)
                    token = rng.choice(pick)
                    if token == eos_id:
                        ended = True
                        break
                    assert m.accept_token(token)
                    tokens.append(token)
                text = tk.decode(tokens)
                walks.append({"tokens": tokens, "ended": ended, "masks": masks})
                strings.append(verdict(compiled, text))
                chars = list(text)
                for _ in range(2):
                    mutated = list(chars)
                    at = rng.randrange(len(mutated) + 1)
                    kind = rng.choice(["insert", "delete", "replace"]) if mutated else "insert"
                    c = rng.choice('ab {}[]":,<>/=\n0')
                    if kind == "insert":
                        mutated.insert(at, c)
                    elif kind == "delete":
                        del mutated[min(at, len(mutated) - 1)]
                    else:
                        mutated[min(at, len(mutated) - 1)] = c
                    strings.append(verdict(compiled, "".join(mutated)))
            case["walks"] = walks
            case["strings"] = strings
            out["cases"].append(case)
            print(case["id"], "strings", len(strings), "accepted", sum(s["accepted"] for s in strings),
                  "complete", sum(s["complete"] for s in strings), flush=True)
    with open(args.out, "w") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print("wrote", args.out, os.path.getsize(args.out), "bytes")


if __name__ == "__main__":
    main()
