package adaptive

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
)

// The adaptive loop's options in /etc/config/packet_steering: the first
// `config adaptive` section (platform reads its options raw; this file
// owns their names, units, ranges and defaults). Every option is optional;
// an unset one is DefaultConfig's value.
//
//	config adaptive 'adaptive'
//		option interval '2'            # seconds (or 500ms, 1m)
//		option max_idle_interval '32'
//		option dwell '20'
//		option high_load '85'          # percent of one CPU (or 85%)
//		option max_moves '1'
//
// A value that does not parse or is out of range, and an unknown option,
// is reported (status config_errors) and the default is used instead, like
// every other setting: a typo must not stop the loop.

// optKind is how an option's value is written.
type optKind int

const (
	optSeconds optKind = iota // a duration: plain seconds or a Go duration
	optPercent                // percent of one CPU's time, "85" or "85%"
	optRate                   // a rate per second
	optCount                  // a whole number
)

// adaptiveOpt is one option of the adaptive section.
type adaptiveOpt struct {
	name     string
	kind     optKind
	min, max float64 // in the option's unit (seconds, percent, 1/s, count)
	// group names options that are checked together (intervals, loads):
	// when their combination is refused, the configured ones of the group
	// go back to their defaults.
	group string
	ptr   func(c *Config) any // *time.Duration, *float64 or *int
}

// adaptiveOpts is the section's schema, in the order status lists it.
func adaptiveOpts() []adaptiveOpt {
	return []adaptiveOpt{
		{name: "interval", kind: optSeconds, min: 0.1, max: 60, group: "intervals", ptr: func(c *Config) any { return &c.Interval }},
		{name: "max_idle_interval", kind: optSeconds, min: 0.1, max: 600, group: "intervals", ptr: func(c *Config) any { return &c.MaxIdleInterval }},
		{name: "dwell", kind: optSeconds, min: 0, max: 3600, ptr: func(c *Config) any { return &c.MinDwell }},
		{name: "hot_intervals", kind: optCount, min: 1, max: 100, ptr: func(c *Config) any { return &c.HotIntervals }},
		{name: "cool_intervals", kind: optCount, min: 1, max: 100, ptr: func(c *Config) any { return &c.CoolIntervals }},
		{name: "max_moves", kind: optCount, min: 1, max: 64, ptr: func(c *Config) any { return &c.MaxMoves }},
		{name: "high_load", kind: optPercent, min: 1, max: 100, group: "loads", ptr: func(c *Config) any { return &c.HighLoad }},
		{name: "low_load", kind: optPercent, min: 1, max: 99, group: "loads", ptr: func(c *Config) any { return &c.LowLoad }},
		{name: "busy_load", kind: optPercent, min: 0, max: 100, ptr: func(c *Config) any { return &c.BusyLoad }},
		{name: "busy_net_load", kind: optPercent, min: 0, max: 100, ptr: func(c *Config) any { return &c.BusyNet }},
		{name: "margin", kind: optPercent, min: 0, max: 100, ptr: func(c *Config) any { return &c.Margin }},
		{name: "min_queue_load", kind: optPercent, min: 0, max: 100, ptr: func(c *Config) any { return &c.MinUnitLoad }},
		{name: "squeeze_rate", kind: optRate, min: 0, max: 1e9, ptr: func(c *Config) any { return &c.SqueezeRate }},
		{name: "drop_rate", kind: optRate, min: 0, max: 1e9, ptr: func(c *Config) any { return &c.DropRate }},
		{name: "idle_pps", kind: optRate, min: 0, max: 1e9, ptr: func(c *Config) any { return &c.IdlePPS }},
	}
}

// accepted says what an option takes, for its problem message.
func (o adaptiveOpt) accepted() string {
	r := func(f float64) string { return outline.FormatFloat(f, 'f', -1, 64) }
	switch o.kind {
	case optSeconds:
		return r(o.min) + " to " + r(o.max) + " seconds (e.g. 2, 0.5 or 500ms)"
	case optPercent:
		return r(o.min) + " to " + r(o.max) + " percent of a CPU (e.g. 85 or 85%)"
	case optRate:
		return r(o.min) + " or more per second"
	}
	return "a whole number from " + r(o.min) + " to " + r(o.max)
}

// parse reads raw as the option's value and stores it in c.
func (o adaptiveOpt) parse(raw string, c *Config) error {
	s := strings.TrimSpace(raw)
	var v float64
	var err error
	switch o.kind {
	case optSeconds:
		if v, err = strconv.ParseFloat(s, 64); err != nil {
			var d time.Duration
			if d, err = time.ParseDuration(s); err == nil {
				v = d.Seconds()
			}
		}
	case optPercent:
		v, err = strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(s, "%")), 64)
	case optRate:
		v, err = strconv.ParseFloat(s, 64)
	case optCount:
		var n int
		n, err = strconv.Atoi(s)
		v = float64(n)
	}
	// NaN and the infinities parse as floats; the range check refuses
	// them (every comparison with NaN is false).
	if err != nil || !(v >= o.min && v <= o.max) {
		return outline.Errorf("%q is not %s", raw, o.accepted())
	}
	switch p := o.ptr(c).(type) {
	case *time.Duration:
		*p = time.Duration(v * float64(time.Second)).Round(time.Millisecond)
	case *float64:
		if o.kind == optPercent {
			v /= 100
		}
		*p = v
	case *int:
		*p = int(v)
	}
	return nil
}

