#!/usr/bin/env bash
# The analysis on several processes writes the bytes of one: `mpirun -n N tilescope diagnose RUN
# -o DIR` (and analyze) over a run of 4 rank dumps gives analysis.h5, summary.json and the printed
# verdict of the single-process run, byte for byte (same --run-id), for N = 2, 3 and for enough
# processes to work on two (step, layer) pairs at once; a missing rank is named, a corrupt rank
# file is refused naming it on every process count, and the folder's earlier results stay.
. "$(dirname "$0")/lib_mpi.sh"
ID=0123456789abcdef0123456789abcdef
export EXPECT_TIMEOUT=120
cd "$tmp" || exit 1
# tiny: 4 steps x 2 layers x 4 heads; gpt2-small at T = 160: 2 layers x 12 heads with weights
ok "$TSC" synth -q -o tiny.h5 --batch 4 --ranks 4
ok "$TSC" synth -q -o g.h5 --shape gpt2-small --layers 0:2 --seq-len 160 --batch 4 --ranks 4
same() { # same DIR_A DIR_B WHAT: analysis.h5, summary.json and stdout identical
  local a=$1 b=$2 what=$3
  for f in analysis.h5 summary.json; do
    cmp -s "$a/$f" "$b/$f" && ok || bad "$what: $b/$f differs from the single-process $a/$f"
  done
  cmp -s "$a.txt" "$b.txt" && ok || bad "$what: the printed result differs: $(diff "$a.txt" "$b.txt" | head -4)"
}
for run in tiny g; do
  "$TSC" diagnose -q $run.h5 -o $run.d1 --run-id $ID >$run.d1.txt && ok || bad "serial diagnose of $run failed"
  "$TSC" analyze -q $run.h5 -o $run.a1 --run-id $ID >$run.a1.txt && ok || bad "serial analyze of $run failed"
  for n in 2 3; do
    mpi $n "$TSC" diagnose -q $run.h5 -o $run.d$n --run-id $ID >$run.d$n.txt && ok || bad "diagnose on $n processes failed"
    same $run.d1 $run.d$n "diagnose $run on $n processes"
  done
  mpi 2 "$TSC" analyze -q $run.h5 -o $run.a2 --run-id $ID >$run.a2.txt && ok || bad "analyze on 2 processes failed"
  same $run.a1 $run.a2 "analyze $run on 2 processes"
done
# tiny has 4 heads + 1 spectral item per pair: 10 processes form two groups working on two pairs
OMP_NUM_THREADS=1 mpi 10 "$TSC" diagnose -q tiny.h5 -o tiny.d10 --run-id $ID >tiny.d10.txt && ok || bad "10 processes failed"
same tiny.d1 tiny.d10 "diagnose tiny on 10 processes (2 pairs at once)"
# a different run id is a different file: the comparison above can fail
"$TSC" diagnose -q tiny.h5 -o tiny.dx --run-id ${ID%f}e >/dev/null
cmp -s tiny.d1/analysis.h5 tiny.dx/analysis.h5 && bad "another run id wrote the same bytes" || ok
# the analysis runs on every process: one that cannot work is the job's failure, and its message names the process
expect 2 "--run-id expects 32 hexadecimal digits" mpirun -n 2 "$TSC" diagnose tiny.h5 -o bad --run-id xyz
# a missing rank: named, exit 1 on every process count, DIR's earlier results kept
cp -r tiny.d1 keep
for r in 0 1 2 3; do cp tiny.rank$r.h5 miss.rank$r.h5; done
# the manifest names its rank files: one written for miss.rank*.h5
"$TSC" merge -o miss.h5 miss.rank0.h5 miss.rank1.h5 miss.rank2.h5 miss.rank3.h5 >/dev/null
rm miss.rank2.h5
for n in 1 2 3; do
  expect 1 "miss.rank2.h5" mpirun -n $n "$TSC" diagnose -q miss.h5 -o keep --run-id $ID
done
cmp -s keep/analysis.h5 tiny.d1/analysis.h5 && cmp -s keep/summary.json tiny.d1/summary.json && ok ||
  bad "a failed run changed the folder's earlier analysis.h5 or summary.json"
# a corrupt rank file (its second half overwritten): refused naming it, on 1 and 3 processes
for r in 0 1 2 3; do cp tiny.rank$r.h5 bent.rank$r.h5; done
"$TSC" merge -o bent.h5 bent.rank0.h5 bent.rank1.h5 bent.rank2.h5 bent.rank3.h5 >/dev/null 2>&1 || bad "merge failed"
sz=$(stat -c %s bent.rank1.h5)
head -c $((sz / 2)) /dev/urandom | dd of=bent.rank1.h5 bs=1 seek=$((sz / 2)) conv=notrunc status=none
for n in 1 3; do
  expect 1 "bent.rank1.h5" mpirun -n $n "$TSC" diagnose -q bent.h5 -o keep --run-id $ID
done
cmp -s keep/analysis.h5 tiny.d1/analysis.h5 && ok || bad "a corrupt rank changed the folder's earlier analysis.h5"
finish
