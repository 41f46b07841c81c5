# Stand-in for OpenWrt's rules.mk, for `make packages` (scripts/packages.sh):
# a package Makefile of this repository is run against openwrt/stub/ as
# TOPDIR, so that its own variables, defines and install recipe are read by
# GNU make exactly as OpenWrt's build system reads them (openwrt/README.md).
# The install commands have OpenWrt's values (rules.mk of openwrt/openwrt).

INCLUDE_DIR:=$(TOPDIR)/include
# The repository this stub belongs to (openwrt/stub/ -> top).
PS_STUB_REPO:=$(abspath $(TOPDIR)/../..)

CP:=cp -fpR
LN:=ln -sf
XARGS:=xargs -r
FIND:=find
SED:=sed -i -e
INSTALL_BIN:=install -m0755
INSTALL_SUID:=install -m4755
INSTALL_DIR:=install -d -m0755
INSTALL_DATA:=install -m0644
INSTALL_CONF:=install -m0600

empty:=
space:=$(empty) $(empty)
comma:=,
