"""Loading libtilescope through ctypes, its error messages, and the structures the package passes.

Where the library is looked for, first match wins:
  1. the environment variable TILESCOPE_LIB: the path of libtilescope.so, or the folder holding it;
  2. the paths recorded in _install_paths.py beside this file: by `cmake --install`, or by setup.py
     (`pip install`, whose package carries the library and the program in _bin/);
  3. the system's library search (ctypes.util.find_library("tilescope")).
The `tilescope` program (for the jobs run through the CLI): TILESCOPE_BIN, else the library's
folder (a build tree), else ../bin beside the library's folder (an install), else PATH.
"""
import collections.abc
import ctypes
import ctypes.util
import os
import shutil

import numpy as np

# tsc_format_t (kernels/tsc_formats.h)
class _FormatTable(collections.abc.Mapping):
    """A view of the library's format table (kernels/formats.c), read on first use: name -> value. FMT maps a
    format's name to its tsc_format_t; NP_STORAGE to the numpy type holding one stored element (the float type
    of its container: fp64, fp32 and the formats stored in an FP32 container such as tf32 and e8m*, fp16; bf16 and
    fp8 as their bits)."""

    def __init__(self, value):
        self._value, self._rows = value, None

    def _table(self):
        if self._rows is None:
            L, rows = lib(), {}
            for i in range(256):
                name = L.tsc_format_name(i).decode()
                if name == "?":
                    break
                rows[name] = self._value(L, i, name)
            self._rows = rows
        return self._rows

    def __getitem__(self, name):
        return self._table()[name]

    def __iter__(self):
        return iter(self._table())

    def __len__(self):
        return len(self._table())


def _storage(L, i, name):
    size, mant, exp = L.tsc_format_size(i), L.tsc_format_mant_bits(i), L.tsc_format_exp_bits(i)
    if size == 8:
        return np.float64
    if size == 4:
        return np.float32
    if size == 2 and (mant, exp) == (10, 5):
        return np.float16
    return np.uint16 if size == 2 else np.uint8


FMT = _FormatTable(lambda L, i, name: i)
NP_STORAGE = _FormatTable(_storage)


