"""gpu_torch_sdpa.py: torch's own attention kernels on the GPU, forward + backward, on the shapes
bench_gpu times the fast mode on (GPT-2-small B 8 H 12 T 1024 D 64; Llama-7B layer B 1 H 32 T 4096
D 128; causal, BF16): scaled_dot_product_attention with the flash backend forced, best of 10 after
warm-up, TFLOP/s counted as tilescope counts them (forward 4·T'·D, backward 10·T'·D per head, T' the
unmasked pairs). Run by bench/gpu_check.sh; needs torch with CUDA."""
import time

import torch
import torch.nn.functional as F


def flops(B, H, T, D):
    pairs = T * (T + 1) / 2
    return 14.0 * pairs * D * B * H


def bench(name, B, H, T, D):
    q, k, v = (torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    do = torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16)
    try:
        ctx = torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION)
    except AttributeError:
        ctx = torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False, enable_mem_efficient=False)
    with ctx:
        for _ in range(3):
            F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(do)
        torch.cuda.synchronize()
        best = 1e30
        for _ in range(10):
            t0 = time.perf_counter()
            F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(do)
            torch.cuda.synchronize()
            best = min(best, time.perf_counter() - t0)
    tf = flops(B, H, T, D) / best / 1e12
    print("torch %s SDPA flash, %s (B %d H %d T %d D %d causal, bf16): %.4f s, %.3f TFLOP/s = %.1f%% of 790" %
          (torch.__version__, name, B, H, T, D, best, tf, 100 * tf / 790))


if __name__ == "__main__":
    print("device:", torch.cuda.get_device_name(0))
    bench("GPT-2-small", 8, 12, 1024, 64)
    bench("Llama-7B layer", 1, 32, 4096, 128)
