"""Import of tensors people already saved (.safetensors, .npy, .npz, torch .pt) into a dump.

    tilescope.import_tensors("attn.safetensors", "dump.h5", maps=["model.layers.{layer}.attn.{name}"])
    python3 -m tilescope import attn.pt -o dump.h5 --map 'blocks.{layer}.{name}' --map 'grad_o.{layer}=do'

Every format is read by libtilescope's own readers (capture/tsc_import.h), the ones `tilescope
import` uses: a torch .pt's pickle is interpreted there, never run (torch is not imported and no
callable named in the file is called), and the maps, their defaults and the geometry rules are the
library's (tsc_import_run). A map is PATTERN or PATTERN=NAME: PATTERN is matched against the whole
tensor name, with {step} and {layer} matching integers, {name} one of the dump's dataset names (q k
v o do lse x w_q w_k w_v w_o) and * anything; =NAME gives the dataset when the pattern has no
{name}. The first matching map wins; tensors no map matches are listed as skipped.
"""
import ctypes
import os

import numpy as np

from . import _lib

class _ImportOpts(ctypes.Structure):
    """tsc_import_opts_t (capture/tsc_import.h)."""
    _fields_ = [("maps", ctypes.POINTER(ctypes.c_char_p)), ("n_maps", ctypes.c_int), ("step", ctypes.c_longlong),
                ("causal", ctypes.c_int), ("scale", ctypes.c_double), ("policy", ctypes.c_char_p),
                ("layout_bthd", ctypes.c_int), ("producer", ctypes.c_char_p)]


def _reader():
    """libtilescope with the tensor-file reader's and the import's functions declared."""
    L = _lib.lib()
    if not getattr(L, "_tsc_reader_declared", False):
        vp = ctypes.c_void_p
        for name, res, args in (("tsc_tensor_file_open", ctypes.c_int, [ctypes.POINTER(vp), ctypes.c_char_p]),
                                ("tsc_tensor_file_json", None, [vp, vp]),
                                ("tsc_tensor_file_read", ctypes.c_int, [vp, ctypes.c_int, vp]),
                                ("tsc_tensor_file_close", None, [vp]),
                                ("tsc_import_opts_init", None, [ctypes.POINTER(_ImportOpts)]),
                                ("tsc_import_map_check", ctypes.c_int, [ctypes.c_char_p]),
                                ("tsc_import_run", ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p,
                                                                  ctypes.POINTER(_ImportOpts), ctypes.POINTER(vp)]),
                                ("tsc_import_result_json", None, [vp, ctypes.c_char_p, vp]),
                                ("tsc_import_result_free", None, [vp]),
                                ("tsc_import_default_maps", ctypes.POINTER(ctypes.c_char_p),
                                 [ctypes.POINTER(ctypes.c_int)]),
                                ("tsc_import_opts_size", ctypes.c_size_t, [])):
            getattr(L, name).restype, getattr(L, name).argtypes = res, args
        if L.tsc_import_opts_size() != ctypes.sizeof(_ImportOpts):
            raise RuntimeError("libtilescope's tsc_import_opts_t is %d bytes, this package's mirror %d: a package and "
                               "a library of different versions" % (L.tsc_import_opts_size(), ctypes.sizeof(_ImportOpts)))
        L._tsc_reader_declared = True
    return L


def default_maps():
    """The library's default maps (capture/import.c), used when no map is given."""
    n = ctypes.c_int(0)
    p = _reader().tsc_import_default_maps(ctypes.byref(n))
    return tuple(p[i].decode() for i in range(n.value))


def read_tensor_file(path):
    """{name: (format, numpy array of the stored bits)} of a .safetensors, .npy, .npz or torch .pt
    file, read by libtilescope's reader: the whole header is checked first; BF16 comes as uint16
    bits. Tensors of types tilescope does not store (int64 buffers) are left out. Every
    inconsistency is a TilescopeError naming the file and the tensor."""
    L, h = _reader(), ctypes.c_void_p()
    _lib.check(L.tsc_tensor_file_open(ctypes.byref(h), os.fsencode(path)), str(path))
    try:
        out = {}
        for i, t in enumerate(_lib.json_of(L.tsc_tensor_file_json, h)["tensors"]):
            a = np.empty(t["shape"], dtype=_lib.NP_STORAGE[t["format"]])
            _lib.check(L.tsc_tensor_file_read(h, i, a.ctypes.data_as(ctypes.c_void_p)), str(path))
            out[t["name"]] = (t["format"], a)
        return out
    finally:
        L.tsc_tensor_file_close(h)


read_safetensors = load_tensors = read_tensor_file


def import_tensors(src, out, maps=None, step=0, causal=True, scale=None, policy="", layout="bhtd",
                   producer=None):
    """Writes the tensors of src that the maps select into the dump out (tsc_import_run). Returns
    {"path", "steps", "layers", "datasets", "skipped"}. TilescopeError naming the file and tensor for
    any tensor whose shape or dtype does not fit; ValueError for a bad map or layout."""
    L = _reader()
    if layout not in ("bhtd", "bthd"):
        raise ValueError("layout %r: bhtd or bthd" % layout)
    maps = list(maps or ())
    for m in maps:
        if L.tsc_import_map_check(m.encode()) != 0:
            raise ValueError(L.tsc_error_last().decode(errors="replace"))
    o = _ImportOpts()
    L.tsc_import_opts_init(ctypes.byref(o))
    arr = (ctypes.c_char_p * (len(maps) + 1))(*[m.encode() for m in maps])
    o.maps, o.n_maps = (arr, len(maps)) if maps else (None, 0)
    o.step, o.causal, o.scale = int(step), 1 if causal else 0, float(scale) if scale else 0.0
    o.policy, o.layout_bthd = (policy or "").encode(), 1 if layout == "bthd" else 0
    o.producer = producer.encode() if producer else None
    r = ctypes.c_void_p()
    _lib.check(L.tsc_import_run(os.fsencode(src), os.fsencode(out), ctypes.byref(o), ctypes.byref(r)), str(src))
    try:
        return _lib.json_of(L.tsc_import_result_json, r, os.fsencode(out))
    finally:
        L.tsc_import_result_free(r)
