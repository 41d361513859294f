#!/usr/bin/env bash
# `tilescope import`: a safetensors file written here by a writer of this test's own (F32, BF16,
# F16), a .npy, a torch-written .pt (handed to the Python importer) and an .npz go into dumps whose
# bits h5py reads back equal to the file's; python3 -m tilescope import with the same command line
# writes the same bits. Every malformed file exits 1 with a message naming the file and the
# problem, and leaves no dump; bad flags and maps are usage errors (2).
. "$(dirname "$0")/lib.sh"
: "${TSC:?}"
py=$(find_py h5py numpy torch) || { echo "SKIP: no python3 with h5py, numpy and torch"; exit 77; }
export PYTHONPATH="$(cd "$(dirname "$0")/../../python" && pwd)${PYTHONPATH:+:$PYTHONPATH}"
[ -n "${TSC_BUILD:-}" ] && export TILESCOPE_LIB="$TSC_BUILD/libtilescope.so"
# Python loading a sanitized library needs the ASan runtime first in the process (as tests/run_py.sh
# does); the commands that run Python (the package, or tilescope handing .pt/.npz to it) get it.
pyenv=()
if [ -n "${TSC_BUILD:-}" ] && grep -q '^TSC_SANITIZE:BOOL=ON' "$TSC_BUILD/CMakeCache.txt" 2>/dev/null; then
  pyenv=(env LD_PRELOAD="$(gcc -print-file-name=libasan.so)" ASAN_OPTIONS=detect_leaks=0)
fi
cd "$tmp"
# run0 CMD...: a pass when CMD exits 0 (stdout in out, stderr in err)
run0() { "$@" >out 2>err && ok || bad "'$*' failed: $(head -3 err)"; }

# The writer: a.safetensors (layers 0 and 2 of step 5: BF16 q k v, F16 do, F32 o; one extra
# tensor), a.pt ([B, T, H, D] BF16, nested dict), a.npz, q.npy; bits.npz holds what the dump must.
"$py" - <<'PY'
import json, struct, numpy as np, torch
rng = np.random.default_rng(3)
B, H, K, T, D = 2, 4, 2, 8, 4
def bf(shape): return torch.randn(*shape).to(torch.bfloat16)
def bits(t): return t.view(torch.int16).numpy().view(np.uint16)
st, want = {}, {}
for layer in (0, 2):
    for n, h in (("q", H), ("k", K), ("v", K)):
        t = bf((B, h, T, D)); st["model.%d.%s" % (layer, n)] = ("BF16", bits(t)); want["%d/%s" % (layer, n)] = bits(t)
    do = rng.standard_normal((B, H, T, D)).astype(np.float16); st["model.%d.do" % layer] = ("F16", do); want["%d/do" % layer] = do
    o = rng.standard_normal((B, H, T, D)).astype(np.float32); st["model.%d.o" % layer] = ("F32", o); want["%d/o" % layer] = o
st["embed"] = ("F32", np.zeros((3, 3), np.float32))
def write(path, tensors, header=None, cut=None):
    h, blobs, off = {}, [], 0
    for name, (dt, a) in tensors.items():
        b = a.tobytes(); h[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b); off += len(b)
    h["__metadata__"] = {"format": "pt"}
    hb = header if header is not None else json.dumps(h).encode()
    data = b"".join(blobs)[:cut]
    open(path, "wb").write(struct.pack("<Q", len(hb)) + hb + data)
    return h
write("a.safetensors", st)
q = bf((B, T, H, D)); k = bf((B, T, K, D))
torch.save({"blocks": [{"q": q, "k": k, "v": k}], "lr": torch.tensor(3)}, "a.pt")
want["pt/q"] = bits(q.transpose(1, 2).contiguous()); want["pt/k"] = bits(k.transpose(1, 2).contiguous())
qn = rng.standard_normal((B, H, T, D)).astype(np.float32); np.savez("a.npz", query=qn); np.save("q.npy", qn); want["npz/q"] = qn
np.savez("bits.npz", **{k.replace("/", "_"): v for k, v in want.items()})
# GQA saved [B, T, H, D] (4 query heads, 2 kv heads, T 32): read [B, H, T, D], k's T is not q's
np.savez("bthd.npz", q=rng.standard_normal((1, 32, 4, 16)).astype(np.float32),
         k=rng.standard_normal((1, 32, 2, 16)).astype(np.float32), v=rng.standard_normal((1, 32, 2, 16)).astype(np.float32))
# malformed files
small = {k: v for k, v in st.items() if k.startswith("model.0.")}
open("len.safetensors", "wb").write(struct.pack("<Q", 1 << 40) + b"{}")
write("json.safetensors", small, header=b'{"model.0.q": {"dtype": "BF16",')
h = write("x.safetensors", small); h["model.0.k"]["data_offsets"][1] += 2; write("offsets.safetensors", small, header=json.dumps(h).encode())
h = write("x.safetensors", small); o = h["model.0.v"]["data_offsets"]; h["model.0.v"]["data_offsets"] = [1 << 40, (1 << 40) + o[1] - o[0]]; write("range.safetensors", small, header=json.dumps(h).encode())
h = write("x.safetensors", small); a, b = h["model.0.q"]["data_offsets"], h["model.0.k"]["data_offsets"]
h["model.0.k"]["data_offsets"] = [a[0], a[0] + b[1] - b[0]]; write("overlap.safetensors", small, header=json.dumps(h).encode())
h = write("x.safetensors", small); h["model.0.v"]["shape"][2] -= 1; write("size.safetensors", small, header=json.dumps(h).encode())
write("trunc.safetensors", small, cut=100)
h = write("x.safetensors", small); h["model.0.v"]["dtype"] = "I8"; write("dtype.safetensors", small, header=json.dumps(h).encode())
wrong = dict(small); wrong["model.0.o"] = ("F32", np.zeros((B, H, T - 1, D), np.float32)); write("shape.safetensors", wrong)
PY
[ -f bits.npz ] && ok || bad "the test's writer failed"

