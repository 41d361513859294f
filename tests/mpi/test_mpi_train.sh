#!/usr/bin/env bash
# Data-parallel training on MPI: `mpirun -n N tilescope train ... --grad-shards G` writes the
# run folder of one process with the same G byte for byte (log.csv, ckpt.bin, wq_norms.csv,
# batches.csv, run.cfg) for N = 1, 2, 3; a run checkpointed on 2 processes and resumed on 3
# equals the uninterrupted run; what cannot run on several processes is refused by name.
. "$(dirname "$0")/lib_mpi.sh"
cd "$tmp" || exit 1
export OMP_NUM_THREADS=1 EXPECT_TIMEOUT=120
A=(--model gpt2-tiny --steps 12 --batch 6 --seq-len 32 --val-every 4 --stats-every 4 --ckpt-every 6 -q)
FILES="log.csv ckpt.bin wq_norms.csv batches.csv run.cfg"
ok "$TSC" train -o s1 "${A[@]}" --grad-shards 6
for n in 2 3; do
  mpi $n "$TSC" train -o m$n "${A[@]}" --grad-shards 6 >/dev/null && ok || bad "train on $n processes failed"
  for f in $FILES; do cmp -s s1/$f m$n/$f && ok || bad "$n processes: $f differs from one process's"; done
done
# the shards decide the bits: the whole batch at once is another run (the comparison above can fail)
ok "$TSC" train -o g1 "${A[@]}"
cmp -s s1/log.csv g1/log.csv && bad "6 shards wrote the log of 1" || ok
[ "$(sed -n 2p s1/log.csv | cut -d, -f1-3)" = "$(sed -n 2p g1/log.csv | cut -d, -f1-3)" ] && ok ||
  bad "step 0's loss differs between 6 shards and 1 (the mean of the same rows' losses)"
grep -qx "grad_shards = 6" s1/run.cfg && ok || bad "run.cfg lacks grad_shards = 6"
grep -q "grad_shards" g1/run.cfg && bad "a run without shards records grad_shards" || ok
# resume on another count: checkpointed at step 6 by 2 processes, continued by 3
mpi 2 "$TSC" train -o k "${A[@]}" --grad-shards 6 --ckpt-keep 3 >/dev/null && ok || bad "the run to resume failed"
cp k/log.csv log.full && cp k/ckpt.bin ckpt.full && cp k/ckpt-6.bin k/ckpt.bin
mpi 3 "$TSC" train --resume k -q >/dev/null && ok || bad "resume on 3 processes failed"
cmp -s log.full k/log.csv && ok || bad "the resumed log.csv differs from the uninterrupted one"
cmp -s ckpt.full k/ckpt.bin && ok || bad "the resumed ckpt.bin differs from the uninterrupted one"
cmp -s s1/log.csv k/log.csv && ok || bad "the resumed run's log differs from one process's"
# refused: shards the processes do not divide, shards that do not divide the batch, fork (the
# recorders' refusal is test_mpi_record's)
expect 1 "the shards must divide the batch and the processes the shards" mpirun -n 2 "$TSC" train -o e1 "${A[@]}" --grad-shards 3
expect 1 "the shards must divide the batch" "$TSC" train -o e2 "${A[@]}" --grad-shards 4
expect 2 "--fork runs on one process" mpirun -n 2 "$TSC" train --fork s1 -o e4
# process 0 cannot make the folder: every process leaves, the message names the folder
expect 1 "no/such/dir" mpirun -n 2 "$TSC" train -o no/such/dir "${A[@]}" --grad-shards 2
finish
