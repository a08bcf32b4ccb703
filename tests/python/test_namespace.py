"""tests/python/test_namespace.py (unit): the package's public modules show their API and nothing else (dir() within
__all__, every __all__ entry real), and gemmkit.set_log_level sets the logger and the compile-progress switch."""
import importlib
import importlib.util
import logging
import pkgutil
import types

import pytest

import gemmkit


def public_modules():
    """gemmkit and its public Python submodules (gemmkit.torch only where torch is installed; the package's shared
    libraries are no modules)."""
    names = ["gemmkit"]
    for info in pkgutil.iter_modules(gemmkit.__path__):
        spec = importlib.util.find_spec(f"gemmkit.{info.name}")
        if info.name.startswith("_") or not (info.ispkg or spec.origin.endswith(".py")):
            continue
        if info.name == "torch" and importlib.util.find_spec("torch") is None:
            continue
        names.append(f"gemmkit.{info.name}")
    return names


def is_gemmkit_submodule(module, value):
    return isinstance(value, types.ModuleType) and value.__name__.startswith(module.__name__.partition(".")[0] + ".")


@pytest.mark.parametrize("name", public_modules())
def test_public_modules_export_only_their_api(name):
    module = importlib.import_module(name)
    assert isinstance(getattr(module, "__all__", None), list), f"{name} has no __all__"
    missing = [entry for entry in module.__all__ if not hasattr(module, entry)]
    assert not missing, f"{name}.__all__ names what the module lacks: {missing}"
    extra = sorted(entry for entry in dir(module) if not entry.startswith("_") and entry not in module.__all__
                   and not is_gemmkit_submodule(module, getattr(module, entry)))
    assert not extra, f"dir({name}) shows names outside its __all__: {extra}"


def test_the_checked_modules_include_the_documented_ones():
    assert {"gemmkit", "gemmkit.op", "gemmkit.epilogue", "gemmkit.swizzle", "gemmkit.emit"} <= set(public_modules())


def test_typing_helpers_are_not_attributes_of_the_package():
    for name in ("Any", "Optional", "cast", "TypeVar", "TYPE_CHECKING", "Sequence", "annotations", "logging"):
        assert not hasattr(gemmkit, name), name
        assert name not in dir(gemmkit.op), name


@pytest.fixture
def progress_calls(monkeypatch):
    """Records what set_log_level passes to the extension's set_progress (the real one would change the process's
    progress output)."""
    calls = []
    monkeypatch.setattr(gemmkit._gemmkit, "set_progress", calls.append, raising=False)
    logger = logging.getLogger("gemmkit")
    level = logger.level
    yield calls
    logger.setLevel(level)


@pytest.mark.parametrize("level, number, progress", [
    (logging.DEBUG, logging.DEBUG, True), (logging.INFO, logging.INFO, True), ("INFO", logging.INFO, True),
    (logging.WARNING, logging.WARNING, False), (logging.ERROR, logging.ERROR, False),
    ("CRITICAL", logging.CRITICAL, False)])
def test_set_log_level_sets_the_logger_and_progress(progress_calls, level, number, progress):
    gemmkit.set_log_level(level)
    assert logging.getLogger("gemmkit").level == number
    assert progress_calls == [progress]


def test_set_log_level_without_the_progress_binding(progress_calls, monkeypatch):
    monkeypatch.delattr(gemmkit._gemmkit, "set_progress")
    gemmkit.set_log_level(logging.ERROR)
    assert logging.getLogger("gemmkit").level == logging.ERROR
    assert progress_calls == []


def test_set_log_level_refuses_unknown_levels(progress_calls):
    with pytest.raises(ValueError, match="LOUD"):
        gemmkit.set_log_level("LOUD")
    assert progress_calls == []
