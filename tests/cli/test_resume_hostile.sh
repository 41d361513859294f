#!/usr/bin/env bash
# ctest-labels: slow (over 5 s on 2 cores)
# `tilescope train --resume` on a run folder from someone else: every file of it is data.
#  - settings out of the bounds of their flags (threads = 100000 crashed inside OpenMP) are refused
#    with exit 1 naming ckpt.bin, its line and the setting, by the same bounds the flags have
#    (the flag one past its bound is a usage error, exit 2);
#  - a checkpoint smaller than the model its settings describe (272 bytes claiming gpt2-small: resume
#    built an ~800 MiB model first) is refused before the model is allocated: exit 1, a message with
#    both sizes, under 200 MB of peak RSS; the memory budget is applied to the model's parameters
#    and AdamW moments before they are allocated;
#  - a run file that is a symbolic link (log.csv, wq_norms.csv, batches.csv, run.cfg, ckpt.bin, a
#    flight recorder session folder; dangling or not) is refused naming it, the link's target stays
#    as it was and nothing of it lands in the run; a FIFO is refused without blocking;
#  - after each refusal the run still resumes (nothing was damaged).
. "$(dirname "$0")/lib.sh"
: "${TSC:?}"
py=$(find_py struct) || { echo "SKIP: no python3"; exit 77; }
cd "$tmp"
tiny=(--model gpt2-tiny --threads 2 --val-every 10 --val-batches 2 --stats-every 10)
"$TSC" train "${tiny[@]}" --steps 2 -q -o run >out 2>err && [ -s run/ckpt.bin ] && ok || { bad "train: $(head -3 err)"; finish; exit 1; }
cp -r run pristine

# ck.py SRC DST [KEY=VALUE...] [--cfg FILE]: DST = the checkpoint SRC with those settings changed (or the
# settings text of FILE), header and checksum rewritten; the settings also go to DST's run.cfg.
cat > ck.py <<'PY'
import os, struct, sys
def fnv(b, h=0xcbf29ce484222325):
    for x in b: h = ((h ^ x) * 0x100000001b3) & 0xffffffffffffffff
    return h
src, dst, args = sys.argv[1], sys.argv[2], sys.argv[3:]
b = open(src, "rb").read()
cl, steps, prec, es, n = struct.unpack_from("<QqIIQ", b, 8)
cfg, arrays = b[40:40 + cl], b[40 + cl:-8]
for a in args:
    k, v = a.split("=", 1)
    lines = [l for l in cfg.decode().split("\n") if l and not l.startswith(k + " = ")]
    cfg = ("\n".join(lines) + "\n%s = %s\n" % (k, v)).encode()
body = b"TSCKPT01" + struct.pack("<QqIIQ", len(cfg), steps, prec, es, n) + cfg + arrays
open(dst, "wb").write(body + struct.pack("<Q", fnv(body)))
open(os.path.join(os.path.dirname(dst), "run.cfg"), "wb").write(cfg)
PY
fresh() { rm -rf "$1" && cp -r pristine "$1"; }

# --- 1. settings out of bounds: refused by the bounds of the flag, before any thread starts
fresh thr && "$py" ck.py pristine/ckpt.bin thr/ckpt.bin threads=100000
expect 1 "thr/ckpt.bin:28: the setting threads = 100000 is out of range: expected 1 to 4096 (the bounds of --threads), or 0 (OpenMP's default); refused" \
  "$TSC" train --resume thr --steps 4 -q
[ "$(wc -l < thr/log.csv)" = 3 ] && ok || bad "the refused resume changed log.csv: $(wc -l < thr/log.csv) lines"
# the same bound as the flag: one past it is a usage error there, a refusal here; the bound itself runs
expect 2 "--threads expects an integer in [1, 4096], got '4097'" "$TSC" train "${tiny[@]}" --threads 4097 -o cli1
for kv in threads=4097 batch=65537 seq_len=1048577 val_batches=0 steps=1000000000001 lr=1000 beta2=1 \
          flight_steps=1000001 warmup=-1 seed=4611686018427387905 lr_spike_step=-2 grad_clip=-1 eps=2; do
  fresh b1 && "$py" ck.py pristine/ckpt.bin b1/ckpt.bin "$kv"
  expect 1 "b1/ckpt.bin:28: the setting ${kv%%=*} = ${kv#*=} is out of range" "$TSC" train --resume b1 --steps 4 -q
done
fresh b2 && "$py" ck.py pristine/ckpt.bin b2/ckpt.bin threads=x
expect 1 "b2/ckpt.bin:28: bad value for threads: 'x'" "$TSC" train --resume b2 --steps 4 -q
fresh b3 && "$py" ck.py pristine/ckpt.bin b3/ckpt.bin "attn_policy=9=bf16-torch"
expect 1 "the model has no layer 9" "$TSC" train --resume b3 --steps 4 -q
fresh b4 && "$py" ck.py pristine/ckpt.bin b4/ckpt.bin precision=fp64
expect 1 "b4/ckpt.bin: the header says precision fp32, the settings fp64; refused" "$TSC" train --resume b4 --steps 4 -q
fresh t3 && "$py" ck.py pristine/ckpt.bin t3/ckpt.bin threads=3
"$TSC" train --resume t3 --steps 3 -q >out 2>err && ok || bad "threads = 3 (in bounds) refused: $(head -2 err)"
grep -q "^threads = 3$" t3/run.cfg && [ "$(tail -1 t3/log.csv | cut -d, -f1)" = 2 ] && ok || bad "threads = 3: run.cfg or log wrong"

