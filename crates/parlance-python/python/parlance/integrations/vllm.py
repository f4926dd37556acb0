"""vLLM plugins: one tool parser and one reasoning parser for every model, configured from the model's
own chat template (the tokenizer's `chat_template`), registered as `parlance`:

    vllm serve MODEL --enable-auto-tool-choice \\
        --tool-parser-plugin "$(python -c 'import parlance.integrations.vllm as m; print(m.__file__)')" \\
        --tool-call-parser parlance \\
        --reasoning-parser-plugin "$(python -c 'import parlance.integrations.vllm as m; print(m.__file__)')" \\
        --reasoning-parser parlance

The tool parser parses whole and streamed output with the template's `Format`; for `tool_choice`
`required` or a named function, or tools marked `strict`, it holds generation to the template's own
call syntax with a structural tag (`response_format`-free: it sets the request's structured outputs).
The reasoning parser separates reasoning by the Format's markers. Written against vLLM 0.33.0.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from vllm.entrypoints.generate.base.protocol import (
    DeltaFunctionCall,
    DeltaMessage,
    DeltaToolCall,
    ExtractedToolCallInformation,
    FunctionCall,
    ToolCall,
)
from vllm.reasoning.abs_reasoning_parsers import ReasoningParser, ReasoningParserManager
from vllm.sampling_params import StructuredOutputsParams
from vllm.tool_parsers.abstract_tool_parser import ToolParser, ToolParserManager

import parlance
from parlance.integrations import dump as _dump, format_for


def _request_tools(request: Any) -> list[dict]:
    return [_dump(t) for t in (getattr(request, "tools", None) or [])]


def _tool_choice(request: Any) -> Any:
    choice = getattr(request, "tool_choice", None) or "auto"
    return choice if isinstance(choice, str) else _dump(choice)


def _thinking(request: Any) -> bool | None:
    kwargs = getattr(request, "chat_template_kwargs", None) or {}
    for key in ("enable_thinking", "thinking"):
        if isinstance(kwargs.get(key), bool):
            return kwargs[key]
    return None


@ToolParserManager.register_module("parlance")
class ParlanceToolParser(ToolParser):
    """Tool calls in the model's own syntax, derived from its chat template."""

    # Required and named tool choices are parsed in the model's syntax, not vLLM's JSON fallback.
    supports_required_and_named = False

    def __init__(self, tokenizer: Any, tools: list | None = None):
        super().__init__(tokenizer, tools)
        self.format = format_for(tokenizer)
        self._stream = None
        self._arguments: list[str] = []

    def _parser(self, request: Any, truncated_calls: str = "keep") -> parlance.Parser:
        # vLLM hands this parser the text after reasoning when a reasoning parser runs first; read
        # it as starting outside reasoning either way, so calls are found even where the prompt
        # opened a reasoning block (without a reasoning parser, reasoning text stays content).
        return parlance.Parser(
            self.format,
            tools=_request_tools(request) or None,
            tool_choice=_tool_choice(request),
            parallel_tool_calls=getattr(request, "parallel_tool_calls", True) is not False,
            thinking=_thinking(request),
            in_reasoning=False,
            truncated_calls=truncated_calls,
        )

    def adjust_request(self, request: Any) -> Any:
        tools = _request_tools(request)
        choice = _tool_choice(request)
        strict = any(t.get("function", {}).get("strict") for t in tools)
        if not tools or choice == "none" or (choice == "auto" and not strict):
            return request
        if getattr(request, "structured_outputs", None) is not None:
            return request
        tag = parlance.structural_tag(
            self.format,
            tools=tools,
            tool_choice=choice,
            parallel_tool_calls=getattr(request, "parallel_tool_calls", True) is not False,
            thinking=_thinking(request),
        )
        request.structured_outputs = StructuredOutputsParams(structural_tag=json.dumps(tag))
        if hasattr(request, "response_format"):
            request.response_format = None
        return request

    def extract_tool_calls(self, model_output: str, request: Any) -> ExtractedToolCallInformation:
        # A call the output ends inside (cut by max_tokens) is no call to hand a client that runs
        # it: dropped, as vLLM's own parsers do (its text is not content either). A stream keeps
        # it: its deltas went out as they came.
        message = self._parser(request, truncated_calls="drop").parse(model_output)
        calls = [
            ToolCall(id=c["id"], function=FunctionCall(name=c["function"]["name"], arguments=c["function"]["arguments"]))
            for c in message.get("tool_calls") or []
        ]
        return ExtractedToolCallInformation(tools_called=bool(calls), tool_calls=calls, content=message.get("content"))

    def extract_tool_calls_streaming(
        self,
        previous_text: str,
        current_text: str,
        delta_text: str,
        previous_token_ids: Sequence[int],
        current_token_ids: Sequence[int],
        delta_token_ids: Sequence[int],
        request: Any,
    ) -> DeltaMessage | None:
        if self._stream is None:
            self._stream = self._parser(request).stream()
            # Text before this call (vLLM may start streaming tools after other parsers).
            deltas = self._stream.push(previous_text) if previous_text else []
            deltas += self._stream.push(delta_text)
        else:
            deltas = self._stream.push(delta_text)
        return self._delta_message(deltas)

    def _delta_message(self, deltas: list[dict]) -> DeltaMessage | None:
        content, calls = "", []
        for delta in deltas:
            content += delta.get("content") or ""
            for call in delta.get("tool_calls") or []:
                index = call["index"]
                function = call.get("function") or {}
                while len(self.prev_tool_call_arr) <= index:
                    self.prev_tool_call_arr.append({})
                    self.streamed_args_for_tool.append("")
                entry = self.prev_tool_call_arr[index]
                if "name" in function:
                    entry["name"] = function["name"]
                    entry.setdefault("arguments", "")
                    self.current_tool_id = index
                    self.current_tool_name_sent = True
                arguments = function.get("arguments") or ""
                entry["arguments"] = entry.get("arguments", "") + arguments
                self.streamed_args_for_tool[index] += arguments
                calls.append(
                    DeltaToolCall(
                        index=index,
                        id=call.get("id"),
                        type=call.get("type"),
                        function=DeltaFunctionCall(name=function.get("name"), arguments=arguments or None),
                    )
                )
        if not content and not calls:
            return None
        return DeltaMessage(content=content or None, tool_calls=calls)


