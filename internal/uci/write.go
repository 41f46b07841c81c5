package uci

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/packet-steering/packet-steering/internal/outline"
)

// Set sets the plain option option of the section sectionRef names to value,
// as `uci set` does: a new option is appended; an option holding another
// value (or a list) is replaced and moves to the end of the section; an equal
// value changes nothing; an empty value deletes the option (no error when it
// is absent). It fails with ErrNotFound when the section does not exist and
// ErrInvalid for an invalid option name or a value holding a NUL byte.
func (p *Package) Set(sectionRef, option, value string) error {
	s, err := p.mustSection(sectionRef)
	if err != nil {
		return err
	}
	if !ValidName(option) {
		return outline.Errorf("uci: set %s.%s.%s: option name: %w", p.Name, sectionRef, option, ErrInvalid)
	}
	if strings.IndexByte(value, 0) >= 0 {
		return outline.Errorf("uci: set %s.%s.%s: value holds a NUL byte: %w", p.Name, sectionRef, option, ErrInvalid)
	}
	s.setOption(option, value)
	return nil
}

// SetList replaces the option option of the section sectionRef names with a
// list of values (in order), as `uci delete` followed by one `uci add_list`
// per value does: the list is appended at the end of the section, and an
// empty values deletes the option. Errors as for Set.
func (p *Package) SetList(sectionRef, option string, values []string) error {
	s, err := p.mustSection(sectionRef)
	if err != nil {
		return err
	}
	if !ValidName(option) {
		return outline.Errorf("uci: set list %s.%s.%s: option name: %w", p.Name, sectionRef, option, ErrInvalid)
	}
	for _, v := range values {
		if strings.IndexByte(v, 0) >= 0 {
			return outline.Errorf("uci: set list %s.%s.%s: value holds a NUL byte: %w", p.Name, sectionRef, option, ErrInvalid)
		}
	}
	if i := s.optionIndex(option); i >= 0 {
		s.Options = append(s.Options[:i:i], s.Options[i+1:]...)
	}
	if len(values) > 0 {
		s.Options = append(s.Options, &Option{Name: option, Values: append([]string(nil), values...), IsList: true})
	}
	return nil
}

// AddSection appends a section of type typ. With name "" the section is
// anonymous and gets a generated name like libuci's uci_add_section: "cfg",
// the section's allocation number in the package (two or more hex digits)
// and four hex digits of the type's DJB hash; should that name already be
// taken (libuci does not check), the number is advanced until it is free.
// It fails with ErrInvalid for an invalid type or name and ErrExists when a
// section of that name exists.
func (p *Package) AddSection(typ, name string) (*Section, error) {
	if !ValidType(typ) {
		return nil, outline.Errorf("uci: add section %q to %s: type: %w", typ, p.Name, ErrInvalid)
	}
	if name != "" {
		if !ValidName(name) {
			return nil, outline.Errorf("uci: add section %q to %s: name: %w", name, p.Name, ErrInvalid)
		}
		if p.Section(name) != nil {
			return nil, outline.Errorf("uci: add section %s.%s: %w", p.Name, name, ErrExists)
		}
		return p.newSection(typ, name), nil
	}
	for {
		probe := fmt.Sprintf("cfg%02x%04x", p.allocated+1, djbHash(typ)%(1<<16))
		if p.Section(probe) == nil {
			return p.newSection(typ, ""), nil
		}
		p.allocated++
	}
}

// DeleteSection removes the section ref names (see Section). It fails with
// ErrNotFound when there is none.
func (p *Package) DeleteSection(ref string) error {
	s, err := p.mustSection(ref)
	if err != nil {
		return err
	}
	for i, x := range p.Sections {
		if x == s {
			p.Sections = append(p.Sections[:i:i], p.Sections[i+1:]...)
			break
		}
	}
	return nil
}

// DeleteOption removes the option (plain or list) from the section
// sectionRef names. It fails with ErrNotFound when the section or the option
// does not exist, as `uci delete` does.
func (p *Package) DeleteOption(sectionRef, option string) error {
	s, err := p.mustSection(sectionRef)
	if err != nil {
		return err
	}
	i := s.optionIndex(option)
	if i < 0 {
		return outline.Errorf("uci: delete %s.%s.%s: %w", p.Name, sectionRef, option, ErrNotFound)
	}
	s.Options = append(s.Options[:i:i], s.Options[i+1:]...)
	return nil
}

