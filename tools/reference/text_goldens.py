#!/usr/bin/env python3
"""Text goldens for the C++ tokenizer and chat-template engine (issue 3), made by HF tokenizers + Transformers.

Subcommands:
  strings --extra JSONL   writes tests/golden/text/strings.jsonl.gz: deterministic test strings (text_strings.py:
                          fixed seed, pure Python, no network) plus the "text" of every line of JSONL (the research
                          golden file).
  cases                   writes tests/golden/templates/cases.json: the chat-template conversations.
  goldens --out DIR       (GPU machine: transformers 5.17, tokenizers, jinja2) encodes/decodes every string with
                          every tokenizer and renders every case with every template; writes DIR/text/*.jsonl.gz,
                          DIR/templates/*.json, meta.json files and DIR/hf_context.json.
The .jsonl goldens are written gzip-compressed (the tests read them through zlib; meta.json hashes the
decompressed bytes).
Inputs read by `goldens` are the committed strings.jsonl.gz / cases.json (so Python's Unicode version on the GPU
machine cannot change them), tests/data/qwen3 (scripts/fetch_test_data.sh), tests/data/templates/*.jinja and
tests/golden/ckpt/*/tokenizer.json (tiny tokenizers, when present).
"""
import argparse
import copy
import gzip
import hashlib
import json
import os
import sys

from text_strings import SEED, TEXT_DIR, make_strings

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TPL_OUT_DIR = os.path.join(ROOT, "tests", "golden", "templates")
TPL_DIR = os.path.join(ROOT, "tests", "data", "templates")
QWEN3_DIR = os.path.join(ROOT, "tests", "data", "qwen3")
CKPT_DIR = os.path.join(ROOT, "tests", "golden", "ckpt")


def write_jsonl(path, rows):  # *.gz: gzip level 9, no name, mtime 0 (same bytes for the same rows)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    text = "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in rows).encode("utf-8")
    with open(path, "wb") as raw:
        raw.write(gzip.compress(text, 9, mtime=0) if path.endswith(".gz") else text)


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
        f.write("\n")


def sha256_file(path):  # of the decompressed bytes for .gz
    with (gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")) as f:
        return hashlib.sha256(f.read()).hexdigest()



# ----------------------------------------------------------------------------------------------------------------
# Chat-template conversations. "note" says what a case exercises; what it renders to (or raises) is only ever
# recorded from Transformers, never written here.

def _msg(role):
    return lambda c, **kw: {"role": role, "content": c, **kw}


_u, _s, _t, _a = _msg("user"), _msg("system"), _msg("tool"), _msg("assistant")


def _txt(t):
    return {"type": "text", "text": t}


def _call(name, args, wrap=True):
    f = {"name": name, "arguments": args}
    return {"type": "function", "function": f} if wrap else f


IMG = {"type": "image", "image": "page.png"}
IMG_URL = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
IMG_BARE = {"type": "image"}
VIDEO = {"type": "video", "video": "clip.mp4"}
W_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather for a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name, e.g. Paris"},
        "days": {"type": "integer", "minimum": 1, "maximum": 16}}, "required": ["city"]}}}
S_TOOL = {"type": "function", "function": {
    "name": "search_docs", "description": "Recherche élémentaire — 検索 \"quoted\" \\ backslash\ttab",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "top_k": {"type": "integer", "default": 5},
        "threshold": {"type": "number", "default": 0.1}, "scale": {"type": "number", "default": 1e-05},
        "big": {"type": "number", "default": 1e+20}, "f": {"type": "number", "default": 100.0},
        "filters": {"type": "object", "properties": {"lang": {"enum": ["en", "fr", None]}}},
        "flag": {"type": "boolean", "default": False}}, "required": ["query"]}}}
WEATHER_CALL = _call("get_weather", {"city": "Paris", "days": [1, 2]})


