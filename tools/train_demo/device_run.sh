#!/usr/bin/env bash
# GPU-machine calls (the `run` tool) for both demo checkpoints, from the repository root, fonts unpacked into
# .fonts/ (`tar xJf .fontpack/fonts.tar.xz`). $OUT gets all.log plus, per MODE:
# WARM=1: train and smoke start from models/demo-* (--resume) with WARM_ARGS instead of from scratch.
#   smoke  both families: train.py --smoke (whole pipeline on a few chunks and steps: render workers with the real
#          processors, both bucket kinds, save, reload, batched oracle on 4 images per set), then oracle_ids.py and
#          demo_goldens.py on the smoke checkpoint (2 pages, 1 case);
#   train  both families trained from scratch concurrently on the one GPU (RENDER_SECONDS of rendering on the
#          CPUs first, then TRAIN_SECONDS of training each), each evaluated on
#          examples/heldout, heldout_blocks and heldout_lines_any by the stock Transformers code on its reloaded
#          bf16 checkpoint: $OUT/{lighton,qwen}/{model.tar.gz,train_log.txt,oracle_*.jsonl};
#          EVAL_AFTER=1: then MODE=eval on the new checkpoints (unpacked over models/ in the call's copy), so one
#          call returns what adopting them needs (ids.tar, goldens.tar) beside the checkpoints;
#   eval   for the checkpoints under models/: the CPU oracle's greedy ids and margins on the four held-out sets
#          (oracle_ids.py, sharded over the 16 cores, THREADS=1 each -> $OUT/ids.tar) and the parity goldens
#          (demo_goldens.py -> $OUT/goldens.tar).
set -u
export PYTHONUNBUFFERED=1
MODE=${MODE:-train}
FAMILIES=${FAMILIES:-"lighton qwen"}        # train: which to train
MODELS=${MODELS:-"demo-lighton demo-qwen35"}  # eval: which checkpoints under models/
TRAIN_SECONDS=${TRAIN_SECONDS:-420}
if [ "${WARM:-0}" = 1 ]; then  # fine-tune the committed first-recipe checkpoints (README, "Any geometry": next)
  WARM_ARGS=${WARM_ARGS:---lr 5e-4 --warmup 100 --old-only 0 --page-start 300 --page-frac 0.35}
  LIGHTON_ARGS=${LIGHTON_ARGS:---resume models/demo-lighton --ctc-weight 0.3 $WARM_ARGS}
  QWEN_ARGS=${QWEN_ARGS:---resume models/demo-qwen35 --ctc-weight 0.5 --qwen-size m $WARM_ARGS}
fi
LIGHTON_ARGS=${LIGHTON_ARGS:---lr 1e-3 --warmup 150 --ctc-weight 0.3}
QWEN_ARGS=${QWEN_ARGS:---lr 1e-3 --warmup 150 --ctc-weight 0.5 --qwen-size m}
mkdir -p "$OUT/lighton" "$OUT/qwen"
log() { echo "[$(date +%T)] $*" | tee -a "$OUT/all.log"; }
demo_of() { [ "$1" = lighton ] && echo demo-lighton || echo demo-qwen35; }  # family -> models/ folder
# RESUME_LIGHTON / RESUME_QWEN: a model.tar.gz an earlier call returned (carried in a git-ignored folder, e.g.
# .resume/), unpacked over models/<demo> of this call's copy first, so WARM=1 (--resume models/<demo>) goes on
# from an unadopted checkpoint: a schedule longer than one call, over two or more calls.
for r in lighton qwen; do
  v="RESUME_${r^^}"
  if [ -n "${!v:-}" ]; then
    m=$(demo_of "$r")
    rm -rf "models/$m" && tar xzf "${!v}" -C models/ || { echo "cannot unpack ${!v}" >&2; exit 1; }
  fi
