#!/usr/bin/env bash
# The recorders of a data-parallel run on MPI (docs/DISTRIBUTED.md §3): `--capture` writes one dump
# per process and process 0 the manifest over them; the flight recorder's trigger is agreed, so a
# loss spike planted in process 1's rows alone dumps every process's ring, and the dumps of that
# trigger are one manifest. Checked against independent evidence: the capture's step 0 against a
# one-process capture of the same rows (h5py), the flight rings against a capture of the same steps.
. "$(dirname "$0")/lib_mpi.sh"
PY=$(find_py h5py numpy) || { echo "skip: no python3 with h5py and numpy"; exit 77; }
cd "$tmp" || exit 1
export OMP_NUM_THREADS=1 EXPECT_TIMEOUT=120

# --- capture: two processes, one shard each
A=(--model gpt2-tiny --steps 4 --batch 6 --seq-len 32 --val-every 100 --stats-every 100 --ckpt-every 100 -q)
mpi 2 "$TSC" train -o c2 "${A[@]}" --grad-shards 2 --capture steps=0:4:2 >/dev/null && ok || bad "capture on 2 processes failed"
for f in capture.h5 capture.rank0.h5 capture.rank1.h5; do [ -f c2/$f ] && ok || bad "c2/$f missing"; done
"$TSC" info c2/capture.h5 >info.txt 2>&1 && ok || bad "info of the manifest failed: $(head -3 info.txt)"
grep -q "a run of 2 ranks" info.txt && ok || bad "info does not show a run of 2 ranks: $(head -3 info.txt)"
grep -q "rank 1: capture.rank1.h5, .*batch rows 3-5" info.txt && ok || bad "rank 1 does not hold rows 3-5: $(cat info.txt)"
ok "$TSC" train -o c1 "${A[@]}" --capture steps=0
# Step 0 (the seed's weights): each process's rows are those rows of the whole batch, bit for bit;
# dO is the gradient of the shard's mean loss, exactly G = 2 times the whole batch's (a power of 2).
"$PY" - c1/capture.h5 c2/capture.rank0.h5 c2/capture.rank1.h5 <<'EOF' && ok || bad "step 0 of the rank dumps is not the one-process capture's"
import sys, h5py, numpy as np
one = h5py.File(sys.argv[1], "r")
ranks = [h5py.File(p, "r") for p in sys.argv[2:]]
assert [int(f.attrs["rank"]) for f in ranks] == [0, 1]
n = 0
# the step's tokens: each process's rows of the whole batch's
for name in ("tokens", "token_text"):
    whole = one["step_00000000"][name][...]
    parts = np.concatenate([f["step_00000000"][name][...] for f in ranks], axis=0)
    assert parts.shape == whole.shape == (6, 32) and (parts == whole).all(), name
for layer in (g for g in one["step_00000000"] if g.startswith("layer_")):
    for name in ("q", "k", "v", "o", "lse", "x", "do"):
        whole = one["step_00000000"][layer][name][...]
        parts = np.concatenate([f["step_00000000"][layer][name][...] for f in ranks], axis=0)
        want = whole * 2 if name == "do" else whole
        assert parts.shape == whole.shape, (layer, name, parts.shape, whole.shape)
        assert np.array_equal(parts.view(np.uint32), want.view(np.uint32)), (layer, name)
        n += 1
    for w in ("w_q", "w_k", "w_v", "w_o"):
        for f in ranks:
            assert np.array_equal(f["step_00000000"][layer][w][...], one["step_00000000"][layer][w][...]), (layer, w)
assert n == 14, n
EOF
expect 1 "--capture and --flight record one shard per process" mpirun -n 2 "$TSC" train -o e1 "${A[@]}" --grad-shards 6 --capture steps=0
expect 1 "--capture and --flight record one shard per process" "$TSC" train -o e2 "${A[@]}" --grad-shards 2 --flight 4

# --- flight: a text, then 2 KiB no training row reads (bytes 128-255), then more text; the batch
# order is planted: at step 100 process 1's rows (3-5) read the garbage, every other row the text
"$PY" - <<'EOF' || bad "the planted data could not be written"
import random
random.seed(7)
text = ("In the beginning God created the heaven and the earth. And the earth was without form, and void; "
        "and darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters. ")
