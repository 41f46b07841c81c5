package ubus

import (
	"bytes"
	"encoding"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/packet-steering/packet-steering/internal/outline"
)

// AttrsFromValue converts a Go value (a struct with encoding/json tags, a
// map with string keys, or a pointer to one) into attributes. The result is
// what encoding the value with encoding/json and reading the text with
// AttrsFromJSON would give, built directly by reflection: whole numbers
// become int32/int64 even if held in a float, bool becomes int8, nil
// pointers, slices and maps become unspec, []byte a base64 string, a
// TextMarshaler (time.Time) its text, invalid UTF-8 bytes U+FFFD; json tags
// with omitempty and "-" are honoured, embedded structs promote their
// fields. A type with both MarshalText and MarshalJSON is taken to print
// the same text with both, as time.Time does (RFC 3339 with nanoseconds).
// Types with a MarshalJSON method only, the ",string" tag option,
// non-finite floats and values nested deeper than MaxDepth are refused.
func AttrsFromValue(v any) ([]Attr, error) {
	var c ValueCodec
	return c.Attrs(v)
}

// AttrsToValue stores attributes (the members of a table, as AttrsFromJSON
// returns them) in the struct or map v points to, following encoding/json's
// Unmarshal rules: members matched to fields by json tag or name (exactly,
// else case-insensitively), unknown members ignored, null leaving a value
// alone but clearing pointers, slices, maps and interfaces; slices, arrays,
// maps with string or integer keys, pointers (allocated as needed), ints and
// uints (range-checked), floats, bools, strings, []byte from base64 and
// TextUnmarshaler (time.Time) from a string; an empty interface receives
// map[string]any, []any, float64, string, bool or nil. A value of the wrong
// kind is an error.
//
//go:noinline
func AttrsToValue(attrs []Attr, v any) error {
	var c ValueCodec
	return c.Decode(attrs, v)
}

// ValueCodec is AttrsFromValue and AttrsToValue with the field lists of the
// struct types it has met kept for the next call (a ubus object answers
// the same types call after call). Its zero value is ready; it is safe for
// concurrent use.
type ValueCodec struct {
	// A lock and two maps, not sync.Map: a few dozen types, met once each,
	// and sync.Map's generic trie would be inlined into this package
	// (make size).
	mu      outline.RWMutex
	fields  map[reflect.Type][]valueField
	methods map[reflect.Type]uint8 // the marshal* bits
}

// The encoding methods a type T has, as ValueCodec.marshalers reports them.
const (
	marshalText    = 1 << iota // T is an encoding.TextMarshaler
	marshalPtrText             // *T is one, T is not
	marshalJSON                // T or *T has MarshalJSON
)

// marshalers reports the encoding methods of t, from memory when t was
// met before (looking them up costs more than the rest of encoding a
// value).
func (c *ValueCodec) marshalers(t reflect.Type) uint8 {
	c.mu.RLock()
	m, ok := c.methods[t]
	c.mu.RUnlock()
	if ok {
		return m
	}
	pt := reflect.PointerTo(t)
	switch {
	case t.Implements(textMarshalerType):
		m |= marshalText
	case pt.Implements(textMarshalerType):
		m |= marshalPtrText
	}
	if t.Implements(jsonMarshalerType) || pt.Implements(jsonMarshalerType) {
		m |= marshalJSON
	}
	c.mu.Lock()
	if c.methods == nil {
		c.methods = map[reflect.Type]uint8{}
	}
	c.methods[t] = m
	c.mu.Unlock()
	return m
}

// Attrs is AttrsFromValue.
func (c *ValueCodec) Attrs(v any) ([]Attr, error) {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() {
		return nil, outline.Errorf("ubus: from value: top level must be an object, not null")
	}
	a, err := c.encode("", rv, 0)
	if err != nil {
		return nil, outline.Errorf("ubus: from value: %w", err)
	}
	if a.Type != TypeTable {
		return nil, outline.Errorf("ubus: from value: top level must be an object, not %s", rv.Type())
	}
	return a.Children, nil
}

// Decode is AttrsToValue.
func (c *ValueCodec) Decode(attrs []Attr, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return outline.Errorf("ubus: to value: need a non-nil pointer, got %T", v)
	}
	top := Table("", attrs...)
	if err := c.decode(&top, rv.Elem(), "."); err != nil {
		return outline.Errorf("ubus: to value: %w", err)
	}
	return nil
}