// format is the option's value in c, in the form the section takes.
func (o adaptiveOpt) format(c *Config) string {
	switch p := o.ptr(c).(type) {
	case *time.Duration:
		return p.String()
	case *float64:
		if o.kind == optPercent {
			return outline.FormatFloat(*p*100, 'f', -1, 64) + "%"
		}
		return outline.FormatFloat(*p, 'f', -1, 64)
	case *int:
		return outline.Itoa(*p)
	}
	return ""
}

// ResolveConfig returns the adaptive loop's configuration from the
// `config adaptive` section of snap's packet_steering config (defaults
// where the section or an option is missing). It never fails: a value
// that does not parse or is out of range, an unknown option, and a
// combination the loop cannot work with (interval above max_idle_interval,
// low_load not below high_load) are listed in Problems and their options
// take their defaults.
func ResolveConfig(snap *platform.Snapshot) Settings {
	def := DefaultConfig()
	st := Settings{Config: def}
	var raw map[string]string
	if snap != nil && snap.Config.Steering != nil {
		raw = snap.Config.Steering.Adaptive
	}
	cfg := &st.Config
	set := map[string]bool{}
	opts := adaptiveOpts()
	for _, o := range opts {
		v, ok := raw[o.name]
		if !ok {
			continue
		}
		if err := o.parse(v, cfg); err != nil {
			st.Problems = append(st.Problems, fmt.Sprintf("packet_steering.adaptive.%s: %v, using %s", o.name, err, o.format(&def)))
			continue
		}
		set[o.name] = true
	}
	var unknown []string
	for name := range raw {
		if !slices.ContainsFunc(opts, func(o adaptiveOpt) bool { return o.name == name }) {
			unknown = append(unknown, name)
		}
	}
	outline.SortStrings(unknown)
	for _, name := range unknown {
		st.Problems = append(st.Problems, fmt.Sprintf("packet_steering.adaptive.%s: unknown option, ignored (accepted: %s)", name, adaptiveOptNames(opts)))
	}
	// The combinations: a refused group goes back to its defaults.
	groups := []struct {
		name, why string
		ok        func(c *Config) bool
	}{
		{"intervals", "interval must not exceed max_idle_interval", func(c *Config) bool { return c.Interval <= c.MaxIdleInterval }},
		{"loads", "low_load must be below high_load", func(c *Config) bool { return c.LowLoad < c.HighLoad }},
	}
	for _, g := range groups {
		if g.ok(cfg) {
			continue
		}
		var names []string
		for _, o := range opts {
			if o.group == g.name && set[o.name] {
				names = append(names, o.name)
				o.reset(cfg, &def)
				delete(set, o.name)
			}
		}
		st.Problems = append(st.Problems, fmt.Sprintf("packet_steering.adaptive: %s, using the default %s", g.why, strings.Join(names, " and ")))
	}
	if cfg.Check() != nil {
		// Not reached with the ranges above; a safe fallback regardless.
		st.Problems = append(st.Problems, "packet_steering.adaptive: the combination of values is refused, using the defaults")
		*cfg, set = def, nil
	}
	for _, o := range opts {
		src := plan.SourceDefault
		if set[o.name] {
			src = plan.SourcePacketSteering
		}
		st.Options = append(st.Options, Option{Name: o.name, Value: o.format(cfg), Source: src})
	}
	return st
}

// reset puts the option's default from def into c.
func (o adaptiveOpt) reset(c, def *Config) {
	switch p := o.ptr(c).(type) {
	case *time.Duration:
		*p = *o.ptr(def).(*time.Duration)
	case *float64:
		*p = *o.ptr(def).(*float64)
	case *int:
		*p = *o.ptr(def).(*int)
	}
}

func adaptiveOptNames(opts []adaptiveOpt) string {
	names := make([]string, len(opts))
	for i, o := range opts {
		names[i] = o.name
	}
	return strings.Join(names, ", ")
}

// ConfigErrors lists the problems of snap's adaptive section as
// config errors of the packet_steering file.
func ConfigErrors(snap *platform.Snapshot) []platform.Gap {
	if snap == nil || snap.Config.Steering == nil || snap.Config.Steering.Adaptive == nil {
		return nil
	}
	var out []platform.Gap
	for _, p := range ResolveConfig(snap).Problems {
		out = append(out, platform.Gap{Path: "etc/config/packet_steering", Error: p})
	}
	return out
}
