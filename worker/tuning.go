package worker

import (
	"cmp"

	"github.com/formsync/formsync/sink"
)

// TunedFor returns c shaped for dst, as dst asks if it says how it is best
// written to (sink.Tuner): a sink that commits in parts gets a sync's rows
// in parts of the size it asks for (sink.Tuning.PartRows, else
// DefaultPartRows) unless PartRows is set, and one that inserts rows keyed
// by content faster in key order gets them sorted. Any other sink gets c
// unchanged. A caller that builds its Config for whichever sink it opened
// calls it before New.
func (c Config) TunedFor(dst Sink) Config {
	tn, err := sink.Optional{Sink: dst}.Tuning()
	if err != nil {
		return c
	}
	if tn.CommitInParts && c.PartRows == 0 {
		c.PartRows = cmp.Or(tn.PartRows, DefaultPartRows)
	}
	if tn.SortContentKeys {
		c.SortContentKeys = true
	}
	if tn.PartsByContent {
		c.PartsByContent = true
	}
	if tn.PartDays > 0 && (c.PartDays == 0 || tn.PartDays < c.PartDays) {
		c.PartDays = tn.PartDays
	}
	if tn.CommitDays > 0 && (c.CommitDays == 0 || tn.CommitDays < c.CommitDays) {
		c.CommitDays = tn.CommitDays
	}
	return c
}
