#!/bin/sh
# make test-cross: the Go tests of every package but e2e, built for each
# architecture named (default: mipsle mips arm arm64) and run under qemu-user
# through scripts/cross-exec.sh, with -short. Kernel and namespace tests
# (netnstest.Skip) and e2e run natively only, in `make test-go`, which with
# PACKET_STEERING_REQUIRE_KERNEL=1 proves they ran; the switch is cleared
# here, where -short and the emulator leave them out on purpose.
#
# The fixture-heavy tests create thousands of small files; on a disk-backed
# /tmp shared with other jobs that, not the emulation, dominates the time,
# so the tests' temporary directories go to /dev/shm when it is a writable
# tmpfs. Every architecture runs even when one fails; prints the wall time
# of each and of the whole run.
#
# linux/mipsle, the smallest router target, runs the tests the way the
# router package is built (-tags router: everything but the browser demo),
# over the packages that build links; the other architectures run the
# default build, vmtest included.
# Usage: GO=go scripts/test-cross.sh [ARCH...]
set -eu
GO=${GO:-go}
[ $# -gt 0 ] || set -- mipsle mips arm arm64
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"

base=${TMPDIR:-/tmp}
if [ -d /dev/shm ] && [ -w /dev/shm ] && [ "$(stat -f -c %T /dev/shm)" = tmpfs ]; then
	base=/dev/shm
fi
tmp=$(mktemp -d "$base/test-cross.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

pkgs=$("$GO" list ./... | grep -v '/e2e$')
routerpkgs=$(echo "$pkgs" | grep -v -e '/vmtest$')
start=$(date +%s)
failed=""
for a in "$@"; do
	t0=$(date +%s)
	tags="" list=$pkgs
	if [ "$a" = mipsle ]; then
		tags=router list=$routerpkgs
	fi
	echo "test-cross: linux/$a${tags:+ -tags $tags}"
	# shellcheck disable=SC2086 # list is a list of import paths
	if PACKET_STEERING_REQUIRE_KERNEL='' TMPDIR=$tmp GOOS=linux GOARCH=$a GOMIPS=softfloat GOARM=7 CGO_ENABLED=0 \
		"$GO" test -count=1 -short -timeout 15m -tags "$tags" -exec "$here/scripts/cross-exec.sh" $list; then
		echo "test-cross: linux/$a passed in $(($(date +%s) - t0)) s"
	else
		echo "test-cross: linux/$a FAILED after $(($(date +%s) - t0)) s"
		failed="$failed $a"
	fi
done
if [ -n "$failed" ]; then
	echo "test-cross: failed on$failed ($(($(date +%s) - start)) s)"
	exit 1
fi
echo "test-cross: $* passed in $(($(date +%s) - start)) s"
