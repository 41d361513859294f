"""PyTorch side of tilescope: an autograd attention under any precision policy, and capture hooks
that record a model's attention tensors into a dump while it trains. See docs/PYTHON.md.

    o = tilescope.torch.attention(q, k, v, causal=True, policy="bf16-torch+stable:beta=2")
    o = tilescope.torch.scaled_dot_product_attention(q, k, v, is_causal=True)  # torch 2.5's, on any torch

    with tilescope.torch.capture(model, "run.h5", select="steps=0:1000:100,layers=1") as cap:
        for step in range(1000):
            cap.step(step)                 # or leave it out: one step per training forward of model
            loss = model(x).loss; loss.backward(); opt.step()
"""
import math
import os
import queue
import threading
import warnings

import torch

from . import _lib
from .attention import reference_attention
from .capture import Capture

DEFAULT_POLICY = "bf16-torch+stable:beta=2"

# --------------------------------------------------------------------------------------------
# the autograd attention


def _np(t):
    t = t.detach()
    if t.dtype not in (torch.float32, torch.float64):
        t = t.float()  # bf16/fp16 values are exact in float32
    return t.cpu().numpy()


class _Attention(torch.autograd.Function):
    """Forward and backward through tsc_attn_run; the forward also returns the kernel's LSE."""

    @staticmethod
    def forward(ctx, q, k, v, causal, policy, scale):
        out = reference_attention(policy, _np(q), _np(k), _np(v), causal=causal, scale=scale)
        ctx.save_for_backward(q, k, v)
        ctx.causal, ctx.policy, ctx.scale = causal, policy, scale
        o = torch.from_numpy(out["o"]).to(device=q.device, dtype=q.dtype)
        lse = torch.from_numpy(out["lse"]).to(device=q.device, dtype=torch.float32)
        ctx.mark_non_differentiable(lse)
        return o, lse

    @staticmethod
    def backward(ctx, do, _dlse):
        q, k, v = ctx.saved_tensors
        out = reference_attention(ctx.policy, _np(q), _np(k), _np(v), _np(do), causal=ctx.causal, scale=ctx.scale)
        grads = [torch.from_numpy(out[n]).to(device=t.device, dtype=t.dtype) for n, t in
                 (("dq", q), ("dk", k), ("dv", v))]
        return grads[0], grads[1], grads[2], None, None, None


def attention(q, k, v, causal=True, policy=DEFAULT_POLICY, scale=None):
    """Attention of q [B, H, T, D] with k, v [B, Hkv, T, D] (Hkv divides H: grouped-query
    attention without repeating k, v) computed by libtilescope's CPU reference under a precision
    policy (kernels/tsc_attention.h, docs/PRESETS.md), forward and backward. scale defaults to
    1/sqrt(D). O has q's dtype and device and holds the exact values of the policy's O format.
    Inside a tilescope.torch.capture the call is recorded (q, k, v, o, the kernel's lse, dO)."""
    o, lse = _Attention.apply(q, k, v, bool(causal), policy, scale)
    for rec in list(_ACTIVE):
        rec._on_call("tilescope.torch.attention", q, k, v, o, lse, causal,
                     scale if scale else 1.0 / math.sqrt(q.shape[-1]), policy)
    return o


# --------------------------------------------------------------------------------------------
# capture

_ACTIVE = []  # the captures now recording (normally at most one)
_SDPA_ORIG = None        # torch's own F.scaled_dot_product_attention while it is patched
_SDPA_BOUND = []         # (module dict, name) of names bound to torch's SDPA that are patched now

_LOW = (torch.bfloat16, torch.float16)


def _autocast_dtype(device_type):
    """The dtype autocast casts SDPA's inputs to on this device, or None when autocast is off there
    (torch >= 2.x lists scaled_dot_product_attention among autocast's lower-precision ops)."""
    if device_type == "cuda" and torch.is_autocast_enabled():
        return torch.get_autocast_gpu_dtype()
    if device_type == "cpu" and torch.is_autocast_cpu_enabled():
        return torch.get_autocast_cpu_dtype()
    return None


