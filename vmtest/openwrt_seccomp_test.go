package vmtest

import _ "embed"

// seccompCheckScript checks the daemon's seccomp filter on the router: the
// filter mode of the daemon procd runs, a call outside the list failing
// with ENOSYS, and no call outside the list on the paths it drives (see the
// script). check.sh sources it after least-privilege.
//
//go:embed openwrt/check-seccomp.sh
var seccompCheckScript []byte
