"""tsc_attn_py.py: the CPU attention reference of libtilescope (kernels/tsc_attention.h) called
from Python through ctypes, for tests that compare it with other implementations.

    from tsc_attn_py import attention
    out = attention(lib, "bf16-torch", q, k, v, dO, causal=True)   # dict of float32 arrays
"""
import ctypes

import numpy as np


class _Dims(ctypes.Structure):
    _fields_ = [("B", ctypes.c_int), ("H", ctypes.c_int), ("Hkv", ctypes.c_int), ("T", ctypes.c_int),
                ("D", ctypes.c_int), ("causal", ctypes.c_int), ("scale", ctypes.c_double)]


class _IO(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int)] + [(n, ctypes.c_void_p) for n in
                                            ("q", "k", "v", "dout", "o", "lse", "delta", "dq", "dk", "dv")]


def _ptr(a):
    return a.ctypes.data_as(ctypes.c_void_p) if a is not None else None


def policy_format(lib, policy):
    """The canonical string of a policy string (raises ValueError with the library's message)."""
    pol = ctypes.create_string_buffer(8192)
    if lib.tsc_policy_parse(policy.encode(), pol) != 0:
        lib.tsc_error_last.restype = ctypes.c_char_p
        raise ValueError(lib.tsc_error_last().decode())
    buf = ctypes.create_string_buffer(512)
    lib.tsc_policy_format(pol, buf, ctypes.c_size_t(512))
    return buf.value.decode()


def attention(lib, policy, q, k, v, dO=None, causal=True, scale=None):
    """Forward (and backward with dO) of q [B,H,T,D], k/v [B,Hkv,T,D] under a policy string.
    Returns o, lse (and delta, dq, dk, dv) as float32 arrays."""
    q, k, v = (np.ascontiguousarray(x, dtype=np.float32) for x in (q, k, v))
    B, H, T, D = q.shape
    Hkv = k.shape[1]
    pol = ctypes.create_string_buffer(8192)  # larger than tsc_policy_t
    lib.tsc_error_last.restype = ctypes.c_char_p
    if lib.tsc_policy_parse(policy.encode(), pol) != 0:
        raise ValueError(lib.tsc_error_last().decode())
    dims = _Dims(B, H, Hkv, T, D, 1 if causal else 0, scale if scale else 1.0 / np.sqrt(D))
    out = {"o": np.zeros_like(q), "lse": np.zeros((B, H, T), np.float32)}
    if dO is not None:
        dO = np.ascontiguousarray(dO, dtype=np.float32)
        out.update(delta=np.zeros((B, H, T), np.float32), dq=np.zeros_like(q), dk=np.zeros_like(k),
                   dv=np.zeros_like(v))
    io = _IO(0, _ptr(q), _ptr(k), _ptr(v), _ptr(dO), _ptr(out["o"]), _ptr(out["lse"]),
             _ptr(out.get("delta")), _ptr(out.get("dq")), _ptr(out.get("dk")), _ptr(out.get("dv")))
    if lib.tsc_attn_run(pol, ctypes.byref(dims), ctypes.byref(io), None, 0) != 0:
        raise RuntimeError(lib.tsc_error_last().decode())
    return out
