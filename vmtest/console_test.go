package vmtest

import (
	"fmt"
	"strconv"
	"strings"
)

// section is the output of one command the guest ran, between
// "=== BEGIN name" and "=== END name rc".
type section struct {
	body string
	rc   int
}

// phaseLine is one traffic phase: "=== PHASE name dev txq cpu".
type phaseLine struct {
	name, dev, txq string
	cpu            int
}

// consoleOut is the guest's console, parsed.
type consoleOut struct {
	sections map[string]section
	info     map[string]string // "=== INFO k=v ..."
	phases   []phaseLine
	done     bool // the guest reached "=== DONE"
}

// parseConsole splits the console output into sections. Lines outside
// sections (the kernel's, the firmware's) are ignored; a section that never
// ends is an error.
func parseConsole(out string) (*consoleOut, error) {
	c := &consoleOut{sections: map[string]section{}, info: map[string]string{}}
	var (
		cur  string
		body strings.Builder
		open bool
	)
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimRight(line, "\r")
		if !strings.HasPrefix(line, "=== ") {
			if open {
				body.WriteString(line)
				body.WriteByte('\n')
			}
			continue
		}
		f := strings.Fields(line[4:])
		if len(f) == 0 {
			continue
		}
		switch {
		case f[0] == "BEGIN" && len(f) == 2:
			if open {
				return nil, fmt.Errorf("console: section %q begins inside %q", f[1], cur)
			}
			cur, open = f[1], true
			body.Reset()
		case f[0] == "END" && len(f) == 3:
			if !open || f[1] != cur {
				return nil, fmt.Errorf("console: end of %q outside it", f[1])
			}
			rc, err := strconv.Atoi(f[2])
			if err != nil {
				return nil, fmt.Errorf("console: section %q: bad exit status %q", cur, f[2])
			}
			c.sections[cur] = section{body: body.String(), rc: rc}
			open = false
		case f[0] == "INFO":
			for _, kv := range f[1:] {
				k, v, _ := strings.Cut(kv, "=")
				c.info[k] = v
			}
		case f[0] == "PHASE" && len(f) == 5:
			cpu, err := strconv.Atoi(f[4])
			if err != nil {
				return nil, fmt.Errorf("console: phase %q: bad cpu %q", f[1], f[4])
			}
			c.phases = append(c.phases, phaseLine{name: f[1], dev: f[2], txq: f[3], cpu: cpu})
		case f[0] == "DONE":
			c.done = true
		default:
			if open {
				body.WriteString(line)
				body.WriteByte('\n')
			}
		}
	}
	if open {
		return c, fmt.Errorf("console: section %q never ended", cur)
	}
	return c, nil
}

// get returns a section that must exist and have exited 0.
func (c *consoleOut) get(name string) (string, error) {
	s, ok := c.sections[name]
	if !ok {
		return "", fmt.Errorf("the guest printed no %q section", name)
	}
	if s.rc != 0 {
		return s.body, fmt.Errorf("%s exited %d: %s", name, s.rc, strings.TrimSpace(s.body))
	}
	return s.body, nil
}
