"""mkdocs hooks: one set of Markdown files for GitHub and for the site.

The pages link the way GitHub reads them: ``README.md`` links to ``docs/tools.md``, a page
in ``docs/`` links to ``../bench/RESULTS.md``. For the site this module

- makes ``README.md`` the home page (``index.md``), its links re-pointed into the site;
- brings the repository files the pages link to outside ``docs/`` (``CHANGELOG.md``, the
  benchmark results, a JSON schema) into the site under ``repo/``, so those links keep
  working and a link to a file that does not exist still fails ``mkdocs build --strict``;
- gives mkdocstrings a source tree in which ``agentcore.contracts`` and
  ``agentcore.adapters`` sit where the package installs them (``pyproject.toml`` maps
  ``contracts/`` and ``adapters/`` there), so the API reference reads this checkout.
"""

from __future__ import annotations

import logging
import posixpath
import re
import shutil
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

log = logging.getLogger("mkdocs.hooks.agentcore")

ROOT = Path(__file__).resolve().parent
DOCS = "docs"
REPO_PREFIX = "repo"  # where files from outside docs/ land in the site
SOURCE_TREE = ROOT / "build" / "docs-src"  # read by mkdocstrings (mkdocs.yml: paths)
MAPPED = {"contracts": "contracts", "adapters": "adapters"}  # agentcore.<name> -> <dir>/

# [text](target) and ![alt](target), outside code spans and fences
_LINK = re.compile(r"(!?\[[^\]]*\]\()([^)\s]+)(\))")
_FENCE = re.compile(r"^(```|~~~)")

# site path (src_uri) -> the file's path in the repository, for pages not under docs/
_REPO_PATHS: dict[str, str] = {}


@event_priority(100)  # before mkdocstrings looks for its paths
def on_config(config: Any) -> Any:
    """Lay out the source tree mkdocstrings reads: links, not copies."""
    if SOURCE_TREE.exists():
        shutil.rmtree(SOURCE_TREE)
    package = SOURCE_TREE / "agentcore"
    package.mkdir(parents=True)
    for entry in (ROOT / "agentcore").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for name, directory in MAPPED.items():
        (package / name).symlink_to(ROOT / directory)
    return config


def _repo_path(src_uri: str) -> str:
    return _REPO_PATHS.get(src_uri, posixpath.join(DOCS, src_uri))


def _site_path(repo_path: str) -> str | None:
    """Where a repository file is in the site, or None when it is not there."""
    if repo_path.startswith(DOCS + "/"):
        return repo_path[len(DOCS) + 1 :]
    for src_uri, path in _REPO_PATHS.items():
        if path == repo_path:
            return src_uri
    return None


def _targets(markdown: str) -> list[str]:
    """The relative link targets of a Markdown text, code blocks left out."""
    found: list[str] = []
    fenced = False
    for line in markdown.splitlines():
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            for match in _LINK.finditer(re.sub(r"`[^`]*`", "", line)):
                target = match.group(2)
                if not re.match(r"[a-z]+:|#|/", target):
                    found.append(target.split("#", 1)[0])
    return found


def _add(files: Files, config: Any, repo_path: str) -> File:
    src_uri = "index.md" if repo_path == "README.md" else posixpath.join(REPO_PREFIX, repo_path)
    _REPO_PATHS[src_uri] = repo_path
    file = File.generated(config, src_uri, abs_src_path=str(ROOT / repo_path))
    files.append(file)
    return file


def on_files(files: Files, config: Any) -> Files:
    """The README as the home page, and the repository files the pages link to."""
    _REPO_PATHS.clear()
    queue = [(f.src_uri, Path(f.abs_src_path).read_text()) for f in files.documentation_pages()]
    _add(files, config, "README.md")
    queue.append(("index.md", (ROOT / "README.md").read_text()))
    while queue:
        src_uri, markdown = queue.pop()
        base = posixpath.dirname(_repo_path(src_uri))
        for target in _targets(markdown):
            path = posixpath.normpath(posixpath.join(base, target))
            if path.startswith(("..", DOCS + "/")) or _site_path(path):
                continue  # outside the repository (mkdocs reports it), in docs/, or added
            if (ROOT / path).is_file():
                file = _add(files, config, path)
                if file.is_documentation_page():
                    queue.append((file.src_uri, (ROOT / path).read_text()))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Re-point the links of a page read from outside docs/, or to a file outside docs/."""
    src_uri = page.file.src_uri
    repo_path = _repo_path(src_uri)
    base = posixpath.dirname(repo_path)
    here = posixpath.dirname(src_uri)
    foreign = src_uri in _REPO_PATHS and src_uri != "index.md"

    def relink(match: re.Match[str]) -> str:
        target = match.group(2)
        if re.match(r"[a-z]+:|#|/", target):
            return match.group(0)
        path, _, anchor = target.partition("#")
        in_repo = posixpath.normpath(posixpath.join(base, path))
        site = _site_path(in_repo)
        if site is None:
            if foreign:  # a folder or a file left out: its name, not a dead link
                return f"`{match.group(1)[1:-2] or path}`"
            return match.group(0)  # mkdocs reports it
        new = posixpath.relpath(site, here or ".")
        return f"{match.group(1)}{new}{'#' + anchor if anchor else ''}{match.group(3)}"

    out: list[str] = []
    fenced = False
    for line in markdown.splitlines(keepends=True):
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
            out.append(line)
        elif not fenced and (foreign or src_uri == "index.md" or "../" in line):
            out.append(_LINK.sub(relink, line))
        else:
            out.append(line)
    return "".join(out)
