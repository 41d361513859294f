#!/usr/bin/env bash
# Runs a Python test with an interpreter that imports h5py and numpy (Debian's /usr/bin/python3
# first: the python3 first on PATH may be a separate build without them). Exit 77 = skipped.
py=$(bash "$(dirname "$0")/../scripts/find_python.sh") || {
  echo "SKIP: no python3 with h5py and numpy found (apt-get install python3-h5py python3-numpy)"; exit 77; }
exec "$py" "$@"
