#!/usr/bin/env bash
# ctest-labels: slow (over 5 s on 2 cores)
# Every refusal names the file: each command that reads a file is run on inputs that are bad in one
# way each (missing, empty, not HDF5, a directory, a FIFO, cut short, a wrong attribute, a wrong
# shape or type, a damaged analysis folder, a bad log, tensor file, batch log or checkpoint). A run
# may succeed where the damage is data the command reports on (a NaN is a finding, not an error);
# a run that fails must exit 1 and name the bad file in its message, and none may crash or print a
# sanitizer report. The table of (command, input) pairs is the audit behind docs/SECURITY.md's
# "every error names the file".
. "$(dirname "$0")/lib.sh"
T=${TSC:?TSC must name the tilescope binary}
PY=$(find_py h5py numpy) || PY=""
cd "$tmp" || exit 1

# named FILE CMD...: exit 0, or exit 1 with FILE's name in stderr; never a signal or a report
named() {
  local file=$1; shift
  timeout 60 "$@" > out 2> err < /dev/null; local rc=$?
  if grep -qE "Sanitizer|runtime error" err; then bad "'$*': sanitizer report: $(head -3 err)"
  elif [ $rc -eq 0 ]; then ok
  elif [ $rc -ne 1 ]; then bad "'$*': exit $rc (want 0 or 1): $(head -3 err)"
  elif grep -qF -- "$(basename "$file")" err; then ok
  else bad "'$*': exit 1 without naming $(basename "$file"): $(head -3 err)"; fi
}
# refused FILE CMD...: as named, but the run must fail
refused() {
  local file=$1; shift
  timeout 60 "$@" > out 2> err < /dev/null; local rc=$?
  [ $rc -eq 1 ] && grep -qF -- "$(basename "$file")" err && ! grep -qE "Sanitizer|runtime error" err && ok ||
    bad "'$*': exit $rc, want 1 naming $(basename "$file"): $(head -3 err)"
}

"$T" synth -o good.h5 --shape tiny --steps 0 --layers 1 -q || { echo "synth failed"; exit 1; }
"$T" analyze good.h5 -o an -q > /dev/null 2>&1 || { echo "analyze failed"; exit 1; }
size=$(stat -c %s good.h5)

# --- dumps, bad as files
: > empty.h5
echo "just text" > text.h5
mkdir dir.h5
mkfifo fifo.h5
head -c $((size / 2)) good.h5 > cut.h5
bad_dumps="missing.h5 empty.h5 text.h5 dir.h5 fifo.h5 cut.h5"
# --- dumps, bad inside (h5py): wrong attributes, shapes, types, a non-finite value
if [ -n "$PY" ]; then
  "$PY" - <<'PYEOF' || bad "crafting the dumps failed"
import shutil
import h5py, numpy as np
def make(name, edit):
    shutil.copy("good.h5", name)
    with h5py.File(name, "r+") as f:
        edit(f)
def each(f, leaf, fn):
    found = []
    f.visititems(lambda n, o: found.append(n) if isinstance(o, h5py.Dataset) and n.endswith("/" + leaf) else None)
    for n in found:
        fn(f[n].parent, n)
def replace(g, leaf, data):
    del g[leaf]
    g.create_dataset(leaf, data=data)
make("a_seq.h5", lambda f: f.attrs.modify("seq_len", -5))
make("a_nohead.h5", lambda f: f.attrs.__delitem__("n_head"))
make("a_headstr.h5", lambda f: f.attrs.create("n_head", np.bytes_("four")))
make("a_scale.h5", lambda f: f.attrs.create("softmax_scale", np.nan))
make("a_fmt.h5", lambda f: f.attrs.create("format", np.bytes_("something-else")))
make("a_kv.h5", lambda f: f.attrs.create("n_kv_head", 3))
make("d_qint.h5", lambda f: each(f, "q", lambda g, n: replace(g, "q", g["q"][...].astype(np.int32))))
make("d_qrank.h5", lambda f: each(f, "q", lambda g, n: replace(g, "q", g["q"][...].reshape(-1))))
make("d_kshape.h5", lambda f: each(f, "k", lambda g, n: replace(g, "k", g["k"][..., :-1])))
make("d_nodo.h5", lambda f: each(f, "do", lambda g, n: g.__delitem__("do")))
def nan_q(g, n):
    a = g["q"][...]
    a.flat[5] = np.nan
    g["q"][...] = a
