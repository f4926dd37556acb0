"""The SGLang plugins (skipped where SGLang is not installed; run with SGLang 0.5.23): registered
under `parlance`; the detector, configured from the tokenizer's own chat template, gives the same
calls whole and streamed through SGLang's own `FunctionCallParser`; `tool_choice: required` gets a
structural tag in the template's syntax that the grammar backend compiles and that admits the
template's call; the reasoning detector splits by the template's markers; the grammar backend masks
JSON Schemas token by token."""

import json

import pytest

import parlance

sglang = pytest.importorskip("sglang")
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
CALLS = ('Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
         '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lima"}}\n</tool_call>')


@pytest.fixture(scope="module")
def qwen(corpus, tokenizers):
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_file=str(tokenizers / "qwen3" / "tokenizer.json"),
                                                     eos_token="<|im_end|>")
    tokenizer.chat_template = (corpus / "templates" / "Qwen-Qwen3-0.6B.jinja").read_text()
    return tokenizer


@pytest.fixture(scope="module")
def plugin():
    import parlance.integrations.sglang as plugin

    plugin.register()
    return plugin


def tools():
    from sglang.srt.entrypoints.openai.protocol import Tool

    return [Tool.model_validate(t) for t in TOOLS]


def test_register_adds_the_detectors_and_the_backend(plugin):
    from sglang.srt.constrained.base_grammar_backend import GRAMMAR_BACKEND_REGISTRY
    from sglang.srt.function_call.function_call_parser import FunctionCallParser
    from sglang.srt.parser.reasoning_parser import ReasoningParser

    assert FunctionCallParser.ToolCallParserEnum["parlance"] is plugin.ParlanceDetector
    assert ReasoningParser.DetectorMap["parlance"] is plugin.ParlanceReasoningDetector
    assert "parlance" in GRAMMAR_BACKEND_REGISTRY


def test_calls_whole_and_streamed_through_sglangs_parser(plugin, qwen):
    from sglang.srt.function_call.function_call_parser import FunctionCallParser

    text, calls = FunctionCallParser(tools(), "parlance", tokenizer=qwen).parse_non_stream(CALLS)
    assert text.strip() == "Checking."
    assert [(c.tool_index, c.name, json.loads(c.parameters)) for c in calls] == [
        (0, "get_weather", {"city": "Paris"}), (0, "get_weather", {"city": "Lima"})]
    for size in (1, 4, 23):
        parser = FunctionCallParser(tools(), "parlance", tokenizer=qwen)
        streamed, names, arguments = "", {}, {}
        pieces = [CALLS[at : at + size] for at in range(0, len(CALLS), size)]
        results = [parser.parse_stream_chunk(p) for p in pieces] + [parser.parse_stream_end()]
        for normal, items in results:
            streamed += normal
            for item in items:
                if item.name:
                    names[item.tool_index] = item.name
                arguments[item.tool_index] = arguments.get(item.tool_index, "") + item.parameters
        assert streamed.strip() == "Checking.", size
        assert names == {0: "get_weather", 1: "get_weather"}, size
        assert [json.loads(arguments[i]) for i in (0, 1)] == [{"city": "Paris"}, {"city": "Lima"}], size


def test_required_calls_get_the_templates_structural_tag(plugin, qwen):
    from sglang.srt.function_call.function_call_parser import FunctionCallParser

    parser = FunctionCallParser(tools(), "parlance", tokenizer=qwen)
    kind, tag = parser.get_structure_constraint("required")
    assert kind == "structural_tag"
    doc = tag.model_dump(by_alias=True)
    assert doc == parlance.structural_tag(parser.detector.format, tools=TOOLS, tool_choice="required", thinking=False)
    backend = plugin.ParlanceGrammarBackend(qwen, len(qwen), {qwen.convert_tokens_to_ids("<|im_end|>")})
    grammar = backend.dispatch_structural_tag(json.dumps(doc))
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    for token in qwen.encode(call, add_special_tokens=False):
        grammar.accept_token(token)
    refused = backend.dispatch_structural_tag(json.dumps(doc))
    with pytest.raises(ValueError):
        for token in qwen.encode("Sure, here", add_special_tokens=False):
            refused.accept_token(token)


def test_reasoning_by_the_templates_markers(plugin, qwen):
    from sglang.srt.parser.reasoning_parser import ReasoningParser

    parser = ReasoningParser("parlance", tokenizer=qwen, force_reasoning=False)
    reasoning, rest = parser.parse_non_stream("<think>\nParis it is.\n</think>\n\nHello.")
    assert reasoning.strip() == "Paris it is." and rest.strip() == "Hello."


def test_backend_masks_a_json_schema_token_by_token(plugin, qwen):
    from sglang.srt.constrained.base_grammar_backend import GRAMMAR_BACKEND_REGISTRY, InvalidGrammarObject

    eos = qwen.convert_tokens_to_ids("<|im_end|>")
    backend = GRAMMAR_BACKEND_REGISTRY["parlance"](None, qwen, len(qwen), {eos})
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    grammar = backend.dispatch_json(json.dumps(schema))
    mask = grammar.allocate_vocab_mask(len(qwen), 2, "cpu")
    ids = qwen.encode('{"n": 42}', add_special_tokens=False) + [eos]
    for token in ids:
        grammar.fill_vocab_mask(mask, 1)
        assert (int(mask[1, token // 32]) >> (token % 32)) & 1, token
        grammar.accept_token(token)
    assert grammar.is_terminated()
    # A copy starts over; the batched fill writes the rows it is given.
    again = grammar.copy()
    type(again).fill_vocab_mask_batched([type("Row", (), {"grammar": again, "row": 0})()], mask)
    bad = qwen.encode("x", add_special_tokens=False)[0]
    assert not (int(mask[0, bad // 32]) >> (bad % 32)) & 1
    logits = torch.zeros(2, len(qwen))
    type(again).apply_vocab_mask(logits, mask)
    assert logits[0, bad] == float("-inf") and logits[0, qwen.encode("{", add_special_tokens=False)[0]] == 0
    assert isinstance(backend.dispatch_json("{not json"), InvalidGrammarObject)


def test_reasoning_detector_refuses_a_template_without_markers_and_follows_the_prompt(plugin, qwen, corpus, tokenizers):
    llama = transformers.PreTrainedTokenizerFast(tokenizer_file=str(tokenizers / "llama3_1" / "tokenizer.json"))
    llama.chat_template = (corpus / "templates" / "meta-llama-Llama-3.1-8B-Instruct.jinja").read_text()
    with pytest.raises(ValueError, match="no reasoning"):
        plugin.ParlanceReasoningDetector(tokenizer=llama)
    # Qwen3's prompt opens nothing (the model writes `<think>`): reasoning is not forced.
    detector = plugin.ParlanceReasoningDetector(tokenizer=qwen)
    assert detector.reasoning_default is None and not detector.force_reasoning
    # DeepSeek R1 (llama.cpp's copy): the prompt opens `<think>`, output starts inside reasoning.
    r1 = transformers.PreTrainedTokenizerFast(tokenizer_file=str(tokenizers / "qwen3" / "tokenizer.json"))
    r1.chat_template = (corpus / "templates" / "llama-cpp-deepseek-r1.jinja").read_text()
    forced = plugin.ParlanceReasoningDetector(tokenizer=r1)
    assert forced.reasoning_default == "always" and forced.force_reasoning
    result = forced.detect_and_parse("Paris it is.\n</think>\n\nHello.")
    assert result.reasoning_text.strip() == "Paris it is." and result.normal_text.strip() == "Hello."
