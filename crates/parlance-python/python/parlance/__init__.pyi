from os import PathLike
from typing import Any, Literal, Optional, Union

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

def analyze(template: ChatTemplate, **variables: Any) -> Format:
    """Derives a template's output syntax by rendering probe conversations through it."""

class Stream:
    """A streamed parse: `push` returns OpenAI delta dicts, `finish` the last ones; together they add
    up to `message()`, which after `finish` is what `Parser.parse` returns for the whole text."""

    def push(self, text: str) -> list[dict[str, Any]]: ...
    def finish(self) -> list[dict[str, Any]]: ...
    def message(self) -> dict[str, Any]: ...

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
        in_reasoning: Optional[bool] = None,
        truncated_calls: Literal["keep", "drop"] = "keep",
    ) -> None:
        """`id_seed`: seed of the ids of calls written without one (`None`: fresh ids per output).
        `in_reasoning`: whether the output starts inside reasoning (default: as the prompt leaves it).
        `truncated_calls`: keep or drop a call the output ends inside (reported either way)."""
    def parse(self, text: str) -> dict[str, Any]:
        """`content`, `reasoning_content`, `tool_calls` (arguments as JSON text) and `issues`."""
    def stream(self) -> Stream: ...

class Renderer:
    """Renders conversations to attributed token ids and bridges turns, for one template and tokenizer."""

    def __init__(
        self,
        template: ChatTemplate,
        tokenizer: Union[str, PathLike[str], Any],
        format: Optional[Format] = None,
        **kwargs: Any,
    ) -> None:
        """`tokenizer`: a path (`tokenizer.json` or its folder), a transformers tokenizer or a
        `tokenizers.Tokenizer`."""
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
    def to_assistant_message(self, parsed: dict[str, Any]) -> dict[str, Any]:
        """The message a client sends back from a `Parser.parse` result; reasoning also under the
        template's own key where it reads one (MiniCPM3's `thought`)."""

class GrammarError(ValueError):
    """A grammar, JSON Schema or structural tag failed to compile (the message names where)."""

class TokenizerInfo:
    """A tokenizer's vocabulary for constrained decoding: token bytes, special tokens, EOS ids."""

    @staticmethod
    def from_huggingface(tokenizer: Any, eos_token_ids: Optional[list[int]] = None) -> TokenizerInfo:
        """A transformers tokenizer, a `tokenizers.Tokenizer`, or a path to `tokenizer.json` / its folder."""
    @property
    def vocab_size(self) -> int: ...
    @property
    def eos_token_ids(self) -> list[int]: ...
    @property
    def special_tokens(self) -> list[tuple[str, int]]: ...

class CompiledGrammar:
    """A grammar compiled for one vocabulary; matchers share it."""

class GrammarCompiler:
    """Compiles grammars for one vocabulary, with a compiled-grammar cache (by source text)."""

    def __init__(
        self,
        tokenizer_info: TokenizerInfo,
        cache_limit_bytes: Optional[int] = None,
        *,
        max_threads: Optional[int] = None,
    ) -> None:
        """`max_threads`: threads one compile may use (default: the machine's, at most 8)."""
    def compile_json_schema(
        self,
        schema: Union[str, dict[str, Any]],
        *,
        any_whitespace: bool = True,
        strict_mode: bool = True,
        separators: Optional[tuple[str, str]] = None,
    ) -> CompiledGrammar: ...
    def compile_grammar(self, ebnf: str) -> CompiledGrammar: ...
    def compile_regex(self, pattern: str) -> CompiledGrammar: ...
    def compile_structural_tag(self, structural_tag: Union[str, dict[str, Any]]) -> CompiledGrammar: ...
    def compile_tools(
        self,
        format: Format,
        tools: Optional[list[dict[str, Any]]] = None,
        tool_choice: Union[str, dict[str, Any], None] = None,
        parallel_tool_calls: bool = True,
        thinking: Optional[bool] = None,
        response_format: Optional[dict[str, Any]] = None,
        reasoning_budget: Optional[int] = None,
        strict: Optional[bool] = None,
    ) -> CompiledGrammar:
        """An assistant turn under the template's own syntax: reasoning, content, calls to `tools`."""
    def get_cache_size_bytes(self) -> int: ...
    def clear_cache(self) -> None: ...

def structural_tag(
    format: Format,
    tools: Optional[list[dict[str, Any]]] = None,
    tool_choice: Union[str, dict[str, Any], None] = None,
    parallel_tool_calls: bool = True,
    thinking: Optional[bool] = None,
    response_format: Optional[dict[str, Any]] = None,
    reasoning_budget: Optional[int] = None,
    strict: Optional[bool] = None,
) -> dict[str, Any]:
    """The XGrammar structural tag of an assistant turn, for a server's `response_format`."""

class GrammarMatcher:
    """Follows one sequence through a compiled grammar."""

    def __init__(self, compiled: CompiledGrammar) -> None: ...
    def accept_token(self, token_id: int) -> bool: ...
    def accept_string(self, text: str) -> bool: ...
    def fill_next_token_bitmask(self, bitmask: Any, index: int = 0) -> None:
        """Writes row `index` of an int32 numpy array or CPU torch tensor (`allocate_token_bitmask`)."""
    def validate_tokens(self, token_ids: list[int]) -> int:
        """How many tokens of a draft the grammar accepts in order, without advancing."""
    def rollback(self, num_tokens: int = 1) -> None: ...
    def find_jump_forward_string(self) -> str: ...
    def is_terminated(self) -> bool: ...
    def is_accepting(self) -> bool: ...
    def reset(self) -> None: ...
    def fork(self) -> GrammarMatcher: ...
    @property
    def eos_token_ids(self) -> list[int]: ...
    @property
    def mask_words(self) -> int: ...

def batch_fill_next_token_bitmask(
    matchers: list[GrammarMatcher], bitmask: Any, indices: Optional[list[int]] = None
) -> None:
    """Row `i` (or `indices[i]`) for `matchers[i]`, all in parallel without the GIL."""

def allocate_token_bitmask(batch_size: int, vocab_size: int) -> Any:
    """A numpy int32 array `(batch_size, ceil(vocab_size / 32))`, all tokens allowed."""

def apply_token_bitmask_inplace(
    logits: Any, bitmask: Any, *, vocab_size: Optional[int] = None, indices: Optional[list[int]] = None
) -> None:
    """Sets disallowed tokens' logits to -inf (numpy or torch)."""
