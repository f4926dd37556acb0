"""Jinja2's own outputs for the builtin filters and tests parlance adds (template/jinja2_filters.rs):
each case is a template rendered in transformers' sandbox settings; an error is recorded as such.

    python crates/parlance/tests/data/jinja2_filters.py > crates/parlance/tests/data/jinja2_filters.json
(needs jinja2 3.1)"""

import json

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

CASES = [
    "{% for a, b in {'k': 1, 'j': 2}|items %}{{ a }}={{ b }};{% endfor %}", "{% for a, b in [[1, 2], 'xy', ('p', 'q')] %}{{ a }}{{ b }};{% endfor %}",
    "{% for a, b in ['xyz'] %}{{ a }}{% endfor %}", "{% set a, (b, c) = 'x', 'yz' %}{{ a }}{{ b }}{{ c }}", "{% for a, b in 'ab' %}{% endfor %}",
    "{{ '%s|%5s|%-5s|%.2s' % ('a', 'b', 'c', 'xyz') }}", "{{ '%d|%5d|%-5d|%05d|%+d|% d|%.3d' % (1, 2, 3, -4, 5, 6, 7) }}",
    "{{ '%x|%X|%#x|%o|%#o|%c|%c' % (255, 255, 255, 8, 8, 65, 'z') }}", "{{ '%f|%.2f|%e|%.3E|%g|%g|%g|%G' % (1.5, 2.345, 12345.678, 0.00012, 100000, 1000000, 0.0001, 1e-5) }}",
    "{{ '%(a)s-%(b)d' % {'a': 'x', 'b': 2} }}", "{{ '%s' % [1, 'a'] }}", "{{ '%s' % none }}", "{{ '%r' % {'k': 'v'} }}",
    "{{ '%s %s' % 'a' }}", "{{ '%s' % ('a', 'b') }}", "{{ '%d' % 'x' }}", "{{ '%d' % 2.7 }}", "{{ '100%%' % () }}",
    "{{ -7 % 3 }}|{{ 7 % -3 }}|{{ -7.5 % 2 }}|{{ 7 % 2.5 }}", "{{ 1 % 0 }}", "{{ loop_index % 2 == 0 }}",
    "{{ 'abc'[2:0:-1] }}|{{ 'abc'[:-4:-1] }}|{{ ''[::-1] }}|{{ [1, 2, 3][::-2] }}|{{ 'abcdef'[-2:1:-2] }}|{{ 'abc'[0:2:-1] }}",
    "{{ '<b>a</b>  <!-- c <i> -->b\\n\\tc &amp; &lt;x&gt; &#65;&#x42; &quot;q&quot; &nbsp;z &unknown; &amp'|striptags }}|",
    "{{ 'a < b > c'|striptags }}|", "{{ '<p>open'|striptags }}|", "{{ 12|striptags }}|",
    "{{ '<!-- a <b> --> x <!-- open'|striptags }}|", "{{ '&#0;&#x110000;&#128512;'|striptags }}|",
    "{{ 'abc'|center(9) }}|", "{{ 'abc'|center(8) }}|", "{{ 'ab'|center(5) }}|", "{{ 'ab'|center(6) }}|",
    "{{ 'abcd'|center(7) }}|", "{{ 'abcd'|center(2) }}|", "{{ 'é漢'|center(7) }}|", "{{ 12|center(6) }}|",
    "{{ 'x'|center }}|", "{{ 'x'|center(true) }}|", "{{ 'x'|center('5') }}|", "{{ 'x'|center(5.0) }}|",
    "{{ 'Hello, world! foo_bar 42'|wordcount }}", "{{ ''|wordcount }}", "{{ 'héllo wörld 漢字 ٣٤'|wordcount }}",
    "{{ '  a--b  '|wordcount }}", "{{ 12.5|wordcount }}", "{{ [1, 2]|wordcount }}",
    "{{ 'abc'|truncate(5) }}", "{{ 'hello world foo bar'|truncate(9) }}", "{{ 'hello world foo bar'|truncate(9, true) }}",
    "{{ 'hello world foo bar'|truncate(9, leeway=0) }}", "{{ 'hello world foo bar'|truncate(9, True, '..', 0) }}",
    "{{ 'hello world foo bar'|truncate(12, end='~') }}", "{{ 'helloworldfoobar'|truncate(9, leeway=0) }}",
    "{{ 'x' * 300 }}{{ ('word ' * 100)|truncate }}", "{{ 'hello world'|truncate(2) }}",
    "{{ 'hello world'|truncate(5, leeway=-1) }}", "{{ 'héllo wörld 漢字漢字漢字'|truncate(8, leeway=0) }}",
    "{{ 'hello world foo'|truncate(length=10, killwords=false, leeway=1) }}", "{{ 'abc'|truncate(3, end='') }}",
    "{{ 'a b/c?d=é&f'|urlencode }}", "{{ {'a': 'b c', 'x/y': 1}|urlencode }}", "{{ [('k', 'v w'), ('é', '/')]|urlencode }}",
    "{{ 42|urlencode }}", "{{ true|urlencode }}", "{{ none|urlencode }}", "{{ [1, 2]|urlencode }}",
    "{{ '~_.-'|urlencode }}", "{{ missing|urlencode }}|",
    "{{ raise_exception is callable }}", "{{ 'x' is callable }}", "{{ namespace is callable }}", "{{ {} is callable }}",
    "{% macro m() %}{% endmacro %}{{ m is callable }}", "{{ [1] is callable }}", "{{ 3 is callable }}",
    # Python string methods the sandbox allows.
    "{{ 'a=b=c'.partition('=') }}", "{{ 'a=b=c'.rpartition('=') }}", "{{ 'abc'.partition('x') }}",
    "{{ 'abc'.rpartition('x') }}", "{{ 'abc'.partition('') }}", "{{ 'ab'.ljust(5) }}|", "{{ 'ab'.rjust(5, '*') }}|",
    "{{ 'ab'.ljust(1) }}|", "{{ 'ab'.center(7, '-') }}|", "{{ 'ab'.rjust(5, 'xy') }}|", "{{ 'aBc Ü'.swapcase() }}",
    "{{ 'Straße'.casefold() }}", "{{ 'Hello World'.istitle() }}", "{{ 'Hello world'.istitle() }}", "{{ ''.istitle() }}",
    "{{ 'abc'.isalpha() }}", "{{ 'ab1'.isalnum() }}", "{{ '123'.isdigit() }}", "{{ '١٢'.isdecimal() }}", "{{ '½'.isnumeric() }}",
    "{{ ' \t'.isspace() }}", "{{ ''.isspace() }}", "{{ 'abc'.islower() }}", "{{ 'ABC'.isupper() }}", "{{ 'a_1'.isidentifier() }}",
    "{{ 'ab'.isascii() }}", "{{ 'abc'.index('a', 99) }}", "{{ 'abc'.index('c', 1) }}", "{{ 'abc'.rindex('b') }}",
    "{{ 'abca'.rfind('a') }}", "{{ 'abca'.find('a', 1) }}", "{{ 'abca'.find('a', -1) }}", "{{ 'abc'.rsplit('') }}",
    "{{ 'a,b,c'.rsplit(',', 1) }}", "{{ 'a b  c'.split() }}", "{{ 'a b  c'.split(None, 1) }}", "{{ 'a\nb\r\nc'.splitlines() }}",
    "{{ 'a\nb'.splitlines(true) }}", "{{ 'abc'.count('') }}", "{{ 'aaa'.count('aa') }}", "{{ 'abc'.startswith(('x', 'a')) }}",
    "{{ 'abc'.endswith('c', 0, 2) }}", "{{ '42'.zfill(5) }}", "{{ '-42'.zfill(5) }}", "{{ 'a\tb'.expandtabs(4) }}",
    "{{ 'hello world'.title() }}", "{{ \"they're bill's\".title() }}", "{{ 'ǆa'.capitalize() }}", "{{ 'abc'.translate({97: 'x'}) }}",
    "{{ 'x'.join(['a', 'b']) }}", "{{ '%s-%s' % ('a', 'b') }}", "{{ '%d' % 3 }}", "{{ '%05.1f' % 3.14159 }}", "{{ '%r' % 'x' }}",
    "{{ '{:>5}'.format('é') }}|", "{{ '{0}{1}{0}'.format('a', 'b') }}", "{{ '{x}'.format(x=1) }}",
    # Jinja2's lenient conversions.
    "{{ 'x'|float }}", "{{ ''|float }}", "{{ ' 12 '|int(5) }}", "{{ '12.7'|int }}", "{{ 'x'|int(7) }}", "{{ '0x1A'|int(0, 16) }}",
    "{{ ['1', 'a', 2.5]|map('int')|list }}", "{{ missing|items|list }}", "{{ 3.0|int }}", "{{ '1e3'|float }}",
    "{{ 'abc'|default('d', boolean=true) }}", "{{ ''|default('d', boolean=true) }}", "{{ ''|default('d', true) }}",
    # Unpacking a string.
    "{% set a, b = 'xy' %}{{ b }}{{ a }}", "{%- set a, b, c, d = '', 'x', true, \"default\" -%}{{ a }}{{ b }}{{ c }}{{ d }}",
    "{% for a, b in 'ab', 'cd' %}{{ b }}{{ a }}{% endfor %}", "{% for c in 'ab', 'cd' %}{{ c }}{{ loop.length }}{% endfor %}", "{% for a, b in ['xy', 'zw'] %}{{ a }}{{ b }};{% endfor %}",
    # Loops over strings, string literals as Python reads them, CRLF, escape, macros' varargs/kwargs.
    "{% for c in 'abc' %}{{ loop.length }}{{ loop.last }}{% endfor %}", "{% set s = 'ab' %}{% for c in s if c != 'a' %}{{ c }}{{ loop.length }}{% endfor %}",
    "a\r\nb{{ 'x' }}\r\nc\rd", "{{ 'a\\\nb' }}", "{{ '\\a\\v\\/\\101\\U0001F600' }}", "{{ 'a' 'b\\U0001F600' }}", "{{ '\\\u00e9' }}",
    "{{ '\\N{BULLET}' }}", "{{ 'x\\\n\n' ~ 'y' }}\n{{ undefined_fn() }}",
    "{{ ['<a>', \"'\"]|e }}|{{ '<&>\\'\"'|forceescape }}|{{ '<b>'|e|e }}|{{ '<b>'|safe|e }}|{{ '<b>'|safe|forceescape }}|{{ none|e }}|{{ 3|escape }}",
    "{%- macro m0() -%}{{ varargs }}{{ kwargs }}{% endmacro -%}{%- call m0('x', zz=1) -%}inside{%- endcall -%}",
    "{%- macro m0(a=1) %}{{ varargs|length }}{% endmacro %}{{ m0('x', 'y') }}", "{% macro m0(a=1) %}{{ kwargs|tojson }}{% endmacro -%}\n{{ m0('x', b=2) }}",
    "{% macro m0(a, b='d') %}{{ a }}{{ b }}{{ kwargs|tojson }}{% endmacro %}{{ m0('x') }}|{{ m0(b=3, a=1, c=4) }}",
    "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}", "{% macro m(a) %}{{ varargs }}{% endmacro %}{{ m(1, b=2) }}",
    "{% macro outer() %}{% macro inner() %}{{ varargs }}{% endmacro %}{{ inner(1) }}{% endmacro %}{{ outer() }}",
    "{% macro m() -%}\n  {{ varargs }}\n{%- endmacro %}\n\nX{{ m(1) }}", "{% macro m() %}{{ caller() }}{{ kwargs }}{% endmacro %}{% call m(k=1) %}C{% endcall %}",
    "{{ \"a'\"|safe + \"<b>\" + \"'\"|safe }}|{{ '<x>' + '<y>'|safe }}|{{ ('<'|safe + '>')|e }}|{{ 1 + 2 }}|{{ 1 + 2.5 }}|{{ true + 1 }}|{{ [1] + [2] }}|{{ (1,) + (2,) }}|{{ 'a' + 'b' }}",
    "{{ 'x'.upper is callable }}|{{ 'x'.upper is defined }}|{{ 'x'.nope is defined }}|{{ [1].append is defined }}|{{ [1].count is callable }}|{{ {'a': 1}.items is callable }}|{{ {'items': 1}.items is callable }}|{{ 'v'.encode is defined }}|{{ 'x'.upper is not callable }}",
    "{% set m = {'title': 'T'} %}{{ m.title is callable }}|{{ m.title }}",
    # pprint: pformat's layout (dicts sorted, items one per line past 80 columns, long strings cut).
    "{{ {'b': 1, 'a': [true, none]}|pprint }}",
    "{{ {'k': ' x '}|pprint }}",
    "{{ [{'function': {'arguments': {'city': 'x y', 'days': 7}, 'name': 'search'}, 'id': 'call_4', 'type': 'function'}]|pprint }}",
    "{{ ('word ' * 40)|pprint }}",
    "{{ ['word ' * 30, 'a\nb' * 20, 3]|pprint }}",
    "{{ {'a': 'x' * 100, 'b': {'c': [1, 2, 3], 'd': 'y ' * 50}}|pprint }}",
    "{{ ''|pprint }}|{{ 'a'|pprint }}|{{ 3|pprint }}|{{ none|pprint }}",
    # Undefined in a repr; titlecase (SpecialCasing) in capitalize/title.
    "{{ [undefined_name] }}|{{ undefined_name|pprint }}|{{ {'a': undefined_name} }}|{{ undefined_name|string }}|{{ (undefined_name,) }}|{{ undefined_name }}|{{ '%r' % undefined_name }}|{{ '%s' % undefined_name }}",
    "{{ 'ß'.capitalize() }}|{{ 'ßa'.title() }}|{{ 'ǆa'.capitalize() }}|{{ 'ﬁne ﬂy'.title() }}|{{ 'ᾳ ᾀ ᾷ'.title() }}|{{ 'ß'|capitalize }}|{{ 'ßb'|title }}",
    "{{ none|capitalize }}|{{ 12|capitalize }}|{{ \"hELLO wORLD\"|capitalize }}|{{ missing|capitalize }}|",
    # Block set and filter bodies are scopes of their own.
    "{% filter upper %}{% set x = 1 %}{% endfilter %}[{{ x }}]",
    "{% set b %}{% set x = 1 %}{% endset %}[{{ x }}]",
    "{% if true %}{% set x = 1 %}{% endif %}[{{ x }}]",
    "{% set ns = namespace(a=0) %}{% set b %}{% set ns.a = 5 %}{% endset %}[{{ ns.a }}]",
    "{% set x = 0 %}{% set b %}{% set x = x + 1 %}{{ x }}{% endset %}[{{ b }}{{ x }}]",
    "{%- set blk1 %}{% set blk0 %}<think>\n{{ 'x' }}{%- endset %}[{{ blk0 | default('') }}]{% endset %}[{{ blk0 | default('') }}]",
    "a\n{% set b -%}\n  {% set x = 1 %}\n  X{{ x }}\n  {%- endset %}\n[{{ b }}{{ x }}]",
    "{% filter upper -%}\n {% set y = 'q' %}{{ y }}\n{%+ endfilter %}\n[{{ y }}]",
    "{% set b | upper %}{% set z = 'w' %}{{ z }}{% endset %}{{ b }}{{ z }}",
    "{{ 'Straße'.casefold() }}|{{ 'ΣΑΣ ς'.casefold() }}|{{ 'ﬁ İ µ'.casefold() }}|{{ 'ᏸ'.casefold() }}|{{ 'ABC'.casefold() }}",
    "{{ 'a'|e + '<' }}|{{ '<' + 'a'|e }}",
    "{{ 'x'|safe + 1 }}", "{{ '<'|e ~ '<' }}", "{{ 9223372036854775807 + 1 }}",
    "{% macro m(x) %}{{ m.name }}{{ m.arguments }}{{ varargs }}{% endmacro %}{{ m(1) }}", "{% macro m() %}{% endmacro %}{{ [m] }}|{{ m }}",
    # Loop controls that leave a with / set / filter / autoescape body, and for-else (its else runs
    # unless an iteration reached the body's end; its body is a scope of its own).
    "{% for x in [1, 2, 3] -%}{{ loop.last }}{% if true %}{% continue -%}{%- endif %}{% else -%}empty{% endfor -%}",
    "{% for x in [1] %}{% break %}{% else %}E{% endfor %}", "{% for x in [1, 2] %}{{ x }}{% if x == 1 %}{% break %}{% endif %}{% else %}E{% endfor %}",
    "{% for x in [1, 2] %}{{ x }}{% if x == 2 %}{% continue %}{% endif %}{% else %}E{% endfor %}",
    "{% for x in [1, 2] if x > 0 %}{{ x }}{% continue %}{% else %}E{% endfor %}",
    "{% for x in [] %}{% else %}{% set y = 1 %}{{ y }}{% endfor %}[{{ y }}]",
    "{% for x in [1] %}{% continue %}{% else %}{% set y = 2 %}{{ y }}{% endfor %}[{{ y }}]",
    "{% for x in [1] %}{% set z %}a{% continue %}{% endset %}{% endfor %}[{{ z }}]",
    "{% set x = 1 %}{% for a in [1] %}{% set x %}{{ x }}{% if true %}{% continue %}{% endif %}{% endset %}{% endfor %}[{{ x }}]",
    "{%- for m in ['a', 'b'] %}{% set x %}{% if loop.first %}{% continue %}{% endif %}{{ m }}{% endset %}[{{ x }}]{% endfor %}END",
    "{% for a in [1, 2, 3] %}{% with x = a %}{% if a == 2 %}{% continue %}{% endif %}{{ x }}{% endwith %}{% endfor %}[{{ x }}]",
    "{% set x = 'o' %}{% for a in [1, 2, 3] %}{% with x = a %}{% if a == 2 %}{% break %}{% endif %}{{ x }}{% endwith %}{% endfor %}[{{ x }}]",
    "{% for a in [1, 2, 3] %}{% filter upper %}a{{ a }}{% if a == 2 %}{% continue %}{% endif %}b{% endfilter %}|{% endfor %}",
    "{% for a in [1, 2, 3] %}{% set q %}{% filter upper %}a{{ a }}{% if a == 2 %}{% break %}{% endif %}b{% endfilter %}{% endset %}{{ q }}|{% endfor %}",
    "{% for a in [1, 2] %}{% for b in [] %}{% else %}{% if a == 1 %}{% continue %}{% endif %}E{% endfor %}{{ a }}{% endfor %}",
    "{% for a in [1, 2] %}{% with %}{% for b in [] %}{% else %}{% if a == 1 %}{% continue %}{% endif %}E{% endfor %}{% endwith %}{{ a }}{% endfor %}",
    "{% for a in [1, 2, 3] %}{% autoescape true %}{% if a == 2 %}{% continue %}{% endif %}{{ '<' }}{% endautoescape %}{{ '<' }}{% endfor %}",
    "{% set ns = namespace(t='') %}{% for a in 'abc' %}{% with %}{% set ns.t = ns.t ~ a %}{% if a == 'b' %}{% break %}{% endif %}{% endwith %}{% endfor %}{{ ns.t }}",
    "{% for a in [1, 2, 3] %}{% set b | upper %}x{{ a }}{% if a is odd %}{% continue %}{% elif a == 2 %}y{% else %}z{% endif %}w{% endset %}{{ b }}{% endfor %}",
    "{% for a in [1, 2] %}{% with %}{% with %}{% if a == 1 %}{% continue %}{% endif %}in{{ a }}{% endwith %}mid{% endwith %}out{{ a }};{% endfor %}",
    "{% for a in [1, 2] %}{% with %}{% for b in [1, 2] %}{% with %}{% if b == 1 %}{% continue %}{% endif %}{{ a }}{{ b }}{% endwith %}{% endfor %}{% if a == 1 %}{% continue %}{% endif %}!{% endwith %}{% endfor %}",
    "{% for a in [1, 2] %}{% macro m() %}{% for b in [1] %}{% with %}{% break %}{% endwith %}{% endfor %}m{% endmacro %}{% with %}{{ m() }}{% if a == 1 %}{% continue %}{% endif %}{{ a }}{% endwith %}{% endfor %}",
    "<{% for a in [1, 2, 3] %}\n  {% with x = a %}\n    {% if a == 2 %}\n      {% continue %}\n    {% endif %}\n    [{{ x }}]\n  {% endwith %}\n{% else %}\n  none\n{% endfor %}\n>",
    "<{% for a in [1, 2, 3] -%}\n  {%- set s -%}\n    {{ a }}\n    {%- if a == 2 -%}{%- continue -%}{%- endif %}\n    tail\n  {%- endset %}\n  ({{ s }})\n{%+ else -%}\n  E\n{% endfor %}>",
    "{% for a in [1, 2] %}\n{% filter trim %}\n  {{ a }}\n  {% if a == 1 %}{% continue +%}\n  {% endif %}\n  x\n{% endfilter +%}\n{% endfor %}",
    "{% for a in [1, 2] %}{% with %}{# note #}{% if a == 1 %}{% continue %}{# n2 #}{% endif %}{% raw %}{% endif %}{% endraw %}{{ a }}{% endwith %}{% endfor %}",
    # str.split with maxsplit on whitespace; first / last where nothing is there; case tests with titlecase letters.
    "{{ ' '.split(None, 1) }}{{ 'a  b '.split(None, 1) }}{{ ' a b'.split() }}{{ 'a,b'.split(',', 0) }}{{ '\n'.split(None, 1) }}{{ 'a b'.split(' ', -1) }}",
    "{{ 'a'.split('') }}", "{{ missing|last }}|{{ missing|first }}|{{ {'a': 1, 'b': 2}|first }}{{ {'a': 1, 'b': 2}|last }}|{{ 'xy'|last }}|{{ (1, 2)|last }}|{{ range(3)|last }}|{{ ''|last|first }}|{{ []|first|first }}",
    "{{ none|last }}", "{{ 3|first }}",
    "{{ 'ǅ title'.islower() }}{{ 'ǅ TITLE'.isupper() }}{{ 'ǅ'.istitle() }}{{ 'ᾈa'.istitle() }}{{ 'ab'.islower() }}{{ 'AB1'.isupper() }}{{ '1'.islower() }}",
    # A loop over a filtered value in parentheses (its text wrapped whole).
    "{% for x in ((([1, 2]|length)|abs)|string) %}{{ loop.revindex }}{{ loop.length }}{% endfor %}",
    "{% for a, b in ((['xy', 'zw']|list)) %}{{ b }}{{ a }}{% endfor %}",
    # Markup (|e, |safe, |forceescape) through methods, slices, %, repr and the filters that keep it.
    "\n{{ ('<s>' + ('<s>'|forceescape).strip()) }}", "{{ ('%r' % (''|e)) ~ 'x' }}", "{{ 'x\'y' + ('日本'|forceescape)|last }}",
    "{{ '%r' % (none|e) }}", "{{ ('<s>'|e)[100:] + '</s>' }}", "{{ ([1, 2, 3]|e)|pprint }}", "{{ ['a'|safe, 'b'] }}",
    "{{ ('<a>'|e).upper() + '<' }}|{{ ('<a>'|e).split('&') }}|{{ ('a&b'|e).replace('&', '+') }}|{{ ('x'|safe).join(['<', '>']) }}",
    "{{ ('a b'|e).partition(' ') }}|{{ ('<a>'|e).startswith('&') }}|{{ ('<a>'|e).find('a') }}|{{ ('%s'|safe) % '<' }}|{{ ('%r'|safe) % '<' }}",
    "{{ ('<a>'|e)|upper + '<' }}|{{ ('<a>'|e)|lower + '<' }}|{{ ('<a> '|e)|trim + '<' }}|{{ ('<a>'|e)|reverse + '<' }}|{{ ('<a>'|e)|string + '<' }}|{{ ('<a>'|e)|first + '<' }}",
    "{{ ('<a>'|e)|capitalize + '<' }}|{{ ('<a>'|e)|center(9) + '<' }}|{{ ('<a>'|e)|replace('a', 'b') + '<' }}|{{ ('<a>'|e)|title + '<' }}",
    "{{ ('ab'|safe)[0] + '<' }}|{{ ('ab'|safe)[1:] + '<' }}|{{ ('ab'|safe)[::-1] + '<' }}",
    "{% autoescape true %}{{ '<' }}{{ '<'|safe }}{{ [1, '<'] }}{% endautoescape %}{{ '<' }}",
    "{{ none|upper }}|{{ [1, 'a']|upper }}|{{ ' \x1c x \x1c '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ 'ΣΑΣ'|lower }}|{{ 'ß'|upper }}",
    # str.format's mini-language; dictsort, replace's count, attr, filesizeformat, xmlattr, cycler, joiner;
    # str predicates from Python's character tables; list.index/count; Namespace's repr.
    "{{ '{:>8}|{:<4}|{:^6}|{:08.3f}|{:,}|{:x}|{:b}|{:e}|{!r}'.format('a', 'b', 'c', 3.14159, 1234567, 255, 5, 12345.6789, 'q') }}",
    "{{ '{0[0]}{1[a]}{1.a}'.format([1], {'a': 2}) }}|{{ '{}'.format(none) }}|{{ '{:d}'.format(True) }}|{{ '{:5}'.format(12) }}|{{ '{:.2%}'.format(0.256) }}",
    "{{ '{a}-{b!r:>6}'.format(a=1, b='x') }}|{{ '{a}'.format_map({'a': 1}) }}|{{ '{:*^9}'.format('日本') }}|{{ '{:+.3g}|{:g}|{:.0f}|{:#o}|{:_}'.format(1234.5, 0.0001, 2.5, 8, 1000000) }}",
    "{{ '{}{1}'.format(1, 2) }}", "{{ '{:d}'.format('x') }}", "{{ '{:>5}'.format(none) }}", "{{ '{'.format() }}", "{{ '{0}'.format() }}",
    "{{ '{:{w}.{p}f}'.format(3.14159, w=8, p=2) }}|{{ '{!a}'.format('é') }}|{{ '{:c}'.format(65) }}|{{ '{:=+6}'.format(-3) }}|{{ '{:.1}'.format(0.05) }}",
    "{{ {'b': 2, 'a': 1, 'C': 0}|dictsort }}|{{ {'b': 2, 'a': 1}|dictsort(by='value') }}|{{ {'b': 2, 'a': 1}|dictsort(reverse=true) }}|{{ {'b': 2, 'a': 1, 'C': 0}|dictsort(true) }}|{{ {'a': 2, 'b': 2, 'c': 1}|dictsort(false, 'value', true) }}",
    "{{ {'a': 1}|dictsort(by='x') }}",
    "{{ 'abc'|replace('b', 'X', 0) }}|{{ 'aaa'|replace('a', 'b', 2) }}|{{ 'abc'|replace('', '-') }}|{{ 'abc'|replace('', '-', 2) }}|{{ 12|replace(1, 3) }}",
    "{{ {'a': 1}|attr('a') }}|{{ 'abc'|attr('upper') is defined }}|{{ [{'role': 'x'}]|last|attr('role') }}|{% set ns = namespace(k=3) %}{{ ns|attr('k') }}",
    "{{ 1000000|filesizeformat }}|{{ 1024|filesizeformat(true) }}|{{ 1|filesizeformat }}|{{ 999|filesizeformat }}|{{ 1e30|filesizeformat }}|{{ '2048'|filesizeformat(true) }}",
    "{{ {'a': 'b c', 'd': none, 'e': '<&>'}|xmlattr }}|{{ {'a': 1}|xmlattr(false) }}|{{ {}|xmlattr }}", "{{ {'a b': 1}|xmlattr }}",
    "{% set c = cycler('a', 'b') %}{{ c.next() }}{{ c.next() }}{{ c.next() }}{{ c.current }}{{ c.reset() }}{{ c.current }}|{% set j = joiner(', ') %}{% for x in [1, 2, 3] %}{{ j() }}{{ x }}{% endfor %}|{% set k = joiner() %}{{ k() }}{{ k() }}",
    "{{ '1'.isnumeric() }}|{{ '①'.isdigit() }}|{{ '٣'.isdecimal() }}|{{ 'x_1'.isidentifier() }}|{{ '\t'.isprintable() }}|{{ 'a'.isprintable() }}|{{ '一'.isnumeric() }}|{{ '½'.isdigit() }}|{{ 'ा'.isalpha() }}|{{ 'a1'.isalnum() }}|{{ '1a'.isidentifier() }}|{{ ''.isprintable() }}",
    "{{ 'abcb'.count('b', 2) }}|{{ 'abc'.count('b', 0, 1) }}|{{ 'abc'.count('') }}|{{ 'a b c'.split(maxsplit=1) }}|{{ 'a,b'.split(sep=',') }}|{{ 'a,b,c'.split(',', maxsplit=1) }}",
    "{{ [1, 2, 1].index(2) }}|{{ [1, 2, 1].count(1) }}|{{ [1, 2].index(1.0) }}", "{{ [1].index(5) }}",
    "{% set ns = namespace(a=1, b='x') %}{{ ns }}|{{ [ns] }}",
    # The lower/upper tests read str(value); splitlines' boundaries; an autoescape block is a scope and
    # its filters keep Markup; truncate returns a short list or dict as it is; `~` prints with str().
    "{{ {'role': 'system'} is lower }}|{{ ['A'] is upper }}|{{ 3 is lower }}|{{ none is upper }}",
    "{{ 'a\u2028b\x1cc\r\nd\x85e'.splitlines() }}|{{ 'a\nb\r\n'.splitlines(true) }}|{{ 'x\n'.splitlines(keepends=true) }}",
    "{% autoescape true %}{% set blk = 'x' %}{{ blk }}{% endautoescape %}[{{ blk }}]",
    "{% autoescape true %}{% filter replace('a', 'b') %}<|im_start|>{{ 'a<' }}{% endfilter %}{% filter indent(2) %}\n{{ [1, 'x'] }}{% endfilter %}{{ {'k': '<'}|xmlattr }}{% endautoescape %}",
    "{{ {'role': 'system', 'content': ''}|truncate(9, True, '..', 0) }}|{{ [1, 2]|truncate(5) }}", "{{ 5|truncate }}",
    "{{ {'k': '\u00a0x\u2028'} ~ 'z' }}|{{ 'x' ~ ['a', none, true, 1.5] }}|{{ ('a'|e) ~ '<' }}|{{ none ~ 1 }}",
    "{{ ['t', 'ß', 'T']|sort }}|{{ ['t', 'ß']|max }}|{{ ['ß', 'SS', 'ss']|unique|list }}|{{ ['b', 'A', 'a']|sort }}|{{ [{'n': 'B'}, {'n': 'a'}]|sort(attribute='n')|map(attribute='n')|list }}|{{ ['b', 'A']|min }}|{{ []|max }}|{{ [2, 1.5]|max }}|{{ [{'a': {'b': 2}}, {'a': {'b': 1}}]|min(attribute='a.b') }}",
    "{{ [[2, 'b'], [1, 'a'], [1, 'A']]|sort(attribute='0,1') }}|{{ ['b', 'A', 'a']|sort(reverse=true, case_sensitive=true) }}|{{ 'Hello'|max }}|{{ [1, 'a']|max }}",
    "{{ {'k': 'a'|e, 'j': '<'}|xmlattr }}",
    "{% set b = '<s>' %}{{ ((b ~ b) ~ 'v') }}|{{ (b ~ (b ~ [1])) }}|{% for x in ((b ~ 'v') ~ b) %}{{ x }}{% endfor %}|{{ b ~ 1 ~ none ~ 1.5 }}",
    "{{ true|abs }}|{{ -3|abs }}|{{ -2.5|abs }}|{{ false|abs }}", "{{ 'x'|abs }}",
    "{% set n = -1 %}{{ 'ab' * n }}|{{ [1] * n }}|{{ n * 'x' }}|{{ 'ab' * (n + 2) }}|{% set k = 2 %}{{ k * 3 }}|{{ 2.5 * k }}|{{ true * k }}|{{ 'x' * true }}|{{ 2**62 * k * k }}|{{ (1, 2) * k }}",
    "{% set k = 'x' %}{{ [1] * k }}", "{% set k = 2.0 %}{{ 'a' * k }}", "{{ 'x'|format('z') }}", "{{ '%s-%s'|format('a', 'b') }}|{{ '%(a)s'|format(a=1) }}|{{ 3|format }}",
    "{%- raw +%} a{% endraw %}", "{%+ raw %} a{% endraw +%}|", "{% macro m() %}{% endmacro %}{{ m|tojson }}", "{{ namespace(a=1)|tojson }}",
    "{{ 'a b'|split }}", "{{ 1|bool }}", "{{ 'a\nb'|lines }}", "{{ 'x' is startingwith('x') }}", "{{ 1 is int }}", "{{ 'x'|safe is safe }}", "{{ 'ab'.split('a') }}|{{ 1 is integer }}",
    # wordwrap: Python's textwrap (hyphens, em-dashes, long words, whitespace at line ends).
    "{{ 'The quick brown fox jumps over the lazy dog'|wordwrap(10) }}|",
    "{{ 'a well-known state-of-the-art anti-inflammatory x-ray re-do e-mail'|wordwrap(12) }}|",
    "{{ 'a well-known state-of-the-art anti-inflammatory'|wordwrap(12, break_on_hyphens=false) }}|",
    "{{ 'supercalifragilisticexpialidocious and more'|wordwrap(8) }}|",
    "{{ 'supercalifragilisticexpialidocious and more'|wordwrap(8, false) }}|",
    "{{ 'self-contained-long-hyphenated-word'|wordwrap(9) }}|",
    "{{ '---- ab--cd word--word a--- --b x-- 3-4 a-b-c-d'|wordwrap(5) }}|",
    "{{ 'wait--what? yes--no. \"quoted\"--text'|wordwrap(6) }}|",
    "{{ '  leading  spaces   and   gaps  '|wordwrap(7) }}|",
    "{{ 'line one\nline two is longer than ten\n\nlast\r\nx'|wordwrap(10) }}|",
    "{{ 'a b c d e f'|wordwrap(3, wrapstring='<br>') }}|",
    "{{ 'tab\tseparated\twords here'|wordwrap(8) }}|",
    "{{ 'héllo wörld 漢字漢字漢字漢字 ünïcödé-wörds'|wordwrap(6) }}|",
    "{{ 'x'|wordwrap(0) }}|", "{{ 12|wordwrap }}|", "{{ ''|wordwrap }}|", "{{ 'ab'|wordwrap(true) }}|",
    "{{ ('word ' * 40)|wordwrap }}|", "{{ 'a-b a--b ab-cd-ef 12-34 a_b-c_d'|wordwrap(4) }}|",
    "{{ 'exactly10c exactly10c'|wordwrap(10) }}|", "{{ 'end-'|wordwrap(2) }}|", "{{ '-start --x'|wordwrap(3) }}|",
]


