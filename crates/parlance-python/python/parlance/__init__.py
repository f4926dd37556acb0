"""parlance: chat templates rendered byte for byte as transformers renders them, their reasoning and
tool-call syntax derived from the template itself, model output parsed (whole or streamed), and
generation constrained to that syntax with XGrammar's API.

    >>> import parlance
    >>> template = parlance.ChatTemplate.from_pretrained("Qwen3-0.6B")        # a model folder
    >>> template.apply_chat_template(messages, add_generation_prompt=True)     # == transformers
    >>> parser = parlance.Parser(template, tools=tools)
    >>> parser.parse(model_output)     # {"content", "reasoning_content", "tool_calls", "issues"}

    >>> info = parlance.TokenizerInfo.from_huggingface(hf_tokenizer)
    >>> compiled = parlance.GrammarCompiler(info).compile_tools(parlance.analyze(template), tools=tools)
    >>> matcher = parlance.GrammarMatcher(compiled)
    >>> bitmask = parlance.allocate_token_bitmask(1, info.vocab_size)
    >>> matcher.fill_next_token_bitmask(bitmask)
    >>> parlance.apply_token_bitmask_inplace(logits, bitmask)
"""

from ._parlance import (
    AnalyzeError,
    ChatTemplate,
    CompiledGrammar,
    Format,
    GrammarCompiler,
    GrammarError,
    GrammarMatcher,
    Parser,
    Renderer,
    Stream,
    TemplateError,
    TokenizerInfo,
    __version__,
    analyze,
    batch_fill_next_token_bitmask,
    structural_tag,
)


def allocate_token_bitmask(batch_size, vocab_size):
    """A numpy int32 array of shape `(batch_size, ceil(vocab_size / 32))`, every token allowed (-1):
    bit `id % 32` of word `id // 32` says whether token `id` may come next. `torch.from_numpy` shares
    its memory."""
    import numpy as np

    return np.full((batch_size, (vocab_size + 31) // 32), -1, dtype=np.int32)


def apply_token_bitmask_inplace(logits, bitmask, *, vocab_size=None, indices=None):
    """Sets to -inf the logits of tokens the bitmask does not allow, in place. `logits`: a numpy array or
    a torch tensor of shape `(batch, vocab)` or `(vocab,)`; `bitmask`: the int32 array/tensor of
    `allocate_token_bitmask` (rows follow `logits`' rows, or `indices` names the rows of `logits` to
    mask, one bitmask row each). Tokens past the bitmask's width (`vocab_size` if given) are
    disallowed."""
    width = logits.shape[-1]
    vocab = width if vocab_size is None else min(vocab_size, width)
    if hasattr(logits, "masked_fill_"):
        import torch

        mask = bitmask if isinstance(bitmask, torch.Tensor) else torch.from_numpy(bitmask)
        mask = mask.to(logits.device)
        shifts = torch.arange(32, device=logits.device, dtype=torch.int32)
        allowed = ((mask.unsqueeze(-1) >> shifts) & 1).bool().flatten(-2)
        full = torch.zeros(allowed.shape[:-1] + (width,), dtype=torch.bool, device=logits.device)
        n = min(vocab, allowed.shape[-1])
        full[..., :n] = allowed[..., :n]
        if indices is None:
            logits.masked_fill_(~full.view(logits.shape), float("-inf"))
        else:
            rows = torch.as_tensor(indices, device=logits.device)
            logits[rows] = logits[rows].masked_fill(~full[: len(indices)], float("-inf"))
        return
    import numpy as np

    words = np.ascontiguousarray(bitmask, dtype=np.int32)
    allowed = np.unpackbits(words.view(np.uint8), axis=-1, bitorder="little").astype(bool)
    full = np.zeros(allowed.shape[:-1] + (width,), dtype=bool)
    n = min(vocab, allowed.shape[-1])
    full[..., :n] = allowed[..., :n]
    if indices is None:
        logits[~full.reshape(logits.shape)] = -np.inf
    else:
        for row, index in enumerate(indices):
            logits[index][~full[row]] = -np.inf


__all__ = [
    "AnalyzeError",
    "ChatTemplate",
    "CompiledGrammar",
    "Format",
    "GrammarCompiler",
    "GrammarError",
    "GrammarMatcher",
    "Parser",
    "Renderer",
    "Stream",
    "TemplateError",
    "TokenizerInfo",
    "__version__",
    "allocate_token_bitmask",
    "analyze",
    "apply_token_bitmask_inplace",
    "batch_fill_next_token_bitmask",
    "structural_tag",
]