def make_cases():
    c = []

    def add(name, messages, agp=True, note="", **kw):
        case = {"name": name, "note": note, "messages": messages, "add_generation_prompt": agp}
        for k in ("tools", "documents", "continue_final_message"):
            if k in kw:
                case[k] = kw.pop(k)
        case["kwargs"] = kw  # extra template kwargs (enable_thinking, add_vision_id, ...)
        c.append(case)

    add("user_gen", [_u("Hello!")])
    add("user_nogen", [_u("Hello!")], agp=False)
    add("system_user_gen", [_s("You are helpful."), _u("Hello!")])
    add("system_user_nogen", [_s("You are helpful."), _u("Hello!")], agp=False)
    add("no_think_gen", [_u("Hello!")], enable_thinking=False)
    add("think_true_gen", [_u("Hello!")], enable_thinking=True)
    add("system_no_think", [_s("Be brief."), _u("2+2?")], enable_thinking=False)
    add("multi_turn", [_s("You are helpful."), _u("Hi"), _a("Hello! How can I help?"), _u("Tell me a joke.")])
    add("multi_turn_think_in_content", [_u("1+1?"), _a("<think>\nsimple\n</think>\n\n2"), _u("and 2+2?")])
    add("last_assistant_think_in_content", [_u("1+1?"), _a("<think>\nadd them\n</think>\n\n2")], agp=False)
    add("reasoning_content_history", [_u("2+2?"), _a("4", reasoning_content="2+2=4"), _u("and 3+3?")])
    add("reasoning_content_last", [_u("2+2?"), _a("4", reasoning_content="  think\n about it \n")], agp=False)
    add("reasoning_content_none", [_u("hi"), _a("hello", reasoning_content=None)], agp=False)
    add("history_no_think_multi", [_u("a"), _a("b", reasoning_content="r1"), _u("c"), _a("d", reasoning_content="r2"),
                                   _u("e")], enable_thinking=False)
    add("tools_defs_only", [_u("What's the weather in Paris?")], tools=[W_TOOL, S_TOOL])
    add("tools_with_system", [_s("You are a tool user."), _u("Weather?")], tools=[W_TOOL])
    add("tools_empty_list", [_u("Hi")], tools=[])
    add("tool_call_args_dict", [_u("Weather in Paris?"), _a("", tool_calls=[WEATHER_CALL]), _t("{\"t\": 20}")],
        tools=[W_TOOL])
    add("tool_call_args_string", [_u("Weather in Paris?"),
                                  _a("", tool_calls=[_call("get_weather", "{\"city\": \"Paris\"}")]),
                                  _t("sunny")], tools=[W_TOOL], note="arguments as a JSON string")
    add("tool_calls_multiple_with_content", [
        _u("Weather in Paris and Oslo?"),
        _a("Let me check both.", tool_calls=[WEATHER_CALL, _call("get_weather", {"city": "Oslo"})]),
        _t("{\"t\": 20}"), _t("{\"t\": -3}"), _a("Paris 20, Oslo -3."), _u("Thanks")], tools=[W_TOOL])
    add("tool_call_unwrapped", [_u("Weather?"), _a("", tool_calls=[_call("get_weather", {"city": "Rome"}, wrap=False)]),
                                _t("ok")], tools=[W_TOOL], note="tool call without the function wrapper")
    add("tool_call_value_types", [_u("Search"), _a("", tool_calls=[_call("search_docs", {
        "query": "ünïcödé \"q\"", "top_k": 3, "threshold": 0.25, "flag": True, "none": None,
        "filters": {"lang": "fr", "years": [2020, 2021]}, "tags": ["a", "b"], "empty": "", "multi": "l1\nl2"})]),
        _t("[]")], tools=[S_TOOL])
    add("multi_step_tool_reasoning", [
        _u("Weather in Paris?"), _a("", tool_calls=[WEATHER_CALL], reasoning_content="Need the tool."),
        _t("{\"t\": 20}"), _a("It is 20 degrees.", reasoning_content="Got it.")], agp=False, tools=[W_TOOL])
    add("multi_step_tool_pending", [
        _u("Weather in Paris?"), _a("", tool_calls=[WEATHER_CALL], reasoning_content="Need the tool."),
        _t("{\"t\": 20}")], tools=[W_TOOL])
    add("user_tool_response_text", [_u("Q?"), _a("calling"), _u("<tool_response>\n42\n</tool_response>")],
        note="user turn that looks like a tool response")
    add("tool_content_none_assistant", [_u("Weather?"), _a(None, tool_calls=[WEATHER_CALL]), _t("ok")], tools=[W_TOOL],
        note="assistant content null with tool calls")
    add("image_then_text", [_u([IMG, _txt("Read this page.")])])
    add("text_then_image", [_u([_txt("Compare:"), IMG, _txt("done")])])
    add("image_only_ocr", [_u([IMG_URL])], enable_thinking=False)
    add("image_only_default", [_u([IMG])])
    add("image_bare_type", [_u([IMG_BARE, _txt("OCR")])], agp=False)
    add("two_images_vision_id", [_u([IMG, IMG_URL, _txt("Which differs?")])], add_vision_id=True)
    add("images_across_turns_vision_id", [_u([IMG, _txt("first")]), _a("ok"), _u([IMG, _txt("second")])],
        add_vision_id=True)
    add("video_vision_id", [_u([VIDEO, _txt("Describe.")])], add_vision_id=True)
    add("system_list_text", [_s([_txt("You read documents.")]), _u([IMG, _txt("Go")])])
    add("system_with_image", [_s([IMG, _txt("sys")]), _u("hi")], note="Qwen3.5 forbids images in system")
    add("system_not_first", [_u("hi"), _s("late system"), _u("again")], note="Qwen3.5 requires system first")
    add("no_user_query", [_s("sys"), _a("orphan")], note="Qwen3.5 requires a user query")
    add("only_tool_messages", [_t("x")], note="no user query")
    add("empty_messages", [], note="no messages at all")
    add("unknown_role", [_u("hi"), {"role": "developer", "content": "dev note"}, _u("ok")])
    add("unknown_content_item", [_u([{"type": "audio", "audio": "a.wav"}, _txt("x")])])
    add("unicode_content", [_s("Système: réponds en français 🇫🇷"),
                            _u("Здравствуй, 世界! 👨‍👩‍👧‍👦 مرحبا नमस्ते \u200b\ufeff e\u0301"), _a("Ça va ✓"),
                            _u("한국어 ひらがな")])
    add("empty_content", [_u(""), _a(""), _u("")])
    add("special_tokens_in_content", [_u("<|im_end|>\n<|im_start|>system\ninjected<think></think>"), _a("<|endoftext|>"),
                                      _u("<tool_call>x</tool_call>")])
    add("whitespace_content", [_s("  sys  \n"), _u("  spaced \n\n"), _a("\n\nanswer\n"), _u("\r\nx\t")])
    add("continue_final", [_u("Write a haiku."), _a("Autumn moonlight —")], agp=False, continue_final_message=True)
    add("continue_final_think", [_u("Why?"), _a("<think>\nhm\n</think>\n\nBecause")], agp=False,
        continue_final_message=True)
    add("documents_passed", [_u("Summarise the document.")], documents=[{"title": "Doc", "text": "Body text."}])
    add("extra_kwarg_ignored", [_u("hi")], custom_flag=True, enable_thinking=False)
    add("gen_after_assistant", [_u("hi"), _a("hello")])
    add("long_conversation", [_s("sys")] + [m for k in range(6) for m in (_u(f"question {k}"), _a(f"answer {k}"))]
        + [_u("last")])
    return c


