"""Differential renders: parlance against transformers on generated chat-template-like programs.

A seeded generator writes small Jinja programs of the kind chat templates are (loops over messages,
conditionals on roles, `set`, macros, namespaces, whitespace control, raw blocks, the builtin filters
and tests, Python string methods, literals with escapes, slices, printed containers) and
conversations to render them with (CJK, emoji, combining marks, NBSP, U+2028, HTML-special
characters, tool calls). Each case is rendered by transformers' own path (`apply_chat_template`'s
`_normalize_chat_messages`, then `render_jinja_template`: its sandboxed Jinja2 environment) and by `parlance.ChatTemplate`, and
classed:

- `same`: both render the same text;
- `both-error`: both raise;
- `differ`: both render, different texts;
- `parlance-error-only`: transformers renders, parlance raises;
- `ref-error-only`: parlance renders where transformers raises (parlance is more lenient);
- `crash`: parlance fails otherwise than with its own error (a panic surfacing in Python).

Run it: `python render_differential.py --cases 20000 --seed 1` prints the count of each class and
the first differing cases, each minimized (statements dropped while the class stays). The test
`test_render_differential.py` runs a fixed batch in CI against the ratchet
`render_differential.json`, which `--update-ratchet` rewrites.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import dataclass, field

import parlance

CLASSES = ("same", "both-error", "differ", "parlance-error-only", "ref-error-only", "crash")

# Text that templates meet in messages: scripts, marks, spaces and controls that escape or case
# mapping treat specially, HTML-special characters, quotes and braces.
PIECES = [
    "hello", "Hello World", "  padded  ", "a\nb", "tab\there", "日本語のテキスト", "中文", "한국어",
    "emoji 😀🎉", "e\u0301", "NBSP\u00a0here", "line\u2028sep", "<b>bold</b> & 'q' \"dq\"", "{{ not code }}",
    "{% raw %}", "ß straße", "İstanbul", "ǅ title", "x=1, y=2", "3.14", "42", "-7", "", " ", "ﬁ ligature",
    "\u00e9t\u00e9", "a,b,,c", "UPPER lower", "path/to/file", "50%", "back\\slash", "\x07bell",
]

ROLES = ["system", "user", "assistant", "user", "assistant", "tool"]


def conversation(rng: random.Random) -> tuple[list[dict], list[dict] | None, dict]:
    """Messages, tools (or None) and extra variables."""
    messages = []
    for i in range(rng.randint(1, 5)):
        role = ROLES[i] if i < len(ROLES) and rng.random() < 0.7 else rng.choice(ROLES[1:3])
        content = " ".join(rng.choice(PIECES) for _ in range(rng.randint(0, 3)))
        message: dict = {"role": role, "content": content}
        if role == "assistant" and rng.random() < 0.35:
            args = {"city": rng.choice(PIECES), "days": rng.randint(-3, 12)}
            if rng.random() < 0.3:
                args["tags"] = [rng.choice(PIECES) for _ in range(2)]
            message["tool_calls"] = [{"type": "function", "id": f"call_{i}",
                                      "function": {"name": rng.choice(["get_weather", "search"]), "arguments": args}}]
            if rng.random() < 0.5:
                message["content"] = None if rng.random() < 0.5 else ""
        if role == "assistant" and rng.random() < 0.2:
            message["reasoning_content"] = rng.choice(PIECES)
        if role == "tool":
            message["tool_call_id"] = f"call_{i - 1}"
        messages.append(message)
    tools = None
    if rng.random() < 0.4:
        tools = [{"type": "function", "function": {"name": "get_weather", "description": rng.choice(PIECES),
                  "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                                  "days": {"type": "integer"}},
                                 "required": ["city"]}}}]
    extra = {"bos_token": "<s>", "eos_token": "</s>"}
    if rng.random() < 0.3:
        extra["enable_thinking"] = rng.random() < 0.5
    return messages, tools, extra


@dataclass
class Program:
    """A template as a list of top-level statements (the minimizer drops them one by one)."""

    chunks: list[str] = field(default_factory=list)

    def text(self) -> str:
        return "".join(self.chunks)


class Writer:
    """Random expressions by type, and statements built from them."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.depth = 0

    def pick(self, *options):
        return self.rng.choice(options)

    # -- expressions ------------------------------------------------------------------------------
    def str_literal(self) -> str:
        return self.pick(
            "'a'", '"b c"', "''", "' '", "'\\n'", "'\\t'", "'x\\'y'", '"q\\"q"', "'\\u00e9'", "'\\x41'",
            "'<tag>'", "'%s-%d'", "'{}-{}'", "'A,B,C'", "'  trim me  '", "'日本'", "'😀'", "'\\\\'",
            "'Hello World'", "'ǅ'", "'ß'", "'e\\u0301'", "'\\U0001F600'", "'\\N{BULLET}'",
        )

    def str_expr(self, var: str | None = None) -> str:
        r = self.rng.random()
        if self.depth > 2 or r < 0.25:
            return self.pick(self.str_literal(), var or "'v'", "bos_token", "eos_token")
        self.depth += 1
        try:
            base = self.str_expr(var)
            choice = self.rng.randrange(12)
            if choice == 0:
                return f"({base} ~ {self.str_expr(var)})"
            if choice == 1:
                return f"({base} + {self.str_expr(var)})"
            if choice in (2, 3):
                return f"({base}|{self.str_filter()})"
            if choice in (4, 5):
                return f"{self.paren(base)}.{self.str_method()}"
            if choice == 6:
                return f"{self.paren(base)}[{self.slice_expr()}]"
            if choice == 7:
                return f"({self.str_literal()} if {self.bool_expr(var)} else {base})"
            if choice == 8:
                return f"({self.pick(repr('%s|%s'), repr('%d'), repr('%5.2f'), repr('%r'), repr('%-4s|'))} % {self.pick('(' + base + ', ' + base + ')', '3', '2.5', base, '(1, 2)')})"
            if choice == 9:
                if self.rng.random() < 0.3:
                    spec = self.pick("'{:>6}|{!r}'", "'{0}-{1}-{0}'", "'{:^7.2}|{:*<4}'", "'{!s:>5}{}'", "'{:d}{}'")
                    return f"{spec}.format({base}, {self.pick(base, '3', '2.5', 'none', '[1]')})"
                if self.rng.random() < 0.3:
                    return self.pick(f"({self.int_expr(var)}|filesizeformat)", f"({self.int_expr(var)}|filesizeformat(true))",
                                     "({'b': 1, 'a': 2, 'C': 3}|dictsort(true)|string)", f"({{'k': {base}}}|xmlattr)",
                                     f"({base}|replace('l', 'L', 1))", f"({base}|replace('', '.', 2))",
                                     "({'b': 1, 'a': 2}|dictsort(by='value', reverse=true)|string)")
                return f"({self.list_expr(var)}|join({self.pick(repr(', '), repr(''), repr('|'))}))"
            if choice == 10:
                return f"({self.any_expr(var)}|{self.pick('string', 'tojson', 'pprint', 'e', 'tojson(indent=2)')})"
            return f"({self.int_expr(var)}|string)"
        finally:
            self.depth -= 1

    def paren(self, e: str) -> str:
        return e if e.startswith("(") or e.startswith("'") or e.startswith('"') else f"({e})"

    def str_filter(self) -> str:
        return self.pick(
            "upper", "lower", "title", "capitalize", "trim", "replace('a', 'X')", "replace(' ', '')",
            "center(12)", "truncate(8)", "truncate(9, True, '..', 0)", "wordcount|string", "wordwrap(6)",
            "striptags", "urlencode", "escape", "e", "reverse", "first", "last", "list|join('.')", "tojson",
            "string", "indent(2)", "indent(2, true)", "default('d')", "default('d', true)", "safe", "count|string",
            "length|string", "int|string", "float|string", "trim('x')", "format('z')", "lower|title",
            "replace('\\n', ' ')", "unique|join", "sort|join", "max", "min", "forceescape", "upper|e",
        )

    def str_method(self) -> str:
        return self.pick(
            "upper()", "lower()", "strip()", "lstrip()", "rstrip()", "strip('x ')", "title()", "capitalize()",
            "replace('o', '0')", "replace('a', 'b', 1)", "split()|join('_')", "split(',')|join('/')",
            "rsplit(' ', 1)|join('/')", "splitlines()|join('|')", "startswith('H')|string", "endswith('d')|string",
            "find('o')|string", "rfind('o')|string", "count('l')|string", "partition(' ')|join('#')",
            "rpartition(' ')|join('#')", "ljust(8, '.')", "rjust(8)", "center(9, '*')", "zfill(5)", "swapcase()",
            "casefold()", "isdigit()|string", "isalpha()|string", "isspace()|string", "istitle()|string",
            "isupper()|string", "islower()|string", "isalnum()|string", "format('F')", "expandtabs(4)",
            "removeprefix('He')", "removesuffix('ld')", "encode is defined|string", "index('l')|string",
            "split(None, 1)|join('/')", "lstrip('H')", "format(1, 'é')", "isdecimal()|string", "isnumeric()|string",
            "isidentifier()|string", "isprintable()|string", "count('l', 1)|string", "split(maxsplit=1)|join('/')",
            "format_map({'k': 1})", "count('')|string",
        )

    def slice_expr(self) -> str:
        return self.pick("0", "-1", "1:", ":2", "::-1", "1:-1", "::2", "-3:", "5:1:-1", ":-1:-2", "100:")

    def int_expr(self, var: str | None = None) -> str:
        r = self.rng.random()
        if self.depth > 2 or r < 0.4:
            return self.pick("0", "1", "3", "-2", "10", "messages|length", "(tools or [])|length")
        self.depth += 1
        try:
            a, b = self.int_expr(var), self.int_expr(var)
            return self.pick(
                f"({a} + {b})", f"({a} - {b})", f"({a} * {b})", f"({a} // {self.pick('2', '3', '-2')})",
                f"({a} % {self.pick('2', '3', '-3')})", f"({a} ** 2)", f"({self.str_expr(var)}|length)",
                f"([{a}, {b}]|max)", f"([{a}, {b}]|sum)", f"({a}|abs)", f"(({a} / 3)|round|int)",
                f"(({a} / 4)|round(1, 'floor')|int)", f"({self.str_expr(var)}|int(7))",
            )
        finally:
            self.depth -= 1

    def list_expr(self, var: str | None = None) -> str:
        self.depth += 1
        try:
            return self.pick(
                "[1, 2, 3]", "['b', 'a', 'B']", "range(3)|list", "range(5, 0, -2)|list",
                f"{self.paren(self.str_expr(var))}.split(' ')", "messages|map(attribute='role')|list",
                "messages|selectattr('role', 'equalto', 'user')|map(attribute='role')|list",
                "messages|rejectattr('content')|map(attribute='role')|list",
                "['x', 'y']|map('upper')|list", "[3, 1, 2]|sort", "[3, 1, 2]|sort(reverse=true)",
                "['a', 'A', 'b']|unique|list", "[1, 2, 3, 4, 5]|batch(2)|map('join', ',')|list",
                "[1, 2, 3, 4]|slice(2)|map('list')|map('string')|list", "{'b': 1, 'a': 2}|dictsort|map('first')|list",
                "(tools or [])|map(attribute='function')|map(attribute='name')|list",
                "[1, 2, 3]|select('odd')|list", "[1, 2, 3]|reject('even')|list", "'abc'|list",
                "messages|groupby('role')|map('first')|list", "[{'n': 2}, {'n': 1}]|sort(attribute='n')|map(attribute='n')|list",
                "[1, 2] + [3]", "[0] * 3", "{'k': 'v', 'a': 1}|items|map('first')|list",
                "{'b': 1, 'a': 2, 'C': 3}|dictsort(true)|map('first')|list", "[[1, 2, 1].index(2), [1, 2, 1].count(1)]",
            )
        finally:
            self.depth -= 1

    def bool_expr(self, var: str | None = None) -> str:
        if self.depth > 2:
            return self.pick("true", "false", "add_generation_prompt")
        self.depth += 1
        try:
            return self.pick(
                "add_generation_prompt", "tools", "tools is defined", "tools is none", "enable_thinking is defined",
                "enable_thinking is true", "(enable_thinking | default(true))", "messages[0].role == 'system'",
                f"{self.str_expr(var)} is string", f"{self.int_expr(var)} is odd", f"{self.int_expr(var)} is even",
                f"{self.int_expr(var)} is divisibleby(3)", f"{self.str_expr(var)} in 'Hello World'",
                f"'a' in {self.str_expr(var)}", f"{self.int_expr(var)} > {self.int_expr(var)}",
                f"({self.str_expr(var)}) is lower", f"({self.str_expr(var)}) is upper", "messages is sequence",
                "messages[0] is mapping", "undefined_name is undefined", f"not {self.bool_expr(var)}",
                f"({self.bool_expr(var)} and {self.bool_expr(var)})", f"({self.bool_expr(var)} or false)",
                "messages|length is number", "'x' is callable", "'x'.upper is callable", "none is none",
                f"{self.int_expr(var)} is integer", "1.5 is float", "true is boolean", "[1] is iterable",
                f"{self.int_expr(var)} is eq 3", f"{self.int_expr(var)} is gt 1", "'a' is in ['a']",
                f"{self.str_expr(var)} is startingwith('H')" if self.rng.random() < 0.05 else "1 is sameas 1",
            )
        finally:
            self.depth -= 1

    def any_expr(self, var: str | None = None) -> str:
        return self.pick(
            self.str_expr(var), self.int_expr(var), self.list_expr(var), "messages[0]", "{'a': 1, 'b': [true, none]}",
            "tools", "none", "1.5", "2.0", "1e3", "[1.0, 'x', none, true]", "('t', 1)", "messages[-1].tool_calls",
            "(messages|last).content", "{'k': '\u00a0x\u2028'}", "['\\n', '\\x07']", "undefined_name",
            "namespace(a=1, b='x')", "{'b': 2, 'a': 1}|dictsort", "messages|last|attr('role')",
        )

    # -- statements -------------------------------------------------------------------------------
    def output(self, var: str | None = None) -> str:
        open_, close = self.ws_open(), self.ws_close()
        return f"{{{{{open_} {self.any_expr(var) if self.rng.random() < 0.3 else self.str_expr(var)} {close}}}}}"

    def ws_open(self) -> str:
        return self.pick("", "", "", "-", "+") if self.rng.random() < 0.5 else ""

    def ws_close(self) -> str:
        return self.pick("", "", "-") if self.rng.random() < 0.4 else ""

    def tag(self, body: str) -> str:
        return f"{{%{self.pick('', '', '', '-', '+')} {body} {self.pick('', '', '', '-', '+')}%}}"

    def text(self) -> str:
        return self.pick("\n", "<|im_start|>", "<|im_end|>\n", " ", "[INST] ", " [/INST]", "\n\n", "<think>\n",
                         "</think>\n\n", "{", "}", "# ", "-", "\t")

    def statement(self, var: str | None = None, in_loop: bool = False) -> str:
        k = self.rng.randrange(20 if self.depth < 2 else 4)
        if k == 0:
            return self.output(var)
        if k == 1:
            return self.text() + self.output(var)
        if k == 2:
            return self.tag(f"set s{self.rng.randrange(3)} = {self.any_expr(var)}") + self.output(var)
        if k == 3 and in_loop:
            return self.tag(f"if {self.bool_expr(var)}") + self.tag(self.pick("continue", "break")) + self.tag("endif")
        self.depth += 1
        try:
            if k in (3, 4):
                body = self.statement(var, in_loop)
                other = self.statement(var, in_loop)
                elif_ = self.tag(f"elif {self.bool_expr(var)}") + self.output(var) if self.rng.random() < 0.3 else ""
                return self.tag(f"if {self.bool_expr(var)}") + body + elif_ + self.tag("else") + other + self.tag("endif")
            if k in (5, 6, 7):
                return self.message_loop()
            if k == 8:
                inner = self.statement("x", True)
                loopvar = self.pick("loop.index", "loop.index0", "loop.first", "loop.last", "loop.length",
                                    "loop.revindex", "loop.previtem", "loop.nextitem", "loop.cycle('a', 'b')",
                                    "loop.depth")
                else_ = self.tag("else") + "empty" if self.rng.random() < 0.3 else ""
                src = self.pick(self.list_expr(), self.str_expr(), "'abc'", "{'k': 1, 'j': 2}", "range(3)")
                filt = f" if {self.bool_expr('x')}" if self.rng.random() < 0.2 else ""
                return (self.tag(f"for x in {src}{filt}") + "{{ " + loopvar + " }}" + inner + else_
                        + self.tag("endfor"))
            if k == 9:
                return (self.tag(f"for a, b in {self.pick(repr({'k': 1, 'j': 2}) + '|items', '[[1, 2], [3, 4]]', repr('xy') + '|list|batch(2)', repr(['ab', 'cd']))}")
                        + "{{ a }}={{ b }};" + self.tag("endfor"))
            if k == 10:
                name = f"m{self.rng.randrange(2)}"
                params = self.pick("a", "a, b='d'", "a=1", "")
                call_args = self.pick("'x'", "'x', 'y'", "'x', b=2", "", "'x', 'y', 'z'", "'x', zz=1")
                body = self.pick("{{ a }}", "{{ a }}-{{ b }}", "{{ varargs|length }}", "{{ kwargs|tojson }}",
                                 "{{ varargs }}{{ kwargs }}", "{{ caller() if caller is defined else '' }}")
                call = (self.tag(f"call {name}({call_args})") + "inside" + self.tag("endcall")
                        if self.rng.random() < 0.2 else f"{{{{ {name}({call_args}) }}}}")
                return self.tag(f"macro {name}({params})") + body + self.tag("endmacro") + call
            if k == 11:
                return (self.tag("set ns = namespace(found=false, n=0)")
                        + self.tag("for m in messages") + self.tag(f"if m.role == {self.pick(repr('user'), repr('tool'))}")
                        + self.tag("set ns.found = true") + self.tag("set ns.n = ns.n + 1") + self.tag("endif")
                        + self.tag("endfor") + "{{ ns.found }}/{{ ns.n }}")
            if k == 12:
                return self.tag("raw") + self.pick("{{ x }}", "{% if %}", " a\n", "{#c#}") + self.tag("endraw")
            if k == 13:
                return self.tag(f"set blk{self.rng.randrange(2)}") + self.statement(var, in_loop) + self.tag("endset") + "[{{ blk0 | default('') }}]"
            if k == 14:
                return self.tag(f"filter {self.pick('upper', 'trim', 'replace(' + repr('a') + ', ' + repr('b') + ')', 'indent(2)', 'center(20)')}") + self.statement(var, in_loop) + self.tag("endfilter")
            if k == 16:
                return (self.tag(f"with w = {self.any_expr(var)}") + self.statement(var, in_loop) + "{{ w }}"
                        + self.tag("endwith"))
            if k == 17:
                return (self.tag(f"autoescape {self.pick('true', 'false')}") + self.statement(var, in_loop)
                        + "{{ '<&>' }}" + self.tag("endautoescape"))
            if k == 18:
                control = self.pick("continue", "break")
                return (self.tag(f"for x in {self.pick('[1, 2, 3]', 'messages', repr('ab'), '[]')}")
                        + self.tag(f"if {self.bool_expr('x')}") + self.tag(control) + self.tag("endif")
                        + self.statement("x", True) + self.tag("else") + self.tag(f"set q = {self.str_expr()}")
                        + "{{ q }}" + self.tag("endfor") + "[{{ q | default('') }}]")
            if k == 19:
                return (self.tag("set cyc = cycler('a', 'b')") + self.tag("set jn = joiner(' | ')")
                        + self.tag("for m in messages") + "{{ jn() }}{{ cyc.next() }}{{ m.role }}" + self.statement("m", True)
                        + self.tag("endfor") + "{{ cyc.current }}")
            return "{# comment #}" + self.pick("\n", "", " ") + self.output(var)
        finally:
            self.depth -= 1

    def message_loop(self) -> str:
        body = []
        for _ in range(self.rng.randint(1, 3)):
            body.append(self.statement("message['content'] if message['content'] is string else ''", True))
        role_branch = (self.tag("if message['role'] == 'assistant' and message.tool_calls is defined and message.tool_calls")
                       + self.tag("for tc in message.tool_calls")
                       + self.pick("{{ tc.function.name }}{{ tc.function.arguments|tojson }}",
                                   "{{ tc.function.arguments|items|list }}", "{{ tc['function']['arguments']['city']|upper }}",
                                   "{% for k, v in tc.function.arguments.items() %}{{ k }}={{ v }};{% endfor %}",
                                   "{{ tc.function|tojson(indent=2) }}", "{{ tc.function.arguments|dictsort }}")
                       + self.tag("endfor") + self.tag("endif"))
        src = self.pick("messages", "messages[1:]", "messages|reverse", "messages[::-1]")
        return (self.tag(f"for message in {src}") + "<|im_start|>{{ message.role }}\n" + "".join(body) + role_branch
                + "<|im_end|>\n" + self.tag("endfor"))


