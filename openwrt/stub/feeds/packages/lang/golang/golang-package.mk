# Stand-in for the packages feed's lang/golang/golang-package.mk (see
# ../../../../rules.mk): the variables and macros a Go package Makefile
# uses. scripts/packages.sh builds GO_PKG_BUILD_PKG itself (static, for each
# architecture) into GO_PKG_BUILD_BIN_DIR before it runs the install recipe.

GO_ARCH_DEPENDS:=@(aarch64||arm||i386||i686||mips||mips64||mips64el||mipsel||powerpc64||riscv64||x86_64)
GO_PKG_INSTALL_BIN_PATH?=/usr/bin
GO_PKG_BUILD_BIN_DIR?=$(PS_STUB_GOBIN)

define GoPackage/Package/Install/Bin
	$(if $(GO_PKG_BUILD_BIN_DIR),,$(error GO_PKG_BUILD_BIN_DIR is not set))
	$(INSTALL_DIR) $(1)$(GO_PKG_INSTALL_BIN_PATH)
	$(INSTALL_BIN) $(GO_PKG_BUILD_BIN_DIR)/* $(1)$(GO_PKG_INSTALL_BIN_PATH)/
endef

define GoBinPackage
  ifndef Package/$(1)/install
    Package/$(1)/install=$$(call GoPackage/Package/Install/Bin,$$(1))
  endif
endef
