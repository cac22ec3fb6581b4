package fieldpolicy

import "testing"

// The figures, and the command that measures them, are in BENCHMARKS.md
// (section 9). The one allocation of a run that changes something is the
// result; a run that changes nothing allocates nothing.

// A realistic submission: six fields, one hashed, one dropped, as the live
// API sends it (under data, with its envelope) and as canonical fields.
const (
	benchSpec   = "email=hash,phone=drop,*password*=drop"
	benchFields = `{"company":"Acme Ltd","email":"jane.doe@example.com","message":"Hello, I would like a quote for 20 units delivered to our Leeds office.","name":"Jane Doe","newsletter":true,"phone":"+44 20 7946 0958"}`
	benchRaw    = `{"id":"8f14e45f","form_id":"contact","data":{"name":"Jane Doe","email":"jane.doe@example.com","phone":"+44 20 7946 0958","company":"Acme Ltd","message":"Hello, I would like a quote for 20 units delivered to our Leeds office.","newsletter":true},"files":[],"is_spam":false,"created_at":"2026-01-01T10:00:00.000Z"}`
	// Nothing to hash or drop: the common case of a form without personal data.
	benchFieldsKept = `{"company":"Acme Ltd","message":"Hello","name":"Jane Doe","newsletter":true,"rating":5,"topic":"quote"}`
)

func BenchmarkFields(b *testing.B) {
	p := keyed(b, benchSpec)
	for _, bc := range []struct{ name, obj string }{{"hash+drop", benchFields}, {"unchanged", benchFieldsKept}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.obj)))
			for b.Loop() {
				if _, err := p.Fields(bc.obj); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRaw(b *testing.B) {
	p := keyed(b, benchSpec)
	unchanged := []byte(`{"id":"8f14e45f","data":` + benchFieldsKept + `,"created_at":"2026-01-01T10:00:00.000Z"}`)
	for _, bc := range []struct {
		name string
		raw  []byte
	}{{"hash+drop", []byte(benchRaw)}, {"unchanged", unchanged}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.raw)))
			for b.Loop() {
				if _, err := p.Raw(bc.raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
