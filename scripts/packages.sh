#!/bin/bash
# shellcheck disable=SC2016,SC2012,SC2013,SC2010 # single-quoted $ is for the scripts written into packages; file names here are package and arch names
# make packages: the OpenWrt packages of this repository, .ipk (opkg,
# OpenWrt 22.03-24.10) and .apk (apk v3, OpenWrt 25.12 and later), for every
# package architecture in ARCHS below, into out/packages/ (or $1).
#
# One source: each package's feed Makefile (openwrt/*/Makefile,
# luci-app-*/Makefile), run with GNU make against openwrt/stub/ (stand-ins
# of OpenWrt's rules.mk, package.mk, golang-package.mk and luci.mk) for its
# metadata and its install recipe; openwrt/README.md has the convention.
# Packing follows OpenWrt: the .ipk as scripts/ipkg-build makes it (a
# gzip'd tar of ./debian-binary ./data.tar.gz ./control.tar.gz, GNU format,
# sorted, numeric owners), with the control file, default postinst/prerm and
# postinst-pkg/prerm-pkg of include/package-pack.mk; the .apk with
# `apk mkpkg` and the scripts package-pack.mk generates for apk.
#
# Environment: PACKET_STEERING_APK (apk-tools' apk; default
# ../shared/tools/apk-tools/apk beside the checkout, then apk in PATH),
# SOURCE_DATE_EPOCH (every mtime; default the commit time of HEAD), GO,
# PACKAGES_ARCHS (a subset of ARCHS, space-separated), PACKAGES_ONLY (package
# names to build, space-separated), PACKAGES_RELEASE (see stubmake),
# PACKET_STEERING_SHARED (the shared directory, default ../shared).
set -euo pipefail

