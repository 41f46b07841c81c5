package daemon

import (
	"fmt"
	"io"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/packet-steering/packet-steering/internal/outline"
)

// Logger writes the daemon's log, one record per line. It implements
// ubus.Logger and ubusobj.Logger without importing log/slog, which would
// add a quarter of a megabyte to the router binary. It is safe for
// concurrent use; each line is one Write.
//
// On a router it logs to syslog, as OpenWrt's daemons do (logd reads
// /dev/log): each record with its own priority (facility daemon; debug,
// info, notice, warning, err), as a short plain line, `applied reason=start
// mode=auto changed=3 ...`, so that `logread -e packet-steering` and
// priority filters tell routine applies from failures. procd would log
// everything on stderr at err priority. Elsewhere (tests, a terminal) it
// writes log/slog's TextHandler format without the time stamp,
// `level=INFO msg=applied reason=start changed=3`. Debug records are
// written only with --debug.
type Logger struct {
	mu    outline.Mutex
	w     io.Writer
	sys   *SyslogSink // nil: text lines to w
	debug bool
	buf   []byte
}

// NewLogger logs text lines to w; debug also logs refused calls and
// connection attempts.
func NewLogger(w io.Writer, debug bool) *Logger {
	return &Logger{w: w, debug: debug}
}

// NewSyslogLogger logs to the syslog socket, falling back to text lines on
// w for records the socket does not take.
func NewSyslogLogger(sys *SyslogSink, w io.Writer, debug bool) *Logger {
	return &Logger{w: w, sys: sys, debug: debug}
}

// Syslog priorities (RFC 5424 severities) of the levels.
const (
	sevErr     = 3
	sevWarning = 4
	sevNotice  = 5
	sevInfo    = 6
	sevDebug   = 7
)

// Debug logs msg and key-value pairs at level DEBUG, when enabled.
//
//go:noinline
func (l *Logger) Debug(msg string, args ...any) {
	if l.debug {
		l.log(sevDebug, "DEBUG", msg, args)
	}
}

// Info logs msg and key-value pairs at level INFO.
//
//go:noinline
func (l *Logger) Info(msg string, args ...any) { l.log(sevInfo, "INFO", msg, args) }

// Notice logs msg and key-value pairs at level NOTICE: a normal but
// significant event (taking steering over again).
func (l *Logger) Notice(msg string, args ...any) { l.log(sevNotice, "NOTICE", msg, args) }

// Warn logs msg and key-value pairs at level WARN.
//
//go:noinline
func (l *Logger) Warn(msg string, args ...any) { l.log(sevWarning, "WARN", msg, args) }

// Error logs msg and key-value pairs at level ERROR.
//
//go:noinline
func (l *Logger) Error(msg string, args ...any) { l.log(sevErr, "ERROR", msg, args) }

func (l *Logger) log(sev int, level, msg string, args []any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buf[:0]
	if l.sys != nil {
		b = l.sys.header(b, sev)
		b = append(b, msg...)
	} else {
		b = append(b, "level="...)
		b = append(b, level...)
		b = append(b, " msg="...)
		b = appendLogString(b, msg)
	}
	for len(args) > 0 {
		// As log/slog: a key that is not a string makes its value !BADKEY.
		key, ok := args[0].(string)
		var val any
		if ok && len(args) > 1 {
			val, args = args[1], args[2:]
		} else if ok {
			key, val, args = "!BADKEY", key, args[1:]
		} else {
			key, val, args = "!BADKEY", args[0], args[1:]
		}
		b = append(b, ' ')
		b = appendLogString(b, key)
		b = append(b, '=')
		b = appendLogValue(b, val)
	}
	l.buf = b
	if l.sys != nil {
		if err := l.sys.send(b); err == nil {
			return
		}
		// logd is restarting: keep the record on stderr.
		b = append(b[l.sys.headerLen(sev):], '\n')
		l.buf = b
	} else {
		b = append(b, '\n')
		l.buf = b
	}
	_, _ = l.w.Write(b)
}

// appendLogValue formats v as log/slog's TextHandler does for the kinds the
// daemon logs: strings, numbers, booleans, errors and Stringers (quoted
// when needed), anything else with fmt's %+v.
func appendLogValue(b []byte, v any) []byte {
	switch v := v.(type) {
	case string:
		return appendLogString(b, v)
	case int:
		return strconv.AppendInt(b, int64(v), 10)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case uint32:
		return strconv.AppendUint(b, uint64(v), 10)
	case uint64:
		return strconv.AppendUint(b, v, 10)
	case bool:
		return strconv.AppendBool(b, v)
	case error:
		return appendLogString(b, v.Error())
	case fmt.Stringer:
		return appendLogString(b, v.String())
	case nil:
		return append(b, "<nil>"...)
	}
	return appendLogString(b, fmt.Sprintf("%+v", v))
}

// appendLogString appends s, quoted as by strconv.Quote when it is empty or
// holds a space, '=', '"', a control or non-printing character or invalid
// UTF-8 (log/slog's rule), so that every line splits into key=value pairs.
func appendLogString(b []byte, s string) []byte {
	if logNeedsQuoting(s) {
		return strconv.AppendQuote(b, s)
	}
	return append(b, s...)
}

func logNeedsQuoting(s string) bool {
	if s == "" {
		return true
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c <= ' ' || c == '=' || c == '"' || c == 0x7f {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return true
		}
		i += size
	}
	return false
}
