# Stand-in for OpenWrt's include/package.mk (see ../rules.mk): BuildPackage
# evaluates Package/<name> over Package/Default as OpenWrt does and, instead
# of building, writes the package's metadata (PS_STUB_META=dir) or runs its
# install recipe (target ps-stub-install, PS_STUB_PKG, PS_STUB_DEST). What it
# cannot reproduce it refuses with an error naming the Makefile.

PKG_BUILD_DIR?=$(PS_STUB_BUILD_DIR)/$(PKG_NAME)
PKG_DEFAULT_DEPENDS = +libc
ARCH_PACKAGES?=@target

ps_stub_fail=$(error $(CURDIR)/Makefile: $(1) (not supported by make packages, see openwrt/README.md))

# Package/Default of include/package-defaults.mk, the fields make packages uses.
define Package/Default
  SECTION:=opt
  CATEGORY:=Extra packages
  DEPENDS:=
  CONFLICTS:=
  PROVIDES:=
  EXTRA_DEPENDS:=
  MAINTAINER:=$(PKG_MAINTAINER)
  SOURCE:=feeds/packet_steering/$(patsubst $(PS_STUB_REPO)/%,%,$(CURDIR))
  ifneq ($(PKG_VERSION),)
    ifneq ($(PKG_RELEASE),)
      VERSION:=$(PKG_VERSION)-r$(PKG_RELEASE)
    else
      VERSION:=$(PKG_VERSION)
    endif
  else
    VERSION:=$(PKG_RELEASE)
  endif
  PKGARCH:=$(ARCH_PACKAGES)
  TITLE:=
  URL:=$(PKG_URL)
  VARIANT:=
  USERID:=
  ALTERNATIVES:=
  LICENSE:=$(PKG_LICENSE)
  LICENSE_FILES:=$(PKG_LICENSE_FILES)
  FILE_MODES:=$(PKG_FILE_MODES)
endef

# The runtime dependencies as package-pack.mk writes them: libc first (not
# for kmods), "+" dropped, "@" (Kconfig-only) entries dropped.
ps_stub_deps=$(strip $(subst +,,$(filter-out @%,$(PKG_DEFAULT_DEPENDS) $(filter-out $(PKG_DEFAULT_DEPENDS),$(1)))))
ps_stub_join=$(subst $(space),$(comma)$(space),$(strip $(1)))

ps_stub_write=$(file >$(PS_STUB_META)/$(1)/$(2),$(3))
ps_stub_define=$(if $(value Package/$(1)/$(2)),$(call ps_stub_write,$(1),$(2),$(Package/$(1)/$(2))))

define PsStubCheck
$(if $(findstring :,$(filter +%,$(DEPENDS))),$(call ps_stub_fail,$(1): conditional dependency in DEPENDS ($(DEPENDS))))
$(if $(strip $(VARIANT)),$(call ps_stub_fail,$(1): VARIANT $(VARIANT); one package for every router))
$(if $(strip $(EXTRA_DEPENDS)),$(call ps_stub_fail,$(1): EXTRA_DEPENDS))
$(if $(strip $(ALTERNATIVES)),$(call ps_stub_fail,$(1): ALTERNATIVES))
$(if $(strip $(USERID)),$(call ps_stub_fail,$(1): USERID))
$(if $(strip $(FILE_MODES)),$(call ps_stub_fail,$(1): PKG_FILE_MODES))
$(if $(value Package/$(1)/install),,$(call ps_stub_fail,$(1): no Package/$(1)/install))
$(if $(value Package/$(1)/install-overlay),$(call ps_stub_fail,$(1): install-overlay))
endef

define PsStubMeta
$(shell mkdir -p $(PS_STUB_META)/$(1))
$(file >>$(PS_STUB_META)/packages,$(1))
$(call ps_stub_write,$(1),dir,$(CURDIR))
$(call ps_stub_write,$(1),version,$(VERSION))
$(call ps_stub_write,$(1),depends,$(call ps_stub_join,$(call ps_stub_deps,$(DEPENDS))))
$(call ps_stub_write,$(1),conflicts,$(call ps_stub_join,$(CONFLICTS)))
$(call ps_stub_write,$(1),provides,$(call ps_stub_join,$(filter-out $(1),$(patsubst @%,%,$(PROVIDES)))))
$(call ps_stub_write,$(1),source,$(SOURCE))
$(call ps_stub_write,$(1),sourcename,$(PKG_NAME))
$(call ps_stub_write,$(1),license,$(LICENSE))
$(call ps_stub_write,$(1),licensefiles,$(LICENSE_FILES))
$(call ps_stub_write,$(1),section,$(SECTION))
$(call ps_stub_write,$(1),url,$(URL))
$(call ps_stub_write,$(1),maintainer,$(MAINTAINER))
$(call ps_stub_write,$(1),title,$(TITLE))
$(call ps_stub_write,$(1),pkgarch,$(if $(filter all,$(PKGARCH)),all,target))
$(call ps_stub_write,$(1),go_pkg,$(GO_PKG))
$(call ps_stub_write,$(1),go_build_pkg,$(GO_PKG_BUILD_PKG))
$(call ps_stub_write,$(1),go_tags,$(GO_PKG_TAGS))
$(call ps_stub_write,$(1),go_ldflags,$(GO_PKG_LDFLAGS))
$(call ps_stub_write,$(1),go_gcflags,$(GO_PKG_GCFLAGS))
$(call ps_stub_write,$(1),go_install_bin_path,$(if $(GO_PKG_BUILD_PKG),$(GO_PKG_INSTALL_BIN_PATH)))
$(call ps_stub_define,$(1),description)
$(call ps_stub_define,$(1),conffiles)
$(call ps_stub_define,$(1),preinst)
$(call ps_stub_define,$(1),postinst)
$(call ps_stub_define,$(1),prerm)
$(call ps_stub_define,$(1),postrm)
endef

define BuildPackage
$(eval $(Package/Default))
$(eval $(Package/$(1)))
$(if $(value Package/$(1)/description),,$(eval Package/$(1)/description=$(TITLE)))
$(eval $(call PsStubCheck,$(1)))
$(if $(PS_STUB_META),$(eval $(call PsStubMeta,$(1))))
endef

.PHONY: ps-stub-meta ps-stub-install
ps-stub-meta:
	@:

# The install recipe of one package into PS_STUB_DEST, as package-pack.mk
# runs it (make's working directory is the package directory).
ps-stub-install:
	$(if $(PS_STUB_PKG),,$(error PS_STUB_PKG is not set))
	$(if $(PS_STUB_DEST),,$(error PS_STUB_DEST is not set))
	mkdir -p $(PS_STUB_DEST)
	$(call Package/$(PS_STUB_PKG)/install,$(PS_STUB_DEST))