top=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
out=${1:-$top/out/packages}
case $out in /*) ;; *) out=$PWD/$out ;; esac
GO=${GO:-go}
stub=$top/openwrt/stub

# OpenWrt package architecture -> Go target. GOARM=7 for every ARMv7 CPU with
# a VFP (golang-values.mk: an FPU other than vfp/vfpv2 gives GO_ARM=7);
# MIPS routers have no FPU (soft float, as golang-values.mk sets GO_MIPS).
ARCHS="x86_64 aarch64_generic aarch64_cortex-a53 aarch64_cortex-a72
arm_cortex-a7_neon-vfpv4 arm_cortex-a9_vfpv3-d16 arm_cortex-a15_neon-vfpv4
mipsel_24kc mips_24kc"
go_target() {
	case $1 in
	x86_64) echo "GOARCH=amd64" ;;
	aarch64_*) echo "GOARCH=arm64" ;;
	arm_*) echo "GOARCH=arm GOARM=7" ;;
	mipsel_*) echo "GOARCH=mipsle GOMIPS=softfloat" ;;
	mips_*) echo "GOARCH=mips GOMIPS=softfloat" ;;
	*) echo "packages: no Go target for architecture $1" >&2; return 1 ;;
	esac
}
archs=${PACKAGES_ARCHS:-$ARCHS}
for a in $archs; do
	# shellcheck disable=SC2086 # the list's words
	case " $(printf '%s ' $ARCHS)" in *" $a "*) ;; *) echo "packages: unknown architecture $a (known: $(printf '%s ' $ARCHS))" >&2; exit 1 ;; esac
done

SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$top" log -1 --format=%ct)}
export SOURCE_DATE_EPOCH

# ../shared beside the checkout; for a git worktree, beside the main
# checkout (the directory of the git directory the worktree shares).
shared=${PACKET_STEERING_SHARED:-$top/../shared}
if [ ! -d "$shared" ] && common=$(git -C "$top" rev-parse --path-format=absolute --git-common-dir 2>/dev/null); then
	shared=$(dirname "$common")/../shared
fi
apk=${PACKET_STEERING_APK:-}
if [ -z "$apk" ]; then
	if [ -x "$shared/tools/apk-tools/apk" ]; then
		apk=$(cd "$shared/tools/apk-tools" && pwd)/apk
	else
		apk=$(command -v apk || true)
	fi
fi
if [ -n "$apk" ] && ! "$apk" --version >/dev/null 2>&1; then
	echo "packages: $apk does not run; no .apk files" >&2
	apk=
fi
[ -n "$apk" ] || echo "packages: apk-tools not found (set PACKET_STEERING_APK, see docs/install.md): skipping the .apk files" >&2

work=$(mktemp -d "${TMPDIR:-/tmp}/packages.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Package directories: every openwrt/*/Makefile and luci-app-*/Makefile.
pkgdirs=
for mk in "$top"/openwrt/*/Makefile "$top"/luci-app-*/Makefile; do
	[ -f "$mk" ] || continue
	case $mk in "$stub"/*) continue ;; esac
	pkgdirs="$pkgdirs ${mk%/Makefile}"
done

# PACKAGES_RELEASE overrides every package's PKG_RELEASE (a newer build of
# the same sources, for upgrade tests: PACKAGES_RELEASE=2).
stubmake() {
	make -s --no-print-directory -C "$1" TOPDIR="$stub" \
		${PACKAGES_RELEASE:+PKG_RELEASE="$PACKAGES_RELEASE"} "${@:2}"
}

meta=$work/meta
mkdir -p "$meta"
for d in $pkgdirs; do
	stubmake "$d" PS_STUB_META="$meta" ps-stub-meta
done
[ -s "$meta/packages" ] || { echo "packages: no package found" >&2; exit 1; }
names=$(cat "$meta/packages")
if [ -n "${PACKAGES_ONLY:-}" ]; then
	for n in $PACKAGES_ONLY; do grep -qx "$n" "$meta/packages" || { echo "packages: no package $n" >&2; exit 1; }; done
	names=$PACKAGES_ONLY
fi

m() { cat "$meta/$1/$2" 2>/dev/null || true; }

# go_build NAME ARCH BINDIR: the package's Go program for ARCH into BINDIR,
# named as go install names it (the last element of the package path).
go_build() {
	local name=$1 arch=$2 bindir=$3 gopkg buildpkg rel tags ldflags extra=
	gopkg=$(m "$name" go_pkg)
	buildpkg=$(m "$name" go_build_pkg)
	[ -n "$buildpkg" ] || { echo "packages: $name: GO_PKG_BUILD_PKG is not set" >&2; return 1; }
	[ -z "$(m "$name" go_gcflags)" ] || { echo "packages: $name: GO_PKG_GCFLAGS is not supported (inlining stays on)" >&2; return 1; }
	rel=.${buildpkg#"$gopkg"}
	tags=$(m "$name" go_tags)
	ldflags="-s -w -buildid="
	for f in $(m "$name" go_ldflags); do
		case " $ldflags " in *" $f "*) ;; *) ldflags="$ldflags $f" ;; esac
	done
	# Go's linker aligns segments to 64 KiB on mips/mipsle; the feed's build
	# links with the target's gcc (4 KiB pages), as -R 0x1000 does.
	case $arch in mips*) extra="-R 0x1000" ;; esac
	local target key
	target=$(go_target "$arch")
	key=$(echo "$target" | tr ' =' '__')
	mkdir -p "$bindir"
	if [ ! -f "$work/go/$name/$key/${buildpkg##*/}" ]; then
		mkdir -p "$work/go/$name/$key"
		# shellcheck disable=SC2086 # $target is VAR=value words
		(cd "$top" && env $target GOOS=linux CGO_ENABLED=0 "$GO" build ${tags:+-tags "$tags"} \
			-trimpath -ldflags "$ldflags${extra:+ $extra}" -o "$work/go/$name/$key/${buildpkg##*/}" "$rel")
	fi
	cp "$work/go/$name/$key/${buildpkg##*/}" "$bindir/"
}

# stage NAME ARCH DIR: the install recipe of NAME into DIR, modes without
# group/other write (what a checkout with umask 022 gives cp -p).
stage() {
	local name=$1 arch=$2 dir=$3 bindir=
	if [ -n "$(m "$name" go_build_pkg)" ]; then
		bindir=$work/bin/$name/$arch
		go_build "$name" "$arch" "$bindir"
	fi
	stubmake "$(m "$name" dir)" PS_STUB_PKG="$name" PS_STUB_DEST="$dir" \
		${bindir:+GO_PKG_BUILD_BIN_DIR="$bindir"} ps-stub-install >/dev/null
	chmod -R go-w "$dir"
	find "$dir" \( -name '.#*' -o -name '*~' \) -exec rm -rf {} +
}