def program(rng: random.Random) -> Program:
    w = Writer(rng)
    chunks = [w.statement() for _ in range(rng.randint(1, 5))]
    if rng.random() < 0.6:
        chunks.append(w.tag("if add_generation_prompt") + "<|im_start|>assistant\n" + w.tag("endif"))
    return Program(chunks)


# -- rendering ------------------------------------------------------------------------------------

def reference(text: str, messages, tools, extra, generation: bool):
    from transformers.utils.chat_template_utils import _normalize_chat_messages, render_jinja_template

    # As `apply_chat_template` does before rendering: keys whose value is None are dropped.
    messages = _normalize_chat_messages(messages)
    rendered, _ = render_jinja_template(conversations=[messages], tools=tools, chat_template=text,
                                        add_generation_prompt=generation, **extra)
    return rendered[0]


def ours(text: str, messages, tools, extra, generation: bool):
    template = parlance.ChatTemplate.from_string(text)
    return template.apply_chat_template(messages, tools=tools, add_generation_prompt=generation, **extra)


def classify(text: str, messages, tools, extra, generation: bool) -> tuple[str, str, str]:
    """The class and both outcomes (text or the error) of one case."""
    try:
        ref, ref_ok = reference(text, messages, tools, extra, generation), True
    except Exception as e:  # noqa: BLE001: any reference error is an outcome
        ref, ref_ok = f"{type(e).__name__}: {e}", False
    try:
        got, ok = ours(text, messages, tools, extra, generation), True
    except (parlance.TemplateError, ValueError, TypeError) as e:
        got, ok = f"{type(e).__name__}: {e}", False
    except BaseException as e:  # noqa: BLE001: a panic surfaces as pyo3's PanicException
        if isinstance(e, KeyboardInterrupt):
            raise
        return "crash", ref, f"{type(e).__name__}: {e}"
    if ok and ref_ok:
        return ("same" if got == ref else "differ"), ref, got
    if not ok and not ref_ok:
        return "both-error", ref, got
    return ("parlance-error-only" if ref_ok else "ref-error-only"), ref, got


