#!/usr/bin/env python3
"""test_fit_torch.py: `tilescope fit` on a dump written by PyTorch itself names the preset that
models it first.

Eager attention (softmax((q @ kᵀ) * scale) @ v, GQA by repeat_interleave) runs in Debian's
python3-torch under CPU BF16 autocast, forward and backward (tests/kernels/eager_torch_ref.py).
Its q, k, v, dO, O, dQ, dK, dV go into a dump written by examples/write_dump.py (no policy, no
tiles recorded: an untiled kernel). `tilescope fit --json` must rank bf16-eager-cpu first, with at
least 99.9% of O and of every gradient bit-identical, ahead of every FlashAttention-style preset,
and `tilescope analyze` on that dump (no policy recorded) replays bf16-eager-cpu and says why.
"""
import json
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, ".."))
sys.path.insert(0, os.path.join(here, "..", "kernels"))
sys.path.insert(0, os.path.join(here, "..", "..", "examples"))
from tsc_testlib import Checks  # noqa: E402

try:
    import torch  # noqa: F401
except ImportError:
    print("SKIP: torch not importable (apt-get install python3-torch)")
    sys.exit(77)

import eager_torch_ref as ref  # noqa: E402
from write_dump import write_dump  # noqa: E402


def main():
    c = Checks()
    tsc = os.environ["TSC"]
    B, H, Hkv, T, D = 1, 4, 2, 160, 64
    q, k, v, dO = ref.make_inputs(B, H, Hkv, T, D, seed=11)
    # the dump holds what torch's eager attention writes on a CPU whose BF16 matmul is oneDNN's; on one
    # where it is not (no AVX-512: ATen's fallback, not modelled), the numpy formulation of the
    # oneDNN arithmetic stands in for it, and the test says so
    modelled, share = ref.torch_bf16_matmul_modelled()
    if not modelled:
        print("note: " + ref.NOT_MODELLED % share + "; the dump is written from eager_torch_ref.numpy_eager")
    out = (ref.torch_eager if modelled else ref.numpy_eager)(q, k, v, dO, True, Hkv, leaves="bf16")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "torch.h5")
        write_dump(path, {0: {0: dict(q=q, k=k, v=v, do=dO, o=out["o"], dq=out["dq"], dk=out["dk"],
                                      dv=out["dv"])}}, producer="test_fit_torch (torch eager, CPU autocast)")
        r = subprocess.run([tsc, "fit", path, "--json"], capture_output=True, text=True)
        c.check(r.returncode == 0, "fit exit %d: %s" % (r.returncode, r.stderr))
        if r.returncode != 0:
            c.finish()
        j = json.loads(r.stdout)
        ranked = j["policies"]
        names = [p["policy"] for p in ranked]
        print("ranking:", ", ".join("%s %.3f%%" % (p["policy"], 100 * p["o"]["identical"]) for p in ranked))
        c.check(names[0] == "bf16-eager-cpu", "first is %s, not bf16-eager-cpu" % names[0])
        best = ranked[0]
        for t in ("o", "dq", "dk", "dv"):
            c.check(t in best and best[t]["n"] > 0, "%s compared" % t)
            if t in best:
                c.check(best[t]["identical"] >= 0.999, "%s identical %.5f" % (t, best[t]["identical"]))
        fa = [p for p in ranked if p["policy"] in ("bf16-fa2", "bf16-torch")]
        c.check(all(p["o"]["identical"] < best["o"]["identical"] for p in fa),
                "FlashAttention presets fit worse than the eager one")
        r2 = subprocess.run([tsc, "fit", path], capture_output=True, text=True)
        c.check("best fit: bf16-eager-cpu" in r2.stdout, "table names the best fit: " + r2.stdout[-400:])
        print(r2.stdout)
        # analyze on a dump that records no policy replays the best-fitting preset, and says so;
        # without an O to fit it falls back to bf16-fa2 and says that
        r3 = subprocess.run([tsc, "analyze", path, "-o", os.path.join(tmp, "an"), "--quiet"], capture_output=True,
                            text=True)
        c.check(r3.returncode == 0, "analyze exit %d: %s" % (r3.returncode, r3.stderr))
        s = json.load(open(os.path.join(tmp, "an", "summary.json")))
        c.check(s["lp"] == "bf16-eager-cpu", "analyze lp %s" % s["lp"])
        c.check(s["lp_source"].startswith("the dump records no policy: the best fit of its captured O ("),
                "lp_source: " + s["lp_source"])
        noo = os.path.join(tmp, "noo.h5")
        write_dump(noo, {0: {0: dict(q=q, k=k, v=v, do=dO)}})
        r4 = subprocess.run([tsc, "analyze", noo, "-o", os.path.join(tmp, "an2")], capture_output=True, text=True)
        c.check(r4.returncode == 0, "analyze (no o) exit %d: %s" % (r4.returncode, r4.stderr))
        s = json.load(open(os.path.join(tmp, "an2", "summary.json")))
        c.check(s["lp"] == "bf16-fa2" and s["lp_source"] == "the dump records no policy and no O to fit: the "
                "bf16-fa2 default (pass --lp)", "no-o lp %s / %s" % (s["lp"], s["lp_source"]))
        c.check("lp: the dump records no policy and no O to fit" in r4.stdout, "printed: " + r4.stdout[:300])
    c.finish()


if __name__ == "__main__":
    main()
