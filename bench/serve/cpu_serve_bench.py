#!/usr/bin/python3
"""Aggregate decode throughput of `tensorfold serve` on the CPU at several levels of requests in flight,
for two builds side by side (the batched engine and the commit before it), on each checkpoint given.
Standard library only. Text prompts (words, about --prompt-tokens tokens for the Qwen3 tokenizer; both
builds tokenize them the same), greedy,
ignore_eos, no drafts, no prompt cache: what is measured is the engine's step.

usage: cpu_serve_bench.py BEFORE_BIN AFTER_BIN CKPT [CKPT...] [--levels 1,8,32] [--seconds 40]
                          [--max-tokens 32] [--prompt-tokens 24] [--threads N]

Per level: `level` client threads each send requests back to back for --seconds (a request started
inside the window runs to its end); aggregate decode tok/s = completion tokens of all requests / wall
seconds of the level. Prints one markdown table: checkpoint, level, tok/s before, tok/s after, ratio.
"""
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request


def parse(argv):
    a = {"levels": "1,8,32", "seconds": 40.0, "max_tokens": 32, "prompt_tokens": 24, "threads": 0, "pos": []}
    i = 1
    while i < len(argv):
        k = argv[i]
        if k.startswith("--") and k[2:].replace("-", "_") in a and i + 1 < len(argv):
            key = k[2:].replace("-", "_")
            a[key] = type(a[key])(argv[i + 1])
            i += 2
        else:
            a["pos"].append(k)
            i += 1
    if len(a["pos"]) < 3:
        sys.exit(__doc__)
    return a


def start(binary, ckpt, parallel, log_path, threads):
    cmd = [binary, "serve", ckpt, "--backend", "cpu", "--host", "127.0.0.1", "--port", "0", "--parallel",
           str(parallel), "--cache-mb", "0", "--no-drafts", "--context", "2048"]
    env = dict(os.environ)
    if threads:
        env["TF_THREADS"] = str(threads)
    logf = open(log_path, "w")
    proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    deadline = time.monotonic() + 300
    base = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{binary} serve exited: {open(log_path).read()[-800:]}")
        text = open(log_path, errors="replace").read()
        if base is None and "listening on http://127.0.0.1:" in text:
            port = text.split("listening on http://127.0.0.1:")[1].split()[0]
            base = f"http://127.0.0.1:{int(''.join(ch for ch in port if ch.isdigit()))}"
        if base:
            try:
                with urllib.request.urlopen(base + "/health", timeout=5) as r:
                    if r.status == 200:
                        return proc, base
            except Exception:
                pass
        time.sleep(0.5)
    stop(proc)
    raise RuntimeError("server not ready")


def stop(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


MODEL = {}


def served_model(base):
    if base not in MODEL:
        with urllib.request.urlopen(base + "/v1/models", timeout=30) as r:
            MODEL[base] = json.loads(r.read())["data"][0]["id"]
    return MODEL[base]


def one_request(base, prompt, max_tokens):
    body = json.dumps({"model": served_model(base), "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                       "ignore_eos": True}).encode()
    req = urllib.request.Request(base + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=3600) as r:
        return json.loads(r.read())["usage"]["completion_tokens"]


def level_run(base, level, seconds, max_tokens, prompt_tokens):
    tokens = [0] * level
    errors = []
    t0 = time.monotonic()

    def client(i):
        k = 0
        while time.monotonic() - t0 < seconds:
            words = ["total", "amount", "invoice", "date", "paid", "number", "name", "page", "line", "table"]
            prompt = " ".join(words[(37 * i + 11 * k + 5 * j) % len(words)] for j in range(prompt_tokens // 2))
            try:
                tokens[i] += one_request(base, prompt, max_tokens)
            except Exception as e:  # counted, shown
                errors.append(str(e))
                return
            k += 1

    ts = [threading.Thread(target=client, args=(i,)) for i in range(level)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.monotonic() - t0
    return sum(tokens) / wall, errors


def main(argv):
    a = parse(argv)
    before, after, ckpts = a["pos"][0], a["pos"][1], a["pos"][2:]
    levels = [int(x) for x in a["levels"].split(",")]
    rows = []
    for ckpt in ckpts:
        result = {}
        for tag, binary in (("before", before), ("after", after)):
            proc, base = start(binary, ckpt, max(levels), f"/tmp/cpu_serve_bench_{tag}.log", a["threads"])
            try:
                one_request(base, "total amount", 2)  # warm-up
                for lv in levels:
                    tps, errs = level_run(base, lv, a["seconds"], a["max_tokens"], a["prompt_tokens"])
                    if errs:
                        sys.exit(f"{ckpt} {tag} at {lv} in flight: {len(errs)} failed requests ({errs[0]})")
                    result[(tag, lv)] = tps
                    print(f"{os.path.basename(ckpt.rstrip('/'))} {tag} {lv} in flight: {tps:.2f} tok/s"
                          + (f" ({len(errs)} errors: {errs[0]})" if errs else ""), file=sys.stderr, flush=True)
            finally:
                stop(proc)
        for lv in levels:
            b, n = result[("before", lv)], result[("after", lv)]
            rows.append((os.path.basename(ckpt.rstrip("/")), lv, b, n, n / b if b else float("nan")))
    print(f"| checkpoint | in flight | before tok/s | after tok/s | after / before |")
    print("|---|---:|---:|---:|---:|")
    for name, lv, b, n, r in rows:
        print(f"| {name} | {lv} | {b:.2f} | {n:.2f} | {r:.2f}x |")


if __name__ == "__main__":
    main(sys.argv)