class TilescopeError(RuntimeError):
    """A libtilescope call failed; the message is the library's (it names the file and the problem)."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


class DumpMeta(ctypes.Structure):
    """tsc_dump_meta_t (capture/tsc_dump.h)."""
    _fields_ = [("format_version", ctypes.c_int), ("n_layer", ctypes.c_int), ("n_head", ctypes.c_int),
                ("n_kv_head", ctypes.c_int), ("head_dim", ctypes.c_int), ("d_model", ctypes.c_int),
                ("seq_len", ctypes.c_int), ("batch", ctypes.c_int), ("causal", ctypes.c_int),
                ("softmax_scale", ctypes.c_double), ("tile_q", ctypes.c_int), ("tile_k", ctypes.c_int),
                ("policy", ctypes.c_char * 128), ("rank", ctypes.c_int), ("world_size", ctypes.c_int),
                ("producer", ctypes.c_char * 128)]

    def as_dict(self):
        return {name: (getattr(self, name).decode() if isinstance(getattr(self, name), bytes)
                       else getattr(self, name)) for name, _ in self._fields_}


class CaptureOpts(ctypes.Structure):
    """tsc_capture_opts_t (capture/tsc_capture.h)."""
    _fields_ = [("select", ctypes.c_char_p), ("deflate", ctypes.c_int), ("store_fmt", ctypes.c_int),
                ("keep_session", ctypes.c_int)]


# tsc_select_t and tsc_policy_t are opaque here: allocated at the size the library reports
# (tsc_select_size, tsc_policy_size) and read through its accessors only.

_lib = None
_lib_path = None


def _installed_paths():
    try:
        from . import _install_paths  # written by cmake --install
    except ImportError:
        return None, None
    here = os.path.dirname(os.path.abspath(__file__))
    return (os.path.normpath(os.path.join(here, _install_paths.LIBDIR)),
            os.path.normpath(os.path.join(here, _install_paths.BINDIR)))


def library_path():
    """The path of the libtilescope.so the package loads (see the module's docstring)."""
    env = os.environ.get("TILESCOPE_LIB")
    if env:
        return os.path.join(env, "libtilescope.so") if os.path.isdir(env) else env
    libdir, _ = _installed_paths()
    if libdir and os.path.exists(os.path.join(libdir, "libtilescope.so")):
        return os.path.join(libdir, "libtilescope.so")
    found = ctypes.util.find_library("tilescope")
    if found:
        return found
    raise TilescopeError("libtilescope.so not found: set TILESCOPE_LIB to its path or folder "
                         "(a build tree holds it at BUILD/libtilescope.so), or install tilescope with cmake --install")


def _declare(lib):
    c_int, c_ll, c_vp, c_cp, c_u64p = ctypes.c_int, ctypes.c_longlong, ctypes.c_void_p, ctypes.c_char_p, \
        ctypes.POINTER(ctypes.c_uint64)
    sig = {
        "tsc_error_last": (c_cp, []), "tsc_version": (c_cp, []),
        "tsc_capture_open": (c_int, [ctypes.POINTER(c_vp), c_cp, ctypes.POINTER(DumpMeta), ctypes.POINTER(CaptureOpts)]),
        "tsc_capture_wants": (c_int, [c_vp, c_ll, c_int]),
        "tsc_capture_step_begin": (c_int, [c_vp, c_ll]),
        "tsc_capture_put": (c_int, [c_vp, c_int, c_cp, c_int, c_int, c_u64p, c_vp]),
        "tsc_capture_step_end": (c_int, [c_vp]), "tsc_capture_n_steps": (c_int, [c_vp]),
        "tsc_capture_put_tokens": (c_int, [c_vp, ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(c_cp)]),
        "tsc_capture_close": (c_int, [c_vp]),
        "tsc_capture_parallel": (c_int, [c_vp, c_int, c_int, c_int, c_int, c_int, c_int]),
        "tsc_manifest_write": (c_int, [c_cp, ctypes.POINTER(c_cp), c_int]),
        "tsc_manifest_write_dir": (c_int, [c_cp]), "tsc_capture_pack": (c_int, [c_cp, c_cp, c_int]),
        "tsc_dump_meta_init": (None, [ctypes.POINTER(DumpMeta)]),
        "tsc_dump_meta_check": (c_int, [ctypes.POINTER(DumpMeta)]),
        "tsc_dump_open": (c_int, [ctypes.POINTER(c_vp), c_cp]), "tsc_dump_close": (None, [c_vp]),
        "tsc_dump_meta": (ctypes.POINTER(DumpMeta), [c_vp]),
        "tsc_dump_read_raw": (c_int, [c_vp, c_ll, c_int, c_cp, c_int, c_int, c_vp]),
        "tsc_dump_read": (c_int, [c_vp, c_ll, c_int, c_cp, c_int, c_int, c_vp]),
        "tsc_info_read": (c_int, [c_cp, c_vp, c_int, ctypes.POINTER(c_vp)]),
        "tsc_info_json": (None, [c_vp, c_vp]), "tsc_info_free": (None, [c_vp]),
        "tsc_json_new": (c_vp, []), "tsc_json_delete": (None, [c_vp]), "tsc_json_text": (c_cp, [c_vp, c_vp]),
        "tsc_select_init": (None, [c_vp]), "tsc_select_parse": (c_int, [c_vp, c_cp]),
        "tsc_select_has": (c_int, [c_vp, c_ll, c_ll, c_ll]), "tsc_select_has_step": (c_int, [c_vp, c_ll]),
        "tsc_select_size": (ctypes.c_size_t, []), "tsc_policy_size": (ctypes.c_size_t, []),
        "tsc_policy_tiles": (None, [c_vp, ctypes.POINTER(c_int), ctypes.POINTER(c_int)]),
        "tsc_policy_parse": (c_int, [c_cp, c_vp]),
        "tsc_policy_format": (c_int, [c_vp, c_cp, ctypes.c_size_t]),
        "tsc_attn_run": (c_int, [c_vp, c_vp, c_vp, c_vp, c_int]),
        "tsc_format_name": (c_cp, [c_int]), "tsc_format_size": (ctypes.c_size_t, [c_int]),
        "tsc_format_mant_bits": (c_int, [c_int]), "tsc_format_exp_bits": (c_int, [c_int]),
    }
    for name, (res, args) in sig.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args


def lib():
    """The loaded library (loaded once, on first use)."""
    global _lib, _lib_path
    if _lib is None:
        path = library_path()
        try:
            handle = ctypes.CDLL(path)
        except OSError as e:
            raise TilescopeError("cannot load %s: %s" % (path, e)) from None
        _declare(handle)
        _lib, _lib_path = handle, path
    return _lib


def check(status, what=None):
    """Raises TilescopeError with the library's message when status is not TSC_OK (0)."""
    if status != 0:
        msg = (lib().tsc_error_last() or b"").decode(errors="replace")
        raise TilescopeError("%s: %s" % (what, msg) if what and what not in msg else msg, status)


def program():
    """The path of the tilescope program the jobs run (see the module's docstring)."""
    env = os.environ.get("TILESCOPE_BIN")
    if env:
        return env
    lib()
    cands = []
    if os.path.sep in _lib_path:
        d = os.path.dirname(os.path.abspath(_lib_path))
        cands += [os.path.join(d, "tilescope"), os.path.join(d, "..", "bin", "tilescope")]
    _, bindir = _installed_paths()
    if bindir:
        cands.append(os.path.join(bindir, "tilescope"))
    for c in cands:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return os.path.normpath(c)
    found = shutil.which("tilescope")
    if found:
        return found
    raise TilescopeError("the tilescope program was not found: set TILESCOPE_BIN, or put it on PATH")


def version():
    return lib().tsc_version().decode()


def parse_policy(policy):
    """A tsc_policy_t buffer for a policy string (TilescopeError with the parser's message)."""
    buf = ctypes.create_string_buffer(lib().tsc_policy_size())
    check(lib().tsc_policy_parse(policy.encode(), buf), "policy %r" % policy)
    return buf


def canonical_policy(policy):
    """The canonical string of a policy string (e.g. "bf16-torch+stable:beta=2,eps=0.001")."""
    buf = ctypes.create_string_buffer(1024)
    lib().tsc_policy_format(parse_policy(policy), buf, ctypes.c_size_t(len(buf)))
    return buf.value.decode()


def policy_tiles(policy):
    """(block_q, block_k): the tile sizes a policy computes with (tsc_policy_tiles)."""
    q, k = ctypes.c_int(0), ctypes.c_int(0)
    lib().tsc_policy_tiles(parse_policy(policy), ctypes.byref(q), ctypes.byref(k))
    return q.value, k.value


class Selection:
    """A sampling spec (capture/tsc_select.h grammar: "steps=0:1000:10,layers=1,heads=0:4")."""

    def __init__(self, spec=None):
        self.spec = spec
        self._buf = ctypes.create_string_buffer(lib().tsc_select_size())
        lib().tsc_select_init(self._buf)
        if spec:
            check(lib().tsc_select_parse(self._buf, spec.encode()), "selection %r" % spec)

    def has(self, step, layer=None, head=-1):
        """True when step (and layer unless None, head unless < 0) is selected."""
        if layer is None:
            return bool(lib().tsc_select_has_step(self._buf, step))
        return bool(lib().tsc_select_has(self._buf, step, layer, head))


def json_of(fill, *args):
    """Runs fill(*args, json_writer) and returns the parsed JSON text it wrote."""
    import json
    L = lib()
    j = L.tsc_json_new()
    if not j:
        raise TilescopeError("out of memory")
    try:
        fill(*args, j)
        return json.loads(L.tsc_json_text(j, None).decode())
    finally:
        L.tsc_json_delete(j)
