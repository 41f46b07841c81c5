package vmtest

import (
	"fmt"
	"os"
	"path/filepath"
)

// monitoringPackages are the monitoring packages (openwrt/*/Makefile,
// arch all) that vmtest/openwrt/check-monitoring.sh offers to the image's
// opkg.
var monitoringPackages = []string{
	"prometheus-node-exporter-lua-packet-steering",
	"prometheus-node-exporter-ucode-packet-steering",
	"collectd-packet-steering",
}

// addMonitoringFiles adds to files (path in the router -> source) what
// check-monitoring.sh needs in /root/pscheck/mon: the script itself, the
// monitoring packages from pkgDir and the real exporters' programs from
// ../shared/tools/prometheus-node-exporter (beside the images), which the
// images do not ship.
func addMonitoringFiles(files map[string]string, pkgDir string) error {
	repo, err := repoRoot()
	if err != nil {
		return err
	}
	const dir = "root/pscheck/mon/"
	files[dir+"check-monitoring.sh"] = filepath.Join(repo, "vmtest", "openwrt", "check-monitoring.sh")
	for _, name := range monitoringPackages {
		p, err := findPackage(pkgDir, name, "all")
		if err != nil {
			return fmt.Errorf("monitoring checks: %w", err)
		}
		files[dir+filepath.Base(p)] = p
	}
	tools := filepath.Join(filepath.Dir(imagesDir(repo)), "tools", "prometheus-node-exporter")
	for dst, src := range map[string]string{
		"prometheus-node-exporter-lua": "prometheus-node-exporter-lua/files/usr/bin/prometheus-node-exporter-lua",
		"metrics.uc":                   "prometheus-node-exporter-ucode/files/metrics.uc",
	} {
		src = filepath.Join(tools, src)
		if _, err := os.Stat(src); err != nil {
			return fmt.Errorf("monitoring checks: the exporter: %w", err)
		}
		files[dir+dst] = src
	}
	return nil
}
