// Package vmtest boots QEMU guests that look like the routers the package
// ships for (x86_64 and arm64 with 4 CPUs and a 4-queue virtio-net NIC with
// one MSI-X vector per queue, and a 1-CPU 32-bit MIPS Malta) and runs the
// router build of packet-steering inside them on the guest's real root:
// snapshot, plan, apply, queues, the daemon on a ubus broker, then checks the
// kernel's own state and sends traffic into each queue to show where the
// queue's receive and transmit-completion work ran.
//
// Everything the guests run comes from Debian packages (kernels and busybox
// fetched with `apt-get download` and unpacked with `dpkg-deb -x` into
// out/vm-cache) and from this repository (the router binary and the
// vmguest helper, built for the guest's architecture). The package has no
// code outside its tests and the helper command in vmguest/.
//
// The test is opt-in: it runs only with PACKET_STEERING_VM=1 (`make
// test-vm`, part of `make test`), as root, with the QEMU and busybox
// packages that scripts/deps.sh installs.
package vmtest
