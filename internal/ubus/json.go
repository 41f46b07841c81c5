package ubus

import (
	"io"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/packet-steering/packet-steering/internal/outline"
)

// AttrsFromJSON converts a JSON object into blobmsg attributes the way the
// stock `ubus call` does (libubox blobmsg_add_json_element): keys in order,
// integers as int32 when they fit and int64 otherwise, true/false as bool
// (int8), numbers with a fraction or exponent as double, null as unspec,
// objects and arrays nested. A repeated key keeps its first position and
// its last value, as json-c does. The top level must be an object; input
// nested deeper than MaxDepth or larger than MaxMessageLen is refused, and
// so are integers beyond int64 and numbers beyond float64. Text is read as
// RFC 8259 JSON, strings as encoding/json reads them: every escape,
// including \uXXXX surrogate pairs, with each invalid UTF-8 byte or lone
// surrogate replaced by U+FFFD.
func AttrsFromJSON(data []byte) ([]Attr, error) {
	if len(data) > MaxMessageLen {
		return nil, outline.Errorf("ubus: json: %d bytes exceed %d", len(data), MaxMessageLen)
	}
	s := jsonScanner{data: data}
	s.space()
	if !s.next('{') {
		if s.pos == len(data) {
			return nil, outline.Errorf("ubus: json: %w", io.ErrUnexpectedEOF)
		}
		return nil, outline.Errorf("ubus: json: top level must be an object")
	}
	attrs, err := s.object(0)
	if err != nil {
		return nil, outline.Errorf("ubus: json: %w", err)
	}
	s.space()
	if s.pos != len(data) {
		return nil, outline.Errorf("ubus: json: trailing data after the object")
	}
	return attrs, nil
}

// jsonScanner reads JSON text from data at pos. It never reads past the
// end of data and never panics on any input.
type jsonScanner struct {
	data []byte
	pos  int
}

// space skips JSON whitespace.
//
//go:noinline
func (s *jsonScanner) space() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// next consumes c if it is the next byte.
//
//go:noinline
func (s *jsonScanner) next(c byte) bool {
	if s.pos < len(s.data) && s.data[s.pos] == c {
		s.pos++
		return true
	}
	return false
}

// syntax reports what was found at pos where want was expected.
func (s *jsonScanner) syntax(want string) error {
	if s.pos >= len(s.data) {
		return outline.Errorf("%w: %s expected", io.ErrUnexpectedEOF, want)
	}
	return outline.Errorf("offset %d: %s expected, found %q", s.pos, want, s.data[s.pos])
}

// object reads the members of an object whose '{' has been consumed.
func (s *jsonScanner) object(depth int) ([]Attr, error) {
	attrs := []Attr{}
	var index map[string]int
	s.space()
	if s.next('}') {
		return attrs, nil
	}
	for {
		s.space()
		if !s.next('"') {
			return nil, s.syntax("object key")
		}
		name, err := s.str()
		if err != nil {
			return nil, err
		}
		s.space()
		if !s.next(':') {
			return nil, s.syntax("':'")
		}
		a, err := s.value(name, depth)
		if err != nil {
			return nil, err
		}
		if index == nil {
			index = map[string]int{}
		}
		if i, ok := index[name]; ok {
			attrs[i] = a
		} else {
			index[name] = len(attrs)
			attrs = append(attrs, a)
		}
		s.space()
		if s.next('}') {
			return attrs, nil
		}
		if !s.next(',') {
			return nil, s.syntax("',' or '}'")
		}
	}
}

// array reads the elements of an array whose '[' has been consumed.
func (s *jsonScanner) array(depth int) ([]Attr, error) {
	c := []Attr{}
	s.space()
	if s.next(']') {
		return c, nil
	}
	for {
		a, err := s.value("", depth)
		if err != nil {
			return nil, err
		}
		c = append(c, a)
		s.space()
		if s.next(']') {
			return c, nil
		}
		if !s.next(',') {
			return nil, s.syntax("',' or ']'")
		}
	}
}

// literal consumes word if the text continues with it.
//
//go:noinline
func (s *jsonScanner) literal(word string) bool {
	if len(s.data)-s.pos >= len(word) && string(s.data[s.pos:s.pos+len(word)]) == word {
		s.pos += len(word)
		return true
	}
	return false
}

// value reads one value named name; depth counts the containers around it.
func (s *jsonScanner) value(name string, depth int) (Attr, error) {
	s.space()
	if s.pos >= len(s.data) {
		return Attr{}, s.syntax("value")
	}
	switch c := s.data[s.pos]; {
	case c == '{' || c == '[':
		if depth >= MaxDepth {
			return Attr{}, outline.Errorf("nesting deeper than %d", MaxDepth)
		}
		s.pos++
		if c == '{' {
			children, err := s.object(depth + 1)
			return Table(name, children...), err
		}
		children, err := s.array(depth + 1)
		return Array(name, children...), err
	case c == '"':
		s.pos++
		v, err := s.str()
		return String(name, v), err
	case c == '-' || c >= '0' && c <= '9':
		return s.number(name)
	case s.literal("true"):
		return Bool(name, true), nil
	case s.literal("false"):
		return Bool(name, false), nil
	case s.literal("null"):
		return Attr{Name: name, Type: TypeUnspec}, nil
	}
	return Attr{}, s.syntax("value")
}

