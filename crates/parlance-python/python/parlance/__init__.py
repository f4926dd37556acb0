"""parlance: chat templates rendered byte for byte as transformers renders them, their reasoning and
tool-call syntax derived from the template itself, and model output parsed (whole or streamed).

    >>> import parlance
    >>> template = parlance.ChatTemplate.from_pretrained("Qwen3-0.6B")        # a model folder
    >>> template.apply_chat_template(messages, add_generation_prompt=True)     # == transformers
    >>> parser = parlance.Parser(template, tools=tools)
    >>> parser.parse(model_output)     # {"content", "reasoning_content", "tool_calls", "issues"}
"""

from ._parlance import (
    AnalyzeError,
    ChatTemplate,
    Format,
    Parser,
    Renderer,
    Stream,
    TemplateError,
    __version__,
    analyze,
)

__all__ = [
    "AnalyzeError",
    "ChatTemplate",
    "Format",
    "Parser",
    "Renderer",
    "Stream",
    "TemplateError",
    "__version__",
    "analyze",
]
