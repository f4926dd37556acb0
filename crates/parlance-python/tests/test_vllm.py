"""The vLLM plugins (skipped where vLLM is not installed; run with vLLM 0.33.0): registered under
`parlance`, configured from the tokenizer's own chat template; whole and streamed parsing give the same
calls and content, the reasoning parser splits by the template's markers, and `tool_choice: required`
puts a structural tag of the template's syntax on the request."""

import json

import pytest

import parlance

vllm = pytest.importorskip("vllm")
transformers = pytest.importorskip("transformers")

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
OUTPUT = ('<think>\nThe user wants Paris.\n</think>\n\nChecking.\n<tool_call>\n{"name": "get_weather", '
          '"arguments": {"city": "Paris"}}\n</tool_call>\n<tool_call>\n{"name": "get_weather", "arguments": '
          '{"city": "Lima"}}\n</tool_call>')


@pytest.fixture(scope="module")
def qwen(corpus, tokenizers):
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_file=str(tokenizers / "qwen3" / "tokenizer.json"))
    tokenizer.chat_template = (corpus / "templates" / "Qwen-Qwen3-0.6B.jinja").read_text()
    return tokenizer


def request(tool_choice="auto"):
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    return ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hi"}], tools=TOOLS,
                                 tool_choice=tool_choice)


def test_the_plugins_register_under_parlance():
    import parlance.integrations.vllm as plugin
    from vllm.reasoning.abs_reasoning_parsers import ReasoningParserManager
    from vllm.tool_parsers.abstract_tool_parser import ToolParserManager

    assert ToolParserManager.get_tool_parser("parlance") is plugin.ParlanceToolParser
    assert ReasoningParserManager.get_reasoning_parser("parlance") is plugin.ParlanceReasoningParser


def test_tool_parser_whole_and_streamed(qwen):
    from parlance.integrations.vllm import ParlanceToolParser

    req = request()
    whole = ParlanceToolParser(qwen).extract_tool_calls(OUTPUT, req)
    assert whole.tools_called and [json.loads(c.function.arguments)["city"] for c in whole.tool_calls] == ["Paris", "Lima"]
    assert whole.content == "Checking."
    for size in (1, 3, 17):
        parser = ParlanceToolParser(qwen)
        content, names, arguments, previous = "", {}, {}, ""
        for at in range(0, len(OUTPUT), size):
            delta = OUTPUT[at : at + size]
            message = parser.extract_tool_calls_streaming(previous, previous + delta, delta, [], [], [], req)
            previous += delta
            if message is None:
                continue
            content += message.content or ""
            for call in message.tool_calls:
                if call.function and call.function.name:
                    names[call.index] = call.function.name
                arguments[call.index] = arguments.get(call.index, "") + ((call.function and call.function.arguments) or "")
        assert content == "Checking." and names == {0: "get_weather", 1: "get_weather"}, size
        assert [json.loads(arguments[i])["city"] for i in (0, 1)] == ["Paris", "Lima"], size
        assert [c["name"] for c in parser.prev_tool_call_arr] == ["get_weather"] * 2
        assert parser.streamed_args_for_tool == [arguments[0], arguments[1]]


def test_a_call_cut_by_the_token_limit_is_not_extracted(qwen):
    from parlance.integrations.vllm import ParlanceToolParser

    cut = OUTPUT[: OUTPUT.index("Lima") + 2]
    whole = ParlanceToolParser(qwen).extract_tool_calls(cut, request())
    assert [json.loads(c.function.arguments)["city"] for c in whole.tool_calls] == ["Paris"]
    assert whole.content == "Checking."


def test_required_tool_choice_constrains_with_the_templates_syntax(qwen):
    from parlance.integrations.vllm import ParlanceToolParser

    parser = ParlanceToolParser(qwen)
    assert parser.adjust_request(request("auto")).structured_outputs is None
    adjusted = parser.adjust_request(request("required"))
    tag = json.loads(adjusted.structured_outputs.structural_tag)
    assert tag["type"] == "structural_tag" and "<tool_call>" in json.dumps(tag) and "get_weather" in json.dumps(tag)


def test_reasoning_parser_splits_by_the_templates_markers(qwen):
    from parlance.integrations.vllm import ParlanceReasoningParser

    parser = ParlanceReasoningParser(qwen)
    assert (parser.reasoning_start_str, parser.reasoning_end_str) == ("<think>", "</think>")
    reasoning, content = parser.extract_reasoning(OUTPUT, request())
    assert reasoning == "The user wants Paris." and content.startswith("Checking.\n<tool_call>")
    ids = qwen.encode(OUTPUT, add_special_tokens=False)
    assert parser.is_reasoning_end(ids)
    assert not parser.is_reasoning_end(qwen.encode("<think>\nstill thinking", add_special_tokens=False))
    assert qwen.decode(parser.extract_content_ids(ids)).lstrip().startswith("Checking.")
    streamer = ParlanceReasoningParser(qwen)
    got_reasoning, got_content, previous = "", "", ""
    for at in range(0, len(OUTPUT), 5):
        delta = OUTPUT[at : at + 5]
        message = streamer.extract_reasoning_streaming(previous, previous + delta, delta, [], [], [])
        previous += delta
        if message:
            got_reasoning += message.reasoning or ""
            got_content += message.content or ""
    assert got_reasoning == reasoning and got_content == content


def test_tool_parser_reads_text_after_split_off_reasoning_as_content(corpus, tokenizers):
    # QwQ's prompt opens `<think>`: the text vLLM hands the tool parser (after the reasoning parser)
    # starts outside reasoning, so its content is content, not reasoning.
    from parlance.integrations.vllm import ParlanceToolParser

    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_file=str(tokenizers / "qwen3" / "tokenizer.json"))
    tokenizer.chat_template = (corpus / "templates" / "Qwen-QwQ-32B.jinja").read_text()
    text = 'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    result = ParlanceToolParser(tokenizer).extract_tool_calls(text, request())
    assert result.content == "Checking." and [c.function.name for c in result.tool_calls] == ["get_weather"]
