"""End to end with transformers (skipped where torch or transformers is not installed): a small
randomly initialized Llama model with the real Llama 3.1 tokenizer samples under the tool-call grammar
parlance derives from the Llama 3.1 chat template; every output parses into a call of the tool with
arguments its schema accepts."""

import json

import pytest

import parlance

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from parlance.integrations.transformers import LogitsProcessor  # noqa: E402

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object",
    "properties": {"city": {"enum": ["Paris", "Tokyo", "Lima"]}, "unit": {"enum": ["celsius", "fahrenheit"]},
                   "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["city", "unit", "days"], "additionalProperties": False}}}]


def test_a_random_model_under_the_template_grammar_writes_valid_calls(corpus, tokenizers):
    template = parlance.ChatTemplate.from_pretrained(corpus / "templates" / "meta-llama-Llama-3.1-8B-Instruct.jinja")
    fmt = parlance.analyze(template)
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_file=str(tokenizers / "llama3_1" / "tokenizer.json"))
    info = parlance.TokenizerInfo.from_huggingface(tokenizers / "llama3_1")
    compiled = parlance.GrammarCompiler(info).compile_tools(fmt, tools=TOOLS, tool_choice="required",
                                                            parallel_tool_calls=False)
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=info.vocab_size, hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)
    model = transformers.LlamaForCausalLM(config).eval()
    prompt = template.apply_chat_template([{"role": "user", "content": "Weather in Paris?"}], tools=TOOLS,
                                          add_generation_prompt=True, bos_token="<|begin_of_text|>")
    ids = tokenizer(prompt, add_special_tokens=False, return_tensors="pt").input_ids.repeat(4, 1)
    # A random model picks among the grammar's choices at random, and JSON allows whitespace anywhere:
    # it would write whitespace for most of its tokens. Tilt it away from whitespace-only tokens (the
    # grammar still decides what may come).
    vocab = tokenizer.convert_ids_to_tokens(list(range(info.vocab_size)))
    blank = torch.tensor([t is not None and t.strip("ĠĊĉč\u0120\u010a\u0109\u010d") == "" and t != "" for t in vocab])

    def fewer_blanks(input_ids, scores):
        return scores - 8.0 * blank[: scores.shape[-1]].to(scores.dtype)

    parser = parlance.Parser(fmt, tools=TOOLS)
    for seed in range(3):
        torch.manual_seed(seed)
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=True, max_new_tokens=120,
                             logits_processor=[fewer_blanks, LogitsProcessor(compiled)], eos_token_id=info.eos_token_ids,
                             pad_token_id=info.eos_token_ids[0])
        for row in out[:, ids.shape[1]:].tolist():
            ends = [i for i, t in enumerate(row) if t in info.eos_token_ids]
            assert ends, f"seed {seed}: no end of turn in {tokenizer.decode(row)!r}"
            text = tokenizer.decode(row[: ends[0]])
            message = parser.parse(text)
            assert not message["issues"], (text, message["issues"])
            (call,) = message["tool_calls"]
            assert call["function"]["name"] == "get_weather"
            args = json.loads(call["function"]["arguments"])
            assert args["city"] in ("Paris", "Tokyo", "Lima") and args["unit"] in ("celsius", "fahrenheit")
            assert 1 <= args["days"] <= 7 and set(args) == {"city", "unit", "days"}, text
