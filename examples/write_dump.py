"""write_dump.py: a complete writer of tilescope dumps (format v1, docs/FORMAT.md §1) with h5py.

For programs that are not tilescope (a PyTorch training loop, a JAX run, a notebook): capture
q, k, v, o and dO of the attention layers you care about as numpy arrays, then

    from write_dump import write_dump
    write_dump("run.h5", {0: {3: {"q": q, "k": k, "v": v, "o": o, "do": do}}},   # step 0, layer 3
               n_layer=12, causal=True, dtype="bf16", policy="bf16-torch", producer="my_train.py")

and `tilescope info run.h5`, `tilescope replay run.h5 --policy fp32 --policy bf16-fa2 -o r.h5`,
`tilescope analyze run.h5 -o DIR` read it. tests/capture/test_thirdparty.py writes its dumps with
this file and checks that tilescope accepts them: the test that writes it is the documentation.

Shapes (numpy arrays, any float dtype; they are rounded to `dtype` here):
    q, o, do: [B, H, T, D]     k, v: [B, Hkv, T, D] (Hkv divides H: grouped-query attention)
    lse (optional): [B, H, T]  natural log of each row's sum of exp(softmax_scale * q.k), fp32
    x (optional): [B, T, C]    w_q: [H*D, C], w_k / w_v: [Hkv*D, C], w_o: [C, H*D] (optional)

BF16 is rounded here, to nearest even, and the bits are written with the BF16 file type as the
memory type, so HDF5 converts nothing: HDF5's own float32 -> BF16 conversion rounds exact
half-way cases away from zero (1.00390625 becomes 0x3F81 = 1.0078125 instead of 0x3F80 = 1.0),
which is not what a BF16 kernel does (docs/FORMAT.md §1.4).
"""
import h5py
import numpy as np

FORMAT_NAME = "tilescope-dump"
FORMAT_VERSION = 1
PER_HEAD = {"q": "batch,head,token,feature", "o": "batch,head,token,feature",
            "do": "batch,head,token,feature", "k": "batch,kv_head,token,feature",
            "v": "batch,kv_head,token,feature", "lse": "batch,head,token",
            "dq": "batch,head,token,feature", "dk": "batch,kv_head,token,feature",
            "dv": "batch,kv_head,token,feature"}
OTHER = {"x": "batch,token,channel", "w_q": "out_feature,in_channel", "w_k": "out_feature,in_channel",
         "w_v": "out_feature,in_channel", "w_o": "out_channel,in_feature"}
UNITS = {"lse": "nats", "do": "dloss/do", "dq": "gradient", "dk": "gradient", "dv": "gradient"}


def bf16_type():
    """The HDF5 file type of BF16 (1 sign, 8 exponent, 7 mantissa bits, bias 127), §1.4."""
    t = h5py.h5t.IEEE_F32LE.copy()
    t.set_fields(15, 7, 8, 0, 7)
    t.set_offset(0)
    t.set_precision(16)
    t.set_size(2)
    t.set_ebias(127)
    return t


def bf16_bits(a):
    """BF16 bits (uint16) of a, rounded to nearest, ties to even; NaN stays a quiet NaN."""
    b = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(a), ((b >> 16) | 0x0040).astype(np.uint16), r)


def bf16_round(a):
    """a rounded to BF16 (nearest even), as float32: the values write_dump stores."""
    return (bf16_bits(a).astype(np.uint32) << 16).view(np.float32)


def _put(group, name, data, dtype, labels):
    units = UNITS.get(name, "weight" if name.startswith("w_") else "activation")
    per_head = name in PER_HEAD
    chunks = (1, 1) + data.shape[2:] if per_head else ((1,) + data.shape[1:] if name == "x" else None)
    if name == "lse":
        dtype = "fp32"                          # format v1 stores lse in fp32
    if dtype == "bf16":
        ftype = bf16_type()
        space = h5py.h5s.create_simple(data.shape)
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        if chunks:
            dcpl.set_chunk(chunks)
        ds = h5py.h5d.create(group.id, name.encode(), ftype, space, dcpl=dcpl)
        ds.write(h5py.h5s.ALL, h5py.h5s.ALL, bf16_bits(data), mtype=ftype)   # the bits, unconverted
    elif dtype in ("fp32", "fp16"):
        group.create_dataset(name, data=np.asarray(data, np.float32 if dtype == "fp32" else np.float16),
                             chunks=chunks)     # numpy rounds float32 -> float16 to nearest even
    else:
        raise ValueError(f"dtype {dtype!r}: this writer stores bf16, fp16 or fp32")
    attrs = group[name].attrs
    attrs["dtype"] = dtype
    attrs["dims"] = labels
    attrs["units"] = units


def write_dump(path, steps, *, n_layer=None, causal=True, softmax_scale=None, d_model=None, dtype="bf16",
               policy=None, producer=None, tile_q=None, tile_k=None, rank=0, world_size=1):
    """Writes a format-v1 dump at path.

    steps: {step number: {layer number: {dataset name: numpy array}}}; every layer needs q, k, v
    (o and do for replay's comparison with the run and for analysis; lse optional).
    n_layer: layers of the model (default: the largest layer written + 1).
    softmax_scale: alpha (default 1/sqrt(D)).  d_model: C (default: from x or w_q, else H*D).
    dtype: "bf16" (rounded to nearest even here), "fp16" or "fp32": how q, k, v, o, do, x and the
    weights are stored.  policy / producer / tile_q / tile_k: optional root attributes, left out
    when None (tilescope then assumes no recorded policy, producer "unknown", one tile of T).
    """
    first = next(iter(next(iter(steps.values())).values()))
    B, H, T, D = first["q"].shape
    Hkv = first["k"].shape[1]
    if d_model is None:
        d_model = first["x"].shape[2] if "x" in first else first["w_q"].shape[1] if "w_q" in first else H * D
    if n_layer is None:
        n_layer = 1 + max(layer for layers in steps.values() for layer in layers)
    with h5py.File(path, "w") as f:
        a = f.attrs
        a["format"] = FORMAT_NAME                    # str: variable-length UTF-8
        a["format_version"] = np.int64(FORMAT_VERSION)
        for k, v in dict(n_layer=n_layer, n_head=H, n_kv_head=Hkv, head_dim=D, d_model=d_model, seq_len=T,
                         batch=B, causal=int(causal), rank=rank, world_size=world_size).items():
            a[k] = np.int64(v)
        a["softmax_scale"] = np.float64(1.0 / np.sqrt(D) if softmax_scale is None else softmax_scale)
        for k, v in dict(tile_q=tile_q, tile_k=tile_k).items():
            if v is not None:
                a[k] = np.int64(v)
        for k, v in dict(policy=policy, producer=producer).items():
            if v is not None:
                a[k] = v
        for step, layers in steps.items():
            g = f.create_group(f"step_{step:08d}")
            g.attrs["step"] = np.int64(step)
            for layer, tensors in layers.items():
                lg = g.create_group(f"layer_{layer:03d}")
                lg.attrs["layer"] = np.int64(layer)
                for name, data in tensors.items():
                    if name not in PER_HEAD and name not in OTHER:
                        raise ValueError(f"{name!r} is not a dataset of format v1 (q, k, v, o, do, lse, dq, dk, "
                                         f"dv, x, w_q, w_k, w_v, w_o)")
                    _put(lg, name, np.asarray(data), dtype, PER_HEAD.get(name) or OTHER[name])
            g.attrs["complete"] = np.int64(1)        # last: the step is whole