# --- 2. a 272-byte checkpoint whose settings say gpt2-small: refused before the model exists
fresh small
"$py" - <<'PY'
import struct
def fnv(b, h=0xcbf29ce484222325):
    for x in b: h = ((h ^ x) * 0x100000001b3) & 0xffffffffffffffff
    return h
cfg = b"model = gpt2-small\ndata = kjv\nbatch = 1\nseq_len = 64\nthreads = 1\nsteps = 10\n"
n = 10
cfg += b"#" + b"x" * (224 - 12 * n - len(cfg) - 2) + b"\n"
body = b"TSCKPT01" + struct.pack("<QqIIQ", len(cfg), 1, 0, 4, n) + cfg + bytes(12 * n)
open("small/ckpt.bin", "wb").write(body + struct.pack("<Q", fnv(body)))
PY
[ "$(stat -c %s small/ckpt.bin)" = 272 ] && ok || bad "the test checkpoint is $(stat -c %s small/ckpt.bin) bytes"
start=$(date +%s%N)
/usr/bin/time -f "%M" -o rss timeout 60 "$TSC" train --resume small --steps 4 -q >out 2>err; got=$?
ms=$(( ($(date +%s%N) - start) / 1000000 ))
want="small/ckpt.bin: 272 bytes, the settings (model gpt2-small: n_layer=12, n_head=12, d_model=768, d_ff=3072, vocab=256, precision fp32) need at least 1032468632 (86039040 parameters x 3 arrays x 4 bytes + 152 bytes of header and settings)"
{ [ "$got" = 1 ] && grep -qF -- "$want" err; } && ok || bad "272-byte checkpoint: exit $got, $(head -2 err)"
rss=$(tail -1 rss)
[ "$rss" -lt 204800 ] && ok || bad "272-byte checkpoint: peak RSS $rss KiB (the model was built)"
[ "$ms" -lt 10000 ] && ok || bad "272-byte checkpoint: refused after $ms ms"
echo "272-byte checkpoint: refused in $ms ms, peak RSS $rss KiB"
# the memory budget, before the parameters and AdamW moments are allocated
fresh budget
TSC_MAX_MEMORY=100K expect 1 "the model's parameters, gradients and AdamW moments and the batch buffers needs" \
  "$TSC" train --resume budget --steps 4 -q
grep -qF "above the memory budget of 102400 bytes" err && ok || bad "budget message: $(head -2 err)"

# --- 3. run files that are links: refused, the target untouched, nothing copied in
printf 'SECRET line one\nSECRET line two\n' > secret.txt
cp secret.txt secret.orig
for f in log.csv wq_norms.csv batches.csv run.cfg ckpt.bin; do
  fresh "l_$f" && rm "l_$f/$f" && ln -s "$tmp/secret.txt" "l_$f/$f"
  expect 1 "l_$f/$f: is a symbolic link; resume never follows a link in a run folder" "$TSC" train --resume "l_$f" --steps 4 -q
  cmp -s secret.txt secret.orig && ok || bad "$f link: the linked file changed"
  [ -L "l_$f/$f" ] && ok || bad "$f link: replaced by a file"
  ! grep -rlq SECRET "l_$f" && ok || bad "$f link: the linked file was copied into the run: $(grep -rl SECRET "l_$f")"
done
fresh dang && rm dang/log.csv && ln -s "$tmp/nowhere/x.csv" dang/log.csv
expect 1 "dang/log.csv: is a symbolic link" "$TSC" train --resume dang --steps 4 -q
[ ! -e nowhere ] && ok || bad "a dangling link's target was created"
mkdir elsewhere
fresh fl && ln -s "$tmp/elsewhere" fl/flight.h5.capture
expect 1 "fl/flight.h5.capture: is a symbolic link" "$TSC" train --resume fl --steps 4 -q
[ -z "$(ls elsewhere)" ] && ok || bad "something was written through the flight link: $(ls elsewhere)"
fresh fifo && rm fifo/log.csv && mkfifo fifo/log.csv
EXPECT_TIMEOUT=20 expect 1 "fifo/log.csv: not a regular file" "$TSC" train --resume fifo --steps 4 -q

# --- 4. the run was not damaged by any refusal: the link removed, it resumes to the end
rm l_log.csv/log.csv && cp pristine/log.csv l_log.csv/log.csv
"$TSC" train --resume l_log.csv --steps 4 -q >out 2>err && ok || bad "resume after the refusal failed: $(head -2 err)"
[ "$(tail -1 l_log.csv/log.csv | cut -d, -f1)" = 3 ] && [ "$(wc -l < l_log.csv/log.csv)" = 5 ] && ok ||
  bad "after resume the log ends at step $(tail -1 l_log.csv/log.csv | cut -d, -f1)"
fresh plain && "$TSC" train --resume plain --steps 4 -q >out 2>err && cmp -s plain/log.csv l_log.csv/log.csv && ok ||
  bad "two resumes of the same run differ"
finish
