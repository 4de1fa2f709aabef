"""`kueue-harness`, the command line (`commands.py`), with what its commands own: sessions and their
supervisor (`session.py`), the verdict matrix (`matrix.py`), bisect (`bisect.py`) and the bundle of a
running session (`bundle.py`). The top layer: it may import everything.
"""

from harness.cli.commands import main  # noqa: F401 - the console script `kueue-harness` (pyproject.toml)