def _sdpa_math(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """torch 2.5's math path (ATen's _scaled_dot_product_attention_math), written in torch 1.13 ops:
    BF16/FP16 inputs upcast to FP32, sqrt(scale) applied to q and to k, FP32 scores, mask, softmax
    (fully masked rows give 0, as _safe_softmax), dropout, P V, O cast back to the input dtype once.
    Autograd runs through the same FP32 ops (the bf16-sdpa-math preset, docs/PRESETS.md)."""
    if attn_mask is not None and is_causal:
        raise RuntimeError("scaled_dot_product_attention: explicit attn_mask should not be set when is_causal=True")
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise RuntimeError("scaled_dot_product_attention: query, key and value need at least 2 dimensions")
    L, S, E = query.shape[-2], key.shape[-2], query.shape[-1]
    if key.shape[-1] != E or value.shape[-2] != S:
        raise RuntimeError("scaled_dot_product_attention: query %s, key %s, value %s do not fit together"
                           % (tuple(query.shape), tuple(key.shape), tuple(value.shape)))
    if enable_gqa and query.dim() >= 3 and key.shape[-3] != query.shape[-3]:
        Hq, Hk, Hv = query.shape[-3], key.shape[-3], value.shape[-3]
        if Hq % Hk or Hq % Hv:
            raise RuntimeError("scaled_dot_product_attention: enable_gqa with %d query heads, %d key heads and %d "
                               "value heads (the key and value heads must divide the query heads)" % (Hq, Hk, Hv))
        key = key.repeat_interleave(Hq // Hk, dim=-3)
        value = value.repeat_interleave(Hq // Hv, dim=-3)
    out_dtype = query.dtype
    with torch.autocast(device_type=query.device.type, enabled=False):
        f = torch.float32 if out_dtype in _LOW else out_dtype
        q, k, v = query.to(f), key.to(f), value.to(f)
        sqrt_scale = math.sqrt(scale if scale is not None else 1.0 / math.sqrt(E))
        s = torch.matmul(q * sqrt_scale, (k * sqrt_scale).transpose(-2, -1))
        if is_causal:
            keep = torch.ones(L, S, dtype=torch.bool, device=s.device).tril()
            s = s.masked_fill(~keep, float("-inf"))
        elif attn_mask is not None:
            if attn_mask.dtype == torch.bool:
                s = s.masked_fill(~attn_mask, float("-inf"))
            else:
                s = s + attn_mask.to(f)
        masked_rows = torch.isneginf(s).all(dim=-1, keepdim=True)
        p = torch.softmax(s, dim=-1)
        if bool(masked_rows.any()):
            p = p.masked_fill(masked_rows, 0.0)
        if dropout_p > 0.0:
            p = torch.nn.functional.dropout(p, dropout_p, training=True)
        o = torch.matmul(p, v)
    return o.to(out_dtype)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """torch 2.5's F.scaled_dot_product_attention for any torch (1.13 has none): same signature and
    semantics as its math backend. query [..., L, E], key [..., S, E], value [..., S, Ev]; attn_mask
    boolean (True = attend) or float (added to the scores), broadcastable to [..., L, S]; is_causal
    masks the upper triangle (top-left aligned; not together with attn_mask); scale defaults to
    1/sqrt(E); enable_gqa repeats each key/value head (repeat_interleave) over its group of query
    heads. Rows with every key masked give 0. Under autocast the inputs are cast to its dtype, as
    torch's autocast does for SDPA. On torch < 2.0, importing tilescope.torch installs it as
    F.scaled_dot_product_attention. Inside a tilescope.torch.capture the call is recorded, with the
    policy bf16-sdpa-math / fp16-sdpa-math (fp32 for FP32 inputs)."""
    ac = _autocast_dtype(query.device.type)
    if ac is not None:  # autocast casts its eligible arguments: floating point but FP64
        cast = lambda t: t.to(ac) if torch.is_tensor(t) and t.is_floating_point() and t.dtype != torch.float64 else t  # noqa: E731
        query, key, value, attn_mask = cast(query), cast(key), cast(value), cast(attn_mask)
    o = _sdpa_math(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    if _ACTIVE:
        policy = {torch.bfloat16: "bf16-sdpa-math", torch.float16: "fp16-sdpa-math"}.get(query.dtype)
        _record_sdpa(query, key, value, o, attn_mask, dropout_p, is_causal, scale, policy)
    return o


def _record_sdpa(query, key, value, o, attn_mask, dropout_p, is_causal, scale, policy):
    for rec in list(_ACTIVE):
        if attn_mask is not None or dropout_p:
            rec._seen_call = rec._seen_call or rec._want_step
            rec._warn_once("sdpa-mask", "scaled_dot_product_attention called with an attn_mask or dropout: "
                           "such calls are not captured (only is_causal masks are modelled)")
            continue
        if not (query.dim() == key.dim() == value.dim() == 4):
            rec._seen_call = rec._seen_call or rec._want_step
            rec._warn_once("sdpa-rank", "scaled_dot_product_attention called with query %s, key %s: only [B, H, T, D] "
                           "calls are captured" % (tuple(query.shape), tuple(key.shape)))
            continue
        rec._on_call("sdpa", query, key, value, o, None, is_causal,
                     scale if scale is not None else 1.0 / math.sqrt(query.shape[-1]), policy)


def _sdpa_wrapper(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kw):
    """torch's own SDPA (torch >= 2.0), recorded: installed in its place while a capture is open."""
    o = _SDPA_ORIG(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                   **({"scale": scale} if scale is not None else {}), **kw)
    _record_sdpa(query, key, value, o, attn_mask, dropout_p, is_causal, scale, None)
    return o


def _patch_sdpa(on, model=None):
    """Routes torch's scaled_dot_product_attention (torch >= 2.0) through the recorder while any
    capture is active: the attribute of torch.nn.functional, and every global name bound to it
    (`from torch.nn.functional import scaled_dot_product_attention` at import time) in the modules
    that define the model's classes and in the other modules of their top-level packages. Our own
    scaled_dot_product_attention records itself and is never wrapped."""
    global _SDPA_ORIG
    F = torch.nn.functional
    if on and _SDPA_ORIG is None:
        cur = getattr(F, "scaled_dot_product_attention", None)
        if cur is None or cur is scaled_dot_product_attention:
            return
        _SDPA_ORIG = cur
        F.scaled_dot_product_attention = _sdpa_wrapper
    if on and _SDPA_ORIG is not None and model is not None:
        for d in _model_module_dicts(model):
            for name, val in list(d.items()):
                if val is _SDPA_ORIG:
                    d[name] = _sdpa_wrapper
                    _SDPA_BOUND.append((d, name))
    elif not on and _SDPA_ORIG is not None:
        for d, name in _SDPA_BOUND:
            if d.get(name) is _sdpa_wrapper:
                d[name] = _SDPA_ORIG
        del _SDPA_BOUND[:]
        F.scaled_dot_product_attention = _SDPA_ORIG
        _SDPA_ORIG = None


def _model_module_dicts(model):
    """The globals of the Python modules that define the model's classes, and of the other loaded
    modules of their top-level packages (helpers such as an attention function's module); torch's
    own modules are left alone."""
    import sys
    names = {type(m).__module__ for m in model.modules()}
    tops = {n.split(".")[0] for n in names} - {"torch", "builtins"}
    out = []
    for name, mod in list(sys.modules.items()):
        if mod is None or name.split(".")[0] not in tops and name not in names:
            continue
        if name.split(".")[0] == "torch":
            continue
        d = getattr(mod, "__dict__", None)
        if isinstance(d, dict):
            out.append(d)
    return out


if not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
    # torch < 2.0: a model written for torch >= 2.0 runs unchanged (docs/PYTHON.md)
    torch.nn.functional.scaled_dot_product_attention = scaled_dot_product_attention


# The attention-module layouts capture recognises, one row each: (name, the submodules by role,
# how a fused projection's rows split). Roles: "q", "k", "v" separate projections or "qkv" one
# fused projection, and "o" the output projection (each a dotted path below the attention module;
# nn.Linear, HF's Conv1D, or a bare [out, in] weight). Splits: "concat", rows [q | k | v] of
# H*D, Hkv*D, Hkv*D; "per-head", GPT-NeoX's rows [H, 3, D] (q, k, v of each head in turn).
# capture(projections=...) puts the user's own row first.
STYLES = (
    ("nanogpt", dict(qkv="c_attn", o="c_proj"), "concat"),                       # nanoGPT, GPT-2
    ("llama", dict(q="q_proj", k="k_proj", v="v_proj", o="o_proj"), None),       # HF Llama, Mistral, Qwen
    ("meta", dict(q="wq", k="wk", v="wv", o="wo"), None),                        # Meta Llama, torchtitan
    ("bart", dict(q="q_proj", k="k_proj", v="v_proj", o="out_proj"), None),      # BART, OPT, Whisper, CLIP
    ("qkv_proj", dict(qkv="qkv_proj", o="o_proj"), "concat"),                    # Phi-3
    ("gpt-neox", dict(qkv="query_key_value", o="dense"), "per-head"),           # GPT-NeoX, Pythia
    ("Wqkv", dict(qkv="Wqkv", o="out_proj"), "concat"),                          # MPT, flash_attn's MHA
)
H_NAMES = ("n_local_heads", "n_head", "num_heads", "num_attention_heads", "n_heads")
HKV_NAMES = ("n_local_kv_heads", "num_key_value_heads", "n_kv_head", "n_kv_heads", "kv_n_heads", "num_kv_heads")
ROLES = ("q", "k", "v", "qkv", "o")


def _sub(module, path):
    obj = module
    for part in path.split("."):
        obj = obj[int(part)] if part.isdigit() and isinstance(obj, (torch.nn.ModuleList, torch.nn.Sequential)) \
            else getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _style_row(row):
    """A capture(projections=...) mapping checked and made a row of STYLES."""
    names = {r: row[r] for r in ROLES if r in row}
    separate, fused = all(r in names for r in "qkv"), "qkv" in names
    if set(row) - set(ROLES) - {"split"} or "o" not in names or separate == fused:
        raise ValueError("projections=%r: give q, k, v and o, or qkv and o (dotted submodule paths of the attention "
                         "module), and split='concat' or 'per-head' with qkv" % (row,))
    split = row.get("split", "concat" if "qkv" in names else None)
    if split not in (None, "concat", "per-head"):
        raise ValueError("projections split=%r: 'concat' or 'per-head'" % split)
    return ("projections", names, split)


def _style(module, styles=STYLES):
    """The first row of styles whose submodules the module has, or None."""
    for row in styles:
        if all(_sub(module, path) is not None for path in row[1].values()):
            return row
    return None


def _weight(obj):
    """[out, in] weight of a projection: nn.Linear's weight, HF Conv1D's transposed ([in, out], it
    has nf), or a bare 2-D tensor; None otherwise."""
    if torch.is_tensor(obj):
        return obj if obj.dim() == 2 else None
    w = getattr(obj, "weight", None)
    if not torch.is_tensor(w) or w.dim() != 2:
        return None
    return w.t() if hasattr(obj, "nf") and not isinstance(obj, torch.nn.Linear) else w


def _bits(t):
    t = t.detach().contiguous()
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def kv_layout(k, n_kv):
    """How k [B, H, T, D] holds n_kv kv heads expanded to H: "interleaved" when heads
    g*rep .. g*rep+rep-1 are bit-identical copies of kv head g (repeat_interleave, HF's repeat_kv,
    SDPA's enable_gqa), "tiled" when heads g, g+n_kv, g+2*n_kv, ... are (k.repeat(1, rep, 1, 1)),
    "neither" when no such copies are there (both hold only when the copies are all equal)."""
    B, H, T, D = k.shape
    rep = H // n_kv
    b = _bits(k)
    il = b.reshape(B, n_kv, rep, T, D)
    if torch.equal(il, il[:, :, :1].expand_as(il)):
        return "interleaved"
    tl = b.reshape(B, rep, n_kv, T, D)
    if torch.equal(tl, tl[:, :1].expand_as(tl)):
        return "tiled"
    return "neither"


def _attr(module, *names):
    for obj in (module, getattr(module, "config", None)):
        for n in names:
            if obj is not None and isinstance(getattr(obj, n, None), int):
                return getattr(obj, n)
    return None


def _host(t):
    """A host copy of t's values that later training cannot change: a CUDA tensor goes to a pinned
    buffer asynchronously (the writer thread waits for the copy); a CPU tensor is kept as it is
    (autograd forbids in-place changes to what it saved)."""
    t = t.detach()
    if t.device.type == "cpu":
        return t, None
    buf = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
    buf.copy_(t, non_blocking=True)
    ev = torch.cuda.Event()
    ev.record()
    return buf, ev


def side_lse(q, k, scale, causal):
    """log-sum-exp of each query row's scaled scores, in FP32 (for kernels that do not return it):
    q [B, H, T, D], k [B, Hkv, T, D] -> [B, H, T] float32."""
    with torch.no_grad(), torch.autocast(device_type=q.device.type, enabled=False):  # FP32 even under autocast
        qf, kf = q.detach().float(), k.detach().float()
        if kf.shape[1] != qf.shape[1]:
            kf = kf.repeat_interleave(qf.shape[1] // kf.shape[1], dim=1)
        s = torch.matmul(qf, kf.transpose(-1, -2)) * float(scale)
        if causal:
            T = s.shape[-1]
            s = s.masked_fill(torch.ones(T, T, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
        return torch.logsumexp(s, dim=-1)


def _dist():
    d = torch.distributed
    if d.is_available() and d.is_initialized():
        return d.get_rank(), d.get_world_size()
    return 0, 1


def rank_path(path, rank, world_size):
    """The dump of one rank: PATH with "{rank}" formatted, else "run.h5" -> "run.rank3.h5" when
    world_size > 1."""
    path = str(path)
    if "{rank}" in path:
        return path.format(rank=rank)
    if world_size > 1:
        root, ext = os.path.splitext(path)
        return "%s.rank%d%s" % (root, rank, ext)
    return path


class capture:
    """Records a model's attention internals for the sampled steps and layers (see the module's
    docstring and docs/PYTHON.md for the module styles it recognises and what it records).

    model: the torch.nn.Module trained; path: the dump (a session folder PATH.capture while it
    runs, packed into PATH at exit); select: the sampling spec ("steps=0:1000:100,layers=1,
    heads=0:4"); policy: the kernel that runs attention, recorded in the dump (default: known for
    tilescope.torch.attention, inferred for eager attention, none recorded for SDPA in BF16/FP16,
    which fit and diagnose then find by fitting); modules: the attention modules in layer order
    (default: every module of a layout in STYLES, in model.named_modules() order); projections:
    the submodule names of another layout, dict(q=..., k=..., v=..., o=...) or dict(qkv=..., o=...,
    split="concat" or "per-head"), tried before STYLES; weights / x: record W_q, W_k, W_v, W_o and
    x (default True); deflate, store, keep_session as for tilescope.Capture. The step's tokens: the
    model's input ids (its forward's first argument when it is a B x T integer tensor, or
    capture.tokens(ids)) are recorded with each sampled step, and their text when tokenizer is given
    (an object with decode([id]), e.g. a Hugging Face tokenizer, or a callable id -> str):
    `tilescope view` and `figure attn` label the patterns with them.

    Under torch.distributed (docs/DISTRIBUTED.md): every rank writes its own dump (rank_path) with
    its rank, world size and parallel coordinates, parallel=dict(tp=(rank, size), pp=(rank, size),
    dp=(rank, size)) (default: data-parallel only); at close the ranks meet at a barrier and rank 0
    writes the manifest, manifest= (default: path itself when it has no "{rank}"; None: no manifest)
    over every rank's dump. Every rank must close its capture (the with-block does)."""

    def __init__(self, model, path, select=None, policy=None, modules=None, weights=True, x=True,
                 deflate=0, store=None, keep_session=False, projections=None, parallel=None, manifest="",
                 tokenizer=None):
        self.model = model
        self._tokenizer, self._token_text, self._tokens = tokenizer, {}, None
        self.rank, self.world_size = _dist()
        self.path = rank_path(path, self.rank, self.world_size)
        self._rank_paths = [rank_path(path, r, self.world_size) for r in range(self.world_size)]
        if manifest == "":
            manifest = None if "{rank}" in str(path) else str(path)
        self.manifest = manifest if self.world_size > 1 else None
        self._parallel = dict(parallel or {})
        unknown = set(self._parallel) - {"dp", "tp", "pp"}
        if unknown:
            raise ValueError("parallel: unknown axes %s (dp, tp, pp)" % ", ".join(sorted(unknown)))
        self.select = select
        self._sel = _lib.Selection(select)
        self.policy = policy
        self._opts = dict(select=select, deflate=deflate, store=store, keep_session=keep_session)
        self._want_w, self._want_x = weights, x
        self._styles = ((_style_row(projections),) if projections else ()) + STYLES
        self._names = {id(m): name for name, m in model.named_modules()}
        if modules is None:
            modules = [m for _, m in model.named_modules() if _style(m, self._styles)]
        self.modules = list(modules)
        self._layer_of = {id(m): i for i, m in enumerate(self.modules)}
        self._style_of = {id(m): _style(m, self._styles) for m in self.modules}
        self._seen_call = False
        self._stack, self._hooks, self._layer_hooks, self._warned = [], [], [], set()
        for i, m in enumerate(self.modules):
            if self._style_of[id(m)] is None and (weights or x):
                self._warn_once("style%d" % i, self._no_style(i, m))
        self._step, self._manual, self._want_step = -1, False, False
        self._pending, self._calls = {}, 0
        self._cap = None
        self._q = queue.Queue(maxsize=2)
        self._thread, self._open_ctx = None, False
        self.steps_written = []

    # -- context ------------------------------------------------------------------------------
    def __enter__(self):
        self._hooks.append(self.model.register_forward_pre_hook(self._model_pre))
        self._open_ctx = True
        _ACTIVE.append(self)
        _patch_sdpa(True, self.model)
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close()

    def close(self):
        """Writes the last step, stops the writer and packs the dump (TilescopeError when packing
        fails: the session folder is then left as it is). Steps the writer could not write were
        dropped with a warning each."""
        if not self._open_ctx:
            return
        self._open_ctx = False
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        if not _ACTIVE:
            _patch_sdpa(False)
        for h in self._hooks:
            h.remove()
        self._hooks = []
        self._layer_hooks_set(False)
        self._finish_step()
        if self._thread is not None:
            self._q.put(None)
            self._thread.join()
            self._thread = None
        try:
            if self._cap is not None:
                cap, self._cap = self._cap, None
                cap.close()
        finally:
            self._write_manifest()

    def _write_manifest(self):
        """The ranks meet; rank 0 writes the manifest over every rank's dump (a warning naming the
        problem, e.g. a rank that wrote nothing, when it cannot: `tilescope merge` can be run later)."""
        if not self.manifest:
            return
        torch.distributed.barrier()
        if self.rank != 0:
            return
        try:
            from .capture import merge
            merge(self.manifest, self._rank_paths)
        except Exception as e:  # noqa: BLE001 -- the rank dumps are written; the manifest can follow
            warnings.warn("tilescope capture: no manifest %s: %s (the rank dumps are kept: run `tilescope merge -o "
                          "%s %s` once they are complete)" % (self.manifest, e, self.manifest,
                                                             " ".join(self._rank_paths)), stacklevel=3)
    # -- steps --------------------------------------------------------------------------------
    def step(self, n):
        """Starts training step n (the previous step is handed to the writer). Calling it turns the
        automatic step counting off."""
        self._manual = True
        self._begin(int(n))

    def flush(self):
        """Hands the current step to the writer and waits until every step handed over is on disk
        (it then survives a SIGKILL). Call it between steps, after the backward."""
        self._finish_step()
        self._q.join()

    def _begin(self, n):
        self._finish_step()
        self._step = n
        self._want_step = self._sel.has(n)
        self._calls = 0
        self._layer_hooks_set(self._want_step)

    def _layer_hooks_set(self, on):
        """The attention modules' hooks exist only during sampled steps: a step the sampling spec
        skips runs the model with no hook of ours but the model's own pre-hook (step counting)."""
        if on and not self._layer_hooks:
            for m in self.modules:
                self._layer_hooks.append(m.register_forward_pre_hook(self._module_pre))
                self._layer_hooks.append(m.register_forward_hook(self._module_post))
                row = self._style_of[id(m)]
                if row is None:
                    continue
                first = _sub(m, row[1].get("q") or row[1]["qkv"])
                if isinstance(first, torch.nn.Module):  # x: the input of the q (or fused) projection
                    self._layer_hooks.append(first.register_forward_pre_hook(self._proj_x(m)))
                if row[0] == "nanogpt":
                    self._layer_hooks.append(m.c_attn.register_forward_hook(self._nanogpt_qkv(m)))
                    self._layer_hooks.append(m.c_proj.register_forward_pre_hook(self._proj_o(m)))
                elif isinstance(_sub(m, row[1]["o"]), torch.nn.Module):
                    self._layer_hooks.append(_sub(m, row[1]["o"]).register_forward_pre_hook(self._proj_o(m)))
        elif not on and self._layer_hooks:
            for h in self._layer_hooks:
                h.remove()
            self._layer_hooks = []
            self._stack = []

    def _model_pre(self, module, args):
        if not self._manual and module.training and torch.is_grad_enabled():
            self._begin(self._step + 1)
        a = args[0] if args else None
        if (self._want_step and torch.is_grad_enabled() and torch.is_tensor(a) and a.dim() == 2
                and not a.is_floating_point() and not a.is_complex()):
            self._tokens = a.detach().to("cpu", copy=True)  # the model's input ids: the step's tokens

    def tokens(self, ids):
        """Records the current step's input token ids (B x T), for a model whose forward does not take
        them as its first positional argument (where they are recorded by themselves)."""
        self._tokens = ids.detach().to("cpu", copy=True) if torch.is_tensor(ids) else torch.tensor(ids)

    def _text(self, ids):
        """The tokenizer's text of each id (cached): tokenizer.decode([id]) for a Hugging Face or
        tiktoken-like tokenizer, else tokenizer(id); None without a tokenizer."""
        tk = self._tokenizer
        if tk is None:
            return None
        out = []
        for row in ids.tolist():
            for i in row:
                if i not in self._token_text:
                    self._token_text[i] = tk.decode([i]) if hasattr(tk, "decode") else tk(i)
            out.append([self._token_text[i] for i in row])
        return out

    def _layer_wanted(self, layer):
        """Sampled step and layer, in a forward that builds a graph (evaluation under no_grad is
        not recorded)."""
        return self._want_step and torch.is_grad_enabled() and self._sel.has(self._step, layer)

    def _slot(self, layer):
        return self._pending.setdefault(layer, {"call": {}, "proj": {}, "extra": {}, "info": {}})

    # -- module hooks -------------------------------------------------------------------------
    def _module_pre(self, module, args):
        layer = self._layer_of[id(module)]
        self._stack.append(layer)
        if not self._layer_wanted(layer):
            return
        slot = self._slot(layer)
        if self._want_x and args and torch.is_tensor(args[0]) and args[0].dim() == 3 and "x" not in slot["extra"]:
            slot["extra"]["x"] = _host(args[0])  # replaced by the q projection's input when it runs
        if self._want_w:
            for name, w in self._weights(layer, module).items():
                slot["extra"][name] = _host(w.detach().clone())  # the optimizer updates weights in place

    def _module_post(self, module, args, out):
        if self._stack:
            self._stack.pop()

    def _proj_x(self, module):
        def hook(mod, args):
            layer = self._layer_of[id(module)]
            if self._want_x and self._layer_wanted(layer) and args and torch.is_tensor(args[0]) and args[0].dim() == 3:
                self._slot(layer)["extra"]["x"] = _host(args[0])
        return hook

    def _weights(self, layer, module):
        """{w_q, w_k, w_v, w_o} [out, in] of the module's layout, or {} (with a warning naming the
        module) when its projections cannot be read or split."""
        row = self._style_of.get(id(module))
        if row is None:
            return {}
        _, names, split = row
        w = {r: _weight(_sub(module, path)) for r, path in names.items()}
        if any(t is None for t in w.values()):
            self._warn_once("w%d" % layer, "layer %d (module %r): its projections %s are not all nn.Linear, Conv1D or "
                            "2-D weights: W_q..W_o not recorded" % (layer, self._name(module), names))
            return {}
        if "qkv" not in w:
            return {"w_q": w["q"], "w_k": w["k"], "w_v": w["v"], "w_o": w["o"]}
        qkv, C = w["qkv"], w["qkv"].shape[1]
        H, Hkv = _attr(module, *H_NAMES), _attr(module, *HKV_NAMES)
        Hkv = Hkv or H
        R = qkv.shape[0]
        if split == "per-head" and H and R % (3 * H) == 0:
            t = qkv.reshape(H, 3, R // (3 * H), C)
            q, k, v = (t[:, j].reshape(-1, C) for j in range(3))
        elif split == "concat" and H and R % (H + 2 * Hkv) == 0:
            D = R // (H + 2 * Hkv)
            q, k, v = qkv[:H * D], qkv[H * D:(H + Hkv) * D], qkv[(H + Hkv) * D:]
        elif split == "concat" and H is None and R % 3 == 0:  # no head counts: equal thirds (no GQA)
            q, k, v = qkv[:R // 3], qkv[R // 3:2 * R // 3], qkv[2 * R // 3:]
        else:
            self._warn_once("w%d" % layer, "layer %d (module %r): %s's %d rows do not split into q, k, v (%s, heads %s, "
                            "kv heads %s): W_q..W_o not recorded" % (layer, self._name(module), names["qkv"],
                                                                    R, split, H, Hkv))
            return {}
        return {"w_q": q, "w_k": k, "w_v": v, "w_o": w["o"]}

    def _name(self, module):
        name = self._names.get(id(module))
        return name if name else type(module).__name__  # the model itself is named ''

    def _no_style(self, layer, module):
        return ("layer %d (module %r, class %s): no known attention layout (%s): x and W_q..W_o not recorded; name its "
                "projections with capture(..., projections=dict(q='...', k='...', v='...', o='...')) or "
                "dict(qkv='...', o='...', split='concat' or 'per-head')"
                % (layer, self._name(module), type(module).__name__,
                   "; ".join("/".join(r[1].values()) for r in STYLES)))

    def _calling_module(self):
        """The innermost module of the model whose forward is on the Python stack (for messages)."""
        import sys
        f = sys._getframe(1)
        while f is not None:
            obj = f.f_locals.get("self")
            if isinstance(obj, torch.nn.Module) and obj is not self.model and id(obj) in self._names:
                return obj
            f = f.f_back
        return None

    def _nanogpt_qkv(self, module):
        def hook(mod, args, out):
            layer = self._layer_of[id(module)]
            if not self._layer_wanted(layer):
                return
            H = _attr(module, *H_NAMES)
            if H is None:
                self._warn_once("nohead", "nanoGPT-style module without n_head: q, k, v taken from calls only")
                return
            B, T, C3 = out.shape
            C = C3 // 3
            q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in out.detach().split(C, dim=2))
            causal = bool(getattr(module, "causal", True))
            self._slot(layer)["proj"].update(q=_host(q.contiguous()), k=_host(k.contiguous()),
                                             v=_host(v.contiguous()), heads=H, dtype=out.dtype,
                                             device=out.device.type, causal=causal,
                                             lse=_host(side_lse(q, k, 1.0 / math.sqrt(C // H), causal)))
        return hook

    def _proj_o(self, module):
        """o (and dO) from the output projection's input [B, T, H*D]."""
        def hook(mod, args):
            layer = self._layer_of[id(module)]
            if not self._layer_wanted(layer) or not args or not torch.is_tensor(args[0]):
                return
            y = args[0]
            slot = self._slot(layer)
            H = slot["proj"].get("heads") or _attr(module, *H_NAMES)
            if H is None or y.dim() != 3:
                return
            B, T, HD = y.shape
            slot["proj"]["o"] = _host(y.detach().view(B, T, H, HD // H).transpose(1, 2).contiguous())
            if y.requires_grad:
                y.register_hook(lambda g: self._grad(layer, "proj", g.view(B, T, H, HD // H).transpose(1, 2)))
        return hook

    # -- attention calls ----------------------------------------------------------------------
    def _on_call(self, kind, q, k, v, o, lse, causal, scale, policy):
        if not torch.is_grad_enabled():
            return
        if not self._want_step:
            self._calls += 1
            return
        self._seen_call = True
        if self._stack:
            layer = self._stack[-1]
        else:
            layer, self._calls = self._calls, self._calls + 1
            if (self._want_x or self._want_w) and "nomod" not in self._warned:
                m = self._calling_module()
                self._warn_once("nomod", "an attention call outside the capture's modules (layers by call order): x and "
                                "W_q..W_o not recorded. " + (self._no_style(layer, m) if m is not None else
                                "Pass modules=[the attention modules] and, for a layout not in STYLES, projections="))
        if not self._layer_wanted(layer):
            return
        slot = self._slot(layer)
        module = self.modules[layer] if layer < len(self.modules) else None
        Hkv = _attr(module, *HKV_NAMES) if module is not None else None
        H = q.shape[1]
        if Hkv and k.shape[1] == H and v.shape[1] == H and Hkv < H and H % Hkv == 0:
            # k, v expanded for GQA before the call: store the kv heads only where the dump's pairing
            # (query head h reads kv head h // rep) is the model's, else the heads the call received
            lk, lv = kv_layout(k, Hkv), kv_layout(v, Hkv)
            if lk == lv == "interleaved":
                k, v = k[:, ::H // Hkv], v[:, ::H // Hkv]
            else:
                how = ("tiled (k.repeat(1, %d, 1, 1): query head h reads kv head h %% %d)" % (H // Hkv, Hkv)
                       if lk == lv == "tiled" else "neither repeat_interleave nor tiled copies (k: %s, v: %s)" % (lk, lv))
                tiled = lk == lv == "tiled"
                slot["info"]["kv_expand"] = (H // Hkv) if tiled else 0
                self._warn_once("layout%d" % layer, "layer %d (module %r): the module has %d kv heads, but the %d key/"
                                "value heads of its attention call are %s; a dump pairs query head h with kv head h // %d "
                                "(repeat_interleave), so k and v are stored as the call received them, %d heads "
                                "(n_kv_head %d), which the replay pairs as the model did; %s"
                                % (layer, self._name(module), Hkv, H, how, H // Hkv, H, H,
                                   "W_k and W_v are stored tiled to match" if tiled else "W_k and W_v are not recorded"))
        if lse is None:
            lse = side_lse(q, k, scale, causal)
        slot["call"].update(q=_host(q.contiguous()), k=_host(k.contiguous()), v=_host(v.contiguous()),
                            o=_host(o.contiguous()), lse=_host(lse))
        slot["info"].update(kind=kind, causal=bool(causal), scale=float(scale),
                            policy=_lib.canonical_policy(policy) if policy else None,
                            dtype=q.dtype, device=q.device.type)
        if o.requires_grad:
            o.register_hook(lambda g: self._grad(layer, "call", g))

    def _grad(self, layer, src, g):
        slot = self._pending.get(layer)
        if slot is not None:
            slot[src]["do"] = _host(g.contiguous())

    # -- handing steps to the writer ----------------------------------------------------------
    def _finish_step(self):
        pending, self._pending = self._pending, {}
        if (self._want_step and self._step >= 0 and not self._seen_call and "nocall" not in self._warned
                and not any("q" in sl["proj"] for sl in pending.values())):
            self._warn_once("nocall", "no attention call was seen in sampled step %d: calls of tilescope.torch.attention, "
                            "torch.nn.functional.scaled_dot_product_attention and names bound to it in the modules of "
                            "the model's packages (`from torch.nn.functional import scaled_dot_product_attention`) are "
                            "recorded; an SDPA reached another way (torch._C._nn, a compiled or scripted module, a name "
                            "bound in a module outside those packages) is not: call tilescope.torch."
                            "scaled_dot_product_attention or F.scaled_dot_product_attention there" % self._step)
        tokens, self._tokens = self._tokens, None
        if not pending or self._step < 0:
            return
        layers = {}
        for layer, slot in sorted(pending.items()):
            t = self._layer_tensors(layer, slot)
            if t:
                layers[layer] = t
        if layers:
            if self._thread is None:  # started by the first sampled step: none before costs anything
                self._thread = threading.Thread(target=self._writer, name="tilescope-capture", daemon=True)
                self._thread.start()
            self._q.put((self._step, layers, tokens))

    def _layer_tensors(self, layer, slot):
        call, proj, info = slot["call"], slot["proj"], slot["info"]
        if "q" in call:
            t = {n: call[n] for n in ("q", "k", "v", "o", "lse", "do") if n in call}
        elif "q" in proj and "o" in proj:
            t = {n: proj[n] for n in ("q", "k", "v", "o", "lse", "do") if n in proj}
            info.update(kind="eager (%s)" % self._style_of[id(self.modules[layer])][0], causal=proj["causal"],
                        scale=1.0 / math.sqrt(proj["q"][0].shape[-1]), policy=None, dtype=proj["dtype"],
                        device=proj["device"])
        else:
            self._warn_once("noqkv%d" % layer, "layer %d (module %r): no attention call seen in step %d (use "
                            "tilescope.torch.attention or scaled_dot_product_attention, or a nanoGPT-style c_attn): "
                            "not captured" % (layer, self._name(self.modules[layer]), self._step))
            return None
        t.update(slot["extra"])
        rep = info.get("kv_expand")
        if rep is not None:  # k, v stored as the H heads the call received: W_k, W_v to match, or none
            for n in ("w_k", "w_v"):
                if n in t and rep:
                    w, ev = t[n]
                    if ev is not None:  # a pinned copy still in flight: this rare path waits for it
                        ev.synchronize()
                    t[n] = (w.repeat(rep, 1), None)  # row block h: kv head h % Hkv, as the call's k
                else:
                    t.pop(n, None)
        if self._cap is None:
            self._open(t, info, max(self._calls, layer + 1))
        return t

    def _open(self, t, info, n_calls):
        """Opens the session at the first sampled step: the geometry comes from its tensors."""
        q, k = t["q"][0], t["k"][0]
        B, H, T, D = q.shape
        x = t.get("x", (None,))[0]
        policy = self._policy(info)
        tq, tk = _lib.policy_tiles(policy) if info["policy"] and policy == info["policy"] else (T, T)
        meta = dict(n_layer=len(self.modules) or n_calls,
                    n_head=H, n_kv_head=k.shape[1], head_dim=D, d_model=x.shape[2] if x is not None else H * D,
                    seq_len=T, batch=B, causal=1 if info["causal"] else 0, softmax_scale=info["scale"],
                    tile_q=tq, tile_k=tk, policy=policy, rank=self.rank, world_size=self.world_size,
                    producer=("tilescope.torch %s (torch %s, %s, %s %s)" % (_lib.version(), torch.__version__,
                              info["kind"], info["device"], str(info["dtype"]).replace("torch.", "")))[:127])
        self.meta = meta
        self._cap = Capture(self.path, meta, **self._opts)
        if self.world_size > 1 or self._parallel:
            self._cap.parallel(**self._parallel)

    def _policy(self, info):
        if self.policy is not None:
            return self.policy
        if info["policy"]:
            return info["policy"]
        if info["dtype"] in (torch.float32, torch.float64):
            return "fp32"
        if info["kind"].startswith("eager"):
            lp = "bf16" if info["dtype"] == torch.bfloat16 else "fp16"
            return "%s-eager-%s" % (lp, "cuda" if info["device"] == "cuda" else "cpu")
        return ""  # SDPA in BF16/FP16: the backend is not known; fit finds the matching preset

    def _writer(self):
        while True:
            item = self._q.get()
            try:
                if item is None:
                    return
                step, layers, tokens = item
                if self._cap is None:
                    continue
                try:
                    with self._cap.step(step):
                        m = self._cap.meta
                        if tokens is not None and tuple(tokens.shape) == (m["batch"], m["seq_len"]):
                            self._cap.put_tokens(tokens, self._text(tokens))
                        elif tokens is not None:
                            self._warn_once("tokshape", "the model's input %s is not batch x seq_len (%d x %d): "
                                            "no tokens recorded (capture.tokens(ids) records them)"
                                            % (tuple(tokens.shape), m["batch"], m["seq_len"]))
                        for layer, tensors in layers.items():
                            for name, (tensor, ev) in tensors.items():
                                if ev is not None:
                                    ev.synchronize()
                                self._cap.put(layer, name, tensor)
                    self.steps_written.append(step)
                except Exception as e:  # noqa: BLE001 -- the writer must outlive any one step
                    self._warn_once("write%d" % step, "step %d not captured: %s" % (step, e))
            finally:
                self._q.task_done()

    def _warn_once(self, key, msg):
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn("tilescope capture: " + msg, stacklevel=3)
