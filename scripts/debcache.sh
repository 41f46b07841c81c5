# shellcheck shell=sh
# Debian packages fetched with `apt-get download` and unpacked with
# `dpkg-deb -x` into a cache under out/, without installing them and
# without touching the system's apt state. Sourced by scripts that need a
# toolchain or a foreign-architecture library only for a build
# (scripts/test-go123.sh, scripts/size-feed.sh).
#
# debcache_apt DIR SOURCE_LINE: sets DEBCACHE_APT to apt-get options for
# an apt configuration of its own under DIR/apt (sources list, package
# lists, caches) with the single source SOURCE_LINE, and downloads its
# lists (apt-get update) unless they are already there. Signatures are
# checked as for the system's sources: the source line names the keyring
# (signed-by=...), and apt refuses unsigned or badly signed lists.
# An empty SOURCE_LINE uses the system's sources and lists.
#
# debcache_deb DIR PKG ARCH: prints the path of PKG:ARCH's .deb in DIR/deb,
# downloading it first when no copy is there (ARCH "all" for an
# architecture-independent package). Returns non-zero, with apt's message
# on stderr, when it cannot.
#
# debcache_get DIR PKG ARCH: as debcache_deb, and prints the directory the
# package is unpacked in (DIR/x/<deb name>) instead.

debcache_apt() {
	_dc_dir=$1
	_dc_line=$2
	# apt's download user cannot write into a directory of root's.
	DEBCACHE_APT="-o APT::Sandbox::User=root"
	_debcache_module "$_dc_dir"
	[ -n "$_dc_line" ] || return 0
	_dc_apt=$_dc_dir/apt
	mkdir -p "$_dc_apt/lists/partial" "$_dc_apt/cache/archives/partial"
	if [ ! -f "$_dc_apt/sources.list" ] || [ "$(cat "$_dc_apt/sources.list")" != "$_dc_line" ]; then
		printf '%s\n' "$_dc_line" >"$_dc_apt/sources.list"
		rm -f "$_dc_apt/lists/"*_Packages* "$_dc_apt/lists/"*Release*
	fi
	DEBCACHE_APT="-o Dir::Etc::sourcelist=$_dc_apt/sources.list -o Dir::Etc::sourceparts=- \
-o Dir::State::Lists=$_dc_apt/lists -o Dir::Cache=$_dc_apt/cache \
-o Acquire::Languages=none $DEBCACHE_APT"
	if ! ls "$_dc_apt/lists/"*_Packages* >/dev/null 2>&1; then
		# shellcheck disable=SC2086 # DEBCACHE_APT is a list of options
		apt-get $DEBCACHE_APT -q update >&2 || return 1
		ls "$_dc_apt/lists/"*_Packages* >/dev/null 2>&1 || {
			echo "debcache: apt-get update fetched no package list for: $_dc_line" >&2
			return 1
		}
	fi
}

# _debcache_module DIR: makes DIR a Go module of its own, so that the
# repository's ./... patterns (go build, vet, test) leave out what is
# unpacked there (a Go source tree, with its test programs, is).
_debcache_module() {
	mkdir -p "$1"
	[ -f "$1/go.mod" ] || printf 'module debcache\n' >"$1/go.mod"
}

# _debcache_newest DIR PKG ARCH: prints the last (in glob order) .deb of
# PKG for ARCH in DIR, or nothing.
_debcache_newest() {
	_dc_last=
	for _dc_f in "$1/$2_"*"_$3.deb"; do
		[ -e "$_dc_f" ] && _dc_last=$_dc_f
	done
	printf '%s' "$_dc_last"
}

debcache_deb() {
	_dc_dir=$1
	_dc_pkg=$2
	_dc_arch=$3
	_debcache_module "$_dc_dir"
	mkdir -p "$_dc_dir/deb"
	_dc_deb=$(_debcache_newest "$_dc_dir/deb" "$_dc_pkg" "$_dc_arch")
	if [ -z "$_dc_deb" ]; then
		# An architecture-independent package is named without a qualifier.
		_dc_name=$_dc_pkg:$_dc_arch
		[ "$_dc_arch" != all ] || _dc_name=$_dc_pkg
		# shellcheck disable=SC2086 # DEBCACHE_APT is a list of options
		(cd "$_dc_dir/deb" && apt-get $DEBCACHE_APT -q download "$_dc_name" >&2) || return 1
		_dc_deb=$(_debcache_newest "$_dc_dir/deb" "$_dc_pkg" "$_dc_arch")
		[ -n "$_dc_deb" ] || {
			echo "debcache: no .deb for $_dc_pkg:$_dc_arch appeared in $_dc_dir/deb" >&2
			return 1
		}
	fi
	printf '%s\n' "$_dc_deb"
}

debcache_get() {
	_dc_deb=$(debcache_deb "$@") || return 1
	_dc_x=$1/x/$(basename "$_dc_deb" .deb)
	if [ ! -d "$_dc_x" ]; then
		rm -rf "$_dc_x.tmp"
		mkdir -p "$1/x"
		dpkg-deb -x "$_dc_deb" "$_dc_x.tmp" || return 1
		mv "$_dc_x.tmp" "$_dc_x"
	fi
	printf '%s\n' "$_dc_x"
}
