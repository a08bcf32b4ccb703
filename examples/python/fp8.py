"""examples/python/fp8.py: FP8 GEMMs on SM90 the three ways a model scales them, with gemmkit's Python package.

An activation X (M x K) and a weight W (N x K) in e4m3, D = X @ W^T in bf16, quantized three ways: one scale per
tensor (folded into alpha), one per row of X and per row of W (scale vectors), and DeepSeek-V3's blocks, 1 x 128 of X
and 128 x 128 of W (gemmkit.torch.quantize_blockwise, run on the block-scaled mainloop). Each result is checked
against a float64 GEMM of the dequantized operands. Needs nvcc; running needs an SM90 GPU and torch. With --cc 90 it
plans and compiles without a GPU (and without torch), and stops where running needs one. Exits 0 when every result
matches (or, without a GPU, when planning and compiling worked).
"""
import importlib
import sys
from typing import Any, Optional

import gemmkit
from operands import gpu_present, plan_cc

M, N, K = 512, 768, 1024
E4M3_MAX = 448.0  # the largest e4m3 value: each scale maps its tensor, row or block onto [-448, 448]


def plans(cc: Optional[int]) -> dict[str, gemmkit.Gemm]:
    """One plan per scaling: the same FP8 operands (X row-major, W^T column-major), bf16 D, f32 accumulation."""
    def fp8() -> gemmkit.Gemm:
        return gemmkit.Gemm(element_A="e4m3", element_B="e4m3", element_C="bf16", element_D="bf16", layout_A="row",
                            layout_B="col", layout_C="row", element_accumulator="f32", cc=cc)

    rowwise, blockwise = fp8(), fp8()
    rowwise.scale = "row_and_column"
    blockwise.block_scaling = "blockwise"
    return {"per-tensor": fp8(), "row-wise": rowwise, "blockwise": blockwise}


def run_and_check(torch: Any, gt: Any, scaled: dict[str, gemmkit.Gemm]) -> bool:
    generator = torch.Generator(device="cuda").manual_seed(2026)
    x = torch.randn(M, K, device="cuda", generator=generator)
    w = torch.randn(N, K, device="cuda", generator=generator)
    d = torch.empty(M, N, dtype=torch.bfloat16, device="cuda")
    fp8 = torch.float8_e4m3fn
    ok = True

    def check(name: str, reference: Any) -> None:
        nonlocal ok
        error = float((d.double() - reference).abs().max() / reference.abs().max())
        good = error <= 1e-2  # bf16's rounding of D, and the tensor cores' sums inside each 128-deep block
        ok &= good
        print(f"  {name:10s}: max |D - reference| / max |reference| = {error:.1e} {'ok' if good else 'MISMATCH'}")

    # One scale per tensor: alpha carries their product.
    sx, sw = x.abs().max() / E4M3_MAX, w.abs().max() / E4M3_MAX
    xq, wq = (x / sx).to(fp8), (w / sw).to(fp8)
    scaled["per-tensor"].run(xq, wq.t(), None, d, float(sx * sw), 0.0)
    check("per-tensor", (xq.double() * sx.double()) @ (wq.double() * sw.double()).t())
    # One scale per row of X (row_scale, M) and per row of W, i.e. per column of D (column_scale, N).
    rx, rw = x.abs().amax(dim=1) / E4M3_MAX, w.abs().amax(dim=1) / E4M3_MAX
    xq, wq = (x / rx[:, None]).to(fp8), (w / rw[:, None]).to(fp8)
    scaled["row-wise"].run(xq, wq.t(), None, d, 1.0, 0.0, row_scale=rx, column_scale=rw)
    check("row-wise", (xq.double() * rx.double()[:, None]) @ (wq.double() * rw.double()[:, None]).t())
    # DeepSeek-V3's blocks: quantize_blockwise returns the scales in the layouts run() takes.
    (xq, bx), (wq, bw) = gt.quantize_blockwise(x), gt.quantize_blockwise(w, rows=128)
    scaled["blockwise"].run(xq, wq.t(), None, d, 1.0, 0.0, scale_a=bx, scale_b=bw)
    per_x = bx.double().repeat_interleave(128, dim=1)[:, :K]
    per_w = bw.double().repeat_interleave(128, dim=0)[:N].repeat_interleave(128, dim=1)[:, :K]
    check("blockwise", (xq.double() * per_x) @ (wq.double() * per_w).t())
    return ok


def main() -> bool:
    scaled = plans(plan_cc())
    specs = {name: plan.spec_for_problem(M, N, K) for name, plan in scaled.items()}
    print(f"Plans for SM{scaled['blockwise'].cc}, {M}x{N}x{K}, e4m3 -> bf16; their kernels for this shape:")
    for name, kernel in zip(specs, gemmkit.compile_many(list(specs.values()))):
        print(f"  {name:10s}: {kernel.kernel_name} ({'cache hit' if kernel.cache_hit else 'compiled'})")
    if not gpu_present(scaled["blockwise"].cc):
        return True
    torch = importlib.import_module("torch")  # FP8 tensors: numpy has no FP8 type
    ok = run_and_check(torch, importlib.import_module("gemmkit.torch"), scaled)
    print("all match" if ok else "FAILED")
    return ok


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
