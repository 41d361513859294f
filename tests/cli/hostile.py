"""hostile.py: builds the hostile dumps of test_untrusted.sh (not a test itself).

usage: hostile.py KIND OUT [GOOD_DUMP] [EXTRA]
  ext_storage OUT GOOD SECRET  v of step 0 / layer 0 stored in the external file SECRET
  elink OUT GOOD OTHER          q of step 0 / layer 0 an external link to OTHER's q
  vds OUT GOOD OTHER            v a virtual dataset mapped onto OTHER's v
  vds_self OUT GOOD             v a virtual dataset mapped onto itself
  dangling OUT GOOD             q a soft link to /nowhere
  cycle OUT GOOD                q a soft link to q2, q2 a soft link to q
  huge_t OUT                    a dump declaring T = 16384 whose chunked datasets were never written
  causal_half OUT GOOD          root attribute causal = 0.5 (a float where an integer belongs)
  escapes OUT GOOD              producer and synth_shape hold ESC sequences and invalid UTF-8
"""
import shutil
import sys

import h5py
import numpy as np

ROOT_INTS = ["n_layer", "n_head", "n_kv_head", "head_dim", "d_model", "seq_len", "batch", "causal", "tile_q",
             "tile_k", "rank", "world_size"]


def huge_t(out):
    T, D = 16384, 64
    with h5py.File(out, "w") as f:
        f.attrs["format"] = "tilescope-dump"
        f.attrs["format_version"] = np.int64(1)
        vals = dict(n_layer=1, n_head=1, n_kv_head=1, head_dim=D, d_model=D, seq_len=T, batch=1, causal=1,
                    tile_q=64, tile_k=64, rank=0, world_size=1)
        for k in ROOT_INTS:
            f.attrs[k] = np.int64(vals[k])
        f.attrs["softmax_scale"] = 0.125
        f.attrs["policy"] = "fp32"
        f.attrs["producer"] = "hostile"
        g = f.create_group("step_00000000")
        g.attrs["complete"] = np.int64(1)
        lg = g.create_group("layer_000")
        for name in ["q", "k", "v", "o", "do"]:
            lg.create_dataset(name, shape=(1, 1, T, D), dtype="<f4", chunks=(1, 1, T, D))
        lg.create_dataset("lse", shape=(1, 1, T), dtype="<f4", chunks=(1, 1, T))


def main():
    kind, out = sys.argv[1], sys.argv[2]
    if kind == "huge_t":
        return huge_t(out)
    shutil.copy(sys.argv[3], out)
    extra = sys.argv[4] if len(sys.argv) > 4 else None
    with h5py.File(out, "r+") as f:
        lp = "step_00000000/layer_000"
        g = f[lp]
        shape, dtype = g["v"].shape, g["v"].dtype
        if kind == "ext_storage":
            del g["v"]
            n = int(np.prod(shape)) * 4
            g.create_dataset("v", shape=shape, dtype="<f4", external=[(extra, 0, n)])
        elif kind == "elink":
            del g["q"]
            g["q"] = h5py.ExternalLink(extra, "/" + lp + "/q")
        elif kind in ("vds", "vds_self"):
            src = out if kind == "vds_self" else extra
            del g["v"]
            lay = h5py.VirtualLayout(shape=shape, dtype="<f4")
            lay[...] = h5py.VirtualSource(src, "/" + lp + "/v", shape=shape, dtype="<f4")
            g.create_virtual_dataset("v", lay)
        elif kind == "dangling":
            del g["q"]
            g["q"] = h5py.SoftLink("/nowhere")
        elif kind == "cycle":
            del g["q"]
            g["q"] = h5py.SoftLink("/" + lp + "/q2")
            g["q2"] = h5py.SoftLink("/" + lp + "/q")
        elif kind == "causal_half":
            f.attrs["causal"] = np.float64(0.5)
        elif kind == "escapes":
            f.attrs["producer"] = np.bytes_(b"evil\x1b[31mRED\x1b]0;title\x07\xff\xfe")
            f.attrs["synth_shape"] = np.bytes_(b"tiny\x1b[2J\xc3")
        else:
            raise SystemExit("unknown kind " + kind)


if __name__ == "__main__":
    main()
