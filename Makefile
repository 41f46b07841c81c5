# packet-steering: build, test, bench, size, demo.
GO      ?= go
BIN     := packet-steering
PKG     := ./cmd/packet-steering
LDFLAGS := -s -w -buildid=
export CGO_ENABLED := 0

.PHONY: all build test test-go test-fuzz test-shell test-browser bench size demo deps vet clean

all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) $(PKG)

deps:
	./scripts/deps.sh test

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet ./...

# Everything: Go unit, kernel (netns) and fuzz-smoke tests, shell scripts,
# and the browser test. Installs missing Debian/npm packages first.
test: deps vet test-go test-fuzz test-shell test-browser

test-go:
	$(GO) test -count=1 -timeout 20m ./...

# A short bounded run of every fuzz target (crashers are kept in testdata/fuzz).
FUZZ_TIME ?= 10s
test-fuzz:
	@for spec in $$($(GO) run ./scripts/fuzztargets); do \
		pkg=$${spec%%:*}; fn=$${spec##*:}; \
		echo "fuzz $$pkg $$fn ($(FUZZ_TIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZ_TIME) $$pkg || exit 1; \
	done

test-shell:
	@if [ -x files/test/run.sh ]; then files/test/run.sh; else echo "test-shell: no shell tests yet"; fi

test-browser: build
	@if [ -f luci-app/test/browser.test.mjs ]; then cd luci-app/test && node --test browser.test.mjs; else echo "test-browser: no browser test yet"; fi

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# Stripped static binaries for the router architectures, and their xz size.
size:
	@mkdir -p out
	GOOS=linux GOARCH=arm64 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o out/$(BIN)-arm64 $(PKG)
	GOOS=linux GOARCH=mipsle GOMIPS=softfloat $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o out/$(BIN)-mipsle $(PKG)
	@for f in out/$(BIN)-arm64 out/$(BIN)-mipsle; do \
		printf '%-28s %8d bytes  xz %8d bytes\n' $$f $$(stat -c %s $$f) $$(xz -9e -c $$f | wc -c); \
	done

# The embedded default: a demo router, the daemon and the LuCI page.
demo: build
	./$(BIN) demo

clean:
	rm -rf $(BIN) out