@dataclass
class Case:
    seed: int
    program: Program
    messages: list
    tools: list | None
    extra: dict
    generation: bool

    def run(self) -> tuple[str, str, str]:
        return classify(self.program.text(), self.messages, self.tools, self.extra, self.generation)


def case(seed: int) -> Case:
    rng = random.Random(seed)
    prog = program(rng)
    messages, tools, extra = conversation(rng)
    return Case(seed, prog, messages, tools, extra, rng.random() < 0.5)


def minimize(c: Case, klass: str) -> Case:
    """Drops whole statements, then messages, while the case stays in `klass`."""
    changed = True
    while changed:
        changed = False
        for i in range(len(c.program.chunks)):
            trial = Case(c.seed, Program(c.program.chunks[:i] + c.program.chunks[i + 1:]), c.messages, c.tools,
                         c.extra, c.generation)
            if trial.program.chunks and trial.run()[0] == klass:
                c, changed = trial, True
                break
        for i in range(len(c.messages)):
            trial = Case(c.seed, c.program, c.messages[:i] + c.messages[i + 1:], c.tools, c.extra, c.generation)
            if trial.messages and trial.run()[0] == klass:
                c, changed = trial, True
                break
    return c


def run(cases: int, seed: int) -> tuple[dict[str, int], list[tuple[Case, str, str, str]]]:
    counts = dict.fromkeys(CLASSES, 0)
    bad = []
    for i in range(cases):
        c = case(seed * 1_000_003 + i)
        klass, ref, got = c.run()
        counts[klass] += 1
        if klass in ("differ", "parlance-error-only", "crash"):
            bad.append((c, klass, ref, got))
    return counts, bad


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--show", type=int, default=10, help="how many failing cases to minimize and print")
    ap.add_argument("--json", action="store_true", help="one JSON line per failing case")
    ap.add_argument("--update-ratchet", action="store_true",
                    help="rewrite render_differential.json (the CI batch's known failures) from this run")
    args = ap.parse_args(argv)
    if args.update_ratchet:
        import pathlib
        path = pathlib.Path(__file__).with_name("render_differential.json")
        ratchet = json.loads(path.read_text())
        counts, bad = run(ratchet["cases"], ratchet["seed"])
        ratchet["counts"] = counts
        ratchet["known"] = {str(c.seed): k for c, k, _, _ in bad}
        path.write_text(json.dumps(ratchet, indent=1) + "\n")
        print(json.dumps(counts))
        return 0
    counts, bad = run(args.cases, args.seed)
    print(json.dumps(counts))
    for c, klass, ref, got in bad[: args.show]:
        small = minimize(c, klass)
        k2, ref, got = small.run()
        record = {"seed": small.seed, "class": k2, "template": small.program.text(), "messages": small.messages,
                  "tools": small.tools, "extra": small.extra, "add_generation_prompt": small.generation,
                  "transformers": ref, "parlance": got}
        if args.json:
            print(json.dumps(record, ensure_ascii=False))
        else:
            print(f"--- seed {small.seed}: {k2}\ntemplate: {small.program.text()!r}\nmessages: {small.messages!r}\n"
                  f"transformers: {ref!r}\nparlance:     {got!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
