package cli

import (
	"flag"
	"fmt"
)

// onceValue is a string flag that may be given once: a second, different
// value is refused rather than silently replacing the first (`backfill
// --form a --form b` read only b).
type onceValue struct {
	v   string
	set bool
}

func (o *onceValue) String() string { return o.v }

func (o *onceValue) Set(s string) error {
	if o.set && s != o.v {
		return fmt.Errorf("given twice (%q and %q): name one form, and run the command once per form", o.v, s)
	}
	o.v, o.set = s, true
	return nil
}

// onceString defines a string flag that may be given once.
func onceString(fs *flag.FlagSet, name, usage string) *string {
	o := &onceValue{}
	fs.Var(o, name, usage)
	return &o.v
}