run0 "$TSC" import a.safetensors -o st.h5 --map 'model.{layer}.{name}' --step 5 --policy bf16-fa2
grep -q "import: a.safetensors -> st.h5: 10 datasets, steps \[5\], layers \[0, 2\]; skipped 1 tensor no map selects: embed" out && ok ||
  bad "the summary line: $(cat out)"
run0 "${pyenv[@]}" "$py" -m tilescope import a.safetensors -o st_py.h5 --map 'model.{layer}.{name}' --step 5 --policy bf16-fa2
run0 "${pyenv[@]}" "$TSC" import a.pt -o pt.h5 --map 'blocks.{layer}.{name}' --layout bthd
grep -q "skipped 1 tensor no map selects: lr" out && ok || bad "a.pt: $(cat out)"
run0 "${pyenv[@]}" "$TSC" import a.npz -o npz.h5 --map 'query=q'
run0 "$TSC" import q.npy -o npy.h5
"$py" - <<'PY' && ok || bad "the dumps' bits differ from the files'"
import h5py, numpy as np, sys
w = np.load("bits.npz")
bad = []
def same(path, grp, name, key):
    with h5py.File(path, "r") as f:
        a = f[grp][name][()]
    if a.dtype == np.float32 and w[key].dtype == np.uint16:  # bf16 storage reads as float32 in h5py: exact
        a = a.view(np.uint32) >> 16 if not (a.view(np.uint32) & 0xffff).any() else a
        a = a.astype(np.uint16) if a.dtype == np.uint32 else a
    if not (a.dtype == w[key].dtype and np.array_equal(a.view(np.uint8), w[key].view(np.uint8))):
        bad.append((path, grp, name, a.dtype, w[key].dtype))
for p in ("st.h5", "st_py.h5"):
    for layer in (0, 2):
        for n in ("q", "k", "v", "do", "o"):
            same(p, "step_00000005/layer_%03d" % layer, n, "%d_%s" % (layer, n))
with h5py.File("st.h5", "r") as f:
    if f["step_00000005/layer_000/q"].attrs["dtype"] not in (b"bf16", "bf16"): bad.append("q dtype attribute")
same("pt.h5", "step_00000000/layer_000", "q", "pt_q"); same("pt.h5", "step_00000000/layer_000", "k", "pt_k")
same("npz.h5", "step_00000000/layer_000", "q", "npz_q"); same("npy.h5", "step_00000000/layer_000", "q", "npz_q")
print(bad or "ok"); sys.exit(1 if bad else 0)
PY

# malformed files: exit 1, the file and the problem named, no dump left
for c in "len:header length" "json:malformed JSON" "offsets:'model.0.k'" "range:beyond" "overlap:overlap" \
         "size:'model.0.v'" "trunc:truncated" "dtype:'I8'" "shape:'model.0.o'"; do
  f=${c%%:*}.safetensors
  expect 1 "${c#*:}" "$TSC" import "$f" -o bad.h5 --map 'model.{layer}.{name}'
  grep -qF "$f" err && [ ! -e bad.h5 ] && [ -z "$(ls | grep '^bad\.h5')" ] && ok || bad "$f: the file not named, or output left: $(cat err)"
done
expect 1 "No such file" "$TSC" import missing.safetensors -o bad.h5
expect 1 "unknown file type" "$TSC" import a.txt -o bad.h5
expect 1 "no tensor maps to q" "$TSC" import a.safetensors -o bad.h5 --map 'nothing.{name}'
# a [B, T, H, D] file without --layout: the tensors named, the layout suggested, no internal path shown
expect 1 "tensor 'k' (-> step 0 layer 0 k) is [1, 32, 2, 16] and q 'q' is [1, 32, 4, 16]: read as [B, H, T, D] (the default layout) they disagree; they fit [B, T, H, D]: give --layout bthd" "$TSC" import bthd.npz -o bad.h5
! grep -q "capture" err && ok || bad "the error shows an internal path: $(cat err)"
run0 "$TSC" import bthd.npz -o bthd.h5 --layout bthd
[ ! -e bad.h5 ] && ok || bad "a failed import left bad.h5"
expect 2 "where to?" "$TSC" import a.safetensors
expect 2 "bhtd or bthd" "$TSC" import a.safetensors -o x.h5 --layout tbhd
expect 2 "is not a dataset name" "$TSC" import a.safetensors -o x.h5 --map 'a.{layer}=qq'
expect 2 "has no {name}" "$TSC" import a.safetensors -o x.h5 --map 'a.{layer}'
finish
