"""The capture API (capture/tsc_capture.h) from Python: a session that keeps the sampled
steps/layers/heads of a run in a dump, crash-safe (one file per completed step in the session
folder "<path>.capture" until close packs it into path).

    meta = dict(n_layer=4, n_head=8, n_kv_head=2, head_dim=64, d_model=512, seq_len=256, batch=8,
                softmax_scale=0.125, policy="bf16-fa2", producer="my_train.py")
    with tilescope.Capture("run.h5", meta, select="steps=0:1000:10,layers=1") as cap:
        for step in range(1000):
            if cap.wants(step):                  # skip the host copies of dropped steps
                with cap.step(step):
                    cap.put(1, "q", q)           # numpy array or torch tensor, [B, H, T, D]
Tensors are handed over without a copy when they are host memory and C-contiguous (numpy
arrays, CPU torch tensors); torch.bfloat16 tensors and bf16 bits (numpy uint16 with fmt="bf16")
are stored bit for bit.
"""
import contextlib
import ctypes
import os

import numpy as np

from . import _lib

_NP_FMT = {np.dtype(np.float32): "fp32", np.dtype(np.float64): "fp64", np.dtype(np.float16): "fp16"}


def meta_struct(meta):
    """A tsc_dump_meta_t from a dict (unknown keys are an error; absent ones keep the library's
    defaults, policy "" = none recorded)."""
    m = _lib.DumpMeta()
    _lib.lib().tsc_dump_meta_init(ctypes.byref(m))
    m.policy = b""
    names = {n for n, _ in _lib.DumpMeta._fields_}
    for key, value in meta.items():
        if key not in names:
            raise ValueError("unknown metadata field %r (known: %s)" % (key, ", ".join(sorted(names))))
        if key in ("policy", "producer"):
            value = str(value).encode()
            if len(value) >= 128:
                raise ValueError("metadata %s is longer than 127 bytes" % key)
        elif key == "softmax_scale":
            value = float(value)
        else:
            value = int(value)
        setattr(m, key, value)
    _lib.check(_lib.lib().tsc_dump_meta_check(ctypes.byref(m)), "metadata")
    return m


def host_view(t, fmt=None):
    """(format name, C-contiguous host array or tensor that owns the memory, pointer, shape) for a numpy
    array or torch tensor. No copy when it already is host memory, contiguous and of a stored type."""
    mod = type(t).__module__
    if mod.startswith("torch"):
        import torch
        if t.device.type != "cpu":
            t = t.detach().to("cpu")
        t = t.detach()
        if not t.is_contiguous():
            t = t.contiguous()
        tf = {torch.float32: "fp32", torch.float64: "fp64", torch.float16: "fp16", torch.bfloat16: "bf16"}.get(t.dtype)
        if tf is None:
            raise TypeError("tensor of dtype %s: tilescope stores float32, float64, float16 and bfloat16" % t.dtype)
        if fmt and fmt != tf:
            raise TypeError("tensor of dtype %s handed over as %s" % (t.dtype, fmt))
        return tf, t, t.data_ptr(), tuple(t.shape)
    a = np.asarray(t)
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    af = _NP_FMT.get(a.dtype)
    if fmt is not None and fmt != af:
        if np.dtype(_lib.NP_STORAGE.get(fmt, np.void)) != a.dtype:
            raise TypeError("array of dtype %s cannot hold %s bits" % (a.dtype, fmt))
        af = fmt
    if af is None:
        raise TypeError("array of dtype %s: pass fmt= for bits (bf16 as uint16) or use float32/float16/float64" % a.dtype)
    return af, a, a.ctypes.data, a.shape


