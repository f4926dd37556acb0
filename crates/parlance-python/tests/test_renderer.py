"""The turn loop from Python: render to ids, parse the completion, bridge to the next prompt."""

import json

import parlance

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def test_render_parse_bridge(corpus, tokenizers):
    from tokenizers import Tokenizer
    template = parlance.ChatTemplate.from_pretrained(corpus / "templates" / "Qwen-Qwen3-0.6B.jinja")
    renderer = parlance.Renderer(template, tokenizers / "qwen3")
    conversation = [{"role": "user", "content": "Weather in Paris?"}]
    ids, owners = renderer.render(conversation, tools=TOOLS)
    assert len(ids) == len(owners) and 0 in owners and -1 in owners
    # The completion as the model writes it, ending with its stop token.
    completion = '<think>\nParis.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    stop = renderer.stop_token_ids
    message = parlance.Parser(template, tools=TOOLS).parse(completion)
    assistant = renderer.to_assistant_message(message)
    assert "issues" not in assistant and json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris"}
    result = {"role": "tool", "tool_call_id": assistant["tool_calls"][0]["id"], "content": '{"temperature": 21}'}
    completion_ids = Tokenizer.from_file(str(tokenizers / "qwen3" / "tokenizer.json")).encode(completion, add_special_tokens=False).ids + stop[:1]
    next_ids = renderer.bridge(ids, completion_ids, [result], tools=TOOLS)
    assert next_ids[: len(ids) + len(completion_ids)] == ids + completion_ids
    # The tail is what a full render of the next request writes after the completion.
    # (Qwen3's template reads the content as a string: a call-only message sends "".)
    sent = {**assistant, "content": assistant["content"] or ""}
    full = template.apply_chat_template(conversation + [sent, result], tools=TOOLS, add_generation_prompt=True)
    tail = Tokenizer.from_file(str(tokenizers / "qwen3" / "tokenizer.json")).decode(next_ids[len(ids) + len(completion_ids):], skip_special_tokens=False)
    assert full.endswith(tail) and "temperature" in tail, tail
    # The loss mask covers the assistant's tokens only.
    sample = conversation + [{"role": "assistant", "content": "Sunny."}]
    mask = renderer.loss_mask(sample)
    ids, owners = renderer.render(sample, add_generation_prompt=False)
    assert mask == [o == 1 for o in owners]
