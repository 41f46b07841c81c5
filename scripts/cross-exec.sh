#!/bin/sh
# go test -exec wrapper for `make test-cross`: runs a test binary built for
# another Linux architecture under Debian's qemu-user emulator for it, picked
# from the binary's ELF header (EI_DATA, e_machine). It exports the
# emulator's path in PACKET_STEERING_TEST_EMULATOR, so tests that start the
# test binary again go through the same emulator (internal/testenv) and
# binfmt_misc registration is not needed.
# Usage: scripts/cross-exec.sh BINARY [ARGS...]
set -eu
bin=$1
shift
# Byte 5 is EI_DATA (1 little-, 2 big-endian); bytes 18-19 are e_machine in
# that byte order.
hdr=$(od -An -tu1 -j5 -N1 "$bin" | tr -d ' ')
m=$(od -An -tu1 -j18 -N2 "$bin" | awk -v e="$hdr" '{ print (e == 2) ? $1 * 256 + $2 : $2 * 256 + $1 }')
case "$hdr:$m" in
1:8) emu=qemu-mipsel ;;
2:8) emu=qemu-mips ;;
1:40) emu=qemu-arm ;;
1:183) emu=qemu-aarch64 ;;
*)
	echo "cross-exec: $bin: no emulator for ELF data $hdr machine $m" >&2
	exit 2
	;;
esac
path=$(command -v "$emu") || {
	echo "cross-exec: $emu not found (Debian package qemu-user; scripts/deps.sh installs it)" >&2
	exit 2
}
PACKET_STEERING_TEST_EMULATOR=$path
export PACKET_STEERING_TEST_EMULATOR
exec "$path" "$bin" "$@"
