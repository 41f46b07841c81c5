package ubusobj

import (
	"bytes"
	"context"
	"io"

	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/internal/ubus"
)

// The rpcd exec plugin protocol, as openwrt/rpcd's plugin.c implements it
// (rpc_plugin_register_exec, rpc_plugin_parse_signature, rpc_plugin_call and
// its callbacks; the timeout is rpc_exec_timeout in exec.c and main.c):
//
//   - At start (and again after SIGHUP, when rpcd re-executes itself) rpcd
//     runs `/usr/libexec/rpcd/<object> list` with stdin and stderr on
//     /dev/null and no time limit, reads one JSON object from stdout and
//     registers the object <object> with one method per member whose value
//     is an object: {"method":{"arg":example}}. The example's JSON type is
//     the argument's blobmsg type: a string is string, true/false bool, an
//     object table, an array array, a fraction double, and an integer int32
//     except 8, 16 and 64, which select int8, int16 and int64. No member
//     (an empty object, or no JSON) registers nothing: ubusd keeps the name
//     free for another program.
//   - Each call runs `<object> call <method>` with the arguments as one
//     JSON object on stdin (blobmsg_format_json; stdin is then closed) and
//     parses stdout as one JSON object, which becomes the reply (integers
//     that fit int32 as int32, others int64, booleans as bool). Anything
//     else decides the status: JSON that is not an object (or text that
//     is not JSON) is INVALID_ARGUMENT (2); a JSON null, and no output at
//     all (json-c's tokener starts in its success state, with no object),
//     are NO_DATA (5), which the ubus CLI prints as "No response". The exit
//     status and stderr are not read.
//   - A call that has not finished within rpcd's timeout (`rpcd -t`,
//     seconds; 120 by default, the OpenWrt package's config sets 30) is
//     killed with SIGKILL and answered TIMEOUT (7).
//
// So the statuses a plugin can give are 0, 2 (bad input, as the daemon
// replies) and 5; the daemon's UNKNOWN_ERROR (9) becomes NO_DATA here.

// ExecList writes what the plugin prints for `list`: the signature of every
// method, from the same policy table the daemon registers, in rpcd's
// format; with serve false (the daemon owns the object) an empty object, so
// rpcd registers nothing and the name stays the daemon's.
func ExecList(w io.Writer, serve bool) error {
	var top []ubus.Attr
	if serve {
		for _, m := range Methods() {
			args := make([]ubus.Attr, len(m.Args))
			for i, p := range m.Args {
				// An example whose JSON type rpcd's
				// rpc_plugin_parse_signature reads back as p.Type, for the
				// types the table uses; TestExecExampleTypes checks it.
				switch p.Type {
				case ubus.TypeString:
					args[i] = ubus.String(p.Name, "string")
				case ubus.TypeBool:
					args[i] = ubus.Bool(p.Name, true)
				default:
					args[i] = ubus.Int32(p.Name, 32)
				}
			}
			top = append(top, ubus.Table(m.Name, args...))
		}
	}
	if _, err := w.Write(append(ubus.AttrsToStdJSON(top, ""), '\n')); err != nil {
		return outline.Errorf("ubusobj: list: %w", err)
	}
	return nil
}

// MaxExecInput bounds the arguments read from stdin in `call`: rpcd writes
// one ubus message's arguments, and a ubus message is at most
// ubus.MaxMessageLen bytes as blobmsg; as JSON it is of the same order.
const MaxExecInput = ubus.MaxMessageLen

// ExecCall answers `call METHOD` of the exec protocol: it reads the
// arguments as a JSON object from in, runs the call as the daemon would
// (Call: the same validation, engine and reply) and writes the reply as
// JSON to out. On failure it writes what makes rpcd reply the nearest
// status (false, JSON that is not an object: INVALID_ARGUMENT for the
// caller's mistakes, such as arguments that are not a JSON object, an
// unknown method or a refused argument; null: NO_DATA for a failure of the
// call) and returns the error with the daemon's status (ubus.StatusOf).
// Empty input is a call without arguments.
func (o *Object) ExecCall(ctx context.Context, method string, in io.Reader, out io.Writer) error {
	data, err := io.ReadAll(io.LimitReader(in, MaxExecInput+1))
	if err != nil {
		return o.execFail(out, outline.Errorf("%w: read arguments: %w", ubus.StatusUnknownError, err))
	}
	var args []ubus.Attr
	if len(bytes.TrimSpace(data)) > 0 {
		if args, err = ubus.AttrsFromJSON(data); err != nil {
			return o.execFail(out, outline.Errorf("%w: arguments: %w", ubus.StatusInvalidArgument, err))
		}
	}
	reply, err := o.Call(ctx, method, args)
	if err != nil {
		return o.execFail(out, err)
	}
	b := append(ubus.AttrsToStdJSON(reply, ""), '\n')
	if _, err := out.Write(b); err != nil {
		return outline.Errorf("%w: write reply: %w", ubus.StatusUnknownError, err)
	}
	return nil
}

// execFail writes the output that gives err's status through rpcd, as
// close as rpcd allows, and returns err.
func (o *Object) execFail(out io.Writer, err error) error {
	switch ubus.StatusOf(err) {
	case ubus.StatusInvalidArgument, ubus.StatusMethodNotFound:
		// Not an object: rpcd replies INVALID_ARGUMENT.
		if _, werr := out.Write([]byte("false\n")); werr != nil {
			return outline.JoinErrors(err, werr)
		}
	default:
		if _, werr := out.Write([]byte("null\n")); werr != nil {
			return outline.JoinErrors(err, werr)
		}
	}
	return err
}
