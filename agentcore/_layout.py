"""Make a source checkout importable as the package it builds.

The repository keeps three top-level directories, ``agentcore/``, ``contracts/`` and
``adapters/``, and ``pyproject.toml`` maps the last two to ``agentcore.contracts`` and
``agentcore.adapters`` (setuptools ``package-dir``). An installed wheel and the strict
editable install's link tree have them in place, under ``agentcore/``; the checkout itself
does not. So whenever the checkout's ``agentcore/`` is the one imported (Python run from
the repository root puts it first on ``sys.path``), this module, imported first by the
package, appends a finder to ``sys.meta_path`` that answers for exactly those two names and
nothing else. Their submodules are then found through their ``__path__`` as usual, so every
file is loaded once, from the checkout.

It does nothing where ``agentcore/contracts`` exists (a wheel, a link tree), and nothing when
the directories beside ``agentcore/`` are not this project's. Type checkers never see it:
pyright resolves ``agentcore.contracts`` through the installed link tree.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (type checkers: True)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

__all__: list[str] = []

_MAPPED = ("contracts", "adapters")


class _SourceTreeFinder:
    """Finds ``agentcore.contracts`` and ``agentcore.adapters`` in a source checkout (a
    meta path finder by its ``find_spec``: subclassing ``importlib.abc.MetaPathFinder``
    would import ``importlib.resources``, ~10% of ``import agentcore``)."""

    def __init__(self, directories: dict[str, str]) -> None:
        self.directories = directories

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        del path, target
        directory = self.directories.get(fullname)
        if directory is None:
            return None
        import importlib.util

        return importlib.util.spec_from_file_location(
            fullname,
            os.path.join(directory, "__init__.py"),
            submodule_search_locations=[directory],
        )


def _install() -> None:
    # os.path, not pathlib: pathlib (with re, fnmatch, urllib.parse) would be most of what
    # `import agentcore` costs. Not resolved: in the strict editable link tree this file is a
    # symlink, and the link tree (which has contracts/ in place) is what decides.
    package = os.path.dirname(__file__)
    if all(os.path.isfile(os.path.join(package, name, "__init__.py")) for name in _MAPPED):
        return  # a wheel or a link tree: the subpackages are in place
    root = os.path.dirname(package)
    if not os.path.isfile(os.path.join(root, "pyproject.toml")):
        return
    parent = __name__.rpartition(".")[0]
    directories = {f"{parent}.{name}": os.path.join(root, name) for name in _MAPPED}
    if not all(os.path.isfile(os.path.join(d, "__init__.py")) for d in directories.values()):
        return
    if not any(isinstance(f, _SourceTreeFinder) for f in sys.meta_path):
        sys.meta_path.append(_SourceTreeFinder(directories))


_install()
