"""Python's cost around the grammar engine: one `fill_next_token_bitmask` from Python against the same
fill made in Rust, a Python call that does nothing (the floor), and a batch of matchers filled in one
`batch_fill_next_token_bitmask` call against a Python loop over them.

    target/pyenv/bin/python crates/parlance-python/bench/grammar_overhead.py ../shared/tokenizers/llama3_1
"""

import statistics
import sys
import time

import parlance

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
          "required": ["city", "days"]}


def per_call(fn, n=20000, rounds=7):
    """Median over `rounds` of the mean time of `n` calls, in µs."""
    results = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        results.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(results)


def main(tokenizer):
    info = parlance.TokenizerInfo.from_huggingface(tokenizer)
    compiled = parlance.GrammarCompiler(info).compile_json_schema(SCHEMA)
    matcher = parlance.GrammarMatcher(compiled)
    matcher.accept_string('{"city": "Pa')  # inside a string: a cached mask state
    bitmask = parlance.allocate_token_bitmask(1, info.vocab_size)
    matcher.fill_next_token_bitmask(bitmask)
    fill = per_call(lambda: matcher.fill_next_token_bitmask(bitmask))
    floor = per_call(lambda: matcher.is_terminated())
    rust = matcher._fill_timing_us(20000)
    print(f"fill_next_token_bitmask from Python: {fill:.2f} µs; the same fill in Rust: {rust:.2f} µs; "
          f"overhead {fill - rust:.2f} µs (a Python call that does nothing: {floor:.2f} µs)")
    matchers = [parlance.GrammarMatcher(compiled) for _ in range(128)]
    for i, m in enumerate(matchers):
        m.accept_string('{"city": "' + "abcdefgh"[: i % 8])
    batch = parlance.allocate_token_bitmask(128, info.vocab_size)

    def loop():
        for i, m in enumerate(matchers):
            m.fill_next_token_bitmask(batch, i)

    looped = per_call(loop, n=200)
    batched = per_call(lambda: parlance.batch_fill_next_token_bitmask(matchers, batch), n=200)
    print(f"128 matchers: a Python loop {looped:.1f} µs, one batch call {batched:.1f} µs ({looped / batched:.1f}x)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/tokenizers/llama3_1")
