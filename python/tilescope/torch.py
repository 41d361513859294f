"""PyTorch side of tilescope: an autograd attention under any precision policy, and capture hooks
that record a model's attention tensors into a dump while it trains. See docs/PYTHON.md.

    o = tilescope.torch.attention(q, k, v, causal=True, policy="bf16-torch+stable:beta=2")

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
_SDPA_ORIG = None


def _sdpa_wrapper(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kw):
    o = _SDPA_ORIG(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                   **({"scale": scale} if scale is not None else {}), **kw)
    for rec in list(_ACTIVE):
        if attn_mask is not None or dropout_p:
            rec._warn_once("sdpa-mask", "scaled_dot_product_attention called with an attn_mask or dropout: "
                           "such calls are not captured (only is_causal masks are modelled)")
            continue
        rec._on_call("sdpa", query, key, value, o, None, is_causal,
                     scale if scale is not None else 1.0 / math.sqrt(query.shape[-1]), None)
    return o


def _patch_sdpa(on):
    """Routes torch.nn.functional.scaled_dot_product_attention (torch >= 2.0) through the recorder
    while any capture is active."""
    global _SDPA_ORIG
    F = torch.nn.functional
    if not hasattr(F, "scaled_dot_product_attention"):
        return
    if on and _SDPA_ORIG is None:
        _SDPA_ORIG = F.scaled_dot_product_attention
        F.scaled_dot_product_attention = _sdpa_wrapper
    elif not on and _SDPA_ORIG is not None:
        F.scaled_dot_product_attention = _SDPA_ORIG
        _SDPA_ORIG = None


def _style(module):
    """'nanogpt' (c_attn + c_proj), 'llama' (q_proj, k_proj, v_proj, o_proj) or None."""
    if hasattr(module, "c_attn") and hasattr(module, "c_proj"):
        return "nanogpt"
    if all(hasattr(module, n) for n in ("q_proj", "k_proj", "v_proj", "o_proj")):
        return "llama"
    return None


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
    (default: every nanoGPT-style or Llama-style module, in model.named_modules() order);
    weights / x: record W_q, W_k, W_v, W_o and x (default True); deflate, store, keep_session as
    for tilescope.Capture."""

    def __init__(self, model, path, select=None, policy=None, modules=None, weights=True, x=True,
                 deflate=0, store=None, keep_session=False):
        self.model = model
        self.rank, self.world_size = _dist()
        self.path = rank_path(path, self.rank, self.world_size)
        self.select = select
        self._sel = _lib.Selection(select)
        self.policy = policy
        self._opts = dict(select=select, deflate=deflate, store=store, keep_session=keep_session)
        self._want_w, self._want_x = weights, x
        if modules is None:
            modules = [m for _, m in model.named_modules() if _style(m)]
        self.modules = list(modules)
        self._layer_of = {id(m): i for i, m in enumerate(self.modules)}
        self._stack, self._hooks, self._layer_hooks, self._warned = [], [], [], set()
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
        _patch_sdpa(True)
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
        if self._cap is not None:
            cap, self._cap = self._cap, None
            cap.close()

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
                style = _style(m)
                if style == "nanogpt":
                    self._layer_hooks.append(m.c_attn.register_forward_hook(self._nanogpt_qkv(m)))
                    self._layer_hooks.append(m.c_proj.register_forward_pre_hook(self._proj_o(m)))
                elif style == "llama":
                    self._layer_hooks.append(m.o_proj.register_forward_pre_hook(self._proj_o(m)))
        elif not on and self._layer_hooks:
            for h in self._layer_hooks:
                h.remove()
            self._layer_hooks = []
            self._stack = []

    def _model_pre(self, module, args):
        if not self._manual and module.training and torch.is_grad_enabled():
            self._begin(self._step + 1)

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
        if self._want_x and args and torch.is_tensor(args[0]) and args[0].dim() == 3:
            slot["extra"]["x"] = _host(args[0])
        if self._want_w:
            for name, w in self._weights(module).items():
                slot["extra"][name] = _host(w.detach().clone())  # the optimizer updates weights in place

    def _module_post(self, module, args, out):
        if self._stack:
            self._stack.pop()

    @staticmethod
    def _weights(module):
        if _style(module) == "nanogpt":
            w = module.c_attn.weight
            C = w.shape[1]
            return {"w_q": w[:C], "w_k": w[C:2 * C], "w_v": w[2 * C:], "w_o": module.c_proj.weight}
        if _style(module) == "llama":
            return {"w_q": module.q_proj.weight, "w_k": module.k_proj.weight, "w_v": module.v_proj.weight,
                    "w_o": module.o_proj.weight}
        return {}

    def _nanogpt_qkv(self, module):
        def hook(mod, args, out):
            layer = self._layer_of[id(module)]
            if not self._layer_wanted(layer):
                return
            H = _attr(module, "n_head", "num_heads", "num_attention_heads")
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
            H = slot["proj"].get("heads") or _attr(module, "n_head", "num_heads", "num_attention_heads")
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
        if self._stack:
            layer = self._stack[-1]
        else:
            layer, self._calls = self._calls, self._calls + 1
        if not self._layer_wanted(layer):
            return
        slot = self._slot(layer)
        module = self.modules[layer] if layer < len(self.modules) else None
        Hkv = _attr(module, "num_key_value_heads", "n_kv_head", "n_kv_heads") if module is not None else None
        if Hkv and k.shape[1] == q.shape[1] and Hkv < q.shape[1]:  # k, v repeated for GQA before the call
            rep = q.shape[1] // Hkv
            k, v = k[:, ::rep], v[:, ::rep]
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
            self._q.put((self._step, layers))

    def _layer_tensors(self, layer, slot):
        call, proj, info = slot["call"], slot["proj"], slot["info"]
        if "q" in call:
            t = {n: call[n] for n in ("q", "k", "v", "o", "lse", "do") if n in call}
        elif "q" in proj and "o" in proj:
            t = {n: proj[n] for n in ("q", "k", "v", "o", "lse", "do") if n in proj}
            info.update(kind="eager (%s)" % _style(self.modules[layer]), causal=proj["causal"],
                        scale=1.0 / math.sqrt(proj["q"][0].shape[-1]), policy=None, dtype=proj["dtype"],
                        device=proj["device"])
        else:
            self._warn_once("noqkv%d" % layer, "layer %d: no attention call seen (use tilescope.torch.attention or "
                            "F.scaled_dot_product_attention, or a nanoGPT-style c_attn): not captured" % layer)
            return None
        t.update(slot["extra"])
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
                step, layers = item
                if self._cap is None:
                    continue
                try:
                    with self._cap.step(step):
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
