"""The oracle's greedy ids and per-step top-2 margins over a held-out set, on the CPU, one image per call.

  [SHARD=I/N] [THREADS=T] python3 tools/train_demo/oracle_ids.py CKPT HELDOUT_DIR OUT.jsonl [MAX_NEW]

Each image is the `tensorfold ocr` prompt (one user turn holding the image, the checkpoint's chat template and
processor), run by Transformers' stock generate() greedily on the CPU without padding, stopping at the
checkpoint's EOS (the same semantics tensorfold's CPU backend reproduces). Each row: file, text, ids, and per step
the top-1 / top-2 logits (model_goldens.greedy's record, with generate() stopping at EOS instead of running on to
MAX_NEW). parity.py compares tensorfold's ids with these. SHARD=I/N reads every N-th image from the I-th (0-based),
so N processes share a set; THREADS (default 8) is torch's CPU thread count.
"""
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))


def greedy_to_eos(model, inputs, n_new):
    """model_goldens.greedy, but generate() stops at the checkpoint's EOS (a page would otherwise run on to
    MAX_NEW tokens for nothing): the ids and logits up to the first EOS are the same."""
    import copy
    import torch
    gc = copy.deepcopy(model.generation_config)
    gc.do_sample, gc.max_new_tokens, gc.min_new_tokens = False, n_new, None
    gc.temperature, gc.top_p, gc.top_k = None, None, None
    with torch.no_grad():
        o = model.generate(**inputs, generation_config=gc, output_logits=True, return_dict_in_generate=True)
    p = inputs["input_ids"].shape[1]
    ids = o.sequences[0, p:].tolist()[:len(o.logits)]
    steps = []
    for i, lg in enumerate(o.logits):
        v, ix = torch.topk(lg[0].float(), 2)
        steps.append({"top1_logit": float(v[0]), "top2_logit": float(v[1])})
        assert int(ix[0]) == ids[i] or float(v[0]) == float(v[1]), "greedy id is not the argmax"
    return ids, steps


def main(argv):
    if len(argv) not in (4, 5):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    import model_goldens
    from common import deterministic
    ckpt, folder, out = argv[1:4]
    max_new = int(argv[4]) if len(argv) == 5 else 160
    deterministic(int(os.environ.get("THREADS", "8")))
    model, proc, _ = model_goldens.load(ckpt, "cpu")
    eos = set(model.generation_config.eos_token_id or [])
    with open(os.path.join(folder, "ground_truth.jsonl"), encoding="utf-8") as f:
        files = [json.loads(line)["file"] for line in f if line.strip()]
    i, n = (int(v) for v in os.environ.get("SHARD", "0/1").split("/"))
    files = files[i::n]
    t0 = time.time()
    with open(out, "w", encoding="utf-8") as f:
        for name in files:
            msgs = [{"role": "user", "content": [{"type": "image", "path": os.path.abspath(os.path.join(folder, name))}]}]
            inputs = proc.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, return_dict=True,
                                              return_tensors="pt")
            ids, steps = greedy_to_eos(model, dict(inputs), max_new)
            n = next((i + 1 for i, t in enumerate(ids) if t in eos), len(ids))  # through the first EOS
            ids, steps = ids[:n], steps[:n]
            text = proc.decode(ids, skip_special_tokens=True)
            f.write(json.dumps({"file": name, "text": text, "ids": ids,
                                "top1_logit": [s["top1_logit"] for s in steps],
                                "top2_logit": [s["top2_logit"] for s in steps]}, ensure_ascii=False) + "\n")
            f.flush()  # a call limit keeps the rows done so far
            print(f"{name}: {len(ids)} ids, {time.time() - t0:.1f}s", flush=True)
    print(f"{ckpt}: {len(files)} images of {folder} -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
