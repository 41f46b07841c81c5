package ubus

import "github.com/packet-steering/packet-steering/internal/outline"

// MarshalJSON is encoding/json's Marshal for the values AttrsFromValue
// takes (structs with json tags, maps, and pointers to them), with
// AttrsToStdJSON's formatting (indent "" for one line). It lets the
// router binary keep files and reports in JSON without linking
// encoding/json.
func MarshalJSON(v any, indent string) ([]byte, error) {
	attrs, err := AttrsFromValue(v)
	if err != nil {
		return nil, err
	}
	return AttrsToStdJSON(attrs, indent), nil
}

// UnmarshalJSON is encoding/json's Unmarshal for a JSON object (the top
// level must be one; AttrsFromJSON's limits apply) into the struct or map
// v points to, by AttrsToValue's rules.
func UnmarshalJSON(data []byte, v any) error {
	attrs, err := AttrsFromJSON(data)
	if err != nil {
		return err
	}
	if err := AttrsToValue(attrs, v); err != nil {
		return outline.Errorf("ubus: json: %w", err)
	}
	return nil
}

// Number returns a number attribute's value (any integer type or double);
// ok is false for any other type.
func (a Attr) Number() (v float64, ok bool) {
	switch a.Type {
	case TypeDouble:
		return a.Float, true
	case TypeInt64, TypeInt32, TypeInt16, TypeInt8:
		return float64(a.Int), true
	}
	return 0, false
}
