// Package luciapp holds the LuCI app of packet-steering as files: the
// JavaScript view under htdocs/ and the menu.d and acl.d JSON under root/,
// exactly as the OpenWrt package installs them. It embeds them so that
// `packet-steering demo` serves the very files a router gets.
//
// It only exposes files; it must never hold a modified copy of them.
package luciapp

import (
	"embed"
	"io/fs"
)

//go:embed htdocs root
var files embed.FS

// Files returns the app's file tree, rooted at the luci-app-packet-steering directory
// (paths such as "htdocs/luci-static/resources/view/packet-steering/overview.js"
// and "root/usr/share/rpcd/acl.d/luci-app-packet-steering.json").
func Files() fs.FS { return files }