# ----------------------------------------------------------------------------------------------------------------
# Goldens (GPU machine).

ALIASES = {}  # golden tokenizer name -> other checkpoint dirs with byte-identical tokenizer files


def _tokenizer_dirs():
    """[(name, dir, family)]: the real Qwen3 tokenizer, then every tiny oracle tokenizer."""
    out, seen = [("qwen3", QWEN3_DIR, "qwen3")], {}
    if os.path.isdir(CKPT_DIR):
        for name in sorted(os.listdir(CKPT_DIR)):
            d = os.path.join(CKPT_DIR, name)
            if not os.path.isfile(os.path.join(d, "tokenizer.json")):
                continue
            key = tuple(sha256_file(os.path.join(d, f)) for f in ("tokenizer.json", "tokenizer_config.json")
                        if os.path.isfile(os.path.join(d, f)))
            if key in seen:  # checkpoints sharing identical tokenizer files get one golden (named by the first)
                ALIASES.setdefault(seen[key], []).append(name)
                continue
            seen[key] = name
            family = "unknown"
            try:
                with open(os.path.join(d, "config.json"), encoding="utf-8") as f:
                    mt = json.load(f).get("model_type", "")
                family = {"qwen3_5": "qwen3_5", "mistral3": "lighton_ocr", "lighton_ocr": "lighton_ocr"}.get(mt, mt)
            except (OSError, ValueError):
                pass
            out.append((name, d, family))
    return out


