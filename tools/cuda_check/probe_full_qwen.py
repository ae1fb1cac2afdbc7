import json, os, subprocess, sys, time
sys.path.insert(0, "tools/reference"); sys.path.insert(0, "bench/model")
import torch, gpu_bench, model_goldens
ck = gpu_bench.build_full("/tmp/tf-bench")[1]
img = "examples/paragraph.png"
res = {}
for be in ("cpu", "cuda"):
    r = subprocess.run(["build-cuda/tensorfold", "ocr", ck, img, "--backend", be, "--json", "--max-tokens", "24",
                        "--ignore-eos", "--temperature", "0"], capture_output=True, text=True)
    res[be] = json.loads(r.stdout)["token_ids"] if r.returncode == 0 else r.stderr[-300:]
    print(be, res[be], flush=True)
model, proc, _ = model_goldens.load(ck, "cuda")
msgs = [{"role": "user", "content": [{"type": "image", "path": os.path.abspath(img)}]}]
inputs = proc.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt").to("cuda")
ids, steps = model_goldens.greedy(model, dict(inputs), 24)
print("hf  ", ids)
for i, s in enumerate(steps[:24]):
    print(i, s["top1"], s["top2"], round(s["top1_logit"] - s["top2_logit"], 5))
# HF's logits for tensorfold's sequence at the first difference (teacher forcing ours)
k = next((i for i, (a, b) in enumerate(zip(ids, res["cuda"])) if a != b), None)
print("first difference hf vs cuda at", k)
