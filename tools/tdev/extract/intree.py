"""``--in-tree``: perform the extraction inside a git checkout of PyTorch, as one commit.

The ``kind: cuda`` files are moved with ``git mv`` to ``third_device/torch_cuda/<destination>``
(git records them as renames); the supplements, split regions, patches, report and manifest are
written beside them and added; then one commit whose message lists the counts. The patches are
not applied: they stay in ``third_device/torch_cuda/torch_patches`` (``tdev patch apply``).

Refused (InTreeError, nothing touched): a path that is not the top of a git checkout, tracked
files with uncommitted changes, an existing ``third_device/torch_cuda``, ``kind: cuda`` files git
does not track. If anything fails half way, the checkout is put back (``git reset --hard`` to
the commit it started from, which was clean, and the new directory removed).
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from basekit.errors import InputError
from basekit.fs import write_atomic, safe_join

from .layout import MANIFEST_NAME
from .plan import ExtractionPlan
from .writer import contents, manifest_bytes

IN_TREE_DIR = "third_device/torch_cuda"
GIT_MV_BATCH = 200


class InTreeError(InputError):
    """The checkout cannot take an in-tree extraction; nothing was changed."""


@dataclass(frozen=True)
class InTreeResult:
    root: str
    out: str
    commit: str
    message: str
    moved: int
    added: int

    def to_json(self) -> dict[str, Any]:
        return {"root": self.root, "out": self.out, "commit": self.commit, "message": self.message,
                "moved": self.moved, "added": self.added}


def commit_message(plan: ExtractionPlan) -> str:
    s = plan.summary()
    commit = f" (commit {plan.torch_commit[:12]})" if plan.torch_commit else ""
    return (f"Move the CUDA backend to {IN_TREE_DIR} (tdev extract)\n\n"
            f"PyTorch {plan.torch_version}{commit}, layout {Path(plan.layout.source).name}\n"
            f"- moved: {s['moved']} files (git mv, byte-identical)\n"
            f"- supplemented: {s['supplemented']} files copied (headers, templates, codegen inputs)\n"
            f"- split: {s['split_regions']} CUDA-only regions out of {s['split_files']} mixed C/C++ files\n"
            f"- python rewrites: {s['python_rewrites']} files\n"
            f"- patches: {s['patches']} in {IN_TREE_DIR}/{plan.layout.patches_dir} (not applied)\n"
            f"- left for review: {s['review']} items ({IN_TREE_DIR}/EXTRACT_REPORT.json)\n")


def _open_repo(root: Path):
    import git

    try:
        repo = git.Repo(root)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise InTreeError(f"{root}: not a git checkout (--in-tree moves files with git mv)") from None
    if Path(os.path.realpath(repo.working_tree_dir)) != Path(os.path.realpath(root)):
        raise InTreeError(f"{root}: not the top of its git checkout ({repo.working_tree_dir})")
    try:
        repo.head.commit
    except ValueError:
        raise InTreeError(f"{root}: the repository has no commit yet") from None
    return repo


def preflight(root: str | Path):
    """The checkout's checks that need no plan (run before the scan, so a refusal is at once):
    the top of a git checkout with a commit, no uncommitted changes, no earlier extraction."""
    root = Path(root)
    repo = _open_repo(root)
    if repo.is_dirty(index=True, working_tree=True, untracked_files=False):
        raise InTreeError(f"{root}: tracked files have uncommitted changes; commit or stash them first")
    out = root / IN_TREE_DIR
    if os.path.lexists(out):
        raise InTreeError(f"{out}: already exists (an earlier extraction?)")
    return repo


def extract_in_tree(plan: ExtractionPlan) -> InTreeResult:
    root = Path(plan.root)
    repo = preflight(root)
    out = root / IN_TREE_DIR
    tracked = set(repo.git.ls_files("-z").split("\0"))
    untracked = [m.source for m in plan.moves if m.source not in tracked]
    if untracked:
        raise InTreeError(f"{root}: {len(untracked)} CUDA file(s) are not tracked by git "
                          f"(first: {untracked[0]}); git mv cannot move them")
    start = repo.head.commit.hexsha
    data, entries = contents(plan)
    moved = {m.dest for m in plan.moves}
    try:
        _git_mv(repo, root, out, plan)
        written = [dest for dest in sorted(data) if dest not in moved]
        for dest in written:
            b, exe = data[dest]
            path = safe_join(out, dest)
            write_atomic(path, b)
            if exe:
                os.chmod(path, 0o755)
        write_atomic(out / MANIFEST_NAME, manifest_bytes(plan, entries, out))
        repo.git.add("-f", "--", IN_TREE_DIR)
        message = commit_message(plan)
        commit = repo.index.commit(message, skip_hooks=True)
    except BaseException:
        repo.git.reset("--hard", start)
        shutil.rmtree(out, ignore_errors=True)
        raise
    return InTreeResult(str(root), str(out), commit.hexsha, message, len(plan.moves), len(written) + 1)


def _git_mv(repo, root: Path, out: Path, plan: ExtractionPlan) -> None:
    """git mv each moved file, batched by destination directory."""
    by_dir: dict[str, list[str]] = {}
    for m in plan.moves:
        if os.path.basename(m.dest) != os.path.basename(m.source):
            raise InTreeError(f"{m.source} -> {m.dest}: git mv keeps the file name")
        by_dir.setdefault(os.path.dirname(m.dest), []).append(m.source)
    for d, sources in sorted(by_dir.items()):
        target = safe_join(out, d) if d else out
        target.mkdir(parents=True, exist_ok=True)
        rel = os.path.relpath(target, root)
        for i in range(0, len(sources), GIT_MV_BATCH):
            repo.git.mv("--", *sources[i:i + GIT_MV_BATCH], rel)
