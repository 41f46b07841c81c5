#!/bin/sh
# Counts the system calls of one in-sync apply on a fixture root with
# strace -c: the one-shot command (`packet-steering apply`, a whole process)
# and the same with --device (the hotplug fallback). Prints one line each:
# total system calls and the file ones (openat, read, close, getdents64,
# readlinkat). Needs strace. Usage: scripts/syscount.sh [PRESET [DEV]]
# (default ipq807x eth0).
set -eu
cd "$(dirname "$0")/.."
preset=${1:-ipq807x}
dev=${2:-eth0}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/packet-steering" ./cmd/packet-steering
go run ./scripts/fixtureroot "$preset" "$dir/root"
"$dir/packet-steering" apply --root "$dir/root" >/dev/null # bring it in sync
count() { # LABEL ARGS...
	label=$1
	shift
	strace -f -c -o "$dir/strace.txt" "$dir/packet-steering" "$@" >/dev/null
	awk -v what="$label" '
		$NF == "total" { total = $4 }
		$NF ~ /^(openat|read|close|getdents64|readlinkat)$/ { n[$NF] = $4 }
		END { printf "%-40s %5d syscalls: openat %d, read %d, close %d, getdents64 %d, readlinkat %d\n",
			what, total, n["openat"], n["read"], n["close"], n["getdents64"], n["readlinkat"] }' "$dir/strace.txt"
}
count "$preset: apply" apply --root "$dir/root"
count "$preset: apply --device $dev" apply --root "$dir/root" --device "$dev"
