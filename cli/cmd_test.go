package cli

import (
	"flag"
	"io"
	"testing"
	"time"
)

// TestSecondsFlag: every time flag takes seconds or a Go duration, the
// same on every verb.
func TestSecondsFlag(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"600", 600 * time.Second, false},
		{"0", 0, false},
		{"10m", 10 * time.Minute, false},
		{"1h30m", 90 * time.Minute, false},
		{"250ms", 250 * time.Millisecond, false},
		{"-5", 0, true},
		{"-1s", 0, true},
		{"ten", 0, true},
		{"", 0, true},
	} {
		var d time.Duration
		err := seconds{&d}.Set(tc.in)
		if (err != nil) != tc.wantErr || (err == nil && d != tc.want) {
			t.Errorf("Set(%q) = %v, %v; want %v, error %v", tc.in, d, err, tc.want, tc.wantErr)
		}
	}
}

// TestTimeoutFlagsParse: start, run and wait read --timeout (and run its
// --wait-timeout) in both forms.
func TestTimeoutFlagsParse(t *testing.T) {
	for _, tc := range []struct {
		verb string
		args []string
		ok   bool
	}{
		{"start", []string{"--timeout", "600", "p"}, true},
		{"start", []string{"--timeout", "10m", "p"}, true},
		{"run", []string{"--timeout", "90s", "--wait-timeout", "120", "p"}, true},
		{"wait", []string{"--timeout", "30", "id"}, true},
		{"wait", []string{"--timeout", "30s", "id"}, true},
		{"wait", []string{"--timeout", "soon", "id"}, false},
		{"wait", []string{"--timeout", "-1s", "id"}, false},
		{"start", []string{"--timeout", "-1", "p"}, false},
	} {
		cmd := &command{verb: tc.verb}
		fs := flag.NewFlagSet(tc.verb, flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		switch tc.verb {
		case "wait":
			cmd.waitFlags(fs)
		default:
			cmd.startFlags(fs)
		}
		if err := fs.Parse(tc.args); (err == nil) != tc.ok {
			t.Errorf("%s %v: %v, want ok %v", tc.verb, tc.args, err, tc.ok)
		}
	}
}
