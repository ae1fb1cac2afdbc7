#!/usr/bin/env python3
"""Reference renders for the C++ Jinja engine's feature tests.

Renders small feature templates with Jinja2 (3.1.6 here) configured exactly as Transformers'
apply_chat_template does: ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
extensions=[loopcontrols]) with HF's tojson filter and raise_exception global, and writes
tests/golden/jinja/features.json:

  {"jinja2": version, "cases": [{"name", "template", "context", "expected"} |
                                {"name", "template", "context", "error": {"type", "phase", "message"}}]}

phase is "parse" (from_string raised: syntax error, unknown filter/test) or "render".
Run: python3 tools/reference/jinja_cases.py  (any machine with jinja2 3.1.x; no GPU needed)
"""
import json
import os
import sys
from datetime import datetime

import jinja2
from jinja2.exceptions import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def make_env():
    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    def strftime_now(format):
        return datetime.now().strftime(format)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


CTX = {
    "s": "héllo wörld",
    "n": None,
    "t": True,
    "i": 7,
    "f": 2.5,
    "l": [3, 1, 2],
    "words": ["b", "A", "c", "a"],
    "d": {"b": 1, "a": 2, "items": "key-named-items"},
    "users": [{"name": "Bo", "age": 30, "tags": ["x"]}, {"name": "al", "age": 25}, {"name": "Cy", "age": 35}],
    "msgs": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"},
             {"role": "assistant", "content": "<think>\nr\n</think>\n\nans"}, {"role": "user", "content": [{"type": "text", "text": "x"}]}],
    "nested": {"a": {"b": {"c": [10, 20, {"d": "deep"}]}}},
    "uni": "日本語テキスト😀e\u0301",
    "empty": [],
    "emptys": "",
    "emptyd": {},
    "floats": [0.1, 1.0, 1e-05, 1e16, 123456789.125, -0.0, 1e22, 3.14159],
    "big": 9007199254740993,
    "ws": "  \t pad \n ",
    "js": {"a": [1, 2.0, None, True, "é\"\\\n\t\u0001"], "b": {}, "c": [], "z": {"k": "v"}},
}

