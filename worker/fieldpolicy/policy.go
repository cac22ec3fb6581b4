package fieldpolicy

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode"
)

// Action is what a policy does to a matching field.
type Action int

const (
	// Keep stores the value as sent. It is the zero Action, what a field
	// no rule matches gets.
	Keep Action = iota
	// Hash stores the hex HMAC-SHA256 of the value under the policy's key.
	Hash
	// Drop stores nothing: the member is removed.
	Drop
)

var actionNames = [...]string{Keep: "keep", Hash: "hash", Drop: "drop"}

func (a Action) String() string {
	if a >= 0 && int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Rule is one pattern=action pair of a policy.
type Rule struct {
	// Pattern is matched against whole field names, ignoring case; *
	// matches any run of characters. Rules returns it lower-cased.
	Pattern string
	Action  Action
}

// Policy is a parsed field policy. The zero value and a nil *Policy are no
// policy.
type Policy struct {
	rules []Rule
	// folded holds each rule's pattern case-folded (fold), which is what
	// names are compared with.
	folded   []string
	needsKey bool
	key      []byte
	// hashers hold HMAC states keyed with key, so that hashing a value
	// does not set up a new HMAC (five allocations) every time.
	hashers *sync.Pool
}

// ParseError is one problem with one rule of a spec.
type ParseError struct {
	// Item is the rule as written, space trimmed; "" for an empty rule.
	Item string
	// Problem says what is wrong and how to put it right.
	Problem string
}

func (e *ParseError) Error() string {
	if e.Item == "" {
		return "field policy: " + e.Problem
	}
	return fmt.Sprintf("field policy rule %q: %s", e.Item, e.Problem)
}

// Parse reads a spec of comma-separated pattern=action rules. An empty
// spec, or one of only space, is no policy: nil and no error. Every problem
// is reported, each as a *ParseError, joined with errors.Join, so that a
// user can fix a spec in one go.
func Parse(spec string) (*Policy, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	p := &Policy{}
	var errs []error
	// first maps each folded pattern to the rule that gave it.
	first := map[string]string{}
	for item := range strings.SplitSeq(spec, ",") {
		item = strings.TrimSpace(item)
		rule, err := parseRule(item)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		folded := foldString(rule.Pattern)
		if prev, dup := first[folded]; dup {
			errs = append(errs, &ParseError{Item: item, Problem: fmt.Sprintf(
				"pattern %q is already given by rule %q (patterns ignore case): keep one of the two rules",
				rule.Pattern, prev)})
			continue
		}
		first[folded] = item
		p.rules = append(p.rules, rule)
		p.folded = append(p.folded, folded)
		p.needsKey = p.needsKey || rule.Action == Hash
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	p.hashers = newHashers(nil)
	return p, nil
}

// parseRule reads one trimmed pattern=action item.
func parseRule(item string) (Rule, error) {
	if item == "" {
		return Rule{}, &ParseError{Problem: "empty rule: remove the doubled or trailing comma"}
	}
	pattern, action, ok := strings.Cut(item, "=")
	if !ok {
		return Rule{}, &ParseError{Item: item, Problem: `no "=": write pattern=action, e.g. email=hash`}
	}
	pattern, action = strings.TrimSpace(pattern), strings.TrimSpace(action)
	if pattern == "" {
		return Rule{}, &ParseError{Item: item, Problem: `no pattern before "=": name a field, or write * for every field`}
	}
	a, err := parseAction(action)
	if err != nil {
		return Rule{}, &ParseError{Item: item, Problem: err.Error()}
	}
	// Lower-cased so that String, and with it Identity, does not change
	// with the case a pattern was written in.
	return Rule{Pattern: lower(pattern), Action: a}, nil
}

// lower lower-cases s where that keeps each rune's case-folding class,
// which is what names are matched by: "İ" (dotted capital I) lower-cases
// to a plain "i", which folds with "I" and no longer with "İ", so it stays.
func lower(s string) string {
	return strings.Map(func(r rune) rune {
		if l := unicode.ToLower(r); fold(l) == fold(r) {
			return l
		}
		return r
	}, s)
}

func parseAction(s string) (Action, error) {
	for a, name := range actionNames {
		if strings.EqualFold(s, name) {
			return Action(a), nil
		}
	}
	if s == "" {
		return 0, errors.New(`no action after "=": want hash, drop or keep`)
	}
	return 0, fmt.Errorf("unknown action %q: want hash, drop or keep", s)
}

// empty reports whether p is no policy.
func (p *Policy) empty() bool { return p == nil || len(p.rules) == 0 }

// Rules returns a copy of the policy's rules in the order they are tried.
func (p *Policy) Rules() []Rule {
	if p.empty() {
		return nil
	}
	return append([]Rule(nil), p.rules...)
}

// String returns the policy in normal form: its rules as pattern=action,
// patterns lower-cased, joined by commas. Parse accepts it back.
func (p *Policy) String() string {
	if p.empty() {
		return ""
	}
	var b strings.Builder
	for i, r := range p.rules {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(r.Pattern)
		b.WriteByte('=')
		b.WriteString(r.Action.String())
	}
	return b.String()
}

// Action returns what the policy does to the field called name: the action
// of the first rule that matches it, Keep when none does.
func (p *Policy) Action(name string) Action {
	if p.empty() {
		return Keep
	}
	return actionOf(p, name)
}

// RuleFor returns the rule that decides what the policy does to the field
// called name, the first that matches it, as its pattern (lower-cased, as
// Rules gives it) and its action; "" and "keep" when no rule matches.
func (p *Policy) RuleFor(name string) (pattern, action string) {
	if !p.empty() {
		for i, f := range p.folded {
			if match(f, name) {
				return p.rules[i].Pattern, p.rules[i].Action.String()
			}
		}
	}
	return "", Keep.String()
}

// actionOf is Action for a name as bytes or as a string, without copying
// it.
func actionOf[S text](p *Policy, name S) Action {
	for i, pattern := range p.folded {
		if match(pattern, name) {
			return p.rules[i].Action
		}
	}
	return Keep
}

// NeedsKey reports whether some rule hashes, so that the policy cannot be
// applied without a key.
func (p *Policy) NeedsKey() bool { return !p.empty() && p.needsKey }

// Names returns names without those the policy drops, in the same order.
// It returns names itself when none is dropped, and never modifies it.
func (p *Policy) Names(names []string) []string {
	if p.empty() {
		return names
	}
	var kept []string
	dropped := false
	for i, name := range names {
		if actionOf(p, name) != Drop {
			if dropped {
				kept = append(kept, name)
			}
			continue
		}
		if !dropped {
			dropped = true
			kept = append(make([]string, 0, len(names)-1), names[:i]...)
		}
	}
	if !dropped {
		return names
	}
	return kept
}
