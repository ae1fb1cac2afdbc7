"""Transcribe a held-out set with tensorfold (CPU) or Tesseract 5 and write a predictions .jsonl for cer.py.

  python3 tools/train_demo/transcribe.py tensorfold build/tensorfold models/demo-lighton examples/heldout OUT.jsonl
  python3 tools/train_demo/transcribe.py tesseract tesseract - examples/heldout OUT.jsonl [PSM]
tensorfold runs `ocr CKPT IMAGE --temperature 0 --max-tokens 160 --json` per image (MAX_TOKENS=N in the
environment: --max-tokens N, e.g. 1024 for examples/heldout_pages) (the output line also keeps
its token ids); tesseract runs `IMAGE stdout --psm PSM -l eng` (default 7 = the image is one text line; 6 = a
uniform block of text, for examples/heldout_blocks).
"""
import json
import os
import subprocess
import sys
import time


def main(argv):
    if len(argv) not in (6, 7) or argv[1] not in ("tensorfold", "tesseract"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    engine, exe, ckpt, folder, out = argv[1:6]
    psm = argv[6] if len(argv) == 7 else "7"
    with open(os.path.join(folder, "ground_truth.jsonl"), encoding="utf-8") as f:
        files = [json.loads(line)["file"] for line in f if line.strip()]
    t0 = time.time()
    with open(out, "w", encoding="utf-8") as f:
        for name in files:
            img = os.path.join(folder, name)
            if engine == "tensorfold":
                cmd = [exe, "ocr", ckpt, img, "--temperature", "0", "--max-tokens", os.environ.get("MAX_TOKENS", "160"),
                       "--json"]
            else:
                cmd = [exe, img, "stdout", "--psm", psm, "-l", "eng"]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                print(f"{name}: exit {r.returncode}: {r.stderr.strip()[:200]}", file=sys.stderr)
            row = {"file": name}
            if engine == "tensorfold":
                j = json.loads(r.stdout) if r.returncode == 0 else {"text": "", "token_ids": []}
                row.update(text=j["text"], token_ids=j["token_ids"])
            else:
                row["text"] = "\n".join(line for line in r.stdout.strip().splitlines() if line.strip())
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{engine}: {len(files)} images in {time.time() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
