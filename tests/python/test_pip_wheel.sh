#!/usr/bin/env bash
# ctest-labels: slow (a wheel build, a virtual environment, a capture, diagnose and report: 11-30 s on 2 cores)
# `pip wheel .` (pyproject.toml, setup.py) offline, with Debian's setuptools and wheel, gives a wheel that
# carries libtilescope.so and the tilescope program; installed into a fresh virtual environment it runs
# the README's PyTorch capture example with no TILESCOPE_LIB, TILESCOPE_BIN or PYTHONPATH, from that
# environment (not from this tree), and writes the dump, the diagnosis and the report. The wheel is built
# over this build's CMake folder (TILESCOPE_BUILD_DIR): the build hook's cmake --build of it is then a
# no-op, and the test does not rebuild the project; everything else it writes is under a temporary folder.
. "$(dirname "$0")/../cli/lib.sh"
: "${TSC_BUILD:?}" "${TSC_SRC:?}"
py=$(find_py h5py numpy torch) || { echo "SKIP: no python3 with h5py, numpy and torch (apt-get install python3-torch)"; exit 77; }
"$py" -c 'import importlib.util as u, sys; sys.exit(not all(u.find_spec(m) for m in ("pip", "setuptools", "wheel", "ensurepip")))' 2>/dev/null ||
  { echo "SKIP: $py lacks pip, setuptools, wheel or venv (apt-get install python3-pip python3-setuptools python3-wheel python3-venv)"; exit 77; }
pyenv=()
if grep -q '^TSC_SANITIZE:BOOL=ON' "$TSC_BUILD/CMakeCache.txt" 2>/dev/null; then
  # a sanitized library loaded into Python needs the ASan runtime first (as tests/run_py.sh does)
  pyenv=(LD_PRELOAD="$(gcc -print-file-name=libasan.so)" ASAN_OPTIONS=detect_leaks=0)
fi

# --no-index: offline, nothing from PyPI; --no-build-isolation: Debian's setuptools and wheel
TILESCOPE_BUILD_DIR="$TSC_BUILD" TILESCOPE_PIP_BUILD="$tmp/pip-build" \
  "$py" -m pip wheel --no-build-isolation --no-deps --no-index --no-cache-dir -w "$tmp/dist" "$TSC_SRC" \
  > "$tmp/wheel.log" 2>&1 && ok || bad "pip wheel failed: $(tail -20 "$tmp/wheel.log")"
whl=$(ls "$tmp"/dist/tilescope-*.whl 2>/dev/null | head -1)
[ -n "$whl" ] && ok || { bad "no wheel in $tmp/dist"; finish; exit 1; }
members=$("$py" -m zipfile -l "$whl")
for m in tilescope/_bin/libtilescope.so tilescope/_bin/tilescope tilescope/_install_paths.py tilescope/torch.py; do
  grep -qF "$m" <<<"$members" && ok || bad "the wheel lacks $m"
done

"$py" -m venv --system-site-packages "$tmp/venv" && ok || bad "python3 -m venv failed"
"$tmp/venv/bin/python" -m pip install --no-deps --no-index --no-cache-dir "$whl" > "$tmp/install.log" 2>&1 \
  && ok || bad "pip install of the wheel failed: $(tail -20 "$tmp/install.log")"

# The README's example (the block under "Capturing from PyTorch"), after a model, a loader and an
# optimizer it can run with: two nanoGPT-style attention layers (layers=1 is the second), 3 steps.
mkdir -p "$tmp/work"
awk '/^## Capturing from PyTorch/ {s = 1} s && /^```python/ {b = 1; next} b && /^```/ {exit} b' \
  "$TSC_SRC/README.md" > "$tmp/example.py"
grep -q 'tt.capture(model' "$tmp/example.py" && ok || bad "README: no tt.capture example found"
cat > "$tmp/work/run.py" <<'EOF'
import math, types
import torch, torch.nn as nn

class Attn(nn.Module):  # nanoGPT's CausalSelfAttention, eager
    def __init__(self, C, H):
        super().__init__()
        self.n_head, self.c_attn, self.c_proj = H, nn.Linear(C, 3 * C), nn.Linear(C, C)
    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in self.c_attn(x).split(C, 2))
        a = ((q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), -math.inf)
        return self.c_proj((a.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C))

class Model(nn.Module):
    def __init__(self, V=64, C=32, H=2, L=2):
        super().__init__()
        self.emb, self.attn, self.head = nn.Embedding(V, C), nn.ModuleList(Attn(C, H) for _ in range(L)), nn.Linear(C, V)
    def forward(self, idx):
        x = self.emb(idx[:, :-1])
        for a in self.attn:
            x = x + a(x)
        return types.SimpleNamespace(loss=nn.functional.cross_entropy(self.head(x).flatten(0, 1), idx[:, 1:].flatten()))

torch.manual_seed(0)
model = Model()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = [torch.randint(0, 64, (2, 33)) for _ in range(3)]
EOF
cat "$tmp/example.py" >> "$tmp/work/run.py"
cat >> "$tmp/work/run.py" <<'EOF'
print("module", tilescope.__file__)
print("library", tilescope.library_path())
print("program", tilescope.program())
EOF
(cd "$tmp/work" && env -u TILESCOPE_LIB -u TILESCOPE_BIN -u PYTHONPATH "${pyenv[@]}" \
  timeout 300 "$tmp/venv/bin/python" run.py) > "$tmp/out" 2> "$tmp/err" && ok || bad "the README example failed: $(tail -20 "$tmp/err")"
for f in run.h5 diag/summary.json report.pdf; do
  [ -s "$tmp/work/$f" ] && ok || bad "the README example wrote no $f"
done
[ "$(head -c 5 "$tmp/work/report.pdf" 2>/dev/null)" = "%PDF-" ] && ok || bad "report.pdf is not a PDF"
site=$("$tmp/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
for want in "module $site/tilescope/__init__.py" "library $site/tilescope/_bin/libtilescope.so" \
            "program $site/tilescope/_bin/tilescope"; do
  grep -qxF "$want" "$tmp/out" && ok || bad "want '$want' (the venv's package), got: $(cat "$tmp/out")"
done
# the bundled program through the package and through the script pip put on the environment's PATH
(cd "$tmp/work" && env -u TILESCOPE_LIB -u TILESCOPE_BIN -u PYTHONPATH "${pyenv[@]}" \
  "$tmp/venv/bin/python" -m tilescope info run.h5 --json) > "$tmp/info" 2> "$tmp/err" &&
  grep -q '"n_layer": *2' "$tmp/info" && ok || bad "python3 -m tilescope info: $(head -5 "$tmp/err" "$tmp/info")"
env -u TILESCOPE_LIB -u TILESCOPE_BIN "${pyenv[@]}" "$tmp/venv/bin/tilescope" help > "$tmp/help" 2>&1; grep -q "usage: tilescope" "$tmp/help" \
  && ok || bad "the venv's tilescope script: $(head -3 "$tmp/help")"
finish
