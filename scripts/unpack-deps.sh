#!/usr/bin/env bash
# Unpacks the .deb bundle of scripts/bundle-deps.sh into PREFIX (no root, no package manager:
# dpkg-deb where the machine has it, otherwise ar and tar), then makes it usable from there:
# the pkg-config files point into PREFIX, and PREFIX/bin holds pkg-config and ninja wrappers.
# Configure with -DENGRAM_DEPS_PREFIX=PREFIX (docs/USAGE.md, "On a GPU machine").
#   scripts/unpack-deps.sh PREFIX [BUNDLE]      default BUNDLE: third_party/deps
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { echo "usage: $0 PREFIX [BUNDLE]" >&2; exit 2; }
mkdir -p "$1"
prefix=$(cd "$1" && pwd)
bundle=${2:-$root/third_party/deps}
shopt -s nullglob
debs=("$bundle"/*.deb)
[ ${#debs[@]} -gt 0 ] || { echo "unpack-deps: no .deb files in $bundle" >&2; exit 1; }

for deb in "${debs[@]}"; do
  if command -v dpkg-deb > /dev/null; then
    dpkg-deb -x "$deb" "$prefix"
  else
    member=$(ar t "$deb" | grep '^data\.tar')
    case $member in
      *.xz) ar p "$deb" "$member" | tar -xJ -C "$prefix" ;;
      *.zst) ar p "$deb" "$member" | tar --zstd -x -C "$prefix" ;;
      *.gz) ar p "$deb" "$member" | tar -xz -C "$prefix" ;;
      *) ar p "$deb" "$member" | tar -x -C "$prefix" ;;
    esac
  fi
done

# Debian's .pc files say prefix=/usr; point them (and any other /usr path in them) into PREFIX.
for pc in "$prefix"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc "$prefix"/usr/share/pkgconfig/*.pc; do
  sed -i "s#=/usr\\([/ ]\\|\$\\)#=$prefix/usr\\1#" "$pc"
done
# Absolute symlinks would point at the machine's own /usr.
while IFS= read -r link; do
  target=$(readlink "$link")
  ln -sfn "$prefix$target" "$link"
done < <(find "$prefix/usr" -type l -lname '/*')

lib=$prefix/usr/lib/x86_64-linux-gnu
mkdir -p "$prefix/bin"
if [ -x "$prefix/usr/bin/pkgconf" ]; then
  cat > "$prefix/bin/pkg-config" <<WRAP
#!/bin/sh
LD_LIBRARY_PATH="$lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$prefix/usr/bin/pkgconf" "\$@"
WRAP
  chmod +x "$prefix/bin/pkg-config"
fi
[ -x "$prefix/usr/bin/ninja" ] && ln -sfn ../usr/bin/ninja "$prefix/bin/ninja"
echo "unpack-deps: ${#debs[@]} packages in $prefix; configure with -DENGRAM_DEPS_PREFIX=$prefix" \
     "(and PATH=$prefix/bin:\$PATH where the machine has no ninja)"
