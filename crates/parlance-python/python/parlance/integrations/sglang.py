"""SGLang plugins: one tool-call detector and one reasoning detector for every model, configured from
the model's own chat template (the tokenizer's `chat_template`), and a grammar backend, all
registered as `parlance`. `register()` does it; installed, the package also names it as an SGLang
general plugin (entry point group `sglang.srt.plugins`), which SGLang loads in every process:

    python -m sglang.launch_server --model-path MODEL \\
        --tool-call-parser parlance --reasoning-parser parlance --grammar-backend parlance

The detector parses whole and streamed output with the template's `Format`; where SGLang asks for a
constraint (`tool_choice` required or named, strict tools) it returns parlance's structural tag in
the model's own call syntax, which any grammar backend that reads XGrammar's structural tags
enforces. The reasoning detector is SGLang's own, given the Format's markers. The grammar backend
compiles JSON Schemas, regexes, EBNF and structural tags with parlance's engine. Written against
SGLang 0.5.23.
"""

from __future__ import annotations

import json
from typing import Any

from sglang.srt.constrained.base_grammar_backend import (
    BaseGrammarBackend,
    BaseGrammarObject,
    InvalidGrammarObject,
    register_grammar_backend,
)
from sglang.srt.function_call.base_format_detector import BaseFormatDetector
from sglang.srt.function_call.core_types import StreamingParseResult, StructureInfo, ToolCallItem
from sglang.srt.function_call.function_call_parser import FunctionCallParser
from sglang.srt.parser.reasoning_parser import BaseReasoningFormatDetector, ReasoningParser

import parlance
from parlance.integrations import dump as _dump, format_for


class _Tag:
    """A structural tag where SGLang expects XGrammar's pydantic model (it reads `model_dump`)."""

    def __init__(self, doc: dict):
        self.doc = doc

    def model_dump(self, **_: Any) -> dict:
        return self.doc


class ParlanceDetector(BaseFormatDetector):
    """Tool calls in the model's own syntax, derived from its chat template. Use it with the reasoning
    detector (`--reasoning-parser parlance`) for models that reason: alone, it reads the output as
    starting after reasoning and returns content and calls only."""

    def __init__(self, tokenizer: Any = None):
        super().__init__()
        if tokenizer is None:
            raise ValueError("parlance: the detector needs the tokenizer, whose chat template it reads")
        self.format = format_for(tokenizer)
        self._stream = None
        # Whether parlance derives structural tags for this template at all (a family it does not
        # constrain yet leaves SGLang its own fallbacks).
        probe = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
        try:
            parlance.structural_tag(self.format, tools=[probe], tool_choice="required")
            self._constrainable = True
        except ValueError:
            self._constrainable = False

    def _parser(self, tools: Any, tool_choice: Any = "auto") -> parlance.Parser:
        # SGLang hands the detector the text after reasoning when a reasoning parser runs first:
        # read it as starting outside reasoning either way.
        return parlance.Parser(
            self.format, tools=[_dump(t) for t in tools or []] or None, tool_choice=tool_choice, in_reasoning=False
        )

    def _items(self, message: dict, tools: Any) -> list[ToolCallItem]:
        indices = self._get_tool_indices(tools or [])
        items = []
        for call in message.get("tool_calls") or []:
            name = call["function"]["name"]
            if name in indices:
                items.append(ToolCallItem(tool_index=indices[name], name=name, parameters=call["function"]["arguments"]))
        return items

    def detect_and_parse(self, text: str, tools: Any) -> StreamingParseResult:
        message = self._parser(tools).parse(text)
        return StreamingParseResult(normal_text=message.get("content") or "", calls=self._items(message, tools))

    def has_tool_call(self, text: str) -> bool:
        return bool(self._parser(None, "auto").parse(text).get("tool_calls"))

    def parse_streaming_increment(self, new_text: str, tools: Any) -> StreamingParseResult:
        if self._stream is None:
            self._stream = self._parser(tools).stream()
        return self._result(self._stream.push(new_text))

    def finish(self, tools: Any) -> StreamingParseResult:
        if self._stream is None:
            return StreamingParseResult()
        deltas = self._stream.finish()
        result = self._result(deltas)
        self._stream = None
        return result

    def _result(self, deltas: list[dict]) -> StreamingParseResult:
        # OpenAI deltas to SGLang's items: the call's position is its index, its name comes once,
        # its arguments in pieces.
        text, items = "", []
        for delta in deltas:
            text += delta.get("content") or ""
            for call in delta.get("tool_calls") or []:
                function = call.get("function") or {}
                items.append(
                    ToolCallItem(
                        tool_index=call["index"], name=function.get("name"), parameters=function.get("arguments") or ""
                    )
                )
        return StreamingParseResult(normal_text=text, calls=items)

    def supports_structural_tag(self) -> bool:
        return self._constrainable

    def structure_info(self) -> Any:
        def info(name: str) -> StructureInfo:
            raise NotImplementedError("parlance builds whole structural tags (get_structural_tag)")

        return info

    def get_structural_tag(
        self, tools: Any = None, tool_choice: Any = "auto", thinking_mode: bool = False, parallel_tool_calls: bool = True
    ) -> Any:
        choice = tool_choice if isinstance(tool_choice, str) else _dump(tool_choice)
        if isinstance(choice, dict) and "function" in choice:
            choice = {"type": "function", "function": {"name": choice["function"]["name"]}}
        try:
            doc = parlance.structural_tag(
                self.format,
                tools=[_dump(t) for t in tools or []],
                tool_choice=choice,
                parallel_tool_calls=parallel_tool_calls,
                # SGLang's reasoning backend owns the reasoning unless `thinking_mode` says ours does.
                thinking=None if thinking_mode else False,
            )
        except ValueError:
            return None
        return _Tag(doc)