class Capture:
    """A capture session (see the module's docstring). meta: a dict of tsc_dump_meta_t fields
    (n_layer, n_head, n_kv_head, head_dim, d_model, seq_len, batch, causal, softmax_scale, tile_q,
    tile_k, policy, rank, world_size, producer). select: the sampling spec; deflate 0..9;
    store: a format name to convert every tensor to (default: as handed over); keep_session:
    close leaves the session folder instead of packing it."""

    def __init__(self, path, meta, select=None, deflate=0, store=None, keep_session=False):
        self.path = str(path)
        self._meta = meta_struct(meta)
        opts = _lib.CaptureOpts(select.encode() if select else None, int(deflate),
                                _lib.FMT[store] + 1 if store else 0, 1 if keep_session else 0)
        self._h = ctypes.c_void_p()
        _lib.check(_lib.lib().tsc_capture_open(ctypes.byref(self._h), self.path.encode(),
                                               ctypes.byref(self._meta), ctypes.byref(opts)), self.path)
        self._in_step = False

    @property
    def meta(self):
        return self._meta.as_dict()

    def wants(self, step, layer=-1):
        """True when the sampling spec keeps step (and layer, unless layer < 0)."""
        self._live()
        return bool(_lib.lib().tsc_capture_wants(self._h, step, layer))

    def step_begin(self, step):
        self._live()
        _lib.check(_lib.lib().tsc_capture_step_begin(self._h, step), "%s: step %d" % (self.path, step))
        self._in_step = True

    def step_end(self):
        self._live()
        self._in_step = False
        _lib.check(_lib.lib().tsc_capture_step_end(self._h), self.path)

    @contextlib.contextmanager
    def step(self, step):
        """begin; the body's puts; end (when the body raises, the step is dropped at the next begin)."""
        self.step_begin(step)
        yield self
        self.step_end()

    def put(self, layer, name, tensor, fmt=None):
        """Hands over one tensor of the open step (shapes as in capture/tsc_capture.h: q/o/do
        [B, H, T, D], k/v [B, Hkv, T, D], lse [B, H, T], x [B, T, C], w_q [H*D, C], ...). The library
        copies it before returning."""
        self._live()
        f, owner, ptr, shape = host_view(tensor, fmt)
        dims = (ctypes.c_uint64 * max(1, len(shape)))(*shape)
        st = _lib.lib().tsc_capture_put(self._h, int(layer), name.encode(), _lib.FMT[f], len(shape), dims,
                                        ctypes.c_void_p(ptr))
        del owner  # kept alive until the library has copied it
        _lib.check(st, "%s: layer %d %s" % (self.path, layer, name))

    def put_tokens(self, ids, text=None):
        """Hands over the open step's input tokens: ids, B x T integers (a nested list, numpy array or
        torch tensor), and optionally their text, B x T strings (or bytes; None: no text). Each text
        keeps at most 32 bytes of UTF-8 (docs/FORMAT.md §1.3)."""
        self._live()
        m = self._meta
        flat = [int(i) for row in (ids.tolist() if hasattr(ids, "tolist") else ids) for i in row]
        if len(flat) != m.batch * m.seq_len:
            raise _lib.TilescopeError("%s: tokens: %d ids, the metadata implies batch %d x seq_len %d"
                                      % (self.path, len(flat), m.batch, m.seq_len))
        c_ids = (ctypes.c_int64 * len(flat))(*flat)
        c_text = None
        if text is not None:
            words = [w if isinstance(w, bytes) else str(w).encode("utf-8", "replace") for row in text for w in row]
            if len(words) != len(flat):
                raise _lib.TilescopeError("%s: tokens: %d texts for %d ids" % (self.path, len(words), len(flat)))
            c_text = (ctypes.c_char_p * len(words))(*words)
        _lib.check(_lib.lib().tsc_capture_put_tokens(self._h, c_ids, c_text), "%s: tokens" % self.path)

    def parallel(self, dp=None, tp=(0, 1), pp=(0, 1)):
        """Records this rank's parallel coordinates, each a (rank, size) pair: data-, tensor- and
        pipeline-parallel (dp default: (rank, world_size / (tp size x pp size))). Before the first
        step; the sizes' product must be the metadata's world_size."""
        self._live()
        m = self._meta
        if dp is None:
            per = tp[1] * pp[1]
            if per < 1 or m.world_size % per:
                raise _lib.TilescopeError("%s: tp x pp sizes %d x %d do not divide the world size %d"
                                          % (self.path, tp[1], pp[1], m.world_size))
            dp = (m.rank // per, m.world_size // per)
        (dr, ds), (tr, ts), (pr, ps) = dp, tp, pp
        _lib.check(_lib.lib().tsc_capture_parallel(self._h, int(dr), int(ds), int(tr), int(ts), int(pr), int(ps)),
                   self.path)

    @property
    def n_steps(self):
        self._live()
        return _lib.lib().tsc_capture_n_steps(self._h)

    def close(self):
        """Ends the session: packs the folder into path (unless keep_session)."""
        if self._h:
            h, self._h = self._h, ctypes.c_void_p()
            _lib.check(_lib.lib().tsc_capture_close(h), self.path)

    def _live(self):
        if not self._h:
            raise _lib.TilescopeError("%s: the capture is closed" % self.path)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def merge(manifest, rank_dumps=None):
    """Writes the manifest of a run of many ranks (docs/DISTRIBUTED.md): manifest over the rank
    dumps (paths in manifest's folder), or with rank_dumps None, manifest is a folder and every
    rank dump in it goes into FOLDER/manifest.h5. Each rank is opened and checked; a missing or
    disagreeing rank raises TilescopeError naming it. Returns the manifest's path."""
    manifest = str(manifest)
    if rank_dumps is None:
        _lib.check(_lib.lib().tsc_manifest_write_dir(manifest.encode()), manifest)
        return os.path.join(manifest, "manifest.h5")
    paths = [str(p).encode() for p in rank_dumps]
    arr = (ctypes.c_char_p * max(1, len(paths)))(*paths)
    _lib.check(_lib.lib().tsc_manifest_write(manifest.encode(), arr, len(paths)), manifest)
    return manifest


def pack(session_dir, out_path, remove_folder=True):
    """Packs a session folder (left by a killed process or keep_session) into one dump file."""
    _lib.check(_lib.lib().tsc_capture_pack(str(session_dir).encode(), str(out_path).encode(),
                                           1 if remove_folder else 0), str(session_dir))
