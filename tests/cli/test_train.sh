#!/usr/bin/env bash
# `tilescope train` as a user runs it: a tiny run with a capture of layer 1 under bf16-torch, whose
# captured O and LSE equal `tilescope replay` of the same step under that policy bit for bit (the
# trainer's attention is the replay's arithmetic); the log draws as figure 2; a planted learning-
# rate spike makes the flight recorder write exactly the last 4 steps, which info and diagnose
# read; resume via the command; bad input (unknown model, missing or empty data, a token file with
# a bad header, a policy for a missing layer, bad flags) is named with exit 1 or 2.
. "$(dirname "$0")/lib.sh"
: "${TSC:?}"
py=$(find_py h5py numpy) || { echo "SKIP: no python3 with h5py and numpy"; exit 77; }
cd "$tmp"
tiny=(--model gpt2-tiny --threads 2 --val-every 10 --val-batches 2 --stats-every 10)

# Capture and replay.
"$TSC" train "${tiny[@]}" --steps 4 --attn-policy 1=bf16-torch --capture steps=3,layers=1 -o run >out 2>err \
  && ok || bad "train with capture failed: $(head -3 err)"
grep -q "attention: 1=bf16-torch" out && ok || bad "the banner does not name the policy: $(head -3 out)"
[ -f run/capture.h5 ] && [ -f run/log.csv ] && [ -f run/ckpt.bin ] && [ -f run/run.cfg ] && ok || bad "run folder incomplete: $(ls run)"
"$TSC" info run/capture.h5 >info.txt 2>&1 && ok || bad "info on the capture failed: $(head -3 info.txt)"
grep -q "bf16-torch" info.txt && ok || bad "the capture does not record the layer's policy"
"$TSC" replay run/capture.h5 --policy bf16-torch -o rep.h5 -q >/dev/null 2>err && ok || bad "replay failed: $(head -3 err)"
"$py" - <<'PY' && ok || bad "captured attention differs from the replay"
import h5py, numpy as np, sys
d = h5py.File("run/capture.h5", "r"); r = h5py.File("rep.h5", "r")
cap = d["steps/step_00000003/layer_001"] if "steps" in d else d["step_00000003/layer_001"]
rep = r["step_00000003/layer_001/policy_0"]
o_c = np.asarray(cap["o"], dtype=np.float32); o_r = np.asarray(rep["o"], dtype=np.float32)
l_c = np.asarray(cap["lse"], dtype=np.float32); l_r = np.asarray(rep["lse"], dtype=np.float32)
print("o", o_c.shape, "identical:", np.array_equal(o_c.view(np.uint32), o_r.view(np.uint32)),
      "lse identical:", np.array_equal(l_c.view(np.uint32), l_r.view(np.uint32)))
sys.exit(0 if o_c.shape == (8, 2, 32, 16) and np.array_equal(o_c.view(np.uint32), o_r.view(np.uint32))
         and np.array_equal(l_c.view(np.uint32), l_r.view(np.uint32)) else 1)
PY
# the captured step's tokens: the batch's bytes (ids) and, byte-level, each byte as its text; the rows are the
# Bible's text (letters, spaces, punctuation), and info lists them
"$py" - <<'PY' && ok || bad "captured tokens"
import h5py, numpy as np, sys
d = h5py.File("run/capture.h5", "r")
g = d["step_00000003"]
ids, txt = np.asarray(g["tokens"]), np.asarray(g["token_text"])
assert ids.shape == (8, 32) and txt.shape == (8, 32) and txt.dtype == np.dtype("S32"), (ids.shape, txt.dtype)
assert ((ids >= 0) & (ids < 256)).all()
assert all(txt[b, t] == bytes([ids[b, t]]) for b in range(8) for t in range(32))
text = bytes(ids[0].astype(np.uint8)).decode("ascii")
assert sum(c.isalpha() or c in " ,.;:\n" for c in text) >= 28, text
print("row 0:", repr(text))
PY
grep -q "tokens: ids and text" info.txt && ok || bad "info does not list the tokens: $(cat info.txt)"
head -1 run/log.csv | grep -q "^step,lr,train_loss,val_loss,grad_norm,max_logit_0,max_logit_1,tied_rows_0,tied_rows_1,wq_sn_0,wq_sn_1$" \
  && ok || bad "log.csv header: $(head -1 run/log.csv)"
"$TSC" figure fig2 --log tiny=run/log.csv -o val.png >/dev/null 2>err && [ -s val.png ] && ok || bad "figure fig2 --log failed: $(head -3 err)"

# Resume through the command: 4 more steps.
"$TSC" train --resume run --steps 8 >out 2>err && ok || bad "resume failed: $(head -3 err)"
[ "$(tail -1 run/log.csv | cut -d, -f1)" = 7 ] && ok || bad "after resume the log ends at step $(tail -1 run/log.csv | cut -d, -f1)"

# The flight recorder: the learning rate of step 30 is 50, so step 31's loss spikes.
"$TSC" train "${tiny[@]}" --steps 40 --lr-spike 30=50 --flight 4 --flight-layers 1 -o spike >out 2>err
grep -q "the flight recorder wrote spike/flight.h5" out && ok || bad "no flight dump reported: $(tail -3 out; head -3 err)"
"$TSC" info --json spike/flight.h5 >info.json 2>err && ok || bad "info on the flight dump failed: $(head -3 err)"
"$py" - <<'PY' && ok || bad "the flight dump does not hold steps 28..31"
import json, sys
j = json.load(open("info.json")); print("flight dump steps", j["steps"])
sys.exit(0 if j["steps"] == [28, 29, 30, 31] else 1)
PY
# the recorder kept each step's tokens with its tensors (each step its own batch), each byte with its text
"$py" - <<'PY' && ok || bad "the flight dump's tokens"
import h5py, numpy as np
f = h5py.File("spike/flight.h5", "r")
for st in (28, 29, 30, 31):
    g = f["step_%08d" % st]
    ids, txt = np.asarray(g["tokens"]), np.asarray(g["token_text"])
    assert ids.shape == (8, 32) and all(txt[b, t] == bytes([ids[b, t]]) for b in range(8) for t in range(32)), st
assert not np.array_equal(np.asarray(f["step_00000030/tokens"]), np.asarray(f["step_00000031/tokens"]))
print("flight tokens ok")
PY
"$TSC" diagnose spike/flight.h5 -o diag -q >/dev/null 2>err && [ -s diag/summary.json ] && ok || bad "diagnose on the flight dump failed: $(head -3 err)"

# Bad input.
expect 2 "unknown model 'gpt9'" "$TSC" train --model gpt9 -o b1
expect 2 "no layer 7" "$TSC" train "${tiny[@]}" --attn-policy 7=bf16-torch -o b2
expect 1 "missing.txt" "$TSC" train "${tiny[@]}" --data missing.txt -o b3
: > empty.txt
expect 1 "empty.txt" "$TSC" train "${tiny[@]}" --data empty.txt -o b4
"$py" -c 'import struct; open("bad.bin", "wb").write(struct.pack("<256i", 20240520, 1, 5000, *[0] * 253) + bytes(2000))' # 5000 tokens claimed, 1000 present
expect 1 "bad.bin" "$TSC" train "${tiny[@]}" --data bad.bin -o b5
expect 2 "--precision" "$TSC" train "${tiny[@]}" --precision fp8 -o b6
expect 2 "--lr-spike" "$TSC" train "${tiny[@]}" --lr-spike 30 -o b7
expect 2 "-o RUN" "$TSC" train "${tiny[@]}"
expect 1 "holds a run already" "$TSC" train "${tiny[@]}" -o run
finish
