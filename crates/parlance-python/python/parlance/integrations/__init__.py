"""Adapters of parlance to the servers and libraries its users run, each a thin layer over the public
API: `parlance.integrations.vllm` (tool and reasoning parser plugins), `parlance.integrations.sglang`
(tool and reasoning detectors and a grammar backend) and `parlance.integrations.transformers` (a
`LogitsProcessor` for `model.generate`). This module holds what they share: the Format of a
tokenizer's chat template."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import parlance


@lru_cache(maxsize=16)
def _format_of(template_text: str, bos_token: str, eos_token: str) -> parlance.Format:
    template = parlance.ChatTemplate.from_string(template_text)
    return parlance.analyze(template, bos_token=bos_token, eos_token=eos_token)


def dump(model: Any) -> dict:
    """A server's request object (a pydantic model: a tool, a tool choice) as a plain dict."""
    return model.model_dump(exclude_none=True) if hasattr(model, "model_dump") else dict(model)


def format_for(tokenizer: Any) -> parlance.Format:
    """The Format of the tokenizer's chat template (analyzed once per template)."""
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):
        template = template.get("default") or next(iter(template.values()), None)
    if not isinstance(template, str) or not template:
        raise ValueError("parlance: the tokenizer has no chat_template to derive the output syntax from")
    token = lambda name: str(getattr(tokenizer, name, None) or "")  # noqa: E731
    return _format_of(template, token("bos_token"), token("eos_token"))
