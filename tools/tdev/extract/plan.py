"""Plan an extraction: from a scan and a layout to every file the output will hold, without
writing anything. ``make_plan`` reads the tree (the mixed files, the include closure) and runs
the preprocessing check of the split; ``ExtractionPlan`` is the value the writer, ``--dry-run``
and ``--in-tree`` work from."""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

Progress = Callable[[str, int, int], None]  # (stage, done, total)

from tdev.scan.cpp import find_cuda_regions
from tdev.scan.model import ScanResult
from tdev.scan.rules import Rules, load_rules
from tdev.scan.walk import walk_tree

from . import ppcheck
from .intrafile import SplitPlan, plan_split
from .layout import MANIFEST_NAME, REPORT_NAME, Layout, LayoutError, check_relpath
from .patches import PatchFile, build_patches, series_text
from .pyrewrite import PyRewrite, rewrite_python
from .supplement import SupplementResult, supplement


@dataclass(frozen=True)
class Move:
    source: str
    dest: str
    layout_rule: str
    scan_rules: tuple[str, ...]
    size: int


@dataclass(frozen=True)
class Copy:
    source: str
    dest: str
    layout_rule: str
    reason: str
    size: int


@dataclass(frozen=True)
class ReviewItem:
    path: str
    kind: str  # split | check | python | include | relative-include
    reason: str
    lines: tuple[int, int] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "kind": self.kind, "reason": self.reason,
                "lines": list(self.lines) if self.lines else None}


@dataclass
class ExtractionPlan:
    root: str
    torch_version: str
    torch_commit: str | None
    layout: Layout
    moves: list[Move]
    copies: list[Copy]
    splits: list[SplitPlan]  # the rewritten mixed C/C++ files (each with its fragments)
    rewrites: list[PyRewrite]
    patches: list[PatchFile]
    review: list[ReviewItem]
    includes: SupplementResult
    checked: dict[str, ppcheck.CheckResult] = field(default_factory=dict)
    left_files: list[str] = field(default_factory=list)  # mixed C/C++ files with regions, not split
    timings: dict[str, float] = field(default_factory=dict)

    def generated_files(self) -> dict[str, str]:
        """Output path -> text of everything the plan writes besides copies of tree files
        (region files, patches, the series file); the manifest and report come from the writer."""
        out = {f.dest: f.text for s in self.splits for f in s.fragments}
        pdir = self.layout.patches_dir
        for p in self.patches:
            out[f"{pdir}/{p.name}"] = p.text
        if self.patches:
            out[f"{pdir}/series"] = series_text(self.patches)
        return out

    def summary(self) -> dict[str, Any]:
        per_rule = Counter(m.layout_rule for m in self.moves)
        return {
            "torch_version": self.torch_version, "torch_commit": self.torch_commit,
            "moved": len(self.moves), "supplemented": len(self.copies),
            "supplement_reasons": dict(sorted(Counter(c.reason for c in self.copies).items())),
            "split_files": len(self.splits), "split_regions": sum(len(s.fragments) for s in self.splits),
            "split_left_for_review": len(self.left_files),
            "regions_left_for_review": sum(1 for r in self.review if r.kind == "split" and r.lines),
            "python_rewrites": len(self.rewrites), "patches": len(self.patches),
            "public_headers_referenced": len(self.includes.references),
            "external_includes": self.includes.external,
            "generated_includes": dict(self.includes.generated),
            "unresolved_includes": len(self.includes.unresolved),
            "review": len(self.review), "per_layout_rule": dict(sorted(per_rule.items())),
            "timings": {k: round(v, 3) for k, v in self.timings.items()},
        }

    def report(self) -> dict[str, Any]:
        """EXTRACT_REPORT.json: what needs a person, and what the code refers to (deterministic)."""
        return {
            "schema": 1,
            "torch": {"version": self.torch_version, "commit": self.torch_commit},
            "counts": {k: v for k, v in self.summary().items()
                       if k not in ("timings", "torch_version", "torch_commit")},
            "review": [r.to_json() for r in self.review],
            "split": [{"path": s.path, "regions": [{"lines": [f.start, f.end], "condition": f.condition,
                                                    "dest": f.dest} for f in s.fragments]}
                      for s in self.splits],
            "python_rewrites": [{"path": r.path, "changes": [{"line": ln, "change": c} for ln, c in r.changes]}
                                for r in self.rewrites],
            "unresolved_includes": [{"path": u.path, "line": u.line, "include": u.include}
                                    for u in self.includes.unresolved],
            "public_headers_referenced": self.includes.references,
        }


