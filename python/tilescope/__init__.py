"""tilescope from Python: capture attention tensors into dumps, read dumps, run the CLI's jobs,
and (tilescope.torch) hooks for PyTorch models plus an autograd attention under any precision
policy. See docs/PYTHON.md."""
from ._lib import TilescopeError, Selection, canonical_policy, library_path, program, version  # noqa: F401
from .attention import reference_attention  # noqa: F401
from .capture import Capture, merge, pack  # noqa: F401
from .dump import Dump, info  # noqa: F401
from .importer import import_tensors  # noqa: F401
from .jobs import analyze, check, diagnose, figure, fit, replay, report  # noqa: F401
