package main

import "testing"

func TestSatisfies(t *testing.T) {
	for _, tc := range []struct {
		version, rng string
		want         bool
	}{
		{"v22.23.3", ">=22.19.0", true},
		{"v22.23.3", ">=22", true},
		{"v22.23.3", ">= 22.19", true},
		{"v22.19.0", ">=22.19.0", true},
		{"v22.18.9", ">=22.19.0", false},
		{"v20.20.2", ">=22", false},
		{"v22.23.3", ">=24.0.0", false},
		{"v22.23.3", "^22.0.0", false},           // not judged: printed as npm wrote it
		{"v22.23.3", ">=18 <21", false},          // not judged
		{"v22.23.3", "", false},                  // no range read
		{"", ">=22", false},                      // no Node beside
		{"v22.23.3", ">=22.x", false},            // not a number
		{"v22.23.3", ">=22.19.0.1", false},       // four parts
		{"22.23.3", ">=22.19.0", true},           // without the v
		{"v23.0.0", ">=22.19.0", true},           // a later major
		{"v22.100.0", ">=22.19.0", true},         // numbers, not text
		{"v22.23.3", ">=22.23.4", false},         // the patch counts
		{"v22.23.3", ">=-1", false},              // nonsense
		{"v22.23.3", ">=22.19.0 || >=24", false}, // not judged
	} {
		if got := satisfies(tc.version, tc.rng); got != tc.want {
			t.Errorf("satisfies(%q, %q) = %v, want %v", tc.version, tc.rng, got, tc.want)
		}
	}
}