def tree_commit(root: Path) -> str | None:
    if not (root / ".git").exists():
        return None
    try:
        import git
        return git.Repo(root).head.commit.hexsha
    except Exception:  # not a usable checkout (no commit yet, broken .git): no commit to record
        return None


def _read(root: Path, path: str) -> str:
    with open(root / path, "rb") as fh:
        return fh.read().decode("utf-8", "surrogateescape")


def make_plan(root: str | Path, scan: ScanResult, layout: Layout, *, rules: Rules | None = None,
              jobs: int = 2, exclude: tuple[str, ...] = (), progress: Progress | None = None,
              verdicts: dict[str, list] | None = None) -> ExtractionPlan:
    """Plan the extraction of ``root`` as ``scan`` classified it. LayoutError for a scan or layout
    that cannot be followed (a path outside the tree, no rule for a file, two files at one place).
    Without a C++ preprocessor the split cannot be checked: nothing is split (review items).
    ``exclude``: directories of the tree to ignore (an earlier output written inside it).
    ``progress(stage, done, total)``: called as the stages advance (a terminal's progress line).
    ``verdicts``: stored preprocessing-check verdicts (``ppcache``), used and added to."""
    advance: Progress = progress or (lambda stage, done, total: None)
    t0 = time.perf_counter()
    advance("reading the tree", 0, 1)
    timings: dict[str, float] = {}
    root = Path(root).resolve()
    rules = rules or load_rules()
    prefixes = tuple(e.rstrip("/") + "/" for e in exclude)
    nested: list[str] | None = [] if rules.walk.skip_nested_repos else None  # as the scan walks
    entries = {e.path: e for e in walk_tree(root, rules.walk.skip_dirs, nested, extractions=[])
               if not e.path.startswith(prefixes)}
    files = set(entries)
    if prefixes:
        scan = ScanResult(scan.root, scan.torch_version, [f for f in scan.files if not f.path.startswith(prefixes)],
                          scan.files_scanned, scan.warnings, scan.seconds, scan.cache_hits)
    for f in scan.files:
        check_relpath(f.path, "scan")
        if f.path not in files:
            raise LayoutError(f"the scan lists {f.path}, which is not in {root} (a scan of another tree?)")
    moves = []
    for f in sorted(scan.by_kind("cuda"), key=lambda f: f.path):
        dest, rule = layout.destination(f.path)
        moves.append(Move(f.path, dest, rule, tuple(f.rules()), entries[f.path].size))
    timings["map"] = time.perf_counter() - t0

    t = time.perf_counter()
    cpp = tuple(rules.cpp.suffixes)
    mixed = sorted(f.path for f in scan.by_kind("mixed"))
    regions_found = {f.path for f in scan.by_kind("mixed") if any(e.rule == "pp-region" for e in f.evidence)}
    splits, review, cuda_lines, left = [], [], {}, []
    for k, path in enumerate(mixed, 1):
        advance("splitting mixed files", k, len(mixed))
        if not path.endswith(cpp) or path not in regions_found:
            continue
        text = _read(root, path)
        regions = find_cuda_regions(text, rules.cpp.macros)
        if not regions:  # a scan made with other rules: nothing to split here
            continue
        cuda_lines[path] = [(r.start, r.end) for r in regions]
        sp = plan_split(path, text, layout, rules.cpp.macros, files.__contains__, regions)
        review += [ReviewItem(path, "split", why, lines) for lines, why in sp.review]
        (splits if sp.rewritten is not None else left).append(sp)
    timings["intrafile"] = time.perf_counter() - t

    t = time.perf_counter()
    checked: dict[str, ppcheck.CheckResult] = {}
    if splits:
        try:
            cmd = ppcheck.find_preprocessor(layout.preprocessors)
        except ppcheck.NoPreprocessor as e:  # unchecked means unsplit
            checked = {s.path: ppcheck.CheckResult(s.path, False, 0, f"not split: {e}") for s in splits}
        else:
            roots = [str(root / r) for r in layout.supplement.include_roots]
            advance("preprocessing checks", 0, len(splits))
            checked = ppcheck.check_all(cmd, [(s.path, s.original, s.rewritten) for s in splits],
                                        rules.cpp.macros, roots, jobs,
                                        lambda done, total: advance("preprocessing checks", done, total),
                                        verdicts)
        for s in [s for s in splits if not checked[s.path].ok]:
            review.append(ReviewItem(s.path, "check", checked[s.path].reason))
            splits.remove(s)
            left.append(s)
    timings["check"] = time.perf_counter() - t

    t = time.perf_counter()
    rewrites = []
    advance("python rewrites", 0, 1)
    for path in mixed:
        if path.endswith(tuple(rules.python.suffixes)):
            rw, why = rewrite_python(path, _read(root, path), layout.python_rewrites)
            if rw is not None:
                rewrites.append(rw)
            if why:
                review.append(ReviewItem(path, "python", why))
    timings["python"] = time.perf_counter() - t

    t = time.perf_counter()
    advance("include closure", 0, 1)
    moved = {m.source: m.dest for m in moves}
    fragments = [(f.source, f.start, "\n".join(s.original.split("\n")[f.start - 1:f.end]))
                 for s in splits for f in s.fragments]
    inc = supplement(str(root), files, layout, moved=moved, suffixes=cpp, fragments=fragments,
                     cuda_lines=cuda_lines, dest_of=lambda p: moved.get(p) or layout.destination(p)[0])
    copies = []
    for s in inc.supplements:
        dest, rule = layout.destination(s.source)
        copies.append(Copy(s.source, dest, rule, s.reason, entries[s.source].size))
    for path, users in inc.still_included.items():
        shown = ", ".join(users[:3]) + (f" and {len(users) - 3} more" if len(users) > 3 else "")
        review.append(ReviewItem(path, "include", f"moved, but {len(users)} file(s) outside the CUDA "
                                                  f"code include it: {shown}"))
    review += [ReviewItem(p, "relative-include", why, (ln, ln)) for p, ln, why in inc.broken_relative]
    timings["supplement"] = time.perf_counter() - t

    t = time.perf_counter()
    advance("patches", 0, 1)
    version = _version(root, scan)
    patches = build_patches(splits, rewrites, layout.mode, version)
    timings["patches"] = time.perf_counter() - t
    review.sort(key=lambda r: (r.path, r.lines or (0, 0), r.kind, r.reason))
    plan = ExtractionPlan(str(root), version, tree_commit(root), layout, moves, copies,
                          splits, rewrites, patches, review, inc, checked,
                          sorted(s.path for s in left), timings)
    check_collisions(plan)
    timings["total"] = time.perf_counter() - t0
    return plan


def _version(root: Path, scan: ScanResult) -> str:
    try:
        return (root / "version.txt").read_text(encoding="utf-8").strip() or scan.torch_version
    except OSError:
        return scan.torch_version


def check_collisions(plan: ExtractionPlan) -> None:
    """Every output path is written once; refuse a plan where two things land at one place."""
    seen: dict[str, str] = {MANIFEST_NAME: "the manifest", REPORT_NAME: "the report"}
    items = [(m.dest, m.source) for m in plan.moves] + [(c.dest, c.source) for c in plan.copies]
    items += [(p, "generated") for p in plan.generated_files()]
    for dest, what in items:
        check_relpath(dest, "destination")
        if dest in seen:
            raise LayoutError(f"two files would land at {dest}: {seen[dest]} and {what}")
        seen[dest] = what
    dirs = {d for dest in seen for d in _parents(dest)}
    clash = next((d for d in seen if d in dirs), None)
    if clash:
        raise LayoutError(f"{clash} would be both a file ({seen[clash]}) and a directory")


def _parents(path: str):
    parts = path.split("/")
    for i in range(1, len(parts)):
        yield "/".join(parts[:i])