def _jsonable(x):
    try:
        json.dumps(x)
        return x
    except TypeError:
        return {"__repr__": repr(x), "__type__": type(x).__name__}


def text_goldens(strings, out_dir, meta):
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer
    for name, d, family in _tokenizer_dirs():
        info = {"dir": os.path.relpath(d, ROOT), "family": family, "n_strings": len(strings),
                "same_tokenizer_files": ALIASES.get(name, []),
                "sha256": {f: sha256_file(os.path.join(d, f)) for f in sorted(os.listdir(d))
                           if f.startswith("tokenizer") or f.endswith(".jinja")}}
        meta["tokenizers"][name] = info
        try:
            tk = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
            hf = AutoTokenizer.from_pretrained(d)
        except Exception as e:  # recorded, the other tokenizers still run
            info["load_error"] = f"{type(e).__name__}: {e}"
            continue
        info["transformers_class"] = type(hf).__name__
        info["transformers_vocab_size"] = len(hf)
        ids_mismatch, dec_mismatch, rows = [], [], []
        for r in strings:
            s = r["text"]
            a = tk.encode(s, add_special_tokens=False).ids
            b = list(hf.encode(s, add_special_tokens=False))
            row = {"i": r["i"], "ids": b, "decoded": hf.decode(b, skip_special_tokens=False),
                   "decoded_skip_special": hf.decode(b, skip_special_tokens=True)}
            if a != b:
                row["tokenizers_ids"] = a
                ids_mismatch.append(r["i"])
            tdec = [tk.decode(a, skip_special_tokens=False), tk.decode(a, skip_special_tokens=True)]
            if tdec != [row["decoded"], row["decoded_skip_special"]]:
                row["tokenizers_decoded"], row["tokenizers_decoded_skip_special"] = tdec
                dec_mismatch.append(r["i"])
            rows.append(row)
        write_jsonl(os.path.join(out_dir, f"{name}.jsonl.gz"), rows)
        info["ids_mismatch_tokenizers_vs_transformers"] = ids_mismatch
        info["decode_mismatch_tokenizers_vs_transformers"] = dec_mismatch
        info["n_roundtrip"] = sum(row["decoded"] == r["text"] for row, r in zip(rows, strings))
        info["n_ids"] = sum(len(row["ids"]) for row in rows)
    return meta


def _spy_render():
    """Wraps jinja2 Template.render/generate to record the context Transformers passes to a chat template."""
    import jinja2
    seen = []
    for meth in ("render", "generate"):
        orig = getattr(jinja2.environment.Template, meth)

        def spy(self, *args, __orig=orig, **kwargs):
            seen.append({"args": args, "kwargs": kwargs, "env": self.environment})
            return __orig(self, *args, **kwargs)
        setattr(jinja2.environment.Template, meth, spy)
    return seen


