package ubusobj

import (
	"errors"
	"testing"

	"github.com/packet-steering/packet-steering/internal/ubus"
)

// uhttpd-mod-ubus appends "ubus_rpc_session" to every call LuCI makes; the
// object must take such calls as if the argument were absent, and still
// refuse it when it is not a string.
func TestParseArgsIgnoresRPCSession(t *testing.T) {
	sid := ubus.String(RPCSessionArg, "00000000000000000000000000000000")
	for _, method := range []string{"status", "get_queues", "apply", "set_mode"} {
		args := []ubus.Attr{sid}
		if method == "set_mode" {
			args = append([]ubus.Attr{ubus.String("mode", "legacy")}, args...)
		}
		if _, err := ParseArgs(policyOf(t, method), args); err != nil {
			t.Errorf("%s with %s: %v, want accepted", method, RPCSessionArg, err)
		}
	}
	_, err := ParseArgs(policyOf(t, "status"), []ubus.Attr{ubus.Int32(RPCSessionArg, 1)})
	if !errors.Is(err, ubus.StatusInvalidArgument) {
		t.Errorf("status with an int32 %s: %v, want INVALID_ARGUMENT", RPCSessionArg, err)
	}
}
