#!/usr/bin/env bash
# Prints the path of a python3 that imports the modules named as arguments (default: h5py numpy),
# preferring Debian's /usr/bin/python3. Exit 1, printing nothing, when there is none.
mods=${*:-h5py numpy}
imp=$(echo "$mods" | sed 's/ /, /g')
for py in /usr/bin/python3 "$(command -v python3)"; do
  [ -x "$py" ] && "$py" -c "import $imp" 2>/dev/null && { echo "$py"; exit 0; }
done
exit 1
