package ubus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// AttrsFromJSON converts a JSON object into blobmsg attributes the way the
// stock `ubus call` does (libubox blobmsg_add_json_element): keys in order,
// integers as int32 when they fit and int64 otherwise, true/false as bool
// (int8), numbers with a fraction or exponent as double, null as unspec,
// objects and arrays nested. A repeated key keeps its first position and
// its last value, as json-c does. The top level must be an object; input
// nested deeper than MaxDepth or larger than MaxMessageLen is refused.
func AttrsFromJSON(data []byte) ([]Attr, error) {
	if len(data) > MaxMessageLen {
		return nil, fmt.Errorf("ubus: json: %d bytes exceed %d", len(data), MaxMessageLen)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("ubus: json: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("ubus: json: top level must be an object")
	}
	attrs, err := jsonObject(dec, 0)
	if err != nil {
		return nil, fmt.Errorf("ubus: json: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("ubus: json: trailing data after the object")
	}
	return attrs, nil
}

func jsonObject(dec *json.Decoder, depth int) ([]Attr, error) {
	attrs := []Attr{}
	index := map[string]int{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := tok.(string)
		a, err := jsonValue(dec, name, depth)
		if err != nil {
			return nil, err
		}
		if i, ok := index[name]; ok {
			attrs[i] = a
			continue
		}
		index[name] = len(attrs)
		attrs = append(attrs, a)
	}
	_, err := dec.Token() // '}'
	return attrs, err
}

func jsonValue(dec *json.Decoder, name string, depth int) (Attr, error) {
	tok, err := dec.Token()
	if err != nil {
		return Attr{}, err
	}
	switch v := tok.(type) {
	case json.Delim:
		if depth >= MaxDepth {
			return Attr{}, fmt.Errorf("nesting deeper than %d", MaxDepth)
		}
		if v == '{' {
			c, err := jsonObject(dec, depth+1)
			return Table(name, c...), err
		}
		c := []Attr{}
		for dec.More() {
			a, err := jsonValue(dec, "", depth+1)
			if err != nil {
				return Attr{}, err
			}
			c = append(c, a)
		}
		_, err := dec.Token() // ']'
		return Array(name, c...), err
	case string:
		return String(name, v), nil
	case bool:
		return Bool(name, v), nil
	case nil:
		return Attr{Name: name, Type: TypeUnspec}, nil
	case json.Number:
		s := string(v)
		if !strings.ContainsAny(s, ".eE") {
			i, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return Attr{}, fmt.Errorf("%q: integer %s out of range", name, s)
			}
			if i >= math.MinInt32 && i <= math.MaxInt32 {
				return Int32(name, int32(i)), nil
			}
			return Int64(name, i), nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return Attr{}, fmt.Errorf("%q: number %s out of range", name, s)
		}
		return Double(name, f), nil
	}
	return Attr{}, fmt.Errorf("unexpected token %v", tok)
}

// AttrsFromValue converts a Go value (a struct with encoding/json tags, a
// map[string]any...) into attributes by encoding it as JSON and applying
// AttrsFromJSON, so whole numbers become int32/int64 even if held in a
// float64.
func AttrsFromValue(v any) ([]Attr, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("ubus: from value: %w", err)
	}
	return AttrsFromJSON(data)
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

type jsonFormatter struct {
	buf    []byte
	indent string
	level  int
}

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
		} else {
			f.buf = strconv.AppendFloat(f.buf, a.Float, 'f', 6, 64)
		}
	case TypeString:
		f.str(a.Str)
	case TypeArray, TypeTable:
		f.list(a.Children, a.Type == TypeArray)
	}
}

func (f *jsonFormatter) str(s string) {
	const hex = "0123456789abcdef"
	f.buf = append(f.buf, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\b':
			f.buf = append(f.buf, '\\', 'b')
		case '\n':
			f.buf = append(f.buf, '\\', 'n')
		case '\t':
			f.buf = append(f.buf, '\\', 't')
		case '\r':
			f.buf = append(f.buf, '\\', 'r')
		case '"', '\\', '/':
			f.buf = append(f.buf, '\\', c)
		default:
			if c < ' ' {
				f.buf = append(f.buf, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			} else {
				f.buf = append(f.buf, c)
			}
		}
	}
	f.buf = append(f.buf, '"')
}
