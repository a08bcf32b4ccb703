"""tests/python/torch_ops_support.py: what the test_torch_ops_*.py files share (gemmkit.torch's custom ops): meta
tensors for the unit tier, and the GPU tier's small integers (fp16 holds every integer up to 2048), the float64
reference of an activated GEMM and the row- and column-major layouts. Imported after the tests' importorskip of
torch."""
import torch

import gemmkit.torch as gt


def meta(*shape, dtype=torch.float16, grad=False):
    return torch.empty(*shape, dtype=dtype, device="meta", requires_grad=grad)


def integers(*shape, seed, dtype=torch.float16, low=-4, high=5):
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(low, high, shape, generator=generator).to(dtype).cuda()


def reference(A, B, C=None, alpha=1.0, beta=0.0, activation="identity", dtype=torch.float16):
    z = alpha * torch.matmul(A.double(), B.double())
    if C is not None:
        z = z + beta * C.double()
    return gt._ACTIVATIONS[activation].forward(z, 0.01).to(dtype)


LAYOUTS = {"row": lambda x: x, "col": lambda x: x.mT.contiguous().mT}