// digits consumes a run of decimal digits and reports how many.
//
//go:noinline
func (s *jsonScanner) digits() int {
	n := 0
	for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
		s.pos++
		n++
	}
	return n
}

// number reads an RFC 8259 number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
// Without fraction or exponent it is an integer (int32 when it fits, else
// int64), otherwise a double.
func (s *jsonScanner) number(name string) (Attr, error) {
	start := s.pos
	s.next('-')
	if s.next('0') {
		// no further integer digits: "01" ends the number after "0"
	} else if s.digits() == 0 {
		return Attr{}, s.syntax("digit")
	}
	integer := true
	if s.next('.') {
		integer = false
		if s.digits() == 0 {
			return Attr{}, s.syntax("digit")
		}
	}
	if s.next('e') || s.next('E') {
		integer = false
		if !s.next('+') {
			s.next('-')
		}
		if s.digits() == 0 {
			return Attr{}, s.syntax("digit")
		}
	}
	text := string(s.data[start:s.pos])
	if integer {
		i, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return Attr{}, outline.Errorf("%q: integer %s out of range", name, text)
		}
		return intAttr(name, i), nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return Attr{}, outline.Errorf("%q: number %s out of range", name, text)
	}
	return Double(name, f), nil
}

// intAttr is i as the CLI stores an integer: int32 when it fits, else int64.
//
//go:noinline
func intAttr(name string, i int64) Attr {
	if i >= math.MinInt32 && i <= math.MaxInt32 {
		return Int32(name, int32(i))
	}
	return Int64(name, i)
}

// hex4 decodes the four hex digits at b, or returns -1.
//
//go:noinline
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// str reads a string whose opening quote has been consumed, through its
// closing quote. Control characters must be escaped; invalid UTF-8 bytes
// and lone surrogates become U+FFFD, as encoding/json does.
func (s *jsonScanner) str() (string, error) {
	start := s.pos
	// Fast path: no escapes and plain ASCII.
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		if c == '"' {
			s.pos++
			return string(s.data[start : s.pos-1]), nil
		}
		if c == '\\' || c < ' ' || c >= utf8.RuneSelf {
			break
		}
		s.pos++
	}
	buf := append([]byte(nil), s.data[start:s.pos]...)
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			return string(buf), nil
		case c < ' ':
			return "", outline.Errorf("offset %d: control character %q in string", s.pos, c)
		case c == '\\':
			if s.pos+1 >= len(s.data) {
				return "", outline.Errorf("%w: string escape", io.ErrUnexpectedEOF)
			}
			e := s.data[s.pos+1]
			s.pos += 2
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r := hex4(s.data[s.pos:])
				if r < 0 {
					return "", outline.Errorf("offset %d: bad \\u escape", s.pos-2)
				}
				s.pos += 4
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if len(s.data)-s.pos >= 6 && s.data[s.pos] == '\\' && s.data[s.pos+1] == 'u' {
						r2 = hex4(s.data[s.pos+2:])
					}
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						s.pos += 6
						r = d
					} else {
						r = utf8.RuneError
					}
				}
				buf = utf8.AppendRune(buf, r)
			default:
				return "", outline.Errorf("offset %d: bad escape \\%c", s.pos-2, e)
			}
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			s.pos++
		default:
			r, n := utf8.DecodeRune(s.data[s.pos:])
			if r == utf8.RuneError && n == 1 {
				buf = utf8.AppendRune(buf, utf8.RuneError)
			} else {
				buf = append(buf, s.data[s.pos:s.pos+n]...)
			}
			s.pos += n
		}
	}
	return "", outline.Errorf("%w: unterminated string", io.ErrUnexpectedEOF)
}

// AttrsToJSON formats attributes as one JSON object the way the stock
// `ubus call` prints a reply (libubox blobmsg_format_json_indent): with
// indent "\t" each member on its own line indented by level, `"name": value`;
// with indent "" everything on one line, `"name":value`. Booleans (int8) print
// as true/false, int16 as unsigned, doubles with six decimals ("%lf"), an
// unnamed member of a table as its bare value; strings escape '"', '\\',
// '/', \b \n \t \r and other control bytes (\u00XX) and pass other bytes
// through. Not-a-number and infinities, which JSON cannot hold, print as null.
func AttrsToJSON(attrs []Attr, indent string) ([]byte, error) {
	if _, err := attrsSize(attrs, false, 0); err != nil {
		return nil, err
	}
	f := jsonFormatter{indent: indent}
	f.list(attrs, false)
	return f.buf, nil
}

