"""Constrained decoding from Python with XGrammar's names: masks walk valid instances token by token
and refuse invalid ones, batches fill like single matchers, and a template's own tool-call syntax
constrains a real tokenizer's tokens."""

import json

import numpy as np
import pytest
import tokenizers

import parlance

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 20}, "days": {"type": "integer", "minimum": 1}},
    "required": ["city", "days"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def llama(tokenizers):
    path = tokenizers / "llama3_1"
    return parlance.TokenizerInfo.from_huggingface(path), tokenizers_lib_tokenizer(path)


def tokenizers_lib_tokenizer(path):
    return tokenizers.Tokenizer.from_file(str(path / "tokenizer.json"))


def allowed(bitmask, row, token):
    return bool((int(bitmask[row, token // 32]) >> (token % 32)) & 1)


def walk(matcher, bitmask, ids):
    """Fills the mask before each token and accepts it; the index of the first refused token, else None."""
    for step, token in enumerate(ids):
        matcher.fill_next_token_bitmask(bitmask)
        if not allowed(bitmask, 0, token):
            assert not matcher.accept_token(token), "a token outside the mask was accepted"
            return step
        assert matcher.accept_token(token), f"a token inside the mask was refused at step {step}"
    return None


def test_tokenizer_info_from_a_path_or_a_tokenizer_object(llama, tokenizers):
    info, hf = llama
    assert info.vocab_size == hf.get_vocab_size(with_added_tokens=True) == 128256
    assert info.eos_token_ids == [128009]  # <|eot_id|>, the tokenizer_config's eos_token
    from_object = parlance.TokenizerInfo.from_huggingface(hf, eos_token_ids=[128001, 128009])
    assert from_object.vocab_size == info.vocab_size and from_object.eos_token_ids == [128001, 128009]
    assert ("<|end_header_id|>", 128007) in info.special_tokens
    with pytest.raises(TypeError):
        parlance.TokenizerInfo.from_huggingface(42)


def test_json_schema_masks_walk_valid_instances_and_refuse_invalid_ones(llama):
    info, hf = llama
    compiled = parlance.GrammarCompiler(info).compile_json_schema(SCHEMA)
    bitmask = parlance.allocate_token_bitmask(1, info.vocab_size)
    assert bitmask.shape == (1, 4008) and bitmask.dtype == np.int32
    for text in ['{"city": "Paris", "days": 3}', '{ "city":"Reykjavík","days":12 }']:
        matcher = parlance.GrammarMatcher(compiled)
        assert walk(matcher, bitmask, hf.encode(text, add_special_tokens=False).ids) is None, text
        matcher.fill_next_token_bitmask(bitmask)
        assert allowed(bitmask, 0, 128009) and matcher.accept_token(128009) and matcher.is_terminated()
    for text in ['{"city": "Paris"}', '{"city": "Paris", "days": 0}', '{"days": 3, "city": "x"}',
                 '{"city": "' + "x" * 21 + '", "days": 3}', '{"city": "Paris", "days": 3, "x": 1}']:
        matcher = parlance.GrammarMatcher(compiled)
        ids = hf.encode(text, add_special_tokens=False).ids + [128009]
        assert walk(matcher, bitmask, ids) is not None, f"accepted {text}"


def test_compiler_threads_as_xgrammar_names_them(llama):
    # XGrammar's `GrammarCompiler(tokenizer_info, max_threads=8, ...)`: one thread or many, the same
    # language (eight tools none seen before: enough to build some on worker threads).
    info, hf = llama
    tags = [{"type": "tag", "begin": f"<tool{i}>", "end": "</tool>",
             "content": {"type": "json_schema", "json_schema": {"type": "object", "properties": {
                 f"threads_{i}": {"type": "integer"}}, "required": [f"threads_{i}"]}}} for i in range(8)]
    doc = {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<tool"], "tags": tags}}
    bitmask = parlance.allocate_token_bitmask(1, info.vocab_size)
    for threads in (4, 1):  # the first builds the tools ahead, the second finds them cached
        compiled = parlance.GrammarCompiler(info, max_threads=threads).compile_structural_tag(doc)
        for text, ok in [('<tool3>{"threads_3": 7}</tool>', True), ('<tool3>{"threads_4": 7}</tool>', False)]:
            ids = hf.encode(text, add_special_tokens=False).ids + [128009]
            assert (walk(parlance.GrammarMatcher(compiled), bitmask, ids) is None) == ok, (threads, text)
    with pytest.raises(ValueError):
        parlance.GrammarCompiler(info, max_threads=0)


def test_matcher_operations(llama):
    info, hf = llama
    compiler = parlance.GrammarCompiler(info)
    compiled = compiler.compile_json_schema({"type": "object", "properties": {"kind": {"const": "forecast"}},
                                             "required": ["kind"]}, any_whitespace=False)
    matcher = parlance.GrammarMatcher(compiled)
    assert matcher.find_jump_forward_string() == '{"kind": "forecast"}'
    ids = hf.encode('{"kind": "forecast"}', add_special_tokens=False).ids
    assert matcher.validate_tokens(ids + [999]) == len(ids)
    assert matcher.accept_string('{"kind"')
    assert not matcher.accept_string("x")
    fork = matcher.fork()
    matcher.rollback(1)  # one step: the whole string
    assert matcher.accept_string('{"kind"') and matcher.accept_string(': ')
    with pytest.raises(ValueError):
        matcher.rollback(3)
    matcher.reset()
    assert matcher.accept_string('{"kind": "forecast"}') and matcher.is_accepting()
    assert fork.accept_string(': "forecast"}') and fork.is_accepting()
    assert compiler.get_cache_size_bytes() > 0
    compiler.clear_cache()
    regex = compiler.compile_regex(r"(yes|no)\.")
    assert parlance.GrammarMatcher(regex).accept_string("no.")
    assert not parlance.GrammarMatcher(regex).accept_string("maybe")
    ebnf = compiler.compile_grammar('root ::= "a" [0-9]+')
    assert parlance.GrammarMatcher(ebnf).accept_string("a42")
    with pytest.raises(parlance.GrammarError):
        compiler.compile_grammar("root ::= undefined_rule")
    with pytest.raises(parlance.GrammarError) as error:
        compiler.compile_json_schema({"type": "integer", "minimum": 123456789012345678901234567890})
    assert "minimum" in str(error.value)


def test_batch_fill_equals_single_fills_and_checks_its_arguments(llama):
    info, hf = llama
    compiler = parlance.GrammarCompiler(info)
    schemas = [SCHEMA, {"type": "array", "items": {"type": "boolean"}}, {"type": "string", "pattern": "^[a-c]+$"}]
    matchers = [parlance.GrammarMatcher(compiler.compile_json_schema(s)) for s in schemas]
    matchers[0].accept_string('{"city": "Pa')
    matchers[1].accept_string("[true, ")
    batch = parlance.allocate_token_bitmask(4, info.vocab_size)
    parlance.batch_fill_next_token_bitmask(matchers, batch, indices=[3, 0, 1])
    for row, matcher in zip([3, 0, 1], matchers):
        single = parlance.allocate_token_bitmask(1, info.vocab_size)
        matcher.fill_next_token_bitmask(single)
        assert (batch[row] == single[0]).all()
    assert (batch[2] == -1).all(), "a row no matcher names is left as it was"
    with pytest.raises(ValueError, match="twice"):
        parlance.batch_fill_next_token_bitmask(matchers, batch, indices=[0, 0, 1])
    with pytest.raises(ValueError, match="out of"):
        matchers[0].fill_next_token_bitmask(batch, 4)
    with pytest.raises(ValueError, match="int32"):
        matchers[0].fill_next_token_bitmask(np.zeros((1, 4008), dtype=np.int64))
    read_only = parlance.allocate_token_bitmask(1, info.vocab_size)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        matchers[0].fill_next_token_bitmask(read_only)
    with pytest.raises(ValueError, match="contiguous"):
        matchers[0].fill_next_token_bitmask(parlance.allocate_token_bitmask(2, 2 * info.vocab_size)[:, ::2])


def test_apply_token_bitmask_inplace_on_numpy():
    bitmask = parlance.allocate_token_bitmask(2, 40)
    bitmask[0, :] = 0
    bitmask[0, 0] = 0b101  # tokens 0 and 2
    bitmask[1, 1] = 1  # token 32 (and 0..31 still allowed)
    logits = np.zeros((2, 40), dtype=np.float32)
    parlance.apply_token_bitmask_inplace(logits, bitmask)
    assert np.isfinite(logits[0]).nonzero()[0].tolist() == [0, 2]
    assert np.isfinite(logits[1]).nonzero()[0].tolist() == list(range(33))
    one = np.zeros(40, dtype=np.float32)
    parlance.apply_token_bitmask_inplace(one, bitmask[:1])
    assert np.isfinite(one).nonzero()[0].tolist() == [0, 2]


def test_a_templates_tool_call_syntax_constrains_real_tokens(corpus, tokenizers):
    template = parlance.ChatTemplate.from_pretrained(corpus / "templates" / "Qwen-Qwen3-0.6B.jinja")
    fmt = parlance.analyze(template)
    info = parlance.TokenizerInfo.from_huggingface(tokenizers / "qwen3")
    hf = tokenizers_lib_tokenizer(tokenizers / "qwen3")
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}]
    compiler = parlance.GrammarCompiler(info)
    compiled = compiler.compile_tools(fmt, tools=tools, tool_choice="required", thinking=False)
    bitmask = parlance.allocate_token_bitmask(1, info.vocab_size)
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}\n</tool_call>'
    matcher = parlance.GrammarMatcher(compiled)
    prefix = "<think>\n\n</think>\n\n"
    assert walk(matcher, bitmask, hf.encode(prefix + call, add_special_tokens=False).ids) is None
    assert parlance.Parser(fmt, tools=tools).parse(prefix + call)["tool_calls"][0]["function"]["name"] == "get_weather"
    wrong = call.replace("get_weather", "get_time")
    assert walk(parlance.GrammarMatcher(compiled), bitmask, hf.encode(prefix + wrong, add_special_tokens=False).ids) is not None
    tag = parlance.structural_tag(fmt, tools=tools, tool_choice="required")
    assert tag["type"] == "structural_tag" and "get_weather" in json.dumps(tag)
    assert parlance.GrammarMatcher(compiler.compile_structural_tag(tag)).accept_string(prefix + call)
