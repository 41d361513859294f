# ctest-labels: slow (over 5 s on 2 cores)
"""examples/torch_capture.py end to end: a nanoGPT-style model (eager attention under CPU BF16
autocast) and a Llama-style one (RoPE, RMSNorm, GQA, SwiGLU) calling SDPA after repeat_kv as people
write it, and again calling tilescope.torch.attention under bf16-torch, each trained a few steps,
captured, diagnosed and reported. The dump's recorded policy is the kernel that ran: diagnose uses
it, and its replay reproduces the captured O on >= 99.9% of elements for the eager attention
(bf16-eager-cpu's documented agreement with torch, docs/PRESETS.md) and for SDPA (bf16-sdpa-math,
the repeated kv heads stored once), and on every element for the drop-in (which is that replay)."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tsc_testlib import Checks  # noqa: E402

try:
    import torch  # noqa: F401
except ImportError:
    print("SKIP: torch not importable (apt-get install python3-torch)")
    sys.exit(77)

c = Checks()
# bf16-eager-cpu models torch's CPU BF16 matmul where it is oneDNN's (CPUs with AVX-512); elsewhere the
# nanoGPT replay is not held to the 99.9% bound, only reported (eager_torch_ref.torch_bf16_matmul_modelled)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernels"))
import eager_torch_ref as ref  # noqa: E402
modelled, probe = ref.torch_bf16_matmul_modelled()
if not modelled:
    print("note: " + ref.NOT_MODELLED % probe + "; the nanogpt replay share is reported, not bounded")
example = os.path.join(os.environ["TSC_SRC"], "examples", "torch_capture.py")
with tempfile.TemporaryDirectory(prefix="tsc-example-") as tmp:
    # the Llama model as people write it (SwiGLU, repeat_kv, SDPA), and with the kernel under study
    for model, extra, policy, share in (("nanogpt", [], "bf16-eager-cpu", 0.999 if modelled else 0.0),
                                        ("llama", [], "bf16-sdpa-math", 0.999),
                                        ("llama", ["--attn", "tilescope"], "bf16-torch", 1.0)):
        out = os.path.join(tmp, model + "-".join([""] + extra[1:]))
        r = subprocess.run([sys.executable, example, "--model", model, "-o", out, "--steps", "21",
                            "--select", "steps=10:21:10,layers=1"] + extra, capture_output=True, text=True)
        c.check(r.returncode == 0, "%s: the example ran: %s" % (model, r.stderr[-2000:]))
        print(r.stdout)
        if r.returncode:
            continue
        with open(os.path.join(out, "report.pdf"), "rb") as f:
            c.check(f.read(5) == b"%PDF-", "%s: report.pdf written" % model)
        with open(os.path.join(out, "diag", "summary.json")) as f:
            s = json.load(f)
        fit = s["diagnosis"]["fit"]
        c.check(s["lp"] == policy and s["lp_source"] == "the dump's policy",
                "%s: diagnose used the recorded policy %s (%s, %s)" % (model, policy, s["lp"], s["lp_source"]))
        c.check(fit["checked"] and fit["o_identical"] >= share,
                "%s: replay under %s reproduces the captured O on %.4f%% (>= %g%%)"
                % (model, fit["policy"], 100 * fit["o_identical"], 100 * share))
        c.check("captured steps [10, 20]" in r.stdout, "%s: steps 10 and 20 captured" % model)
c.finish()