var (
	textMarshalerType   = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	timeType            = reflect.TypeFor[time.Time]()
	jsonMarshalerType   = reflect.TypeFor[interface{ MarshalJSON() ([]byte, error) }]()
)

// valueField is one struct field as encoding/json sees it.
type valueField struct {
	index     []int // path through embedded structs
	name      string
	omitEmpty bool
	tagged    bool
}

// structFields is the field list of t, from memory when t was met before.
func (c *ValueCodec) structFields(t reflect.Type) ([]valueField, error) {
	c.mu.RLock()
	f, ok := c.fields[t]
	c.mu.RUnlock()
	if ok {
		return f, nil
	}
	f, err := typeFields(t)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.fields == nil {
		c.fields = map[reflect.Type][]valueField{}
	}
	c.fields[t] = f
	c.mu.Unlock()
	return f, nil
}

// typeFields lists the fields encoding/json encodes for struct type t, in
// field order: exported fields not tagged "-", with the fields of untagged
// embedded structs promoted; of several fields with one name the shallowest
// wins, among equals the only tagged one, and otherwise none.
func typeFields(t reflect.Type) ([]valueField, error) {
	type level struct {
		t     reflect.Type
		index []int
	}
	var all []valueField
	visited := map[reflect.Type]bool{}
	for current := []level{{t: t}}; len(current) > 0; {
		var next []level
		for _, l := range current {
			if visited[l.t] {
				continue
			}
			visited[l.t] = true
			for i := 0; i < l.t.NumField(); i++ {
				f := l.t.Field(i)
				ft := f.Type
				if f.Anonymous && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if f.Anonymous {
					if !f.IsExported() && ft.Kind() != reflect.Struct {
						continue
					}
				} else if !f.IsExported() {
					continue
				}
				tag := f.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, opts, _ := strings.Cut(tag, ",")
				if slices.Contains(strings.Split(opts, ","), "string") {
					return nil, outline.Errorf("%s.%s: the json \",string\" option is not supported", t, f.Name)
				}
				index := append(slices.Clip(l.index), i)
				if name == "" && f.Anonymous && ft.Kind() == reflect.Struct {
					next = append(next, level{t: ft, index: index})
					continue
				}
				vf := valueField{index: index, name: name, tagged: name != "",
					omitEmpty: slices.Contains(strings.Split(opts, ","), "omitempty")}
				if name == "" {
					vf.name = f.Name
				}
				all = append(all, vf)
			}
		}
		current = next
	}
	// Dominant field per name.
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].name != all[j].name {
			return all[i].name < all[j].name
		}
		if len(all[i].index) != len(all[j].index) {
			return len(all[i].index) < len(all[j].index)
		}
		return all[i].tagged && !all[j].tagged
	})
	out := make([]valueField, 0, len(all))
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && all[j].name == all[i].name {
			j++
		}
		group := all[i:j]
		if len(group) == 1 || len(group[1].index) > len(group[0].index) ||
			group[0].tagged && !group[1].tagged {
			out = append(out, group[0])
		}
		i = j
	}
	sort.Slice(out, func(i, j int) bool { return slices.Compare(out[i].index, out[j].index) < 0 })
	return out, nil
}

// isEmpty is encoding/json's notion of an empty value for omitempty.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.Interface, reflect.Pointer:
		return v.IsNil()
	}
	return false
}

// validUTF8 replaces each byte of s that is not part of valid UTF-8 with
// U+FFFD, as encoding/json does.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// fieldByIndex is v's field at index, or false when a nil embedded pointer
// is on the way.
func fieldByIndex(v reflect.Value, index []int) (reflect.Value, bool) {
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return reflect.Value{}, false
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v, true
}

func (c *ValueCodec) encodeStruct(v reflect.Value, depth int) ([]Attr, error) {
	fields, err := c.structFields(v.Type())
	if err != nil {
		return nil, err
	}
	attrs := make([]Attr, 0, len(fields))
	for _, f := range fields {
		fv, ok := fieldByIndex(v, f.index)
		if !ok || f.omitEmpty && isEmpty(fv) {
			continue
		}
		a, err := c.encode(f.name, fv, depth+1)
		if err != nil {
			return nil, err
		}
		attrs = append(attrs, a)
	}
	return attrs, nil
}

