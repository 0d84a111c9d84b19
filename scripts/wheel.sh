#!/usr/bin/env bash
# wheel.sh — the tierckpt wheel a user installs without a compiler or any -dev package:
#   scripts/wheel.sh        → dist/tierckpt-<version>-cp3XX-cp3XX-manylinux_2_35_x86_64.whl
#
# 1. `pip wheel .` as scripts/setup.sh's `python` step builds the package (its `wheel` step:
#    build/release with the release build's settings, so the compiled objects are reused);
# 2. `auditwheel repair`: copies every library the extension, tierckptd and tierckpt link
#    that is not on the manylinux list (libcurl and its chain, OpenSSL, xxHash, pugixml,
#    libmount, cpp-httplib) into tierckpt.libs/ under hashed names, points the ELF files at
#    them ($ORIGIN rpaths) and gives the wheel the oldest manylinux tag its symbols allow
#    (decision 82, docs/dependencies.md);
# 3. prints the wheel, its size and what it bundles.
# tests/wheel/test_wheel.py installs it into a clean venv and runs two ranks through it.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '[wheel] %s\n' "$*" >&2; }

scripts/setup.sh wheel
# shellcheck disable=SC1091
source .venv/bin/activate
raw=(build/wheel/raw/tierckpt-*.whl)
[ ${#raw[@]} -eq 1 ] && [ -f "${raw[0]}" ] || { say "expected one wheel in build/wheel/raw, found: ${raw[*]}"; exit 1; }
rm -rf dist
mkdir -p dist
say "auditwheel repair ${raw[0]}"
auditwheel repair -w dist "${raw[0]}" >&2
wheels=(dist/tierckpt-*manylinux*.whl)
[ ${#wheels[@]} -eq 1 ] && [ -f "${wheels[0]}" ] || { say "auditwheel wrote no manylinux wheel into dist/"; exit 1; }
whl=${wheels[0]}
bytes=$(stat -c %s "$whl")
installed=$(python -c 'import sys, zipfile; print(sum(i.file_size for i in zipfile.ZipFile(sys.argv[1]).infolist()))' "$whl")
libs=$(python -c 'import sys, zipfile; print(" ".join(sorted(n.split("/")[-1] for n in zipfile.ZipFile(sys.argv[1]).namelist() if n.startswith("tierckpt.libs/") and not n.endswith("/"))))' "$whl")
say "$whl: $(awk -v b="$bytes" 'BEGIN { printf "%.1f MB", b / 1e6 }'), $(awk -v b="$installed" 'BEGIN { printf "%.1f MB", b / 1e6 }') installed"
say "bundles $(wc -w <<<"$libs") libraries: $libs"
echo "$whl"
