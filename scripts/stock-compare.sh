#!/bin/sh
# Runs OpenWrt's stock packet-steering.uc next to packet-steering on the
# fixture root of each preset (platform/fixture) and
#   (a) compares what the stock script writes (modes 0, 1, 2, and 1 with
#       -l 256) with what `packet-steering plan --mode off|legacy|all`
#       decides on the same root: rps_cpus, rps_flow_cnt and the NAPI
#       threads' CPUs; any difference is printed and makes the exit status 1;
#   (b) times RUNS runs of the stock script (mode 1, writing the fixture)
#       against RUNS runs of the one-shot `packet-steering apply` on the same
#       root, and prints both per run and their ratio.
#
# Manual: it needs the stock ucode interpreter (not in CI), root (a private
# mount namespace), gcc and Debian's musl-dev. Usage:
#
#   UCODE=/path/to/ucode [UCODE_LIB=/path/to/its/lib] STOCK_UC=/path/to/packet-steering.uc \
#       scripts/stock-compare.sh [-n RUNS] [PRESET...]
#
# (default: RUNS 20, every preset). STOCK_UC is the script from
# openwrt/openwrt package/network/config/netifd/files/usr/libexec/network/
# packet-steering.uc; it is run unchanged.
#
# How the stock script sees the fixture: it reads absolute /sys and /proc
# paths, so each run happens in a private mount namespace (unshare -m) in
# which the fixture's sys and proc trees are bound over /sys and /proc; a
# marker file in each is checked before the script runs, so it never reads
# or writes the host's. Its writes land in the fixture (a copy made for this
# script). `taskset` is a stand-in that does nothing (the fixture's PIDs are
# not threads of this machine). Two things are adapted to a fixture and an
# x86 Debian host through LD_PRELOAD of a small library built here:
#   - the kernel refuses readlink(/proc/PID/exe) of a kernel thread with
#     ENOENT, which is how the script finds NAPI threads; the fixture copy
#     gets an exe link with a marker target for each process without one,
#     and the library's readlink answers ENOENT for that target;
#   - OpenWrt's libc is musl, and the script sorts CPUs by load with the
#     libc's qsort, which breaks ties differently under glibc: the library
#     carries musl's own qsort (the object from Debian's musl-dev libc.a).
set -eu
cd "$(dirname "$0")/.."
runs=20
if [ "${1:-}" = "-n" ]; then
	runs=$2
	shift 2
fi
: "${UCODE:?set UCODE to the stock ucode interpreter}"
: "${STOCK_UC:?set STOCK_UC to the stock packet-steering.uc}"
UCODE_LIB=${UCODE_LIB:-}
export UCODE STOCK_UC UCODE_LIB
musl_libc=${MUSL_LIBC:-/usr/lib/x86_64-linux-musl/libc.a}
[ "$(id -u)" = 0 ] || { echo "stock-compare: needs root (unshare -m)" >&2; exit 2; }
[ -f "$musl_libc" ] || { echo "stock-compare: no $musl_libc (apt-get install musl-dev)" >&2; exit 2; }

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/packet-steering" ./cmd/packet-steering
go build -o "$dir/fixtureroot" ./scripts/fixtureroot

# The preload library: musl's qsort and the kernel-thread readlink.
(cd "$dir" && ar x "$musl_libc" qsort.lo qsort_nr.lo)
cat >"$dir/shim.c" <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

/* The target of the stand-in exe link of a fixture kernel thread. */
static const char marker[] = "/.packet-steering-kthread";

ssize_t readlink(const char *restrict path, char *restrict buf, size_t len)
{
	static ssize_t (*real)(const char *, char *, size_t);
	ssize_t n;

	if (!real)
		real = (ssize_t (*)(const char *, char *, size_t))dlsym(RTLD_NEXT, "readlink");
	n = real(path, buf, len);
	if (n == (ssize_t)(sizeof marker - 1) && memcmp(buf, marker, (size_t)n) == 0) {
		errno = ENOENT;
		return -1;
	}
	return n;
}
EOF
gcc -shared -fPIC -O2 -o "$dir/shim.so" "$dir/shim.c" "$dir/qsort.lo" "$dir/qsort_nr.lo" -ldl
mkdir "$dir/bin"
ln -s /bin/true "$dir/bin/taskset"

# stock ROOT COUNT ARGS...: runs the stock script COUNT times in one
# namespace bound to ROOT; its stderr (the -n trace) and, last, the
# nanoseconds the runs took go to stderr.
stock() {
	root=$1
	count=$2
	shift 2
	# shellcheck disable=SC2016 # expanded by the inner shell
	unshare -m sh -c '
		set -eu
		root=$1 count=$2 dir=$3; shift 3
		mount --make-rprivate /
		mount --bind "$root/sys" /sys
		mount --bind "$root/proc" /proc
		test -e /sys/.packet-steering-fixture
		test -e /proc/.packet-steering-fixture
		export PATH="$dir/bin:$PATH"
		[ "$(command -v taskset)" = "$dir/bin/taskset" ]
		export LD_PRELOAD="$dir/shim.so" LD_LIBRARY_PATH="$UCODE_LIB"
		t0=$(date +%s%N)
		i=0
		while [ "$i" -lt "$count" ]; do
			"$UCODE" "$STOCK_UC" "$@"
			i=$((i + 1))
		done
		t1=$(date +%s%N)
		echo "ns $((t1 - t0))" >&2
	' stock "$root" "$count" "$dir" "$@"
}