make("d_nan.h5", lambda f: each(f, "q", nan_q))
PYEOF
  bad_dumps="$bad_dumps a_seq.h5 a_nohead.h5 a_headstr.h5 a_scale.h5 a_fmt.h5 a_kv.h5 d_qint.h5 d_qrank.h5"
  bad_dumps="$bad_dumps d_kshape.h5 d_nodo.h5 d_nan.h5"
else
  echo "no python3 with h5py and numpy: the attribute and shape cases are skipped"
fi
for f in $bad_dumps; do
  named "$f" "$T" info "$f"
  named "$f" "$T" replay "$f" --policy fp32 -o "r_$f" -q
  named "$f" "$T" fit "$f" -q
  named "$f" "$T" analyze "$f" -o "a_$f" -q
  named "$f" "$T" diagnose "$f" -o "g_$f" -q
  named "$f" "$T" explain "$f" --layer 1 --head 0 --row 3 --feature 0
  named "$f" "$T" view "$f" -o "v_$f.html"
  named "$f" "$T" figure attn "$f" --layer 1 -o "f_$f.png"
done
# the ones that are bad as files always fail
for f in missing.h5 empty.h5 text.h5 dir.h5 fifo.h5; do refused "$f" "$T" analyze "$f" -o x -q; done

# --- analysis folders: summary.json cut short or missing, analysis.h5 not HDF5
mkdir cutsum && cp an/analysis.h5 cutsum/ && head -c 500 an/summary.json > cutsum/summary.json
mkdir junkan && cp an/summary.json junkan/ && echo junk > junkan/analysis.h5
mkdir nosum && cp an/analysis.h5 nosum/
for d in cutsum:summary.json junkan:analysis.h5 nosum:summary.json nowhere:summary.json; do
  dir=${d%%:*} file=$dir/${d#*:}
  refused "$file" "$T" figure fig3 --from "$dir" -o x.png
  refused "$file" "$T" figure fig1 --from "$dir" -o x.png
  refused "$file" "$T" report "$dir" -o x.pdf -q
  refused "$file" "$T" compare "$dir" an -o xc
done
# view takes a dump, a capture session or an analysis folder: a folder that is neither is named
refused cutsum/summary.json "$T" view cutsum -o x.html
refused junkan/analysis.h5 "$T" view junkan -o x.html
refused "nosum: a folder that is neither an analysis folder (no summary.json) nor a capture session" \
  "$T" view nosum -o x.html
refused nowhere "$T" view nowhere -o x.html

# --- training logs
printf 'step,loss\n' > nodata.csv
printf '\x00\x01\x02\x03' > binary.csv
for l in missing.csv nodata.csv binary.csv fifo.h5; do
  refused "$l" "$T" figure fig2 --log "a=$l" -o x.png
  refused "$l" "$T" report an --log "a=$l" -o x.pdf -q
done

# --- tensor files for import
echo junk > junk.npz
echo junk > junk.safetensors
printf '\x93NUMPYjunk' > junk.npy
for i in junk.npz junk.safetensors junk.npy missing.npz; do
  refused "$i" env TSC_PYTHON="${PY:-python3}" "$T" import "$i" -o imp.h5
done

# --- capture sessions
mkdir s1.capture && echo junk > s1.capture/session.h5
mkdir s2.capture && cp good.h5 s2.capture/session.h5 && echo junk > s2.capture/step_00000001.h5
refused session.h5 "$T" pack s1.capture -o p1.h5
refused step_00000001.h5 "$T" pack s2.capture -o p2.h5
refused nosuch.capture "$T" pack nosuch.capture -o p3.h5

# --- trainer inputs: a damaged checkpoint, a bad batch log, bad data
if "$T" train --model gpt2-tiny --steps 1 -o run -q > /dev/null 2>&1; then
  cp -r run r1 && echo garbage > r1/ckpt.bin
  cp -r run r2 && head -c 100 run/ckpt.bin > r2/ckpt.bin
  cp -r run r3 && rm r3/ckpt.bin
  for r in r1 r2 r3; do refused ckpt.bin "$T" train --resume "$r" --steps 2 -q; done
  printf 'step,batch\n0,x\n' > badb.csv
  refused badb.csv "$T" train --model gpt2-tiny --steps 1 --batches badb.csv -o t1 -q
  : > empty.txt
  refused empty.txt "$T" train --model gpt2-tiny --steps 1 --data empty.txt -o t2 -q
  refused fifo.h5 "$T" train --model gpt2-tiny --steps 1 --data fifo.h5 -o t3 -q
else
  bad "train of a 1-step run failed"
fi
finish