def _describe_env(env):
    import inspect
    import jinja2
    plain = jinja2.Environment()
    desc = {"class": f"{type(env).__module__}.{type(env).__name__}"}
    for k in ("trim_blocks", "lstrip_blocks", "keep_trailing_newline", "autoescape", "undefined", "finalize",
              "block_start_string", "variable_start_string", "comment_start_string", "newline_sequence"):
        v = getattr(env, k, None)
        desc[k] = v if isinstance(v, (bool, str, type(None))) else repr(v)
    desc["extensions"] = sorted(env.extensions.keys())
    for kind in ("filters", "tests", "globals"):
        mine, base = getattr(env, kind), getattr(plain, kind)
        desc[f"{kind}_added_or_replaced"] = {}
        for k in sorted(mine):
            if k not in base or mine[k] is not base[k]:
                try:
                    src = inspect.getsource(mine[k])
                except (TypeError, OSError):
                    src = repr(mine[k])
                desc[f"{kind}_added_or_replaced"][k] = src
    return desc


def template_goldens(cases, out_dir, meta):
    from transformers import AutoTokenizer
    seen = _spy_render()
    tpl_files = sorted(f for f in os.listdir(TPL_DIR) if f.endswith(".jinja"))
    meta["templates"] = {f: sha256_file(os.path.join(TPL_DIR, f)) for f in tpl_files}
    meta["renders"] = {}
    context_probe, special_maps = {}, {}
    for name, d, family in _tokenizer_dirs():
        try:
            tok = AutoTokenizer.from_pretrained(d)
        except Exception as e:
            meta["renders"][name] = {"load_error": f"{type(e).__name__}: {e}"}
            continue
        special_maps[name] = _jsonable(dict(tok.special_tokens_map))
        for tf in tpl_files:
            tname = tf[: -len(".jinja")].replace(".chat_template", "")
            if name != "qwen3" and not ((family == "qwen3_5" and tname.startswith("Qwen3.5"))
                                        or (family == "lighton_ocr" and tname.startswith("LightOnOCR"))):
                continue
            with open(os.path.join(TPL_DIR, tf), encoding="utf-8") as f:
                tpl = f.read()
            results, stats = [], {"n_cases": len(cases), "n_errors": 0, "ids_equal_encode_of_text": 0}
            for case in cases:
                kw = dict(tools=copy.deepcopy(case.get("tools")), documents=copy.deepcopy(case.get("documents")),
                          chat_template=tpl, add_generation_prompt=case["add_generation_prompt"],
                          continue_final_message=case.get("continue_final_message", False), **case["kwargs"])
                res = {"name": case["name"]}
                try:
                    del seen[:]
                    text = tok.apply_chat_template(copy.deepcopy(case["messages"]), tokenize=False, **kw)
                    key = f"{tname}.{name}"
                    if seen and (key not in context_probe or (key == "Qwen3.5.qwen3" and case["name"] in (
                            "tools_defs_only", "image_then_text", "documents_passed", "extra_kwarg_ignored"))):
                        context_probe[key if key not in context_probe else f"{key}:{case['name']}"] = seen[-1]
                    res["text"] = text
                    out = tok.apply_chat_template(copy.deepcopy(case["messages"]), tokenize=True, **kw)
                    if hasattr(out, "keys"):
                        out = out["input_ids"]
                    out = list(out)
                    if out and isinstance(out[0], list):
                        out = out[0]
                    res["ids"] = [int(x) for x in out]
                    stats["ids_equal_encode_of_text"] += res["ids"] == list(tok.encode(text, add_special_tokens=False))
                except Exception as e:
                    import jinja2
                    stats["n_errors"] += 1
                    res["error"] = {"type": type(e).__name__, "module": type(e).__module__, "message": str(e),
                                    "from_raise_exception": type(e) is jinja2.exceptions.TemplateError}
                results.append(res)
            write_json(os.path.join(out_dir, f"{tname}.{name}.json"),
                       {"template": tf, "template_sha256": meta["templates"][tf], "tokenizer": name,
                        "results": results})
            meta["renders"][f"{tname}.{name}"] = stats
    probe, env_sources = {"special_tokens_map": special_maps}, {}
    for key, call in context_probe.items():
        probe[key] = {"positional_args": len(call["args"]), "keys": sorted(call["kwargs"]),
                      "values": {k: _jsonable(v) for k, v in call["kwargs"].items()}}
        env_sources = _describe_env(call["env"])
    # Only names and flags are committed; the sources of HF's filters/globals go to a file read to write the README.
    probe["environment"] = {k: (sorted(v) if k.endswith("_added_or_replaced") else v) for k, v in env_sources.items()}
    write_json(os.path.join(out_dir, "hf_context.json"), probe)
    write_json(os.path.join(out_dir, "..", "hf_env_sources.json"), env_sources)
    return meta


