#!/usr/bin/env bash
# The consistency check on several processes (`mpirun -n N tilescope check`, and inside `diagnose`):
# its head records are computed by process k mod N and gathered on rank 0, so the result is the
# one process's byte for byte. Held on a run of 4 rank dumps with planted faults, so the records
# carry rows, tiles and counts: rank 2's O doubled in one head, a NaN in rank 3's O of another.
. "$(dirname "$0")/lib_mpi.sh"
PY=$(find_py h5py numpy) || { echo "skip: no python3 with h5py and numpy"; exit 77; }
ID=0123456789abcdef0123456789abcdef
export EXPECT_TIMEOUT=120 OMP_NUM_THREADS=1
cd "$tmp" || exit 1
ok "$TSC" synth -q -o run.h5 --batch 4 --ranks 4
"$PY" - <<'EOF' || bad "the faults could not be planted"
import h5py, numpy as np
with h5py.File("run.rank2.h5", "r+") as f:
    o = f["step_00000000/layer_001/o"]
    x = o[...]; x[:, 1] *= 2; o[...] = x
with h5py.File("run.rank3.h5", "r+") as f:
    o = f["step_00000000/layer_000/o"]
    x = o[...]; x[0, 3, 17, 5] = np.nan; o[...] = x
EOF
"$TSC" check -q --json run.h5 >c1.json; rc=$?
[ $rc = 4 ] && ok || bad "check on one process: exit $rc, want 4 (inconsistent)"
"$PY" - <<'EOF' && ok || bad "the one-process check does not flag the planted heads: $(head -c 400 c1.json)"
import json
c = json.load(open("c1.json"))
bad = {(h["layer"], h["head"]): h for h in c["per_head"] if h["inconsistent"]}
assert len(bad) == 2, sorted(bad)
assert (1, 1) in bad and "O inconsistent" in bad[(1, 1)]["verdict"], bad.keys()
assert bad[(1, 1)]["o_bad_rows"] == 64 and all(r["batch"] == 2 for r in bad[(1, 1)]["o_rows"])  # rank 2: batch row 2, its 64 rows
assert (0, 3) in bad and "non-finite" in bad[(0, 3)]["verdict"], bad.keys()
EOF
for n in 2 3; do
  mpi $n "$TSC" check -q --json run.h5 >c$n.json; rc=$?
  [ $rc = 4 ] && ok || bad "check on $n processes: exit $rc, want 4"
  cmp -s c1.json c$n.json && ok || bad "check on $n processes differs: $(diff c1.json c$n.json | head -6)"
  "$TSC" check run.h5 >t1.txt 2>/dev/null; mpi $n "$TSC" check run.h5 >t$n.txt 2>/dev/null
  cmp -s t1.txt t$n.txt && ok || bad "the printed check on $n processes differs: $(diff t1.txt t$n.txt | head -4)"
done
# inside diagnose: summary.json (its check block included) the same on 1 and 2 processes
"$TSC" diagnose -q run.h5 -o d1 --run-id $ID >/dev/null 2>&1
mpi 2 "$TSC" diagnose -q run.h5 -o d2 --run-id $ID >/dev/null 2>&1
grep -q '"inconsistent_heads": 2' d1/summary.json && ok || bad "diagnose's check block does not count the 2 planted heads"
cmp -s d1/summary.json d2/summary.json && ok || bad "diagnose's summary.json differs on 2 processes"
# a process that cannot read its part: the check fails on every process, rank 0 names the file
cp run.rank1.h5 keep.h5 && printf 'garbage' > run.rank1.h5
expect 1 "run.rank1.h5" mpirun -n 2 "$TSC" check -q run.h5
cp keep.h5 run.rank1.h5
finish