class ParlanceReasoningDetector(BaseReasoningFormatDetector):
    """Reasoning separated by the markers the model's chat template uses (SGLang's own splitting)."""

    # SGLang's request options the base detector takes as they are.
    _PASSED = ("continue_final_message", "previous_content", "force_nonempty_content")

    def __init__(
        self, tokenizer: Any = None, stream_reasoning: bool = True, force_reasoning: bool | None = None, **kwargs: Any
    ):
        if tokenizer is None:
            raise ValueError("parlance: the reasoning detector needs the tokenizer, whose chat template it reads")
        fmt = format_for(tokenizer).to_dict()
        reasoning = fmt.get("reasoning") or {}
        start, end = (reasoning.get("start") or "").strip(), (reasoning.get("end") or "").strip()
        if not start or not end:
            # SGLang's splitter loops on an empty marker: refuse, saying why.
            raise ValueError(
                f"parlance: the chat template shows no reasoning start and end markers (found {start!r}, {end!r});"
                " serve this model without --reasoning-parser"
            )
        details = fmt.get("reasoning_details") or {}
        opens = lambda prompt: bool(prompt) and prompt.rstrip().endswith(start)  # noqa: E731
        thinking_off, thinking_on = details.get("generation_prompt_thinking_off"), details.get("generation_prompt_thinking_on")
        # How SGLang decides, per request, whether output starts inside reasoning: as the template's
        # own prompt leaves it (always open; open unless `enable_thinking` is false; open only when
        # it is true; never, the model writes the opener).
        if opens(fmt.get("generation_prompt")):
            default = "enable_thinking" if thinking_off is not None and not opens(thinking_off) else "always"
        elif opens(thinking_on):
            default = "explicit_enable_thinking"
        else:
            default = None
        if force_reasoning is None:
            force_reasoning = default == "always"
        passed = {k: v for k, v in kwargs.items() if k in self._PASSED}
        super().__init__(
            start,
            end,
            force_reasoning=force_reasoning,
            stream_reasoning=stream_reasoning,
            reasoning_default=default,
            **passed,
        )