@ReasoningParserManager.register_module("parlance")
class ParlanceReasoningParser(ReasoningParser):
    """Reasoning separated by the markers the model's chat template uses."""

    def __init__(self, tokenizer: Any, *args: Any, **kwargs: Any):
        super().__init__(tokenizer, *args, **kwargs)
        self.format = format_for(tokenizer)
        reasoning = self.format.to_dict().get("reasoning") or {}
        self._start = (reasoning.get("start") or "").strip()
        self._end = (reasoning.get("end") or "").strip()
        encode = lambda text: tokenizer.encode(text, add_special_tokens=False) if text else []  # noqa: E731
        self._end_ids = encode(self._end)
        self._start_ids = encode(self._start)
        self._stream = None

    @property
    def reasoning_start_str(self) -> str | None:
        return self._start or None

    @property
    def reasoning_end_str(self) -> str | None:
        return self._end or None

    @staticmethod
    def _last(ids: Sequence[int], needle: list[int]) -> int:
        """Where the last occurrence of `needle` in `ids` ends, or -1."""
        n = len(needle)
        if n == 0:
            return -1
        for at in range(len(ids) - n, -1, -1):
            if list(ids[at : at + n]) == needle:
                return at + n
        return -1

    def is_reasoning_end(self, input_ids: Sequence[int]) -> bool:
        end = self._last(input_ids, self._end_ids)
        return end >= 0 and end > self._last(input_ids, self._start_ids)

    def extract_content_ids(self, input_ids: list[int]) -> list[int]:
        end = self._last(input_ids, self._end_ids)
        return list(input_ids[end:]) if end >= 0 else []

    def _parser(self, request: Any) -> parlance.Parser:
        return parlance.Parser(self.format, thinking=_thinking(request) if request is not None else None)

    def _content_from(self, text: str, reasoning: str | None) -> int:
        """Where the content (calls included, raw, for the tool parser) starts in `text`."""
        if not reasoning and not (self._end and self._end in text):
            return 0
        at = text.find(self._end) if self._end else -1
        return at + len(self._end) if at >= 0 else len(text)

    def extract_reasoning(self, model_output: str, request: Any) -> tuple[str | None, str | None]:
        reasoning = self._parser(request).parse(model_output).get("reasoning_content")
        content = model_output[self._content_from(model_output, reasoning) :].lstrip()
        return reasoning, content or None

    def extract_reasoning_streaming(
        self,
        previous_text: str,
        current_text: str,
        delta_text: str,
        previous_token_ids: Sequence[int],
        current_token_ids: Sequence[int],
        delta_token_ids: Sequence[int],
    ) -> DeltaMessage | None:
        if self._stream is None:
            self._stream = self._parser(None).stream()
            self._reasoning_over = False
            self._content_sent = 0
            deltas = self._stream.push(previous_text + delta_text)
        else:
            deltas = self._stream.push(delta_text)
        reasoning = "".join(d.get("reasoning_content") or "" for d in deltas)
        content = ""
        if self._reasoning_over or any(d.get("content") or d.get("tool_calls") for d in deltas):
            # Reasoning is over: the rest is content as written (the tool parser reads the calls).
            if not self._reasoning_over:
                self._reasoning_over = True
                at = current_text.find(self._end) if self._end else -1
                start = at + len(self._end) if at >= 0 else 0
                stripped = current_text[start:]
                self._content_sent = start + len(stripped) - len(stripped.lstrip())
            content = current_text[self._content_sent :]
            self._content_sent = len(current_text)
        if not reasoning and not content:
            return None
        return DeltaMessage(reasoning=reasoning or None, content=content or None)
