"""Reading a dump (a file or a capture-session folder) into numpy arrays or torch tensors.

    with tilescope.Dump("run.h5") as d:
        d.meta["n_head"], d.steps, d.layers(100)
        q = d.read(100, 1, "q")              # numpy [B, H, T, D] in the stored format (bf16 as bits)
        q = d.read_torch(100, 1, "q")        # torch tensor, torch.bfloat16 for bf16, bit for bit
"""
import ctypes

import numpy as np

from . import _lib


def info(path, deep=False):
    """The description `tilescope info --json PATH` prints (docs/FORMAT.md), as a dict: meta,
    steps, incomplete_step, layers with their datasets (name, shape, dtype, heads_stored)."""
    L = _lib.lib()
    handle = ctypes.c_void_p()
    _lib.check(L.tsc_info_read(str(path).encode(), None, 1 if deep else 0, ctypes.byref(handle)), str(path))
    try:
        return _lib.json_of(L.tsc_info_json, handle)
    finally:
        L.tsc_info_free(handle)


class Dump:
    """An open dump. Arrays come back whole ([B, H, T, D] for q/k/v/o/do, [B, H, T] for lse,
    [B, T, C] for x, [out, in] for the weights) in the stored format: numpy float32/float16/
    float64, bf16 and fp8 as their bits (uint16/uint8; read_torch gives torch.bfloat16)."""

    def __init__(self, path):
        self.path = str(path)
        self._info = info(self.path)
        self._h = ctypes.c_void_p()
        L = _lib.lib()
        _lib.check(L.tsc_dump_open(ctypes.byref(self._h), self.path.encode()), self.path)
        self.meta = L.tsc_dump_meta(self._h).contents.as_dict()
        self.steps = list(self._info["steps"])
        self.incomplete_step = self._info.get("incomplete_step")
        self._datasets = {}
        for lay in self._info.get("layers", []):
            self._datasets[(lay["step"], lay["layer"])] = {ds["name"]: ds for ds in lay["datasets"]}

    def close(self):
        if self._h:
            _lib.lib().tsc_dump_close(self._h)
            self._h = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def layers(self, step):
        return sorted(layer for (s, layer) in self._datasets if s == step)

    def names(self, step, layer):
        return sorted(self._datasets.get((step, layer), {}))

    def dataset(self, step, layer, name):
        """The dataset's description (shape, dtype, heads_stored, ...); KeyError when absent."""
        try:
            return self._datasets[(step, layer)][name]
        except KeyError:
            raise KeyError("%s: no dataset %s in step %s layer %s" % (self.path, name, step, layer)) from None

    def _read(self, step, layer, name, dtype, fn):
        ds = self.dataset(step, layer, name)
        shape = tuple(ds["shape"])
        out = np.empty(shape, dtype=dtype if dtype else _lib.NP_STORAGE[ds["dtype"]])
        if name == "x":
            slices = [(b, 0, out[b]) for b in range(shape[0])]
        elif name.startswith("w_"):
            slices = [(0, 0, out)]
        else:
            slices = [(b, h, out[b, h]) for b in range(shape[0]) for h in range(shape[1])]
        for b, h, dst in slices:  # straight into the array: one slice (a head) per call
            _lib.check(fn(self._h, step, layer, name.encode(), b, h, dst.ctypes.data_as(ctypes.c_void_p)),
                       self.path)
        return out

    def read(self, step, layer, name):
        """The whole dataset as a numpy array of its stored bits' type (see the class)."""
        return self._read(step, layer, name, None, _lib.lib().tsc_dump_read_raw)

    def read_float(self, step, layer, name):
        """The whole dataset as float32 values (exact for bf16, fp16 and fp8; fp64 rounded)."""
        return self._read(step, layer, name, np.float32, _lib.lib().tsc_dump_read)

    def read_torch(self, step, layer, name):
        """As read, as a torch tensor (torch.bfloat16 for bf16 datasets, the same bits; fp8 as uint8 bits)."""
        import torch
        a = self.read(step, layer, name)
        if self.dataset(step, layer, name)["dtype"] == "bf16":
            return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(a)
