"""A transformers `LogitsProcessor` that holds `model.generate` to a parlance grammar (a JSON Schema,
EBNF, a structural tag, or a request's tools under the model's own chat template):

    info = parlance.TokenizerInfo.from_huggingface(tokenizer)
    compiled = parlance.GrammarCompiler(info).compile_tools(parlance.analyze(template), tools=tools)
    model.generate(**inputs, logits_processor=[parlance.integrations.transformers.LogitsProcessor(compiled)])

One matcher per sequence of the batch; each call accepts the token the previous step chose, then masks
the next step's logits. A sequence whose grammar has ended allows only its EOS ids.
"""

from __future__ import annotations

from typing import Sequence, Union

import parlance


class LogitsProcessor:
    """`compiled`: one `CompiledGrammar` for every sequence, or one per sequence of the batch."""

    supports_continuous_batching = False

    def __init__(self, compiled: Union[parlance.CompiledGrammar, Sequence[parlance.CompiledGrammar]]):
        self.compiled = list(compiled) if isinstance(compiled, (list, tuple)) else compiled
        self.matchers: list[parlance.GrammarMatcher] = []
        self.prompt_length = 0
        self.bitmask = None

    def __call__(self, input_ids, scores):
        import torch

        batch, vocab = scores.shape
        if not self.matchers:
            grammars = self.compiled if isinstance(self.compiled, list) else [self.compiled] * batch
            if len(grammars) != batch:
                raise ValueError(f"{len(grammars)} grammars for a batch of {batch}")
            self.matchers = [parlance.GrammarMatcher(g) for g in grammars]
            self.prompt_length = input_ids.shape[1]
        else:
            # The token each sequence got at the previous step.
            for matcher, token in zip(self.matchers, input_ids[:, -1].tolist()):
                if not matcher.is_terminated() and not matcher.accept_token(token):
                    raise RuntimeError(f"token {token} is outside the grammar (was the mask applied?)")
        if self.bitmask is None or self.bitmask.shape[0] != batch:
            self.bitmask = parlance.allocate_token_bitmask(batch, self.matchers[0].mask_words * 32)
        parlance.batch_fill_next_token_bitmask(self.matchers, self.bitmask)
        for row, matcher in enumerate(self.matchers):
            if matcher.is_terminated():
                # A finished sequence still samples (then padded): its EOS keeps the row finite.
                self.bitmask[row] = 0
                for eos in matcher.eos_token_ids:
                    self.bitmask[row, eos // 32] |= 1 << (eos % 32)
        mask = torch.from_numpy(self.bitmask)
        parlance.apply_token_bitmask_inplace(scores, mask, vocab_size=vocab)
        return scores