# The scripts of include/package-pack.mk.
ipk_postinst() {
	printf '%s\n' '#!/bin/sh' '[ "${IPKG_NO_SCRIPT}" = "1" ] && exit 0' \
		'[ -s ${IPKG_INSTROOT}/lib/functions.sh ] || exit 0' \
		'. ${IPKG_INSTROOT}/lib/functions.sh' 'default_postinst $0 $@'
}
ipk_prerm() {
	printf '%s\n' '#!/bin/sh' '[ -s ${IPKG_INSTROOT}/lib/functions.sh ] || exit 0' \
		'. ${IPKG_INSTROOT}/lib/functions.sh' 'default_prerm $0 $@'
}
# a script's body without its #! lines (package-pack.mk: sed '/^\s*#!/d')
body() { sed '/^[[:space:]]*#!/d' "$1"; }
apk_post_install() {
	printf '%s\n' '#!/bin/sh' '[ "${IPKG_NO_SCRIPT}" = "1" ] && exit 0' \
		'[ -s ${IPKG_INSTROOT}/lib/functions.sh ] || exit 0' \
		'. ${IPKG_INSTROOT}/lib/functions.sh' 'export root="${IPKG_INSTROOT}"' \
		"export pkgname=\"$1\"" 'add_group_and_user' 'default_postinst'
	[ ! -f "$meta/$1/postinst" ] || body "$meta/$1/postinst"
}
apk_pre_deinstall() {
	printf '%s\n' '#!/bin/sh' '[ -s ${IPKG_INSTROOT}/lib/functions.sh ] || exit 0' \
		'. ${IPKG_INSTROOT}/lib/functions.sh' 'export root="${IPKG_INSTROOT}"' \
		"export pkgname=\"$1\"" 'default_prerm'
	[ ! -f "$meta/$1/prerm" ] || body "$meta/$1/prerm"
}

# tar_dir DIR: DIR's contents as ipkg-build tars them, deterministic.
tar_dir() {
	(cd "$1" && tar --format=gnu --numeric-owner --owner=0 --group=0 --sort=name \
		--mtime="@$SOURCE_DATE_EPOCH" -cpf - .)
}

# control NAME ARCH INSTALLED_SIZE: the control file of package-pack.mk.
control() {
	local n=$1 f v
	echo "Package: $n"
	echo "Version: $(m "$n" version)"
	for f in Depends:depends Conflicts:conflicts Provides:provides Source:source \
		SourceName:sourcename License:license LicenseFiles:licensefiles Section:section; do
		v=$(m "$n" "${f#*:}")
		[ -z "$v" ] || echo "${f%%:*}: $v"
	done
	echo "SourceDateEpoch: $SOURCE_DATE_EPOCH"
	v=$(m "$n" url); [ -z "$v" ] || echo "URL: $v"
	v=$(m "$n" maintainer); [ -z "$v" ] || echo "Maintainer: $v"
	echo "Architecture: $2"
	echo "Installed-Size: $3"
	printf 'Description: '
	m "$n" description | sed -e 's,^[[:space:]]*, ,g'
}

# build_ipk NAME ARCH DATA DESTDIR
build_ipk() {
	local n=$1 arch=$2 data=$3 dest=$4 t=$work/ipk/$1/$2 version size
	rm -rf "$t" && mkdir -p "$t/CONTROL"
	version=$(m "$n" version)
	tar_dir "$data" | gzip -n >"$t/data.tar.gz"
	size=$(zcat <"$t/data.tar.gz" | wc -c)
	control "$n" "$arch" "$size" >"$t/CONTROL/control"
	ipk_postinst >"$t/CONTROL/postinst"
	ipk_prerm >"$t/CONTROL/prerm"
	chmod 0755 "$t/CONTROL/postinst" "$t/CONTROL/prerm"
	local s
	for s in preinst:preinst postinst:postinst-pkg prerm:prerm-pkg postrm:postrm; do
		[ ! -f "$meta/$n/${s%%:*}" ] || { cp "$meta/$n/${s%%:*}" "$t/CONTROL/${s#*:}"; chmod 0755 "$t/CONTROL/${s#*:}"; }
	done
	if [ -f "$meta/$n/conffiles" ]; then
		# ipkg-build keeps the conffiles that are files in the package, sorted
		local cf
		for cf in $(cat "$meta/$n/conffiles"); do
			[ -f "$data/$cf" ] && echo "$cf"
		done | LC_ALL=C sort >"$t/CONTROL/conffiles"
		if [ -s "$t/CONTROL/conffiles" ]; then chmod 0644 "$t/CONTROL/conffiles"; else rm -f "$t/CONTROL/conffiles"; fi
	fi
	chmod 0644 "$t/CONTROL/control"
	tar_dir "$t/CONTROL" | gzip -n >"$t/control.tar.gz"
	echo "2.0" >"$t/debian-binary"
	mkdir -p "$dest"
	(cd "$t" && tar --format=gnu --numeric-owner --owner=0 --group=0 --sort=name \
		--mtime="@$SOURCE_DATE_EPOCH" -cf - ./debian-binary ./data.tar.gz ./control.tar.gz) |
		gzip -n >"$dest/${n}_${version}_${arch}.ipk"
}

