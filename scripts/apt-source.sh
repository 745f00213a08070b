#!/usr/bin/env bash
# The Debian archive this machine's apt already uses, read from its own sources
# (/etc/apt/sources.list, /etc/apt/sources.list.d/*.list and *.sources), so that the scripts
# work behind whatever mirror or proxy the machine is set up for. The project names no
# mirror host of its own.
#
#   scripts/apt-source.sh mirror    the archive's URI (e.g. for debootstrap)
#   scripts/apt-source.sh deb-src   deb822 stanzas giving deb-src for the same URIs, suites,
#                                   components and keyring as the binary entries
#
# Security archives (a URI or suite with "security") are left out. Exit 1, naming the files
# read, when the machine has no binary Debian entry.
set -euo pipefail

what=${1:-mirror}
etc=${KQ_APT_ETC:-/etc/apt}   # for tests

# One line per binary entry: URI<TAB>suites (space separated)<TAB>components<TAB>signed-by
entries() {
  local f
  for f in "$etc/sources.list" "$etc"/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    # deb [options] URI suite component...
    awk '/^[ \t]*deb[ \t]/ {
      i = 2; opts = ""
      if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) { opts = opts " " $i; i++ } opts = opts " " $i; i++ }
      uri = $i; suite = $(i + 1); comps = ""
      for (j = i + 2; j <= NF; j++) comps = comps (comps ? " " : "") $j
      sb = ""; if (match(opts, /signed-by=[^] ]+/)) sb = substr(opts, RSTART + 10, RLENGTH - 10)
      printf "%s\t%s\t%s\t%s\n", uri, suite, comps, sb
    }' "$f"
  done
  for f in "$etc"/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    # deb822 stanzas, separated by blank lines
    awk 'function flush() {
           if (types ~ /(^| )deb( |$)/ && enabled != "no" && uris != "")
             { n = split(uris, u, " "); for (k = 1; k <= n; k++) printf "%s\t%s\t%s\t%s\n", u[k], suites, comps, sb }
           types = uris = suites = comps = sb = enabled = ""
         }
         /^[ \t]*$/ { flush(); next }
         /^#/ { next }
         { key = tolower($1); sub(/^[^:]*:[ \t]*/, "") }
         key == "types:" { types = $0 } key == "uris:" { uris = $0 } key == "suites:" { suites = $0 }
         key == "components:" { comps = $0 } key == "signed-by:" { sb = $0 } key == "enabled:" { enabled = $0 }
         END { flush() }' "$f"
  done
}

main=$(entries | awk -F'\t' '$1 !~ /security/ && $2 !~ /security/')
if [ -z "$main" ]; then
  echo "apt-source: no Debian archive (a binary 'deb' entry that is not a security archive) in $etc/sources.list, $etc/sources.list.d/*.list or *.sources" >&2
  exit 1
fi

case $what in
  mirror)
    printf '%s\n' "$main" | head -n 1 | cut -f1 ;;
  deb-src)
    printf '%s\n' "$main" | awk -F'\t' '{
      printf "Types: deb-src\nURIs: %s\nSuites: %s\nComponents: %s\n", $1, $2, $3
      if ($4 != "") printf "Signed-By: %s\n", $4
      printf "\n" }' ;;
  *)
    echo "usage: $0 mirror|deb-src" >&2; exit 2 ;;
esac