body = (text * 200).encode()[:20000]
open("d.txt", "wb").write(body[:10000] + bytes(random.randrange(128, 256) for _ in range(2048)) + body[10000:])
for name, plant in (("plan.csv", (100,)), ("calm.csv", ()), ("twice.csv", (100, 106))):
    with open(name, "w") as f:
        f.write("step,row,offset\n")
        for s in range(108):
            for r in range(6):
                off = 10100 + 200 * r if s in plant and r >= 3 else random.randrange(0, 9000)
                f.write(f"{s},{r},{off}\n")
EOF
F=(--model gpt2-tiny --steps 102 --batch 6 --seq-len 32 --val-every 1000 --stats-every 1000 --ckpt-every 1000 -q
   --data d.txt --grad-shards 2 --flight 4)
mpi 2 "$TSC" train -o f2 "${F[@]}" --batches plan.csv --capture steps=97:101 >out.txt 2>&1 && ok || bad "the planted run failed: $(tail -3 out.txt)"
grep -q "step 100: the flight recorder wrote f2/flight.h5" out.txt && ok || bad "no flight dump at step 100: $(cat out.txt)"
for f in flight.h5 flight.rank0.h5 flight.rank1.h5; do [ -f f2/$f ] && ok || bad "f2/$f missing"; done
"$TSC" info f2/flight.h5 >info.txt 2>&1 && ok || bad "info of the flight manifest failed: $(head -3 info.txt)"
grep -q "flight_trigger *loss_spike" info.txt && ok || bad "the trigger is not the loss spike: $(grep flight_ info.txt)"
grep -q "at step 100 on process 1 of 2" info.txt && ok || bad "the reason does not name process 1: $(grep flight_ info.txt)"
grep -q "steps: 4 complete (97, 98, 99, 100)" info.txt && ok || bad "the rings do not hold steps 97-100: $(grep steps info.txt)"
# process 0 saw no spike of its own, and wrote its ring: the same attributes in both rank dumps
"$PY" - f2/flight.rank0.h5 f2/flight.rank1.h5 <<'EOF' && ok || bad "the rank dumps disagree on the trigger"
import sys, h5py
a, b = (h5py.File(p, "r") for p in sys.argv[1:])
for k in ("flight_trigger", "flight_reason", "flight_step"):
    assert a.attrs[k] == b.attrs[k], (k, a.attrs[k], b.attrs[k])
assert int(a.attrs["rank"]) == 0 and int(b.attrs["rank"]) == 1
EOF
# what the rings hold is what a capture of the same steps recorded, on both processes
"$TSC" diff f2/flight.h5 f2/capture.h5 --steps 97:101 --json >diff.json 2>/dev/null && ok || bad "the flight rings differ from the capture of the same steps"
"$PY" -c "
import json; d = json.load(open('diff.json')); r = d['per_record']
assert d['steps'] == 4 and d['records'] == len(r) == 4 * 2 * (6 * 2 + 1 + 4), (d['steps'], len(r))
assert all(x['identical'] == x['n'] > 0 for x in r), [x for x in r if x['identical'] != x['n']][:1]
assert {x['step'] for x in r} == {97, 98, 99, 100}
" && ok || bad "the flight/capture comparison is not complete and identical: $(head -c 300 diff.json)"
# --flight-keep 1 and two planted spikes: the second trigger's dumps and manifest stay, the first's go
mpi 2 "$TSC" train -o k2 "${F[@]}" --steps 108 --flight-keep 1 --batches twice.csv >out.txt 2>&1 && ok || bad "the twice-planted run failed: $(tail -3 out.txt)"
grep -q "step 106: the flight recorder wrote k2/flight.2.h5" out.txt && ok || bad "no second flight dump at step 106: $(cat out.txt)"
[ "$(cd k2 && ls flight* | tr '\n' ' ')" = "flight.2.h5 flight.rank0.2.h5 flight.rank1.2.h5 " ] && ok ||
  bad "the kept flight files are not the second trigger's: $(cd k2 && ls flight*)"
"$TSC" info k2/flight.2.h5 2>&1 | grep -q "at step 106 on process 1 of 2" && ok || bad "flight.2.h5 does not read as step 106's"
# the same run without the plant: no trigger (the spike above is the plant's)
mpi 2 "$TSC" train -o f0 "${F[@]}" --batches calm.csv >out.txt 2>&1 && ok || bad "the calm run failed: $(tail -3 out.txt)"
[ ! -e f0/flight.h5 ] && ! grep -q "flight recorder wrote" out.txt && ok || bad "the calm run fired: $(cat out.txt)"
finish
