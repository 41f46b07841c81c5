# packet-steering: build, test, bench, size, demo.
GO      ?= go
BIN     := packet-steering
PKG     := ./cmd/packet-steering
LDFLAGS := -s -w -buildid=
# The router build leaves the demo (net/http, html/template, the LuCI assets)
# out; see cmd/packet-steering/demo_router.go.
ROUTER_TAGS := router
# docs/design.md "Performance targets": at most 3 MiB per router binary.
SIZE_LIMIT ?= 3145728
# Router builds for these architectures are compiled without inlining
# (-gcflags=all=-l): without it the mipsle binary is over SIZE_LIMIT
# (3,211,421 bytes without, 3,080,349 with, at the commit that added this).
# Other architectures keep inlining (arm64 fits with it). The OpenWrt
# package does the same (GO_PKG_GCFLAGS in openwrt/packet-steering/Makefile).
NOINLINE_ARCHS := mips mipsle
router_gcflags = $(if $(filter $(NOINLINE_ARCHS),$(1)),-gcflags=all=-l)
# Go's own linker aligns each segment's file offset to 64 KiB on mips and
# mipsle (its page-rounding quantum there), so the file grows in 64 KiB
# steps of padding; the 32-bit MIPS kernels OpenWrt builds use 4 KiB pages,
# and the feed's build links with the target's gcc, which lays segments out
# without that padding. -R 0x1000 makes the size measured here the size of
# the code and data, not of where a padding step falls (3,145,885 bytes
# with, 3,092,637 without the padding, at the commit that added this).
router_ldflags = $(LDFLAGS)$(if $(filter $(NOINLINE_ARCHS),$(1)), -R 0x1000)
export CGO_ENABLED := 0

.PHONY: all build build-router test test-go test-go123 test-cross test-race test-fuzz test-shell test-browser test-vm bench perf flood size demo deps vet clean

all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) $(PKG)

# The binary as it goes on a router, for the host's architecture.
build-router:
	$(GO) build -tags $(ROUTER_TAGS) $(call router_gcflags,$(shell $(GO) env GOARCH)) -trimpath -ldflags '$(call router_ldflags,$(shell $(GO) env GOARCH))' -o $(BIN)-router $(PKG)

deps:
	./scripts/deps.sh test

# The Go of the oldest supported OpenWrt release's packages feed: 24.10
# ships Go 1.23 (lang/golang/golang1.23) and builds with GOTOOLCHAIN=local.
# go.mod says go 1.23.0, so the compiler refuses newer language features
# and vet's stdversion check newer standard library API; golang.org/x/sys
# stays at v0.35.0, its last release for Go 1.23. make test-go123 builds,
# vets and tests with Debian's Go 1.23 (scripts/test-go123.sh).
GO_MIN := 1.23.0

vet:
	@grep -qx 'go $(GO_MIN)' go.mod || { echo "go.mod: the go directive must stay $(GO_MIN) (OpenWrt 24.10's Go)"; exit 1; }
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet ./...
	$(GO) vet -tags $(ROUTER_TAGS) ./cmd/...
	$(GO) vet -tags $(ROUTER_TAGS),tune ./cmd/...

# Everything: Go unit, kernel (netns) and fuzz-smoke tests, shell scripts,
# and the browser test. Installs missing Debian/npm packages first.
test: deps vet test-go test-go123 test-cross test-race test-fuzz test-shell test-browser size test-vm

test-go:
	$(GO) test -count=1 -timeout 20m ./...

# The whole module with Go 1.23, the Go of OpenWrt 24.10's packages feed:
# go build, go vet, the router builds for mipsle, arm and arm64, and
# go test -short, with Debian's golang-1.23 packages (bookworm-backports,
# fetched into out/go123 with apt-get download) and GOTOOLCHAIN=local.
test-go123:
	./scripts/test-go123.sh

# The Go tests built for the router architectures (32-bit little- and
# big-endian MIPS with soft float, ARMv7, arm64) and run under Debian's
# qemu-user (scripts/test-cross.sh; README "Cross-architecture tests").
CROSS_ARCHS ?= mipsle mips arm arm64
test-cross:
	GO=$(GO) ./scripts/test-cross.sh $(CROSS_ARCHS)

# The race detector over the packages with goroutines of their own (the ubus
# connection, client and broker, the object, UCI locking, the engine, the
# parallel platform reader, the daemon). It needs cgo (and gcc, which
# deps.sh installs). -short leaves out the kernel and timing tests, which
# test-go has just run (and, with PACKET_STEERING_REQUIRE_KERNEL=1, proved
# ran), so the switch is cleared for this run.
RACE_PKGS := ./internal/ubus/... ./ubusobj ./internal/uci ./steering ./platform ./cmd/packet-steering
test-race:
	PACKET_STEERING_REQUIRE_KERNEL= CGO_ENABLED=1 $(GO) test -race -short -count=1 -timeout 20m $(RACE_PKGS)

# QEMU guests (x86_64 and arm64 with 4 vCPUs and a 4-queue virtio-net NIC,
# a 1-CPU mipsel Malta) booted from Debian's kernels with the router build
# inside; see vmtest/doc.go. Kernels and busybox are cached in out/vm-cache.
test-vm: deps
	PACKET_STEERING_VM=1 $(GO) test -count=1 -timeout 15m -parallel 3 -v -run '^TestVM$$' ./vmtest/

