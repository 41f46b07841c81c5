# Stand-in for the luci feed's luci.mk (see ../../rules.mk): a LuCI package
# is the directory's htdocs/ installed to /www and root/ to /, its
# Package/<name> made from the LUCI_* variables, and a postinst that runs
# the package's uci-defaults and drops LuCI's caches, as luci.mk does.
# Translations (po/<lang>/) would be luci-i18n-* packages, and luci.mk
# minifies htdocs' JavaScript with jsmin (a host tool of luci-base); both are
# left out here (the .js is installed as written).

LUCI_NAME?=$(notdir $(CURDIR))
LUCI_TYPE?=$(word 2,$(subst -, ,$(LUCI_NAME)))
LUCI_LANGUAGES:=$(filter-out templates,$(notdir $(wildcard $(CURDIR)/po/*)))
LUCI_DEFAULTS:=$(notdir $(wildcard $(CURDIR)/root/etc/uci-defaults/*))
LUCI_PKGARCH?=$(if $(realpath src/Makefile),,all)
LUCI_SECTION?=luci
LUCI_CATEGORY?=LuCI
LUCI_URL?=https://github.com/openwrt/luci
LUCI_MAINTAINER?=OpenWrt LuCI community
PKG_NAME?=$(LUCI_NAME)
PKG_RELEASE?=1
HTDOCS=/www

$(if $(LUCI_LANGUAGES),$(error $(CURDIR)/Makefile: translations ($(LUCI_LANGUAGES)) are not supported by make packages))
$(if $(wildcard $(CURDIR)/src $(CURDIR)/luasrc),$(error $(CURDIR)/Makefile: src/ or luasrc/ is not supported by make packages))
$(if $(LUCI_DEFAULTS),$(error $(CURDIR)/Makefile: root/etc/uci-defaults is run differently by luci.mk versions; not supported by make packages))
$(if $(PKG_VERSION),,$(error $(CURDIR)/Makefile: set PKG_VERSION (luci.mk would make one from git)))

include $(INCLUDE_DIR)/package.mk

define Package/$(PKG_NAME)
  SECTION:=$(LUCI_SECTION)
  CATEGORY:=$(LUCI_CATEGORY)
  TITLE:=$(if $(LUCI_TITLE),$(LUCI_TITLE),LuCI $(LUCI_NAME) $(LUCI_TYPE))
  DEPENDS:=$(LUCI_DEPENDS)
  VERSION:=$(PKG_VERSION)
  $(if $(LUCI_PKGARCH),PKGARCH:=$(LUCI_PKGARCH))
  URL:=$(LUCI_URL)
  MAINTAINER:=$(LUCI_MAINTAINER)
endef

ifneq ($(LUCI_DESCRIPTION),)
 define Package/$(PKG_NAME)/description
   $(strip $(LUCI_DESCRIPTION))
 endef
endif

define Package/$(PKG_NAME)/install
	if [ -d ./htdocs ]; then \
	  $(INSTALL_DIR) $(1)$(HTDOCS); \
	  cp -pR ./htdocs/* $(1)$(HTDOCS)/; \
	fi
	if [ -d ./root ]; then \
	  $(INSTALL_DIR) $(1)/; \
	  cp -pR ./root/* $(1)/; \
	fi
endef

# The postinst luci.mk defines (luci feed, 23.05 era and later): drop LuCI's
# caches and make rpcd reload its ACLs and menus.
ifndef Package/$(PKG_NAME)/postinst
define Package/$(PKG_NAME)/postinst
[ -n "$${IPKG_INSTROOT}" ] || { rm -f /tmp/luci-indexcache.*
	rm -rf /tmp/luci-modulecache/
	killall -HUP rpcd 2>/dev/null
	exit 0
}
endef
endif

$(eval $(call BuildPackage,$(PKG_NAME)))