def wordwrap_cases(n=150, seed=7):
    """Random texts of words, hyphens, em-dashes, punctuation and whitespace, wrapped at random widths
    with each option, so that every rule of textwrap's word splitting is met."""
    import random

    rng = random.Random(seed)
    pieces = ["ab", "word", "x", "state", "of", "art", "é", "漢字", "12", "3", "_a", "-", "--", "---", ".", ",", "!", "?", "\"", "'", "&"]
    spaces = [" ", " ", " ", "  ", "\t", "\n", "\r\n", "\x0c"]
    cases = []
    for _ in range(n):
        text = ""
        for _ in range(rng.randrange(1, 14)):
            text += "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 5)))
            if rng.random() < 0.7:
                text += rng.choice(spaces)
        width = rng.randrange(1, 12)
        long_words = rng.choice(["true", "false"])
        hyphens = rng.choice(["true", "false"])
        cases.append(f"{{{{ {text!r}|wordwrap({width}, {long_words}, break_on_hyphens={hyphens}) }}}}|")
    return cases


CASES += wordwrap_cases()


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env.globals["raise_exception"] = raise_exception
    out = []
    for case in CASES:
        try:
            out.append({"template": case, "output": env.from_string(case).render()})
        except Exception as error:  # noqa: BLE001 - every Jinja2 error is "raises"
            out.append({"template": case, "error": type(error).__name__})
    print(json.dumps({"jinja2": jinja2.__version__, "cases": out}, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
