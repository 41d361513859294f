#!/usr/bin/env bash
# ctest-labels: slow (over 5 s on 2 cores)
# Text from strangers is inert in every output (docs/SECURITY.md "Text from received files"): a dump
# named with "<!--<script>" and an HTML payload, an analysis folder named so, a summary.json whose
# policy strings hold HTML, newlines and ESC, folder and file names holding ESC. Checked:
#   view     the page still loads in headless chromium (its script fills in the source line and the
#            head tiles, naming the dump as text) and the payload ran nothing (title unchanged, no
#            injected element); a screenshot is left in $TSC_SHOT_DIR when that is set
#   report   report.html shows summary.json's strings as text (no element, no script run)
#   compare  compare.md holds no raw HTML, no line started by a string, no ESC; compare.json keeps
#            the strings exactly; what compare, view and figure attn print (stdout, errors quoting
#            summary.json's run id, a log's line, a file's name) holds no raw ESC
#   lock     a second compare into a folder being written is refused (exit 1, naming the folder and
#            the holder), both with a held lock file and with a real compare slowed inside its lock
. "$(dirname "$0")/lib.sh"
T=${TSC:?TSC must name the tilescope binary}
command -v gnuplot >/dev/null || { echo "gnuplot is not installed: skip"; exit 77; }
PY=$(find_py json) || { echo "no python3: skip"; exit 77; }
cd "$tmp" || exit 1
ESC=$'\x1b'
san() { ! grep -qE "Sanitizer|runtime error" "$@"; }
BROWSER=""
for b in chromium chromium-browser google-chrome; do command -v "$b" >/dev/null && { BROWSER=$(command -v "$b"); break; }; done
# the page as the browser left it (its DOM after the scripts ran), in $1.dom; the browser must not
# inherit the ASan runtime a sanitized build preloads
dom() {
  env -u LD_PRELOAD -u ASAN_OPTIONS -u UBSAN_OPTIONS -u LSAN_OPTIONS timeout 120 "$BROWSER" --headless=new --no-sandbox \
    --disable-gpu --user-data-dir="$tmp/prof" --virtual-time-budget=5000 --dump-dom "file://$tmp/$1" > "$1.dom" 2> /dev/null
}

"$T" synth -o d.h5 --shape tiny --steps 0 --quiet || { echo "synth failed"; exit 1; }
NAME="x<!--<script><img id=pwned src=x onerror=document.title='PWNED'>"
cp d.h5 "$NAME.h5"
"$T" analyze "$NAME.h5" -o "an<!--<script>" --layers 1 -q > /dev/null 2> err.txt || { echo "analyze failed: $(cat err.txt)"; exit 1; }
"$T" analyze d.h5 -o b --layers 1 -q > /dev/null 2> err.txt || { echo "analyze b failed: $(cat err.txt)"; exit 1; }

# 1. view: the data block survives the name (the data is JSON with < > & as \u escapes)
"$T" view "$NAME.h5" -o v.html > out.txt 2> err.txt && san err.txt && ok || bad "view failed: $(cat err.txt)"
"$T" view "an<!--<script>" -o v2.html > /dev/null 2> err.txt && san err.txt && ok || bad "view of the folder: $(cat err.txt)"
"$PY" - v.html v2.html "$NAME" <<'PYEOF' > chk.txt 2>&1 && ok || bad "view data block: $(cat chk.txt)"
import json, re, sys
for path in sys.argv[1:3]:
    t = open(path, encoding="utf-8").read()
    data = re.search(r'<script id="data" type="application/json">\n(.*?)</script>', t, re.S).group(1)
    assert "<" not in data and ">" not in data and "&" not in data, path
    d = json.loads(data)
    assert d["meta"]["dump"] == sys.argv[3] + ".h5", d["meta"]["dump"]
    assert len(re.findall(r"<script", t)) == 2, path
assert json.loads(re.search(r'<script id="data" type="application/json">\n(.*?)</script>', open(sys.argv[2]).read(),
                            re.S).group(1))["meta"]["analysis"] == "an<!--<script>"