// encode converts v, named name, at depth (the containers around it).
func (c *ValueCodec) encode(name string, v reflect.Value, depth int) (Attr, error) {
	t := v.Type()
	if (t.Kind() == reflect.Pointer || t.Kind() == reflect.Interface) && v.IsNil() {
		return Attr{Name: name, Type: TypeUnspec}, nil
	}
	if m := c.marshalers(t); m != 0 {
		switch {
		case m&marshalText != 0:
			return textAttr(name, v)
		case m&marshalPtrText != 0 && v.CanAddr():
			return textAttr(name, v.Addr())
		case m&marshalJSON != 0 && (t.Implements(jsonMarshalerType) || v.CanAddr()):
			return Attr{}, outline.Errorf("%q: %s has a MarshalJSON method and no MarshalText, which is not supported", name, t)
		}
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		return c.encode(name, v.Elem(), depth)
	case reflect.Struct:
		if depth > MaxDepth {
			return Attr{}, outline.Errorf("%q: nesting deeper than %d", name, MaxDepth)
		}
		children, err := c.encodeStruct(v, depth)
		return Table(name, children...), err
	case reflect.Slice:
		if v.IsNil() {
			return Attr{Name: name, Type: TypeUnspec}, nil
		}
		if t.Elem().Kind() == reflect.Uint8 {
			return String(name, b64Encode(v.Bytes())), nil
		}
		fallthrough
	case reflect.Array:
		if depth > MaxDepth {
			return Attr{}, outline.Errorf("%q: nesting deeper than %d", name, MaxDepth)
		}
		children := make([]Attr, v.Len())
		for i := range children {
			var err error
			if children[i], err = c.encode("", v.Index(i), depth+1); err != nil {
				return Attr{}, err
			}
		}
		return Array(name, children...), nil
	case reflect.Map:
		if v.IsNil() {
			return Attr{Name: name, Type: TypeUnspec}, nil
		}
		if depth > MaxDepth {
			return Attr{}, outline.Errorf("%q: nesting deeper than %d", name, MaxDepth)
		}
		type member struct {
			key string
			val reflect.Value
		}
		members := make([]member, 0, v.Len())
		for it := v.MapRange(); it.Next(); {
			k := it.Key()
			var key string
			switch k.Kind() {
			case reflect.String:
				key = k.String()
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
				key = strconv.FormatInt(k.Int(), 10)
			case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
				key = outline.FormatUint(k.Uint(), 10)
			default:
				return Attr{}, outline.Errorf("%q: map key type %s not supported", name, k.Type())
			}
			members = append(members, member{key, it.Value()})
		}
		// encoding/json sorts by the key as it is, then writes invalid
		// UTF-8 as U+FFFD; keys that become equal are one member when read
		// back, at the first position with the last value.
		sort.Slice(members, func(i, j int) bool { return members[i].key < members[j].key })
		children := make([]Attr, 0, len(members))
		var index map[string]int
		for _, m := range members {
			key := validUTF8(m.key)
			a, err := c.encode(key, m.val, depth+1)
			if err != nil {
				return Attr{}, err
			}
			if key != m.key && index == nil {
				index = make(map[string]int, len(members))
				for i := range children {
					index[children[i].Name] = i
				}
			}
			if index != nil {
				if i, ok := index[key]; ok {
					children[i] = a
					continue
				}
				index[key] = len(children)
			}
			children = append(children, a)
		}
		return Table(name, children...), nil
	case reflect.String:
		return String(name, validUTF8(v.String())), nil
	case reflect.Bool:
		return Bool(name, v.Bool()), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return intAttr(name, v.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		u := v.Uint()
		if u > math.MaxInt64 {
			return Attr{}, outline.Errorf("%q: integer %d out of range", name, u)
		}
		return intAttr(name, int64(u)), nil
	case reflect.Float32, reflect.Float64:
		return floatAttr(name, v.Float(), t.Bits())
	}
	return Attr{}, outline.Errorf("%q: type %s not supported", name, t)
}

// textAttr is the text of the TextMarshaler m as a string.
func textAttr(name string, m reflect.Value) (Attr, error) {
	if m.Kind() == reflect.Pointer && m.IsNil() {
		return Attr{Name: name, Type: TypeUnspec}, nil
	}
	b, err := m.Interface().(encoding.TextMarshaler).MarshalText()
	if err != nil {
		return Attr{}, outline.Errorf("%q: %w", name, err)
	}
	return String(name, validUTF8(string(b))), nil
}

// floatAttr is f (of bits 32 or 64) as its encoding/json text reads back
// with AttrsFromJSON. encoding/json prints the shortest decimal that reads
// back as the float of that size, in exponent form when |f| < 1e-6 or
// |f| >= 1e21, else without one (and then without a fraction when whole,
// which reads as an integer; beyond 2^53 its digits are those of the
// shortest decimal, not of the float's exact value).
func floatAttr(name string, f float64, bits int) (Attr, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return Attr{}, outline.Errorf("%q: unsupported value %v", name, f)
	}
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	var buf [32]byte
	text := strconv.AppendFloat(buf[:0], f, format, -1, bits)
	if format == 'f' && !bytes.Contains(text, []byte{'.'}) {
		i, err := strconv.ParseInt(string(text), 10, 64)
		if err != nil {
			return Attr{}, outline.Errorf("%q: integer %s out of range", name, text)
		}
		return intAttr(name, i), nil
	}
	d, err := strconv.ParseFloat(string(text), 64)
	if err != nil {
		return Attr{}, outline.Errorf("%q: number %s: %w", name, text, err)
	}
	return Double(name, d), nil
}