# build_apk NAME ARCH DATA DESTDIR
build_apk() {
	local n=$1 arch=$2 data=$3 dest=$4 t=$work/apk/$1/$2 version desc cf
	rm -rf "$t" && mkdir -p "$t/scripts" "$t/files"
	cp -a "$data/." "$t/files/"
	version=$(m "$n" version)
	mkdir -p "$t/files/lib/apk/packages"
	(cd "$t/files" && find . \( -type f -o -type l \) -printf '/%P\n' | LC_ALL=C sort) >"$t/list"
	mv "$t/list" "$t/files/lib/apk/packages/$n.list"
	if [ -f "$meta/$n/conffiles" ]; then
		for cf in $(cat "$meta/$n/conffiles"); do echo "$cf"; done >"$t/files/lib/apk/packages/$n.conffiles"
		for cf in $(cat "$meta/$n/conffiles"); do
			[ -f "$t/files/$cf" ] || continue
			echo "$cf $(sha256sum <"$t/files/$cf" | cut -d' ' -f1)"
		done >"$t/files/lib/apk/packages/$n.conffiles_static"
		[ -s "$t/files/lib/apk/packages/$n.conffiles_static" ] || rm -f "$t/files/lib/apk/packages/$n.conffiles_static"
	fi
	chmod 0755 "$t/files/lib" "$t/files/lib/apk" "$t/files/lib/apk/packages"
	chmod 0644 "$t/files/lib/apk/packages/"*
	local scripts=()
	if [ -f "$meta/$n/preinst" ]; then
		cp "$meta/$n/preinst" "$t/scripts/preinst"
		{ printf '%s\n' '#!/bin/sh' 'export PKG_UPGRADE=1'; body "$meta/$n/preinst"; } >"$t/scripts/pre-upgrade"
		scripts+=(--script "pre-install:$t/scripts/preinst" --script "pre-upgrade:$t/scripts/pre-upgrade")
	fi
	apk_post_install "$n" >"$t/scripts/post-install"
	{ printf '%s\n' '#!/bin/sh' 'export PKG_UPGRADE=1'; body "$t/scripts/post-install"; } >"$t/scripts/post-upgrade"
	apk_pre_deinstall "$n" >"$t/scripts/pre-deinstall"
	scripts+=(--script "post-install:$t/scripts/post-install" --script "post-upgrade:$t/scripts/post-upgrade"
		--script "pre-deinstall:$t/scripts/pre-deinstall")
	if [ -f "$meta/$n/postrm" ]; then
		cp "$meta/$n/postrm" "$t/scripts/postrm"
		scripts+=(--script "post-deinstall:$t/scripts/postrm")
	fi
	chmod 0755 "$t/scripts/"*
	find "$t/files" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
	desc=$(m "$n" description | sed -e 's/^[[:space:]]*//' | tr '\n' ' ' | sed -e 's/[[:space:]]*$//')
	local info=(--info "name:$n" --info "version:$version" --info "description:$desc"
		--info "arch:$([ "$arch" = all ] && echo noarch || echo "$arch")"
		--info "license:$(m "$n" license)" --info "origin:$(m "$n" source)"
		--info "url:$(m "$n" url)" --info "maintainer:$(m "$n" maintainer)"
		--info "depends:$(m "$n" depends | tr -d ',')")
	[ -z "$(m "$n" section)" ] || info+=(--info "tags:openwrt:section=$(m "$n" section)")
	# OpenWrt's package.mk (since apk) gives every package the virtual
	# provide NAME-any, which other packages' PROVIDES can name too.
	info+=(--info "provides:$n-any$(m "$n" provides | tr -d ',' | sed 's/^./ &/')")
	mkdir -p "$dest"
	# apk records each file's owner: root:root, as root or under fakeroot
	# (as OpenWrt runs mkpkg).
	if [ "$(id -u)" = 0 ]; then
		chown -R -h 0:0 "$t/files"
		"$apk" mkpkg "${info[@]}" "${scripts[@]}" --files "$t/files" --output "$dest/$n-$version.apk" >/dev/null
	elif command -v fakeroot >/dev/null 2>&1; then
		fakeroot sh -c 'chown -R -h 0:0 "$1" && shift && exec "$@" >/dev/null' sh "$t/files" \
			"$apk" mkpkg "${info[@]}" "${scripts[@]}" --files "$t/files" --output "$dest/$n-$version.apk"
	else
		echo "packages: not root and no fakeroot: $n-$version.apk would record your user as the owner; skipped" >&2
	fi
}

