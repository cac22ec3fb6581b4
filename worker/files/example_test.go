package files_test

import (
	"encoding/json"
	"fmt"

	"github.com/formsync/formsync/worker/files"
)

// The live service keys files by input name; each value is one file or
// an array of them.
func ExampleEntries() {
	entries, err := files.Entries(json.RawMessage(`{
		"photo": {"name": "me.jpg", "url": "https://forms.example/f/1", "size": 48213, "type": "image/jpeg"},
		"documents": [
			{"name": "cv.pdf", "url": "https://forms.example/f/2", "size": "120033"},
			"https://forms.example/f/3"
		]
	}`))
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		fmt.Println(*e.Input, e.Position, *e.Name, *e.URL, *e.Size)
	}
	// Output:
	// documents 0 cv.pdf https://forms.example/f/2 120033
	// photo 0 me.jpg https://forms.example/f/1 48213
}

func ExampleReason() {
	fmt.Println(files.Reason(&files.GoneError{URL: "https://forms.example/f/1", StatusCode: 410}))
	fmt.Println(files.Reason(nil) == "")
	// Output:
	// expired
	// true
}
