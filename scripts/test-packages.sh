#!/bin/bash
# shellcheck disable=SC2016,SC2012,SC2013,SC2010 # single-quoted $ is for the scripts written into packages; file names here are package and arch names
# make test-packages: the packages of `make packages` against the feed
# Makefiles they come from, and installed and removed with real package
# managers (openwrt/README.md "Checks", docs/install.md).
#
# 1. Build: scripts/packages.sh into a temporary directory, then again for
#    x86_64 only: the two builds must be byte-identical.
# 2. Drift: for every package and architecture, the .ipk's data equals what
#    the Makefile's install recipe puts into an empty directory (run here
#    directly through openwrt/stub, not through the builder): paths, types,
#    modes, symlink targets, contents, owners 0:0; its control fields,
#    conffiles, postinst-pkg/prerm-pkg equal the Makefile's (read through
#    `make -p`-free dumps of the stub); every file under the repository's
#    files/ (but files/test/) and under each openwrt/<pkg>/files/ is in its
#    package; the .apk has the same paths and modes (apk adbdump).
# 3. opkg: each x86_64 rootfs of ../shared/openwrt (PACKET_STEERING_OPENWRT_IMAGES)
#    unpacked into a temporary directory; its own opkg, in a chroot of it,
#    installs packet-steering and the LuCI app (--force-depends: none needed,
#    the trees have ubus, rpcd and luci-base), the postinst's effects are
#    checked (uci-defaults run and removed, init script enabled, netifd's
#    service taken over on 23.05), the packages are removed, the hand-back
#    checked, and nothing was written to the tree's empty /sys and /proc.
# 4. apk: the .apk files added with `apk add --root DIR --initdb
#    --allow-untrusted` into a scratch root (the 23.05 tree, without its opkg
#    database in the way; stand-in libc/ubus/rpcd/luci-base packages made
#    with apk mkpkg), files and scripts checked, then `apk del`. OpenWrt
#    25.12's /lib/functions.sh (apk's default_postinst) is not in that
#    tree: with PACKET_STEERING_OPENWRT_FUNCTIONS=/path/to/lib/functions.sh
#    (package/base-files/files/lib/functions.sh of an OpenWrt 25.12 or
#    master checkout) it is put into the scratch root and the checks of
#    default_postinst's effects run too; without it they are skipped.
#
# Needs root (chroot, owners). Exits non-zero when a check fails.
set -u

top=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
cd "$top" || exit 1
stub=$top/openwrt/stub