// decodeError is a value of the wrong kind at path: a does not fit v.
//
//go:noinline
func decodeError(a *Attr, v reflect.Value, path string) error {
	return outline.Errorf("%s: cannot store %s in %s", path, a.Type, v.Type())
}

// decode stores a in v; path names it in errors.
func (c *ValueCodec) decode(a *Attr, v reflect.Value, path string) error {
	if a.Type == TypeUnspec {
		switch v.Kind() {
		case reflect.Interface, reflect.Pointer, reflect.Map, reflect.Slice:
			v.SetZero()
		}
		return nil
	}
	if v.Type() == timeType {
		if a.Type != TypeString {
			return decodeError(a, v, path)
		}
		t, err := parseTime(a.Str)
		if err != nil {
			return outline.Errorf("%s: %w", path, err)
		}
		v.Set(reflect.ValueOf(t))
		return nil
	}
	if v.Kind() != reflect.Pointer && reflect.PointerTo(v.Type()).Implements(textUnmarshalerType) {
		// Only time.Time: calling UnmarshalText through the interface
		// would link time.Time's layout parser into the router binary,
		// and no other such type is decoded.
		return outline.Errorf("%s: decoding into %s (a TextUnmarshaler other than time.Time) is not supported", path, v.Type())
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		return c.decode(a, v.Elem(), path)
	case reflect.Interface:
		if v.NumMethod() != 0 {
			return decodeError(a, v, path)
		}
		if x := attrAny(a); x != nil {
			v.Set(reflect.ValueOf(x))
		}
		return nil
	case reflect.Struct:
		if a.Type != TypeTable {
			return decodeError(a, v, path)
		}
		return c.decodeStruct(a.Children, v, path)
	case reflect.Map:
		if a.Type != TypeTable {
			return decodeError(a, v, path)
		}
		t := v.Type()
		if v.IsNil() {
			v.Set(reflect.MakeMapWithSize(t, len(a.Children)))
		}
		for i := range a.Children {
			m := &a.Children[i]
			key := reflect.New(t.Key()).Elem()
			switch key.Kind() {
			case reflect.String:
				key.SetString(m.Name)
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
				n, err := strconv.ParseInt(m.Name, 10, 64)
				if err != nil || key.OverflowInt(n) {
					return outline.Errorf("%s: map key %q does not fit %s", path, m.Name, t.Key())
				}
				key.SetInt(n)
			case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
				n, err := strconv.ParseUint(m.Name, 10, 64)
				if err != nil || key.OverflowUint(n) {
					return outline.Errorf("%s: map key %q does not fit %s", path, m.Name, t.Key())
				}
				key.SetUint(n)
			default:
				return outline.Errorf("%s: map key type %s not supported", path, t.Key())
			}
			elem := reflect.New(t.Elem()).Elem()
			if err := c.decode(m, elem, path+"."+m.Name); err != nil {
				return err
			}
			v.SetMapIndex(key, elem)
		}
		return nil
	case reflect.Slice:
		if a.Type == TypeString && v.Type().Elem().Kind() == reflect.Uint8 {
			b, err := b64Decode(a.Str)
			if err != nil {
				return outline.Errorf("%s: %w", path, err)
			}
			v.SetBytes(b)
			return nil
		}
		if a.Type != TypeArray {
			return decodeError(a, v, path)
		}
		s := reflect.MakeSlice(v.Type(), len(a.Children), len(a.Children))
		for i := range a.Children {
			if err := c.decode(&a.Children[i], s.Index(i), path+"["+outline.Itoa(i)+"]"); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	case reflect.Array:
		if a.Type != TypeArray {
			return decodeError(a, v, path)
		}
		for i := 0; i < v.Len(); i++ {
			if i >= len(a.Children) {
				v.Index(i).SetZero()
				continue
			}
			if err := c.decode(&a.Children[i], v.Index(i), path+"["+outline.Itoa(i)+"]"); err != nil {
				return err
			}
		}
		return nil
	case reflect.String:
		if a.Type != TypeString {
			return decodeError(a, v, path)
		}
		v.SetString(a.Str)
		return nil
	case reflect.Bool:
		if a.Type != TypeBool {
			return decodeError(a, v, path)
		}
		v.SetBool(a.Int != 0)
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if !isInteger(a.Type) || v.OverflowInt(a.Int) {
			return decodeError(a, v, path)
		}
		v.SetInt(a.Int)
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if !isInteger(a.Type) || a.Int < 0 || v.OverflowUint(uint64(a.Int)) {
			return decodeError(a, v, path)
		}
		v.SetUint(uint64(a.Int))
		return nil
	case reflect.Float32, reflect.Float64:
		f := a.Float
		switch {
		case isInteger(a.Type):
			f = float64(a.Int)
		case a.Type != TypeDouble:
			return decodeError(a, v, path)
		}
		if v.Kind() == reflect.Float32 && math.IsInf(float64(float32(f)), 0) {
			return decodeError(a, v, path)
		}
		v.SetFloat(f)
		return nil
	}
	return outline.Errorf("%s: type %s not supported", path, v.Type())
}

// isInteger reports whether t holds a number without a fraction (int8 is
// a boolean in JSON terms, so it is not one).
func isInteger(t Type) bool {
	return t == TypeInt16 || t == TypeInt32 || t == TypeInt64
}

func (c *ValueCodec) decodeStruct(members []Attr, v reflect.Value, path string) error {
	fields, err := c.structFields(v.Type())
	if err != nil {
		return err
	}
	for i := range members {
		m := &members[i]
		f := -1
		for j := range fields {
			if fields[j].name == m.Name {
				f = j
				break
			}
		}
		if f < 0 {
			for j := range fields {
				if strings.EqualFold(fields[j].name, m.Name) {
					f = j
					break
				}
			}
		}
		if f < 0 {
			continue // unknown members are ignored
		}
		fv := v
		for k, x := range fields[f].index {
			if k > 0 && fv.Kind() == reflect.Pointer {
				if fv.IsNil() {
					if !fv.CanSet() {
						return outline.Errorf("%s.%s: cannot set embedded pointer to unexported struct %s", path, m.Name, fv.Type().Elem())
					}
					fv.Set(reflect.New(fv.Type().Elem()))
				}
				fv = fv.Elem()
			}
			fv = fv.Field(x)
		}
		if err := c.decode(m, fv, path+"."+m.Name); err != nil {
			return err
		}
	}
	return nil
}

// attrAny is a as encoding/json stores a value in an empty interface.
func attrAny(a *Attr) any {
	switch a.Type {
	case TypeTable:
		m := make(map[string]any, len(a.Children))
		for i := range a.Children {
			m[a.Children[i].Name] = attrAny(&a.Children[i])
		}
		return m
	case TypeArray:
		s := make([]any, len(a.Children))
		for i := range a.Children {
			s[i] = attrAny(&a.Children[i])
		}
		return s
	case TypeString:
		return a.Str
	case TypeBool:
		return a.Int != 0
	case TypeInt16, TypeInt32, TypeInt64:
		return float64(a.Int)
	case TypeDouble:
		return a.Float
	}
	return nil
}