PYEOF
if [ -n "$BROWSER" ]; then
  for page in v.html v2.html; do
    dom $page
    # the script ran: it names the dump as text and draws a tile per head of the layer
    grep -qF '<div id="src">dump x&lt;!--&lt;script&gt;&lt;img id=pwned src=x onerror=document.title=' $page.dom && ok ||
      bad "$page: the source line is not filled in: $(grep -o '<div id="src">[^<]*' $page.dom)"
    [ "$(grep -o 'class="tile' $page.dom | wc -l)" -ge 4 ] && ok || bad "$page: no head tiles drawn"
    grep -qF "<div id=\"title\">step 0, batch row 0, layer " $page.dom && ok || bad "$page: no head shown"
    grep -q '<title>tilescope view</title>' $page.dom && ! grep -q 'id="pwned"' $page.dom && ok ||
      bad "$page: the payload ran or made an element"
  done
  grep -qF 'analysis an&lt;!--&lt;script&gt;' v2.html.dom && ok || bad "v2.html: the analysis folder is not named"
  if [ -n "${TSC_SHOT_DIR:-}" ]; then
    env -u LD_PRELOAD -u ASAN_OPTIONS -u UBSAN_OPTIONS -u LSAN_OPTIONS timeout 120 "$BROWSER" --headless=new \
      --no-sandbox --disable-gpu --user-data-dir="$tmp/prof" --virtual-time-budget=5000 --window-size=1200,800 \
      --screenshot="$TSC_SHOT_DIR/inert_view.png" "file://$tmp/v2.html" > /dev/null 2>&1
  fi
else
  echo "note: no chromium: the view pages were not rendered"
fi

# 2. summary.json strings with HTML, newlines and ESC (as a received folder may hold)
cp -r b evil
"$PY" - evil/summary.json <<'PYEOF' || { echo "editing summary.json failed"; exit 1; }
import json, sys
s = json.load(open(sys.argv[1]))
s["lp"] = "bf16-torch<script>document.title='PWNED'</script>\n# injected\n| 9 | 9 |\x1b[2J"
s["hp"] = "fp32</script><script>document.title='PWNED'</script><img id=pwned src=x onerror=alert(1)>\r\x1b]0;t\x07"
json.dump(s, open(sys.argv[1], "w"))
PYEOF
"$T" compare "an<!--<script>" evil -o cmp --label "A=a<b>|c" > out.txt 2> err.txt && san err.txt && ok ||
  bad "compare failed: $(cat err.txt)"
"$PY" - cmp/compare.md cmp/compare.json evil/summary.json <<'PYEOF' > chk.txt 2>&1 && ok || bad "compare.md: $(cat chk.txt)"
import json, sys
md = open(sys.argv[1], "rb").read().decode("utf-8")
for bad in ("<script", "</script", "<img", "<b>", "\x1b", "\r", "\x07"):
    assert bad not in md, (bad, md[:600])
lines = md.split("\n")
assert not [l for l in lines if l.startswith("# injected") or l.startswith("| 9")], lines[:8]
assert lines[0] == "# What changed: a&lt;b&gt;\\|c -> B", lines[0]
b = [l for l in lines if l.startswith("- B = B: ")][0]
assert "lp bf16-torch&lt;script&gt;document.title='PWNED'&lt;/script&gt;\\x0a\\# injected\\x0a\\| 9 \\| 9 \\|\\x1b\\[2J" in b, b
assert "hp fp32&lt;/script&gt;&lt;script&gt;" in b and "\\x0d\\x1b\\]0;t\\x07)" in b, b
# the table is still the 4 heads of layer 1 (no row added by a string)
assert len([l for l in lines if l.startswith("| ") and not l.startswith("| layer")]) == 4, md
s = json.load(open(sys.argv[3]))
j = json.load(open(sys.argv[2]))
assert j["b"]["lp"] == s["lp"] and j["b"]["hp"] == s["hp"], j["b"]
PYEOF
! grep -q "$ESC" out.txt && ok || bad "compare printed a raw ESC"

# 3. the report of that folder: its strings are text in report.html
"$T" report evil --dpi 50 -o evil/report.pdf -q > /dev/null 2> err.txt && [ -s evil/report.html ] && ok ||
  bad "report failed: $(cat err.txt)"
grep -qF "fp32&lt;/script&gt;&lt;script&gt;document.title=&#39;PWNED&#39;&lt;/script&gt;&lt;img id=pwned" evil/report.html &&
  ! grep -q "$ESC" evil/report.html && ok || bad "report.html: hp not escaped: $(grep -o 'fp32[^ ]*' evil/report.html | head -2)"
if [ -n "$BROWSER" ]; then
  cp evil/report.html r.html
  dom r.html
  grep -q '<title>tilescope report</title>' r.html.dom && ! grep -q 'id="pwned"' r.html.dom && ok ||
    bad "report.html: the payload ran or made an element"
fi

# 4. names with ESC on the terminal: compare's and view's output and errors show it as \x1b
mkdir -p "e${ESC}[31mred"
cp -r b "e${ESC}[31mred/A"
"$T" compare "e${ESC}[31mred/A" b -o "o${ESC}[2J" --label "A=l${ESC}[5m" > out.txt 2> err.txt && ok || bad "compare ESC: $(cat err.txt)"
! grep -q "$ESC" out.txt err.txt && grep -qF 'compare e\x1b[31mred/A (l\x1b[5m) vs b (B)' out.txt &&
  grep -qF 'wrote o\x1b[2J/compare.md' out.txt && ok || bad "compare printed: $(cat -v out.txt)"
! grep -q "$ESC" "o${ESC}[2J/compare.md" && grep -qF 'A = l\x1b\[5m: e\x1b\[31mred/A' "o${ESC}[2J/compare.md" && ok ||
  bad "compare.md with ESC: $(cat -v "o${ESC}[2J/compare.md" | head -4)"
# an error quoting summary.json's run id (ESC in it): escaped
cp -r b rid
"$PY" - rid/summary.json <<'PYEOF' || { echo "editing run_id failed"; exit 1; }
import json, sys
s = json.load(open(sys.argv[1]))
s["run_id"] = "ff\x1b[31mred\r"
json.dump(s, open(sys.argv[1], "w"))
PYEOF
expect 1 'come from different runs (run ids ' "$T" compare rid b -o cmp-rid
! grep -q "$ESC" "$tmp/err" && grep -qF 'ff\x1b[31mred\x0d' "$tmp/err" && ok || bad "compare error: $(cat -v "$tmp/err")"
# an error quoting a training log's line (ESC in it): escaped
printf 'step,loss\n1,2\033[31m\n' > esc.csv
expect 1 "esc.csv:2: column 2 (loss): expected a number, found '2\\x1b[31m'" "$T" compare b evil -o cmp-log --log A=esc.csv
! grep -q "$ESC" "$tmp/err" && ok || bad "compare log error: $(cat -v "$tmp/err")"
"$T" view "$NAME.h5" -o "v${ESC}[2J.html" > out.txt 2> err.txt && ! grep -q "$ESC" out.txt && grep -qF 'v\x1b[2J.html: 1 step x' out.txt &&
  ok || bad "view printed: $(cat -v out.txt err.txt)"
: > "bad${ESC}[31m.h5"
expect 1 'bad\x1b[31m.h5' "$T" view "bad${ESC}[31m.h5" -o w.html
! grep -q "$ESC" "$tmp/err" && ok || bad "view error: $(cat -v "$tmp/err")"
expect 1 'bad\x1b[31m.h5' "$T" figure attn "bad${ESC}[31m.h5" --layer 0 -o w.png
! grep -q "$ESC" "$tmp/err" && ok || bad "figure attn error: $(cat -v "$tmp/err")"

# 5. one writer per compare folder: a held lock refuses a second compare at once, naming the folder
command -v flock >/dev/null || { echo "note: no util-linux flock: lock checks skipped"; finish; exit $?; }
mkdir -p L
flock L/.tilescope.lock sleep 5 &
holder=$!
sleep 0.5
expect 1 "L is being written by another tilescope compare (pid " "$T" compare b evil -o L
[ ! -e L/compare.md ] && [ ! -e L/compare.json ] && ok || bad "a refused compare wrote into L"
kill "$holder" 2> /dev/null; wait "$holder" 2> /dev/null
# two real compares into one folder: the first is slowed inside its lock (a gnuplot that waits 3 s),
# the second, started meanwhile, is refused naming the first's pid; the first completes, unmixed
mkdir -p slow
printf '#!/bin/sh\nsleep 3\nexec %s "$@"\n' "$(command -v gnuplot)" > slow/gnuplot && chmod +x slow/gnuplot
PATH="$tmp/slow:$PATH" "$T" compare "an<!--<script>" b -o C --label A=first > c1.out 2> c1.err &
first=$!
for _ in $(seq 100); do [ -e C/compare.json ] && break; sleep 0.1; done
"$T" compare b evil -o C --label A=second > c2.out 2> c2.err; rc2=$?
wait "$first"; rc1=$?
[ "$rc1" = 0 ] && ok || bad "the first compare failed ($rc1): $(cat c1.err)"
[ "$rc2" = 1 ] && grep -qF "tilescope compare: C is being written by another tilescope compare (pid $first" c2.err && ok ||
  bad "the second compare: exit $rc2, $(cat c2.err)"
head -1 C/compare.md | grep -qx "# What changed: first -> B" && grep -q '"label": "first"' C/compare.json && ok ||
  bad "C holds another run's files: $(head -1 C/compare.md)"
# the lock is released at the end: a later compare into C succeeds
"$T" compare b evil -o C --label A=third -q 2> err.txt && head -1 C/compare.md | grep -qx "# What changed: third -> B" && ok ||
  bad "compare after the first finished: $(cat err.txt)"
finish
