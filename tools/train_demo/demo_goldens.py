"""Greedy-parity goldens of a demo checkpoint, by the oracle (write_golden of tools/reference/model_goldens.py).

  python3 tools/train_demo/demo_goldens.py CKPT OUT_DIR NAME=IMAGE [NAME=IMAGE ...]

Each case is one user turn holding one image (the `tensorfold ocr` prompt) rendered with the checkpoint's chat
template and default kwargs; the oracle records prompt ids, pixel_values hash, 64 greedy ids with EOS ignored and
every step's top-2 margin (N_NEW=N in the environment: up to N greedy ids instead of 64). Only the small files are kept: greedy.json, prompt.json and a stages.safetensors
reduced to the teacher-forced logits of the first 8 new positions (the full stages file's hashes stay in
prompt.json). Runs on CPU, deterministic (as `ref.py golden`).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))

KEEP = ("lm_head.tail8", "input.input_ids")


def main(argv):
    if len(argv) < 4 or any("=" not in a for a in argv[3:]):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    ckpt, out = argv[1], argv[2]
    cases = [a.split("=", 1) for a in argv[3:]]
    import json
    import model_goldens
    from common import deterministic, tensor_sha256, write_json
    from safetensors.torch import load_file, save_file
    deterministic(8)

    def conversations(family, images_dir, subset=None):
        return [(name, [{"role": "user", "content": [{"type": "image", "path": os.path.abspath(img)}]}], {})
                for name, img in cases]

    model_goldens.conversations = conversations
    orig_greedy = model_goldens.greedy

    def greedy(model, inputs, n_new=int(os.environ.get("N_NEW", model_goldens.N_NEW))):
        # generate() still stops at the checkpoint's EOS (its generation_config fills eos_token_id back in), so the
        # output may be shorter than 64: the teacher-forced pass and greedy.json's n_new then use its real length.
        ids, steps = orig_greedy(model, inputs, n_new)
        model_goldens.N_NEW = len(ids)
        return ids, steps

    model_goldens.greedy = greedy
    summary = model_goldens.write_golden(ckpt, out, "", command=" ".join(argv),
                                         extra_meta={"images": {n: img for n, img in cases}})
    if os.environ.get("FULL_STAGES"):  # keep every captured stage (a first-difference hunt, not a golden)
        print(summary)
        return 0
    for name, _ in cases:
        st = os.path.join(out, name, "stages.safetensors")
        t = load_file(st)
        pj_path = os.path.join(out, name, "prompt.json")
        with open(pj_path, encoding="utf-8") as f:
            pj = json.load(f)
        for k in sorted(t):  # dropped tensors keep their hash (input.pixel_values among them)
            if k not in KEEP:
                pj["hashed_tensors"][k] = {"sha256": tensor_sha256(t[k]), "shape": list(t[k].shape),
                                           "dtype": str(t[k].dtype).replace("torch.", "")}
        write_json(pj_path, pj)
        save_file({k: t[k].contiguous() for k in KEEP if k in t}, st, metadata={"format": "pt"})
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