class ParlanceGrammar(BaseGrammarObject):
    """One request's matcher."""

    def __init__(self, compiled: Any, key: str):
        super().__init__()
        self.compiled = compiled
        self.matcher = parlance.GrammarMatcher(compiled)
        self.key = key

    def accept_token(self, token: int) -> None:
        if not self.is_terminated():
            self.current_token = token
            if not self.matcher.accept_token(token):
                raise ValueError(f"parlance: token {token} not accepted by grammar {self.key[:200]!r}")

    def rollback(self, k: int) -> None:
        self.matcher.rollback(k)

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device: Any) -> Any:
        import torch

        return torch.from_numpy(parlance.allocate_token_bitmask(batch_size, vocab_size))

    def fill_vocab_mask(self, vocab_mask: Any, idx: int) -> None:
        self.matcher.fill_next_token_bitmask(vocab_mask, idx)

    @staticmethod
    def fill_vocab_mask_batched(entries: Any, vocab_mask: Any) -> None:
        # One call for the batch, in parallel, without the GIL.
        parlance.batch_fill_next_token_bitmask(
            [e.grammar.matcher for e in entries], vocab_mask, indices=[e.row for e in entries]
        )

    @staticmethod
    def reset_vocab_mask(vocab_mask: Any) -> None:
        vocab_mask.fill_(-1)

    @staticmethod
    def move_vocab_mask(vocab_mask: Any, device: Any) -> Any:
        return vocab_mask.to(device, non_blocking=True)

    @staticmethod
    def apply_vocab_mask(logits: Any, vocab_mask: Any) -> None:
        parlance.apply_token_bitmask_inplace(logits, vocab_mask)

    def copy(self) -> ParlanceGrammar:
        return ParlanceGrammar(self.compiled, self.key)

    def try_jump_forward(self, tokenizer: Any) -> Any:
        forced = self.matcher.find_jump_forward_string()
        return ([], forced) if forced else None

    def jump_forward_str_state(self, helper: Any) -> tuple[str, int]:
        return helper[1], -1

    def jump_and_retokenize(self, old_output_ids: list[int], new_output_ids: list[int], next_state: int) -> None:
        same = 0
        for old, new in zip(old_output_ids, new_output_ids):
            if old != new:
                break
            same += 1
        if same < len(old_output_ids):
            self.matcher.rollback(len(old_output_ids) - same)
        for token in new_output_ids[same:]:
            if not self.matcher.accept_token(token):
                raise ValueError(f"parlance: token {token} not accepted after retokenization")


class ParlanceGrammarBackend(BaseGrammarBackend):
    """JSON Schemas, regexes, EBNF and structural tags compiled by parlance's engine."""

    def __init__(self, tokenizer: Any, vocab_size: int, eos_token_ids: Any = None):
        super().__init__()
        eos = sorted(eos_token_ids) if eos_token_ids else None
        self.info = parlance.TokenizerInfo.from_huggingface(tokenizer, eos_token_ids=eos)
        self.compiler = parlance.GrammarCompiler(self.info)
        self.vocab_size = vocab_size

    def _compile(self, kind: str, key: str, compile_it: Any) -> BaseGrammarObject:
        try:
            return ParlanceGrammar(compile_it(), key)
        except (ValueError, parlance.GrammarError) as e:
            return InvalidGrammarObject(f"parlance: {kind}: {e}")

    def dispatch_json(self, key_string: str) -> BaseGrammarObject:
        schema = "{}" if key_string == "$$ANY$$" else key_string
        return self._compile("json_schema", key_string, lambda: self.compiler.compile_json_schema(schema))

    def dispatch_regex(self, key_string: str) -> BaseGrammarObject:
        return self._compile("regex", key_string, lambda: self.compiler.compile_regex(key_string))

    def dispatch_ebnf(self, key_string: str) -> BaseGrammarObject:
        return self._compile("ebnf", key_string, lambda: self.compiler.compile_grammar(key_string))

    def dispatch_structural_tag(self, key_string: str) -> BaseGrammarObject:
        return self._compile(
            "structural_tag", key_string, lambda: self.compiler.compile_structural_tag(json.loads(key_string))
        )


def register() -> None:
    """Registers the detectors and the grammar backend under the name `parlance` (idempotent)."""
    FunctionCallParser.ToolCallParserEnum["parlance"] = ParlanceDetector
    ReasoningParser.DetectorMap["parlance"] = ParlanceReasoningDetector
    register_grammar_backend(
        "parlance", lambda server_args, tokenizer, vocab_size, eos: ParlanceGrammarBackend(tokenizer, vocab_size, eos)
    )
    try:
        from sglang.srt.arg_groups.choices import GRAMMAR_BACKEND_CHOICES, add_grammar_backend_choices

        if "parlance" not in GRAMMAR_BACKEND_CHOICES:
            add_grammar_backend_choices(["parlance"])
    except ImportError:
        pass
