package fieldpolicy_test

import (
	"fmt"

	"github.com/formsync/formsync/worker/fieldpolicy"
)

// A policy hashes or drops fields before anything is staged. The first
// matching rule wins, so exceptions come first; a field no rule matches
// is kept.
func Example() {
	p, err := fieldpolicy.Parse("email_opt_in=keep, *email*=hash, phone=drop")
	if err != nil {
		fmt.Println(err)
		return
	}
	p = p.WithKey([]byte("a secret key of at least 16 bytes"))

	out, err := p.Fields(`{"Email":"ada@example.com","email_opt_in":true,"message":"hi","phone":"+33 1 23 45 67 89"}`)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out)

	// To find one person's rows, look up the stored form of the clear value:
	// the hex HMAC-SHA256 under the key, which `openssl dgst -sha256 -hmac`
	// gives too (docs/privacy.md).
	stored, _ := p.Lookup("email", "ada@example.com")
	fmt.Println(stored)
	// Output:
	// {"Email":"065e7b8acf275c4fab99adac33464367c927a8032e0c0d296cd11c9eb84800f1","email_opt_in":true,"message":"hi"}
	// 065e7b8acf275c4fab99adac33464367c927a8032e0c0d296cd11c9eb84800f1
}

// Parse reports every problem of a spec at once.
func ExampleParse() {
	_, err := fieldpolicy.Parse("email=hash,,phone=erase")
	fmt.Println(err)
	// Output:
	// field policy: empty rule: remove the doubled or trailing comma
	// field policy rule "phone=erase": unknown action "erase": want hash, drop or keep
}