# A short bounded run of every fuzz target (crashers are kept in testdata/fuzz).
# A count, not a duration: with a duration, Go 1.26's fuzz coordinator can
# fail a target with a bare "context deadline exceeded" at the deadline on a
# loaded machine (golang/go#75804, fixed in Go 1.27); a count has no deadline.
FUZZ_TIME ?= 50000x
test-fuzz:
	@for spec in $$($(GO) run ./scripts/fuzztargets); do \
		pkg=$${spec%%:*}; fn=$${spec##*:}; \
		echo "fuzz $$pkg $$fn ($(FUZZ_TIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZ_TIME) $$pkg || exit 1; \
	done

test-shell:
	@if [ -x files/test/run.sh ]; then files/test/run.sh; else echo "test-shell: no shell tests yet"; fi

test-browser: build
	@if [ -f luci-app-packet-steering/test/browser.test.mjs ]; then cd luci-app-packet-steering/test && node --test browser.test.mjs; else echo "test-browser: no browser test yet"; fi

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# The README's apply, one-shot CLI and status figures with their commands
# (scripts/perf.sh; the stock script's comparison when UCODE and STOCK_UC
# are set, see scripts/stock-compare.sh).
perf:
	sh scripts/perf.sh

# The router build under a 20,000-call invoke flood through the in-process
# broker: status latency, RSS peak and settling (README, "Reliability").
flood: build-router
	$(GO) run ./scripts/flood -bin ./$(BIN)-router

# Stripped static router binaries (-tags router) for the router
# architectures, their xz size (what squashfs stores), and a check against
# SIZE_LIMIT: exit status 1 when a binary is larger. Also the builds as
# the packages feed makes them (amd64 and mipsle: cgo, gcc, musl, dynamic),
# printed against the static ones, not checked (scripts/size-feed.sh).
size:
	@mkdir -p out
	GOOS=linux GOARCH=arm64 $(GO) build -tags $(ROUTER_TAGS) -trimpath -ldflags '$(LDFLAGS)' -o out/$(BIN)-arm64 $(PKG)
	GOOS=linux GOARCH=mipsle GOMIPS=softfloat $(GO) build -tags $(ROUTER_TAGS) $(call router_gcflags,mipsle) -trimpath -ldflags '$(call router_ldflags,mipsle)' -o out/$(BIN)-mipsle $(PKG)
	GOOS=linux GOARCH=arm64 $(GO) build -tags $(ROUTER_TAGS),tune -trimpath -ldflags '$(LDFLAGS)' -o out/$(BIN)-tune-arm64 $(PKG)
	GOOS=linux GOARCH=mipsle GOMIPS=softfloat $(GO) build -tags $(ROUTER_TAGS),tune $(call router_gcflags,mipsle) -trimpath -ldflags '$(call router_ldflags,mipsle)' -o out/$(BIN)-tune-mipsle $(PKG)
	GOOS=linux GOARCH=amd64 $(GO) build -tags $(ROUTER_TAGS) -trimpath -ldflags '$(LDFLAGS)' -o out/$(BIN)-amd64 $(PKG)
	@# The binary as the packages feed builds it (golang-package.mk: cgo,
	@# linked by the target's gcc against musl, dynamic), for amd64 and
	@# mipsle, against the static builds above (scripts/size-feed.sh).
	GO=$(GO) ROUTER_TAGS=$(ROUTER_TAGS) SIZE_LIMIT=$(SIZE_LIMIT) ./scripts/size-feed.sh out/$(BIN)
	@for f in out/$(BIN)-tune-arm64 out/$(BIN)-tune-mipsle; do \
		printf '%-33s %8d bytes  xz %8d bytes  (variant with tune, no limit)\n' $$f $$(stat -c %s $$f) $$(xz -9e -c $$f | wc -c); \
	done
	@rc=0; for f in out/$(BIN)-arm64 out/$(BIN)-mipsle; do \
		n=$$(stat -c %s $$f); \
		printf '%-33s %8d bytes  xz %8d bytes  limit %d\n' $$f $$n $$(xz -9e -c $$f | wc -c) $(SIZE_LIMIT); \
		if [ $$n -gt $(SIZE_LIMIT) ]; then echo "size: $$f is $$((n - $(SIZE_LIMIT))) bytes over the limit" >&2; rc=1; fi; \
	done; exit $$rc

# The embedded default: a demo router, the daemon and the LuCI page.
demo: build
	./$(BIN) demo

clean:
	rm -rf $(BIN) $(BIN)-router out

# ---- test-openwrt: the packages on real OpenWrt images (docs/testing-openwrt.md) ----
# Boots every OpenWrt rootfs tarball in PACKET_STEERING_OPENWRT_IMAGES
# (default ../shared/openwrt) in QEMU (TCG, Debian kernel, 4 CPUs, a 4-queue
# virtio-net NIC, threaded NAPI) and runs vmtest/openwrt/check.sh on it:
# opkg install of out/packages, upgrade to out/packages-next, removal, and
# the checks in between. Needs the packages built first (make packages
# packages-next).
.PHONY: test-openwrt
test-openwrt: deps packages packages-next
	PACKET_STEERING_OPENWRT=1 $(GO) test -count=1 -timeout 30m -parallel 3 -v -run '^TestOpenWrt$$' ./vmtest/
# ---- end test-openwrt ----
