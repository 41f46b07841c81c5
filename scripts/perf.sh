#!/bin/sh
# Prints the performance figures of the README's table, each with the
# command that measured it and the load average around it:
#   1. the daemon's in-sync apply on the ipq807x fixture against its floor:
#      file system calls (TestApplyNearFloor) and time (BenchmarkApplyFloor);
#   2. the same for `apply --device` (TestDeviceApplyNearFloor,
#      BenchmarkApplyFloor/*-device-eth0);
#   3. the one-shot CLI: system calls (scripts/syscount.sh, needs strace),
#      and, when the stock ucode and script are given (UCODE, UCODE_LIB,
#      STOCK_UC: see scripts/stock-compare.sh), its time against the stock
#      packet-steering.uc on every preset; without them, its time alone;
#   4. `status` through the ubus broker, calls/s (BenchmarkStatusDemo).
# Timings depend on what else runs: run it on a quiet machine.
# Usage: scripts/perf.sh [-count N] (benchmark repetitions, default 5).
set -eu
cd "$(dirname "$0")/.."
count=5
if [ "${1:-}" = "-count" ]; then
	count=$2
fi
load() { echo "  load average: $(cut -d' ' -f1-3 /proc/loadavg)"; }
# stats: the median, min and max of the numbers on stdin.
stats() {
	sort -g | awk '{ v[NR] = $1 } END {
		if (NR == 0) { print "-"; exit }
		m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%.0f (%.0f-%.0f)", m, v[1], v[NR] }'
}
# bench OUT NAME [UNIT]: the values of UNIT (default ns/op) of the
# benchmark NAME in OUT, one a line.
bench() {
	awk -v n="$2" -v u="${3:-ns/op}" '$1 ~ "^Benchmark" n "(-[0-9]+)?$" {
		for (i = 3; i <= NF; i++) if ($i == u) print $(i - 1) }' "$1"
}
# median: the median of the numbers on stdin.
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

echo "1-2. daemon apply and apply --device eth0, ipq807x fixture, in sync"
echo "  \$ go test ./steering -run 'TestApplyNearFloor|TestDeviceApplyNearFloor' -v"
load
go test ./steering -count=1 -run 'TestApplyNearFloor|TestDeviceApplyNearFloor' -v >"$dir/calls.txt" 2>&1 ||
	{ cat "$dir/calls.txt"; exit 1; }
sed -n 's/^ *[a-z_]*_test.go:[0-9]*: //p' "$dir/calls.txt" | sed 's/^/  /'
echo "  \$ go test ./steering -run '^\$' -bench ApplyFloor -count $count"
load
go test ./steering -count="$count" -run '^$' -bench ApplyFloor >"$dir/bench.txt" 2>&1 ||
	{ cat "$dir/bench.txt"; exit 1; }
for what in "" -device-eth0; do
	for unit in ns/op cpu-ns/op; do
		f=$(bench "$dir/bench.txt" "ApplyFloor/floor$what" "$unit" | stats)
		a=$(bench "$dir/bench.txt" "ApplyFloor/apply$what" "$unit" | stats)
		fm=$(bench "$dir/bench.txt" "ApplyFloor/floor$what" "$unit" | median)
		am=$(bench "$dir/bench.txt" "ApplyFloor/apply$what" "$unit" | median)
		echo "  apply$what, $unit: $a, the floor's reads alone $f: $(awk -v a="$am" -v f="$fm" 'BEGIN { printf "%.2f", a / f }')x (medians, min-max)"
	done
done
load

echo "3. one-shot CLI"
if command -v strace >/dev/null 2>&1; then
	echo "  \$ scripts/syscount.sh ipq807x eth0"
	scripts/syscount.sh ipq807x eth0 | sed 's/^/  /'
else
	echo "  system calls: not counted (no strace)"
fi
if [ -n "${UCODE:-}" ] && [ -n "${STOCK_UC:-}" ]; then
	echo "  \$ scripts/stock-compare.sh -n 20"
	scripts/stock-compare.sh -n 20 | sed 's/^/  /'
else
	echo "  against the stock script: not measured (set UCODE, UCODE_LIB and STOCK_UC; scripts/stock-compare.sh)"
	go build -o "$dir/packet-steering" ./cmd/packet-steering
	go run ./scripts/fixtureroot ipq807x "$dir/root"
	"$dir/packet-steering" apply --root "$dir/root" >/dev/null
	load
	t0=$(date +%s%N)
	i=0
	while [ "$i" -lt 20 ]; do
		"$dir/packet-steering" apply --root "$dir/root" >/dev/null
		i=$((i + 1))
	done
	t1=$(date +%s%N)
	echo "  one-shot apply, ipq807x, in sync: $(awk -v ns="$((t1 - t0))" 'BEGIN { printf "%.2f", ns / 20 / 1e6 }') ms a run (20 runs)"
fi

echo "4. status through the ubus broker, demo fixture (target >= 2,000 calls/s)"
echo "  \$ go test ./ubusobj -run '^\$' -bench StatusDemo -count $count"
load
go test ./ubusobj -count="$count" -run '^$' -bench StatusDemo >"$dir/status.txt" 2>&1 ||
	{ cat "$dir/status.txt"; exit 1; }
echo "  $(awk '$1 ~ /^BenchmarkStatusDemo/ { for (i = 1; i < NF; i++) if ($(i + 1) == "calls/s") print $i }' "$dir/status.txt" | stats) calls/s (median, min-max of $count)"
load
