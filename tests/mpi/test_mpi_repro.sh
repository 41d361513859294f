#!/usr/bin/env bash
# ctest-labels: slow (over 5 s on 2 cores)
# `mpirun -n 2 tilescope repro --config tiny`: every run trains data-parallel (--grad-shards 2) and
# is the run one process trains with the same shards (hp's log.csv and ckpt.bin, byte for byte, from
# the command outcome.md lists); lp's capture is a manifest over two rank dumps, the diagnosis reads
# it, the report names the rank files, process 0 alone prints; a batch the processes do not divide
# is refused before any run. With --keep-checkpoints lp keeps one every tenth of the run.
. "$(dirname "$0")/lib_mpi.sh"
command -v gnuplot >/dev/null || { echo "gnuplot is not installed: skip"; exit 77; }
command -v pdftotext >/dev/null || { echo "poppler-utils missing: skip"; exit 77; }
cd "$tmp" || exit 1
export OMP_NUM_THREADS=1 EXPECT_TIMEOUT=60
mpi 2 "$TSC" repro --config tiny --budget 120 --keep-checkpoints -o r2 >repro.txt 2>repro.err && ok || bad "repro on 2 processes failed: $(tail -5 repro.err)"
[ "$(grep -c '^repro: config tiny' repro.txt)" = 1 ] && ok || bad "the plan is not printed once: $(grep -c '^repro: config' repro.txt)"
grep -q "on 2 processes: every run data-parallel with --grad-shards 2" repro.txt && ok || bad "the plan does not say the runs are sharded"
for r in lp hp lp1 stable onetile hpdelta; do
  grep -q "^mpirun -n 2 tilescope train -o r2/runs/$r .* --grad-shards 2 " r2/outcome.md && ok || bad "outcome.md lacks $r's command on 2 processes"
  grep -qx "grad_shards = 2" r2/runs/$r/run.cfg && ok || bad "$r's run.cfg lacks grad_shards = 2"
done
# --keep-checkpoints: lp's checkpoint of every tenth of the run (30 steps: every 3), written by process 0
[ "$(cd r2/runs/lp && ls ckpt-*.bin | sort -V | tr '\n' ' ')" = "ckpt-0.bin ckpt-3.bin ckpt-6.bin ckpt-9.bin ckpt-12.bin ckpt-15.bin ckpt-18.bin ckpt-21.bin ckpt-24.bin ckpt-27.bin ckpt-30.bin " ] &&
  ok || bad "lp's kept checkpoints: $(ls r2/runs/lp)"
# hp again, on one process, from the command outcome.md gives (the launcher and the folder taken out)
cmd=$(grep "^mpirun -n 2 tilescope train -o r2/runs/hp " r2/outcome.md | sed "s/^mpirun -n 2 tilescope train -o r2\/runs\/hp //")
[ -n "$cmd" ] && ok || bad "no hp command in outcome.md"
# shellcheck disable=SC2086
"$TSC" train -o hp1 $cmd >/dev/null 2>train.err && ok || bad "hp on one process failed: $(tail -3 train.err)"
for f in log.csv ckpt.bin wq_norms.csv batches.csv; do
  cmp -s r2/runs/hp/$f hp1/$f && ok || bad "hp's $f on 2 processes differs from one process's"
done
# lp's capture: a manifest of two rank dumps, diagnosed, the report names them
for f in capture.h5 capture.rank0.h5 capture.rank1.h5; do [ -f r2/runs/lp/$f ] && ok || bad "lp's $f missing"; done
"$TSC" info r2/runs/lp/capture.h5 2>&1 | grep -q "a run of 2 ranks" && ok || bad "lp's capture is not a run of 2 ranks"
grep -q '"dump": "r2/runs/lp/capture.h5"' r2/diagnose/summary.json && ok || bad "summary.json does not name lp's capture"
pdftotext r2/report.pdf - | tr '\n' ' ' | grep -q "rank 1 capture.rank1.h5 (rows 2-3" && ok || bad "the report does not name rank 1's file and rows"
[ -s r2/report.pdf ] && [ -s r2/figures/fig2.png ] && ok || bad "no report or fig2"
# 3 processes cannot split the tiny batch of 4: refused before any run, nothing trained
expect 2 "3 does not divide the batch of 4" mpirun -n 3 "$TSC" repro --config tiny -o three
[ ! -e three/runs ] && ok || bad "a refused repro started runs"
finish