pass=0
fail=0
skip=0
ok() {
	pass=$((pass + 1))
	echo "ok   $1"
}
nok() {
	fail=$((fail + 1))
	echo "FAIL $1"
	[ $# -gt 1 ] && printf '%s\n' "$2" | sed 's/^/     | /'
	return 0
}
skp() {
	skip=$((skip + 1))
	echo "skip $1"
}
check() { # check NAME CMD...: ok when CMD succeeds
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then ok "$name"; else nok "$name" "$out"; fi
}

[ "$(id -u)" = 0 ] || { echo "test-packages: needs root (chroot, file owners)" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-packages.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

shared=${PACKET_STEERING_SHARED:-$top/../shared}
if [ ! -d "$shared" ] && common=$(git rev-parse --path-format=absolute --git-common-dir 2>/dev/null); then
	shared=$(dirname "$common")/../shared
fi
images=${PACKET_STEERING_OPENWRT_IMAGES:-$shared/openwrt}
apk=${PACKET_STEERING_APK:-$shared/tools/apk-tools/apk}
[ -x "$apk" ] || apk=$(command -v apk || true)
export PACKET_STEERING_APK=$apk

begin=$(date +%s)

# --- 1. build, twice ----------------------------------------------------------

out=$tmp/packages
if log=$(./scripts/packages.sh "$out" 2>&1); then
	ok "make packages"
	printf '%s\n' "$log" | sed -n '/^arch /,$p'
else
	nok "make packages" "$log"
	echo "test-packages: $pass passed, $fail failed"
	exit 1
fi
if log=$(PACKAGES_ARCHS=x86_64 ./scripts/packages.sh "$tmp/again" 2>&1); then
	for f in "$tmp/again"/x86_64/* "$tmp/again"/all/*; do
		rel=${f#"$tmp/again/"}
		check "deterministic: $rel" cmp "$f" "$out/$rel"
	done
else
	nok "make packages (second build)" "$log"
fi

# --- 2. drift: packages against their Makefiles ---------------------------------

meta=$tmp/meta
mkdir -p "$meta"
pkgdirs=$(ls -d openwrt/*/ luci-app-*/ | sed 's,/$,,' | while read -r d; do
	[ -f "$d/Makefile" ] && [ "$d" != openwrt/stub ] && echo "$d"
done)
for d in $pkgdirs; do
	make -s --no-print-directory -C "$d" TOPDIR="$stub" PS_STUB_META="$meta" ps-stub-meta ||
		nok "$d/Makefile reads through openwrt/stub"
done
m() { cat "$meta/$1/$2" 2>/dev/null || true; }

# listing DIR: one line per entry: path type mode uid:gid link-target sha256
listing() {
	(cd "$1" && find . -mindepth 1 -printf '%P %y %m %U:%G %l\n' | LC_ALL=C sort | while read -r p y mode own l; do
		h=-
		[ "$y" = f ] && h=$(sha256sum <"$p" | cut -c1-16)
		echo "/$p $y $mode $own ${l:--} $h"
	done)
}
# unpack_ipk IPK DIR: data into DIR/data, control into DIR/control
unpack_ipk() {
	mkdir -p "$2/data" "$2/control"
	tar -xzOf "$1" ./data.tar.gz | tar -C "$2/data" --numeric-owner -xzpf - &&
		tar -xzOf "$1" ./control.tar.gz | tar -C "$2/control" --numeric-owner -xzpf -
}
field() { sed -n "s/^$2: //p" "$1/control/control"; }

# The OpenWrt default control scripts (include/package-pack.mk).
printf '%s\n' '#!/bin/sh' '[ "${IPKG_NO_SCRIPT}" = "1" ] && exit 0' \
	'[ -s ${IPKG_INSTROOT}/lib/functions.sh ] || exit 0' \
	'. ${IPKG_INSTROOT}/lib/functions.sh' 'default_postinst $0 $@' >"$tmp/def.postinst"
printf '%s\n' '#!/bin/sh' '[ -s ${IPKG_INSTROOT}/lib/functions.sh ] || exit 0' \
	'. ${IPKG_INSTROOT}/lib/functions.sh' 'default_prerm $0 $@' >"$tmp/def.prerm"

for n in $(cat "$meta/packages"); do
	v=$(m "$n" version)
	if [ "$(m "$n" pkgarch)" = all ]; then arches=all; else arches=$(ls "$out" | grep -vx all); fi
	for a in $arches; do
		ipk=$out/$a/${n}_${v}_${a}.ipk
		t="$n $a"
		if [ ! -f "$ipk" ]; then
			nok "$t: $ipk built"
			continue
		fi
		u=$tmp/u/$n/$a
		check "$t: .ipk unpacks" unpack_ipk "$ipk" "$u"
		check "$t: .ipk is a tar.gz of ./debian-binary ./data.tar.gz ./control.tar.gz" \
			test "$(tar -tzf "$ipk" | tr '\n' ' ')" = "./debian-binary ./data.tar.gz ./control.tar.gz "
		# the install recipe, run here into an empty directory
		ref=$tmp/ref/$n/$a
		bindir=
		if [ -n "$(m "$n" go_build_pkg)" ]; then
			# the binary the package holds, as GO_PKG_BUILD_BIN_DIR
			bin=$(m "$n" go_build_pkg)
			bin=${bin##*/}
			bindir=$tmp/bin/$n/$a
			mkdir -p "$bindir"
			found=$u/data$(m "$n" go_install_bin_path)/$bin
			if [ -f "$found" ]; then cp "$found" "$bindir/"; else nok "$t: the package holds the Go program $(m "$n" go_install_bin_path)/$bin"; fi
			case $a in
			x86_64) want="X86-64" ;; aarch64_*) want="AArch64" ;; arm_*) want="ARM" ;;
			mipsel_*) want="MIPS" ;; mips_*) want="MIPS" ;;
			esac
			case $a in mips_*) endian="big endian" ;; *) endian="little endian" ;; esac
			# readelf (binutils, with gcc from scripts/deps.sh): machine, byte
			# order, no program interpreter (static), no symbol table (stripped)
			check "$t: $bin is a static, stripped $want ELF ($endian)" \
				sh -c "readelf -h '$bindir/$bin' | grep -q 'Machine: *.*$want' &&
					readelf -h '$bindir/$bin' | grep -q 'Data: *.*$endian' &&
					! readelf -l '$bindir/$bin' | grep -q INTERP &&
					! readelf -S '$bindir/$bin' | grep -q '\.symtab'"
		fi
		if make -s --no-print-directory -C "$(m "$n" dir)" TOPDIR="$stub" PS_STUB_PKG="$n" \
			PS_STUB_DEST="$ref" ${bindir:+GO_PKG_BUILD_BIN_DIR="$bindir"} ps-stub-install >/dev/null; then
			chmod -R go-w "$ref"
			chown -R -h 0:0 "$ref"
			if diff -u <(listing "$ref") <(listing "$u/data") >"$tmp/diff"; then
				ok "$t: .ipk data = the Makefile's install recipe (paths, types, modes, owners, links, contents)"
			else
				nok "$t: .ipk data = the Makefile's install recipe (- recipe, + package)" "$(cat "$tmp/diff")"
			fi
		else
			nok "$t: the Makefile's install recipe runs"
		fi
		c=$u
		check "$t: Package" test "$(field "$c" Package)" = "$n"
		check "$t: Version" test "$(field "$c" Version)" = "$v"
		check "$t: Architecture" test "$(field "$c" Architecture)" = "$a"
		check "$t: Depends" test "$(field "$c" Depends)" = "$(m "$n" depends)"
		check "$t: Depends starts with libc" sh -c "sed -n 's/^Depends: //p' '$c/control/control' | grep -q '^libc'"
		check "$t: License" test "$(field "$c" License)" = "$(m "$n" license)"
		check "$t: Section" test "$(field "$c" Section)" = "$(m "$n" section)"
		check "$t: Source, SourceName" test "$(field "$c" Source) $(field "$c" SourceName)" = "$(m "$n" source) $(m "$n" sourcename)"
		check "$t: Installed-Size is the data's tar size" \
			test "$(field "$c" Installed-Size)" = "$(tar -xzOf "$ipk" ./data.tar.gz | zcat | wc -c)"
		check "$t: Description" test "$(sed -n '/^Description:/,$p' "$c/control/control" | sed 's/^Description://; s/^ *//')" = \
			"$(m "$n" description | sed 's/^[[:space:]]*//')"
		check "$t: postinst is OpenWrt's default" cmp "$tmp/def.postinst" "$c/control/postinst"
		check "$t: prerm is OpenWrt's default" cmp "$tmp/def.prerm" "$c/control/prerm"
		for s in postinst:postinst-pkg prerm:prerm-pkg preinst:preinst postrm:postrm; do
			if [ -f "$meta/$n/${s%%:*}" ]; then
				check "$t: ${s#*:} = the Makefile's ${s%%:*}" cmp "$meta/$n/${s%%:*}" "$c/control/${s#*:}"
				check "$t: ${s#*:} mode 0755" test "$(stat -c %a "$c/control/${s#*:}")" = 755
			else
				check "$t: no ${s#*:} (none in the Makefile)" test ! -e "$c/control/${s#*:}"
			fi
		done
		if [ -f "$meta/$n/conffiles" ]; then
			check "$t: conffiles = the Makefile's" test "$(LC_ALL=C sort "$c/control/conffiles")" = "$(tr -s '[:space:]' '\n' <"$meta/$n/conffiles" | sed '/^$/d' | LC_ALL=C sort)"
			for cf in $(cat "$meta/$n/conffiles"); do
				check "$t: conffile $cf is in the package" test -f "$u/data$cf"
			done
		else
			check "$t: no conffiles" test ! -e "$c/control/conffiles"
		fi
		# the .apk: the same paths and modes, plus OpenWrt's lib/apk/packages files
		apkf=$out/$a/$n-$v.apk
		if [ -z "$apk" ]; then
			skp "$t: .apk (no apk-tools)"
		elif [ ! -f "$apkf" ]; then
			nok "$t: $apkf built"
		else
			"$apk" adbdump "$apkf" >"$tmp/adb" 2>&1 || nok "$t: apk adbdump" "$(cat "$tmp/adb")"
			# paths with their modes, from the dump's "- name:" and "mode:" lines
			awk '
				/^paths:/ { inp = 1; next }
				/^scripts:/ { inp = 0 }
				!inp { next }
				/^  - acl:/ { dir = ""; want = "d"; next }
				/^  - name: / { dir = $3; want = "d"; next }
				/^      - name: / { file = $3; want = "f"; next }
				/^ *mode: / { m = $2; sub(/^0+/, "", m); if (want == "d") print "/" dir " " m; else print "/" (dir == "" ? "" : dir "/") file " " m; want = "" }
			' "$tmp/adb" | sed 's,^//,/,; s,^\(/.*[^/]\)/ ,\1 ,; s,^ ,/ ,' | LC_ALL=C sort >"$tmp/apk.modes"
			(cd "$u/data" && find . -printf '/%P %m\n' | sed 's,^/ ,/ ,') |
				sed 's,^/\. ,/ ,' | LC_ALL=C sort >"$tmp/ipk.modes.all"
			grep -v '^/lib\(/apk\(/packages\(/.*\)\?\)\?\)\? ' "$tmp/apk.modes" >"$tmp/apk.modes.own" || true
			grep -v '^/lib\(/apk\(/packages\(/.*\)\?\)\?\)\? ' "$tmp/ipk.modes.all" >"$tmp/ipk.modes.own" || true
			# symlinks are files in apk's dump with mode 777
			if diff -u "$tmp/ipk.modes.own" "$tmp/apk.modes.own" >"$tmp/diff"; then
				ok "$t: .apk paths and modes = the .ipk's"
			else
				nok "$t: .apk paths and modes = the .ipk's (- ipk, + apk)" "$(cat "$tmp/diff")"
			fi
			check "$t: .apk has lib/apk/packages/$n.list" grep -q "^/lib/apk/packages/$n.list " "$tmp/apk.modes"
			if [ -f "$meta/$n/conffiles" ]; then
				check "$t: .apk has lib/apk/packages/$n.conffiles" grep -q "^/lib/apk/packages/$n.conffiles " "$tmp/apk.modes"
			fi
			check "$t: .apk name, version, arch" sh -c "grep -qx '  name: $n' '$tmp/adb' && grep -qx '  version: $v' '$tmp/adb' && grep -qx '  arch: $([ "$a" = all ] && echo noarch || echo "$a")' '$tmp/adb'"
			for s in post-install post-upgrade pre-deinstall; do
				check "$t: .apk script $s" grep -q "^  $s: " "$tmp/adb"
			done
			if [ -f "$meta/$n/postrm" ]; then
				check "$t: .apk script post-deinstall (the Makefile's postrm)" grep -q "^  post-deinstall: " "$tmp/adb"
			fi
		fi
	done
done

# Every file of a package's files/ directory is installed.
for f in $(find files -type f ! -path 'files/test/*' | LC_ALL=C sort); do
	check "packet-steering ships $f" test -f "$tmp/u/packet-steering/x86_64/data/${f#files}"
done
for d in $pkgdirs; do
	[ -d "$d/files" ] || continue
	n=$(basename "$d")
	a=$( [ "$(m "$n" pkgarch)" = all ] && echo all || echo x86_64)
	for f in $(cd "$d/files" && find . -type f | sed 's,^\.,,' | LC_ALL=C sort); do
		check "$n ships $d/files$f" test -f "$tmp/u/$n/$a/data$f"
	done
done

# --- 3. opkg in the real x86_64 trees -------------------------------------------

# prepare_root DIR: the directories a running OpenWrt has and a committed
# rootfs lacks (tmp, var -> tmp, the lock directory opkg needs, dev/null).
prepare_root() {
	mkdir -p "$1/tmp/lock" "$1/dev" "$1/proc" "$1/sys" "$1/root"
	chmod 1777 "$1/tmp"
	[ -e "$1/var" ] || ln -s tmp "$1/var"
	[ -e "$1/dev/null" ] || mknod -m 666 "$1/dev/null" c 1 3
}
in_root() { # in_root DIR CMD...: CMD in a chroot of DIR, OpenWrt's PATH
	local r=$1
	shift
	chroot "$r" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "$@"
}
# enabled ROOT NAME: the init script NAME has a start link
enabled() { ls "$1/etc/rc.d/" 2>/dev/null | grep -q "^S[0-9]*$2\$"; }
empty_dir() { [ -z "$(ls -A "$1")" ]; }

opkg_tested=0
for tb in "$images"/*x86_64*rootfs.tar* "$images"/*x86-64*rootfs.tar*; do
	[ -f "$tb" ] || continue
	opkg_tested=1
	rel=$(basename "$tb" | sed 's/^openwrt-//; s/-rootfs.*//')
	r=$tmp/root-$rel
	mkdir -p "$r"
	if ! tar -C "$r" --numeric-owner -xf "$tb"; then
		nok "$rel: unpack $tb"
		continue
	fi
	prepare_root "$r"
	t="opkg $rel"
	cp "$out/x86_64/packet-steering_"*"_x86_64.ipk" "$out/x86_64/luci-app-packet-steering_"*"_all.ipk" "$r/tmp/"
	stock=0
	[ -x "$r/etc/init.d/packet_steering" ] && enabled "$r" packet_steering && stock=1
	if o=$(in_root "$r" opkg install /tmp/packet-steering_0.1.0-r1_x86_64.ipk 2>&1); then
		ok "$t: opkg install packet-steering"
	else
		nok "$t: opkg install packet-steering" "$o"
	fi
	printf '%s\n' "$o" | sed 's/^/     > /'
	check "$t: opkg lists packet-steering 0.1.0-r1" sh -c "chroot '$r' opkg list-installed | grep -qx 'packet-steering - 0.1.0-r1'"
	check "$t: /usr/sbin/packet-steering runs in the tree" in_root "$r" /usr/sbin/packet-steering -h
	check "$t: the init script is enabled (S25packet-steering)" enabled "$r" packet-steering
	check "$t: the uci-defaults script ran and was removed" test ! -e "$r/etc/uci-defaults/90-packet-steering"
	check "$t: packet_steering.globals.mode is set" sh -c "chroot '$r' uci -q get packet_steering.globals.mode | grep -qx 'auto\|off\|all'"
	check "$t: the conffile is kept as /etc/config/packet_steering (mode 0600)" test "$(stat -c %a "$r/etc/config/packet_steering")" = 600
	check "$t: opkg recorded the conffile" grep -q '^Conffiles:' "$r/usr/lib/opkg/status"
	check "$t: opkg's info has postinst-pkg and prerm-pkg" test -f "$r/usr/lib/opkg/info/packet-steering.postinst-pkg" -a -f "$r/usr/lib/opkg/info/packet-steering.prerm-pkg"
	if [ "$stock" = 1 ]; then
		check "$t: netifd's packet_steering service taken over (disabled)" sh -c "! ls '$r/etc/rc.d' | grep -qx 'S[0-9]*packet_steering'"
		check "$t: the takeover is recorded" grep -qx 'packet_steering enabled' "$r/etc/packet-steering/takeover"
	else
		skp "$t: takeover (no enabled netifd packet_steering service in this tree)"
	fi
	if o=$(in_root "$r" opkg install /tmp/luci-app-packet-steering_0.1.0_all.ipk 2>&1); then
		ok "$t: opkg install luci-app-packet-steering"
	else
		nok "$t: opkg install luci-app-packet-steering" "$o"
	fi
	check "$t: the LuCI view is installed" test -f "$r/www/luci-static/resources/view/packet-steering/overview.js"
	check "$t: the rpcd ACL is installed" test -f "$r/usr/share/rpcd/acl.d/luci-app-packet-steering.json"
	# upgrade: the same package as release 2
	if [ -d "$tmp/next" ] || PACKAGES_ARCHS=x86_64 PACKAGES_RELEASE=2 PACKAGES_ONLY=packet-steering ./scripts/packages.sh "$tmp/next" >/dev/null 2>&1; then
		cp "$tmp/next/x86_64/packet-steering_0.1.0-r2_x86_64.ipk" "$r/tmp/"
		in_root "$r" uci set packet_steering.globals.mode=all && in_root "$r" uci commit packet_steering
		if o=$(in_root "$r" opkg install /tmp/packet-steering_0.1.0-r2_x86_64.ipk 2>&1); then
			ok "$t: opkg upgrade to 0.1.0-r2"
		else
			nok "$t: opkg upgrade to 0.1.0-r2" "$o"
		fi
		check "$t: upgrade: opkg lists 0.1.0-r2" sh -c "chroot '$r' opkg list-installed | grep -qx 'packet-steering - 0.1.0-r2'"
		check "$t: upgrade keeps the user's config (mode all)" sh -c "chroot '$r' uci -q get packet_steering.globals.mode | grep -qx all"
		check "$t: upgrade keeps the init script enabled" enabled "$r" packet-steering
		[ "$stock" = 1 ] && check "$t: upgrade keeps netifd's service disabled" sh -c "! ls '$r/etc/rc.d' | grep -qx 'S[0-9]*packet_steering'"
	else
		nok "$t: build release 2 for the upgrade"
	fi
	if o=$(in_root "$r" opkg remove luci-app-packet-steering packet-steering 2>&1); then
		ok "$t: opkg remove"
	else
		nok "$t: opkg remove" "$o"
	fi
	printf '%s\n' "$o" | sed 's/^/     > /'
	check "$t: removed: no /usr/sbin/packet-steering" test ! -e "$r/usr/sbin/packet-steering"
	check "$t: removed: no rpcd plugin link" test ! -L "$r/usr/libexec/rpcd/packet_steering"
	check "$t: removed: init script gone and not enabled" sh -c "test ! -e '$r/etc/init.d/packet-steering' && ! ls '$r/etc/rc.d' | grep -q packet-steering"
	check "$t: removed: no LuCI view" test ! -e "$r/www/luci-static/resources/view/packet-steering/overview.js"
	check "$t: removed: the takeover record is gone, no /etc/packet-steering left" test ! -e "$r/etc/packet-steering"
	check "$t: removed: no /var/run/packet-steering left" test ! -e "$r/var/run/packet-steering"
	if [ "$stock" = 1 ]; then
		check "$t: removed: netifd's packet_steering service enabled again" enabled "$r" packet_steering
	fi
	# out/packages/x86_64 as an opkg feed: the index resolves the LuCI app's
	# dependency on packet-steering (signature checks off: the feed is not signed)
	mkdir -p "$r/tmp/feed"
	cp "$out/x86_64/"* "$r/tmp/feed/"
	sed -i '/check_signature/d' "$r/etc/opkg.conf"
	echo 'src/gz packet_steering file:///tmp/feed' >"$r/etc/opkg/customfeeds.conf"
	: >"$r/etc/opkg/distfeeds.conf"
	check "$t: opkg update from out/packages/x86_64 (Packages.gz)" in_root "$r" opkg update
	check "$t: opkg install luci-app-packet-steering from the feed pulls packet-steering" \
		sh -c "chroot '$r' opkg install luci-app-packet-steering >/dev/null 2>&1 && chroot '$r' opkg list-installed | grep -qx 'packet-steering - 0.1.0-r1'"
	check "$t: opkg remove (feed install)" in_root "$r" opkg remove luci-app-packet-steering packet-steering
	check "$t: nothing written to the tree's /sys" empty_dir "$r/sys"
	check "$t: nothing written to the tree's /proc" empty_dir "$r/proc"
done
[ "$opkg_tested" = 1 ] || nok "opkg: an x86_64 rootfs in $images (PACKET_STEERING_OPENWRT_IMAGES)"

# --- 4. apk into a scratch root ---------------------------------------------------

if [ -z "$apk" ]; then
	skp "apk: no apk-tools (PACKET_STEERING_APK)"
else
	tb=$(ls "$images"/*23.05*x86_64*rootfs.tar* "$images"/*23.05*x86-64*rootfs.tar* 2>/dev/null | head -n 1)
	r=$tmp/apkroot
	mkdir -p "$r"
	if [ -z "$tb" ] || ! tar -C "$r" --numeric-owner -xf "$tb"; then
		nok "apk: a 23.05 x86_64 rootfs in $images for the scratch root"
	else
		prepare_root "$r"
		# the tree's opkg state is not apk's: leave it, apk starts its own db
		if [ -n "${PACKET_STEERING_OPENWRT_FUNCTIONS:-}" ]; then
			cp "$PACKET_STEERING_OPENWRT_FUNCTIONS" "$r/lib/functions.sh"
			f25=1
		else
			f25=0
		fi
		# stand-ins for the packages the tree holds but apk's new db does not know
		mkdir -p "$tmp/standin/empty"
		for p in libc ubus rpcd luci-base; do
			"$apk" mkpkg --info "name:$p" --info "version:1-r0" --info "arch:noarch" \
				--info "description:stand-in for the tree's $p" --files "$tmp/standin/empty" \
				--output "$tmp/standin/$p-1-r0.apk" >/dev/null 2>&1 || nok "apk: stand-in package $p"
		done
		t="apk 23.05-tree"
		stock=0
		[ -x "$r/etc/init.d/packet_steering" ] && enabled "$r" packet_steering && stock=1
		if o=$("$apk" add --root "$r" --initdb --allow-untrusted --no-network --no-cache \
			"$tmp"/standin/*.apk "$out/x86_64/packet-steering-0.1.0-r1.apk" \
			"$out/x86_64/luci-app-packet-steering-0.1.0.apk" 2>&1); then
			ok "$t: apk add --root --initdb"
		else
			nok "$t: apk add --root --initdb" "$o"
		fi
		printf '%s\n' "$o" | sed 's/^/     > /'
		check "$t: apk lists packet-steering-0.1.0-r1" sh -c "'$apk' --root '$r' info -v 2>/dev/null | grep -qx 'packet-steering-0.1.0-r1'"
		check "$t: files installed with their modes" sh -c "test \"\$(stat -c %a '$r/usr/sbin/packet-steering' '$r/etc/config/packet_steering' '$r/etc/init.d/packet-steering' | tr '\n' ' ')\" = '755 600 755 '"
		check "$t: rpcd plugin symlink" test "$(readlink "$r/usr/libexec/rpcd/packet_steering")" = /usr/sbin/packet-steering
		check "$t: lib/apk/packages/packet-steering.list" grep -qx /usr/sbin/packet-steering "$r/lib/apk/packages/packet-steering.list"
		check "$t: the LuCI view is installed" test -f "$r/www/luci-static/resources/view/packet-steering/overview.js"
		if [ "$stock" = 1 ]; then
			check "$t: post-install took netifd's service over (package's postinst)" sh -c "! ls '$r/etc/rc.d' | grep -qx 'S[0-9]*packet_steering'"
		fi
		if [ "$f25" = 1 ]; then
			check "$t: default_postinst ran the uci-defaults script and removed it" test ! -e "$r/etc/uci-defaults/90-packet-steering"
			check "$t: default_postinst enabled the init script" enabled "$r" packet-steering
		else
			skp "$t: default_postinst's effects (set PACKET_STEERING_OPENWRT_FUNCTIONS to 25.12's lib/functions.sh)"
		fi
		# upgrade to release 2 (built for the opkg upgrade above)
		if [ -f "$tmp/next/x86_64/packet-steering-0.1.0-r2.apk" ]; then
			if o=$("$apk" add --root "$r" --allow-untrusted --no-network --no-cache \
				"$tmp/next/x86_64/packet-steering-0.1.0-r2.apk" 2>&1); then
				ok "$t: apk upgrade to 0.1.0-r2"
			else
				nok "$t: apk upgrade to 0.1.0-r2" "$o"
			fi
			printf '%s\n' "$o" | sed 's/^/     > /'
			check "$t: upgrade: apk lists packet-steering-0.1.0-r2" sh -c "'$apk' --root '$r' info -v 2>/dev/null | grep -qx 'packet-steering-0.1.0-r2'"
			check "$t: upgrade: the init script stays enabled" sh -c "[ '$f25' = 0 ] || ls '$r/etc/rc.d/' | grep -q packet-steering"
			[ "$stock" = 1 ] && check "$t: upgrade: netifd's service stays disabled" sh -c "! ls '$r/etc/rc.d' | grep -qx 'S[0-9]*packet_steering'"
		else
			nok "$t: release 2 .apk for the upgrade"
		fi
		if o=$("$apk" del --root "$r" --no-network --no-cache luci-app-packet-steering packet-steering 2>&1); then
			ok "$t: apk del"
		else
			nok "$t: apk del" "$o"
		fi
		printf '%s\n' "$o" | sed 's/^/     > /'
		check "$t: removed: no /usr/sbin/packet-steering" test ! -e "$r/usr/sbin/packet-steering"
		check "$t: removed: no LuCI view" test ! -e "$r/www/luci-static/resources/view/packet-steering/overview.js"
		check "$t: removed: init script not enabled" sh -c "! ls '$r/etc/rc.d' | grep -q packet-steering"
		check "$t: removed: no /etc/packet-steering left" test ! -e "$r/etc/packet-steering"
		check "$t: removed: no /var/run/packet-steering left" test ! -e "$r/var/run/packet-steering"
		if [ "$stock" = 1 ]; then
			check "$t: removed: netifd's packet_steering service enabled again" enabled "$r" packet_steering
		fi
		# out/packages/x86_64/packages.adb as a repository
		check "$t: apk add luci-app-packet-steering from packages.adb pulls packet-steering" \
			sh -c "'$apk' add --root '$r' --allow-untrusted --no-network --no-cache --repository '$out/x86_64/packages.adb' luci-app-packet-steering >/dev/null 2>&1 &&
				'$apk' --root '$r' info -v 2>/dev/null | grep -qx 'packet-steering-0.1.0-r1'"
		check "$t: apk del (repository install)" "$apk" del --root "$r" --no-network --no-cache luci-app-packet-steering packet-steering
		check "$t: nothing written to the tree's /sys" empty_dir "$r/sys"
		check "$t: nothing written to the tree's /proc" empty_dir "$r/proc"
	fi
fi

echo "test-packages: $pass passed, $fail failed, $skip skipped in $(($(date +%s) - begin)) s"
[ "$fail" = 0 ]