// AttrsToStdJSON formats attributes as one JSON object the way
// encoding/json's MarshalIndent(v, "", indent) formats the Go value they
// were made from with AttrsFromValue: `"name": value`, empty objects and
// arrays as {} and [], doubles as the shortest decimal that reads back
// (exponent form below 1e-6 and from 1e21 on), booleans (int8) as
// true/false, and strings escaped as encoding/json does by default (\",
// \\, \b \f \n \r \t, other control bytes and <, >, & as \u00XX, U+2028
// and U+2029 as \u2028 and \u2029, each invalid UTF-8 byte as \ufffd).
// With indent "" everything is on one line. Not-a-number and infinities,
// which AttrsFromValue never produces, print as null.
func AttrsToStdJSON(attrs []Attr, indent string) []byte {
	f := jsonFormatter{indent: indent, std: true}
	f.list(attrs, false)
	return f.buf
}

// jsonFormatter writes attributes as JSON text into buf: like the stock
// CLI, or like encoding/json when std is set.
type jsonFormatter struct {
	buf    []byte
	indent string
	level  int
	std    bool
}

//go:noinline
func (f *jsonFormatter) separator() {
	if f.indent == "" {
		return
	}
	f.buf = append(f.buf, '\n')
	for i := 0; i < f.level; i++ {
		f.buf = append(f.buf, f.indent...)
	}
}

func (f *jsonFormatter) list(attrs []Attr, array bool) {
	if array {
		f.buf = append(f.buf, '[')
	} else {
		f.buf = append(f.buf, '{')
	}
	if f.std && len(attrs) == 0 {
		if array {
			f.buf = append(f.buf, ']')
		} else {
			f.buf = append(f.buf, '}')
		}
		return
	}
	f.level++
	f.separator()
	for i := range attrs {
		if i > 0 {
			f.buf = append(f.buf, ',')
			f.separator()
		}
		f.element(&attrs[i], array)
	}
	f.level--
	f.separator()
	if array {
		f.buf = append(f.buf, ']')
	} else {
		f.buf = append(f.buf, '}')
	}
}

func (f *jsonFormatter) element(a *Attr, array bool) {
	if !array && a.Name != "" {
		f.str(a.Name)
		if f.indent != "" {
			f.buf = append(f.buf, ':', ' ')
		} else {
			f.buf = append(f.buf, ':')
		}
	}
	switch a.Type {
	case TypeUnspec:
		f.buf = append(f.buf, "null"...)
	case TypeInt8:
		f.buf = strconv.AppendBool(f.buf, a.Int&0xff != 0)
	case TypeInt16:
		f.buf = strconv.AppendInt(f.buf, int64(uint16(a.Int)), 10)
	case TypeInt32:
		f.buf = strconv.AppendInt(f.buf, int64(int32(a.Int)), 10)
	case TypeInt64:
		f.buf = strconv.AppendInt(f.buf, a.Int, 10)
	case TypeDouble:
		if math.IsNaN(a.Float) || math.IsInf(a.Float, 0) {
			f.buf = append(f.buf, "null"...)
		} else if f.std {
			f.buf = appendStdFloat(f.buf, a.Float)
		} else {
			f.buf = strconv.AppendFloat(f.buf, a.Float, 'f', 6, 64)
		}
	case TypeString:
		f.str(a.Str)
	case TypeArray, TypeTable:
		f.list(a.Children, a.Type == TypeArray)
	}
}

// appendStdFloat appends x as encoding/json prints a float64: the
// shortest decimal that reads back, in exponent form (with at least one
// exponent digit, "1e-7") when |x| < 1e-6 or |x| >= 1e21.
func appendStdFloat(b []byte, x float64) []byte {
	format := byte('f')
	if a := math.Abs(x); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, x, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// str appends s quoted. The stock CLI escapes '/', \b \n \t \r and other
// control bytes and passes all other bytes through; std mode escapes as
// encoding/json (see AttrsToStdJSON).
func (f *jsonFormatter) str(s string) {
	const hex = "0123456789abcdef"
	f.buf = append(f.buf, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf && f.std {
			r, n := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && n == 1:
				f.buf = append(f.buf, `\ufffd`...)
			case r == '\u2028' || r == '\u2029':
				f.buf = append(f.buf, '\\', 'u', '2', '0', '2', hex[r&15])
			default:
				f.buf = append(f.buf, s[i:i+n]...)
			}
			i += n
			continue
		}
		i++
		switch {
		case c == '\b':
			f.buf = append(f.buf, '\\', 'b')
		case c == '\f' && f.std:
			f.buf = append(f.buf, '\\', 'f')
		case c == '\n':
			f.buf = append(f.buf, '\\', 'n')
		case c == '\t':
			f.buf = append(f.buf, '\\', 't')
		case c == '\r':
			f.buf = append(f.buf, '\\', 'r')
		case c == '"' || c == '\\' || c == '/' && !f.std:
			f.buf = append(f.buf, '\\', c)
		case c < ' ' || f.std && (c == '<' || c == '>' || c == '&'):
			f.buf = append(f.buf, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		default:
			f.buf = append(f.buf, c)
		}
	}
	f.buf = append(f.buf, '"')
}
