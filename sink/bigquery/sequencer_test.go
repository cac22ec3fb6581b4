package bigquery

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestSequencerNumbersEveryLine(t *testing.T) {
	t.Parallel()
	in := `{"a":1}` + "\n" + `{"b":"x\ny"}` + "\n" + `{"c":[` + strings.Repeat("1,", 40000) + `1]}` + "\n"
	want := `{"seq":1,"a":1}` + "\n" + `{"seq":2,"b":"x\ny"}` + "\n" + `{"seq":3,"c":[` + strings.Repeat("1,", 40000) + `1]}` + "\n"
	for name, r := range map[string]io.Reader{
		"whole":      strings.NewReader(in),
		"byte/byte":  iotest.OneByteReader(strings.NewReader(in)),
		"half reads": iotest.HalfReader(strings.NewReader(in)),
	} {
		got, err := io.ReadAll(iotest.OneByteReader(&sequencer{r: r}))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if string(got) != want {
			t.Errorf("%s: got %.80q..., want %.80q...", name, got, want)
		}
	}
	if _, err := io.ReadAll(&sequencer{r: strings.NewReader("not json\n")}); err == nil {
		t.Error("a line that is not an object was numbered")
	}
}
