"""examples/python/operands.py: how the walk-throughs hand their operands to gemmkit: numpy arrays (staged through
the GPU by run), or with --torch on the command line, torch CUDA tensors (run in place)."""
import sys

torch = __import__("torch") if "--torch" in sys.argv[1:] else None


def on_device(array):
    """The operand as the walk-through passes it: the numpy array itself, or a torch CUDA tensor copy."""
    return array if torch is None else torch.from_numpy(array).cuda()


def to_numpy(tensor):
    return tensor if torch is None else tensor.cpu().numpy()
