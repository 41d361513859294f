#!/usr/bin/env bash
# Training logs on the command line: the loss figures from --log alone (llm.c, W&B and TensorBoard
# exports), a column chosen with FILE:COLUMN, a malformed log named by file and line, a missing or
# unknown column listing the log's columns, and the warning when a log misses the analysed steps.
. "$(dirname "$0")/lib.sh"
T=${TSC:?TSC must name the tilescope binary}
LOGS=${TSC_SRC:?TSC_SRC must name the source tree}/tests/data/logs
command -v gnuplot >/dev/null || { echo "gnuplot is not installed: skip"; exit 77; }
cd "$tmp" || exit 1
is_png() { [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ]; }

# 1. no analysis folder: fig10, fig2 and fig7 from logs alone
"$T" figure fig10 --log "llmc=$LOGS/llmc_gpt2.log" --log "wandb=$LOGS/wandb_export.csv" -o f10.png > cap.txt 2> err.txt \
  && is_png f10.png && ok || bad "fig10 from logs alone: $(cat err.txt)"
grep -q "'llmc' = column train_loss of .*llmc_gpt2.log (5 points)" cap.txt && ok || bad "fig10 caption: $(cat cap.txt)"
grep -q "'wandb' = column gpt2-bf16 - train/loss of .*wandb_export.csv (4 points)" cap.txt && ok || bad "fig10 caption: $(cat cap.txt)"
grep -q "half-life" cap.txt && ok || bad "fig10 caption should state the EMA's half-life: $(cat cap.txt)"
"$T" figure fig2 --log "llmc=$LOGS/llmc_gpt2.log" -o f2.png > cap2.txt 2> err.txt && is_png f2.png && ok || bad "fig2: $(cat err.txt)"
grep -q "column val_loss of .*(3 points)" cap2.txt && ok || bad "fig2 should draw llm.c's 3 val loss lines: $(cat cap2.txt)"
"$T" figure fig7 --log "a=$LOGS/llmc_gpt2.log" --log "b=$LOGS/llmc_main.log" -o f7.png > /dev/null 2> err.txt \
  && is_png f7.png && ok || bad "fig7: $(cat err.txt)"
"$T" figure fig10 --log "$LOGS/tensorboard_export.csv" -o tb.png > cap3.txt 2> err.txt && ok || bad "tensorboard: $(cat err.txt)"
grep -q "column Value of .*tensorboard_export.csv (4 points)" cap3.txt && ok || bad "tensorboard caption: $(cat cap3.txt)"
# nanoGPT: fig10 draws the per-iteration losses (iter lines), not the evaluation points (step lines)
printf 'step 0: train loss 10.98, val loss 10.99\niter 0: loss 10.99, time 35.1ms, mfu -100.00%%\niter 1: loss 10.5, time 35.1ms, mfu 12.00%%\niter 2: loss 10.1, time 35.1ms, mfu 12.00%%\n' > nano.log
"$T" figure fig10 --log nano.log -o nano.png > cap5.txt 2> err.txt && ok || bad "nanoGPT fig10: $(cat err.txt)"
grep -q "column iter_loss of nano.log (3 points)" cap5.txt && ok || bad "fig10 should draw iter_loss: $(cat cap5.txt)"
expect 2 "--from DIR is required" "$T" figure fig3 --log "$LOGS/tensorboard_export.csv" -o x.png

# 2. FILE:COLUMN; an unknown column lists the columns
"$T" figure fig10 --log "lr=$LOGS/wandb_two_metrics.csv:gpt2-bf16 - lr" -o lr.png > cap4.txt 2> err.txt \
  && ok || bad "FILE:COLUMN: $(cat err.txt)"
grep -q "column gpt2-bf16 - lr of" cap4.txt && ok || bad "the chosen column should be drawn: $(cat cap4.txt)"
expect 1 "has no column 'loss'; the columns are: 'gpt2-bf16 - train/loss'" "$T" figure fig10 --log "$LOGS/wandb_two_metrics.csv:loss" -o x.png
printf 'step,a,b\n0,1,2\n1,3,4\n' > ab.csv
expect 1 "the columns are: 'a', 'b'. Choose one with --log NAME=FILE:COLUMN" "$T" figure fig10 --log ab.csv -o x.png
"$T" figure fig10 --log ab.csv:b -o b.png > /dev/null 2> err.txt && ok || bad "ab.csv:b: $(cat err.txt)"

# 3. a malformed llm.c log: the file and the line
expect 1 "llmc_malformed.log:3: malformed llm.c log line" "$T" figure fig10 --log "$LOGS/llmc_malformed.log" -o x.png
[ ! -e x.png ] && ok || bad "a failed figure left its file"

# 4. coverage of the analysed steps (tiny: steps 0..2)
"$T" synth -o d.h5 --shape tiny --quiet && "$T" analyze d.h5 -o an -q > /dev/null 2>&1 || { echo "analyze failed"; exit 1; }
printf 'step,loss\n50,3.5\n80,3.25\n' > late.csv
"$T" figure fig10 --from an --log late.csv -o late.png > /dev/null 2> warn.txt && ok || bad "late log: $(cat warn.txt)"
grep -q "warning: log 'late.csv' (late.csv) has values for steps 50..80; 3 of the 3 analysed steps lie outside (first: step 0)" warn.txt \
  && ok || bad "coverage warning: $(cat warn.txt)"
"$T" figure fig10 --from an --log "$LOGS/llmc_main.log" -o ok.png > /dev/null 2> nowarn.txt && [ ! -s nowarn.txt ] \
  && ok || bad "a covering log should not warn: $(cat nowarn.txt)"
finish
