#!/usr/bin/env bash
# GPU-machine calls (the `run` tool) for both demo checkpoints, from the repository root, fonts unpacked into
# .fonts/ (`tar xJf .fontpack/fonts.tar.xz`). $OUT gets all.log plus, per MODE:
#   smoke  both families: --smoke (whole pipeline, a few steps), then 60 s of the real recipe (step times, loss);
#   train  both families trained from scratch concurrently on the one GPU (TRAIN_SECONDS each), each evaluated on
#          examples/heldout and examples/heldout_blocks by the stock Transformers code on its reloaded bf16
#          checkpoint: $OUT/{lighton,qwen}/{model.tar.gz,train_log.txt,oracle_*.jsonl};
#   eval   for the checkpoints under models/: the CPU oracle's greedy ids and margins on both held-out sets
#          (oracle_ids.py -> $OUT/ids.tar) and the parity goldens (demo_goldens.py -> $OUT/goldens.tar).
set -u
export PYTHONUNBUFFERED=1
MODE=${MODE:-train}
FAMILIES=${FAMILIES:-"lighton qwen"}        # train: which to train
MODELS=${MODELS:-"demo-lighton demo-qwen35"}  # eval: which checkpoints under models/
TRAIN_SECONDS=${TRAIN_SECONDS:-380}
LIGHTON_ARGS=${LIGHTON_ARGS:---batch 256 --lr 1e-3 --warmup 150 --ctc-weight 0.3 --block-frac 0.35 --n-lines 120000 --n-blocks 30000}
QWEN_ARGS=${QWEN_ARGS:---batch 256 --lr 1e-3 --warmup 150 --ctc-weight 0.5 --block-frac 0.3 --block-start 800 --n-lines 120000 --n-blocks 30000 --qwen-size m}
mkdir -p "$OUT/lighton" "$OUT/qwen"
log() { echo "[$(date +%T)] $*" | tee -a "$OUT/all.log"; }
log "start $MODE; $(nvidia-smi --query-gpu=name,memory.used --format=csv,noheader)"
train_both() {  # extra args for each family of $FAMILIES, run concurrently
  local pids=""
  for r in $FAMILIES; do
    if [ "$r" = lighton ]; then fam=lighton_ocr; args=$LIGHTON_ARGS; else fam=qwen3_5; args=$QWEN_ARGS; fi
    # shellcheck disable=SC2086
    python3 tools/train_demo/train.py --family $fam --fonts .fonts --out "$OUT/$r" $args "$@" \
      --procs "$((16 / $(echo $FAMILIES | wc -w)))" >/tmp/$r.out 2>&1 &
    pids="$pids $!"
  done
  for p in $pids; do wait "$p"; log "train pid $p exit $?"; done
  for r in $FAMILIES; do
    log "---- $r"; grep -v "Loading weights\|Writing model\|processor_kwargs\|falling back" /tmp/$r.out | tail -60 >>"$OUT/all.log"
  done
}
case $MODE in
  smoke)
    train_both --smoke
    rm -rf "$OUT/lighton" "$OUT/qwen"; mkdir -p "$OUT/lighton" "$OUT/qwen"
    train_both --steps 2000 --max-train-seconds 60 --n-lines 20000 --n-blocks 5000 --heldout-dir "" \
      --heldout-blocks-dir ""
    rm -f "$OUT"/*/model.tar.gz
    ;;
  train)
    train_both --train-seconds "$TRAIN_SECONDS" --max-train-seconds "$((TRAIN_SECONDS + 20))"
    ;;
  eval)
    # per checkpoint: the two held-out sets in parallel (8 threads each, rows flushed as they come), then the
    # goldens; each process capped at EVAL_SECONDS so the call limit never loses the rest.
    mkdir -p /tmp/ids /tmp/demo_goldens
    CASES=${CASES:-"line1=examples/line1.png line2=examples/line2.png heldout_001=examples/heldout/line_001.png
      receipt=examples/receipt.png table=examples/table.png"}
    cap="timeout ${EVAL_SECONDS:-400}"
    for m in $MODELS; do
      $cap python3 tools/train_demo/oracle_ids.py models/$m examples/heldout /tmp/ids/$m.heldout.jsonl 48 \
        >/tmp/e_${m}_lines.out 2>&1 &
      $cap python3 tools/train_demo/oracle_ids.py models/$m examples/heldout_blocks /tmp/ids/$m.heldout_blocks.jsonl 160 \
        >/tmp/e_${m}_blocks.out 2>&1 &
      wait
      # shellcheck disable=SC2086
      $cap python3 tools/train_demo/demo_goldens.py models/$m /tmp/demo_goldens/$m $CASES >/tmp/e_${m}_goldens.out 2>&1
      log "$m: $(tail -1 /tmp/e_${m}_lines.out) | $(tail -1 /tmp/e_${m}_blocks.out) | $(tail -1 /tmp/e_${m}_goldens.out)"
    done
    tail -3 /tmp/e_*.out >>"$OUT/all.log" 2>&1
    tar cf "$OUT/ids.tar" -C /tmp/ids .
    tar cf "$OUT/goldens.tar" -C /tmp/demo_goldens .
    ;;
esac
log "done"