# index DIR: an opkg Packages index of DIR's .ipk files (as
# scripts/ipkg-make-index.sh writes it), Packages.gz, and packages.adb.
index() {
	local dir=$1 f
	(
		cd "$dir"
		for f in $(ls -1 ./*.ipk 2>/dev/null | LC_ALL=C sort); do
			tar -xzOf "$f" ./control.tar.gz | tar -xzOf - ./control | sed -e '/^Description:/,$d'
			echo "Filename: ${f#./}"
			echo "Size: $(stat -c %s "$f")"
			echo "SHA256sum: $(sha256sum <"$f" | cut -d' ' -f1)"
			tar -xzOf "$f" ./control.tar.gz | tar -xzOf - ./control | sed -n -e '/^Description:/,$p'
			echo
		done
	) >"$dir/Packages"
	gzip -n -9 -c "$dir/Packages" >"$dir/Packages.gz"
	# and an apk v3 index of the .apk files (unsigned, as the packages are)
	if [ -n "$apk" ] && ls "$dir"/*.apk >/dev/null 2>&1; then
		"$apk" mkndx --allow-untrusted --output "$dir/packages.adb" "$dir"/*.apk >/dev/null
	fi
}

rm -rf "$out"
mkdir -p "$out"
for n in $names; do
	if [ "$(m "$n" pkgarch)" = all ]; then
		d=$work/stage/$n/all
		stage "$n" all "$d"
		build_ipk "$n" all "$d" "$out/all"
		[ -z "$apk" ] || build_apk "$n" all "$d" "$out/all"
	else
		for a in $archs; do
			d=$work/stage/$n/$a
			stage "$n" "$a" "$d"
			build_ipk "$n" "$a" "$d" "$out/$a"
			[ -z "$apk" ] || build_apk "$n" "$a" "$d" "$out/$a"
		done
	fi
done
# Each architecture's directory is a complete feed: the arch-all packages
# beside the architecture's own, with an index.
for a in $archs; do
	mkdir -p "$out/$a"
	[ ! -d "$out/all" ] || cp "$out/all/"* "$out/$a/"
	index "$out/$a"
done
[ ! -d "$out/all" ] || index "$out/all"

printf '%-28s %-44s %10s %10s\n' arch package ipk-bytes apk-bytes
for dir in "$out"/*/; do
	a=$(basename "$dir")
	for n in $names; do
		v=$(m "$n" version)
		pa=$(m "$n" pkgarch)
		[ "$pa" = all ] && [ "$a" != all ] && continue
		[ "$pa" != all ] && [ "$a" = all ] && continue
		ia=$([ "$pa" = all ] && echo all || echo "$a")
		ipk=$dir/${n}_${v}_${ia}.ipk
		apkf=$dir/$n-$v.apk
		[ -f "$ipk" ] || continue
		printf '%-28s %-44s %10d %10s\n' "$a" "$n" "$(stat -c %s "$ipk")" "$([ -f "$apkf" ] && stat -c %s "$apkf" || echo -)"
	done
done
