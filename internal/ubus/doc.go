// Package ubus is a cgo-free client and server library for OpenWrt's ubus
// message bus: the blob/blobmsg encoding, the framing of ubusd's unix-socket
// protocol, a connection that looks up and invokes objects, sends and listens
// for events, subscribes to notifications, and registers objects whose
// methods are served concurrently, plus a reconnecting Client for daemons.
//
// The wire format follows the stock ubusd, libubus and libubox sources
// (github.com/openwrt/ubus: ubusmsg.h, ubusd_proto.c, libubus-obj.c;
// github.com/openwrt/libubox: blob.c, blobmsg.c, blobmsg_json.c) and is checked
// byte for byte against captures of the stock broker and CLI in testdata.
//
// JSON is read and written here without encoding/json, which would not fit
// the router binary's size budget: AttrsFromJSON (the CLI's JSON-to-blobmsg
// rules), AttrsToJSON (the CLI's output), and for Go values AttrsFromValue,
// AttrsToValue and AttrsToStdJSON, which follow encoding/json's rules and
// are tested against it.
//
// The package must never block a caller without bound: every request takes a
// context, a lost connection fails pending requests, and decoders refuse
// hostile lengths (MaxMessageLen) and nesting (MaxDepth) before allocating.
// It never panics on input and holds no global mutable state.
package ubus