func (p *Package) mustSection(ref string) (*Section, error) {
	if p == nil {
		return nil, outline.Errorf("uci: section %q of a nil package: %w", ref, ErrNotFound)
	}
	s := p.Section(ref)
	if s == nil {
		return nil, outline.Errorf("uci: section %s.%s: %w", p.Name, ref, ErrNotFound)
	}
	return s, nil
}

// escape is libuci's uci_escape: each single quote becomes close-quote,
// backslash-quote, reopen-quote:
//
//	it's  ->  it'\''s
//
//go:noinline
func escape(s string) string {
	return strings.ReplaceAll(s, "'", `'\''`)
}

// plainType reports whether a type can be written unquoted and read back
// unchanged.
func plainType(t string) bool {
	return !strings.ContainsAny(t, "#;'\"\\")
}

// Validate checks that every section type and name and every option name is
// valid, that no two options of a section share a name, and that no value
// holds a NUL byte: what Export needs to write a file that reads back the
// same. Errors wrap ErrInvalid.
func (p *Package) Validate() error {
	if p == nil {
		return outline.Errorf("uci: nil package: %w", ErrInvalid)
	}
	for i, s := range p.Sections {
		if s == nil {
			return outline.Errorf("uci: %s: section %d is nil: %w", p.Name, i, ErrInvalid)
		}
		if !ValidType(s.Type) {
			return outline.Errorf("uci: %s: section %d: type %q: %w", p.Name, i, s.Type, ErrInvalid)
		}
		if !s.Anonymous && !ValidName(s.Name) {
			return outline.Errorf("uci: %s: section %d: name %q: %w", p.Name, i, s.Name, ErrInvalid)
		}
		seen := make(map[string]bool, len(s.Options))
		for _, o := range s.Options {
			if o == nil || !ValidName(o.Name) {
				return outline.Errorf("uci: %s.%s: invalid option: %w", p.Name, s.Name, ErrInvalid)
			}
			if !o.IsList && len(o.Values) > 1 {
				return outline.Errorf("uci: %s.%s.%s: plain option with %d values: %w", p.Name, s.Name, o.Name, len(o.Values), ErrInvalid)
			}
			if seen[o.Name] {
				return outline.Errorf("uci: %s.%s.%s: option given twice: %w", p.Name, s.Name, o.Name, ErrInvalid)
			}
			seen[o.Name] = true
			for _, v := range o.Values {
				if strings.IndexByte(v, 0) >= 0 {
					return outline.Errorf("uci: %s.%s.%s: value holds a NUL byte: %w", p.Name, s.Name, o.Name, ErrInvalid)
				}
			}
		}
	}
	return nil
}

// Export writes the package in the form `uci commit` writes config files
// (libuci uci_export without the package header): for each section a blank
// line, "config TYPE 'NAME'" (no name for an anonymous section), then one
// "\toption NAME 'VALUE'" line per plain option and one "\tlist NAME 'VALUE'"
// line per list item, and a final blank line. Values are single-quoted, a
// quote inside escaped as `uci export` does (see escape). A plain option
// with no value and a list with no items are left out (libuci cannot hold them). A type holding one of
// # ; ' " \ is written single-quoted so that it reads back the same (libuci
// writes it bare, which does not). It writes nothing and returns an error
// wrapping ErrInvalid when Validate fails.
func (p *Package) Export(w io.Writer) error {
	if err := p.Validate(); err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	for _, s := range p.Sections {
		if plainType(s.Type) {
			fmt.Fprintf(bw, "\nconfig %s", s.Type)
		} else {
			fmt.Fprintf(bw, "\nconfig '%s'", escape(s.Type))
		}
		if !s.Anonymous {
			fmt.Fprintf(bw, " '%s'", escape(s.Name))
		}
		bw.WriteByte('\n')
		for _, o := range s.Options {
			if !o.IsList {
				if len(o.Values) > 0 && o.Values[0] != "" {
					fmt.Fprintf(bw, "\toption %s '%s'\n", o.Name, escape(o.Values[0]))
				}
				continue
			}
			for _, v := range o.Values {
				fmt.Fprintf(bw, "\tlist %s '%s'\n", o.Name, escape(v))
			}
		}
	}
	bw.WriteByte('\n')
	if err := bw.Flush(); err != nil {
		return outline.Errorf("uci: export %s: %w", p.Name, err)
	}
	return nil
}
