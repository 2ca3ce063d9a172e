#!/usr/bin/env bash
# Make the stage-1 environment of a standalone torch_cuda build: a virtual environment holding
# `torch==VERSION` from PyPI (for 2.6.0 the CUDA 12.4 build, with its nvidia-* libraries), the
# packages in tools/tdev/data/cuda_libraries.yaml (stage1.requirements), and the header-only
# packages pinned for that release there (stage1.releases.VERSION.headers: cutlass,
# cudnn-frontend, nvml headers; installed with --no-deps).
#   usage: tools/setup-stage1.sh VERSION [DIR]
#          DIR: default $TDEV_STAGE1_HOME/torch-VERSION, TDEV_STAGE1_HOME defaulting to
#          ${XDG_CACHE_HOME:-~/.cache}/tdev/stage1 (where tdev.standalone.wheel looks)
# Prints the environment's path on stdout; progress goes to stderr.
# An environment that already holds all of it is reused without touching the network; one with
# the right torch but a pinned package missing gets that package added; anything else is built
# anew in a temporary directory next to DIR and renamed into place (the old one is only moved
# away when it is not usable). Exit 2: VERSION is not a release, or PyPI has no wheel for it.
# Env: TDEV_STAGE1_BASE_PYTHON (the interpreter of the new environment; default python3),
# PYTHON (the project's interpreter, which reads the data; default the repository's .venv, made by
# tools/setup.sh, else python3), pip's own PIP_*.
set -euo pipefail
prog=setup-stage1.sh
say() { echo "$prog: $*" >&2; }
die() { echo "$prog: $2" >&2; exit "$1"; }
[[ $# -ge 1 && $# -le 2 ]] || die 2 "usage: tools/setup-stage1.sh VERSION [DIR]"
version=$1
[[ $version =~ ^[0-9]{1,4}\.[0-9]{1,4}\.[0-9]{1,4}$ ]] || die 2 "VERSION must be a release such as 2.6.0, got '${version//[^[:print:]]/?}'"
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
home=${TDEV_STAGE1_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/tdev/stage1}
dir=${2:-$home/torch-$version}
[[ $dir == /* ]] || dir=$PWD/$dir
dir=${dir%/}
base_python=${TDEV_STAGE1_BASE_PYTHON:-python3}
project_python=${PYTHON:-$([[ -x $repo/.venv/bin/python ]] && echo "$repo/.venv/bin/python" || echo python3)}

# what to install: the project's data, read by the project's own reader
data() { PYTHONPATH="$repo/tools:$repo${PYTHONPATH:+:$PYTHONPATH}" "$project_python" -m tdev.standalone.cudalibs "$@"; }
listed=$(data requirements) && pinned=$(data headers "$version") \
  || die 1 "cannot read tools/tdev/data/cuda_libraries.yaml with $project_python (set PYTHON to the project's interpreter)"
mapfile -t requirements <<<"$listed"
mapfile -t headers < <([[ -z $pinned ]] || echo "$pinned")
[[ ${#headers[@]} -gt 0 ]] || say "no header packages pinned for $version in tools/tdev/data/cuda_libraries.yaml (cutlass, cudnn-frontend: the build will report them missing)"

# missing <env>: one line per thing the environment lacks ("torch" first when torch is wrong)
missing() {
  [[ -x $1/bin/python ]] || { echo "torch (no $1/bin/python)"; return 0; }
  "$1/bin/python" -I - "torch==$version" "${requirements[@]}" "${headers[@]}" <<'EOF' 2>&1 || echo "torch (the interpreter fails)"
import importlib.metadata as md, importlib.util as iu, os, sys
for spec in sys.argv[1:]:
    name, _, want = spec.partition("==")
    try:
        have = md.version(name)
    except md.PackageNotFoundError:
        print(f"{spec} (not installed)")
        continue
    if want and have.split("+")[0] != want:
        print(f"{spec} (has {have})")
    elif name == "torch":
        s = iu.find_spec("torch")
        base = s.submodule_search_locations[0] if s and s.submodule_search_locations else ""
        if not os.path.isfile(os.path.join(base, "lib", "libtorch_cpu.so")):
            print(f"{spec} (incomplete: no torch/lib/libtorch_cpu.so)")
EOF
}

# pip_install <env> <args...>: pip, its progress lines shown, its log kept for a failure
pip_install() {
  local env=$1; shift
  local log; log=$(mktemp "${TMPDIR:-/tmp}/setup-stage1.XXXXXX.log")
  set +e
  "$env/bin/python" -m pip install --progress-bar off --disable-pip-version-check "$@" 2>&1 \
    | tee "$log" | { grep --line-buffered -E '^ *(Collecting|Downloading|Installing|Successfully)' || true; } \
    | sed -u "s/^ */$prog:   /" >&2
  local rc=${PIPESTATUS[0]}
  set -e
  if [[ $rc -ne 0 ]]; then
    if grep -qF "torch==$version" "$log"; then  # no such wheel? (pip's words vary with constraints)
      local available
      available=$("$env/bin/python" -m pip index versions torch 2>/dev/null | sed -n 's/^Available versions: //p')
      if [[ -n $available && ", $available," != *", $version,"* ]]; then
        rm -f "$log"
        die 2 "PyPI has no torch==$version wheel for $("$env/bin/python" -c 'import sys, platform; print(f"python {sys.version_info[0]}.{sys.version_info[1]} on {platform.machine()}")') (latest: $(echo "$available" | cut -d, -f1-5))"
      fi
    fi
    tail -n 15 "$log" >&2
    rm -f "$log"
    die 1 "pip install $* failed (exit $rc)"
  fi
  rm -f "$log"
}

mkdir -p "$(dirname "$dir")"
exec 9>"$(dirname "$dir")/.$(basename "$dir").lock"
flock 9  # one setup of one environment at a time

if [[ -d $dir ]]; then
  mapfile -t lacks < <(missing "$dir")
  if [[ ${#lacks[@]} -eq 0 ]]; then
    say "reusing $dir (torch $version and its pinned packages are there)"
    echo "$dir"; exit 0
  fi
  if [[ ${lacks[0]} != torch* ]]; then  # the right torch: add what is missing, nothing replaced
    say "$dir lacks: ${lacks[*]}; adding it"
    adds=() adds_nodeps=()
    for spec in "${requirements[@]}"; do printf '%s\n' "${lacks[@]}" | grep -q "^$spec " && adds+=("$spec"); done
    for spec in "${headers[@]}"; do printf '%s\n' "${lacks[@]}" | grep -q "^$spec " && adds_nodeps+=("$spec"); done
    [[ ${#adds[@]} -eq 0 ]] || pip_install "$dir" "${adds[@]}"
    [[ ${#adds_nodeps[@]} -eq 0 ]] || pip_install "$dir" --no-deps "${adds_nodeps[@]}"
    mapfile -t lacks < <(missing "$dir")
    [[ ${#lacks[@]} -eq 0 ]] || die 1 "$dir still lacks: ${lacks[*]}"
    say "done: $dir"
    echo "$dir"; exit 0
  fi
  say "$dir is not usable (${lacks[0]}): building a new one"
fi

tmp=$(mktemp -d "$(dirname "$dir")/.$(basename "$dir").tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
say "creating a virtual environment with $("$base_python" -c 'import sys; print(sys.executable, sys.version.split()[0])')"
"$base_python" -m venv "$tmp"
say "installing torch==$version ${requirements[*]} from PyPI (the CUDA wheels are about 2.5 GB)"
pip_install "$tmp" "torch==$version" "${requirements[@]}"
if [[ ${#headers[@]} -gt 0 ]]; then
  say "installing the header packages ${headers[*]} (--no-deps)"
  pip_install "$tmp" --no-deps "${headers[@]}"
fi
# the scripts of a venv name its directory: name the final one before the rename
for f in "$tmp"/bin/* "$tmp/pyvenv.cfg"; do
  [[ -f $f && ! -L $f ]] && grep -Iq . "$f" && sed -i "s#$tmp#$dir#g" "$f"
done
mapfile -t lacks < <(missing "$tmp")
[[ ${#lacks[@]} -eq 0 ]] || die 1 "the new environment lacks: ${lacks[*]}"
if [[ -e $dir ]]; then
  old=$(mktemp -d "$(dirname "$dir")/.$(basename "$dir").old.XXXXXX")
  mv -T "$dir" "$old/env"
  mv -T "$tmp" "$dir"
  rm -rf "$old"
else
  mv -T "$tmp" "$dir"
fi
trap - EXIT
say "done in $((SECONDS - start)) s: $dir ($(du -sh "$dir" | cut -f1))"
echo "$dir"
