package vmtest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
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
// images do not ship. Each package's files are also unpacked into the
// router's root (the rootfs at root) below /root/pscheck/mon/NAME.data, for
// the images whose busybox has no tar.
func addMonitoringFiles(files map[string]string, pkgDir, root string) error {
	repo, err := repoRoot()
	if err != nil {
		return err
	}
	const dir = "root/pscheck/mon/"
	files[dir+"check-monitoring.sh"] = filepath.Join(repo, "vmtest", "openwrt", "check-monitoring.sh")
	// The test's luasocket stand-in (socket.gettime only), for the exporter.
	files[dir+"shim/socket.lua"] = filepath.Join(repo, "vmtest", "openwrt", "socket-shim.lua")
	for _, name := range monitoringPackages {
		p, err := findPackage(pkgDir, name, "all")
		if err != nil {
			return fmt.Errorf("monitoring checks: %w", err)
		}
		files[dir+filepath.Base(p)] = p
		if err := unpackIPKData(p, filepath.Join(root, dir, name+".data")); err != nil {
			return fmt.Errorf("monitoring checks: %s: %w", p, err)
		}
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

// unpackIPKData writes the regular files of an .ipk's data.tar.gz (an
// OpenWrt package: a tar.gz holding debian-binary, control.tar.gz and
// data.tar.gz) below dst, with their modes.
func unpackIPKData(ipk, dst string) error {
	f, err := os.Open(ipk)
	if err != nil {
		return err
	}
	defer f.Close()
	outer, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(outer)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return errors.New("no data.tar.gz")
		}
		if err != nil {
			return err
		}
		if strings.TrimPrefix(h.Name, "./") != "data.tar.gz" {
			continue
		}
		var data bytes.Buffer
		if _, err := io.Copy(&data, io.LimitReader(tr, 64<<20)); err != nil {
			return err
		}
		inner, err := gzip.NewReader(&data)
		if err != nil {
			return err
		}
		dr := tar.NewReader(inner)
		for {
			h, err := dr.Next()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			name := filepath.Clean(strings.TrimPrefix(h.Name, "./"))
			if h.Typeflag != tar.TypeReg || name == "." || strings.HasPrefix(name, "..") || filepath.IsAbs(name) {
				continue
			}
			var b bytes.Buffer
			if _, err := io.Copy(&b, io.LimitReader(dr, 16<<20)); err != nil {
				return err
			}
			if err := writeFile(filepath.Join(dst, name), b.Bytes(), os.FileMode(h.Mode)&0o777); err != nil {
				return err
			}
		}
	}
}
