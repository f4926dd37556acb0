"""Parsing from Python: the Format round-trips through JSON, streaming adds up to the whole parse."""

import json
import random

import parlance

TOOLS = [{"type": "function", "function": {"name": "get_weather",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
OUTPUT = '<think>\nThe user wants Paris.\n</think>\n\nChecking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


def qwen(corpus):
    return parlance.ChatTemplate.from_pretrained(corpus / "templates" / "Qwen-Qwen3-0.6B.jinja")


def test_format_round_trips_and_names_bad_words(corpus):
    fmt = parlance.analyze(qwen(corpus))
    data = fmt.to_dict()
    assert data["tool_format"] == "json-native" and data["reasoning"] == {"start": "<think>", "end": "</think>"}
    again = parlance.Format.from_json(fmt.to_json())
    assert again.to_dict() == data
    data["reasoning_details"]["mode"] = "forced_open"  # a typo: refused, not silently different
    try:
        parlance.Format.from_json(json.dumps(data))
    except ValueError as error:
        assert "forced_open" in str(error)
    else:
        raise AssertionError("an unknown reasoning mode was accepted")


def test_parse_gives_an_openai_message(corpus):
    parser = parlance.Parser(qwen(corpus), tools=TOOLS)
    message = parser.parse(OUTPUT)
    assert message["role"] == "assistant"
    assert message["reasoning_content"] == "The user wants Paris."
    assert message["content"] == "Checking."
    call = message["tool_calls"][0]
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert message["issues"] == []
    # tool_choice as OpenAI writes it: a call the request does not allow is reported.
    only_other = {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": [{"type": "function", "function": {"name": "other"}}]}}
    kinds = [i["kind"] for i in parlance.Parser(qwen(corpus), tools=TOOLS, tool_choice=only_other).parse(OUTPUT)["issues"]]
    assert kinds == ["disallowed-tool"]


def test_stream_adds_up_to_the_whole_parse(corpus):
    fmt = parlance.analyze(qwen(corpus))
    parser = parlance.Parser(fmt, tools=TOOLS, id_seed=7)
    whole = parser.parse(OUTPUT)
    rng = random.Random(7)
    for _ in range(20):
        stream = parser.stream()
        deltas, at = [], 0
        while at < len(OUTPUT):
            step = rng.randint(1, 9)
            deltas += stream.push(OUTPUT[at : at + step])
            at += step
        deltas += stream.finish()
        assert stream.message() == whole
        content = "".join(d.get("content") or "" for d in deltas)
        reasoning = "".join(d.get("reasoning_content") or "" for d in deltas)
        assert content == whole["content"] and reasoning == whole["reasoning_content"], deltas
        # Calls stream in OpenAI's shape: a first delta with id, type and name, then argument pieces.
        calls = [c for d in deltas for c in d.get("tool_calls") or []]
        assert calls[0]["id"] == whole["tool_calls"][0]["id"] and calls[0]["type"] == "function"
        assert calls[0]["function"]["name"] == "get_weather"
        assert "".join(c["function"]["arguments"] for c in calls) == whole["tool_calls"][0]["function"]["arguments"]


def test_truncated_calls_are_kept_or_dropped(corpus):
    cut = OUTPUT[: OUTPUT.index('"Paris"') + 4]
    kept = parlance.Parser(qwen(corpus), tools=TOOLS).parse(cut)
    assert [c["function"]["name"] for c in kept["tool_calls"]] == ["get_weather"]
    dropper = parlance.Parser(qwen(corpus), tools=TOOLS, truncated_calls="drop")
    dropped = dropper.parse(cut)
    assert not dropped.get("tool_calls") and dropped["content"] == "Checking."
    assert "truncated-call" in [i["kind"] for i in dropped["issues"]]
    stream = dropper.stream()
    deltas = stream.push(cut) + stream.finish()
    assert not [d for d in deltas if d.get("tool_calls")]
    assert stream.message() == dropped
    try:
        parlance.Parser(qwen(corpus), truncated_calls="maybe")
    except ValueError as error:
        assert "maybe" in str(error)
    else:
        raise AssertionError("an unknown truncated_calls was accepted")
