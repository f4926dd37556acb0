from os import PathLike
from typing import Any, Optional, Union

__version__: str

class TemplateError(ValueError):
    """A chat template failed to load or render (the message names the template and line)."""

class AnalyzeError(ValueError):
    """A chat template's output syntax could not be derived."""

class ChatTemplate:
    """A compiled chat template with its special tokens: load once, render many times."""

    @staticmethod
    def from_pretrained(path: Union[str, PathLike[str]]) -> ChatTemplate:
        """A model folder, a `tokenizer_config.json` / `chat_template.json`, or a `.jinja` file."""
    @staticmethod
    def from_string(text: str) -> ChatTemplate:
        """Template text (pass special tokens such as `bos_token` as keyword arguments)."""
    def apply_chat_template(
        self,
        conversation: list[dict[str, Any]],
        tools: Optional[list[dict[str, Any]]] = None,
        documents: Optional[list[dict[str, Any]]] = None,
        add_generation_prompt: bool = False,
        continue_final_message: bool = False,
        **kwargs: Any,
    ) -> str:
        """Byte-identical to transformers' `apply_chat_template(..., tokenize=False)`."""
    @property
    def label(self) -> str: ...

class Format:
    """A chat template's output syntax: reasoning markers, tool-call family and markers."""

    def to_dict(self) -> dict[str, Any]: ...
    def to_json(self) -> str: ...
    @staticmethod
    def from_json(text: str) -> Format: ...
    def summary(self) -> str: ...

def analyze(template: ChatTemplate) -> Format:
    """Derives a template's output syntax by rendering probe conversations through it."""

class Stream:
    """A streamed parse: `push` returns OpenAI delta dicts, `finish` the last ones and the message."""

    def push(self, text: str) -> list[dict[str, Any]]: ...
    def finish(self) -> tuple[list[dict[str, Any]], dict[str, Any]]: ...

class Parser:
    """Parses model output with a template's Format into an OpenAI assistant message."""

    def __init__(
        self,
        template_or_format: Union[ChatTemplate, Format],
        tools: Optional[list[dict[str, Any]]] = None,
        tool_choice: Union[str, dict[str, Any], None] = None,
        parallel_tool_calls: bool = True,
        thinking: Optional[bool] = None,
        id_seed: Optional[int] = None,
    ) -> None:
        """`id_seed`: seed of the ids of calls written without one (`None`: fresh ids per output)."""
    def parse(self, text: str) -> dict[str, Any]:
        """`content`, `reasoning_content`, `tool_calls` (arguments as JSON text) and `issues`."""
    def stream(self) -> Stream: ...

class Renderer:
    """Renders conversations to attributed token ids and bridges turns, for one template and tokenizer."""

    def __init__(
        self,
        template: ChatTemplate,
        tokenizer: Union[str, PathLike[str]],
        format: Optional[Format] = None,
        **kwargs: Any,
    ) -> None: ...
    def render(
        self,
        conversation: list[dict[str, Any]],
        tools: Optional[list[dict[str, Any]]] = None,
        add_generation_prompt: bool = True,
    ) -> tuple[list[int], list[int]]:
        """`(ids, message_indices)`; `-1` marks the template's own tokens."""
    def loss_mask(
        self, conversation: list[dict[str, Any]], tools: Optional[list[dict[str, Any]]] = None
    ) -> list[bool]: ...
    def bridge(
        self,
        prev_prompt_ids: list[int],
        prev_completion_ids: list[int],
        new_messages: list[dict[str, Any]],
        tools: Optional[list[dict[str, Any]]] = None,
    ) -> list[int]:
        """The next prompt's ids, the previous prompt and completion kept as they are."""
    @property
    def stop_token_ids(self) -> list[int]: ...
    @staticmethod
    def to_assistant_message(parsed: dict[str, Any]) -> dict[str, Any]: ...
