// Package layout holds no code: its test checks the module's import rules,
// the layering docs/design.md draws.
//
//	libraries (internal/ubus, internal/uci, internal/cpuset, internal/kfs,
//	internal/demo, ...)  import nothing of the product
//	platform -> plan -> adaptive -> steering -> ubusobj, tune -> daemon
//	-> cmd/packet-steering/internal/demorun (the demo) -> cmd
//
// Each product package imports only packages of the layers before its own
// (and the libraries); nothing imports the tools (scripts, vmtest, e2e).
package layout
