package ubusobj

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/plan"
)

// errArg marks an argument the caller got wrong. It wraps
// ubus.StatusInvalidArgument, so a handler returning it replies status 2.
var errArg = outline.Errorf("%w", ubus.StatusInvalidArgument)

// argErrorf returns an error that replies INVALID_ARGUMENT and says why.
func argErrorf(format string, a ...any) error {
	return outline.Errorf("%w: %s", errArg, fmt.Sprintf(format, a...))
}

// RPCSessionArg is the string argument uhttpd-mod-ubus appends to every
// call it forwards from HTTP (the caller's session id, see uhttpd's ubus.c,
// uh_ubus_send_request). ParseArgs ignores it, as blobmsg_parse in a
// libubus server does, so that calls from LuCI are not refused.
const RPCSessionArg = "ubus_rpc_session"

// ArgPolicy is one argument of a method: its name and blobmsg type (what
// `ubus -v list` shows), whether it must be present, and a check of its
// value. The same policy builds the signature and validates every call, as
// a libubus server's blobmsg_policy does both, so the two cannot disagree.
type ArgPolicy struct {
	Name     string
	Type     ubus.Type
	Required bool
	// Check validates a value that already has the right type; nil accepts
	// any value of that type.
	Check func(a ubus.Attr) error
	// Doc says what the argument means, for documentation and errors.
	Doc string
}

// accepts reports whether an attribute of type t can carry this argument.
// An int32 argument takes every integer width but int8: the stock CLI and
// rpcd turn a JSON number into int32 when it fits and int64 otherwise
// (libubox blobmsg_json.c), so a large value arrives as int64 and is then
// refused by its range check with the same status. A bool takes only int8,
// which is what JSON true/false become.
func (p ArgPolicy) accepts(t ubus.Type) bool {
	if p.Type == ubus.TypeInt32 {
		return t == ubus.TypeInt32 || t == ubus.TypeInt64 || t == ubus.TypeInt16
	}
	return t == p.Type
}

// Args is a call's arguments after validation: for each argument of the
// policy, in order, its value and whether it was given.
type Args struct {
	vals []ubus.Attr
	set  []bool
}

// Field is one argument of a method: its policy and how a value the policy
// accepted is stored in the method's argument struct. Set gets a pointer
// to that struct and names one of its fields, so a misspelt field does not
// compile; the wire name exists only in the policy, the one place both the
// signature and validation read it from. (Not generic: four instantiations
// cost the router binary more than its size budget allows.)
type Field struct {
	ArgPolicy
	Set func(dst any, a ubus.Attr)
}

// decodeArgs validates attrs against fields (ParseArgs) and stores each
// argument given into dst, a pointer to the argument struct holding the
// defaults of the arguments not given.
func decodeArgs(fields []Field, dst any, attrs []ubus.Attr) error {
	vals, err := ParseArgs(policies(fields), attrs)
	if err != nil {
		return err
	}
	for i, f := range fields {
		if vals.set[i] {
			f.Set(dst, vals.vals[i])
		}
	}
	return nil
}

// policies returns the policy of each field, in order.
func policies(fields []Field) []ArgPolicy {
	out := make([]ArgPolicy, len(fields))
	for i, f := range fields {
		out[i] = f.ArgPolicy
	}
	return out
}

// ParseArgs validates attrs against policy. It refuses, with an error that
// wraps ubus.StatusInvalidArgument: an argument not in the policy (the stock
// blobmsg_parse ignores those; here a misspelt "dryrun" must not turn a dry
// run into a real apply; the string RPCSessionArg is the one exception), an
// unnamed or repeated argument, a value of the wrong type, a value its check
// refuses, a missing required argument.
func ParseArgs(policy []ArgPolicy, attrs []ubus.Attr) (Args, error) {
	a := Args{vals: make([]ubus.Attr, len(policy)), set: make([]bool, len(policy))}
	for _, at := range attrs {
		if at.Name == RPCSessionArg && at.Type == ubus.TypeString {
			continue // added by uhttpd-mod-ubus to every call from LuCI
		}
		i := policyIndex(policy, at.Name)
		if i < 0 {
			if at.Name == "" {
				return Args{}, argErrorf("unnamed argument")
			}
			return Args{}, argErrorf("unknown argument %q (accepted: %s)", at.Name, policyNames(policy))
		}
		p := policy[i]
		if a.set[i] {
			return Args{}, argErrorf("argument %q given twice", at.Name)
		}
		if !p.accepts(at.Type) {
			return Args{}, argErrorf("argument %q is %s, want %s", at.Name, at.Type, p.Type)
		}
		if p.Type == ubus.TypeInt32 && (at.Int < math.MinInt32 || at.Int > math.MaxInt32) {
			return Args{}, argErrorf("argument %q: %d does not fit int32", at.Name, at.Int)
		}
		if p.Check != nil {
			if err := p.Check(at); err != nil {
				return Args{}, argErrorf("argument %q: %v", at.Name, err)
			}
		}
		a.vals[i], a.set[i] = at, true
	}
	for i, p := range policy {
		if p.Required && !a.set[i] {
			return Args{}, argErrorf("argument %q is required", p.Name)
		}
	}
	return a, nil
}

func policyIndex(policy []ArgPolicy, name string) int {
	if name == "" {
		return -1
	}
	for i, p := range policy {
		if p.Name == name {
			return i
		}
	}
	return -1
}

func policyNames(policy []ArgPolicy) string {
	if len(policy) == 0 {
		return "none"
	}
	names := make([]string, len(policy))
	for i, p := range policy {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

// IFNAMSIZ is the kernel's size of an interface name including its NUL
// (include/uapi/linux/if.h).
const IFNAMSIZ = 16

// MaxReasonLen bounds the reason text of an apply; it ends up in the log
// and in the event, so it is one short printable line.
const MaxReasonLen = 128

// checkDevice accepts a name the kernel accepts for a netdev
// (net/core/dev.c dev_valid_name: 1 to IFNAMSIZ-1 bytes, not "." or "..",
// no '/', ':' or white space). Whether the device exists is the engine's
// question.
func checkDevice(a ubus.Attr) error {
	s := a.Str
	switch {
	case s == "":
		return errors.New("empty device name")
	case len(s) >= IFNAMSIZ:
		return outline.Errorf("device name %q longer than %d bytes", s, IFNAMSIZ-1)
	case s == "." || s == "..":
		return outline.Errorf("device name %q", s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '/' || c == ':' || c <= ' ' || c == 0x7f {
			return outline.Errorf("device name %q holds %q", s, c)
		}
	}
	return nil
}

// checkMode accepts the modes of docs/design.md "Modes" (steering.ParseMode).
func checkMode(a ubus.Attr) error {
	_, err := plan.ParseMode(a.Str)
	return err
}

// checkFlows accepts 0..steering.MaxFlows.
func checkFlows(a ubus.Attr) error {
	if a.Int < 0 || a.Int > plan.MaxFlows {
		return outline.Errorf("flows %d outside 0..%d", a.Int, plan.MaxFlows)
	}
	return nil
}

// checkReason accepts one printable line of at most MaxReasonLen bytes.
func checkReason(a ubus.Attr) error {
	s := a.Str
	if len(s) > MaxReasonLen {
		return outline.Errorf("reason longer than %d bytes", MaxReasonLen)
	}
	if !utf8.ValidString(s) {
		return errors.New("reason is not UTF-8")
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return outline.Errorf("reason holds %q", r)
		}
	}
	return nil
}
