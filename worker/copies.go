package worker

import "github.com/formsync/formsync/state"

// Copies: the older response form has no ids, so two submissions posted
// at once with the same content (a double click) are one content key. The
// table holds one row for them while the API counts two. A page is one
// snapshot of the form, so a key twice on one page is two submissions,
// never one submission seen twice (pages moving under the reader repeat a
// submission on two pages). The walk counts such copies (formRun.copies)
// and the state keeps them (state.Form.Copies), so that the completeness
// check and a reconcile count them as served and stored. Copies split
// across a page border look like a submission moved between requests and
// are not counted.

// copiesAfter is what a state that knew of known records after a read
// that saw seen: the copies of both, but none of a submission fg forgot
// (forget counts them with its tombstones, and the state names no
// forgotten submission).
func copiesAfter(known, seen state.Copies, fg *state.Forgotten) state.Copies {
	out := known.Merge(seen) // a new map: known and seen stay as they are
	for k := range out {
		if fg.Has(k) {
			delete(out, k)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
