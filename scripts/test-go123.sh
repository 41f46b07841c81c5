#!/bin/sh
# make test-go123: build, vet and test with the Go of the oldest supported
# OpenWrt release's packages feed. OpenWrt 24.10 builds Go packages with
# Go 1.23 and GOTOOLCHAIN=local (openwrt/packages: lang/golang/
# golang-package.mk, GO_PKG_BUILD_VARS), so go.mod's go directive, the
# language features, the standard library API and every dependency's own
# go directive must all be those of Go 1.23.
#
# The Go module proxy here serves no go1.23 toolchain, so the toolchain is
# Debian's: golang-1.23-go and golang-1.23-src from bookworm-backports,
# fetched with `apt-get download` under an apt configuration of its own
# (scripts/debcache.sh; signed by the Debian archive key, checked by apt)
# and unpacked into out/go123, without installing anything. With that
# GOROOT and GOTOOLCHAIN=local:
#   - `go version` must say go1.23;
#   - go build ./..., go vet ./... (default and router tags);
#   - the router build (-tags router) for linux/mipsle (softfloat, as
#     make size), linux/arm (ARMv7) and
#     linux/arm64, with their sizes printed, and the mipsle one as the
#     feed builds it (scripts/size-feed.sh: cgo, gcc, musl, dynamic);
#   - go test -short of every package but e2e and vmtest (see below).
# When the toolchain cannot be fetched (offline) it says why and exits 0,
# or 1 under PACKET_STEERING_REQUIRE_KERNEL=1 (CI), as the environment
# skips of the Go tests do.
#
# Left out of the tests, and why: e2e (it builds the daemon and runs the
# router lifecycle in network namespaces; make test-go runs it, and its
# code is compiled here by go vet) and vmtest (QEMU guests, make test-vm;
# without PACKET_STEERING_VM=1 it only skips). -short leaves out the
# kernel and timing tests, as in make test-race; make test-go has run them.
# Usage: scripts/test-go123.sh
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
# shellcheck source=scripts/debcache.sh
. "$here/scripts/debcache.sh"

cache=$here/out/go123
series=1.23
start=$(date +%s)

# skip_or_fail REASON: the toolchain is not available here.
skip_or_fail() {
	if [ "${PACKET_STEERING_REQUIRE_KERNEL:-}" = 1 ]; then
		echo "test-go123: FAIL: $1 (PACKET_STEERING_REQUIRE_KERNEL=1)" >&2
		exit 1
	fi
	echo "test-go123: SKIP: $1" >&2
	exit 0
}

# fetch_toolchain: prints the GOROOT of the unpacked golang-1.23 packages.
fetch_toolchain() {
	arch=$(dpkg --print-architecture)
	debcache_apt "$cache" "deb [arch=$arch signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm-backports main" || return 1
	godeb=$(debcache_deb "$cache" "golang-$series-go" "$arch") || return 1
	srcdeb=$(debcache_deb "$cache" "golang-$series-src" all) || return 1
	# Debian splits the tree: GOROOT is /usr/lib/go-1.23, whose src, pkg/
	# include, api, misc and test are relative links into /usr/share/go-1.23,
	# filled by both packages. Both are unpacked into one root, as dpkg
	# installs them.
	root=$cache/root-$(basename "$godeb" .deb)
	if [ ! -x "$root/usr/lib/go-$series/bin/go" ]; then
		rm -rf "$root.tmp"
		dpkg-deb -x "$godeb" "$root.tmp" || return 1
		dpkg-deb -x "$srcdeb" "$root.tmp" || return 1
		mv "$root.tmp" "$root"
	fi
	root=$root/usr/lib/go-$series
	printf '%s\n' "$root"
}

for t in apt-get dpkg-deb; do
	command -v "$t" >/dev/null 2>&1 || skip_or_fail "$t not found (Debian's apt and dpkg fetch the Go $series toolchain)"
done
if ! GOROOT=$(fetch_toolchain); then
	skip_or_fail "Debian's golang-$series-go/golang-$series-src (bookworm-backports) could not be fetched into $cache (no network?)"
fi
echo "test-go123: GOROOT=$GOROOT"

# Only the toolchain changes: the module and build caches are shared
# (cache keys include the toolchain), the go env file's settings stay.
GOTOOLCHAIN=local
PATH=$GOROOT/bin:$PATH
export GOROOT GOTOOLCHAIN PATH
unset GOFLAGS GOARCH GOOS GOARM GOMIPS

v=$(go version)
echo "test-go123: $v"
case $v in
*" go$series."[0-9]*) ;;
*) echo "test-go123: FAIL: go version is not go$series.x: $v" >&2; exit 1 ;;
esac

step() {
	echo "test-go123: $*"
	"$@"
}
step go build ./...
step go vet ./...
step go vet -tags router ./cmd/...

# The router builds, as the Makefile's size target builds them.
mkdir -p "$cache/bin"
for a in mipsle arm arm64; do
	out=$cache/bin/packet-steering-$a
	echo "test-go123: go build -tags router linux/$a"
	CGO_ENABLED=0 GOOS=linux GOARCH=$a GOMIPS=softfloat GOARM=7 \
		go build -tags router -trimpath -ldflags '-s -w -buildid=' -o "$out" ./cmd/packet-steering
	printf 'test-go123: %-40s %8d bytes (go%s)\n' "${out#"$here"/}" "$(stat -c %s "$out")" "$series"
done

# The mipsle router binary as the 24.10 feed builds it: with this Go,
# cgo, linked by gcc against musl (scripts/size-feed.sh, as in make size).
step env GO=go "$here/scripts/size-feed.sh" "${cache#"$here"/}/bin/packet-steering" mipsle

# The fixture-heavy tests create thousands of small files: on a tmpfs, as
# in scripts/test-cross.sh, when there is one.
base=${TMPDIR:-/tmp}
if [ -d /dev/shm ] && [ -w /dev/shm ] && [ "$(stat -f -c %T /dev/shm)" = tmpfs ]; then
	base=/dev/shm
fi
tmp=$(mktemp -d "$base/test-go123.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
pkgs=$(go list ./... | grep -v -e '/e2e$' -e '/vmtest$' -e '/vmtest/')
echo "test-go123: go test -short (all packages but e2e and vmtest), $(($(date +%s) - start)) s so far"
# shellcheck disable=SC2086 # pkgs is a list of import paths
PACKET_STEERING_REQUIRE_KERNEL='' TMPDIR=$tmp go test -count=1 -short -timeout 10m $pkgs
echo "test-go123: passed with $v in $(($(date +%s) - start)) s"
