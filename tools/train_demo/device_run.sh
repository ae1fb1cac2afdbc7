#!/usr/bin/env bash
# One GPU-machine call (the `run` tool) for both demo checkpoints, from the repository root, fonts in .fonts/:
#   1. train demo-lighton and demo-qwen35 concurrently on the one GPU, each resuming from its checkpoint under
#      models/ (or from scratch when QWEN_RESUME is empty); each evaluates its reloaded bf16 checkpoint on
#      examples/heldout (the oracle: Transformers greedy through the checkpoint's processor and template);
#   2. greedy-parity goldens (CPU, deterministic) of both trained checkpoints (demo_goldens.py).
# $OUT gets lighton/{model.tar,train_log.txt,oracle.jsonl}, qwen/{...}, goldens.tar and all.log (8 files).
# The committed checkpoints came from two such calls (tools/train_demo/README.md gives the arguments of each).
set -u
export PYTHONUNBUFFERED=1
LIGHTON_ARGS=${LIGHTON_ARGS:---resume models/demo-lighton --steps 420 --max-train-seconds 290 --batch 512 --lr 5e-4 --warmup 40 --ctc-weight 0.2 --vision-group 16}
QWEN_ARGS=${QWEN_ARGS:---resume models/demo-qwen35 --steps 1700 --max-train-seconds 290 --batch 512 --lr 1.5e-3 --warmup 50 --ctc-weight 0.5}
mkdir -p "$OUT/lighton" "$OUT/qwen" /tmp/ckpt /tmp/demo_goldens
log() { echo "[$(date +%T)] $*" | tee -a "$OUT/all.log"; }
log "start; $(nvidia-smi --query-gpu=name,memory.used --format=csv,noheader)"
# shellcheck disable=SC2086
python3 tools/train_demo/train.py --family lighton_ocr --fonts .fonts --out "$OUT/lighton" $LIGHTON_ARGS \
  --heldout-dir examples/heldout --procs 7 >/tmp/lighton.out 2>&1 &
PL=$!
# shellcheck disable=SC2086
python3 tools/train_demo/train.py --family qwen3_5 --fonts .fonts --out "$OUT/qwen" $QWEN_ARGS \
  --heldout-dir examples/heldout --procs 7 >/tmp/qwen.out 2>&1 &
PQ=$!
CASES="line1=examples/line1.png line2=examples/line2.png heldout_001=examples/heldout/line_001.png"
wait $PL; log "lighton exit $?"; wait $PQ; log "qwen exit $?"
for r in lighton qwen; do
  log "---- $r"; grep -v "^step \|Loading weights\|Writing model\|processor_kwargs\|falling back" /tmp/$r.out | tail -40 >>"$OUT/all.log"
  if [ -f "$OUT/$r/model.tar" ]; then tar xf "$OUT/$r/model.tar" -C /tmp/ckpt; fi
done
for m in demo-lighton demo-qwen35; do
  if [ -d /tmp/ckpt/$m ]; then
    python3 tools/train_demo/demo_goldens.py /tmp/ckpt/$m /tmp/demo_goldens/$m $CASES >/tmp/g_$m.out 2>&1 \
      || log "goldens ($m) failed: $(tail -8 /tmp/g_$m.out)"
  fi
done
tail -2 /tmp/g_*.out >>"$OUT/all.log" 2>&1
tar cf "$OUT/goldens.tar" -C /tmp/demo_goldens .
log "done"