# The awk functions both normalizers use: a mask as hex without commas
# and leading zeros, a CPU list ("0-2,5") expanded ("0,1,2,5").
awk_lib='
	function hex(s) { gsub(/,/, "", s); sub(/^0+/, "", s); return s == "" ? "0" : s }
	function list(s,   out, parts, n, i, r, a, b, c) {
		n = split(s, parts, ","); out = ""
		for (i = 1; i <= n; i++) {
			if (split(parts[i], r, "-") == 2) { a = r[1]; b = r[2] } else { a = parts[i]; b = parts[i] }
			for (c = a + 0; c <= b + 0; c++) out = out (out == "" ? "" : ",") c
		}
		return out
	}'

# normalize_stock: "KIND TARGET VALUE" lines, sorted, from the stock -n
# trace on stdin.
normalize_stock() {
	awk "$awk_lib"'
		$1 == "echo" && $4 ~ /rps_cpus$/ { split($4, p, "/"); printf "rps_cpus %s/%s %s\n", p[5], p[7], hex($2) }
		$1 == "echo" && $4 ~ /rps_flow_cnt$/ { split($4, p, "/"); printf "rps_flow_cnt %s/%s %d\n", p[5], p[7], $2 }
		$1 == "taskset" { printf "napi_affinity %s %s\n", $5, list($4) }' | sort
}

# normalize_plan: the same from `packet-steering plan` (its table).
normalize_plan() {
	awk "$awk_lib"'
		$1 == "rps_cpus" { printf "rps_cpus %s %s\n", $2, hex($4) }
		$1 == "rps_flow_cnt" { printf "rps_flow_cnt %s %d\n", $2, $4 }
		$1 == "napi_affinity" { printf "napi_affinity %s %s\n", $4, list($6) }' | sort
}

ms() { # NANOSECONDS RUNS -> milliseconds per run, 2 decimals
	awk -v ns="$1" -v n="$2" 'BEGIN { printf "%.2f", ns / n / 1e6 }'
}

if [ "$#" -eq 0 ]; then
	# shellcheck disable=SC2046 # preset names are words
	set -- $("$dir/fixtureroot" 2>&1 | sed -n 's/.*presets: \(.*\))$/\1/p' | tr -d ',')
fi
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-16s %-18s %s\n' preset compare "time per run: stock script, packet-steering apply (one-shot), ratio"
status=0
for preset in "$@"; do
	root="$dir/root-$preset"
	"$dir/fixtureroot" "$preset" "$root"
	touch "$root/sys/.packet-steering-fixture" "$root/proc/.packet-steering-fixture"
	for p in "$root"/proc/[0-9]*; do
		[ -e "$p/exe" ] || [ -L "$p/exe" ] || ln -s /.packet-steering-kthread "$p/exe"
	done
	# Beyond 32 CPUs or 10 rx queues on a device the stock script's writes
	# are wrong (masks without comma groups, queues in text order) and
	# packet-steering does the same rule right (plan/stock.go): a
	# difference there is expected, printed, and not a failure.
	ncpu=$(find "$root/sys/bus/cpu/devices" -mindepth 1 -maxdepth 1 | wc -l)
	maxq=$(for q in "$root"/sys/class/net/*/queues; do find "$q" -mindepth 1 -maxdepth 1 -name 'rx-*' | wc -l; done | sort -n | tail -1)
	documented=
	if [ "$ncpu" -gt 32 ] || [ "${maxq:-0}" -gt 10 ]; then
		documented=" (expected: $ncpu CPUs, up to ${maxq} rx queues a device)"
	fi
	verdict=same
	knobs=0
	for m in "0 off" "1 legacy" "2 all" "1 legacy 256"; do
		# shellcheck disable=SC2086 # two or three words
		set -- $m
		arg=$1 mode=$2 flows=${3:-}
		if [ -n "$flows" ]; then
			stock "$root" 1 -n -l "$flows" "$arg" 2>&1 | normalize_stock >"$dir/stock.txt"
			"$dir/packet-steering" plan --root "$root" --mode "$mode" --flows "$flows" | normalize_plan >"$dir/ours.txt"
		else
			stock "$root" 1 -n "$arg" 2>&1 | normalize_stock >"$dir/stock.txt"
			"$dir/packet-steering" plan --root "$root" --mode "$mode" | normalize_plan >"$dir/ours.txt"
		fi
		knobs=$((knobs + $(wc -l <"$dir/stock.txt")))
		if ! diff -u "$dir/stock.txt" "$dir/ours.txt" >"$dir/diff.txt"; then
			if [ -n "$documented" ]; then
				verdict=differs$documented
			else
				verdict=DIFFERENT
				status=1
			fi
			echo "$preset: stock mode $arg${flows:+ -l $flows} vs --mode $mode${flows:+ --flows $flows} (- stock, + packet-steering):"
			sed 1,2d "$dir/diff.txt"
		fi
	done
	# (b) timing: stock mode 1 writing the fixture, then the one-shot apply
	# on the same root (as configured; the first run brings it in sync).
	sns=$(stock "$root" "$runs" 1 2>&1 >/dev/null | sed -n 's/^ns //p')
	"$dir/packet-steering" apply --root "$root" >/dev/null
	t0=$(date +%s%N)
	i=0
	while [ "$i" -lt "$runs" ]; do
		"$dir/packet-steering" apply --root "$root" >/dev/null
		i=$((i + 1))
	done
	t1=$(date +%s%N)
	ons=$((t1 - t0))
	[ "$verdict" = same ] && verdict="same ($knobs writes)"
	printf '%-16s %-18s stock %s ms, apply %s ms, %sx (%s runs each)\n' "$preset" "$verdict" \
		"$(ms "$sns" "$runs")" "$(ms "$ons" "$runs")" \
		"$(awk -v a="$sns" -v b="$ons" 'BEGIN { printf "%.1f", a / b }')" "$runs"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$status"
