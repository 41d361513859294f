"""libtilescope's reference attention (kernels/tsc_attention.h: tsc_attn_run) on numpy arrays:
forward and, with dO, backward of q [B, H, T, D], k/v [B, Hkv, T, D] under a precision policy.

    out = reference_attention("bf16-torch", q, k, v, dO, causal=True)
    out["o"], out["lse"], out["delta"], out["dq"], out["dk"], out["dv"]

Inputs are rounded into the policy's q/k/v/do formats on entry; outputs hold the exact values of
their stage formats, as float32 (float64 when q is float64)."""
import ctypes

import numpy as np

from . import _lib


class AttnDims(ctypes.Structure):
    """tsc_attn_dims_t"""
    _fields_ = [("B", ctypes.c_int), ("H", ctypes.c_int), ("Hkv", ctypes.c_int), ("T", ctypes.c_int),
                ("D", ctypes.c_int), ("causal", ctypes.c_int), ("scale", ctypes.c_double)]


class AttnIO(ctypes.Structure):
    """tsc_attn_io_t"""
    _fields_ = [("dtype", ctypes.c_int)] + [(n, ctypes.c_void_p) for n in
                                            ("q", "k", "v", "dout", "o", "lse", "delta", "dq", "dk", "dv")]


def _ptr(a):
    return a.ctypes.data if a is not None else None


def reference_attention(policy, q, k, v, dO=None, causal=True, scale=None):
    """Forward (and backward with dO) under a policy string; returns a dict of arrays: o, lse
    (and delta, dq, dk, dv with dO). scale defaults to 1/sqrt(D). TilescopeError for a bad
    policy or shape (the library's message)."""
    dt = np.float64 if np.asarray(q).dtype == np.float64 else np.float32
    q, k, v = (np.ascontiguousarray(x, dtype=dt) for x in (q, k, v))
    if q.ndim != 4 or k.ndim != 4 or k.shape != v.shape or k.shape[0] != q.shape[0] or k.shape[2:] != q.shape[2:]:
        raise ValueError("attention: q [B, H, T, D] and k, v [B, Hkv, T, D] expected, got %s, %s, %s"
                         % (q.shape, k.shape, v.shape))
    B, H, T, D = q.shape
    pol = _lib.parse_policy(policy)
    dims = AttnDims(B, H, k.shape[1], T, D, 1 if causal else 0, float(scale) if scale else 1.0 / np.sqrt(D))
    out = {"o": np.zeros_like(q), "lse": np.zeros((B, H, T), dt)}
    if dO is not None:
        dO = np.ascontiguousarray(dO, dtype=dt)
        if dO.shape != q.shape:
            raise ValueError("attention: dO has shape %s, q %s" % (dO.shape, q.shape))
        out.update(delta=np.zeros((B, H, T), dt), dq=np.zeros_like(q), dk=np.zeros_like(k), dv=np.zeros_like(v))
    io = AttnIO(1 if dt == np.float64 else 0, _ptr(q), _ptr(k), _ptr(v), _ptr(dO), _ptr(out["o"]),
                _ptr(out["lse"]), _ptr(out.get("delta")), _ptr(out.get("dq")), _ptr(out.get("dk")),
                _ptr(out.get("dv")))
    _lib.check(_lib.lib().tsc_attn_run(pol, ctypes.byref(dims), ctypes.byref(io), None, 0), "attention")
    return out
