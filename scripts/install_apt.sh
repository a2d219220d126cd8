#!/usr/bin/env bash
# Installs the Debian packages listed in scripts/apt-packages.txt that are not installed yet.
# As root (CI, containers) it runs apt-get; otherwise it prints the command to run.
set -euo pipefail
list="$(dirname "$0")/apt-packages.txt"
missing=()
while read -r pkg _; do
  [[ -z "$pkg" || "$pkg" == \#* ]] && continue
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done < "$list"
((${#missing[@]} == 0)) && exit 0
if [[ $(id -u) -eq 0 ]]; then
  echo "installing Debian packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "some tests need Debian packages that are missing: sudo apt-get install -y ${missing[*]}" >&2
fi
