"""h5py side of bench_dump_io: writes and reads the same BF16 arrays as tilescope, laid out the
same way (custom BF16 HDF5 type, one chunk per head, uncompressed), and prints one JSON line:
{"write_s": best, "read_raw_s": best, "read_f32_s": best, "bytes": n}.

usage: h5py_io.py ARRAYS.bin OUT_DIR B H T D REPS
ARRAYS.bin holds q, k, v, o, do as little-endian uint16 BF16 bits, [B, H, T, D] each, in that order.
"""
import json
import os
import sys
import time

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from write_dump import bf16_type  # noqa: E402  the documented writer's BF16 file type

src, out_dir = sys.argv[1], sys.argv[2]
B, H, T, D, reps = (int(x) for x in sys.argv[3:8])
shape = (B, H, T, D)
n = B * H * T * D
raw = np.fromfile(src, dtype="<u2")
names = ["q", "k", "v", "o", "do"]
arrays = {nm: raw[i * n:(i + 1) * n].reshape(shape) for i, nm in enumerate(names)}

bf16 = bf16_type()

path = os.path.join(out_dir, "h5py_layer.h5")
best = {"write_s": 1e30, "read_raw_s": 1e30, "read_f32_s": 1e30}
for rep in range(reps):
    t0 = time.perf_counter()
    with h5py.File(path, "w") as f:
        g = f.create_group("step_00000000/layer_001")
        for nm in names:
            sid = h5py.h5s.create_simple(shape)
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            dcpl.set_chunk((1, 1, T, D))
            ds = h5py.h5d.create(g.id, nm.encode(), bf16, sid, dcpl=dcpl)
            ds.write(h5py.h5s.ALL, h5py.h5s.ALL, arrays[nm], mtype=bf16)
    best["write_s"] = min(best["write_s"], time.perf_counter() - t0)

    # raw: the stored bits, no conversion (what a careful h5py user does for BF16)
    t0 = time.perf_counter()
    with h5py.File(path, "r") as f:
        g = f["step_00000000/layer_001"]
        for nm in names:
            buf = np.empty(shape, np.uint16)
            g[nm].id.read(h5py.h5s.ALL, h5py.h5s.ALL, buf, mtype=g[nm].id.get_type())
    best["read_raw_s"] = min(best["read_raw_s"], time.perf_counter() - t0)

    # to float32 through HDF5's conversion (the documented ds.astype('float32')[()])
    t0 = time.perf_counter()
    with h5py.File(path, "r") as f:
        g = f["step_00000000/layer_001"]
        for nm in names:
            x = g[nm].astype("float32")[()]
    best["read_f32_s"] = min(best["read_f32_s"], time.perf_counter() - t0)
    if rep == 0:
        ok = np.array_equal(x.view(np.uint32) >> 16, arrays["do"].astype(np.uint32))
        if not ok:
            print("h5py_io: values read back differ", file=sys.stderr)
            sys.exit(1)
os.remove(path)
best["bytes"] = 5 * n * 2
print(json.dumps(best))
