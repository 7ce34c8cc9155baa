#!/bin/sh
# Fills a seed corpus for one fuzz target from the test fixtures and the
# recordings: seeds.sh TARGET DIR. Regression inputs (crashes once found)
# live in t/fuzz/regress-TARGET/ and are always included.
set -eu
target=$1 dir=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$dir"
copy () { for f in "$@"; do [ -f "$f" ] && cp "$f" "$dir/$(echo "$f" | cksum | cut -d' ' -f1)"; done; return 0; }
case $target in
jsonl|watch)
	copy "$root"/t/data/recordings/*/*.jsonl "$root"/t/t*/*.jsonl ;;
yaml|manifest)
	copy "$root"/deploy/*.yaml "$root"/t/t*/*.yaml "$root"/t/t*/*.yml ;;
kubeconfig)
	copy "$root"/t/t01*/*kubeconfig* "$root"/t/t01*/*.yaml ;;
esac
[ -d "$root/t/fuzz/regress-$target" ] && copy "$root/t/fuzz/regress-$target"/*
exit 0