# (name, template) or (name, template, extra_context)
CASES = [
    # --- output of values (Python str()) ---
    ("print_none", "{{ n }}|{{ none }}|{{ None }}"),
    ("print_bools", "{{ t }}|{{ true }}|{{ False }}"),
    ("print_numbers", "{{ i }}|{{ f }}|{{ -i }}|{{ 10 / 4 }}|{{ 4 / 2 }}|{{ 1_000 }}|{{ 0x1F }}|{{ 0o17 }}|{{ 0b101 }}|{{ 1.5e3 }}"),
    ("print_floats", "{% for x in floats %}{{ x }};{% endfor %}"),
    ("print_list_repr", "{{ l }}|{{ words }}|{{ [1, 'a', none, true, 2.0] }}|{{ [] }}"),
    ("print_dict_repr", "{{ d }}|{{ {'a': 'it\\'s', \"b\": 'say \"hi\"'} }}|{{ {} }}"),
    ("print_tuple_repr", "{{ (1,) }}|{{ (1, 2) }}|{{ () }}|{{ ('a', [1]) }}"),
    ("print_nested_repr", "{{ nested }}|{{ users[0] }}"),
    ("print_unicode_repr", "{{ [uni] }}|{{ ['\\x00\\n\\t\\\\'] }}|{{ ['é'] }}"),
    ("print_undefined", "[{{ missing }}][{{ d.missing }}][{{ l[10] }}][{{ n.attr }}]"),
    ("print_big_int", "{{ big }}|{{ big + 1 }}"),
    ("print_markup_repr", "{{ ['<b>'|safe] }}|{{ ['<b>'|e] }}"),
    # --- string literals and escapes ---
    ("string_escapes", "{{ 'a\\nb\\tc\\\\d\\'e' }}|{{ \"x\\\"y\" }}|{{ '\\u00e9\\x41\\101' }}|{{ 'no\\qescape' }}"),
    ("string_concat_literals", "{{ 'a' 'b' \"c\" }}"),
    # --- whitespace control ---
    ("ws_trim_blocks", "{% if true %}\nA\n{% endif %}\nB\n"),
    ("ws_lstrip_blocks", "x\n    {% if true %}\n    y\n    {% endif %}\nz"),
    ("ws_minus", "a   {%- if true -%}   b   {%- endif -%}   c"),
    ("ws_var_minus", "a  \n {{- 'b' -}} \n  c"),
    ("ws_comment", "a\n  {# c #}\nb {#- c -#}  c\n{# x #}\nd"),
    ("ws_plus", "x\n    {%+ if true %}y{% endif %}\n  {% if true +%}\nz{% endif %}"),
    ("ws_var_not_lstripped", "x\n    {{ 'v' }}\n"),
    ("ws_trailing_newline_dropped", "a\n"),
    ("ws_two_trailing_newlines", "a\n\n"),
    ("ws_crlf", "a\r\nb{% if true %}\r\nc{% endif %}\r\n"),
    ("ws_raw", "{% raw %}{{ not evaluated }}{% endraw %}|{%- raw -%}  {{x}}  {%- endraw -%}|"),
    ("ws_tabs_lstrip", "a\n\t \t{% if true %}b{% endif %}"),
    ("ws_lstrip_not_after_text", "a  {% if true %}b{% endif %}"),
    ("ws_lstrip_start_of_template", "   {% if true %}b{% endif %}"),
    # --- statements ---
    ("set_simple", "{% set x = 1 %}{% set y = x + 1 %}{{ x }}{{ y }}"),
    ("set_tuple", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set (c, d) = [3, 4] %}{{ c }}{{ d }}"),
    ("set_block", "{% set x %}in {{ 'block' }}{% endset %}[{{ x }}]"),
    ("set_block_filter", "{% set x | upper %}abc{% endset %}{{ x }}"),
    ("set_in_if_leaks", "{% set x = 1 %}{% if true %}{% set x = 2 %}{% endif %}{{ x }}"),
    ("set_in_for_scoped", "{% set x = 1 %}{% for i in l %}{% set x = i %}{% endfor %}{{ x }}"),
    ("set_in_for_per_iteration", "{% for i in [1,2] %}{% if i == 2 %}[{{ y }}]{% endif %}{% set y = i %}{% endfor %}"),
    ("namespace_set", "{% set ns = namespace(a=1, b='x') %}{% for i in l %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }}{{ ns.b }}{{ ns }}"),
    ("namespace_new_attr", "{% set ns = namespace() %}{% set ns.z = 5 %}{{ ns.z }}{{ ns.missing }}|{{ ns['z'] }}"),
    ("namespace_from_dict", "{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}"),
    ("set_attr_non_namespace", "{% set x = {} %}{% set x.a = 1 %}"),
    ("if_elif_else", "{% for v in [0, 1, 2] %}{% if v == 0 %}zero{% elif v == 1 %}one{% else %}many{% endif %},{% endfor %}"),
    ("for_else", "{% for x in empty %}{{ x }}{% else %}none{% endfor %}|{% for x in l %}{{ x }}{% else %}none{% endfor %}"),
    ("for_loop_vars", "{% for x in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}"),
    ("for_previtem_nextitem", "{% for x in l %}[{{ loop.previtem }}|{{ loop.nextitem }}]{% endfor %}"),
    ("for_prev_defined", "{% for x in l %}{{ loop.previtem is defined }}{{ loop.nextitem is defined }};{% endfor %}"),
    ("for_cycle", "{% for x in l %}{{ loop.cycle('odd', 'even') }} {% endfor %}"),
    ("for_filter", "{% for x in l if x > 1 %}{{ x }}:{{ loop.index }}/{{ loop.length }} {% endfor %}"),
    ("for_unpack_items", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}"),
    ("for_unpack_filter_items", "{% for k, v in d|items %}{{ k }}={{ v }};{% endfor %}"),
    ("for_dict_keys", "{% for k in d %}{{ k }},{% endfor %}"),
    ("for_string", "{% for c in uni %}[{{ c }}]{% endfor %}"),
    ("for_nested_loop", "{% for a in [1,2] %}{% for b in [3,4] %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }}|{% endfor %}"),
    ("for_break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
    ("for_loop_var_after", "{% for x in l %}{% endfor %}[{{ x }}][{{ loop }}]"),
    ("for_over_none", "{% for x in n %}{{ x }}{% endfor %}"),
    ("for_over_undefined", "{% for x in missing %}{{ x }}{% else %}empty{% endfor %}"),
    ("for_unpack_mismatch", "{% for a, b in [[1, 2, 3]] %}{{ a }}{% endfor %}"),
    ("macro_basic", "{% macro m(a, b=2, c='x') %}{{ a }}-{{ b }}-{{ c }}{% endmacro %}{{ m(1) }}|{{ m(1, 3) }}|{{ m(1, c='y') }}|{{ m(b=5, a=4) }}|{{ m() }}"),
    ("macro_filtered", "{% macro m(x) %}  {{ x }}  {% endmacro %}[{{ m('a')|trim }}]"),
    ("macro_sees_outer", "{% set y = 1 %}{% macro m() %}{{ y }}{% endmacro %}{% set y = 2 %}{{ m() }}"),
    ("macro_ns_mutation", "{% set ns = namespace(c=0) %}{% macro inc() %}{% set ns.c = ns.c + 1 %}{% endmacro %}{{ inc() }}{{ inc() }}{{ ns.c }}"),
    ("namespace_holds_itself", "{% set ns = namespace(c=0) %}{% macro inc() %}{% set ns.c = ns %}{% endmacro %}{{ inc() }}{{ ns.c }}|{{ ns }}|{{ [ns, ns] }}"),
    ("namespace_cycle_of_two", "{% set a = namespace() %}{% set b = namespace(a=a) %}{% set a.b = [b, {'k': a}] %}{{ a }}|{{ b }}|{{ a.b[1].k.b[0].a == a }}"),
    ("namespace_chain_repr_too_deep", "{% set ns = namespace(x=0) %}{% for i in range(3000) %}{% set ns.x = namespace(y=ns.x) %}{% endfor %}{{ ns.x.y.y.y.y is defined }}{{ ns.x }}"),
    ("nesting_too_deep", "{% set ns = namespace(x=[]) %}{% for i in range(3000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x|length }}"),
    ("macro_too_many_args", "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}"),
    ("macro_varargs_kwargs", "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, x=4) }}"),
    ("macro_bad_kwarg", "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, b=2) }}"),
    ("macro_default_uses_param", "{% macro m(a, b=a * 2) %}{{ a }}{{ b }}{% endmacro %}{{ m(3) }}"),
    ("macro_recursion", "{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(4) }}"),
    ("call_star_args", "{% macro mul(a, b, c) %}{{ a * b * c }}{% endmacro %}{{ mul(*[1, 2, 3]) }}|{{ mul(1, *[2, 3]) }}|{{ mul(**{'a': 1, 'b': 2, 'c': 4}) }}|{{ mul(1, c=3, **{'b': 2}) }}|{{ dict(**d) }}"),
    ("call_star_args_bad_order", "{{ dict(*l, 1) }}"),
    ("call_kwarg_after_starstar", "{{ dict(**d, a=1) }}"),
    ("call_block", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}inner{% endcall %}"),
    ("call_block_args", "{% macro each(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% endmacro %}{% call(x) each([1,2]) %}[{{ x }}]{% endcall %}"),
    ("filter_block", "{% filter upper %}hello {{ 'x' }}{% endfilter %}"),
    ("with_block", "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]"),
    # --- expressions ---
    ("arith", "{{ 7 + 2 }} {{ 7 - 2 }} {{ 7 * 2 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ 7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }}"),
    ("arith_negative", "{{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ -7.5 // 2 }} {{ -7.5 % 2 }} {{ 2 ** 3 ** 2 }}"),
    ("arith_float_mix", "{{ 1 + 2.0 }} {{ 3 * 0.1 }} {{ 0.1 + 0.2 }} {{ 1e300 * 10 }} {{ 10 / 3 }}"),
    ("arith_bool", "{{ true + 1 }} {{ false * 3 }} {{ true / 2 }}"),
    ("arith_strings", "{{ 'a' + 'b' }} {{ 'ab' * 3 }} {{ 2 * 'x' }} {{ [1] + [2] }} {{ [0] * 3 }}"),
    ("arith_div_zero", "{{ 1 / 0 }}"),
    ("arith_floordiv_zero", "{{ 1 // 0 }}"),
    ("arith_str_plus_int", "{{ 'a' + 1 }}"),
    ("arith_undefined", "{{ missing + 1 }}"),
    ("arith_unary", "{{ -(3) }} {{ +3 }} {{ -f }} {{ - -2 }}"),
    ("concat_tilde", "{{ 'a' ~ 1 ~ none ~ true ~ 2.5 ~ missing ~ [1] }}"),
    ("compare_ops", "{{ 1 < 2 }} {{ 2 <= 2 }} {{ 3 > 4 }} {{ 3 >= 3 }} {{ 1 == 1.0 }} {{ 'a' != 'b' }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }}"),
    ("compare_strings_lists", "{{ 'abc' < 'abd' }} {{ 'Z' < 'a' }} {{ [1, 2] < [1, 3] }} {{ (1, 2) == (1, 2) }} {{ [1] == (1,) }}"),
    ("compare_mixed_types", "{{ 1 < 'a' }}"),
    ("compare_none_eq", "{{ none == none }} {{ n == none }} {{ missing == missing }} {{ missing == none }} {{ 0 == false }}"),
    ("in_operator", "{{ 'ell' in 'hello' }} {{ 2 in l }} {{ 'a' in d }} {{ 'z' not in d }} {{ 5 not in l }} {{ 'x' in missing }}"),
    ("in_bad_operand", "{{ 1 in 'abc' }}"),
    ("in_none", "{{ 1 in n }}"),
    ("and_or_values", "{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ '' and 'b' }} {{ none or none }} {{ [] or {} }} {{ missing or 'dflt' }}"),
    ("not_truthiness", "{{ not 0 }} {{ not '' }} {{ not [] }} {{ not {} }} {{ not none }} {{ not missing }} {{ not 'x' }} {{ not 0.0 }}"),
    ("cond_expr", "{{ 'y' if t else 'n' }} {{ 'y' if n else 'n' }} [{{ 'y' if n }}] {{ 1 if false else 2 if false else 3 }}"),
    ("cond_expr_with_filter", "{{ l | tojson if l is sequence else l | string }}|{{ 'a' | upper if false else 'b' | upper }}"),
    ("getattr_dict", "{{ users[0].name }} {{ users[0]['age'] }} {{ nested.a.b.c[2].d }} {{ nested['a']['b']['c'][-1]['d'] }}"),
    ("getattr_method_shadow", "{{ d['items'] }}|{{ d.get('b') }}|{{ d.get('zz', 'dflt') }}|{{ d.get('zz') }}"),
    ("getitem_negative", "{{ l[-1] }} {{ l[-3] }} [{{ l[-4] }}] {{ s[0] }} {{ s[-1] }} {{ uni[2] }}"),
    ("getitem_dot_int", "{{ l.0 }} {{ users.1.name }}"),
    ("slicing", "{{ l[1:] }} {{ l[:-1] }} {{ l[::-1] }} {{ l[::2] }} {{ l[5:] }} {{ l[-10:2] }} {{ s[1:4] }} {{ s[::-1] }} {{ uni[1:3] }} {{ uni[::-2] }}"),
    ("slicing_step_zero", "{{ l[::0] }}"),
    ("undefined_attr_of_undefined", "{{ missing.attr }}"),
    ("undefined_item_of_undefined", "{{ missing[0] }}"),
    ("undefined_call", "{{ missing() }}"),
    ("undefined_attr_is_defined", "{{ d.missing is defined }} {{ d.missing.x is defined }}"),
    ("none_attr", "[{{ n.x }}] {{ n.x is defined }}"),
    ("list_literal_trailing_comma", "{{ [1, 2,] }} {{ {'a': 1,} }} {{ (1, 2,) }}"),
    ("dict_literal_keys", "{{ {1: 'a', 'b': 2, none: 3, true: 4} }}"),
    ("dict_literal_duplicate", "{{ {'a': 1, 'a': 2} }}"),
    ("dict_unhashable_key", "{{ {[1]: 2} }}"),
    ("print_tuple_expr", "{{ 1, 2 }}"),
    ("call_not_callable", "{{ s() }}"),
    ("list_append_forbidden", "{{ l.append(4) }}"),
    ("list_append_attr_prints_empty", "[{{ l.append }}]"),
    ("dict_update_forbidden", "{{ d.update({'x': 1}) }}"),
    ("dict_pop_forbidden", "{{ d.pop('a') }}"),
    ("private_attr", "[{{ s.__class__ }}]"),
    ("range_global", "{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(5, 0, -2)|list }} {{ range(0)|list }}"),
    ("range_too_big", "{{ range(100001)|length }}"),
    ("dict_global", "{{ dict(a=1, b='x') }} {{ dict() }}"),
    ("raise_exception_msg", "{{ raise_exception('Custom failure: ' ~ i) }}"),
    ("raise_in_macro", "{% macro m() %}{{ raise_exception('from macro') }}{% endmacro %}a{{ m() }}"),
    ("cycler_joiner", "{% set c = cycler('a', 'b') %}{{ c.next() }}{{ c.next() }}{{ c.next() }}{{ c.current }}|{% set j = joiner('+') %}{% for x in l %}{{ j() }}{{ x }}{% endfor %}"),
    # --- tests ---
    ("tests_types", "{{ s is string }} {{ i is number }} {{ f is number }} {{ t is number }} {{ i is integer }} {{ t is integer }} {{ f is float }} {{ t is boolean }} {{ n is none }}"),
    ("tests_containers", "{{ d is mapping }} {{ l is mapping }} {{ l is sequence }} {{ s is sequence }} {{ d is sequence }} {{ l is iterable }} {{ s is iterable }} {{ i is iterable }} {{ i is sequence }}"),
    ("tests_undefined_containers", "{{ missing is iterable }} {{ missing is sequence }} {{ missing is mapping }} {{ missing is string }} {{ missing is none }}"),
    ("tests_defined", "{{ s is defined }} {{ missing is defined }} {{ missing is undefined }} {{ n is defined }} {{ s is not defined }}"),
    ("tests_true_false", "{{ t is true }} {{ t is false }} {{ 1 is true }} {{ 0 is false }} {{ false is false }} {{ n is not false }}"),
    ("tests_numbers", "{{ 4 is even }} {{ 3 is odd }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ 2.0 is even }}"),
    ("tests_compare", "{{ 1 is eq 1 }} {{ 1 is equalto 2 }} {{ 1 is ne 2 }} {{ 1 is lt 2 }} {{ 2 is ge 3 }} {{ 3 is gt 2 }} {{ 3 is le 3 }} {{ 1 is == 1 }} {{ 1 is != 1 }}"),
    ("tests_compare_names", "{{ 1 is eq 1 }} {{ 1 is equalto 2 }} {{ 1 is ne 2 }} {{ 1 is lt 2 }} {{ 2 is ge 3 }} {{ 3 is gt 2 }} {{ 3 is le 3 }} {{ 3 is greaterthan 2 }} {{ 3 is lessthan 2 }}"),
    ("tests_in", "{{ 2 is in l }} {{ 'a' is in d }} {{ 'q' is in 'quiet' }}"),
    ("tests_misc", "{{ 'abc' is lower }} {{ 'ABC' is upper }} {{ 'aB' is lower }} {{ none is sameas none }} {{ 'upper' is filter }} {{ 'nope' is filter }} {{ 'odd' is test }} {{ range is callable }} {{ s is callable }}"),
    ("tests_escaped", "{{ 'x'|e is escaped }} {{ 'x' is escaped }} {{ 'x'|safe is escaped }}"),
    ("test_chain_not", "{{ not s is string }} {{ s is not string and true }} {{ missing is not defined or false }}"),
    ("test_even_on_string", "{{ 'a' is even }}"),
    # --- filters ---
    ("f_default", "{{ missing|default('d') }} {{ n|default('d') }} {{ ''|default('d') }} {{ ''|default('d', true) }} {{ missing|d }}. {{ 0|d('z', boolean=true) }}"),
    ("f_length", "{{ l|length }} {{ s|length }} {{ uni|length }} {{ d|count }} {{ missing|length }} {{ ''|length }}"),
    ("f_length_int", "{{ 5|length }}"),
    ("f_string", "{{ 1|string }} {{ none|string }} {{ l|string }} {{ (missing|string) == '' }} {{ [1]|string|length }}"),
    ("f_trim", "[{{ ws|trim }}] [{{ 'xxaxx'|trim('x') }}] [{{ missing|trim }}] [{{ 5|trim }}]"),
    ("f_case", "{{ s|upper }} {{ 'ABC'|lower }} {{ 'hello WORLD'|capitalize }} {{ 'hello wORLD-foo (bar) x_y'|title }}"),
    ("f_replace", "{{ 'aaa'|replace('a', 'b') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 'abc'|replace('', '-') }} {{ 123|replace('2', 'x') }}"),
    ("f_first_last", "{{ l|first }} {{ l|last }} {{ s|first }} {{ s|last }} [{{ empty|first }}] {{ d|first }} {{ d|last }}"),
    ("f_join", "{{ l|join }} {{ l|join(', ') }} {{ users|join('/', attribute='name') }} {{ [1, none, 'a']|join('-') }}"),
    ("f_list", "{{ s|list }} {{ d|list }} {{ (1, 2)|list }}"),
    ("f_items", "{{ d|items|list }} {{ emptyd|items|list }} {{ missing|items|list }}"),
    ("f_items_non_mapping", "{{ l|items|list }}"),
    ("f_map", "{{ users|map(attribute='name')|list }} {{ users|map(attribute='zzz', default='?')|list }} {{ words|map('upper')|join }} {{ l|map('string')|list }}"),
    ("f_map_nested_attr", "{{ users|map(attribute='tags.0')|list }}"),
    ("f_select_reject", "{{ l|select('odd')|list }} {{ l|reject('odd')|list }} {{ [0, 1, '', 'a', none]|select|list }} {{ l|select('gt', 1)|list }} {{ l|select('in', [1, 3])|list }}"),
    ("f_selectattr", "{{ users|selectattr('age', 'gt', 26)|map(attribute='name')|list }} {{ users|rejectattr('tags')|map(attribute='name')|list }} {{ msgs|selectattr('role', 'equalto', 'user')|list|length }}"),
    ("f_unique", "{{ words|unique|list }} {{ words|unique(case_sensitive=true)|list }} {{ [1, 2, 1, 3]|unique|list }}"),
    ("f_sort", "{{ l|sort }} {{ l|sort(reverse=true) }} {{ words|sort }} {{ words|sort(case_sensitive=true) }} {{ users|sort(attribute='age')|map(attribute='name')|list }} {{ users|sort(attribute='name')|map(attribute='name')|list }}"),
    ("f_sort_mixed", "{{ [1, 'a']|sort }}"),
    ("f_sort_none_and_undefined", "{{ [none, none]|sort }} {{ [missing, missing]|sort }} {{ users|sort(attribute='age,name')|map(attribute='name')|list }}"),
    ("f_sort_none_int", "{{ [none, 1]|sort }}"),
    ("f_reverse", "{{ l|reverse|list }} {{ s|reverse }} {{ (1, 2)|reverse|list }}"),
    ("f_dictsort", "{{ d|dictsort }} {{ d|dictsort(reverse=true) }} {{ {'b': 2, 'a': 3, 'c': 1}|dictsort(by='value') }}"),
    ("f_min_max_sum", "{{ l|min }} {{ l|max }} {{ l|sum }} {{ words|min }} {{ words|max }} {{ users|max(attribute='age') }} {{ users|sum(attribute='age') }} {{ floats|sum }} {{ l|sum(start=10) }} [{{ empty|min }}]"),
    ("f_int_float", "{{ '42'|int }} {{ '42.7'|int }} {{ 'x'|int }} {{ 'x'|int(5) }} {{ 3.9|int }} {{ '0x1A'|int(0, 16) }} {{ ' 12 '|int }} {{ '1_000'|int }} {{ '3.5'|float }} {{ 'a'|float }} {{ 2|float }} {{ true|int }} {{ none|int }}"),
    ("f_abs_round", "{{ -3|abs }} {{ (-3)|abs }} {{ -2.5|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 2.1|round(0, 'ceil') }} {{ 2.9|round(method='floor') }} {{ 7|round }} {{ 1234.5678|round(-2) }}"),
    ("f_indent", "{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(width='> ', blank=true) }}|{{ 'x\\r\\ny'|indent(1) }}"),
    ("f_wordcount_center", "{{ 'hello big  world, ok'|wordcount }} [{{ 'ab'|center(7) }}] [{{ 'abc'|center(6) }}]"),
    ("f_format", "{{ '%s-%d'|format('a', 3) }} {{ '%s'|format([1]) }} {{ '%r'|format('x') }}"),
    ("f_escape_safe", "{{ '<a href=\"x\">&\\'</a>'|e }} {{ '<b>'|safe }} {{ '<b>'|escape|escape }} {{ '<b>'|forceescape }}"),
    ("f_markup_concat", "{{ '<b>'|safe + '<i>' }} {{ '<i>' + '<b>'|safe }} {{ '<b>'|safe ~ '<i>' }}"),
    ("f_batch", "{{ l|batch(2)|list }} {{ l|batch(2, 'x')|list }}"),
    ("f_attr", "{{ users[0]|attr('name') }} [{{ d|attr('a') }}]"),
    ("f_chain", "{{ users|map(attribute='name')|map('lower')|sort|join(',')|upper }}"),
    ("f_tojson", "{{ js|tojson }}|{{ 'é'|tojson }}|{{ floats|tojson }}|{{ none|tojson }}|{{ (1, 2)|tojson }}"),
    ("f_tojson_indent", "{{ js|tojson(indent=2) }}|{{ [1, [2, {}]]|tojson(indent=1) }}|{{ {'a': []}|tojson(indent='\\t') }}"),
    ("f_tojson_options", "{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}|{{ 'é😀'|tojson(ensure_ascii=true) }}|{{ {'a': [1, 2]}|tojson(separators=(',', ':')) }}|{{ {1: 2, none: 3, true: 4}|tojson }}"),
    ("f_tojson_undefined", "{{ missing|tojson }}"),
    ("f_tojson_generator", "{{ l|map('string')|tojson }}"),
    ("f_tojson_markup", "{{ '<a>'|safe|tojson }}"),
    ("f_length_generator", "{{ l|map('string')|length }}"),
    ("f_generator_truthy", "{{ 'yes' if empty|select('odd') else 'no' }}"),
    ("f_print_generator", "{{ l|select('odd') }}"),
    ("f_unknown", "{{ s|nosuchfilter }}"),
    ("f_unsupported_wordwrap", "{{ s|wordwrap(3) }}"),
    ("test_unknown", "{{ s is nosuchtest }}"),
    # --- string methods ---
    ("m_startswith_endswith", "{{ s.startswith('hé') }} {{ s.endswith('rld') }} {{ s.startswith(('x', 'h')) }} {{ s.endswith('x') }}"),
    ("m_split", "{{ 'a,b,,c'.split(',') }} {{ '  a  b c '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a,b,c'.split(',', maxsplit=1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ '  a b  '.rsplit(None, 1) }} {{ ''.split() }} {{ ''.split(',') }}"),
    ("m_split_empty_sep", "{{ 'abc'.split('') }}"),
    ("m_strip", "[{{ ws.strip() }}] [{{ ws.lstrip() }}] [{{ ws.rstrip() }}] [{{ 'xxhixx'.strip('x') }}] [{{ '\\n\\nhi\\n'.lstrip('\\n') }}] [{{ 'abcba'.rstrip('ab') }}]"),
    ("m_case", "{{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} {{ 'MiXed'.lower() }} {{ 'MiXed'.upper() }} {{ 'MiXed'.swapcase() }} {{ \"they're bill's\".title() }}"),
    ("m_replace_find_count", "{{ 'aXbXc'.replace('X', '-') }} {{ 'aXbXc'.replace('X', '-', 1) }} {{ s.find('l') }} {{ s.rfind('l') }} {{ s.find('zz') }} {{ 'banana'.count('an') }} {{ s.index('w') }}"),
    ("m_index_missing", "{{ s.index('zz') }}"),
    ("m_replace_keyword", "{{ 'abcabc'.replace('a', 'x', count=1) }}"),
    ("m_strip_keyword", "{{ 'xax'.strip(chars='x') }}"),
    ("m_split_keywords", "{{ 'a b c'.split(sep=' ', maxsplit=1) }} {{ 'a\nb'.splitlines(keepends=true) }}"),
    ("m_join_format", "{{ '-'.join(['a', 'b']) }} {{ ', '.join(words) }} {{ '{} and {}'.format('x', 1) }} {{ '{1}{0}'.format('a', 'b') }} {{ '{name}!'.format(name='n') }} {{ '{{}}{}'.format(2) }}"),
    ("m_join_non_str", "{{ '-'.join(l) }}"),
    ("m_is_methods", "{{ '123'.isdigit() }} {{ 'abc'.isalpha() }} {{ 'a1'.isalnum() }} {{ '  '.isspace() }} {{ ''.isdigit() }} {{ 'abc'.islower() }} {{ 'ABC'.isupper() }}"),
    ("m_pad", "[{{ 'ab'.ljust(5) }}] [{{ 'ab'.rjust(5, '*') }}] [{{ 'ab'.center(6, '-') }}] [{{ '42'.zfill(5) }}] [{{ '-42'.zfill(5) }}]"),
    ("m_splitlines_prefix", "{{ 'a\\nb\\r\\nc'.splitlines() }} {{ 'a\\nb'.splitlines(true) }} {{ 'prefix-x'.removeprefix('prefix-') }} {{ 'x.txt'.removesuffix('.txt') }}"),
    ("m_dict_methods", "{{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }} {{ d.items()|length }} {{ 'a' in d.keys() }}"),
    ("m_dict_views_print", "{{ d.items() }}|{{ d.keys() }}|{{ d.values() }}"),
    ("m_list_methods", "{{ l.index(1) }} {{ [1, 1, 2].count(1) }} {{ (1, 2).index(2) }}"),
    ("m_missing_method_undefined", "[{{ s.nosuchmethod }}] {{ s.nosuchmethod is defined }}"),
    ("m_missing_method_call", "{{ s.nosuchmethod() }}"),
    ("m_startswith_on_list", "{{ l.startswith('a') }}"),
    ("m_upper_on_none", "{{ n.upper() }}"),
    # --- syntax errors ---
    ("err_unclosed_if", "{% if true %}a"),
    ("err_unclosed_for", "line1\n{% for x in l %}\n{{ x }}"),
    ("err_unclosed_var", "a {{ x"),
    ("err_unclosed_comment", "a {# x"),
    ("err_unknown_tag", "{% frobnicate %}"),
    ("err_endif_without_if", "a{% endif %}"),
    ("err_bad_expression", "{{ 1 + }}"),
    ("err_unbalanced_paren", "{{ (1 + 2 }}"),
    ("err_extra_paren", "{{ 1 + 2) }}"),
    ("err_bad_string", "{{ 'abc }}"),
    ("err_bad_char", "{{ 1 $ 2 }}"),
    ("err_assign_to_literal", "{% set 1 = 2 %}"),
    ("err_else_twice", "{% if x %}{% else %}{% else %}{% endif %}"),
    ("err_macro_default_order", "{% macro m(a=1, b) %}{% endmacro %}"),
    ("err_break_outside_loop", "{% break %}"),
    ("err_continue_in_for_else", "{% for x in l %}{% else %}{% continue %}{% endfor %}"),
    ("err_break_in_macro_in_loop", "{% for x in l %}{% macro m() %}{% break %}{% endmacro %}{% endfor %}"),
    ("err_chained_is", "{{ 1 is number is number }}"),
    ("err_include", "{% include 'x.html' %}"),
    ("err_extends", "{% extends 'base.html' %}"),
    ("err_empty_var", "{{ }}"),
    ("err_line_number", "ok\nok\n{{ x.y( }}\n"),
]


def render_case(env, name, template, ctx):
    try:
        tpl = env.from_string(template)
    except Exception as e:  # noqa: BLE001 - record every failure class
        return {"error": {"type": type(e).__name__, "phase": "parse", "message": str(e),
                          "line": getattr(e, "lineno", None)}}
    try:
        return {"expected": tpl.render(**ctx)}
    except Exception as e:  # noqa: BLE001
        return {"error": {"type": type(e).__name__, "phase": "render", "message": str(e)}}


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out_path = os.path.join(root, "tests", "golden", "jinja", "features.json")
    env = make_env()
    cases = []
    seen = set()
    for entry in CASES:
        name, template = entry[0], entry[1]
        ctx = dict(CTX)
        if len(entry) > 2:
            ctx.update(entry[2])
        assert name not in seen, name
        seen.add(name)
        rec = {"name": name, "template": template}
        rec.update(render_case(env, name, template, ctx))
        cases.append(rec)
    doc = {"about": "Jinja2 renders with Transformers' chat-template environment; made by tools/reference/jinja_cases.py",
           "jinja2": jinja2.__version__, "python": sys.version.split()[0], "context": CTX, "cases": cases}
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    n_err = sum(1 for c in cases if "error" in c)
    print(f"{out_path}: {len(cases)} cases ({n_err} errors)")


if __name__ == "__main__":
    main()