done
log "start $MODE; $(nvidia-smi --query-gpu=name,memory.used --format=csv,noheader)"
train_both() {  # extra args for each family of $FAMILIES, run concurrently
  local pids=""
  for r in $FAMILIES; do
    if [ "$r" = lighton ]; then fam=lighton_ocr; args=$LIGHTON_ARGS; else fam=qwen3_5; args=$QWEN_ARGS; fi
    # shellcheck disable=SC2086
    python3 tools/train_demo/train.py --family $fam --fonts .fonts --out "$OUT/$r" $args "$@" \
      --procs "$((14 / $(echo $FAMILIES | wc -w)))" >/tmp/$r.out 2>&1 &
    pids="$pids $!"
  done
  for p in $pids; do wait "$p"; log "train pid $p exit $?"; done
  for r in $FAMILIES; do
    log "---- $r"; grep -v "Loading weights\|Writing model\|processor_kwargs\|falling back" /tmp/$r.out | tail -80 >>"$OUT/all.log"
  done
}
ids_sharded() {  # CKPT NAME SET MAX_NEW SHARDS: oracle_ids.py over SET in SHARDS processes
  local ckpt=$1 m=$2 set=$3 max_new=$4 n=$5 i
  for ((i = 0; i < n; i++)); do
    SHARD=$i/$n THREADS=1 $cap python3 tools/train_demo/oracle_ids.py "$ckpt" "examples/$set" \
      "/tmp/ids/$m.$set.$i.jsonl" "$max_new" >"/tmp/e_${m}_${set}_$i.out" 2>&1 &
  done
}
cap="timeout ${EVAL_SECONDS:-400}"
case $MODE in
  smoke)
    train_both --smoke
    mkdir -p /tmp/ids /tmp/demo_goldens
    for r in lighton qwen; do
      m=$(demo_of "$r")
      ck=/tmp/demo_work_$m/$m
      [ "${SMOKE_IDS:-1}" = 1 ] && SHARD=0/12 THREADS=4 python3 tools/train_demo/oracle_ids.py $ck \
        examples/heldout_pages /tmp/ids/$m.jsonl 24 >/tmp/s_$r.out 2>&1 &
      N_NEW=24 python3 tools/train_demo/demo_goldens.py $ck /tmp/demo_goldens/$m page=examples/page.png \
        >/tmp/g_$r.out 2>&1 &
    done
    wait
    tail -n 4 /tmp/s_*.out /tmp/g_*.out >>"$OUT/all.log" 2>&1
    head -c 600 /tmp/ids/*.jsonl >>"$OUT/all.log" 2>&1; ls -R /tmp/demo_goldens >>"$OUT/all.log"
    rm -f "$OUT"/*/model.tar.gz
    ;;
  train)
    train_both --train-seconds "$TRAIN_SECONDS" --max-train-seconds "$((TRAIN_SECONDS + 10))" \
      --render-seconds "${RENDER_SECONDS:-70}" --eval-by "${EVAL_BY:-550}"
    for r in $FAMILIES; do  # at most 8 files come back: logs and oracle transcriptions in one tar per family
      (cd "$OUT/$r" && tar cf logs.tar train_log.txt oracle_*.jsonl && rm -f train_log.txt oracle_*.jsonl)
    done
    if [ "${EVAL_AFTER:-0}" = 1 ]; then  # the new checkpoints in place of models/ (this copy), then MODE=eval
      trained=""
      for r in $FAMILIES; do
        m=$(demo_of "$r")
        [ -s "$OUT/$r/model.tar.gz" ] || continue
        rm -rf "models/$m" && tar xzf "$OUT/$r/model.tar.gz" -C models/ && trained="$trained $m"
      done
      log "eval of the new checkpoints:$trained ($SECONDS s in)"
      [ -n "$trained" ] && EVAL_SECONDS=$((585 - SECONDS)) MODE=eval MODELS="${trained# }" bash "$0"
    fi
    ;;
  eval)
    # per checkpoint and held-out set, shards of oracle_ids.py (rows flushed as they come; each process capped
    # at EVAL_SECONDS so the call limit never loses the rest), all at once; then the goldens.
    mkdir -p /tmp/ids /tmp/demo_goldens
    CASES=${CASES:-"line1=examples/line1.png line2=examples/line2.png heldout_001=examples/heldout/line_001.png
      receipt=examples/receipt.png table=examples/table.png page=examples/page.png
      rgb_line=examples/heldout_lines_any/line_001.png"}
    for m in $MODELS; do
      ids_sharded models/$m $m heldout 48 1
      ids_sharded models/$m $m heldout_blocks 160 1
      ids_sharded models/$m $m heldout_lines_any 128 2
      ids_sharded models/$m $m heldout_pages 1024 4
    done
    for m in $MODELS; do
      # shellcheck disable=SC2086
      N_NEW=${N_NEW:-200} $cap python3 tools/train_demo/demo_goldens.py models/$m /tmp/demo_goldens/$m $CASES \
        >/tmp/e_${m}_goldens.out 2>&1 &
    done
    wait
    for m in $MODELS; do
      for set in heldout heldout_blocks heldout_lines_any heldout_pages; do
        cat /tmp/ids/$m.$set.*.jsonl >/tmp/ids/$m.$set.jsonl && rm -f /tmp/ids/$m.$set.*.jsonl
        log "$m $set: $(wc -l </tmp/ids/$m.$set.jsonl) rows"
      done
      log "$m goldens: $(tail -1 /tmp/e_${m}_goldens.out)"
    done
    tail -n 2 /tmp/e_*.out >>"$OUT/all.log" 2>&1
    tar cf "$OUT/ids.tar" -C /tmp/ids .
    tar cf "$OUT/goldens.tar" -C /tmp/demo_goldens .
    ;;
esac
log "done"
