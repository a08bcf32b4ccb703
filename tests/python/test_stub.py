"""tests/python/test_stub.py (unit): python/gemmkit/_gemmkit.pyi names exactly what the extension exports."""
import ast
import pathlib

import gemmkit
from gemmkit import _gemmkit


def top_level_names(tree):
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names.add(node.name)
    return names


def test_stub_matches_the_extension():
    stub = pathlib.Path(gemmkit.__file__).with_name("_gemmkit.pyi")
    declared = top_level_names(ast.parse(stub.read_text()))
    exported = {name for name in dir(_gemmkit) if not name.startswith("__")}  # the private _evt_* too
    assert declared == exported, f"regenerate the stub: missing {exported - declared}, stale {declared - exported}"


def test_package_exports_resolve():
    for name in gemmkit.__all__:
        assert getattr(gemmkit, name) is not None, name