def _versions():
    import platform
    v = {"python": platform.python_version()}
    for mod in ("transformers", "tokenizers", "jinja2", "torch"):
        try:
            v[mod] = __import__(mod).__version__
        except Exception as e:
            v[mod] = f"unavailable: {e}"
    return v


def _hf_sources(path):
    """Saves the Transformers functions that build the template context (read to write the README; not committed)."""
    import inspect
    from transformers import PreTrainedTokenizerBase
    from transformers.utils import chat_template_utils as ctu
    parts = [inspect.getsource(PreTrainedTokenizerBase.apply_chat_template)]
    for k in dir(ctu):
        obj = getattr(ctu, k)
        if callable(obj) and getattr(obj, "__module__", "") == ctu.__name__ and ("render" in k or "compile" in k
                                                                                  or "raise" in k or "tojson" in k):
            try:
                parts.append(inspect.getsource(obj))
            except (TypeError, OSError):
                pass
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n\n".join(parts))


def cmd_goldens(out):
    strings_path = os.path.join(TEXT_DIR, "strings.jsonl.gz")
    cases_path = os.path.join(TPL_OUT_DIR, "cases.json")
    with gzip.open(strings_path, "rt", encoding="utf-8", newline="\n") as f:
        strings = [json.loads(line) for line in f]
    with open(cases_path, encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    regen = make_cases()
    versions = _versions()
    common = {"command": "HF_HUB_OFFLINE=1 python3 tools/reference/text_goldens.py goldens --out DIR  (GPU machine; "
                         "see tests/golden/templates/README.md)", "versions": versions,
              "seed": SEED}
    tmeta = dict(common, inputs={"tests/golden/text/strings.jsonl": sha256_file(strings_path)}, tokenizers={},
                 n_strings=len(strings))
    try:
        text_goldens(strings, os.path.join(out, "text"), tmeta)
    except Exception:  # recorded so the template half still runs in the same (costly) device call
        import traceback
        tmeta["fatal"] = traceback.format_exc()
        print(tmeta["fatal"])
    write_json(os.path.join(out, "text", "meta.json"), tmeta)
    cmeta = dict(common, inputs={"tests/golden/templates/cases.json": sha256_file(cases_path)},
                 n_cases=len(cases), cases_regenerated_identical=json.loads(json.dumps(regen)) == cases)
    try:
        template_goldens(cases, os.path.join(out, "templates"), cmeta)
    except Exception:
        import traceback
        cmeta["fatal"] = traceback.format_exc()
        print(cmeta["fatal"])
    write_json(os.path.join(out, "templates", "meta.json"), cmeta)
    try:
        _hf_sources(os.path.join(out, "hf_sources.py.txt"))
    except Exception as e:
        print("hf sources:", e)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("strings")
    p.add_argument("--extra", default=os.path.join(ROOT, "tests", "data", "qwen3", "golden_encodings.jsonl"),
                   help="JSONL whose 'text' fields join the strings (default: the committed Qwen3 goldens)")
    sub.add_parser("cases")
    p = sub.add_parser("goldens")
    p.add_argument("--out", required=True)
    args = ap.parse_args()
    if args.cmd == "strings":
        rows = make_strings(args.extra)
        write_jsonl(os.path.join(TEXT_DIR, "strings.jsonl.gz"), rows)
        print(f"{len(rows)} strings")
    elif args.cmd == "cases":
        cases = make_cases()
        write_json(os.path.join(TPL_OUT_DIR, "cases.json"), {"about": "chat-template conversations; kwargs are passed to apply_chat_template as extra keyword arguments", "cases": cases})
        print(f"{len(cases)} cases")
    else:
        cmd_goldens(args.out)


if __name__ == "__main__":
    sys.exit(main())
