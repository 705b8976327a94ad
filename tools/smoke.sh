#!/usr/bin/env bash
# The core install on other Pythons (make smoke): for each version given (default 3.12 3.13), a fresh
# venv under build/, `pip install .` (a wheel built from this checkout, no extras), then
# tools/smoke_check.py run from outside the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
for v in "${@:-3.12 3.13}"; do
  for ver in $v; do
    py=""
    if command -v "python$ver" >/dev/null 2>&1 && "python$ver" -c "pass" >/dev/null 2>&1; then
      py=$(command -v "python$ver")
    elif command -v pyenv >/dev/null 2>&1; then
      full=$(pyenv versions --bare 2>/dev/null | grep -E "^$ver(\.|$)" | tail -n 1 || true)
      if [ -n "$full" ]; then py="$(pyenv root)/versions/$full/bin/python$ver"; fi
    fi
    if [ -z "$py" ] || [ ! -x "$py" ]; then
      echo "smoke: no Python $ver on this machine (python$ver or pyenv)"; exit 1
    fi
    venv="$root/build/smoke-$ver"
    rm -rf "$venv"
    "$py" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install --quiet "$root"
    (cd /tmp && OMP_NUM_THREADS=1 "$venv/bin/python" "$root/tools/smoke_check.py")
  done
done
