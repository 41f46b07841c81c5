package ubusobj

import (
	"context"
	"encoding/json"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
	"reflect"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/steering"
)

type encodeSample struct {
	S       string            `json:"s"`
	Empty   string            `json:"empty,omitempty"`
	B       bool              `json:"b"`
	I       int               `json:"i"`
	Big     int64             `json:"big"`
	Neg     int64             `json:"neg"`
	U       uint64            `json:"u"`
	F       float64           `json:"f"`
	T       time.Time         `json:"t"`
	P       *plan.Hint        `json:"p"`
	NilP    *plan.Hint        `json:"nil_p"`
	OmitP   *plan.Hint        `json:"omit_p,omitempty"`
	L       []int             `json:"l"`
	NilL    []string          `json:"nil_l"`
	EmptyL  []string          `json:"empty_l"`
	M       map[string]int    `json:"m"`
	Any     any               `json:"any"`
	Arr     [2]bool           `json:"arr"`
	NoTag   string            // encoded under its Go name
	Skip    string            `json:"-"`
	private string            // never encoded
	Nested  map[string][]bool `json:"nested"`
}

// jsonRoute is what the reply encoder must match: the value as
// encoding/json text, read the way the stock CLI reads JSON.
func jsonRoute(v any) ([]ubus.Attr, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return ubus.AttrsFromJSON(data)
}

// The direct encoder gives exactly what the JSON path gives.
func TestEncodeReplyMatchesJSONPath(t *testing.T) {
	root := fixturetest.Root(t, "demo", nil)
	eng := steering.NewEngine(root)
	ctx := context.Background()
	res, err := eng.Apply(ctx, steering.ApplyRequest{Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := eng.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	qs, err := eng.Queues(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]any{
		"status":   st,
		"apply":    normalise(res),
		"queues":   queuesReply{Devices: qs},
		"fake":     func() any { s, _ := newFakeEngine().Status(ctx); return s }(),
		"empty":    &steering.Result{},
		"failures": &steering.Result{Failed: []steering.Failure{{Action: plan.Action{Kind: "rps_cpus", Device: "eth0"}, Error: "EINVAL"}}},
		"sample": encodeSample{S: "a\"b/<c>", B: true, I: -5, Big: 1 << 40, Neg: -(1 << 33), U: 1 << 35, F: 0.25,
			T: time.Date(2026, 11, 30, 1, 2, 3, 4, time.UTC), P: &plan.Hint{ID: "x"}, L: []int{1, 2},
			EmptyL: []string{}, M: map[string]int{"z": 1, "a": 2}, Any: "v", Arr: [2]bool{true, false},
			NoTag: "n", Skip: "s", private: "p", Nested: map[string][]bool{"k": {true}}},
		"fallback float": struct {
			F float64 `json:"f"`
		}{F: 3},
		"fallback bad utf8": struct {
			S string `json:"s"`
		}{S: "a\xffb"},
		"fallback embedded": struct {
			plan.Hint
			X int `json:"x"`
		}{Hint: plan.Hint{ID: "e"}, X: 1},
	}
	// One encoder, as an Object keeps, meets every type twice: what it
	// remembers of a type must not change the encoding.
	var shared encoder
	for pass := 0; pass < 2; pass++ {
		for name, v := range values {
			t.Run(name, func(t *testing.T) {
				want, err := jsonRoute(v)
				if err != nil {
					t.Fatal(err)
				}
				for _, enc := range []func(any) ([]ubus.Attr, error){encodeReply, shared.encodeReply} {
					got, err := enc(v)
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(got, want) {
						g, _ := ubus.AttrsToJSON(got, "")
						w, _ := ubus.AttrsToJSON(want, "")
						t.Errorf("pass %d: direct encoder differs\n got %s\nwant %s\n got %#v\nwant %#v", pass, g, w, got, want)
					}
				}
			})
		}
	}
}
